//! `sandbox.thread_disk_quota_mb` holds whatever writes (issue 23, finding 4): a host bash
//! command, a component with a filesystem grant, and `str_replace` with `replace_all` each try to
//! put far more than the quota into a thread. Each call fails with an error naming the quota and
//! the usage, the thread does not end above the quota, nothing stored before loses a byte, and a
//! normal write that fits still works afterwards.

use std::path::{Path, PathBuf};

use serde_json::{json, Value};
use toolhost::assembly::AssemblyRequest;
use toolhost::{HostOptions, Toolhost};

#[path = "support/hostile.rs"]
mod hostile;
use hostile::hostile_wasm;

const MIB: u64 = 1 << 20;
/// The quota every test sets: 5 MB.
const QUOTA: u64 = 5 * MIB;
/// What every thread holds before the hostile call: it must survive byte for byte.
const KEPT: &str = "/mnt/user-data/workspace/kept.txt";

struct Env {
    dir: tempfile::TempDir,
    host: Toolhost,
}

impl Env {
    fn open() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let yaml = format!(
            "sandbox:\n  use: deerflow.sandbox.local:LocalSandboxProvider\n  allow_host_bash: true\n  \
             bash_command_timeout: 60\n  thread_disk_quota_mb: 5\n\
             read_before_write:\n  enabled: false\ntools:\n\
             \x20 - {{name: bash, group: bash, use: 'deerflow.sandbox.tools:bash_tool'}}\n\
             \x20 - {{name: read_file, group: 'file:read', use: 'deerflow.sandbox.tools:read_file_tool'}}\n\
             \x20 - {{name: write_file, group: 'file:write', use: 'deerflow.sandbox.tools:write_file_tool'}}\n\
             \x20 - {{name: str_replace, group: 'file:write', use: 'deerflow.sandbox.tools:str_replace_tool'}}\n\
             \x20 - {{name: plant_sparse, group: hostile, use: '{w}:plant_sparse', capabilities: {{filesystem: user-data, timeout_s: 60, memory_mb: 512}}}}\n\
             \x20 - {{name: ok, group: hostile, use: '{w}:ok'}}\n",
            w = hostile_wasm().display()
        );
        std::fs::write(dir.path().join("config.yaml"), yaml).unwrap();
        let opts = HostOptions::new(dir.path().join("config.yaml"))
            .data_dir(dir.path().join("data"))
            .cache_dir(Some(dir.path().join("cache")));
        let host = Toolhost::open_blocking(opts).unwrap();
        Env { dir, host }
    }

    fn user_data(&self, t: &str) -> PathBuf {
        self.dir.path().join("data/threads").join(t).join("user-data")
    }

    fn host_path(&self, t: &str, vpath: &str) -> PathBuf {
        self.user_data(t).join(vpath.strip_prefix("/mnt/user-data/").unwrap())
    }

    fn usage(&self, t: &str) -> u64 {
        self.host.thread_fs(t).unwrap().disk_usage().unwrap()
    }

    async fn call(&self, t: &str, name: &str, args: Value) -> (String, bool) {
        let r = self.host.call(&AssemblyRequest::default(), t, name, args, None).await.unwrap();
        (r.outcome.text_content(), r.outcome.is_error())
    }

    async fn bash(&self, t: &str, command: &str) -> (String, bool) {
        self.call(t, "bash", json!({"description": "d", "command": command})).await
    }

    /// A 1 MiB file of known bytes, stored before anything hostile runs.
    async fn store_kept(&self, t: &str) -> Vec<u8> {
        let bytes: Vec<u8> = (0..MIB).map(|i| b'a' + (i % 26) as u8).collect();
        let content = String::from_utf8(bytes.clone()).unwrap();
        // write_file takes at most 80 KiB a call: append in pieces.
        for piece in content.as_bytes().chunks(64 << 10) {
            let (text, err) = self
                .call(
                    t,
                    "write_file",
                    json!({"description": "d", "path": KEPT, "content": std::str::from_utf8(piece).unwrap(), "append": true}),
                )
                .await;
            assert!(!err, "{text}");
        }
        assert_eq!(std::fs::read(self.host_path(t, KEPT)).unwrap(), bytes);
        bytes
    }

    /// What must hold after a call the quota stopped: the error names the quota and the usage,
    /// the thread is within its quota, the stored file is whole, and a normal write that fits
    /// still works.
    async fn assert_held(&self, t: &str, (text, err): (String, bool), kept: &[u8]) {
        assert!(err, "the call past the quota succeeded: {text}");
        assert!(text.contains("disk quota of 5 MB") && text.contains("bytes in use"), "{text}");
        let used = self.usage(t);
        assert!(used <= QUOTA, "the thread ends at {used} bytes, over its {QUOTA}-byte quota: {text}");
        assert_eq!(std::fs::read(self.host_path(t, KEPT)).unwrap(), kept, "a stored file lost bytes");
        let small = "/mnt/user-data/outputs/after.txt";
        let (text, err) =
            self.call(t, "write_file", json!({"description": "d", "path": small, "content": "still works"})).await;
        assert!(!err, "{text}");
        assert_eq!(std::fs::read_to_string(self.host_path(t, small)).unwrap(), "still works");
    }
}

