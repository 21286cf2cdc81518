//! The harness of the `serve` tests: a temp dir with a config, `toolhost serve` over stdio and
//! HTTP, an rmcp client that counts `tools/list_changed` and answers elicitations, raw HTTP.
#![allow(dead_code)]

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

use super::paths::peer;

/// A temp dir with a config.yaml (hello + DeerFlow's file tools), an optional
/// extensions_config.json and the data dir.
pub struct Setup {
    pub dir: tempfile::TempDir,
}

impl Setup {
    /// [`Setup::new`] plus the `hostile` component's `spin` (a loop that never ends, 120 s
    /// timeout) and `ok`, for the cancellation tests.
    pub fn with_spin() -> Self {
        let s = Setup::new(false, false);
        let hostile = std::path::Path::new(toolhost::bundled::GUEST_DIR).join("hostile.wasm");
        let config = std::fs::read_to_string(s.config()).unwrap().replace(
            "tool_search:",
            &format!(
                "  - {{name: spin, group: hostile, use: '{w}:spin', capabilities: {{timeout_s: 120}}}}\n  - {{name: ok, group: hostile, use: '{w}:ok'}}\ntool_search:",
                w = hostile.display()
            ),
        );
        std::fs::write(s.config(), config).unwrap();
        s
    }

    /// [`Setup::new`] plus these tools of the `conformance-fixture` component.
    pub fn with_fixture(tools: &[&str]) -> Self {
        Self::with_fixture_keys(&tools.iter().map(|t| (*t, "")).collect::<Vec<_>>())
    }

    /// [`Setup::with_fixture`], each tool with extra config keys (`, capabilities: {…}`).
    pub fn with_fixture_keys(tools: &[(&str, &str)]) -> Self {
        let s = Setup::new(false, false);
        let fixture = std::path::Path::new(toolhost::bundled::GUEST_DIR).join("conformance_fixture.wasm");
        let entries: String = tools
            .iter()
            .map(|(t, extra)| {
                format!("  - {{name: {t}, group: conformance, use: '{}:{t}'{extra}}}\n", fixture.display())
            })
            .collect();
        let config =
            std::fs::read_to_string(s.config()).unwrap().replace("tool_search:", &format!("{entries}tool_search:"));
        std::fs::write(s.config(), config).unwrap();
        s
    }

    pub fn new(everything: bool, tool_search: bool) -> Self {
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

    pub fn config(&self) -> PathBuf {
        self.dir.path().join("config.yaml")
    }

    pub fn data(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    pub fn command(&self, extra: &[&str]) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_toolhost"));
        c.arg("serve").arg("--config").arg(self.config()).args(extra);
        c.env("TOOLHOST_HOME", self.data())
            .env_remove("DEER_FLOW_EXTENSIONS_CONFIG_PATH")
            .env_remove("TOOLHOST_SERVE_TOKEN");
        c
    }
}

/// An MCP client that counts `tools/list_changed`, answers elicitations with "blue" and offers
/// one root, `file:///home/test/project`.
#[derive(Clone, Default)]
pub struct Client {
    pub list_changed: Arc<AtomicUsize>,
    pub elicited: Arc<std::sync::Mutex<Vec<String>>>,
}

impl ClientHandler for Client {
    fn get_info(&self) -> ClientConfig {
        let caps: ClientCapabilities =
            serde_json::from_value(json!({"elicitation": {"form": {}}, "roots": {}})).unwrap();
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

    // Roots are deprecated by the 2026-07-28 revision (SEP-2577), which these sessions predate.
    #[allow(deprecated)]
    async fn list_roots(&self, _cx: RequestContext<RoleClient>) -> Result<rmcp::model::ListRootsResult, ErrorData> {
        Ok(serde_json::from_value(json!({"roots": [{"uri": "file:///home/test/project", "name": "project"}]})).unwrap())
    }
}

pub type Session = RunningService<RoleClient, Client>;

pub async fn stdio_session(s: &Setup, client: Client, extra: &[&str]) -> Session {
    let cmd = tokio::process::Command::from(s.command(extra)).configure(|c| {
        c.stderr(Stdio::null());
    });
    let transport = TokioChildProcess::new(cmd).unwrap();
    let session = client.serve(transport).await.expect("initialize over stdio");
    session.set_response_cache_config(rmcp::ClientCacheConfig::disabled()).await;
    session
}

pub async fn names(c: &Session) -> Vec<String> {
    c.list_all_tools().await.unwrap().into_iter().map(|t| t.name.to_string()).collect()
}

pub async fn call(c: &Session, name: &str, args: Value) -> CallToolResult {
    let params = CallToolRequestParams::new(name.to_string()).with_arguments(args.as_object().unwrap().clone());
    c.call_tool(params).await.unwrap_or_else(|e| panic!("{name}: {e}"))
}

pub fn text(r: &CallToolResult) -> String {
    r.content.iter().filter_map(|c| c.as_text().map(|t| t.text.clone())).collect::<Vec<_>>().join("\n")
}

/// `toolhost serve --http 127.0.0.1:0`, killed on drop.
pub struct HttpServer {
    pub child: Child,
    pub addr: String,
}

impl HttpServer {
    pub fn start(s: &Setup, extra: &[&str]) -> Self {
        let mut cmd = s.command(&["--http", "127.0.0.1:0"]);
        cmd.args(extra);
        Self::spawn(cmd)
    }

