// The JavaScript SDK for toolhost tools: describe a tool with a JSON Schema, write its body as a
// function, build it with `toolhost build` (jco componentize), and the host runs it in a fresh
// wasm instance per call.
//
//   import { defineTool, exportTools } from "./toolhost-sdk.js";
//
//   const hello = defineTool({
//     name: "hello",
//     description: "Greet someone by name.",
//     parameters: {
//       type: "object",
//       properties: { name: { type: "string", description: "Who to greet." } },
//       required: ["name"],
//     },
//     run(ctx, { name }) {
//       return `${ctx.config.greeting ?? "Hello"}, ${name}.`;
//     },
//   });
//
//   export const tool = exportTools([hello]);   // the component's export
//
// - The arguments are checked against `parameters` before `run` sees them (types, required,
//   enum, unknown keys when `additionalProperties: false`); a mismatch is reported to the model
//   as invalid arguments naming the key.
// - `ctx.config` is the tool's config keys (an object), `ctx.sandbox` the sandbox settings
//   (`readFileOutputMaxChars`, `lsOutputMaxChars`, `mounts`, `skillsContainerPath`,
//   `writeFileMaxBytes`, `disabledSkills`; the sizes are numbers).
// - Return a string (one text block) or an `Output` (blocks, error flag, artifacts, todos).
// - Throw to fail the call: the host reports `SomeError: detail` as DeerFlow's error middleware
//   prints a raised exception (`throw new TypeError("x")` → `TypeError: x`).
// - Outbound HTTPS: `fetch()` goes through wasi:http, to the hosts of the tool's
//   `capabilities.network` grant only (never to a private address unless the grant says
//   `allow_private_addresses: true`); `run` may be `async` and `await fetch(...)`. A refused
//   request rejects with a `TypeError` and the host adds which rule refused it.
// - Files: `readTextFile(path)` and `writeTextFile(path, text)` go through wasi:filesystem,
//   inside the directories the tool's `capabilities.filesystem` grant opens. A path the grant
//   does not open (or a write where it is read-only) throws `NotGrantedError`, naming the grant;
//   a missing file throws `FileNotFoundError`.

import { getDirectories } from "wasi:filesystem/preopens@0.2.12";
import { log as hostLog, progress as hostProgress } from "toolhost:tool/host@0.4.0";
import { elicit as hostElicit, createMessage as hostCreateMessage } from "toolhost:tool/client@0.4.0";

/** A tool's answer. */
export class Output {
  constructor(content = [], isError = false) {
    this.content = content;
    this.isError = isError;
    this.artifacts = undefined;
    this.todos = undefined;
  }
  /** One text block. */
  static text(text) {
    return new Output([{ tag: "text", val: String(text) }]);
  }
  /** A failed call the model reads (DeerFlow's strings start `Error:`). */
  static error(text) {
    return new Output([{ tag: "text", val: String(text) }], true);
  }
  withImage(bytes, mimeType) {
    this.content.push({ tag: "image", val: { bytes, mimeType } });
    return this;
  }
  withLink(uri, name, mimeType, description) {
    this.content.push({ tag: "resource-link", val: { uri, name, mimeType, description } });
    return this;
  }
  /** An embedded resource: `text` (a string) or bytes (a Uint8Array) under `uri`. */
  withResource(uri, contents, mimeType) {
    const c = typeof contents === "string" ? { tag: "text", val: contents } : { tag: "blob", val: contents };
    this.content.push({ tag: "embedded-resource", val: { uri, mimeType, contents: c } });
    return this;
  }
  /** Virtual paths to add to the thread's `artifacts`. */
  withArtifacts(...paths) {
    this.artifacts = paths.map(String);
    return this;
  }
  /** The new todo list (an array of objects), replacing the old one. */
  withTodos(todos) {
    this.todos = todos;
    return this;
  }
}

/** Report how far the call has come (it must grow from one report to the next). */
export function progress(done, total, message) {
  hostProgress(done, total, message);
}

/**
 * Ask the MCP client's user (form elicitation): `{ action: "accept" | "decline" | "cancel",
 * content }`. Needs `capabilities.client: [elicitation]`; a refusal throws an Error saying why.
 */
