"""The Python SDK for toolhost tools: write a tool as a typed function, build it with
`toolhost build` (componentize-py), and the host runs it in a fresh wasm instance per call.

    from typing import Annotated
    from toolhost_sdk import tool, Context

    @tool
    def hello(ctx: Context, name: Annotated[str, "Who to greet."], excited: bool = False) -> str:
        "Greet someone by name."
        return f"Hello, {name}{'!' if excited else '.'}"

    from toolhost_sdk import Tool  # the component's export; keep this line last

- The JSON Schema the model sees comes from the parameters' types (`str`, `int`, `float`,
  `bool`, `list[T]`, `dict[str, T]`, `Optional[T]`, `Literal[...]`, a dataclass, and
  `Annotated[T, "description"]`); a parameter without a default is required. A tool may also
  take one dataclass argument after `ctx`: its fields are the arguments.
- The description is the function's docstring (or `@tool(description=...)`).
- `ctx.config` is the tool's config keys (a dict), `ctx.sandbox` the sandbox settings (typed).
- Return a `str` (one text block) or an `Output` (blocks, `is_error`, `artifacts`, `todos`).
- Raise any exception to fail the call: the host reports `SomeError: detail` as DeerFlow's error
  middleware prints a raised exception (the class name must end in `Error` or `Exception`;
  others are reported as `RuntimeError`).
- Files: `open()` on the paths the tool's `capabilities.filesystem` grant opens
  (`/mnt/user-data/...`). A path the grant does not open, or a write where it is read-only, is
  a `NotGrantedError` (a `PermissionError`) naming the grant and what would allow it; a missing
  file stays `FileNotFoundError`. The SDK's `open` raises it directly (`from toolhost_sdk import
  open`); with the builtin `open`, an uncaught error is reported as `NotGrantedError` all the same.
- Network: `fetch(url, method=..., headers=..., body=...)` sends a request through wasi:http and
  returns a `Response` (`status`, `headers`, `body`, `.text()`, `.json()`). The host sends it only
  to a host the tool's `capabilities.network` grant lists (HTTPS, or HTTP to an `http://` entry)
  and never to a private address unless the grant says `allow_private_addresses: true`; a refused
  or failed request raises `HttpError` naming the URL and what went wrong (the host adds which
  rule refused it). Python's own `urllib`/`socket` have no network inside the sandbox.
"""

from __future__ import annotations

import dataclasses
import errno
import inspect
import json
import os
import posixpath
import sys
import typing
import urllib.parse  # at the top: componentize-py keeps only modules imported at build time
from typing import Any, Callable, Optional

from wit_world import exports as _exports
from wit_world.imports import host as _host
from componentize_py_types import Err as _Err

try:  # the SDK world (`tool-component-py`): two interfaces are called `types`
    from wit_world.imports import toolhost_tool_types as _t
except ImportError:  # a project built against the contract's own world (`tool-component`)
    from wit_world.imports import types as _t
try:
    from wit_world.imports import outgoing_handler as _oh
    from wit_world.imports import streams as _streams
    from wit_world.imports import wasi_http_types as _ht
except ImportError:  # no wasi:http in the world: `fetch` says so
    _oh = None
try:
    from wit_world.imports import preopens as _preopens
    from wit_world.imports import wasi_filesystem_types as _fs
except ImportError:  # a project whose world has no wasi:filesystem/preopens: no grant to name
    _preopens = None
try:
    from wit_world.imports import client as _client
except ImportError:  # a project built against toolhost:tool@0.2.0: no `client` interface
    _client = None

__all__ = [
    "tool", "Context", "Output", "Tool", "progress", "log", "schema_of", "fetch", "Response", "HttpError",
    "elicit", "create_message", "ClientError", "NotGrantedError", "open", "check_file_access",
]


