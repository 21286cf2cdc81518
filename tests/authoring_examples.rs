//! The example tools in Python (`guest-tools/examples/csv-summary`, componentize-py) and
//! JavaScript (`guest-tools/examples/md-table`, jco + componentize-js), built with `toolhost build`
//! once per test binary and run through the whole host: what they do, a file read outside the
//! grant (refused, the secret not leaked), a loop that hits `timeout_s` — each hostile call
//! followed by a normal call that still works.
//!
//! The built copy of each example carries four more tools the shipped example does not: `spin` (a
//! loop that never ends) for the limit test, `fetch_url` (the SDK's `fetch`, over wasi:http)
//! for the network test against a TLS server on loopback, `ask_user` (the SDK's `elicit` and
//! sampling call, answered with an embedded resource) for the client test, and `file_op` (the
//! SDK's file helpers) for the grant-naming test.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use toolhost::assembly::AssemblyRequest;
use toolhost::{HostOptions, Severity, Toolhost};

#[path = "support/authoring.rs"]
mod authoring;
#[path = "support/client.rs"]
mod client;
#[path = "support/paths.rs"]
mod paths;
#[path = "support/provider_server.rs"]
mod provider_server;

const PY_SPIN: &str = r#"

@tool
def spin(ctx: Context) -> str:
    """Never returns (the limit test)."""
    n = 0
    while True:
        n += 1


from toolhost_sdk import fetch


@tool
def fetch_url(ctx: Context, url: str, method: str = "GET", body: str = "") -> str:
    """Fetch a URL and say what came back (the network test)."""
    r = fetch(url, method=method, body=body or None, headers={"x-tool": "python"})
    return f"{r.status} {r.header('content-type')} {r.text()}"


import json
from toolhost_sdk import elicit, create_message, ClientError, Output
from toolhost_sdk import open as granted_open, NotGrantedError


@tool
def file_op(ctx: Context, path: str, text: str = "") -> str:
    """Read a file, or write `text` to it (the grant test)."""
    try:
        if text:
            with granted_open(path, "w") as f:
                f.write(text)
        with granted_open(path) as f:
            return f"{'wrote ' if text else ''}{path}: {f.read()}"
    except NotGrantedError as e:
        return f"denied: {e}"
    except FileNotFoundError as e:
        return f"missing: {e}"


@tool
def ask_user(ctx: Context, question: str) -> Output:
    """Ask the client's user and its model (the client test)."""
    try:
        a = elicit(question, {"type": "object", "properties": {"name": {"type": "string"}}})
        said = create_message(question, max_tokens=20)
    except ClientError as e:
        return Output.error(f"ClientError: {e}")
    out = Output.text(f"{a['action']} {json.dumps(a['content'])} / {said}")
    return out.with_resource("test://answer", text=a["action"], mime_type="text/plain")
"#;

const JS_SPIN: &str = r#"
import { Output as JsOutput, elicit, createMessage } from "./toolhost-sdk.js";

const askUser = defineTool({
  name: "ask_user",
  description: "Ask the client's user and its model (the client test).",
  parameters: { type: "object", properties: { question: { type: "string" } }, required: ["question"] },
  run(ctx, { question }) {
    let a, said;
    try {
      a = elicit(question, { type: "object", properties: { name: { type: "string" } } });
      said = createMessage(question, { maxTokens: 20 });
    } catch (e) {
      return JsOutput.error(`ClientError: ${e.message}`);
    }
    return JsOutput.text(`${a.action} ${JSON.stringify(a.content)} / ${said}`).withResource("test://answer", a.action, "text/plain");
  },
});

import { readTextFile as readText, writeTextFile, NotGrantedError, FileNotFoundError } from "./toolhost-sdk.js";

