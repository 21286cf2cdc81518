//! Long-lived confined processes: MCP stdio servers and ACP agents. They get the boundary host
//! bash commands get — no capabilities (or an unprivileged user) with `no_new_privs`, Landlock,
//! seccomp, a read-only view of the host for uid 0, a private pid namespace and `/proc`, a
//! cgroup with process and memory caps, a supervisor that ends the tree when toolhost dies,
//! network only through the allow-list proxy — with grants in the vocabulary of a component's
//! `capabilities:` instead of a thread's directories.
//!
//! What a process may touch by default: the system read-only (what a runtime needs), the
//! install directories of its command (a venv, a `node_modules`, a toolchain prefix), a private
//! home (with its tmp) that is its own, and the directory it is started in (a thread's
//! workspace). Nothing of toolhost's data dir besides: no other thread, no keys, no cache.

use std::collections::BTreeSet;
use std::io;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use toolhost_net::NetGrant;

use crate::child::{ChildPlan, TreeSetup};
use crate::mountns::{ProcView, ReadOnlyView, Writable};
use crate::privs::{BashUser, CapSets, Identity};
use crate::proxy::{Endpoint, GrantNames, Proxy};
use crate::reaper::ReaperPlan;
use crate::ruleset::{self, ConfinementStatus, FsRules, NetRule};
use crate::seccomp::{Filter, SeccompPolicy, SocketPolicy};
use crate::tree::{self, Cgroup, CgroupParent, TreeLimits};
use crate::{can_make_namespaces, paths, seccomp};

/// Processes a confined server or agent may run at once, by default (node and npm start a few
/// dozen threads; a fork bomb stops here).
pub const DEFAULT_MAX_PROCESSES: u64 = 512;
/// Memory of a confined server's or agent's whole tree, by default.
pub const DEFAULT_MEMORY_BYTES: u64 = 2 << 30;
/// Largest file a confined process may write, by default.
pub const DEFAULT_MAX_FILE_BYTES: u64 = 1 << 30;
/// How long one tunnel through the proxy may stay open.
const TUNNEL_LIFETIME: Duration = Duration::from_secs(3600);

/// Outbound network of a confined process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Network {
    /// No sockets of the internet families at all.
    None,
    /// HTTPS through the host's proxy, to what this grant allows.
    Proxy(Arc<NetGrant>),
}

/// What a process may reach besides the defaults.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grants {
    /// Files or directories it may read (and execute).
    pub read_only: Vec<PathBuf>,
    /// Directories it may change.
    pub read_write: Vec<PathBuf>,
    pub network: Network,
    pub limits: TreeLimits,
    /// RLIMIT_FSIZE; `None`: unlimited.
    pub max_file_bytes: Option<u64>,
}

impl Default for Grants {
    fn default() -> Self {
        Self {
            read_only: Vec::new(),
            read_write: Vec::new(),
            network: Network::Proxy(Arc::new(NetGrant::any_public_https())),
            limits: TreeLimits { max_processes: Some(DEFAULT_MAX_PROCESSES), memory_bytes: Some(DEFAULT_MEMORY_BYTES) },
            max_file_bytes: Some(DEFAULT_MAX_FILE_BYTES),
        }
    }
}

/// One configured program (an MCP server, an ACP agent) and its grants.
#[derive(Debug, Clone)]
pub struct ProcessSpec {
    /// What it is, for messages: `MCP server 'github'`.
    pub label: String,
    /// Where its grants are configured, for refusals: `toolhost.mcp_servers.github`.
    pub setting: String,
    /// The command and its arguments, as configured (its install directories are granted).
    pub command: String,
    pub args: Vec<String>,
    /// `PATH` the command is looked up in.
    pub path_env: Option<String>,
    /// Host environment variables passed through besides the front end's allow-list.
    pub env: Vec<String>,
    /// Its private home, created 0700 (its tmp is `home/tmp`).
    pub home: PathBuf,
    pub grants: Grants,
    /// Run as this user rather than uid 0 without capabilities (`sandbox.bash_user`).
    pub user: Option<BashUser>,
}

/// Why a process cannot be started confined.
#[derive(Debug, thiserror::Error)]
pub enum ConfineError {
    /// The kernel or the process's privileges cannot provide the boundary.
    #[error("confinement is unavailable: {0}")]
    Unavailable(String),
    /// A step of preparing it failed.
    #[error("cannot confine {what}: {source}")]
    Io { what: String, source: io::Error },
    #[error("cannot confine the process: {0}")]
    Rules(#[from] ruleset::ConfineError),
    /// The start-up self-test found a hole.
    #[error("the confinement self-test failed: {0}")]
    SelfTest(String),
}

fn io_err(what: impl Into<String>) -> impl FnOnce(io::Error) -> ConfineError {
    let what = what.into();
    move |source| ConfineError::Io { what, source }
}

/// Which kind of program a launch is, for messages and configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProcessKind {
    /// A stdio server of `extensions_config.json`.
    McpServer,
    /// An `acp_agents` entry (also a custom subagent with `acp:`).
    AcpAgent,
}

