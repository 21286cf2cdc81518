//! `deerflow.community.firecrawl.tools` and `deerflow.community.fastcrw.tools` (fastCRW speaks
//! Firecrawl's API): firecrawl-py 4.23.0's unified `FirecrawlApp` — the v1 client's key check,
//! then v2's `search` and `scrape` over requests, with its retries, its validation and its error
//! texts.

use serde_json::{json, Value};

use super::{arg_str, Ctx, Out};
use crate::net::{Client, PyError, Request, Response};
use crate::py::{self, dumps_indented, object};

pub const FIRECRAWL_BASE: &str = "https://api.firecrawl.dev";
pub const FASTCRW_BASE: &str = "https://fastcrw.com/api";
const ORIGIN: &str = "python-sdk@4.23.0";

/// Which DeerFlow module: they differ in where the key and the base come from.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Flavor {
    Firecrawl,
    Fastcrw,
}

struct Client_ {
    base: String,
    key: Option<String>,
}

fn client(ctx: &Ctx, flavor: Flavor) -> Result<Client_, PyError> {
    let configured = match ctx.get("api_key") {
        None => None,
        Some(Value::Null) => None,
        Some(v) => Some(py::str_of(v)),
    };
    // What DeerFlow passes to `FirecrawlApp(api_key=…, api_url=…)`.
    let (api_key, api_url, base) = match flavor {
        // DeerFlow always talks to the cloud API here; `base_url` only redirects the wire.
        Flavor::Firecrawl => (configured, FIRECRAWL_BASE.to_string(), ctx.base_url(FIRECRAWL_BASE)),
        Flavor::Fastcrw => {
            let key = if ctx.get("api_key").is_none() { (ctx.env)("CRW_API_KEY") } else { configured };
            let base = match ctx.get("base_url") {
                Some(v) if !v.is_null() => py::str_of(v),
                _ => (ctx.env)("CRW_API_URL").unwrap_or_else(|| FASTCRW_BASE.to_string()),
            };
            (key, base.clone(), base)
        }
    };
    // firecrawl-py 4.23.0's unified `FirecrawlApp` builds its v1 client first
    // (`V1FirecrawlApp.__init__`): `api_key or $FIRECRAWL_API_KEY`, `api_url or
    // $FIRECRAWL_API_URL`, and no key for a cloud URL (case-sensitive) is its error.
    let v1_key = api_key.clone().filter(|k| !k.is_empty()).or_else(|| (ctx.env)("FIRECRAWL_API_KEY"));
    let v1_url = if api_url.is_empty() {
        (ctx.env)("FIRECRAWL_API_URL").unwrap_or_else(|| FIRECRAWL_BASE.to_string())
    } else {
        api_url.clone()
    };
    if v1_url.contains("api.firecrawl.dev") && v1_key.is_none() {
        return Err(PyError::new("ValueError", "No API key provided"));
    }
    // Then the v2 client: `$FIRECRAWL_API_KEY` only for a key of None; an empty one fails.
    let key = api_key.or_else(|| (ctx.env)("FIRECRAWL_API_KEY"));
    let cloud = api_url.to_lowercase().contains("api.firecrawl.dev");
    if cloud && key.as_deref().is_none_or(str::is_empty) {
        return Err(PyError::new(
            "ValueError",
            "API key is required for the cloud API. Set FIRECRAWL_API_KEY environment variable or pass api_key parameter.",
        ));
    }
    Ok(Client_ { base, key: key.filter(|k| !k.is_empty()) })
}

