//! DeerFlow's community tools through the real host: the bundled `community` component over
//! wasi:http against a loopback TLS server that stands in for each provider's API.
//!
//! `conformance_vectors_match_deerflow` runs every case of `tests/conformance/community_tools.json`
//! the way its README prescribes (one server, the case's response, `base_url` and a loopback
//! grant), checking the request the component sent and the exact text the model sees. The other
//! tests go beyond the vectors, per provider: no grant, no key, error statuses, a body cut
//! short, a redirect to the metadata address, a slow body, a screenshot written to outputs.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use toolhost::assembly::AssemblyRequest;
use toolhost::runtime::Runtime;
use toolhost::{Environment, HostOptions, Toolhost};

#[path = "support/provider_server.rs"]
mod provider_server;
use provider_server::{Answer, ProviderServer};

fn vectors() -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/conformance/community_tools.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// A host over `tools` (JSON entries), sharing `runtime`, with `env` as the environment it sees
/// (the library reads no process environment: nothing leaks in from the test runner's).
fn host(runtime: &Arc<Runtime>, dir: &Path, tools: Vec<Value>, env: &[(&str, &str)]) -> Toolhost {
    let config = dir.join("config.yaml");
    std::fs::write(&config, serde_yaml::to_string(&json!({ "tools": tools })).unwrap()).unwrap();
    let opts = HostOptions::new(&config)
        .data_dir(dir.join("data"))
        .env(Environment::new(env.iter().map(|(k, v)| (k.to_string(), v.to_string()))));
    let host = Toolhost::with_runtime(opts, runtime.clone()).unwrap();
    let errors: Vec<_> = host.problems().iter().filter(|p| p.severity == toolhost::Severity::Error).collect();
    assert!(errors.is_empty(), "{errors:?}");
    host
}

fn runtime(server: &ProviderServer, dir: &Path) -> Arc<Runtime> {
    Runtime::with_extra_ca_certs(Some(dir.join("cache")), Some(&server.ca_pem)).unwrap()
}

/// The entry the README prescribes: the tool's config, the mock as `base_url`, a loopback grant.
fn entry(name: &str, use_: &str, config: &Value, base: &str, env: Vec<String>) -> Value {
    let mut e = json!({"name": name, "group": "web", "use": use_});
    for (k, v) in config.as_object().unwrap() {
        e[k] = v.clone();
    }
    e["base_url"] = json!(base);
    e["capabilities"] = json!({"network": ["127.0.0.1:*"], "allow_private_addresses": true, "env": env});
    e
}

async fn call(host: &Toolhost, name: &str, args: Value) -> (String, toolhost::core::ToolOutcome) {
    let r = host.call(&AssemblyRequest::default(), "t1", name, args, None).await.unwrap();
    (r.outcome.text_content(), r.outcome)
}

fn decode(s: &str) -> String {
    let s = s.replace('+', " ");
    let b = s.as_bytes();
    let mut out = Vec::new();
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
}

