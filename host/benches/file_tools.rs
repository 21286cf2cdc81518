//! File-tool benchmarks (BENCHMARKS.md, "File tools"): the per-call latency of DeerFlow's six
//! file tools through `Toolhost::call` on the conformance fixture (~480 entries), set against
//! DeerFlow's own figures (spec/performance.md); and, when `GREP_TREE_DATA` names a data dir
//! prepared by `scripts/bench-grep.sh`, `grep` over its ~100 MB tree. Criterion reports its
//! estimate; a plain loop of `P99_CALLS` calls gives the median and p99.
//! Run with `cargo bench -p toolhost --bench file_tools`.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use criterion::{criterion_group, Criterion};
use serde_json::{json, Value};
use toolhost::assembly::AssemblyRequest;
use toolhost::{HostOptions, Toolhost};

/// The vector helpers the e2e test uses: the same fixture tree.
#[allow(dead_code)]
#[path = "../../tests/support/sandbox_fs_vectors.rs"]
mod vectors;

const VECTORS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/conformance/sandbox_fs.json");
const THREAD: &str = "bench";
/// Calls in the timed loop that gives median and p99.
const P99_CALLS: usize = 300;
const WS: &str = "/mnt/user-data/workspace";

/// One benchmarked call and DeerFlow 2.1's median for it (spec/performance.md), in ms.
struct Op {
    name: &'static str,
    tool: &'static str,
    args: Value,
    deerflow_ms: f64,
}

fn ops() -> Vec<Op> {
    vec![
        Op {
            name: "read_file small",
            tool: "read_file",
            args: json!({"path": format!("{WS}/README.md")}),
            deerflow_ms: 0.30,
        },
        Op {
            name: "read_file 100-200 of 1.2 MB",
            tool: "read_file",
            args: json!({"path": format!("{WS}/data/big.txt"), "start_line": 100, "end_line": 200}),
            deerflow_ms: 0.33,
        },
        Op {
            name: "write_file small",
            tool: "write_file",
            args: json!({"path": format!("{WS}/bench_out.txt"), "content": "hello from the benchmark\n"}),
            deerflow_ms: 0.40,
        },
        Op { name: "ls workspace", tool: "ls", args: json!({"path": WS}), deerflow_ms: 12.0 },
        Op { name: "glob **/*.py", tool: "glob", args: json!({"pattern": "**/*.py", "path": WS}), deerflow_ms: 22.0 },
        Op { name: "grep TODO", tool: "grep", args: json!({"pattern": "TODO", "path": WS}), deerflow_ms: 64.0 },
    ]
}

struct Bench {
    _dir: tempfile::TempDir,
    host: Toolhost,
    rt: tokio::runtime::Runtime,
}

/// A host with the vectors' config (read-before-write off: DeerFlow's figures are the tools
/// alone) and the fixture tree in thread `bench`.
fn setup() -> Bench {
    let dir = tempfile::tempdir().expect("tempdir");
    let v = vectors::load(VECTORS);
    let skills = dir.path().join("skills");
    vectors::build_skills(&v, &skills);
    let yaml = v["environment"]["config_yaml"]
        .as_str()
        .expect("config_yaml")
        .replace("{SKILLS_DIR}", &skills.display().to_string())
        + "read_before_write:\n  enabled: false\n";
    let config = dir.path().join("config.yaml");
    std::fs::write(&config, yaml).expect("write config");
    let host = open(&config, &dir.path().join("data"), dir.path());
    host.thread_fs(THREAD).expect("thread fs").ensure_tool_dirs().expect("thread dirs");
    let paths = host.thread_paths(THREAD).expect("paths");
    vectors::build_fixture(&v, &paths.root);
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
    Bench { _dir: dir, host, rt }
}