/// `HttpClient.post`: three attempts on a 502 or a connection failure, backing off.
fn post(ctx: &Ctx, c: &Client_, endpoint: &str, body: Vec<(&str, Value)>) -> Result<Response, PyError> {
    let mut payload = body;
    payload.push(("origin", json!(ORIGIN)));
    // `urljoin(api_url + "/", "/v2/…")`: the endpoint's absolute path replaces the base's.
    let url = crate::url::join(&format!("{}/", c.base.trim_end_matches('/')), endpoint);
    let mut req = Request::new("POST", url).header("Content-Type", "application/json");
    if let Some(k) = &c.key {
        req = req.header("Authorization", format!("Bearer {k}"));
    }
    let req = req.json(&object(payload));
    for attempt in 0..3 {
        match Client::Requests.send(ctx.http, req.clone()) {
            Ok(resp) if resp.status == 502 && attempt < 2 => {}
            Ok(resp) => return Ok(resp),
            Err(e) if attempt == 2 => return Err(e),
            Err(_) => {}
        }
        (ctx.sleep)(0.5 * f64::from(1u32 << attempt));
    }
    Err(PyError::new("Exception", "Unexpected error in POST request"))
}

/// `handle_response_error(response, action)`.
fn response_error(resp: &Response, action: &str) -> PyError {
    let (message, details) = match resp.json() {
        Ok(Value::Object(o)) => (
            o.get("error").map(py::str_of).unwrap_or_else(|| "No error message provided.".into()),
            o.get("details").map(py::str_of).unwrap_or_else(|| "No additional error details provided.".into()),
        ),
        _ => {
            let text = resp.text();
            let text = py::take_chars(&text, 500);
            if text.trim().is_empty() {
                (
                    format!("Server returned empty response with status {}", resp.status),
                    "No additional details available".into(),
                )
            } else {
                (format!("Server returned non-JSON response: {text}"), format!("Full response status: {}", resp.status))
            }
        }
    };
    let (class, text) = match resp.status {
        400 => ("BadRequestError", format!("Bad Request: Failed to {action}. {message} - {details}")),
        401 => ("UnauthorizedError", format!("Unauthorized: Failed to {action}. {message} - {details}")),
        402 => ("PaymentRequiredError", format!("Payment Required: Failed to {action}. {message} - {details}")),
        403 => {
            ("WebsiteNotSupportedError", format!("Website Not Supported: Failed to {action}. {message} - {details}"))
        }
        408 => (
            "RequestTimeoutError",
            format!("Request Timeout: Failed to {action} as the request timed out. {message} - {details}"),
        ),
        429 => ("RateLimitError", format!("Rate Limit Exceeded: Failed to {action}. {message} - {details}")),
        500 => ("InternalServerError", format!("Internal Server Error: Failed to {action}. {message} - {details}")),
        s => ("FirecrawlError", format!("Unexpected error during {action}: Status code {s}. {message} - {details}")),
    };
    PyError::new(class, text)
}

/// pydantic's lax int for `SearchRequest.limit`.
fn limit(v: &Value) -> Result<i64, PyError> {
    let n = match v {
        Value::Number(n) if !py::is_float(n) => n.as_i64(),
        Value::Number(n) => n.as_f64().filter(|f| f.fract() == 0.0).map(|f| f as i64),
        Value::String(s) => py::int_str(s),
        _ => None,
    };
    let n = n.ok_or_else(|| {
        PyError::new(
            "ValidationError",
            format!(
                "1 validation error for SearchRequest\nlimit\n  Input should be a valid integer [input_value={}]",
                py::repr(v)
            ),
        )
    })?;
    if n <= 0 {
        return Err(PyError::new("ValueError", "Limit must be positive"));
    }
    if n > 100 {
        return Err(PyError::new("ValueError", "Limit cannot exceed 100"));
    }
    Ok(n)
}

