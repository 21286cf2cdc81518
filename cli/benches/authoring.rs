//! Authoring benchmarks (BENCHMARKS.md, "Authoring"): the per-call cost of the same `greet`
//! tool written in Rust, Python and JavaScript — a fresh instance per call, from the
//! pre-initialised snapshot componentize-py / componentize-js leave in the component — the
//! component sizes, and what compiling each costs against loading it from the precompile cache.
//! Builds the Python and JS templates with `toolhost build` first (the pinned toolchains of
//! scripts/install-authoring-toolchains.sh); the Rust tool is the bundled `hello` (the template's
//! code). Run with `cargo bench -p toolhost-cli --bench authoring`; `AUTHORING_BENCH_CALLS` sets the
//! timed calls per language (default 200).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use toolhost::runtime::{exec_call, CallRequest, CapabilitySet, ComponentRef, LoadedComponent, Runtime};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

fn path_env() -> std::ffi::OsString {
    let mut dirs =
        vec![root().join(".peers/componentize-py/bin"), root().join(".peers/componentize-js/node_modules/.bin")];
    for (d, exe) in [(&dirs[0], "componentize-py"), (&dirs[1], "jco")] {
        assert!(d.join(exe).exists(), "{} missing: run scripts/install-authoring-toolchains.sh", d.join(exe).display());
    }
    if let Some(p) = std::env::var_os("PATH") {
        dirs.extend(std::env::split_paths(&p));
    }
    std::env::join_paths(dirs).unwrap()
}

/// `toolhost new bench_greet --lang LANG` + `toolhost build` in `dir`; the component.
fn build(dir: &Path, lang: &str) -> PathBuf {
    let bin = env!("CARGO_BIN_EXE_toolhost");
    let name = format!("greet-{lang}");
    let proj = dir.join(&name);
    let run = |args: &[&str], cwd: &Path| {
        let out = Command::new(bin).current_dir(cwd).env("PATH", path_env()).args(args).output().unwrap();
        assert!(out.status.success(), "toolhost {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    };
    run(&["new", &name, "--lang", lang], dir);
    let started = Instant::now();
    run(&["--data-dir", dir.join("build-data").to_str().unwrap(), "build", "."], &proj);
    println!("  toolhost build ({lang}): {:.1?} (toolchain + inspection, compiling included)", started.elapsed());
    proj.join("build").join(format!("{name}.wasm"))
}

fn request(tool: &str) -> CallRequest {
    CallRequest::new(tool, r#"{"name":"bench"}"#)
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn pct(mut v: Vec<Duration>, p: f64) -> Duration {
    v.sort();
    v[((v.len() as f64 - 1.0) * p).round() as usize]
}

fn time_calls(rt: &Runtime, c: &LoadedComponent, tool: &str, calls: usize) -> Vec<Duration> {
    let mut caps = CapabilitySet::default();
    caps.limits.memory_bytes = 256 << 20;
    let req = request(tool);
    let want = "Hello, bench.";
    for _ in 0..20 {
        let r = exec_call(rt, c, &caps, &[], &req).expect("warm-up call");
        assert_eq!(r.text(), want);
    }
    (0..calls)
        .map(|_| {
            let t = Instant::now();
            let r = exec_call(rt, c, &caps, &[], &req).expect("call");
            let d = t.elapsed();
            assert_eq!(r.text(), want);
            d
        })
        .collect()
}

fn main() {
    // `cargo bench` passes `--bench`; a filter argument is not used.
    let calls: usize = std::env::var("AUTHORING_BENCH_CALLS").ok().and_then(|v| v.parse().ok()).unwrap_or(200);
    let dir = tempfile::tempdir().unwrap();
    println!("authoring: building the templates");
    let py = build(dir.path(), "python");
    let js = build(dir.path(), "js");

    let cache = dir.path().join("bench-cache");
    let rt: Arc<Runtime> = Runtime::new(Some(cache.clone())).expect("runtime");
    println!("pooling allocator: {}", rt.pooling());
    let rust = rt.load(&ComponentRef::Bundled("hello".into()), &toolhost::bundled::bytes).expect("hello");
    let mut loaded: Vec<(&str, Arc<LoadedComponent>, usize, String)> =
        vec![("Rust (bundled hello)", rust, toolhost::bundled::bytes("hello").unwrap().len(), "hello".into())];
    println!("\nload (compile with cranelift, then from the precompile cache in a new runtime):");
    for (label, path, tool) in
        [("Python (componentize-py)", &py, "greet_python"), ("JavaScript (componentize-js)", &js, "greet_js")]
    {
        let size = std::fs::metadata(path).unwrap().len() as usize;
        let t = Instant::now();
        let c = rt.load(&ComponentRef::File { path: path.clone(), sha256: None }, &|_| None).expect("load");
        let compile = t.elapsed();
        assert!(c.compiled);
        let rt2 = Runtime::new(Some(cache.clone())).expect("runtime");
        let t = Instant::now();
        let c2 = rt2.load(&ComponentRef::File { path: path.clone(), sha256: None }, &|_| None).expect("load");
        let cached = t.elapsed();
        assert!(!c2.compiled, "the second load came from the cache");
        println!("  {label:<30} compile {compile:>9.1?}   from cache {cached:>9.1?}");
        loaded.push((label, c, size, tool.into()));
    }

    println!("\nper call, fresh instance each ({calls} timed calls after 20 warm-up, exec_call):");
    println!("  {:<30} {:>12} {:>10} {:>10} {:>10}", "component", "size (B)", "median", "p90", "mean");
    for (label, c, size, tool) in &loaded {
        let times = time_calls(&rt, c, tool, calls);
        let mean = times.iter().sum::<Duration>() / times.len() as u32;
        println!(
            "  {label:<30} {size:>12} {:>10.3?} {:>10.3?} {:>10.3?}",
            median(times.clone()),
            pct(times.clone(), 0.9),
            mean
        );
    }
}