class Context:
    """What the host tells a tool about the call."""

    def __init__(self, thread_id: str, tool_call_id: str, config: dict, sandbox: Any):
        self.thread_id = thread_id
        self.tool_call_id = tool_call_id
        #: This tool's config keys from config.yaml (`$VAR`s expanded).
        self.config = config
        #: The sandbox settings: `read_file_output_max_chars`, `ls_output_max_chars`, `mounts`
        #: (each with `container_path`, `read_only`), `skills_container_path`,
        #: `write_file_max_bytes`, `disabled_skills`.
        self.sandbox = sandbox


@dataclasses.dataclass
class Output:
    """A tool's answer: text (and image/audio/link) blocks, an error flag, state writes."""

    content: list = dataclasses.field(default_factory=list)
    is_error: bool = False
    #: Virtual paths to add to the thread's `artifacts`.
    artifacts: Optional[list] = None
    #: The new todo list (a list of dicts), replacing the old one.
    todos: Optional[list] = None

    @staticmethod
    def text(text: str) -> "Output":
        return Output(content=[_t.ContentBlock_Text(text)])

    @staticmethod
    def error(text: str) -> "Output":
        """A failed call the model reads (DeerFlow's strings start `Error:`)."""
        return Output(content=[_t.ContentBlock_Text(text)], is_error=True)

    def with_image(self, data: bytes, mime_type: str) -> "Output":
        self.content.append(_t.ContentBlock_Image(_t.Media(data, mime_type)))
        return self

    def with_link(self, uri: str, name: str, mime_type: Optional[str] = None, description: Optional[str] = None) -> "Output":
        self.content.append(_t.ContentBlock_ResourceLink(_t.ResourceLink(uri, name, mime_type, description)))
        return self

    def with_resource(self, uri: str, text: Optional[str] = None, data: Optional[bytes] = None,
                      mime_type: Optional[str] = None) -> "Output":
        """An embedded resource: `text`, or `data` (bytes), under `uri` (any absolute URI but
        `file:`, `toolhost:` and script schemes)."""
        if (text is None) == (data is None):
            raise ValueError("with_resource takes text or data, not both or neither")
        contents = _t.ResourceContents_Text(text) if text is not None else _t.ResourceContents_Blob(bytes(data))
        self.content.append(_t.ContentBlock_EmbeddedResource(_t.EmbeddedResource(uri, mime_type, contents)))
        return self

    def with_artifacts(self, *paths: str) -> "Output":
        self.artifacts = list(paths)
        return self

    def with_todos(self, todos: list) -> "Output":
        self.todos = todos
        return self


def progress(done: float, total: Optional[float] = None, message: Optional[str] = None) -> None:
    """Report how far the call has come (it must grow from one report to the next)."""
    _host.progress(float(done), None if total is None else float(total), message)


def log(message: str, level: str = "info") -> None:
    """A line in the host's log, with the tool's name."""
    _host.log(getattr(_host.Level, level.upper(), _host.Level.INFO), message)


# ---- asking the MCP client: elicitation and sampling ----


class ClientError(Exception):
    """A request to the MCP client that could not be made or was refused: not granted
    (`capabilities.client`), no client or one without the capability, over the per-call count,
    or the client's own error."""


def elicit(message: str, schema: dict) -> dict:
    """Ask the MCP client's user (form elicitation): returns `{"action": "accept" | "decline" |
    "cancel", "content": dict | None}`. Needs `capabilities.client: [elicitation]`."""
    if _client is None:
        raise ClientError("this tool was built against toolhost:tool@0.2.0, which cannot ask the client")
    try:
        a = _client.elicit(message, json.dumps(schema))
    except _Err as e:
        raise ClientError(e.value) from None
    action = {_client.ElicitAction.ACCEPT: "accept", _client.ElicitAction.DECLINE: "decline"}.get(a.action, "cancel")
    return {"action": action, "content": None if a.content is None else json.loads(a.content)}


