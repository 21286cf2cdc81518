//! `toolhost serve`: the assembled tool set as an MCP server, over stdio or streamable HTTP.
//! Owns the mapping MCP session → toolhost thread (and the threads a request names), tools/list
//! and tools/call in that thread, the screening of what clients send, and the HTTP front door
//! (connection caps and timeouts, Host/Origin checks, bearer token, session caps).

mod call_log;
mod client;
mod connections;
mod handler;
mod http_server;
pub mod jsonrpc;
pub mod listen;
pub mod mrtr;
mod param_headers;
mod resources;
mod skills;
mod sse_poll;
mod stdio;
pub mod tasks;
pub mod threads;

use std::net::SocketAddr;
use std::sync::Arc;

use rmcp::ServiceExt as _;

use toolhost::AssemblyRequest;
use toolhost::Toolhost;

pub use handler::{
    outcome_to_result, McpSessionHandler, Opening, Served, ToolFilter, ERROR_TEXT_MAX_CHARS, META_TASK_SUPPORT,
};
pub use http_server::{check_auth, serve_http, HttpOptions, MCP_PATH};
pub use stdio::ScreenedLines;
pub use threads::{fresh_thread_id, ThreadKeeper, META_THREAD, THREAD_HEADER};

/// Set in the environment of every stdio MCP server toolhost starts. A toolhost that finds it
/// was started by a toolhost, so it starts no MCP servers of its own: a config whose
/// extensions list toolhost itself (through a wrapper its binary check cannot see through)
/// stops at one level instead of starting itself over and over.
pub const CHILD_MARKER: &str = toolhost_mcp::CHILD_MARKER;

/// Why serving could not start or stopped.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("invalid thread id '{0}': use 1-128 characters of [A-Za-z0-9_-]")]
    /// The thread id cannot name a directory.
    InvalidThread(String),
    #[error("cannot listen on {addr}: {source}")]
    /// The address cannot be bound.
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The underlying error.
        source: std::io::Error,
    },
    #[error("invalid --http address '{addr}': {reason}")]
    /// The `--http` address is not `host:port`.
    InvalidAddress {
        /// The address.
        addr: String,
        /// Why it is not usable.
        reason: String,
    },
    #[error("the MCP session over stdio failed: {0}")]
    /// The stdio session failed.
    Stdio(String),
    #[error("invalid --allow-host '{0}': give a host name or host:port")]
    /// An `--allow-host` value is not a host name or host:port.
    InvalidAllowHost(String),
    #[error(
        "refusing to serve on {addr} without a token: it is not a loopback address, so anyone who can reach it \
         could run tools. Require a bearer token with --token TOKEN (or TOOLHOST_SERVE_TOKEN=TOKEN), or pass \
         --insecure-no-auth to serve without authentication anyway"
    )]
    /// A non-loopback address without a token (and without `insecure_no_auth`).
    PublicWithoutToken {
        /// The address.
        addr: String,
    },
    #[error(
        "the serve token is empty (--token \"\" or TOOLHOST_SERVE_TOKEN=\"\"), which would turn authentication off; \
         give a non-empty token, or leave both unset"
    )]
    /// The token is empty.
    EmptyToken,
    #[error("cannot make a thread id: {0}")]
    /// The system random number generator failed.
    Random(std::io::Error),
    #[error("{0}")]
    /// The host could not be opened.
    Open(String),
    #[error("cannot seal request state: {0}")]
    /// The `requestState` key is unusable (too short) or none could be drawn.
    StateKey(String),
}

pub use toolhost::ServeConfig;

