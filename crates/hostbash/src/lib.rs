//! The native host `bash` tool: DeerFlow's local-provider `bash_tool` (same schema, strings and
//! output), with each command confined the way the best agent CLIs confine a shell — Landlock
//! per thread directory, no capabilities (or an unprivileged user), a seccomp filter, no network
//! or an HTTPS allow-list through a proxy, an allow-listed environment, and a cgroup that ends
//! the whole process tree at the timeout. A start-up self-test proves the confinement engages
//! before the tool is offered. The audit is not applied here: the host's pipeline wraps every `bash`
//! call in DeerFlow's `SandboxAuditMiddleware` (`host/src/middleware/sandbox_audit.rs`).

pub mod config;
mod dirs;
mod explain;
mod probe;
mod rewrite;
mod run;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{json, Value};
use toolhost_audit::{mcp_allowed_paths, truncate_middle, validate_local_bash_command_paths, BashPathPolicy};
use toolhost_core::{CallContext, Tool, ToolOutcome, ToolSource, ToolSpec, VIRTUAL_ACP, VIRTUAL_SKILLS};
use toolhost_net::NetGrant;

pub use rewrite::Mapping;
pub use run::CAPTURE_LIMIT_BYTES;
pub use toolhost_confine::{confinement_status, harden_process, BashUser, ConfinementStatus};
pub use toolhost_core::Environment;

use dirs::{thread_dir, ThreadDir};
use toolhost_confine::child::{ChildPlan, TreeSetup};
use toolhost_confine::mountns;
use toolhost_confine::privs::{self, Identity};
use toolhost_confine::process::give_to;
use toolhost_confine::proxy::{self, Endpoint, GrantNames};
use toolhost_confine::reaper;
use toolhost_confine::ruleset::{self as confine, FsRules, NetRule};
use toolhost_confine::seccomp::{Filter, SeccompPolicy, SocketPolicy};
use toolhost_confine::tree::{self, TreeLimits};

/// DeerFlow's `LOCAL_HOST_BASH_DISABLED_MESSAGE`.
pub const LOCAL_HOST_BASH_DISABLED_MESSAGE: &str = "Host bash execution is disabled for LocalSandboxProvider because it is not a secure sandbox boundary. Switch to AioSandboxProvider for isolated bash access, or set sandbox.allow_host_bash: true only in a fully trusted local environment.";

/// The tool description the model sees (langchain's `parse_docstring` of `bash_tool`).
pub const BASH_DESCRIPTION: &str = "Execute a bash command in a Linux environment. \n- Use `python` to run Python code.\n- Prefer a thread-local virtual environment in `/mnt/user-data/workspace/.venv`.\n- Use `python -m pip` (inside the virtual environment) to install Python packages.\n- To start a long-lived process such as a web server, ALWAYS run it in the background with its\n  output redirected, e.g. `your-command > /mnt/user-data/workspace/server.log 2>&1 &`, then check\n  the log file or poll the port. A long-lived process run in the foreground blocks the turn until\n  it is killed at the command timeout.";

const DESCRIPTION_ARG: &str =
    "Explain why you are running this command in short words. ALWAYS PROVIDE THIS PARAMETER FIRST.";
const COMMAND_ARG: &str = "The bash command to execute. Always use absolute paths for files and directories.";

/// Host environment variables every command gets (plus `BashConfig::env`); `LC_*` by prefix.
/// `HOME` and `TMPDIR` point into the thread when the command is confined.
pub const ENV_ALLOW: [&str; 7] = ["PATH", "LANG", "LC_*", "TERM", "TZ", "HOME", "TMPDIR"];

/// A `sandbox.mounts` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostMount {
    pub host_path: PathBuf,
    pub container_path: String,
    pub read_only: bool,
}

/// Whether host-bash commands are confined (`sandbox.bash_confinement`: `full` or `off`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ConfineMode {
    /// Every command is confined, after a start-up self-test proved the confinement engages;
    /// when it cannot engage, the tool is left out (never run unconfined).
    #[default]
    Full,
    /// Run unconfined, as DeerFlow does (`sandbox.bash_confinement: off`, with a warning).
    Off,
}

