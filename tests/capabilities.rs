//! Capability promises (issue 9), each checked on what must not happen — a sentinel that stays
//! unchanged, a listener that receives nothing — with a positive control beside it, so "denied"
//! means the refusal we expect and not some unrelated failure: a `filesystem: read-only` grant,
//! no filesystem grant at all, the read-only `/mnt/skills`, `/mnt/acp-workspace` and read-only
//! `sandbox.mounts`, guest DNS and UDP, and a connect or TLS handshake that stalls.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use toolhost::{HostOptions, Severity, Toolhost};

#[path = "support/hostile.rs"]
mod hostile;
use hostile::hostile_wasm;

struct Env {
    dir: tempfile::TempDir,
    host: Toolhost,
}

impl Env {
    fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }
}

/// A host whose hostile tools carry the given capabilities, with a skills directory, a read-only
/// and a writable mount.
fn open(tools: &[(&str, &str)]) -> Env {
    open_in(tempfile::tempdir().unwrap(), tools)
}

/// [`open`] over an existing directory (a second host on the same data, with other grants).
fn open_in(dir: tempfile::TempDir, tools: &[(&str, &str)]) -> Env {
    for d in ["skills/public/demo", "ro", "rw"] {
        std::fs::create_dir_all(dir.path().join(d)).unwrap();
    }
    std::fs::write(dir.path().join("skills/public/demo/SKILL.md"), "skill body").unwrap();
    std::fs::write(dir.path().join("ro/data.txt"), "read-only data").unwrap();
    let mut yaml = format!(
        "skills:\n  path: {}\nsandbox:\n  use: deerflow.sandbox.local:LocalSandboxProvider\n  mounts:\n\
         \x20   - {{host_path: {}, container_path: /mnt/ro, read_only: true}}\n\
         \x20   - {{host_path: {}, container_path: /mnt/rw, read_only: false}}\ntools:\n",
        dir.path().join("skills").display(),
        dir.path().join("ro").display(),
        dir.path().join("rw").display()
    );
    for (tool, caps) in tools {
        yaml += &format!(
            "  - {{name: {tool}, group: hostile, use: '{}:{tool}', capabilities: {caps}}}\n",
            hostile_wasm().display()
        );
    }
    std::fs::write(dir.path().join("config.yaml"), yaml).unwrap();
    let opts = HostOptions::new(dir.path().join("config.yaml"))
        .data_dir(dir.path().join("data"))
        .cache_dir(Some(dir.path().join("cache")));
    let host = Toolhost::open_blocking(opts).unwrap();
    let errors: Vec<_> = host.problems().iter().filter(|p| p.severity == Severity::Error).collect();
    assert!(errors.is_empty(), "{errors:?}");
    Env { dir, host }
}

/// One call in thread `t1`, bounded: a call that blocks fails the test instead of hanging it.
async fn call(env: &Env, name: &str, args: Value) -> (String, bool) {
    tokio::time::timeout(Duration::from_secs(60), hostile::call(&env.host, name, args))
        .await
        .expect("the call returned")
}