/// Compare the request the server received with DeerFlow's.
fn check_request(case: &Value, got: &[provider_server::Received]) -> Result<(), String> {
    let want = &case["expected_request"];
    if want.is_null() {
        return if got.is_empty() { Ok(()) } else { Err(format!("expected no request, got {}", got[0].target)) };
    }
    let r = got.first().ok_or("no request reached the server")?;
    if r.method != want["method"] {
        return Err(format!("method {} != {}", r.method, want["method"]));
    }
    let (path, query) = r.target.split_once('?').unwrap_or((&r.target, ""));
    if path != want["path"] {
        return Err(format!("path {path} != {}", want["path"]));
    }
    let q: serde_json::Map<String, Value> = query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (decode(k), Value::String(decode(v)))
        })
        .collect();
    if Value::Object(q.clone()) != want["query"] {
        return Err(format!("query {q:?} != {}", want["query"]));
    }
    if !want["json"].is_null() {
        let mut body: Value = serde_json::from_slice(&r.body).map_err(|e| format!("body not JSON: {e}"))?;
        let mut expected = want["json"].clone();
        for k in want["json_ignore"].as_array().into_iter().flatten() {
            body.as_object_mut().map(|o| o.remove(k.as_str().unwrap()));
            expected.as_object_mut().map(|o| o.remove(k.as_str().unwrap()));
        }
        if body != expected {
            return Err(format!("json {body} != {expected}"));
        }
    }
    match want["api_key_header"].as_str() {
        Some(h) => {
            let key = want["api_key_format"].as_str().unwrap().replace("{KEY}", want["api_key"].as_str().unwrap());
            if r.header(h) != Some(key.as_str()) {
                return Err(format!("{h}: {:?} != {key}", r.header(h)));
            }
        }
        None if r.header("authorization").is_some() => return Err("an unexpected authorization header".into()),
        None => {}
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conformance_vectors_match_deerflow() {
    let server = provider_server::start().await;
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime(&server, dir.path());
    let doc = vectors();
    let mut failures = Vec::new();
    let cases = doc["cases"].as_array().unwrap();
    for case in cases {
        let id = case["id"].as_str().unwrap();
        let provider = case["provider"].as_str().unwrap();
        let key_var = doc["providers"][provider]["api_key_env"].as_str();
        let mut env_names: Vec<String> = case["env"].as_object().unwrap().keys().cloned().collect();
        env_names.extend(key_var.map(str::to_string));
        let mut tools = vec![entry(
            case["tool"].as_str().unwrap(),
            case["use"].as_str().unwrap(),
            &case["tool_config"],
            &server.base_url(),
            env_names.clone(),
        )];
        for other in case["other_tools"].as_array().into_iter().flatten() {
            let cfg = other.get("tool_config").cloned().unwrap_or_else(|| {
                let mut c = other.clone();
                for k in ["name", "group", "use"] {
                    c.as_object_mut().unwrap().remove(k);
                }
                c
            });
            tools.push(entry(
                other["name"].as_str().unwrap(),
                other["use"].as_str().unwrap(),
                &cfg,
                &server.base_url(),
                env_names.clone(),
            ));
        }
        let dns: HashMap<String, Vec<std::net::IpAddr>> = case
            .get("dns")
            .and_then(Value::as_object)
            .map(|m| {
                m.iter()
                    .map(|(k, v)| {
                        (
                            k.clone(),
                            v.as_array().unwrap().iter().map(|a| a.as_str().unwrap().parse().unwrap()).collect(),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default();
        rt.set_static_hosts(dns);
        match case.get("mock").filter(|m| !m.is_null()) {
            Some(m) => {
                let mut headers = vec![("content-type".to_string(), m["content_type"].as_str().unwrap().to_string())];
                if let Some(h) = m.get("headers").and_then(Value::as_object) {
                    headers.extend(h.iter().map(|(k, v)| (k.clone(), v.as_str().unwrap().to_string())));
                }
                server.set(Answer::Full {
                    status: m["status"].as_u64().unwrap() as u16,
                    headers,
                    body: m["body"].as_str().unwrap().as_bytes().to_vec(),
                });
            }
            None => server.set(Answer::json(599, "{}")),
        }
        let env: Vec<(&str, &str)> =
            case["env"].as_object().unwrap().iter().map(|(k, v)| (k.as_str(), v.as_str().unwrap())).collect();
        let h = host(&rt, dir.path(), tools, &env);
        let (text, _) = call(&h, case["tool"].as_str().unwrap(), case["args"].clone()).await;
        let want = case["expected_model_content"].as_str().unwrap().replace("{BASE_URL}", &server.base_url());
        if text != want {
            failures.push(format!("{id} ({}): content\n got: {text:?}\nwant: {want:?}", case["note"]));
        }
        if let Err(e) = check_request(case, &server.received()) {
            failures.push(format!("{id} ({}): request: {e}", case["note"]));
        }
    }
    assert!(failures.is_empty(), "{} of {} cases differ:\n{}", failures.len(), cases.len(), failures.join("\n"));
}

/// One entry per provider tool, as DeerFlow's config would have it, pointed at the server.
struct Probe {
    use_: &'static str,
    tool: &'static str,
    args: Value,
    /// The env var holding the key, and what DeerFlow says when it is missing (`None`: the
    /// provider needs no key).
    key: Option<(&'static str, &'static str)>,
}

fn probes() -> Vec<Probe> {
    let q = || json!({"query": "q"});
    let u = || json!({"url": "https://93.184.215.14/page"});
    vec![
        Probe {
            use_: "deerflow.community.serper.tools:web_search_tool",
            tool: "web_search",
            args: q(),
            key: Some(("SERPER_API_KEY", "{\"error\": \"SERPER_API_KEY is not configured\", \"query\": \"q\"}")),
        },
        Probe {
            use_: "deerflow.community.brave.tools:image_search_tool",
            tool: "image_search",
            args: q(),
            key: Some(("BRAVE_SEARCH_API_KEY", "{\"error\": \"BRAVE_SEARCH_API_KEY is not configured\", \"query\": \"q\"}")),
        },
        Probe {
            use_: "deerflow.community.exa.tools:web_search_tool",
            tool: "web_search",
            args: q(),
            key: Some(("EXA_API_KEY", "Error: API key must be provided as an argument or in EXA_API_KEY environment variable")),
        },
        // DeerFlow with firecrawl-py 4.23.0 (the vectors' pin): `FirecrawlApp` builds its v1
        // client first, whose key check answers before v2's, for both tools.
        Probe {
            use_: "deerflow.community.firecrawl.tools:web_fetch_tool",
            tool: "web_fetch",
            args: u(),
            key: Some(("FIRECRAWL_API_KEY", "Error: No API key provided")),
        },
        Probe {
            use_: "deerflow.community.firecrawl.tools:web_search_tool",
            tool: "web_search",
            args: q(),
            key: Some(("FIRECRAWL_API_KEY", "Error: No API key provided")),
        },
        Probe { use_: "deerflow.community.fastcrw.tools:web_search_tool", tool: "web_search", args: q(), key: None },
        Probe {
            use_: "deerflow.community.groundroute.tools:web_fetch_tool",
            tool: "web_fetch",
            args: u(),
            key: Some(("GROUNDROUTE_API_KEY", "{\"error\": \"GROUNDROUTE_API_KEY is not configured\", \"url\": \"https://93.184.215.14/page\"}")),
        },
        Probe { use_: "deerflow.community.searxng.tools:web_search_tool", tool: "web_search", args: q(), key: None },
        Probe { use_: "deerflow.community.jina_ai.tools:web_fetch_tool", tool: "web_fetch", args: u(), key: None },
        Probe {
            use_: "deerflow.community.tavily.tools:web_search_tool",
            tool: "web_search",
            args: q(),
            key: Some(("TAVILY_API_KEY", "Error: Tool 'web_search' failed with MissingAPIKeyError: No API key provided. Please provide the api_key attribute or set the TAVILY_API_KEY environment variable.. Continue with available context, or choose an alternative tool.")),
        },
        Probe { use_: "deerflow.community.infoquest.tools:image_search_tool", tool: "image_search", args: q(), key: None },
        Probe { use_: "deerflow.community.crawl4ai.tools:web_fetch_tool", tool: "web_fetch", args: u(), key: None },
        Probe { use_: "deerflow.community.browserless.tools:web_fetch_tool", tool: "web_fetch", args: u(), key: None },
        Probe { use_: "deerflow.community.ddg_search.tools:web_search_tool", tool: "web_search", args: q(), key: None },
        Probe { use_: "deerflow.community.image_search.tools:image_search_tool", tool: "image_search", args: q(), key: None },
    ]
}

fn probe_entry(p: &Probe, base: &str, caps: Option<Value>, key: bool) -> Value {
    let mut e = json!({"name": p.tool, "group": "web", "use": p.use_, "base_url": base, "timeout": 3, "timeout_s": 3});
    if let Some(c) = caps {
        e["capabilities"] = c;
    }
    if key {
        e["api_key"] = json!("k");
    }
    e
}

fn loopback() -> Value {
    json!({"network": ["127.0.0.1:*"], "allow_private_addresses": true, "timeout_s": 20, "memory_mb": 256})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_provider_fails_like_deerflow_and_stays_in_its_grant() {
    let server = provider_server::start().await;
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime(&server, dir.path());
    let mut failures = Vec::new();
    let mut fail = |p: &Probe, what: &str, text: &str| failures.push(format!("{} {what}: {text}", p.use_));
    for p in probes() {
        // No grant: the provider's default grant names its own API host, not the server, so
        // the request is refused before any connection (self-hosted ones have no grant at all).
        server.set(Answer::json(200, "{}"));
        let h = host(&rt, dir.path(), vec![probe_entry(&p, &server.base_url(), None, true)], &[]);
        let (text, _) = call(&h, p.tool, p.args.clone()).await;
        if server.connection_count() != 0 {
            fail(&p, "ungranted request reached the server", &text);
        }
        // No key: DeerFlow's message, and no request.
        if let Some((_, message)) = p.key {
            let h = host(&rt, dir.path(), vec![probe_entry(&p, &server.base_url(), Some(loopback()), false)], &[]);
            let (text, _) = call(&h, p.tool, p.args.clone()).await;
            if text != message {
                fail(&p, "missing key", &text);
            }
            if !server.received().is_empty() {
                fail(&p, "missing key still sent a request", "");
            }
        }
        let h = host(&rt, dir.path(), vec![probe_entry(&p, &server.base_url(), Some(loopback()), true)], &[]);
        for status in [401, 429, 500] {
            server.set(Answer::json(status, "{\"error\": \"nope\"}"));
            let (text, outcome) = call(&h, p.tool, p.args.clone()).await;
            let quiet = p.use_.contains("ddg_search") || p.use_.contains("image_search.tools");
            let says = [
                &status.to_string(),
                "Unauthorized",
                "UsageLimit",
                "InvalidAPIKey",
                "Rate Limit",
                "Internal Server Error",
            ]
            .iter()
            .any(|w| text.contains(*w));
            if !(says || quiet) || server.received().is_empty() {
                fail(&p, &format!("HTTP {status}"), &text);
            }
            assert!(outcome.exception.is_none() || !text.contains("crashed"), "{text}");
        }
        // A body cut short: the client library's error, never a crash.
        server.set(Answer::Truncated { declared: 500, body: b"{\"results\": [".to_vec() });
        let (text, _) = call(&h, p.tool, p.args.clone()).await;
        if text.contains("crashed") || text.is_empty() {
            fail(&p, "truncated body", &text);
        }
        // A redirect to the metadata address: httpx clients return it, requests clients follow
        // it and the host refuses the hop (it is not in the grant).
        server.set(Answer::redirect("https://169.254.169.254/latest/meta-data/"));
        let (text, _) = call(&h, p.tool, p.args.clone()).await;
        let quiet = p.use_.contains("ddg_search") || p.use_.contains("image_search.tools");
        // (firecrawl-py reads the status of a requests error's absent response: DeerFlow's text.)
        let explained = ["302", "Redirect", "refused by the host", "'NoneType' object has no attribute 'status_code'"]
            .iter()
            .any(|w| text.contains(*w));
        if text.contains("crashed") || !(explained || quiet) {
            fail(&p, "redirect", &text);
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn texts_of_library_failures_match_deerflow() {
    let server = provider_server::start().await;
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime(&server, dir.path());
    let serper = |extra: Value| {
        let mut e =
            entry("web_search", "deerflow.community.serper.tools:web_search_tool", &extra, &server.base_url(), vec![]);
        e["api_key"] = json!("k");
        e
    };
    let h = host(&rt, dir.path(), vec![serper(json!({}))], &[]);
    server.set(Answer::Truncated { declared: 100, body: b"{\"organic\":".to_vec() });
    let (text, _) = call(&h, "web_search", json!({"query": "q"})).await;
    assert_eq!(
        text,
        "{\"error\": \"peer closed connection without sending complete message body (received 11 bytes, expected 100)\", \"query\": \"q\"}"
    );
    server.set(Answer::json(200, &format!("{{\"organic\": \"{}\"}}", "x".repeat(9 << 20))));
    let (text, _) = call(&h, "web_search", json!({"query": "q"})).await;
    assert_eq!(
        text,
        "{\"error\": \"the response body is larger than toolhost's limit of 8388608 bytes\", \"query\": \"q\"}"
    );
    server.set(Answer::json(200, "<html>not json</html>"));
    let (text, _) = call(&h, "web_search", json!({"query": "q"})).await;
    assert_eq!(text, "{\"error\": \"Expecting value: line 1 column 1 (char 0)\", \"query\": \"q\"}");
    server.set(Answer::Slow { every: Duration::from_millis(400), body: b"{\"organic\": []}".to_vec() });
    let h = host(
        &rt,
        dir.path(),
        vec![{
            let mut e = serper(json!({}));
            e["capabilities"]["timeout_s"] = json!(2);
            e
        }],
        &[],
    );
    let (text, _) = call(&h, "web_search", json!({"query": "q"})).await;
    assert!(text.contains("timed out"), "a slow body ends in a timeout: {text}");

    // requests-based clients follow redirects: the next hop is a new request the host checks.
    let infoquest = entry(
        "web_search",
        "deerflow.community.infoquest.tools:web_search_tool",
        &json!({}),
        &server.base_url(),
        vec![],
    );
    let h = host(&rt, dir.path(), vec![infoquest], &[]);
    server.set(Answer::redirect("https://169.254.169.254/latest/meta-data/"));
    let (text, _) = call(&h, "web_search", json!({"query": "q"})).await;
    assert!(text.starts_with("Error: InfoQuest Web-Search - Search tool execution failed"), "{text}");
    assert!(text.contains("request refused by the host"), "{text}");
    assert_eq!(server.received().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn web_capture_writes_the_screenshot_to_outputs_as_an_artifact() {
    let server = provider_server::start().await;
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime(&server, dir.path());
    let png = b"\x89PNG\r\n\x1a\nfake".to_vec();
    let mut e = json!({"name": "web_capture", "group": "web", "use": "deerflow.community.browserless.tools:web_capture_tool",
                       "base_url": server.base_url(), "token": "t"});
    e["capabilities"] = json!({"network": ["127.0.0.1:*"], "allow_private_addresses": true, "filesystem": "outputs"});
    let h = host(&rt, dir.path(), vec![e], &[]);
    server.set(Answer::Full {
        status: 200,
        headers: vec![("content-type".into(), "image/png".into()), ("x-response-code".into(), "200".into())],
        body: png.clone(),
    });
    let args = json!({"url": "https://93.184.215.14/dash", "filename": "../../etc/shot.jpg"});
    let (text, outcome) = call(&h, "web_capture", args.clone()).await;
    assert_eq!(text, "Captured screenshot: /mnt/user-data/outputs/shot.png");
    assert_eq!(outcome.update.artifacts, Some(vec!["/mnt/user-data/outputs/shot.png".to_string()]));
    let written = dir.path().join("data/threads/t1/user-data/outputs/shot.png");
    assert_eq!(std::fs::read(&written).unwrap(), png);
    let req = &server.received()[0];
    assert_eq!(req.target, "/screenshot?token=t");
    let body: Value = serde_json::from_slice(&req.body).unwrap();
    assert_eq!(
        body,
        json!({"url": "https://93.184.215.14/dash", "options": {"fullPage": true, "type": "png"},
                            "viewport": {"width": 1280, "height": 720}})
    );
    // A second capture of the same name never overwrites the first.
    let (text, _) = call(&h, "web_capture", args).await;
    assert_eq!(text, "Captured screenshot: /mnt/user-data/outputs/shot-1.png");
    // The metadata address is refused before anything is sent.
    server.set(Answer::json(200, "{}"));
    let (text, _) = call(&h, "web_capture", json!({"url": "http://169.254.169.254/"})).await;
    assert_eq!(text, "Error: Refusing to capture a private, loopback, or metadata address");
    assert!(server.received().is_empty());
}