/// What a front end asks about one program before it starts it.
#[derive(Debug, Clone, Copy)]
pub struct LaunchRequest<'a> {
    pub kind: ProcessKind,
    pub name: &'a str,
    pub command: &'a str,
    pub args: &'a [String],
}

/// How one program is started.
#[derive(Clone)]
pub enum Launch {
    /// Under this confinement.
    Confined(Arc<Confiner>),
    /// As a plain subprocess, because the configuration says `confine: false` for it.
    Unconfined,
    /// Not at all, and why (confinement is unavailable and nobody chose to go without it).
    Refused(String),
}

impl std::fmt::Debug for Launch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Launch::Confined(c) => write!(f, "Confined({})", c.spec.label),
            Launch::Unconfined => f.write_str("Unconfined"),
            Launch::Refused(why) => write!(f, "Refused({why})"),
        }
    }
}

/// Decides how each program is started; the host builds it from its configuration.
pub type LaunchPolicy = Arc<dyn Fn(&LaunchRequest<'_>) -> Launch + Send + Sync>;

/// Prepares confined launches of one configured program; shared by all its launches (one
/// proxy, one filter, one self-test).
pub struct Confiner {
    spec: ProcessSpec,
    identity: Identity,
    /// uid 0 with CAP_SYS_ADMIN in the parent: the read-only view, a pid namespace, `/proc`.
    namespaces: bool,
    seccomp: Arc<Filter>,
    /// Directories granted read-only because the command lives there.
    install_roots: Vec<PathBuf>,
    endpoint: OnceLock<Result<Arc<Endpoint>, String>>,
    proxy: tokio::sync::OnceCell<Arc<Proxy>>,
    self_test: OnceLock<Result<Vec<String>, String>>,
}

impl Confiner {
    /// Check that the kernel and this process can confine `spec`, and prepare what every launch
    /// shares.
    pub fn new(spec: ProcessSpec) -> Result<Self, ConfineError> {
        let abi = match ruleset::confinement_status() {
            ConfinementStatus::Active { abi } => abi,
            ConfinementStatus::Unavailable { reason } => return Err(ConfineError::Unavailable(reason)),
        };
        if matches!(spec.grants.network, Network::Proxy(_)) && abi < ruleset::NET_ABI {
            return Err(ConfineError::Unavailable(format!(
                "network through the proxy needs Landlock network rules (ABI {}, Linux 6.7); this kernel has ABI \
                 {abi} (grant `network: none` to run it without network)",
                ruleset::NET_ABI
            )));
        }
        let nproc_fallback = match tree::cgroup_parent() {
            Ok(CgroupParent { pids: tree::LimitMechanism::Rlimit, .. }) | Err(_) => spec.grants.limits.max_processes,
            Ok(_) => None,
        };
        let identity = Identity::new(spec.user, spec.grants.max_file_bytes).with_max_processes(nproc_fallback);
        identity.check().map_err(ConfineError::Unavailable)?;
        let namespaces = identity.is_uid0() && can_make_namespaces();
        let caps = CapSets::current().unwrap_or_default();
        if spec.user.is_some() && !caps.has(crate::CAP_SYS_ADMIN) {
            return Err(ConfineError::Unavailable("sandbox.bash_user needs toolhost to run as root".into()));
        }
        let filter = Filter::new(&policy(&spec.grants.network, &identity, namespaces))
            .map_err(|e| ConfineError::Unavailable(format!("cannot build the seccomp filter: {e}")))?;
        let install_roots = install_roots(&spec.command, &spec.args, spec.path_env.as_deref());
        ruleset::warm_up();
        Ok(Self {
            spec,
            identity,
            namespaces,
            seccomp: Arc::new(filter),
            install_roots,
            endpoint: OnceLock::new(),
            proxy: tokio::sync::OnceCell::new(),
            self_test: OnceLock::new(),
        })
    }

    pub fn spec(&self) -> &ProcessSpec {
        &self.spec
    }

    /// The directories granted read-only because the command lives there.
    pub fn install_roots(&self) -> &[PathBuf] {
        &self.install_roots
    }

    fn endpoint(&self) -> Result<Arc<Endpoint>, String> {
        self.endpoint
            .get_or_init(|| {
                let isolated = CapSets::current()
                    .is_some_and(|c| c.has(crate::CAP_SYS_ADMIN))
                    .then(|| Endpoint::bind(true))
                    .and_then(|r| r.map_err(|e| tracing::warn!("network proxy: no network namespace: {e}")).ok());
                match isolated {
                    Some(endpoint) => Ok(Arc::new(endpoint)),
                    None => {
                        Endpoint::bind(false).map(Arc::new).map_err(|e| format!("cannot bind the network proxy: {e}"))
                    }
                }
            })
            .clone()
    }

    async fn proxy(&self, grant: &Arc<NetGrant>) -> Result<Arc<Proxy>, ConfineError> {
        let endpoint = self.endpoint().map_err(ConfineError::Unavailable)?;
        let names = GrantNames {
            whose: format!("{}.network", self.spec.setting),
            setting: format!("{} has", self.spec.setting),
        };
        self.proxy
            .get_or_try_init(|| async {
                Proxy::start(&endpoint, grant.clone(), names, TUNNEL_LIFETIME).map_err(io_err("the network proxy"))
            })
            .await
            .cloned()
    }

    /// Prepare one launch. `workdir` is where the process starts (a thread's workspace for an
    /// MCP server, its acp-workspace for an agent), writable; without one it starts in its home.
    pub async fn prepare(&self, workdir: Option<&Path>) -> Result<Prepared, ConfineError> {
        let (proxy, netns) = match &self.spec.grants.network {
            Network::None => (None, None),
            Network::Proxy(grant) => {
                let proxy = self.proxy(grant).await?;
                let netns = match self.endpoint().map_err(ConfineError::Unavailable)?.netns() {
                    Some(ns) => Some(ns.try_clone().map_err(io_err("the proxy's network namespace"))?),
                    None => None,
                };
                (Some(proxy), netns)
            }
        };
        self.prepare_with(workdir, proxy, netns)
    }

    fn prepare_with(
        &self,
        workdir: Option<&Path>,
        proxy: Option<Arc<Proxy>>,
        netns: Option<OwnedFd>,
    ) -> Result<Prepared, ConfineError> {
        // The view attaches writable directories at their absolute paths.
        let absolute = |p: &Path| std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf());
        let home = &absolute(&self.spec.home);
        let workdir = workdir.map(absolute);
        let workdir = workdir.as_deref();
        let tmp = home.join("tmp");
        for dir in [home, &tmp] {
            make_private_dir(dir, self.spec.user).map_err(io_err(format!("its home {}", dir.display())))?;
        }
        let mut env = vec![
            ("HOME".to_string(), home.to_string_lossy().into_owned()),
            ("TMPDIR".to_string(), tmp.to_string_lossy().into_owned()),
            ("TMP".to_string(), tmp.to_string_lossy().into_owned()),
            ("TEMP".to_string(), tmp.to_string_lossy().into_owned()),
        ];
        let mut fs = FsRules::default();
        let mut writable_paths: Vec<PathBuf> = vec![home.clone()];
        if let Some(dir) = workdir {
            writable_paths.push(dir.to_path_buf());
        }
        writable_paths.extend(self.spec.grants.read_write.iter().map(|p| absolute(p)));
        let mut view_dirs = Vec::new();
        let mut seen = BTreeSet::new();
        for path in &writable_paths {
            if !seen.insert(path.clone()) {
                continue;
            }
            let fd = paths::open_dir(path).map_err(io_err(format!("the writable directory {}", path.display())))?;
            if let Some(user) = self.spec.user {
                give_to(&fd, user).map_err(io_err(format!("{} to its user", path.display())))?;
            }
            if self.namespaces {
                let clone = fd.try_clone().map_err(io_err(path.display().to_string()))?;
                view_dirs.push(Writable::new(clone, path).map_err(io_err(path.display().to_string()))?);
            }
            fs.read_write.push(fd);
        }
        for path in self.spec.grants.read_only.iter().chain(&self.install_roots) {
            fs.add_path(path, false)?;
        }
        let start = workdir.unwrap_or(home);
        let start_fd = paths::open_dir(start).map_err(io_err(format!("its start directory {}", start.display())))?;
        let net_rule = match &proxy {
            Some(p) => {
                env.extend(p.env("process"));
                NetRule::ConnectOnly(p.port())
            }
            None => NetRule::DenyAll,
        };
        let ruleset = ruleset::build_ruleset(&fs, net_rule)?;
        let mut plan = ChildPlan {
            netns,
            identity: Some(self.identity),
            seccomp: Some(self.seccomp.clone()),
            ..Default::default()
        };
        let (reaper, status) = ReaperPlan::new().map_err(io_err("its supervisor"))?;
        plan.reaper = Some(reaper);
        if self.namespaces {
            plan.pid_namespace = true;
            plan.fresh_proc_rule = ruleset::ruleset_fd(&ruleset).map_err(io_err("its ruleset"))?;
            plan.view = Some(
                ReadOnlyView::at_paths(view_dirs, &start_fd, start)
                    .map_err(io_err("the read-only view"))?
                    .with_fresh_proc(true),
            );
        } else if self.spec.user.is_some() {
            plan.pid_namespace = true;
            plan.fresh_proc_rule = ruleset::ruleset_fd(&ruleset).map_err(io_err("its ruleset"))?;
            plan.proc_view = Some(ProcView);
        }
        plan.workdir = Some(start_fd);
        plan.ruleset = Some(ruleset);
        let cgroup = match tree::cgroup_parent() {
            Ok(parent) => {
                let (cgroup, procs) = Cgroup::create(&parent, self.spec.grants.limits).map_err(io_err("its cgroup"))?;
                plan.cgroup_procs = procs;
                Some(cgroup)
            }
            Err(e) => {
                tracing::debug!("{}: no cgroup ({e}); the supervisor holds the tree", self.spec.label);
                None
            }
        };
        Ok(Prepared { env, plan, tree: TreeSetup { cgroup, status: Some(status) }, proxy })
    }

    /// Prove the confinement engages for this program, once: a shell prepared exactly as a
    /// launch is must report no capabilities, `no_new_privs` and a seccomp filter, be refused a
    /// file outside its grants, and see no process of the host in `/proc`.
    pub async fn self_test(&self) -> Result<Vec<String>, ConfineError> {
        if let Some(done) = self.self_test.get() {
            return done.clone().map_err(ConfineError::SelfTest);
        }
        let prepared = self.prepare(None).await?;
        let result = tokio::task::spawn_blocking(move || probe(prepared))
            .await
            .unwrap_or_else(|e| Err(format!("the probe panicked: {e}")));
        let _ = self.self_test.set(result.clone());
        result.map_err(ConfineError::SelfTest)
    }

    /// What a launch gets, line by line, for `toolhost tools --explain` and `check`.
    pub fn explain(&self) -> Vec<String> {
        let g = &self.spec.grants;
        let mut lines = vec![match self.spec.user {
            Some(u) => format!("identity: {u}, no capabilities, no_new_privs"),
            None => "identity: uid 0 with every capability dropped (SECBIT_NOROOT), no_new_privs".to_string(),
        }];
        let list = |paths: &[PathBuf]| {
            if paths.is_empty() {
                "-".to_string()
            } else {
                paths.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")
            }
        };
        lines.push(format!(
            "files: system read-only (/usr, /bin, /lib*, /opt, /etc as an unprivileged user sees it); install \
             directories read-only: {}; home (read-write): {}",
            list(&self.install_roots),
            self.spec.home.display()
        ));
        lines.push(format!("files granted: read-only {}; read-write {}", list(&g.read_only), list(&g.read_write)));
        lines.push(match &g.network {
            Network::None => "network: none (no internet sockets)".to_string(),
            Network::Proxy(grant) => format!(
                "network: HTTPS through toolhost's proxy to {}; private, loopback, link-local and metadata addresses \
                 refused{}",
                grant.describe(),
                if grant.allow_private() { " unless allowed (allow_private_addresses)" } else { "" }
            ),
        });
        let limit = |v: Option<u64>| v.map_or("unlimited".to_string(), |v| v.to_string());
        let mechanism = match tree::cgroup_parent() {
            Ok(p) => format!("pids: {:?}, memory: {:?}", p.pids, p.memory),
            Err(e) => format!("no cgroup ({e}); supervisor only"),
        };
        lines.push(format!(
            "limits: {} processes, {} bytes of memory, files up to {} bytes ({mechanism})",
            limit(g.limits.max_processes),
            limit(g.limits.memory_bytes),
            limit(g.max_file_bytes)
        ));
        lines.push(if self.namespaces {
            "processes: private pid namespace and /proc, host read-only outside its writable directories; the tree \
             dies with toolhost"
                .to_string()
        } else {
            "processes: a supervisor ends the tree when toolhost dies; other processes stay visible in /proc (no \
             CAP_SYS_ADMIN for a pid namespace)"
                .to_string()
        });
        lines.extend(seccomp::describe(&policy(&g.network, &self.identity, self.namespaces)));
        lines
    }
}

