//! The thread boundary (issue 9): host code never trusts what a tool can shape. A hostile
//! component (guest-tools/hostile) and the test itself (standing in for an unconfined peer) plant
//! every shape a thread directory can hold — relative symlinks to host files and to another
//! thread, links to /dev/zero and /proc/self/fd/0, a FIFO, a sparse 4 GiB file, a replaced
//! `workspace` — and then every native tool and middleware runs on them. Nothing outside the
//! thread is read or written (sentinel files with secret content are checked), nothing blocks,
//! memory stays bounded, and a normal call works afterwards.

use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{json, Value};
use toolhost::assembly::AssemblyRequest;
use toolhost::{HostOptions, Toolhost};

#[path = "support/hostile.rs"]
mod hostile;
use hostile::hostile_wasm;

const SECRET: &str = "TOP-SECRET-SENTINEL-7f3a";
const OTHER_SECRET: &str = "OTHER-THREAD-SENTINEL-91c2";

struct Env {
    dir: tempfile::TempDir,
    host: Toolhost,
}

impl Env {
    fn data(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    /// A file outside every thread, with the secret in it.
    fn sentinel(&self) -> PathBuf {
        self.dir.path().join("sentinel.md")
    }

    fn thread_dir(&self, t: &str) -> PathBuf {
        self.data().join("threads").join(t)
    }
}

fn open() -> Env {
    let dir = tempfile::tempdir().unwrap();
    let hostile = |name: &str, caps: &str| {
        format!(
            "  - {{name: {name}, group: hostile, use: '{}:{name}', capabilities: {caps}}}\n",
            hostile_wasm().display()
        )
    };
    let mut yaml = String::from(
        "models:\n  - {name: vision, supports_vision: true}\ntools:\n\
         \x20 - {name: read_file, group: 'file:read', use: 'deerflow.sandbox.tools:read_file_tool'}\n\
         \x20 - {name: write_file, group: 'file:write', use: 'deerflow.sandbox.tools:write_file_tool'}\n\
         \x20 - {name: str_replace, group: 'file:write', use: 'deerflow.sandbox.tools:str_replace_tool'}\n\
         \x20 - {name: grep, group: 'file:read', use: 'deerflow.sandbox.tools:grep_tool'}\n\
         \x20 - {name: ls, group: 'file:read', use: 'deerflow.sandbox.tools:ls_tool'}\n",
    );
    for name in ["plant_symlink", "plant_sparse", "rename", "read", "write"] {
        yaml += &hostile(name, "{filesystem: user-data, timeout_s: 10}");
    }
    for name in ["claim_artifacts", "claim_viewed_image", "ok"] {
        yaml += &hostile(name, "{}");
    }
    let config = dir.path().join("config.yaml");
    std::fs::write(&config, yaml).unwrap();
    std::fs::write(dir.path().join("extensions_config.json"), r#"{"mcpServers": {}}"#).unwrap();
    std::fs::write(dir.path().join("sentinel.md"), format!("# {SECRET}\n{SECRET}\n")).unwrap();
    let opts = HostOptions {
        config_path: config,
        data_dir: dir.path().join("data"),
        persist_state: false,
        cache_dir: Some(dir.path().join("cache")),
        extensions_path: Some(dir.path().join("extensions_config.json")),
        extra_ca_certs: None,
        write_file_max_bytes: None,
    };
    let host = Toolhost::open(opts).unwrap();
    let errors: Vec<_> =
        host.problems().iter().filter(|p| p.severity == toolhost::Severity::Error).map(|p| &p.message).collect();
    assert!(errors.is_empty(), "{errors:?}");
    Env { dir, host }
}

/// One call through the whole pipeline, bounded: a call that blocks fails the test instead of
/// hanging it.
async fn call(env: &Env, thread: &str, name: &str, args: Value) -> toolhost::CallResult {
    let req = AssemblyRequest::default();
    tokio::time::timeout(Duration::from_secs(30), env.host.call(&req, thread, name, args, None))
        .await
        .unwrap_or_else(|_| panic!("{name} blocked for 30 s"))
        .unwrap()
}

async fn text(env: &Env, thread: &str, name: &str, args: Value) -> (String, bool) {
    let r = call(env, thread, name, args).await;
    (r.outcome.text_content(), r.outcome.is_error())
}

/// The resident set of this process (the host runs in it), in bytes.
fn rss() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap();
    kb * 1024
}

fn rel_to(from_depth: usize, target: &Path) -> String {
    // A relative link target climbing `from_depth` directories, then down to `target`.
    let mut s = "../".repeat(from_depth);
    s.push_str(target.to_string_lossy().trim_start_matches('/'));
    s
}

fn assert_no_secret(what: &str, s: &str) {
    assert!(!s.contains(SECRET) && !s.contains(OTHER_SECRET), "{what} leaked a secret: {s}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn planted_links_fifos_and_sparse_files_never_leave_the_thread() {
    let env = open();
    let t = "victim";
    // Another thread with its own secret, which the victim thread must never see.
    let (_, err) = text(&env, "other", "write", json!({"path": "/mnt/user-data/uploads/notes.md"})).await;
    assert!(!err);
    std::fs::write(env.thread_dir("other").join("user-data/uploads/notes.md"), format!("# {OTHER_SECRET}\n")).unwrap();
    // Positive control: a real upload with a real outline.
    text(&env, t, "ok", json!({})).await;
    let up = env.thread_dir(t).join("user-data/uploads");
    std::fs::create_dir_all(&up).unwrap();
    std::fs::write(up.join("fine.pdf"), "%PDF").unwrap();
    std::fs::write(up.join("fine.md"), "# Fine heading\n").unwrap();

    // The hostile component plants what a component can: relative symlinks out of the thread
    // (to the host secret, to the other thread, to /dev/zero and /proc/self/fd/0, to the
    // thread's own host-side state) and a sparse 4 GiB file.
    // uploads/ is 5 levels below <dir>: data/threads/victim/user-data/uploads; `to_root` climbs
    // from workspace/ to /.
    let to_root = env.dir.path().components().count() - 1 + 5;
    let plants = [
        (rel_to(5, Path::new("sentinel.md")), "/mnt/user-data/uploads/report.md"),
        ("../../../other/user-data/uploads/notes.md".to_string(), "/mnt/user-data/uploads/theirs.md"),
        (rel_to(to_root, Path::new("/dev/zero")), "/mnt/user-data/workspace/zero.txt"),
        (rel_to(to_root, Path::new("/proc/self/fd/0")), "/mnt/user-data/workspace/stdin.txt"),
        ("../../host/state.json".to_string(), "/mnt/user-data/workspace/state.txt"),
        (rel_to(5, Path::new("sentinel.md")), "/mnt/user-data/outputs/leak.png"),
    ];
    for (target, link) in &plants {
        let (out, err) = text(&env, t, "plant_symlink", json!({"target": target, "link": link})).await;
        assert!(!err, "planting {link}: {out}");
    }
    std::fs::write(up.join("report.pdf"), "%PDF").unwrap();
    std::fs::write(up.join("theirs.pdf"), "%PDF").unwrap();
    let (out, err) = text(
        &env,
        t,
        "plant_sparse",
        json!({"path": "/mnt/user-data/uploads/huge.md", "bytes": 4u64 << 30, "head": "# Huge\n"}),
    )
    .await;
    assert!(!err, "{out}");
    // A FIFO (host bash is refused mkfifo by its confinement; a peer outside the sandbox is not).
    let fifo = env.thread_dir(t).join("user-data/workspace/pipe.txt");
    assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    assert!(std::process::Command::new("mkfifo").arg(up.join("piped.md")).status().unwrap().success());
    std::fs::write(up.join("piped.pdf"), "%PDF").unwrap();

    let before = rss();

    // list_uploaded_files with outlines: the symlinked companions are not followed, the FIFO
    // companion does not block, the sparse file is outlined from its first bytes.
    let (listing, err) = text(&env, t, "list_uploaded_files", json!({"include_outline": true})).await;
    assert!(!err, "{listing}");
    assert_no_secret("list_uploaded_files", &listing);
    let v: Value = serde_json::from_str(&listing).unwrap();
    let file = |n: &str| v["files"].as_array().unwrap().iter().find(|f| f["filename"] == n).cloned();
    assert_eq!(file("fine.pdf").unwrap()["outline"], json!([{"title": "Fine heading", "line": 1}]));
    assert_eq!(file("huge.md").unwrap()["outline"], json!([{"title": "Huge", "line": 1}]));
    for n in ["report.pdf", "theirs.pdf", "piped.pdf"] {
        assert!(file(n).unwrap().get("outline").is_none(), "{n}: {listing}");
    }
    assert!(file("report.md").is_none() && file("theirs.md").is_none(), "links are never listed: {listing}");

    // view_image and present_files on a link out of the thread.
    let (out, err) = text(&env, t, "view_image", json!({"image_path": "/mnt/user-data/outputs/leak.png"})).await;
    assert!(err && out == "Error: Access denied: path traversal detected", "{out}");
    let r = call(&env, t, "present_files", json!({"filepaths": ["/mnt/user-data/outputs/leak.png"]})).await;
    assert!(r.outcome.is_error() && r.outcome.update.artifacts.is_none(), "{}", r.outcome.text_content());

    // The file tools (a component) refuse the links and the FIFO at once.
    for path in
        ["/mnt/user-data/uploads/report.md", "/mnt/user-data/workspace/zero.txt", "/mnt/user-data/workspace/state.txt"]
    {
        let (out, err) = text(&env, t, "read_file", json!({"description": "d", "path": path})).await;
        assert!(err || out.starts_with("Error"), "{path}: {out}");
        assert_no_secret(path, &out);
    }
    let (out, _) =
        text(&env, t, "read_file", json!({"description": "d", "path": "/mnt/user-data/workspace/pipe.txt"})).await;
    assert_eq!(out, "Error: Path is not a regular file: /mnt/user-data/workspace/pipe.txt");
    let (out, err) =
        text(&env, t, "grep", json!({"description": "d", "pattern": "SENTINEL", "path": "/mnt/user-data"})).await;
    assert_no_secret("grep", &out);
    assert!(!out.contains("pipe.txt"), "{err} {out}");

    // The read-before-write gate on each planted shape: it must neither read through the link
    // (/dev/zero would exhaust memory, /proc/self/fd/0 would swallow stdin) nor block on the FIFO,
    // and it fails closed where it cannot verify.
    for path in [
        "/mnt/user-data/workspace/zero.txt",
        "/mnt/user-data/workspace/stdin.txt",
        "/mnt/user-data/workspace/state.txt",
    ] {
        let (out, err) = text(&env, t, "write_file", json!({"description": "d", "path": path, "content": "x"})).await;
        assert!(err, "{path}: {out}");
    }
    let (out, err) = text(
        &env,
        t,
        "write_file",
        json!({"description": "d", "path": "/mnt/user-data/workspace/pipe.txt", "content": "x"}),
    )
    .await;
    assert!(err, "{out}");
    assert!(
        out.contains("cannot be verified") && out.contains("not a regular file (a FIFO)"),
        "the gate fails closed on a FIFO: {out}"
    );
    let (out, err) = text(
        &env,
        t,
        "str_replace",
        json!({"description": "d", "path": "/mnt/user-data/uploads/huge.md", "old_str": "Huge", "new_str": "x"}),
    )
    .await;
    assert!(err && out.contains("cannot be verified") && out.contains("over the"), "sparse 4 GiB: {out}");
    let grown = rss().saturating_sub(before);
    assert!(grown < 512 << 20, "memory grew by {grown} bytes");

    // Nothing outside the thread changed.
    assert_eq!(std::fs::read_to_string(env.sentinel()).unwrap(), format!("# {SECRET}\n{SECRET}\n"));
    assert_eq!(
        std::fs::read_to_string(env.thread_dir("other").join("user-data/uploads/notes.md")).unwrap(),
        format!("# {OTHER_SECRET}\n")
    );
    assert!(std::fs::symlink_metadata(&fifo).unwrap().file_type().is_fifo());

    // A normal read-then-write still works in the same thread.
    let (_, err) = text(
        &env,
        t,
        "write_file",
        json!({"description": "d", "path": "/mnt/user-data/workspace/n.txt", "content": "one"}),
    )
    .await;
    assert!(!err);
    let (out, _) =
        text(&env, t, "read_file", json!({"description": "d", "path": "/mnt/user-data/workspace/n.txt"})).await;
    assert_eq!(out, "one");
    let (out, err) = text(
        &env,
        t,
        "write_file",
        json!({"description": "d", "path": "/mnt/user-data/workspace/n.txt", "content": "two"}),
    )
    .await;
    assert!(!err, "{out}");
}

/// Issue 9 #8: `x.txt/` named the same file as `x.txt` for the tool but not for the gate.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_gate_and_the_tool_agree_on_every_spelling_of_a_path() {
    let env = open();
    let t = "spelling";
    let w = |p: &str, c: &str| json!({"description": "d", "path": p, "content": c});
    let (_, err) = text(&env, t, "write_file", w("/mnt/user-data/workspace/x.txt", "original")).await;
    assert!(!err);
    for spelling in [
        "/mnt/user-data/workspace/x.txt/",
        "/mnt/user-data/workspace//x.txt",
        "/mnt/user-data/workspace/./x.txt",
        "/mnt/user-data//workspace/x.txt/.",
    ] {
        let (out, err) = text(&env, t, "write_file", w(spelling, "clobbered")).await;
        assert!(err && out.contains("you have not read its current version"), "{spelling}: {out}");
    }
    let ws = env.thread_dir(t).join("user-data/workspace");
    assert_eq!(std::fs::read_to_string(ws.join("x.txt")).unwrap(), "original");
    // A link inside the thread is the same file to both: read through the link, write the file.
    let (_, err) =
        text(&env, t, "plant_symlink", json!({"target": "x.txt", "link": "/mnt/user-data/workspace/alias.txt"})).await;
    assert!(!err);
    let (out, err) = text(&env, t, "write_file", w("/mnt/user-data/workspace/alias.txt", "via alias")).await;
    assert!(err && out.contains("you have not read its current version"), "{out}");
    // Positive control: after a read the write passes.
    text(&env, t, "read_file", json!({"description": "d", "path": "/mnt/user-data/workspace/x.txt/"})).await;
    let (out, err) = text(&env, t, "write_file", w("/mnt/user-data/workspace/x.txt/", "updated")).await;
    assert!(!err, "{out}");
    assert_eq!(std::fs::read_to_string(ws.join("x.txt")).unwrap(), "updated");
}

/// Issue 9 #2: a thread's `workspace` replaced by a link to `/` (what bash could do before its
/// Landlock rules moved to the directories themselves) is refused, never followed, by the
/// component preopens and by every builtin; other threads keep working.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replaced_workspace_is_refused_not_followed() {
    let env = open();
    let t = "swapped";
    let ud = env.thread_dir(t).join("user-data");
    text(&env, t, "ok", json!({})).await;
    std::fs::create_dir_all(ud.join("workspace")).unwrap();
    std::fs::rename(ud.join("workspace"), ud.join("ws-old")).unwrap();
    std::os::unix::fs::symlink(env.dir.path(), ud.join("workspace")).unwrap();
    // A fresh host: nothing of the thread is cached from before the swap.
    drop(env.host);
    let env = Env { host: reopen(&env.dir), dir: env.dir };
    let (out, err) = text(&env, t, "read", json!({"path": "/mnt/user-data/workspace/sentinel.md"})).await;
    assert!(err, "{out}");
    assert_no_secret("read through a swapped workspace", &out);
    assert!(out.contains("/mnt/user-data/workspace was replaced"), "{out}");
    let (out, err) = text(&env, t, "write", json!({"path": "/mnt/user-data/workspace/sentinel.md"})).await;
    assert!(err, "{out}");
    let (out, err) =
        text(&env, t, "read_file", json!({"description": "d", "path": "/mnt/user-data/workspace/sentinel.md"})).await;
    assert!(err || out.starts_with("Error"), "{out}");
    assert_no_secret("read_file", &out);
    let (out, err) = text(&env, t, "view_image", json!({"image_path": "/mnt/user-data/workspace/sentinel.png"})).await;
    assert!(err, "{out}");
    assert_eq!(std::fs::read_to_string(env.sentinel()).unwrap(), format!("# {SECRET}\n{SECRET}\n"));
    // Another thread is untouched by this one's state.
    let (out, err) = hostile::call(&env.host, "write", json!({"path": "/mnt/user-data/workspace/a.txt"})).await;
    assert!(!err, "{out}");
    assert_eq!(std::fs::read_to_string(env.thread_dir("t1").join("user-data/workspace/a.txt")).unwrap(), "pwned");
    hostile::assert_ok_still_works(&env.host).await;
}

