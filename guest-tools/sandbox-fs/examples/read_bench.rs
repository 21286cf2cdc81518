//! Times `read_file` natively (the guest code without the wasm runtime around it), small and
//! ranged, over a directory mapped to `/mnt/user-data/workspace`:
//! `cargo run --release --example read_bench -- <dir> <file> [start end] [calls]`.

use std::time::Instant;

use sandbox_fs::{call, HostMap, Sandbox, SandboxSettings};
use serde_json::json;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (Some(dir), Some(file)) = (args.get(1), args.get(2)) else {
        eprintln!("usage: read_bench <dir> <file> [start end] [calls]");
        std::process::exit(2);
    };
    let range: Option<(i64, i64)> = match (args.get(3), args.get(4)) {
        (Some(s), Some(e)) => Some((s.parse().unwrap_or(1), e.parse().unwrap_or(1))),
        _ => None,
    };
    let calls: usize = args.get(5).and_then(|r| r.parse().ok()).unwrap_or(2000);
    let host = HostMap::with_prefixes(vec![("/mnt/user-data/workspace".into(), dir.into())]);
    let mut a = json!({"description": "bench", "path": format!("/mnt/user-data/workspace/{file}")});
    if let Some((s, e)) = range {
        a["start_line"] = json!(s);
        a["end_line"] = json!(e);
    }
    let mut times = Vec::with_capacity(calls);
    let mut len = 0;
    for _ in 0..calls {
        let t = Instant::now();
        let sb = Sandbox::new(SandboxSettings::default(), host.clone(), true);
        let out = call(&sb, "read_file", &a, &json!({})).map(|o| o.content).unwrap_or_default();
        times.push(t.elapsed().as_secs_f64() * 1e6);
        len = out.len();
    }
    times.sort_by(f64::total_cmp);
    println!("read_file {file} {range:?}: median {:.1} µs over {calls} calls, {len} bytes out", times[calls / 2]);
}
