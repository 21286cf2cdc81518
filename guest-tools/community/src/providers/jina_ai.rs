//! `deerflow.community.jina_ai.tools`: Jina Reader returns the rendered page as HTML (httpx),
//! then DeerFlow's readability → Markdown pass, cut to 4096 characters.

use serde_json::{json, Value};

use super::{arg_str, Ctx, Out};
use crate::net::{Client, Request};
use crate::py::object;

pub const BASE: &str = "https://r.jina.ai";

/// jina_ai's `_coerce_timeout`: ints (not booleans) and int strings, else the default.
fn timeout(v: Option<&Value>) -> i64 {
    match v {
        Some(Value::Number(n)) if !crate::py::is_float(n) => n.as_i64().unwrap_or(10),
        Some(Value::String(s)) => crate::py::int_str(s).unwrap_or(10),
        _ => 10,
    }
}

fn crawl(ctx: &Ctx, url: &str, timeout: i64) -> String {
    let mut req = Request::new("POST", format!("{}/", ctx.base_url(BASE)))
        .header("Content-Type", "application/json")
        .header("X-Return-Format", "html")
        .header("X-Timeout", timeout.to_string());
    if let Some(key) = ctx.env_nonempty("JINA_API_KEY") {
        req = req.header("Authorization", format!("Bearer {key}"));
    }
    let req = req.json(&object(vec![("url", json!(url))])).timeout_secs(timeout as f64);
    let resp = match Client::Httpx.send(ctx.http, req) {
        Ok(r) => r,
        Err(e) => return format!("Error: Request to Jina API failed: {}: {}", e.class, e.message),
    };
    let text = resp.text();
    if resp.status != 200 {
        return format!("Error: Jina API returned status {}: {text}", resp.status);
    }
    if text.trim().is_empty() {
        return "Error: Jina API returned empty response".into();
    }
    text
}

pub fn web_fetch(ctx: &Ctx, args: &Value) -> Out {
    let url = match arg_str(args, "web_fetch", "url") {
        Ok(u) => u,
        Err(o) => return o,
    };
    let html = crawl(ctx, url, timeout(ctx.get("timeout")));
    if html.starts_with("Error:") {
        return html.into();
    }
    crate::article::page_markdown(&html, 4096).into()
}
