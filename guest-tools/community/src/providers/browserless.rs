//! `deerflow.community.browserless.tools`: a Browserless (headless Chrome) server renders the
//! page (`/content`, then readability → Markdown) or captures it (`/screenshot`, written to the
//! thread's outputs and returned as an artifact). Both check the target URL first (httpx).

use serde_json::{json, Value};

use super::{arg_int, arg_opt_bool, arg_opt_str, arg_str, Ctx, Out};
use crate::net::{Client, PyError, Request, Response};
use crate::py::{self, object};
use crate::url::{urlencode, validate_public_http_url};

pub const BASE: &str = "http://localhost:3032";
const OUTPUTS: &str = "/mnt/user-data/outputs";
const MAX_PROBES: usize = 1000;

fn as_bool(v: Option<&Value>, default: bool) -> bool {
    py::coerce_bool(v, default)
}

/// `_as_int`: ints (not booleans) and int strings, else the default.
fn as_int(v: Option<&Value>, default: i64) -> i64 {
    match v {
        Some(Value::Number(n)) if !py::is_float(n) => n.as_i64().unwrap_or(default),
        Some(Value::String(s)) => py::int_str(s.trim()).unwrap_or(default),
        _ => default,
    }
}

/// `_resolve_timeout`: `timeout_s`, else `timeout`, else 30.
fn timeout(ctx: &Ctx) -> f64 {
    let key = if ctx.has("timeout_s") { "timeout_s" } else { "timeout" };
    super::crawl4ai::coerce_timeout(ctx.get(key), 30.0)
}

struct Server {
    base: String,
    token: String,
    timeout: f64,
}

fn server(ctx: &Ctx) -> Server {
    let base = match ctx.get("base_url") {
        Some(v) => py::str_of(v).trim_end_matches('/').to_string(),
        None => BASE.to_string(),
    };
    let token = match ctx.get("token") {
        Some(v) => {
            if py::truthy(v) {
                py::str_of(v)
            } else {
                String::new()
            }
        }
        None => (ctx.env)("BROWSERLESS_TOKEN").unwrap_or_default(),
    };
    Server { base, token, timeout: timeout(ctx) }
}

/// `_target_status_warning`.
fn warning(resp: &Response) -> String {
    let code = resp.header("X-Response-Code").unwrap_or("").trim().to_string();
    if code.is_empty() || code.starts_with('2') || code.starts_with('3') {
        return String::new();
    }
    let status = resp.header("X-Response-Status").unwrap_or("").trim();
    format!(" (warning: target page responded {})", format!("{code} {status}").trim())
}

/// The request, or the `Error: …` string the client returns for what went wrong.
fn send(ctx: &Ctx, s: &Server, req: Request, what: &str) -> Result<Response, String> {
    match Client::Httpx.send(ctx.http, req.timeout_secs(s.timeout)) {
        Ok(r) => Ok(r),
        Err(e) if e.class.ends_with("Timeout") => {
            Err(format!("Error: Browserless {what}request timed out after {}s", py::float_repr(s.timeout)))
        }
        Err(e) => Err(format!("Error: Browserless {what}request failed: {e}")),
    }
}

