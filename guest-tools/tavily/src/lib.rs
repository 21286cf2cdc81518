//! DeerFlow's Tavily community tools (`deerflow.community.tavily.tools`) as one component:
//! `web_search` and `web_fetch`, with DeerFlow's schemas, config keys and output, over Tavily's
//! REST API (`POST /search`, `POST /extract`) through `wasi:http`. The request building and the
//! output formatting are plain functions, tested natively; the component glue only sends.

use serde_json::{json, Map, Value};

/// DeerFlow's `DEFAULT_MAX_RESULTS`.
pub const DEFAULT_MAX_RESULTS: i64 = 5;
/// Where Tavily's API lives; the `base_url` config key (a toolhost addition) points elsewhere.
pub const DEFAULT_BASE_URL: &str = "https://api.tavily.com";
/// `web_fetch` keeps this many characters of the page.
pub const FETCH_MAX_CHARS: usize = 4096;

pub const WEB_SEARCH_DESCRIPTION: &str = "Search the web.";
pub const WEB_FETCH_DESCRIPTION: &str = "Fetch the contents of a web page at a given URL.\nOnly fetch EXACT URLs that have been provided directly by the user or have been returned in results from the web_search and web_fetch tools.\nThis tool can NOT access content that requires authentication, such as private Google Docs or pages behind login walls.\nDo NOT add www. to URLs that do NOT have them.\nURLs must include the schema: https://example.com is a valid URL while example.com is an invalid URL.";

/// The parameters schema of `web_search`, as LangChain renders DeerFlow's docstring.
pub fn web_search_parameters() -> Value {
    json!({
        "properties": {"query": {"description": "The query to search for.", "type": "string"}},
        "required": ["query"],
        "type": "object"
    })
}

/// The parameters schema of `web_fetch`.
pub fn web_fetch_parameters() -> Value {
    json!({
        "properties": {"url": {"description": "The URL to fetch the contents of.", "type": "string"}},
        "required": ["url"],
        "type": "object"
    })
}

/// An exception as DeerFlow's tool would raise it: the error middleware prints
/// `Error: Tool '…' failed with {class}: {detail}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Raised {
    pub class: String,
    pub detail: String,
}

impl Raised {
    pub fn new(class: &str, detail: impl Into<String>) -> Self {
        Self { class: class.to_string(), detail: detail.into() }
    }
}

/// DeerFlow's `_coerce_max_results`: a positive integer, else the default. Booleans and
/// non-integral floats are invalid; integral floats and numeric strings count.
pub fn coerce_max_results(value: Option<&Value>) -> i64 {
    let count = match value {
        None => return DEFAULT_MAX_RESULTS,
        Some(Value::Bool(_)) => 0,
        Some(Value::Number(n)) => match (n.as_i64(), n.as_f64()) {
            (Some(i), _) => i,
            (None, Some(f)) if f.is_finite() && f.fract() == 0.0 && f.abs() < 9.2e18 => f as i64,
            _ => 0,
        },
        Some(Value::String(s)) => s.trim().parse::<i64>().unwrap_or(0),
        Some(_) => 0,
    };
    if count <= 0 {
        DEFAULT_MAX_RESULTS
    } else {
        count
    }
}

/// The API key: the tool config's `api_key`, else `TAVILY_API_KEY` from the environment the
/// host granted (TavilyClient's order). An empty string counts as missing.
pub fn api_key(config: &Value, env: Option<String>) -> Result<String, Raised> {
    let from_config = config.get("api_key").and_then(Value::as_str).filter(|k| !k.is_empty());
    match from_config.map(str::to_string).or(env.filter(|k| !k.is_empty())) {
        Some(k) => Ok(k),
        None => Err(Raised::new(
            "MissingAPIKeyError",
            "No API key provided. Please provide the api_key attribute or set the TAVILY_API_KEY environment variable.",
        )),
    }
}

/// `base_url` from the config, without a trailing slash.
pub fn base_url(config: &Value) -> String {
    config.get("base_url").and_then(Value::as_str).unwrap_or(DEFAULT_BASE_URL).trim_end_matches('/').to_string()
}

/// The body of `POST /search` for `query` under this tool config.
pub fn search_body(query: &str, config: &Value) -> Value {
    let mut body = Map::new();
    body.insert("query".into(), json!(query));
    body.insert("max_results".into(), json!(coerce_max_results(config.get("max_results"))));
    for key in ["include_domains", "exclude_domains"] {
        if let Some(v) = config.get(key) {
            body.insert(key.into(), v.clone());
        }
    }
    let has_includes = match body.get("include_domains") {
        Some(Value::Array(a)) => !a.is_empty(),
        Some(Value::String(s)) => !s.is_empty(),
        Some(Value::Null) | None => false,
        Some(_) => true,
    };
    if has_includes {
        body.insert("include_domains_mode".into(), json!("filter"));
    }
    Value::Object(body)
}

/// The body of `POST /extract` for one URL.
pub fn extract_body(url: &str) -> Value {
    json!({ "urls": [url] })
}

