"""DeerFlow's door into toolhost: put ``toolhost.`` in front of a tool's ``use:`` line in
DeerFlow's ``config.yaml`` and DeerFlow loads the tool from toolhost, which runs it sandboxed
with the grants the config gives it, in DeerFlow's own thread directory::

    - name: read_file
      group: file:read
      use: toolhost.deerflow.sandbox.tools:read_file_tool   # was deerflow.sandbox.tools:read_file_tool

The sandbox tools and ``bash`` also have short names here (``toolhost.deerflow:read_file_tool``);
community tools keep DeerFlow's module path (``toolhost.deerflow.community.tavily.tools:web_search_tool``).
``present_file_tool``, ``view_image_tool`` and ``ask_clarification_tool`` are toolhost's
builtins as LangChain tools (for a LangGraph graph of your own; in DeerFlow its builtins already
work on the same files). docs/deerflow.md has the whole story.
"""

from ._door import (
    COMMAND_TOOLS,
    DoorSettings,
    ToolhostTool,
    configure,
    data_dir_of,
    default_host,
    host_for,
    make_tool,
    module_tools,
    settings,
    thread_id_of,
    tool_name_for,
)

__all__ = [
    "COMMAND_TOOLS",
    "DoorSettings",
    "ToolhostTool",
    "configure",
    "data_dir_of",
    "default_host",
    "host_for",
    "make_tool",
    "settings",
    "thread_id_of",
    "tool_name_for",
]

_tools: dict = {}


def __getattr__(variable: str):
    # `toolhost.deerflow:read_file_tool`: made on first use, from the config's assembly.
    return module_tools(variable, _tools)
