//! What assembly draws from, built once when a host opens: the config's `tools:` entries
//! (components loaded and granted their capabilities, host bash self-tested), DeerFlow's
//! builtins, the MCP and ACP layers, and the directories every thread shares (skills, mounts).
//! `extensions_config.json` is read here, once, into one type.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{Map, Value};
use toolhost_core::{SharedDir, SharedRoots, ToolSource, ToolSpec, VIRTUAL_SKILLS};
use toolhost_mcp::config::ExtensionsConfig;

use super::{Builtin, ConfigEntry, ConfigEntryState, ToolLayer};
use crate::config::{self, AppConfig, LoadedConfig, ResolvedUse, ToolConfig};
use crate::error::Problem;
use crate::options::{Environment, HostOptions};
use crate::runtime::{
    CapabilitiesConfig, CapabilitySet, ComponentRef, FilesGrant, Runtime, SandboxMount, SandboxSettings,
};
use crate::tools::component::ComponentTool;

/// DeerFlow's `extensions_config.json`, read once when the host opens.
#[derive(Debug, Clone, Default)]
pub enum Extensions {
    /// No file was given.
    #[default]
    None,
    /// The file, parsed.
    Loaded(Box<ExtensionsConfig>),
    /// The file cannot be read or is not valid: no MCP servers, every public skill disabled
    /// (DeerFlow's pydantic model refuses the whole file), and an error naming it.
    Invalid(String),
}

impl Extensions {
    /// Read `path` (if any), with `$VAR`s from `env`.
    pub fn load(path: Option<&Path>, env: &Environment, problems: &mut Vec<Problem>) -> Self {
        let Some(path) = path else { return Extensions::None };
        match toolhost_mcp::config::load_file_with_env(path, env) {
            Ok(loaded) => {
                problems.extend(loaded.warnings.into_iter().map(Problem::warning));
                Extensions::Loaded(Box::new(loaded.config))
            }
            Err(e) => {
                problems.push(Problem::error(e.to_string()));
                Extensions::Invalid(e.to_string())
            }
        }
    }

    /// The enabled `mcpServers` entries, in file order.
    pub fn enabled_servers(&self) -> Vec<(&String, &toolhost_mcp::config::McpServerConfig)> {
        match self {
            Extensions::Loaded(e) => e.mcp_servers.iter().filter(|(_, s)| s.enabled).collect(),
            _ => Vec::new(),
        }
    }
}

/// Everything assembly draws from.
pub(crate) struct Sources {
    pub entries: Vec<ConfigEntry>,
    pub builtins: Vec<Builtin>,
    pub layers: Vec<Arc<dyn ToolLayer>>,
    pub shared: Arc<SharedRoots>,
    pub skills: toolhost_skills::SkillStore,
    pub public_skills: toolhost_skills::PublicSkillStates,
    /// What host bash's commands get, line by line (when a config entry offers host bash).
    pub host_bash: Option<Vec<String>>,
    /// How each stdio MCP server and ACP agent is started, and what it gets.
    pub children: Vec<super::children::ChildReport>,
    /// Component tools (component label, tool name) granted no writable thread directory.
    pub read_only_tools: HashSet<(String, String)>,
}

