//! Host bash confined, tried as an attacker would, with real bash as root: a hostile script
//! plants every shape it can (links out of the thread and into another thread, a replaced
//! `workspace`, FIFOs, device nodes, a sparse 4 GiB file, mode and owner changes, signals,
//! the host's environment); each attempt must fail where it must, the sentinel outside the
//! thread must be unchanged, the workspace must still be a real directory, and a normal
//! command must still work. The Landlock parts fail, not skip, where the kernel has Landlock.

mod common;

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::time::{Duration, Instant};

use common::{ctx, landlock, processes_with, run, tool};
use toolhost_core::Status;
use toolhost_hostbash::TreeMode;

/// A file's content, mode and owner.
fn fingerprint(path: &Path) -> (String, u32, u32, u32) {
    let meta = std::fs::symlink_metadata(path).unwrap();
    (std::fs::read_to_string(path).unwrap(), meta.permissions().mode(), meta.uid(), meta.gid())
}

/// Relative path from `from` (a directory) to `to`.
fn relative(from: &Path, to: &Path) -> String {
    let from: Vec<_> = from.components().collect();
    let to: Vec<_> = to.components().collect();
    let common = from.iter().zip(&to).take_while(|(a, b)| a == b).count();
    let mut parts: Vec<String> = vec!["..".into(); from.len() - common];
    parts.extend(to[common..].iter().map(|c| c.as_os_str().to_string_lossy().into_owned()));
    parts.join("/")
}

/// The hostile script. Every line that succeeds where it must not prints `ESCAPED:`; the
/// validator refuses `..` and absolute host paths in the command text, so the targets come in
/// variables it cannot see (confinement is what must stop them).
const HOSTILE: &str = r#"
ud=$(dirname "$PWD")
try() { if eval "$1" >/dev/null 2>&1; then echo "ESCAPED: $1"; else echo "refused: $1"; fi; }
ln -s "$REL_SENTINEL" to-sentinel
ln -s "$REL_OTHER" to-other
try 'cat to-sentinel'
try 'echo pwned > to-sentinel'
try 'cat to-other/secret.txt'
try 'ls to-other'
try 'echo pwned > "$SENTINEL"'
try 'chmod 777 "$SENTINEL"'
try 'chown 1234:1234 "$SENTINEL"'
try '/usr/bin/python3 -c "import os; os.setxattr(os.environ[\"TOOLHOST_HOSTILE_SENTINEL\"], \"user.planted\", b\"1\")"'
try 'ln "$SENTINEL" hardlink'
try 'mv "$ud/workspace" "$ud/ws-old"'
try 'mv "$ud/workspace" "$ud/ws-old" && ln -s / "$ud/workspace"'
try 'ln -s / "$ud/workspace2"'
try 'mkdir "$ud/planted"'
try 'touch "$ud/planted-file"'
try 'mkfifo fifo'
try 'mknod chardev c 1 3'
try 'mknod blockdev b 7 0'
try 'truncate -s 4G sparse'
try '/usr/bin/python3 -c "f=open(\"sparse2\",\"wb\"); f.seek(4<<30); f.write(b\"x\"); f.close()"'
try 'kill -0 $PPID'
try 'cat "$PARENT_ENVIRON"'
try 'cat "$INIT_ENVIRON"'
try 'cat "$SHADOW"'
try 'cat "$GSHADOW"'
grep -E '^Cap(Inh|Prm|Eff|Bnd|Amb):' "$STATUS"
env
"#;

