//! The agent subprocess: spawned in its own process group with DeerFlow's trimmed environment,
//! its stderr drained into a bounded tail for error messages, and the whole group killed when
//! the call ends (done, timed out, or dropped).

use std::collections::VecDeque;
use std::path::Path;
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use indexmap::IndexMap;
use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use tokio::io::AsyncReadExt;
use tokio::process::{Child, ChildStdin, ChildStdout, Command};
use toolhost_confine::process::{Prepared, TreeGuard};
use toolhost_core::Environment;

/// Variables every agent inherits from the host (the Python SDK's `DEFAULT_INHERITED_ENV_VARS`
/// on POSIX); everything else must be configured in `env`, so host secrets do not leak.
const INHERITED_ENV_VARS: [&str; 6] = ["HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER"];
/// How much of the agent's stderr is kept for an error message.
const STDERR_TAIL_BYTES: usize = 2048;
/// How long a finished agent gets to exit by itself after its stdin closes.
const EXIT_GRACE: Duration = Duration::from_secs(2);

/// DeerFlow's env rule ([`Environment::expand`], the config's): a value starting with `$` names
/// a variable of the host environment `env`; an unset one becomes `""` and is reported to `unset`.
pub fn resolve_env(
    configured: &IndexMap<String, String>,
    env: &Environment,
    unset: &mut dyn FnMut(&str),
) -> IndexMap<String, String> {
    configured.iter().map(|(k, v)| (k.clone(), env.expand(v, unset).unwrap_or_else(|| v.clone()))).collect()
}

/// The environment the agent starts with: the inherited subset of the host environment `env`
/// plus the configured values (unset `$VAR`s are logged; the host warned about them at open).
pub fn agent_environment(configured: &IndexMap<String, String>, env: &Environment) -> IndexMap<String, String> {
    let mut out = IndexMap::new();
    for key in INHERITED_ENV_VARS {
        // Shell function exports (`() { …`) are skipped like the Python SDK does.
        if let Some(value) = env.get(key) {
            if !value.starts_with("()") {
                out.insert(key.to_string(), value);
            }
        }
    }
    out.extend(resolve_env(configured, env, &mut |name| {
        tracing::debug!("ACP agent env: ${name} is not set; using \"\"")
    }));
    out
}

/// A running agent. Dropping it kills the process group.
pub struct AgentProcess {
    child: Child,
    pgid: Option<Pid>,
    stderr_tail: Arc<Mutex<VecDeque<u8>>>,
    /// A confined agent's process tree: killed with the agent.
    _tree: Option<TreeGuard>,
}

