//! `toolhost serve --http`: rmcp's streamable HTTP service at `/mcp` behind a small hyper front
//! door. The door admits connections (caps and shedding: `connections`), times out slow request
//! heads and bodies, checks the bearer token, screens every POSTed message (JSON-RPC errors for
//! what rmcp would misfile), caps sessions (in all and per client), and answers `DELETE` as the
//! official SDKs expect. rmcp checks Host (loopback plus `--allow-host`) and Origin (the same
//! hosts, any port) against DNS rebinding and cross-origin pages, and closes idle sessions.

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{combinators::BoxBody, BodyExt as _, Full, Limited};
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use rmcp::model::{ClientRequest, JsonRpcMessage};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::session::SessionManager as _;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};

use super::connections::{fd_limit, ClientKey, ConnectionLimits, Connections, Refusal, Ticket};
use super::handler::{McpSessionHandler, Opening};
use super::jsonrpc::{screen, ErrorReply, Screened, INVALID_PARAMS, INVALID_REQUEST, MAX_MESSAGE_BYTES};
use super::sse_poll::SsePolls;
use super::threads::{fresh_thread_id, ThreadKeeper};
use super::ServeError;

/// The endpoint path clients connect to.
pub const MCP_PATH: &str = "/mcp";

const LOOPBACK_HOSTS: [&str; 3] = ["localhost", "127.0.0.1", "::1"];
const SESSION_HEADER: &str = "mcp-session-id";
/// The answer to this toolhost's own MCP client (see [`toolhost_mcp::INSTANCE_HEADER`]).
const SELF_REFERENCE: &str = "this is the MCP server of the toolhost that sent the request: an MCP server entry in \
     extensions_config.json names this server's own URL; remove it (a toolhost cannot serve its tools to itself)";

/// How to serve over streamable HTTP.
#[derive(Debug, Clone)]
pub struct HttpOptions {
    /// The address as given (`host:port`), for messages.
    pub display: String,
    /// What it resolves to; the first one is bound.
    pub addrs: Vec<SocketAddr>,
    /// Accepted besides the loopback names: `host` or `host:port`.
    pub allow_hosts: Vec<String>,
    /// When set, every request needs `Authorization: Bearer <token>`. An empty one is refused.
    pub token: Option<String>,
    /// Serve a non-loopback address without a token; without this, that is refused.
    pub insecure_no_auth: bool,
    /// Sessions open at once.
    pub max_sessions: usize,
    /// Sessions one client address may hold at once.
    pub max_sessions_per_client: usize,
    /// TCP connections open at once (lowered to fit the process's file limit).
    pub max_connections: usize,
    /// Connections one client address may hold; `None`: a quarter of `max_connections`.
    pub max_connections_per_client: Option<usize>,
    /// Slots only for connections that passed the token check; `None`: an eighth.
    pub reserved_connections: Option<usize>,
    /// A connection must send a complete request head this soon after opening or after its last
    /// response.
    pub header_timeout: Duration,
    /// A POST's body must have arrived this soon after its head.
    pub body_timeout: Duration,
    /// A session without requests for this long is closed.
    pub session_idle_timeout: Duration,
    /// End a `tools/call`'s SSE stream after this long; the client polls for the rest.
    pub sse_poll_after: Option<Duration>,
}

impl HttpOptions {
    /// Whether every address is a loopback one (`::ffff:127.0.0.1` included).
    fn loopback(&self) -> bool {
        self.addrs.iter().all(|a| a.ip().to_canonical().is_loopback())
    }
}

/// Refuse to start in a way that serves without authentication by accident: an empty token, or
/// a non-loopback address without a token unless `insecure_no_auth` says so.
pub fn check_auth(opts: &HttpOptions) -> Result<(), ServeError> {
    if opts.token.as_deref().is_some_and(|t| t.trim().is_empty()) {
        return Err(ServeError::EmptyToken);
    }
    if opts.token.is_none() && !opts.loopback() && !opts.insecure_no_auth {
        return Err(ServeError::PublicWithoutToken { addr: opts.display.clone() });
    }
    Ok(())
}

