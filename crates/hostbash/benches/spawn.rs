//! Host-bash start overhead (BENCHMARKS.md, "Host bash"): the same command (`true`) spawned
//! plainly — `bash -c` with piped output, as DeerFlow's LocalSandbox does — against a `bash`
//! tool call with confinement off and with full confinement (Landlock, seccomp, capabilities
//! dropped, the read-only mount view, a cgroup per command). Criterion reports its estimate; a
//! plain loop of `CALLS` calls gives the median and p99 of each.
//! Run with `cargo bench -p toolhost-hostbash --bench spawn`.

use std::sync::Arc;
use std::time::Instant;

use criterion::{criterion_group, Criterion};
use serde_json::json;
use toolhost_core::{CallContext, ThreadFs, ThreadState, Tool};
use toolhost_hostbash::{BashConfig, BashTool, ConfineMode, TreeMode};

/// Calls in the timed loop that gives median and p99.
const CALLS: usize = 300;

struct Bench {
    _dir: tempfile::TempDir,
    ctx: CallContext,
    rt: tokio::runtime::Runtime,
}

fn setup() -> Bench {
    let dir = tempfile::tempdir().expect("tempdir");
    let fs = ThreadFs::open(dir.path(), "bench").expect("thread fs");
    fs.ensure_tool_dirs().expect("thread dirs");
    let ctx = CallContext::new(Arc::new(fs), "bench", Arc::new(ThreadState::default()));
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
    Bench { _dir: dir, ctx, rt }
}

fn tool(confine: ConfineMode, tree: TreeMode) -> BashTool {
    let t = BashTool::new(BashConfig { allow_host_bash: true, confine, tree, ..BashConfig::default() });
    t.self_test().expect("the confinement engages");
    t
}

/// `bash -c true` the way an unconfined host spawns it: its own process group, stdin from
/// /dev/null, both pipes read to the end, the exit awaited.
async fn plain_spawn(ctx: &CallContext) {
    use tokio::io::AsyncReadExt;
    let mut child = tokio::process::Command::new("/bin/bash")
        .args(["-c", "true"])
        .current_dir(ctx.paths().workspace())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .process_group(0)
        .spawn()
        .expect("spawn");
    let (mut out, mut err) = (child.stdout.take().expect("stdout"), child.stderr.take().expect("stderr"));
    let (mut a, mut b) = (Vec::new(), Vec::new());
    let _ = tokio::join!(out.read_to_end(&mut a), err.read_to_end(&mut b));
    assert!(child.wait().await.expect("wait").success());
}

async fn tool_call(tool: &BashTool, ctx: &CallContext) {
    let out = tool.call(ctx, json!({"description": "bench", "command": "true"})).await;
    assert_eq!(out.text_content(), "(no output)");
}

/// `(median, p99)` of `n` runs of `f`, in ms.
fn timed(n: usize, mut f: impl FnMut()) -> (f64, f64) {
    let mut times: Vec<f64> = (0..n)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed().as_secs_f64() * 1000.0
        })
        .collect();
    times.sort_by(f64::total_cmp);
    let at = |q: f64| times[((times.len() as f64 * q).ceil() as usize).clamp(1, times.len()) - 1];
    (at(0.5), at(0.99))
}

fn spawn(c: &mut Criterion) {
    let b = setup();
    let off = tool(ConfineMode::Off, TreeMode::Auto);
    let full = tool(ConfineMode::Full, TreeMode::Auto);
    let reaper = tool(ConfineMode::Full, TreeMode::Subreaper);
    let cases: [(&str, &dyn Fn()); 4] = [
        ("plain spawn: bash -c true", &|| b.rt.block_on(plain_spawn(&b.ctx))),
        ("bash tool, confinement off (cgroup only)", &|| b.rt.block_on(tool_call(&off, &b.ctx))),
        ("bash tool, full confinement (cgroup)", &|| b.rt.block_on(tool_call(&full, &b.ctx))),
        ("bash tool, full confinement (subreaper)", &|| b.rt.block_on(tool_call(&reaper, &b.ctx))),
    ];
    let mut group = c.benchmark_group("host_bash");
    for (name, f) in &cases {
        group.bench_function(*name, |bench| bench.iter(f));
    }
    group.finish();
    let mut medians = Vec::new();
    for (name, f) in &cases {
        let (median, p99) = timed(CALLS, f);
        println!("{name}: median {median:.3} ms, p99 {p99:.3} ms ({CALLS} calls)");
        medians.push(median);
    }
    println!(
        "added by full confinement over a plain spawn (medians): {:.3} ms (cgroup), {:.3} ms (subreaper)",
        medians[2] - medians[0],
        medians[3] - medians[0]
    );
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(50);
    targets = spawn
}

fn main() {
    benches();
    Criterion::default().configure_from_args().final_summary();
}
