//! HTTP as DeerFlow's clients behave: requests go out through a [`Http`] transport (wasi:http in
//! the component, canned responses in tests), and what goes wrong reads as the Python exception
//! the provider's client library (httpx or requests) would have raised. `requests` follows
//! redirects itself, so a redirect is one more request through the transport, checked by the
//! host like the first; httpx does not follow them.

use std::time::Duration;

use serde_json::Value;

use crate::py;
use crate::url;

/// Largest response body a provider may send: more is refused, never buffered.
pub const MAX_RESPONSE_BYTES: usize = 8 << 20;

/// One request.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    pub method: String,
    pub url: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    pub timeout: Option<Duration>,
}

impl Request {
    pub fn new(method: &str, url: impl Into<String>) -> Self {
        Self { method: method.into(), url: url.into(), headers: Vec::new(), body: Vec::new(), timeout: None }
    }

    pub fn header(mut self, name: &str, value: impl Into<String>) -> Self {
        self.headers.push((name.to_string(), value.into()));
        self
    }

    /// A JSON body as Python's `json.dumps` writes it (what httpx and requests send).
    pub fn json(mut self, body: &Value) -> Self {
        self.body = py::dumps(body).into_bytes();
        if !self.headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("content-type")) {
            self.headers.push(("Content-Type".into(), "application/json".into()));
        }
        self
    }

    /// A timeout in seconds (a config value); none for a non-positive or absurd one.
    pub fn timeout_secs(mut self, secs: f64) -> Self {
        self.timeout = (secs.is_finite() && secs > 0.0 && secs < 1e9).then(|| Duration::from_secs_f64(secs));
        self
    }
}

/// A response, its body read whole.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// The URL that answered (after redirects).
    pub url: String,
}

impl Response {
    /// `response.text`: the body decoded as UTF-8, undecodable bytes replaced.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// `response.json()`: the value, or Python's `JSONDecodeError` text.
    pub fn json(&self) -> Result<Value, String> {
        let text = self.text();
        py::loads(text.strip_prefix('\u{feff}').unwrap_or(&text))
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }

    /// The standard reason phrase of the status (what httpx and requests print).
    pub fn reason(&self) -> &'static str {
        reason_phrase(self.status)
    }
}

/// Why a request produced no response.
#[derive(Debug, Clone, PartialEq)]
pub enum Failure {
    /// The host refused it: not in the tool's network grant, not https, or a private address.
    Refused(String),
    /// Connecting failed (refused, unreachable, DNS, TLS).
    Connect(String),
    Timeout {
        connecting: bool,
    },
    /// The body ended early: short of `expected` bytes, or inside a chunk (`None`).
    Incomplete {
        received: usize,
        expected: Option<u64>,
    },
    TooLarge(usize),
    /// The URL cannot be requested (no http(s) scheme, no host).
    InvalidUrl(String),
}

/// What sends requests.
pub trait Http {
    fn send(&self, req: &Request) -> Result<Response, Failure>;
}

/// The Python client library a provider's DeerFlow code uses; it decides how failures read and
/// whether redirects are followed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Client {
    Httpx,
    Requests,
}

/// A raised Python exception: class name and `str(e)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PyError {
    pub class: String,
    pub message: String,
}

impl PyError {
    pub fn new(class: &str, message: impl Into<String>) -> Self {
        Self { class: class.into(), message: message.into() }
    }
}

impl std::fmt::Display for PyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

/// `requests`' redirect limit.
const MAX_REDIRECTS: usize = 30;