type Service = StreamableHttpService<McpSessionHandler, LocalSessionManager>;
type Body = BoxBody<Bytes, Infallible>;

/// The `Host` values (`host` or `host:port`) and the `Origin` hosts accepted: the loopback names
/// and `allow_hosts`.
struct Allowed {
    hosts: Vec<String>,
    origin_hosts: Vec<String>,
}

impl Allowed {
    fn new(allow_hosts: &[String]) -> Result<Self, ServeError> {
        let mut hosts: Vec<String> = LOOPBACK_HOSTS.iter().map(|h| h.to_string()).collect();
        let mut origin_hosts: Vec<String> = vec!["localhost".into(), "127.0.0.1".into(), "[::1]".into()];
        for h in allow_hosts {
            let authority =
                http::uri::Authority::try_from(h.as_str()).map_err(|_| ServeError::InvalidAllowHost(h.clone()))?;
            if h.contains('/') || h.contains('@') || authority.host().is_empty() {
                return Err(ServeError::InvalidAllowHost(h.clone()));
            }
            hosts.push(h.clone());
            origin_hosts.push(authority.host().to_string());
        }
        Ok(Self { hosts, origin_hosts })
    }

    /// rmcp's own check, for the requests the door answers itself (a poll's `GET`): the `Host`
    /// is allowed, and so is the `Origin` when there is one.
    fn admits(&self, req: &Request<Incoming>) -> bool {
        let bare = |h: &str| h.trim_start_matches('[').trim_end_matches(']').to_ascii_lowercase();
        let host_ok = req
            .headers()
            .get(http::header::HOST)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| http::uri::Authority::try_from(v).ok())
            .is_some_and(|a| {
                self.hosts.iter().any(|allowed| match http::uri::Authority::try_from(allowed.as_str()) {
                    Ok(e) if e.port().is_some() => e.as_str().eq_ignore_ascii_case(a.as_str()),
                    _ => bare(allowed) == bare(a.host()),
                })
            });
        let origin_ok = match req.headers().get(http::header::ORIGIN) {
            None => true,
            Some(v) => v
                .to_str()
                .ok()
                .and_then(|o| o.parse::<http::Uri>().ok())
                .filter(|u| matches!(u.scheme_str(), Some("http" | "https")))
                .and_then(|u| u.host().map(bare))
                .is_some_and(|h| self.origin_hosts.iter().any(|allowed| bare(allowed) == h)),
        };
        host_ok && origin_ok
    }

    /// rmcp's config: these Hosts and Origins.
    fn service_config(&self) -> StreamableHttpServerConfig {
        let origins: Vec<String> =
            self.origin_hosts.iter().flat_map(|h| [format!("http://{h}:*"), format!("https://{h}:*")]).collect();
        StreamableHttpServerConfig::default()
            .with_allowed_hosts(self.hosts.clone())
            .with_allowed_origins(origins)
            .enforce_origin_validation()
    }
}

fn plain(status: StatusCode, text: &'static str) -> Response<Body> {
    let mut r = Response::new(Full::new(Bytes::from_static(text.as_bytes())).boxed());
    *r.status_mut() = status;
    r
}

/// A JSON-RPC error response with an HTTP status.
fn json_error(status: StatusCode, reply: &ErrorReply) -> Response<Body> {
    let mut r = Response::new(Full::new(Bytes::from(reply.to_bytes())).boxed());
    *r.status_mut() = status;
    r.headers_mut().insert(http::header::CONTENT_TYPE, http::HeaderValue::from_static("application/json"));
    r
}