export function elicit(message, schema) {
  let a;
  try {
    a = hostElicit(String(message), JSON.stringify(schema));
  } catch (e) {
    throw new Error(e.payload ?? e.message ?? String(e));
  }
  return { action: a.action, content: a.content === undefined || a.content === null ? null : JSON.parse(a.content) };
}

/**
 * Ask the MCP client's model (sampling): `messages` is a prompt string or `[[role, text], …]`.
 * Returns the answer's text. Needs `capabilities.client: [sampling]`.
 */
export function createMessage(messages, { maxTokens = 256, systemPrompt } = {}) {
  const list = typeof messages === "string" ? [["user", messages]] : messages;
  try {
    return hostCreateMessage({
      messages: list.map(([role, text]) => ({ role, text: String(text) })),
      systemPrompt,
      maxTokens,
      temperature: undefined,
    }).text;
  } catch (e) {
    throw new Error(e.payload ?? e.message ?? String(e));
  }
}

/** A line in the host's log, with the tool's name. */
export function log(message, level = "info") {
  hostLog(level, String(message));
}

/** A file that is not there (inside the tool's filesystem grant). */
export class FileNotFoundError extends Error {
  constructor(m, path) {
    super(m);
    this.name = "FileNotFoundError";
    this.path = path;
  }
}

/**
 * A path the tool's `capabilities.filesystem` grant does not open, or opens read-only for a
 * write: the grant is missing, not the file. The message names the grant and what would allow it.
 */
export class NotGrantedError extends Error {
  constructor(m, path) {
    super(m);
    this.name = "NotGrantedError";
    this.path = path;
  }
}

// Where the grants open directories (the host's `filesystem` capability): the thread's user data,
// then what is always read-only.
const USER_DATA = "/mnt/user-data";
const ROOTS_HINT = "a tool sees files only under /mnt/user-data, /mnt/skills, /mnt/acp-workspace and the sandbox's mounts";

/** `p` with `.` and `..` resolved (never above `/`). */
function normalize(p) {
  const out = [];
  for (const part of p.split("/")) {
    if (part === "" || part === ".") continue;
    if (part === "..") out.pop();
    else out.push(part);
  }
  return "/" + out.join("/");
}

const under = (p, root) => p === root || p.startsWith(root.endsWith("/") ? root : root + "/");

/**
 * The directories the host opened for this call (`[dir, where, writable]`), and the grant they
 * show: `none` (no directory), `outputs` (only the outputs directory), `read-only` (the user
 * data read-only), `user-data`.
 */
let view;
function grantView() {
  // Asked once per instance (a call runs in a fresh one): every getDirectories() costs handles.
  if (view) return view;
  const dirs = getDirectories().map(([dir, where]) => [dir, where, !!dir.getFlags().mutateDirectory]);
  const ws = dirs.find(([, where]) => where === `${USER_DATA}/workspace`);
  const outputs = dirs.some(([, where]) => where === `${USER_DATA}/outputs`);
  const level = ws ? (ws[2] ? "user-data" : "read-only") : outputs ? "outputs" : "none";
  view = { dirs, level };
  return view;
}

/** The directory that opens normalized path `p` for reading (`write`: for writing), or a NotGrantedError. */
function granted(path, write) {
  const raw = String(path);
  if (!raw.startsWith("/")) throw new NotGrantedError(`${raw}: not an absolute path (files are under ${USER_DATA}/...)`, raw);
  const p = normalize(raw);
  const { dirs, level } = grantView();
  let best;
  for (const d of dirs) if (under(p, d[1]) && (!best || d[1].length > best[1].length)) best = d;
  if (!best) {
    const what = level === "none" ? "this tool's capabilities.filesystem is `none` (no files)" : `it is outside the directories this tool's capabilities.filesystem (\`${level}\`) opens: ${dirs.map((d) => d[1]).join(", ")}`;
    let hint = `; ${ROOTS_HINT}`;
    if (under(p, USER_DATA)) {
      hint = under(p, `${USER_DATA}/outputs`) && level === "none" ? "; `outputs`, `read-only` or `user-data` would open it" : "; `read-only` (reading) or `user-data` (reading and writing) would open it";
    }
    throw new NotGrantedError(`${raw} is not granted: ${what}${hint}`, raw);
  }
  if (write && !best[2]) {
    const why = level === "read-only" && under(best[1], USER_DATA) ? "its capabilities.filesystem is `read-only`; `user-data` would allow writing" : `${best[1]} is always read-only`;
    throw new NotGrantedError(`${raw} is read-only for this tool: ${why}`, raw);
  }
  return [best[0], p.slice(best[1].length).replace(/^\/+/, "") || ".", raw];
}

