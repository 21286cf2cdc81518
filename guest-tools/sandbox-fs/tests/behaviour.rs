//! Behaviour beyond the conformance sample: mounts, writes refused by policy, symlinks that
//! escape (absolute, relative, loops), the skills root, disabled skills, regex errors and
//! byte-exact `str_replace`.

use std::path::PathBuf;

use sandbox_fs::{call, HostMap, Sandbox, SandboxSettings, SandboxSettingsExt};
use serde_json::{json, Value};

struct T {
    _tmp: tempfile::TempDir,
    root: PathBuf,
    sb: Sandbox,
}

fn setup() -> T {
    let tmp = tempfile::tempdir().expect("tempdir");
    let root = tmp.path().to_path_buf();
    for d in [
        "ws",
        "up",
        "out",
        "acp",
        "skills/public/demo",
        "skills/public/off",
        "skills/custom/mine",
        "ro",
        "rw",
        "outside",
    ] {
        std::fs::create_dir_all(root.join(d)).expect("mkdir");
    }
    std::fs::write(root.join("skills/public/demo/SKILL.md"), "demo TODO\n").expect("w");
    std::fs::write(root.join("skills/public/off/SKILL.md"), "off TODO\n").expect("w");
    std::fs::write(root.join("ro/data.txt"), "read only TODO\n").expect("w");
    std::fs::write(root.join("outside/secret.txt"), "SECRET\n").expect("w");
    let host = HostMap::with_prefixes(vec![
        ("/mnt/user-data/workspace".into(), root.join("ws")),
        ("/mnt/user-data/uploads".into(), root.join("up")),
        ("/mnt/user-data/outputs".into(), root.join("out")),
        ("/mnt/acp-workspace".into(), root.join("acp")),
        ("/mnt/skills".into(), root.join("skills")),
        ("/mnt/ro".into(), root.join("ro")),
        ("/mnt/rw".into(), root.join("rw")),
    ]);
    let settings = SandboxSettings::from_json(&json!({
        "mounts": [{"container_path": "/mnt/ro", "read_only": true}, {"container_path": "/mnt/rw/", "read_only": false}],
        "disabled_skills": ["/mnt/skills/public/off"],
    }));
    let sb = Sandbox::new(settings, host, true);
    T { _tmp: tmp, root, sb }
}

fn run(t: &T, tool: &str, mut args: Value) -> String {
    args["description"] = json!("test");
    let out = call(&t.sb, tool, &args, &json!({})).expect("args").content;
    assert!(!out.contains(&*t.root.to_string_lossy()), "host path leaked: {out}");
    out
}

#[test]
fn mounts_respect_read_only() {
    let t = setup();
    assert_eq!(run(&t, "read_file", json!({"path": "/mnt/ro/data.txt"})), "read only TODO\n");
    assert_eq!(
        run(&t, "write_file", json!({"path": "/mnt/ro/x.txt", "content": "x"})),
        "Error: Permission denied writing to file: /mnt/ro/x.txt"
    );
    assert!(!t.root.join("ro/x.txt").exists());
    assert_eq!(run(&t, "write_file", json!({"path": "/mnt/rw/sub/x.txt", "content": "x"})), "OK");
    assert_eq!(std::fs::read_to_string(t.root.join("rw/sub/x.txt")).expect("read"), "x");
    assert_eq!(
        run(&t, "grep", json!({"pattern": "todo", "path": "/mnt/ro"})),
        "Found 1 matches under /mnt/ro\n/mnt/ro/data.txt:1: read only TODO"
    );
}

#[test]
fn policy_refusals_use_each_tools_message() {
    let t = setup();
    assert_eq!(
        run(&t, "write_file", json!({"path": "/mnt/skills/public/demo/x", "content": "x"})),
        "Error: Permission denied writing to file: /mnt/skills/public/demo/x"
    );
    assert_eq!(
        run(&t, "str_replace", json!({"path": "/mnt/acp-workspace/a", "old_str": "a", "new_str": "b"})),
        "Error: Permission denied accessing file: /mnt/acp-workspace/a"
    );
    assert_eq!(run(&t, "glob", json!({"pattern": "*", "path": "/etc"})), "Error: Permission denied: /etc");
    assert_eq!(
        run(&t, "read_file", json!({"path": "/mnt/user-data/uploads/../workspace/x"})),
        "Error: Permission denied reading file: /mnt/user-data/uploads/../workspace/x"
    );
}