/// Outbound network of a confined command (`sandbox.bash_network`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum BashNetwork {
    /// No sockets of the internet families at all.
    #[default]
    None,
    /// HTTPS through the host's proxy to the hosts this grant allows (the rules of a
    /// component's `capabilities.network`).
    Allowlist(Arc<NetGrant>),
}

/// How a command's process tree is tracked (a cgroup where the host can create one).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TreeMode {
    /// A cgroup v2 per command when the hierarchy is writable, else a subreaper.
    #[default]
    Auto,
    /// The subreaper even where cgroups work (tests the fallback).
    Subreaper,
}

/// Configuration of the host `bash` tool (DeerFlow's `sandbox:` section plus toolhost's
/// confinement).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BashConfig {
    /// `is_host_bash_allowed`: `sandbox.allow_host_bash` for the local provider.
    pub allow_host_bash: bool,
    /// `sandbox.bash_command_timeout` in seconds (default 600).
    pub command_timeout_secs: u64,
    /// `sandbox.bash_output_max_chars` (default 20 000; 0 disables truncation).
    pub output_max_chars: usize,
    /// The skills directory on the host, if it exists.
    pub skills_host_path: Option<PathBuf>,
    /// `skills.container_path` (default `/mnt/skills`).
    pub skills_container_path: String,
    /// `sandbox.mounts`; entries whose host path is missing are ignored, as DeerFlow does.
    pub mounts: Vec<HostMount>,
    /// The `args` of each enabled MCP server (filesystem servers' roots become allowed paths).
    pub mcp_server_args: Vec<Vec<String>>,
    /// `sandbox.bash_confinement`.
    pub confine: ConfineMode,
    /// Further host directories a confined command may read (e.g. a toolchain under $HOME).
    pub extra_read_paths: Vec<PathBuf>,
    /// The shell (`sandbox.bash_shell`, default `/bin/bash`).
    pub shell: PathBuf,
    /// `sandbox.bash_user`: run commands as this user instead of uid 0 without capabilities.
    pub user: Option<BashUser>,
    /// `sandbox.bash_env`: host environment names passed through besides [`ENV_ALLOW`].
    pub env: Vec<String>,
    /// The host environment those names are taken from (the host's [`Environment`]; default
    /// empty). The tool reads no process environment.
    pub host_env: Environment,
    /// `sandbox.bash_network`.
    pub network: BashNetwork,
    /// `sandbox.bash_max_file_size_mb` in bytes (RLIMIT_FSIZE); `None`: unlimited.
    pub max_file_bytes: Option<u64>,
    /// Process-tree tracking (a test hook for the subreaper fallback).
    pub tree: TreeMode,
    /// `sandbox.bash_max_processes`: processes one command's tree may run at once.
    pub max_processes: Option<u64>,
    /// `sandbox.bash_memory_mb` in bytes: memory of one command's tree.
    pub memory_bytes: Option<u64>,
}

/// Processes one command's tree may run at once, by default (a fork bomb stops here).
pub const DEFAULT_MAX_PROCESSES: u64 = 1024;
/// Memory of one command's tree, by default: 4 GiB.
pub const DEFAULT_MEMORY_BYTES: u64 = 4 << 30;

/// Files a command may write, by default: 1 GiB (a sparse 4 GiB file is refused).
pub const DEFAULT_MAX_FILE_BYTES: u64 = 1 << 30;

impl Default for BashConfig {
    fn default() -> Self {
        Self {
            allow_host_bash: false,
            command_timeout_secs: 600,
            output_max_chars: 20_000,
            skills_host_path: None,
            skills_container_path: VIRTUAL_SKILLS.to_string(),
            mounts: Vec::new(),
            mcp_server_args: Vec::new(),
            confine: ConfineMode::Full,
            extra_read_paths: Vec::new(),
            shell: PathBuf::from("/bin/bash"),
            user: None,
            env: Vec::new(),
            host_env: Environment::default(),
            network: BashNetwork::None,
            max_file_bytes: Some(DEFAULT_MAX_FILE_BYTES),
            tree: TreeMode::Auto,
            max_processes: Some(DEFAULT_MAX_PROCESSES),
            memory_bytes: Some(DEFAULT_MEMORY_BYTES),
        }
    }
}

