//! Outbound HTTPS from a tool, over `wasi:http` (feature `http`).
//!
//! The host decides what may leave: the tool's `capabilities.network` lists the hosts, only
//! `https` is allowed, and private addresses are refused unless the config says otherwise. A
//! refused request comes back as [`HttpError::Refused`]; the host also tells the model why.
//! [`Request::timeout`] bounds connecting and each wait for data (httpx's and requests'
//! semantics); a body that stops short of its length reads as [`HttpError::Incomplete`], so a
//! tool can report it the way its provider's client library would.
//!
//! ```ignore
//! let resp = toolhost_sdk::http::Request::get("https://api.example.com/v1/items?q=rust")
//!     .header("accept", "application/json")
//!     .send()?;
//! let items: serde_json::Value = resp.json()?;
//! ```

use std::fmt;
use std::time::Duration;

use wasip2::clocks::monotonic_clock;
use wasip2::http::outgoing_handler;
use wasip2::http::types::{
    ErrorCode, Fields, IncomingBody, Method, OutgoingBody, OutgoingRequest, RequestOptions, Scheme,
};
use wasip2::io::poll;
use wasip2::io::streams::StreamError;

/// Largest response body read by default (16 MiB); see [`Request::max_body_bytes`].
pub const DEFAULT_MAX_BODY_BYTES: usize = 16 << 20;

/// An HTTP request to send.
#[derive(Debug, Clone)]
pub struct Request {
    pub method: String,
    pub url: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    pub max_body_bytes: usize,
    /// Bounds the connection, the wait for the response head and each wait for more of the
    /// body (httpx's and requests' per-operation timeout); `None`: only the call's deadline.
    pub timeout: Option<Duration>,
}

/// A response, its body read whole.
#[derive(Debug, Clone)]
pub struct Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

/// Why a request produced no response.
#[derive(Debug, Clone, PartialEq)]
pub enum HttpError {
    /// The URL could not be parsed.
    InvalidUrl(String),
    /// The host refused the request: not granted, not https, or a private address.
    Refused(String),
    /// The request was sent (or tried) and failed: DNS, connect, TLS, timeout, protocol.
    Failed(String),
    /// The response body was larger than the request's `max_body_bytes`.
    TooLarge(usize),
    /// Connecting, or waiting for the response or for more of its body, took longer than the
    /// request's timeout. `connecting` says which.
    Timeout { connecting: bool },
    /// The body ended before it was complete: the connection closed early, short of the
    /// `content-length` (`expected`) or inside a chunked body (`expected: None`).
    Incomplete { received: usize, expected: Option<u64> },
}

impl fmt::Display for HttpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HttpError::InvalidUrl(m) => write!(f, "invalid URL: {m}"),
            HttpError::Refused(m) => write!(f, "request refused by the host: {m}"),
            HttpError::Failed(m) => write!(f, "request failed: {m}"),
            HttpError::TooLarge(n) => write!(f, "response body is larger than {n} bytes"),
            HttpError::Timeout { connecting: true } => write!(f, "timed out connecting"),
            HttpError::Timeout { connecting: false } => write!(f, "timed out waiting for the response"),
            HttpError::Incomplete { received, expected: Some(n) } => {
                write!(f, "the response body ended after {received} of {n} bytes")
            }
            HttpError::Incomplete { received, expected: None } => {
                write!(f, "the response body ended after {received} bytes, inside a chunk")
            }
        }
    }
}

impl std::error::Error for HttpError {}

impl Request {
    pub fn new(method: impl Into<String>, url: impl Into<String>) -> Self {
        Self {
            method: method.into(),
            url: url.into(),
            headers: Vec::new(),
            body: Vec::new(),
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            timeout: None,
        }
    }

    pub fn get(url: impl Into<String>) -> Self {
        Self::new("GET", url)
    }

    pub fn post(url: impl Into<String>) -> Self {
        Self::new("POST", url)
    }

    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    pub fn body(mut self, body: impl Into<Vec<u8>>) -> Self {
        self.body = body.into();
        self
    }

    /// A JSON body, with `content-type: application/json`.
    pub fn json(self, value: &serde_json::Value) -> Self {
        self.header("content-type", "application/json").body(value.to_string())
    }

    pub fn max_body_bytes(mut self, n: usize) -> Self {
        self.max_body_bytes = n;
        self
    }