const fileOp = defineTool({
  name: "file_op",
  description: "Read a file, or write `text` to it (the grant test).",
  parameters: { type: "object", properties: { path: { type: "string" }, text: { type: "string" } }, required: ["path"] },
  run(ctx, { path, text }) {
    try {
      if (text) writeTextFile(path, text);
      return `${text ? "wrote " : ""}${path}: ${readText(path)}`;
    } catch (e) {
      if (e instanceof NotGrantedError) return `denied: ${e.message}`;
      if (e instanceof FileNotFoundError) return `missing: ${e.message}`;
      throw e;
    }
  },
});

const spin = defineTool({
  name: "spin",
  description: "Never returns (the limit test).",
  parameters: { type: "object", properties: {} },
  run() {
    let n = 0;
    for (;;) n++;
  },
});

const fetchUrl = defineTool({
  name: "fetch_url",
  description: "Fetch a URL and say what came back (the network test).",
  parameters: {
    type: "object",
    properties: { url: { type: "string" }, method: { type: "string" }, body: { type: "string" } },
    required: ["url"],
  },
  async run(ctx, { url, method = "GET", body }) {
    const r = await fetch(url, { method, body: body || undefined, headers: { "x-tool": "js" } });
    return `${r.status} ${r.headers.get("content-type")} ${await r.text()}`;
  },
});
"#;

/// Build the example `name` (with `spin` added) once per test binary (and not again while its
/// sources are unchanged, see `build_once`); the component's path.
fn build_example(name: &str, patch: impl FnOnce(&Path)) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("authoring-examples").join(name);
    let _ = std::fs::remove_dir_all(&dir);
    authoring::copy_tree(&authoring::root().join("guest-tools/examples").join(name), &dir);
    patch(&dir);
    authoring::build_once(&dir, name)
}

fn csv_summary() -> &'static Path {
    static WASM: OnceLock<PathBuf> = OnceLock::new();
    WASM.get_or_init(|| {
        build_example("csv-summary", |d| {
            let app = d.join("app.py");
            let text = std::fs::read_to_string(&app).unwrap();
            std::fs::write(&app, text + PY_SPIN).unwrap();
        })
    })
}

fn md_table() -> &'static Path {
    static WASM: OnceLock<PathBuf> = OnceLock::new();
    WASM.get_or_init(|| {
        build_example("md-table", |d| {
            let app = d.join("app.js");
            let text = std::fs::read_to_string(&app).unwrap();
            let export = "export const tool = exportTools([markdownTable]);";
            assert!(text.contains(export));
            let text = text.replace(
                export,
                &format!(
                    "{JS_SPIN}\nexport const tool = exportTools([markdownTable, spin, fetchUrl, askUser, fileOp]);"
                ),
            );
            std::fs::write(&app, text).unwrap();
        })
    })
}

struct Env {
    dir: tempfile::TempDir,
    host: Toolhost,
}

impl Env {
    fn uploads(&self) -> PathBuf {
        let p = self.dir.path().join("data/threads/t1/user-data/uploads");
        std::fs::create_dir_all(&p).unwrap();
        p
    }
}

/// A host with the tools `(name, capabilities)` of component `wasm`; the shared precompile cache.
fn open(wasm: &Path, tools: &[(&str, &str)]) -> Env {
    open_with_ca(wasm, tools, None)
}

/// `open`, trusting the extra CA certificate `ca` for outbound HTTPS.
fn open_with_ca(wasm: &Path, tools: &[(&str, &str)], ca: Option<&Path>) -> Env {
    let dir = tempfile::tempdir().unwrap();
    let mut yaml = "tools:\n".to_string();
    for (tool, caps) in tools {
        yaml +=
            &format!("  - {{name: {tool}, group: tools, use: '{}:{tool}', capabilities: {caps}}}\n", wasm.display());
    }
    std::fs::write(dir.path().join("config.yaml"), yaml).unwrap();
    let opts = HostOptions::new(dir.path().join("config.yaml"))
        .data_dir(dir.path().join("data"))
        .cache_dir(Some(authoring::shared_cache_dir()))
        .extra_ca_certs(ca.map(Path::to_path_buf));
    let host = Toolhost::open_blocking(opts).unwrap();
    let errors: Vec<_> = host.problems().iter().filter(|p| p.severity == Severity::Error).collect();
    assert!(errors.is_empty(), "{errors:?}");
    Env { dir, host }
}

