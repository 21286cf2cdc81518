//! The runtime's sandbox against a hostile component (guest-tools/hostile): loops, memory bombs,
//! escapes through `..`, absolute paths and symlinks, host env, sockets, panics and floods all
//! end as error results, and the next call of a good tool still works.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use toolhost::assembly::AssemblyRequest;
use toolhost::{HostOptions, Severity, Toolhost};

#[path = "support/hostile.rs"]
mod hostile;
use hostile::{assert_ok_still_works, call, hostile_wasm};

struct Env {
    _dir: tempfile::TempDir,
    host: Toolhost,
    data: PathBuf,
}

fn host_with(tools_yaml: &str) -> Env {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.yaml");
    std::fs::write(&config, format!("tools:\n{tools_yaml}")).unwrap();
    let data = dir.path().join("data");
    let opts = HostOptions {
        config_path: config,
        data_dir: data.clone(),
        persist_state: false,
        cache_dir: Some(dir.path().join("cache")),
        extensions_path: None,
        extra_ca_certs: None,
        write_file_max_bytes: None,
    };
    let host = Toolhost::open(opts).unwrap();
    Env { _dir: dir, host, data }
}

fn entry(name: &str, caps: &str) -> String {
    format!(
        "  - name: {name}\n    group: hostile\n    use: {}:{name}\n    capabilities: {caps}\n",
        hostile_wasm().display()
    )
}

fn standard_host() -> Env {
    let mut tools = String::new();
    tools += &entry("ok", "{}");
    tools += &entry("bad_update", "{}");
    tools += &entry("counter", "{}");
    tools += &entry("spin", "{timeout_s: 0.5}");
    tools += &entry("alloc", "{memory_mb: 32}");
    tools += &entry("read", "{filesystem: user-data}");
    tools += &entry("write", "{filesystem: user-data}");
    tools += &entry("symlink_escape", "{filesystem: user-data}");
    tools += &entry("env", "{env: [TOOLHOST_TEST_GRANTED]}");
    tools += &entry("connect", "{}");
    tools += &entry("panic", "{}");
    tools += &entry("flood", "{output_bytes: 1000, memory_mb: 64}");
    let env = host_with(&tools);
    let errors: Vec<_> = env.host.problems().iter().filter(|p| p.severity == Severity::Error).collect();
    assert!(errors.is_empty(), "{errors:?}");
    env
}

#[tokio::test]
async fn infinite_loop_stops_within_timeout_plus_100ms() {
    let env = standard_host();
    // Wall time on a shared 2-core machine is noisy: the bound must hold in the best of three.
    let mut best = Duration::MAX;
    for _ in 0..3 {
        let start = Instant::now();
        let (text, err) = call(&env.host, "spin", json!({})).await;
        let elapsed = start.elapsed();
        assert!(err, "{text}");
        assert!(text.starts_with("Error: Tool 'spin' failed with TimeoutError:"), "{text}");
        assert!(text.contains("timed out after 500ms"), "{text}");
        assert!(elapsed >= Duration::from_millis(490), "stopped too early: {elapsed:?}");
        best = best.min(elapsed);
        if best < Duration::from_millis(600) {
            break;
        }
    }
    assert!(best < Duration::from_millis(600), "stopped after {best:?}");
    assert_ok_still_works(&env.host).await;
}

#[tokio::test]
async fn memory_bomb_stops_at_its_limit() {
    let env = standard_host();
    let (text, err) = call(&env.host, "alloc", json!({})).await;
    assert!(err && text.contains("memory limit of 32 MiB"), "{text}");
    assert!(text.contains("MemoryError"), "{text}");
    assert_ok_still_works(&env.host).await;
}

