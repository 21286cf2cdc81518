//! `deerflow.community.exa.tools`: Exa search and contents through exa-py (requests).

use serde_json::{json, Value};

use super::{arg_str, dict_get, index, iterate, no_attr, Ctx, Out};
use crate::net::{Client, PyError, Request};
use crate::py::{self, dumps_indented, object};

pub const BASE: &str = "https://api.exa.ai";

/// `Exa(api_key=…)`: the entry's `api_key` when the key is present (even empty), else
/// `EXA_API_KEY`, else exa-py's ValueError.
fn client_key(ctx: &Ctx) -> Result<String, PyError> {
    if let Some(v) = ctx.get("api_key") {
        if !v.is_null() {
            return Ok(py::str_of(v));
        }
    }
    (ctx.env)("EXA_API_KEY").ok_or_else(|| {
        PyError::new("ValueError", "API key must be provided as an argument or in EXA_API_KEY environment variable")
    })
}

/// exa-py's `request`: POST JSON, any status ≥ 400 is a ValueError with the body.
fn request(ctx: &Ctx, key: &str, path: &str, body: &Value) -> Result<Value, PyError> {
    let req = Request::new("POST", format!("{}{path}", ctx.base_url(BASE)))
        .header("x-api-key", key)
        .header("User-Agent", "exa-py/2.12.1")
        .json(body);
    let resp = Client::Requests.send(ctx.http, req)?;
    if resp.status >= 400 {
        return Err(PyError::new(
            "ValueError",
            format!("Request failed with status code {}: {}", resp.status, resp.text()),
        ));
    }
    resp.json().map_err(|e| PyError::new("JSONDecodeError", e))
}

/// `validate_search_options` for the values DeerFlow passes from config.
fn check_option(name: &str, v: &Value, ok: bool, expected: &str) -> Result<(), PyError> {
    if ok || v.is_null() {
        return Ok(());
    }
    Err(PyError::new(
        "ValueError",
        format!("Invalid value for option '{name}': {}. Expected one of {expected}", py::str_of(v)),
    ))
}

fn results(data: &Value) -> Result<Vec<Value>, PyError> {
    let items = iterate(index(data, "results")?)?;
    for r in &items {
        if !r.is_object() {
            return Err(no_attr(r, "get"));
        }
    }
    Ok(items)
}

fn search(ctx: &Ctx, query: &str) -> Result<String, PyError> {
    let max = ctx.get("max_results").cloned().unwrap_or(json!(5));
    let search_type = ctx.get("search_type").cloned().unwrap_or(json!("auto"));
    let chars = ctx.get("contents_max_characters").cloned().unwrap_or(json!(1000));
    let key = client_key(ctx)?;
    let is_int = matches!(&max, Value::Bool(_)) || matches!(&max, Value::Number(n) if !py::is_float(n));
    check_option("num_results", &max, is_int, "[<class 'int'>]")?;
    check_option("type", &search_type, search_type.is_string(), "[<class 'str'>]")?;
    let mut body = vec![("query", json!(query)), ("contents", json!({"highlights": {"maxCharacters": chars}}))];
    if !max.is_null() {
        body.push(("numResults", max));
    }
    if !search_type.is_null() {
        body.push(("type", search_type));
    }
    let data = request(ctx, &key, "/search", &object(body))?;
    let mut out = Vec::new();
    for r in results(&data)? {
        let text = |k: &str| r.get(k).filter(|v| py::truthy(v)).cloned().unwrap_or(json!(""));
        let snippet = match r.get("highlights") {
            Some(Value::Array(h)) if !h.is_empty() => {
                json!(h.iter().map(py::str_of).collect::<Vec<_>>().join("\n"))
            }
            _ => json!(""),
        };
        out.push(object(vec![("title", text("title")), ("url", text("url")), ("snippet", snippet)]));
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
        Err(e) => format!("Error: {e}").into(),
    }
}

fn contents(ctx: &Ctx, url: &str) -> Result<String, PyError> {
    let key = client_key(ctx)?;
    let data = request(
        ctx,
        &key,
        "/contents",
        &object(vec![("urls", json!([url])), ("text", json!({"maxCharacters": 4096}))]),
    )?;
    let _ = dict_get(&data, "statuses")?;
    let items = results(&data)?;
    let Some(r) = items.first() else { return Ok("Error: No results found".into()) };
    let title = r.get("title").filter(|v| py::truthy(v)).map(py::str_of).unwrap_or_else(|| "Untitled".into());
    let text = r.get("text").filter(|v| py::truthy(v)).map(py::str_of).unwrap_or_default();
    Ok(format!("# {title}\n\n{}", py::take_chars(&text, 4096)))
}

pub fn web_fetch(ctx: &Ctx, args: &Value) -> Out {
    let url = match arg_str(args, "web_fetch", "url") {
        Ok(u) => u,
        Err(o) => return o,
    };
    match contents(ctx, url) {
        Ok(s) => s.into(),
        Err(e) => format!("Error: {e}").into(),
    }
}
