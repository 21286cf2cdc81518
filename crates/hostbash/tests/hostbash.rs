//! The host `bash` tool run for real: output formats, path validation and rewriting, masking,
//! the process-group timeout, the scrubbed environment, and Landlock confinement.

mod common;

use std::path::Path;
use std::sync::Arc;

use serde_json::json;
use toolhost_core::{CallContext, Status, ThreadFs, ThreadState, Tool};
use toolhost_hostbash::{
    bash_spec, confinement_status, BashConfig, BashTool, ConfineMode, LOCAL_HOST_BASH_DISABLED_MESSAGE,
};

fn ctx(data: &Path, thread: &str) -> CallContext {
    let fs = ThreadFs::open(data, thread).expect("thread fs");
    fs.ensure_tool_dirs().expect("thread dirs");
    CallContext::new(Arc::new(fs), "call-1", Arc::new(ThreadState::default()))
}

fn tool(confine: ConfineMode) -> BashTool {
    BashTool::new(BashConfig {
        allow_host_bash: true,
        confine,
        host_env: common::host_env::<&str>(&[]),
        ..BashConfig::default()
    })
}

async fn run(tool: &BashTool, ctx: &CallContext, command: &str) -> (String, Status) {
    let out = tool.call(ctx, json!({"description": "test", "command": command})).await;
    (out.text_content(), out.status)
}

/// DeerFlow's model-visible `bash` (LangChain's `convert_to_openai_function` of `bash_tool`, in
/// `tests/conformance/tool_schemas.json`): no titles, no top-level description.
#[test]
fn schema_is_deerflows() {
    let doc: serde_json::Value =
        serde_json::from_str(include_str!("../../../tests/conformance/tool_schemas.json")).expect("vectors");
    let expected = doc["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .find(|t| t["use"] == "deerflow.sandbox.tools:bash_tool")
        .expect("bash_tool vector");
    let spec = bash_spec();
    assert_eq!(spec.name, expected["name"]);
    assert_eq!(spec.description, expected["description"]);
    assert_eq!(spec.parameters, expected["parameters"]);
    let props: Vec<&String> = spec.parameters["properties"].as_object().expect("properties").keys().collect();
    assert_eq!(props, ["description", "command"], "description comes first");
}

#[tokio::test]
async fn disabled_unless_allowed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let c = ctx(dir.path(), "t1");
    let t = BashTool::new(BashConfig::default());
    let (text, status) = run(&t, &c, "echo hi").await;
    assert_eq!(text, format!("Error: {LOCAL_HOST_BASH_DISABLED_MESSAGE}"));
    assert_eq!(status, Status::Error);
}

#[tokio::test]
async fn output_formats() {
    let dir = tempfile::tempdir().expect("tempdir");
    let c = ctx(dir.path(), "t1");
    let t = tool(ConfineMode::Full);
    assert_eq!(run(&t, &c, "echo out").await.0, "out\n");
    assert_eq!(run(&t, &c, "true").await.0, "(no output)");
    assert_eq!(run(&t, &c, "echo out; echo err >&2; exit 3").await.0, "out\n\nStd Error:\nerr\n\nExit Code: 3");
    assert_eq!(run(&t, &c, "echo err >&2").await.0, "err\n");
    assert_eq!(run(&t, &c, "exit 4").await.0, "\nExit Code: 4");
    let (text, status) = run(&t, &c, "cat <(echo procsub)").await;
    assert_eq!((text.as_str(), status), ("procsub\n", Status::Success));
}

#[tokio::test]
async fn bad_arguments_are_named() {
    let dir = tempfile::tempdir().expect("tempdir");
    let c = ctx(dir.path(), "t1");
    let t = tool(ConfineMode::Off);
    let out = t.call(&c, json!({"description": "x"})).await;
    assert_eq!(out.text_content(), "Error: Invalid arguments for bash: missing required field 'command'");
    let out = t.call(&c, json!({"description": "x", "command": 5})).await;
    assert_eq!(out.text_content(), "Error: Invalid arguments for bash: 'command' must be a string, got a number");
}