    /// Spawn a prepared `serve --http` command and wait until it says where it listens.
    pub fn spawn(mut cmd: Command) -> Self {
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

    pub fn url(&self) -> String {
        format!("http://{}/mcp", self.addr)
    }

    /// A raw `initialize` POST with the given extra headers; returns the status code.
    pub fn raw_initialize(&self, headers: &[(&str, &str)]) -> u16 {
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
    pub fn post(&self, body: &Value, token: &str, session: Option<&str>) -> (u16, String, String) {
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

pub async fn http_session(url: &str, token: Option<&str>) -> Result<Session, String> {
    let mut cfg = StreamableHttpClientTransportConfig::with_uri(url.to_string());
    if let Some(t) = token {
        cfg = cfg.auth_header(t.to_string());
    }
    let transport = StreamableHttpClientTransport::from_config(cfg);
    let session = Client::default().serve(transport).await.map_err(|e| e.to_string())?;
    session.set_response_cache_config(rmcp::ClientCacheConfig::disabled()).await;
    Ok(session)
}

impl HttpServer {
    /// One raw request to `/mcp` (`Connection: close`): (status, response head, body).
    pub fn raw(&self, method: &str, body: &[u8], headers: &[(&str, &str)]) -> (u16, String, String) {
        let mut req = format!(
            "{method} /mcp HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\n",
            self.addr,
            body.len()
        )
        .into_bytes();
        for (k, v) in headers {
            req.extend_from_slice(format!("{k}: {v}\r\n").as_bytes());
        }
        req.extend_from_slice(b"\r\n");
        req.extend_from_slice(body);
        let mut stream = TcpStream::connect(&self.addr).unwrap();
        stream.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
        stream.write_all(&req).unwrap();
        let mut raw = Vec::new();
        stream.read_to_end(&mut raw).unwrap();
        let raw = String::from_utf8_lossy(&raw).into_owned();
        let (head, body) = raw.split_once("\r\n\r\n").unwrap_or((raw.as_str(), ""));
        let status = head.get(9..12).and_then(|s| s.parse().ok()).unwrap_or_else(|| panic!("bad response: {raw}"));
        (status, head.to_string(), body.to_string())
    }

    /// A raw session: `initialize` and `notifications/initialized`; returns the session id.
    pub fn raw_session(&self, headers: &[(&str, &str)]) -> String {
        let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}});
        let (status, head, body) = self.raw("POST", init.to_string().as_bytes(), headers);
        assert_eq!(status, 200, "{head}\n{body}");
        let session = header(&head, "mcp-session-id").unwrap_or_else(|| panic!("no session id in {head}"));
        let mut with = headers.to_vec();
        with.push(("Mcp-Session-Id", &session));
        let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        let (status, ..) = self.raw("POST", note.to_string().as_bytes(), &with);
        assert!(status == 202 || status == 200, "{status}");
        session
    }
}

/// A header's value in a response head.
pub fn header(head: &str, name: &str) -> Option<String> {
    head.lines().find_map(|l| {
        l.split_once(':').filter(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.trim().to_string())
    })
}

/// The JSON-RPC messages in a response body, plain JSON or SSE `data:` lines.
pub fn messages(body: &str) -> Vec<Value> {
    if let Ok(v) = serde_json::from_str::<Value>(body.trim()) {
        return vec![v];
    }
    body.lines().filter_map(|l| l.strip_prefix("data:")).filter_map(|d| serde_json::from_str(d.trim()).ok()).collect()
}

/// `toolhost serve` over stdio driven line by line, killed on drop.
pub struct RawStdio {
    pub child: Child,
    stdin: std::process::ChildStdin,
    lines: std::sync::mpsc::Receiver<String>,
}

impl RawStdio {
    pub fn start(s: &Setup, extra: &[&str]) -> Self {
        let mut child =
            s.command(extra).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::null()).spawn().unwrap();
        let stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { return };
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        let mut me = RawStdio { child, stdin, lines };
        me.send(
            json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}})
            .to_string()
            .as_bytes(),
        );
        let init = me.next();
        assert!(init["result"]["serverInfo"]["name"] == "toolhost", "{init}");
        me.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}).to_string().as_bytes());
        me
    }

    /// Write one line (the newline is added).
    pub fn send(&mut self, line: &[u8]) {
        self.stdin.write_all(line).unwrap();
        self.stdin.write_all(b"\n").unwrap();
        self.stdin.flush().unwrap();
    }

    /// The next message the server writes (within a minute).
    pub fn next(&mut self) -> Value {
        let line = self.lines.recv_timeout(Duration::from_secs(60)).expect("the server answered nothing");
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}"))
    }

    /// Whether the server writes anything within `wait`.
    pub fn silent_for(&mut self, wait: Duration) -> bool {
        self.lines.recv_timeout(wait).is_err()
    }
}

