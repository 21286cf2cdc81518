//! Running one `bash -c` command the way DeerFlow's `LocalSandbox` does — stdin from
//! /dev/null, both pipes drained with a 10 MiB bound each, the whole tree killed at the timeout,
//! the result formatted as DeerFlow formats it — with the child's confinement ([`ChildPlan`])
//! applied between `fork` and `exec`.

use std::collections::HashMap;
use std::io;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::process::Command;
use tokio::task::JoinHandle;

use toolhost_confine::child::{ChildPlan, TreeSetup};
use toolhost_confine::reaper::{StatusPipe, Supervisor};
use toolhost_confine::tree::{Lingering, Tree};

/// DeerFlow's `_COMMAND_CAPTURE_LIMIT_BYTES`, per pipe.
pub const CAPTURE_LIMIT_BYTES: usize = 10 * 1024 * 1024;
/// How long to wait for the pipes after the shell exits while its tree lives on (a
/// backgrounded server keeps them open).
const DRAIN_GRACE: Duration = Duration::from_millis(200);
/// How long to wait for the pipes after a timeout kill or once the tree is gone.
const DRAIN_AFTER_EXIT: Duration = Duration::from_secs(10);

/// A command ready to run.
pub struct Invocation {
    pub shell: PathBuf,
    pub command: String,
    pub env: HashMap<String, String>,
    pub timeout: Duration,
    pub plan: ChildPlan,
    pub tree: TreeSetup,
}

/// What came back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    pub stdout: String,
    pub stderr: String,
    /// Exit code, or minus the signal number (Python's `returncode`).
    pub returncode: i32,
    pub timed_out: bool,
}

#[derive(Default)]
struct Capture {
    kept: Vec<u8>,
    total: u64,
}

impl Capture {
    fn append(&mut self, chunk: &[u8]) {
        self.total += chunk.len() as u64;
        let room = CAPTURE_LIMIT_BYTES.saturating_sub(self.kept.len());
        self.kept.extend_from_slice(&chunk[..chunk.len().min(room)]);
    }

    /// DeerFlow's `_BoundedPipeCapture.read`: lossy UTF-8 plus a notice when bytes were dropped.
    fn read(&self) -> String {
        let mut out = String::from_utf8_lossy(&self.kept).into_owned();
        if self.total > self.kept.len() as u64 {
            out.push_str(&format!(
                "\n... [output truncated after {} of {} bytes; remaining output discarded] ...",
                self.kept.len(),
                self.total
            ));
        }
        out
    }
}

/// Drain `pipe` until EOF, keeping at most the capture limit. Keeps reading after the limit
/// (and after the call returns) so a backgrounded writer never blocks or gets `SIGPIPE`.
fn drain<R: AsyncRead + Unpin + Send + 'static>(mut pipe: R) -> (Arc<Mutex<Capture>>, JoinHandle<()>) {
    let capture = Arc::new(Mutex::new(Capture::default()));
    let sink = Arc::clone(&capture);
    let handle = tokio::spawn(async move {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            match pipe.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    if let Ok(mut c) = sink.lock() {
                        c.append(&buf[..n]);
                    }
                }
            }
        }
    });
    (capture, handle)
}

fn snapshot(capture: &Mutex<Capture>) -> String {
    capture.lock().map(|c| c.read()).unwrap_or_default()
}

/// The command's tree while the call runs: killed when dropped armed, so a cancelled call (or a
/// host shutting down mid-call) leaves nothing running.
struct TreeGuard<'a> {
    pgid: Option<i32>,
    tree: Option<Tree>,
    lingering: &'a Lingering,
}

impl TreeGuard<'_> {
    /// SIGKILL the shell's process group. Not with a supervisor: it is in that group and must
    /// outlive the rest of the tree to kill it.
    fn signal_group(&self) {
        if matches!(self.tree, Some(Tree::Reaper(_))) {
            return;
        }
        if let Some(pgid) = self.pgid {
            // SAFETY: plain syscall on a process group we created.
            unsafe {
                libc::killpg(pgid, libc::SIGKILL);
            }
        }
    }

    /// Whether anything of the tree still runs.
    fn alive(&self) -> bool {
        self.tree.as_ref().is_some_and(Tree::alive)
    }

    /// Kill the whole tree and wait until it is gone (off the async workers: the kill polls
    /// until the tree is empty).
    async fn kill(&mut self) {
        self.signal_group();
        if let Some(tree) = self.tree.take() {
            if let Ok(tree) = tokio::task::spawn_blocking(move || {
                tree.kill();
                tree
            })
            .await
            {
                self.lingering.keep(tree);
            }
        }
    }

    /// The command finished: its background processes may run on (DeerFlow's semantics).
    fn release(mut self) {
        self.pgid = None;
        if let Some(tree) = self.tree.take() {
            self.lingering.keep(tree);
        }
    }
}

impl Drop for TreeGuard<'_> {
    fn drop(&mut self) {
        self.signal_group();
        if let Some(tree) = self.tree.take() {
            tree.signal_kill();
            self.lingering.keep(tree);
        }
    }
}

/// The shell's exit status as the supervisor reports it (4 bytes of raw wait status).
async fn reported_status(pipe: StatusPipe) -> io::Result<std::process::ExitStatus> {
    use std::os::unix::process::ExitStatusExt;
    let mut rx = tokio::net::unix::pipe::Receiver::from_owned_fd(pipe.0)?;
    let mut raw = [0u8; 4];
    rx.read_exact(&mut raw).await?;
    Ok(std::process::ExitStatus::from_raw(i32::from_ne_bytes(raw)))
}

