"""toolhost from Python: DeerFlow's tool system, sandboxed.

A thin layer over the Rust library (``toolhost::Toolhost``): open a host on a DeerFlow
``config.yaml`` as it is, take a thread, call tools, list what DeerFlow's ``get_available_tools``
assembles, read the thread's state. Calls release the GIL while they run; every blocking method
has an ``a``-prefixed asyncio twin (``acall``, ``astate``, ...).

    host = toolhost.Toolhost.open("config.yaml", data_dir=".toolhost")
    thread = host.thread("t1")
    result = thread.call("write_file", {"description": "d", "path": "/mnt/user-data/outputs/a.md", "content": "# A\\n"})
    print(result.text)          # OK
    print(thread.state()["artifacts"])

``toolhost.deerflow`` is DeerFlow's door (LangChain tools for a DeerFlow ``config.yaml``'s
``use:`` lines); ``toolhost.mcp`` names DeerFlow threads for toolhost's MCP server.
"""

from __future__ import annotations

import asyncio
import atexit
import json
import os
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

from . import _native
from ._native import (
    AgentError,
    ConfigError,
    StateError,
    ThreadFilesError,
    ThreadIdError,
    ToolhostError,
    WasmRuntimeError,
)

__version__ = _native.__version__

# No runtime thread may call into the interpreter while it finalizes: asyncio callbacks stop here.
atexit.register(_native._shutdown)

__all__ = [
    "AgentError",
    "CallResult",
    "ConfigError",
    "Problem",
    "StateError",
    "Thread",
    "ThreadFilesError",
    "ThreadIdError",
    "Toolhost",
    "ToolhostError",
    "ToolSpec",
    "WasmRuntimeError",
]


@dataclass(frozen=True)
class Problem:
    """What opening a host found: ``severity`` is ``"error"`` (a tool refused) or ``"warning"``."""

    severity: str
    message: str


@dataclass(frozen=True)
class ToolSpec:
    """What the model sees of a tool: DeerFlow's name, description and argument schema."""

    name: str
    description: str
    parameters: dict
    group: str | None = None
    source: Any = None

    @classmethod
    def _from(cls, d: dict) -> "ToolSpec":
        return cls(d["name"], d["description"], d["parameters"], d.get("group"), d.get("source"))


class CallResult:
    """One call's result.

    ``text`` is exactly the text DeerFlow's tool gives the model; ``error_kind`` is ``None`` for a
    success, else one of ``invalid_arguments``, ``not_found``, ``refused``, ``timeout``,
    ``cancelled``, ``failed``, ``crashed`` (the text stays DeerFlow's; the kind is for code).
    ``update`` is the state update the call made (``artifacts``, ``viewed_images``,
    ``promoted``, ...; already merged into the thread's state), ``content`` the content parts
    (``{"type": "text", "text": ...}``, ``{"type": "image", "data", "mime_type"}``),
    ``end_run`` is true for ``ask_clarification``, and ``state_errors`` lists the reducer errors
    that kept the update out (as DeerFlow raises them). Those are read from the library's result
    only when asked for.
    """

    __slots__ = ("text", "is_error", "error_kind", "_detail", "_parsed")

    def __init__(self, text: str, is_error: bool, error_kind: str | None, detail: Any):
        self.text = text
        self.is_error = is_error
        self.error_kind = error_kind
        self._detail = detail
        self._parsed: dict | None = None

    @classmethod
    def _from(cls, t: tuple) -> "CallResult":
        return cls(*t)

    @property
    def raw(self) -> dict:
        """The library's ``CallResult`` as JSON (``outcome``, ``state_errors``)."""
        if self._parsed is None:
            self._parsed = json.loads(self._detail.json())
        return self._parsed

    @property
    def update(self) -> dict:
        return self.raw["outcome"].get("update", {})

    @property
    def content(self) -> list:
        return self.raw["outcome"].get("content", [])

    @property
    def end_run(self) -> bool:
        return self.raw["outcome"].get("end_run", False)

    @property
    def additional_kwargs(self) -> dict | None:
        return self.raw["outcome"].get("additional_kwargs")

    @property
    def state_errors(self) -> list:
        return self.raw.get("state_errors", [])

    def __repr__(self) -> str:
        return f"CallResult(text={self.text!r}, is_error={self.is_error}, error_kind={self.error_kind!r})"


def _paths(p: str | os.PathLike | None) -> str | None:
    return None if p is None else os.fspath(p)


