//! Host bash through the `toolhost` binary: the start-up self-test decides whether bash is
//! offered (a shell that cannot start leaves it out, with the reason), `tools --explain` says
//! what a command gets, turning confinement off is explicit and warned about, bad `sandbox.bash_*`
//! values are config errors with their line, and a command cannot read toolhost's environment.

use std::path::Path;
use std::process::{Command, Output};

fn toolhost(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_toolhost"))
        .args(args)
        .env("TOOLHOST_HOME", dir.join("home"))
        .env_remove("TOOLHOST_CONFIG")
        .envs(env.iter().copied())
        .current_dir(dir)
        .output()
        .unwrap()
}

fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

/// A config offering host bash, with extra `sandbox:` keys.
fn config(dir: &Path, sandbox_keys: &str) -> std::path::PathBuf {
    let path = dir.join("config.yaml");
    std::fs::write(
        &path,
        format!(
            "tools:\n  - {{name: bash, group: bash, use: 'deerflow.sandbox.tools:bash_tool'}}\nsandbox:\n  use: deerflow.sandbox.local:LocalSandboxProvider\n  allow_host_bash: true\n  bash_command_timeout: 10\n{sandbox_keys}"
        ),
    )
    .unwrap();
    path
}

#[test]
fn bash_is_left_out_when_its_self_test_fails_and_offered_when_it_passes() {
    let dir = tempfile::tempdir().unwrap();
    config(dir.path(), "  bash_shell: /nonexistent/toolhost-bash\n");
    let o = toolhost(dir.path(), &["tools", "--explain"], &[]);
    let out = text(&o);
    assert!(o.status.success(), "{out}");
    assert!(
        out.contains("- bash") && out.contains("left out: host bash's confinement did not engage: the probe command could not start (/nonexistent/toolhost-bash)"),
        "{out}"
    );
    assert!(out.contains("host bash:\n  left out: the start-up self-test failed"), "{out}");
    let listed = text(&toolhost(dir.path(), &["tools"], &[]));
    assert!(!listed.lines().any(|l| l.starts_with("bash ")), "{listed}");
    let checked = text(&toolhost(dir.path(), &["check"], &[]));
    assert!(
        checked.contains("warning: tools[0] 'bash': left out: host bash's confinement did not engage"),
        "{checked}"
    );
    let call = toolhost(
        dir.path(),
        &[
            "call",
            "bash",
            r#"{"description": "d", "command": "echo ran > /mnt/user-data/workspace/ran"}"#,
            "--thread",
            "t1",
        ],
        &[],
    );
    assert!(!call.status.success(), "{}", text(&call));
    assert!(!dir.path().join("home/threads/t1/user-data/workspace/ran").exists(), "the command ran");

    // Positive control: the same config with the real shell offers bash, and it runs.
    config(dir.path(), "");
    let listed = text(&toolhost(dir.path(), &["tools"], &[]));
    assert!(listed.lines().any(|l| l.starts_with("bash ")), "{listed}");
    let call = toolhost(
        dir.path(),
        &[
            "call",
            "bash",
            r#"{"description": "d", "command": "echo ran > /mnt/user-data/workspace/ran"}"#,
            "--thread",
            "t1",
        ],
        &[],
    );
    assert!(call.status.success(), "{}", text(&call));
    assert_eq!(std::fs::read_to_string(dir.path().join("home/threads/t1/user-data/workspace/ran")).unwrap(), "ran\n");
}

#[test]
fn tools_explain_states_what_a_command_gets() {
    let dir = tempfile::tempdir().unwrap();
    config(dir.path(), "  bash_env: [GIT_AUTHOR_NAME]\n");
    let out = text(&toolhost(dir.path(), &["tools", "--explain"], &[]));
    for needle in [
        "+ bash",
        "host bash:\n  confined; the start-up self-test proved: Landlock refused a read and a write outside the thread",
        "capabilities 0, no_new_privs",
        "seccomp refused an AF_INET socket",
        "filesystem (Landlock ABI v",
        "read-write: the thread's workspace, uploads, outputs",
        "list-only: user-data",
        "creating FIFOs and device nodes: refused everywhere",
        "identity: uid 0 with every capability dropped",
        "network: none (sandbox.bash_network: none)",
        "seccomp (x86_64",
        "process tree: a cgroup v2 per command",
        "GIT_AUTHOR_NAME (sandbox.bash_env)",
    ] {
        assert!(out.contains(needle), "missing {needle:?}:\n{out}");
    }
    let json: serde_json::Value =
        serde_json::from_slice(&toolhost(dir.path(), &["tools", "--explain", "--json"], &[]).stdout).unwrap();
    let lines = json["host_bash_confinement"].as_array().unwrap();
    assert!(lines[0].as_str().unwrap().starts_with("confined;"), "{json}");
}

