//! `deerflow.community.ddg_search.tools` and `deerflow.community.image_search.tools`: DuckDuckGo
//! through the endpoints the `ddgs` library's DuckDuckGo engines use — the HTML results page for
//! text, the `vqd` token page and `i.js` for images. Like DeerFlow, any failure reads as no
//! results.

use dom_query::Document;
use serde_json::{json, Value};

use super::{arg_int, arg_opt_str, arg_str, error_json, Ctx, Out};
use crate::net::{Client, Request};
use crate::py::{self, dumps_indented, object};
use crate::url::urlencode;

pub const HTML_BASE: &str = "https://html.duckduckgo.com";
pub const BASE: &str = "https://duckduckgo.com";
const USER_AGENT: &str = "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0";

/// ddgs' `_normalize_text`: tags stripped, entities decoded, control and format characters
/// dropped, whitespace collapsed.
fn normalize_text(raw: &str) -> String {
    let mut no_tags = String::with_capacity(raw.len());
    let mut in_tag = false;
    for c in raw.chars() {
        match c {
            '<' => in_tag = true,
            '>' if in_tag => in_tag = false,
            c if !in_tag => no_tags.push(c),
            _ => {}
        }
    }
    let text = Document::fragment(format!("<p>{}</p>", no_tags.replace('<', "&lt;"))).select("p").text().to_string();
    text.chars()
        .filter(|c| {
            !c.is_control() && !matches!(*c as u32, 0x200b..=0x200f | 0x2028..=0x202e | 0x2060..=0x2064 | 0xfeff)
        })
        .collect::<String>()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

/// ddgs' `_normalize_url`: percent-decoded, spaces as `+`.
fn normalize_url(url: &str) -> String {
    let bytes = url.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            if let Ok(b) = u8::from_str_radix(&url[i + 1..i + 3], 16) {
                out.push(b);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).replace(' ', "+")
}

fn setting(v: Option<&Value>, default: &str) -> String {
    match v {
        Some(v) if py::truthy(v) => py::str_of(v).trim().to_string(),
        _ => default.to_string(),
    }
}

fn text_results(ctx: &Ctx, query: &str, max: usize, region: &str) -> Vec<(String, String, String)> {
    let body = urlencode(&[("q", query.to_string()), ("b", String::new()), ("l", region.to_string())]);
    let mut req = Request::new("POST", format!("{}/html/", ctx.base_url(HTML_BASE)))
        .header("Content-Type", "application/x-www-form-urlencoded")
        .header("User-Agent", USER_AGENT)
        .timeout_secs(30.0);
    req.body = body.into_bytes();
    let Ok(resp) = Client::Httpx.send(ctx.http, req) else { return vec![] };
    if resp.status != 200 {
        return vec![];
    }
    let doc = Document::from(resp.text());
    let mut out = Vec::new();
    for item in doc.select("div[class*=\"body\"]").iter() {
        let title = item.select("h2").iter().map(|h| h.text().to_string()).collect::<String>();
        let links = item.select("div[class*=\"body\"] > a");
        let href: String = links.iter().filter_map(|a| a.attr("href").map(|h| h.to_string())).collect();
        let body: String = links.iter().map(|a| a.text().to_string()).collect();
        let collapse = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
        let href = normalize_url(&collapse(&href));
        if href.starts_with("https://duckduckgo.com/y.js?") {
            continue;
        }
        out.push((normalize_text(&collapse(&title)), href, normalize_text(&collapse(&body))));
        if out.len() >= max {
            break;
        }
    }
    out
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
    let region = setting(ctx.get("region"), "wt-wt").to_lowercase();
    let results = match py::int(&max) {
        Some(n) if n > 0 => text_results(ctx, query, n as usize, &region),
        _ => vec![],
    };
    if results.is_empty() {
        return error_json("No results found", "query", query).into();
    }
    let items: Vec<Value> = results
        .into_iter()
        .map(|(t, u, b)| object(vec![("title", json!(t)), ("url", json!(u)), ("content", json!(b))]))
        .collect();
    let out =
        object(vec![("query", json!(query)), ("total_results", json!(items.len())), ("results", Value::Array(items))]);
    dumps_indented(&out).into()
}

/// `_extract_vqd`.
fn extract_vqd(page: &[u8]) -> Option<String> {
    for (start, end) in [(&b"vqd=\""[..], b'"'), (&b"vqd="[..], b'&'), (&b"vqd='"[..], b'\'')] {
        if let Some(i) = page.windows(start.len()).position(|w| w == start) {
            let from = i + start.len();
            if let Some(j) = page[from..].iter().position(|b| *b == end) {
                return Some(String::from_utf8_lossy(&page[from..from + j]).into_owned());
            }
        }
    }
    None
}

fn image_results(ctx: &Ctx, query: &str, max: usize, filters: [Option<&str>; 3]) -> Option<Vec<Value>> {
    let base = ctx.base_url(BASE);
    let get = |url: String| {
        let req = Request::new("GET", url)
            .header("User-Agent", USER_AGENT)
            .header("Referer", "https://duckduckgo.com/")
            .timeout_secs(30.0);
        Client::Httpx.send(ctx.http, req).ok().filter(|r| r.status == 200)
    };
    let page = get(format!("{base}/?{}", urlencode(&[("q", query.to_string())])))?;
    let vqd = extract_vqd(&page.body)?;
    let [size, type_image, layout] = filters;
    let mut params = vec![
        ("o", "json".to_string()),
        ("q", query.to_string()),
        ("l", "wt-wt".to_string()),
        ("vqd", vqd),
        ("p", "1".to_string()),
        ("ct", "AT".to_string()),
    ];
    let f = |k: &str, v: Option<&str>| v.filter(|s| !s.is_empty()).map(|s| format!("{k}:{s}")).unwrap_or_default();
    let (s, t, l) = (f("size", size), f("type", type_image), f("layout", layout));
    if !(s.is_empty() && t.is_empty() && l.is_empty()) {
        params.push(("f", format!(",{s},,{t},{l},")));
    }
    let resp = get(format!("{base}/i.js?{}", urlencode(&params)))?;
    let data = resp.json().ok()?;
    let items = data.get("results")?.as_array()?.clone();
    Some(items.into_iter().take(max).collect())
}

pub fn image_search(ctx: &Ctx, args: &Value) -> Out {
    let parsed = (|| {
        Ok::<_, Out>((
            arg_str(args, "image_search", "query")?,
            arg_int(args, "image_search", "max_results")?,
            arg_opt_str(args, "image_search", "size")?,
            arg_opt_str(args, "image_search", "type_image")?,
            arg_opt_str(args, "image_search", "layout")?,
        ))
    })();
    let (query, max, size, type_image, layout) = match parsed {
        Ok(p) => p,
        Err(o) => return o,
    };
    let max = ctx.get("max_results").cloned().unwrap_or(json!(max.unwrap_or(5)));
    let results = match py::int(&max) {
        Some(n) if n > 0 => image_results(ctx, query, n as usize, [size, type_image, layout]).unwrap_or_default(),
        _ => vec![],
    };
    if results.is_empty() {
        return error_json("No images found", "query", query).into();
    }
    let field = |r: &Value, k: &str, url: bool| match r.get(k) {
        Some(Value::String(s)) if url => json!(normalize_url(s)),
        Some(Value::String(s)) => json!(normalize_text(s)),
        Some(Value::Null) | None => json!(""),
        Some(other) => other.clone(),
    };
    let items: Vec<Value> = results
        .iter()
        .map(|r| {
            object(vec![
                ("title", field(r, "title", false)),
                ("image_url", field(r, "image", true)),
                ("thumbnail_url", field(r, "thumbnail", true)),
            ])
        })
        .collect();
    let out = object(vec![
        ("query", json!(query)),
        ("total_results", json!(items.len())),
        ("results", Value::Array(items)),
        ("usage_hint", json!(super::serper::USAGE_HINT)),
    ]);
    dumps_indented(&out).into()
}
