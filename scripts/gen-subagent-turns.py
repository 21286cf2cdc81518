#!/usr/bin/env python3
"""Regenerate tests/conformance/subagent_turns.json: how many model calls and tool runs DeerFlow's
subagent makes under `max_turns` (LangGraph's `recursion_limit`, which counts graph nodes — every
middleware hook is one — not model calls), and how the run ends. DeerFlow's own
`SubagentExecutor` runs for real at the pinned commit with a scripted chat model (LangChain's
`GenericFakeChatModel`, in place of `create_chat_model`) and one counting tool.

Run (from the repository root):
    PYENV=$(scripts/deerflow-venv.sh /tmp/df-venv | tail -1)
    env "$PYENV" DEER_FLOW_CONFIG_PATH=$PWD/scripts/gen-subagent-turns.yaml \
        /tmp/df-venv/bin/python scripts/gen-subagent-turns.py > tests/conformance/subagent_turns.json
then update the file's row in tests/conformance/README.md.
"""

import json
import platform
import sys
from importlib.metadata import version

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage
from langchain_core.tools import StructuredTool

import deerflow.subagents.executor as executor
from deerflow.config import get_app_config
from deerflow.subagents.config import SubagentConfig

COMMIT = "f1f4af99bbf1cffb83a80744bf6e4a44ee8f24be"
model_calls: list[int] = []
tool_runs: list[str] = []


class Scripted(GenericFakeChatModel):
    def bind_tools(self, tools, **kwargs):
        return self


def scripted(final_at):
    """Model call i asks for `count(x=i)`, until call `final_at` (if any) answers in text."""

    def make(*args, **kwargs):
        def replies():
            i = 0
            while True:
                i += 1
                model_calls.append(i)
                if final_at is not None and i >= final_at:
                    yield AIMessage(content=f"final {i}")
                else:
                    yield AIMessage(content=f"step {i}", tool_calls=[{"id": f"c{i}", "name": "count", "args": {"x": str(i)}}])

        return Scripted(messages=replies())

    return make


def count(x: str) -> str:
    """Count a call."""
    tool_runs.append(x)
    return f"counted {x}"


def main():
    tool = StructuredTool.from_function(count)
    cases = []
    for final_at in [None, 1, 2]:
        executor.create_chat_model = scripted(final_at)
        for max_turns in range(1, 24):
            model_calls.clear()
            tool_runs.clear()
            config = SubagentConfig(name="general-purpose", description="d", system_prompt="You are a subagent.", max_turns=max_turns, timeout_seconds=60)
            e = executor.SubagentExecutor(config=config, tools=[tool], app_config=get_app_config(), parent_model="m", thread_id="t1")
            r = e.execute("do it")
            cases.append(
                {
                    "final_at": final_at,
                    "max_turns": max_turns,
                    "model_calls": len(model_calls),
                    "tool_runs": len(tool_runs),
                    "status": r.status.value,
                    "result": r.result,
                    "error": r.error,
                    "stop_reason": r.stop_reason,
                }
            )
    doc = {
        "description": "DeerFlow's subagent under max_turns (recursion_limit): model call i asks for the tool "
        "`count` until call `final_at` answers in text (`null`: never). Per case: the model calls made, the tool "
        "runs, and the SubagentResult's status, result, error and stop_reason. The subagent's model has no "
        "vision, loop detection and the token budget are on (DeerFlow's defaults), no tool is deferred.",
        "provenance": {
            "generator": "scripts/gen-subagent-turns.py",
            "config": "scripts/gen-subagent-turns.yaml",
            "deerflow_repo": "bytedance/deer-flow",
            "deerflow_commit": COMMIT,
            "python": platform.python_version(),
            "libraries": {name: version(name) for name in ["langchain-core", "langchain", "langgraph"]},
        },
        "cases": cases,
    }
    json.dump(doc, sys.stdout, indent=1, ensure_ascii=False)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