/// DeerFlow's `bash` tool schema as its model sees it (LangChain's `convert_to_openai_function`:
/// no titles, no top-level description): `description` first, both required.
pub fn bash_spec() -> ToolSpec {
    ToolSpec {
        name: "bash".into(),
        description: BASH_DESCRIPTION.into(),
        parameters: json!({
            "properties": {
                "description": {"description": DESCRIPTION_ARG, "type": "string"},
                "command": {"description": COMMAND_ARG, "type": "string"},
            },
            "required": ["description", "command"],
            "type": "object",
        }),
        group: Some("bash".into()),
        source: ToolSource::HostBash,
    }
}

/// How a command reaches the network: nowhere, or the proxy (its port, the namespace it lives
/// in, and the variables that point clients at it).
pub(crate) enum NetSetup {
    None,
    Proxy { port: u16, netns: Option<std::os::fd::OwnedFd>, env: Vec<(String, String)> },
}

/// Everything one command needs, prepared in the parent.
pub(crate) struct Prepared {
    pub env: HashMap<String, String>,
    pub plan: ChildPlan,
    pub tree: TreeSetup,
}

/// The native host `bash` tool.
pub struct BashTool {
    spec: ToolSpec,
    config: BashConfig,
    policy: BashPathPolicy,
    static_mappings: Vec<Mapping>,
    pattern: regex::Regex,
    identity: Identity,
    /// uid-0 commands see the host read-only but for their writable directories.
    mount_view: bool,
    seccomp: Result<Arc<Filter>, String>,
    /// The proxy's listening socket (allow-list mode), bound at the self-test.
    endpoint: OnceLock<Result<Arc<proxy::Endpoint>, String>>,
    proxy: tokio::sync::OnceCell<Arc<proxy::Proxy>>,
    self_test: OnceLock<Result<Vec<String>, String>>,
    lingering: tree::Lingering,
    calls: AtomicU64,
}

impl BashTool {
    pub fn new(config: BashConfig) -> Self {
        let mounts: Vec<&HostMount> = config.mounts.iter().filter(|m| m.host_path.exists()).collect();
        let policy = BashPathPolicy {
            skills_container_path: config.skills_container_path.clone(),
            acp_virtual_path: VIRTUAL_ACP.into(),
            mount_container_paths: mounts.iter().map(|m| m.container_path.clone()).collect(),
            mcp_allowed_paths: config.mcp_server_args.iter().flat_map(|a| mcp_allowed_paths(a)).collect(),
        };
        let mut static_mappings: Vec<Mapping> = mounts
            .iter()
            .map(|m| Mapping {
                virtual_prefix: m.container_path.trim_end_matches('/').to_string(),
                host: m.host_path.clone(),
            })
            .collect();
        if let Some(host) = &config.skills_host_path {
            static_mappings.push(Mapping { virtual_prefix: config.skills_container_path.clone(), host: host.clone() });
        }
        let mut prefixes: Vec<String> = static_mappings.iter().map(|m| m.virtual_prefix.clone()).collect();
        prefixes.extend([toolhost_core::VIRTUAL_USER_DATA.to_string(), VIRTUAL_ACP.to_string()]);
        let pattern = rewrite::command_pattern(&prefixes);
        let nproc_fallback = match tree::cgroup_parent() {
            Ok(tree::CgroupParent { pids: tree::LimitMechanism::Rlimit, .. }) | Err(_) => config.max_processes,
            Ok(_) => None,
        };
        let identity = Identity::new(config.user, config.max_file_bytes).with_max_processes(nproc_fallback);
        let mount_view = config.confine == ConfineMode::Full
            && identity.is_uid0()
            && privs::CapSets::current().is_some_and(|c| c.has(CAP_SYS_ADMIN))
            && mountns::supported();
        let seccomp = Filter::new(&seccomp_policy(&config, &identity, mount_view)).map(Arc::new);
        Self {
            spec: bash_spec(),
            config,
            policy,
            static_mappings,
            pattern,
            identity,
            mount_view,
            seccomp,
            endpoint: OnceLock::new(),
            proxy: tokio::sync::OnceCell::new(),
            self_test: OnceLock::new(),
            lingering: tree::Lingering::default(),
            calls: AtomicU64::new(0),
        }
    }