impl Client {
    /// Send `req`; `requests` follows redirects (each hop a new request the host checks again),
    /// httpx returns them.
    pub fn send(self, http: &dyn Http, req: Request) -> Result<Response, PyError> {
        if let Some(e) = self.check_url(&req.url) {
            return Err(e);
        }
        let mut req = req;
        let mut hops = 0;
        loop {
            let mut resp = http.send(&req).map_err(|f| self.exception(&f, &req))?;
            resp.url = req.url.clone();
            let location = resp.header("location").map(str::to_string);
            let redirect = matches!(resp.status, 301 | 302 | 303 | 307 | 308);
            if self == Client::Httpx || !redirect {
                return Ok(resp);
            }
            let Some(location) = location else { return Ok(resp) };
            hops += 1;
            if hops > MAX_REDIRECTS {
                return Err(PyError::new("TooManyRedirects", format!("Exceeded {MAX_REDIRECTS} redirects.")));
            }
            let next = url::join(&req.url, &location);
            if let Some(e) = self.check_url(&next) {
                return Err(e);
            }
            // requests' rebuild_method and rebuild_auth.
            if resp.status == 303 && req.method != "HEAD" || matches!(resp.status, 301 | 302) && req.method == "POST" {
                req.method = "GET".into();
                req.body.clear();
                req.headers.retain(|(k, _)| !k.eq_ignore_ascii_case("content-type"));
            }
            if url::host_of(&next) != url::host_of(&req.url) {
                req.headers.retain(|(k, _)| !k.eq_ignore_ascii_case("authorization"));
            }
            req.url = next;
        }
    }

    /// The exception the library raises before sending, for a URL it cannot request.
    fn check_url(self, u: &str) -> Option<PyError> {
        let scheme = u.split_once("://").map(|(s, _)| s.to_ascii_lowercase());
        match (self, scheme.as_deref()) {
            (_, Some("http" | "https")) if url::host_of(u).is_some() => None,
            (Client::Httpx, None) => {
                Some(PyError::new("UnsupportedProtocol", "Request URL is missing an 'http://' or 'https://' protocol."))
            }
            (Client::Httpx, Some("http" | "https")) => {
                Some(PyError::new("LocalProtocolError", "Missing 'Host' header."))
            }
            (Client::Httpx, Some(s)) => {
                Some(PyError::new("UnsupportedProtocol", format!("Request URL has an unsupported protocol '{s}://'.")))
            }
            (Client::Requests, None) => Some(PyError::new(
                "MissingSchema",
                format!("Invalid URL '{u}': No scheme supplied. Perhaps you meant https://{u}?"),
            )),
            (Client::Requests, Some("http" | "https")) => {
                Some(PyError::new("InvalidURL", format!("Invalid URL '{u}': No host supplied")))
            }
            (Client::Requests, Some(_)) => {
                Some(PyError::new("InvalidSchema", format!("No connection adapters were found for '{u}'")))
            }
        }
    }

    /// The exception the library raises for a failed request.
    pub fn exception(self, f: &Failure, req: &Request) -> PyError {
        let (host, port, path) = url::parts(&req.url);
        let pool = format!(
            "{}ConnectionPool(host='{host}', port={port})",
            if req.url.starts_with("https") { "HTTPS" } else { "HTTP" }
        );
        let timeout = req.timeout.map(|t| py::float_repr(t.as_secs_f64())).unwrap_or_else(|| "None".into());
        match (self, f) {
            (Client::Httpx, Failure::Refused(m) | Failure::Connect(m)) => PyError::new("ConnectError", m.clone()),
            (Client::Httpx, Failure::Timeout { connecting: true }) => PyError::new("ConnectTimeout", "timed out"),
            (Client::Httpx, Failure::Timeout { connecting: false }) => PyError::new("ReadTimeout", "timed out"),
            (Client::Httpx, Failure::Incomplete { received, expected }) => PyError::new(
                "RemoteProtocolError",
                match expected {
                    Some(n) => format!(
                        "peer closed connection without sending complete message body (received {received} bytes, expected {n})"
                    ),
                    None => "peer closed connection without sending complete message body (incomplete chunked read)"
                        .into(),
                },
            ),
            (Client::Httpx, Failure::TooLarge(n)) => PyError::new("ReadError", too_large(*n)),
            (Client::Httpx, Failure::InvalidUrl(m)) => PyError::new("InvalidURL", m.clone()),
            (Client::Requests, Failure::Refused(m) | Failure::Connect(m)) => PyError::new(
                "ConnectionError",
                format!("{pool}: Max retries exceeded with url: {path} (Caused by {m})"),
            ),
            (Client::Requests, Failure::Timeout { connecting: true }) => PyError::new(
                "ConnectTimeout",
                format!("{pool}: Max retries exceeded with url: {path} (Caused by ConnectTimeoutError('Connection to {host} timed out. (connect timeout={timeout})'))"),
            ),
            (Client::Requests, Failure::Timeout { connecting: false }) => {
                PyError::new("ReadTimeout", format!("{pool}: Read timed out. (read timeout={timeout})"))
            }
            (Client::Requests, Failure::Incomplete { received, expected: Some(n) }) => {
                let rest = n.saturating_sub(*received as u64);
                let inner = format!("IncompleteRead({received} bytes read, {rest} more expected)");
                PyError::new("ChunkedEncodingError", format!("('Connection broken: {inner}', {inner})"))
            }
            (Client::Requests, Failure::Incomplete { expected: None, .. }) => {
                PyError::new("ChunkedEncodingError", "Response ended prematurely")
            }
            (Client::Requests, Failure::TooLarge(n)) => PyError::new("ConnectionError", too_large(*n)),
            (Client::Requests, Failure::InvalidUrl(m)) => PyError::new("InvalidURL", m.clone()),
        }
    }
}