    /// See [`Request::timeout`](struct.Request.html#structfield.timeout).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    pub fn send(&self) -> Result<Response, HttpError> {
        send(self)
    }
}

impl Response {
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    pub fn json<T: serde::de::DeserializeOwned>(&self) -> Result<T, HttpError> {
        serde_json::from_slice(&self.body)
            .map_err(|e| HttpError::Failed(format!("response is not the JSON expected: {e}")))
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }
}

/// `GET url`.
pub fn get(url: &str) -> Result<Response, HttpError> {
    Request::get(url).send()
}

/// The parts of an absolute URL `wasi:http` wants.
#[derive(Debug, PartialEq)]
struct UrlParts<'a> {
    scheme: &'a str,
    authority: &'a str,
    path_with_query: String,
}

fn split_url(url: &str) -> Result<UrlParts<'_>, HttpError> {
    let (scheme, rest) =
        url.split_once("://").ok_or_else(|| HttpError::InvalidUrl(format!("'{url}' has no scheme")))?;
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let authority = &rest[..end];
    if authority.is_empty() || authority.contains('@') {
        return Err(HttpError::InvalidUrl(format!("'{url}' has no host (or carries credentials)")));
    }
    let tail = &rest[end..];
    let tail = tail.split('#').next().unwrap_or("");
    let path_with_query = if tail.starts_with('/') { tail.to_string() } else { format!("/{tail}") };
    Ok(UrlParts { scheme, authority, path_with_query })
}

fn describe(code: &ErrorCode) -> HttpError {
    match code {
        ErrorCode::HttpRequestDenied => {
            HttpError::Refused("the host is not in this tool's network grant, or the scheme is not https".into())
        }
        ErrorCode::DestinationIpProhibited => {
            HttpError::Refused("the host resolves to a private or internal address".into())
        }
        ErrorCode::ConnectionTimeout => HttpError::Timeout { connecting: true },
        ErrorCode::HttpResponseTimeout | ErrorCode::ConnectionReadTimeout => HttpError::Timeout { connecting: false },
        other => HttpError::Failed(format!("{other:?}")),
    }
}