def create_message(messages, max_tokens: int = 256, system_prompt: Optional[str] = None) -> str:
    """Ask the MCP client's model (sampling); `messages` is a prompt string or a list of
    `(role, text)` with role "user" or "assistant". Returns the answer's text. Needs
    `capabilities.client: [sampling]`."""
    if _client is None:
        raise ClientError("this tool was built against toolhost:tool@0.2.0, which cannot ask the client")
    if isinstance(messages, str):
        messages = [("user", messages)]
    roles = {"user": _client.Role.USER, "assistant": _client.Role.ASSISTANT}
    msgs = [_client.SamplingMessage(roles[r], t) for r, t in messages]
    try:
        return _client.create_message(_client.SamplingRequest(msgs, system_prompt, max_tokens, None)).text
    except _Err as e:
        raise ClientError(e.value) from None


# ---- outbound HTTP through wasi:http ----


class HttpError(Exception):
    """A request that could not be sent or answered (refused by the grant, DNS, TLS, timeout, a
    body over `max_bytes`). Uncaught, the call fails with `HttpError: <what went wrong>`."""


@dataclasses.dataclass
class Response:
    """An HTTP response, its body read in full."""

    url: str
    status: int
    #: `(name, value)` pairs in the order received; names lower-case.
    headers: list
    body: bytes

    def header(self, name: str) -> Optional[str]:
        """The first value of header `name` (any case), or None."""
        name = name.lower()
        return next((v for k, v in self.headers if k == name), None)

    def text(self) -> str:
        return self.body.decode("utf-8", errors="replace")

    def json(self) -> Any:
        return json.loads(self.body)

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300


_METHODS = {"GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH"}


def _error_text(code: Any) -> str:
    """`ErrorCode_DnsError(DnsErrorPayload(rcode='...'))` → `dns error (rcode='...')`."""
    name = type(code).__name__.split("_", 1)[-1]
    words = "".join(" " + c.lower() if c.isupper() else c for c in name).strip()
    value = getattr(code, "value", None)
    return f"{words} ({value!r})" if value is not None else words