fn policy(network: &Network, identity: &Identity, namespaces: bool) -> SeccompPolicy {
    SeccompPolicy {
        sockets: match network {
            Network::None => SocketPolicy::None,
            Network::Proxy(_) => SocketPolicy::TcpClient,
        },
        unix: ruleset::abi() >= ruleset::RESOLVE_UNIX_ABI,
        // With the read-only view, chmod outside the writable directories fails with EROFS;
        // without it, a process of toolhost's own uid (root or not) owns files Landlock cannot
        // keep it from chmod-ing.
        owner_denied: identity.is_own_uid() && !namespaces,
    }
}

/// One launch, ready to be installed on its command.
pub struct Prepared {
    env: Vec<(String, String)>,
    plan: ChildPlan,
    tree: TreeSetup,
    proxy: Option<Arc<Proxy>>,
}

impl Prepared {
    /// Variables the launch needs (its home and tmp, the proxy): set them after the caller's own.
    pub fn env(&self) -> &[(String, String)] {
        &self.env
    }

    /// Set the environment and register the confinement as `cmd`'s `pre_exec` hook. Keep the
    /// returned guard as long as the process: dropping it kills the whole tree.
    pub fn install(self, cmd: &mut std::process::Command) -> TreeGuard {
        cmd.envs(self.env.iter().map(|(k, v)| (k, v)));
        self.plan.install(cmd);
        TreeGuard { cgroup: self.tree.cgroup, _status: self.tree.status, _proxy: self.proxy }
    }
}

