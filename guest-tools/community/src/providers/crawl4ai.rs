//! `deerflow.community.crawl4ai.tools`: a self-hosted Crawl4AI server's `POST /md` (httpx),
//! behind DeerFlow's SSRF check of the target URL.

use serde_json::{json, Value};

use super::{arg_str, Ctx, Out};
use crate::net::{Client, Request};
use crate::py::{self, object};

pub const BASE: &str = "http://localhost:11235";
const FILTERS: [&str; 4] = ["fit", "raw", "bm25", "llm"];

/// `_coerce_timeout`: numbers and numeric strings as seconds, else 30.
pub fn coerce_timeout(v: Option<&Value>, default: f64) -> f64 {
    match v {
        Some(Value::Bool(_)) | None => default,
        Some(Value::Number(n)) => n.as_f64().unwrap_or(default),
        Some(Value::String(s)) => py::float(&Value::String(s.clone())).unwrap_or(default),
        Some(_) => default,
    }
}

fn filter(v: Option<&Value>) -> &'static str {
    if let Some(Value::String(s)) = v {
        let n = s.trim().to_lowercase();
        if let Some(f) = FILTERS.iter().find(|f| **f == n) {
            return f;
        }
    }
    "fit"
}

fn fetch_markdown(ctx: &Ctx, url: &str, filter: &str) -> String {
    let base = match ctx.get("base_url") {
        Some(v) if !v.is_null() => py::str_of(v).trim_end_matches('/').to_string(),
        _ => BASE.to_string(),
    };
    let token = ctx.get("token").map(py::str_of).unwrap_or_default();
    let token = if ctx.get("token").is_some_and(py::truthy) { token } else { String::new() };
    let timeout = coerce_timeout(ctx.get("timeout"), 30.0);
    let mut req = Request::new("POST", format!("{base}/md")).header("Content-Type", "application/json");
    if !token.is_empty() {
        req = req.header("Authorization", format!("Bearer {token}"));
    }
    let req = req.json(&object(vec![("url", json!(url)), ("f", json!(filter))])).timeout_secs(timeout);
    let resp = match Client::Httpx.send(ctx.http, req.clone()) {
        Ok(r) => r,
        Err(e) if e.class.ends_with("Timeout") => {
            return format!("Error: Crawl4AI request timed out after {}s", py::float_repr(timeout))
        }
        Err(e) => {
            return format!("Error: Crawl4AI request failed: {e}");
        }
    };
    let text = resp.text();
    if resp.status != 200 {
        return format!("Error: Crawl4AI HTTP {}: {}", resp.status, py::take_chars(&text, 200));
    }
    let data = match resp.json() {
        Ok(d) => d,
        Err(_) => {
            let ct = resp.header("content-type").unwrap_or("unknown");
            return format!(
                "Error: Crawl4AI returned a non-JSON 200 response (content-type: {ct}): {}",
                py::take_chars(&text, 200)
            );
        }
    };
    let Value::Object(obj) = &data else {
        return format!("Error: Crawl4AI fetch failed: {}", super::no_attr(&data, "get"));
    };
    if !obj.get("success").is_some_and(py::truthy) {
        return format!("Error: Crawl4AI reported failure for {url}");
    }
    let markdown = obj.get("markdown").filter(|v| py::truthy(v)).cloned().unwrap_or(json!(""));
    let Value::String(markdown) = markdown else {
        return format!("Error: Crawl4AI fetch failed: {}", super::no_attr(&markdown, "strip"));
    };
    if markdown.trim().is_empty() {
        return "Error: Crawl4AI returned empty markdown".into();
    }
    markdown
}

pub fn web_fetch(ctx: &Ctx, args: &Value) -> Out {
    let url = match arg_str(args, "web_fetch", "url") {
        Ok(u) => u,
        Err(o) => return o,
    };
    let allow = py::coerce_bool(ctx.get("allow_private_addresses"), false);
    if let Some(e) = crate::url::validate_public_http_url(url, allow, "fetch", ctx.resolve) {
        return e.into();
    }
    let markdown = fetch_markdown(ctx, url, filter(ctx.get("filter")));
    if markdown.starts_with("Error:") {
        return markdown.into();
    }
    py::take_chars(&markdown, 4096).to_string().into()
}