def fetch(
    url: str,
    method: str = "GET",
    headers: Optional[Any] = None,
    body: Optional[Any] = None,
    timeout: Optional[float] = None,
    max_bytes: int = 16 * 1024 * 1024,
) -> Response:
    """Send one request and read its response. `headers`: a dict or `(name, value)` pairs;
    `body`: bytes, str (UTF-8) or any other value sent as JSON (with `content-type:
    application/json` unless given); `timeout` in seconds (the call's own `timeout_s` bounds it
    anyway); a response body over `max_bytes` raises `HttpError`."""
    if _oh is None:
        raise HttpError("this component was built without wasi:http; build it with `toolhost build` from a project "
                        "whose wit/world.wit has the `tool-component-py` world")
    where = f"{method} {url}"
    parts = urllib.parse.urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https"):
        raise HttpError(f"{where}: only http:// and https:// URLs can be fetched")
    if not parts.hostname:
        raise HttpError(f"{where}: the URL has no host")
    if parts.username is not None or parts.password is not None:
        raise HttpError(f"{where}: user info in a URL is not sent; use an Authorization header")
    pairs = list(headers.items()) if isinstance(headers, dict) else list(headers or [])
    if body is not None and not isinstance(body, (bytes, bytearray, str)):
        body = json.dumps(body, ensure_ascii=False)
        if not any(k.lower() == "content-type" for k, _ in pairs):
            pairs.append(("content-type", "application/json"))
    data = body.encode("utf-8") if isinstance(body, str) else (bytes(body) if body is not None else None)
    try:
        fields = _ht.Fields.from_list([(str(k), str(v).encode("latin-1")) for k, v in pairs])
    except _Err as e:
        raise HttpError(f"{where}: a header was refused ({_error_text(e.value)})") from None
    except UnicodeEncodeError:
        raise HttpError(f"{where}: a header value is not Latin-1 text") from None

    request = _ht.OutgoingRequest(fields)
    m = method.upper()
    request.set_method(getattr(_ht, f"Method_{m.capitalize()}")() if m in _METHODS else _ht.Method_Other(method))
    request.set_scheme(_ht.Scheme_Https() if scheme == "https" else _ht.Scheme_Http())
    host = parts.hostname if ":" not in parts.hostname else f"[{parts.hostname}]"
    request.set_authority(host + (f":{parts.port}" if parts.port is not None else ""))
    request.set_path_with_query((parts.path or "/") + (f"?{parts.query}" if parts.query else ""))
    options = None
    if timeout is not None:
        ns = max(1, int(timeout * 1e9))
        options = _ht.RequestOptions()
        for set_ in (options.set_connect_timeout, options.set_first_byte_timeout, options.set_between_bytes_timeout):
            set_(ns)
    out_body = request.body() if data is not None else None
    try:
        future = _oh.handle(request, options)
    except _Err as e:
        raise HttpError(f"{where}: {_error_text(e.value)}") from None
    with future:
        if out_body is not None:
            try:
                with out_body.write() as stream:
                    for i in range(0, len(data), 4096):
                        stream.blocking_write_and_flush(data[i : i + 4096])
                _ht.OutgoingBody.finish(out_body, None)
            except _Err as e:
                raise HttpError(f"{where}: sending the body failed ({_error_text(e.value)})") from None
        with future.subscribe() as ready:
            ready.block()
        got = future.get()
    if got is None or isinstance(got, _Err) or isinstance(got.value, _Err):
        code = None if got is None or isinstance(got, _Err) else got.value.value
        raise HttpError(f"{where}: {'no response' if code is None else _error_text(code)}")
    with got.value.value as response:
        status = response.status()
        with response.headers() as h:
            received = [(k.lower(), v.decode("latin-1")) for k, v in h.entries()]
        chunks = []
        size = 0
        with response.consume() as incoming:
            with incoming.stream() as stream:
                while True:
                    try:
                        chunk = stream.blocking_read(65536)
                    except _Err as e:
                        if isinstance(e.value, _streams.StreamError_Closed):
                            break
                        raise HttpError(f"{where}: reading the body failed") from None
                    size += len(chunk)
                    if size > max_bytes:
                        raise HttpError(f"{where}: the response body is over {max_bytes} bytes (max_bytes)")
                    chunks.append(chunk)
    return Response(url=url, status=status, headers=received, body=b"".join(chunks))


# ---- files: a denial is not a missing file ----


class NotGrantedError(PermissionError):
    """A path this tool's `capabilities.filesystem` grant does not open, or a write where it opens
    read-only: the grant is missing, not the file. The message names the grant; `filename` is the
    path."""

    def __init__(self, message: str, filename: Optional[str] = None):
        super().__init__(errno.EACCES, message)
        self.filename = filename
        self.message = message

    def __str__(self) -> str:
        return self.message


# Where the grants open directories (the host's `filesystem` capability).
_USER_DATA = "/mnt/user-data"
_ROOTS_HINT = "a tool sees files only under /mnt/user-data, /mnt/skills, /mnt/acp-workspace and the sandbox's mounts"
_VIEW = None


def _under(p: str, root: str) -> bool:
    return p == root or p.startswith(root.rstrip("/") + "/")


def _grant_view() -> tuple:
    """The directories the host opened for this call as `[(where, writable)]`, and the grant they
    show: `none`, `outputs` (the outputs directory only), `read-only`, `user-data`. Asked once per
    instance (a call runs in a fresh one)."""
    global _VIEW
    if _VIEW is None:
        dirs = []
        for d, where in _preopens.get_directories() if _preopens is not None else []:
            with d:
                dirs.append((where, bool(d.get_flags() & _fs.DescriptorFlags.MUTATE_DIRECTORY)))
        ws = [w for where, w in dirs if where == f"{_USER_DATA}/workspace"]
        outputs = any(where == f"{_USER_DATA}/outputs" for where, _ in dirs)
        level = ("user-data" if ws[0] else "read-only") if ws else ("outputs" if outputs else "none")
        _VIEW = (dirs, level)
    return _VIEW


