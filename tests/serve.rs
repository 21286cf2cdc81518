//! `toolhost serve` end to end with real MCP clients: the rmcp client over stdio and streamable
//! HTTP, the Python MCP SDK client over stdio, raw HTTP for the front door (bearer token, Host,
//! Origin), and deferred MCP tools (server-everything behind toolhost) promoted by `tool_search`
//! with `notifications/tools/list_changed`.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientCapabilities, ClientConfig, ElicitRequestParams, ElicitResult,
    ElicitationAction, Implementation, ProtocolVersion,
};
use rmcp::service::{NotificationContext, RequestContext, RunningService};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{ConfigureCommandExt, StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{ClientHandler, ErrorData, RoleClient, ServiceExt};
use serde_json::{json, Value};

#[path = "support/paths.rs"]
mod paths;
use paths::peer;

/// A temp dir with a config.yaml (hello + DeerFlow's file tools), an optional
/// extensions_config.json and the data dir.
struct Setup {
    dir: tempfile::TempDir,
}

impl Setup {
    fn new(everything: bool, tool_search: bool) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let servers = if everything {
            let bin = peer("npm/node_modules/.bin/mcp-server-everything");
            json!({"everything": {"type": "stdio", "command": bin, "args": ["stdio"], "session_init_timeout": 60}})
        } else {
            json!({})
        };
        std::fs::write(
            dir.path().join("extensions_config.json"),
            serde_json::to_vec_pretty(&json!({"mcpServers": servers})).unwrap(),
        )
        .unwrap();
        std::fs::write(
            dir.path().join("config.yaml"),
            format!(
                "tools:\n  - {{name: hello, group: demo, use: hello}}\n  - {{name: read_file, group: file:read, use: 'deerflow.sandbox.tools:read_file_tool'}}\n  - {{name: write_file, group: file:write, use: 'deerflow.sandbox.tools:write_file_tool'}}\ntool_search:\n  enabled: {tool_search}\n"
            ),
        )
        .unwrap();
        Setup { dir }
    }

    fn config(&self) -> PathBuf {
        self.dir.path().join("config.yaml")
    }

    fn data(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    fn command(&self, extra: &[&str]) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_toolhost"));
        c.arg("serve").arg("--config").arg(self.config()).args(extra);
        c.env("TOOLHOST_HOME", self.data())
            .env_remove("DEER_FLOW_EXTENSIONS_CONFIG_PATH")
            .env_remove("TOOLHOST_SERVE_TOKEN");
        c
    }
}

/// An MCP client that counts `tools/list_changed` and answers elicitations with "blue".
#[derive(Clone, Default)]
struct Client {
    list_changed: Arc<AtomicUsize>,
    elicited: Arc<std::sync::Mutex<Vec<String>>>,
}

impl ClientHandler for Client {
    fn get_info(&self) -> ClientConfig {
        let caps: ClientCapabilities = serde_json::from_value(json!({"elicitation": {"form": {}}})).unwrap();
        ClientConfig::new(caps, Implementation::new("serve-test", "0.1.0"))
            .with_protocol_version(ProtocolVersion::LATEST_WITH_INITIALIZE)
    }

    async fn on_tool_list_changed(&self, _cx: NotificationContext<RoleClient>) {
        self.list_changed.fetch_add(1, Ordering::SeqCst);
    }

    async fn create_elicitation(
        &self,
        req: ElicitRequestParams,
        _cx: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        if let ElicitRequestParams::FormElicitationParams { message, .. } = req {
            self.elicited.lock().unwrap().push(message);
        }
        let mut r = ElicitResult::new(ElicitationAction::Accept);
        r.content = Some(json!({"answer": "blue"}));
        Ok(r)
    }
}

type Session = RunningService<RoleClient, Client>;

