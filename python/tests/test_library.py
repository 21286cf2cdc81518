"""The library layer: a host on config text, threads, calls, error kinds, typed exceptions,
DeerFlow's assembly arguments, asyncio, and the GIL released while a call runs."""

import asyncio
import json
import threading
import time
from pathlib import Path

import pytest

import toolhost
from conftest import CONFORMANCE, FILE_TOOLS

VISION = """models:
  - {name: plain-model, use: "langchain_openai:ChatOpenAI", model: gpt-4o-mini, supports_vision: false}
  - {name: vision-model, use: "langchain_openai:ChatOpenAI", model: gpt-4o, supports_vision: true}
"""


def open_host(tmp_path: Path, cache_dir: Path, yaml: str = FILE_TOOLS, **kw) -> toolhost.Toolhost:
    return toolhost.Toolhost.from_yaml(yaml, tmp_path, data_dir=tmp_path / "data", cache_dir=cache_dir, **kw)


def test_a_thread_writes_reads_presents_and_keeps_state(tmp_path, cache_dir):
    host = open_host(tmp_path, cache_dir)
    assert host.problems == []
    t = host.thread("lib-1")
    path = "/mnt/user-data/outputs/a.md"
    w = t.call("write_file", {"description": "d", "path": path, "content": "# A\n"})
    assert (w.text, w.is_error, w.error_kind) == ("OK", False, None)
    assert t.call("read_file", {"description": "d", "path": path}).text == "# A\n"
    shown = t.call("present_files", {"filepaths": [path]}, call_id="c3")
    assert shown.text == "Successfully presented files"
    assert shown.update == {"artifacts": [path]}
    assert t.state()["artifacts"] == [path]
    # The thread's files are DeerFlow's layout under the data dir.
    assert Path(t.user_data_dir) == tmp_path / "data" / "threads" / "lib-1" / "user-data"
    assert (Path(t.user_data_dir) / "outputs" / "a.md").read_text() == "# A\n"
    # Another thread sees neither the file nor the state.
    other = host.thread("lib-2")
    assert other.call("read_file", {"description": "d", "path": path}).text == f"Error: File not found: {path}"
    assert other.state()["artifacts"] == []


def test_errors_have_kinds_and_keep_deerflows_text(tmp_path, cache_dir):
    t = open_host(tmp_path, cache_dir).thread("kinds")
    r = t.call("no_such_tool", {})
    assert r.is_error and r.error_kind == "not_found"
    assert "no_such_tool" in r.text
    r = t.call("read_file", {"description": "d"})
    assert r.is_error and r.error_kind is not None, r
    assert "path" in r.text
    # A normal call still works afterwards.
    assert t.call("write_file", {"description": "d", "path": "/mnt/user-data/workspace/x", "content": "x"}).text == "OK"


def test_typed_exceptions_mirror_the_host_errors(tmp_path, cache_dir):
    with pytest.raises(toolhost.ConfigError) as e:
        toolhost.Toolhost.open(tmp_path / "missing.yaml", data_dir=tmp_path / "d", cache_dir=cache_dir)
    assert "missing.yaml" in str(e.value)
    with pytest.raises(toolhost.ConfigError):
        open_host(tmp_path, cache_dir, "tools: [\n")
    host = open_host(tmp_path, cache_dir)
    for bad in ["../escape", "a/b", "", "x" * 129]:
        with pytest.raises(toolhost.ThreadIdError):
            host.thread(bad)
    with pytest.raises(toolhost.AgentError) as e:
        host.thread("t", agent="nobody")
    assert "nobody" in str(e.value)
    for cls in [toolhost.ConfigError, toolhost.ThreadIdError, toolhost.AgentError, toolhost.StateError, toolhost.ThreadFilesError, toolhost.WasmRuntimeError]:
        assert issubclass(cls, toolhost.ToolhostError)
    with pytest.raises(ValueError):
        host.thread("t")._native.call("read_file", "[1]", None)
    # Nothing was created for the refused thread ids.
    assert sorted(p.name for p in (tmp_path / "data" / "threads").iterdir()) == [] if (tmp_path / "data" / "threads").exists() else True


