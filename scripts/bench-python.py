"""What the Python package costs, and what DeerFlow gains through its door (BENCHMARKS.md,
"The Python package").

1. The Python layer's cost: `read_file` of a 1 KB file through `toolhost.Thread.call` against
   the same call made from Rust with `Toolhost::call` (the extension's `_time_rust_calls`), same
   host, same thread, same process.
2. With DeerFlow importable (scripts/deerflow-venv.sh, plus this package installed in that venv):
   one DeerFlow tool call through `toolhost.deerflow` against the same call through DeerFlow's own
   tool, in one run, both invoked as DeerFlow's lead agent invokes them (a LangGraph ToolNode),
   and both as bare tool functions (`tool.func(runtime=...)` / the door's `_run(runtime=...)`).

Usage: python scripts/bench-python.py [--runs N]     (prints one line per figure)
"""

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "python" / "tests"))

import toolhost  # noqa: E402

ONE_KB = ("0123456789abcdef" * 4 + "\n") * 15 + "x" * 48 + "\n"  # 1024 bytes, 16 lines
assert len(ONE_KB.encode()) == 1024


def median_us(fn, runs, warmup=20):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1e6


def python_overhead(runs: int) -> None:
    scratch = Path(tempfile.mkdtemp(prefix="bench-py-"))
    config = "tools:\n  - {name: read_file, group: 'file:read', use: 'deerflow.sandbox.tools:read_file_tool'}\n"
    host = toolhost.Toolhost.from_yaml(config, scratch, data_dir=scratch / "data")
    thread = host.thread("bench")
    ws = Path(thread.user_data_dir) / "workspace"
    ws.mkdir(parents=True, exist_ok=True)
    (ws / "one_kb.txt").write_text(ONE_KB)
    args = {"description": "bench", "path": "/mnt/user-data/workspace/one_kb.txt"}
    assert thread.call("read_file", args).text == ONE_KB
    # Interleaved, one call each way at a time, so that load changes hit both alike.
    for _ in range(20):
        thread.call("read_file", args)
        thread._native._time_rust_calls("read_file", args, 1)
    py_times, rust_times = [], []
    for _ in range(runs):
        t = time.perf_counter()
        thread.call("read_file", args)
        py_times.append(time.perf_counter() - t)
        rust_times.extend(thread._native._time_rust_calls("read_file", args, 1))
    py, rust = statistics.median(py_times) * 1e6, statistics.median(rust_times) * 1e6
    print(f"PYTHON read_file 1KB: Thread::call (Rust) median_us={rust:.1f}  toolhost.Thread.call median_us={py:.1f}  added_us={py - rust:.1f} runs={runs}")

    import asyncio

    async def one():
        return await thread.acall("read_file", args)

    loop = asyncio.new_event_loop()
    aio = median_us(lambda: loop.run_until_complete(one()), runs)
    loop.close()
    print(f"PYTHON read_file 1KB: Thread.acall (asyncio, incl. loop round trip) median_us={aio:.1f} runs={runs}")


def door_against_deerflow(runs: int) -> None:
    try:
        import deerflow  # noqa: F401
    except ImportError:
        print("DOOR skipped: DeerFlow's harness is not importable (run in scripts/deerflow-venv.sh's venv)", file=sys.stderr)
        return
    import door_scenario as sc
    from langchain_core.messages import AIMessage
    from langgraph.graph import END, START, StateGraph
    from langgraph.prebuilt import ToolNode

    from deerflow.agents.thread_state import ThreadState

    results = {}
    for label, prefix in (("deerflow", sc.DEERFLOW_USE), ("door", sc.DOOR_USE)):
        scratch = Path(tempfile.mkdtemp(prefix=f"bench-{label}-"))
        home = scratch / "home"
        (scratch / "config.yaml").write_text(sc.config_yaml(prefix))
        (scratch / "extensions_config.json").write_text(json.dumps({"mcpServers": {}, "skills": {}}))
        os.environ["DEER_FLOW_HOME"] = str(home)
        os.environ["DEER_FLOW_CONFIG_PATH"] = str(scratch / "config.yaml")
        os.environ["DEER_FLOW_EXTENSIONS_CONFIG_PATH"] = str(scratch / "extensions_config.json")
        import toolhost.deerflow as door
        from deerflow.tools.tools import get_available_tools

        door.configure(env={})
        tools = {t.name: t for t in get_available_tools(model_name="vision-model")}
        thread_dir = sc.prepare_home(home)
        (thread_dir / "user-data" / "workspace" / "one_kb.txt").write_text(ONE_KB)
        td = sc.thread_data(thread_dir)
        ops = {
            "read_file 1KB": ("read_file", {"description": "b", "path": "/mnt/user-data/workspace/one_kb.txt"}),
            "write_file small": ("write_file", {"description": "b", "path": "/mnt/user-data/workspace/out.txt", "content": "hello\n"}),
            "ls workspace": ("ls", {"description": "b", "path": "/mnt/user-data/workspace"}),
            "grep": ("grep", {"description": "b", "pattern": "abc", "path": "/mnt/user-data/workspace"}),
        }
        for op, (name, args) in ops.items():
            tool = tools[name]
            g = StateGraph(ThreadState)
            g.add_node("tools", ToolNode([tool]))
            g.add_edge(START, "tools")
            g.add_edge("tools", END)
            graph = g.compile()
            call = {"name": name, "args": args, "id": "c1", "type": "tool_call"}
            state = {"messages": [AIMessage("", tool_calls=[call])], "thread_data": td}
            cfg = {"configurable": {"thread_id": sc.THREAD_ID}}
            text = graph.invoke(state, cfg)["messages"][-1].content
            assert not text.startswith("Error"), (label, op, text)
            node_us = median_us(lambda: graph.invoke(state, cfg), runs)
            runtime = SimpleNamespace(state={"thread_data": td}, context={"thread_id": sc.THREAD_ID}, config={"configurable": {"thread_id": sc.THREAD_ID}})
            if isinstance(tool, door.ToolhostTool):
                bare = lambda: tool._run(runtime=runtime, **args)  # noqa: E731
            else:
                bare = lambda: tool.func(runtime=runtime, **args)  # noqa: E731
            bare_us = median_us(bare, runs)
            results[(label, op)] = (node_us, bare_us)
            print(f"DOOR {label} {op}: ToolNode median_us={node_us:.1f} bare median_us={bare_us:.1f} runs={runs}", flush=True)
    for op in ops:
        (dn, db), (tn, tb) = results[("deerflow", op)], results[("door", op)]
        print(f"DOOR ratio {op}: ToolNode {dn / tn:.2f}x  bare {db / tb:.2f}x (DeerFlow's time / the door's)")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=2000)
    ap.add_argument("--only", choices=["python", "door"], default=None)
    a = ap.parse_args()
    if a.only in (None, "python"):
        python_overhead(a.runs)
    if a.only in (None, "door"):
        door_against_deerflow(max(a.runs // 4, 50))


if __name__ == "__main__":
    main()