/** An error of a wasi:filesystem call on `raw` as the SDK's typed errors. */
function fileError(raw, e) {
  const code = e.payload ?? e.message ?? String(e);
  if (code === "no-entry") return new FileNotFoundError(`${raw}: no such file or directory`, raw);
  if (code === "not-permitted" || code === "access") {
    return new NotGrantedError(`${raw} is not granted: it leads outside the directories this tool's capabilities.filesystem opens (a link)`, raw);
  }
  return new Error(`${raw}: ${code}`);
}

/**
 * The text of a file inside the tool's filesystem grant (`/mnt/user-data/...`). Throws
 * `NotGrantedError` for a path the grant does not open, `FileNotFoundError` for a missing file.
 */
export function readTextFile(path) {
  const [dir, rel, raw] = granted(path, false);
  let fd;
  try {
    fd = dir.openAt({}, rel, {}, { read: true });
  } catch (e) {
    throw fileError(raw, e);
  }
  const size = fd.stat().size;
  const chunks = [];
  let off = 0n;
  for (;;) {
    const [bytes, end] = fd.read(65536n, off);
    chunks.push(bytes);
    off += BigInt(bytes.length);
    if (end || bytes.length === 0 || off >= size) break;
  }
  const all = new Uint8Array(chunks.reduce((n, c) => n + c.length, 0));
  let at = 0;
  for (const c of chunks) {
    all.set(c, at);
    at += c.length;
  }
  return new TextDecoder().decode(all);
}

/**
 * Write `contents` (a string, as UTF-8, or a Uint8Array) to a file inside the tool's filesystem
 * grant, creating or replacing it (its directory must exist). Throws `NotGrantedError` for a
 * path the grant does not open or opens read-only, `FileNotFoundError` for a missing directory.
 */
export function writeTextFile(path, contents) {
  const [dir, rel, raw] = granted(path, true);
  const bytes = typeof contents === "string" ? new TextEncoder().encode(contents) : contents;
  if (!(bytes instanceof Uint8Array)) throw new TypeError(`writeTextFile ${raw}: contents must be a string or a Uint8Array`);
  let fd;
  try {
    fd = dir.openAt({}, rel, { create: true, truncate: true }, { write: true });
  } catch (e) {
    throw fileError(raw, e);
  }
  let off = 0;
  while (off < bytes.length) {
    const n = Number(fd.write(bytes.subarray(off, off + 65536), BigInt(off)));
    if (n <= 0) throw new Error(`${raw}: the write made no progress`);
    off += n;
  }
}

const typeOf = (v) => (v === null ? "null" : Array.isArray(v) ? "array" : typeof v);

function check(value, schema, where) {
  if (!schema || typeof schema !== "object") return;
  if (schema.enum && !schema.enum.some((e) => JSON.stringify(e) === JSON.stringify(value))) {
    throw new InvalidArguments(`${where}: must be one of ${JSON.stringify(schema.enum)}, got ${JSON.stringify(value)}`);
  }
  const types = schema.type === undefined ? [] : [].concat(schema.type);
  if (types.length) {
    const t = typeOf(value);
    const ok = types.some(
      (w) => w === t || (w === "integer" && t === "number" && Number.isInteger(value)) || (w === "number" && t === "number"),
    );
    if (!ok) throw new InvalidArguments(`${where}: expected ${types.join(" or ")}, got ${JSON.stringify(value)}`);
  }
  if (typeOf(value) === "object") {
    const props = schema.properties || {};
    for (const r of schema.required || []) {
      if (!(r in value)) throw new InvalidArguments(`missing required argument '${where ? where + "." : ""}${r}'`);
    }
    for (const [k, v] of Object.entries(value)) {
      const key = where ? `${where}.${k}` : k;
      if (k in props) check(v, props[k], key);
      else if (schema.additionalProperties === false) throw new InvalidArguments(`unknown argument '${key}'`);
      else if (typeof schema.additionalProperties === "object") check(v, schema.additionalProperties, key);
    }
  }
  if (typeOf(value) === "array" && schema.items) value.forEach((v, i) => check(v, schema.items, `${where}[${i}]`));
}