/// Constant-time comparison, so the token cannot be guessed byte by byte from response times.
fn same_secret(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn authorized(req: &Request<Incoming>, token: &str) -> bool {
    req.headers()
        .get(http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer ").or_else(|| v.strip_prefix("bearer ")))
        .is_some_and(|given| same_secret(given.trim().as_bytes(), token.as_bytes()))
}

/// The front door's state, shared by every connection.
struct Door {
    svc: Service,
    /// The host being opened: a `tools/call` waits for it at the door, so that rmcp checks
    /// its `Mcp-Param-*` headers against the called tool's schema (unknown until then).
    host: Opening,
    sessions: Arc<LocalSessionManager>,
    token: Option<Arc<str>>,
    max_sessions: usize,
    max_sessions_per_client: usize,
    /// Who opened each session (by `Mcp-Session-Id`), for the per-client share. Entries of
    /// sessions rmcp has closed are dropped at the next `initialize`.
    owners: Mutex<HashMap<Arc<str>, ClientKey>>,
    body_timeout: Duration,
    /// Held from the session count to the session's creation, so the cap is exact.
    opening: tokio::sync::Mutex<()>,
    allowed: Allowed,
    /// `sse_poll_after`: the calls whose streams were ended, for their clients' GETs.
    polls: Option<Arc<SsePolls>>,
}

impl Door {
    async fn route(&self, req: Request<Incoming>, conn: &Ticket) -> Response<Body> {
        if req.uri().path() != MCP_PATH {
            return plain(StatusCode::NOT_FOUND, "Not Found: the MCP endpoint is /mcp");
        }
        // This process's own MCP client: an extensions_config.json entry names this server's URL.
        // Refused at once (its request would wait for the host, which waits for it).
        if req
            .headers()
            .get(toolhost_mcp::INSTANCE_HEADER)
            .is_some_and(|v| v.as_bytes() == toolhost_mcp::instance_id().as_bytes())
        {
            tracing::warn!(
                "refused a request from this toolhost's own MCP client: an MCP server entry names this server's URL"
            );
            let reply = ErrorReply { id: serde_json::Value::Null, code: -32000, message: SELF_REFERENCE.to_string() };
            return json_error(StatusCode::LOOP_DETECTED, &reply);
        }
        if let Some(token) = &self.token {
            if !authorized(&req, token) {
                let mut r =
                    plain(StatusCode::UNAUTHORIZED, "Unauthorized: a valid Authorization: Bearer token is required");
                r.headers_mut().insert(http::header::WWW_AUTHENTICATE, http::HeaderValue::from_static("Bearer"));
                return r;
            }
        }
        conn.prove();
        match *req.method() {
            http::Method::GET if self.polls.is_some() && Self::last_event_id(&req).is_some_and(SsePolls::owns) => {
                self.poll(req).await
            }
            http::Method::POST => self.post(req, conn.client()).await,
            http::Method::DELETE => self.delete(req).await,
            _ => self.svc.handle(req).await,
        }
    }

    fn last_event_id(req: &Request<impl Sized>) -> Option<&str> {
        req.headers().get("last-event-id").and_then(|v| v.to_str().ok())
    }

    /// A GET resuming a call whose stream the door ended (`sse_poll_after`): the rest of it, in
    /// the same session only. An id that is not (or no longer) there gets an empty stream, as
    /// rmcp answers an unknown `Last-Event-ID` (an error would have the client retry for ever).
    async fn poll(&self, req: Request<Incoming>) -> Response<Body> {
        if !self.allowed.admits(&req) {
            return plain(StatusCode::FORBIDDEN, "Forbidden: Host or Origin header is not allowed");
        }
        let Some(session) = Self::session_id(&req) else {
            return plain(StatusCode::BAD_REQUEST, "Bad Request: Mcp-Session-Id header is required");
        };
        if !self.sessions.has_session(&session.clone().into()).await.unwrap_or(false) {
            return plain(StatusCode::NOT_FOUND, "Not Found: Session not found");
        }
        let last = Self::last_event_id(&req).unwrap_or_default();
        let polls = self.polls.as_ref();
        let body = polls.and_then(|p| p.resume(&session, last)).unwrap_or_else(|| {
            tracing::warn!("no call to resume at Last-Event-ID {last}: answering an empty stream");
            http_body_util::Empty::new().boxed()
        });
        let mut r = Response::new(body);
        let headers = r.headers_mut();
        headers.insert(http::header::CONTENT_TYPE, http::HeaderValue::from_static("text/event-stream"));
        headers.insert(http::header::CACHE_CONTROL, http::HeaderValue::from_static("no-cache"));
        r
    }

    fn session_id(req: &Request<impl Sized>) -> Option<String> {
        req.headers().get(SESSION_HEADER).and_then(|v| v.to_str().ok()).map(str::to_string)
    }

    async fn post(&self, req: Request<Incoming>, client: ClientKey) -> Response<Body> {
        let (parts, body) = req.into_parts();
        let Ok(read) = tokio::time::timeout(self.body_timeout, Limited::new(body, MAX_MESSAGE_BYTES).collect()).await
        else {
            let message = format!(
                "Invalid Request: the body did not arrive within {} s (toolhost.serve.body_timeout_s)",
                self.body_timeout.as_secs()
            );
            let reply = ErrorReply { id: serde_json::Value::Null, code: INVALID_REQUEST, message };
            let mut r = json_error(StatusCode::REQUEST_TIMEOUT, &reply);
            // The rest of the body may still come: this connection cannot carry another request.
            r.headers_mut().insert(http::header::CONNECTION, http::HeaderValue::from_static("close"));
            return r;
        };
        let bytes = match read {
            Ok(b) => b.to_bytes(),
            Err(e) => {
                let too_large = e.downcast_ref::<http_body_util::LengthLimitError>().is_some();
                let (status, message) = if too_large {
                    (
                        StatusCode::PAYLOAD_TOO_LARGE,
                        format!("Invalid Request: the message is larger than {MAX_MESSAGE_BYTES} bytes"),
                    )
                } else {
                    (StatusCode::BAD_REQUEST, format!("Invalid Request: cannot read the body: {e}"))
                };
                let reply = ErrorReply { id: serde_json::Value::Null, code: INVALID_REQUEST, message };
                return json_error(status, &reply);
            }
        };
        if let Some(reply) = Self::removed_method(&parts.headers, &bytes) {
            return json_error(StatusCode::NOT_FOUND, &reply);
        }
        // The request's id, for the refusals below to answer it by (JSON-RPC: `null` only when
        // it could not be read).
        let mut request_id = serde_json::Value::Null;
        let (is_initialize, is_call) = match screen(&bytes) {
            // A request with params that do not fit its method was read and understood: like
            // any JSON-RPC error result, it comes back with 200.
            Screened::Reply(reply) if reply.code == INVALID_PARAMS => return json_error(StatusCode::OK, &reply),
            Screened::Reply(reply) => return json_error(StatusCode::BAD_REQUEST, &reply),
            Screened::Drop(mut reply) => {
                // The spec lets the body of a refused notification or response be an error
                // without an id.
                reply.id = serde_json::Value::Null;
                return json_error(StatusCode::BAD_REQUEST, &reply);
            }
            Screened::Pass(msg) => match &*msg {
                JsonRpcMessage::Request(r) => {
                    request_id = serde_json::to_value(&r.id).unwrap_or(serde_json::Value::Null);
                    (
                        matches!(r.request, ClientRequest::InitializeRequest(_)),
                        matches!(r.request, ClientRequest::CallToolRequest(_)),
                    )
                }
                _ => (false, false),
            },
        };
        if is_call {
            // A host that failed to open is the call's own error, answered by the handler.
            let _ = self.host.ready().await;
        }
        let mut parts = parts;
        // A call in a session gets its log messages on its own stream (rmcp would send them on
        // the GET stream).
        let logs = (is_call && parts.headers.contains_key(SESSION_HEADER)).then(|| {
            let (log, rx) = super::call_log::CallLog::channel();
            parts.extensions.insert(log);
            rx
        });
        let req = Request::from_parts(parts, Full::new(bytes));
        if let (Some(logs), Some(session)) = (logs, Self::session_id(&req)) {
            let r = self.svc.handle(req).await;
            let sse = r
                .headers()
                .get(http::header::CONTENT_TYPE)
                .is_some_and(|v| v.as_bytes().starts_with(b"text/event-stream"));
            if !sse || r.status() != StatusCode::OK {
                return r;
            }
            let (parts, body) = r.into_parts();
            let body = super::call_log::wrap(body, logs);
            let body = match &self.polls {
                Some(polls) => polls.wrap(session, body),
                None => body,
            };
            return Response::from_parts(parts, body);
        }
        if !is_initialize || Self::session_id(&req).is_some() {
            return self.svc.handle(req).await;
        }
        let _opening = self.opening.lock().await;
        let (open, mine) = {
            let live = self.sessions.sessions.read().await;
            let mut owners = self.owners.lock().unwrap_or_else(|e| e.into_inner());
            owners.retain(|id, _| live.contains_key(id));
            (live.len(), owners.values().filter(|c| **c == client).count())
        };
        if open >= self.max_sessions {
            tracing::warn!("refused a new session: {open} open (max_sessions)");
            let reply = ErrorReply {
                id: request_id,
                code: -32000,
                message: format!(
                    "Server busy: {open} MCP sessions are open, the most this server keeps (toolhost.serve.max_sessions / \
                     --max-sessions); end one with DELETE or retry later"
                ),
            };
            let mut r = json_error(StatusCode::SERVICE_UNAVAILABLE, &reply);
            r.headers_mut().insert(http::header::RETRY_AFTER, http::HeaderValue::from_static("5"));
            return r;
        }
        if mine >= self.max_sessions_per_client {
            tracing::warn!("refused a new session from {client}: it holds {mine} (max_sessions_per_client)");
            let reply = ErrorReply {
                id: request_id,
                code: -32000,
                message: format!(
                    "Too many sessions from {client}: it has {mine} MCP sessions open, the most one client address \
                     keeps (toolhost.serve.max_sessions_per_client); end one with DELETE or retry later"
                ),
            };
            let mut r = json_error(StatusCode::TOO_MANY_REQUESTS, &reply);
            r.headers_mut().insert(http::header::RETRY_AFTER, http::HeaderValue::from_static("5"));
            return r;
        }
        let r = self.svc.handle(req).await;
        if let Some(id) = r.headers().get(SESSION_HEADER).and_then(|v| v.to_str().ok()) {
            self.owners.lock().unwrap_or_else(|e| e.into_inner()).insert(Arc::from(id), client);
        }
        r
    }

    /// A request of a revision that removed its method (2026-07-28 has no `initialize`, `ping`,
    /// `logging/setLevel` nor `resources/(un)subscribe`: SEP-2575) is `404` with `-32601` and its id,
    /// whatever its params (they need not fit the old method). Only known revisions are checked.
    fn removed_method(headers: &http::HeaderMap, body: &[u8]) -> Option<ErrorReply> {
        let version = headers.get("mcp-protocol-version")?.to_str().ok()?;
        super::jsonrpc::removed_method(Some(version), body)
    }

    /// 200 for a session that was there (rmcp says 202, which the Python SDK logs as a failed
    /// termination), 404 for one that is not.
    async fn delete(&self, req: Request<Incoming>) -> Response<Body> {
        if let Some(id) = Self::session_id(&req) {
            if !self.sessions.has_session(&id.into()).await.unwrap_or(false) {
                return plain(StatusCode::NOT_FOUND, "Not Found: no such session");
            }
        }
        let mut r = self.svc.handle(req).await;
        if r.status() == StatusCode::ACCEPTED {
            *r.status_mut() = StatusCode::OK;
        }
        r
    }
}

/// Serve until the process is stopped. `on_bound` gets the address actually bound (port 0
/// picks a free one).
pub async fn serve_http(
    opening: Opening,
    keeper: Arc<ThreadKeeper>,
    opts: HttpOptions,
    on_bound: impl FnOnce(SocketAddr),
) -> Result<(), ServeError> {
    check_auth(&opts)?;
    let allowed = Allowed::new(&opts.allow_hosts)?;
    let config = allowed.service_config();
    if opts.token.is_none() && !opts.loopback() {
        tracing::warn!(
            "serving on non-loopback {} without a token (--insecure-no-auth): anyone who can reach it can call tools",
            opts.display
        );
    }
    let mut sessions = LocalSessionManager::default();
    sessions.session_config.keep_alive = Some(opts.session_idle_timeout);
    let sessions = Arc::new(sessions);
    // rmcp calls the factory once per MCP session (and once per stateless request): each gets
    // a thread of its own.
    let tasks = Arc::new(super::tasks::TaskStore::default());
    let host = opening.clone();
    let factory =
        move || Ok(McpSessionHandler::new(opening.clone(), keeper.clone(), fresh_thread_id("mcp-")?, tasks.clone()));
    let svc: Service = StreamableHttpService::new(factory, sessions.clone(), config);
    let door = Arc::new(Door {
        svc,
        host,
        sessions,
        token: opts.token.map(Arc::from),
        max_sessions: opts.max_sessions,
        max_sessions_per_client: opts.max_sessions_per_client,
        owners: Mutex::default(),
        body_timeout: opts.body_timeout,
        opening: tokio::sync::Mutex::new(()),
        allowed,
        // At most one ended call per session waiting for its client, on average.
        polls: opts.sse_poll_after.map(|after| SsePolls::new(after, opts.max_sessions)),
    });
    let (limits, lowered) = ConnectionLimits::new(
        opts.max_connections,
        opts.max_connections_per_client,
        opts.reserved_connections,
        fd_limit(),
    );
    if let Some(why) = lowered {
        tracing::warn!("{why}");
    }
    let connections = Connections::new(limits);
    let draining = Arc::new(tokio::sync::Semaphore::new(REFUSALS_DRAINED));
    let mut http1 = hyper::server::conn::http1::Builder::new();
    // The header timeout also closes a keep-alive connection idle for that long: hyper restarts
    // it whenever the connection waits for a request head.
    http1.timer(TokioTimer::new()).header_read_timeout(opts.header_timeout);
    let addr = opts.addrs[0];
    let listener = tokio::net::TcpListener::bind(addr).await.map_err(|source| ServeError::Bind { addr, source })?;
    let bound = listener.local_addr().map_err(|source| ServeError::Bind { addr, source })?;
    on_bound(bound);
    let mut backoff = ACCEPT_BACKOFF_MIN;
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(c) => {
                backoff = ACCEPT_BACKOFF_MIN;
                c
            }
            Err(e) => {
                // Out of file descriptors (EMFILE/ENFILE) and the like: wait for some to be
                // released instead of spinning on an accept that fails at once, and keep
                // serving the connections already open.
                tracing::warn!("accept failed: {e}; retrying in {} ms", backoff.as_millis());
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(ACCEPT_BACKOFF_MAX);
                continue;
            }
        };
        let ticket = match connections.admit(peer.ip()) {
            Ok(t) => Arc::new(t),
            Err(refusal) => {
                tracing::warn!("refused a connection from {peer}: {refusal}");
                refuse(stream, &refusal, &draining);
                continue;
            }
        };
        // Responses are small writes (SSE events): without this, Nagle and the client's delayed
        // ACK add ~40 ms to a round trip.
        if let Err(e) = stream.set_nodelay(true) {
            tracing::debug!("TCP_NODELAY for {peer}: {e}");
        }
        let door = door.clone();
        let http1 = http1.clone();
        tokio::spawn(async move {
            let conn = ticket.clone();
            let service = hyper::service::service_fn(move |req| {
                let door = door.clone();
                let conn = conn.clone();
                async move { Ok::<_, Infallible>(door.route(req, &conn).await) }
            });
            tokio::select! {
                served = http1.serve_connection(TokioIo::new(stream), service) => {
                    if let Err(e) = served {
                        tracing::debug!("connection from {peer}: {e}");
                    }
                }
                () = ticket.shed() => tracing::debug!("shed connection from {peer}: it never passed the token check"),
            }
        });
    }
}

