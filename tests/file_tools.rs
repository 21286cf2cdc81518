//! DeerFlow's six file tools end to end through the wasmtime host (`Toolhost::call`, the bundled
//! sandbox-fs component under the DeerFlow `use:` paths): every case and sequence of
//! tests/conformance/sandbox_fs.json, DeerFlow's grep answers on the search edge cases
//! (guest-tools/sandbox-fs/tests/grep_vectors.json), ReadBeforeWrite (spec §3.8), concurrent
//! appends to one file, and that no host path ever reaches an output.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde_json::{json, Value};
use toolhost::assembly::AssemblyRequest;
use toolhost::{HostOptions, Severity, Toolhost};

/// Shared with the native conformance test (guest-tools/sandbox-fs/tests/conformance.rs).
#[path = "support/sandbox_fs_vectors.rs"]
mod vectors;

use vectors::{actual_changes, expected_changes, short, snapshot};

/// Shared with the native grep test (guest-tools/sandbox-fs/tests/grep_vectors.rs).
#[path = "support/grep_vectors.rs"]
mod grep_vectors;

const GREP_VECTORS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../guest-tools/sandbox-fs/tests/grep_vectors.json");

const VECTORS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/conformance/sandbox_fs.json");

/// The prefix of DeerFlow's ReadBeforeWrite refusal (spec §3.8); the rest is DeerFlow's advice.
fn rbw_block_prefix(tool: &str, path: &str) -> String {
    format!("Error: {tool} blocked — {path} already exists and you have not read its current version.")
}

/// A temp dir with config.yaml, extensions_config.json, the skills of the vectors and a data dir.
struct Env {
    dir: tempfile::TempDir,
    v: Value,
}

impl Env {
    fn new() -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let v = vectors::load(VECTORS);
        vectors::build_skills(&v, &dir.path().join("skills"));
        let ext = dir.path().join("extensions_config.json");
        std::fs::write(&ext, v["environment"]["extensions_config"].to_string()).expect("write extensions");
        Self { dir, v }
    }

    fn data(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    /// DeerFlow's config of the vectors, with toolhost's `read_before_write` switch; `uncapped`
    /// raises the config caps of glob/grep so a truncated case can count every match.
    fn open(&self, name: &str, read_before_write: bool, uncapped: bool) -> Toolhost {
        self.open_with(name, read_before_write, uncapped, None)
    }

    /// As [`Env::open`], with `write_file_max_bytes` (DeerFlow's `DEERFLOW_WRITE_FILE_MAX_BYTES`)
    /// given to this host alone: nothing here touches the process environment, which the other
    /// tests of this binary share.
    fn open_with(&self, name: &str, read_before_write: bool, uncapped: bool, write_cap: Option<&str>) -> Toolhost {
        let skills = self.dir.path().join("skills");
        let mut yaml = self.v["environment"]["config_yaml"]
            .as_str()
            .expect("config_yaml")
            .replace("{SKILLS_DIR}", &skills.display().to_string());
        if uncapped {
            let glob = format!("max_results: {}", vectors::uncapped_max("glob"));
            let grep = format!("max_results: {}", vectors::uncapped_max("grep"));
            yaml = yaml.replace("max_results: 200", &glob).replace("max_results: 100", &grep);
        }
        yaml += &format!("read_before_write:\n  enabled: {read_before_write}\n");
        let config = self.dir.path().join(format!("{name}.yaml"));
        std::fs::write(&config, yaml).expect("write config");
        let host = Toolhost::open(HostOptions {
            config_path: config,
            data_dir: self.data(),
            persist_state: false,
            cache_dir: Some(self.dir.path().join("cache")),
            extensions_path: Some(self.dir.path().join("extensions_config.json")),
            extra_ca_certs: None,
            write_file_max_bytes: write_cap.map(str::to_string),
        })
        .expect("open host");
        let errors: Vec<_> = host.problems().iter().filter(|p| p.severity == Severity::Error).collect();
        assert!(errors.is_empty(), "{errors:?}");
        host
    }
}