fn workspace(env: &Env) -> PathBuf {
    env.path("data/threads/t1/user-data/workspace")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_only_grant_reads_but_never_writes() {
    // Positive control first: with user-data the same tool writes (and creates the thread).
    let env = open(&[("write", "{filesystem: user-data}")]);
    let (text, err) = call(&env, "write", json!({"path": "/mnt/user-data/workspace/own.txt"})).await;
    assert!(!err, "{text}");
    std::fs::write(workspace(&env).join("sentinel.txt"), "unchanged").unwrap();
    let env = open_in(env.dir, &[("read", "{filesystem: read-only}"), ("write", "{filesystem: read-only}")]);
    let (text, err) = call(&env, "read", json!({"path": "/mnt/user-data/workspace/sentinel.txt"})).await;
    assert!(!err && text.contains("unchanged"), "{text}");
    for target in ["/mnt/user-data/workspace/sentinel.txt", "/mnt/user-data/outputs/new.txt"] {
        let (text, err) = call(&env, "write", json!({ "path": target })).await;
        assert!(err && text.contains("denied"), "{target}: {text}");
    }
    assert_eq!(std::fs::read_to_string(workspace(&env).join("sentinel.txt")).unwrap(), "unchanged");
    assert!(!env.path("data/threads/t1/user-data/outputs/new.txt").exists());
}

/// `filesystem: outputs` (docs/authoring.md, "Grant capabilities"): the thread's outputs
/// directory read-write, and nothing else — not the workspace, the uploads, the skills or a mount.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_outputs_grant_opens_only_the_outputs_directory_read_write() {
    let env = open(&[("read", "{filesystem: user-data}")]);
    call(&env, "read", json!({"path": "/mnt/user-data/workspace/none"})).await;
    std::fs::write(workspace(&env).join("secret.txt"), "THREAD-SECRET").unwrap();
    std::fs::write(env.path("data/threads/t1/user-data/uploads/up.txt"), "UPLOADED").unwrap();
    let env = open_in(env.dir, &[("read", "{filesystem: outputs}"), ("write", "{filesystem: outputs}")]);
    let (text, err) = call(&env, "write", json!({"path": "/mnt/user-data/outputs/report.md"})).await;
    assert!(!err, "outputs is writable: {text}");
    assert_eq!(std::fs::read_to_string(env.path("data/threads/t1/user-data/outputs/report.md")).unwrap(), "pwned");
    let (text, err) = call(&env, "read", json!({"path": "/mnt/user-data/outputs/report.md"})).await;
    assert!(!err && text.contains("pwned"), "outputs is readable: {text}");
    for path in [
        "/mnt/user-data/workspace/secret.txt",
        "/mnt/user-data/uploads/up.txt",
        "/mnt/skills/public/demo/SKILL.md",
        "/mnt/ro/data.txt",
        "/mnt/user-data/outputs/../workspace/secret.txt",
    ] {
        let (text, err) = call(&env, "read", json!({ "path": path })).await;
        assert!(err, "{path}: {text}");
        assert!(
            !text.contains("THREAD-SECRET") && !text.contains("UPLOADED") && !text.contains("skill body"),
            "{text}"
        );
        assert!(!text.contains("read-only data"), "{path}: {text}");
    }
    for (path, host) in [
        ("/mnt/user-data/workspace/new.txt", workspace(&env).join("new.txt")),
        ("/mnt/user-data/uploads/new.txt", env.path("data/threads/t1/user-data/uploads/new.txt")),
        ("/mnt/rw/new.txt", env.path("rw/new.txt")),
    ] {
        let (text, err) = call(&env, "write", json!({ "path": path })).await;
        assert!(err, "{path}: {text}");
        assert!(!host.exists(), "{path} was written");
    }
    assert_eq!(std::fs::read_to_string(workspace(&env).join("secret.txt")).unwrap(), "THREAD-SECRET");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_filesystem_grant_sees_nothing_of_the_thread() {
    let env = open(&[("read", "{filesystem: user-data}")]);
    call(&env, "read", json!({"path": "/mnt/user-data/workspace/none"})).await;
    std::fs::write(workspace(&env).join("secret.txt"), "THREAD-SECRET").unwrap();
    let (text, err) = call(&env, "read", json!({"path": "/mnt/user-data/workspace/secret.txt"})).await;
    assert!(!err && text.contains("THREAD-SECRET"), "positive control: {text}");
    let env = open_in(env.dir, &[("read", "{}"), ("write", "{}")]);
    for path in ["/mnt/user-data/workspace/secret.txt", "/mnt/skills/public/demo/SKILL.md", "/mnt/ro/data.txt", "/"] {
        let (text, err) = call(&env, "read", json!({ "path": path })).await;
        assert!(err && !text.contains("THREAD-SECRET") && !text.contains("skill body"), "{path}: {text}");
    }
    let (text, err) = call(&env, "write", json!({"path": "/mnt/user-data/workspace/secret.txt"})).await;
    assert!(err, "{text}");
    assert_eq!(std::fs::read_to_string(workspace(&env).join("secret.txt")).unwrap(), "THREAD-SECRET");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn skills_acp_workspace_and_read_only_mounts_stay_read_only() {
    let env = open(&[("read", "{filesystem: user-data}"), ("write", "{filesystem: user-data}")]);
    call(&env, "read", json!({"path": "/mnt/user-data/workspace/x"})).await;
    let acp = env.path("data/threads/t1/acp-workspace");
    std::fs::write(acp.join("agent.txt"), "from the agent").unwrap();
    for (path, host, content) in [
        ("/mnt/skills/public/demo/SKILL.md", env.path("skills/public/demo/SKILL.md"), "skill body"),
        ("/mnt/acp-workspace/agent.txt", acp.join("agent.txt"), "from the agent"),
        ("/mnt/ro/data.txt", env.path("ro/data.txt"), "read-only data"),
    ] {
        let (text, err) = call(&env, "read", json!({ "path": path })).await;
        assert!(!err && text.contains(content), "reads work: {path}: {text}");
        let (text, err) = call(&env, "write", json!({ "path": path })).await;
        assert!(err && text.contains("denied"), "{path}: {text}");
        assert_eq!(std::fs::read_to_string(&host).unwrap(), content, "{path} changed");
    }
    for new in ["/mnt/skills/public/new.md", "/mnt/acp-workspace/new.txt", "/mnt/ro/new.txt"] {
        let (text, err) = call(&env, "write", json!({ "path": new })).await;
        assert!(err, "{new}: {text}");
    }
    assert!(!env.path("skills/public/new.md").exists() && !acp.join("new.txt").exists());
    assert!(!env.path("ro/new.txt").exists());
    // Positive control: the writable mount takes a write.
    let (text, err) = call(&env, "write", json!({"path": "/mnt/rw/new.txt"})).await;
    assert!(!err, "{text}");
    assert_eq!(std::fs::read_to_string(env.path("rw/new.txt")).unwrap(), "pwned");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn guest_dns_and_udp_are_refused() {
    let env = open(&[("resolve", "{network: [localhost]}"), ("udp", "{network: [\"127.0.0.1:*\"]}")]);
    let listener = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    listener.set_read_timeout(Some(Duration::from_millis(500))).unwrap();
    let addr = listener.local_addr().unwrap();
    // Positive control: a datagram from the test itself does arrive.
    std::net::UdpSocket::bind("127.0.0.1:0").unwrap().send_to(b"control", addr).unwrap();
    let mut buf = [0u8; 64];
    let n = listener.recv(&mut buf).unwrap();
    assert_eq!(&buf[..n], b"control");
    use std::net::ToSocketAddrs;
    assert!(("localhost", 443).to_socket_addrs().is_ok(), "positive control: the host itself resolves localhost");
    let (text, err) = call(&env, "resolve", json!({"host": "localhost"})).await;
    assert!(err && !text.contains("RESOLVED"), "{text}");
    let (text, err) = call(&env, "udp", json!({"addr": addr.to_string()})).await;
    assert!(err && !text.contains("SENT"), "{text}");
    assert!(listener.recv(&mut buf).is_err(), "a datagram from the component arrived");
}

/// A listener whose accept queue is full: the kernel drops further SYNs, so a connect to it
/// stalls until its caller gives up.
fn stalled_listener() -> (std::net::TcpListener, Vec<std::net::TcpStream>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let mut held = Vec::new();
    for _ in 0..4096 {
        match std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(300)) {
            Ok(s) => held.push(s),
            Err(_) => return (listener, held),
        }
    }
    panic!("the accept queue of {addr} never filled");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_connect_or_tls_handshake_ends_at_the_timeout() {
    // Accepts TCP, never answers the ClientHello.
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let silent_port = silent.local_addr().unwrap().port();
    let accepted = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let seen = accepted.clone();
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((s, _)) = silent.accept().await {
            seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            held.push(s);
        }
    });
    let (full, _held) = stalled_listener();
    let full_port = full.local_addr().unwrap().port();
    let caps = "{network: [\"127.0.0.1:*\"], allow_private_addresses: true, timeout_s: 1}";
    let env = open(&[("http_get", caps), ("ok", "{}")]);
    for (what, port) in [("TLS handshake", silent_port), ("connect", full_port)] {
        let start = Instant::now();
        let (text, err) = call(&env, "http_get", json!({ "url": format!("https://127.0.0.1:{port}/") })).await;
        let elapsed = start.elapsed();
        assert!(err, "{what}: {text}");
        // The deadline is 1 s; 10 s tolerates a loaded machine and still fails a call that the
        // timeout did not end (TCP's own connect timeout is over two minutes).
        assert!(
            elapsed >= Duration::from_millis(900) && elapsed < Duration::from_secs(10),
            "{what}: {elapsed:?}: {text}"
        );
        assert!(text.to_lowercase().contains("timeout") || text.contains("timed out"), "{what}: {text}");
    }
    assert!(accepted.load(std::sync::atomic::Ordering::SeqCst) >= 1, "the handshake case never connected");
    hostile::assert_ok_still_works(&env.host).await;
}

/// A `capabilities:` block on a bundled component merges over its defaults: sandbox-fs given
/// only a shorter timeout keeps its file access (before, the block replaced the defaults and
/// silently took the files away).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_capabilities_block_merges_over_a_bundled_components_defaults() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("config.yaml"),
        "tools:\n  - name: read_file\n    group: file:read\n    use: deerflow.sandbox.tools:read_file_tool\n    capabilities: {timeout_s: 10}\n",
    )
    .unwrap();
    let opts = HostOptions::new(dir.path().join("config.yaml"))
        .data_dir(dir.path().join("data"))
        .cache_dir(Some(dir.path().join("cache")));
    let host = Toolhost::open_blocking(opts).unwrap();
    host.thread_fs("t1").unwrap().ensure_tool_dirs().unwrap();
    std::fs::write(dir.path().join("data/threads/t1/user-data/workspace/a.txt"), "merged").unwrap();
    let (text, err) =
        hostile::call(&host, "read_file", json!({"description": "d", "path": "/mnt/user-data/workspace/a.txt"})).await;
    assert!(!err && text == "merged", "{text}");
    let assembly = host.get_available_tools(&toolhost::assembly::AssemblyRequest::default()).await;
    let line = assembly.explain.iter().find(|e| e.name == "read_file").unwrap().reason.clone();
    assert!(line.contains("files read-only") && line.contains("timeout 10s"), "{line}");
}
