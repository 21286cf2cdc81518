//! The subagent loop's own cost per model turn (BENCHMARKS.md, "Subagents"): a `task` whose
//! model (a loopback chat-completions server answering at once) calls `read_file` for
//! `TURNS` turns and then answers. The server's time (first byte read to last byte written) is
//! measured inside the server and taken out; what is left is toolhost's: the HTTP client, the
//! request and reply JSON, the subagent's tool assembly, and the tool call through the pipeline.
//! The same `read_file` called directly through the host is timed too, so the loop's overhead
//! without the tool shows. Medians of `RUNS` runs. Run with `cargo bench -p toolhost --bench subagent`.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use toolhost::{AssemblyRequest, HostOptions, Toolhost};

#[path = "../../tests/support/chat_server.rs"]
mod chat_server;
use chat_server::{answer, tool_calls, ChatServer};

const TURNS: usize = 10;
const RUNS: usize = 30;

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    rt.block_on(run());
}

async fn run() {
    let server = ChatServer::start(Arc::new(|_, req: &Value| {
        let len = req["messages"].as_array().map(|m| m.len()).unwrap_or(0);
        if len < 2 + 2 * TURNS {
            // A different call each turn: identical ones would trip the loop guard.
            let args = format!(r#"{{"description": "read {len}", "path": "/mnt/user-data/workspace/notes.txt"}}"#);
            tool_calls(&[("read_file", &args)])
        } else {
            answer("done")
        }
    }))
    .await;
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.yaml");
    std::fs::write(
        &config,
        format!(
            "models:\n  - {{name: m, use: 'langchain_openai:ChatOpenAI', model: m, base_url: '{}', api_key: k}}\ntools:\n  - {{name: read_file, group: 'file:read', use: 'deerflow.sandbox.tools:read_file_tool'}}\n",
            server.base_url
        ),
    )
    .unwrap();
    let opts = HostOptions::new(&config).data_dir(dir.path().join("data"));
    let host = Toolhost::open(opts).await.unwrap().into_shared();
    let fs = host.thread_fs("t1").unwrap();
    fs.ensure_tool_dirs().unwrap();
    std::fs::write(fs.paths().workspace().join("notes.txt"), "the answer is 42\n").unwrap();
    let req = AssemblyRequest { subagent_enabled: true, ..Default::default() };
    let args = json!({"description": "d", "prompt": "p", "subagent_type": "general-purpose"});

    let (mut per_turn, mut server_share, mut tool) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..RUNS + 3 {
        // A thread per run: a run's delegations are capped (`max_total_per_run`).
        let thread = format!("b{i}");
        let fs = host.thread_fs(&thread).unwrap();
        fs.ensure_tool_dirs().unwrap();
        std::fs::write(fs.paths().workspace().join("notes.txt"), "the answer is 42\n").unwrap();
        let busy = server.busy_ns.load(Ordering::Relaxed);
        let t = Instant::now();
        let r = host.call(&req, &thread, "task", args.clone(), None).await.unwrap();
        let total = t.elapsed();
        assert_eq!(r.outcome.text_content(), "Task Succeeded. Result: done");
        let served = Duration::from_nanos(server.busy_ns.load(Ordering::Relaxed) - busy);
        // The first runs warm the caches (assembly, instance pool, connections).
        if i >= 3 {
            let turns = (TURNS + 1) as u32;
            per_turn.push((total - served) / turns);
            server_share.push(served / turns);
        }
    }
    let read = json!({"description": "read", "path": "/mnt/user-data/workspace/notes.txt"});
    for _ in 0..RUNS {
        let t = Instant::now();
        let r = host.call(&AssemblyRequest::default(), "t1", "read_file", read.clone(), None).await.unwrap();
        tool.push(t.elapsed());
        assert!(!r.outcome.is_error());
    }
    let (per_turn, server_share, tool) = (median(per_turn), median(server_share), median(tool));
    println!("subagent loop, {TURNS} read_file turns + the answer, median of {RUNS} runs:");
    println!("  toolhost's time per model turn (server's time taken out): {:.3} ms", per_turn.as_secs_f64() * 1e3);
    println!("  the server's time per turn: {:.3} ms", server_share.as_secs_f64() * 1e3);
    println!("  read_file through the host alone: {:.3} ms", tool.as_secs_f64() * 1e3);
    println!(
        "  loop overhead per turn without the tool call: {:.3} ms",
        (per_turn.as_secs_f64() - tool.as_secs_f64() * TURNS as f64 / (TURNS + 1) as f64) * 1e3
    );
}
