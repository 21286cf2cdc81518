//! Opening one MCP client session to one configured server over stdio, streamable HTTP or legacy
//! SSE, with the protocol version pinned and rmcp's stale response cache off. Also the client
//! handler that reports `notifications/tools/list_changed` back to the manager.

use std::collections::{HashMap, HashSet, VecDeque};
use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use http::{HeaderName, HeaderValue};
use process_wrap::tokio::{CommandWrap, ProcessGroup};
use rmcp::model::{ClientCapabilities, ClientConfig, Implementation, ProtocolVersion};
use rmcp::service::{NotificationContext, RunningService};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::{ClientCacheConfig, ClientHandler, RoleClient, ServiceExt};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::sync::watch;

use crate::config::{McpServerConfig, Transport};
use crate::exact::{ExactSchemas, StdioTransport};
use crate::oauth::TokenSource;
use crate::sse::SseClientTransport;
use toolhost_confine::process::{Launch, TreeGuard};
use toolhost_core::Environment;

/// Variables a stdio server inherits from the host; everything else comes from its `env`. This
/// is the Python MCP SDK's `get_default_environment()`, which DeerFlow relies on, so secrets in
/// the host environment do not leak into servers that were not given them.
const INHERITED_ENV: [&str; 6] = ["HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER"];
/// How many stderr lines of a stdio server are kept for error messages.
const STDERR_TAIL_LINES: usize = 20;

/// Servers whose tool list changed since it was last read, plus a generation counter the host
/// can watch to learn that the MCP tool set should be re-read.
#[derive(Debug)]
pub(crate) struct ChangeSignal {
    dirty: Mutex<HashSet<String>>,
    generation: watch::Sender<u64>,
}

impl ChangeSignal {
    pub(crate) fn new() -> Self {
        Self { dirty: Mutex::new(HashSet::new()), generation: watch::channel(0).0 }
    }

    pub(crate) fn mark(&self, server: &str) {
        if let Ok(mut d) = self.dirty.lock() {
            d.insert(server.to_string());
        }
        self.bump();
    }

    pub(crate) fn bump(&self) {
        self.generation.send_modify(|g| *g += 1);
    }

    pub(crate) fn take_dirty(&self) -> HashSet<String> {
        self.dirty.lock().map(|mut d| std::mem::take(&mut *d)).unwrap_or_default()
    }

    pub(crate) fn subscribe(&self) -> watch::Receiver<u64> {
        self.generation.subscribe()
    }
}

/// rmcp client handler: identifies toolhost, pins the handshake version, forwards list_changed.
#[derive(Clone)]
pub(crate) struct Hooks {
    server: String,
    signal: Arc<ChangeSignal>,
}

impl ClientHandler for Hooks {
    fn get_info(&self) -> ClientConfig {
        // rmcp defaults to 2026-07-28 in `initialize`, which handshake-era servers only tolerate;
        // 2025-11-25 is what every server in the wild negotiates.
        ClientConfig::new(ClientCapabilities::default(), Implementation::new("toolhost", env!("CARGO_PKG_VERSION")))
            .with_protocol_version(ProtocolVersion::LATEST_WITH_INITIALIZE)
    }

    async fn on_tool_list_changed(&self, _cx: NotificationContext<RoleClient>) {
        tracing::info!(server = %self.server, "MCP server reported tools/list_changed");
        self.signal.mark(&self.server);
    }
}

/// The last lines a stdio server wrote to stderr, for error messages when it dies.
#[derive(Debug, Default)]
pub(crate) struct StderrTail(Mutex<VecDeque<String>>);

impl StderrTail {
    pub(crate) fn text(&self) -> String {
        self.0.lock().map(|l| l.iter().cloned().collect::<Vec<_>>().join("\n")).unwrap_or_default()
    }
}

/// One live client session.
pub(crate) struct Session {
    pub(crate) service: RunningService<RoleClient, Hooks>,
    pub(crate) stderr: Option<Arc<StderrTail>>,
    /// When the OAuth token this session was opened with is due for refresh.
    pub(crate) valid_until: Option<Instant>,
    /// The listed tools' schemas with numbers serde_json cannot keep (stdio servers).
    pub(crate) exact: Option<Arc<ExactSchemas>>,
    /// A confined stdio server's process tree: killed when the session goes.
    pub(crate) _tree: Option<TreeGuard>,
}

impl Session {
    /// False once the connection is gone or its token is due for refresh.
    pub(crate) fn is_usable(&self) -> bool {
        !self.service.is_closed()
            && !self.service.peer().is_transport_closed()
            && self.valid_until.is_none_or(|t| Instant::now() < t)
    }

    /// ` (stderr: …)` with the server's last stderr lines, or nothing.
    pub(crate) fn stderr_note(&self) -> String {
        stderr_note(self.stderr.as_deref())
    }
}