fn search(ctx: &Ctx, flavor: Flavor, query: &str) -> Result<String, PyError> {
    let max = ctx.get("max_results").cloned().unwrap_or(json!(5));
    let c = client(ctx, flavor)?;
    if query.trim().is_empty() {
        return Err(PyError::new("ValueError", "Query cannot be empty"));
    }
    let mut body = vec![("query", json!(query))];
    if !max.is_null() {
        body.push(("limit", json!(limit(&max)?)));
    }
    // firecrawl-py re-handles any exception that carries a `response`: requests' own errors
    // carry `None`, and reading its status fails in turn.
    let none_response = || PyError::new("AttributeError", "'NoneType' object has no attribute 'status_code'");
    let resp = post(ctx, &c, "/v2/search", body).map_err(|_| none_response())?;
    if resp.status != 200 {
        return Err(response_error(&resp, "search"));
    }
    let data = resp.json().map_err(|_| none_response())?;
    let Value::Object(obj) = &data else { return Err(super::no_attr(&data, "get")) };
    if !obj.get("success").is_some_and(py::truthy) {
        return Err(response_error(&resp, "search"));
    }
    let inner = obj.get("data").filter(|v| py::truthy(v)).cloned().unwrap_or(json!({}));
    let web = match inner.get("web") {
        Some(Value::Array(a)) => a.clone(),
        Some(Value::Null) | None => vec![],
        Some(other) => super::iterate(other)?,
    };
    let mut out = Vec::new();
    for item in web {
        let field = |k: &str| match &item {
            Value::Object(o) => o.get(k).filter(|v| py::truthy(v)).cloned().unwrap_or(json!("")),
            _ => json!(""),
        };
        let url = if item.is_object() {
            field("url")
        } else if py::truthy(&item) {
            item.clone()
        } else {
            json!("")
        };
        out.push(object(vec![("title", field("title")), ("url", url), ("snippet", field("description"))]));
    }
    Ok(dumps_indented(&Value::Array(out)))
}

pub fn web_search(ctx: &Ctx, args: &Value, flavor: Flavor) -> Out {
    let query = match arg_str(args, "web_search", "query") {
        Ok(q) => q,
        Err(o) => return o,
    };
    match search(ctx, flavor, query) {
        Ok(s) => s.into(),
        Err(e) => format!("Error: {e}").into(),
    }
}

fn scrape(ctx: &Ctx, flavor: Flavor, url: &str) -> Result<String, PyError> {
    let c = client(ctx, flavor)?;
    if url.trim().is_empty() {
        return Err(PyError::new("ValueError", "URL cannot be empty"));
    }
    let body = vec![
        ("url", json!(url.trim())),
        ("onlyMainContent", json!(true)),
        ("skipTlsVerification", json!(true)),
        ("removeBase64Images", json!(true)),
        ("fastMode", json!(false)),
        ("blockAds", json!(true)),
        ("storeInCache", json!(true)),
        ("maxAge", json!(14_400_000)),
        ("formats", json!(["markdown"])),
        ("mobile", json!(false)),
    ];
    let resp = post(ctx, &c, "/v2/scrape", body)?;
    if resp.status >= 400 {
        return Err(response_error(&resp, "scrape"));
    }
    let data = resp.json().map_err(|e| PyError::new("JSONDecodeError", e))?;
    let Value::Object(obj) = &data else { return Err(super::no_attr(&data, "get")) };
    if !obj.get("success").is_some_and(py::truthy) {
        return Err(PyError::new(
            "Exception",
            obj.get("error").map(py::str_of).unwrap_or_else(|| "Unknown error occurred".into()),
        ));
    }
    let doc = obj.get("data").cloned().unwrap_or(json!({}));
    let markdown = doc.get("markdown").filter(|v| py::truthy(v)).map(py::str_of).unwrap_or_default();
    let title = doc
        .get("metadata")
        .and_then(|m| m.get("title"))
        .filter(|t| py::truthy(t))
        .map(py::str_of)
        .unwrap_or_else(|| "Untitled".into());
    if markdown.is_empty() {
        return Ok("Error: No content found".into());
    }
    Ok(format!("# {title}\n\n{}", py::take_chars(&markdown, 4096)))
}

pub fn web_fetch(ctx: &Ctx, args: &Value, flavor: Flavor) -> Out {
    let url = match arg_str(args, "web_fetch", "url") {
        Ok(u) => u,
        Err(o) => return o,
    };
    if flavor == Flavor::Fastcrw {
        let allow = py::coerce_bool(ctx.get("allow_private_addresses"), false);
        if let Some(e) = crate::url::validate_public_http_url(url, allow, "fetch", ctx.resolve) {
            return e.into();
        }
    }
    match scrape(ctx, flavor, url) {
        Ok(s) => s.into(),
        Err(e) => format!("Error: {e}").into(),
    }
}