def _denied(path: str, write: bool) -> Optional[str]:
    """Why the grant refuses `path` (for writing when `write`), or None when it opens it."""
    if _preopens is None or not path.startswith("/"):
        return None
    p = posixpath.normpath(path)
    if p.startswith("//"):
        p = p[1:]
    dirs, level = _grant_view()
    best = None
    for where, writable in dirs:
        if _under(p, where) and (best is None or len(where) > len(best[0])):
            best = (where, writable)
    if best is None:
        if level == "none":
            what = "this tool's capabilities.filesystem is `none` (no files)"
        else:
            opened = ", ".join(where for where, _ in dirs)
            what = f"it is outside the directories this tool's capabilities.filesystem (`{level}`) opens: {opened}"
        hint = f"; {_ROOTS_HINT}"
        if _under(p, _USER_DATA):
            if level == "none" and _under(p, f"{_USER_DATA}/outputs"):
                hint = "; `outputs`, `read-only` or `user-data` would open it"
            else:
                hint = "; `read-only` (reading) or `user-data` (reading and writing) would open it"
        return f"{path} is not granted: {what}{hint}"
    if write and not best[1]:
        if level == "read-only" and _under(best[0], _USER_DATA):
            why = "its capabilities.filesystem is `read-only`; `user-data` would allow writing"
        else:
            why = f"{best[0]} is always read-only"
        return f"{path} is read-only for this tool: {why}"
    return None


def check_file_access(path: str, write: bool = False) -> None:
    """Raise `NotGrantedError` when this tool's filesystem grant does not open `path` (for
    writing, when `write`); return when it does (the file itself may still be missing)."""
    why = _denied(str(path), write)
    if why is not None:
        raise NotGrantedError(why, str(path))


_builtin_open = open


def open(file, mode="r", *args, **kwargs):  # noqa: A001 - the point is to stand in for it
    """The builtin `open`, except that a path this tool's grant does not open (or a write where
    it is read-only) raises `NotGrantedError` instead of `FileNotFoundError`/`PermissionError`."""
    if isinstance(file, (str, bytes)) or hasattr(file, "__fspath__"):
        path = os.fsdecode(os.fspath(file))
        check_file_access(path, write=any(c in mode for c in "wax+"))
    return _builtin_open(file, mode, *args, **kwargs)


def _as_denial(e: BaseException) -> Optional[NotGrantedError]:
    """An uncaught `OSError` on a path the grant does not open, as the `NotGrantedError` it is."""
    if isinstance(e, NotGrantedError) or not isinstance(e, OSError) or not isinstance(e.filename, str):
        return None
    # What the host answers for a write to a read-only directory, or a link leading out of one.
    not_permitted = e.errno in (errno.EPERM, getattr(errno, "ENOTCAPABLE", -1))
    refused = not_permitted or e.errno in (errno.EACCES, errno.EROFS)
    why = _denied(e.filename, write=False) or (_denied(e.filename, write=True) if refused else None)
    if why is None and not_permitted and _preopens is not None:
        why = f"{e.filename} is not granted: it leads outside the directories this tool's capabilities.filesystem opens (`..` or a link)"
    if why is None:
        return None
    return NotGrantedError(why, e.filename)


# ---- argument schemas from Python types ----

_NoneType = type(None)