#[tokio::test]
async fn reads_outside_the_sandbox_fail() {
    let env = standard_host();
    // A file that exists on the host, outside the thread.
    let outside = env.data.join("secret.txt");
    std::fs::create_dir_all(&env.data).unwrap();
    std::fs::write(&outside, "host secret").unwrap();
    for path in [
        "/mnt/user-data/workspace/../../../secret.txt".to_string(),
        "/mnt/user-data/workspace/../../../../../../etc/passwd".to_string(),
        "/etc/passwd".to_string(),
        "../secret.txt".to_string(),
        outside.display().to_string(),
    ] {
        let (text, err) = call(&env.host, "read", json!({"path": path})).await;
        assert!(err && text.starts_with("denied"), "{path}: {text}");
        assert!(!text.contains("host secret") && !text.contains("root:"), "{path}: {text}");
    }
    // Inside works.
    let ws = env.host.thread_paths("t1").unwrap().workspace();
    std::fs::write(ws.join("in.txt"), "inside").unwrap();
    let (text, err) = call(&env.host, "read", json!({"path": "/mnt/user-data/workspace/in.txt"})).await;
    assert!(!err && text.contains("inside"), "{text}");
    // A symlink inside the workspace that points out is not followed.
    std::os::unix::fs::symlink(&outside, ws.join("link.txt")).unwrap();
    std::os::unix::fs::symlink("/etc/passwd", ws.join("passwd")).unwrap();
    for p in ["/mnt/user-data/workspace/link.txt", "/mnt/user-data/workspace/passwd"] {
        let (text, err) = call(&env.host, "symlink_escape", json!({"path": p})).await;
        assert!(err && text.starts_with("denied"), "{p}: {text}");
    }
    // Writing outside fails too; nothing appears on the host.
    let (text, err) = call(&env.host, "write", json!({"path": "/mnt/user-data/workspace/../../../pwned.txt"})).await;
    assert!(err, "{text}");
    assert!(!env.data.join("pwned.txt").exists());
    assert_ok_still_works(&env.host).await;
}

#[tokio::test]
async fn host_env_is_invisible_unless_granted() {
    std::env::set_var("TOOLHOST_TEST_SECRET", "do-not-leak");
    std::env::set_var("TOOLHOST_TEST_GRANTED", "granted-value");
    let env = standard_host();
    let (text, err) = call(&env.host, "env", json!({"name": "TOOLHOST_TEST_SECRET"})).await;
    assert!(err && !text.contains("do-not-leak"), "{text}");
    assert!(!text.contains("PATH") && !text.contains("HOME"), "no host vars at all: {text}");
    let (text, err) = call(&env.host, "env", json!({"name": "TOOLHOST_TEST_GRANTED"})).await;
    assert!(!err && text.contains("granted-value"), "{text}");
    assert_ok_still_works(&env.host).await;
}

#[tokio::test]
async fn ungranted_network_fails() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let env = standard_host();
    let (text, err) = call(&env.host, "connect", json!({"addr": addr.to_string()})).await;
    assert!(err && text.starts_with("denied"), "{text}");
    listener.set_nonblocking(true).unwrap();
    assert!(listener.accept().is_err(), "nothing connected");
    assert_ok_still_works(&env.host).await;
}

#[tokio::test]
async fn panic_is_an_error_result() {
    let env = standard_host();
    let (text, err) = call(&env.host, "panic", json!({})).await;
    assert!(err, "{text}");
    assert!(text.starts_with("Error: Tool 'panic' failed with RuntimeError:"), "{text}");
    assert!(text.contains("hostile component panicked on purpose"), "{text}");
    assert_ok_still_works(&env.host).await;
}

#[tokio::test]
async fn output_over_the_cap_is_refused() {
    let env = standard_host();
    let (text, err) = call(&env.host, "flood", json!({"bytes": 5000})).await;
    assert!(err && text.contains("over its limit of 1000 bytes"), "{text}");
    let (text, err) = call(&env.host, "flood", json!({"bytes": 999})).await;
    assert!(!err && text.len() == 999);
    assert_ok_still_works(&env.host).await;
}

#[tokio::test]
async fn bad_arguments_name_what_is_wrong() {
    let env = standard_host();
    let (text, err) = call(&env.host, "read", json!({"file": "x"})).await;
    assert!(err && text.contains("missing field `path`"), "{text}");
    let (text, err) = call(&env.host, "nope", json!({})).await;
    assert!(err && text.contains("nope is not a valid tool"), "{text}");
}