#[tokio::test]
async fn virtual_paths_are_rewritten_and_masked() {
    let dir = tempfile::tempdir().expect("tempdir");
    let c = ctx(dir.path(), "t1");
    let t = tool(ConfineMode::Full);
    let (text, _) = run(&t, &c, "echo hi > /mnt/user-data/outputs/a.txt && cat /mnt/user-data/outputs/a.txt && pwd && ls /mnt/user-data/outputs/a.txt").await;
    assert_eq!(text, "hi\n/mnt/user-data/workspace\n/mnt/user-data/outputs/a.txt\n");
    assert_eq!(std::fs::read_to_string(c.paths().outputs().join("a.txt")).expect("written"), "hi\n");
    let host = dir.path().to_string_lossy().into_owned();
    let (text, _) = run(&t, &c, "echo $TMPDIR; readlink -f .").await;
    assert!(!text.contains(&host), "host path leaked: {text}");
}

#[tokio::test]
async fn path_validation_messages() {
    let dir = tempfile::tempdir().expect("tempdir");
    let c = ctx(dir.path(), "t1");
    let t = tool(ConfineMode::Off);
    let (text, status) = run(&t, &c, "cat /etc/hostname").await;
    assert_eq!(text, "Error: Unsafe absolute paths in command: /etc/hostname. Use paths under /mnt/user-data");
    assert_eq!(status, Status::Error);
    assert_eq!(run(&t, &c, "cat ../x").await.0, "Error: Access denied: path traversal detected");
}

#[tokio::test]
async fn timeout_kills_the_whole_group() {
    let dir = tempfile::tempdir().expect("tempdir");
    let c = ctx(dir.path(), "t1");
    let t = BashTool::new(BashConfig { allow_host_bash: true, command_timeout_secs: 1, ..BashConfig::default() });
    let started = std::time::Instant::now();
    let (text, _) = run(&t, &c, "sleep 30.4711 & echo started; wait").await;
    // The timeout is 1 s and the command would take 30 s without it: 10 s leaves a loaded
    // machine room and still proves the timeout ended the call.
    assert!(started.elapsed() < std::time::Duration::from_secs(10), "took {:?}", started.elapsed());
    assert!(text.starts_with("started\n\nCommand timed out after 1 second and was terminated."), "{text}");
    std::thread::sleep(std::time::Duration::from_millis(200));
    // Found from the host by its command line (a pid printed inside is the command's own pid
    // namespace's): gone, or a zombie waiting for a reaper (this container's init may not reap).
    let survivors: Vec<String> = std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter(|e| std::fs::read(e.path().join("cmdline")).is_ok_and(|c| c == b"sleep\x0030.4711\0"))
        .filter_map(|e| std::fs::read_to_string(e.path().join("stat")).ok())
        .filter(|s| s.rsplit(") ").next().is_some_and(|rest| !rest.starts_with('Z')))
        .collect();
    assert!(survivors.is_empty(), "the group's `sleep` child survived the timeout: {survivors:?}");
}

#[tokio::test]
async fn background_server_does_not_block_the_call() {
    let dir = tempfile::tempdir().expect("tempdir");
    let c = ctx(dir.path(), "t1");
    let t = tool(ConfineMode::Full);
    let started = std::time::Instant::now();
    let (text, _) = run(&t, &c, "sleep 30 & echo bg").await;
    assert_eq!(text, "bg\n");
    // Waiting for the background `sleep` would take 30 s: 10 s leaves a loaded machine room to
    // start and confine the command and still proves the call did not wait. (The `sleep` is
    // killed when the tool is dropped at the end of the test.)
    assert!(started.elapsed() < std::time::Duration::from_secs(10), "took {:?}", started.elapsed());
}