fn files_under(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        out.push(e.file_name().to_string_lossy().into_owned());
    }
    out.sort();
    out
}

/// Host bash: one 80 MB file, the same appended to a stored file, and 400 files of 200 KB
/// into a 5 MB quota. Each command is stopped, what it wrote is taken back (the appended file
/// is cut back to exactly its stored bytes), and bash itself still runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn host_bash_cannot_write_past_the_quota() {
    let env = Env::open();
    let kept = env.store_kept("b").await;

    let r = env.bash("b", "head -c 80M /dev/zero > /mnt/user-data/workspace/f && echo WROTE").await;
    assert!(!r.0.contains("WROTE"), "{}", r.0);
    env.assert_held("b", r, &kept).await;
    assert!(!env.host_path("b", "/mnt/user-data/workspace/f").exists(), "the new file was taken back");

    let r = env.bash("b", &format!("head -c 80M /dev/zero >> {KEPT}")).await;
    env.assert_held("b", r, &kept).await;

    let r = env
        .bash("b", "for i in $(seq 1 400); do head -c 200K /dev/zero > /mnt/user-data/workspace/s$i; done; echo WROTE")
        .await;
    env.assert_held("b", r, &kept).await;
    let left = files_under(&env.user_data("b").join("workspace"));
    assert!(left.len() < 400, "every small file stayed: {}", left.len());

    // The small files that fit stayed: the thread is full. Bash still runs, frees space, and
    // what then fits is written.
    let (text, err) = env.bash("b", "rm /mnt/user-data/workspace/s* && echo FREED").await;
    assert!(!err && text.contains("FREED"), "{text}");
    let (text, err) = env.bash("b", "head -c 100K /dev/zero > /mnt/user-data/workspace/fits && echo FITS").await;
    assert!(!err && text.contains("FITS"), "{text}");
    assert_eq!(std::fs::metadata(env.host_path("b", "/mnt/user-data/workspace/fits")).unwrap().len(), 100 << 10);
}

/// A component granted the thread's user data writes 50 MiB of real bytes (hostile's
/// `plant_sparse` writes its `head` before extending the file): the call is stopped and taken
/// back; a normal component call still works, and a write that fits is left alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_component_cannot_write_past_the_quota() {
    let env = Env::open();
    let kept = env.store_kept("c").await;
    let write = |path: &str, n: u64| json!({"path": path, "bytes": n, "head": "x".repeat(n as usize)});

    let r = env.call("c", "plant_sparse", write("/mnt/user-data/workspace/big", 50 * MIB)).await;
    assert!(!r.0.contains("SPARSE"), "{}", r.0);
    env.assert_held("c", r, &kept).await;
    assert!(!env.host_path("c", "/mnt/user-data/workspace/big").exists(), "the new file was taken back");

    hostile::assert_ok_still_works(&env.host).await;
    let (text, err) = env.call("c", "plant_sparse", write("/mnt/user-data/workspace/fits", MIB)).await;
    assert!(!err && text.contains("SPARSE"), "{text}");
    assert_eq!(std::fs::metadata(env.host_path("c", "/mnt/user-data/workspace/fits")).unwrap().len(), MIB);
}

/// `str_replace` with `replace_all` counts every occurrence: a replacement that would grow the
/// file past the quota is refused before anything is written, and the file is unchanged.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replace_all_is_refused_before_it_writes() {
    let env = Env::open();
    let kept = env.store_kept("s").await;
    let path = "/mnt/user-data/workspace/grow.txt";
    let original = "a\n".repeat(2000);
    let (text, err) = env.call("s", "write_file", json!({"description": "d", "path": path, "content": original})).await;
    assert!(!err, "{text}");
    // 2000 occurrences × 4 KiB: 8 MiB of growth from a 4 KB file.
    let args =
        json!({"description": "d", "path": path, "old_str": "a", "new_str": "b".repeat(4096), "replace_all": true});
    let (text, err) = env.call("s", "str_replace", args).await;
    assert!(err && text.contains("disk quota of 5 MB") && text.contains("bytes in use"), "{text}");
    assert!(text.contains("refused"), "refused before it ran: {text}");
    assert_eq!(std::fs::read_to_string(env.host_path("s", path)).unwrap(), original, "the file changed");
    assert_eq!(std::fs::read(env.host_path("s", KEPT)).unwrap(), kept);
    assert!(env.usage("s") <= QUOTA);
    // The same replacement once (no replace_all) fits, and is made.
    let args = json!({"description": "d", "path": path, "old_str": "a", "new_str": "b".repeat(4096)});
    let (text, err) = env.call("s", "str_replace", args).await;
    assert!(!err, "{text}");
    assert!(std::fs::read_to_string(env.host_path("s", path)).unwrap().starts_with(&"b".repeat(4096)));
}
