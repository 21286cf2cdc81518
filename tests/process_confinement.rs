//! Every program toolhost starts runs confined: a hostile stdio MCP server
//! (`fixtures/probe_mcp_server.py`) and a hostile ACP agent (`fixtures/probe_acp_agent.py`) probe
//! from inside — `/etc/shadow`, their capabilities, other threads, toolhost's keys and cache,
//! toolhost's own `/proc` entries, a loopback listener, a fork bomb, writes outside their home, a
//! `setsid` process left behind — and every probe is refused, each beside a positive control (a
//! granted path is readable, a granted loopback HTTPS server is reached through the proxy). Real
//! servers still work confined with the defaults or one grant.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use toolhost::assembly::AssemblyRequest;
use toolhost::{HostOptions, Toolhost};

#[path = "support/paths.rs"]
mod paths;
use paths::{peer, root};

/// Skip visibly when the kernel itself reports Landlock missing; fail on anything else.
fn landlock_or_skip() -> bool {
    match toolhost_confine::confinement_status() {
        toolhost_confine::ConfinementStatus::Active { .. } => true,
        toolhost_confine::ConfinementStatus::Unavailable { reason } => {
            assert!(reason.contains("does not implement") || reason.contains("disabled"), "{reason}");
            eprintln!("SKIPPED: the kernel has no Landlock: {reason}");
            false
        }
    }
}

/// A loopback HTTPS server (self-signed for `localhost`) that answers every request `hello`.
fn https_server() -> u16 {
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = rcgen::CertificateParams::new(vec!["localhost".to_string()]).unwrap().self_signed(&key).unwrap();
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![cert.der().clone()], rustls::pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into()))
        .unwrap();
    let config = Arc::new(config);
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming().take(64) {
            let Ok(mut tcp) = stream else { continue };
            let config = config.clone();
            std::thread::spawn(move || {
                let _ = tcp.set_read_timeout(Some(Duration::from_secs(10)));
                let Ok(mut conn) = rustls::ServerConnection::new(config) else { return };
                let mut tls = rustls::Stream::new(&mut conn, &mut tcp);
                let mut head = Vec::new();
                let mut buf = [0u8; 1024];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match tls.read(&mut buf) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                let _ = tls.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello");
                let _ = tls.flush();
            });
        }
    });
    port
}

/// The places a confined program must not reach, made real so a refusal means something.
struct Sentinels {
    other_thread: PathBuf,
    threads: PathBuf,
    key: PathBuf,
    cache: PathBuf,
    outside: PathBuf,
    granted: PathBuf,
    granted_rw: PathBuf,
}

fn sentinels(dir: &Path, data: &Path) -> Sentinels {
    let write = |p: &Path, text: &str| {
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
        p.to_path_buf()
    };
    let s = Sentinels {
        other_thread: write(&data.join("threads/other/user-data/workspace/secret.txt"), "THREAD-SECRET"),
        threads: data.join("threads"),
        key: write(&data.join("keys/sentinel.key"), "KEY-SECRET"),
        cache: write(&data.join("cache/sentinel"), "CACHE-SECRET"),
        outside: write(&dir.join("outside/secret.txt"), "OUTSIDE-SECRET"),
        granted: write(&dir.join("granted/readme.txt"), "granted-content").parent().unwrap().to_path_buf(),
        granted_rw: dir.join("granted-rw"),
    };
    std::fs::create_dir_all(&s.granted_rw).unwrap();
    s
}

fn host(dir: &Path, config: &str, extensions: Value) -> Toolhost {
    std::fs::write(dir.join("config.yaml"), config).unwrap();
    std::fs::write(dir.join("extensions_config.json"), serde_json::to_vec(&extensions).unwrap()).unwrap();
    let mut opts = HostOptions::new(dir.join("config.yaml"));
    opts.data_dir = dir.join("data");
    opts.extensions = Some(dir.join("extensions_config.json"));
    Toolhost::open_blocking(opts).unwrap()
}

fn ok(v: &Value) -> bool {
    v.as_str().is_some_and(|s| s.starts_with("ok:"))
}

/// Processes on the host whose command line is `sleep <marker>`.
fn sleepers(marker: &str) -> Vec<u32> {
    let want = format!("sleep\0{marker}\0");
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| c == want.as_bytes()))
        .collect()
}