def test_config_env_is_only_what_is_given(tmp_path, cache_dir, monkeypatch):
    skills = tmp_path / "skills"
    (skills / "public" / "demo").mkdir(parents=True)
    (skills / "public" / "demo" / "SKILL.md").write_text("---\nname: demo\ndescription: d\n---\n# Demo\n")
    monkeypatch.setenv("TOOLHOST_PY_SKILLS", str(skills))
    yaml = FILE_TOOLS + "skills:\n  path: $TOOLHOST_PY_SKILLS\n  container_path: /mnt/skills\n"
    # Not given: the process's variable is not read behind the caller's back.
    host = open_host(tmp_path, cache_dir, yaml)
    assert [p.message for p in host.problems] == ["<config>: environment variable $TOOLHOST_PY_SKILLS is not set; using \"\""]
    host = open_host(tmp_path, cache_dir, yaml, env={"TOOLHOST_PY_SKILLS": str(skills)})
    assert host.problems == []
    out = host.thread("env").call("ls", {"description": "d", "path": "/mnt/skills/public"}).text
    assert out.splitlines()[:2] == ["/mnt/skills/public/demo/", "/mnt/skills/public/demo/SKILL.md"], out


def scenario_variants():
    doc = json.loads((CONFORMANCE / "assembly.json").read_text())
    for v in doc["variants"]:
        if v["extensions_config"].get("mcpServers"):
            continue  # MCP layers are covered by tests/assembly_conformance.rs
        yield pytest.param(v, id=v["id"])


@pytest.mark.parametrize("variant", list(scenario_variants()))
def test_available_tools_match_deerflows_get_available_tools(tmp_path, cache_dir, variant):
    """DeerFlow's `get_available_tools(**call)` names, in order, for every assembly variant
    without MCP servers (tests/conformance/assembly.json)."""
    (tmp_path / "extensions_config.json").write_text(json.dumps(variant["extensions_config"]))
    host = open_host(tmp_path, cache_dir, variant["config_yaml"], extensions=tmp_path / "extensions_config.json")
    call = {k: v for k, v in variant["call"].items() if k in ("groups", "include_mcp", "model_name", "subagent_enabled", "include_upload_tool")}
    names = [t.name for t in host.available_tools(**call)]
    # DeerFlow's MCP task-runtime tools, which toolhost may not provide (tests/assembly_conformance.rs).
    expected = [n for n in variant["expected_tool_names"] if n in names or n not in ("list_background_tasks", "cancel_background_task")]
    assert names == expected, (variant["id"], host.problems)


def test_assembly_arguments_change_the_tools(tmp_path, cache_dir):
    host = open_host(tmp_path, cache_dir, VISION + FILE_TOOLS)
    names = lambda **kw: [t.name for t in host.available_tools(**kw)]  # noqa: E731
    assert "view_image" not in names()  # the first model has no vision
    assert "view_image" in names(model_name="vision-model")
    assert "task" in names(subagent_enabled=True) and "task" not in names()
    assert [n for n in names(groups=["file:read"]) if n in ("ls", "write_file")] == ["ls"]
    t = host.thread("v", model_name="vision-model", groups=["file:write"])
    seen = [s.name for s in t.tools()]
    assert "view_image" in seen and "write_file" in seen and "read_file" not in seen
    spec = next(s for s in host.available_tools() if s.name == "read_file")
    assert spec.parameters["required"] == ["description", "path"]


def test_call_turn_merges_in_call_order(tmp_path, cache_dir):
    t = open_host(tmp_path, cache_dir).thread("turn")
    a, b = "/mnt/user-data/outputs/a.md", "/mnt/user-data/outputs/b.md"
    rs = t.call_turn(
        [
            ("write_file", {"description": "d", "path": a, "content": "a"}),
            ("write_file", {"description": "d", "path": b, "content": "b"}, "w2"),
        ]
    )
    assert [r.text for r in rs] == ["OK", "OK"]
    rs = t.call_turn([("present_files", {"filepaths": [b]}, "p1"), ("present_files", {"filepaths": [a, b]}, "p2")])
    assert [r.text for r in rs] == ["Successfully presented files"] * 2
    assert t.state()["artifacts"] == [b, a]