class Toolhost:
    """An open host: a loaded config, the wasm runtime with its components, the threads.

    Open with :meth:`open` (a config file) or :meth:`from_yaml` (config text). ``env`` is what
    the config's ``$VAR``s and the tools' ``capabilities.env`` grants see: nothing unless given
    (pass ``os.environ`` to give this process's environment).
    """

    def __init__(self, native: Any):
        self._native = native

    @classmethod
    def open(
        cls,
        config: str | os.PathLike,
        *,
        data_dir: str | os.PathLike | None = None,
        persist_state: bool = False,
        cache_dir: str | os.PathLike | None = None,
        cache_keys_dir: str | os.PathLike | None = None,
        extensions: str | os.PathLike | None = None,
        extra_ca_certs: str | os.PathLike | None = None,
        env: Mapping[str, str] | None = None,
        write_file_max_bytes: str | int | None = None,
    ) -> "Toolhost":
        """Open a host on a DeerFlow ``config.yaml`` (loaded unchanged). Compiling components
        takes seconds on a cold cache; the GIL is released meanwhile."""
        return cls(
            _native.Host.open(
                config_path=os.fspath(config),
                **cls._options(
                    data_dir, persist_state, cache_dir, cache_keys_dir, extensions, extra_ca_certs, env, write_file_max_bytes
                ),
            )
        )

    @classmethod
    def from_yaml(
        cls,
        text: str,
        base_dir: str | os.PathLike = ".",
        *,
        data_dir: str | os.PathLike | None = None,
        persist_state: bool = False,
        cache_dir: str | os.PathLike | None = None,
        cache_keys_dir: str | os.PathLike | None = None,
        extensions: str | os.PathLike | None = None,
        extra_ca_certs: str | os.PathLike | None = None,
        env: Mapping[str, str] | None = None,
        write_file_max_bytes: str | int | None = None,
    ) -> "Toolhost":
        """Open a host on config text; relative paths in it are taken from ``base_dir``."""
        return cls(
            _native.Host.open(
                config_text=text,
                base_dir=os.fspath(base_dir),
                **cls._options(
                    data_dir, persist_state, cache_dir, cache_keys_dir, extensions, extra_ca_certs, env, write_file_max_bytes
                ),
            )
        )

    @classmethod
    async def aopen(cls, config: str | os.PathLike, **kwargs: Any) -> "Toolhost":
        """:meth:`open` without blocking the event loop."""
        return await asyncio.get_running_loop().run_in_executor(None, lambda: cls.open(config, **kwargs))

    @staticmethod
    def _options(data_dir, persist_state, cache_dir, cache_keys_dir, extensions, extra_ca_certs, env, write_file_max_bytes):
        return dict(
            data_dir=_paths(data_dir),
            persist_state=persist_state,
            cache_dir=_paths(cache_dir),
            cache_keys_dir=_paths(cache_keys_dir),
            extensions=_paths(extensions),
            extra_ca_certs=_paths(extra_ca_certs),
            env=None if env is None else {str(k): str(v) for k, v in env.items()},
            write_file_max_bytes=None if write_file_max_bytes is None else str(write_file_max_bytes),
        )

    @property
    def problems(self) -> list[Problem]:
        """What opening found (errors refuse a tool; warnings leave one out or note something)."""
        return [Problem(p["severity"], p["message"]) for p in json.loads(self._native.problems())]

    @property
    def data_dir(self) -> str:
        """Where thread files and state live (``<data_dir>/threads/<id>/user-data``)."""
        return os.fspath(self._native.data_dir())

    def thread(
        self,
        thread_id: str,
        *,
        groups: Sequence[str] | None = None,
        include_mcp: bool = True,
        model_name: str | None = None,
        subagent_enabled: bool = False,
        agent: str | None = None,
        include_upload_tool: bool = True,
    ) -> "Thread":
        """A handle on thread ``thread_id`` whose tools are assembled with DeerFlow's
        ``get_available_tools`` arguments (and custom agent ``agent``'s settings, if named)."""
        groups = None if groups is None else [str(g) for g in groups]
        return Thread(self._native.thread(thread_id, groups, include_mcp, model_name, subagent_enabled, agent, include_upload_tool))

    def available_tools(
        self,
        *,
        groups: Sequence[str] | None = None,
        include_mcp: bool = True,
        model_name: str | None = None,
        subagent_enabled: bool = False,
        agent: str | None = None,
        include_upload_tool: bool = True,
    ) -> list[ToolSpec]:
        """DeerFlow's ``get_available_tools(groups, include_mcp, model_name, subagent_enabled,
        include_upload_tool=...)``: every assembled tool in DeerFlow's order (deferred MCP tools
        included; see :meth:`deferred_tools`)."""
        a = self._assembly(groups, include_mcp, model_name, subagent_enabled, agent, include_upload_tool)
        return [ToolSpec._from(t) for t in a["tools"]]

    def deferred_tools(
        self,
        *,
        groups: Sequence[str] | None = None,
        include_mcp: bool = True,
        model_name: str | None = None,
        subagent_enabled: bool = False,
        agent: str | None = None,
        include_upload_tool: bool = True,
    ) -> list[str]:
        """The MCP tools that ``tool_search`` must promote before the model sees them (sorted)."""
        return self._assembly(groups, include_mcp, model_name, subagent_enabled, agent, include_upload_tool)["deferred"]

    def _assembly(self, groups, include_mcp, model_name, subagent_enabled, agent, include_upload_tool) -> dict:
        groups = None if groups is None else [str(g) for g in groups]
        return json.loads(self._native.available_tools(groups, include_mcp, model_name, subagent_enabled, agent, include_upload_tool))