fn too_large(n: usize) -> String {
    format!("the response body is larger than toolhost's limit of {n} bytes")
}

/// httpx's `raise_for_status()`: `None` for 2xx, else the `HTTPStatusError` message.
pub fn httpx_status_error(resp: &Response) -> Option<PyError> {
    let s = resp.status;
    if (200..300).contains(&s) {
        return None;
    }
    let head = match s {
        100..=199 => "Informational response",
        300..=399 => "Redirect response",
        400..=499 => "Client error",
        _ => "Server error",
    };
    let mut msg = format!("{head} '{s} {}' for url '{}'", resp.reason(), resp.url);
    if (300..400).contains(&s) {
        msg.push_str(&format!("\nRedirect location: '{}'", resp.header("location").unwrap_or("")));
    }
    msg.push_str(&format!(
        "\nFor more information check: https://developer.mozilla.org/en-US/docs/Web/HTTP/Status/{s}"
    ));
    Some(PyError::new("HTTPStatusError", msg))
}

/// requests' `raise_for_status()`: `None` below 400, else the `HTTPError` message.
pub fn requests_status_error(resp: &Response) -> Option<PyError> {
    let s = resp.status;
    let kind = match s {
        400..=499 => "Client",
        500..=599 => "Server",
        _ => return None,
    };
    Some(PyError::new("HTTPError", format!("{s} {kind} Error: {} for url: {}", resp.reason(), resp.url)))
}

/// The standard reason phrase of an HTTP status.
pub fn reason_phrase(status: u16) -> &'static str {
    match status {
        100 => "Continue",
        101 => "Switching Protocols",
        200 => "OK",
        201 => "Created",
        202 => "Accepted",
        204 => "No Content",
        206 => "Partial Content",
        301 => "Moved Permanently",
        302 => "Found",
        303 => "See Other",
        304 => "Not Modified",
        307 => "Temporary Redirect",
        308 => "Permanent Redirect",
        400 => "Bad Request",
        401 => "Unauthorized",
        402 => "Payment Required",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        406 => "Not Acceptable",
        408 => "Request Timeout",
        409 => "Conflict",
        410 => "Gone",
        411 => "Length Required",
        413 => "Request Entity Too Large",
        414 => "Request-URI Too Long",
        415 => "Unsupported Media Type",
        422 => "Unprocessable Entity",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        501 => "Not Implemented",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        _ => "",
    }
}

/// A transport that answers from a list, for tests: each request gets the next response.
#[cfg(test)]
pub struct Canned {
    pub responses: std::cell::RefCell<std::collections::VecDeque<Result<Response, Failure>>>,
    pub seen: std::cell::RefCell<Vec<Request>>,
}

#[cfg(test)]
impl Canned {
    pub fn new(responses: Vec<Result<Response, Failure>>) -> Self {
        Self { responses: std::cell::RefCell::new(responses.into()), seen: Default::default() }
    }