#[test]
fn confinement_off_is_explicit_and_warned_about() {
    let dir = tempfile::tempdir().unwrap();
    config(dir.path(), "  bash_confinement: off\n");
    let checked = text(&toolhost(dir.path(), &["check"], &[]));
    assert!(
        checked
            .contains("warning: tools[0] 'bash': sandbox.bash_confinement is off: host bash commands run UNCONFINED"),
        "{checked}"
    );
    let out = text(&toolhost(dir.path(), &["tools", "--explain"], &[]));
    assert!(out.contains("host bash:\n  UNCONFINED: sandbox.bash_confinement is off"), "{out}");
}

#[test]
fn bad_bash_keys_are_config_errors_with_their_line() {
    let dir = tempfile::tempdir().unwrap();
    config(dir.path(), "  bash_network: allowlist\n");
    // `check` reports every problem at the value itself…
    let o = toolhost(dir.path(), &["check"], &[]);
    let out = text(&o);
    assert!(!o.status.success(), "{out}");
    assert!(out.contains("config.yaml:7:17: sandbox.bash_network: allowlist needs its hosts"), "{out}");
    // …and loading the config points at the value itself.
    let o = toolhost(dir.path(), &["tools"], &[]);
    let out = text(&o);
    assert!(!o.status.success(), "{out}");
    assert!(
        out.contains("config.yaml:7:17: sandbox.bash_network") && out.contains("allowlist needs its hosts"),
        "{out}"
    );
    config(dir.path(), "  bash_network:\n    allow: ['http://pypi.org']\n");
    let out = text(&toolhost(dir.path(), &["tools"], &[]));
    assert!(out.contains("config.yaml:8:") && out.contains("only HTTPS is allowed"), "{out}");
    config(dir.path(), "  bash_user: root\n");
    let out = text(&toolhost(dir.path(), &["tools"], &[]));
    assert!(out.contains("config.yaml:7:") && out.contains("must not be 0"), "{out}");
}

#[test]
fn a_command_cannot_read_toolhosts_environment() {
    let dir = tempfile::tempdir().unwrap();
    config(dir.path(), "");
    // `\057` is `/`: the command names /proc paths without writing a host path the validator
    // would refuse, so the confinement is what answers.
    let command = r#"s=$(printf '\057'); grep -E '^(CapEff|NoNewPrivs|Seccomp):' "${s}proc${s}self${s}status"; cat "${s}proc${s}$PPID${s}environ" | tr '\0' '\n'; env"#;
    let args = serde_json::json!({"description": "d", "command": command}).to_string();
    let o = toolhost(
        dir.path(),
        &["call", "bash", &args, "--thread", "t1"],
        &[("TOOLHOST_E2E_API_KEY", "sk-e2e-secret-value"), ("GH_PAT", "ghp-e2e-secret")],
    );
    let out = text(&o);
    assert!(!out.contains("sk-e2e-secret-value") && !out.contains("ghp-e2e-secret"), "{out}");
    assert!(out.contains("Permission denied"), "{out}");
    assert!(
        out.contains("CapEff:\t0000000000000000") && out.contains("NoNewPrivs:\t1") && out.contains("Seccomp:\t2"),
        "{out}"
    );
}

/// `toolhost` run as `uid`:`uid` (no capabilities: the switch from root clears them).
fn toolhost_as(uid: u32, dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    use std::os::unix::process::CommandExt;
    Command::new(env!("CARGO_BIN_EXE_toolhost"))
        .args(args)
        .uid(uid)
        .gid(uid)
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("HOME", dir)
        .env("TOOLHOST_HOME", dir.join("home"))
        .envs(env.iter().copied())
        .current_dir(dir)
        .output()
        .unwrap()
}

/// This process's cgroup v2 directory's `toolhost` child, where a cgroup2 hierarchy is mounted.
fn toolhost_cgroup_v2() -> Option<std::path::PathBuf> {
    let info = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    let mount = info.lines().find_map(|l| {
        let (left, right) = l.split_once(" - ")?;
        (right.split_whitespace().next()? == "cgroup2").then(|| left.split_whitespace().nth(4).map(str::to_string))?
    })?;
    let own = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let own = own.lines().find_map(|l| l.strip_prefix("0::"))?.trim().trim_start_matches('/').to_string();
    Some(Path::new(&mount).join(own).join("toolhost"))
}