async fn call(host: &Toolhost, thread: &str, tool: &str, args: &Value) -> (String, bool) {
    let mut a = args.clone();
    a["description"] = json!("file_tools e2e");
    let r = host.call(&AssemblyRequest::default(), thread, tool, a, None).await.expect("call");
    assert!(r.state_errors.is_empty(), "{tool}: {:?}", r.state_errors);
    (r.outcome.text_content(), r.outcome.is_error())
}

/// A fresh thread holding the fixture tree.
fn fixture_thread(host: &Toolhost, v: &Value, thread: &str) -> PathBuf {
    host.thread_fs(thread).expect("thread fs").ensure_tool_dirs().expect("thread dirs");
    let paths = host.thread_paths(thread).expect("thread paths");
    vectors::build_fixture(v, &paths.root);
    paths.root
}

/// Hosts for the conformance run: one per `DEERFLOW_WRITE_FILE_MAX_BYTES` value the vectors use,
/// given as `HostOptions::write_file_max_bytes` (DeerFlow reads the variable at call time, the
/// host takes it when it opens; the effect on a call is the same).
struct Hosts {
    plain: Toolhost,
    uncapped: Toolhost,
    by_env: BTreeMap<String, Toolhost>,
}

fn conformance_hosts(env: &Env) -> Hosts {
    let mut by_env = BTreeMap::new();
    let steps = env.v["cases"].as_array().expect("cases").iter().chain(
        env.v["sequences"].as_array().expect("sequences").iter().flat_map(|s| s["steps"].as_array().expect("steps")),
    );
    for step in steps {
        if let Some(raw) = step.pointer("/env/DEERFLOW_WRITE_FILE_MAX_BYTES").and_then(Value::as_str) {
            if !by_env.contains_key(raw) {
                let host = env.open_with(&format!("env{}", by_env.len()), false, false, Some(raw));
                by_env.insert(raw.to_string(), host);
            }
        }
    }
    Hosts { plain: env.open("plain", false, false), uncapped: env.open("uncapped", false, true), by_env }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sandbox_fs_conformance_through_the_host() {
    let env = Env::new();
    let v = env.v.clone();
    let hosts = conformance_hosts(&env);
    let data = env.data().display().to_string();
    let mut per_tool: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    let mut failures = Vec::new();
    let mut not_applicable = Vec::new();
    let mut deviations = 0usize;
    let mut thread_no = 0usize;

    // Read-only cases share one fixture thread (the snapshot check proves they changed nothing);
    // every write case and every sequence gets a fresh thread, as the vectors were generated.
    fixture_thread(&hosts.plain, &v, "shared");
    let mut units: Vec<(String, String, Vec<Value>)> = Vec::new();
    for c in v["cases"].as_array().expect("cases") {
        let writes = matches!(c["tool"].as_str(), Some("write_file" | "str_replace"));
        let thread = if writes {
            thread_no += 1;
            format!("case-{thread_no}")
        } else {
            "shared".to_string()
        };
        units.push((c["id"].as_str().expect("id").to_string(), thread, vec![c.clone()]));
    }
    for s in v["sequences"].as_array().expect("sequences") {
        thread_no += 1;
        let steps = s["steps"].as_array().expect("steps").clone();
        units.push((s["id"].as_str().expect("id").to_string(), format!("seq-{thread_no}"), steps));
    }

    for (id, thread, steps) in units {
        let root = if thread == "shared" {
            hosts.plain.thread_paths(&thread).expect("paths").root
        } else {
            fixture_thread(&hosts.plain, &v, &thread)
        };
        for (i, step) in steps.iter().enumerate() {
            let id = if steps.len() > 1 { format!("{id}#{}", i + 1) } else { id.clone() };
            let tool = step["tool"].as_str().expect("tool").to_string();
            if step.get("runtime") == Some(&json!("no_thread_data")) {
                // DeerFlow called the tool with no thread_data in state; the host always gives a
                // call its thread, so this case cannot arise through it.
                not_applicable.push(id);
                continue;
            }
            let host = match step.pointer("/env/DEERFLOW_WRITE_FILE_MAX_BYTES").and_then(Value::as_str) {
                Some(raw) => &hosts.by_env[raw],
                None => &hosts.plain,
            };
            let mut full = |tool: &str, args: &Value| {
                let a = args.clone();
                let t = thread.clone();
                let uncapped = &hosts.uncapped;
                let tool = tool.to_string();
                tokio::task::block_in_place(|| {
                    tokio::runtime::Handle::current().block_on(async move { call(uncapped, &t, &tool, &a).await.0 })
                })
            };
            let (exp, mut notes) = vectors::expected_content(&v, step, &mut full);
            let exp_fs = expected_changes(&v, step, &mut notes);
            let before = snapshot(&root);
            let (got, _) = call(host, &thread, &tool, &step["args"]).await;
            let after = snapshot(&root);
            let got_fs = actual_changes(&before, &after, &exp_fs);
            let entry = per_tool.entry(tool.clone()).or_default();
            entry.1 += 1;
            if !notes.is_empty() {
                deviations += 1;
            }
            // Deviation 1: no host path at all, whether or not DeerFlow leaked one here.
            let leaked = got.contains(&data) || got.contains("{THREAD_DIR}") || got.contains("{FS_BASE}");
            let leaked_fs = after.values().any(|s| s.contains(&data));
            let pass = got == exp && got_fs == exp_fs && !leaked && !leaked_fs;
            if pass {
                entry.0 += 1;
            } else {
                failures.push(format!(
                    "{id} ({tool}) {notes:?} leaked={leaked}/{leaked_fs}\n  expected: {}\n  got:      {}\n  fs expected: {}\n  fs got:      {}",
                    short(&exp),
                    short(&got),
                    short(&format!("{exp_fs:?}")),
                    short(&format!("{got_fs:?}"))
                ));
            }
        }
    }
    for (tool, (pass, total)) in &per_tool {
        println!("{tool:12} {pass}/{total}");
    }
    println!("cases with a deviation applied: {deviations}; not applicable through the host: {not_applicable:?}");
    assert_eq!(not_applicable.len(), 1, "only the no-thread-data case cannot run through the host");
    // The host derives disabled skills from extensions_config.json itself; every one is refused.
    let disabled = vectors::disabled_skill_dirs(&v);
    assert!(!disabled.is_empty());
    for dir in disabled {
        let (text, err) = call(&hosts.plain, "shared", "ls", &json!({ "path": dir })).await;
        assert!(err && text.contains("is disabled"), "{dir}: {text}");
    }
    assert!(failures.is_empty(), "{} failing:\n{}", failures.len(), failures.join("\n\n"));
}

/// The component searches with wasm SIMD where the native build uses SSE2, and reads through the
/// host's 64 KiB reads: the same answers as DeerFlow on every grep edge case.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grep_edge_cases_through_the_host() {
    let env = Env::new();
    let host = env.open("grep", false, false);
    let v: Value = serde_json::from_str(&std::fs::read_to_string(GREP_VECTORS).expect("read")).expect("json");
    let paths = host.thread_paths("grep").expect("thread paths");
    std::fs::create_dir_all(paths.workspace()).expect("mkdir workspace");
    grep_vectors::write_files(&v, &paths.workspace().join("edge"));
    let mut answers = Vec::new();
    for c in v["cases"].as_array().expect("cases") {
        answers.push(call(&host, "grep", "grep", &c["args"]).await.0);
    }
    let mut answers = answers.into_iter();
    grep_vectors::check_all(&v, |_| answers.next().expect("one answer per case"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_before_write_gates_writes_to_existing_files() {
    let env = Env::new();
    let host = env.open("rbw", true, false);
    let t = "rbw";
    let ws = host.thread_paths(t).expect("paths").workspace();
    std::fs::create_dir_all(&ws).expect("mkdir");
    let path = "/mnt/user-data/workspace/notes.txt";
    let lines: String = (1..=50).map(|i| format!("line {i}\n")).collect();
    std::fs::write(ws.join("notes.txt"), &lines).expect("write");

    // Existing and unread: both write tools refused with DeerFlow's message; nothing changes.
    for (tool, args) in [
        ("write_file", json!({"path": path, "content": "x"})),
        ("write_file", json!({"path": path, "content": "x", "append": true})),
        ("str_replace", json!({"path": path, "old_str": "line 1\n", "new_str": "first\n"})),
    ] {
        let (text, err) = call(&host, t, tool, &args).await;
        assert!(err && text.starts_with(&rbw_block_prefix(tool, path)), "{tool}: {text}");
        assert!(text.contains("re-read before every modification"), "{text}");
    }
    assert_eq!(std::fs::read_to_string(ws.join("notes.txt")).expect("read"), lines);

    // A ranged read counts.
    let (text, err) = call(&host, t, "read_file", &json!({"path": path, "start_line": 48, "end_line": 50})).await;
    assert!(!err && text == "line 48\nline 49\nline 50", "{text}");
    let (text, err) =
        call(&host, t, "write_file", &json!({"path": path, "content": "line 51\n", "append": true})).await;
    assert!(!err && text == "OK", "{text}");

    // That write invalidated the read: the next write is refused until a fresh read.
    let (text, err) =
        call(&host, t, "str_replace", &json!({"path": path, "old_str": "line 51", "new_str": "last"})).await;
    assert!(err && text.starts_with(&rbw_block_prefix("str_replace", path)), "{text}");
    let (_, err) = call(&host, t, "read_file", &json!({"path": path})).await;
    assert!(!err);
    let (text, err) =
        call(&host, t, "str_replace", &json!({"path": path, "old_str": "line 51", "new_str": "last"})).await;
    assert!(!err && text == "OK", "{text}");
    assert!(std::fs::read_to_string(ws.join("notes.txt")).expect("read").ends_with("line 50\nlast\n"));

    // A change made outside the thread's view also needs a re-read.
    let (_, err) = call(&host, t, "read_file", &json!({"path": path})).await;
    assert!(!err);
    std::fs::write(ws.join("notes.txt"), "changed behind the agent's back\n").expect("write");
    let (text, err) = call(&host, t, "write_file", &json!({"path": path, "content": "y"})).await;
    assert!(err && text.starts_with(&rbw_block_prefix("write_file", path)), "{text}");

    // Creating a new file is allowed; the creating write is not a read, so rewriting it is not.
    let fresh = "/mnt/user-data/outputs/new/report.md";
    let (text, err) = call(&host, t, "write_file", &json!({"path": fresh, "content": "# Report\n"})).await;
    assert!(!err && text == "OK", "{text}");
    let (text, err) = call(&host, t, "write_file", &json!({"path": fresh, "content": "again"})).await;
    assert!(err && text.starts_with(&rbw_block_prefix("write_file", fresh)), "our own write is not a read: {text}");

    // Marks belong to their thread.
    let other = "rbw-other";
    let ows = host.thread_paths(other).expect("paths").workspace();
    std::fs::create_dir_all(&ows).expect("mkdir");
    std::fs::write(ows.join("notes.txt"), "changed behind the agent's back\n").expect("write");
    let (text, err) = call(&host, other, "write_file", &json!({"path": path, "content": "z"})).await;
    assert!(err && text.starts_with(&rbw_block_prefix("write_file", path)), "{text}");

    // `read_before_write.enabled: false` turns the gate off.
    let off = env.open("rbw-off", false, false);
    let (text, err) = call(&off, t, "write_file", &json!({"path": path, "content": "unread overwrite"})).await;
    assert!(!err && text == "OK", "{text}");
    assert_eq!(std::fs::read_to_string(ws.join("notes.txt")).expect("read"), "unread overwrite");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_appends_in_one_turn_lose_nothing() {
    let env = Env::new();
    for rbw in [false, true] {
        let host = env.open(&format!("conc-{rbw}"), rbw, false);
        let t = format!("conc-{rbw}");
        let path = "/mnt/user-data/workspace/log/all.txt";
        // Create the file first; with the gate on, read it so the appends may proceed.
        let (text, err) = call(&host, &t, "write_file", &json!({"path": path, "content": "head\n"})).await;
        assert!(!err && text == "OK", "{text}");
        if rbw {
            let (_, err) = call(&host, &t, "read_file", &json!({"path": path})).await;
            assert!(!err);
        }
        let n = 16;
        let calls: Vec<(String, Value, Option<String>)> = (0..n)
            .map(|i| {
                let args = json!({"description": "append", "path": path, "content": format!("line {i:02} {}\n", "x".repeat(4000)), "append": true});
                ("write_file".to_string(), args, Some(format!("c{i}")))
            })
            .collect();
        let results = host.call_turn(&AssemblyRequest::default(), &t, calls).await.expect("turn");
        let texts: Vec<String> = results.iter().map(|r| r.outcome.text_content()).collect();
        let written = std::fs::read_to_string(host.thread_paths(&t).expect("paths").workspace().join("log/all.txt"))
            .expect("read");
        let lines: Vec<&str> = written.lines().collect();
        if rbw {
            // One read mark admits one write: every other append of the turn is refused (the
            // gate and the write share a lock, so two cannot pass on the same mark). Nothing a
            // refused call carried appears; nothing an accepted one carried is lost.
            let ok = texts.iter().filter(|t| *t == "OK").count();
            assert_eq!(ok, 1, "{texts:?}");
            assert!(texts.iter().filter(|t| *t != "OK").all(|t| t.starts_with(&rbw_block_prefix("write_file", path))));
            assert_eq!(lines.len(), 2, "head + the one accepted append");
        } else {
            assert!(texts.iter().all(|t| t == "OK"), "{texts:?}");
            assert_eq!(lines.len(), n + 1, "head + {n} appends");
            for i in 0..n {
                let want = format!("line {i:02} {}", "x".repeat(4000));
                assert_eq!(lines.iter().filter(|l| **l == want).count(), 1, "append {i} exactly once, whole");
            }
        }
        assert_eq!(lines[0], "head");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_host_path_in_any_output() {
    let env = Env::new();
    let host = env.open("paths", false, false);
    let t = "paths";
    let root = fixture_thread(&host, &env.v, t);
    let data = env.data().display().to_string();
    let ws = "/mnt/user-data/workspace";
    // A link to the outside, and content that names virtual paths (DeerFlow rewrites those).
    std::os::unix::fs::symlink(root.join("outside"), root.join("user-data/workspace/escape")).expect("symlink");
    // Each call with what it must answer: `Ok(text)` the exact result, `Refused(text)` the exact
    // error. The refusal texts are DeerFlow's (deerflow/sandbox/tools.py: the handlers of
    // `PermissionError`, `FileNotFoundError` and `re.error` in ls/read_file/glob/grep/write_file/
    // str_replace; the regex detail is Python's `re` message). `Listing` is a successful listing
    // that must not show the link to the outside.
    enum Want {
        Ok(&'static str),
        Listing,
        Refused(String),
    }
    use Want::*;
    let denied = |p: &str| Refused(format!("Error: Permission denied: {p}"));
    let denied_read = |p: &str| Refused(format!("Error: Permission denied reading file: {p}"));
    let denied_write = |p: &str| Refused(format!("Error: Permission denied writing to file: {p}"));
    let not_found = |p: &str| Refused(format!("Error: File not found: {p}"));
    let (escape, escape_file) = (format!("{ws}/escape"), format!("{ws}/escape/secret.txt"));
    let traversal = format!("{ws}/../../../outside/secret.txt");
    let calls = [
        (
            "write_file",
            json!({"path": format!("{ws}/paths.md"), "content": "see /mnt/user-data/outputs/x.md and /mnt/user-data/workspace\n"}),
            Ok("OK"),
        ),
        (
            "str_replace",
            json!({"path": format!("{ws}/paths.md"), "old_str": "see", "new_str": "open /mnt/user-data/uploads/y"}),
            Ok("OK"),
        ),
        (
            "read_file",
            json!({"path": format!("{ws}/paths.md")}),
            Ok("open /mnt/user-data/uploads/y /mnt/user-data/outputs/x.md and /mnt/user-data/workspace\n"),
        ),
        ("read_file", json!({"path": escape_file}), denied_read(&escape_file)),
        ("read_file", json!({"path": format!("{ws}/missing.txt")}), not_found(&format!("{ws}/missing.txt"))),
        ("read_file", json!({"path": "/etc/passwd"}), denied_read("/etc/passwd")),
        ("read_file", json!({"path": traversal}), denied_read(&traversal)),
        ("ls", json!({"path": ws}), Listing),
        ("ls", json!({"path": escape}), denied(&escape)),
        ("ls", json!({"path": "/mnt/user-data"}), denied("/mnt/user-data")),
        ("glob", json!({"pattern": "**/*", "path": ws, "include_dirs": true, "max_results": 1000}), Listing),
        ("glob", json!({"pattern": "**/*", "path": escape}), denied(&escape)),
        (
            "grep",
            json!({"pattern": "mnt|user-data|secret|threads", "path": "/mnt/user-data", "max_results": 500}),
            denied("/mnt/user-data"),
        ),
        // Below the root that is refused above: every file of the workspace, the link included.
        ("grep", json!({"pattern": "mnt|user-data|secret|threads", "path": ws, "max_results": 500}), Listing),
        (
            "grep",
            json!({"pattern": "(", "path": ws}),
            Refused("Error: Invalid regex pattern: missing ), unterminated subpattern at position 0".into()),
        ),
        (
            "write_file",
            json!({"path": "/mnt/skills/public/demo/x.md", "content": "no"}),
            denied_write("/mnt/skills/public/demo/x.md"),
        ),
        (
            "write_file",
            json!({"path": format!("{ws}/escape/pwned.txt"), "content": "no"}),
            denied_write(&format!("{ws}/escape/pwned.txt")),
        ),
        (
            "str_replace",
            json!({"path": format!("{ws}/nope.txt"), "old_str": "a", "new_str": "b"}),
            not_found(&format!("{ws}/nope.txt")),
        ),
    ];
    let mut refused = 0;
    for (tool, args, want) in &calls {
        let (text, err) = call(&host, t, tool, args).await;
        assert!(!text.contains(&data), "{tool} {args}: {}", short(&text));
        match want {
            Ok(exact) => assert!(!err && text == *exact, "{tool} {args}: {}", short(&text)),
            Listing => {
                assert!(!err && text.contains(&format!("{ws}/paths.md")), "{tool} {args}: {}", short(&text));
                // The link is neither listed nor followed: its target holds secret.txt.
                assert!(!text.contains("/escape") && !text.contains("secret.txt"), "{tool} {args}: {}", short(&text));
            }
            Refused(exact) => {
                assert!(err && text == *exact, "{tool} {args}: {}", short(&text));
                refused += 1;
            }
        }
    }
    assert_eq!(calls.len(), 18);
    assert_eq!(refused, 12, "every call that reaches outside, or names nothing, is refused");
    // Nothing escaped, and no file the tools wrote holds a host path.
    assert!(!root.join("outside/pwned.txt").exists());
    let written = std::fs::read_to_string(root.join("user-data/workspace/paths.md")).expect("read");
    assert_eq!(written, "open /mnt/user-data/uploads/y /mnt/user-data/outputs/x.md and /mnt/user-data/workspace\n");
    for (rel, content) in snapshot(&root) {
        // Only files: the escape link planted above names its host target by design.
        assert!(!(content.starts_with("file:") && content.contains(&data)), "{rel} holds a host path");
    }
}

/// `ls` of the skills root through the host shows DeerFlow's four category roots, though the
/// vectors' skills directory holds only `public/`. The expected text is what DeerFlow's local
/// sandbox prints for this environment: its skill projection creates every category root and
/// mounts each below `/mnt/skills`, and `LocalSandbox.list_dir` overlays those mounts
/// (deerflow/sandbox/local/local_sandbox.py and skills/projection.py at f1f4af99).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ls_of_the_skills_root_shows_deerflows_category_roots() {
    let env = Env::new();
    assert!(!env.dir.path().join("skills/custom").exists() && env.dir.path().join("skills/public").is_dir());
    let host = env.open("skills", false, false);
    let t = "skills";
    fixture_thread(&host, &env.v, t);
    let (text, err) = call(&host, t, "ls", &json!({"path": "/mnt/skills"})).await;
    assert!(!err, "{text}");
    assert_eq!(text, "/mnt/skills/custom/\n/mnt/skills/integrations/\n/mnt/skills/legacy/\n/mnt/skills/public/");
    // A root that is not on disk lists as DeerFlow's empty one does.
    let (text, err) = call(&host, t, "ls", &json!({"path": "/mnt/skills/custom"})).await;
    assert!(!err && text == "(empty)", "{text}");
    let (text, _) = call(&host, t, "ls", &json!({"path": "/mnt/skills/public"})).await;
    assert!(text.contains("/mnt/skills/public/demo/SKILL.md"), "{text}");
}
