"""toolhost.mcp:thread_interceptor with the real pieces: `toolhost serve` (HTTP and stdio),
langchain-mcp-adapters' MultiServerMCPClient (a session per call, as DeerFlow uses it) and a
LangGraph ToolNode that gives the tools their run's thread. A file written in one call is there
at the next call of the same DeerFlow thread, in toolhost's thread directory of that name, also
across toolhost processes over stdio; another thread does not see it."""

import asyncio
import os
import subprocess
import threading
from pathlib import Path

import pytest

pytest.importorskip("langchain_mcp_adapters", reason="langchain-mcp-adapters is installed by scripts/test-python.sh")

from langchain_core.messages import AIMessage  # noqa: E402
from langchain_mcp_adapters.client import MultiServerMCPClient  # noqa: E402
from langgraph.graph import END, START, StateGraph  # noqa: E402
from langgraph.prebuilt import ToolNode  # noqa: E402

from conftest import FILE_TOOLS  # noqa: E402
from toolhost.deerflow.state import ThreadState  # noqa: E402
from toolhost.mcp import thread_interceptor  # noqa: E402


def toolhost_bin() -> str:
    b = os.environ.get("TOOLHOST_BIN")
    if not b or not Path(b).is_file():
        pytest.fail(f"TOOLHOST_BIN must name the built toolhost binary (scripts/test-python.sh sets it); got {b!r}")
    return b


@pytest.fixture
def served(tmp_path):
    cfg = tmp_path / "config.yaml"
    cfg.write_text(FILE_TOOLS)
    env = {**os.environ, "TOOLHOST_HOME": str(tmp_path / "data")}
    proc = subprocess.Popen(
        [toolhost_bin(), "serve", "--config", str(cfg), "--http", "127.0.0.1:0"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    url = None
    for line in proc.stderr:
        if line.startswith("toolhost: serving MCP (streamable HTTP) at "):
            url = line.split(" at ", 1)[1].strip()
            break
    assert url, "toolhost serve exited before listening"
    threading.Thread(target=lambda: [None for _ in proc.stderr], daemon=True).start()
    yield url, cfg, env, tmp_path / "data"
    proc.terminate()
    proc.wait(timeout=10)


def run_calls(tools, thread_id: str, calls):
    g = StateGraph(ThreadState)
    g.add_node("tools", ToolNode(tools))
    g.add_edge(START, "tools")
    g.add_edge("tools", END)
    graph = g.compile()

    async def go():
        out = []
        for n, (name, args) in enumerate(calls):
            call = {"name": name, "args": args, "id": f"c{n}", "type": "tool_call"}
            r = await graph.ainvoke({"messages": [AIMessage("", tool_calls=[call])]}, {"configurable": {"thread_id": thread_id}})
            content = r["messages"][-1].content
            out.append(content if isinstance(content, str) else "".join(p.get("text", "") for p in content))
        return out

    return asyncio.run(go())


WRITE = ("write_file", {"description": "d", "path": "/mnt/user-data/outputs/kept.md", "content": "kept\n"})
READ = ("read_file", {"description": "d", "path": "/mnt/user-data/outputs/kept.md"})


def tools_for(connections, interceptors):
    client = MultiServerMCPClient(connections, tool_interceptors=interceptors)
    return asyncio.run(client.get_tools())


def test_http_calls_keep_the_deerflow_threads_files(served):
    url, _cfg, _env, data = served
    connections = {"toolhost": {"transport": "streamable_http", "url": url}}
    # Without the interceptor: a session per call, a thread per session — the file is gone.
    plain = tools_for(connections, [])
    assert run_calls(plain, "df-thread-1", [WRITE, READ]) == ["OK", "Error: File not found: /mnt/user-data/outputs/kept.md"]
    named = tools_for(connections, [thread_interceptor(connections)])
    assert run_calls(named, "df-thread-1", [WRITE, READ]) == ["OK", "kept\n"]
    assert (data / "threads" / "df-thread-1" / "user-data" / "outputs" / "kept.md").read_text() == "kept\n"
    # Another DeerFlow thread does not see it; the first still does.
    assert run_calls(named, "df-thread-2", [READ]) == ["Error: File not found: /mnt/user-data/outputs/kept.md"]
    assert run_calls(named, "df-thread-1", [READ]) == ["kept\n"]


def test_stdio_calls_keep_the_threads_files_across_toolhost_processes(tmp_path):
    cfg = tmp_path / "config.yaml"
    cfg.write_text(FILE_TOOLS)
    connections = {
        "toolhost": {
            "transport": "stdio",
            "command": toolhost_bin(),
            "args": ["serve", "--config", str(cfg)],
            "env": {"TOOLHOST_HOME": str(tmp_path / "data"), "PATH": os.environ.get("PATH", "")},
        }
    }
    plain = tools_for(connections, [])
    assert run_calls(plain, "df-stdio", [WRITE, READ]) == ["OK", "Error: File not found: /mnt/user-data/outputs/kept.md"]
    named = tools_for(connections, [thread_interceptor(connections)])
    # Each call is its own toolhost process (the adapters' session per call).
    assert run_calls(named, "df-stdio", [WRITE, READ]) == ["OK", "kept\n"]
    assert (tmp_path / "data" / "threads" / "df-stdio" / "user-data" / "outputs" / "kept.md").read_text() == "kept\n"
    assert run_calls(named, "df-other", [READ]) == ["Error: File not found: /mnt/user-data/outputs/kept.md"]