#[test]
fn escaping_symlinks_are_never_followed() {
    let t = setup();
    let abs = t.root.join("outside/secret.txt");
    std::os::unix::fs::symlink(&abs, t.root.join("ws/abs_link")).expect("symlink");
    std::os::unix::fs::symlink("../outside", t.root.join("ws/rel_link")).expect("symlink");
    std::os::unix::fs::symlink("loop_b", t.root.join("ws/loop_a")).expect("symlink");
    std::os::unix::fs::symlink("loop_a", t.root.join("ws/loop_b")).expect("symlink");
    assert_eq!(
        run(&t, "read_file", json!({"path": "/mnt/user-data/workspace/abs_link"})),
        "Error: Permission denied reading file: /mnt/user-data/workspace/abs_link"
    );
    assert_eq!(
        run(&t, "write_file", json!({"path": "/mnt/user-data/workspace/rel_link/secret.txt", "content": "pwned"})),
        "Error: Permission denied writing to file: /mnt/user-data/workspace/rel_link/secret.txt"
    );
    assert_eq!(std::fs::read_to_string(&abs).expect("read"), "SECRET\n");
    assert_eq!(
        run(&t, "read_file", json!({"path": "/mnt/user-data/workspace/loop_a"})),
        "Error: Permission denied reading file: /mnt/user-data/workspace/loop_a"
    );
    assert_eq!(run(&t, "ls", json!({"path": "/mnt/user-data/workspace"})), "(empty)");
    assert_eq!(
        run(&t, "glob", json!({"pattern": "*", "path": "/mnt/user-data/workspace", "include_dirs": true})),
        "No files matched under /mnt/user-data/workspace"
    );
    assert_eq!(
        run(&t, "grep", json!({"pattern": "SECRET", "path": "/mnt/user-data/workspace"})),
        "No matches found under /mnt/user-data/workspace"
    );
}

#[test]
fn skills_root_and_disabled_skills() {
    let t = setup();
    // Every DeerFlow category root, on disk here (custom, public) or not (integrations, legacy).
    assert_eq!(
        run(&t, "ls", json!({"path": "/mnt/skills"})),
        "/mnt/skills/custom/\n/mnt/skills/integrations/\n/mnt/skills/legacy/\n/mnt/skills/public/"
    );
    assert_eq!(
        run(&t, "ls", json!({"path": "/mnt/skills/public"})),
        "/mnt/skills/public/demo/\n/mnt/skills/public/demo/SKILL.md"
    );
    assert_eq!(
        run(&t, "grep", json!({"pattern": "x", "path": "/mnt/skills"})),
        "Error: Directory not found: /mnt/skills"
    );
    assert_eq!(
        run(&t, "glob", json!({"pattern": "**/SKILL.md", "path": "/mnt/skills/public"})),
        "Found 1 paths under /mnt/skills/public\n1. /mnt/skills/public/demo/SKILL.md"
    );
    assert!(run(&t, "read_file", json!({"path": "/mnt/skills/public/off/SKILL.md"}))
        .starts_with("Error: Skill 'off' is disabled."));
}

/// DeerFlow's `ls` of the skills root lists its four category roots even when this skills
/// directory holds none of them: its skill projection creates each root (empty when it has no
/// skill) and mounts it, and the local sandbox's `list_dir` overlays the mounts below the listed
/// path (deerflow/sandbox/local/local_sandbox.py, `list_dir`; skills/projection.py). A root that
/// is not on disk lists as DeerFlow's empty root does; other directories here are listed too.
#[test]
fn skills_root_lists_deerflows_category_roots_even_when_absent() {
    let t = setup();
    std::fs::remove_dir_all(t.root.join("skills")).expect("rm");
    std::fs::create_dir_all(t.root.join("skills/notes")).expect("mkdir");
    assert_eq!(
        run(&t, "ls", json!({"path": "/mnt/skills"})),
        "/mnt/skills/custom/\n/mnt/skills/integrations/\n/mnt/skills/legacy/\n/mnt/skills/notes/\n/mnt/skills/public/"
    );
    assert_eq!(run(&t, "ls", json!({"path": "/mnt/skills/"})), run(&t, "ls", json!({"path": "/mnt/skills"})));
    for root in ["custom", "integrations", "legacy", "public"] {
        assert_eq!(run(&t, "ls", json!({"path": format!("/mnt/skills/{root}")})), "(empty)", "{root}");
    }
    // Only the category roots themselves: below them a missing directory is still an error.
    assert_eq!(
        run(&t, "ls", json!({"path": "/mnt/skills/public/nope"})),
        "Error: Directory not found: /mnt/skills/public/nope"
    );
    assert_eq!(run(&t, "ls", json!({"path": "/mnt/skills/other"})), "Error: Directory not found: /mnt/skills/other");
    // With no skills directory at all, the roots are still there.
    std::fs::remove_dir_all(t.root.join("skills")).expect("rm");
    assert_eq!(
        run(&t, "ls", json!({"path": "/mnt/skills"})),
        "/mnt/skills/custom/\n/mnt/skills/integrations/\n/mnt/skills/legacy/\n/mnt/skills/public/"
    );
}