const ACCEPT_BACKOFF_MIN: Duration = Duration::from_millis(10);
const ACCEPT_BACKOFF_MAX: Duration = Duration::from_secs(1);
/// Refused connections drained at once (each holds its descriptor up to a second); past this,
/// a refused connection is closed at once.
const REFUSALS_DRAINED: usize = 32;

/// Answer a connection that was not admitted with a 503 and close it, without waiting for it:
/// a client that does not read gets only what fits the socket buffer.
fn refuse(stream: tokio::net::TcpStream, refusal: &Refusal, draining: &Arc<tokio::sync::Semaphore>) {
    let reply = ErrorReply { id: serde_json::Value::Null, code: -32000, message: refusal.to_string() };
    let body = reply.to_bytes();
    let head = format!(
        "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nRetry-After: 5\r\n\
         Connection: close\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    let _ = stream.try_write(&[head.as_bytes(), &body].concat());
    let Ok(permit) = draining.clone().try_acquire_owned() else { return };
    // Closing with the request unread would reset the connection and could discard the answer
    // before the client reads it: shut the write side and drain briefly, off the accept loop.
    tokio::spawn(async move {
        let _permit = permit;
        use tokio::io::AsyncReadExt as _;
        let mut stream = stream;
        let mut sink = [0u8; 1024];
        let drain = async {
            let _ = tokio::io::AsyncWriteExt::shutdown(&mut stream).await;
            while matches!(stream.read(&mut sink).await, Ok(n) if n > 0) {}
        };
        let _ = tokio::time::timeout(Duration::from_secs(1), drain).await;
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allow_host_must_be_a_host_or_host_port() {
        assert!(Allowed::new(&["example.com".into(), "example.com:8080".into()]).is_ok());
        for bad in ["http://x/", "a b", "", "user@x"] {
            assert!(matches!(Allowed::new(&[bad.to_string()]), Err(ServeError::InvalidAllowHost(_))), "{bad}");
        }
        let c = Allowed::new(&["box.lan".into()]).unwrap().service_config();
        assert!(c.allowed_hosts.contains(&"box.lan".to_string()) && c.allowed_hosts.contains(&"::1".to_string()));
        assert!(c.allowed_origins.contains(&"https://box.lan:*".to_string()));
    }

    #[test]
    fn no_public_address_without_a_token_and_no_empty_token() {
        let opts = |addr: &str, token: Option<&str>, insecure: bool| HttpOptions {
            display: addr.to_string(),
            addrs: super::super::resolve_http(addr).unwrap(),
            allow_hosts: vec![],
            token: token.map(str::to_string),
            insecure_no_auth: insecure,
            max_sessions: 1,
            max_sessions_per_client: 1,
            max_connections: 2,
            max_connections_per_client: None,
            reserved_connections: None,
            header_timeout: Duration::from_secs(1),
            body_timeout: Duration::from_secs(1),
            session_idle_timeout: Duration::from_secs(1),
            sse_poll_after: None,
        };
        for ok in [
            opts("127.0.0.1:80", None, false),
            opts("[::1]:80", None, false),
            opts("[::ffff:127.0.0.1]:80", None, false),
            opts("localhost:80", None, false),
            opts("0.0.0.0:80", Some("t"), false),
            opts("0.0.0.0:80", None, true),
            opts("192.0.2.7:80", None, true),
        ] {
            assert!(check_auth(&ok).is_ok(), "{ok:?}");
        }
        for public in ["0.0.0.0:80", "[::]:80", "192.0.2.7:80", "[2001:db8::1]:80"] {
            let e = check_auth(&opts(public, None, false)).unwrap_err().to_string();
            assert!(e.contains(public) && e.contains("--token") && e.contains("--insecure-no-auth"), "{e}");
        }
        for empty in ["", "  "] {
            for addr in ["127.0.0.1:80", "0.0.0.0:80"] {
                let e = check_auth(&opts(addr, Some(empty), true)).unwrap_err();
                assert!(matches!(e, ServeError::EmptyToken), "{addr} {empty:?}: {e}");
            }
        }
    }

    #[test]
    fn secrets_compare_whole() {
        assert!(same_secret(b"abc", b"abc"));
        assert!(!same_secret(b"abc", b"abd"));
        assert!(!same_secret(b"abc", b"abcd"));
    }
}