    /// Bind the tool into a config group other than `bash`.
    pub fn with_group(mut self, group: Option<String>) -> Self {
        self.spec.group = group;
        self
    }

    pub fn config(&self) -> &BashConfig {
        &self.config
    }

    /// One line on what the kernel offers, for `toolhost tools --explain`.
    pub fn confinement(&self) -> String {
        match self.config.confine {
            ConfineMode::Off => "off (sandbox confinement disabled by configuration)".into(),
            ConfineMode::Full => confinement_status().to_string(),
        }
    }

    /// Prove the confinement engages, once: run a real confined command that tries to write
    /// outside its thread, reports its capabilities, opens an internet socket and leaves a
    /// `setsid` process behind for the tree kill. `Ok` says what was proven; `Err` why the
    /// tool must not be offered. Blocking (a few milliseconds); with confinement off, nothing
    /// is proven and `Ok` says so.
    pub fn self_test(&self) -> Result<Vec<String>, String> {
        self.self_test
            .get_or_init(|| match self.config.confine {
                ConfineMode::Off => Ok(vec!["confinement is off (sandbox.bash_confinement: off)".into()]),
                ConfineMode::Full => probe::run(self),
            })
            .clone()
    }

    /// What a command gets, line by line, for `toolhost tools --explain`.
    pub fn explain(&self) -> Vec<String> {
        explain::lines(self)
    }

    /// The caps on one command's tree (`sandbox.bash_max_processes`, `sandbox.bash_memory_mb`).
    pub(crate) fn limits(&self) -> TreeLimits {
        TreeLimits { max_processes: self.config.max_processes, memory_bytes: self.config.memory_bytes }
    }

    /// Whether commands get a pid namespace and `/proc` of their own (toolhost may make
    /// namespaces: uid 0 with the read-only view, or root handing commands to `bash_user`).
    pub(crate) fn pid_namespace(&self) -> bool {
        self.config.confine == ConfineMode::Full
            && (self.mount_view || (self.config.user.is_some() && toolhost_confine::can_make_namespaces()))
    }

    /// The process-tree mechanism this tool uses.
    pub(crate) fn cgroup_parent(&self) -> Result<tree::CgroupParent, String> {
        match self.config.tree {
            TreeMode::Auto => tree::cgroup_parent(),
            TreeMode::Subreaper => Err("the subreaper was chosen by configuration".into()),
        }
    }

    /// The proxy endpoint (allow-list mode), bound once.
    pub(crate) fn endpoint(&self) -> Result<Arc<proxy::Endpoint>, String> {
        self.endpoint.get_or_init(|| Endpoint::bind_best().map(Arc::new)).clone()
    }

    /// The running proxy, started on the first allow-list call.
    async fn proxy(&self, grant: &Arc<NetGrant>) -> Result<Arc<proxy::Proxy>, String> {
        let endpoint = self.endpoint()?;
        let lifetime = Duration::from_secs(self.config.command_timeout_secs.max(1));
        self.proxy
            .get_or_try_init(|| async {
                proxy::Proxy::start(&endpoint, grant.clone(), GrantNames::bash(), lifetime)
                    .map_err(|e| format!("cannot start the bash network proxy: {e}"))
            })
            .await
            .cloned()
    }

    /// The environment of a command: the allow-listed host variables, `PWD`, and for a
    /// confined command `HOME`/`TMPDIR` in the thread.
    fn env(&self, ctx: &CallContext) -> HashMap<String, String> {
        let allowed = |name: &str| {
            ENV_ALLOW.iter().any(|a| match a.strip_suffix('*') {
                Some(prefix) => name.starts_with(prefix),
                None => name == *a,
            }) || self.config.env.iter().any(|e| e == name)
        };
        let mut env: HashMap<String, String> = self
            .config
            .host_env
            .iter()
            .filter(|(k, _)| allowed(k))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        env.insert("PWD".into(), ctx.paths().workspace().to_string_lossy().into_owned());
        if self.config.confine == ConfineMode::Full {
            let user_data = ctx.paths().user_data();
            env.insert("TMPDIR".into(), user_data.join(ThreadDir::BashTmp.name()).to_string_lossy().into_owned());
            env.insert("HOME".into(), user_data.join(ThreadDir::BashHome.name()).to_string_lossy().into_owned());
        }
        env
    }

