//! `toolhost serve` end to end with real MCP clients: the rmcp client over stdio and streamable
//! HTTP, the Python MCP SDK client over stdio, raw HTTP for the front door (bearer token, Host,
//! Origin), and deferred MCP tools (server-everything behind toolhost) promoted by `tool_search`
//! with `notifications/tools/list_changed`.

use std::io::Read;
use std::process::{Command, Stdio};
use std::sync::atomic::Ordering;
use std::time::Duration;

use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::ServiceExt;
use serde_json::{json, Value};

#[path = "support/serve_harness.rs"]
mod harness;
#[path = "support/paths.rs"]
mod paths;
use harness::*;
use paths::peer;

/// The same calls every client makes: hello, write then read a file, a bad call.
async fn exercise_tools(c: &Session, file: &str) {
    let tools = c.list_all_tools().await.unwrap();
    let hello = tools.iter().find(|t| t.name == "hello").expect("hello listed");
    assert_eq!(hello.description.as_deref(), Some("Greet someone by name."));
    assert_eq!(hello.input_schema["properties"]["name"]["type"], "string", "{:?}", hello.input_schema);
    for n in ["read_file", "write_file", "present_files", "ask_clarification"] {
        assert!(tools.iter().any(|t| t.name == n), "{n} missing");
    }

    let r = call(c, "hello", json!({"name": "MCP", "excited": true})).await;
    assert_eq!((text(&r).as_str(), r.is_error), ("Hello, MCP!", Some(false)));

    let path = format!("/mnt/user-data/workspace/{file}");
    let r =
        call(c, "write_file", json!({"description": "note", "path": path, "content": "line one\nline two\n"})).await;
    assert_eq!((text(&r).as_str(), r.is_error), ("OK", Some(false)), "{r:?}");
    let r = call(c, "read_file", json!({"description": "read it", "path": path})).await;
    assert_eq!(r.is_error, Some(false), "{r:?}");
    assert!(text(&r).contains("line one\nline two"), "{r:?}");

    let r = call(c, "hello", json!({"name": " "})).await;
    assert_eq!((text(&r).as_str(), r.is_error), ("Error: name must not be empty", Some(true)));
    // An unknown tool is the pipeline's own error text (LangGraph ToolNode's, naming the
    // tools), not a protocol error.
    let r = call(c, "no_such_tool", json!({})).await;
    assert_eq!(r.is_error, Some(true));
    let listed: Vec<String> = tools.iter().map(|t| t.name.to_string()).collect();
    assert_eq!(text(&r), format!("Error: no_such_tool is not a valid tool, try one of [{}].", listed.join(", ")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdio_lists_and_calls_tools_in_its_thread() {
    let s = Setup::new(false, false);
    let client = Client::default();
    let c = stdio_session(&s, client.clone(), &["--thread", "t-stdio"]).await;
    exercise_tools(&c, "stdio.txt").await;
    // The session's thread owns the files.
    let on_disk = s.data().join("threads/t-stdio/user-data/workspace/stdio.txt");
    assert_eq!(std::fs::read_to_string(&on_disk).unwrap(), "line one\nline two\n");

    // ask_clarification becomes an elicitation; the answer comes back with the question.
    let r =
        call(&c, "ask_clarification", json!({"question": "Which colour?", "clarification_type": "missing_info"})).await;
    assert_eq!(r.is_error, Some(false), "{r:?}");
    let t = text(&r);
    assert!(t.contains("Which colour?") && t.ends_with("The user answered: blue"), "{t}");
    assert_eq!(client.elicited.lock().unwrap().len(), 1);
    assert!(client.elicited.lock().unwrap()[0].contains("Which colour?"));
    c.cancel().await.unwrap();
}

/// `view_image` over MCP: DeerFlow's text, and the image itself as MCP image content (what
/// DeerFlow's ViewImageMiddleware shows the model), read again from the thread's file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn view_image_answers_with_the_image_as_mcp_image_content() {
    use base64::Engine as _;
    let s = Setup::new(false, false);
    let config = std::fs::read_to_string(s.config()).unwrap();
    std::fs::write(
        s.config(),
        format!(
            "models:\n  - {{name: m, use: 'langchain_openai:ChatOpenAI', model: m, supports_vision: true}}\n{config}"
        ),
    )
    .unwrap();
    let c = stdio_session(&s, Client::default(), &["--thread", "t-image"]).await;
    let path = "/mnt/user-data/workspace/i.png";
    let r = call(&c, "write_file", json!({"description": "d", "path": path, "content": "x"})).await;
    assert_eq!(text(&r), "OK");
    let png: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\0\x01";
    std::fs::write(s.data().join("threads/t-image/user-data/workspace/i.png"), png).unwrap();

    let r = call(&c, "view_image", json!({"image_path": path})).await;
    assert_eq!((r.is_error, text(&r).as_str()), (Some(false), "Successfully read image"), "{r:?}");
    let images: Vec<_> = r.content.iter().filter_map(|b| b.as_image()).collect();
    assert_eq!(images.len(), 1, "{r:?}");
    assert_eq!(images[0].mime_type, "image/png");
    assert_eq!(images[0].data, base64::engine::general_purpose::STANDARD.encode(png));
    // A failed view has no image.
    let r = call(&c, "view_image", json!({"image_path": "/mnt/user-data/workspace/missing.png"})).await;
    assert_eq!(r.is_error, Some(true));
    assert!(r.content.iter().all(|b| b.as_image().is_none()));
    c.cancel().await.unwrap();
}

/// Over a 2025 session a component's `list-roots` (WIT 0.4.0) goes to the session's client as
/// `roots/list`; without the grant the client is not asked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_component_reads_the_session_client_s_roots_under_its_grant() {
    let s = Setup::with_fixture_keys(&[
        ("test_input_required_result_list_roots", ", capabilities: {client: [roots]}"),
        ("test_input_required_result_elicitation", ""),
    ]);
    let c = stdio_session(&s, Client::default(), &[]).await;
    let r = call(&c, "test_input_required_result_list_roots", json!({})).await;
    assert_eq!(text(&r), "Roots: file:///home/test/project", "{r:?}");
    let r = call(&c, "test_input_required_result_elicitation", json!({})).await;
    assert!(text(&r).contains("elicitation is not granted"), "{r:?}");
    c.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdio_refuses_a_bad_thread_id() {
    let s = Setup::new(false, false);
    let o = s.command(&["--thread", "../x"]).stdin(Stdio::null()).output().unwrap();
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("invalid thread id '../x'"), "{o:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deferred_tools_appear_after_tool_search_with_list_changed() {
    let s = Setup::new(true, true);
    let client = Client::default();
    let c = stdio_session(&s, client.clone(), &[]).await;
    let before = names(&c).await;
    assert!(before.contains(&"tool_search".to_string()) && before.contains(&"hello".to_string()), "{before:?}");
    assert!(!before.iter().any(|n| n.starts_with("everything_")), "{before:?}");

    let r = call(&c, "tool_search", json!({"query": "select:everything_echo"})).await;
    assert_eq!(r.is_error, Some(false), "{r:?}");
    let schemas: Value = serde_json::from_str(&text(&r)).unwrap();
    assert_eq!(schemas[0]["name"], "everything_echo", "{schemas}");
    // The notification is sent before the call's response, so it has arrived by now or soon.
    for _ in 0..50 {
        if client.list_changed.load(Ordering::SeqCst) > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(client.list_changed.load(Ordering::SeqCst), 1);

    let after = names(&c).await;
    assert!(after.contains(&"everything_echo".to_string()), "{after:?}");
    let promoted: Vec<&String> = after.iter().filter(|n| n.starts_with("everything_")).collect();
    assert_eq!(promoted, ["everything_echo"], "only the selected tool");
    let r = call(&c, "everything_echo", json!({"message": "served"})).await;
    assert_eq!(r.is_error, Some(false), "{r:?}");
    assert!(text(&r).contains("served"), "{r:?}");

    // A search that promotes nothing new sends no notification. Its would-be notification goes
    // out before its response, so a later search that does promote is the barrier: once that
    // one's notification is counted (and a request has gone round), a spurious one is too.
    let r = call(&c, "tool_search", json!({"query": "select:no_such_tool"})).await;
    assert_eq!(r.is_error, Some(false), "{r:?}");
    let r = call(&c, "tool_search", json!({"query": "select:everything_get-sum"})).await;
    assert_eq!(r.is_error, Some(false), "{r:?}");
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while client.list_changed.load(Ordering::SeqCst) < 2 {
        assert!(std::time::Instant::now() < deadline, "the promoting search's notification never came");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(names(&c).await.contains(&"everything_get-sum".to_string()));
    assert_eq!(client.list_changed.load(Ordering::SeqCst), 2, "one notification per promoting search");
    c.cancel().await.unwrap();
}

#[test]
fn python_sdk_client_lists_and_calls_over_stdio() {
    let s = Setup::new(false, false);
    let python = peer("venv/bin/python");
    let script = r#"
import asyncio, json, os, sys
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

async def main():
    params = StdioServerParameters(command=sys.argv[1], args=["serve", "--config", sys.argv[2]],
                                   env={"TOOLHOST_HOME": sys.argv[3], "PATH": os.environ.get("PATH", "")})
    async with stdio_client(params) as (r, w):
        async with ClientSession(r, w) as session:
            await session.initialize()
            tools = await session.list_tools()
            hello = await session.call_tool("hello", {"name": "Python"})
            bad = await session.call_tool("hello", {"name": ""})
            print(json.dumps({
                "tools": [t.name for t in tools.tools],
                "schema": next(t.inputSchema for t in tools.tools if t.name == "hello"),
                "hello": [hello.content[0].text, hello.isError],
                "bad": [bad.content[0].text, bad.isError],
            }))

asyncio.run(main())
"#;
    let o = Command::new(python)
        .arg("-c")
        .arg(script)
        .arg(env!("CARGO_BIN_EXE_toolhost"))
        .arg(s.config())
        .arg(s.data())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out: Value = serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {o:?}"));
    let tools: Vec<&str> = out["tools"].as_array().unwrap().iter().map(|t| t.as_str().unwrap()).collect();
    assert!(tools.contains(&"hello") && tools.contains(&"read_file") && tools.contains(&"write_file"), "{out}");
    assert_eq!(out["schema"]["required"], json!(["name"]), "{out}");
    assert_eq!(out["hello"], json!(["Hello, Python.", false]));
    assert_eq!(out["bad"], json!(["Error: name must not be empty", true]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_serves_sessions_as_threads_behind_token_and_host_checks() {
    let s = Setup::new(false, false);
    let server = HttpServer::start(&s, &["--token", "s3cret-token"]);

    let a = http_session(&server.url(), Some("s3cret-token")).await.expect("session a");
    exercise_tools(&a, "http.txt").await;

    // A second session is a second thread: it does not see the first one's file.
    let b = http_session(&server.url(), Some("s3cret-token")).await.expect("session b");
    let r = call(&b, "read_file", json!({"description": "x", "path": "/mnt/user-data/workspace/http.txt"})).await;
    assert_eq!(r.is_error, Some(true), "{r:?}");
    let threads: Vec<String> = std::fs::read_dir(s.data().join("threads"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    let owner: Vec<&String> = threads
        .iter()
        .filter(|t| s.data().join("threads").join(t).join("user-data/workspace/http.txt").exists())
        .collect();
    assert_eq!(owner.len(), 1, "{threads:?}");
    assert!(owner[0].starts_with("mcp-") && owner[0].len() > 8, "{owner:?}");
    a.cancel().await.unwrap();
    b.cancel().await.unwrap();

    // The front door: no token or a wrong one is 401; a foreign Host or Origin is refused.
    assert!(http_session(&server.url(), None).await.is_err());
    assert!(http_session(&server.url(), Some("wrong")).await.is_err());
    let ok = ("Authorization", "Bearer s3cret-token");
    assert_eq!(server.raw_initialize(&[]), 401);
    assert_eq!(server.raw_initialize(&[("Authorization", "Bearer wrong-token")]), 401);
    assert_eq!(server.raw_initialize(&[ok]), 200);
    assert_eq!(server.raw_initialize(&[ok, ("Host", "evil.example.com")]), 403);
    assert_eq!(server.raw_initialize(&[ok, ("Origin", "http://evil.example.com")]), 403);
    assert_eq!(server.raw_initialize(&[ok, ("Origin", "http://localhost:3000")]), 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_allow_host_and_token_from_env() {
    let s = Setup::new(false, false);
    let mut cmd = s.command(&["--http", "127.0.0.1:0", "--allow-host", "tools.internal"]);
    cmd.env("TOOLHOST_SERVE_TOKEN", "from-env");
    let server = HttpServer::spawn(cmd);
    let ok = ("Authorization", "Bearer from-env");
    assert_eq!(server.raw_initialize(&[]), 401);
    assert_eq!(server.raw_initialize(&[ok, ("Host", "tools.internal")]), 200);
    assert_eq!(server.raw_initialize(&[ok, ("Host", "other.internal")]), 403);
    assert_eq!(server.raw_initialize(&[ok, ("Origin", "https://tools.internal")]), 200);
    let c = http_session(&server.url(), Some("from-env")).await.expect("session");
    let r = call(&c, "hello", json!({"name": "env"})).await;
    assert_eq!(text(&r), "Hello, env.");
    c.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_promotion_reaches_the_client_as_list_changed() {
    let s = Setup::new(true, true);
    let server = HttpServer::start(&s, &[]);
    let client = Client::default();
    let mut cfg = StreamableHttpClientTransportConfig::with_uri(server.url());
    cfg = cfg.reinit_on_expired_session(false);
    let c = client.clone().serve(StreamableHttpClientTransport::from_config(cfg)).await.expect("session");
    c.set_response_cache_config(rmcp::ClientCacheConfig::disabled()).await;
    assert!(!names(&c).await.iter().any(|n| n.starts_with("everything_")));
    let r = call(&c, "tool_search", json!({"query": "select:everything_echo"})).await;
    assert_eq!(r.is_error, Some(false), "{r:?}");
    for _ in 0..50 {
        if client.list_changed.load(Ordering::SeqCst) > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(client.list_changed.load(Ordering::SeqCst), 1);
    assert!(names(&c).await.contains(&"everything_echo".to_string()));
    c.cancel().await.unwrap();
}

/// `toolhost serve` with `args` must exit with an error (without serving) within a minute;
/// returns its stderr.
fn refused_start(s: &Setup, args: &[&str], env: &[(&str, &str)]) -> String {
    let mut cmd = s.command(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("serve {args:?} kept running: it should have refused to start");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut stderr = String::new();
    child.stderr.take().unwrap().read_to_string(&mut stderr).unwrap();
    assert!(!status.success(), "{args:?}: {stderr}");
    assert!(!stderr.contains("serving MCP"), "{args:?}: {stderr}");
    stderr
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_refuses_a_public_address_without_a_token_and_an_empty_token() {
    let s = Setup::new(false, false);
    // Refused before anything binds, so no public address is ever listened on here.
    for addr in ["0.0.0.0:0", "[::]:0"] {
        let err = refused_start(&s, &["--http", addr], &[]);
        for needle in [
            format!("refusing to serve on {addr} without a token"),
            "--token TOKEN".to_string(),
            "TOOLHOST_SERVE_TOKEN".to_string(),
            "--insecure-no-auth".to_string(),
        ] {
            assert!(err.contains(&needle), "{addr}: missing {needle:?} in {err}");
        }
    }
    // An empty token never means "no authentication", on any address.
    for (args, env) in [
        (vec!["--http", "127.0.0.1:0", "--token", ""], vec![]),
        (vec!["--http", "127.0.0.1:0"], vec![("TOOLHOST_SERVE_TOKEN", "")]),
        (vec!["--http", "0.0.0.0:0", "--insecure-no-auth", "--token", " "], vec![]),
    ] {
        let err = refused_start(&s, &args, &env);
        assert!(err.contains("the serve token is empty"), "{args:?} {env:?}: {err}");
    }
    // Positive controls: loopback needs no token; `--insecure-no-auth` is accepted (on
    // loopback here, as tests touch nothing else); a token works as before.
    for extra in [&[][..], &["--insecure-no-auth"][..], &["--token", "t0ken"][..]] {
        let server = HttpServer::start(&s, extra);
        let auth = if extra.contains(&"t0ken") { vec![("Authorization", "Bearer t0ken")] } else { vec![] };
        assert_eq!(server.raw_initialize(&auth), 200, "{extra:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_thread_ids_do_not_reveal_session_ids() {
    let s = Setup::new(false, false);
    let server = HttpServer::start(&s, &["--token", "tk"]);
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}});
    let (status, head, _) = server.post(&init, "tk", None);
    assert_eq!(status, 200, "{head}");
    let session = head
        .lines()
        .find_map(|l| {
            l.split_once(':').filter(|(k, _)| k.eq_ignore_ascii_case("mcp-session-id")).map(|(_, v)| v.trim())
        })
        .unwrap_or_else(|| panic!("no session id in {head}"))
        .to_string();
    let h = Some(session.as_str());
    let (status, ..) = server.post(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}), "tk", h);
    assert!(status == 202 || status == 200, "{status}");
    let write = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "write_file",
        "arguments": {"description": "d", "path": "/mnt/user-data/workspace/secret.txt", "content": "session secret"}}});
    let (status, _, body) = server.post(&write, "tk", h);
    assert!(status == 200 && body.contains("OK"), "{status}: {body}");

    let threads = s.data().join("threads");
    let owners: Vec<String> = std::fs::read_dir(&threads)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|t| threads.join(t).join("user-data/workspace/secret.txt").exists())
        .collect();
    assert_eq!(owners.len(), 1, "{owners:?}");
    let thread = &owners[0];
    assert!(
        thread.len() == 36 && thread.starts_with("mcp-") && thread[4..].chars().all(|c| c.is_ascii_hexdigit()),
        "{thread}"
    );
    assert!(!thread.contains(&session) && !session.contains(&thread[4..]), "thread {thread} vs session {session}");

    // Knowing the directory name gets a local user nowhere: neither spelling is a session.
    let read = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "read_file",
        "arguments": {"description": "d", "path": "/mnt/user-data/workspace/secret.txt"}}});
    for guess in [thread.as_str(), &thread[4..]] {
        let (status, _, body) = server.post(&read, "tk", Some(guess));
        assert!((400..500).contains(&status), "{guess}: {status} {body}");
        assert!(!body.contains("session secret"), "{guess}: {body}");
    }
    // Positive control: the real session reads its file.
    let (status, _, body) = server.post(&read, "tk", h);
    assert!(status == 200 && body.contains("session secret"), "{status}: {body}");
}
