//! `toolhost serve`: the assembled tool set as an MCP server, over stdio or streamable HTTP.
//! Owns the mapping MCP session → toolhost thread, tools/list and tools/call in that thread, and
//! the HTTP front door (Host/Origin checks, bearer token).

mod handler;
mod http_server;

use std::net::SocketAddr;
use std::sync::Arc;

use rmcp::ServiceExt as _;

use crate::assembly::AssemblyRequest;
use crate::host::Toolhost;

pub use handler::{outcome_to_result, sanitize_thread_id, session_thread_id, McpSessionHandler};
pub use http_server::{check_auth, serve_http, HttpOptions, MCP_PATH};

/// The thread of the one stdio session when `--thread` is not given.
pub const STDIO_THREAD: &str = "stdio";

#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("invalid thread id '{0}': use 1-128 characters of [A-Za-z0-9_-]")]
    InvalidThread(String),
    #[error("cannot listen on {addr}: {source}")]
    Bind { addr: SocketAddr, source: std::io::Error },
    #[error("the MCP session over stdio failed: {0}")]
    Stdio(String),
    #[error("invalid --allow-host '{0}': give a host name or host:port")]
    InvalidAllowHost(String),
    #[error(
        "refusing to serve on {addr} without a token: it is not a loopback address, so anyone who can reach it \
         could run tools. Require a bearer token with --token TOKEN (or TOOLHOST_SERVE_TOKEN=TOKEN), or pass \
         --insecure-no-auth to serve without authentication anyway"
    )]
    PublicWithoutToken { addr: SocketAddr },
    #[error(
        "the serve token is empty (--token \"\" or TOOLHOST_SERVE_TOKEN=\"\"), which would turn authentication off; \
         give a non-empty token, or leave both unset"
    )]
    EmptyToken,
}

/// What `toolhost serve` was asked for.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    /// `None`: stdio. `Some(addr)`: streamable HTTP at `http://addr/mcp` (port 0 picks one).
    pub http: Option<SocketAddr>,
    /// stdio: the thread of the session (default [`STDIO_THREAD`]). HTTP: ignored, every MCP
    /// session gets its own thread.
    pub thread: Option<String>,
    /// Host names accepted besides the loopback ones (HTTP only).
    pub allow_hosts: Vec<String>,
    /// Required `Authorization: Bearer` token (HTTP only). Must not be empty.
    pub token: Option<String>,
    /// HTTP: serve a non-loopback address without a token (refused otherwise).
    pub insecure_no_auth: bool,
    /// What every session's tools are assembled for (groups, model, …).
    pub request: AssemblyRequest,
}

impl ServeOptions {
    /// The HTTP settings for serving at `addr`.
    pub fn http_options(&self, addr: SocketAddr) -> HttpOptions {
        HttpOptions {
            addr,
            allow_hosts: self.allow_hosts.clone(),
            token: self.token.clone(),
            insecure_no_auth: self.insecure_no_auth,
        }
    }
}

/// Serve until the client goes away (stdio) or the process is stopped (HTTP).
pub async fn run(host: Arc<Toolhost>, opts: ServeOptions) -> Result<(), ServeError> {
    let http = opts.http.map(|addr| opts.http_options(addr));
    let request = Arc::new(opts.request);
    match http {
        None => {
            let thread = opts.thread.unwrap_or_else(|| STDIO_THREAD.to_string());
            serve_stdio(host, request, thread).await
        }
        Some(http) => {
            if opts.thread.is_some() {
                tracing::warn!("--thread is ignored with --http: every MCP session is its own thread");
            }
            serve_http(host, request, http, |bound| {
                // Announced on stderr so scripts (and tests) can pick up a port chosen with `:0`.
                eprintln!("toolhost: serving MCP (streamable HTTP) at http://{bound}/mcp");
            })
            .await
        }
    }
}

/// One MCP session over this process's stdin/stdout, in `thread`.
pub async fn serve_stdio(host: Arc<Toolhost>, request: Arc<AssemblyRequest>, thread: String) -> Result<(), ServeError> {
    if toolhost_core::ThreadPaths::new(std::path::Path::new(""), &thread).is_err() {
        return Err(ServeError::InvalidThread(thread));
    }
    let session = McpSessionHandler::new(host, request, thread);
    let running = session.serve(rmcp::transport::stdio()).await.map_err(|e| ServeError::Stdio(e.to_string()))?;
    running.waiting().await.map_err(|e| ServeError::Stdio(e.to_string()))?;
    Ok(())
}
