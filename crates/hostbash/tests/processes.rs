//! A command's processes, with real confined bash as root: a fork bomb in a script file stops at
//! `max_processes` and the command still returns; a tree that allocates past `memory_bytes` is
//! killed while a small one works; `/proc` shows neither toolhost nor another thread's running
//! command, and the supervisor's copy of toolhost's command line is blank; a background process
//! keeps running after its command returned (DeerFlow's semantics) until the host shuts down.
//! Each hostile test ends with a normal command that still works.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{ctx, processes_with, run, tool};
use toolhost_core::Status;
use toolhost_hostbash::{BashTool, TreeMode};

/// Landlock (see [`common::landlock`]) and a root test process.
fn confined_as_root() -> bool {
    if !common::landlock() {
        return false;
    }
    // SAFETY: getuid cannot fail.
    assert_eq!(unsafe { libc::getuid() }, 0, "these tests run confined bash as root");
    true
}

/// The explain line that starts with `prefix`.
fn explain_line(t: &BashTool, prefix: &str) -> String {
    let lines = t.explain();
    lines.iter().find(|l| l.starts_with(prefix)).cloned().unwrap_or_else(|| panic!("no '{prefix}' line: {lines:?}"))
}

/// Wait (bounded) until `f` holds.
fn eventually(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A bounded fork bomb: up to 1000 long sleeps in the background, each counted once started.
/// Where a fork fails, bash retries for about 15 s, then gives up and exits (status 254).
const FORK_BOMB: &str = r#"n=0
for i in $(seq 1 1000); do
  sleep 1000.6161 &
  n=$((n+1))
  echo "$n" > started
done
echo "loop ended after $n"
"#;

#[tokio::test(flavor = "multi_thread")]
async fn a_fork_bomb_in_a_script_stops_at_the_process_cap_and_the_command_returns() {
    if !confined_as_root() {
        return;
    }
    let data = tempfile::tempdir().unwrap();
    let c = ctx(data.path(), "t1");
    let t = tool(|c| {
        c.max_processes = Some(50);
        c.command_timeout_secs = 90;
    });
    t.self_test().expect("self-test");
    let caps = explain_line(&t, "tree caps:");
    assert!(caps.contains("50 processes (sandbox.bash_max_processes; cgroup"), "{caps}");
    std::fs::write(c.paths().workspace().join("s.sh"), FORK_BOMB).unwrap();

    let started = Instant::now();
    // While it runs, the host never sees more of the bomb than the cap.
    let mut most = 0;
    let (text, status) = {
        let call = run(&t, &c, "bash s.sh");
        tokio::pin!(call);
        loop {
            tokio::select! {
                out = &mut call => break out,
                _ = tokio::time::sleep(Duration::from_millis(100)) => {
                    most = most.max(processes_with("sleep 1000.6161").len());
                }
            }
        }
    };
    let elapsed = started.elapsed();
    most = most.max(processes_with("sleep 1000.6161").len());
    assert_eq!(status, Status::Success, "{text}");
    assert!(text.contains("s.sh: fork: Resource temporarily unavailable"), "{text}");
    assert!(!text.contains("loop ended after 1000"), "every fork succeeded: {text}");
    let count: usize = std::fs::read_to_string(c.paths().workspace().join("started")).unwrap().trim().parse().unwrap();
    // The tree holds the supervisor, the shells and the sleepers: fewer than 50 sleepers.
    assert!((10..50).contains(&count), "{count} sleepers started under a cap of 50: {text}");
    assert!(most < 50, "the host saw {most} sleepers of the bomb at once");
    assert!(elapsed < Duration::from_secs(80), "the command did not return before its timeout: {elapsed:?}");

    // A normal command still works (a tree of its own), in the same thread.
    let (text, status) = run(&t, &c, "echo fine; seq 1 20 | wc -l").await;
    assert_eq!((text.as_str(), status), ("fine\n20\n", Status::Success));
    // The bomb's sleepers lingered as background processes; the host's shutdown ends them.
    drop(t);
    eventually("the bomb's sleepers are gone", || processes_with("sleep 1000.6161").is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_tree_allocating_past_its_memory_cap_is_killed_and_a_small_one_works() {
    if !confined_as_root() {
        return;
    }
    let data = tempfile::tempdir().unwrap();
    let c = ctx(data.path(), "t1");
    let t = tool(|c| c.memory_bytes = Some(64 << 20));
    t.self_test().expect("self-test");
    let caps = explain_line(&t, "tree caps:");
    assert!(caps.contains("64 MiB of memory (sandbox.bash_memory_mb; cgroup"), "{caps}");

    // `tail` keeps everything after the last newline: /dev/zero has none, so all of it.
    let (text, status) = run(&t, &c, "head -c 200M /dev/zero | tail | wc -c; echo \"status ${PIPESTATUS[*]}\"").await;
    assert_eq!(status, Status::Success, "{text}");
    assert!(text.contains("status 0 137 0") || text.contains("status 141 137 0"), "tail was not killed: {text}");
    assert!(text.starts_with("0\n"), "{text}");

    // Below the cap the same pipeline works.
    let (text, status) = run(&t, &c, "head -c 16M /dev/zero | tail | wc -c; echo \"status ${PIPESTATUS[*]}\"").await;
    assert_eq!((text.as_str(), status), ("16777216\nstatus 0 0 0\n", Status::Success));
    // And so does a normal command.
    let (text, status) = run(&t, &c, "echo fine").await;
    assert_eq!((text.as_str(), status), ("fine\n", Status::Success));
}

/// What a command sees of other processes: each `/proc/<pid>/cmdline`, toolhost's pid, init's
/// command line (its bytes other than NUL: the blanked area keeps its length), and how many
/// processes there are.
fn look_script(host_pid: u32) -> String {
    format!(
        r#"for f in /proc/[0-9]*/cmdline; do printf '%s: ' "$f"; tr '\0' ' ' < "$f"; echo; done
echo "pid1 bytes: $(tr -d '\0' < /proc/1/cmdline | wc -c)"
if [ -e /proc/{host_pid} ]; then echo "host pid: $(tr '\0' ' ' < /proc/{host_pid}/cmdline)"; else echo "host pid: absent"; fi
cat /proc/{host_pid}/cmdline >/dev/null 2>&1 || echo "host cmdline: unreadable"
echo "processes: $(ls /proc | grep -c '^[0-9]')"
"#
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn a_command_cannot_read_other_processes_command_lines() {
    if !confined_as_root() {
        return;
    }
    let data = tempfile::tempdir().unwrap();
    let a = ctx(data.path(), "thread-a");
    let b = ctx(data.path(), "thread-b");
    let t = Arc::new(tool(|c| c.command_timeout_secs = 60));
    t.self_test().expect("self-test");
    let line = explain_line(&t, "processes:");
    assert!(line.starts_with("processes: a private pid namespace and /proc per command"), "{line}");

    // Thread A runs a long command in the background of the test.
    let long = {
        let t = Arc::clone(&t);
        tokio::spawn(async move { run(&t, &a, "sleep 12345").await })
    };
    eventually("thread A's command runs", || !processes_with("sleep 12345").is_empty());

    std::fs::write(b.paths().workspace().join("look.sh"), look_script(std::process::id())).unwrap();
    let (text, status) = run(&t, &b, "bash look.sh").await;
    assert_eq!(status, Status::Success, "{text}");
    // Positive control: thread A's command was running (the host sees it) while B looked.
    assert!(!processes_with("sleep 12345").is_empty(), "thread A's command ended early");
    assert!(!text.contains("12345"), "thread B saw thread A's command line: {text}");
    assert!(text.contains("host pid: absent") && text.contains("host cmdline: unreadable"), "{text}");
    assert!(text.contains("pid1 bytes: 0\n"), "the supervisor shows toolhost's command line: {text}");
    // `ps`-like listing still works, and shows the command's own processes.
    assert!(text.contains("/proc/1/cmdline: ") && text.contains("bash look.sh"), "{text}");
    let count: usize = text
        .lines()
        .find_map(|l| l.strip_prefix("processes: "))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no process count: {text}"));
    assert!((2..10).contains(&count), "{count} processes visible: {text}");

    // Cancelling A's call ends its tree; a normal command still works.
    long.abort();
    let _ = long.await;
    eventually("thread A's command is gone", || processes_with("sleep 12345").is_empty());
    let (text, status) = run(&t, &b, "echo fine").await;
    assert_eq!((text.as_str(), status), ("fine\n", Status::Success));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_background_process_outlives_its_command_in_its_own_pid_namespace_until_shutdown() {
    if !confined_as_root() {
        return;
    }
    let data = tempfile::tempdir().unwrap();
    let c = ctx(data.path(), "t1");
    let t = tool(|_| {});
    t.self_test().expect("self-test");
    std::fs::write(
        c.paths().workspace().join("heartbeat-7171.sh"),
        "while :; do echo beat >> beats; sleep 0.1; done\n",
    )
    .unwrap();
    let (text, status) = run(&t, &c, "bash heartbeat-7171.sh > hb.log 2>&1 & echo started").await;
    assert_eq!((text.as_str(), status), ("started\n", Status::Success));
    // The server runs on after its command returned (seen from the host)…
    eventually("the heartbeat runs", || !processes_with("heartbeat-7171.sh").is_empty());
    // …and a later command of the thread reaches it through the thread's files (it runs in a
    // pid namespace of its own, so it does not see the process itself).
    let (text, status) = run(
        &t,
        &c,
        "a=$(wc -l < beats); sleep 1; b=$(wc -l < beats); [ \"$b\" -gt \"$a\" ] && echo growing; pgrep -f 'heartbeat-7[1]71' || echo not-visible",
    )
    .await;
    assert_eq!((text.as_str(), status), ("growing\nnot-visible\n", Status::Success));
    assert!(!processes_with("heartbeat-7171.sh").is_empty(), "the heartbeat stopped");
    // The host's shutdown ends it.
    drop(t);
    eventually("the heartbeat is gone", || processes_with("heartbeat-7171.sh").is_empty());
}

/// A command started from a thread that then ends (as tokio's blocking-pool threads do after ten
/// idle seconds) leaves its background process running: the tree is tied to toolhost's life,
/// not to the thread that forked it. With the subreaper and with the cgroup.
#[tokio::test(flavor = "multi_thread")]
async fn a_tree_outlives_the_thread_that_started_it() {
    if !confined_as_root() {
        return;
    }
    for (mode, marker) in [(TreeMode::Auto, "1000.7271"), (TreeMode::Subreaper, "1000.7272")] {
        let data = tempfile::tempdir().unwrap();
        let c = ctx(data.path(), "t1");
        let t = Arc::new(tool(|b| b.tree = mode));
        let (t2, c2) = (t.clone(), c.clone());
        let command = format!("sleep {marker} > /dev/null 2>&1 & echo started");
        let (text, status) = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            rt.block_on(run(&t2, &c2, &command))
        })
        .join()
        .unwrap();
        assert_eq!((text.as_str(), status), ("started\n", Status::Success), "{mode:?}");
        eventually("the sleeper runs", || !processes_with(marker).is_empty());
        // The thread is gone; give a death signal bound to it time to arrive.
        std::thread::sleep(Duration::from_millis(500));
        assert!(!processes_with(marker).is_empty(), "{mode:?}: the tree died with the thread that started it");
        let (text, _) = run(&t, &c, "echo still").await;
        assert_eq!(text, "still\n");
        drop(t);
        eventually("the sleeper is gone", || processes_with(marker).is_empty());
    }
}

/// When the process that started a tree dies — even by SIGKILL, with no chance to clean up — the
/// tree goes with it. The "toolhost" here is this test binary run again as a child, which starts
/// a command leaving a sleeper behind and then waits to be killed.
#[tokio::test(flavor = "multi_thread")]
async fn a_tree_dies_with_the_process_that_started_it_even_by_sigkill() {
    if std::env::var_os("TOOLHOST_TEST_LIFELINE_CHILD").is_some() {
        return;
    }
    if !confined_as_root() {
        return;
    }
    for (mode, marker) in [("auto", "1000.7273"), ("subreaper", "1000.7274")] {
        let mut child = std::process::Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "lifeline_child", "--nocapture", "--test-threads=1"])
            .env("TOOLHOST_TEST_LIFELINE_CHILD", marker)
            .env("TOOLHOST_TEST_LIFELINE_MODE", mode)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        eventually("the child's sleeper runs", || !processes_with(marker).is_empty());
        child.kill().unwrap();
        child.wait().unwrap();
        eventually("the sleeper is gone with its toolhost", || processes_with(marker).is_empty());
    }
    // A normal command still works.
    let data = tempfile::tempdir().unwrap();
    let c = ctx(data.path(), "t1");
    let (text, _) = run(&tool(|_| {}), &c, "echo ok").await;
    assert_eq!(text, "ok\n");
}

/// The child of the test above (does nothing unless run as that child).
#[tokio::test(flavor = "multi_thread")]
async fn lifeline_child() {
    let Some(marker) = std::env::var_os("TOOLHOST_TEST_LIFELINE_CHILD") else { return };
    let marker = marker.into_string().unwrap();
    let mode = match std::env::var("TOOLHOST_TEST_LIFELINE_MODE").as_deref() {
        Ok("subreaper") => TreeMode::Subreaper,
        _ => TreeMode::Auto,
    };
    let data = tempfile::tempdir().unwrap();
    let c = ctx(data.path(), "t1");
    let t = tool(|b| b.tree = mode);
    let (text, _) = run(&t, &c, &format!("setsid sleep {marker} > /dev/null 2>&1 & echo started")).await;
    assert_eq!(text, "started\n");
    tokio::time::sleep(Duration::from_secs(60)).await;
}
