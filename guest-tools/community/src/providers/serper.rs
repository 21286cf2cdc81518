//! `deerflow.community.serper.tools`: Google web and image search through Serper (httpx).

use serde_json::{json, Value};

use super::{arg_int, arg_str, error_json, Ctx, Out};
use crate::net::{httpx_status_error, Client, Request};
use crate::py::{self, dumps_indented, object};
use crate::url::{is_url_present, safe_public_url, ImageGuard};

pub const BASE: &str = "https://google.serper.dev";
const MAX_RESULTS: i64 = 10;

fn coerce_max_results(v: &Value) -> i64 {
    match py::int(v) {
        Some(n) if n > 0 => n.min(MAX_RESULTS),
        _ => 5,
    }
}

fn clean_query(q: &str) -> String {
    py::take_chars(q.trim(), 500).to_string()
}

fn api_key(ctx: &Ctx) -> Option<String> {
    if let Some(Value::String(k)) = ctx.get("api_key") {
        if !k.trim().is_empty() {
            return Some(k.trim().to_string());
        }
    }
    (ctx.env)("SERPER_API_KEY").map(|k| k.trim().to_string()).filter(|k| !k.is_empty())
}

/// `_serper_post`: the parsed object, or the error JSON to return.
fn post(ctx: &Ctx, path: &str, key: &str, query: &str, n: i64) -> Result<Value, String> {
    let url = format!("{}{path}", ctx.base_url(BASE));
    let req = Request::new("POST", url)
        .header("X-API-KEY", key)
        .json(&object(vec![("q", json!(query)), ("num", json!(n))]))
        .timeout_secs(30.0);
    let err = |msg: &str| error_json(py::take_chars(msg, 500), "query", query);
    let resp = Client::Httpx.send(ctx.http, req).map_err(|e| err(&e.message))?;
    if httpx_status_error(&resp).is_some() {
        return Err(error_json(&format!("Serper API error: HTTP {}", resp.status), "query", query));
    }
    match resp.json() {
        Ok(v @ Value::Object(_)) => Ok(v),
        Ok(_) => Err(error_json("Serper returned an unexpected response format", "query", query)),
        Err(e) => Err(err(&e)),
    }
}

fn items(data: &Value, field: &str, query: &str) -> Result<Vec<Value>, String> {
    match data.get(field) {
        None | Some(Value::Null) => Ok(vec![]),
        Some(Value::Array(a)) => Ok(a.iter().filter(|i| i.is_object()).cloned().collect()),
        Some(_) => Err(error_json("Serper returned an unexpected response format", "query", query)),
    }
}

fn prepare(ctx: &Ctx, args: &Value, tool: &str) -> Result<(String, i64, Option<String>), Out> {
    let query = arg_str(args, tool, "query")?;
    let mut max = json!(arg_int(args, tool, "max_results")?.unwrap_or(5));
    if let Some(v) = ctx.get("max_results") {
        max = v.clone();
    }
    Ok((clean_query(query), coerce_max_results(&max), api_key(ctx)))
}

pub fn web_search(ctx: &Ctx, args: &Value) -> Out {
    let (query, n, key) = match prepare(ctx, args, "web_search") {
        Ok(p) => p,
        Err(o) => return o,
    };
    let Some(key) = key else { return error_json("SERPER_API_KEY is not configured", "query", &query).into() };
    let data = match post(ctx, "/search", &key, &query, n) {
        Ok(d) => d,
        Err(e) => return e.into(),
    };
    let organic = match items(&data, "organic", &query) {
        Ok(o) => o,
        Err(e) => return e.into(),
    };
    if organic.is_empty() {
        return error_json("No results found", "query", &query).into();
    }
    let results: Vec<Value> = organic
        .iter()
        .take(n as usize)
        .map(|r| {
            object(vec![
                ("title", super::get_or(r, "title", json!(""))),
                ("url", super::get_or(r, "link", json!(""))),
                ("content", super::get_or(r, "snippet", json!(""))),
            ])
        })
        .collect();
    let out = object(vec![
        ("query", json!(query)),
        ("total_results", json!(results.len())),
        ("results", Value::Array(results)),
    ]);
    dumps_indented(&out).into()
}

pub const USAGE_HINT: &str =
    "Use the 'image_url' values as reference images in image generation. Download them first if needed.";

pub fn image_search(ctx: &Ctx, args: &Value) -> Out {
    let (query, n, key) = match prepare(ctx, args, "image_search") {
        Ok(p) => p,
        Err(o) => return o,
    };
    let Some(key) = key else { return error_json("SERPER_API_KEY is not configured", "query", &query).into() };
    let data = match post(ctx, "/images", &key, &query, n) {
        Ok(d) => d,
        Err(e) => return e.into(),
    };
    let images = match items(&data, "images", &query) {
        Ok(o) => o,
        Err(e) => return e.into(),
    };
    if images.is_empty() {
        return error_json("No images found", "query", &query).into();
    }
    let mut results = Vec::new();
    for r in &images {
        let (raw_image, raw_thumb) = (r.get("imageUrl"), r.get("thumbnailUrl"));
        let safe_image = safe_public_url(raw_image, ImageGuard::Serper);
        let safe_thumb = safe_public_url(raw_thumb, ImageGuard::Serper);
        let image_url = if !safe_image.is_empty() {
            safe_image.clone()
        } else if !is_url_present(raw_image) {
            safe_thumb.clone()
        } else {
            String::new()
        };
        let thumbnail_url = if !safe_thumb.is_empty() {
            safe_thumb
        } else if !is_url_present(raw_thumb) {
            safe_image
        } else {
            String::new()
        };
        if image_url.is_empty() && thumbnail_url.is_empty() {
            continue;
        }
        results.push(object(vec![
            ("title", super::get_or(r, "title", json!(""))),
            ("image_url", json!(image_url)),
            ("thumbnail_url", json!(thumbnail_url)),
        ]));
        if results.len() as i64 >= n {
            break;
        }
    }
    if results.is_empty() {
        return error_json("No safe image URLs found", "query", &query).into();
    }
    let out = object(vec![
        ("query", json!(query)),
        ("total_results", json!(results.len())),
        ("results", Value::Array(results)),
        ("usage_hint", json!(USAGE_HINT)),
    ]);
    dumps_indented(&out).into()
}
