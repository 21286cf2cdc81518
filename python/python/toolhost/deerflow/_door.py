"""DeerFlow's door into toolhost: LangChain tools that DeerFlow loads with its own ``use:`` lines.

Each tool object is a LangChain ``BaseTool`` with DeerFlow's name, description and argument
schema (toolhost's, which match DeerFlow's ``convert_to_openai_function`` output). A call takes
the thread from the LangGraph runtime exactly as DeerFlow's sandbox tools do
(``runtime.context["thread_id"]``, else ``config["configurable"]["thread_id"]``), runs the tool
in toolhost — the whole pipeline, the wasm sandbox, the config's grants — in DeerFlow's own
thread directory, and answers as DeerFlow's tool does: a string, or ``Command(update=...)`` with
the same fields where DeerFlow's tool returns one.

Where the thread's files are: DeerFlow's ``ThreadDataMiddleware`` puts the thread's host paths in
``runtime.state["thread_data"]`` (``{base_dir}/users/{user_id}/threads/{id}/user-data/...``); the
door opens toolhost's data dir at the directory above ``threads/``, so toolhost's
``<data>/threads/<id>/user-data`` is that very directory. Without that state (a plain LangGraph
graph) it is ``{base_dir}/users/{user_id}``, with DeerFlow's base dir and user id.
"""

from __future__ import annotations

import os
import re
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Mapping

from langchain_core.messages import ToolMessage
from langchain_core.tools import BaseTool, InjectedToolCallId
from langgraph.types import Command
from pydantic import BaseModel, ConfigDict

import toolhost
from toolhost._runtime import thread_id_of as _thread_id_of

DEFAULT_USER_ID = "default"

# DeerFlow's tools that answer with `Command(update=...)` whatever happens (errors included), and
# those whose ToolMessage carries the tool's name (DeerFlow sets `name=` only in tool_search).
COMMAND_TOOLS = frozenset({"present_files", "view_image", "tool_search"})
NAMED_MESSAGE_TOOLS = frozenset({"tool_search"})
# toolhost's own bookkeeping that is no field of DeerFlow's ThreadState.
_TOOLHOST_ONLY_FIELDS = frozenset({"read_marks"})


@dataclass
class DoorSettings:
    """Where the door finds DeerFlow's config and data; see :func:`configure`."""

    config: Path
    base_dir: Path
    extensions: Path | None
    env: Mapping[str, str]
    persist_state: bool = False
    hosts: dict = field(default_factory=dict)


_lock = threading.RLock()
_settings: DoorSettings | None = None
# The door modules' tool caches: a tool object is made once per configuration.
_tool_caches: list[dict] = []


def _deerflow_or_none(module: str):
    try:
        return __import__(module, fromlist=["_"])
    except ImportError:
        return None


def _default_config() -> Path:
    app_config = _deerflow_or_none("deerflow.config.app_config")
    if app_config is not None:
        return Path(app_config.AppConfig.resolve_config_path())
    if env := os.environ.get("DEER_FLOW_CONFIG_PATH"):
        return Path(env)
    return Path("config.yaml")


def _default_base_dir() -> Path:
    paths = _deerflow_or_none("deerflow.config.paths")
    if paths is not None:
        return Path(paths.get_paths().base_dir)
    if env := os.environ.get("DEER_FLOW_HOME"):
        return Path(env).resolve()
    return Path(".deer-flow").resolve()


def _default_extensions(config: Path) -> Path | None:
    ext = _deerflow_or_none("deerflow.config.extensions_config")
    if ext is not None:
        p = ext.ExtensionsConfig.resolve_config_path()
        return None if p is None else Path(p)
    if env := os.environ.get("DEER_FLOW_EXTENSIONS_CONFIG_PATH"):
        return Path(env)
    beside = config.parent / "extensions_config.json"
    return beside if beside.is_file() else None


def configure(
    config: str | os.PathLike | None = None,
    *,
    base_dir: str | os.PathLike | None = None,
    extensions: str | os.PathLike | None = None,
    env: Mapping[str, str] | None = None,
    persist_state: bool = False,
) -> DoorSettings:
    """Say where DeerFlow's config and data are. Not needed inside DeerFlow: by default the door
    asks DeerFlow (``AppConfig.resolve_config_path()``, ``get_paths().base_dir``,
    ``ExtensionsConfig.resolve_config_path()``), and without DeerFlow it reads the same
    environment variables (``DEER_FLOW_CONFIG_PATH``, ``DEER_FLOW_HOME``,
    ``DEER_FLOW_EXTENSIONS_CONFIG_PATH``). ``env`` is what the config's ``$VAR``s see (default:
    this process's environment, as DeerFlow's config loader sees it). toolhost's own per-thread
    state (read marks for read-before-write) is kept in memory unless ``persist_state`` (then in
    each thread directory's ``state.json``, written on every call that changes it). DeerFlow's
    state stays DeerFlow's: the door returns updates, DeerFlow's graph merges them.
    Reconfiguring drops the hosts opened so far."""
    global _settings
    cfg = Path(config) if config is not None else _default_config()
    with _lock:
        for cache in _tool_caches:
            cache.clear()
        _threads.clear()
        _settings = DoorSettings(
            config=cfg.resolve(),
            base_dir=Path(base_dir).resolve() if base_dir is not None else _default_base_dir(),
            extensions=Path(extensions) if extensions is not None else _default_extensions(cfg),
            env=dict(env) if env is not None else dict(os.environ),
            persist_state=persist_state,
        )
        return _settings


