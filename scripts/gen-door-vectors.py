"""Generate tests/conformance/deerflow_door.json by running DeerFlow itself: its own
`get_available_tools` on the door scenario's config (python/tests/door_scenario.py, with
DeerFlow's `use:` paths), what the model sees of each tool (`convert_to_openai_function`), and
the scenario's turns through a LangGraph ToolNode over DeerFlow's own `ThreadState` — each
turn's node updates (the `Command` updates, split as LangGraph applies them), the reducer
results after it, and the files left in DeerFlow's thread directory.

Usage (DeerFlow's harness importable, e.g. from scripts/deerflow-venv.sh):
    eval "$(bash scripts/deerflow-venv.sh /path/venv | tail -1)"; export PYTHONPATH
    /path/venv/bin/python scripts/gen-door-vectors.py > tests/conformance/deerflow_door.json
Then update the file's row in tests/conformance/README.md (its sha256).
"""

import importlib.metadata
import json
import os
import platform
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "python" / "tests"))

import door_scenario as sc  # noqa: E402

DEERFLOW_COMMIT = "f1f4af99bbf1cffb83a80744bf6e4a44ee8f24be"
MODEL = "vision-model"


def main() -> None:
    scratch = Path(tempfile.mkdtemp(prefix="door-vectors-"))
    home = scratch / "home"
    config = scratch / "config.yaml"
    config.write_text(sc.config_yaml(sc.DEERFLOW_USE))
    extensions = scratch / "extensions_config.json"
    extensions.write_text(json.dumps({"mcpServers": {}, "skills": {}}))
    os.environ["DEER_FLOW_HOME"] = str(home)
    os.environ["DEER_FLOW_CONFIG_PATH"] = str(config)
    os.environ["DEER_FLOW_EXTENSIONS_CONFIG_PATH"] = str(extensions)

    from deerflow.agents.thread_state import ThreadState
    from deerflow.tools.tools import get_available_tools
    from langchain_core.utils.function_calling import convert_to_openai_function

    tools = get_available_tools(model_name=MODEL)
    thread_dir = sc.prepare_home(home)
    played = sc.play(tools, ThreadState, thread_dir)
    versions = {p: importlib.metadata.version(p) for p in ("langchain-core", "langchain", "langgraph", "langgraph-prebuilt", "pydantic")}
    doc = {
        "description": (
            "DeerFlow's own tools on python/tests/door_scenario.py: 'assembly' is get_available_tools(model_name="
            f"'{MODEL}') on the scenario config with DeerFlow's use: paths (names in order, and convert_to_openai_function "
            "of each tool); 'play' runs the scenario's turns through a LangGraph ToolNode in a StateGraph over DeerFlow's "
            "ThreadState with an InMemorySaver: per turn the calls, the node's updates as LangGraph streams them "
            "(stream_mode='updates'; ToolMessages as content/tool_call_id/name/status) and artifacts/viewed_images/promoted "
            "after the turn; then every file under the thread's user-data (path -> sha256). {THREAD_DIR} stands for "
            "{DEER_FLOW_HOME}/users/default/threads/door-thread."
        ),
        "provenance": {
            "generator": "scripts/gen-door-vectors.py",
            "deerflow_commit": DEERFLOW_COMMIT,
            "python": platform.python_version(),
            "versions": versions,
        },
        "assembly": {
            "call": {"model_name": MODEL},
            "names": [t.name for t in tools],
            "functions": [convert_to_openai_function(t) for t in tools],
        },
        "play": played,
    }
    json.dump(doc, sys.stdout, indent=1, ensure_ascii=False)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
