//! The start-up self-test: one real command, prepared exactly as a call's command is, in a
//! throw-away thread directory. It must fail to write outside the thread, report zero
//! capabilities and `no_new_privs`, be refused the sockets its network mode refuses, and leave a
//! `setsid` process behind that the tree kill then ends. Anything less and bash is not offered.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use toolhost_core::{CallContext, ThreadFs, ThreadState};

use toolhost_confine::child::TreeSetup;
use toolhost_confine::privs::CapSets;
use toolhost_confine::reaper::{StatusPipe, Supervisor};
use toolhost_confine::ruleset as confine;
use toolhost_confine::tree::Tree;

use crate::{BashNetwork, BashTool, NetSetup};

/// The probe script. It prints what it saw; the parent decides. `/dev/tcp` and `/dev/udp` are
/// bash's own sockets, so no other program is needed.
const SCRIPT: &str = r#"
grep -E '^(Cap(Inh|Prm|Eff|Bnd|Amb)|NoNewPrivs|Seccomp):' /proc/self/status
if cat "$PROBE_OUTSIDE/sentinel" >/dev/null 2>&1; then echo "READ outside: allowed"; fi
if echo escaped > "$PROBE_OUTSIDE/escape" 2>/dev/null; then echo "WRITE outside: allowed"; fi
if echo inside > ./probe-inside 2>/dev/null; then echo "WRITE inside: allowed"; fi
if chmod 0600 "$PROBE_OUTSIDE/sentinel" 2>/dev/null; then echo "CHMOD outside: allowed"; fi
if chmod 0600 ./probe-inside 2>/dev/null; then echo "CHMOD inside: allowed"; fi
echo "TCP denied port: $( (exec 3<>"/dev/tcp/127.0.0.1/$PROBE_DENIED_PORT") 2>&1 && echo connected)"
if [ -n "$PROBE_PROXY_PORT" ]; then
  echo "TCP proxy port: $( (exec 3<>"/dev/tcp/127.0.0.1/$PROBE_PROXY_PORT") 2>&1 && echo connected)"
  echo "UDP: $( (echo x > "/dev/udp/127.0.0.1/$PROBE_DENIED_PORT") 2>&1 && echo sent)"
fi
echo "PIDS: $(ls /proc | grep -cE '^[0-9]+$')"
echo "PID1 cmdline bytes: $(tr -d '\0' < /proc/1/cmdline 2>/dev/null | wc -c)"
if [ -n "$PROBE_HOST_PID" ] && [ -n "$PROBE_MARK" ] && [ -r "/proc/$PROBE_HOST_PID/cmdline" ] && grep -q "$PROBE_MARK" "/proc/$PROBE_HOST_PID/cmdline" 2>/dev/null; then echo "HOST cmdline: visible"; fi
setsid sleep 60 >/dev/null 2>&1 &
echo "SLEEPER $!"
"#;