/// What `toolhost serve` was asked for.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    /// `None`: stdio. `Some(addr)`: streamable HTTP at `http://addr/mcp`; `addr` is
    /// `host:port` with an IP address or a host name (port 0 picks one).
    pub http: Option<String>,
    /// stdio: the thread of the session (default: a fresh `stdio-…` thread). HTTP: ignored,
    /// every MCP session gets its own thread.
    pub thread: Option<String>,
    /// Host names accepted besides the loopback ones (HTTP only).
    pub allow_hosts: Vec<String>,
    /// Required `Authorization: Bearer` token (HTTP only). Must not be empty.
    pub token: Option<String>,
    /// HTTP: serve a non-loopback address without a token (refused otherwise).
    pub insecure_no_auth: bool,
    /// What every session's tools are assembled for (groups, model, …).
    pub request: AssemblyRequest,
    /// Serve as this custom agent (`<data>/users/USER/agents/NAME/config.yaml` of the request's
    /// user, or the legacy `<data>/agents/NAME/`), applied to `request` once
    /// the host is open (see [`Toolhost::agent_request`]).
    pub agent: Option<String>,
    /// Which assembled tools are served.
    pub filter: ToolFilter,
    /// Sessions and thread expiry.
    pub limits: ServeConfig,
    /// This server was started by another toolhost as one of its MCP servers (the CLI sets it
    /// when [`CHILD_MARKER`] is in its environment): it starts no MCP servers of its own.
    pub child_of_toolhost: bool,
    /// The key that seals `requestState` (the CLI passes [`mrtr::STATE_KEY_ENV`]); `None`: a
    /// fresh random one.
    pub state_key: Option<String>,
}

/// The addresses `host:port` stands for (a host name may resolve to several).
pub fn resolve_http(addr: &str) -> Result<Vec<SocketAddr>, ServeError> {
    use std::net::ToSocketAddrs as _;
    let invalid = |reason: String| ServeError::InvalidAddress { addr: addr.to_string(), reason };
    let mut addrs: Vec<SocketAddr> = addr
        .to_socket_addrs()
        .map_err(|e| invalid(format!("{e} (give host:port, e.g. 127.0.0.1:8765 or localhost:8765)")))?
        .collect();
    addrs.dedup();
    if addrs.is_empty() {
        return Err(invalid("the host name resolves to no address".into()));
    }
    Ok(addrs)
}

impl ServeOptions {
    /// The HTTP settings for serving at `addr`.
    pub fn http_options(&self, addr: &str) -> Result<HttpOptions, ServeError> {
        Ok(HttpOptions {
            display: addr.to_string(),
            addrs: resolve_http(addr)?,
            allow_hosts: self.allow_hosts.clone(),
            token: self.token.clone(),
            insecure_no_auth: self.insecure_no_auth,
            max_sessions: self.limits.max_sessions,
            max_sessions_per_client: self.limits.sessions_per_client(),
            max_connections: self.limits.max_connections,
            max_connections_per_client: self.limits.max_connections_per_client,
            reserved_connections: self.limits.reserved_connections,
            header_timeout: self.limits.header_timeout(),
            body_timeout: self.limits.body_timeout(),
            session_idle_timeout: self.limits.session_idle_timeout(),
            sse_poll_after: self.limits.sse_poll_after(),
        })
    }
}

/// The host, opened in the background (a cold start compiles every component).
pub type HostOpening = std::pin::Pin<Box<dyn std::future::Future<Output = Result<Arc<Toolhost>, String>> + Send>>;

