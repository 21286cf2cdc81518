"""One DeerFlow thread, played through LangGraph's own tool execution (a ``ToolNode`` in a
``StateGraph`` with a checkpointer): the same script of model turns runs against DeerFlow's own
tools (scripts/gen-door-vectors.py records it into tests/conformance/deerflow_door.json) and
against toolhost.deerflow's (test_door.py compares). Host paths are written as ``{THREAD_DIR}``
so the record does not depend on where it ran.

Used by the generator (with DeerFlow importable) and by the tests (with or without it).
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
from pathlib import Path
from typing import Any, Callable

from langchain_core.messages import AIMessage, ToolMessage

THREAD_ID = "door-thread"
USER_ID = "default"

# A 1x1 PNG: what a user uploaded before the run (view_image reads it).
PNG_1X1 = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
)

# DeerFlow's config form; `{USE}` is `deerflow.` for DeerFlow's own tools and `toolhost.deerflow.`
# for the door — the one-line change per tool that docs/deerflow.md describes.
CONFIG_TEMPLATE = """config_version: 34
models:
  - {name: vision-model, use: "langchain_openai:ChatOpenAI", model: gpt-4o, supports_vision: true}
sandbox:
  use: deerflow.sandbox.local:LocalSandboxProvider
  allow_host_bash: false
tool_groups: [{name: "file:read"}, {name: "file:write"}, {name: bash}]
tools:
  - {name: ls, group: "file:read", use: "{USE}sandbox.tools:ls_tool"}
  - {name: read_file, group: "file:read", use: "{USE}sandbox.tools:read_file_tool"}
  - {name: glob, group: "file:read", use: "{USE}sandbox.tools:glob_tool", max_results: 200}
  - {name: grep, group: "file:read", use: "{USE}sandbox.tools:grep_tool", max_results: 100}
  - {name: write_file, group: "file:write", use: "{USE}sandbox.tools:write_file_tool"}
  - {name: str_replace, group: "file:write", use: "{USE}sandbox.tools:str_replace_tool"}
  - {name: bash, group: bash, use: "{USE}sandbox.tools:bash_tool"}
"""

DEERFLOW_USE = "deerflow."
DOOR_USE = "toolhost.deerflow."

UD = "/mnt/user-data"


def config_yaml(use_prefix: str) -> str:
    return CONFIG_TEMPLATE.replace("{USE}", use_prefix)


def _call(name: str, args: dict, n: int) -> dict:
    return {"name": name, "args": args, "id": f"call_{n}", "type": "tool_call"}


def turns() -> list[list[dict]]:
    """The model's turns: each a list of tool calls (run concurrently by the ToolNode)."""
    script = [
        [
            ("write_file", {"description": "report", "path": f"{UD}/outputs/report.md", "content": "# Report\nTODO: finish\n"}),
            ("write_file", {"description": "notes", "path": f"{UD}/workspace/notes.txt", "content": "alpha\nbeta\n"}),
        ],
        [
            ("read_file", {"description": "check", "path": f"{UD}/outputs/report.md"}),
            ("ls", {"description": "look", "path": f"{UD}/outputs"}),
            # Read before the edit: DeerFlow's lead agent (and toolhost) gate writes on it.
            ("read_file", {"description": "before edit", "path": f"{UD}/workspace/notes.txt"}),
        ],
        [("str_replace", {"description": "edit", "path": f"{UD}/workspace/notes.txt", "old_str": "beta", "new_str": "gamma"})],
        [
            ("grep", {"description": "find", "pattern": "TODO", "path": f"{UD}/outputs"}),
            ("glob", {"description": "list", "pattern": "**/*.txt", "path": f"{UD}/workspace"}),
        ],
        [("read_file", {"description": "after edit", "path": f"{UD}/workspace/notes.txt"})],
        [("present_files", {"filepaths": [f"{UD}/outputs/report.md"]})],
        [("present_files", {"filepaths": [f"{UD}/workspace/notes.txt"]})],
        [("write_file", {"description": "second", "path": f"{UD}/outputs/b.md", "content": "b\n"})],
        [
            ("present_files", {"filepaths": [f"{UD}/outputs/b.md", f"{UD}/outputs/report.md"]}),
            ("present_files", {"filepaths": [f"{UD}/outputs/report.md"]}),
        ],
        [("view_image", {"image_path": f"{UD}/uploads/pic.png"})],
        [("view_image", {"image_path": f"{UD}/uploads/missing.png"})],
        [("read_file", {"description": "missing", "path": f"{UD}/workspace/nope.txt"})],
    ]
    n = 0
    out = []
    for turn in script:
        calls = []
        for name, args in turn:
            n += 1
            calls.append(_call(name, args, n))
        out.append(calls)
    return out