class InvalidArguments extends Error {}

/** A tool: `{name, description, parameters (a JSON Schema object), run(ctx, args)}`. */
export function defineTool(def) {
  for (const k of ["name", "description", "parameters", "run"]) {
    if (def[k] === undefined) throw new Error(`defineTool: '${k}' is missing`);
  }
  if (def.parameters.type !== "object") throw new Error(`defineTool ${def.name}: parameters must be an object schema`);
  return def;
}

function toResult(out) {
  if (out === undefined || out === null) out = Output.text("");
  else if (typeof out === "string") out = Output.text(out);
  else if (!(out instanceof Output)) out = Output.text(JSON.stringify(out));
  const update =
    out.artifacts !== undefined || out.todos !== undefined
      ? {
          artifacts: out.artifacts,
          viewedImages: undefined,
          todos: out.todos === undefined ? undefined : JSON.stringify(out.todos),
        }
      : undefined;
  return { content: out.content, isError: !!out.isError, update };
}

function exceptionText(e) {
  if (!(e instanceof Error)) return `Error: ${String(e)}`;
  const name = /(Error|Exception)$/.test(e.name || "") ? e.name : "Error";
  return `${name}: ${e.message}`;
}

function sandboxOf(s) {
  return {
    readFileOutputMaxChars: Number(s.readFileOutputMaxChars),
    lsOutputMaxChars: Number(s.lsOutputMaxChars),
    mounts: s.mounts.map((m) => ({ containerPath: m.containerPath, readOnly: m.readOnly })),
    skillsContainerPath: s.skillsContainerPath,
    writeFileMaxBytes: s.writeFileMaxBytes ?? undefined,
    disabledSkills: s.disabledSkills,
  };
}

/** The component's `tool` export for these tools: `export const tool = exportTools([...])`. */
export function exportTools(tools) {
  const byName = new Map(tools.map((t) => [t.name, t]));
  return {
    listTools() {
      return tools.map((t) => ({ name: t.name, description: t.description, parameters: JSON.stringify(t.parameters) }));
    },
    call(ctx, name, args) {
      const t = byName.get(name);
      if (!t) throw { tag: "unknown-tool", val: name };
      let parsed;
      try {
        parsed = args.trim() ? JSON.parse(args) : {};
      } catch (e) {
        throw { tag: "invalid-arguments", val: `invalid arguments for tool '${name}': not JSON: ${e.message}` };
      }
      try {
        if (typeOf(parsed) !== "object") throw new InvalidArguments("expected a JSON object");
        check(parsed, t.parameters, "");
      } catch (e) {
        throw { tag: "invalid-arguments", val: `invalid arguments for tool '${name}': ${e.message}` };
      }
      const context = {
        threadId: ctx.threadId,
        toolCallId: ctx.toolCallId,
        config: ctx.config.trim() ? JSON.parse(ctx.config) : {},
        sandbox: sandboxOf(ctx.sandbox),
      };
      const failed = (e) => {
        throw { tag: "failed", val: exceptionText(e) };
      };
      let out;
      try {
        out = t.run(context, parsed);
      } catch (e) {
        failed(e);
      }
      // An async `run` (one that awaits `fetch`): componentize-js runs the event loop until the
      // returned promise settles.
      if (out && typeof out.then === "function") return out.then(toResult, failed);
      return toResult(out);
    },
  };
}
