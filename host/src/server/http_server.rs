//! `toolhost serve --http`: rmcp's streamable HTTP service at `/mcp` behind a small hyper front
//! door that checks the bearer token. rmcp checks Host (loopback plus `--allow-host`) and Origin
//! (the same hosts, any port) against DNS rebinding and cross-origin pages.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::{combinators::BoxBody, BodyExt as _, Full};
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};

use super::handler::{session_thread_id, McpSessionHandler};
use super::ServeError;
use crate::assembly::AssemblyRequest;
use crate::host::Toolhost;

/// The endpoint path clients connect to.
pub const MCP_PATH: &str = "/mcp";

const LOOPBACK_HOSTS: [&str; 3] = ["localhost", "127.0.0.1", "::1"];

#[derive(Debug, Clone)]
pub struct HttpOptions {
    pub addr: SocketAddr,
    /// Accepted besides the loopback names: `host` or `host:port`.
    pub allow_hosts: Vec<String>,
    /// When set, every request needs `Authorization: Bearer <token>`. An empty one is refused.
    pub token: Option<String>,
    /// Serve a non-loopback address without a token; without this, that is refused.
    pub insecure_no_auth: bool,
}

/// Refuse to start in a way that serves without authentication by accident: an empty token, or
/// a non-loopback address without a token unless `insecure_no_auth` says so.
pub fn check_auth(opts: &HttpOptions) -> Result<(), ServeError> {
    if opts.token.as_deref().is_some_and(|t| t.trim().is_empty()) {
        return Err(ServeError::EmptyToken);
    }
    // `to_canonical`: `::ffff:127.0.0.1` is loopback too.
    if opts.token.is_none() && !opts.addr.ip().to_canonical().is_loopback() && !opts.insecure_no_auth {
        return Err(ServeError::PublicWithoutToken { addr: opts.addr });
    }
    Ok(())
}

type Service = StreamableHttpService<McpSessionHandler, LocalSessionManager>;

/// rmcp's config: allowed Hosts and Origins from the loopback names and `allow_hosts`.
fn service_config(allow_hosts: &[String]) -> Result<StreamableHttpServerConfig, ServeError> {
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
    let origins: Vec<String> =
        origin_hosts.iter().flat_map(|h| [format!("http://{h}:*"), format!("https://{h}:*")]).collect();
    Ok(StreamableHttpServerConfig::default()
        .with_allowed_hosts(hosts)
        .with_allowed_origins(origins)
        .enforce_origin_validation())
}

fn plain(status: StatusCode, text: &'static str) -> Response<BoxBody<Bytes, Infallible>> {
    let mut r = Response::new(Full::new(Bytes::from_static(text.as_bytes())).boxed());
    *r.status_mut() = status;
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

async fn route(
    svc: Service,
    token: Option<Arc<str>>,
    req: Request<Incoming>,
) -> Result<Response<BoxBody<Bytes, Infallible>>, Infallible> {
    if req.uri().path() != MCP_PATH {
        return Ok(plain(StatusCode::NOT_FOUND, "Not Found: the MCP endpoint is /mcp"));
    }
    if let Some(token) = &token {
        if !authorized(&req, token) {
            let mut r =
                plain(StatusCode::UNAUTHORIZED, "Unauthorized: a valid Authorization: Bearer token is required");
            r.headers_mut().insert(http::header::WWW_AUTHENTICATE, http::HeaderValue::from_static("Bearer"));
            return Ok(r);
        }
    }
    Ok(svc.handle(req).await)
}

/// Serve until the process is stopped. `on_bound` gets the address actually bound (port 0
/// picks a free one).
pub async fn serve_http(
    host: Arc<Toolhost>,
    request: Arc<AssemblyRequest>,
    opts: HttpOptions,
    on_bound: impl FnOnce(SocketAddr),
) -> Result<(), ServeError> {
    check_auth(&opts)?;
    let config = service_config(&opts.allow_hosts)?;
    if opts.token.is_none() && !opts.addr.ip().to_canonical().is_loopback() {
        tracing::warn!(
            "serving on non-loopback {} without a token (--insecure-no-auth): anyone who can reach it can call tools",
            opts.addr
        );
    }
    // rmcp calls the factory once per MCP session (and once per stateless request): each gets
    // a thread of its own.
    let factory = move || Ok(McpSessionHandler::new(host.clone(), request.clone(), session_thread_id()?));
    let svc: Service = StreamableHttpService::new(factory, LocalSessionManager::default().into(), config);
    let token: Option<Arc<str>> = opts.token.map(Arc::from);
    let listener = tokio::net::TcpListener::bind(opts.addr)
        .await
        .map_err(|source| ServeError::Bind { addr: opts.addr, source })?;
    let bound = listener.local_addr().map_err(|source| ServeError::Bind { addr: opts.addr, source })?;
    on_bound(bound);
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(c) => c,
            Err(e) => {
                // Running out of file descriptors and the like: keep serving the others.
                tracing::warn!("accept failed: {e}");
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                continue;
            }
        };
        let svc = svc.clone();
        let token = token.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |req| route(svc.clone(), token.clone(), req));
            if let Err(e) =
                hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(stream), service).await
            {
                tracing::debug!("connection from {peer}: {e}");
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allow_host_must_be_a_host_or_host_port() {
        assert!(service_config(&["example.com".into(), "example.com:8080".into()]).is_ok());
        for bad in ["http://x/", "a b", "", "user@x"] {
            assert!(matches!(service_config(&[bad.to_string()]), Err(ServeError::InvalidAllowHost(_))), "{bad}");
        }
        let c = service_config(&["box.lan".into()]).unwrap();
        assert!(c.allowed_hosts.contains(&"box.lan".to_string()) && c.allowed_hosts.contains(&"::1".to_string()));
        assert!(c.allowed_origins.contains(&"https://box.lan:*".to_string()));
    }

    #[test]
    fn no_public_address_without_a_token_and_no_empty_token() {
        let opts = |addr: &str, token: Option<&str>, insecure: bool| HttpOptions {
            addr: addr.parse().unwrap(),
            allow_hosts: vec![],
            token: token.map(str::to_string),
            insecure_no_auth: insecure,
        };
        for ok in [
            opts("127.0.0.1:80", None, false),
            opts("[::1]:80", None, false),
            opts("[::ffff:127.0.0.1]:80", None, false),
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