/// Python's `KeyError('name')`.
fn key_error(key: &str) -> Raised {
    Raised::new("KeyError", format!("'{key}'"))
}

/// `web_search`'s output: `[{title, url, snippet}]` as `json.dumps(indent=2, ensure_ascii=False)`.
pub fn format_search(response: &Value) -> Result<String, Raised> {
    let results = response.get("results").ok_or_else(|| key_error("results"))?;
    let Some(results) = results.as_array() else {
        return Err(Raised::new("TypeError", "'results' is not a list"));
    };
    let mut out = Vec::with_capacity(results.len());
    for r in results {
        let field = |k: &str| r.get(k).cloned().ok_or_else(|| key_error(k));
        let mut item = Map::new();
        item.insert("title".into(), field("title")?);
        item.insert("url".into(), field("url")?);
        item.insert("snippet".into(), field("content")?);
        out.push(Value::Object(item));
    }
    Ok(serde_json::to_string_pretty(&Value::Array(out)).unwrap_or_else(|_| "[]".into()))
}

/// Python truthiness of a JSON value used as `x or y`.
fn truthy(v: Option<&Value>) -> Option<&Value> {
    match v {
        None | Some(Value::Null) | Some(Value::Bool(false)) => None,
        Some(Value::String(s)) if s.is_empty() => None,
        Some(Value::Array(a)) if a.is_empty() => None,
        Some(Value::Object(o)) if o.is_empty() => None,
        Some(Value::Number(n)) if n.as_f64() == Some(0.0) => None,
        other => other,
    }
}

/// Python's `str()` of a JSON value in an f-string.
fn py_str(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => "None".into(),
        Value::Bool(true) => "True".into(),
        Value::Bool(false) => "False".into(),
        other => other.to_string(),
    }
}

/// `web_fetch`'s output for an `/extract` response.
pub fn format_extract(response: &Value, url: &str) -> Result<String, Raised> {
    if let Some(failed) = response.get("failed_results").and_then(Value::as_array).filter(|f| !f.is_empty()) {
        let error = failed[0].get("error").ok_or_else(|| key_error("error"))?;
        return Ok(format!("Error: {}", py_str(error)));
    }
    if let Some(results) = response.get("results").and_then(Value::as_array).filter(|r| !r.is_empty()) {
        let r = &results[0];
        let title = truthy(r.get("title")).or_else(|| truthy(r.get("url"))).map(py_str).unwrap_or_else(|| url.into());
        let raw = r.get("raw_content").ok_or_else(|| key_error("raw_content"))?;
        let raw = py_str(raw);
        let cut: String = raw.chars().take(FETCH_MAX_CHARS).collect();
        return Ok(format!("# {title}\n\n{cut}"));
    }
    Ok("Error: No results found".into())
}

/// The exception tavily-python raises for an HTTP error status, with its `detail.error` text.
pub fn http_error(status: u16, body: &str, url: &str) -> Raised {
    let detail = serde_json::from_str::<Value>(body)
        .ok()
        .and_then(|v| v.get("detail").and_then(|d| d.get("error").or(Some(d)).cloned()))
        .map(|d| py_str(&d))
        .unwrap_or_else(|| body.trim().to_string());
    match status {
        400 => Raised::new("BadRequestError", detail),
        401 => Raised::new("InvalidAPIKeyError", detail),
        403 => Raised::new("ForbiddenError", detail),
        429 | 432 | 433 => Raised::new("UsageLimitExceededError", detail),
        s => {
            let kind = if s >= 500 { "Server Error" } else { "Client Error" };
            Raised::new("HTTPError", format!("{s} {kind}: {detail} for url: {url}"))
        }
    }
}

#[cfg(target_arch = "wasm32")]
mod component {
    //! The component glue: build the request, send it through wasi:http, format the answer.

    use serde_json::Value;
    use toolhost_sdk::http::Request;
    use toolhost_sdk::{Context, Output};

    use super::*;

    fn raised(r: Raised) -> Output {
        Output::raised(r.class, r.detail)
    }

    fn post(config: &Value, path: &str, body: &Value) -> Result<Value, Raised> {
        let key = api_key(config, std::env::var("TAVILY_API_KEY").ok())?;
        let url = format!("{}{path}", base_url(config));
        let resp = Request::post(url.as_str())
            .header("authorization", format!("Bearer {key}"))
            .header("x-client-source", "toolhost")
            .json(body)
            .send()
            .map_err(|e| Raised::new("ConnectionError", e.to_string()))?;
        if resp.status != 200 {
            return Err(http_error(resp.status, &resp.text(), &url));
        }
        resp.json::<Value>().map_err(|e| Raised::new("JSONDecodeError", e.to_string()))
    }

    fn web_search(ctx: &Context, args: Value) -> Output {
        let Some(query) = args.get("query").and_then(Value::as_str) else {
            return Output::error("Error: invalid arguments for tool 'web_search': missing field `query`");
        };
        match post(&ctx.config, "/search", &search_body(query, &ctx.config)).and_then(|r| format_search(&r)) {
            Ok(text) => Output::text(text),
            Err(r) => raised(r),
        }
    }

