//! The conformance vectors (`tests/conformance/community_tools.json`) run natively against the
//! provider functions: each case's canned response through a recording transport, the request
//! and the returned string compared with DeerFlow's. The end-to-end run through the host and
//! wasi:http is `tests/community_tools.rs`; this one pins the logic fast and precisely.

use std::cell::RefCell;
use std::net::IpAddr;

use serde_json::Value;

use crate::net::{Failure, Http, Request, Response};
use crate::providers::{Ctx, Out, Outputs};

const BASE: &str = "https://mock.test";

struct Recorder {
    mock: Option<Value>,
    seen: RefCell<Vec<Request>>,
}

impl Http for Recorder {
    fn send(&self, req: &Request) -> Result<Response, Failure> {
        self.seen.borrow_mut().push(req.clone());
        let Some(m) = &self.mock else { return Err(Failure::Connect("no mock".into())) };
        let mut headers = vec![("content-type".to_string(), m["content_type"].as_str().unwrap_or("").to_string())];
        if let Some(Value::Object(h)) = m.get("headers") {
            headers.extend(h.iter().map(|(k, v)| (k.clone(), v.as_str().unwrap_or("").to_string())));
        }
        Ok(Response {
            status: m["status"].as_u64().unwrap_or(200) as u16,
            headers,
            body: m["body"].as_str().unwrap_or("").as_bytes().to_vec(),
            url: req.url.clone(),
        })
    }
}

struct NoOutputs;
impl Outputs for NoOutputs {
    fn exists(&self, _: &str) -> bool {
        false
    }
    fn write(&self, _: &str, _: &[u8]) -> Result<(), String> {
        Err("no outputs".into())
    }
}

/// The vectors, with this crate's path to the repository.
pub fn vectors() -> Value {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/conformance/community_tools.json");
    serde_json::from_str(&std::fs::read_to_string(path).expect("the vectors are in the repository")).expect("JSON")
}

/// The `provider.tool` a DeerFlow `use:` names.
pub fn inner_name(use_: &str) -> String {
    let (module, attr) = use_.split_once(':').unwrap_or((use_, ""));
    let provider = module.trim_start_matches("deerflow.community.").trim_end_matches(".tools");
    format!("{provider}.{}", attr.trim_end_matches("_tool"))
}

/// The config the host hands the tool: the entry's keys, and for Tavily's `web_fetch` the
/// `web_search` entry's key instead of its own (DeerFlow's `_get_tavily_client`).
pub fn effective_config(case: &Value) -> Value {
    let mut config = case["tool_config"].clone();
    if case["use"] == "deerflow.community.tavily.tools:web_fetch_tool" {
        let obj = config.as_object_mut().expect("an object");
        obj.remove("api_key");
        let search_key = case["other_tools"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|t| t["name"] == "web_search")
            .and_then(|t| t.get("api_key").or_else(|| t.get("tool_config").and_then(|c| c.get("api_key"))));
        if let Some(k) = search_key {
            obj.insert("api_key".into(), k.clone());
        }
    }
    config.as_object_mut().expect("an object").insert("base_url".into(), Value::String(BASE.into()));
    config
}

fn run(case: &Value) -> (Out, Vec<Request>) {
    let tool = crate::tool(&inner_name(case["use"].as_str().unwrap())).expect("a tool for every vector");
    let config = effective_config(case);
    let env_map = case["env"].clone();
    let env = move |k: &str| env_map.get(k).and_then(Value::as_str).map(str::to_string);
    let dns = case.get("dns").cloned().unwrap_or(Value::Null);
    let resolve = move |h: &str| -> Vec<IpAddr> {
        dns.get(h).and_then(Value::as_array).into_iter().flatten().filter_map(|a| a.as_str()?.parse().ok()).collect()
    };
    let http = Recorder { mock: case.get("mock").filter(|m| !m.is_null()).cloned(), seen: RefCell::new(vec![]) };
    let now = || "20250101-000000".to_string();
    let sleep = |_: f64| {};
    let ctx = Ctx {
        config: &config,
        env: &env,
        http: &http,
        resolve: &resolve,
        outputs: &NoOutputs,
        now: &now,
        sleep: &sleep,
    };
    let out = (tool.handler)(&ctx, &case["args"]);
    let seen = http.seen.into_inner();
    (out, seen)
}