#[test]
fn ls_missing_and_file_are_errors() {
    let t = setup();
    std::fs::write(t.root.join("ws/f.txt"), "x").expect("w");
    assert_eq!(
        run(&t, "ls", json!({"path": "/mnt/user-data/workspace/nope"})),
        "Error: Directory not found: /mnt/user-data/workspace/nope"
    );
    assert_eq!(
        run(&t, "ls", json!({"path": "/mnt/user-data/workspace/f.txt"})),
        "Error: Path is not a directory: /mnt/user-data/workspace/f.txt"
    );
}

#[test]
fn grep_regex_errors_and_python_dialect() {
    let t = setup();
    std::fs::write(t.root.join("ws/a.txt"), "foo(bar)\nfoobar\nx{1}\n").expect("w");
    assert_eq!(
        run(&t, "grep", json!({"pattern": "[invalid", "path": "/mnt/user-data/workspace"})),
        "Error: Invalid regex pattern: unterminated character set at position 0"
    );
    assert_eq!(
        run(&t, "grep", json!({"pattern": "(?<=foo)bar", "path": "/mnt/user-data/workspace"})),
        "Found 1 matches under /mnt/user-data/workspace\n/mnt/user-data/workspace/a.txt:2: foobar"
    );
    assert_eq!(
        run(&t, "grep", json!({"pattern": "x{", "path": "/mnt/user-data/workspace"})),
        "Found 1 matches under /mnt/user-data/workspace\n/mnt/user-data/workspace/a.txt:3: x{1}"
    );
    assert_eq!(
        run(&t, "grep", json!({"pattern": "(bar)$", "path": "/mnt/user-data/workspace", "case_sensitive": true})),
        "Found 1 matches under /mnt/user-data/workspace\n/mnt/user-data/workspace/a.txt:2: foobar"
    );
}

#[test]
fn str_replace_keeps_bytes_outside_the_span() {
    let t = setup();
    std::fs::write(t.root.join("ws/c.txt"), "a\r\nb\r\na\r\n").expect("w");
    assert_eq!(
        run(&t, "str_replace", json!({"path": "/mnt/user-data/workspace/c.txt", "old_str": "a\nb", "new_str": "X"})),
        "OK"
    );
    assert_eq!(std::fs::read(t.root.join("ws/c.txt")).expect("r"), b"X\r\na\r\n");
    assert_eq!(
        run(
            &t,
            "str_replace",
            json!({"path": "/mnt/user-data/workspace/c.txt", "old_str": "a", "new_str": "Y", "replace_all": true})
        ),
        "OK"
    );
    assert_eq!(std::fs::read(t.root.join("ws/c.txt")).expect("r"), b"X\r\nY\r\n");
}

#[test]
fn no_thread_data() {
    let t = setup();
    let sb = Sandbox::new(SandboxSettings::default(), HostMap::identity(), false);
    let out =
        call(&sb, "ls", &json!({"description": "d", "path": "/mnt/user-data/workspace"}), &json!({})).expect("args");
    assert_eq!(out.content, "Error: Thread data not available for local sandbox");
    assert!(out.is_error);
    drop(t);
}