/// The probes both hostile programs run, and what each must show.
fn spec(s: &Sentinels, listener_port: u16, https_port: u16, marker: &str) -> Value {
    let me = std::process::id();
    json!({
        "status": true,
        "read": [
            "/etc/shadow", s.other_thread, s.key, s.cache, s.outside,
            format!("/proc/{me}/environ"), format!("/proc/{me}/cmdline"),
            s.granted.join("readme.txt"),
        ],
        "list": ["/root", s.threads, "/etc"],
        "write": [s.outside.parent().unwrap().join("escape.txt"), "/tmp/toolhost-escape-probe", s.granted_rw.join("made.txt"), s.granted.join("nope.txt")],
        "connect": [format!("127.0.0.1:{listener_port}")],
        "https": [format!("https://localhost:{https_port}/"), "https://example.invalid/"],
        "pids": true,
        "forks": 200,
        "leave": marker,
    })
}

fn check_probes(what: &str, r: &Value, s: &Sentinels) {
    let status = &r["status"];
    for k in ["CapEff", "CapPrm", "CapBnd"] {
        assert_eq!(status[k], "0000000000000000", "{what}: {k}: {status}");
    }
    assert_eq!(status["NoNewPrivs"], "1", "{what}: {status}");
    assert_eq!(status["Seccomp"], "2", "{what}: {status}");
    let me = std::process::id();
    let reads = &r["read"];
    for p in [
        "/etc/shadow".to_string(),
        s.other_thread.display().to_string(),
        s.key.display().to_string(),
        s.cache.display().to_string(),
        s.outside.display().to_string(),
        format!("/proc/{me}/environ"),
        format!("/proc/{me}/cmdline"),
    ] {
        assert!(!ok(&reads[&p]), "{what} read {p}: {}", reads[&p]);
    }
    assert_eq!(reads[s.granted.join("readme.txt").display().to_string()], "ok:granted-content", "{what}: {reads}");
    let lists = &r["list"];
    assert!(!ok(&lists["/root"]), "{what} listed /root: {}", lists["/root"]);
    assert!(!ok(&lists[s.threads.display().to_string()]), "{what} listed the threads: {lists}");
    assert!(ok(&lists["/etc"]), "{what}: the system stays readable: {lists}");
    let writes = &r["write"];
    assert!(!ok(&writes[s.outside.parent().unwrap().join("escape.txt").display().to_string()]), "{what}: {writes}");
    assert!(!ok(&writes["/tmp/toolhost-escape-probe"]), "{what}: {writes}");
    assert!(!ok(&writes[s.granted.join("nope.txt").display().to_string()]), "{what}: read-only grant: {writes}");
    assert_eq!(writes[s.granted_rw.join("made.txt").display().to_string()], "ok:written", "{what}: {writes}");
    assert!(!s.outside.parent().unwrap().join("escape.txt").exists());
    assert!(!Path::new("/tmp/toolhost-escape-probe").exists());
    for (addr, v) in r["connect"].as_object().unwrap() {
        assert!(!ok(v), "{what} connected to the test's loopback listener {addr}: {v}");
    }
    let https = r["https"].as_object().unwrap();
    let granted = https.iter().find(|(u, _)| u.starts_with("https://localhost")).unwrap().1;
    assert_eq!(granted, "ok:hello", "{what}: the granted loopback server through the proxy: {https:?}");
    let other = https.iter().find(|(u, _)| u.contains("example.invalid")).unwrap().1;
    assert!(!ok(other), "{what}: a host outside the grant: {other}");
    let pids = r["pids"].as_array().unwrap();
    assert!(pids.len() <= 8, "{what} sees {} processes in /proc: {pids:?}", pids.len());
    let forks = &r["forks"];
    assert!(forks["started"].as_u64().unwrap() < 64, "{what}: the process cap did not hold: {forks}");
    assert!(forks["error"].as_str().unwrap().starts_with("err:"), "{what}: {forks}");
}

const GRANTS: &str = "filesystem: {read_only: [GRANTED], read_write: [GRANTED_RW]}, network: {allow: ['localhost:PORT'], allow_private_addresses: true}, processes: 64";