/// Run the invocation. `Err` only when the shell cannot be started.
pub async fn run(invocation: Invocation, lingering: &Lingering) -> io::Result<Outcome> {
    let Invocation { shell, command, env, timeout, plan, tree } = invocation;
    let mut cmd = Command::new(&shell);
    cmd.arg("-c")
        .arg(&command)
        .env_clear()
        .envs(&env)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    plan.install(cmd.as_std_mut());
    let spawned = cmd.spawn();
    let TreeSetup { cgroup, status: status_pipe } = tree;
    let tree = cgroup.map(Tree::Cgroup);
    let mut child = match spawned {
        Ok(child) => child,
        Err(e) => {
            if let Some(tree) = tree {
                lingering.keep(tree);
            }
            return Err(e);
        }
    };
    let pid = child.id();
    let tree = match (tree, &status_pipe, pid) {
        (Some(tree), _, _) => Some(tree),
        (None, Some(_), Some(pid)) => Some(Tree::Reaper(Supervisor::new(pid)?)),
        _ => None,
    };
    let mut guard = TreeGuard { pgid: pid.and_then(|id| i32::try_from(id).ok()), tree, lingering };
    let (stdout, stdout_task) = match child.stdout.take() {
        Some(pipe) => drain(pipe),
        None => (Arc::default(), tokio::spawn(async {})),
    };
    let (stderr, stderr_task) = match child.stderr.take() {
        Some(pipe) => drain(pipe),
        None => (Arc::default(), tokio::spawn(async {})),
    };

    let exited = async {
        match status_pipe {
            // The supervisor lives on while the command's background processes do.
            Some(pipe) => reported_status(pipe).await,
            None => child.wait().await,
        }
    };
    let (status, timed_out) = match tokio::time::timeout(timeout, exited).await {
        Ok(status) => (status?, false),
        Err(_) => {
            guard.kill().await;
            use std::os::unix::process::ExitStatusExt;
            (std::process::ExitStatus::from_raw(libc::SIGKILL), true)
        }
    };
    let grace = if timed_out || !guard.alive() { DRAIN_AFTER_EXIT } else { DRAIN_GRACE };
    let _ = tokio::time::timeout(grace, async {
        let _ = stdout_task.await;
        let _ = stderr_task.await;
    })
    .await;
    guard.release();

    use std::os::unix::process::ExitStatusExt;
    let returncode = status.code().or_else(|| status.signal().map(|s| -s)).unwrap_or(0);
    Ok(Outcome { stdout: snapshot(&stdout), stderr: snapshot(&stderr), returncode, timed_out })
}

/// DeerFlow's `_format_timeout_notice`.
pub fn timeout_notice(seconds: u64) -> String {
    let unit = if seconds == 1 { "second" } else { "seconds" };
    format!(
        "Command timed out after {seconds} {unit} and was terminated. To run a long-lived process such as a web \
         server, start it in the background and redirect its output, e.g. `your-command > \
         /mnt/user-data/workspace/server.log 2>&1 &`."
    )
}

/// DeerFlow's `execute_command` output: stdout, `\nStd Error:\n` + stderr, the timeout notice
/// or `\nExit Code: N`, `(no output)` when empty.
pub fn format_output(outcome: &Outcome, timeout_secs: u64) -> String {
    let mut output = outcome.stdout.clone();
    if !outcome.stderr.is_empty() {
        if output.is_empty() {
            output.push_str(&outcome.stderr);
        } else {
            output.push_str("\nStd Error:\n");
            output.push_str(&outcome.stderr);
        }
    }
    if outcome.timed_out {
        if !output.is_empty() {
            output.push('\n');
        }
        output.push_str(&timeout_notice(timeout_secs));
    } else if outcome.returncode != 0 {
        output.push_str(&format!("\nExit Code: {}", outcome.returncode));
    }
    if output.is_empty() {
        "(no output)".to_string()
    } else {
        output
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcome(stdout: &str, stderr: &str, returncode: i32, timed_out: bool) -> Outcome {
        Outcome { stdout: stdout.into(), stderr: stderr.into(), returncode, timed_out }
    }

    #[test]
    fn formats_like_deerflow() {
        assert_eq!(format_output(&outcome("", "", 0, false), 600), "(no output)");
        assert_eq!(format_output(&outcome("out\n", "", 0, false), 600), "out\n");
        assert_eq!(format_output(&outcome("out\n", "err\n", 2, false), 600), "out\n\nStd Error:\nerr\n\nExit Code: 2");
        assert_eq!(format_output(&outcome("", "err", 1, false), 600), "err\nExit Code: 1");
        assert_eq!(format_output(&outcome("", "", 3, false), 600), "\nExit Code: 3");
        assert_eq!(
            format_output(&outcome("partial", "", -9, true), 1),
            "partial\nCommand timed out after 1 second and was terminated. To run a long-lived process such as a web \
             server, start it in the background and redirect its output, e.g. `your-command > \
             /mnt/user-data/workspace/server.log 2>&1 &`."
        );
    }

    #[test]
    fn capture_is_bounded_with_notice() {
        let mut c = Capture::default();
        c.append(&vec![b'a'; CAPTURE_LIMIT_BYTES]);
        c.append(b"bcd");
        let text = c.read();
        assert!(text.ends_with(&format!(
            "\n... [output truncated after {CAPTURE_LIMIT_BYTES} of {} bytes; remaining output discarded] ...",
            CAPTURE_LIMIT_BYTES + 3
        )));
    }
}