fn open(config: &Path, data: &Path, scratch: &Path) -> Toolhost {
    // An explicit, empty extensions config: no MCP servers, no lookup beside config.yaml.
    let extensions = scratch.join("extensions_config.json");
    std::fs::write(&extensions, r#"{"mcpServers": {}}"#).expect("write extensions");
    // `FILE_TOOLS_CACHE`: a lasting precompile cache; a component loaded from it is a mapped
    // file, so `perf report` can name the wasm functions (profiling the grep path).
    let host = Toolhost::open_blocking(
        HostOptions::new(config.to_path_buf())
            .data_dir(data.to_path_buf())
            .cache_dir(Some(
                std::env::var_os("FILE_TOOLS_CACHE").map(PathBuf::from).unwrap_or_else(|| scratch.join("cache")),
            ))
            .extensions(Some(extensions)),
    )
    .expect("open host");
    assert!(host.problems().iter().all(|p| p.severity != toolhost::Severity::Error), "{:?}", host.problems());
    host
}

fn call(b: &Bench, thread: &str, tool: &str, args: &Value) -> String {
    let mut a = args.clone();
    a["description"] = json!("bench");
    let r = b.rt.block_on(b.host.call(&AssemblyRequest::default(), thread, tool, a, None)).expect("call");
    let text = r.outcome.text_content();
    assert!(!r.outcome.is_error(), "{tool}: {text}");
    text
}

fn per_call(c: &mut Criterion) {
    let b = setup();
    let mut group = c.benchmark_group("file_tools");
    for op in ops() {
        group.bench_function(op.name, |bench| bench.iter(|| std::hint::black_box(call(&b, THREAD, op.tool, &op.args))));
    }
    group.finish();
}

/// `(median, p99)` of `n` timed calls, in ms.
fn timed(b: &Bench, thread: &str, tool: &str, args: &Value, n: usize) -> (f64, f64) {
    let mut times: Vec<f64> = (0..n)
        .map(|_| {
            let t = Instant::now();
            std::hint::black_box(call(b, thread, tool, args));
            t.elapsed().as_secs_f64() * 1000.0
        })
        .collect();
    times.sort_by(f64::total_cmp);
    let at = |q: f64| times[((times.len() as f64 * q).ceil() as usize).clamp(1, times.len()) - 1];
    (at(0.5), at(0.99))
}

fn proc_status_kib(key: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with(key)).and_then(|l| l.split_whitespace().nth(1)?.parse().ok()))
        .unwrap_or(0)
}

fn percentiles() {
    let b = setup();
    println!(
        "\nfile tools through Toolhost::call, {P99_CALLS} calls each (fixture: tests/conformance/sandbox_fs.json)"
    );
    println!("{:<30} {:>10} {:>10} {:>12} {:>10}", "operation", "median ms", "p99 ms", "DeerFlow ms", "speed-up");
    for op in ops() {
        let (median, p99) = timed(&b, THREAD, op.tool, &op.args, P99_CALLS);
        println!(
            "{:<30} {median:>10.3} {p99:>10.3} {:>12.2} {:>9.1}x",
            op.name,
            op.deerflow_ms,
            op.deerflow_ms / median
        );
    }
    println!("peak RSS (VmHWM): {} KiB", proc_status_kib("VmHWM"));
}