#[tokio::test]
async fn secret_env_vars_are_not_visible() {
    let dir = tempfile::tempdir().expect("tempdir");
    let c = ctx(dir.path(), "t1");
    // The environment is an allow-list: a plain variable passes when sandbox.bash_env names it.
    let t = BashTool::new(BashConfig {
        allow_host_bash: true,
        env: vec!["TOOLHOST_TEST_PLAIN".into(), "TOOLHOST_TEST_API_KEY_UNLISTED".into()],
        host_env: common::host_env(&[
            ("TOOLHOST_TEST_API_KEY", "sk-secret-value"),
            ("TOOLHOST_TEST_PLAIN", "plain-value"),
        ]),
        ..BashConfig::default()
    });
    let (text, _) = run(&t, &c, "env").await;
    assert!(!text.contains("sk-secret-value"), "secret leaked");
    assert!(text.contains("TOOLHOST_TEST_PLAIN=plain-value"));
}

#[tokio::test]
async fn output_is_middle_truncated() {
    let dir = tempfile::tempdir().expect("tempdir");
    let c = ctx(dir.path(), "t1");
    let t = BashTool::new(BashConfig { allow_host_bash: true, output_max_chars: 200, ..BashConfig::default() });
    let (text, _) = run(&t, &c, "seq 1 1000").await;
    assert!(text.chars().count() <= 200);
    assert!(text.starts_with("1\n2\n") && text.ends_with("999\n1000\n") && text.contains("[middle truncated: "));
}

#[tokio::test]
async fn confined_command_cannot_escape_the_thread() {
    if !common::landlock() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let other = ctx(dir.path(), "other");
    std::fs::write(other.paths().workspace().join("secret.txt"), "other-thread-secret").expect("write");
    let outside = tempfile::tempdir().expect("tempdir");
    let c = ctx(dir.path(), "t1");
    // Absolute host paths are refused by the validator, so hand them over in variables it
    // cannot see: confinement is what stops them.
    let t = BashTool::new(BashConfig {
        allow_host_bash: true,
        env: vec!["TOOLHOST_TEST_OTHER_FILE".into(), "TOOLHOST_TEST_OUTSIDE_FILE".into()],
        host_env: common::host_env(&[
            ("TOOLHOST_TEST_OTHER_FILE", other.paths().workspace().join("secret.txt")),
            ("TOOLHOST_TEST_OUTSIDE_FILE", outside.path().join("escape.txt")),
        ]),
        ..BashConfig::default()
    });
    let (text, _) = run(&t, &c, "cat \"$TOOLHOST_TEST_OTHER_FILE\"").await;
    assert!(!text.contains("other-thread-secret"), "read another thread's file: {text}");
    assert!(text.contains("Permission denied"), "{text}");
    let target = outside.path().join("escape.txt");
    let (text, _) = run(&t, &c, "echo x > \"$TOOLHOST_TEST_OUTSIDE_FILE\"").await;
    assert!(!target.exists(), "wrote outside the thread dir: {text}");
    let (text, _) = run(&t, &c, "cat \"$(printf %s /proc/$PPID/environ)\" | tr '\\0' '\\n' | head -3").await;
    assert!(!text.contains('='), "read the host's environment: {text}");
    // Normal work inside the thread still works, with a private TMPDIR.
    let (text, status) = run(
        &t,
        &c,
        "mktemp >/dev/null && echo ok > w.txt && cat w.txt && python3 -c 'print(2+2)' 2>/dev/null || echo nopython",
    )
    .await;
    assert_eq!(status, Status::Success, "{text}");
    assert!(text.starts_with("ok\n"), "{text}");
}

#[test]
fn confinement_is_explained() {
    let status = confinement_status().to_string();
    let active = status.starts_with("landlock ABI v") && status.ends_with(": active");
    assert!(active || status.starts_with("unavailable: "), "{status}");
    println!("confinement: {status}");
    assert_eq!(tool(ConfineMode::Off).confinement(), "off (sandbox confinement disabled by configuration)");
    assert_eq!(tool(ConfineMode::Full).confinement(), status);
}