def prepare_home(home: Path) -> Path:
    """DeerFlow's base dir with the thread's directories and the uploaded image; returns the
    thread dir (``{home}/users/default/threads/door-thread``)."""
    thread_dir = home / "users" / USER_ID / "threads" / THREAD_ID
    for d in ("workspace", "uploads", "outputs"):
        (thread_dir / "user-data" / d).mkdir(parents=True, exist_ok=True)
    (thread_dir / "user-data" / "uploads" / "pic.png").write_bytes(PNG_1X1)
    return thread_dir


def thread_data(thread_dir: Path) -> dict:
    """What DeerFlow's ThreadDataMiddleware puts in the state."""
    ud = thread_dir / "user-data"
    return {"workspace_path": str(ud / "workspace"), "uploads_path": str(ud / "uploads"), "outputs_path": str(ud / "outputs")}


def _scrub(value: Any, thread_dir: Path) -> Any:
    text = json.dumps(value, ensure_ascii=False)
    text = text.replace(str(thread_dir), "{THREAD_DIR}")
    return json.loads(text)


def _message(m: Any) -> dict:
    assert isinstance(m, ToolMessage), f"expected a ToolMessage, got {type(m).__name__}"
    return {"content": m.content, "tool_call_id": m.tool_call_id, "name": m.name, "status": m.status}


def _update(u: Any, thread_dir: Path) -> dict:
    out = {}
    for k, v in u.items():
        out[k] = [_message(m) for m in v] if k == "messages" else _scrub(v, thread_dir)
    return out


def files(thread_dir: Path) -> dict:
    """Every file under the thread's user-data: relative path -> sha256."""
    ud = thread_dir / "user-data"
    out = {}
    for root, _dirs, names in os.walk(ud):
        for name in names:
            p = Path(root) / name
            out[str(p.relative_to(ud))] = hashlib.sha256(p.read_bytes()).hexdigest()
    return dict(sorted(out.items()))


STATE_FIELDS = ("artifacts", "viewed_images", "promoted")


def play(tools: list, state_schema: type, thread_dir: Path) -> dict:
    """Run every turn through a ToolNode; record each turn's node updates and the state fields
    after it, then the thread's files."""
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.graph import END, START, StateGraph
    from langgraph.prebuilt import ToolNode

    g = StateGraph(state_schema)
    g.add_node("tools", ToolNode(tools))
    g.add_edge(START, "tools")
    g.add_edge("tools", END)
    graph = g.compile(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": THREAD_ID}}
    record = []
    first = True
    for calls in turns():
        inputs: dict = {"messages": [AIMessage(content="", tool_calls=calls)]}
        if first:
            inputs["thread_data"] = thread_data(thread_dir)
            first = False
        updates = []
        for event in graph.stream(inputs, config, stream_mode="updates"):
            written = event.get("tools") or []
            for u in [written] if isinstance(written, dict) else written:
                updates.append(_update(u, thread_dir))
        values = graph.get_state(config).values
        state = {k: _scrub(values.get(k), thread_dir) for k in STATE_FIELDS}
        record.append({"calls": calls, "updates": updates, "state": state})
    return {"turns": record, "files": files(thread_dir)}


def tool_functions(tools: list, convert: Callable[[Any], dict]) -> list[dict]:
    """What the model sees of each tool, in order (``convert_to_openai_function``)."""
    return [convert(t) for t in tools]
