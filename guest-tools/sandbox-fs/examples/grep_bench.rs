//! Times `grep` natively over a directory mapped to `/mnt/user-data/workspace`:
//! `cargo run --release --example grep_bench -- <dir> <pattern> [case_sensitive] [runs]`.

use std::time::Instant;

use sandbox_fs::{call, HostMap, Sandbox, SandboxSettings};
use serde_json::json;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (Some(dir), Some(pattern)) = (args.get(1), args.get(2)) else {
        eprintln!("usage: grep_bench <dir> <pattern> [case_sensitive] [runs]");
        std::process::exit(2);
    };
    let case_sensitive = args.get(3).is_some_and(|a| a == "true");
    let runs: usize = args.get(4).and_then(|r| r.parse().ok()).unwrap_or(3);
    let host = HostMap::with_prefixes(vec![("/mnt/user-data/workspace".into(), dir.into())]);
    let sb = Sandbox::new(SandboxSettings::default(), host, true);
    let a = json!({"description": "bench", "pattern": pattern, "path": "/mnt/user-data/workspace",
                   "case_sensitive": case_sensitive, "max_results": 500});
    for _ in 0..runs {
        let t = Instant::now();
        let out =
            call(&sb, "grep", &a, &json!({"max_results": 500})).map(|o| o.content).unwrap_or_else(|e| e.to_string());
        let first = out.lines().next().unwrap_or_default().to_string();
        println!("{:>8.1} ms  {first}", t.elapsed().as_secs_f64() * 1000.0);
    }
}
