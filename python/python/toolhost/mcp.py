"""For DeerFlow users who reach toolhost over MCP (``toolhost serve``) instead of through
``toolhost.deerflow``: an interceptor for ``langchain-mcp-adapters`` that names the DeerFlow
thread of each call, so a thread's files persist per DeerFlow thread.

Without it, stock DeerFlow opens an MCP session per call, and toolhost gives every session a
thread of its own: a file written by one call is gone at the next. With it:

- over streamable HTTP, each call carries the ``Toolhost-Thread: <DeerFlow thread id>`` header;
- over stdio (headers do not exist there), the call is sent with
  ``_meta["toolhost/thread"] = <DeerFlow thread id>`` on a session the interceptor opens with the
  server's own connection settings, so the thread's files live in toolhost's data dir across
  toolhost processes (until ``toolhost.serve.thread_ttl_s`` of disuse).

In DeerFlow, list it in ``extensions_config.json``::

    {"mcpInterceptors": ["toolhost.mcp:thread_interceptor"], "mcpServers": {...}}

DeerFlow calls the builder with no arguments; the stdio connections are then DeerFlow's own
(``deerflow.mcp.client.build_servers_config`` of the extensions config). Elsewhere, pass them:
``MultiServerMCPClient(connections, tool_interceptors=[thread_interceptor(connections)])``.
"""

from __future__ import annotations

from typing import Any, Awaitable, Callable, Mapping

from ._runtime import thread_id_of

THREAD_HEADER = "Toolhost-Thread"
META_THREAD = "toolhost/thread"
_HTTP_TRANSPORTS = ("sse", "http", "streamable_http", "streamable-http")


def _deerflow_connections() -> Mapping[str, Mapping[str, Any]]:
    try:
        from deerflow.config.extensions_config import ExtensionsConfig
        from deerflow.mcp.client import build_servers_config
    except ImportError:
        return {}
    return build_servers_config(ExtensionsConfig.from_file())


def thread_interceptor(connections: Mapping[str, Mapping[str, Any]] | None = None) -> Callable[..., Awaitable[Any]]:
    """A ``langchain-mcp-adapters`` tool interceptor naming the LangGraph run's thread
    (``runtime.context["thread_id"]``, else ``config["configurable"]["thread_id"]``, as DeerFlow's
    tools read it). ``connections``: the client's server connections (by server name), needed
    for stdio servers; default: DeerFlow's, read when the first stdio call needs them. A call
    outside a thread (no runtime) goes through unchanged."""
    known: dict[str, Mapping[str, Any]] | None = dict(connections) if connections is not None else None

    def connection_of(server: str) -> Mapping[str, Any] | None:
        nonlocal known
        if known is None:
            known = dict(_deerflow_connections())
        return known.get(server)

    async def name_the_thread(request: Any, handler: Callable[[Any], Awaitable[Any]]) -> Any:
        thread = thread_id_of(getattr(request, "runtime", None))
        if thread is None:
            return await handler(request)
        connection = connection_of(request.server_name)
        if connection is None or connection.get("transport", "stdio") in _HTTP_TRANSPORTS:
            return await handler(request.override(headers={**(request.headers or {}), THREAD_HEADER: thread}))
        return await _call_with_meta(connection, request, thread)

    return name_the_thread


async def _call_with_meta(connection: Mapping[str, Any], request: Any, thread: str) -> Any:
    """The adapters' own stdio call (a session per call), with the thread in the request's ``_meta``."""
    from langchain_mcp_adapters.sessions import create_session

    async with create_session(dict(connection)) as session:
        await session.initialize()
        return await session.call_tool(request.name, request.args, meta={META_THREAD: thread})
