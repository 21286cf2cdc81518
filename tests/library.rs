//! The library as an embedder uses it: a host from config text, the `Thread` handle and named
//! `ToolCall`s, error kinds, no environment read behind the caller's back (and the documented
//! exceptions), `open` outside tokio,
//! and the CLI's stdin / `@FILE` arguments.

use std::path::Path;

use serde_json::json;
use toolhost::{Environment, ErrorKind, HostError, HostOptions, ToolCall, Toolhost};

#[path = "support/hostile.rs"]
mod hostile;

fn config(extra: &str) -> String {
    format!(
        "tools:\n  - {{name: read_file, group: file:read, use: 'deerflow.sandbox.tools:read_file_tool'}}\n  - {{name: write_file, group: file:write, use: 'deerflow.sandbox.tools:write_file_tool'}}\n{extra}"
    )
}

fn opts(dir: &Path, yaml: &str) -> HostOptions {
    HostOptions::from_yaml(yaml, dir).data_dir(dir.join("data")).cache_dir(Some(dir.join("cache")))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thread_lists_calls_and_keeps_state() {
    let dir = tempfile::tempdir().unwrap();
    let host = Toolhost::open(opts(dir.path(), &config(""))).await.unwrap();
    assert!(host.problems().is_empty(), "{:?}", host.problems());
    let thread = host.thread("lib-t1");
    let names: Vec<String> = thread.tools().await.unwrap().into_iter().map(|t| t.name).collect();
    assert_eq!(names[..2], ["read_file".to_string(), "write_file".to_string()], "{names:?}");
    let path = "/mnt/user-data/outputs/a.md";
    let turn = thread
        .call_turn(vec![
            ToolCall::new("write_file", json!({"description": "d", "path": path, "content": "x"})).with_id("w1"),
            ToolCall::new("present_files", json!({"filepaths": [path]})).with_id("p1"),
        ])
        .await
        .unwrap();
    assert_eq!(turn.len(), 2);
    assert_eq!(turn[0].text(), "OK");
    assert!(turn.iter().all(|r| r.error_kind().is_none()), "{turn:?}");
    assert_eq!(thread.state().await.unwrap().artifacts, vec![path.to_string()]);
    // Another thread sees neither the file nor the state.
    let other = host.thread("lib-t2");
    let r = other.call(ToolCall::new("read_file", json!({"description": "d", "path": path}))).await.unwrap();
    assert!(r.text().contains("File not found"), "{}", r.text());
    assert!(other.state().await.unwrap().artifacts.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_have_kinds_and_keep_deerflows_text() {
    let dir = tempfile::tempdir().unwrap();
    let hostile = format!(
        "  - {{name: spin, group: hostile, use: '{}:spin', capabilities: {{timeout_s: 0.3}}}}\n  - {{name: ok, group: hostile, use: '{}:ok'}}\n  - {{name: sleep, group: hostile, use: '{}:sleep'}}\nread_before_write: {{enabled: true}}\n",
        hostile::hostile_wasm().display(),
        hostile::hostile_wasm().display(),
        hostile::hostile_wasm().display()
    );
    let host = Toolhost::open(opts(dir.path(), &config(&hostile))).await.unwrap();
    let t = host.thread("kinds");
    let kind = |r: &toolhost::CallResult| r.error_kind();

    // LangGraph ToolNode's text, naming every tool of the run in order.
    let r = t.call(ToolCall::new("nope", json!({}))).await.unwrap();
    let names: Vec<String> = t.tools().await.unwrap().into_iter().map(|s| s.name).collect();
    assert_eq!(names[..5], ["read_file", "write_file", "spin", "ok", "sleep"], "{names:?}");
    assert_eq!(
        (kind(&r), r.text()),
        (Some(ErrorKind::NotFound), format!("Error: nope is not a valid tool, try one of [{}].", names.join(", ")))
    );

    // A component that refuses its arguments (the SDK's typed arguments).
    let r = t.call(ToolCall::new("sleep", json!({"ms": "soon"}))).await.unwrap();
    assert_eq!(kind(&r), Some(ErrorKind::InvalidArguments), "{}", r.text());
    assert!(r.text().starts_with("Error: invalid arguments for tool 'sleep'"), "{}", r.text());

    // read-before-write: an existing file written without reading it first is refused.
    let path = "/mnt/user-data/workspace/f.txt";
    let w = json!({"description": "d", "path": path, "content": "1"});
    assert_eq!(t.call(ToolCall::new("write_file", w.clone())).await.unwrap().text(), "OK");
    let again = host.thread("kinds-fresh-marks");
    std::fs::create_dir_all(host.thread_paths("kinds-fresh-marks").unwrap().workspace()).unwrap();
    std::fs::write(host.thread_paths("kinds-fresh-marks").unwrap().workspace().join("f.txt"), "old").unwrap();
    let r = again.call(ToolCall::new("write_file", w)).await.unwrap();
    assert_eq!(kind(&r), Some(ErrorKind::Refused), "{}", r.text());
    assert_eq!(
        std::fs::read_to_string(host.thread_paths("kinds-fresh-marks").unwrap().workspace().join("f.txt")).unwrap(),
        "old"
    );

    let r = t.call(ToolCall::new("spin", json!({}))).await.unwrap();
    assert_eq!(kind(&r), Some(ErrorKind::Timeout), "{}", r.text());

    let r = t
        .call(ToolCall::new("read_file", json!({"description": "d", "path": "/mnt/user-data/workspace/none"})))
        .await
        .unwrap();
    assert!(r.text().starts_with("Error: File not found"), "{}", r.text());

    let ok = t.call(ToolCall::new("ok", json!({}))).await.unwrap();
    assert_eq!((ok.error_kind(), ok.text().as_str()), (None, "ok"));
    hostile::assert_ok_still_works(&host).await;
}

/// `$VAR`s and `capabilities.env` see the environment the caller passes, never the process's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn config_vars_and_component_env_see_the_given_environment_only() {
    // A variable of this process the host must not see (HOME, PATH are always set).
    let home = std::env::var("HOME").expect("HOME is set");
    let env_tool = format!(
        "  - {{name: env, group: hostile, use: '{}:env', capabilities: {{env: [HOME, GIVEN]}}}}\n",
        hostile::hostile_wasm().display()
    );
    let dir = tempfile::tempdir().unwrap();
    let host = Toolhost::open(opts(dir.path(), &config(&env_tool))).await.unwrap();
    let (text, _) = hostile::call(&host, "env", json!({"name": "HOME"})).await;
    assert!(!text.contains(&home), "process HOME reached the component: {text}");
    let given =
        opts(dir.path(), &config(&env_tool)).env(Environment::new([("GIVEN".to_string(), "given-value".to_string())]));
    let host = Toolhost::open(given).await.unwrap();
    let (text, err) = hostile::call(&host, "env", json!({"name": "GIVEN"})).await;
    assert!(!err && text.contains("given-value"), "{text}");
    hostile::assert_ok_still_works_named(&host, "read_file").await;
}

/// Every read of the process environment in library code (the host and every crate's `src/`,
/// unit tests excluded) is one docs/embedding.md lists; a new one fails here until it is either
/// taken from `HostOptions::env` or documented. (Host bash, MCP and ACP taking theirs from the
/// given environment is tested with each: `crates/hostbash/tests/confinement.rs`,
/// `crates/mcp/src/config.rs`, `crates/acp/src/process.rs`.)
#[test]
fn library_reads_the_process_environment_only_where_documented() {
    // (file, what it reads): each is named in docs/embedding.md's statement.
    const DOCUMENTED: [(&str, &str); 2] =
        [("crates/core/src/env.rs", "Environment::from_process"), ("crates/builtins/src/present_files.rs", "HOME")];
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let mut dirs = vec![root.join("host/src")];
    for krate in std::fs::read_dir(root.join("crates")).unwrap() {
        dirs.push(krate.unwrap().path().join("src"));
    }
    let mut files = Vec::new();
    while let Some(dir) = dirs.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        for e in entries {
            let path = e.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|x| x == "rs") {
                files.push(path);
            }
        }
    }
    assert!(files.len() > 100, "the scan found the sources: {}", files.len());
    let mut reads = Vec::new();
    for path in files {
        let text = std::fs::read_to_string(&path).unwrap();
        // Unit tests may read what they like (CI markers, re-exec switches).
        let code = text.split("#[cfg(test)]\nmod tests").next().unwrap_or_default();
        let rel = path.strip_prefix(root).unwrap().to_string_lossy().into_owned();
        for (n, line) in code.lines().enumerate() {
            if ["env::var(", "env::var_os(", "env::vars(", "env::vars_os("].iter().any(|r| line.contains(r)) {
                reads.push((rel.clone(), n + 1, line.trim().to_string()));
            }
        }
    }
    let undocumented: Vec<_> = reads.iter().filter(|(f, ..)| !DOCUMENTED.iter().any(|(d, _)| d == f)).collect();
    assert!(undocumented.is_empty(), "process environment read outside HostOptions::env: {undocumented:#?}");
    for (file, what) in DOCUMENTED {
        assert!(
            reads.iter().any(|(f, ..)| f == file),
            "{file} no longer reads {what}: drop it from the list and the doc"
        );
    }
    let doc = std::fs::read_to_string(root.join("docs/embedding.md")).unwrap();
    for needle in ["Environment::from_process()", "present_files", "TOOLHOST_MCP_CHILD", "TOOLHOST_REQUEST_STATE_KEY"] {
        assert!(doc.contains(needle), "docs/embedding.md's environment statement names {needle}");
    }
}