/// Serve until the client goes away (stdio) or the process is stopped (HTTP). Sessions start
/// at once and answer `initialize`; their requests wait until `host` is open. When it cannot be
/// opened, serving stops with that error.
pub async fn run(data_dir: &std::path::Path, host: HostOpening, mut opts: ServeOptions) -> Result<(), ServeError> {
    let http = opts.http.as_deref().map(|addr| opts.http_options(addr)).transpose()?;
    if let Some(thread) = opts.thread.as_ref().filter(|_| http.is_none()) {
        if toolhost_core::ThreadPaths::new(std::path::Path::new(""), thread).is_err() {
            return Err(ServeError::InvalidThread(thread.clone()));
        }
    }
    if opts.child_of_toolhost && opts.request.include_mcp {
        tracing::warn!(
            "started as an MCP server of another toolhost ({CHILD_MARKER} is set): not starting MCP servers of its \
             own, so that a config listing toolhost itself does not start toolhost again and again"
        );
        opts.request.include_mcp = false;
    }
    let state_seal = Arc::new(mrtr::StateSeal::from_key(opts.state_key.take()).map_err(ServeError::StateKey)?);
    let keeper = ThreadKeeper::new(data_dir, opts.limits.thread_ttl());
    let (ready, opening) = tokio::sync::watch::channel(None);
    let opening = Opening(opening);
    let (request, filter, agent) = (opts.request.clone(), opts.filter.clone(), opts.agent.clone());
    let setup = {
        let keeper = keeper.clone();
        async move {
            let host = match host.await {
                Ok(host) => host,
                Err(e) => {
                    ready.send_replace(Some(Err(Arc::from(e.as_str()))));
                    return Err(ServeError::Open(e));
                }
            };
            let request = match agent {
                Some(name) => match host.agent_request(&name, request) {
                    Ok(r) => r,
                    Err(e) => {
                        let e = e.to_string();
                        ready.send_replace(Some(Err(Arc::from(e.as_str()))));
                        return Err(ServeError::Open(e));
                    }
                },
                None => request,
            };
            keeper.attach(host.clone());
            let served = Arc::new(Served {
                host,
                request,
                filter,
                param_headers: Default::default(),
                state_seal,
                listeners: Default::default(),
            });
            // Before sessions may call: rmcp checks Mcp-Param headers against this table.
            served.refresh_param_headers().await;
            ready.send_replace(Some(Ok(served.clone())));
            warn_unknown_tool_names(&served.host, &served.request, &served.filter).await;
            Ok(())
        }
    };
    let serving: std::pin::Pin<Box<dyn std::future::Future<Output = Result<(), ServeError>> + Send>> = match http {
        None => {
            let thread = match opts.thread {
                Some(t) => t,
                None => fresh_thread_id("stdio-").map_err(ServeError::Random)?,
            };
            Box::pin(serve_stdio(opening, keeper, thread))
        }
        Some(http) => {
            if opts.thread.is_some() {
                tracing::warn!("--thread is ignored with --http: every MCP session is its own thread");
            }
            Box::pin(serve_http(opening, keeper, http, |bound| {
                // Announced on stderr so scripts (and tests) can pick up a port chosen with `:0`.
                eprintln!("toolhost: serving MCP (streamable HTTP) at http://{bound}/mcp");
            }))
        }
    };
    tokio::pin!(serving);
    tokio::select! {
        done = &mut serving => return done,
        opened = setup => opened?,
    }
    serving.await
}

/// `--tools` / `--exclude` naming a tool the assembly does not have is most likely a typo.
async fn warn_unknown_tool_names(host: &Toolhost, request: &AssemblyRequest, filter: &ToolFilter) {
    let named: Vec<&String> = filter.only.iter().flatten().chain(&filter.exclude).collect();
    if named.is_empty() {
        return;
    }
    let assembly = host.get_available_tools(request).await;
    let mut known: Vec<&str> = assembly.spec_refs().map(|s| s.name.as_str()).collect();
    if let Some(d) = &assembly.deferred {
        known.extend(d.setup.deferred_names.iter().map(String::as_str));
    }
    for name in named {
        if !known.contains(&name.as_str()) {
            tracing::warn!("--tools/--exclude name '{name}', which is not an assembled tool");
        }
    }
}

/// One MCP session over this process's stdin/stdout, in `thread`.
pub async fn serve_stdio(opening: Opening, keeper: Arc<ThreadKeeper>, thread: String) -> Result<(), ServeError> {
    if toolhost_core::ThreadPaths::new(std::path::Path::new(""), &thread).is_err() {
        return Err(ServeError::InvalidThread(thread));
    }
    let session = McpSessionHandler::new(opening, keeper, thread, Default::default());
    let (read, write) = rmcp::transport::stdio_pipes();
    let running = session.serve(ScreenedLines::new(read, write)).await.map_err(|e| ServeError::Stdio(e.to_string()))?;
    running.waiting().await.map_err(|e| ServeError::Stdio(e.to_string()))?;
    Ok(())
}