impl Sources {
    /// Build every source from the config; what is wrong goes to `problems`.
    pub fn build(
        config: &LoadedConfig,
        runtime: &Arc<Runtime>,
        opts: &HostOptions,
        task: Arc<dyn toolhost_core::Tool>,
        problems: &mut Vec<Problem>,
    ) -> Self {
        let c = &config.config;
        let shared = Arc::new(shared_roots(c, &config.base_dir, problems));
        let extensions = Extensions::load(opts.extensions.as_deref(), &opts.env, problems);
        let skills = super::builtins::skill_store(c, &shared);
        let public_skills = super::builtins::public_skill_states(&extensions);
        let disabled_skills = super::builtins::disabled_skill_dirs(&skills, &public_skills, problems);
        let sandbox = sandbox_settings(c, &shared, &disabled_skills, opts.write_file_max_bytes.as_deref());
        let mut entries = Vec::new();
        let mut host_bash = None;
        let mut read_only_tools = HashSet::new();
        let env_lookup = |k: &str| opts.env.get(k);
        let fetcher = crate::provenance::TrustPolicy::from_config(&c.trust, &config.base_dir)
            .map(|policy| crate::provenance::Fetcher::new(policy, &c.trust, &opts.data_dir, &env_lookup));
        if let Err(e) = &fetcher {
            problems.push(Problem::error(config.locate("trust", &format!("{e}; only bundled components load"))));
        }
        for (i, tc) in c.tools.iter().enumerate() {
            let mut facts = EntryFacts::default();
            let build = EntryBuild {
                config,
                runtime,
                shared: &shared,
                sandbox: &sandbox,
                extensions: &extensions,
                env: &opts.env,
                fetcher: fetcher.as_ref().map_err(String::as_str),
            };
            let state = match build.entry(tc, &mut facts) {
                Built::Entry(state) => state,
                Built::HostBash(state, bash) => {
                    if let Some(w) = &bash.warning {
                        problems.push(Problem::warning(format!("tools[{i}] '{}': {w}", tc.name)));
                    }
                    host_bash.get_or_insert(bash.report);
                    state
                }
            };
            match &state {
                ConfigEntryState::Failed(why) => problems
                    .push(Problem::error(config.locate(&format!("tools[{i}].use"), &format!("tools[{i}] '{}': {why}", tc.name)))),
                ConfigEntryState::NotBundled { module, hint } => problems.push(Problem::warning(match hint {
                    Some(h) => format!("tools[{i}] '{}': DeerFlow community tool '{module}' is not provided by toolhost; it is left out: {h}", tc.name),
                    None => format!(
                        "tools[{i}] '{}': DeerFlow community tool '{module}' is not bundled with toolhost yet; it is left out",
                        tc.name
                    ),
                })),
                ConfigEntryState::Unavailable(why) => {
                    problems.push(Problem::warning(format!("tools[{i}] '{}': left out: {why}", tc.name)))
                }
                ConfigEntryState::Ready(_) => {}
            }
            read_only_tools.extend(facts.read_only);
            for n in facts.notes {
                problems.push(Problem::warning(format!("tools[{i}] '{}': {n}", tc.name)));
            }
            entries.push(ConfigEntry {
                name: tc.name.clone(),
                group: tc.group.clone(),
                use_: tc.use_.clone(),
                state,
                grants: facts.grants,
                provenance: facts.provenance,
            });
        }
        problems.extend(runtime_problems(c, runtime));
        let builtins = super::builtins::builtins(c, skills.clone(), task);
        problems.extend(shadowed_builtins(config, &entries, &builtins));
        let mut layers: Vec<Arc<dyn ToolLayer>> = Vec::new();
        let policy = super::children::ChildPolicy::new(c, &opts.data_dir, &opts.env);
        if let Some(path) = &opts.extensions {
            layers.push(super::layers::mcp_layer(path.clone(), opts.env.clone(), policy.as_launch_policy()));
        }
        if let Some(acp) = super::layers::acp_layer(c, &extensions, &opts.env, policy.as_launch_policy()) {
            layers.push(acp);
        }
        let children = child_reports(c, &extensions, &policy, problems);
        Sources {
            entries,
            builtins,
            layers,
            shared,
            skills,
            public_skills,
            host_bash: host_bash.flatten(),
            children,
            read_only_tools,
        }
    }
}

/// How every stdio MCP server and ACP agent will be started; a server that will not start, or
/// that runs unconfined by choice, is a warning.
fn child_reports(
    c: &AppConfig,
    extensions: &Extensions,
    policy: &super::children::ChildPolicy,
    problems: &mut Vec<Problem>,
) -> Vec<super::children::ChildReport> {
    use toolhost_confine::process::{LaunchRequest, ProcessKind};
    let mut reports = Vec::new();
    for (name, server) in extensions.enabled_servers() {
        if server.transport().ok() != Some(toolhost_mcp::Transport::Stdio) {
            continue;
        }
        let command = server.command.as_deref().unwrap_or("");
        reports.push(policy.report(&LaunchRequest { kind: ProcessKind::McpServer, name, command, args: &server.args }));
    }
    for (name, agent) in &c.acp_agents {
        reports.push(policy.report(&LaunchRequest {
            kind: ProcessKind::AcpAgent,
            name,
            command: &agent.command,
            args: &agent.args,
        }));
    }
    for r in &reports {
        if r.refused || r.unconfined {
            problems.push(Problem::warning(format!("{}: {}", r.label, r.verdict)));
        }
    }
    reports
}

