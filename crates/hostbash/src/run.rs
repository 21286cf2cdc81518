//! Running one `bash -c` command the way DeerFlow's `LocalSandbox` does: own process group,
//! stdin from /dev/null, both pipes drained with a 10 MiB bound each, the whole group killed at
//! the timeout, and the result formatted as DeerFlow formats it.

use std::collections::HashMap;
use std::io;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use landlock::RulesetCreated;
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::process::Command;
use tokio::task::JoinHandle;

use crate::confine;

/// DeerFlow's `_COMMAND_CAPTURE_LIMIT_BYTES`, per pipe.
pub const CAPTURE_LIMIT_BYTES: usize = 10 * 1024 * 1024;
/// How long to wait for the pipes after the shell exits while its group lives on (a
/// backgrounded server keeps them open).
const DRAIN_GRACE: Duration = Duration::from_millis(200);
/// How long to wait for the pipes after a timeout kill or once the group is gone.
const DRAIN_AFTER_EXIT: Duration = Duration::from_secs(10);

/// A command ready to run.
pub struct Invocation {
    pub shell: PathBuf,
    pub command: String,
    pub cwd: PathBuf,
    pub env: HashMap<String, String>,
    pub timeout: Duration,
    /// Landlock ruleset to enforce in the child, if confined.
    pub ruleset: Option<RulesetCreated>,
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

/// Kills the process group when dropped armed: a cancelled call leaves nothing running.
struct GroupGuard {
    pgid: Option<i32>,
}

impl GroupGuard {
    fn kill(&self) {
        if let Some(pgid) = self.pgid {
            // SAFETY: plain syscall on a process group we created.
            unsafe {
                libc::killpg(pgid, libc::SIGKILL);
            }
        }
    }

    fn exists(&self) -> bool {
        let Some(pgid) = self.pgid else { return false };
        // SAFETY: signal 0 only checks for existence.
        let rc = unsafe { libc::killpg(pgid, 0) };
        rc == 0 || io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Run the invocation. `Err` only when the shell cannot be started.
pub async fn run(invocation: Invocation) -> io::Result<Outcome> {
    let Invocation { shell, command, cwd, env, timeout, ruleset } = invocation;
    let mut cmd = Command::new(&shell);
    cmd.arg("-c")
        .arg(&command)
        .current_dir(&cwd)
        .env_clear()
        .envs(&env)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    if ruleset.is_some() {
        let mut ruleset = ruleset;
        // SAFETY: the hook runs in the forked child and only enforces the ruleset built in
        // the parent (prctl + landlock_restrict_self; no allocation on success).
        unsafe {
            cmd.pre_exec(move || confine::restrict_in_child(&mut ruleset));
        }
    }
    let mut child = cmd.spawn()?;
    let mut guard = GroupGuard { pgid: child.id().and_then(|id| i32::try_from(id).ok()) };
    let (stdout, stdout_task) = match child.stdout.take() {
        Some(pipe) => drain(pipe),
        None => (Arc::default(), tokio::spawn(async {})),
    };
    let (stderr, stderr_task) = match child.stderr.take() {
        Some(pipe) => drain(pipe),
        None => (Arc::default(), tokio::spawn(async {})),
    };

    let (status, timed_out) = match tokio::time::timeout(timeout, child.wait()).await {
        Ok(status) => (status?, false),
        Err(_) => {
            guard.kill();
            (child.wait().await?, true)
        }
    };
    let grace = if timed_out || !guard.exists() { DRAIN_AFTER_EXIT } else { DRAIN_GRACE };
    let _ = tokio::time::timeout(grace, async {
        let _ = stdout_task.await;
        let _ = stderr_task.await;
    })
    .await;
    // A finished command may leave background processes (`server &`) running on purpose.
    guard.pgid = None;

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

/// Environment names that look like credentials (DeerFlow's `env_policy`, widened to the
/// spec's list): never inherited by a command.
pub fn is_secret_env_name(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    ["KEY", "SECRET", "TOKEN", "PASS", "CREDENTIAL", "DSN"].iter().any(|p| upper.contains(p))
        || matches!(upper.as_str(), "DATABASE_URL" | "REDIS_URL" | "MONGODB_URI" | "AMQP_URL")
}

/// The host environment minus secret-looking names.
pub fn inherited_env() -> HashMap<String, String> {
    std::env::vars_os()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
        .filter(|(k, _)| !is_secret_env_name(k))
        .collect()
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

    #[test]
    fn secret_names() {
        for name in
            ["OPENAI_API_KEY", "github_token", "DB_PASSWORD", "AWS_SECRET_ACCESS_KEY", "SENTRY_DSN", "DATABASE_URL"]
        {
            assert!(is_secret_env_name(name), "{name}");
        }
        for name in ["PATH", "HOME", "LANG", "TMPDIR", "VIRTUAL_ENV"] {
            assert!(!is_secret_env_name(name), "{name}");
        }
    }
}