#[test]
fn rewrites_replace_the_whole_file_and_keep_python_errors() {
    let t = setup();
    let f = "/mnt/user-data/workspace/notes.txt";
    assert_eq!(run(&t, "write_file", json!({"path": f, "content": "a long first version\nline two\n"})), "OK");
    // Shorter content rewritten in place: the old tail is cut.
    assert_eq!(run(&t, "write_file", json!({"path": f, "content": "short\n"})), "OK");
    assert_eq!(std::fs::read_to_string(t.root.join("ws/notes.txt")).unwrap(), "short\n");
    assert_eq!(run(&t, "write_file", json!({"path": f, "content": "more\n", "append": true})), "OK");
    assert_eq!(std::fs::read_to_string(t.root.join("ws/notes.txt")).unwrap(), "short\nmore\n");
    // str_replace that shortens the file.
    assert_eq!(run(&t, "str_replace", json!({"path": f, "old_str": "short\nmore\n", "new_str": "x"})), "OK");
    assert_eq!(std::fs::read_to_string(t.root.join("ws/notes.txt")).unwrap(), "x");
    // Missing parents are made; a parent that is a file fails as Python's makedirs does.
    assert_eq!(run(&t, "write_file", json!({"path": "/mnt/user-data/workspace/a/b/c.txt", "content": "deep"})), "OK");
    assert_eq!(std::fs::read_to_string(t.root.join("ws/a/b/c.txt")).unwrap(), "deep");
    let out = run(&t, "write_file", json!({"path": format!("{f}/child.txt"), "content": "x"}));
    assert!(out.contains("FileExistsError: [Errno 17] File exists"), "{out}");
    // A directory is refused by name.
    let out = run(&t, "write_file", json!({"path": "/mnt/user-data/workspace/a", "content": "x"}));
    assert!(out.contains("Path is a directory, not a file"), "{out}");
}

/// A FIFO in the workspace (host bash or an unconfined peer could plant one) is never opened:
/// opening it would block until a writer appears. Every file tool answers at once, and a normal
/// file beside it still works.
#[test]
fn fifos_are_refused_without_opening_them() {
    let t = setup();
    let fifo = t.root.join("ws/pipe.txt");
    let status = std::process::Command::new("mkfifo").arg(&fifo).status().expect("mkfifo runs");
    assert!(status.success());
    std::fs::write(t.root.join("ws/real.txt"), "TODO here\n").expect("w");
    std::os::unix::fs::symlink("pipe.txt", t.root.join("ws/link-to-pipe")).expect("symlink");
    let (tx, rx) = std::sync::mpsc::channel();
    let sb_root = t.root.clone();
    let worker = std::thread::spawn(move || {
        let out = (
            run(&t, "read_file", json!({"path": "/mnt/user-data/workspace/pipe.txt"})),
            run(&t, "read_file", json!({"path": "/mnt/user-data/workspace/link-to-pipe"})),
            run(
                &t,
                "str_replace",
                json!({"path": "/mnt/user-data/workspace/pipe.txt", "old_str": "a", "new_str": "b"}),
            ),
            run(&t, "write_file", json!({"path": "/mnt/user-data/workspace/pipe.txt", "content": "x"})),
            run(&t, "grep", json!({"pattern": "TODO", "path": "/mnt/user-data/workspace"})),
            run(&t, "glob", json!({"pattern": "*", "path": "/mnt/user-data/workspace"})),
            run(&t, "read_file", json!({"path": "/mnt/user-data/workspace/real.txt"})),
        );
        let _ = tx.send((out, t));
    });
    let ((read, via_link, replace, write, grep, glob, normal), _t) =
        rx.recv_timeout(std::time::Duration::from_secs(20)).expect("a file tool blocked on the FIFO");
    worker.join().expect("worker");
    let refused = "Error: Path is not a regular file: /mnt/user-data/workspace/";
    assert_eq!(read, format!("{refused}pipe.txt"));
    assert_eq!(via_link, format!("{refused}link-to-pipe"));
    assert_eq!(replace, format!("{refused}pipe.txt"));
    assert_eq!(write, format!("{refused}pipe.txt"));
    assert!(grep.contains("real.txt") && !grep.contains("pipe.txt"), "{grep}");
    assert!(glob.contains("/mnt/user-data/workspace/pipe.txt"), "glob still lists it: {glob}");
    assert_eq!(normal, "TODO here\n");
    // Still a FIFO: nothing replaced it with a regular file.
    use std::os::unix::fs::FileTypeExt;
    assert!(std::fs::symlink_metadata(sb_root.join("ws/pipe.txt")).unwrap().file_type().is_fifo());
}
