//! `deerflow.community.infoquest.tools`: BytePlus InfoQuest search, image search and reader
//! (requests). The reader's HTML goes through the readability → Markdown pass.

use serde_json::{json, Value};

use super::{arg_str, index, iterate, type_name, Ctx, Out};
use crate::net::{requests_status_error, Client, PyError, Request};
use crate::py::{self, dumps_indented, object};

pub const SEARCH_BASE: &str = "https://search.infoquest.bytepluses.com";
pub const READER_BASE: &str = "https://reader.infoquest.bytepluses.com";

/// A config value compared with an int, as Python compares it (`x > 0`, `1 <= x`).
fn num(v: &Value, op: &str, int_left: bool) -> Result<f64, PyError> {
    match v {
        Value::Number(n) => Ok(n.as_f64().unwrap_or(0.0)),
        Value::Bool(b) => Ok(if *b { 1.0 } else { 0.0 }),
        other => {
            let (l, r) = if int_left { ("int", type_name(other)) } else { (type_name(other), "int") };
            Err(PyError::new("TypeError", format!("'{op}' not supported between instances of '{l}' and '{r}'")))
        }
    }
}

fn cfg(ctx: &Ctx, key: &str, default: Value) -> Value {
    ctx.get(key).cloned().unwrap_or(default)
}

fn headers(ctx: &Ctx, req: Request) -> Request {
    match ctx.env_nonempty("INFOQUEST_API_KEY") {
        Some(k) => req.header("Authorization", format!("Bearer {k}")),
        None => req,
    }
}

fn post_json(ctx: &Ctx, base: &str, body: &Value) -> Result<Value, PyError> {
    let req = headers(
        ctx,
        Request::new("POST", format!("{}/", ctx.base_url(base))).header("Content-Type", "application/json"),
    );
    let resp = Client::Requests.send(ctx.http, req.json(body))?;
    if let Some(e) = requests_status_error(&resp) {
        return Err(e);
    }
    resp.json().map_err(|e| PyError::new("JSONDecodeError", e))
}

fn contains(v: &Value, key: &str) -> Result<bool, PyError> {
    match v {
        Value::Object(o) => Ok(o.contains_key(key)),
        Value::Array(a) => Ok(a.iter().any(|x| x.as_str() == Some(key))),
        Value::String(s) => Ok(s.contains(key)),
        other => Err(PyError::new("TypeError", format!("argument of type '{}' is not iterable", type_name(other)))),
    }
}

fn get<'a>(v: &'a Value, key: &str) -> Result<Option<&'a Value>, PyError> {
    super::dict_get(v, key)
}

fn clean_web(raw: &Value) -> Result<Vec<Value>, PyError> {
    let mut seen: Vec<String> = Vec::new();
    let mut out = Vec::new();
    for content_list in iterate(raw)? {
        let results = index(index(&content_list, "content")?, "results")?;
        if let Some(organic) = get(results, "organic")?.filter(|v| py::truthy(v)) {
            for r in iterate(organic)? {
                let mut clean = vec![("type", json!("page"))];
                if contains(&r, "title")? {
                    clean.push(("title", index(&r, "title")?.clone()));
                }
                if contains(&r, "desc")? {
                    let d = index(&r, "desc")?.clone();
                    clean.push(("desc", d.clone()));
                    clean.push(("snippet", d));
                }
                if contains(&r, "url")? {
                    let u = index(&r, "url")?.clone();
                    clean.push(("url", u.clone()));
                    if let Value::String(s) = &u {
                        if !s.is_empty() && !seen.contains(s) {
                            seen.push(s.clone());
                            out.push(object(clean));
                        }
                    }
                }
            }
        }
        if let Some(news) = get(results, "top_stories")?.filter(|v| py::truthy(v)) {
            for obj in iterate(index(news, "items")?)? {
                let mut clean = vec![("type", json!("news"))];
                if contains(&obj, "time_frame")? {
                    clean.push(("time_frame", index(&obj, "time_frame")?.clone()));
                }
                if contains(&obj, "source")? {
                    clean.push(("source", index(&obj, "source")?.clone()));
                }
                let title = get(&obj, "title")?.cloned().unwrap_or(Value::Null);
                let url = get(&obj, "url")?.cloned().unwrap_or(Value::Null);
                if py::truthy(&title) {
                    clean.push(("title", title.clone()));
                }
                if py::truthy(&url) {
                    clean.push(("url", url.clone()));
                }
                if let (true, Value::String(s)) = (py::truthy(&title), &url) {
                    if !s.is_empty() && !seen.contains(s) {
                        seen.push(s.clone());
                        out.push(object(clean));
                    }
                }
            }
        }
    }
    Ok(out)
}

fn clean_images(raw: &Value) -> Result<Vec<Value>, PyError> {
    let mut seen: Vec<String> = Vec::new();
    let mut out = Vec::new();
    for content_list in iterate(raw)? {
        let results = index(index(&content_list, "content")?, "results")?;
        if let Some(images) = get(results, "images_results")?.filter(|v| py::truthy(v)) {
            for r in iterate(images)? {
                let mut clean = Vec::new();
                let mut keep = false;
                if contains(&r, "original")? {
                    let u = index(&r, "original")?.clone();
                    clean.push(("image_url", u.clone()));
                    if let Value::String(s) = &u {
                        if !s.is_empty() && !seen.contains(s) {
                            seen.push(s.clone());
                            keep = true;
                        }
                    }
                }
                if contains(&r, "title")? {
                    clean.push(("title", index(&r, "title")?.clone()));
                }
                if keep {
                    out.push(object(clean));
                }
            }
        }
    }
    Ok(out)
}