def settings() -> DoorSettings:
    with _lock:
        return _settings if _settings is not None else configure()


def host_for(data_dir: Path) -> toolhost.Toolhost:
    """The host whose data dir is ``data_dir`` (one per DeerFlow user directory), opened on first use."""
    s = settings()
    key = str(data_dir)
    with _lock:
        host = s.hosts.get(key)
        if host is None:
            host = toolhost.Toolhost.open(
                s.config,
                data_dir=data_dir,
                persist_state=s.persist_state,
                cache_dir=s.base_dir / "toolhost" / "cache",
                cache_keys_dir=s.base_dir / "toolhost" / "keys",
                extensions=s.extensions,
                env=s.env,
                write_file_max_bytes=s.env.get("DEERFLOW_WRITE_FILE_MAX_BYTES"),
            )
            s.hosts[key] = host
        return host


def default_host() -> toolhost.Toolhost:
    """The host of DeerFlow's default user, which tool objects take their specs from."""
    return host_for(settings().base_dir / "users" / DEFAULT_USER_ID)


# --- the LangGraph runtime, read as DeerFlow reads it ---------------------------------------


class ThreadUnavailable(Exception):
    """DeerFlow's `SandboxRuntimeError` texts for a runtime that names no thread."""


def thread_id_of(runtime: Any) -> str:
    """``runtime.context["thread_id"]``, else ``runtime.config["configurable"]["thread_id"]``
    (DeerFlow's ``ensure_sandbox_initialized``, with its error texts)."""
    if runtime is None:
        raise ThreadUnavailable("Tool runtime not available")
    thread_id = _thread_id_of(runtime)
    if thread_id is None:
        raise ThreadUnavailable("Thread ID not available in runtime context")
    return thread_id


def user_id_of(runtime: Any) -> str:
    """DeerFlow's ``resolve_runtime_user_id`` when DeerFlow is importable, else the run
    context's ``user_id``, else DeerFlow's default user."""
    user_context = _deerflow_or_none("deerflow.runtime.user_context")
    if user_context is not None:
        return user_context.resolve_runtime_user_id(runtime)
    context = getattr(runtime, "context", None)
    if isinstance(context, Mapping) and context.get("user_id"):
        return str(context["user_id"])
    return DEFAULT_USER_ID


# Thread handles by (thread id, DeerFlow's workspace path, model): what `_thread` would open again.
_threads: dict = {}


def _workspace_of(runtime: Any) -> str | None:
    state = getattr(runtime, "state", None)
    thread_data = state.get("thread_data") if isinstance(state, Mapping) else None
    workspace = thread_data.get("workspace_path") if isinstance(thread_data, Mapping) else None
    return workspace if isinstance(workspace, str) else None


def data_dir_of(runtime: Any, thread_id: str) -> Path:
    """The toolhost data dir whose ``threads/<thread_id>/user-data`` is DeerFlow's directory for
    this thread (see the module's docstring)."""
    state = getattr(runtime, "state", None)
    thread_data = state.get("thread_data") if isinstance(state, Mapping) else None
    workspace = thread_data.get("workspace_path") if isinstance(thread_data, Mapping) else None
    if workspace:
        p = Path(workspace)
        if p.name == "workspace" and p.parent.name == "user-data" and p.parent.parent.name == thread_id and p.parent.parent.parent.name == "threads":
            return p.parent.parent.parent.parent
    return settings().base_dir / "users" / user_id_of(runtime)


def model_name_of(runtime: Any) -> str | None:
    for source in (getattr(runtime, "context", None), (getattr(runtime, "config", None) or {}).get("configurable")):
        if isinstance(source, Mapping) and isinstance(source.get("model_name"), str):
            return source["model_name"]
    return None


# --- the tools ------------------------------------------------------------------------------


class _RuntimeArgs(BaseModel):
    """What LangGraph injects (``runtime``); every other argument passes through to toolhost,
    which checks it against the tool's schema and answers with DeerFlow's text."""

    model_config = ConfigDict(extra="allow", arbitrary_types_allowed=True)
    runtime: Any = None


class _RuntimeAndCallIdArgs(_RuntimeArgs):
    tool_call_id: Annotated[str, InjectedToolCallId]


