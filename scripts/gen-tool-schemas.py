#!/usr/bin/env python3
"""Regenerate tests/conformance/tool_schemas.json: what the model sees of every DeerFlow tool
toolhost re-implements — LangChain's own `convert_to_openai_function` (name, description,
parameters) over DeerFlow's own tool objects at the pinned commit, imported from its source, not
copied. Builtins whose tool DeerFlow builds at run time are built the way DeerFlow builds them
(`write_todos` from `_create_todo_list_middleware(True)`, `tool_search` from
`build_deferred_tool_setup`, `invoke_acp_agent` from `build_invoke_acp_agent_tool`).

Run (from the repository root):
    PYENV=$(scripts/deerflow-venv.sh /tmp/df-venv | tail -1)
    /tmp/df-venv/bin/pip install tavily-python==0.7.23 exa-py==2.12.1 firecrawl-py==4.23.0 \
        readabilipy==0.3.0 markdownify==1.2.2 beautifulsoup4==4.14.3 html5lib==1.1 lxml==6.1.3
    env "$PYENV" /tmp/df-venv/bin/python scripts/gen-tool-schemas.py > tests/conformance/tool_schemas.json
then update the file's row in tests/conformance/README.md.
"""

import importlib
import json
import platform
import sys
from importlib.metadata import version

from langchain_core.tools import StructuredTool
from langchain_core.utils.function_calling import convert_to_openai_function

COMMIT = "f1f4af99bbf1cffb83a80744bf6e4a44ee8f24be"

# Config tools: `use:` paths as a config.yaml names them.
CONFIG_TOOLS = [
    "deerflow.sandbox.tools:bash_tool",
    "deerflow.sandbox.tools:ls_tool",
    "deerflow.sandbox.tools:read_file_tool",
    "deerflow.sandbox.tools:write_file_tool",
    "deerflow.sandbox.tools:str_replace_tool",
    "deerflow.sandbox.tools:glob_tool",
    "deerflow.sandbox.tools:grep_tool",
    "deerflow.community.serper.tools:web_search_tool",
    "deerflow.community.serper.tools:image_search_tool",
    "deerflow.community.brave.tools:web_search_tool",
    "deerflow.community.brave.tools:image_search_tool",
    "deerflow.community.exa.tools:web_search_tool",
    "deerflow.community.exa.tools:web_fetch_tool",
    "deerflow.community.firecrawl.tools:web_search_tool",
    "deerflow.community.firecrawl.tools:web_fetch_tool",
    "deerflow.community.fastcrw.tools:web_search_tool",
    "deerflow.community.fastcrw.tools:web_fetch_tool",
    "deerflow.community.groundroute.tools:web_search_tool",
    "deerflow.community.groundroute.tools:web_fetch_tool",
    "deerflow.community.searxng.tools:web_search_tool",
    "deerflow.community.jina_ai.tools:web_fetch_tool",
    "deerflow.community.tavily.tools:web_search_tool",
    "deerflow.community.tavily.tools:web_fetch_tool",
    "deerflow.community.infoquest.tools:web_search_tool",
    "deerflow.community.infoquest.tools:web_fetch_tool",
    "deerflow.community.infoquest.tools:image_search_tool",
    "deerflow.community.crawl4ai.tools:web_fetch_tool",
    "deerflow.community.browserless.tools:web_fetch_tool",
    "deerflow.community.browserless.tools:web_capture_tool",
    "deerflow.community.ddg_search.tools:web_search_tool",
    "deerflow.community.image_search.tools:image_search_tool",
]

# The `acp_agents:` entry the `invoke_acp_agent` vector is built for.
ACP_AGENTS = {"coder": {"command": "coder-acp", "args": [], "description": "Writes code"}}


def function(tool):
    f = convert_to_openai_function(tool)
    return {"name": f["name"], "description": f["description"], "parameters": f["parameters"]}


def resolve(use):
    module, attr = use.split(":")
    return getattr(importlib.import_module(module), attr)


def builtins():
    from deerflow.agents.lead_agent.agent import _create_todo_list_middleware
    from deerflow.config.acp_config import ACPAgentConfig
    from deerflow.tools import builtins as b
    from deerflow.tools.builtins.invoke_acp_agent_tool import build_invoke_acp_agent_tool
    from deerflow.tools.builtins.tool_search import build_deferred_tool_setup
    from deerflow.tools.skill_manage_tool import skill_manage_tool

    out = {}
    for tool in [
        b.present_file_tool,
        b.ask_clarification_tool,
        b.view_image_tool,
        b.list_uploaded_files,
        b.setup_agent,
        b.update_agent,
        b.task_tool,
        b.review_skill_package,
        b.list_background_tasks,
        b.cancel_background_task,
        skill_manage_tool,
    ]:
        out[tool.name] = function(tool)
    out["write_todos"] = function(_create_todo_list_middleware(True).tools[0])

    # tool_search over one MCP tool (its schema does not depend on the catalog).
    def mcp_tool(query: str) -> str:
        """An MCP tool."""
        return query

    from deerflow.tools.mcp_metadata import tag_mcp_tool

    deferred = tag_mcp_tool(StructuredTool.from_function(mcp_tool, name="mcp_tool"))
    setup = build_deferred_tool_setup([deferred], enabled=True)
    out["tool_search"] = function(setup.tool_search_tool)

    agents = {name: ACPAgentConfig(**cfg) for name, cfg in ACP_AGENTS.items()}
    out["invoke_acp_agent"] = function(build_invoke_acp_agent_tool(agents))
    return out


def main():
    tools = [{"use": use, **function(resolve(use))} for use in CONFIG_TOOLS]
    doc = {
        "description": "What the model sees of each DeerFlow tool: LangChain's convert_to_openai_function "
        "(name, description, parameters) over DeerFlow's own tool objects. `tools`: config tools by their "
        "`use:` path. `builtins`: by name; `write_todos` is TodoMiddleware's tool in plan mode, `tool_search` "
        "the deferred-tool search, `invoke_acp_agent` built for `acp_agents` below.",
        "acp_agents": ACP_AGENTS,
        "provenance": {
            "generator": "scripts/gen-tool-schemas.py",
            "deerflow_repo": "bytedance/deer-flow",
            "deerflow_commit": COMMIT,
            "python": platform.python_version(),
            "libraries": {
                name: version(name)
                for name in ["langchain-core", "langchain", "langgraph", "pydantic", "firecrawl-py", "tavily-python", "exa-py"]
            },
        },
        "tools": tools,
        "builtins": builtins(),
    }
    json.dump(doc, sys.stdout, indent=2, ensure_ascii=False)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