#[tokio::test]
async fn calls_run_in_fresh_instances_concurrently() {
    let env = standard_host();
    let calls: Vec<(String, Value, Option<String>)> = (0..8).map(|_| ("ok".to_string(), json!({}), None)).collect();
    let results = env.host.call_turn(&AssemblyRequest::default(), "t1", calls).await.unwrap();
    assert_eq!(results.len(), 8);
    assert!(results.iter().all(|r| r.outcome.text_content() == "ok"));
}

#[tokio::test]
async fn digest_pin_is_checked_before_compiling() {
    let wasm = hostile_wasm();
    let bytes = std::fs::read(&wasm).unwrap();
    use sha2::Digest;
    let good = hex::encode(sha2::Sha256::digest(&bytes));
    let bad = "0".repeat(64);
    let yaml = format!(
        "  - {{name: ok, group: g, use: \"{p}@sha256:{good}:ok\"}}\n  - {{name: pinned_bad, group: g, use: \"{p}@sha256:{bad}:ok\"}}\n",
        p = wasm.display()
    );
    let env = host_with(&yaml);
    let errors: Vec<_> = env.host.problems().iter().filter(|p| p.severity == Severity::Error).collect();
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(
        errors[0].message.contains("pinned_bad")
            && errors[0].message.contains(&bad)
            && errors[0].message.contains(&good),
        "{}",
        errors[0].message
    );
    let tools = env.host.get_available_tools(&AssemblyRequest::default()).await;
    let names: Vec<_> =
        tools.tools.iter().filter(|t| t.spec().group.is_some()).map(|t| t.spec().name.clone()).collect();
    assert_eq!(names, ["ok"], "only the correctly pinned config tool assembles");
}

#[tokio::test]
async fn second_start_compiles_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    let component = toolhost::config::ComponentRef::File { path: hostile_wasm(), sha256: None };
    let rt1 = toolhost::runtime::Runtime::new(Some(cache.clone())).unwrap();
    assert!(rt1.load(&component, &|_| None).unwrap().compiled);
    let rt2 = toolhost::runtime::Runtime::new(Some(cache.clone())).unwrap();
    let loaded = rt2.load(&component, &|_| None).unwrap();
    assert!(!loaded.compiled, "the second runtime loaded from the cache");
    assert!(loaded.tools.iter().any(|t| t.name == "ok"));
    drop(loaded);
    drop(rt2);
    // A corrupt artifact is discarded and recompiled, not trusted. (Replaced by rename, as the
    // cache itself writes: artifacts are memory-mapped, so nothing rewrites one in place.)
    for entry in std::fs::read_dir(&cache).unwrap() {
        let path = entry.unwrap().path();
        let tmp = path.with_extension("tmp");
        std::fs::write(&tmp, b"garbage").unwrap();
        std::fs::rename(&tmp, &path).unwrap();
    }
    let rt3 = toolhost::runtime::Runtime::new(Some(cache)).unwrap();
    assert!(rt3.load(&component, &|_| None).unwrap().compiled);
}

#[tokio::test]
async fn malformed_result_is_an_error_result() {
    let env = standard_host();
    let r = env.host.call(&AssemblyRequest::default(), "t1", "bad_update", json!({}), None).await.unwrap();
    let text = r.outcome.text_content();
    assert!(r.outcome.is_error(), "{text}");
    assert!(text.contains("returned todos that are not a JSON array"), "{text}");
    assert!(env.host.thread_state("t1").await.unwrap().todos.is_none(), "nothing of the bad update was applied");
    assert_ok_still_works(&env.host).await;
}

#[tokio::test]
async fn no_state_survives_between_calls() {
    let env = standard_host();
    // Pooled memory slots stay resident between calls; wasmtime must still hand every call a
    // pristine instance: the guest's static counter starts at zero each time.
    for thread in ["t1", "t1", "t2", "t1"] {
        let r = env.host.call(&AssemblyRequest::default(), thread, "counter", json!({}), None).await.unwrap();
        assert_eq!(r.outcome.text_content(), "call 1");
    }
    let calls: Vec<(String, Value, Option<String>)> =
        (0..6).map(|_| ("counter".to_string(), json!({}), None)).collect();
    for r in env.host.call_turn(&AssemblyRequest::default(), "t3", calls).await.unwrap() {
        assert_eq!(r.outcome.text_content(), "call 1");
    }
}
