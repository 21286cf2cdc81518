//! Runs every case and sequence of tests/conformance/sandbox_fs.json natively: the fixture tree is
//! rebuilt in a temp dir, the virtual roots are mapped onto it, and each tool's text and the
//! files it changed are compared with the vectors. Where toolhost deliberately differs from
//! DeerFlow (tests/conformance/README.md, "Where toolhost deliberately differs"), the expected value is
//! derived from the vector by that deviation's rule, and the test names the deviation.

use std::collections::BTreeMap;
use std::path::PathBuf;

use sandbox_fs::{call, HostMap, Sandbox, SandboxSettings, SandboxSettingsExt};
use serde_json::{json, Value};

const VECTORS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/conformance/sandbox_fs.json");

/// Shared with the host's end-to-end test (tests/file_tools.rs), so both apply the same rules.
#[path = "../../../tests/support/sandbox_fs_vectors.rs"]
mod vectors;

use vectors::{actual_changes, build_fixture, build_skills, disabled_skill_dirs, expected_changes, short, snapshot};

struct World {
    _tmp: tempfile::TempDir,
    thread: PathBuf,
    sandbox_json: Value,
    host: HostMap,
}

fn build_world(v: &Value) -> World {
    let tmp = tempfile::tempdir().expect("tempdir");
    let thread = tmp.path().join("thread");
    let skills = tmp.path().join("skills");
    build_fixture(v, &thread);
    build_skills(v, &skills);
    let host = HostMap::with_prefixes(vec![
        ("/mnt/user-data/workspace".into(), thread.join("user-data/workspace")),
        ("/mnt/user-data/uploads".into(), thread.join("user-data/uploads")),
        ("/mnt/user-data/outputs".into(), thread.join("user-data/outputs")),
        ("/mnt/acp-workspace".into(), thread.join("acp-workspace")),
        ("/mnt/skills".into(), skills),
    ]);
    // extensions_config disables skills by name; the host sends their virtual dirs.
    let sandbox_json = json!({
        "read_file_output_max_chars": 50000,
        "ls_output_max_chars": 20000,
        "skills_container_path": "/mnt/skills",
        "mounts": [],
        "disabled_skills": disabled_skill_dirs(v),
    });
    World { _tmp: tmp, thread, sandbox_json, host }
}

fn tool_config(tool: &str, max: Option<i64>) -> Value {
    match (tool, max) {
        (_, Some(m)) => json!({ "max_results": m }),
        ("glob", None) => json!({ "max_results": 200 }),
        ("grep", None) => json!({ "max_results": 100 }),
        _ => json!({}),
    }
}

fn run(w: &World, tool: &str, args: &Value, env: Option<&Value>, no_thread: bool, config_max: Option<i64>) -> String {
    let mut sj = w.sandbox_json.clone();
    if let Some(raw) = env.and_then(|e| e.get("DEERFLOW_WRITE_FILE_MAX_BYTES")) {
        sj["write_file_max_bytes"] = raw.clone();
    }
    let sb = Sandbox::new(SandboxSettings::from_json(&sj), w.host.clone(), !no_thread);
    let mut a = args.clone();
    a["description"] = json!("conformance");
    match call(&sb, tool, &a, &tool_config(tool, config_max)) {
        Ok(o) => o.content,
        Err(e) => format!("<<args error: {e}>>"),
    }
}

/// The expected text of one call, with the deviations applied (see the shared module).
fn expected_content(v: &Value, w: &World, c: &Value) -> (String, Vec<&'static str>) {
    let mut full = |tool: &str, args: &Value| run(w, tool, args, None, false, args["max_results"].as_i64());
    vectors::expected_content(v, c, &mut full)
}

#[test]
fn sandbox_fs_conformance() {
    let v = vectors::load(VECTORS);
    let mut per_tool: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    let mut failures = Vec::new();
    let mut deviations = 0usize;

    let mut check = |w: &World, id: &str, step: &Value, per_tool: &mut BTreeMap<String, (usize, usize)>| {
        let tool = step["tool"].as_str().expect("tool").to_string();
        let no_thread = step.get("runtime") == Some(&json!("no_thread_data"));
        let (exp, mut notes) = expected_content(&v, w, step);
        let exp_fs = expected_changes(&v, step, &mut notes);
        let before = snapshot(&w.thread);
        let got = run(w, &tool, &step["args"], step.get("env"), no_thread, None);
        let after = snapshot(&w.thread);
        let got_fs = actual_changes(&before, &after, &exp_fs);
        let entry = per_tool.entry(tool.clone()).or_default();
        entry.1 += 1;
        if !notes.is_empty() {
            deviations += 1;
        }
        // Deviation 1: no host path, in any output.
        let leaked = got.contains(&*w.thread.to_string_lossy()) || got.contains("{THREAD_DIR}");
        let fs_ok = got_fs == exp_fs && !leaked;
        if got == exp && fs_ok {
            entry.0 += 1;
        } else {
            failures.push(format!(
                "{id} ({tool}) {notes:?}\n  expected: {}\n  got:      {}\n  fs expected: {}\n  fs got:      {}",
                short(&exp),
                short(&got),
                short(&format!("{exp_fs:?}")),
                short(&format!("{got_fs:?}"))
            ));
        }
    };

    // Read-only tools share one fixture (the snapshot check proves they changed nothing); every
    // write case gets a fresh copy, as the vectors were generated.
    let shared = build_world(&v);
    for c in v["cases"].as_array().expect("cases") {
        let writes = matches!(c["tool"].as_str(), Some("write_file" | "str_replace"));
        let fresh;
        let w = if writes {
            fresh = build_world(&v);
            &fresh
        } else {
            &shared
        };
        check(w, c["id"].as_str().expect("id"), c, &mut per_tool);
    }
    for s in v["sequences"].as_array().expect("sequences") {
        let w = build_world(&v);
        for (i, step) in s["steps"].as_array().expect("steps").iter().enumerate() {
            check(&w, &format!("{}#{}", s["id"].as_str().expect("id"), i + 1), step, &mut per_tool);
        }
    }
    for (tool, (pass, total)) in &per_tool {
        println!("{tool:12} {pass}/{total}");
    }
    println!("cases with a deviation applied: {deviations}");
    assert!(failures.is_empty(), "{} failing:\n{}", failures.len(), failures.join("\n\n"));
}