    /// Prepare one command: open the thread's directories, build its rules, identity, filter
    /// and cgroup. Shared by real calls and the self-test, so the test proves what calls get.
    pub(crate) fn prepare(&self, ctx: &CallContext, net: NetSetup) -> Result<Prepared, String> {
        let open = |which: ThreadDir| {
            thread_dir(ctx, which).map_err(|e| {
                format!(
                    "Error: Cannot open the thread's {} directory: {}",
                    which.name(),
                    ctx.paths().mask(&e.to_string())
                )
            })
        };
        let mut env = self.env(ctx);
        // One handle for the workspace: the working directory, its rule and its place in the view.
        let workspace = open(ThreadDir::Workspace)?;
        let dup =
            |fd: &std::os::fd::OwnedFd| fd.try_clone().map_err(|e| format!("Error: Cannot confine the command: {e}"));
        let mut plan = ChildPlan { workdir: Some(dup(&workspace)?), ..Default::default() };
        self.lingering.sweep();
        let mut tree = TreeSetup::default();
        let mut identity = self.identity;
        let limits = if self.config.confine == ConfineMode::Full { self.limits() } else { TreeLimits::default() };
        let cgroup = self.cgroup_parent().and_then(|parent| {
            tree::Cgroup::create(&parent, limits).map_err(|e| {
                // The supervisor holds the tree instead, as where no cgroup can be made at all.
                tracing::warn!("host bash: cannot create a command's cgroup under {}: {e}", parent.dir.display());
                e.to_string()
            })
        });
        match cgroup {
            Ok((cgroup, procs)) => {
                plan.cgroup_procs = procs;
                tree.cgroup = Some(cgroup);
            }
            Err(_) => {
                let (reaper, status) = reaper::ReaperPlan::new()
                    .map_err(|e| format!("Error: Cannot prepare the command's supervisor: {e}"))?;
                plan.reaper = Some(reaper);
                tree.status = Some(status);
                // No `pids.max` then: the process cap falls back to RLIMIT_NPROC.
                identity = identity.with_max_processes(limits.max_processes);
            }
        }
        if self.pid_namespace() {
            // The command runs in a pid namespace of its own under a supervisor: its `/proc`
            // shows only its own tree, and the tree dies with toolhost.
            if plan.reaper.is_none() {
                let (reaper, status) = reaper::ReaperPlan::new()
                    .map_err(|e| format!("Error: Cannot prepare the command's supervisor: {e}"))?;
                plan.reaper = Some(reaper);
                tree.status = Some(status);
            }
            plan.pid_namespace = true;
        }
        if self.config.confine == ConfineMode::Off {
            return Ok(Prepared { env, plan, tree });
        }
        if self.config.user.is_some() {
            // Rewritten `/mnt/user-data/...` paths are absolute host paths the bash user walks:
            // the directories above its own (created 0700) must be searchable, not listable.
            let threads = ctx.paths().root.parent().map(std::path::Path::to_path_buf);
            let search = [open(ThreadDir::Root)?, open(ThreadDir::UserData)?];
            for fd in &search {
                make_searchable(fd).map_err(|e| format!("Error: Cannot open the thread to bash_user: {e}"))?;
            }
            if let Some(threads) = threads {
                let fd = dirs::open_path_dir(&threads)
                    .and_then(|fd| make_searchable(&fd))
                    .map_err(|e| format!("Error: Cannot open the thread to bash_user: {e}"));
                fd?;
            }
        }
        let mut fs = FsRules::default();
        let mut writable = Vec::new();
        let mut workspace = Some(workspace);
        for which in
            [ThreadDir::Workspace, ThreadDir::Uploads, ThreadDir::Outputs, ThreadDir::BashTmp, ThreadDir::BashHome]
        {
            let fd = match (which, workspace.take()) {
                (ThreadDir::Workspace, Some(fd)) => fd,
                _ => open(which)?,
            };
            if let Some(user) = self.config.user {
                give_to(&fd, user)
                    .map_err(|e| format!("Error: Cannot hand the {} directory to bash_user: {e}", which.name()))?;
            }
            fs.read_write.push(fd);
        }
        fs.read_only.push(open(ThreadDir::Acp)?);
        let confine_err = |e: confine::ConfineError| format!("Error: Cannot confine the command: {e}");
        if let Some(skills) = &self.config.skills_host_path {
            fs.add_path(skills, false).map_err(confine_err)?;
        }
        for path in &self.config.extra_read_paths {
            fs.add_path(path, false).map_err(confine_err)?;
        }
        // One handle per mount, for its Landlock rule and (writable) its place in the view.
        for mount in self.config.mounts.iter().filter(|m| m.host_path.exists()) {
            let fd = match dirs::open_path(&mount.host_path) {
                Ok(fd) => fd,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => return Err(format!("Error: Cannot open {}: {e}", mount.host_path.display())),
            };
            if mount.read_only {
                fs.read_only.push(fd);
            } else {
                if self.mount_view {
                    writable.push(view_entry(&fd, &mount.host_path)?);
                }
                fs.read_write.push(fd);
            }
        }
        let user_data = open(ThreadDir::UserData)?;
        if self.mount_view {
            // fs.read_write[0] is the workspace.
            let view = mountns::ReadOnlyView::new(dup(&user_data)?, &fs.read_write[0], writable)
                .map_err(|e| format!("Error: Cannot confine the command: {e}"))?;
            plan.view = Some(view);
        }
        fs.list_only.push(user_data);
        let net_rule = match net {
            NetSetup::None => NetRule::DenyAll,
            NetSetup::Proxy { port, netns, env: proxy_env } => {
                env.extend(proxy_env);
                plan.netns = netns;
                NetRule::ConnectOnly(port)
            }
        };
        let ruleset = confine::build_ruleset(&fs, net_rule).map_err(confine_err)?;
        if plan.pid_namespace {
            plan.fresh_proc_rule =
                confine::ruleset_fd(&ruleset).map_err(|e| format!("Error: Cannot confine the command: {e}"))?;
            match plan.view.take() {
                Some(view) => plan.view = Some(view.with_fresh_proc(true)),
                None => plan.proc_view = Some(mountns::ProcView),
            }
        }
        plan.ruleset = Some(ruleset);
        plan.identity = Some(identity);
        plan.seccomp = Some(self.seccomp.clone().map_err(|e| format!("Error: Cannot build the seccomp filter: {e}"))?);
        Ok(Prepared { env, plan, tree })
    }