/// Holds a launched tree: dropping it kills everything in it.
pub struct TreeGuard {
    cgroup: Option<Cgroup>,
    _status: Option<crate::reaper::StatusPipe>,
    _proxy: Option<Arc<Proxy>>,
}

impl TreeGuard {
    /// Whether the tree ever hit its process cap.
    pub fn hit_process_cap(&self) -> bool {
        self.cgroup.as_ref().is_some_and(Cgroup::hit_process_cap)
    }
}

impl Drop for TreeGuard {
    fn drop(&mut self) {
        if let Some(cgroup) = self.cgroup.take() {
            cgroup.signal_kill();
            // Removed once empty, off whatever thread dropped the guard.
            std::thread::spawn(move || {
                cgroup.kill();
                cgroup.remove();
            });
        }
    }
}

/// Directories a command needs to read to run: the prefix of its executable (`/x/venv` for
/// `/x/venv/bin/python`, also after following links, so a venv's base interpreter comes too),
/// the outermost `node_modules` above a script and the directory holding it, the interpreter
/// of a `#!` line, and the directory of each argument that names an existing file (`python
/// server.py`). System prefixes (`/usr`, `/`) are left out: the system is read-only already.
pub fn install_roots(command: &str, args: &[String], path_env: Option<&str>) -> Vec<PathBuf> {
    let mut roots = BTreeSet::new();
    let resolved = resolve_command(command, path_env);
    if let Some(exe) = &resolved {
        add_roots_of(exe, &mut roots);
        if let Some(interp) = shebang_interpreter(exe, path_env) {
            add_roots_of(&interp, &mut roots);
        }
    }
    for arg in args {
        let path = Path::new(arg);
        if (path.is_absolute() || arg.starts_with("./") || arg.starts_with("../")) && path.is_file() {
            add_roots_of(path, &mut roots);
            if let Some(dir) = path.parent() {
                roots.insert(dir.to_path_buf());
            }
        }
    }
    let roots: Vec<PathBuf> = roots.into_iter().filter(|r| !is_system(r)).collect();
    // A directory inside another granted one adds nothing.
    roots.iter().filter(|r| !roots.iter().any(|o| o != *r && r.starts_with(o))).cloned().collect()
}