fn grants(s: &Sentinels, https_port: u16) -> String {
    GRANTS
        .replace("GRANTED_RW", &s.granted_rw.display().to_string())
        .replace("GRANTED", &s.granted.display().to_string())
        .replace("PORT", &https_port.to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hostile_mcp_server_is_refused_every_probe_and_a_normal_call_still_works() {
    if !landlock_or_skip() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let s = sentinels(dir.path(), &dir.path().join("data"));
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let https = https_server();
    let config = format!(
        "sandbox: {{use: deerflow.sandbox.local:LocalSandboxProvider}}\ntools: []\ntoolhost:\n  mcp_servers:\n    probe: {{{}}}\n",
        grants(&s, https)
    );
    let server = root().join("tests/fixtures/probe_mcp_server.py");
    let ext = json!({"mcpServers": {"probe": {"type": "stdio", "command": peer("venv/bin/python"), "args": [server], "session_init_timeout": 60}}});
    let host = host(dir.path(), &config, ext);
    let report = host.process_reports().iter().find(|r| r.label == "MCP server 'probe'").unwrap().clone();
    assert_eq!(report.verdict, "confined", "{report:?}");
    let req = AssemblyRequest::default();
    let marker = format!("3{}.5", std::process::id() % 1000);
    let r = host
        .call(
            &req,
            "t1",
            "probe_probe",
            json!({"spec": spec(&s, listener.local_addr().unwrap().port(), https, &marker)}),
            None,
        )
        .await
        .unwrap();
    let text = r.outcome.text_content();
    let result: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"));
    check_probes("the MCP server", &result, &s);
    assert!(result["home"].as_str().unwrap().starts_with(&dir.path().join("data/processes").display().to_string()));
    assert_eq!(sleepers(&marker).len(), 1, "the left-behind process runs while its server does");
    // A normal call still works.
    let r = host
        .call(&req, "t1", "probe_probe", json!({"spec": {"read": [s.granted.join("readme.txt")]}}), None)
        .await
        .unwrap();
    assert!(r.outcome.text_content().contains("ok:granted-content"), "{}", r.outcome.text_content());
    // The host goes: its servers' whole trees go, the setsid sleeper with them.
    drop(host);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !sleepers(&marker).is_empty() && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(sleepers(&marker).is_empty(), "a setsid process outlived its server's session");
    assert!(!s.outside.parent().unwrap().join("escape.txt").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hostile_acp_agent_is_refused_every_probe() {
    if !landlock_or_skip() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let s = sentinels(dir.path(), &dir.path().join("data"));
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let https = https_server();
    let agent = root().join("tests/fixtures/probe_acp_agent.py");
    let config = format!(
        "sandbox: {{use: deerflow.sandbox.local:LocalSandboxProvider}}\ntools: []\nacp_agents:\n  probe:\n    command: {}\n    args: [{}]\n    description: probes\n    timeout_seconds: 120\ntoolhost:\n  acp_agents:\n    probe: {{{}}}\n",
        peer("acp-venv/bin/python").display(),
        agent.display(),
        grants(&s, https)
    );
    let host = host(dir.path(), &config, json!({"mcpServers": {}}));
    let report = host.process_reports().iter().find(|r| r.label == "ACP agent 'probe'").unwrap().clone();
    assert_eq!(report.verdict, "confined", "{report:?}");
    let req = AssemblyRequest::default();
    let marker = format!("4{}.5", std::process::id() % 1000);
    let probe = spec(&s, listener.local_addr().unwrap().port(), https, &marker);
    let r = host
        .call(&req, "t1", "invoke_acp_agent", json!({"agent": "probe", "prompt": probe.to_string()}), None)
        .await
        .unwrap();
    let text = r.outcome.text_content();
    let result: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"));
    check_probes("the ACP agent", &result, &s);
    // Its working directory is the thread's acp-workspace; the call's end ends its tree.
    assert!(result["cwd"].as_str().unwrap().ends_with("acp-workspace"), "{}", result["cwd"]);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !sleepers(&marker).is_empty() && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(sleepers(&marker).is_empty(), "a setsid process outlived the agent's call");
    let r = host
        .call(
            &req,
            "t1",
            "invoke_acp_agent",
            json!({"agent": "probe", "prompt": json!({"read": [s.granted.join("readme.txt")]}).to_string()}),
            None,
        )
        .await
        .unwrap();
    assert!(r.outcome.text_content().contains("ok:granted-content"), "{}", r.outcome.text_content());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_servers_work_confined_with_defaults_or_one_grant() {
    if !landlock_or_skip() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let shared = dir.path().join("shared");
    std::fs::create_dir_all(&shared).unwrap();
    std::fs::write(shared.join("notes.txt"), "shared notes").unwrap();
    let ungranted = dir.path().join("ungranted");
    std::fs::create_dir_all(&ungranted).unwrap();
    let config = format!(
        "sandbox: {{use: deerflow.sandbox.local:LocalSandboxProvider}}\ntools: []\ntoolhost:\n  mcp_servers:\n    files:\n      filesystem: {{read_write: [{}]}}\n      network: none\n",
        shared.display()
    );
    let ext = json!({"mcpServers": {
        "everything": {"type": "stdio", "command": peer("npm/node_modules/.bin/mcp-server-everything"), "args": []},
        "files": {"type": "stdio", "command": peer("npm/node_modules/.bin/mcp-server-filesystem"), "args": [shared]},
        "nogrant": {"type": "stdio", "command": peer("npm/node_modules/.bin/mcp-server-filesystem"), "args": [ungranted]},
        "time": {"type": "stdio", "command": peer("venv/bin/mcp-server-time"), "args": []},
    }});
    let host = host(dir.path(), &config, ext);
    for r in host.process_reports() {
        assert_eq!(r.verdict, "confined", "{r:?}");
    }
    let req = AssemblyRequest::default();
    let r = host.call(&req, "t1", "everything_echo", json!({"message": "hi"}), None).await.unwrap();
    assert_eq!(r.outcome.text_content(), "Echo: hi");
    let r = host.call(&req, "t1", "time_get_current_time", json!({"timezone": "UTC"}), None).await.unwrap();
    assert!(r.outcome.text_content().contains("\"timezone\": \"UTC\""), "{}", r.outcome.text_content());
    let r =
        host.call(&req, "t1", "files_read_text_file", json!({"path": shared.join("notes.txt")}), None).await.unwrap();
    assert!(r.outcome.text_content().contains("shared notes"), "{}", r.outcome.text_content());
    let r = host
        .call(&req, "t1", "files_write_file", json!({"path": shared.join("new.txt"), "content": "made"}), None)
        .await
        .unwrap();
    assert!(!r.outcome.is_error(), "{}", r.outcome.text_content());
    assert_eq!(std::fs::read_to_string(shared.join("new.txt")).unwrap(), "made");
    // The same server on a directory nobody granted starts, and cannot see it.
    let r = host.call(&req, "t1", "nogrant_list_directory", json!({"path": ungranted}), None).await.unwrap();
    assert!(r.outcome.is_error() || !r.outcome.text_content().contains("[FILE]"), "{}", r.outcome.text_content());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_cannot_be_confined_is_not_started_unless_the_config_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    // A grant that would open toolhost's own data cannot be confined as asked: refused, and the
    // server is not started.
    let config = format!(
        "sandbox: {{use: deerflow.sandbox.local:LocalSandboxProvider}}\ntools: []\ntoolhost:\n  mcp_servers:\n    greedy:\n      filesystem: {{read_only: [{}]}}\n    open:\n      confine: false\n",
        dir.path().display()
    );
    let ext = json!({"mcpServers": {
        "greedy": {"type": "stdio", "command": peer("venv/bin/mcp-server-time"), "args": []},
        "open": {"type": "stdio", "command": peer("venv/bin/mcp-server-time"), "args": []},
    }});
    let host = host(dir.path(), &config, ext);
    let greedy = host.process_reports().iter().find(|r| r.label == "MCP server 'greedy'").unwrap().clone();
    assert!(greedy.refused && greedy.verdict.contains("overlaps toolhost's data directory"), "{greedy:?}");
    assert!(greedy.verdict.contains("confine: false"), "the refusal says how to opt out: {greedy:?}");
    let open = host.process_reports().iter().find(|r| r.label == "MCP server 'open'").unwrap().clone();
    assert!(open.unconfined && open.verdict.starts_with("UNCONFINED"), "{open:?}");
    let warnings: Vec<String> = host.problems().iter().map(|p| p.message.clone()).collect();
    assert!(warnings.iter().any(|w| w.contains("greedy") && w.contains("not started")), "{warnings:?}");
    assert!(warnings.iter().any(|w| w.contains("'open'") && w.contains("UNCONFINED")), "{warnings:?}");
    let names: Vec<String> =
        host.get_available_tools(&AssemblyRequest::default()).await.specs().iter().map(|t| t.name.clone()).collect();
    assert!(!names.iter().any(|n| n.starts_with("greedy_")), "a refused server contributes no tools: {names:?}");
    assert!(names.iter().any(|n| n.starts_with("open_")), "{names:?}");
}