/// `FILE_TOOLS_BREAKDOWN=1`: where a small `read_file` spends its time, layer by layer, in one
/// run: the runtime alone (fresh instance of sandbox-fs, with and without the thread's preopens)
/// next to the whole `Toolhost::call`.
fn breakdown() {
    use toolhost::runtime::{exec_call, CallRequest, CapabilitySet, FilesGrant, Preopen, PreopenDir, Runtime};
    if std::env::var_os("FILE_TOOLS_BREAKDOWN").is_none() && std::env::var_os("FILE_TOOLS_BREAKDOWN_ONLY").is_none() {
        return;
    }
    let b = setup();
    let paths = b.host.thread_paths(THREAD).expect("paths");
    let rt = Runtime::new(std::env::var_os("FILE_TOOLS_CACHE").map(PathBuf::from)).expect("runtime");
    let fs = rt
        .load(&toolhost::runtime::ComponentRef::Bundled("sandbox-fs".into()), &toolhost::bundled::bytes)
        .expect("load");
    let preopens = vec![
        Preopen {
            host: PreopenDir::Path(paths.workspace()),
            guest: "/mnt/user-data/workspace".into(),
            read_only: false,
        },
        Preopen { host: PreopenDir::Path(paths.uploads()), guest: "/mnt/user-data/uploads".into(), read_only: false },
        Preopen { host: PreopenDir::Path(paths.outputs()), guest: "/mnt/user-data/outputs".into(), read_only: false },
        Preopen { host: PreopenDir::Path(paths.acp_workspace()), guest: "/mnt/acp-workspace".into(), read_only: true },
    ];
    let caps = CapabilitySet { fs: FilesGrant::UserData, ..CapabilitySet::default() };
    let req = |args: Value| CallRequest {
        thread_id: THREAD.into(),
        tool_call_id: "c".into(),
        ..CallRequest::new("read_file", args.to_string())
    };
    let small = req(json!({"description": "d", "path": format!("{WS}/README.md")}));
    let ranged =
        req(json!({"description": "d", "path": format!("{WS}/data/big.txt"), "start_line": 100, "end_line": 200}));
    let not_found = req(json!({"description": "d", "path": format!("{WS}/no-such-file")}));
    let median_us = |f: &dyn Fn()| {
        let mut t: Vec<f64> = (0..2000)
            .map(|_| {
                let s = Instant::now();
                f();
                s.elapsed().as_secs_f64() * 1e6
            })
            .collect();
        t.sort_by(f64::total_cmp);
        t[t.len() / 2]
    };
    let none = CapabilitySet::default();
    println!("\nread_file small, layer by layer (medians of 2000 calls, µs)");
    type Row<'a> = (&'a str, Box<dyn Fn() + 'a>);
    let (rt2, fs2, caps2, pre2, small2) = (rt.clone(), fs.clone(), caps.clone(), preopens.clone(), small.clone());
    let host_rt = &b.rt;
    let handed_off = move || {
        let (rt, fs, caps, pre, small) = (rt2.clone(), fs2.clone(), caps2.clone(), pre2.clone(), small2.clone());
        host_rt.block_on(async move {
            tokio::task::spawn_blocking(move || drop(exec_call(&rt, &fs, &caps, &pre, &small))).await.expect("join")
        })
    };
    let rows: [Row; 7] = [
        ("runtime, no preopens (not found)", Box::new(|| drop(exec_call(&rt, &fs, &none, &[], &not_found)))),
        ("runtime, 4 preopens, not found", Box::new(|| drop(exec_call(&rt, &fs, &caps, &preopens, &not_found)))),
        ("runtime, 4 preopens, read", Box::new(|| drop(exec_call(&rt, &fs, &caps, &preopens, &small)))),
        ("same, via spawn_blocking on the host's runtime", Box::new(handed_off)),
        (
            "runtime, 4 preopens, lines 100-200 of 1.2 MB",
            Box::new(|| drop(exec_call(&rt, &fs, &caps, &preopens, &ranged))),
        ),
        (
            "Toolhost::call read_file",
            Box::new(|| drop(call(&b, THREAD, "read_file", &json!({"path": format!("{WS}/README.md")})))),
        ),
        (
            "Toolhost::call write_file",
            Box::new(|| {
                drop(call(&b, THREAD, "write_file", &json!({"path": format!("{WS}/bench_out.txt"), "content": "x\n"})))
            }),
        ),
    ];
    for (name, f) in rows.iter() {
        println!("  {name:<40} {:>8.1}", median_us(f.as_ref()));
    }
    // `FILE_TOOLS_PROFILE_RANGED=SECONDS`: then repeat the ranged read for that long, for a
    // profiler to attach to (`perf record -p`) once "profiling" is printed.
    if let Some(secs) = std::env::var("FILE_TOOLS_PROFILE_RANGED").ok().and_then(|s| s.parse::<f64>().ok()) {
        println!("profiling the ranged read for {secs} s");
        let until = Instant::now() + Duration::from_secs_f64(secs);
        while Instant::now() < until {
            drop(exec_call(&rt, &fs, &caps, &preopens, &ranged));
        }
    }
}

