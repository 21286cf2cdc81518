//! `toolhost serve` under hostile and stateless clients: malformed JSON-RPC on both transports
//! (each answered, the server serving on), the session cap, idle expiry and `DELETE`, threads a
//! request names (`_meta`, `Toolhost-Thread`) with the official Python SDK as DeerFlow uses it,
//! thread expiry, `--tools`/`--exclude`, host names for `--http`, a config whose extensions
//! list toolhost itself, the `Mcp-Param-*` headers of tools with `x-mcp-header` parameters, and
//! SSE polling (`--sse-poll-after`). Every hostile test ends with a normal call that works.

use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

#[path = "support/serve_harness.rs"]
mod harness;
#[path = "support/paths.rs"]
mod paths;
use harness::*;
use paths::peer;

/// A `tools/call` line.
fn tool_call(id: u64, name: &str, args: Value) -> Vec<u8> {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": name, "arguments": args}})
        .to_string()
        .into_bytes()
}

/// Requests that must each get an error reply: (raw message, id the reply carries, code).
fn hostile_requests() -> Vec<(Vec<u8>, Value, i64)> {
    let deep = format!(
        r#"{{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{{"name":"hello","arguments":{{"x":{}{}}}}}}}"#,
        "[".repeat(100_000),
        "]".repeat(100_000)
    );
    vec![
        (b"{not json".to_vec(), Value::Null, -32700),
        (br#"{"jsonrpc":"2.0","id":2,"method":"tools/call"}"#.to_vec(), json!(2), -32602),
        (br#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"arguments":{}}}"#.to_vec(), json!(3), -32602),
        (
            br#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"hello","arguments":"x"}}"#.to_vec(),
            json!(4),
            -32602,
        ),
        (deep.into_bytes(), json!(5), -32700),
        (
            br#"{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"hello","arguments":{"name":"\ud800"}}}"#
                .to_vec(),
            json!(6),
            -32700,
        ),
        (b"[]".to_vec(), Value::Null, -32600),
        (br#"{"jsonrpc":"2.0","id":7,"method":5}"#.to_vec(), json!(7), -32600),
        (br#"{"jsonrpc":"1.0","id":"eight","method":"ping"}"#.to_vec(), json!("eight"), -32600),
        (
            br#"{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"hello","arguments":{},"_meta":{"toolhost/thread":"../x"}}}"#
                .to_vec(),
            json!(9),
            -32602,
        ),
        (
            br#"{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{"name":"hello","arguments":{},"_meta":{"toolhost/thread":"mcp-0123"}}}"#
                .to_vec(),
            json!(10),
            -32602,
        ),
    ]
}

fn assert_error(reply: &Value, id: &Value, code: i64) {
    assert_eq!(&reply["id"], id, "{reply}");
    assert_eq!(reply["error"]["code"], code, "{reply}");
    assert!(reply["error"]["message"].as_str().is_some_and(|m| !m.is_empty() && m.len() < 1000), "{reply}");
}

#[test]
fn stdio_answers_every_malformed_message_and_keeps_serving() {
    let s = Setup::new(false, false);
    let mut srv = RawStdio::start(&s, &[]);
    for (raw, id, code) in hostile_requests() {
        srv.send(&raw);
        let reply = srv.next();
        assert_error(&reply, &id, code);
        if id == json!(9) {
            assert!(reply["error"]["message"].as_str().unwrap().contains("invalid thread id '../x'"), "{reply}");
        }
    }
    // A line longer than the 16 MiB cap is answered too, and the next line is read whole.
    let mut long = vec![b'x'; 17 << 20];
    long[0] = b'"';
    srv.send(&long);
    assert_error(&srv.next(), &Value::Null, -32600);
    // Notifications and stray responses, however broken, get no reply (no error storms).
    srv.send(br#"{"jsonrpc":"2.0","method":"tools/call","params":5}"#);
    srv.send(br#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}"#);
    assert!(srv.silent_for(Duration::from_millis(500)));

    // Error texts that quote a 5 MiB argument are capped.
    let huge = "y".repeat(5 << 20);
    srv.send(&tool_call(
        20,
        "read_file",
        json!({"description": "d", "path": format!("/mnt/user-data/workspace/{huge}")}),
    ));
    let r = srv.next();
    assert_eq!(
        (r["id"].clone(), r["result"]["isError"].clone()),
        (json!(20), json!(true)),
        "{}",
        &r.to_string()[..300]
    );
    let t = r["result"]["content"][0]["text"].as_str().unwrap();
    assert!(t.len() <= 20_100 && t.contains("middle truncated"), "{}: {}…{}", t.len(), &t[..200], &t[t.len() - 200..]);
    srv.send(&tool_call(21, &huge, json!({})));
    let t = srv.next()["result"]["content"][0]["text"].as_str().unwrap().to_string();
    assert!(
        t.starts_with("Error: yyy")
            && t.ends_with("present_files, ask_clarification, review_skill_package, list_uploaded_files]."),
        "{}",
        &t[t.len() - 200..]
    );
    assert!(
        t[t.len() - 300..].contains(" is not a valid tool, try one of [hello, read_file, write_file, "),
        "{}",
        &t[t.len() - 300..]
    );
    assert!(t.len() <= 20_100 && t.contains("middle truncated"), "{}", t.len());

    srv.send(&tool_call(30, "hello", json!({"name": "still here"})));
    let r = srv.next();
    assert_eq!(r["id"], 30);
    assert_eq!(r["result"]["content"][0]["text"], "Hello, still here.", "{r}");
}

#[test]
fn http_answers_every_malformed_message_and_keeps_serving() {
    let s = Setup::new(false, false);
    let server = HttpServer::start(&s, &[]);
    let session = server.raw_session(&[]);
    let h = [("Mcp-Session-Id", session.as_str())];
    for (raw, id, code) in hostile_requests() {
        let (status, head, body) = server.raw("POST", &raw, &h);
        let want = if code == -32602 { [200] } else { [400] };
        assert!(want.contains(&status), "{}: {status} {head}", String::from_utf8_lossy(&raw[..raw.len().min(80)]));
        let msgs = messages(&body);
        assert_eq!(msgs.len(), 1, "{body}");
        assert_error(&msgs[0], &id, code);
    }
    // A notification that is not valid is refused with 400 and an error without an id.
    let (status, _, body) = server.raw("POST", br#"{"jsonrpc":"2.0","method":"tools/call","params":5}"#, &h);
    assert_eq!(status, 400);
    assert_eq!(messages(&body)[0]["id"], Value::Null);
    // A bad Toolhost-Thread header is -32602 naming the id.
    let (status, _, body) =
        server.raw("POST", &tool_call(11, "hello", json!({"name": "h"})), &[h[0], ("Toolhost-Thread", "a/b")]);
    assert_eq!(status, 200);
    let reply = messages(&body).pop().unwrap();
    assert_error(&reply, &json!(11), -32602);
    assert!(reply["error"]["message"].as_str().unwrap().contains("'a/b'"), "{reply}");

    let (status, _, body) = server.raw("POST", &tool_call(12, "hello", json!({"name": "http"})), &h);
    assert_eq!(status, 200, "{body}");
    assert_eq!(messages(&body).pop().unwrap()["result"]["content"][0]["text"], "Hello, http.", "{body}");
}

#[test]
fn sessions_are_capped_expire_when_idle_and_end_with_delete() {
    let s = Setup::new(false, false);
    // Both sessions come from 127.0.0.1: the per-client share must not be what refuses here.
    let server = HttpServer::start(
        &s,
        &["--max-sessions", "2", "--max-sessions-per-client", "2", "--session-idle-timeout", "3"],
    );
    // Wait for the host: a cold start compiles the components in the background, and rmcp
    // counts a session whose only request waits longer than the idle timeout as idle.
    let started = Instant::now();
    let a = loop {
        let a = server.raw_session(&[]);
        let (_, _, body) = server.raw("POST", &tool_call(1, "hello", json!({"name": "a"})), &[("Mcp-Session-Id", &a)]);
        if body.contains("Hello, a.") {
            break a;
        }
        assert!(started.elapsed() < Duration::from_secs(120), "the host never opened: {body}");
        // Let this try's session expire before the next one opens: two of them would fill the
        // cap of two (a loaded machine takes several tries).
        std::thread::sleep(Duration::from_millis(3500));
    };
    let b = server.raw_session(&[]);
    let init = json!({"jsonrpc": "2.0", "id": "init-9", "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}})
    .to_string();
    let (status, head, body) = server.raw("POST", init.as_bytes(), &[]);
    assert_eq!(status, 503, "{head}");
    assert_eq!(messages(&body)[0]["error"]["code"], -32000, "{body}");
    // The request was read: the refusal answers its id.
    assert_eq!(messages(&body)[0]["id"], "init-9", "{body}");
    assert!(body.contains("max_sessions") && header(&head, "retry-after").is_some(), "{head}{body}");

    // DELETE: 200 for a session that is there, 404 for one that is not (or no longer).
    assert_eq!(server.raw("DELETE", b"", &[("Mcp-Session-Id", &a)]).0, 200);
    assert_eq!(server.raw("DELETE", b"", &[("Mcp-Session-Id", &a)]).0, 404);
    assert_eq!(server.raw("DELETE", b"", &[("Mcp-Session-Id", "no-such-session")]).0, 404);
    let (status, _, body) = server.raw("POST", &tool_call(2, "hello", json!({"name": "x"})), &[("Mcp-Session-Id", &a)]);
    assert_eq!(status, 404, "{body}");
    // The freed slot takes a new session.
    let c = server.raw_session(&[]);

    // Sessions idle for 3 s are closed.
    std::thread::sleep(Duration::from_millis(5000));
    for id in [&b, &c] {
        let (status, ..) = server.raw("POST", &tool_call(3, "hello", json!({"name": "x"})), &[("Mcp-Session-Id", id)]);
        assert_eq!(status, 404, "an idle session should have been closed");
    }
    // Room for two again.
    let _e = server.raw_session(&[]);
    let d = server.raw_session(&[]);
    let (status, _, body) = server.raw("POST", &tool_call(5, "hello", json!({"name": "d"})), &[("Mcp-Session-Id", &d)]);
    assert_eq!(status, 200, "{body}");
    assert_eq!(messages(&body).pop().unwrap_or_default()["result"]["content"][0]["text"], "Hello, d.", "{body}");
}

/// Run a Python script with the official SDK; its stdout is JSON.
fn python(script: &str, args: &[&str]) -> Value {
    let o = Command::new(peer("venv/bin/python")).arg("-c").arg(script).args(args).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {o:?}"))
}

fn thread_dirs(s: &Setup) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(s.data().join("threads"))
        .map(|d| d.map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect())
        .unwrap_or_default();
    v.sort();
    v
}

/// DeerFlow over HTTP: a new streamable-HTTP session per call, naming its thread.
const PY_HTTP_PER_CALL: &str = r#"
import asyncio, json, logging, sys, warnings
from mcp import ClientSession
from mcp.client.streamable_http import streamablehttp_client

warnings.simplefilter("ignore", DeprecationWarning)
logged = []
class Keep(logging.Handler):
    def emit(self, record):
        logged.append(record.getMessage())
logging.getLogger().addHandler(Keep(level=logging.WARNING))

async def one_call(url, thread, how, name, args):
    headers = {"Toolhost-Thread": thread} if how == "header" else {}
    meta = {"toolhost/thread": thread} if how == "meta" else None
    async with streamablehttp_client(url, headers=headers) as (r, w, _):
        async with ClientSession(r, w) as s:
            await s.initialize()
            res = await s.call_tool(name, args, meta=meta)
            return [res.content[0].text, res.isError]

async def main():
    url = sys.argv[1]
    path = "/mnt/user-data/workspace/notes.txt"
    out = {}
    out["write_a"] = await one_call(url, "thread-a", "meta", "write_file", {"description": "d", "path": path, "content": "of thread a"})
    out["read_a_meta"] = await one_call(url, "thread-a", "meta", "read_file", {"description": "d", "path": path})
    out["read_a_header"] = await one_call(url, "thread-a", "header", "read_file", {"description": "d", "path": path})
    out["read_b"] = await one_call(url, "thread-b", "header", "read_file", {"description": "d", "path": path})
    out["read_none"] = await one_call(url, "", "none", "read_file", {"description": "d", "path": path})
    out["logged"] = logged
    print(json.dumps(out))

asyncio.run(main())
"#;

#[test]
fn a_client_with_a_session_per_call_keeps_its_files_in_the_thread_it_names() {
    let s = Setup::new(false, false);
    let server = HttpServer::start(&s, &[]);
    let out = python(PY_HTTP_PER_CALL, &[&server.url()]);
    assert_eq!(out["write_a"], json!(["OK", false]), "{out}");
    for read in ["read_a_meta", "read_a_header"] {
        assert_eq!(out[read][1], false, "{out}");
        assert!(out[read][0].as_str().unwrap().contains("of thread a"), "{out}");
    }
    // Every session ended with a DELETE the SDK took for a success.
    assert_eq!(out["logged"], json!([]), "{out}");
    for other in ["read_b", "read_none"] {
        assert_eq!(out[other][1], true, "{other} must not see thread a's file: {out}");
    }
    assert_eq!(
        std::fs::read_to_string(s.data().join("threads/thread-a/user-data/workspace/notes.txt")).unwrap(),
        "of thread a"
    );
    // Sessions that named their thread leave no thread of their own behind.
    let dirs = thread_dirs(&s);
    assert_eq!(dirs.iter().filter(|d| d.starts_with("mcp-")).count(), 1, "only the unnamed call's: {dirs:?}");
    assert!(dirs.contains(&"thread-b".to_string()), "{dirs:?}");
}

/// DeerFlow over stdio: one process per thread.
const PY_STDIO: &str = r#"
import asyncio, json, os, sys
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

async def run(extra, name, args):
    params = StdioServerParameters(command=sys.argv[1], args=["serve", "--config", sys.argv[2]] + extra,
                                   env={"TOOLHOST_HOME": sys.argv[3], "PATH": os.environ.get("PATH", "")})
    async with stdio_client(params) as (r, w):
        async with ClientSession(r, w) as s:
            await s.initialize()
            res = await s.call_tool(name, args)
            return [res.content[0].text, res.isError]

async def main():
    path = "/mnt/user-data/workspace/p.txt"
    write = {"description": "d", "path": path, "content": "process one"}
    read = {"description": "d", "path": path}
    out = {}
    out["write_fresh"] = await run([], "write_file", write)
    out["read_fresh"] = await run([], "read_file", read)
    out["write_named"] = await run(["--thread", "deerflow-t1"], "write_file", write)
    out["read_named"] = await run(["--thread", "deerflow-t1"], "read_file", read)
    out["read_other"] = await run(["--thread", "deerflow-t2"], "read_file", read)
    print(json.dumps(out))

asyncio.run(main())
"#;

#[test]
fn each_stdio_process_has_its_own_thread_unless_one_is_named() {
    let s = Setup::new(false, false);
    let data = s.data();
    let out = python(PY_STDIO, &[env!("CARGO_BIN_EXE_toolhost"), s.config().to_str().unwrap(), data.to_str().unwrap()]);
    assert_eq!(out["write_fresh"], json!(["OK", false]), "{out}");
    assert_eq!(out["read_fresh"][1], true, "a second process must not see the first one's file: {out}");
    assert_eq!(out["write_named"], json!(["OK", false]), "{out}");
    assert_eq!(out["read_named"][1], false, "{out}");
    assert!(out["read_named"][0].as_str().unwrap().contains("process one"), "{out}");
    assert_eq!(out["read_other"][1], true, "{out}");
    let dirs = thread_dirs(&s);
    assert_eq!(dirs.iter().filter(|d| d.starts_with("stdio-")).count(), 2, "{dirs:?}");
}

#[test]
fn threads_unused_for_their_ttl_are_removed_and_others_kept() {
    let s = Setup::new(false, false);
    // A thread the CLI used is not the server's to remove.
    let cli = Command::new(env!("CARGO_BIN_EXE_toolhost"))
        .args(["call", "write_file", r#"{"description":"d","path":"/mnt/user-data/workspace/k.txt","content":"kept"}"#])
        .args(["--thread", "cli-thread", "--config"])
        .arg(s.config())
        .env("TOOLHOST_HOME", s.data())
        .output()
        .unwrap();
    assert!(cli.status.success(), "{cli:?}");
    let server = HttpServer::start(&s, &["--thread-ttl", "2"]);
    let session = server.raw_session(&[]);
    let h = [("Mcp-Session-Id", session.as_str()), ("Toolhost-Thread", "short-lived")];
    let write =
        tool_call(2, "write_file", json!({"description": "d", "path": "/mnt/user-data/workspace/x", "content": "x"}));
    let (status, _, body) = server.raw("POST", &write, &h);
    assert!(status == 200 && body.contains("OK"), "{body}");
    assert!(s.data().join("threads/short-lived/user-data/workspace/x").exists());
    let started = Instant::now();
    while s.data().join("threads/short-lived").exists() {
        assert!(started.elapsed() < Duration::from_secs(20), "the thread never expired: {:?}", thread_dirs(&s));
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(started.elapsed() >= Duration::from_secs(1), "removed before its TTL");
    assert!(s.data().join("threads/cli-thread/user-data/workspace/k.txt").exists(), "{:?}", thread_dirs(&s));
    // Renamed first, then removed.
    while thread_dirs(&s).iter().any(|d| d.starts_with('.')) {
        assert!(started.elapsed() < Duration::from_secs(30), "{:?}", thread_dirs(&s));
        std::thread::sleep(Duration::from_millis(100));
    }
    // The thread can be used again: it starts empty.
    let read = tool_call(3, "read_file", json!({"description": "d", "path": "/mnt/user-data/workspace/x"}));
    let (_, _, body) = server.raw("POST", &read, &h);
    assert_eq!(messages(&body).pop().unwrap()["result"]["isError"], true, "{body}");
    let (_, _, body) = server.raw("POST", &write, &h);
    assert!(body.contains("OK"), "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tools_and_exclude_choose_what_is_served() {
    let s = Setup::new(false, false);
    let c = stdio_session(&s, Client::default(), &["--exclude", "write_file,present_files"]).await;
    let listed = names(&c).await;
    assert!(listed.contains(&"hello".to_string()) && listed.contains(&"read_file".to_string()), "{listed:?}");
    assert!(!listed.contains(&"write_file".to_string()) && !listed.contains(&"present_files".to_string()));
    let r =
        call(&c, "write_file", json!({"description": "d", "path": "/mnt/user-data/workspace/a", "content": "a"})).await;
    assert_eq!(r.is_error, Some(true));
    assert_eq!(text(&r), format!("Error: write_file is not a valid tool, try one of [{}].", listed.join(", ")));
    c.cancel().await.unwrap();

    let c = stdio_session(&s, Client::default(), &["--tools", "hello"]).await;
    assert_eq!(names(&c).await, ["hello"]);
    assert_eq!(text(&call(&c, "hello", json!({"name": "only"})).await), "Hello, only.");
    c.cancel().await.unwrap();
}

#[test]
fn http_takes_a_host_name_and_still_refuses_a_public_bind_without_a_token() {
    let s = Setup::new(false, false);
    let mut cmd = s.command(&["--http", "localhost:0"]);
    cmd.env_remove("TOOLHOST_SERVE_TOKEN");
    let server = HttpServer::spawn(cmd);
    assert!(server.addr.starts_with("127.0.0.1:") || server.addr.starts_with("[::1]:"), "{}", server.addr);
    let session = server.raw_session(&[]);
    let (_, _, body) =
        server.raw("POST", &tool_call(2, "hello", json!({"name": "n"})), &[("Mcp-Session-Id", &session)]);
    assert_eq!(messages(&body).pop().unwrap()["result"]["content"][0]["text"], "Hello, n.");
    for (addr, needle) in [
        ("0.0.0.0:0", "refusing to serve on 0.0.0.0:0 without a token"),
        ("no-such-host.invalid:80", "invalid --http address 'no-such-host.invalid:80'"),
        ("localhost", "invalid --http address 'localhost'"),
    ] {
        let o = s.command(&["--http", addr]).stdin(std::process::Stdio::null()).output().unwrap();
        assert!(!o.status.success(), "{addr}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(needle), "{addr}: {err}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_config_listing_toolhost_itself_starts_no_second_toolhost() {
    let s = Setup::new(false, false);
    let bin = env!("CARGO_BIN_EXE_toolhost");
    let config = s.config();
    // The wrapped toolhost runs confined: it sees its own directory (its log and its config) and
    // the binary's, and keeps its data in its own working directory, not in ours.
    let wrap = s.dir.path().join("wrap");
    std::fs::create_dir(&wrap).unwrap();
    let log = wrap.join("wrapper.log");
    std::fs::copy(&config, wrap.join("config.yaml")).unwrap();
    let bin_dir = std::path::Path::new(bin).parent().unwrap();
    let mut yaml = std::fs::read_to_string(&config).unwrap();
    yaml.push_str(&format!(
        "toolhost:\n  mcp_servers:\n    wrapped:\n      filesystem: {{read_only: ['{}'], read_write: ['{}']}}\n",
        bin_dir.display(),
        wrap.display()
    ));
    std::fs::write(&config, yaml).unwrap();
    let wrapper = format!(
        "echo started >> '{}'; exec '{bin}' serve --config '{}'",
        log.display(),
        wrap.join("config.yaml").display()
    );
    std::fs::write(
        s.dir.path().join("extensions_config.json"),
        serde_json::to_vec_pretty(&json!({"mcpServers": {
            "itself": {"type": "stdio", "command": bin, "args": ["serve", "--config", config]},
            "wrapped": {"type": "stdio", "command": "sh", "args": ["-c", wrapper]},
        }}))
        .unwrap(),
    )
    .unwrap();
    let stderr = s.dir.path().join("stderr.log");
    let (transport, _) = rmcp::transport::TokioChildProcess::builder(tokio::process::Command::from(s.command(&[])))
        .stderr(std::process::Stdio::from(std::fs::File::create(&stderr).unwrap()))
        .spawn()
        .unwrap();
    let c = rmcp::ServiceExt::serve(Client::default(), transport).await.expect("initialize");
    let listed = names(&c).await;
    assert!(!listed.iter().any(|n| n.starts_with("itself")), "{listed:?}");
    // Through a wrapper the binary check cannot see it; the child knows it was started by a
    // toolhost and starts no MCP servers, so it stops there.
    assert!(
        listed.contains(&"wrapped_hello".to_string()),
        "{listed:?}\n{}",
        std::fs::read_to_string(&stderr).unwrap_or_default()
    );
    assert!(!listed.iter().any(|n| n.starts_with("wrapped_wrapped") || n.starts_with("wrapped_itself")), "{listed:?}");
    assert_eq!(text(&call(&c, "hello", json!({"name": "top"})).await), "Hello, top.");
    // No wait needed: the wrapped toolhost listed its tools only after its own discovery, so a
    // second wrapper it had started would have written its line before `wrapped_hello` showed.
    assert_eq!(std::fs::read_to_string(&log).unwrap(), "started\n", "the wrapper ran more than once");
    c.cancel().await.unwrap();
    let err = std::fs::read_to_string(&stderr).unwrap();
    assert!(err.contains("MCP server 'itself' skipped: its command is this toolhost"), "{err}");
}

/// A client's `notifications/cancelled` stops a component call that computes (a guest in an
/// endless loop with a two-minute timeout, running on the request's own thread): the server
/// stops burning CPU within moments, sends no result for the cancelled request, and answers the
/// next call normally.
#[test]
fn a_cancelled_component_call_stops_computing() {
    let s = Setup::with_spin();
    let mut raw = RawStdio::start(&s, &[]);
    let pid = raw.child.id();
    // The component compiled (not part of what is measured).
    raw.send(&tool_call(9, "ok", json!({})));
    assert_eq!(raw.next()["result"]["content"][0]["text"], "ok");
    raw.send(&tool_call(1, "spin", json!({})));
    // Spinning: the server computes, however slowly a loaded machine lets it.
    wait_for_cpu(pid, cpu_seconds(pid), 0.3, Duration::from_secs(60));
    raw.send(
        json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1, "reason": "user"}})
            .to_string()
            .as_bytes(),
    );
    let idle = settled_cpu(pid, Duration::from_secs(10));
    assert!(idle < 0.1, "a cancelled guest must stop computing: {idle:.2} s of CPU in 2 s");
    raw.send(&tool_call(2, "hello", json!({"name": "after"})));
    let next = raw.next();
    assert_eq!(next["id"], 2, "no result for the cancelled call: {next}");
    assert_eq!(next["result"]["isError"], false, "{next}");
}

/// SEP-2243 (protocol 2026-07-28): a tool whose schema marks `region` with
/// `"x-mcp-header": "Region"` gets the value in the `Mcp-Param-Region` header too, and a call
/// whose header is missing, different from the body or not valid Base64 is refused with HTTP 400
/// and `-32020` before the tool runs. Clients of earlier revisions send no such headers and are
/// not asked for them.
#[test]
fn param_headers_must_match_the_body_for_tools_that_declare_them() {
    let s = Setup::with_fixture(&["test_param_header"]);
    let server = HttpServer::start(&s, &[]);
    let version = "2026-07-28";
    let call = |id: u64, name: &str, args: Value, param: Option<&str>| {
        let meta = json!({
            "io.modelcontextprotocol/protocolVersion": version,
            "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "0"},
            "io.modelcontextprotocol/clientCapabilities": {}
        });
        let body = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": name, "arguments": args, "_meta": meta}});
        let mut headers = vec![("MCP-Protocol-Version", version), ("Mcp-Method", "tools/call"), ("Mcp-Name", name)];
        if let Some(v) = param {
            headers.push(("Mcp-Param-Region", v));
        }
        let (status, head, body) = server.raw("POST", body.to_string().as_bytes(), &headers);
        let reply = messages(&body).pop().unwrap_or_else(|| panic!("no message: {head}\n{body}"));
        (status, reply)
    };
    let region = json!({"region": "eu-west"});
    let listed = call(1, "test_param_header", region.clone(), Some("eu-west"));
    assert_eq!(listed.0, 200, "{}", listed.1);
    assert_eq!(listed.1["result"]["content"][0]["text"], "region: eu-west", "{}", listed.1);
    // Base64-wrapped (`=?base64?...?=`, for values a header cannot carry as they are).
    let (status, reply) = call(2, "test_param_header", region.clone(), Some("=?base64?ZXUtd2VzdA==?="));
    assert_eq!((status, &reply["result"]["content"][0]["text"]), (200, &json!("region: eu-west")), "{reply}");

    for (id, header, why) in [
        (3, None, "missing Mcp-Param-Region header"),
        (4, Some("us-east"), "does not match body value"),
        (5, Some("=?base64?ZXUtd2VzdA?="), "not valid Base64"),
        (6, Some("=?base64?ZXUt!!d2VzdA==?="), "not valid Base64"),
    ] {
        let (status, reply) = call(id, "test_param_header", region.clone(), header);
        assert_eq!(status, 400, "{header:?}: {reply}");
        assert_error(&reply, &json!(id), -32020);
        let message = reply["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains(why), "{header:?}: {message}");
    }
    // Without the full wrapper a value is literal: this header says "=?base64?ZXUtd2VzdA==",
    // which is not what the body says.
    let (status, reply) = call(7, "test_param_header", region.clone(), Some("=?base64?ZXUtd2VzdA=="));
    assert_eq!(status, 400, "{reply}");
    let literal = json!({"region": "=?base64?ZXUtd2VzdA=="});
    let (status, reply) = call(8, "test_param_header", literal, Some("=?base64?ZXUtd2VzdA=="));
    assert_eq!((status, &reply["result"]["content"][0]["text"]), (200, &json!("region: =?base64?ZXUtd2VzdA==")));

    // A 2025-11-25 session sends no Mcp-Param headers and needs none.
    let session = server.raw_session(&[]);
    let h = [("Mcp-Session-Id", session.as_str())];
    let (status, _, body) = server.raw("POST", &tool_call(9, "test_param_header", json!({"region": "ap"})), &h);
    assert_eq!(status, 200, "{body}");
    assert_eq!(messages(&body).pop().unwrap()["result"]["content"][0]["text"], "region: ap", "{body}");
    // A tool without header parameters is called as before, in the same revision.
    let (status, reply) = call(10, "hello", json!({"name": "after"}), None);
    assert_eq!((status, &reply["result"]["content"][0]["text"]), (200, &json!("Hello, after.")), "{reply}");
}

/// `--sse-poll-after 1` (SEP-1699): a call that runs 1.5 s has its POST stream ended after the
/// priming event and an event with a resumption id and `retry`, without the result; a GET with
/// that id as `Last-Event-ID`, in the same session, gets the result. Another session cannot read
/// it, and a short call is answered on its own stream as before.
#[test]
fn a_long_call_s_stream_is_ended_and_its_result_polled_for() {
    let s = Setup::with_fixture(&["test_simple_text", "test_reconnection"]);
    let server = HttpServer::start(&s, &["--sse-poll-after", "1"]);
    let session = server.raw_session(&[]);
    let h = [("Mcp-Session-Id", session.as_str())];
    // The component compiled (a cold start is not what is timed).
    let (status, _, body) = server.raw("POST", &tool_call(9, "test_simple_text", json!({})), &h);
    assert_eq!((status, messages(&body).len()), (200, 1), "{body}");
    let started = Instant::now();
    let (status, head, body) = server.raw("POST", &tool_call(1, "test_reconnection", json!({})), &h);
    let ended = started.elapsed();
    assert_eq!(status, 200, "{head}\n{body}");
    assert!(header(&head, "content-type").is_some_and(|t| t.starts_with("text/event-stream")), "{head}");
    assert!(messages(&body).is_empty(), "no result on the ended stream: {body}");
    assert!(ended >= Duration::from_millis(900) && ended < Duration::from_millis(1450), "ended after {ended:?}");
    let ids: Vec<&str> = body.lines().filter_map(|l| l.strip_prefix("id: ")).collect();
    assert_eq!(ids.len(), 2, "the priming event, then the polling one: {body}");
    assert!(body.contains("retry: 1000"), "{body}");
    let resume_at = ids[1];

    let other = server.raw_session(&[]);
    let (status, _, body) = server.raw("GET", b"", &[("Mcp-Session-Id", other.as_str()), ("Last-Event-ID", resume_at)]);
    assert_eq!(status, 200);
    assert!(messages(&body).is_empty(), "another session's poll gets nothing: {body}");

    let (status, head, body) = server.raw("GET", b"", &[h[0], ("Last-Event-ID", resume_at)]);
    assert_eq!(status, 200, "{head}\n{body}");
    let reply = messages(&body).pop().unwrap_or_else(|| panic!("no result on the poll: {body}"));
    assert_eq!(reply["id"], 1, "{reply}");
    assert_eq!(
        reply["result"]["content"][0]["text"],
        "Reconnection test completed: the result came after the stream was ended.",
        "{reply}"
    );
    // A poll for an id that is not there is an empty stream (as rmcp answers an unknown one).
    let (status, _, body) = server.raw("GET", b"", &[h[0], ("Last-Event-ID", "toolhost-poll-00.0")]);
    assert_eq!((status, body.trim()), (200, ""));

    let (status, _, body) = server.raw("POST", &tool_call(2, "hello", json!({"name": "after"})), &h);
    assert_eq!(status, 200, "{body}");
    assert_eq!(messages(&body).pop().unwrap()["result"]["content"][0]["text"], "Hello, after.", "{body}");
}

/// SEP-2322 (protocol 2026-07-28, which lets a server send no requests): a component's questions
/// come back to the client as an `InputRequiredResult`, and the call runs again with the answers.
/// The answers of earlier rounds ride in a sealed `requestState` bound to the thread, the tool
/// and the arguments: altered, moved to another thread or call, it is refused and the call does
/// not complete. Answers are used only for the question they were given for. A tool without the
/// grant asks nobody; a 2025 session is asked with session requests as before.
#[test]
fn a_2026_client_is_asked_in_rounds_and_the_state_cannot_be_forged() {
    let s = Setup::with_fixture_keys(&[
        ("test_input_required_result_multi_round", ", capabilities: {client: [elicitation]}"),
        ("test_input_required_result_capabilities", ", capabilities: {client: [elicitation, sampling]}"),
        ("test_input_required_result_elicitation", ""),
        ("test_input_required_result_list_roots", ", capabilities: {client: [roots]}"),
    ]);
    let server = HttpServer::start(&s, &[]);
    let version = "2026-07-28";
    let call = |id: u64, name: &str, thread: &str, extra: Value, caps: Value| {
        let meta = json!({
            "io.modelcontextprotocol/protocolVersion": version,
            "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "0"},
            "io.modelcontextprotocol/clientCapabilities": caps,
            "toolhost/thread": thread,
        });
        let mut params = json!({"name": name, "arguments": {}, "_meta": meta});
        params.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        let body = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params});
        let headers = [("MCP-Protocol-Version", version), ("Mcp-Method", "tools/call"), ("Mcp-Name", name)];
        let (status, head, body) = server.raw("POST", body.to_string().as_bytes(), &headers);
        let reply = messages(&body).pop().unwrap_or_else(|| panic!("no message: {head}\n{body}"));
        // No request of the server's own ever goes out on the call's stream.
        assert!(messages(&body).iter().all(|m| m.get("method").is_none()), "{body}");
        (status, reply)
    };
    let both = json!({"elicitation": {}, "sampling": {}});
    let tool = "test_input_required_result_multi_round";
    let only_request = |reply: &Value| -> (String, Value, String) {
        let r = &reply["result"];
        assert_eq!(r["resultType"], "input_required", "{reply}");
        let requests = r["inputRequests"].as_object().unwrap_or_else(|| panic!("{reply}"));
        assert_eq!(requests.len(), 1, "{reply}");
        let (key, request) = requests.iter().next().unwrap();
        (key.clone(), request.clone(), r["requestState"].as_str().unwrap().to_string())
    };

    // Round 1: the first question.
    let (status, reply) = call(1, tool, "mrtr-a", json!({}), both.clone());
    assert_eq!(status, 200, "{reply}");
    let (key1, request, state1) = only_request(&reply);
    assert!(key1.starts_with("elicitation-"), "{key1}");
    assert_eq!(request["method"], "elicitation/create");
    assert_eq!(request["params"]["message"], "Step 1: What is your name?");
    assert!(reply["result"].get("content").is_none(), "a round's own result is dropped: {reply}");
    let name = json!({"action": "accept", "content": {"name": "Alice"}});

    // Round 2: the answer and the state; the second question, and a new state.
    let (_, reply) =
        call(2, tool, "mrtr-a", json!({"inputResponses": {&key1: name}, "requestState": state1}), both.clone());
    let (key2, request, state2) = only_request(&reply);
    assert_eq!(request["params"]["message"], "Step 2: What is your favorite color?");
    assert_ne!((&key1, &state1), (&key2, &state2));
    let color = json!({"action": "accept", "content": {"color": "blue"}});
    let done = "Hello, Alice! Your favorite color is blue.";

    // The state altered, or brought to another thread or tool: refused, nothing completes.
    let mut flipped = state2.clone().into_bytes();
    let mid = flipped.len() / 2;
    flipped[mid] = if flipped[mid] == b'A' { b'B' } else { b'A' };
    let flipped = String::from_utf8(flipped).unwrap();
    for (id, thread, state, name) in [
        (3, "mrtr-a", flipped.as_str(), tool),
        (4, "mrtr-a", &format!("{state2}-TAMPERED"), tool),
        (5, "mrtr-b", state2.as_str(), tool),
        (6, "mrtr-a", state2.as_str(), "test_input_required_result_capabilities"),
    ] {
        let (status, reply) =
            call(id, name, thread, json!({"inputResponses": {&key2: color}, "requestState": state}), both.clone());
        assert_error(&reply, &json!(id), -32602);
        assert!(status == 200 || status == 400, "{status}");
        let message = reply["error"]["message"].as_str().unwrap();
        assert!(message.starts_with("requestState is refused"), "{message}");
        assert!(!reply.to_string().contains("Alice"), "{reply}");
    }
    // The second answer without the state: the first question has no answer, so it is asked again.
    let (_, reply) = call(7, tool, "mrtr-a", json!({"inputResponses": {&key2: color}}), both.clone());
    assert_eq!(only_request(&reply).0, key1);
    // An answer that is not an object is a protocol error naming it.
    let (_, reply) = call(8, tool, "mrtr-a", json!({"inputResponses": {&key1: 12345}}), both.clone());
    assert_error(&reply, &json!(8), -32602);
    assert!(reply["error"]["message"].as_str().unwrap().contains("is a number"), "{reply}");

    // Round 3: done.
    let (_, reply) =
        call(9, tool, "mrtr-a", json!({"inputResponses": {&key2: color}, "requestState": state2}), both.clone());
    assert_eq!(reply["result"]["content"][0]["text"], done, "{reply}");
    assert_ne!(reply["result"]["resultType"], "input_required");

    // Only what the client declared is asked: no elicitation here, sampling goes out.
    let (_, reply) = call(10, "test_input_required_result_capabilities", "mrtr-a", json!({}), json!({"sampling": {}}));
    let (key, request, _) = only_request(&reply);
    assert!(key.starts_with("sampling-") && request["method"] == "sampling/createMessage", "{reply}");
    // Without the grant nobody is asked: the tool reads the refusal and the call completes.
    let (_, reply) = call(11, "test_input_required_result_elicitation", "mrtr-a", json!({}), both.clone());
    assert!(reply["result"].get("inputRequests").is_none(), "{reply}");
    let text = reply["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("elicitation is not granted"), "{text}");

    // A 2025 session is asked on the session, as before (this raw client offers no elicitation).
    let session = server.raw_session(&[]);
    let (_, _, body) = server.raw("POST", &tool_call(12, tool, json!({})), &[("Mcp-Session-Id", session.as_str())]);
    let reply = messages(&body).pop().unwrap();
    assert!(reply["result"].get("inputRequests").is_none(), "{reply}");
    assert!(reply["result"]["content"][0]["text"].as_str().unwrap().contains("does not offer elicitation"), "{reply}");

    // A component's own key (WIT 0.4.0) is the key the client sees, and roots are asked too.
    let roots_tool = "test_input_required_result_list_roots";
    let roots_caps = json!({"roots": {}});
    let (_, reply) = call(20, roots_tool, "mrtr-a", json!({}), roots_caps.clone());
    let (key, request, state) = only_request(&reply);
    assert_eq!((key.as_str(), request["method"].as_str()), ("client_roots", Some("roots/list")), "{reply}");
    let roots = json!({"roots": [{"uri": "file:///home/ada/project", "name": "project"}]});
    let answered = json!({"inputResponses": {"client_roots": roots}, "requestState": state});
    let (_, reply) = call(21, roots_tool, "mrtr-a", answered, roots_caps);
    assert_eq!(reply["result"]["content"][0]["text"], "Roots: file:///home/ada/project", "{reply}");
    // A client that offers no roots is not asked.
    let (_, reply) = call(22, roots_tool, "mrtr-a", json!({}), both.clone());
    assert!(reply["result"]["content"][0]["text"].as_str().unwrap().contains("does not offer roots"), "{reply}");

    // ask_clarification is asked the same way; a client that cannot elicit gets DeerFlow's
    // question with the pause mark, as over a session.
    let question = json!({"arguments": {"question": "Which colour?", "clarification_type": "missing_info"}});
    let (_, reply) = call(14, "ask_clarification", "mrtr-a", question.clone(), both.clone());
    let (key, request, state) = only_request(&reply);
    assert!(request["params"]["message"].as_str().unwrap().contains("Which colour?"), "{request}");
    let mut answered = question.clone();
    answered["inputResponses"] = json!({key: {"action": "accept", "content": {"answer": "teal"}}});
    answered["requestState"] = json!(state);
    let (_, reply) = call(15, "ask_clarification", "mrtr-a", answered, both.clone());
    let texts = reply["result"]["content"].to_string();
    assert!(texts.contains("Which colour?") && texts.contains("The user answered: teal"), "{reply}");
    let (_, reply) = call(16, "ask_clarification", "mrtr-a", question, json!({"sampling": {}}));
    assert!(reply["result"].get("inputRequests").is_none(), "{reply}");
    assert_eq!(reply["result"]["_meta"]["toolhost/end_run"], true, "{reply}");

    // And an ordinary call still works.
    let (_, reply) = call(13, "hello", "mrtr-a", json!({"arguments": {"name": "after"}}), both);
    assert_eq!(reply["result"]["content"][0]["text"], "Hello, after.", "{reply}");
}

/// The `_meta` of a 2026-07-28 request in `thread`, from a client declaring no capabilities.
fn meta_2026(thread: &str) -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "0"},
        "io.modelcontextprotocol/clientCapabilities": {},
        "toolhost/thread": thread,
    })
}

/// A `subscriptions/listen` stream held open: the messages it carries arrive on a channel.
struct Listen {
    messages: std::sync::mpsc::Receiver<Value>,
    _stream: std::net::TcpStream,
}

impl Listen {
    fn open(server: &HttpServer, thread: &str, filter: Value) -> Self {
        use std::io::{BufRead, Write};
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": "subscriptions/listen",
            "params": {"notifications": filter, "_meta": meta_2026(thread)}})
        .to_string();
        let req = format!(
            "POST /mcp HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2026-07-28\r\nMcp-Method: subscriptions/listen\r\nContent-Length: {}\r\n\r\n{body}",
            server.addr,
            body.len()
        );
        let mut stream = std::net::TcpStream::connect(&server.addr).unwrap();
        stream.write_all(req.as_bytes()).unwrap();
        let (tx, messages) = std::sync::mpsc::channel();
        let reader = std::io::BufReader::new(stream.try_clone().unwrap());
        std::thread::spawn(move || {
            for line in reader.lines().map_while(Result::ok) {
                if let Some(v) = line.strip_prefix("data:").and_then(|d| serde_json::from_str::<Value>(d.trim()).ok()) {
                    if tx.send(v).is_err() {
                        return;
                    }
                }
            }
        });
        Listen { messages, _stream: stream }
    }

    /// The methods and params of the next `n` messages, or of those that arrive within `wait`.
    fn methods(&self, n: usize, wait: Duration) -> Vec<(String, Value)> {
        let deadline = Instant::now() + wait;
        let mut got = Vec::new();
        while got.len() < n {
            let Ok(m) = self.messages.recv_timeout(deadline.saturating_duration_since(Instant::now())) else { break };
            got.push((m["method"].as_str().unwrap_or("").to_string(), m["params"].clone()));
        }
        got
    }
}

/// `subscriptions/listen` (SEP-2575): a stream on the thread a 2026-07-28 client names hears
/// what calls in that thread change, as its filter asks: a promotion's `tools/list_changed`, a
/// new output's `resources/list_changed`, a watched file's `resources/updated`, each tagged with
/// the subscription's id. A stream on another thread, or one that asked for something else,
/// hears nothing of it. The methods 2026-07-28 removed (`initialize`, …) are 404 with `-32601`.
#[test]
fn a_listen_stream_hears_its_own_thread_and_removed_methods_are_404() {
    let s = Setup::new(true, true);
    let server = HttpServer::start(&s, &[]);
    let watched = "toolhost:///mnt/user-data/outputs/watched.txt";
    let all = json!({"toolsListChanged": true, "resourcesListChanged": true, "resourceSubscriptions": [watched]});
    let a = Listen::open(&server, "listen-a", all.clone());
    let b = Listen::open(&server, "listen-b", all);
    let prompts_only = Listen::open(&server, "listen-a", json!({"promptsListChanged": true}));
    for l in [&a, &b, &prompts_only] {
        let first = l.methods(1, Duration::from_secs(20));
        assert_eq!(first.first().map(|m| m.0.as_str()), Some("notifications/subscriptions/acknowledged"), "{first:?}");
    }
    let call = |id: u64, name: &str, thread: &str, args: Value| {
        let body = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": name, "arguments": args, "_meta": meta_2026(thread)}});
        let headers = [("MCP-Protocol-Version", "2026-07-28"), ("Mcp-Method", "tools/call"), ("Mcp-Name", name)];
        let (status, _, body) = server.raw("POST", body.to_string().as_bytes(), &headers);
        assert_eq!(status, 200, "{body}");
        messages(&body).pop().unwrap()
    };

    // rmcp acknowledges a stream before the handler registers it, so a change made at once may
    // come before the registration: write new files until the stream hears one.
    let mut id = 100;
    let mut write = |thread: &str| {
        id += 1;
        let args = json!({"description": "d", "path": format!("/mnt/user-data/outputs/new-{id}.txt"), "content": "v"});
        let r = call(id, "write_file", thread, args);
        assert_eq!(r["result"]["isError"], false, "{r}");
    };
    let mut until_heard = |l: &Listen, thread: &str| {
        for _ in 0..40 {
            write(thread);
            let heard = l.methods(1, Duration::from_millis(500));
            if !heard.is_empty() {
                assert_eq!(heard[0].0, "notifications/resources/list_changed", "{heard:?}");
                return;
            }
        }
        panic!("the listen stream on {thread} never heard a write there");
    };
    until_heard(&a, "listen-a");
    let r = call(
        2,
        "write_file",
        "listen-a",
        json!({"description": "d", "path": "/mnt/user-data/outputs/watched.txt", "content": "v1"}),
    );
    assert_eq!(r["result"]["isError"], false, "{r}");
    let heard = a.methods(2, Duration::from_secs(5));
    let methods: Vec<&str> = heard.iter().map(|m| m.0.as_str()).collect();
    assert_eq!(methods, ["notifications/resources/list_changed", "notifications/resources/updated"], "{heard:?}");
    assert_eq!(heard[1].1["uri"], watched);
    for (_, params) in &heard {
        assert_eq!(params["_meta"]["io.modelcontextprotocol/subscriptionId"], 1, "{params}");
    }

    let r = call(3, "tool_search", "listen-a", json!({"query": "select:everything_echo"}));
    assert_eq!(r["result"]["isError"], false, "{r}");
    let heard = a.methods(1, Duration::from_secs(5));
    assert_eq!(heard.iter().map(|m| m.0.as_str()).collect::<Vec<_>>(), ["notifications/tools/list_changed"]);
    // The other thread's stream heard nothing of thread A; once it hears its own thread, a change
    // in A still reaches only A. The stream that asked only for prompts hears none of it.
    assert_eq!(b.methods(1, Duration::from_millis(500)), vec![]);
    until_heard(&b, "listen-b");
    until_heard(&a, "listen-a");
    assert_eq!(b.methods(1, Duration::from_millis(500)), vec![]);
    assert_eq!(prompts_only.methods(1, Duration::from_millis(200)), vec![]);
    assert_eq!(a.methods(1, Duration::from_millis(200)), vec![], "nothing more on the stream that heard it all");

    // Methods the revision removed: 404 with -32601 and the request's id, params or not.
    for (id, method) in [(7, "initialize"), (8, "ping"), (9, "logging/setLevel")] {
        let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": {"_meta": meta_2026("listen-a")}});
        let (status, _, body) = server.raw(
            "POST",
            body.to_string().as_bytes(),
            &[("MCP-Protocol-Version", "2026-07-28"), ("Mcp-Method", method)],
        );
        assert_eq!(status, 404, "{method}: {body}");
        assert_error(&messages(&body)[0], &json!(id), -32601);
    }
    // The 2025 handshake is still there, and an ordinary call still works.
    server.raw_session(&[]);
    let r = call(10, "hello", "listen-b", json!({"name": "after"}));
    assert_eq!(r["result"]["content"][0]["text"], "Hello, after.", "{r}");
}

/// Over streamable HTTP a call's log lines ride its own SSE stream, all before its result (rmcp
/// alone would put them on the session's GET stream, which a client reading only the call never
/// sees), and only after `logging/setLevel`; with the level set above them, none are sent.
#[test]
fn a_call_s_log_lines_come_on_its_own_stream_before_the_result() {
    let s = Setup::with_fixture(&["test_tool_with_logging"]);
    let server = HttpServer::start(&s, &[]);
    let session = server.raw_session(&[]);
    let h = [("Mcp-Session-Id", session.as_str())];
    let set_level = |id: u64, level: &str| {
        let body = json!({"jsonrpc": "2.0", "id": id, "method": "logging/setLevel", "params": {"level": level}});
        let (status, _, body) = server.raw("POST", body.to_string().as_bytes(), &h);
        assert_eq!(status, 200, "{body}");
    };
    let call = |id: u64| {
        let (status, _, body) = server.raw("POST", &tool_call(id, "test_tool_with_logging", json!({})), &h);
        assert_eq!(status, 200, "{body}");
        messages(&body)
    };
    // No level set: no log lines.
    let got = call(2);
    assert_eq!(got.len(), 1, "{got:?}");
    set_level(3, "info");
    let got = call(4);
    let lines: Vec<&str> = got
        .iter()
        .filter(|m| m["method"] == "notifications/message")
        .map(|m| m["params"]["data"].as_str().unwrap())
        .collect();
    assert_eq!(lines, ["Tool execution started", "Tool processing data", "Tool execution completed"], "{got:?}");
    let last = got.last().unwrap();
    assert_eq!(last["id"], 4, "the result comes last: {got:?}");
    assert_eq!(got[got.len() - 2]["params"]["logger"], "test_tool_with_logging");
    // Above the lines' level: none.
    set_level(5, "error");
    assert_eq!(call(6).len(), 1);
}

/// Over stdio as over HTTP, a method the 2026-07-28 revision removed is refused with `-32601`
/// when the request names that protocol (on stdio in its `_meta`); a 2025 request for it, and a
/// 2026-07-28 request for a method the revision kept, are served.
#[test]
fn stdio_refuses_removed_methods_as_http_does() {
    use std::io::{BufRead as _, BufReader, Write as _};
    let s = Setup::new(false, false);
    let mut child = s
        .command(&["--thread", "stdio-2026"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    // A request gets its reply; a notification none.
    let mut ask = |msg: Value| -> Value {
        writeln!(stdin, "{msg}").unwrap();
        stdin.flush().unwrap();
        if msg.get("id").is_none() {
            return Value::Null;
        }
        serde_json::from_str(&lines.next().expect("a reply").unwrap()).unwrap()
    };
    for (id, method) in [(1, "ping"), (2, "initialize"), (3, "logging/setLevel"), (4, "resources/subscribe")] {
        let r =
            ask(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": {"_meta": meta_2026("stdio-2026")}}));
        assert_eq!(r["id"], id, "{r}");
        assert_eq!(r["error"]["code"], -32601, "{r}");
        assert_eq!(r["error"]["message"], format!("Method not found: {method} is not part of protocol 2026-07-28"));
    }
    // A 2025 session still initializes and pings.
    let r = ask(json!({"jsonrpc": "2.0", "id": 10, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}}));
    assert_eq!(r["result"]["protocolVersion"], "2025-11-25", "{r}");
    ask(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    let r = ask(json!({"jsonrpc": "2.0", "id": 11, "method": "ping"}));
    assert_eq!(r["id"], 11, "{r}");
    assert!(r.get("error").is_none(), "{r}");
    let _ = child.kill();
    let _ = child.wait();
}

/// An `extensions_config.json` entry naming `serve --http`'s own URL: the server recognizes its
/// own MCP client (the `Toolhost-Instance` header) and refuses it at once, as a stdio entry
/// starting toolhost itself is recognized, instead of holding the request until the host opens
/// — which waits for that request (a 60 s stall before).
#[test]
fn an_http_entry_naming_the_server_itself_is_refused_at_once() {
    use std::io::BufRead as _;
    let s = Setup::new(false, false);
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let url = format!("http://127.0.0.1:{port}/mcp");
    std::fs::write(
        s.dir.path().join("extensions_config.json"),
        json!({"mcpServers": {"myself": {"type": "http", "url": url}}}).to_string(),
    )
    .unwrap();
    let started = Instant::now();
    let mut child = s
        .command(&["--http", &format!("127.0.0.1:{port}")])
        .env_remove("TOOLHOST_LOG")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    let stderr = child.stderr.take().unwrap();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let mut seen = Vec::new();
    while !seen.iter().any(|l: &String| l.contains("serving MCP (streamable HTTP)")) {
        seen.push(rx.recv_timeout(Duration::from_secs(60)).expect("the server announces its address"));
    }
    let server = HttpServer { child, addr: format!("127.0.0.1:{port}") };
    let session = server.raw_session(&[]);
    let (status, _, body) =
        server.raw("POST", &tool_call(1, "hello", json!({"name": "me"})), &[("Mcp-Session-Id", &session)]);
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("Hello, me."), "{body}");
    let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}).to_string();
    let (_, _, body) = server.raw("POST", list.as_bytes(), &[("Mcp-Session-Id", &session)]);
    assert!(body.contains("\"hello\"") && !body.contains("myself"), "{body}");
    assert!(started.elapsed() < Duration::from_secs(45), "took {:?}: the self-reference stalled", started.elapsed());
    // It was the door that refused the host's own client.
    let deadline = Instant::now() + Duration::from_secs(10);
    while !seen.iter().any(|l| l.contains("own MCP client")) {
        match rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
            Ok(line) => seen.push(line),
            Err(_) => panic!("no refusal of the host's own MCP client logged: {seen:#?}"),
        }
    }
}