/// A warning for each `tools:` entry whose tool takes the name of a builtin or a lead-agent tool.
/// Config tools are assembled first and the first tool of a name wins (DeerFlow's dedup), so
/// the entry replaces ours — at assembly only a generic duplicate-name line would tell.
fn shadowed_builtins(config: &LoadedConfig, entries: &[ConfigEntry], builtins: &[Builtin]) -> Vec<Problem> {
    let mut ours: Vec<(String, &str)> = builtins.iter().map(|b| (b.tool.spec().name.clone(), "builtin")).collect();
    ours.extend(super::lead::lead_agent_tool_names().into_iter().map(|n| (n, "lead agent tool")));
    let mut taken = std::collections::HashSet::new();
    let shadowing = |(i, e): (usize, &ConfigEntry)| {
        let ConfigEntryState::Ready(tool) = &e.state else { return None };
        let bound = &tool.spec().name;
        let (_, kind) = ours.iter().find(|(n, _)| n == bound)?;
        // A later entry of the same name is a duplicate of the first, which is what shadows.
        if !taken.insert(bound.clone()) {
            return None;
        }
        let via = if *bound == e.name { String::new() } else { format!(" (its tool is named '{bound}')") };
        let message = format!(
            "tools[{i}] '{}'{via} shadows the {kind} '{bound}': config tools are assembled first and the first \
             tool of a name wins (as in DeerFlow), so this entry is used and the {kind} is left out",
            e.name
        );
        Some(Problem::warning(config.locate(&format!("tools[{i}].name"), &message)))
    };
    entries.iter().enumerate().filter_map(shadowing).collect()
}

/// What building one `tools:` entry gives.
enum Built {
    Entry(ConfigEntryState),
    HostBash(ConfigEntryState, super::host_bash::HostBashEntry),
}

/// What building an entry learnt besides its state, for `--explain` and the problems list.
#[derive(Default)]
struct EntryFacts {
    grants: Option<String>,
    /// The component tool (label, name) when its grant cannot write the thread.
    read_only: Option<(String, String)>,
    provenance: Option<String>,
    notes: Vec<String>,
}

struct EntryBuild<'a> {
    /// Fetches and checks non-bundled components; `Err`: the `trust:` section is broken.
    fetcher: Result<&'a crate::provenance::Fetcher, &'a str>,
    config: &'a LoadedConfig,
    runtime: &'a Arc<Runtime>,
    shared: &'a Arc<SharedRoots>,
    sandbox: &'a Arc<SandboxSettings>,
    extensions: &'a Extensions,
    env: &'a Environment,
}