class Thread:
    """A thread: its files (``user_data_dir``, which is ``/mnt/user-data`` to the tools), its
    state, and the agent settings its tools are assembled for. Every call goes through DeerFlow's
    middleware pipeline; its state update is merged with DeerFlow's reducers."""

    def __init__(self, native: Any):
        self._native = native

    @property
    def id(self) -> str:
        return self._native.id

    @property
    def user_data_dir(self) -> str:
        """The host directory behind ``/mnt/user-data``."""
        return os.fspath(self._native.user_data_dir())

    def tools(self) -> list[ToolSpec]:
        """The tools the model sees now (deferred tools hidden until promoted, skill policy applied)."""
        return [ToolSpec._from(t) for t in json.loads(self._native.tools())]

    def state(self) -> dict:
        """The thread's merged state (``artifacts``, ``viewed_images``, ``promoted``, ``todos``, ...)."""
        return json.loads(self._native.state())

    def call(self, name: str, args: Mapping[str, Any] | None = None, *, call_id: str | None = None) -> CallResult:
        """Run one call (the GIL is released while it runs)."""
        return CallResult._from(self._native.call(name, args if type(args) is dict else dict(args or {}), call_id))

    def call_turn(self, calls: Iterable[tuple]) -> list[CallResult]:
        """Run a model turn's calls concurrently: ``[(name, args), (name, args, call_id), ...]``.
        Results come in call order; updates are merged in call order, as DeerFlow's ToolNode does."""
        norm = []
        for c in calls:
            name, args, *rest = c
            norm.append([name, dict(args or {}), rest[0] if rest else None])
        return [CallResult._from(t) for t in self._native.call_turn(json.dumps(norm))]

    async def acall(self, name: str, args: Mapping[str, Any] | None = None, *, call_id: str | None = None) -> CallResult:
        """:meth:`call` for asyncio: runs on toolhost's runtime; cancelling the awaiting task stops the call."""
        loop = asyncio.get_running_loop()
        fut: asyncio.Future = loop.create_future()
        cancel = self._native.call_async(name, args if type(args) is dict else dict(args or {}), call_id, _settle_on(loop, fut))
        try:
            result = await fut
        except asyncio.CancelledError:
            cancel.cancel()
            raise
        return CallResult._from(result)

    async def astate(self) -> dict:
        """:meth:`state` for asyncio."""
        loop = asyncio.get_running_loop()
        fut: asyncio.Future = loop.create_future()
        self._native.state_async(_settle_on(loop, fut))
        return json.loads(await fut)

    async def atools(self) -> list[ToolSpec]:
        """:meth:`tools` for asyncio."""
        return await asyncio.get_running_loop().run_in_executor(None, self.tools)


def _settle_on(loop: asyncio.AbstractEventLoop, fut: asyncio.Future):
    """A callback for the native side (called on a runtime thread) that settles ``fut`` on its loop."""

    def settle(ok: bool, value: Any) -> None:
        if fut.done():
            return
        if ok:
            fut.set_result(value)
        else:
            fut.set_exception(value)

    def done(ok: bool, value: Any) -> None:
        try:
            loop.call_soon_threadsafe(settle, ok, value)
        except RuntimeError:
            pass  # the loop closed before the call ended: nobody is waiting

    return done