#[test]
fn open_outside_tokio_is_a_clear_error_and_open_blocking_works() {
    let dir = tempfile::tempdir().unwrap();
    let err = futures_lite_block_on(Toolhost::open(opts(dir.path(), &config(""))));
    assert!(matches!(err, Err(HostError::NoTokioRuntime)), "{err:?}");
    let host = Toolhost::open_blocking(opts(dir.path(), &config(""))).unwrap();
    assert!(host.problems().is_empty());
}

/// Drive a future to completion without a tokio runtime.
fn futures_lite_block_on<F: std::future::Future>(f: F) -> F::Output {
    let waker = std::task::Waker::noop();
    let mut cx = std::task::Context::from_waker(waker);
    let mut f = std::pin::pin!(f);
    loop {
        if let std::task::Poll::Ready(v) = f.as_mut().poll(&mut cx) {
            return v;
        }
        std::thread::yield_now();
    }
}

/// `toolhost call NAME -` reads the arguments from stdin and `@FILE` from a file: a write larger
/// than the command line allows (the OS refuses an argument over 128 KiB).
#[test]
fn cli_call_takes_arguments_from_stdin_and_files() {
    use std::io::Write as _;
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("config.yaml"), config("")).unwrap();
    let big = "x".repeat(300_000);
    let args = json!({"description": "d", "path": "/mnt/user-data/workspace/big.txt", "content": big}).to_string();
    let cli = |extra: &[&str]| {
        let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_toolhost"));
        c.arg("--config").arg(dir.path().join("config.yaml")).arg("--data-dir").arg(dir.path().join("data"));
        c.env("DEERFLOW_WRITE_FILE_MAX_BYTES", "0").env_remove("DEER_FLOW_EXTENSIONS_CONFIG_PATH");
        c.args(["call", "--thread", "cli"]).args(extra);
        c
    };
    let mut child = cli(&["write_file", "-"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(args.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success() && String::from_utf8_lossy(&out.stdout).trim() == "OK", "{out:?}");
    let written = dir.path().join("data/threads/cli/user-data/workspace/big.txt");
    assert_eq!(std::fs::read_to_string(&written).unwrap().len(), 300_000);

    let file = dir.path().join("args.json");
    std::fs::write(&file, json!({"description": "d", "path": "/mnt/user-data/workspace/big.txt"}).to_string()).unwrap();
    let out = cli(&["read_file", &format!("@{}", file.display())]).output().unwrap();
    assert!(out.status.success(), "{out:?}");
    // DeerFlow's read_file cuts long output (sandbox.read_file_output_max_chars).
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("xxxxxxxxxx"), "{out:?}");

    // Bad input names where it came from; nothing is written.
    let out = cli(&["read_file", "@/nonexistent/args.json"]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("cannot read the arguments from /nonexistent/args.json"), "{err}");
    std::fs::write(&file, "[1, 2]").unwrap();
    let out = cli(&["read_file", &format!("@{}", file.display())]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("must be a JSON object"), "{err}");
    let mut child = cli(&["read_file", "-"])
        .stdin(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(b"{not json").unwrap();
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("from stdin are not valid JSON"), "{err}");
}