class ToolhostTool(BaseTool):
    """One of DeerFlow's tools, run by toolhost."""

    parameters: dict
    """The model-visible JSON schema (DeerFlow's, as ``convert_to_openai_function`` gives it)."""

    @property
    def tool_call_schema(self) -> dict:  # type: ignore[override]
        return self.parameters

    @property
    def args(self) -> dict:
        return dict(self.parameters.get("properties", {}))

    def _thread(self, runtime: Any) -> toolhost.Thread:
        thread_id = thread_id_of(runtime)
        model = model_name_of(runtime)
        workspace = _workspace_of(runtime)
        key = (thread_id, workspace, model) if workspace else None
        thread = _threads.get(key) if key else None
        if thread is None:
            thread = host_for(data_dir_of(runtime, thread_id)).thread(thread_id, model_name=model)
            if key:
                if len(_threads) > 4096:
                    _threads.clear()
                _threads[key] = thread
        return thread

    def _run(self, runtime: Any = None, tool_call_id: str | None = None, run_manager: Any = None, **kwargs: Any) -> Any:
        try:
            thread = self._thread(runtime)
        except ThreadUnavailable as e:
            return self._answer_text(f"Error: {e}", tool_call_id)
        return self._answer(thread.call(self.name, kwargs, call_id=tool_call_id), tool_call_id)

    async def _arun(self, runtime: Any = None, tool_call_id: str | None = None, run_manager: Any = None, **kwargs: Any) -> Any:
        try:
            thread = self._thread(runtime)
        except ThreadUnavailable as e:
            return self._answer_text(f"Error: {e}", tool_call_id)
        return self._answer(await thread.acall(self.name, kwargs, call_id=tool_call_id), tool_call_id)

    def _answer_text(self, text: str, tool_call_id: str | None) -> Any:
        if self.name in COMMAND_TOOLS and tool_call_id is not None:
            return Command(update={"messages": [self._message(text, tool_call_id)]})
        return text

    def _message(self, text: str, tool_call_id: str) -> ToolMessage:
        if self.name in NAMED_MESSAGE_TOOLS:
            return ToolMessage(content=text, tool_call_id=tool_call_id, name=self.name)
        return ToolMessage(text, tool_call_id=tool_call_id)

    def _answer(self, result: toolhost.CallResult, tool_call_id: str | None) -> Any:
        update = {k: v for k, v in result.update.items() if k not in _TOOLHOST_ONLY_FIELDS}
        if tool_call_id is not None and (update or self.name in COMMAND_TOOLS):
            return Command(update={**update, "messages": [self._message(result.text, tool_call_id)]})
        return result.text


def make_tool(name: str, *, host: toolhost.Toolhost | None = None) -> ToolhostTool:
    """The door tool for toolhost's tool ``name`` as the config assembles it (the config's
    ``tools:`` entry of that name, or a builtin)."""
    host = host or default_host()
    specs = {t.name: t for t in host.available_tools()}
    if name == "view_image" and name not in specs:
        # Assembled only for a vision model; the tool object is the same whichever it is.
        for model in _vision_models(settings().config):
            specs.update({t.name: t for t in host.available_tools(model_name=model)})
    spec = specs.get(name)
    if spec is None:
        raise LookupError(
            f"toolhost.deerflow: the config {settings().config} assembles no tool named '{name}' "
            f"(it has: {', '.join(specs) or 'none'}); add a tools: entry named '{name}' or check the problems toolhost reports"
        )
    schema_cls = _RuntimeAndCallIdArgs if name in COMMAND_TOOLS else _RuntimeArgs
    return ToolhostTool(name=spec.name, description=spec.description, parameters=spec.parameters, args_schema=schema_cls)


def _vision_models(config: Path) -> list[str]:
    import yaml

    try:
        models = (yaml.safe_load(config.read_text()) or {}).get("models") or []
    except (OSError, yaml.YAMLError):
        return []
    return [m["name"] for m in models if isinstance(m, dict) and m.get("supports_vision") and isinstance(m.get("name"), str)]


# A module attribute `<x>_tool` of the door names DeerFlow's tool: these are the ones whose
# DeerFlow variable name is not `<tool name>_tool`.
_VARIABLE_TO_NAME = {"present_file_tool": "present_files"}
_TOOL_VARIABLE = re.compile(r"^[a-z][a-z0-9_]*_tool$")


def tool_name_for(variable: str) -> str | None:
    """DeerFlow's tool name for a ``use:`` variable (``read_file_tool`` -> ``read_file``)."""
    if variable in _VARIABLE_TO_NAME:
        return _VARIABLE_TO_NAME[variable]
    if _TOOL_VARIABLE.match(variable):
        return variable[: -len("_tool")]
    return None


def module_tools(variable: str, cache: dict) -> ToolhostTool:
    """A door module's ``__getattr__``: the tool for ``variable``, made once per module."""
    name = tool_name_for(variable)
    if name is None:
        raise AttributeError(variable)
    with _lock:
        if not any(c is cache for c in _tool_caches):
            _tool_caches.append(cache)
        if variable not in cache:
            cache[variable] = make_tool(name)
        return cache[variable]