/// `grep` over the tree `scripts/bench-grep.sh` wrote to
/// `$GREP_TREE_DATA/threads/grep/user-data/workspace`, next to `rg -j1` on the same tree, run
/// after run (each toolhost call right after an `rg` process), for each pattern of
/// `GREP_PATTERNS` (newline-separated; default `TODO`, `TODO|FIXME`, `fn\s+\w+_test`),
/// `GREP_RUNS` times (default 5). `rg` gets DeerFlow's skips (`-i`, `--max-filesize 1000000`);
/// its time includes starting the process.
fn grep_tree() {
    let Some(data) = std::env::var_os("GREP_TREE_DATA") else { return };
    let data = Path::new(&data);
    let runs: usize = std::env::var("GREP_RUNS").ok().and_then(|r| r.parse().ok()).unwrap_or(5);
    let patterns: Vec<String> = std::env::var("GREP_PATTERNS")
        .map(|p| p.lines().map(str::to_string).filter(|l| !l.is_empty()).collect())
        .unwrap_or_else(|_| vec!["TODO".into(), "TODO|FIXME".into(), r"fn\s+\w+_test".into()]);
    let rg = std::env::var("GREP_RG").unwrap_or_else(|_| "rg".into());
    let scratch = tempfile::tempdir().expect("tempdir");
    let config = scratch.path().join("config.yaml");
    std::fs::write(
        &config,
        "tools:\n  - {name: grep, group: \"file:read\", use: \"deerflow.sandbox.tools:grep_tool\", max_results: 500}\nread_before_write:\n  enabled: false\n",
    )
    .expect("write config");
    let host = open(&config, data, scratch.path());
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
    let b = Bench { _dir: scratch, host, rt };
    let ws = data.join("threads/grep/user-data/workspace");
    let median = |t: &mut Vec<f64>| {
        t.sort_by(f64::total_cmp);
        t[t.len() / 2]
    };
    for pattern in patterns {
        let args = json!({"pattern": pattern, "path": WS, "max_results": 500});
        let rg_run = || {
            let out = std::process::Command::new(&rg)
                .args(["-j1", "-i", "-n", "--max-filesize", "1000000", "-e", &pattern])
                .arg(&ws)
                .output()
                .expect("run rg (scripts/bench-grep.sh installs it)");
            String::from_utf8_lossy(&out.stdout).lines().count()
        };
        // Warm-up, and the two answers' sizes side by side.
        let rg_lines = rg_run();
        let first = call(&b, "grep", "grep", &args);
        let (mut th, mut rgt) = (Vec::new(), Vec::new());
        for _ in 0..runs {
            let t = Instant::now();
            std::hint::black_box(rg_run());
            rgt.push(t.elapsed().as_secs_f64() * 1000.0);
            let t = Instant::now();
            std::hint::black_box(call(&b, "grep", "grep", &args));
            th.push(t.elapsed().as_secs_f64() * 1000.0);
        }
        let list = |t: &[f64]| t.iter().map(|t| format!("{t:.0}")).collect::<Vec<_>>().join(", ");
        println!(
            "\ngrep {pattern:?}: toolhost `{}`, rg {rg_lines} lines\n  toolhost runs (ms): {}\n  rg -j1   runs (ms): {}",
            first.lines().next().unwrap_or_default(),
            list(&th),
            list(&rgt)
        );
        let (t, r) = (median(&mut th), median(&mut rgt));
        println!("GREP_RESULT pattern={pattern:?} toolhost_ms={t:.1} rg_ms={r:.1} ratio={:.2}", t / r);
    }
}

/// `GLOB_SCALE=1000,10000,100000`: `glob **/*.py` over trees of that many files (directories of
/// 100, one file in 1 000 a `.py`, so the whole tree is walked and few paths printed), to see
/// whether the time grows linearly with the tree. The same trees as scripts/bench-deerflow.py's.
fn glob_scale() {
    let Ok(sizes) = std::env::var("GLOB_SCALE") else { return };
    let b = setup();
    let ws = b.host.thread_paths(THREAD).expect("paths").workspace();
    println!("\nglob **/*.py through Toolhost::call, by tree size (median of the runs)");
    for n in sizes.split(',').filter_map(|s| s.trim().parse::<usize>().ok()) {
        let root = ws.join(format!("tree{n}"));
        for i in 0..n {
            let dir = root.join(format!("pkg{:03}/mod{}", i / 1000, (i / 100) % 10));
            if i % 100 == 0 {
                std::fs::create_dir_all(&dir).expect("mkdir");
            }
            let name = if i % 1000 == 0 { format!("f{i:06}.py") } else { format!("f{i:06}.txt") };
            std::fs::write(dir.join(name), "x\n").expect("write");
        }
        let args = json!({"pattern": "**/*.py", "path": format!("{WS}/tree{n}"), "max_results": 1000});
        let runs: usize =
            std::env::var("GLOB_RUNS").ok().and_then(|r| r.parse().ok()).unwrap_or((30_000 / n).clamp(5, 100));
        eprintln!("glob tree of {n} files written; timing {runs} runs");
        let (median, _) = timed(&b, THREAD, "glob", &args, runs);
        println!(
            "GLOB_SCALE files={n} median_ms={median:.3} runs={runs} us_per_file={:.3}",
            median * 1000.0 / n as f64
        );
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    targets = per_call
}

fn main() {
    // Under `cargo test --benches` (no `--bench` flag) criterion runs each benchmark once as a
    // smoke test; the timed loops only run under `cargo bench`.
    let bench_mode = std::env::args().any(|a| a == "--bench");
    // `GREP_ONLY=1` (the grep script): skip the per-call figures.
    if std::env::var_os("FILE_TOOLS_BREAKDOWN_ONLY").is_some() {
        breakdown();
        return;
    }
    if std::env::var_os("GREP_ONLY").is_none() {
        benches();
        if bench_mode {
            percentiles();
            breakdown();
        }
    }
    grep_tree();
    glob_scale();
}