fn reopen(dir: &tempfile::TempDir) -> Toolhost {
    let opts = HostOptions {
        config_path: dir.path().join("config.yaml"),
        data_dir: dir.path().join("data"),
        persist_state: false,
        cache_dir: Some(dir.path().join("cache")),
        extensions_path: Some(dir.path().join("extensions_config.json")),
        extra_ca_certs: None,
        write_file_max_bytes: None,
    };
    Toolhost::open(opts).unwrap()
}

/// A component's state update is input: artifacts must name files under outputs, viewed images
/// must resolve inside the thread, and the host — not the component — says where they are.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn component_state_updates_are_checked() {
    let env = open();
    let t = "claims";
    for bad in [
        json!(["/etc/passwd"]),
        json!(["/mnt/user-data/outputs/../../x"]),
        json!(["/mnt/user-data/workspace/a.md"]),
        json!(["/mnt/user-data/outputs"]),
    ] {
        let r = call(&env, t, "claim_artifacts", json!({"paths": bad})).await;
        assert!(r.outcome.is_error(), "{bad}: {}", r.outcome.text_content());
        assert!(r.outcome.text_content().contains("artifact"), "{}", r.outcome.text_content());
    }
    let r = call(
        &env,
        t,
        "claim_viewed_image",
        json!({"path": "/mnt/user-data/uploads/../../../../sentinel.png", "actual_path": env.sentinel()}),
    )
    .await;
    assert!(r.outcome.is_error(), "{}", r.outcome.text_content());
    let state = env.host.thread_state(t).await.unwrap();
    assert!(state.artifacts.is_empty() && state.viewed_images.is_empty(), "a refused update is not merged");
    // Positive control: a genuine output is accepted, and a viewed image's actual_path is the
    // host's own resolution, whatever the component claimed.
    let r = call(&env, t, "claim_artifacts", json!({"paths": ["/mnt/user-data/outputs/report.md"]})).await;
    assert!(!r.outcome.is_error(), "{}", r.outcome.text_content());
    let r = call(
        &env,
        t,
        "claim_viewed_image",
        json!({"path": "/mnt/user-data/outputs/a.png", "actual_path": "/etc/shadow"}),
    )
    .await;
    assert!(!r.outcome.is_error(), "{}", r.outcome.text_content());
    let state = env.host.thread_state(t).await.unwrap();
    assert_eq!(state.artifacts, ["/mnt/user-data/outputs/report.md"]);
    let actual = state.viewed_images["/mnt/user-data/outputs/a.png"]["actual_path"].as_str().unwrap().to_string();
    assert!(actual.ends_with("threads/claims/user-data/outputs/a.png"), "{actual}");
}