def _schema(tp: Any) -> dict:
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin is typing.Annotated:
        s = dict(_schema(args[0]))
        for meta in args[1:]:
            if isinstance(meta, str):
                s["description"] = meta
        return s
    if tp is str:
        return {"type": "string"}
    if tp is bool:
        return {"type": "boolean"}
    if tp is int:
        return {"type": "integer"}
    if tp is float:
        return {"type": "number"}
    if tp is Any:
        return {}
    if tp in (list, tuple) or origin in (list, tuple, typing.Sequence):
        return {"type": "array", "items": _schema(args[0])} if args else {"type": "array"}
    if tp is dict or origin is dict:
        s: dict = {"type": "object"}
        if len(args) == 2:
            s["additionalProperties"] = _schema(args[1])
        return s
    if origin is typing.Literal:
        return {"enum": list(args)}
    if origin is typing.Union or (sys.version_info >= (3, 10) and origin is __import__("types").UnionType):
        rest = [a for a in args if a is not _NoneType]
        if len(rest) == 1:
            return _schema(rest[0])
        return {"anyOf": [_schema(a) for a in rest]}
    if dataclasses.is_dataclass(tp):
        return _object_schema(_dataclass_params(tp))
    raise TypeError(f"toolhost_sdk: no JSON Schema for the type {tp!r}")


def _object_schema(params: list) -> dict:
    props = {}
    required = []
    for name, tp, has_default in params:
        props[name] = _schema(tp)
        if not has_default:
            required.append(name)
    s: dict = {"type": "object", "properties": props}
    if required:
        s["required"] = required
    return s


def _dataclass_params(cls: Any) -> list:
    hints = typing.get_type_hints(cls, include_extras=True)
    out = []
    for f in dataclasses.fields(cls):
        has_default = f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING
        out.append((f.name, hints[f.name], has_default))
    return out


def _convert(value: Any, tp: Any, where: str) -> Any:
    """`value` (parsed JSON) checked against `tp`; a dataclass is built from its object."""
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin is typing.Annotated:
        return _convert(value, args[0], where)
    if origin is typing.Union or (sys.version_info >= (3, 10) and origin is __import__("types").UnionType):
        if value is None and _NoneType in args:
            return None
        for a in args:
            if a is _NoneType:
                continue
            try:
                return _convert(value, a, where)
            except ValueError:
                pass
        raise ValueError(f"{where}: {json.dumps(value)[:80]} matches none of the allowed types")
    if tp is Any:
        return value
    want = {str: str, bool: bool, int: int, float: (int, float)}
    if tp in want:
        ok = isinstance(value, want[tp]) and not (tp is not bool and isinstance(value, bool))
        if not ok:
            raise ValueError(f"{where}: expected {_schema(tp)['type']}, got {json.dumps(value)[:80]}")
        return float(value) if tp is float else value
    if tp in (list, tuple) or origin in (list, tuple, typing.Sequence):
        if not isinstance(value, list):
            raise ValueError(f"{where}: expected array, got {json.dumps(value)[:80]}")
        return [_convert(v, args[0], f"{where}[{i}]") for i, v in enumerate(value)] if args else value
    if tp is dict or origin is dict:
        if not isinstance(value, dict):
            raise ValueError(f"{where}: expected object, got {json.dumps(value)[:80]}")
        return {k: _convert(v, args[1], f"{where}.{k}") for k, v in value.items()} if len(args) == 2 else value
    if origin is typing.Literal:
        if value not in args:
            raise ValueError(f"{where}: must be one of {json.dumps(list(args))}, got {json.dumps(value)[:80]}")
        return value
    if dataclasses.is_dataclass(tp):
        if not isinstance(value, dict):
            raise ValueError(f"{where}: expected object, got {json.dumps(value)[:80]}")
        return tp(**_convert_fields(value, _dataclass_params(tp), where))
    return value


def _convert_fields(obj: dict, params: list, where: str) -> dict:
    known = {name for name, _, _ in params}
    unknown = sorted(set(obj) - known)
    if unknown:
        raise ValueError(f"{where}: unknown argument {unknown[0]!r}")
    out = {}
    for name, tp, has_default in params:
        if name in obj:
            out[name] = _convert(obj[name], tp, f"{where}.{name}" if where else name)
        elif not has_default:
            raise ValueError(f"missing required argument {name!r}")
    return out