/// The shared tail of `web_search` / `image_search`.
fn search_answer(raw: &Value, clean: fn(&Value) -> Result<Vec<Value>, PyError>, what: &str) -> Result<String, PyError> {
    if contains(raw, "search_result")? {
        let results = index(index(raw, "search_result")?, "results")?;
        return Ok(dumps_indented(&Value::Array(clean(results)?)));
    }
    if contains(raw, "content")? {
        return Ok(format!("Error: {what} search API return wrong format"));
    }
    Ok(dumps_indented(raw))
}

pub fn web_search(ctx: &Ctx, args: &Value) -> Out {
    let query = match arg_str(args, "web_search", "query") {
        Ok(q) => q,
        Err(o) => return o,
    };
    let run = || -> Result<String, PyError> {
        let range = cfg(ctx, "search_time_range", json!(-1));
        let mut body = vec![("format", json!("JSON")), ("query", json!(query))];
        if num(&range, ">", false)? > 0.0 {
            body.push(("time_range", range));
        }
        let raw = post_json(ctx, SEARCH_BASE, &object(body))?;
        search_answer(&raw, clean_web, "web")
    };
    match run() {
        Ok(s) => s.into(),
        Err(e) => {
            format!("Error: InfoQuest Web-Search - Search tool execution failed | mode=synchronous | error={e}").into()
        }
    }
}

pub fn image_search(ctx: &Ctx, args: &Value) -> Out {
    let query = match arg_str(args, "image_search", "query") {
        Ok(q) => q,
        Err(o) => return o,
    };
    let run = || -> Result<String, PyError> {
        let range = cfg(ctx, "image_search_time_range", json!(-1));
        let size = cfg(ctx, "image_size", json!("i"));
        let mut body = vec![("format", json!("JSON")), ("query", json!(query)), ("search_type", json!("Images"))];
        if num(&range, "<=", true)? >= 1.0 && num(&range, "<=", false)? <= 365.0 {
            body.push(("time_range", range));
        }
        if matches!(size.as_str(), Some("l" | "m" | "i")) {
            body.push(("image_size", size));
        }
        let raw = post_json(ctx, SEARCH_BASE, &object(body))?;
        search_answer(&raw, clean_images, "image")
    };
    match run() {
        Ok(s) => s.into(),
        Err(e) => {
            format!("Error: InfoQuest Image Search - Image search tool execution failed | mode=synchronous | error={e}")
                .into()
        }
    }
}

/// `InfoQuestClient.fetch`: the reader's HTML, or an `Error: …` string.
fn fetch(ctx: &Ctx, url: &str) -> Result<Value, PyError> {
    let mut body = vec![("url", json!(url)), ("format", json!("HTML"))];
    for (key, wire) in [("fetch_time", "fetch_time"), ("timeout", "timeout"), ("navigation_timeout", "navi_timeout")] {
        let v = cfg(ctx, key, json!(-1));
        if num(&v, ">", false)? > 0.0 {
            body.push((wire, v));
        }
    }
    let req = headers(
        ctx,
        Request::new("POST", format!("{}/", ctx.base_url(READER_BASE))).header("Content-Type", "application/json"),
    )
    .json(&object(body));
    let resp = match Client::Requests.send(ctx.http, req) {
        Ok(r) => r,
        Err(e) => return Ok(json!(format!("Error: fetch API failed: {e}"))),
    };
    let text = resp.text();
    if resp.status != 200 {
        return Ok(json!(format!("Error: fetch API returned status {}: {text}", resp.status)));
    }
    if text.trim().is_empty() {
        return Ok(json!("Error: no result found"));
    }
    let Ok(data) = py::loads(&text) else { return Ok(json!(text)) };
    let lookup = || -> Result<Option<Value>, PyError> {
        if contains(&data, "reader_result")? {
            return Ok(Some(index(&data, "reader_result")?.clone()));
        }
        if contains(&data, "content")? {
            return Ok(Some(index(&data, "content")?.clone()));
        }
        Ok(None)
    };
    match lookup() {
        Ok(Some(v)) => Ok(v),
        Ok(None) => Ok(json!(text)),
        Err(e) => Ok(json!(format!("Error: fetch API failed: {e}"))),
    }
}

pub fn web_fetch(ctx: &Ctx, args: &Value) -> Out {
    let url = match arg_str(args, "web_fetch", "url") {
        Ok(u) => u,
        Err(o) => return o,
    };
    let result = match fetch(ctx, url) {
        Ok(r) => r,
        Err(e) => return Out::Raised(e),
    };
    let Value::String(html) = result else { return Out::Raised(super::no_attr(&result, "startswith")) };
    if html.starts_with("Error: ") {
        return html.into();
    }
    crate::article::page_markdown(&html, 4096).into()
}