fn is_system(path: &Path) -> bool {
    const SYSTEM: [&str; 11] =
        ["/", "/usr", "/usr/local", "/bin", "/sbin", "/lib", "/lib64", "/opt", "/etc", "/proc", "/usr/lib"];
    SYSTEM.iter().any(|s| path == Path::new(s))
}

fn add_roots_of(path: &Path, roots: &mut BTreeSet<PathBuf>) {
    let mut candidates = vec![path.to_path_buf()];
    if let Ok(real) = std::fs::canonicalize(path) {
        candidates.push(real);
    }
    for file in candidates {
        if let Some(root) = prefix_of(&file) {
            roots.insert(root);
        }
        // The outermost node_modules (packages require their siblings) and the project above it.
        let modules = file.ancestors().filter(|a| a.file_name().is_some_and(|n| n == "node_modules")).last();
        if let Some(modules) = modules {
            if let Some(project) = modules.parent() {
                roots.insert(project.to_path_buf());
            }
        }
    }
}

/// `/p` for `/p/bin/x` (or `sbin`, pyenv's `shims`); the directory of the file otherwise.
fn prefix_of(file: &Path) -> Option<PathBuf> {
    let dir = file.parent()?;
    match dir.file_name().and_then(|n| n.to_str()) {
        Some("bin" | "sbin" | "shims") => dir.parent().map(Path::to_path_buf),
        _ => Some(dir.to_path_buf()),
    }
}

fn resolve_command(command: &str, path_env: Option<&str>) -> Option<PathBuf> {
    if command.contains('/') {
        let p = PathBuf::from(command);
        return p.is_file().then_some(p);
    }
    path_env?.split(':').filter(|d| !d.is_empty()).map(|d| Path::new(d).join(command)).find(|p| p.is_file())
}

/// The interpreter of a `#!` script: `/usr/bin/env node` → `node` on `PATH`.
fn shebang_interpreter(exe: &Path, path_env: Option<&str>) -> Option<PathBuf> {
    use std::io::Read;
    let mut head = [0u8; 256];
    let n = std::fs::File::open(exe).ok()?.read(&mut head).ok()?;
    let line = head[..n].strip_prefix(b"#!")?;
    let line = std::str::from_utf8(line.split(|b| *b == b'\n').next()?).ok()?;
    let mut words = line.split_whitespace();
    let first = words.next()?;
    if first.ends_with("/env") {
        let name = words.find(|w| !w.starts_with('-'))?;
        resolve_command(name, path_env)
    } else {
        Some(PathBuf::from(first))
    }
}

fn make_private_dir(dir: &Path, user: Option<BashUser>) -> io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    match std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e),
    }
    if let Some(user) = user {
        let fd = paths::open_dir(dir)?;
        give_to(&fd, user)?;
    }
    Ok(())
}