async fn stdio_session(s: &Setup, client: Client, extra: &[&str]) -> Session {
    let cmd = tokio::process::Command::from(s.command(extra)).configure(|c| {
        c.stderr(Stdio::null());
    });
    let transport = TokioChildProcess::new(cmd).unwrap();
    let session = client.serve(transport).await.expect("initialize over stdio");
    session.set_response_cache_config(rmcp::ClientCacheConfig::disabled()).await;
    session
}

async fn names(c: &Session) -> Vec<String> {
    c.list_all_tools().await.unwrap().into_iter().map(|t| t.name.to_string()).collect()
}

async fn call(c: &Session, name: &str, args: Value) -> CallToolResult {
    let params = CallToolRequestParams::new(name.to_string()).with_arguments(args.as_object().unwrap().clone());
    c.call_tool(params).await.unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn text(r: &CallToolResult) -> String {
    r.content.iter().filter_map(|c| c.as_text().map(|t| t.text.clone())).collect::<Vec<_>>().join("\n")
}

/// The same calls every client makes: hello, write then read a file, a bad call.
async fn exercise_tools(c: &Session, file: &str) {
    let tools = c.list_all_tools().await.unwrap();
    let hello = tools.iter().find(|t| t.name == "hello").expect("hello listed");
    assert_eq!(hello.description.as_deref(), Some("Greet someone by name."));
    assert_eq!(hello.input_schema["properties"]["name"]["type"], "string", "{:?}", hello.input_schema);
    for n in ["read_file", "write_file", "present_files", "ask_clarification"] {
        assert!(tools.iter().any(|t| t.name == n), "{n} missing");
    }

    let r = call(c, "hello", json!({"name": "MCP", "excited": true})).await;
    assert_eq!((text(&r).as_str(), r.is_error), ("Hello, MCP!", Some(false)));

    let path = format!("/mnt/user-data/workspace/{file}");
    let r =
        call(c, "write_file", json!({"description": "note", "path": path, "content": "line one\nline two\n"})).await;
    assert_eq!((text(&r).as_str(), r.is_error), ("OK", Some(false)), "{r:?}");
    let r = call(c, "read_file", json!({"description": "read it", "path": path})).await;
    assert_eq!(r.is_error, Some(false), "{r:?}");
    assert!(text(&r).contains("line one\nline two"), "{r:?}");

    let r = call(c, "hello", json!({"name": " "})).await;
    assert_eq!((text(&r).as_str(), r.is_error), ("Error: name must not be empty", Some(true)));
    // An unknown tool is the pipeline's own error text, not a protocol error.
    let r = call(c, "no_such_tool", json!({})).await;
    assert_eq!(r.is_error, Some(true));
    assert_eq!(text(&r), "Error: no_such_tool is not a valid tool, try one of the available tools.");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdio_lists_and_calls_tools_in_its_thread() {
    let s = Setup::new(false, false);
    let client = Client::default();
    let c = stdio_session(&s, client.clone(), &["--thread", "t-stdio"]).await;
    exercise_tools(&c, "stdio.txt").await;
    // The session's thread owns the files.
    let on_disk = s.data().join("threads/t-stdio/user-data/workspace/stdio.txt");
    assert_eq!(std::fs::read_to_string(&on_disk).unwrap(), "line one\nline two\n");

    // ask_clarification becomes an elicitation; the answer comes back with the question.
    let r =
        call(&c, "ask_clarification", json!({"question": "Which colour?", "clarification_type": "missing_info"})).await;
    assert_eq!(r.is_error, Some(false), "{r:?}");
    let t = text(&r);
    assert!(t.contains("Which colour?") && t.ends_with("The user answered: blue"), "{t}");
    assert_eq!(client.elicited.lock().unwrap().len(), 1);
    assert!(client.elicited.lock().unwrap()[0].contains("Which colour?"));
    c.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdio_refuses_a_bad_thread_id() {
    let s = Setup::new(false, false);
    let o = s.command(&["--thread", "../x"]).stdin(Stdio::null()).output().unwrap();
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("invalid thread id '../x'"), "{o:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deferred_tools_appear_after_tool_search_with_list_changed() {
    let s = Setup::new(true, true);
    let client = Client::default();
    let c = stdio_session(&s, client.clone(), &[]).await;
    let before = names(&c).await;
    assert!(before.contains(&"tool_search".to_string()) && before.contains(&"hello".to_string()), "{before:?}");
    assert!(!before.iter().any(|n| n.starts_with("everything_")), "{before:?}");

    let r = call(&c, "tool_search", json!({"query": "select:everything_echo"})).await;
    assert_eq!(r.is_error, Some(false), "{r:?}");
    let schemas: Value = serde_json::from_str(&text(&r)).unwrap();
    assert_eq!(schemas[0]["name"], "everything_echo", "{schemas}");
    // The notification is sent before the call's response, so it has arrived by now or soon.
    for _ in 0..50 {
        if client.list_changed.load(Ordering::SeqCst) > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(client.list_changed.load(Ordering::SeqCst), 1);

    let after = names(&c).await;
    assert!(after.contains(&"everything_echo".to_string()), "{after:?}");
    let promoted: Vec<&String> = after.iter().filter(|n| n.starts_with("everything_")).collect();
    assert_eq!(promoted, ["everything_echo"], "only the selected tool");
    let r = call(&c, "everything_echo", json!({"message": "served"})).await;
    assert_eq!(r.is_error, Some(false), "{r:?}");
    assert!(text(&r).contains("served"), "{r:?}");

    // A search that promotes nothing new sends no notification.
    let r = call(&c, "tool_search", json!({"query": "select:no_such_tool"})).await;
    assert_eq!(r.is_error, Some(false), "{r:?}");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(client.list_changed.load(Ordering::SeqCst), 1);
    c.cancel().await.unwrap();
}

#[test]
fn python_sdk_client_lists_and_calls_over_stdio() {
    let s = Setup::new(false, false);
    let python = peer("venv/bin/python");
    let script = r#"
import asyncio, json, os, sys
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

async def main():
    params = StdioServerParameters(command=sys.argv[1], args=["serve", "--config", sys.argv[2]],
                                   env={"TOOLHOST_HOME": sys.argv[3], "PATH": os.environ.get("PATH", "")})
    async with stdio_client(params) as (r, w):
        async with ClientSession(r, w) as session:
            await session.initialize()
            tools = await session.list_tools()
            hello = await session.call_tool("hello", {"name": "Python"})
            bad = await session.call_tool("hello", {"name": ""})
            print(json.dumps({
                "tools": [t.name for t in tools.tools],
                "schema": next(t.inputSchema for t in tools.tools if t.name == "hello"),
                "hello": [hello.content[0].text, hello.isError],
                "bad": [bad.content[0].text, bad.isError],
            }))

asyncio.run(main())
"#;
    let o = Command::new(python)
        .arg("-c")
        .arg(script)
        .arg(env!("CARGO_BIN_EXE_toolhost"))
        .arg(s.config())
        .arg(s.data())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out: Value = serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {o:?}"));
    let tools: Vec<&str> = out["tools"].as_array().unwrap().iter().map(|t| t.as_str().unwrap()).collect();
    assert!(tools.contains(&"hello") && tools.contains(&"read_file") && tools.contains(&"write_file"), "{out}");
    assert_eq!(out["schema"]["required"], json!(["name"]), "{out}");
    assert_eq!(out["hello"], json!(["Hello, Python.", false]));
    assert_eq!(out["bad"], json!(["Error: name must not be empty", true]));
}

/// `toolhost serve --http 127.0.0.1:0`, killed on drop.
struct HttpServer {
    child: Child,
    addr: String,
}

impl HttpServer {
    fn start(s: &Setup, extra: &[&str]) -> Self {
        let mut cmd = s.command(&["--http", "127.0.0.1:0"]);
        cmd.args(extra);
        Self::spawn(cmd)
    }

    /// Spawn a prepared `serve --http` command and wait until it says where it listens.
    fn spawn(mut cmd: Command) -> Self {
        let mut child = cmd.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let addr = loop {
            let line = lines.next().expect("server exited before listening").unwrap();
            if let Some(rest) = line.strip_prefix("toolhost: serving MCP (streamable HTTP) at http://") {
                break rest.trim_end_matches("/mcp").to_string();
            }
        };
        // Keep draining stderr so the server never blocks on a full pipe.
        std::thread::spawn(move || for _ in lines {});
        HttpServer { child, addr }
    }

    fn url(&self) -> String {
        format!("http://{}/mcp", self.addr)
    }

    /// A raw `initialize` POST with the given extra headers; returns the status code.
    fn raw_initialize(&self, headers: &[(&str, &str)]) -> u16 {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}})
        .to_string();
        let mut req = format!(
            "POST /mcp HTTP/1.1\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\n",
            body.len()
        );
        if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("host")) {
            req.push_str(&format!("Host: {}\r\n", self.addr));
        }
        for (k, v) in headers {
            req.push_str(&format!("{k}: {v}\r\n"));
        }
        req.push_str("\r\n");
        req.push_str(&body);
        let mut stream = TcpStream::connect(&self.addr).unwrap();
        stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        stream.write_all(req.as_bytes()).unwrap();
        let mut head = [0u8; 12];
        stream.read_exact(&mut head).unwrap();
        let status = String::from_utf8_lossy(&head[9..12]).into_owned();
        status.parse().unwrap_or_else(|_| panic!("bad status line: {}", String::from_utf8_lossy(&head)))
    }
}