    fn web_fetch(ctx: &Context, args: Value) -> Output {
        let Some(url) = args.get("url").and_then(Value::as_str) else {
            return Output::error("Error: invalid arguments for tool 'web_fetch': missing field `url`");
        };
        match post(&ctx.config, "/extract", &extract_body(url)).and_then(|r| format_extract(&r, url)) {
            Ok(text) => Output::text(text),
            Err(r) => raised(r),
        }
    }

    toolhost_sdk::export_tools!(
        toolhost_sdk::tool("web_search", "", web_search)
            .with_meta(|| (WEB_SEARCH_DESCRIPTION.to_string(), web_search_parameters())),
        toolhost_sdk::tool("web_fetch", "", web_fetch)
            .with_meta(|| (WEB_FETCH_DESCRIPTION.to_string(), web_fetch_parameters())),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn max_results_coerce_like_deerflow() {
        for (v, want) in [
            (None, 5),
            (Some(json!(3)), 3),
            (Some(json!(3.0)), 3),
            (Some(json!(3.5)), 5),
            (Some(json!(true)), 5),
            (Some(json!("7")), 7),
            (Some(json!("x")), 5),
            (Some(json!(0)), 5),
            (Some(json!(-2)), 5),
            (Some(json!(null)), 5),
        ] {
            assert_eq!(coerce_max_results(v.as_ref()), want, "{v:?}");
        }
    }

    #[test]
    fn key_comes_from_config_then_env() {
        assert_eq!(api_key(&json!({"api_key": "k1"}), Some("k2".into())).unwrap(), "k1");
        assert_eq!(api_key(&json!({"api_key": ""}), Some("k2".into())).unwrap(), "k2");
        let e = api_key(&json!({}), None).unwrap_err();
        assert_eq!(e.class, "MissingAPIKeyError");
    }

    #[test]
    fn search_body_carries_config() {
        let b = search_body("rust wasm", &json!({"max_results": 2, "include_domains": ["a.com"], "api_key": "k"}));
        assert_eq!(
            b,
            json!({"query": "rust wasm", "max_results": 2, "include_domains": ["a.com"], "include_domains_mode": "filter"})
        );
        assert_eq!(
            search_body("q", &json!({"include_domains": []})),
            json!({"query": "q", "max_results": 5, "include_domains": []})
        );
    }

    #[test]
    fn search_output_is_pretty_json_of_title_url_snippet() {
        let r = json!({"query": "q", "results": [
            {"title": "Café", "url": "https://a.example/", "content": "snippet \"quoted\"", "score": 0.9},
            {"title": "B", "url": "https://b.example/", "content": "two", "raw_content": null}
        ]});
        assert_eq!(
            format_search(&r).unwrap(),
            "[\n  {\n    \"title\": \"Café\",\n    \"url\": \"https://a.example/\",\n    \"snippet\": \"snippet \\\"quoted\\\"\"\n  },\n  {\n    \"title\": \"B\",\n    \"url\": \"https://b.example/\",\n    \"snippet\": \"two\"\n  }\n]"
        );
        assert_eq!(format_search(&json!({"results": []})).unwrap(), "[]");
        assert_eq!(format_search(&json!({"results": [{"title": "t", "url": "u"}]})).unwrap_err(), key_error("content"));
    }

    #[test]
    fn fetch_output_follows_deerflow() {
        let long: String = "é".repeat(5000);
        let out =
            format_extract(&json!({"results": [{"url": "https://x/", "raw_content": long}]}), "https://x/").unwrap();
        assert!(out.starts_with("# https://x/\n\n"));
        assert_eq!(out.chars().count(), "# https://x/\n\n".chars().count() + 4096, "cut by characters");
        let out =
            format_extract(&json!({"results": [{"title": "T", "url": "u", "raw_content": "body"}]}), "u").unwrap();
        assert_eq!(out, "# T\n\nbody");
        let out = format_extract(&json!({"results": [{"title": "", "url": "", "raw_content": "b"}]}), "asked").unwrap();
        assert_eq!(out, "# asked\n\nb");
        let out =
            format_extract(&json!({"results": [], "failed_results": [{"url": "u", "error": "blocked"}]}), "u").unwrap();
        assert_eq!(out, "Error: blocked");
        assert_eq!(format_extract(&json!({"results": []}), "u").unwrap(), "Error: No results found");
    }

    #[test]
    fn http_errors_name_tavilys_exceptions() {
        let e = http_error(401, r#"{"detail": {"error": "Unauthorized: missing or invalid API key."}}"#, "u");
        assert_eq!(e, Raised::new("InvalidAPIKeyError", "Unauthorized: missing or invalid API key."));
        assert_eq!(http_error(429, r#"{"detail": {"error": "slow down"}}"#, "u").class, "UsageLimitExceededError");
        let e = http_error(502, "bad gateway", "https://api.tavily.com/search");
        assert_eq!(e.detail, "502 Server Error: bad gateway for url: https://api.tavily.com/search");
    }
}