def test_asyncio_calls_run_concurrently_and_match_the_blocking_ones(tmp_path, cache_dir):
    t = open_host(tmp_path, cache_dir).thread("aio")

    async def main():
        writes = [
            t.acall("write_file", {"description": "d", "path": f"/mnt/user-data/workspace/f{i}.txt", "content": str(i)})
            for i in range(8)
        ]
        rs = await asyncio.gather(*writes)
        assert [r.text for r in rs] == ["OK"] * 8
        reads = await asyncio.gather(*[t.acall("read_file", {"description": "d", "path": f"/mnt/user-data/workspace/f{i}.txt"}) for i in range(8)])
        assert [r.text for r in reads] == [str(i) for i in range(8)]
        await t.acall("present_files", {"filepaths": ["/mnt/user-data/workspace/f0.txt"]}, call_id="p")
        return await t.astate()

    state = asyncio.run(main())
    assert state == t.state()
    assert t.call("read_file", {"description": "d", "path": "/mnt/user-data/workspace/f3.txt"}).text == "3"


def test_a_call_releases_the_gil(tmp_path, cache_dir):
    """While a slow call runs on one Python thread, another keeps running Python code."""
    t = open_host(tmp_path, cache_dir).thread("gil")
    ws = Path(t.user_data_dir) / "workspace" / "tree"
    for d in range(40):
        (ws / f"d{d}").mkdir(parents=True)
        for f in range(250):
            (ws / f"d{d}" / f"f{f}.txt").write_text("needle\n" if f % 50 == 0 else "hay\n")
    ticks = 0
    done = threading.Event()

    def count():
        nonlocal ticks
        while not done.is_set():
            ticks += 1

    result = {}

    def slow():
        started = time.perf_counter()
        result["r"] = t.call("grep", {"description": "d", "pattern": "needle", "path": "/mnt/user-data/workspace"})
        result["s"] = time.perf_counter() - started

    counter = threading.Thread(target=count)
    counter.start()
    # The counter's rate with the GIL free (this thread asleep).
    time.sleep(0.05)
    t0, c0 = time.perf_counter(), ticks
    time.sleep(0.2)
    rate = (ticks - c0) / (time.perf_counter() - t0)
    before = ticks
    caller = threading.Thread(target=slow)
    caller.start()
    caller.join()
    during = ticks - before
    done.set()
    counter.join()
    assert result["r"].text.startswith("Found "), result["r"].text[:200]
    # Held through the call, the GIL would let the counter run one switch interval (5 ms) at
    # most: a few per cent of the call. Released, it runs most of the time.
    assert during > 0.3 * rate * result["s"], (during, rate, result["s"])
    assert result["s"] > 0.03, f"the call took {result['s']:.3f} s: too short to tell; make the tree bigger"


def test_cancelling_an_asyncio_call_raises_cancelled_and_the_thread_goes_on(tmp_path, cache_dir):
    t = open_host(tmp_path, cache_dir).thread("cancel")
    ws = Path(t.user_data_dir) / "workspace" / "tree"
    for d in range(20):
        (ws / f"d{d}").mkdir(parents=True)
        for f in range(250):
            (ws / f"d{d}" / f"f{f}.txt").write_text("hay\n")

    async def main():
        task = asyncio.create_task(t.acall("grep", {"description": "d", "pattern": "needle", "path": "/mnt/user-data/workspace"}))
        await asyncio.sleep(0.005)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return await t.acall("write_file", {"description": "d", "path": "/mnt/user-data/outputs/after.md", "content": "after"})

    assert asyncio.run(main()).text == "OK"
    assert t.call("read_file", {"description": "d", "path": "/mnt/user-data/outputs/after.md"}).text == "after"