fn fetch(ctx: &Ctx, url: &str) -> Result<String, PyError> {
    let allow = as_bool(ctx.get("allow_private_addresses"), false);
    if let Some(e) = validate_public_http_url(url, allow, "fetch", ctx.resolve) {
        return Ok(e);
    }
    let wait_event = ctx.get("wait_for_event").cloned().unwrap_or(json!(""));
    let raw_wait = ctx.get("wait_for_timeout_ms").cloned().unwrap_or(json!(0));
    let wait_ms = match &raw_wait {
        Value::Number(n) if !py::is_float(n) => n.as_i64().unwrap_or(0),
        other => py::int(other).ok_or_else(|| {
            PyError::new("ValueError", format!("invalid literal for int() with base 10: {}", py::repr(other)))
        })?,
    };
    let selector = ctx.get("wait_for_selector").cloned().unwrap_or(json!(""));
    let s = server(ctx);
    let mut payload = vec![("url", json!(url))];
    if !s.token.is_empty() {
        payload.push(("token", json!(s.token)));
    }
    if py::truthy(&wait_event) {
        payload.push(("waitForEvent", wait_event));
    }
    if wait_ms > 0 {
        payload.push(("waitForTimeout", json!(wait_ms)));
    }
    if py::truthy(&selector) {
        payload.push(("waitForSelector", json!({"selector": selector, "timeout": 5000})));
    }
    let req = Request::new("POST", format!("{}/content", s.base))
        .header("Content-Type", "application/json")
        .header("Cache-Control", "no-cache")
        .json(&object(payload));
    let resp = match send(ctx, &s, req, "") {
        Ok(r) => r,
        Err(e) => return Ok(e),
    };
    let html = resp.text();
    if resp.status != 200 {
        return Ok(format!("Error: Browserless HTTP {}: {}", resp.status, py::take_chars(&html, 200)));
    }
    if html.trim().is_empty() {
        return Ok("Error: Browserless returned empty response".into());
    }
    Ok(format!("{}{}", crate::article::page_markdown(&html, 4096), warning(&resp)))
}

pub fn web_fetch(ctx: &Ctx, args: &Value) -> Out {
    let url = match arg_str(args, "web_fetch", "url") {
        Ok(u) => u,
        Err(o) => return o,
    };
    match fetch(ctx, url) {
        Ok(s) => s.into(),
        Err(e) => format!("Error: {e}").into(),
    }
}

const FORMATS: [&str; 3] = ["png", "jpeg", "webp"];

/// `_normalize_output_format`.
fn output_format(v: Option<&Value>) -> String {
    let s = match v {
        Some(v) if py::truthy(v) => py::str_of(v),
        _ => "png".into(),
    };
    let s = s.trim().to_lowercase();
    if FORMATS.contains(&s.as_str()) {
        s
    } else {
        "png".into()
    }
}

/// `_SAFE_FILENAME_RE.sub("_", stem).strip("._-") or "web-capture"`, cut to 100 characters.
fn safe_stem(stem: &str) -> String {
    let mut out = String::new();
    let mut in_bad = false;
    for c in stem.chars() {
        if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
            out.push(c);
            in_bad = false;
        } else if !in_bad {
            out.push('_');
            in_bad = true;
        }
    }
    let t = out.trim_matches(['.', '_', '-']);
    let t = if t.is_empty() { "web-capture" } else { t };
    py::take_chars(t, 100).to_string()
}

/// `Path(name).stem` and `.suffix`.
fn stem_suffix(name: &str) -> (&str, &str) {
    match name.rfind('.') {
        Some(i) if i > 0 && i < name.len() - 1 => (&name[..i], &name[i..]),
        _ => (name, ""),
    }
}

fn capture_filename(ctx: &Ctx, filename: Option<&str>, url: &str, format: &str) -> String {
    let stem = match filename.filter(|f| !f.is_empty()) {
        Some(f) => {
            let raw = f.rsplit('/').next().unwrap_or("");
            let (stem, _) = stem_suffix(raw);
            if stem.is_empty() {
                "web-capture".to_string()
            } else {
                stem.to_string()
            }
        }
        None => {
            let netloc = crate::url::netloc(url);
            let rest = url.split_once("://").map(|(_, r)| r).unwrap_or(url);
            let path = rest.find('/').map(|i| &rest[i..]).unwrap_or("");
            let path = path.split(['?', '#']).next().unwrap_or("");
            let mut parts = vec![netloc.to_string()];
            parts.extend(path.split('/').filter(|p| !p.is_empty()).map(str::to_string));
            let raw = parts.into_iter().filter(|p| !p.is_empty()).collect::<Vec<_>>().join("-");
            let raw = if raw.is_empty() { "web-capture".to_string() } else { raw };
            format!("{}-{}", py::take_chars(&raw, 80), (ctx.now)())
        }
    };
    format!("{}.{format}", safe_stem(&stem))
}

