//! `deerflow.community.brave.tools`: the Brave Search API's web and image search (httpx).

use serde_json::{json, Value};

use super::{arg_int, arg_str, dict_get, error_json, iterate, no_attr, Ctx, Out};
use crate::net::{httpx_status_error, Client, PyError, Request};
use crate::py::{self, dumps_indented, object};
use crate::url::{is_url_present, safe_public_url, urlencode, ImageGuard};

pub const BASE: &str = "https://api.search.brave.com";
const WEB_MAX: i64 = 20;
const IMAGE_MAX: i64 = 200;

fn coerce(v: &Value, max: i64) -> i64 {
    py::int(v).unwrap_or(5).clamp(1, max)
}

fn api_key(ctx: &Ctx) -> Option<String> {
    if let Some(Value::String(k)) = ctx.get("api_key") {
        if !k.trim().is_empty() {
            return Some(k.trim().to_string());
        }
    }
    (ctx.env)("BRAVE_SEARCH_API_KEY").map(|k| k.trim().to_string()).filter(|k| !k.is_empty())
}

/// httpx's rendering of a query parameter value.
fn param(v: &Value) -> String {
    match v {
        Value::Bool(true) => "true".into(),
        Value::Bool(false) => "false".into(),
        Value::Null => String::new(),
        other => py::str_of(other),
    }
}

fn get(
    ctx: &Ctx,
    path: &str,
    key: &str,
    query: &str,
    params: &[(&str, String)],
    service: &str,
) -> Result<Value, String> {
    let url = format!("{}{path}?{}", ctx.base_url(BASE), urlencode(params));
    let req = Request::new("GET", url)
        .header("X-Subscription-Token", key)
        .header("Accept", "application/json")
        .timeout_secs(30.0);
    let resp = Client::Httpx.send(ctx.http, req).map_err(|e| error_json(&e.message, "query", query))?;
    if httpx_status_error(&resp).is_some() {
        return Err(error_json(&format!("{service} API error: HTTP {}", resp.status), "query", query));
    }
    match resp.json() {
        Ok(v @ Value::Object(_)) => Ok(v),
        Ok(_) => Err(error_json(&format!("{service} returned an unexpected response format"), "query", query)),
        Err(e) => Err(error_json(&e, "query", query)),
    }
}

fn clean_query(q: &str) -> String {
    py::take_chars(q.trim(), 400).to_string()
}

pub fn web_search(ctx: &Ctx, args: &Value) -> Out {
    let query = match arg_str(args, "web_search", "query") {
        Ok(q) => q,
        Err(o) => return o,
    };
    let mut max = match arg_int(args, "web_search", "max_results") {
        Ok(m) => json!(m.unwrap_or(5)),
        Err(o) => return o,
    };
    if let Some(v) = ctx.get("max_results") {
        max = v.clone();
    }
    let count = coerce(&max, WEB_MAX);
    let query = clean_query(query);
    let Some(key) = api_key(ctx) else {
        return error_json("BRAVE_SEARCH_API_KEY is not configured", "query", &query).into();
    };
    let params = [("q", query.clone()), ("count", count.to_string()), ("text_decorations", "false".to_string())];
    let data = match get(ctx, "/res/v1/web/search", &key, &query, &params, "Brave Search") {
        Ok(d) => d,
        Err(e) => return e.into(),
    };
    match web_results(&data, &query) {
        Ok(s) => s.into(),
        Err(e) => Out::Raised(e),
    }
}

fn web_results(data: &Value, query: &str) -> Result<String, PyError> {
    let web = dict_get(data, "web")?.filter(|w| py::truthy(w)).cloned().unwrap_or(json!({}));
    let results = dict_get(&web, "results")?.cloned().unwrap_or(json!([]));
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
            ("content", super::get_or(&r, "description", json!(""))),
        ]));
    }
    let doc =
        object(vec![("query", json!(query)), ("total_results", json!(out.len())), ("results", Value::Array(out))]);
    Ok(dumps_indented(&doc))
}

pub fn image_search(ctx: &Ctx, args: &Value) -> Out {
    let query = match arg_str(args, "image_search", "query") {
        Ok(q) => q,
        Err(o) => return o,
    };
    let mut max = match arg_int(args, "image_search", "max_results") {
        Ok(m) => json!(m.unwrap_or(5)),
        Err(o) => return o,
    };
    if let Some(v) = ctx.get("max_results") {
        max = v.clone();
    }
    let count = coerce(&max, IMAGE_MAX);
    let query = clean_query(query);
    let Some(key) = api_key(ctx) else {
        return error_json("BRAVE_SEARCH_API_KEY is not configured", "query", &query).into();
    };
    let mut params = vec![("q", query.clone()), ("count", count.to_string())];
    for k in ["country", "search_lang", "safesearch", "spellcheck"] {
        if let Some(v) = ctx.get(k) {
            params.push((k, param(v)));
        }
    }
    let service = "Brave Image Search";
    let data = match get(ctx, "/res/v1/images/search", &key, &query, &params, service) {
        Ok(d) => d,
        Err(e) => return e.into(),
    };
    let images = match data.get("results") {
        None | Some(Value::Null) => vec![],
        Some(Value::Array(a)) => a.clone(),
        Some(_) => {
            return error_json(&format!("{service} returned an unexpected response format"), "query", &query).into()
        }
    };
    if images.is_empty() {
        return error_json("No images found", "query", &query).into();
    }
    let empty = json!({});
    let mut results = Vec::new();
    for item in &images {
        if !item.is_object() {
            continue;
        }
        let thumbnail = item.get("thumbnail").filter(|t| t.is_object()).unwrap_or(&empty);
        let properties = item.get("properties").filter(|t| t.is_object()).unwrap_or(&empty);
        let (raw_image, raw_thumb) = (properties.get("url"), thumbnail.get("src"));
        let safe_image = safe_public_url(raw_image, ImageGuard::Brave);
        let safe_thumb = safe_public_url(raw_thumb, ImageGuard::Brave);
        let safe_source = safe_public_url(item.get("url"), ImageGuard::Brave);
        let (image_url, image_dims) = if !safe_image.is_empty() {
            (safe_image.clone(), properties)
        } else if !is_url_present(raw_image) {
            (safe_thumb.clone(), thumbnail)
        } else {
            (String::new(), &empty)
        };
        let (thumbnail_url, thumb_dims) = if !safe_thumb.is_empty() {
            (safe_thumb.clone(), thumbnail)
        } else if !is_url_present(raw_thumb) {
            (safe_image.clone(), properties)
        } else {
            (String::new(), &empty)
        };
        if image_url.is_empty() && thumbnail_url.is_empty() {
            continue;
        }
        let dims = if !image_url.is_empty() { image_dims } else { thumb_dims };
        results.push(object(vec![
            ("title", super::get_or(item, "title", json!(""))),
            ("image_url", json!(image_url)),
            ("thumbnail_url", json!(thumbnail_url)),
            ("source_url", json!(safe_source)),
            ("source", super::get_or(item, "source", json!(""))),
            ("width", dims.get("width").cloned().unwrap_or(Value::Null)),
            ("height", dims.get("height").cloned().unwrap_or(Value::Null)),
        ]));
        if results.len() as i64 >= count {
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
        ("usage_hint", json!(super::serper::USAGE_HINT)),
    ]);
    dumps_indented(&out).into()
}