    pub fn json(status: u16, body: &str) -> Self {
        Self::new(vec![Ok(Response {
            status,
            headers: vec![("content-type".into(), "application/json".into())],
            body: body.as_bytes().to_vec(),
            url: String::new(),
        })])
    }
}

#[cfg(test)]
impl Http for Canned {
    fn send(&self, req: &Request) -> Result<Response, Failure> {
        self.seen.borrow_mut().push(req.clone());
        self.responses.borrow_mut().pop_front().unwrap_or(Err(Failure::Connect("no more canned responses".into())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resp(status: u16, headers: &[(&str, &str)]) -> Result<Response, Failure> {
        Ok(Response {
            status,
            headers: headers.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            body: Vec::new(),
            url: String::new(),
        })
    }

    #[test]
    fn requests_follows_redirects_and_httpx_does_not() {
        let http = Canned::new(vec![resp(302, &[("location", "/next")]), resp(200, &[])]);
        let req = Request::new("POST", "https://a.test/x").header("Authorization", "k").json(&serde_json::json!({}));
        let r = Client::Requests.send(&http, req.clone()).unwrap();
        assert_eq!(r.status, 200);
        let seen = http.seen.borrow();
        assert_eq!(seen[1].url, "https://a.test/next");
        assert_eq!(seen[1].method, "GET", "302 turns POST into GET");
        assert!(seen[1].headers.iter().any(|(k, _)| k == "Authorization"), "same host keeps auth");

        let http = Canned::new(vec![resp(307, &[("location", "https://169.254.169.254/latest")]), resp(200, &[])]);
        Client::Requests.send(&http, req.clone()).unwrap();
        let seen = http.seen.borrow();
        assert_eq!(seen[1].url, "https://169.254.169.254/latest");
        assert!(!seen[1].headers.iter().any(|(k, _)| k == "Authorization"), "another host loses auth");

        let http = Canned::new(vec![resp(302, &[("location", "/next")])]);
        assert_eq!(Client::Httpx.send(&http, req).unwrap().status, 302);
    }

    #[test]
    fn failures_read_like_the_libraries() {
        let req = Request::new("POST", "https://api.test:8443/v1/x?q=1").timeout_secs(30.0);
        let f = Failure::Incomplete { received: 7, expected: Some(100) };
        assert_eq!(
            Client::Httpx.exception(&f, &req).message,
            "peer closed connection without sending complete message body (received 7 bytes, expected 100)"
        );
        assert_eq!(
            Client::Requests.exception(&f, &req).message,
            "('Connection broken: IncompleteRead(7 bytes read, 93 more expected)', IncompleteRead(7 bytes read, 93 more expected))"
        );
        assert_eq!(
            Client::Requests.exception(&Failure::Timeout { connecting: false }, &req).message,
            "HTTPSConnectionPool(host='api.test', port=8443): Read timed out. (read timeout=30.0)"
        );
        let bad = Client::Httpx.send(&Canned::new(vec![]), Request::new("GET", "example.com")).unwrap_err();
        assert_eq!(bad.class, "UnsupportedProtocol");
    }

    #[test]
    fn status_errors_read_like_the_libraries() {
        let r = Response { status: 500, url: "https://x.test/search?q=a+b".into(), ..Default::default() };
        assert_eq!(
            httpx_status_error(&r).unwrap().message,
            "Server error '500 Internal Server Error' for url 'https://x.test/search?q=a+b'\nFor more information check: https://developer.mozilla.org/en-US/docs/Web/HTTP/Status/500"
        );
        assert_eq!(
            requests_status_error(&r).unwrap().message,
            "500 Server Error: Internal Server Error for url: https://x.test/search?q=a+b"
        );
        let r = Response {
            status: 302,
            url: "https://x.test/s".into(),
            headers: vec![("Location".into(), "https://169.254.169.254/".into())],
            ..Default::default()
        };
        assert!(httpx_status_error(&r).unwrap().message.contains("Redirect location: 'https://169.254.169.254/'"));
        assert!(requests_status_error(&r).is_none());
    }
}