pub(crate) fn stderr_note(tail: Option<&StderrTail>) -> String {
    match tail.map(StderrTail::text).filter(|t| !t.trim().is_empty()) {
        Some(t) => format!(" (stderr: {})", t.trim()),
        None => String::new(),
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    #[error("{0}")]
    Config(String),
    #[error("cannot start {command:?}: {source}")]
    Spawn { command: String, source: std::io::Error },
    #[error("{0}")]
    OAuth(#[from] crate::oauth::OAuthError),
    #[error("{0}")]
    Sse(#[from] crate::sse::SseError),
    #[error("initialize failed: {message}{stderr}")]
    Initialize { message: String, stderr: String },
    /// A stdio server that cannot run confined (and was not configured `confine: false`).
    #[error("not started: {0}")]
    Confine(String),
}

/// Everything needed to open sessions to one server.
pub(crate) struct ServerHandle {
    pub(crate) name: String,
    pub(crate) config: McpServerConfig,
    pub(crate) transport: Transport,
    pub(crate) tokens: Option<TokenSource>,
    signal: Arc<ChangeSignal>,
    /// How a stdio server's process is started.
    launch: Launch,
    /// The host environment: what a stdio server inherits and a grant passes through.
    env: Environment,
}

impl ServerHandle {
    /// Check what can be checked without connecting: transport, command/url, oauth fields.
    pub(crate) fn new(
        name: &str,
        config: McpServerConfig,
        signal: Arc<ChangeSignal>,
        launch: Launch,
        env: Environment,
    ) -> Result<Self, ConnectError> {
        let transport = config.transport().map_err(ConnectError::Config)?;
        match transport {
            Transport::Stdio => {
                if config.command.as_deref().unwrap_or("").is_empty() {
                    return Err(ConnectError::Config("stdio server needs a 'command'".into()));
                }
            }
            Transport::Http | Transport::Sse => {
                if config.url.as_deref().unwrap_or("").is_empty() {
                    return Err(ConnectError::Config(format!(
                        "{} server needs a 'url'",
                        if transport == Transport::Http { "http" } else { "sse" }
                    )));
                }
            }
        }
        let tokens = match &config.oauth {
            Some(o) if o.enabled && transport != Transport::Stdio => Some(TokenSource::new(o.clone())?),
            _ => None,
        };
        if let (Transport::Stdio, Launch::Refused(why)) = (transport, &launch) {
            return Err(ConnectError::Confine(why.clone()));
        }
        Ok(Self { name: name.to_string(), config, transport, tokens, signal, launch, env })
    }

    /// Open and initialize a session. `cwd` applies to stdio servers only (the thread workspace);
    /// their temp dir goes under it too (`.mcp/tmp`), as in DeerFlow.
    pub(crate) async fn connect(&self, cwd: Option<&Path>) -> Result<Session, ConnectError> {
        let hooks = Hooks { server: self.name.clone(), signal: self.signal.clone() };
        let (service, stderr, valid_until, exact, tree) = match self.transport {
            Transport::Stdio => {
                let exact = Arc::new(ExactSchemas::default());
                let (transport, tail, tree) = self.spawn_stdio(cwd, exact.clone()).await?;
                let service = match hooks.serve(transport).await {
                    Ok(s) => s,
                    Err(e) => {
                        // Give the stderr reader a moment: a crashing server's last words say why.
                        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                        return Err(ConnectError::Initialize {
                            message: e.to_string(),
                            stderr: stderr_note(Some(&tail)),
                        });
                    }
                };
                (service, Some(tail), None, Some(exact), tree)
            }
            Transport::Http => {
                let (headers, valid_until) = self.http_headers().await?;
                let url = self.config.url.clone().unwrap_or_default();
                let cfg = StreamableHttpClientTransportConfig::with_uri(url)
                    .custom_headers(headers)
                    .max_json_response_size(64 << 20)
                    .reinit_on_expired_session(true);
                let transport = StreamableHttpClientTransport::from_config(cfg);
                let service = hooks
                    .serve(transport)
                    .await
                    .map_err(|e| ConnectError::Initialize { message: e.to_string(), stderr: String::new() })?;
                (service, None, valid_until, None, None)
            }
            Transport::Sse => {
                let (headers, valid_until) = self.http_headers().await?;
                let transport = SseClientTransport::connect(self.config.url.as_deref().unwrap_or(""), &headers).await?;
                let exact = transport.exact_schemas();
                let service = hooks
                    .serve(transport)
                    .await
                    .map_err(|e| ConnectError::Initialize { message: e.to_string(), stderr: String::new() })?;
                (service, None, valid_until, Some(exact), None)
            }
        };
        // rmcp serves a stale tools/list from its cache when the server has died; we want the error.
        service.peer().set_response_cache_config(ClientCacheConfig::disabled()).await;
        Ok(Session { service, stderr, valid_until, exact, _tree: tree })
    }

    async fn http_headers(&self) -> Result<(HashMap<HeaderName, HeaderValue>, Option<Instant>), ConnectError> {
        let mut headers = HashMap::new();
        headers.insert(HeaderName::from_static(crate::INSTANCE_HEADER), HeaderValue::from_static(crate::instance_id()));
        for (k, v) in &self.config.headers {
            let name = HeaderName::try_from(k.as_str())
                .map_err(|_| ConnectError::Config(format!("invalid header name {k:?}")))?;
            let value = HeaderValue::try_from(v.as_str())
                .map_err(|_| ConnectError::Config(format!("invalid value of header {k:?}")))?;
            headers.insert(name, value);
        }
        let mut valid_until = None;
        if let Some(tokens) = &self.tokens {
            let (auth, until) = tokens.header().await?;
            let value = HeaderValue::try_from(auth)
                .map_err(|_| ConnectError::Config("oauth token is not a valid header value".into()))?;
            headers.insert(http::header::AUTHORIZATION, value);
            valid_until = Some(until);
        }
        Ok((headers, valid_until))
    }

    async fn spawn_stdio(
        &self,
        cwd: Option<&Path>,
        exact: Arc<ExactSchemas>,
    ) -> Result<(StdioTransport, Arc<StderrTail>, Option<TreeGuard>), ConnectError> {
        let command = self.config.command.clone().unwrap_or_default();
        let mut cmd = tokio::process::Command::new(&command);
        cmd.args(&self.config.args).env_clear();
        for key in INHERITED_ENV {
            if let Some(v) = self.env.get(key) {
                cmd.env(key, v);
            }
        }
        let tree = match &self.launch {
            Launch::Confined(confiner) => {
                // The self-test runs once per server, before its first process.
                confiner.self_test().await.map_err(|e| ConnectError::Confine(e.to_string()))?;
                let prepared = confiner.prepare(cwd).await.map_err(|e| ConnectError::Confine(e.to_string()))?;
                // The grant's pass-through names, then the entry's own env, then the launch's
                // home, tmp and proxy (which nothing configured may override).
                for key in &confiner.spec().env {
                    if let Some(v) = self.env.get(key) {
                        cmd.env(key, v);
                    }
                }
                cmd.envs(&self.config.env);
                cmd.env(crate::CHILD_MARKER, "1");
                Some(prepared.install(cmd.as_std_mut()))
            }
            Launch::Unconfined | Launch::Refused(_) => {
                if let Some(dir) = cwd {
                    let tmp = dir.join(".mcp").join("tmp");
                    std::fs::create_dir_all(&tmp)
                        .map_err(|source| ConnectError::Spawn { command: command.clone(), source })?;
                    cmd.current_dir(dir).env("TMPDIR", &tmp).env("TMP", &tmp).env("TEMP", &tmp);
                }
                cmd.envs(&self.config.env);
                cmd.env(crate::CHILD_MARKER, "1");
                None
            }
        };
        // rmcp kills the child from a spawned task on drop, which never runs once the runtime is
        // shutting down; this makes the kill synchronous in that case.
        cmd.kill_on_drop(true);
        let mut wrapped = CommandWrap::from(cmd);
        // Own process group: a server started through a wrapper (npx, uvx, sh) dies with all its
        // children when the session is dropped.
        wrapped.wrap(ProcessGroup::leader());
        wrapped.command_mut().stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
        let spawn_error = |source| ConnectError::Spawn { command: command.clone(), source };
        let mut child = wrapped.spawn().map_err(spawn_error)?;
        let (Some(stdin), Some(stdout)) = (child.stdin().take(), child.stdout().take()) else {
            return Err(spawn_error(std::io::Error::other("the child's stdin or stdout is not a pipe")));
        };
        let stderr = child.stderr().take();
        // Read through an observer: rmcp's own child-process transport decodes the server's lines
        // where no exact number survives (see `exact`).
        let transport = StdioTransport::new(child, stdout, stdin, exact);
        let tail = Arc::new(StderrTail::default());
        if let Some(stderr) = stderr {
            let tail = tail.clone();
            let server = self.name.clone();
            tokio::spawn(async move {
                let mut lines = BufReader::new(stderr).lines();
                while let Ok(Some(line)) = lines.next_line().await {
                    tracing::debug!(server = %server, "stderr: {line}");
                    if let Ok(mut t) = tail.0.lock() {
                        if t.len() == STDERR_TAIL_LINES {
                            t.pop_front();
                        }
                        t.push_back(line);
                    }
                }
            });
        }
        Ok((transport, tail, tree))
    }
}