/// Hand a directory to `user` (it must write there; everything above stays root's).
pub fn give_to(fd: &OwnedFd, user: BashUser) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    if ruleset::owned_by(fd, user.uid)? {
        return Ok(());
    }
    // SAFETY: fchown on an open directory.
    if unsafe { libc::fchown(fd.as_raw_fd(), user.uid, user.gid) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The self-test's checks that need no program: run in the confined process itself, after every
/// step of the confinement and before the exec, they print what the process could do (a file
/// outside its grants read, its home written, how many processes `/proc` shows). The exec that
/// follows (`cat /proc/self/status`) reports what only an exec'd program can: the capabilities,
/// `no_new_privs` and the seccomp mode it runs with. One small exec instead of a shell and four
/// programs: the self-test is on a server's first start, so it is part of what a user waits for.
struct ProbeChecks {
    outside: std::ffi::CString,
    inside: std::ffi::CString,
}

impl ProbeChecks {
    /// The `pre_exec` step after the confinement's: syscalls on stack buffers only.
    fn run_in_child(&self) -> io::Result<()> {
        // SAFETY: open/close of a NUL-terminated path prepared in the parent.
        unsafe {
            let fd = libc::open(self.outside.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC);
            if fd >= 0 {
                say(b"READ outside: allowed\n");
                libc::close(fd);
            }
            let fd = libc::open(
                self.inside.as_ptr(),
                libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC | libc::O_CLOEXEC | libc::O_NOFOLLOW,
                0o600,
            );
            if fd >= 0 {
                say(b"WRITE home: allowed\n");
                libc::close(fd);
            }
        }
        match count_processes() {
            Some(n) => {
                say(b"PIDS: ");
                let mut digits = [0u8; 20];
                let mut i = digits.len();
                let mut n = n;
                loop {
                    i -= 1;
                    digits[i] = b'0' + (n % 10) as u8;
                    n /= 10;
                    if n == 0 {
                        break;
                    }
                }
                say(&digits[i..]);
                say(b"\n");
            }
            None => say(b"PIDS: unreadable\n"),
        }
        Ok(())
    }
}

/// Write to the probe's stdout (syscalls only).
fn say(bytes: &[u8]) {
    // SAFETY: writes a borrowed buffer to descriptor 1.
    unsafe { libc::write(1, bytes.as_ptr().cast(), bytes.len()) };
}

/// The numeric entries of `/proc` as this process sees it (syscalls on a stack buffer).
fn count_processes() -> Option<usize> {
    // SAFETY: a static NUL-terminated path; the descriptor is closed below.
    let fd = unsafe { libc::open(c"/proc".as_ptr(), libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC) };
    if fd < 0 {
        return None;
    }
    let mut buf = [0u8; 4096];
    let mut count = 0;
    let result = loop {
        // SAFETY: getdents64 into a stack buffer of the given length.
        let n = unsafe { libc::syscall(libc::SYS_getdents64, fd, buf.as_mut_ptr(), buf.len()) };
        if n < 0 {
            break None;
        }
        if n == 0 {
            break Some(count);
        }
        // linux_dirent64: d_ino (8), d_off (8), d_reclen (2), d_type (1), d_name (NUL-ended).
        let mut at = 0usize;
        while at + 19 < n as usize {
            let reclen = u16::from_ne_bytes([buf[at + 16], buf[at + 17]]) as usize;
            if reclen == 0 {
                break;
            }
            let name = &buf[at + 19..(at + reclen).min(n as usize)];
            let name = &name[..name.iter().position(|b| *b == 0).unwrap_or(name.len())];
            if !name.is_empty() && name.iter().all(u8::is_ascii_digit) {
                count += 1;
            }
            at += reclen;
        }
    };
    // SAFETY: closing the descriptor opened above.
    unsafe { libc::close(fd) };
    result
}

fn probe(prepared: Prepared) -> Result<Vec<String>, String> {
    use std::os::unix::ffi::OsStrExt;
    let scratch = std::env::temp_dir().join(format!("toolhost-confine-probe-{}", std::process::id()));
    let _ = std::fs::create_dir_all(&scratch);
    let outside = scratch.join("sentinel");
    std::fs::write(&outside, "probe").map_err(|e| format!("cannot write {}: {e}", outside.display()))?;
    let home = prepared
        .env
        .iter()
        .find(|(k, _)| k == "HOME")
        .map(|(_, v)| PathBuf::from(v))
        .ok_or("the launch has no home")?;
    let cstr = |p: &Path| std::ffi::CString::new(p.as_os_str().as_bytes()).map_err(|_| "a path with a NUL byte");
    let checks = ProbeChecks { outside: cstr(&outside)?, inside: cstr(&home.join("probe-inside"))? };
    let namespaces = prepared.plan.pid_namespace;
    let mut cmd = std::process::Command::new("/bin/cat");
    cmd.arg("/proc/self/status")
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    let guard = prepared.install(&mut cmd);
    // SAFETY: runs in the forked child after the confinement's own step; syscalls only.
    unsafe { std::os::unix::process::CommandExt::pre_exec(&mut cmd, move || checks.run_in_child()) };
    let output = cmd.output().map_err(|e| format!("the probe could not start: {e}"));
    drop(guard);
    let _ = std::fs::remove_dir_all(&scratch);
    let _ = std::fs::remove_file(home.join("probe-inside"));
    let output = output?;
    verdict(&String::from_utf8_lossy(&output.stdout), &String::from_utf8_lossy(&output.stderr), namespaces)
}

/// Judge what the probe printed: `Ok` lists what was proven.
fn verdict(text: &str, stderr: &str, namespaces: bool) -> Result<Vec<String>, String> {
    let mut proven = Vec::new();
    let caps = CapSets::parse(text).ok_or_else(|| format!("the probe did not report: {}", stderr.trim()))?;
    if caps.effective | caps.permitted | caps.inheritable | caps.ambient != 0 {
        return Err(format!("capabilities were not dropped: {caps:?}"));
    }
    if !text.lines().any(|l| l.starts_with("NoNewPrivs:") && l.trim_end().ends_with('1')) {
        return Err("no_new_privs is not set".into());
    }
    if !text.lines().any(|l| l.starts_with("Seccomp:") && l.trim_end().ends_with('2')) {
        return Err("no seccomp filter is installed".into());
    }
    proven.push("capabilities 0, no_new_privs, seccomp".to_string());
    if text.contains("READ outside: allowed") {
        return Err("Landlock did not engage: the probe read a file outside its grants".into());
    }
    if !text.contains("WRITE home: allowed") {
        return Err("the probe could not write in its own home".into());
    }
    proven.push("Landlock refused a file outside its grants; its home is writable".to_string());
    if namespaces {
        let pids: usize = text
            .lines()
            .find_map(|l| l.strip_prefix("PIDS: "))
            .and_then(|n| n.trim().parse().ok())
            .unwrap_or(usize::MAX);
        if pids > 8 {
            return Err(format!("the process sees {pids} processes in /proc, not only its own tree"));
        }
        proven.push(format!("/proc shows only its own tree ({pids} processes)"));
    }
    Ok(proven)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn install_roots_cover_venvs_node_modules_and_scripts() {
        let dir = tempfile::tempdir().unwrap();
        let venv = dir.path().join("venv");
        std::fs::create_dir_all(venv.join("bin")).unwrap();
        std::fs::write(venv.join("bin/server"), "#!/bin/sh\n").unwrap();
        let pkg = dir.path().join("proj/node_modules/@x/srv/dist");
        std::fs::create_dir_all(&pkg).unwrap();
        std::fs::write(pkg.join("index.js"), "#!/usr/bin/env node\n").unwrap();
        std::fs::create_dir_all(dir.path().join("proj/node_modules/.bin")).unwrap();
        std::os::unix::fs::symlink(pkg.join("index.js"), dir.path().join("proj/node_modules/.bin/srv")).unwrap();
        let script = dir.path().join("scripts/s.py");
        std::fs::create_dir_all(script.parent().unwrap()).unwrap();
        std::fs::write(&script, "print(1)\n").unwrap();

        let roots = install_roots(venv.join("bin/server").to_str().unwrap(), &[], None);
        assert!(roots.contains(&venv), "{roots:?}");
        let path = format!("{}", dir.path().join("proj/node_modules/.bin").display());
        let roots = install_roots("srv", &[], Some(&path));
        let real_proj = std::fs::canonicalize(dir.path().join("proj")).unwrap();
        assert!(roots.contains(&real_proj), "{roots:?}");
        let roots = install_roots("/bin/sh", &[script.to_string_lossy().into_owned(), "--flag".into()], None);
        assert!(roots.contains(&script.parent().unwrap().to_path_buf()), "{roots:?}");
        // The system is read-only anyway; a directory argument is never granted by itself.
        let roots = install_roots("/bin/sh", &[dir.path().to_string_lossy().into_owned()], None);
        assert!(roots.is_empty(), "{roots:?}");
    }

    const CLEAN: &str = "READ outside: no\nWRITE home: allowed\nPIDS: 2\nName:\tcat\nNoNewPrivs:\t1\nSeccomp:\t2\n\
                         CapInh:\t0000000000000000\nCapPrm:\t0000000000000000\nCapEff:\t0000000000000000\n\
                         CapBnd:\t0000000000000000\nCapAmb:\t0000000000000000\n";

    #[test]
    fn the_verdict_refuses_every_sign_that_the_confinement_did_not_engage() {
        assert_eq!(verdict(CLEAN, "", true).unwrap().len(), 3);
        let bad = [
            (CLEAN.replace("CapEff:\t0000000000000000", "CapEff:\t000001ffffffffff"), "capabilities were not dropped"),
            (CLEAN.replace("NoNewPrivs:\t1", "NoNewPrivs:\t0"), "no_new_privs"),
            (CLEAN.replace("Seccomp:\t2", "Seccomp:\t0"), "seccomp"),
            (CLEAN.replace("READ outside: no", "READ outside: allowed"), "Landlock did not engage"),
            (CLEAN.replace("WRITE home: allowed", ""), "its own home"),
            (CLEAN.replace("PIDS: 2", "PIDS: 140"), "140 processes"),
            (CLEAN.replace("PIDS: 2", "PIDS: unreadable"), "processes in /proc"),
            (String::new(), "did not report"),
        ];
        for (text, why) in bad {
            let err = verdict(&text, "", true).unwrap_err();
            assert!(err.contains(why), "{why}: {err}");
        }
        // Without namespaces /proc is the host's: the count is not judged.
        assert_eq!(verdict(&CLEAN.replace("PIDS: 2", "PIDS: 140"), "", false).unwrap().len(), 2);
    }

    /// A confiner for one of the tests below (no network), with the tempdir its home is in;
    /// `None` (the test skips) where Landlock is unavailable, which fails in CI.
    fn confiner_without_network(name: &str, command: &str, args: Vec<String>) -> Option<(Confiner, tempfile::TempDir)> {
        if let ConfinementStatus::Unavailable { reason } = ruleset::confinement_status() {
            if std::env::var_os("CI").is_some() {
                panic!("Landlock is unavailable in CI: {reason}");
            }
            eprintln!("skipped: Landlock is unavailable here ({reason})");
            return None;
        }
        let dir = tempfile::tempdir().unwrap();
        let confiner = Confiner::new(ProcessSpec {
            label: name.into(),
            setting: format!("toolhost.mcp_servers.{name}"),
            command: command.into(),
            args,
            path_env: None,
            env: Vec::new(),
            home: dir.path().join("home"),
            grants: Grants { network: Network::None, ..Grants::default() },
            user: None,
        })
        .unwrap();
        Some((confiner, dir))
    }

    #[test]
    fn the_self_test_proves_the_confinement_with_one_small_exec() {
        let Some((confiner, dir)) = confiner_without_network("probe", "/bin/cat", Vec::new()) else { return };
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let started = std::time::Instant::now();
        let proven = rt.block_on(confiner.self_test()).unwrap();
        let took = started.elapsed();
        assert!(proven.iter().any(|p| p.contains("capabilities 0")), "{proven:?}");
        assert!(proven.iter().any(|p| p.contains("Landlock refused")), "{proven:?}");
        if confiner.namespaces {
            assert!(proven.iter().any(|p| p.contains("/proc shows only its own tree (2 processes)")), "{proven:?}");
        }
        // The probe's file is gone from the home the server will get.
        assert!(!dir.path().join("home/probe-inside").exists());
        // Once per confiner: the second answer is the first's.
        assert_eq!(rt.block_on(confiner.self_test()).unwrap(), proven);
        eprintln!("self-test: {took:?}");
    }

    /// Resident memory of a process, in KiB.
    fn rss_kib(pid: u32) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or(0)
    }

    #[test]
    fn a_supervisor_does_not_keep_toolhost_memory() {
        let Some((confiner, _home)) = confiner_without_network("sleeper", "/bin/sleep", vec!["30".into()]) else {
            return;
        };
        // 128 MiB of toolhost's heap, written before and after the fork.
        let mut heap = vec![1u8; 128 << 20];
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let prepared = rt.block_on(confiner.prepare(None)).unwrap();
        let mut cmd = std::process::Command::new("/bin/sleep");
        cmd.arg("30");
        let guard = prepared.install(&mut cmd);
        let mut child = cmd.spawn().unwrap();
        let supervisor = child.id();
        // The supervisors are up once the command runs: wait for `sleep` to appear under them.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let tree = loop {
            let mut tree = vec![supervisor];
            let mut i = 0;
            while i < tree.len() {
                let kids = std::fs::read_to_string(format!("/proc/{0}/task/{0}/children", tree[i])).unwrap_or_default();
                tree.extend(kids.split_whitespace().filter_map(|k| k.parse::<u32>().ok()));
                i += 1;
            }
            let cmdline = |p: &u32| std::fs::read(format!("/proc/{p}/cmdline")).unwrap_or_default();
            if tree.iter().any(|p| cmdline(p).starts_with(b"/bin/sleep")) {
                break tree;
            }
            assert!(std::time::Instant::now() < deadline, "the command did not start: {tree:?}");
            std::thread::sleep(std::time::Duration::from_millis(20));
        };
        for b in heap.iter_mut().step_by(4096) {
            *b = 2;
        }
        std::hint::black_box(&heap);
        assert!(rss_kib(std::process::id()) > 128 << 10);
        for pid in &tree {
            let rss = rss_kib(*pid);
            assert!(rss < 32 << 10, "process {pid} of the tree holds {rss} KiB of toolhost's 128 MiB");
        }
        drop(guard);
        let _ = child.kill();
        let _ = child.wait();
    }

    #[test]
    fn a_command_that_exits_at_once_is_always_seen_to_exit() {
        let Some((confiner, _home)) = confiner_without_network("true", "/bin/true", Vec::new()) else { return };
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        // The command often exits before its supervisor is ready to hear of it: the supervisor
        // must still see it (a lost SIGCHLD left the supervisor, and the caller, waiting for
        // ever).
        for round in 0..200 {
            let prepared = rt.block_on(confiner.prepare(None)).unwrap();
            let (tx, rx) = std::sync::mpsc::channel();
            std::thread::spawn(move || {
                let mut cmd = std::process::Command::new("/bin/true");
                let guard = prepared.install(&mut cmd);
                let status = cmd.status();
                drop(guard);
                let _ = tx.send(status.map(|s| s.success()));
            });
            let done = rx.recv_timeout(std::time::Duration::from_secs(10));
            assert!(matches!(done, Ok(Ok(true))), "round {round}: {done:?}");
        }
    }
}