#[tokio::test(flavor = "multi_thread")]
async fn a_hostile_script_plants_every_shape_and_changes_nothing_outside() {
    if !landlock() {
        return;
    }
    let data = tempfile::tempdir().unwrap();
    let other = ctx(data.path(), "other");
    std::fs::write(other.paths().workspace().join("secret.txt"), "other-thread-secret").unwrap();
    let outside = tempfile::tempdir().unwrap();
    let sentinel = outside.path().join("sentinel.txt");
    std::fs::write(&sentinel, "sentinel-original").unwrap();
    std::fs::set_permissions(&sentinel, std::fs::Permissions::from_mode(0o644)).unwrap();
    let before = fingerprint(&sentinel);
    let c = ctx(data.path(), "t1");
    let ws = c.paths().workspace();
    let env = common::host_env(&[
        // Not passed through: must not reach the command.
        ("TOOLHOST_HOSTILE_SECRET", "sk-hostile-host-secret-4242".to_string()),
        ("TOOLHOST_HOSTILE_SENTINEL", sentinel.display().to_string()),
        ("TOOLHOST_HOSTILE_REL_SENTINEL", relative(&ws, &sentinel)),
        ("TOOLHOST_HOSTILE_REL_OTHER", relative(&ws, &other.paths().workspace())),
        // The command's parent is this process (the cgroup mechanism forks nothing in between).
        ("TOOLHOST_HOSTILE_PARENT_ENVIRON", format!("/proc/{}/environ", std::process::id())),
        ("TOOLHOST_HOSTILE_INIT_ENVIRON", "/proc/1/environ".to_string()),
        ("TOOLHOST_HOSTILE_SHADOW", "/etc/shadow-".to_string()),
        ("TOOLHOST_HOSTILE_GSHADOW", "/etc/gshadow".to_string()),
        ("TOOLHOST_HOSTILE_STATUS", "/proc/self/status".to_string()),
    ]);
    let names =
        ["SENTINEL", "REL_SENTINEL", "REL_OTHER", "PARENT_ENVIRON", "INIT_ENVIRON", "SHADOW", "GSHADOW", "STATUS"];
    let t = tool(|c| {
        c.env = names.iter().map(|n| format!("TOOLHOST_HOSTILE_{n}")).collect();
        c.host_env = env;
    });
    let mut script = HOSTILE.to_string();
    for n in names {
        script = script.replace(&format!("\"${n}\""), &format!("\"$TOOLHOST_HOSTILE_{n}\""));
    }
    let (text, _) = run(&t, &c, &script).await;

    assert!(!text.contains("ESCAPED"), "{text}");
    assert_eq!(text.matches("refused: ").count(), 24, "every attempt ran and was refused: {text}");
    assert!(!text.contains("sentinel-original") && !text.contains("other-thread-secret"), "{text}");
    assert!(!text.contains("sk-hostile-host-secret-4242"), "the host's secret reached the command: {text}");
    for set in ["CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"] {
        assert!(text.contains(&format!("{set}:\t0000000000000000")), "{set}: {text}");
    }

    // Nothing outside the thread changed; the thread's own layout is intact.
    assert_eq!(fingerprint(&sentinel), before);
    assert_eq!(std::fs::read_to_string(other.paths().workspace().join("secret.txt")).unwrap(), "other-thread-secret");
    assert!(std::fs::symlink_metadata(&ws).unwrap().file_type().is_dir(), "workspace is still a real directory");
    let mut entries: Vec<String> = std::fs::read_dir(c.paths().user_data())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    entries.sort();
    assert_eq!(entries, [".home", ".tmp", "outputs", "uploads", "workspace"]);
    for name in ["fifo", "chardev", "blockdev", "hardlink"] {
        assert!(std::fs::symlink_metadata(ws.join(name)).is_err(), "{name} was created");
    }
    for name in ["sparse", "sparse2"] {
        let len = std::fs::metadata(ws.join(name)).map(|m| m.len()).unwrap_or(0);
        assert!(len <= 1 << 30, "{name} is {len} bytes");
    }

    // Positive controls beside the refusals: a link that stays inside the thread works, so do
    // modes in the thread, and a normal command.
    let (text, status) = run(
        &t,
        &c,
        "mkdir -p d && echo inside > d/f && ln -s d/f in-link && cat in-link && touch x && chmod 700 x && stat -c %a x",
    )
    .await;
    assert_eq!((text.as_str(), status), ("inside\n700\n", Status::Success), "{text}");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_host_environment_is_an_allow_list() {
    let env = common::host_env(&[
        ("TOOLHOST_ENV_GH_PAT", "ghp-not-a-listed-name"),
        ("TOOLHOST_ENV_WEBHOOK", "https://hooks.example/secret-path"),
        ("TOOLHOST_ENV_LISTED", "listed-value"),
        ("LC_TOOLHOST_TEST", "lc-value"),
    ]);
    let dir = tempfile::tempdir().unwrap();
    let c = ctx(dir.path(), "t1");
    let t = tool(|c| {
        c.env = vec!["TOOLHOST_ENV_LISTED".into()];
        c.host_env = env;
    });
    let (text, _) = run(&t, &c, "env").await;
    // A deny-list would have let these through: their names look harmless.
    assert!(!text.contains("ghp-not-a-listed-name") && !text.contains("secret-path"), "{text}");
    assert!(text.contains("TOOLHOST_ENV_LISTED=listed-value"), "{text}");
    assert!(text.contains("LC_TOOLHOST_TEST=lc-value"), "{text}");
    assert!(text.contains("HOME=/mnt/user-data/.home") && text.contains("TMPDIR=/mnt/user-data/.tmp"), "{text}");
    let names: Vec<&str> = text.lines().filter_map(|l| l.split_once('=').map(|(k, _)| k)).collect();
    for name in &names {
        let allowed = ["PATH", "LANG", "TERM", "TZ", "HOME", "TMPDIR", "PWD", "SHLVL", "_", "OLDPWD"].contains(name)
            || name.starts_with("LC_")
            || *name == "TOOLHOST_ENV_LISTED";
        assert!(allowed, "{name} is not on the allow-list: {text}");
    }
}

/// Both tree mechanisms: the cgroup, and the subreaper fallback forced on.
async fn timeout_kills_the_tree(mode: TreeMode, marker: &str) {
    let dir = tempfile::tempdir().unwrap();
    let c = ctx(dir.path(), "t1");
    let t = tool(|c| {
        c.command_timeout_secs = 2;
        c.tree = mode;
    });
    let started = Instant::now();
    let (text, _) = run(
        &t,
        &c,
        &format!(
            "setsid sleep {marker}1 >/dev/null 2>&1 & echo $! > pids; (setsid sh -c 'sleep {marker}2 >/dev/null 2>&1 & echo $! >> pids' &); nohup sleep {marker}3 >/dev/null 2>&1 & echo $! >> pids; sleep 1000"
        ),
    )
    .await;
    assert!(text.contains("Command timed out after 2 seconds"), "{text}");
    // The timeout is 2 s and the command sleeps 1000 s: 15 s is room for a loaded machine to
    // kill the tree, and far below what an unenforced timeout would take.
    assert!(started.elapsed() < Duration::from_secs(15), "took {:?}", started.elapsed());
    let pids: Vec<i32> = std::fs::read_to_string(c.paths().workspace().join("pids"))
        .unwrap()
        .lines()
        .map(|l| l.trim().parse().unwrap())
        .collect();
    assert_eq!(pids.len(), 3, "every escapee was started");
    // The pids are the command's own pid namespace's (as root): the host-side scan decides. A
    // killed process may still be leaving the process table for a moment on a loaded machine.
    let deadline = Instant::now() + Duration::from_secs(5);
    while !processes_with(marker).is_empty() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(processes_with(marker), Vec::<i32>::new(), "something of the tree survived");

    // A call that is cancelled (its future dropped) takes its tree with it.
    let cancelled = tokio::time::timeout(
        Duration::from_millis(1500),
        run(&t, &c, &format!("setsid sleep {marker}5 >/dev/null 2>&1 & sleep 1000")),
    )
    .await;
    assert!(cancelled.is_err(), "the call should still have been running");
    let deadline = Instant::now() + Duration::from_secs(5);
    while !processes_with(&format!("{marker}5")).is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(processes_with(&format!("{marker}5")), Vec::<i32>::new(), "a cancelled call left its tree");

    // DeerFlow's semantics: a command that finishes may leave a background process running…
    let (text, _) = run(&t, &c, &format!("setsid sleep {marker}9 >/dev/null 2>&1 & echo started")).await;
    assert_eq!(text, "started\n");
    // (Under load the background `sleep` may still be between fork and exec: give it a moment.)
    let deadline = Instant::now() + Duration::from_secs(5);
    while processes_with(&format!("sleep {marker}9")).is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(processes_with(&format!("sleep {marker}9")).len(), 1, "the background process runs on");
    // …until the host shuts down.
    drop(t);
    let deadline = Instant::now() + Duration::from_secs(5);
    while !processes_with(&format!("{marker}9")).is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(processes_with(&format!("{marker}9")), Vec::<i32>::new(), "host shutdown kills leftover trees");
}

#[tokio::test(flavor = "multi_thread")]
async fn timeout_kills_every_process_of_the_tree_with_its_cgroup() {
    // Where a cgroup2 hierarchy is mounted and this process may write it (root here), the
    // cgroup must be the mechanism, not the fallback.
    let cgroup2 = std::fs::read_to_string("/proc/self/mountinfo").unwrap().lines().any(|l| l.contains(" - cgroup2 "));
    // SAFETY: getuid cannot fail.
    if cgroup2 && unsafe { libc::getuid() } == 0 {
        let t = tool(|_| {});
        t.self_test().unwrap();
        let lines = t.explain();
        assert!(lines.iter().any(|l| l.starts_with("process tree: a cgroup v2 per command")), "{lines:?}");
        assert!(lines[0].contains("the cgroup kill ended a setsid background process"), "{lines:?}");
    }
    timeout_kills_the_tree(TreeMode::Auto, "1000.3131").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn timeout_kills_every_process_of_the_tree_with_the_subreaper() {
    timeout_kills_the_tree(TreeMode::Subreaper, "1000.3232").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn unix_sockets_outside_the_thread_are_unreachable() {
    if !landlock() {
        return;
    }
    let outside = tempfile::tempdir().unwrap();
    let path = outside.path().join("host.sock");
    let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
    listener.set_nonblocking(true).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let c = ctx(dir.path(), "t1");
    let t = tool(|c| {
        c.env = vec!["TOOLHOST_TEST_HOST_SOCKET".into()];
        c.host_env = common::host_env(&[("TOOLHOST_TEST_HOST_SOCKET", &path)]);
    });
    let (text, _) = run(
        &t,
        &c,
        "/usr/bin/python3 -c 'import os, socket\ntry:\n  s = socket.socket(socket.AF_UNIX); s.connect(os.environ[\"TOOLHOST_TEST_HOST_SOCKET\"]); print(\"CONNECTED\")\nexcept OSError as e: print(\"refused\", e.errno)\ntry:\n  a, b = socket.socketpair(); a.sendall(b\"ok\"); print(\"pair\", b.recv(2).decode())\nexcept OSError as e: print(\"pair refused\", e.errno)'",
    )
    .await;
    assert!(text.contains("refused 1") && !text.contains("CONNECTED"), "{text}");
    assert!(text.contains("pair ok"), "positive control: a socketpair still works: {text}");
    assert!(listener.accept().is_err(), "the command reached the host's socket");
}

#[test]
fn a_shell_that_cannot_start_fails_the_self_test_and_nothing_runs() {
    let t = tool(|c| c.shell = "/nonexistent/toolhost-test-bash".into());
    let err = t.self_test().unwrap_err();
    assert!(err.contains("could not start (/nonexistent/toolhost-test-bash)"), "{err}");
    assert!(t.explain()[0].starts_with("left out: the start-up self-test failed"), "{:?}", t.explain());
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let c = ctx(dir.path(), "t1");
    let (text, status) = rt.block_on(run(&t, &c, "echo should-not-run > ran"));
    assert_eq!(status, Status::Error);
    assert!(text.starts_with("Error: Host bash is unavailable: the probe command could not start"), "{text}");
    assert!(!c.paths().workspace().join("ran").exists());
    // The same config with a real shell passes.
    tool(|_| {}).self_test().expect("positive control");
}

#[tokio::test(flavor = "multi_thread")]
async fn bash_user_runs_commands_as_that_user_without_capabilities() {
    if !landlock() {
        return;
    }
    let user = toolhost_hostbash::BashUser::parse("nobody").unwrap();
    let data = tempfile::tempdir().unwrap();
    // Host paths in commands are walked by the user: the data dir must be searchable.
    std::fs::set_permissions(data.path(), std::fs::Permissions::from_mode(0o711)).unwrap();
    let outside = tempfile::tempdir().unwrap();
    std::fs::set_permissions(outside.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let sentinel = outside.path().join("sentinel.txt");
    std::fs::write(&sentinel, "sentinel-original").unwrap();
    std::fs::set_permissions(&sentinel, std::fs::Permissions::from_mode(0o666)).unwrap();
    let before = fingerprint(&sentinel);
    let c = ctx(data.path(), "t1");
    let t = tool(|c| {
        c.user = Some(user);
        c.env = vec!["TOOLHOST_USER_SENTINEL".into()];
        c.host_env = common::host_env(&[("TOOLHOST_USER_SENTINEL", &sentinel)]);
    });
    t.self_test().expect("the self-test passes as the bash user");
    let (text, status) = run(
        &t,
        &c,
        "id -u; echo mine > /mnt/user-data/outputs/o.txt && chmod 600 /mnt/user-data/outputs/o.txt && stat -c '%u %a' /mnt/user-data/outputs/o.txt; grep CapEff \"$(printf '\\057proc\\057self\\057status')\"; (echo pwned > \"$TOOLHOST_USER_SENTINEL\") 2>&1 | grep -c 'Permission denied'; chmod 777 \"$TOOLHOST_USER_SENTINEL\" 2>/dev/null || echo chmod-refused",
    )
    .await;
    assert_eq!(status, Status::Success, "{text}");
    assert_eq!(
        text,
        format!("{uid}\n{uid} 600\nCapEff:\t0000000000000000\n1\nchmod-refused\n", uid = user.uid),
        "the sentinel is world-writable, so Landlock is what refuses the write"
    );
    assert_eq!(fingerprint(&sentinel), before);
    let owner = std::fs::metadata(c.paths().outputs().join("o.txt")).unwrap().uid();
    assert_eq!(owner, user.uid);
}

#[tokio::test(flavor = "multi_thread")]
async fn mounts_skills_and_the_acp_workspace_get_the_access_they_were_given() {
    if !landlock() {
        return;
    }
    let data = tempfile::tempdir().unwrap();
    let host = tempfile::tempdir().unwrap();
    let (rw, ro, skills) = (host.path().join("rw"), host.path().join("ro"), host.path().join("skills"));
    for d in [&rw, &ro, &skills.join("public/demo")] {
        std::fs::create_dir_all(d).unwrap();
    }
    std::fs::write(ro.join("data.txt"), "read-only-data\n").unwrap();
    std::fs::write(skills.join("public/demo/SKILL.md"), "skill-text\n").unwrap();
    let c = ctx(data.path(), "t1");
    std::fs::write(c.paths().acp_workspace().join("report.md"), "acp-report\n").unwrap();
    let t = tool(|c| {
        c.mounts = vec![
            toolhost_hostbash::HostMount { host_path: rw.clone(), container_path: "/mnt/rw".into(), read_only: false },
            toolhost_hostbash::HostMount { host_path: ro.clone(), container_path: "/mnt/ro".into(), read_only: true },
        ];
        c.skills_host_path = Some(skills.clone());
    });
    let (text, _) = run(
        &t,
        &c,
        "echo w > /mnt/rw/new.txt && echo rw-ok; cat /mnt/ro/data.txt; (echo w > /mnt/ro/new.txt) 2>/dev/null || echo ro-refused; cat /mnt/skills/public/demo/SKILL.md; (echo w > /mnt/skills/public/demo/new.txt) 2>/dev/null || echo skills-refused; cat /mnt/acp-workspace/report.md; (echo w > /mnt/acp-workspace/new.txt) 2>/dev/null || echo acp-refused",
    )
    .await;
    assert_eq!(
        text, "rw-ok\nread-only-data\nro-refused\nskill-text\nskills-refused\nacp-report\nacp-refused\n",
        "{text}"
    );
    assert_eq!(std::fs::read_to_string(rw.join("new.txt")).unwrap(), "w\n");
    for refused in [ro.join("new.txt"), skills.join("public/demo/new.txt"), c.paths().acp_workspace().join("new.txt")] {
        assert!(!refused.exists(), "{} was written", refused.display());
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn renames_between_the_threads_own_directories_work() {
    // The atomic-write pattern (write in TMPDIR, rename into place) and moving a result to
    // outputs: one filesystem view, no EXDEV.
    let dir = tempfile::tempdir().unwrap();
    let c = ctx(dir.path(), "t1");
    let t = tool(|_| {});
    let (text, status) = run(
        &t,
        &c,
        "/usr/bin/python3 -c 'import os, tempfile\nfd, p = tempfile.mkstemp(); os.write(fd, b\"atomic\"); os.close(fd)\nos.replace(p, \"result.txt\")\nos.rename(\"result.txt\", \"/mnt/user-data/outputs/result.txt\")\nln = \"/mnt/user-data/uploads/linked\"\nos.link(\"/mnt/user-data/outputs/result.txt\", ln)\nprint(open(ln).read())'",
    )
    .await;
    assert_eq!((text.as_str(), status), ("atomic\n", Status::Success), "{text}");
    assert_eq!(std::fs::read_to_string(c.paths().outputs().join("result.txt")).unwrap(), "atomic");
}