class _Def:
    def __init__(self, fn: Callable, name: str, description: str):
        self.fn = fn
        self.name = name
        self.description = description
        hints = typing.get_type_hints(fn, include_extras=True)
        params = list(inspect.signature(fn).parameters.values())
        if not params:
            raise TypeError(f"toolhost_sdk: tool {name!r} must take `ctx` as its first parameter")
        params = params[1:]
        self.single = None
        if len(params) == 1 and dataclasses.is_dataclass(hints.get(params[0].name)):
            self.single = hints[params[0].name]
            self.params = _dataclass_params(self.single)
        else:
            self.params = [
                (p.name, hints.get(p.name, Any), p.default is not inspect.Parameter.empty) for p in params
            ]

    def schema(self) -> dict:
        return _object_schema(self.params)

    def invoke(self, ctx: Context, raw: str) -> Any:
        try:
            obj = json.loads(raw) if raw.strip() else {}
        except ValueError as e:
            raise _Invalid(f"invalid arguments for tool '{self.name}': not JSON: {e}")
        if not isinstance(obj, dict):
            raise _Invalid(f"invalid arguments for tool '{self.name}': expected a JSON object")
        try:
            kwargs = _convert_fields(obj, self.params, "")
        except ValueError as e:
            raise _Invalid(f"invalid arguments for tool '{self.name}': {e}")
        if self.single is not None:
            return self.fn(ctx, self.single(**kwargs))
        return self.fn(ctx, **kwargs)


class _Invalid(Exception):
    pass


_TOOLS: dict = {}


def tool(fn: Optional[Callable] = None, *, name: Optional[str] = None, description: Optional[str] = None):
    """Register a function as a tool: `@tool` or `@tool(name=..., description=...)`."""

    def register(f: Callable) -> Callable:
        n = name or f.__name__
        d = description if description is not None else inspect.cleandoc(f.__doc__ or "")
        _TOOLS[n] = _Def(f, n, d)
        return f

    return register(fn) if fn is not None else register


def schema_of(fn_name: str) -> dict:
    """The JSON Schema of a registered tool's arguments (for tests)."""
    return _TOOLS[fn_name].schema()


def _exception_text(e: BaseException) -> str:
    cls = type(e).__name__
    if not (cls.endswith("Error") or cls.endswith("Exception")):
        cls = "RuntimeError"
    detail = str(e)
    if isinstance(e, KeyError) and len(e.args) == 1:
        detail = repr(e.args[0])
    return f"{cls}: {detail}"


def _result(out: Any) -> Any:
    if out is None:
        out = Output.text("")
    elif isinstance(out, str):
        out = Output.text(out)
    elif not isinstance(out, Output):
        out = Output.text(json.dumps(out, ensure_ascii=False))
    update = None
    if out.artifacts is not None or out.todos is not None:
        update = _t.StateUpdate(
            artifacts=None if out.artifacts is None else [str(a) for a in out.artifacts],
            viewed_images=None,
            todos=None if out.todos is None else json.dumps(out.todos, ensure_ascii=False),
        )
    return _t.ToolResult(content=list(out.content), is_error=bool(out.is_error), update=update)


class Tool(_exports.Tool):
    """The component's `tool` export: lists the registered tools and answers calls."""

    def list_tools(self) -> list:
        return [_t.ToolSpec(d.name, d.description, json.dumps(d.schema())) for d in _TOOLS.values()]

    def call(self, ctx: Any, name: str, args: str) -> Any:
        d = _TOOLS.get(name)
        if d is None:
            raise _Err(_t.CallError_UnknownTool(name))
        try:
            config = json.loads(ctx.config) if ctx.config.strip() else {}
        except ValueError as e:
            raise _Err(_t.CallError_Failed(f"ValueError: invalid config from host: {e}"))
        context = Context(ctx.thread_id, ctx.tool_call_id, config, ctx.sandbox)
        try:
            return _result(d.invoke(context, args))
        except _Invalid as e:
            raise _Err(_t.CallError_InvalidArguments(str(e)))
        except Exception as e:  # a raised exception is the call's failure, as in DeerFlow
            raise _Err(_t.CallError_Failed(_exception_text(_as_denial(e) or e)))
