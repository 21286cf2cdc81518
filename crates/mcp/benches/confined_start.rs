//! What confinement costs an MCP stdio server: the start (spawn, initialize, tools/list) and a
//! tool call's round trip through the server, confined (toolhost-confine with the default
//! grants: proxy network, pid namespace, read-only view, cgroup caps) against the same server
//! started as a plain subprocess, measured alternately in one run so the machine's load falls on
//! both alike. The server is `tests/fixtures/tiny_mcp_server.py` (no imports beyond the standard
//! library), so what is measured is the launch, not the server's own start.
//!
//! `cargo bench -p toolhost-mcp --bench confined_start` (needs scripts/install-peers.sh's venv).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use toolhost_confine::process::{Confiner, Grants, Launch, LaunchPolicy, ProcessSpec};
use toolhost_core::{CallContext, ThreadFs, ThreadState, Tool};
use toolhost_mcp::{config, ConfigSource, McpManager};

const STARTS: usize = 15;
const CALLS: usize = 300;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn manager(python: &str, server: &str, policy: Option<LaunchPolicy>) -> McpManager {
    let doc = json!({"mcpServers": {"tiny": {"type": "stdio", "command": python, "args": [server]}}});
    let cfg = config::parse_with_env(doc.to_string().as_bytes(), &Default::default(), &mut |_| {}).expect("config");
    let m = McpManager::new(ConfigSource::Fixed(cfg)).with_env(toolhost_mcp::Environment::from_process());
    match policy {
        Some(p) => m.with_launch_policy(p),
        None => m,
    }
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn main() {
    let python = root().join(".peers/venv/bin/python");
    assert!(python.exists(), "run scripts/install-peers.sh first");
    let python = python.to_string_lossy().into_owned();
    let server = root().join("tests/fixtures/tiny_mcp_server.py").to_string_lossy().into_owned();
    let dir = tempfile::tempdir().expect("tempdir");
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
    let confiner = Arc::new(
        Confiner::new(ProcessSpec {
            label: "MCP server 'tiny'".into(),
            setting: "toolhost.mcp_servers.tiny".into(),
            command: python.clone(),
            args: vec![server.clone()],
            path_env: std::env::var("PATH").ok(),
            env: Vec::new(),
            home: dir.path().join("home"),
            grants: Grants::default(),
            user: None,
        })
        .expect("confinement is available"),
    );
    let launch = Launch::Confined(confiner.clone());
    let policy: LaunchPolicy = Arc::new(move |_| launch.clone());
    rt.block_on(async {
        let first = Instant::now();
        confiner.self_test().await.expect("self-test");
        let self_test = first.elapsed();
        let (mut plain, mut confined) = (Vec::new(), Vec::new());
        for _ in 0..STARTS {
            for (times, p) in [(&mut plain, None), (&mut confined, Some(policy.clone()))] {
                let m = manager(&python, &server, p);
                let t = Instant::now();
                let tools = m.tools().await.expect("tools");
                assert_eq!(tools.tools.len(), 1, "{:?}", tools.warnings);
                times.push(t.elapsed());
            }
        }
        let ctx = |t: &str| {
            let fs = ThreadFs::open(&dir.path().join("data"), t).expect("thread");
            fs.ensure_tool_dirs().expect("dirs");
            CallContext::new(Arc::new(fs), "c", Arc::new(ThreadState::default()))
        };
        let mut round_trips = [Vec::new(), Vec::new()];
        let managers = [manager(&python, &server, None), manager(&python, &server, Some(policy.clone()))];
        let mut tools = Vec::new();
        for m in &managers {
            tools.push(m.tools().await.expect("tools").tools[0].clone());
        }
        let ctxs = [ctx("plain"), ctx("confined")];
        for (i, tool) in tools.iter().enumerate() {
            for _ in 0..20 {
                tool.call(&ctxs[i], json!({"text": "warm"})).await;
            }
        }
        for _ in 0..CALLS {
            for (i, tool) in tools.iter().enumerate() {
                let t = Instant::now();
                let out = tool.call(&ctxs[i], json!({"text": "x"})).await;
                round_trips[i].push(t.elapsed());
                assert_eq!(out.text_content(), "x");
            }
        }
        // Where a confined start's time goes: preparing the launch in toolhost (cgroup, rules,
        // the proxy), and starting a process under it (`true`: namespaces, the read-only view,
        // a fresh /proc, Landlock, seccomp, the supervisor's forks) against a plain `true`.
        let (mut prep, mut spawn_confined, mut spawn_plain) = (Vec::new(), Vec::new(), Vec::new());
        let work = dir.path().join("work");
        std::fs::create_dir_all(&work).expect("work dir");
        for _ in 0..STARTS {
            let t = Instant::now();
            let prepared = confiner.prepare(Some(&work)).await.expect("prepare");
            prep.push(t.elapsed());
            let mut cmd = std::process::Command::new("/bin/true");
            let t = Instant::now();
            let guard = prepared.install(&mut cmd);
            let status = cmd.status().expect("confined true");
            spawn_confined.push(t.elapsed());
            assert!(status.success());
            drop(guard);
            let t = Instant::now();
            assert!(std::process::Command::new("/bin/true").status().expect("true").success());
            spawn_plain.push(t.elapsed());
        }
        // The cgroup move alone, as a start makes it: a fresh tree cgroup, a process moved into
        // it with nothing else moved for a while before (a cgroup v1 move waits for an RCU grace
        // period unless another move just did).
        let mut moves = Vec::new();
        if let Ok(parent) = toolhost_confine::tree::cgroup_parent() {
            for _ in 0..STARTS {
                let limits = Grants::default().limits;
                let (cgroup, procs) = toolhost_confine::tree::Cgroup::create(&parent, limits).expect("cgroup");
                let mut sleeper = std::process::Command::new("/bin/sleep").arg("5").spawn().expect("sleep");
                std::thread::sleep(Duration::from_millis(60));
                let pid = sleeper.id().to_string();
                let t = Instant::now();
                for fd in &procs {
                    let mut f = std::fs::File::from(fd.try_clone().expect("fd"));
                    std::io::Write::write_all(&mut f, pid.as_bytes()).expect("move");
                }
                moves.push(t.elapsed());
                let _ = sleeper.kill();
                let _ = sleeper.wait();
                cgroup.kill();
                cgroup.remove();
            }
        }
        let (p, c) = (median(plain), median(confined));
        let (rp, rc) = (median(round_trips[0].clone()), median(round_trips[1].clone()));
        println!("MCP stdio server start (spawn + initialize + tools/list), median of {STARTS}:");
        println!("  unconfined {:.2} ms, confined {:.2} ms, added {:.2} ms", ms(p), ms(c), ms(c) - ms(p));
        println!("  the first confined start also runs the self-test once: {:.2} ms", ms(self_test));
        println!(
            "  of a confined start: prepare {:.2} ms; `true` confined {:.2} ms against plain {:.2} ms",
            ms(median(prep)),
            ms(median(spawn_confined)),
            ms(median(spawn_plain))
        );
        if !moves.is_empty() {
            println!("  of a confined start: moving a process into its cgroups {:.2} ms", ms(median(moves)));
        }
        println!("tools/call round trip through the server, median of {CALLS}:");
        println!("  unconfined {:.1} us, confined {:.1} us (ratio {:.2})", us(rp), us(rc), us(rc) / us(rp));
    });
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}