/// The query string of a URL, parsed.
fn query_of(url: &str) -> serde_json::Map<String, Value> {
    let mut m = serde_json::Map::new();
    if let Some((_, q)) = url.split_once('?') {
        for pair in q.split('&').filter(|p| !p.is_empty()) {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            let dec = |s: &str| {
                let s = s.replace('+', " ");
                let mut out = Vec::new();
                let b = s.as_bytes();
                let mut i = 0;
                while i < b.len() {
                    if b[i] == b'%' && i + 2 < b.len() {
                        if let Ok(x) = u8::from_str_radix(&s[i + 1..i + 3], 16) {
                            out.push(x);
                            i += 3;
                            continue;
                        }
                    }
                    out.push(b[i]);
                    i += 1;
                }
                String::from_utf8_lossy(&out).into_owned()
            };
            m.insert(dec(k), Value::String(dec(v)));
        }
    }
    m
}

/// Compare one case; `Err` says what differs.
fn check(case: &Value) -> Result<(), String> {
    let (out, seen) = run(case);
    let expected = &case["expected_request"];
    if expected.is_null() {
        if !seen.is_empty() {
            return Err(format!("expected no request, saw {}", seen[0].url));
        }
    } else {
        let req = seen.first().ok_or("no request was sent")?;
        if req.method != expected["method"] {
            return Err(format!("method {} != {}", req.method, expected["method"]));
        }
        let path = req.url.strip_prefix(BASE).unwrap_or(&req.url);
        let path = path.split('?').next().unwrap_or("");
        if path != expected["path"] {
            return Err(format!("path {path} != {}", expected["path"]));
        }
        if Value::Object(query_of(&req.url)) != expected["query"] {
            return Err(format!("query {:?} != {}", query_of(&req.url), expected["query"]));
        }
        if !expected["json"].is_null() {
            let mut body: Value = serde_json::from_slice(&req.body).map_err(|e| format!("body is not JSON: {e}"))?;
            let mut want = expected["json"].clone();
            for k in expected["json_ignore"].as_array().into_iter().flatten() {
                let k = k.as_str().unwrap_or("");
                body.as_object_mut().map(|o| o.remove(k));
                want.as_object_mut().map(|o| o.remove(k));
            }
            if body != want {
                return Err(format!("json {body} != {}", expected["json"]));
            }
        }
        if let Some(h) = expected["api_key_header"].as_str() {
            let want = expected["api_key_format"]
                .as_str()
                .unwrap_or("{KEY}")
                .replace("{KEY}", expected["api_key"].as_str().unwrap_or(""));
            let got = req.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(h)).map(|(_, v)| v.clone());
            if got.as_deref() != Some(want.as_str()) {
                return Err(format!("header {h}: {got:?} != {want}"));
            }
        } else if req.headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("authorization")) {
            return Err("an authorization header was sent where DeerFlow sent none".into());
        }
    }
    let got = match out {
        Out::Text(t) => format!("TEXT {t}"),
        Out::Raised(e) => format!("RAISED {}: {}", e.class, e.message),
        Out::Artifact { text, .. } => format!("TEXT {text}"),
    };
    let want = match case["raised"].as_str() {
        Some(r) => format!("RAISED {r}"),
        None => format!("TEXT {}", case["expected_content"].as_str().unwrap_or("")),
    }
    .replace("{BASE_URL}", BASE);
    if got != want {
        return Err(format!("output differs:\n got: {got:?}\nwant: {want:?}"));
    }
    Ok(())
}

#[test]
fn every_vector_matches_deerflow() {
    let doc = vectors();
    let mut failures = Vec::new();
    for case in doc["cases"].as_array().expect("cases") {
        if let Err(e) = check(case) {
            failures.push(format!("{} ({}): {e}", case["id"], case["note"]));
        }
    }
    assert!(failures.is_empty(), "{} of the vectors differ:\n{}", failures.len(), failures.join("\n\n"));
}
