//! `deerflow.community.groundroute.tools`: GroundRoute meta-search and page fetch (httpx).

use serde_json::{json, Value};

use super::{arg_int, arg_str, dict_get, error_json, iterate, no_attr, Ctx, Out};
use crate::net::{httpx_status_error, Client, PyError, Request};
use crate::py::{self, dumps_indented, object};

pub const BASE: &str = "https://api.groundroute.ai";

fn api_key(ctx: &Ctx) -> Option<String> {
    if let Some(Value::String(k)) = ctx.get("api_key") {
        if !k.trim().is_empty() {
            return Some(k.trim().to_string());
        }
    }
    ctx.env_nonempty("GROUNDROUTE_API_KEY")
}

enum Fail {
    Status(u16),
    Other(PyError),
}

fn post(ctx: &Ctx, key: &str, body: &Value) -> Result<Value, Fail> {
    let req = Request::new("POST", format!("{}/v1/search", ctx.base_url(BASE)))
        .header("Authorization", format!("Bearer {key}"))
        .json(body)
        .timeout_secs(30.0);
    let resp = Client::Httpx.send(ctx.http, req).map_err(Fail::Other)?;
    if httpx_status_error(&resp).is_some() {
        return Err(Fail::Status(resp.status));
    }
    resp.json().map_err(|e| Fail::Other(PyError::new("JSONDecodeError", e)))
}

/// `data.get("results") or []`.
fn results(data: &Value) -> Result<Value, PyError> {
    Ok(dict_get(data, "results")?.filter(|v| py::truthy(v)).cloned().unwrap_or(json!([])))
}

pub fn web_search(ctx: &Ctx, args: &Value) -> Out {
    let query = match arg_str(args, "web_search", "query") {
        Ok(q) => q,
        Err(o) => return o,
    };
    let mut max = match arg_int(args, "web_search", "max_results") {
        Ok(m) => m.map(|n| json!(n)),
        Err(o) => return o,
    };
    if max.is_none() {
        max = ctx.get("max_results").cloned().filter(|v| !v.is_null());
    }
    let count = match max {
        None => 5,
        Some(v) => py::int(&v).unwrap_or(5).clamp(1, 50),
    };
    let Some(key) = api_key(ctx) else {
        return error_json("GROUNDROUTE_API_KEY is not configured", "query", query).into();
    };
    let data = match post(ctx, &key, &object(vec![("query", json!(query)), ("max_results", json!(count))])) {
        Ok(d) => d,
        Err(Fail::Status(s)) => return error_json(&format!("GroundRoute API error: HTTP {s}"), "query", query).into(),
        Err(Fail::Other(e)) => return error_json(&e.message, "query", query).into(),
    };
    let format = || -> Result<String, PyError> {
        let results = results(&data)?;
        if !py::truthy(&results) {
            return Ok(error_json("No results found", "query", query));
        }
        let mut out = Vec::new();
        for r in iterate(&results)? {
            if !r.is_object() {
                return Err(no_attr(&r, "get"));
            }
            out.push(object(vec![
                ("title", super::get_or(&r, "title", json!(""))),
                ("url", super::get_or(&r, "url", json!(""))),
                ("snippet", super::get_or(&r, "snippet", json!(""))),
                ("source_engine", super::get_or(&r, "source_engine", json!(""))),
            ]));
        }
        Ok(dumps_indented(&Value::Array(out)))
    };
    match format() {
        Ok(s) => s.into(),
        Err(e) => Out::Raised(e),
    }
}

pub fn web_fetch(ctx: &Ctx, args: &Value) -> Out {
    let url = match arg_str(args, "web_fetch", "url") {
        Ok(u) => u,
        Err(o) => return o,
    };
    let Some(key) = api_key(ctx) else { return error_json("GROUNDROUTE_API_KEY is not configured", "url", url).into() };
    let body = object(vec![("query", json!(url)), ("mode", json!("page")), ("max_results", json!(1))]);
    let data = match post(ctx, &key, &body) {
        Ok(d) => d,
        Err(Fail::Status(s)) => return format!("Error: GroundRoute API error: HTTP {s}").into(),
        Err(Fail::Other(e)) => return format!("Error: {e}").into(),
    };
    let format = || -> Result<String, PyError> {
        let results = results(&data)?;
        if !py::truthy(&results) {
            return Ok("Error: No results found".into());
        }
        let first = iterate(&results)?.into_iter().next().unwrap_or(Value::Null);
        if !first.is_object() {
            return Err(no_attr(&first, "get"));
        }
        let content = py::or(first.get("content"), py::or(first.get("snippet"), None))
            .filter(|v| py::truthy(v))
            .cloned()
            .unwrap_or(json!(""));
        let title = first.get("title").cloned().unwrap_or(json!(""));
        let content = match &content {
            Value::String(s) => py::take_chars(s, 4096).to_string(),
            other => py::str_of(other),
        };
        Ok(format!("# {}\n\n{content}", py::str_of(&title)))
    };
    match format() {
        Ok(s) => s.into(),
        Err(e) => Out::Raised(e),
    }
}