/// A throw-away directory removed when dropped.
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Run the self-test of `tool`; `Ok` lists what was proven.
pub(crate) fn run(tool: &BashTool) -> Result<Vec<String>, String> {
    let abi = match confine::confinement_status() {
        confine::ConfinementStatus::Active { abi } => abi,
        confine::ConfinementStatus::Unavailable { reason } => return Err(format!("Landlock is unavailable: {reason}")),
    };
    if matches!(tool.config.network, BashNetwork::Allowlist(_)) && abi < confine::NET_ABI {
        return Err(format!(
            "sandbox.bash_network allowlist needs Landlock network rules (ABI {}, Linux 6.7); this kernel has ABI {abi}",
            confine::NET_ABI
        ));
    }
    tool.identity.check()?;
    // The system rules are read once per process; do it here rather than on a call.
    confine::warm_up();

    static SEQ: AtomicU64 = AtomicU64::new(0);
    let scratch = Scratch(std::env::temp_dir().join(format!(
        "toolhost-bash-probe-{}-{}",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    )));
    make_private_dir(&scratch.0)?;
    // Open to everyone: only the confinement can keep the command out (a `bash_user` is not
    // stopped by permissions here, nor uid 0 by the read-only view when it reads).
    set_mode(&scratch.0, 0o711)?;
    let outside = scratch.0.join("outside");
    make_private_dir(&outside)?;
    set_mode(&outside, 0o777)?;
    let sentinel = outside.join("sentinel");
    std::fs::write(&sentinel, "probe").map_err(|e| format!("cannot create {}: {e}", sentinel.display()))?;
    set_mode(&sentinel, 0o644)?;
    let fs = ThreadFs::open(&scratch.0, "probe").map_err(|e| format!("cannot create the probe's thread: {e}"))?;
    fs.ensure_tool_dirs().map_err(|e| format!("cannot create the probe's thread: {e}"))?;
    let ctx = CallContext::new(Arc::new(fs), "self-test", Arc::new(ThreadState::default()));

    // A listener the command must not reach: in the host's namespace, or in the proxy's when
    // commands join one (so a refusal there is Landlock's, not an empty namespace's).
    let (net, denied) = match &tool.config.network {
        BashNetwork::None => {
            let denied = TcpListener::bind("127.0.0.1:0").map_err(|e| format!("cannot bind a probe port: {e}"))?;
            (NetSetup::None, denied)
        }
        BashNetwork::Allowlist(_) => {
            let endpoint = tool.endpoint()?;
            let denied = match endpoint.in_netns(|| TcpListener::bind("127.0.0.1:0")) {
                Some(r) => r,
                None => TcpListener::bind("127.0.0.1:0"),
            }
            .map_err(|e| format!("cannot bind a probe port: {e}"))?;
            let netns = match endpoint.netns() {
                Some(ns) => Some(ns.try_clone().map_err(|e| e.to_string())?),
                None => None,
            };
            (NetSetup::Proxy { port: endpoint.port(), netns, env: Vec::new() }, denied)
        }
    };
    let denied_port = denied.local_addr().map_err(|e| e.to_string())?.port();
    let proxy_port = match &net {
        NetSetup::Proxy { port, .. } => Some(*port),
        NetSetup::None => None,
    };

    let prepared = tool.prepare(&ctx, net).map_err(|e| e.trim_start_matches("Error: ").to_string())?;
    let mut cmd = Command::new(&tool.config.shell);
    cmd.arg("-c")
        .arg(SCRIPT)
        .env_clear()
        .envs(&prepared.env)
        .env("PROBE_OUTSIDE", &outside)
        .env("PROBE_DENIED_PORT", denied_port.to_string())
        .env("PROBE_PROXY_PORT", proxy_port.map(|p| p.to_string()).unwrap_or_default())
        .env("PROBE_HOST_PID", std::process::id().to_string())
        .env("PROBE_MARK", host_mark())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    prepared.plan.install(&mut cmd);
    let mut child =
        cmd.spawn().map_err(|e| format!("the probe command could not start ({}): {e}", tool.config.shell.display()))?;
    let TreeSetup { cgroup, status: status_pipe } = prepared.tree;
    let tree = match cgroup {
        Some(cgroup) => Tree::Cgroup(cgroup),
        None => match Supervisor::new(child.id()) {
            Ok(s) => Tree::Reaper(s),
            Err(e) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("cannot watch the probe's supervisor: {e}"));
            }
        },
    };
    // Both pipes reach EOF when the shell exits: the background sleeper writes to /dev/null.
    let stderr = child.stderr.take();
    let stderr = std::thread::spawn(move || {
        let mut text = String::new();
        if let Some(mut pipe) = stderr {
            let _ = std::io::Read::read_to_string(&mut pipe, &mut text);
        }
        text
    });
    let mut text = String::new();
    if let Some(mut pipe) = child.stdout.take() {
        let _ = std::io::Read::read_to_string(&mut pipe, &mut text);
    }
    let errors = stderr.join().unwrap_or_default();
    let status = match status_pipe {
        Some(pipe) => read_status(pipe),
        None => child.wait().map_err(|e| e.to_string()),
    };
    let sleeper: Option<i32> =
        text.lines().find_map(|l| l.strip_prefix("SLEEPER ")).and_then(|p| p.trim().parse().ok());
    // Whatever the verdict, nothing of the probe may outlive it.
    tree.kill();
    // In a pid namespace the reported pid is the namespace's: the tree's emptiness decides.
    let own_ns = tool.pid_namespace();
    let killed = sleeper.map(|pid| (own_ns || !running(pid)) && !tree.alive());
    tree.remove();
    let _ = child.wait();
    match status {
        Ok(status) if status.success() => {}
        Ok(status) => return Err(format!("the probe command failed ({status}): {}", errors.trim())),
        Err(e) => return Err(format!("the probe command's status is unknown: {e}")),
    }
    verdict(tool, &text, &outside, killed, proxy_port.is_some())
}

