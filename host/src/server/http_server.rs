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

use super::handler::{Session, ThreadBinding};
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
    /// When set, every request needs `Authorization: Bearer <token>`.
    pub token: Option<String>,
}

type Service = StreamableHttpService<Session, LocalSessionManager>;

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
    let config = service_config(&opts.allow_hosts)?;
    if !opts.addr.ip().is_loopback() && opts.token.is_none() {
        tracing::warn!("serving on non-loopback {} without --token: anyone who can reach it can call tools", opts.addr);
    }
    // rmcp calls the factory once per MCP session (and once per stateless request).
    let factory = move || {
        let fallback = format!("mcp-{}", uuid::Uuid::new_v4().simple());
        Ok(Session::new(host.clone(), request.clone(), ThreadBinding::HttpSession { fallback }))
    };
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
    fn secrets_compare_whole() {
        assert!(same_secret(b"abc", b"abc"));
        assert!(!same_secret(b"abc", b"abd"));
        assert!(!same_secret(b"abc", b"abcd"));
    }
}
