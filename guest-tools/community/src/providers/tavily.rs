//! `deerflow.community.tavily.tools`: Tavily search and extract through tavily-python
//! (requests). DeerFlow builds the client from the `web_search` entry's `api_key` for both
//! tools; the host hands `web_fetch` that key as its own (see the host's community table).

use serde_json::{json, Value};

use super::{arg_str, index, iterate, Ctx, Out};
use crate::net::{requests_status_error, Client, PyError, Request, Response};
use crate::py::{self, dumps_indented, object};

pub const BASE: &str = "https://api.tavily.com";

/// `TavilyClient(api_key=…)`.
fn client_key(ctx: &Ctx) -> Result<String, PyError> {
    let key = match ctx.get("api_key") {
        Some(v) if !v.is_null() => Some(v.clone()),
        _ => (ctx.env)("TAVILY_API_KEY").map(Value::String),
    };
    match key {
        Some(k) if py::truthy(&k) => Ok(py::str_of(&k)),
        _ => Err(PyError::new(
            "MissingAPIKeyError",
            "No API key provided. Please provide the api_key attribute or set the TAVILY_API_KEY environment variable.",
        )),
    }
}

fn post(ctx: &Ctx, key: &str, path: &str, body: &Value, timeout: f64) -> Result<Value, PyError> {
    let req = Request::new("POST", format!("{}{path}", ctx.base_url(BASE)))
        .header("Content-Type", "application/json")
        .header("Authorization", format!("Bearer {key}"))
        .header("X-Client-Source", "tavily-python")
        .json(body)
        .timeout_secs(timeout);
    let resp = match Client::Requests.send(ctx.http, req) {
        Ok(r) => r,
        Err(e) if e.class.ends_with("Timeout") => {
            return Err(PyError::new("TimeoutError", format!("Request timed out after {} seconds.", timeout as i64)))
        }
        Err(e) => return Err(e),
    };
    if resp.status == 200 {
        return resp.json().map_err(|e| PyError::new("JSONDecodeError", e));
    }
    Err(status_error(&resp))
}

fn status_error(resp: &Response) -> PyError {
    let detail = match resp.json() {
        Ok(Value::Object(o)) => match o.get("detail") {
            None => Value::Null,
            Some(Value::Object(d)) => d.get("error").cloned().unwrap_or(Value::Null),
            Some(_) => Value::String(String::new()),
        },
        _ => Value::String(String::new()),
    };
    let detail = py::str_of(&detail);
    match resp.status {
        429 => PyError::new("UsageLimitExceededError", detail),
        403 | 432 | 433 => PyError::new("ForbiddenError", detail),
        401 => PyError::new("InvalidAPIKeyError", detail),
        400 => PyError::new("BadRequestError", detail),
        _ => requests_status_error(resp)
            .unwrap_or_else(|| PyError::new("TypeError", "exceptions must derive from BaseException")),
    }
}

fn search(ctx: &Ctx, query: &str) -> Result<String, PyError> {
    let max = match ctx.get("max_results") {
        Some(v) => v.clone(),
        None => json!(5),
    };
    let key = client_key(ctx)?;
    let mut body = vec![("query", json!(query))];
    if !max.is_null() {
        body.push(("max_results", max));
    }
    let res = post(ctx, &key, "/search", &object(body), 60.0)?;
    let mut out = Vec::new();
    for r in iterate(index(&res, "results")?)? {
        out.push(object(vec![
            ("title", index(&r, "title")?.clone()),
            ("url", index(&r, "url")?.clone()),
            ("snippet", index(&r, "content")?.clone()),
        ]));
    }
    Ok(dumps_indented(&Value::Array(out)))
}

pub fn web_search(ctx: &Ctx, args: &Value) -> Out {
    let query = match arg_str(args, "web_search", "query") {
        Ok(q) => q,
        Err(o) => return o,
    };
    match search(ctx, query) {
        Ok(s) => s.into(),
        Err(e) => Out::Raised(e),
    }
}

/// `len(x) > 0` on a value Python expects to have a length.
fn non_empty(v: &Value) -> Result<bool, PyError> {
    match v {
        Value::Array(a) => Ok(!a.is_empty()),
        Value::Object(o) => Ok(!o.is_empty()),
        Value::String(s) => Ok(!s.is_empty()),
        other => Err(PyError::new("TypeError", format!("object of type '{}' has no len()", super::type_name(other)))),
    }
}

fn first(v: &Value) -> Result<Value, PyError> {
    match v {
        Value::Array(a) => a.first().cloned().ok_or_else(|| PyError::new("IndexError", "list index out of range")),
        Value::Object(_) => Err(super::key_error("0")),
        other => Err(PyError::new("TypeError", format!("'{}' object is not subscriptable", super::type_name(other)))),
    }
}

fn extract(ctx: &Ctx, url: &str) -> Result<String, PyError> {
    let key = client_key(ctx)?;
    let res = post(ctx, &key, "/extract", &object(vec![("urls", json!([url])), ("timeout", json!(30))]), 30.0)?;
    let has = |k: &str| matches!(&res, Value::Object(o) if o.contains_key(k));
    if has("failed_results") && non_empty(index(&res, "failed_results")?)? {
        let f = first(index(&res, "failed_results")?)?;
        return Ok(format!("Error: {}", py::str_of(index(&f, "error")?)));
    }
    if has("results") && non_empty(index(&res, "results")?)? {
        let r = first(index(&res, "results")?)?;
        let title = py::str_of(index(&r, "title")?);
        let raw = match index(&r, "raw_content")? {
            Value::String(s) => py::take_chars(s, 4096).to_string(),
            Value::Array(a) => py::repr(&Value::Array(a.iter().take(4096).cloned().collect())),
            other => {
                return Err(PyError::new(
                    "TypeError",
                    format!("'{}' object is not subscriptable", super::type_name(other)),
                ))
            }
        };
        return Ok(format!("# {title}\n\n{raw}"));
    }
    Ok("Error: No results found".into())
}

pub fn web_fetch(ctx: &Ctx, args: &Value) -> Out {
    let url = match arg_str(args, "web_fetch", "url") {
        Ok(u) => u,
        Err(o) => return o,
    };
    match extract(ctx, url) {
        Ok(s) => s.into(),
        Err(e) => Out::Raised(e),
    }
}