impl AgentProcess {
    /// Spawn `command args…` in `cwd` with exactly `env`, stdio piped, as a new process group
    /// leader (so grandchildren such as `npx`'s node process die with it).
    pub fn spawn(
        command: &str,
        args: &[String],
        env: &IndexMap<String, String>,
        cwd: &Path,
        confined: Option<Prepared>,
    ) -> std::io::Result<(Self, ChildStdin, ChildStdout)> {
        let mut cmd = Command::new(command);
        cmd.args(args)
            .current_dir(cwd)
            .env_clear()
            .envs(env)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true);
        // Confined: its home, tmp and proxy go over the configured values, and the confinement
        // runs between fork and exec.
        let tree = confined.map(|prepared| prepared.install(cmd.as_std_mut()));
        let mut child = cmd.spawn()?;
        let pgid = child.id().and_then(|id| i32::try_from(id).ok()).map(Pid::from_raw);
        let missing = || std::io::Error::other("agent stdio pipe was not created");
        let stdin = child.stdin.take().ok_or_else(missing)?;
        let stdout = child.stdout.take().ok_or_else(missing)?;
        let stderr_tail = Arc::new(Mutex::new(VecDeque::new()));
        if let Some(mut stderr) = child.stderr.take() {
            let tail = stderr_tail.clone();
            // Drained continuously: an agent blocked on a full stderr pipe would look hung.
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                while let Ok(n) = stderr.read(&mut buf).await {
                    if n == 0 {
                        break;
                    }
                    if let Ok(mut tail) = tail.lock() {
                        tail.extend(&buf[..n]);
                        let excess = tail.len().saturating_sub(STDERR_TAIL_BYTES);
                        tail.drain(..excess);
                    }
                }
            });
        }
        Ok((Self { child, pgid, stderr_tail, _tree: tree }, stdin, stdout))
    }

    /// The last bytes the agent wrote to stderr, trimmed.
    pub fn stderr_tail(&self) -> String {
        let bytes: Vec<u8> = self.stderr_tail.lock().map(|t| t.iter().copied().collect()).unwrap_or_default();
        String::from_utf8_lossy(&bytes).trim().to_string()
    }

    /// The exit status if the agent exits within `wait`.
    pub async fn exit_status_within(&mut self, wait: Duration) -> Option<ExitStatus> {
        tokio::time::timeout(wait, self.child.wait()).await.ok().and_then(Result::ok)
    }

    /// Give the agent a moment to exit on its own (its stdin is closed by now), then kill the
    /// group regardless: an agent's leftover children must not outlive the call.
    pub async fn finish(mut self) {
        let _ = tokio::time::timeout(EXIT_GRACE, self.child.wait()).await;
        self.kill().await;
    }

    /// Kill the group immediately and reap the leader.
    pub async fn kill(&mut self) {
        self.kill_group();
        let _ = self.child.wait().await;
        // Once the group is gone its id may be reused; `Drop` must not signal it again.
        self.pgid = None;
    }

    fn kill_group(&mut self) {
        if let Some(pgid) = self.pgid {
            // ESRCH (already gone) is the expected case after a clean exit.
            let _ = killpg(pgid, Signal::SIGKILL);
        }
        let _ = self.child.start_kill();
    }
}

impl Drop for AgentProcess {
    fn drop(&mut self) {
        self.kill_group();
    }
}

/// Whether `name` resolves to an executable on `path` (the host environment's `PATH`; Python's
/// `shutil.which`).
pub fn on_path(name: &str, path: Option<&str>) -> bool {
    use std::os::unix::fs::PermissionsExt;
    let Some(path) = path else { return false };
    std::env::split_paths(path).any(|dir| {
        std::fs::metadata(dir.join(name)).map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0).unwrap_or(false)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dollar_values_come_from_the_host_env_and_unset_is_empty_and_reported() {
        let host = Environment::new([("TOOLHOST_ACP_UNIT_VAR", "from-host")]);
        let mut env = IndexMap::new();
        env.insert("A".to_string(), "$TOOLHOST_ACP_UNIT_VAR".to_string());
        env.insert("B".to_string(), "$TOOLHOST_ACP_UNIT_UNSET".to_string());
        env.insert("C".to_string(), "literal $X".to_string());
        let mut unset = Vec::new();
        let out = resolve_env(&env, &host, &mut |n| unset.push(n.to_string()));
        assert_eq!(out["A"], "from-host");
        assert_eq!(out["B"], "");
        assert_eq!(out["C"], "literal $X");
        assert_eq!(unset, ["TOOLHOST_ACP_UNIT_UNSET"]);
    }

    #[test]
    fn agent_environment_is_the_inherited_subset_plus_config() {
        let host = Environment::new([("TOOLHOST_ACP_UNIT_SECRET", "s"), ("PATH", "/bin"), ("HOME", "/h")]);
        let mut configured = IndexMap::new();
        configured.insert("PATH".to_string(), "/custom".to_string());
        let env = agent_environment(&configured, &host);
        assert!(!env.contains_key("TOOLHOST_ACP_UNIT_SECRET"));
        assert_eq!(env["HOME"], "/h", "an inherited name comes from the host environment");
        assert_eq!(env["PATH"], "/custom", "configured values override inherited ones");
    }

    #[test]
    fn on_path_finds_sh_and_not_a_made_up_name() {
        assert!(on_path("sh", Some("/usr/local/bin:/usr/bin:/bin")));
        assert!(!on_path("toolhost-acp-no-such-binary", Some("/usr/local/bin:/usr/bin:/bin")));
        assert!(!on_path("sh", None), "no PATH in the host environment finds nothing");
    }
}
