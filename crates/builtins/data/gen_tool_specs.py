# Regenerates tool_specs.json: the model-visible name, description and JSON schema of each
# builtin this crate implements — LangChain's own convert_to_openai_function over DeerFlow's own
# tool objects at bytedance/deer-flow@f1f4af99, imported from its source (write_todos:
# TodoMiddleware's tool in plan mode, as DeerFlow's lead agent builds it). The same objects give
# tests/conformance/tool_schemas.json (scripts/gen-tool-schemas.py), against which every tool is
# tested.
# Run (from the repository root), in the venv of scripts/deerflow-venv.sh with its PYTHONPATH:
#   python crates/builtins/data/gen_tool_specs.py > crates/builtins/data/tool_specs.json
import json

from langchain_core.utils.function_calling import convert_to_openai_function

from deerflow.agents.lead_agent.agent import _create_todo_list_middleware
from deerflow.tools import builtins as b

out = {}
for t in [
    b.present_file_tool,
    b.ask_clarification_tool,
    b.view_image_tool,
    b.list_uploaded_files,
    b.setup_agent,
    b.update_agent,
    _create_todo_list_middleware(True).tools[0],
    b.task_tool,
]:
    f = convert_to_openai_function(t)
    out[f["name"]] = {"description": f["description"], "parameters": f["parameters"]}
print(json.dumps(out, indent=2, ensure_ascii=False))