/// Thread directories and state files are private to the user toolhost runs as.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thread_directories_and_state_are_private() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("config.yaml"), "tools: []\n").unwrap();
    let opts = HostOptions {
        config_path: dir.path().join("config.yaml"),
        data_dir: dir.path().join("data"),
        persist_state: true,
        cache_dir: Some(dir.path().join("cache")),
        extensions_path: None,
        extra_ca_certs: None,
        write_file_max_bytes: None,
    };
    let host = Toolhost::open(opts).unwrap();
    let r = host
        .call(
            &AssemblyRequest::default(),
            "p1",
            "present_files",
            json!({"filepaths": ["/mnt/user-data/outputs/a.md"]}),
            None,
        )
        .await
        .unwrap();
    assert!(!r.outcome.is_error(), "{}", r.outcome.text_content());
    let mode = |p: &str| std::fs::metadata(dir.path().join(p)).unwrap().permissions().mode() & 0o777;
    for d in ["data/threads", "data/threads/p1", "data/threads/p1/user-data", "data/threads/p1/host"] {
        assert_eq!(mode(d), 0o700, "{d}");
    }
    assert_eq!(mode("data/threads/p1/host/state.json"), 0o600);
}

/// `sandbox.thread_disk_quota_mb` bounds what the file tools may write into a thread; the
/// refused write leaves nothing behind, and writes fit again once space is freed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_disk_quota_refuses_writes_past_it() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("config.yaml"),
        "sandbox:\n  use: deerflow.sandbox.local:LocalSandboxProvider\n  thread_disk_quota_mb: 1\n\
         read_before_write:\n  enabled: false\ntools:\n\
         \x20 - {name: write_file, group: 'file:write', use: 'deerflow.sandbox.tools:write_file_tool'}\n",
    )
    .unwrap();
    let host = reopen(&dir);
    assert!(host.pipeline_layers().contains(&"thread_disk_quota"));
    // write_file takes at most 80 KiB a call: append 64 KiB pieces until the quota refuses one.
    let piece = |path: &str, append: bool, n: usize| json!({"description": "d", "path": path, "content": "x".repeat(n), "append": append});
    let req = AssemblyRequest::default();
    let ud = dir.path().join("data/threads/q/user-data");
    let mut accepted = 0usize;
    let refusal = loop {
        let r = host
            .call(&req, "q", "write_file", piece("/mnt/user-data/workspace/a.txt", true, 64 << 10), None)
            .await
            .unwrap();
        if r.outcome.is_error() {
            break r.outcome.text_content();
        }
        accepted += 1;
        assert!(accepted < 64, "the quota never refused a write");
    };
    assert!(refusal.contains("disk quota of 1 MB"), "{refusal}");
    // About 1 MB went in (allocation rounds up to blocks), and the refused piece did not.
    assert!((14..=16).contains(&accepted), "{accepted} pieces of 64 KiB accepted");
    assert_eq!(std::fs::metadata(ud.join("workspace/a.txt")).unwrap().len(), (accepted as u64) << 16);
    // Freeing space (overwriting with less) makes room again.
    let r = host.call(&req, "q", "write_file", piece("/mnt/user-data/workspace/a.txt", false, 10), None).await.unwrap();
    assert!(!r.outcome.is_error(), "{}", r.outcome.text_content());
    let r =
        host.call(&req, "q", "write_file", piece("/mnt/user-data/outputs/b.txt", false, 64 << 10), None).await.unwrap();
    assert!(!r.outcome.is_error(), "{}", r.outcome.text_content());
    // Another thread has its own quota.
    for _ in 0..10 {
        let r = host
            .call(&req, "q2", "write_file", piece("/mnt/user-data/workspace/a.txt", true, 64 << 10), None)
            .await
            .unwrap();
        assert!(!r.outcome.is_error(), "{}", r.outcome.text_content());
    }
}

#[test]
fn a_zero_disk_quota_is_a_config_error_with_its_line() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("config.yaml"), "sandbox:\n  use: x\n  thread_disk_quota_mb: 0\n").unwrap();
    let err = match Toolhost::open(HostOptions::new(dir.path().join("config.yaml"))) {
        Err(e) => e.to_string(),
        Ok(_) => panic!("a zero quota was accepted"),
    };
    assert!(err.contains(":3:") && err.contains("thread_disk_quota_mb") && err.contains("at least 1"), "{err}");
}