#[path = "support/paths.rs"]
mod paths;

/// Standard base64 (the conformance file carries its archives that way).
fn b64(text: &str) -> Vec<u8> {
    let (mut out, mut buf, mut bits) = (Vec::new(), 0u32, 0);
    for c in text.bytes() {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => continue,
        };
        buf = (buf << 6) | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((buf >> bits) as u8);
        }
    }
    out
}

/// `review_skill_package` end to end: assembled after `ask_clarification` as in DeerFlow, and a
/// `.skill` archive among the thread's uploads reviewed through the whole pipeline with the text
/// DeerFlow's tool gave for the same archive (conformance case `archive-good`; only the report's
/// wall-clock `completed_at` differs).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn review_skill_package_reviews_an_uploaded_archive() {
    let dir = tempfile::tempdir().unwrap();
    let host = Toolhost::open(opts(dir.path(), &config(""))).await.unwrap();
    let thread = host.thread("review-t1");
    let names: Vec<String> = thread.tools().await.unwrap().into_iter().map(|t| t.name).collect();
    let at = names.iter().position(|n| n == "review_skill_package").expect("assembled");
    assert_eq!(names[at - 2..=at], ["present_files", "ask_clarification", "review_skill_package"], "{names:?}");

    let vectors: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(paths::conformance().join("review_skill_package.json")).unwrap())
            .unwrap();
    let uploads = host.thread_paths("review-t1").unwrap().uploads();
    std::fs::create_dir_all(&uploads).unwrap();
    std::fs::write(uploads.join("good-skill.skill"), b64(vectors["archives"]["good-skill.skill"].as_str().unwrap()))
        .unwrap();
    let r = thread
        .call(ToolCall::new("review_skill_package", json!({"target": "/mnt/user-data/uploads/good-skill.skill"})))
        .await
        .unwrap();
    assert!(r.error_kind().is_none(), "{}", r.text());
    let case = vectors["cases"].as_array().unwrap().iter().find(|c| c["id"] == "archive-good").unwrap();
    let content: serde_json::Value = serde_json::from_str(&r.text()).unwrap();
    let completed_at = content["static_report"]["review"]["completed_at"].as_str().unwrap().to_string();
    assert!(completed_at.len() == 20 && completed_at.ends_with('Z'), "{completed_at}");
    let pinned = vectors["completed_at"].as_str().unwrap();
    assert_eq!(r.text().replace(&completed_at, pinned), case["expected"]["content"].as_str().unwrap());
    let kwargs = r.outcome.additional_kwargs.clone().unwrap();
    assert_eq!(serde_json::Value::Object(kwargs), case["expected"]["additional_kwargs"]);
    assert_eq!(r.outcome.structured.as_ref().unwrap()["markdown"], case["expected"]["artifact"]["markdown"]);

    // A host path is never read.
    let r = thread
        .call(ToolCall::new("review_skill_package", json!({"target": dir.path().display().to_string()})))
        .await
        .unwrap();
    assert!(
        r.text().ends_with("must be under the current workspace, /tmp, or the configured skills root"),
        "{}",
        r.text()
    );
}