/// The shell's status from the supervisor's pipe.
fn read_status(pipe: StatusPipe) -> Result<std::process::ExitStatus, String> {
    use std::os::unix::process::ExitStatusExt;
    let mut raw = [0u8; 4];
    std::io::Read::read_exact(&mut std::fs::File::from(pipe.0), &mut raw).map_err(|e| e.to_string())?;
    Ok(std::process::ExitStatus::from_raw(i32::from_ne_bytes(raw)))
}

fn verdict(
    tool: &BashTool,
    text: &str,
    outside: &Path,
    killed: Option<bool>,
    allowlist: bool,
) -> Result<Vec<String>, String> {
    let mut proven = Vec::new();
    if text.contains("READ outside: allowed") {
        return Err("Landlock did not engage: the probe read a file outside its thread".into());
    }
    if outside.join("escape").exists() || text.contains("WRITE outside: allowed") {
        return Err("Landlock did not engage: the probe wrote outside its thread".into());
    }
    if !text.contains("WRITE inside: allowed") {
        return Err("the probe could not write in its own workspace".into());
    }
    proven.push("Landlock refused a read and a write outside the thread".into());
    if text.contains("CHMOD outside: allowed") || mode(&outside.join("sentinel")) != Some(0o644) {
        return Err("the probe changed the mode of a file outside its thread".into());
    }
    if tool.mount_view && !text.contains("CHMOD inside: allowed") {
        return Err("the probe could not chmod a file in its own workspace".into());
    }
    proven.push(if tool.mount_view {
        "chmod refused outside the thread (read-only mounts) and allowed inside".into()
    } else {
        "chmod refused outside the thread".into()
    });
    let caps = CapSets::parse(text).ok_or("the probe did not report its capabilities")?;
    if caps.effective | caps.permitted | caps.inheritable | caps.ambient != 0 {
        return Err(format!("capabilities were not dropped: {caps:?}"));
    }
    if tool.identity.drops_bounding() && caps.bounding != 0 {
        return Err(format!("the capability bounding set was not emptied: {:#x}", caps.bounding));
    }
    if !text.lines().any(|l| l.starts_with("NoNewPrivs:") && l.trim_end().ends_with('1')) {
        return Err("no_new_privs is not set".into());
    }
    proven.push("capabilities 0, no_new_privs".into());
    if !text.lines().any(|l| l.starts_with("Seccomp:") && l.trim_end().ends_with('2')) {
        return Err("no seccomp filter is installed".into());
    }
    let line = |prefix: &str| text.lines().find_map(|l| l.strip_prefix(prefix)).unwrap_or("").to_string();
    let denied = line("TCP denied port: ");
    if denied.contains("connected") {
        return Err(format!("a TCP connect to a port the command may not reach succeeded: {denied}"));
    }
    if allowlist {
        let proxy = line("TCP proxy port: ");
        if !proxy.contains("connected") {
            return Err(format!("the command cannot reach the proxy port: {proxy}"));
        }
        let udp = line("UDP: ");
        if udp.contains("sent") || !udp.contains("socket") {
            return Err(format!("seccomp did not refuse a UDP socket: {udp}"));
        }
        proven.push("seccomp refused a UDP socket; TCP reached the proxy port and no other".into());
    } else {
        // bash reports which call failed: `socket` means seccomp refused it before any connect.
        if !denied.contains("socket") {
            return Err(format!("seccomp did not refuse an AF_INET socket: {denied}"));
        }
        proven.push("seccomp refused an AF_INET socket".into());
    }
    if tool.pid_namespace() {
        let pids: usize =
            line("PIDS: ").trim().parse().map_err(|_| format!("the probe did not count /proc: {text}"))?;
        if pids > 8 || text.contains("HOST cmdline: visible") {
            return Err(format!("the probe sees processes outside its tree in /proc ({pids} pids)"));
        }
        if line("PID1 cmdline bytes: ").trim() != "0" {
            return Err("the probe can read toolhost's command line through its supervisor".into());
        }
        proven.push(format!("/proc shows only the command's own tree ({pids} processes)"));
    } else if text.contains("HOST cmdline: visible") {
        proven.push("other processes stay visible in /proc (no pid namespace without CAP_SYS_ADMIN)".into());
    }
    let mechanism = match tool.cgroup_parent() {
        Ok(_) => "the cgroup kill",
        Err(_) => "the subreaper's kill",
    };
    match killed {
        Some(true) => proven.push(format!("{mechanism} ended a setsid background process")),
        Some(false) => return Err(format!("{mechanism} did not end the probe's setsid background process")),
        None => return Err("the probe did not report its background process".into()),
    }
    Ok(proven)
}