    async fn execute(&self, ctx: &CallContext, command: &str) -> Result<String, String> {
        if !self.config.allow_host_bash {
            return Err(format!("Error: {LOCAL_HOST_BASH_DISABLED_MESSAGE}"));
        }
        ctx.fs.ensure_tool_dirs().map_err(|e| format!("Error: {e}"))?;
        validate_local_bash_command_paths(command, &self.policy).map_err(|e| format!("Error: {e}"))?;
        // Never run unconfined silently: a library user that skipped the start-up self-test
        // gets it on the first call.
        self.self_test().map_err(|why| format!("Error: Host bash is unavailable: {why}"))?;

        let mappings = rewrite::mappings(ctx.paths(), &self.static_mappings);
        let host_command = rewrite::rewrite_command(command, &self.pattern, &mappings);
        let call = format!("c{}", self.calls.fetch_add(1, Ordering::Relaxed));
        let (net, proxy) = match (&self.config.network, self.config.confine) {
            (BashNetwork::Allowlist(grant), ConfineMode::Full) => {
                let proxy = self.proxy(grant).await.map_err(|e| format!("Error: {e}"))?;
                let endpoint = self.endpoint()?;
                let netns = match endpoint.netns() {
                    Some(ns) => Some(ns.try_clone().map_err(|e| format!("Error: {e}"))?),
                    None => None,
                };
                (NetSetup::Proxy { port: proxy.port(), netns, env: proxy.env(&call) }, Some(proxy))
            }
            _ => (NetSetup::None, None),
        };
        let prepared = match self.prepare(ctx, net) {
            Ok(p) => p,
            Err(e) => {
                if let Some(p) = &proxy {
                    p.take_refusals(&call);
                }
                return Err(e);
            }
        };
        let invocation = run::Invocation {
            shell: self.config.shell.clone(),
            command: host_command,
            env: prepared.env,
            timeout: Duration::from_secs(self.config.command_timeout_secs),
            plan: prepared.plan,
            tree: prepared.tree,
        };
        let outcome = run::run(invocation, &self.lingering).await;
        let refusals = proxy.map(|p| p.take_refusals(&call)).unwrap_or_default();
        let outcome = outcome.map_err(|e| {
            format!("Error: Unexpected error executing command: {}", rewrite::mask_output(&e.to_string(), &mappings))
        })?;
        let mut output = run::format_output(&outcome, self.config.command_timeout_secs);
        if !refusals.is_empty() {
            output.push_str("\n\nThe bash network allow-list refused:\n");
            for r in &refusals {
                output.push_str(&format!("- {r}\n"));
            }
        }
        Ok(truncate_middle(&rewrite::mask_output(&output, &mappings), self.config.output_max_chars))
    }
}

