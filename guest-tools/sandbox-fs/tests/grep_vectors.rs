//! `grep` against DeerFlow's own answers on files built to stress toolhost's search paths
//! (tests/grep_vectors.json, made by scripts/gen-grep-vectors.py with DeerFlow 2.1.0): line
//! breaks of every kind, undecodable bytes, lines at and over 2000 characters and one of 900 kB,
//! binary sniffing and the 1 MB cap at their edges, matches across the 8 KiB sniff, the 64 KiB
//! host read and every vector-scan alignment, case-insensitive non-ASCII, refused patterns.
//! The host's end-to-end test (tests/file_tools.rs) runs the same vectors through the component.

use sandbox_fs::{call, HostMap, Sandbox, SandboxSettings};
use serde_json::{json, Value};

const VECTORS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/grep_vectors.json");

#[path = "../../../tests/support/grep_vectors.rs"]
mod grep_vectors;

#[test]
fn grep_answers_equal_deerflows() {
    let v: Value = serde_json::from_str(&std::fs::read_to_string(VECTORS).expect("read vectors")).expect("json");
    let tmp = tempfile::tempdir().expect("tempdir");
    grep_vectors::write_files(&v, &tmp.path().join("edge"));
    let host = HostMap::with_prefixes(vec![("/mnt/user-data/workspace".into(), tmp.path().to_path_buf())]);
    let sb = Sandbox::new(SandboxSettings::default(), host, true);
    let mut checked = 0;
    grep_vectors::check_all(&v, |args| {
        let mut a = args.clone();
        a["description"] = json!("vectors");
        checked += 1;
        call(&sb, "grep", &a, &json!({"max_results": 500})).map(|o| o.content).unwrap_or_else(|e| e.to_string())
    });
    assert!(checked > 300, "{checked} cases");
}