/// One call in thread `t1`, bounded: (text, is_error, update as JSON).
async fn call(env: &Env, name: &str, args: Value) -> (String, bool, Value) {
    let r = tokio::time::timeout(
        Duration::from_secs(120),
        env.host.call(&AssemblyRequest::default(), "t1", name, args, None),
    )
    .await
    .expect("the call returned")
    .unwrap();
    (r.outcome.text_content(), r.outcome.is_error(), serde_json::to_value(&r.outcome.update).unwrap())
}

const FILES: &str = "{filesystem: user-data, memory_mb: 256, timeout_s: 20}";
const SALES: &str = "region,units,price\nnorth,10,2.5\nsouth,30,4\nnorth,20,3.5\n";

// ---- Python: csv-summary ----

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_summarises_csv_and_json_and_saves_an_artifact() {
    let env = open(csv_summary(), &[("summarize_data", FILES)]);
    std::fs::write(env.uploads().join("sales.csv"), SALES).unwrap();
    let (text, err, update) =
        call(&env, "summarize_data", json!({"path": "/mnt/user-data/uploads/sales.csv", "save_as": "sales-summary"}))
            .await;
    assert!(!err, "{text}");
    assert!(text.starts_with("/mnt/user-data/uploads/sales.csv: 3 rows, 3 columns"), "{text}");
    assert!(text.contains("- **units**: numeric, min 10, max 30, mean 20, median 20"), "{text}");
    assert!(text.contains("- **region**: text, 2 distinct; most common: 'north' ×2"), "{text}");
    assert_eq!(update["artifacts"], json!(["/mnt/user-data/outputs/sales-summary.md"]), "{update}");
    let saved =
        std::fs::read_to_string(env.dir.path().join("data/threads/t1/user-data/outputs/sales-summary.md")).unwrap();
    assert_eq!(saved, format!("{text}\n"));

    std::fs::write(env.uploads().join("items.json"), r#"{"items": [{"a": 1, "b": "x"}, {"a": 3}]}"#).unwrap();
    let (text, err, _) = call(&env, "summarize_data", json!({"path": "/mnt/user-data/uploads/items.json"})).await;
    assert!(!err, "{text}");
    assert!(
        text.contains("2 rows, 2 columns")
            && text.contains("- **b**: text, 1 distinct; most common: 'x' ×1; 1 missing"),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_argument_errors_and_raised_exceptions_read_as_deerflow_prints_them() {
    let env = open(csv_summary(), &[("summarize_data", FILES)]);
    let (text, err, _) = call(&env, "summarize_data", json!({"path": 3})).await;
    assert!(err && text.contains("path: expected string, got 3"), "{text}");
    let (text, err, _) = call(&env, "summarize_data", json!({})).await;
    assert!(err && text.contains("missing required argument 'path'"), "{text}");
    std::fs::write(env.uploads().join("sales.csv"), SALES).unwrap();
    let (text, err, _) =
        call(&env, "summarize_data", json!({"path": "/mnt/user-data/uploads/sales.csv", "max_columns": 0})).await;
    assert!(err, "{text}");
    assert!(
        text.starts_with("Error: Tool 'summarize_data' failed with ValueError: max_columns must be at least 1"),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_a_read_outside_the_grant_is_refused() {
    python_reader().outside_the_grant_is_refused("PY-SECRET-7731").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_a_loop_hits_timeout_s() {
    python_reader().a_loop_hits_timeout_s().await;
}

// ---- JavaScript: md-table ----

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn js_formats_rows_inline_and_from_a_file() {
    let env = open(md_table(), &[("markdown_table", FILES)]);
    let (text, err, _) = call(
        &env,
        "markdown_table",
        json!({"rows": [{"name": "apple", "qty": 3}, {"name": "kiwi|gold", "qty": 12, "note": "ripe"}]}),
    )
    .await;
    assert!(!err, "{text}");
    let want = "| name       | qty | note |\n\
                | ---------- | --: | ---- |\n\
                | apple      |   3 |      |\n\
                | kiwi\\|gold |  12 | ripe |";
    assert_eq!(text, want);
    let (text, err, _) =
        call(&env, "markdown_table", json!({"rows": [["a", "b"]], "columns": ["x", "y"], "align": {"y": "center"}}))
            .await;
    assert!(!err, "{text}");
    assert_eq!(text, "| x   |  y  |\n| --- | :-: |\n| a   |  b  |");
    std::fs::write(env.uploads().join("sales.csv"), SALES).unwrap();
    let (text, err, _) = call(&env, "markdown_table", json!({"file": "/mnt/user-data/uploads/sales.csv"})).await;
    assert!(!err, "{text}");
    assert!(
        text.starts_with("| region | units | price |\n| ------ | ----: | ----: |\n| north  |    10 |   2.5 |"),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn js_argument_errors_and_thrown_errors_read_as_deerflow_prints_them() {
    let env = open(md_table(), &[("markdown_table", FILES)]);
    let (text, err, _) = call(&env, "markdown_table", json!({"rows": "nope"})).await;
    assert!(err && text.contains("rows: expected array"), "{text}");
    let (text, err, _) = call(&env, "markdown_table", json!({"rows": [], "extra": 1})).await;
    assert!(err && text.contains("unknown argument 'extra'"), "{text}");
    let (text, err, _) = call(&env, "markdown_table", json!({})).await;
    assert!(err, "{text}");
    assert!(
        text.starts_with("Error: Tool 'markdown_table' failed with TypeError: give exactly one of `rows` and `file`"),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn js_a_read_outside_the_grant_is_refused() {
    js_reader().outside_the_grant_is_refused("JS-SECRET-9917").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn js_a_loop_hits_timeout_s() {
    js_reader().a_loop_hits_timeout_s().await;
}

// ---- both languages: a file tool under the grant, and the time limit ----

/// An example tool that reads the file its argument `key` names: `refusal` is in what it
/// answers for a file it cannot read, `good` in what it answers for the thread's `sales.csv`.
struct Reader {
    wasm: &'static Path,
    tool: &'static str,
    key: &'static str,
    refusal: &'static str,
    good: &'static str,
}

fn python_reader() -> Reader {
    Reader { wasm: csv_summary(), tool: "summarize_data", key: "path", refusal: "NotGrantedError", good: "3 rows" }
}

fn js_reader() -> Reader {
    Reader { wasm: md_table(), tool: "markdown_table", key: "file", refusal: "NotGrantedError", good: "| north  |" }
}

impl Reader {
    fn args(&self, path: &str) -> Value {
        json!({ self.key: path })
    }

    /// A secret file outside the thread, by host path and through `..`, and `/etc/passwd`, are
    /// refused without leaking a byte; without a filesystem grant even the thread's own upload is
    /// out of reach; the tool still reads where it is granted.
    async fn outside_the_grant_is_refused(&self, secret_text: &str) {
        let secret_dir = tempfile::tempdir().unwrap();
        let secret = secret_dir.path().join("secret.csv");
        std::fs::write(&secret, format!("token\n{secret_text}\n")).unwrap();
        let env = open(self.wasm, &[(self.tool, FILES)]);
        std::fs::write(env.uploads().join("sales.csv"), SALES).unwrap();
        let escape = format!("/mnt/user-data/uploads/../../../../../../..{}", secret.display());
        for path in [secret.display().to_string(), escape, "/etc/passwd".to_string()] {
            let (text, err, _) = call(&env, self.tool, self.args(&path)).await;
            assert!(err && text.contains(self.refusal), "{path}: {text}");
            assert!(!text.contains(secret_text) && !text.contains("root:"), "{path} leaked: {text}");
        }
        let env2 = open(self.wasm, &[(self.tool, "{memory_mb: 256, timeout_s: 20}")]);
        std::fs::write(env2.uploads().join("sales.csv"), SALES).unwrap();
        let (text, err, _) = call(&env2, self.tool, self.args("/mnt/user-data/uploads/sales.csv")).await;
        assert!(err && text.contains(self.refusal) && !text.contains("north"), "{text}");
        // The refusal names the grant, not a missing file.
        assert!(
            text.contains(
                "/mnt/user-data/uploads/sales.csv is not granted: this tool's capabilities.filesystem is `none`"
            ) && text.contains("`user-data` (reading and writing) would open it"),
            "{text}"
        );
        let (text, err, _) = call(&env, self.tool, self.args("/mnt/user-data/uploads/sales.csv")).await;
        assert!(!err && text.contains(self.good), "{text}");
    }

    /// The example's `spin` (a loop that never ends) is stopped by `timeout_s: 1` as DeerFlow
    /// reports a raised `TimeoutError`; the tool answers normally afterwards.
    async fn a_loop_hits_timeout_s(&self) {
        let env = open(self.wasm, &[("spin", "{memory_mb: 256, timeout_s: 1}"), (self.tool, FILES)]);
        let started = Instant::now();
        let (text, err, _) = call(&env, "spin", json!({})).await;
        let elapsed = started.elapsed();
        assert!(err && text.starts_with("Error: Tool 'spin' failed with TimeoutError:"), "{text}");
        assert!(text.contains("timed out after 1s"), "{text}");
        assert!(elapsed >= Duration::from_millis(990) && elapsed < Duration::from_secs(10), "{elapsed:?}");
        std::fs::write(env.uploads().join("sales.csv"), SALES).unwrap();
        let (text, err, _) = call(&env, self.tool, self.args("/mnt/user-data/uploads/sales.csv")).await;
        assert!(!err && text.contains(self.good), "after the loop: {text}");
    }
}

// ---- both languages: the SDK's file helpers tell a denial from a missing file ----

/// `file_op` of component `wasm` (the SDK's typed file helpers) under each grant: a missing file
/// is `FileNotFoundError`, a path outside the grant or a write where it is read-only is
/// `NotGrantedError` naming the grant; `user-data` writes, and the bytes land in the thread.
async fn file_helpers_tell_a_denial_from_a_missing_file(wasm: &Path) {
    let read_only = open(wasm, &[("file_op", "{filesystem: read-only, memory_mb: 256, timeout_s: 20}")]);
    std::fs::write(read_only.uploads().join("sales.csv"), SALES).unwrap();
    let op = |path: &str, text: &str| json!({"path": path, "text": text});
    let (text, err, _) = call(&read_only, "file_op", op("/mnt/user-data/uploads/sales.csv", "")).await;
    assert!(!err && text.contains("north,10,2.5"), "{text}");
    let (text, _, _) = call(&read_only, "file_op", op("/mnt/user-data/uploads/none.csv", "")).await;
    assert!(text.starts_with("missing: ") && text.contains("/mnt/user-data/uploads/none.csv"), "{text}");
    let (text, _, _) = call(&read_only, "file_op", op("/mnt/user-data/outputs/out.md", "x")).await;
    assert_eq!(
        text,
        "denied: /mnt/user-data/outputs/out.md is read-only for this tool: its capabilities.filesystem is \
         `read-only`; `user-data` would allow writing"
    );
    let (text, _, _) = call(&read_only, "file_op", op("/etc/passwd", "")).await;
    assert!(text.starts_with("denied: /etc/passwd is not granted:") && text.contains("(`read-only`)"), "{text}");
    assert!(!text.contains("root:"), "{text}");
    let outputs = read_only.dir.path().join("data/threads/t1/user-data/outputs/out.md");
    assert!(!outputs.exists(), "a read-only grant wrote");

    let none = open(wasm, &[("file_op", "{memory_mb: 256, timeout_s: 20}")]);
    let (text, _, _) = call(&none, "file_op", op("/mnt/user-data/outputs/out.md", "")).await;
    assert!(
        text.starts_with(
            "denied: /mnt/user-data/outputs/out.md is not granted: this tool's capabilities.filesystem is `none`"
        ) && text.contains("`outputs`, `read-only` or `user-data` would open it"),
        "{text}"
    );

    let user_data = open(wasm, &[("file_op", FILES)]);
    let (text, err, _) = call(&user_data, "file_op", op("/mnt/user-data/outputs/out.md", "# report\n")).await;
    assert!(!err && text == "wrote /mnt/user-data/outputs/out.md: # report\n", "{text}");
    let written = user_data.dir.path().join("data/threads/t1/user-data/outputs/out.md");
    assert_eq!(std::fs::read_to_string(written).unwrap(), "# report\n");
    let (text, _, _) = call(&user_data, "file_op", op("/mnt/user-data/outputs/no-dir/out.md", "x")).await;
    assert!(text.starts_with("missing: "), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_file_helpers_tell_a_denial_from_a_missing_file() {
    file_helpers_tell_a_denial_from_a_missing_file(csv_summary()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn js_file_helpers_tell_a_denial_from_a_missing_file() {
    file_helpers_tell_a_denial_from_a_missing_file(md_table()).await;
}

// ---- both languages: asking the client (toolhost:tool@0.4.0) ----

/// `ask_user` of component `wasm`: granted, the embedder's client gets the question and the
/// prompt and its answers come back, with an embedded resource; without the grant the SDK call
/// fails naming it and the client hears nothing; a normal call works afterwards.
async fn ask_user_through_the_client(wasm: &Path, accepted: &str) {
    use toolhost::core::{Client, ContentPart};
    let client = std::sync::Arc::new(client::RecordingClient::default());
    let opts = || toolhost::CallOptions { client: Some(Client::new(client.clone())), ..Default::default() };
    let args = json!({"question": "Who?"});
    let env = open(wasm, &[("ask_user", "{client: [elicitation, sampling], memory_mb: 256, timeout_s: 20}")]);
    let r =
        env.host.call_with(&AssemblyRequest::default(), "t1", "ask_user", args.clone(), None, opts()).await.unwrap();
    assert!(!r.outcome.is_error(), "{}", r.outcome.text_content());
    assert_eq!(r.outcome.text_content(), format!("accept {accepted} / echo Who?"));
    assert!(
        r.outcome.content.contains(&ContentPart::Resource {
            resource: json!({"uri": "test://answer", "mimeType": "text/plain", "text": "accept"})
        }),
        "{:?}",
        r.outcome.content
    );
    assert_eq!(client.asked.lock().unwrap().len(), 2, "{:?}", client.asked.lock().unwrap());
    let ungranted = open(wasm, &[("ask_user", "{memory_mb: 256, timeout_s: 20}")]);
    let r = ungranted
        .host
        .call_with(&AssemblyRequest::default(), "t1", "ask_user", args.clone(), None, opts())
        .await
        .unwrap();
    let text = r.outcome.text_content();
    assert!(r.outcome.is_error() && text.contains("ClientError: elicitation is not granted"), "{text}");
    assert_eq!(client.asked.lock().unwrap().len(), 2, "the client heard an ungranted tool");
    let r = env.host.call_with(&AssemblyRequest::default(), "t1", "ask_user", args, None, opts()).await.unwrap();
    assert!(!r.outcome.is_error(), "afterwards: {}", r.outcome.text_content());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_asks_the_client_under_the_grant() {
    ask_user_through_the_client(csv_summary(), r#"{"name": "Ada"}"#).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn js_asks_the_client_under_the_grant() {
    ask_user_through_the_client(md_table(), r#"{"name":"Ada"}"#).await;
}

// ---- both languages: outbound HTTPS through wasi:http, under the grant's rules ----

/// `fetch_url` of component `wasm` (whose SDK tags requests `x-tool: lang`) against a TLS server
/// on 127.0.0.1: a granted GET and POST arrive as sent; a grant without
/// `allow_private_addresses`, a host the grant does not list, plain HTTP to an HTTPS grant and no
/// grant at all are each refused before a byte reaches the server, with the rule named; a
/// granted call works afterwards.
async fn fetch_follows_the_grant(wasm: &Path, lang: &str) {
    use provider_server::Answer;
    let server = provider_server::start().await;
    server.set(Answer::json(200, r#"{"ok":true}"#));
    let port = server.port;
    let granted =
        format!("{{network: [\"127.0.0.1:{port}\"], allow_private_addresses: true, memory_mb: 256, timeout_s: 20}}");
    let env = open_with_ca(wasm, &[("fetch_url", &granted)], Some(&server.ca_pem));
    let url = format!("https://127.0.0.1:{port}/v1/items?q=1");

    let (text, err, _) = call(&env, "fetch_url", json!({ "url": url })).await;
    assert!(!err, "{lang}: {text}");
    assert_eq!(text, r#"200 application/json {"ok":true}"#, "{lang}");
    let got = server.received();
    assert_eq!(got.len(), 1, "{lang}: {got:?}");
    assert_eq!((got[0].method.as_str(), got[0].target.as_str()), ("GET", "/v1/items?q=1"), "{lang}");
    assert_eq!(got[0].header("x-tool"), Some(lang), "{lang}: {got:?}");

    server.set(Answer::json(201, r#"{"made":1}"#));
    let (text, err, _) =
        call(&env, "fetch_url", json!({ "url": url, "method": "POST", "body": "hello wasi:http" })).await;
    assert!(!err && text == r#"201 application/json {"made":1}"#, "{lang}: {text}");
    let got = server.received();
    assert_eq!((got[0].method.as_str(), got[0].body.as_slice()), ("POST", &b"hello wasi:http"[..]), "{lang}: {got:?}");

    server.set(Answer::json(200, r#"{"ok":true}"#));
    let no_private = format!("{{network: [\"127.0.0.1:{port}\"], memory_mb: 256, timeout_s: 20}}");
    let other_host =
        format!("{{network: [\"localhost:{port}\"], allow_private_addresses: true, memory_mb: 256, timeout_s: 20}}");
    let refusals = [
        (no_private.as_str(), url.clone(), "allow_private_addresses: true"),
        (other_host.as_str(), url.clone(), "not in this tool's network grant"),
        (granted.as_str(), format!("http://127.0.0.1:{port}/v1/items"), "only https is allowed"),
        ("{memory_mb: 256, timeout_s: 20}", url.clone(), "this tool has no network grant"),
    ];
    for (caps, target, rule) in refusals {
        let env = open_with_ca(wasm, &[("fetch_url", caps)], Some(&server.ca_pem));
        let (text, err, _) = call(&env, "fetch_url", json!({ "url": target })).await;
        assert!(err, "{lang} {caps} {target}: {text}");
        assert!(text.contains("outbound request refused") && text.contains(rule), "{lang} {caps} {target}: {text}");
        assert!(!text.contains(r#"{"ok":true}"#), "{lang}: {text}");
    }
    assert_eq!(server.connection_count(), 0, "{lang}: a refused request reached the server");

    let (text, err, _) = call(&env, "fetch_url", json!({ "url": url })).await;
    assert!(!err && text.starts_with("200 "), "{lang}, after the refusals: {text}");
    assert_eq!(server.received().len(), 1, "{lang}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_fetch_goes_through_wasi_http_under_the_grant() {
    fetch_follows_the_grant(csv_summary(), "python").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn js_fetch_goes_through_wasi_http_under_the_grant() {
    fetch_follows_the_grant(md_table(), "js").await;
}