fn send(req: &Request) -> Result<Response, HttpError> {
    let url = split_url(&req.url)?;
    let fields: Vec<(String, Vec<u8>)> =
        req.headers.iter().map(|(k, v)| (k.to_ascii_lowercase(), v.as_bytes().to_vec())).collect();
    let headers = Fields::from_list(&fields)
        .map_err(|e| HttpError::InvalidUrl(format!("a request header is not allowed: {e:?}")))?;
    let out = OutgoingRequest::new(headers);
    let method = match req.method.to_ascii_uppercase().as_str() {
        "GET" => Method::Get,
        "HEAD" => Method::Head,
        "POST" => Method::Post,
        "PUT" => Method::Put,
        "DELETE" => Method::Delete,
        "PATCH" => Method::Patch,
        "OPTIONS" => Method::Options,
        other => Method::Other(other.to_string()),
    };
    let bad = |what: &str| HttpError::InvalidUrl(format!("'{}': invalid {what}", req.url));
    out.set_method(&method).map_err(|_| bad("method"))?;
    let scheme = match url.scheme.to_ascii_lowercase().as_str() {
        "https" => Scheme::Https,
        "http" => Scheme::Http,
        other => Scheme::Other(other.to_string()),
    };
    out.set_scheme(Some(&scheme)).map_err(|_| bad("scheme"))?;
    out.set_authority(Some(url.authority)).map_err(|_| bad("host"))?;
    out.set_path_with_query(Some(&url.path_with_query)).map_err(|_| bad("path"))?;
    let body = out.body().map_err(|_| HttpError::Failed("the request body was already taken".into()))?;

    let options = req.timeout.map(|t| {
        let o = RequestOptions::new();
        let nanos = u64::try_from(t.as_nanos()).unwrap_or(u64::MAX);
        // A host that does not support a timeout says so; the waits below bound it anyway.
        let _ = o.set_connect_timeout(Some(nanos));
        let _ = o.set_first_byte_timeout(Some(nanos));
        let _ = o.set_between_bytes_timeout(Some(nanos));
        o
    });
    let pending = outgoing_handler::handle(out, options).map_err(|e| describe(&e))?;
    // A refused or failed request closes the body stream: finish writing either way, then let
    // the response say what happened, which explains a failed write better than the write does.
    let written = (|| {
        let stream = body.write().map_err(|_| HttpError::Failed("cannot write the request body".into()))?;
        for chunk in req.body.chunks(4096) {
            stream
                .blocking_write_and_flush(chunk)
                .map_err(|e| HttpError::Failed(format!("writing the body: {e:?}")))?;
        }
        Ok(())
    })();
    let finished = OutgoingBody::finish(body, None).map_err(|e| describe(&e));

    if !wait(&pending.subscribe(), req.timeout) {
        return Err(HttpError::Timeout { connecting: false });
    }
    let response = match pending.get() {
        Some(Ok(Ok(r))) => r,
        Some(Ok(Err(code))) => return Err(describe(&code)),
        Some(Err(())) | None => return Err(HttpError::Failed("the response was already taken".into())),
    };
    written?;
    finished?;
    let status = response.status();
    let headers =
        response.headers().entries().into_iter().map(|(k, v)| (k, String::from_utf8_lossy(&v).into_owned())).collect();
    let expected: Option<u64> = response
        .headers()
        .get("content-length")
        .first()
        .and_then(|v| std::str::from_utf8(v).ok())
        .and_then(|v| v.trim().parse().ok());
    let incoming = response.consume().map_err(|_| HttpError::Failed("the response body was already taken".into()))?;
    let mut body = Vec::new();
    {
        let stream = incoming.stream().map_err(|_| HttpError::Failed("cannot read the response body".into()))?;
        let ready = stream.subscribe();
        loop {
            if !wait(&ready, req.timeout) {
                return Err(HttpError::Timeout { connecting: false });
            }
            match stream.read(64 * 1024) {
                Ok(chunk) => {
                    if body.len() + chunk.len() > req.max_body_bytes {
                        return Err(HttpError::TooLarge(req.max_body_bytes));
                    }
                    body.extend_from_slice(&chunk);
                }
                Err(StreamError::Closed) => {
                    if expected.is_some_and(|n| (body.len() as u64) < n) {
                        return Err(HttpError::Incomplete { received: body.len(), expected });
                    }
                    break;
                }
                Err(StreamError::LastOperationFailed(e)) => {
                    let code = wasip2::http::types::http_error_code(&e);
                    return Err(match code {
                        Some(ErrorCode::HttpResponseTimeout | ErrorCode::ConnectionReadTimeout) => {
                            HttpError::Timeout { connecting: false }
                        }
                        // The peer closed the connection inside the body: short of its
                        // content-length, or inside a chunk.
                        Some(
                            ErrorCode::HttpProtocolError
                            | ErrorCode::HttpResponseIncomplete
                            | ErrorCode::ConnectionTerminated,
                        ) => HttpError::Incomplete { received: body.len(), expected },
                        // Hosts report body errors without a code (wasmtime's wasi:http passes
                        // its own error through); its text still tells a deadline from a cut.
                        None if e.to_debug_string().to_ascii_lowercase().contains("timeout") => {
                            HttpError::Timeout { connecting: false }
                        }
                        None => HttpError::Incomplete { received: body.len(), expected },
                        Some(c) => {
                            let detail = describe(&c).to_string();
                            HttpError::Failed(format!("reading the body: {detail}"))
                        }
                    });
                }
            }
        }
    }
    let _ = IncomingBody::finish(incoming);
    Ok(Response { status, headers, body })
}

/// Wait until `ready` or `timeout`; false when the timeout came first.
fn wait(ready: &wasip2::io::poll::Pollable, timeout: Option<Duration>) -> bool {
    let Some(t) = timeout else {
        ready.block();
        return true;
    };
    let timer = monotonic_clock::subscribe_duration(u64::try_from(t.as_nanos()).unwrap_or(u64::MAX));
    let fired = poll::poll(&[ready, &timer]);
    fired.contains(&0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_split() {
        let u = split_url("https://api.example.com:8443/v1/x?q=1#frag").unwrap();
        assert_eq!(
            u,
            UrlParts { scheme: "https", authority: "api.example.com:8443", path_with_query: "/v1/x?q=1".into() }
        );
        let u = split_url("https://example.com").unwrap();
        assert_eq!(u.path_with_query, "/");
        let u = split_url("https://example.com?q=2").unwrap();
        assert_eq!(u.path_with_query, "/?q=2");
        assert!(matches!(split_url("example.com/x"), Err(HttpError::InvalidUrl(_))));
        assert!(matches!(split_url("https://user:pw@example.com/"), Err(HttpError::InvalidUrl(_))));
    }
}