impl EntryBuild<'_> {
    fn entry(&self, tc: &ToolConfig, facts: &mut EntryFacts) -> Built {
        let resolved = match config::resolve_use(&tc.use_, &crate::bundled::names(), &self.config.base_dir) {
            Ok(r) => r,
            Err(e) => return Built::Entry(ConfigEntryState::Failed(e)),
        };
        match resolved {
            ResolvedUse::NotBundled { module, hint } => Built::Entry(ConfigEntryState::NotBundled { module, hint }),
            ResolvedUse::HostBash => {
                let tool =
                    super::host_bash::host_bash(&self.config.config, self.shared, self.extensions, self.env, &tc.group);
                let (state, entry) = super::host_bash::host_bash_entry(&self.config.config, tool);
                Built::HostBash(state, entry)
            }
            ResolvedUse::Component { component, tool } => Built::Entry(self.component(tc, component, tool, facts)),
        }
    }

    fn component(
        &self,
        tc: &ToolConfig,
        component: ComponentRef,
        tool: Option<String>,
        facts: &mut EntryFacts,
    ) -> ConfigEntryState {
        // Read or pull, then check the signature: nothing is compiled before that.
        let obtained = match (&component, self.fetcher) {
            (_, Ok(f)) => f.obtain(&component),
            (ComponentRef::Bundled(_), Err(e)) => {
                crate::provenance::obtain_bundled(&component, format!("the trust: section is invalid ({e})"))
            }
            (_, Err(e)) => Err(format!("not loaded: the trust: section is invalid ({e})")),
        };
        let obtained = match obtained {
            Ok(o) => o,
            Err(e) => return ConfigEntryState::Failed(e),
        };
        facts.notes.extend(obtained.notes);
        facts.provenance = Some(obtained.provenance.to_string());
        let component = obtained.component;
        let loaded = match obtained.bytes {
            Some(bytes) => self.runtime.load_bytes(&component, std::borrow::Cow::Owned(bytes)),
            None => self.runtime.load(&component, &crate::bundled::bytes),
        };
        let loaded = match loaded {
            Ok(l) => l,
            Err(e) => return ConfigEntryState::Failed(e.to_string()),
        };
        let wanted = tool.clone().unwrap_or_else(|| tc.name.clone());
        let listed = loaded.tools.iter().find(|t| t.name == wanted).or_else(|| {
            if tool.is_none() && loaded.tools.len() == 1 {
                loaded.tools.first()
            } else {
                None
            }
        });
        let Some(listed) = listed else {
            let names: Vec<&str> = loaded.tools.iter().map(|t| t.name.as_str()).collect();
            return ConfigEntryState::Failed(format!(
                "component {component} has no tool '{wanted}' (it has: {})",
                names.join(", ")
            ));
        };
        let mut warnings = Vec::new();
        let extra: Map<String, Value> = tc.extra.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        // The entry's block over the bundled component's defaults, key by key.
        let env = |k: &str| self.env.get(k);
        let defaults = crate::community::capabilities(&component, &listed.name, &extra, &env)
            .or_else(|| bundled_defaults(&component, &listed.name))
            .unwrap_or_default();
        let caps_cfg = tc.capabilities.clone().unwrap_or_default().merged_over(&defaults);
        let caps = match CapabilitySet::resolve(&caps_cfg, &env, &mut warnings) {
            Ok(c) => c,
            Err(e) => return ConfigEntryState::Failed(e),
        };
        for w in warnings {
            tracing::warn!("tool '{}': {w}", tc.name);
        }
        facts.grants = Some(caps.describe());
        let bound = crate::community::bound_name(&component, &listed.name).to_string();
        if matches!(caps.fs, FilesGrant::None | FilesGrant::ReadOnly) {
            facts.read_only = Some((component.to_string(), bound.clone()));
        }
        let spec = ToolSpec {
            name: bound,
            description: listed.description.clone(),
            parameters: listed.parameters.clone(),
            group: Some(tc.group.clone()),
            source: ToolSource::Component { component: component.to_string() },
        };
        let entries: Vec<(String, String, Map<String, Value>)> = self
            .config
            .config
            .tools
            .iter()
            .map(|t| {
                (
                    t.name.clone(),
                    config::deerflow_use(&t.use_).into_owned(),
                    t.extra.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
                )
            })
            .collect();
        let extra = crate::community::tool_config(&listed.name, &extra, &entries);
        ConfigEntryState::Ready(Arc::new(ComponentTool::new(
            spec,
            listed.name.clone(),
            self.runtime.clone(),
            loaded,
            caps,
            extra,
            self.sandbox.clone(),
        )))
    }
}

