//! `toolhost tools --explain` for host bash, in words: what the start-up self-test proved, and
//! exactly what a command gets — filesystem rules, identity, network, seccomp, scoping, the
//! process-tree kill, limits and environment.

use toolhost_confine::ruleset as confine;
use toolhost_confine::seccomp;
use toolhost_confine::tree::LimitMechanism;

use crate::{seccomp_policy, BashNetwork, BashTool, ConfineMode, ENV_ALLOW};

/// What a command of `tool` gets, line by line.
pub(crate) fn lines(tool: &BashTool) -> Vec<String> {
    let c = &tool.config;
    let mut lines = Vec::new();
    match (c.confine, tool.self_test.get()) {
        (ConfineMode::Off, _) => {
            lines.push("UNCONFINED: sandbox.bash_confinement is off; commands run with toolhost's own privileges, files and network".into());
            return lines;
        }
        (ConfineMode::Full, Some(Ok(proven))) => {
            lines.push(format!("confined; the start-up self-test proved: {}", proven.join("; ")))
        }
        (ConfineMode::Full, Some(Err(why))) => {
            lines.push(format!("left out: the start-up self-test failed: {why}"));
            return lines;
        }
        (ConfineMode::Full, None) => lines.push("confined; the self-test runs before the first command".into()),
    }
    let abi = confine::abi();
    let mut rw =
        vec!["the thread's workspace, uploads, outputs, user-data/.tmp (TMPDIR), user-data/.home (HOME)".to_string()];
    let mut ro = vec!["the thread's acp-workspace".to_string()];
    if let Some(s) = &c.skills_host_path {
        ro.push(format!("skills ({})", s.display()));
    }
    for m in c.mounts.iter().filter(|m| m.host_path.exists()) {
        let entry = format!("{} ({})", m.container_path, m.host_path.display());
        if m.read_only {
            ro.push(entry)
        } else {
            rw.push(entry)
        }
    }
    ro.extend(c.extra_read_paths.iter().map(|p| p.display().to_string()));
    lines.push(format!(
        "filesystem (Landlock ABI v{abi}): read-write: {}; read-only: {}; /usr /bin /sbin /lib* /opt /proc /nix/store; /etc only where an unprivileged user could read it ({} entries hidden, e.g. /etc/shadow); list-only: user-data (its entries cannot be renamed, replaced or added to); devices: /dev/null /dev/zero /dev/full /dev/random /dev/urandom; creating FIFOs and device nodes: refused everywhere; everything else: refused",
        rw.join(", "),
        ro.join(", "),
        confine::etc_hidden_entries()
    ));
    lines.push(match c.user {
        Some(u) => format!("identity: {u} (sandbox.bash_user), no capabilities, no_new_privs; the thread's read-write directories are handed to it"),
        None if tool.identity.is_uid0() => format!(
            "identity: uid 0 with every capability dropped (effective, permitted, inheritable, ambient{}; SECBIT_NOROOT), no_new_privs; {}",
            if tool.identity.drops_bounding() { ", bounding" } else { "; the bounding set stays (no CAP_SETPCAP)" },
            if tool.mount_view {
                "a private mount namespace shows every mount read-only except the thread's user-data and writable mounts (where Landlock decides), so chmod/chown/xattrs on root's files fail (EROFS) while they work in the thread"
            } else {
                "chmod/chown/xattrs refused by seccomp (uid 0 still owns root's files) — run scripts as `bash x.sh` / `python3 x.py`, not `chmod +x`"
            }
        ),
        None => "identity: toolhost's own unprivileged user, no capabilities, no_new_privs; chmod/chown/xattrs refused by seccomp (the user owns its files outside the thread) — run scripts as `bash x.sh` / `python3 x.py`, not `chmod +x`".into(),
    });
    lines.push(match &c.network {
        BashNetwork::None => format!(
            "network: none (sandbox.bash_network: none); TCP bind/connect {} by Landlock",
            if abi >= confine::NET_ABI { "also refused" } else { "not covered (kernel below ABI 4)" }
        ),
        BashNetwork::Allowlist(grant) => {
            let isolated = matches!(tool.endpoint.get(), Some(Ok(e)) if e.netns().is_some());
            format!(
                "network: HTTPS through toolhost's proxy to {}{} (CONNECT only, name resolved once and private addresses refused{}, TLS server name must equal the CONNECT host); HTTPS_PROXY/HTTP_PROXY/ALL_PROXY set; {}",
                grant.describe(),
                if grant.allow_private() { " with allow_private_addresses" } else { "" },
                if grant.allow_private() { " except where allowed" } else { "" },
                if isolated {
                    "the command runs in its own network namespace whose only peer is the proxy (Landlock: connect to the proxy port only, no bind)"
                } else {
                    "Landlock allows TCP connect to the proxy's port only and no bind; residual risk: that port number on another host is reachable (toolhost lacks CAP_SYS_ADMIN for a network namespace)"
                }
            )
        }
    });
    lines.extend(seccomp::describe(&seccomp_policy(c, &tool.identity, tool.mount_view)));
    lines.push(if abi >= confine::SCOPE_ABI {
        "scoping (Landlock ABI 6): signals and abstract UNIX sockets limited to the command's own processes".into()
    } else {
        format!("scoping: NOT available (kernel Landlock ABI {abi} < 6): a command may signal toolhost's other processes of its uid")
    });
    lines.push(match tool.cgroup_parent() {
        Ok(p) => format!(
            "process tree: a cgroup v2 per command under {} ({}), killed at the timeout, on cancellation and at host shutdown; setsid cannot leave it; a command that finishes may leave background processes running",
            p.dir.display(),
            if p.has_kill { "cgroup.kill" } else { "SIGKILL to every member until empty" }
        ),
        Err(why) => format!(
            "process tree: a subreaper supervisor per command ({why}): setsid'd and orphaned processes are re-parented to it and killed with the tree at the timeout, on cancellation and at host shutdown; a command that finishes may leave background processes running"
        ),
    });
    lines.push(if tool.pid_namespace() {
        "processes: a private pid namespace and /proc per command: other threads' commands and toolhost itself are not there to see; the tree dies with toolhost (its supervisor watches a pipe only toolhost holds)".to_string()
    } else {
        "processes: other processes stay visible in /proc (no CAP_SYS_ADMIN for a pid namespace); their environments and memory are not readable".to_string()
    });
    let cap =
        |v: Option<u64>, unit: &str, scale: u64| v.map_or("unlimited".to_string(), |v| format!("{} {unit}", v / scale));
    let rlimit = if tool.identity.is_uid0() {
        "RLIMIT_NPROC; not enforced for uid 0"
    } else {
        "RLIMIT_NPROC, which counts every process of the command's uid"
    };
    let mechanism = |m: &LimitMechanism, or: &str| match m {
        LimitMechanism::CgroupV2 => "cgroup v2".to_string(),
        LimitMechanism::CgroupV1(dir) => format!("cgroup v1 {}", dir.display()),
        LimitMechanism::Rlimit => or.to_string(),
    };
    let (pids, memory) = match tool.cgroup_parent() {
        Ok(p) => (mechanism(&p.pids, rlimit), mechanism(&p.memory, "not enforced without a memory controller")),
        Err(_) => (rlimit.to_string(), "not enforced without a cgroup".to_string()),
    };
    lines.push(format!(
        "tree caps: {} (sandbox.bash_max_processes; {pids}), {} of memory (sandbox.bash_memory_mb; {memory})",
        cap(c.max_processes, "processes", 1),
        cap(c.memory_bytes, "MiB", 1 << 20),
    ));
    lines.push(format!(
        "limits: {}, no core dumps; environment: {}{}",
        match c.max_file_bytes {
            Some(b) => format!("files up to {} MiB (RLIMIT_FSIZE)", b >> 20),
            None => "no file size limit".into(),
        },
        ENV_ALLOW.join(", "),
        if c.env.is_empty() { String::new() } else { format!(", {} (sandbox.bash_env)", c.env.join(", ")) }
    ));
    lines
}
