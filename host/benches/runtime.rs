//! Runtime benchmarks (BENCHMARKS.md, "Runtime"): the per-call overhead of a trivial component
//! tool — alone and through `Toolhost::call` next to a native tool on the same path — what
//! admission to the call queues costs on its own, the peak
//! RSS as calls accumulate, and host start with 20 components, compiling versus from the
//! precompile cache. Run with `cargo bench -p toolhost --bench runtime`.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use criterion::{criterion_group, Criterion};
use serde_json::{json, Value};
use toolhost::assembly::{AssemblyRequest, Builtin, BuiltinCondition};
use toolhost::core::{CallContext, Tool, ToolOutcome, ToolSource, ToolSpec};
use toolhost::runtime::ComponentRef;
use toolhost::runtime::{exec_call, CallRequest, CapabilitySet, LoadedComponent, Runtime};
use toolhost::{HostOptions, Toolhost};

/// Components in the host-start benchmark.
const START_COMPONENTS: usize = 20;

/// What `hello` does, natively: the same greeting from the same arguments.
struct NativeHello {
    spec: ToolSpec,
}

impl NativeHello {
    fn new() -> Self {
        Self {
            spec: ToolSpec {
                name: "native_hello".into(),
                description: "Greet someone by name (native).".into(),
                parameters: json!({"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}),
                group: None,
                source: ToolSource::Other { label: "bench".into() },
            },
        }
    }
}

#[async_trait]
impl Tool for NativeHello {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn call(&self, _ctx: &CallContext, args: Value) -> ToolOutcome {
        #[derive(serde::Deserialize)]
        struct Args {
            name: String,
            #[serde(default)]
            excited: bool,
        }
        match serde_json::from_value::<Args>(args) {
            Ok(a) => ToolOutcome::text(format!("Hello, {}{}", a.name, if a.excited { "!" } else { "." })),
            Err(e) => ToolOutcome::error(format!("Error: {e}")),
        }
    }
}

fn hello_request() -> CallRequest {
    CallRequest::new("hello", r#"{"name":"bench"}"#)
}

fn load_hello(rt: &Runtime) -> Arc<LoadedComponent> {
    rt.load(&ComponentRef::Bundled("hello".into()), &toolhost::bundled::bytes)
        .expect("load the bundled hello component")
}

fn call_hello(rt: &Runtime, hello: &LoadedComponent, caps: &CapabilitySet, req: &CallRequest) {
    let r = exec_call(rt, hello, caps, &[], req).expect("hello call");
    assert_eq!(r.text(), "Hello, bench.");
}

/// (a) The runtime alone: fresh store + instance from the `InstancePre`, WASI context, call, drop.
fn runtime_alone(c: &mut Criterion) {
    let rt = Runtime::new(None).expect("runtime");
    let hello = load_hello(&rt);
    let caps = CapabilitySet::default();
    let req = hello_request();
    eprintln!("pooling allocator: {}", rt.pooling());
    let mut g = c.benchmark_group("runtime");
    g.bench_function("exec_call_hello", |b| b.iter(|| call_hello(&rt, &hello, &caps, &req)));
    // What a host call adds before it runs: a place in its thread's queue and the host's
    // (uncontended), taken and given back.
    let tokio = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("tokio");
    g.bench_function("admit_and_release", |b| {
        b.iter_custom(|iters| {
            tokio.block_on(async {
                let start = Instant::now();
                for _ in 0..iters {
                    drop(rt.admit("t1", Duration::from_secs(30)).await.expect("a free slot"));
                }
                start.elapsed()
            })
        })
    });
    // `RTBENCH_HELLO_WASM=path` adds the same call on another build of hello (e.g. a changed SDK),
    // measured in the same run.
    if let Some(path) = std::env::var_os("RTBENCH_HELLO_WASM") {
        let other = rt
            .load(&ComponentRef::File { path: PathBuf::from(path), sha256: None }, &|_| None)
            .expect("load RTBENCH_HELLO_WASM");
        g.bench_function("exec_call_hello_other_build", |b| b.iter(|| call_hello(&rt, &other, &caps, &req)));
    }
    g.finish();
}

/// A host whose config has `hello` as a component tool, plus the native twin as a builtin.
fn bench_host(dir: &Path, extra_tools: &str) -> Toolhost {
    let config = dir.join("config.yaml");
    std::fs::write(&config, format!("tools:\n  - {{name: hello, group: bench, use: hello}}\n{extra_tools}"))
        .expect("write config");
    let opts = HostOptions::new(config).data_dir(dir.join("data")).cache_dir(Some(dir.join("cache")));
    let mut host = Toolhost::open_blocking(opts).expect("open the host");
    host.add_builtin(Builtin { tool: Arc::new(NativeHello::new()), condition: BuiltinCondition::Always });
    host
}

/// (b) Through `Toolhost::call` (assembly, pipeline, state merge): the component next to a
/// native tool.
fn through_host(c: &mut Criterion) {
    let tokio = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("tokio");
    let dir = tempfile::tempdir().expect("tempdir");
    let host = bench_host(dir.path(), "");
    let req = AssemblyRequest::default();
    let args = json!({"name": "bench"});
    let call = |name: &str, expected: &str| {
        let r = tokio.block_on(host.call(&req, "t1", name, args.clone(), None)).expect("host call");
        assert_eq!(r.outcome.text_content(), expected, "{name}");
    };
    let mut g = c.benchmark_group("toolhost_call");
    g.bench_function("component_hello", |b| b.iter(|| call("hello", "Hello, bench.")));
    g.bench_function("native_hello", |b| b.iter(|| call("native_hello", "Hello, bench.")));
    // What handing a call to a blocking thread and back costs on its own (a component call runs
    // on one so the executor keeps serving): part of the gap between the two above.
    g.bench_function("spawn_blocking_noop", |b| {
        b.iter(|| tokio.block_on(async { tokio::task::spawn_blocking(|| 1u8).await.expect("join") }))
    });
    g.finish();
}

fn proc_status_kib(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.trim_start_matches(':').trim().strip_suffix("kB")?.trim().parse().ok())
        .unwrap_or(0)
}

/// Peak and current RSS after N and after 10 N calls: a flat line means nothing per call is kept.
fn memory() {
    let rt = Runtime::new(None).expect("runtime");
    let hello = load_hello(&rt);
    let caps = CapabilitySet::default();
    let req = hello_request();
    println!("\nmemory (runtime alone, hello; /proc/self/status, whole bench process):");
    println!(
        "  after load:          VmRSS {:>7} KiB  VmHWM {:>7} KiB",
        proc_status_kib("VmRSS"),
        proc_status_kib("VmHWM")
    );
    let mut done = 0;
    for target in [1_000, 10_000, 50_000] {
        while done < target {
            call_hello(&rt, &hello, &caps, &req);
            done += 1;
        }
        println!(
            "  after {target:>6} calls:  VmRSS {:>7} KiB  VmHWM {:>7} KiB",
            proc_status_kib("VmRSS"),
            proc_status_kib("VmHWM")
        );
    }
}

/// A copy of a component with one more custom section, so its sha256 (and cache key) differ.
fn with_custom_section(component: &[u8], name: &str, payload: &[u8]) -> Vec<u8> {
    fn leb(mut n: usize, out: &mut Vec<u8>) {
        loop {
            let byte = (n & 0x7f) as u8;
            n >>= 7;
            if n == 0 {
                out.push(byte);
                return;
            }
            out.push(byte | 0x80);
        }
    }
    let mut body = Vec::new();
    leb(name.len(), &mut body);
    body.extend_from_slice(name.as_bytes());
    body.extend_from_slice(payload);
    let mut out = component.to_vec();
    out.push(0); // custom section id
    leb(body.len(), &mut out);
    out.extend_from_slice(&body);
    out
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// Host start with 20 distinct components: first (compiling into an empty cache) and second
/// (fresh runtime and host, artifacts from the cache), each as the whole `Toolhost::open`.
fn host_start() {
    let dir = tempfile::tempdir().expect("tempdir");
    let hello = toolhost::bundled::bytes("hello").expect("hello is bundled");
    let mut yaml = String::from("tools:\n");
    for i in 0..START_COMPONENTS {
        let path = dir.path().join(format!("hello{i}.wasm"));
        std::fs::write(&path, with_custom_section(hello, "toolhost-bench", format!("variant {i}").as_bytes()))
            .expect("write component");
        yaml += &format!("  - {{name: hello{i}, group: bench, use: \"{}:hello\"}}\n", path.display());
    }
    let config = dir.path().join("config.yaml");
    std::fs::write(&config, yaml).expect("write config");
    let open = |cache: &PathBuf| {
        let opts = HostOptions::new(config.clone()).data_dir(dir.path().join("data")).cache_dir(Some(cache.clone()));
        let start = Instant::now();
        let host = Toolhost::open_blocking(opts).expect("open the host");
        let elapsed = start.elapsed();
        let errors: Vec<_> = host.problems().iter().filter(|p| p.severity == toolhost::Severity::Error).collect();
        assert!(errors.is_empty(), "{errors:?}");
        (elapsed, host)
    };
    let (mut first, mut second) = (Vec::new(), Vec::new());
    for round in 0..3 {
        let cache = dir.path().join(format!("cache{round}"));
        let (t, host) = open(&cache);
        first.push(t);
        drop(host);
        let artifacts = std::fs::read_dir(&cache).map(|d| d.count()).unwrap_or(0);
        assert_eq!(artifacts, START_COMPONENTS, "one artifact per component");
        for _ in 0..5 {
            let (t, host) = open(&cache);
            second.push(t);
            drop(host);
        }
    }
    let (first, second) = (median(first), median(second));
    println!("\nhost start, {START_COMPONENTS} components (Toolhost::open, medians of 3 first / 15 second starts):");
    println!("  first start (compile, empty cache): {first:>10.2?}");
    println!("  second start (precompile cache):    {second:>10.2?}");
    println!("  ratio first / second:               {:>9.1}x", first.as_secs_f64() / second.as_secs_f64());
}

/// The engine alone, to see what of a second start is fixed cost.
fn runtime_new() {
    let mut times = Vec::new();
    for _ in 0..11 {
        let start = Instant::now();
        let rt = Runtime::new(None).expect("runtime");
        times.push(start.elapsed());
        drop(rt);
    }
    println!("  Runtime::new (engine, pooling, linker): {:>10.2?}", median(times));
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(60)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(4));
    targets = runtime_alone, through_host
}

fn main() {
    benches();
    // `RTBENCH_SKIP_EXTRAS=1` runs only the criterion groups (for profiling one of them); under
    // `cargo test --benches` (no `--bench` flag) the criterion groups run once as a smoke test
    // and the extras are skipped.
    let bench_mode = std::env::args().any(|a| a == "--bench");
    if bench_mode && std::env::var_os("RTBENCH_SKIP_EXTRAS").is_none() {
        memory();
        host_start();
        runtime_new();
    }
    Criterion::default().configure_from_args().final_summary();
}