/// The directories every thread sees besides its own: the skills directory (read-only at
/// `skills.container_path`) and the `sandbox.mounts` whose host path exists (DeerFlow ignores the
/// others), each opened once.
pub(crate) fn shared_roots(c: &AppConfig, base: &Path, problems: &mut Vec<Problem>) -> SharedRoots {
    let skills = c.skills.path.as_ref().map(|p| resolve(base, p)).or_else(|| {
        let d = base.join("skills");
        d.is_dir().then_some(d)
    });
    let container = if c.skills.container_path.is_empty() { VIRTUAL_SKILLS } else { c.skills.container_path.as_str() };
    let skills = skills.and_then(|p| match SharedDir::open(container, &p, true) {
        Ok(d) => Some(d),
        Err(e) => {
            problems.push(Problem::warning(format!(
                "skills directory {} cannot be opened ({e}); {} is empty",
                p.display(),
                c.skills.container_path
            )));
            None
        }
    });
    let mut mounts = Vec::new();
    for m in c.sandbox_or_default().mounts {
        let cp = toolhost_vpath::normalize(&m.container_path);
        if !m.container_path.starts_with('/') || cp == "/" || toolhost_vpath::has_traversal(&m.container_path) {
            problems.push(Problem::warning(format!(
                "sandbox mount {} → {}: the container path must be an absolute path below /; ignored",
                m.host_path, m.container_path
            )));
            continue;
        }
        let host = resolve(base, &m.host_path);
        match SharedDir::open(&m.container_path, &host, m.read_only) {
            Ok(d) => mounts.push(d),
            // DeerFlow ignores mounts whose host path is missing.
            Err(e) => problems.push(Problem::warning(format!(
                "sandbox mount {} → {}: host path cannot be opened ({e}); ignored",
                m.host_path, m.container_path
            ))),
        }
    }
    SharedRoots::new(skills, mounts)
}

fn resolve(base: &Path, p: &str) -> PathBuf {
    let p = Path::new(p);
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        base.join(p)
    }
}

/// The sandbox settings component tools receive (see `wit/tool.wit`, `sandbox-settings`).
fn sandbox_settings(
    c: &AppConfig,
    shared: &SharedRoots,
    disabled_skills: &[String],
    write_file_max_bytes: Option<&str>,
) -> Arc<SandboxSettings> {
    let s = c.sandbox_or_default();
    Arc::new(SandboxSettings {
        read_file_output_max_chars: s.read_file_output_max_chars,
        ls_output_max_chars: s.ls_output_max_chars,
        mounts: shared
            .mounts()
            .iter()
            .map(|m| SandboxMount { container_path: m.vpath.clone(), read_only: m.read_only })
            .collect(),
        skills_container_path: c.skills.container_path.clone(),
        write_file_max_bytes: write_file_max_bytes.map(str::to_string),
        disabled_skills: disabled_skills.to_vec(),
    })
}

/// Default capabilities of bundled components (what DeerFlow's equivalents touch): sandbox-fs's
/// `write_file` and `str_replace` write the thread's user data, its other tools only read it
/// (so the disk quota need not watch them).
fn bundled_defaults(component: &ComponentRef, tool: &str) -> Option<CapabilitiesConfig> {
    match component {
        ComponentRef::Bundled(n) if n == "sandbox-fs" => Some(CapabilitiesConfig {
            filesystem: Some(if matches!(tool, "write_file" | "str_replace") {
                FilesGrant::UserData
            } else {
                FilesGrant::ReadOnly
            }),
            memory_mb: Some(256),
            timeout_s: Some(60.0),
            output_bytes: Some(16 << 20),
            ..Default::default()
        }),
        _ => None,
    }
}

/// What the runtime has to report (a refused precompile cache, a rejected artifact), and a
/// `toolhost:` section a shared runtime does not follow.
fn runtime_problems(c: &AppConfig, runtime: &Runtime) -> Vec<Problem> {
    let mut out: Vec<Problem> = runtime.take_warnings().into_iter().map(Problem::warning).collect();
    let (wanted, have) = (&c.toolhost, runtime.concurrency());
    if (wanted.concurrent_calls, wanted.concurrent_calls_per_thread) != (have.global, have.per_thread) {
        out.push(Problem::warning(format!(
            "toolhost.concurrent_calls {} / concurrent_calls_per_thread {} not applied: this host shares a runtime built with {} / {}",
            wanted.concurrent_calls, wanted.concurrent_calls_per_thread, have.global, have.per_thread
        )));
    }
    out
}