impl Drop for RawStdio {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Seconds of CPU time process `pid` has used (user + system).
pub fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let f: Vec<f64> =
        stat.rsplit(')').next().unwrap().split_whitespace().skip(11).take(2).map(|x| x.parse().unwrap()).collect();
    (f[0] + f[1]) / 100.0
}

/// Wait until process `pid` has used `seconds` of CPU beyond `from` (a guest is computing), for
/// at most `within`. Counting CPU seconds rather than a fraction of a wall-clock window holds on
/// a loaded machine: a computing guest gets there, however slowly, and an idle one never does.
pub fn wait_for_cpu(pid: u32, from: f64, seconds: f64, within: std::time::Duration) {
    let deadline = std::time::Instant::now() + within;
    while cpu_seconds(pid) - from < seconds {
        assert!(
            std::time::Instant::now() < deadline,
            "{pid} used {:.2} s of CPU in {within:?}, not {seconds} s: nothing is computing",
            cpu_seconds(pid) - from
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// Wait until process `pid` has stopped computing: a quiet half second (under 0.05 s of CPU)
/// within `within`, then the CPU it uses over the next two seconds. An idle process uses next to
/// nothing however loaded the machine; a guest still computing on a loaded 2-core machine still
/// gets a share of a core, well above the 0.1 s callers allow.
pub fn settled_cpu(pid: u32, within: std::time::Duration) -> f64 {
    let deadline = std::time::Instant::now() + within;
    loop {
        let c0 = cpu_seconds(pid);
        std::thread::sleep(std::time::Duration::from_millis(500));
        if cpu_seconds(pid) - c0 < 0.05 {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{pid} kept computing for {within:?}");
    }
    let c0 = cpu_seconds(pid);
    std::thread::sleep(std::time::Duration::from_secs(2));
    cpu_seconds(pid) - c0
}