impl HttpServer {
    /// One raw JSON-RPC POST to `/mcp` with the token, in `session` if given: (status,
    /// response head, body), read to the end (`Connection: close`).
    fn post(&self, body: &Value, token: &str, session: Option<&str>) -> (u16, String, String) {
        let body = body.to_string();
        let mut req = format!(
            "POST /mcp HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nAuthorization: Bearer {token}\r\nContent-Length: {}\r\nConnection: close\r\n",
            self.addr,
            body.len()
        );
        if let Some(id) = session {
            req.push_str(&format!("Mcp-Session-Id: {id}\r\n"));
        }
        req.push_str("\r\n");
        req.push_str(&body);
        let mut stream = TcpStream::connect(&self.addr).unwrap();
        stream.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        stream.write_all(req.as_bytes()).unwrap();
        let mut raw = Vec::new();
        stream.read_to_end(&mut raw).unwrap();
        let raw = String::from_utf8_lossy(&raw).into_owned();
        let (head, body) = raw.split_once("\r\n\r\n").unwrap_or((raw.as_str(), ""));
        let status = head.get(9..12).and_then(|s| s.parse().ok()).unwrap_or_else(|| panic!("bad response: {raw}"));
        (status, head.to_string(), body.to_string())
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn http_session(url: &str, token: Option<&str>) -> Result<Session, String> {
    let mut cfg = StreamableHttpClientTransportConfig::with_uri(url.to_string());
    if let Some(t) = token {
        cfg = cfg.auth_header(t.to_string());
    }
    let transport = StreamableHttpClientTransport::from_config(cfg);
    let session = Client::default().serve(transport).await.map_err(|e| e.to_string())?;
    session.set_response_cache_config(rmcp::ClientCacheConfig::disabled()).await;
    Ok(session)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_serves_sessions_as_threads_behind_token_and_host_checks() {
    let s = Setup::new(false, false);
    let server = HttpServer::start(&s, &["--token", "s3cret-token"]);

    let a = http_session(&server.url(), Some("s3cret-token")).await.expect("session a");
    exercise_tools(&a, "http.txt").await;

    // A second session is a second thread: it does not see the first one's file.
    let b = http_session(&server.url(), Some("s3cret-token")).await.expect("session b");
    let r = call(&b, "read_file", json!({"description": "x", "path": "/mnt/user-data/workspace/http.txt"})).await;
    assert_eq!(r.is_error, Some(true), "{r:?}");
    let threads: Vec<String> = std::fs::read_dir(s.data().join("threads"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    let owner: Vec<&String> = threads
        .iter()
        .filter(|t| s.data().join("threads").join(t).join("user-data/workspace/http.txt").exists())
        .collect();
    assert_eq!(owner.len(), 1, "{threads:?}");
    assert!(owner[0].starts_with("mcp-") && owner[0].len() > 8, "{owner:?}");
    a.cancel().await.unwrap();
    b.cancel().await.unwrap();

    // The front door: no token or a wrong one is 401; a foreign Host or Origin is refused.
    assert!(http_session(&server.url(), None).await.is_err());
    assert!(http_session(&server.url(), Some("wrong")).await.is_err());
    let ok = ("Authorization", "Bearer s3cret-token");
    assert_eq!(server.raw_initialize(&[]), 401);
    assert_eq!(server.raw_initialize(&[("Authorization", "Bearer wrong-token")]), 401);
    assert_eq!(server.raw_initialize(&[ok]), 200);
    assert_eq!(server.raw_initialize(&[ok, ("Host", "evil.example.com")]), 403);
    assert_eq!(server.raw_initialize(&[ok, ("Origin", "http://evil.example.com")]), 403);
    assert_eq!(server.raw_initialize(&[ok, ("Origin", "http://localhost:3000")]), 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_allow_host_and_token_from_env() {
    let s = Setup::new(false, false);
    let mut cmd = s.command(&["--http", "127.0.0.1:0", "--allow-host", "tools.internal"]);
    cmd.env("TOOLHOST_SERVE_TOKEN", "from-env");
    let server = HttpServer::spawn(cmd);
    let ok = ("Authorization", "Bearer from-env");
    assert_eq!(server.raw_initialize(&[]), 401);
    assert_eq!(server.raw_initialize(&[ok, ("Host", "tools.internal")]), 200);
    assert_eq!(server.raw_initialize(&[ok, ("Host", "other.internal")]), 403);
    assert_eq!(server.raw_initialize(&[ok, ("Origin", "https://tools.internal")]), 200);
    let c = http_session(&server.url(), Some("from-env")).await.expect("session");
    let r = call(&c, "hello", json!({"name": "env"})).await;
    assert_eq!(text(&r), "Hello, env.");
    c.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_promotion_reaches_the_client_as_list_changed() {
    let s = Setup::new(true, true);
    let server = HttpServer::start(&s, &[]);
    let client = Client::default();
    let mut cfg = StreamableHttpClientTransportConfig::with_uri(server.url());
    cfg = cfg.reinit_on_expired_session(false);
    let c = client.clone().serve(StreamableHttpClientTransport::from_config(cfg)).await.expect("session");
    c.set_response_cache_config(rmcp::ClientCacheConfig::disabled()).await;
    assert!(!names(&c).await.iter().any(|n| n.starts_with("everything_")));
    let r = call(&c, "tool_search", json!({"query": "select:everything_echo"})).await;
    assert_eq!(r.is_error, Some(false), "{r:?}");
    for _ in 0..50 {
        if client.list_changed.load(Ordering::SeqCst) > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(client.list_changed.load(Ordering::SeqCst), 1);
    assert!(names(&c).await.contains(&"everything_echo".to_string()));
    c.cancel().await.unwrap();
}

/// `toolhost serve` with `args` must exit with an error (without serving) within a minute;
/// returns its stderr.
fn refused_start(s: &Setup, args: &[&str], env: &[(&str, &str)]) -> String {
    let mut cmd = s.command(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("serve {args:?} kept running: it should have refused to start");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut stderr = String::new();
    child.stderr.take().unwrap().read_to_string(&mut stderr).unwrap();
    assert!(!status.success(), "{args:?}: {stderr}");
    assert!(!stderr.contains("serving MCP"), "{args:?}: {stderr}");
    stderr
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_refuses_a_public_address_without_a_token_and_an_empty_token() {
    let s = Setup::new(false, false);
    // Refused before anything binds, so no public address is ever listened on here.
    for addr in ["0.0.0.0:0", "[::]:0"] {
        let err = refused_start(&s, &["--http", addr], &[]);
        for needle in [
            format!("refusing to serve on {addr} without a token"),
            "--token TOKEN".to_string(),
            "TOOLHOST_SERVE_TOKEN".to_string(),
            "--insecure-no-auth".to_string(),
        ] {
            assert!(err.contains(&needle), "{addr}: missing {needle:?} in {err}");
        }
    }
    // An empty token never means "no authentication", on any address.
    for (args, env) in [
        (vec!["--http", "127.0.0.1:0", "--token", ""], vec![]),
        (vec!["--http", "127.0.0.1:0"], vec![("TOOLHOST_SERVE_TOKEN", "")]),
        (vec!["--http", "0.0.0.0:0", "--insecure-no-auth", "--token", " "], vec![]),
    ] {
        let err = refused_start(&s, &args, &env);
        assert!(err.contains("the serve token is empty"), "{args:?} {env:?}: {err}");
    }
    // Positive controls: loopback needs no token; `--insecure-no-auth` is accepted (on
    // loopback here, as tests touch nothing else); a token works as before.
    for extra in [&[][..], &["--insecure-no-auth"][..], &["--token", "t0ken"][..]] {
        let server = HttpServer::start(&s, extra);
        let auth = if extra.contains(&"t0ken") { vec![("Authorization", "Bearer t0ken")] } else { vec![] };
        assert_eq!(server.raw_initialize(&auth), 200, "{extra:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_thread_ids_do_not_reveal_session_ids() {
    let s = Setup::new(false, false);
    let server = HttpServer::start(&s, &["--token", "tk"]);
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}});
    let (status, head, _) = server.post(&init, "tk", None);
    assert_eq!(status, 200, "{head}");
    let session = head
        .lines()
        .find_map(|l| {
            l.split_once(':').filter(|(k, _)| k.eq_ignore_ascii_case("mcp-session-id")).map(|(_, v)| v.trim())
        })
        .unwrap_or_else(|| panic!("no session id in {head}"))
        .to_string();
    let h = Some(session.as_str());
    let (status, ..) = server.post(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}), "tk", h);
    assert!(status == 202 || status == 200, "{status}");
    let write = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "write_file",
        "arguments": {"description": "d", "path": "/mnt/user-data/workspace/secret.txt", "content": "session secret"}}});
    let (status, _, body) = server.post(&write, "tk", h);
    assert!(status == 200 && body.contains("OK"), "{status}: {body}");

    let threads = s.data().join("threads");
    let owners: Vec<String> = std::fs::read_dir(&threads)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|t| threads.join(t).join("user-data/workspace/secret.txt").exists())
        .collect();
    assert_eq!(owners.len(), 1, "{owners:?}");
    let thread = &owners[0];
    assert!(
        thread.len() == 36 && thread.starts_with("mcp-") && thread[4..].chars().all(|c| c.is_ascii_hexdigit()),
        "{thread}"
    );
    assert!(!thread.contains(&session) && !session.contains(&thread[4..]), "thread {thread} vs session {session}");

    // Knowing the directory name gets a local user nowhere: neither spelling is a session.
    let read = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "read_file",
        "arguments": {"description": "d", "path": "/mnt/user-data/workspace/secret.txt"}}});
    for guess in [thread.as_str(), &thread[4..]] {
        let (status, _, body) = server.post(&read, "tk", Some(guess));
        assert!((400..500).contains(&status), "{guess}: {status} {body}");
        assert!(!body.contains("session secret"), "{guess}: {body}");
    }
    // Positive control: the real session reads its file.
    let (status, _, body) = server.post(&read, "tk", h);
    assert!(status == 200 && body.contains("session secret"), "{status}: {body}");
}