use toolhost_confine::CAP_SYS_ADMIN;

/// A writable directory of the read-only view: a clone of `fd`, attached at `target`.
fn view_entry(fd: &std::os::fd::OwnedFd, target: &std::path::Path) -> Result<mountns::Writable, String> {
    fd.try_clone()
        .and_then(|fd| mountns::Writable::new(fd, target))
        .map_err(|e| format!("Error: Cannot confine the command: {e}"))
}

/// Add search (not read) permission for group and others to a directory.
fn make_searchable(fd: &std::os::fd::OwnedFd) -> std::io::Result<()> {
    let mode = rustix::fs::fstat(fd)?.st_mode;
    if mode & 0o011 != 0o011 {
        rustix::fs::fchmod(fd, rustix::fs::Mode::from_raw_mode((mode | 0o011) & 0o7777))?;
    }
    Ok(())
}

pub(crate) fn seccomp_policy(config: &BashConfig, identity: &Identity, mount_view: bool) -> SeccompPolicy {
    SeccompPolicy {
        sockets: match config.network {
            BashNetwork::None => SocketPolicy::None,
            BashNetwork::Allowlist(_) => SocketPolicy::TcpClient,
        },
        unix: confine::abi() >= confine::RESOLVE_UNIX_ABI,
        // With the read-only view, chmod outside the thread fails with EROFS and works inside;
        // without it, a command of toolhost's own uid (root or not) owns files outside the
        // thread that Landlock cannot keep it from chmod-ing.
        owner_denied: identity.is_own_uid() && !mount_view,
    }
}

/// The string argument `name`, or an error naming it.
fn string_arg<'a>(args: &'a Value, name: &str) -> Result<&'a str, String> {
    match args.get(name) {
        Some(Value::String(s)) => Ok(s),
        Some(other) => Err(format!(
            "Error: Invalid arguments for bash: '{name}' must be a string, got {}",
            match other {
                Value::Null => "null",
                Value::Bool(_) => "a boolean",
                Value::Number(_) => "a number",
                Value::Array(_) => "an array",
                Value::Object(_) => "an object",
                Value::String(_) => "a string",
            }
        )),
        None => Err(format!("Error: Invalid arguments for bash: missing required field '{name}'")),
    }
}

#[async_trait]
impl Tool for BashTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn call(&self, ctx: &CallContext, args: Value) -> ToolOutcome {
        let parsed = string_arg(&args, "description").and_then(|_| string_arg(&args, "command"));
        let result = match parsed {
            Ok(command) => self.execute(ctx, command).await,
            Err(e) => Err(e),
        };
        match result {
            Ok(text) => ToolOutcome::text(text),
            Err(text) => ToolOutcome::error(text),
        }
    }
}