/// A word of this process's own command line, for the probe to look for (its program name).
fn host_mark() -> String {
    std::env::args().next().and_then(|a| a.rsplit('/').next().map(str::to_string)).unwrap_or_default()
}

/// Whether `pid` runs (a zombie waiting for its reaper does not).
pub(crate) fn running(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| s.rsplit_once(") ").map(|(_, rest)| !rest.starts_with('Z') && !rest.starts_with('X')))
        .unwrap_or(false)
}

fn mode(path: &Path) -> Option<u32> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).ok().map(|m| m.permissions().mode() & 0o7777)
}

fn set_mode(path: &Path, mode: u32) -> Result<(), String> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
        .map_err(|e| format!("{}: {e}", path.display()))
}

fn make_private_dir(path: &Path) -> Result<(), String> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new().mode(0o700).create(path).map_err(|e| format!("cannot create {}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::BashConfig;

    const GOOD: &str = "CapInh:\t0000000000000000\nCapPrm:\t0000000000000000\nCapEff:\t0000000000000000\nCapBnd:\t0000000000000000\nCapAmb:\t0000000000000000\nNoNewPrivs:\t1\nSeccomp:\t2\nWRITE inside: allowed\nCHMOD inside: allowed\nTCP denied port: /bin/bash: socket: Operation not permitted\nPIDS: 3\nPID1 cmdline bytes: 0\nSLEEPER 42\n";

    /// The verdict must refuse each sign that a mechanism did not engage, one at a time.
    #[test]
    fn each_missing_mechanism_fails_the_verdict() {
        let tool = BashTool::new(BashConfig { allow_host_bash: true, ..BashConfig::default() });
        let outside = tempfile::tempdir().unwrap();
        let sentinel = outside.path().join("sentinel");
        std::fs::write(&sentinel, "probe").unwrap();
        set_mode(&sentinel, 0o644).unwrap();
        verdict(&tool, GOOD, outside.path(), Some(true), false).expect("all engaged");
        for (broken, why) in [
            (
                GOOD.replace("WRITE inside: allowed\n", "WRITE inside: allowed\nREAD outside: allowed\n"),
                "read a file outside",
            ),
            (
                GOOD.replace("WRITE inside: allowed\n", "WRITE inside: allowed\nWRITE outside: allowed\n"),
                "wrote outside",
            ),
            (GOOD.replace("CapEff:\t0000000000000000", "CapEff:\t0000000000000400"), "capabilities were not dropped"),
            (GOOD.replace("NoNewPrivs:\t1", "NoNewPrivs:\t0"), "no_new_privs"),
            (GOOD.replace("Seccomp:\t2", "Seccomp:\t0"), "no seccomp filter"),
            (
                GOOD.replace("socket: Operation not permitted", "connect: Permission denied"),
                "did not refuse an AF_INET socket",
            ),
            (GOOD.replace("Operation not permitted", "connected"), "succeeded"),
        ]
        .into_iter()
        .chain(
            tool.pid_namespace()
                .then(|| {
                    [
                        (GOOD.replace("PIDS: 3", "PIDS: 240"), "processes outside its tree"),
                        (GOOD.replace("PID1 cmdline bytes: 0", "PID1 cmdline bytes: 31"), "toolhost's command line"),
                        (
                            GOOD.replace("SLEEPER 42\n", "HOST cmdline: visible\nSLEEPER 42\n"),
                            "processes outside its tree",
                        ),
                    ]
                })
                .into_iter()
                .flatten(),
        ) {
            let err = verdict(&tool, &broken, outside.path(), Some(true), false).unwrap_err();
            assert!(err.contains(why), "{why}: {err}");
        }
        let err = verdict(&tool, GOOD, outside.path(), None, false).unwrap_err();
        assert!(err.contains("did not report its background process"), "{err}");
        let err = verdict(&tool, GOOD, outside.path(), Some(false), false).unwrap_err();
        assert!(err.contains("did not end the probe's setsid background process"), "{err}");
        set_mode(&sentinel, 0o600).unwrap();
        assert!(verdict(&tool, GOOD, outside.path(), Some(true), false).unwrap_err().contains("changed the mode"));
        set_mode(&sentinel, 0o644).unwrap();
        std::fs::write(outside.path().join("escape"), "x").unwrap();
        assert!(verdict(&tool, GOOD, outside.path(), Some(true), false).unwrap_err().contains("wrote outside"));
    }
}
