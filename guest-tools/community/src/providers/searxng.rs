//! `deerflow.community.searxng.tools`: a self-hosted SearXNG instance (httpx).

use serde_json::{json, Value};

use super::{arg_str, error_json, Ctx, Out};
use crate::net::{httpx_status_error, Client, PyError, Request};
use crate::py::{self, dumps_indented, object};
use crate::url::urlencode;

pub const BASE: &str = "http://localhost:8088";

fn search(ctx: &Ctx, query: &str) -> Result<String, PyError> {
    let max = match ctx.get("max_results") {
        None => 5,
        Some(v @ Value::Number(n)) if !py::is_float(n) => py::int(v).unwrap_or(5),
        Some(v) => py::int(v).ok_or_else(|| {
            PyError::new("ValueError", format!("invalid literal for int() with base 10: {}", py::repr(v)))
        })?,
    };
    let base = match ctx.get("base_url") {
        Some(Value::String(s)) => s.trim_end_matches('/').to_string(),
        _ => BASE.to_string(),
    };
    let mut params =
        vec![("q", query.to_string()), ("format", "json".into()), ("language", "auto".into()), ("pageno", "1".into())];
    if max != 0 {
        params.push(("limit", max.to_string()));
    }
    let req = Request::new("GET", format!("{base}/search?{}", urlencode(&params)))
        .header("User-Agent", "Mozilla/5.0 (compatible; DeerFlow/1.0)")
        .header("Accept", "application/json")
        .timeout_secs(30.0);
    let resp = Client::Httpx.send(ctx.http, req)?;
    if let Some(e) = httpx_status_error(&resp) {
        return Err(e);
    }
    let data = resp.json().map_err(|e| PyError::new("JSONDecodeError", e))?;
    let results = super::dict_get(&data, "results")?.cloned().unwrap_or(json!([]));
    let results: Vec<Value> = match (&results, max) {
        (Value::Array(a), 0) => a.clone(),
        (Value::Array(a), n) => slice(a, n),
        (other, _) => super::iterate(other)?,
    };
    let mut out = Vec::new();
    for r in results {
        if !r.is_object() {
            return Err(super::no_attr(&r, "get"));
        }
        out.push(object(vec![
            ("title", super::get_or(&r, "title", json!(""))),
            ("url", super::get_or(&r, "url", json!(""))),
            ("snippet", super::get_or(&r, "content", json!(""))),
        ]));
    }
    Ok(dumps_indented(&Value::Array(out)))
}

/// `results[:n]` with Python's negative bounds.
fn slice(a: &[Value], n: i64) -> Vec<Value> {
    let len = a.len() as i64;
    let end = if n < 0 { (len + n).max(0) } else { n.min(len) };
    a[..end as usize].to_vec()
}

pub fn web_search(ctx: &Ctx, args: &Value) -> Out {
    let query = match arg_str(args, "web_search", "query") {
        Ok(q) => q,
        Err(o) => return o,
    };
    match search(ctx, query) {
        Ok(s) => s.into(),
        Err(e) => error_json(&e.message, "query", query).into(),
    }
}