/// Finding 12: toolhost run by an unprivileged user offers host bash, confined — after root
/// already made the `toolhost` cgroup it cannot write (the subreaper takes over), with
/// `chmod` of the user's own files outside the thread refused (seccomp: Landlock does not govern
/// it and this user owns them).
#[test]
fn a_non_root_toolhost_runs_bash_confined_after_root_made_the_cgroup() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    // SAFETY: getuid cannot fail.
    if unsafe { libc::getuid() } != 0 {
        eprintln!("SKIPPED: switching to an unprivileged uid needs a root test process");
        return;
    }
    const NOBODY: u32 = 65534;
    // Root first: its call makes the `toolhost` cgroup (and the v1 controllers' parents).
    let root_dir = tempfile::tempdir().unwrap();
    config(root_dir.path(), "");
    let o = toolhost(
        root_dir.path(),
        &["call", "bash", r#"{"description": "d", "command": "echo as-root"}"#, "--thread", "t1"],
        &[],
    );
    assert!(o.status.success() && text(&o).contains("as-root"), "{}", text(&o));
    let cgroup = toolhost_cgroup_v2();
    if let Some(cgroup) = &cgroup {
        let meta = std::fs::metadata(cgroup).unwrap_or_else(|e| panic!("{}: {e}", cgroup.display()));
        assert_eq!(meta.uid(), 0, "root made {}", cgroup.display());
    }

    let dir = tempfile::tempdir().unwrap();
    config(dir.path(), "  bash_env: [PROBE_OUTSIDE]\n");
    let outside = dir.path().join("outside");
    std::fs::create_dir(&outside).unwrap();
    let victim = outside.join("victim");
    std::fs::write(&victim, "mine").unwrap();
    std::fs::set_permissions(&victim, std::fs::Permissions::from_mode(0o644)).unwrap();
    for path in [dir.path(), &dir.path().join("config.yaml"), &outside, &victim] {
        std::os::unix::fs::chown(path, Some(NOBODY), Some(NOBODY)).unwrap();
    }
    let env = [("PROBE_OUTSIDE", outside.to_str().unwrap())];

    let o = toolhost_as(NOBODY, dir.path(), &["tools", "--explain"], &env);
    let out = text(&o);
    assert!(o.status.success(), "{out}");
    for needle in [
        "+ bash",
        "host bash:\n  confined; the start-up self-test proved: Landlock refused a read and a write outside the thread",
        "chmod refused outside the thread",
        "identity: toolhost's own unprivileged user",
        "seccomp (the command runs as toolhost's own uid",
        "process tree: a subreaper supervisor per command",
    ] {
        assert!(out.contains(needle), "missing {needle:?}:\n{out}");
    }

    let command = r#"echo hi; id -u; touch "$PROBE_OUTSIDE/x-outside"; chmod 0777 "$PROBE_OUTSIDE/victim"; echo inside > inside.txt; echo done"#;
    let args = serde_json::json!({"description": "x", "command": command}).to_string();
    let o = toolhost_as(NOBODY, dir.path(), &["call", "bash", &args, "--thread", "t"], &env);
    let out = text(&o);
    assert!(o.status.success(), "{out}");
    assert!(out.starts_with(&format!("hi\n{NOBODY}\n")), "{out}");
    assert!(out.contains("x-outside': Permission denied"), "Landlock refuses the write: {out}");
    assert!(out.contains("victim': Operation not permitted"), "seccomp refuses the chmod: {out}");
    assert!(!outside.join("x-outside").exists(), "the command wrote outside its thread");
    let meta = std::fs::metadata(&victim).unwrap();
    assert_eq!(meta.permissions().mode() & 0o7777, 0o644, "the command changed a mode outside its thread");
    let inside = dir.path().join("home/threads/t/user-data/workspace/inside.txt");
    assert_eq!(std::fs::read_to_string(&inside).unwrap(), "inside\n");
    assert_eq!(std::fs::metadata(&inside).unwrap().uid(), NOBODY);

    // A normal call still works.
    let args = serde_json::json!({"description": "x", "command": "echo fine"}).to_string();
    let o = toolhost_as(NOBODY, dir.path(), &["call", "bash", &args, "--thread", "t"], &env);
    assert!(o.status.success() && text(&o).starts_with("fine\n"), "{}", text(&o));
}