fn dedupe(ctx: &Ctx, name: &str) -> String {
    if !ctx.outputs.exists(name) {
        return name.to_string();
    }
    let (stem, suffix) = stem_suffix(name);
    for i in 1..=MAX_PROBES {
        let probe = format!("{stem}-{i}{suffix}");
        if !ctx.outputs.exists(&probe) {
            return probe;
        }
    }
    format!("{stem}-{}-000000{suffix}", (ctx.now)())
}

pub fn web_capture(ctx: &Ctx, args: &Value) -> Out {
    let parsed = (|| {
        Ok::<_, Out>((
            arg_str(args, "web_capture", "url")?,
            arg_opt_str(args, "web_capture", "filename")?,
            arg_opt_bool(args, "web_capture", "full_page")?,
            arg_opt_str(args, "web_capture", "output_format")?,
            arg_int(args, "web_capture", "viewport_width")?,
            arg_int(args, "web_capture", "viewport_height")?,
        ))
    })();
    let (url, filename, full_page, format_arg, width, height) = match parsed {
        Ok(p) => p,
        Err(o) => return o,
    };
    let allow = as_bool(ctx.get("allow_private_addresses"), false);
    if let Some(e) = validate_public_http_url(url, allow, "capture", ctx.resolve) {
        return e.into();
    }
    if !ctx.outputs.exists("") {
        return "Error: Thread outputs path is not available".to_string().into();
    }
    let format_value =
        format_arg.filter(|f| !f.is_empty()).map(|f| json!(f)).or_else(|| ctx.get("output_format").cloned());
    let format = output_format(format_value.as_ref().or(Some(&json!("png"))));
    let full_page = full_page.unwrap_or_else(|| as_bool(ctx.get("full_page"), true));
    let width = width.unwrap_or_else(|| as_int(ctx.get("viewport_width"), 1280));
    let height = height.unwrap_or_else(|| as_int(ctx.get("viewport_height"), 720));
    let quality = if format == "jpeg" || format == "webp" {
        Some(as_int(ctx.get("quality"), -1)).filter(|q| (0..=100).contains(q))
    } else {
        None
    };
    let selector = ctx.get("wait_for_selector").filter(|v| py::truthy(v)).map(py::str_of).unwrap_or_default();
    let selector_ms = as_int(ctx.get("wait_for_selector_timeout_ms"), 5000);
    let wait_ms = as_int(ctx.get("wait_for_timeout_ms"), 0);
    let best_attempt = as_bool(ctx.get("best_attempt"), false);
    let name = capture_filename(ctx, filename, url, &format);
    let s = server(ctx);
    let mut options = vec![("fullPage", json!(full_page)), ("type", json!(format))];
    if let Some(q) = quality {
        options.push(("quality", json!(q)));
    }
    let mut payload = vec![
        ("url", json!(url)),
        ("options", object(options)),
        ("viewport", json!({"width": width, "height": height})),
    ];
    if !selector.is_empty() {
        payload.push(("waitForSelector", json!({"selector": selector, "timeout": selector_ms})));
    }
    if wait_ms > 0 {
        payload.push(("waitForTimeout", json!(wait_ms)));
    }
    if best_attempt {
        payload.push(("bestAttempt", json!(true)));
    }
    let mut endpoint = format!("{}/screenshot", s.base);
    if !s.token.is_empty() {
        endpoint = format!("{endpoint}?{}", urlencode(&[("token", s.token.clone())]));
    }
    let req = Request::new("POST", endpoint)
        .header("Content-Type", "application/json")
        .header("Cache-Control", "no-cache")
        .json(&object(payload));
    let resp = match send(ctx, &s, req, "screenshot ") {
        Ok(r) => r,
        Err(e) => return e.into(),
    };
    if resp.status != 200 {
        return format!("Error: Browserless HTTP {}: {}", resp.status, py::take_chars(&resp.text(), 200)).into();
    }
    if resp.body.is_empty() {
        return "Error: Browserless returned empty screenshot response".to_string().into();
    }
    let final_name = dedupe(ctx, &name);
    if let Err(e) = ctx.outputs.write(&final_name, &resp.body) {
        return format!("Error: {e}").into();
    }
    let path = format!("{OUTPUTS}/{final_name}");
    Out::Artifact { text: format!("Captured screenshot: {path}{}", warning(&resp)), artifact: path }
}
