//! Wiring: builds what toolhost provides from config — the builtins in DeerFlow's order, the
//! lead agent's tools, the MCP layer, the skill store and the middleware pipeline — in one
//! place, so the order of each list is visible here.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use serde_json::Value;
use toolhost_core::Tool;

use crate::assembly::{Assembly, AssemblyRequest, Builtin, BuiltinCondition, Explanation, LayerKind, ToolLayer};
use crate::config::AppConfig;
use crate::host::{HostOptions, Problem, Severity};
use crate::middleware::{
    ClarificationMiddleware, DeferredToolFilterMiddleware, Middleware, Pipeline, ReadBeforeWriteMiddleware,
    SandboxAuditMiddleware, SkillToolPolicyMiddleware, ThreadDiskQuotaMiddleware, ToolErrorHandlingMiddleware,
    ToolResultSanitizationMiddleware,
};
use toolhost_core::SharedRoots;

/// The tool-call middleware chain, outermost first, in DeerFlow's lead-agent order (spec §1.2):
/// ToolResultSanitizationMiddleware → SandboxAuditMiddleware → ReadBeforeWriteMiddleware → ToolErrorHandlingMiddleware → SkillToolPolicy →
/// DeferredToolFilter → ClarificationMiddleware. (McpRouting, which DeerFlow runs before the deferred filter, acts before the
/// model call, not around a tool call: it is [`crate::Toolhost::auto_promote`].)
pub fn pipeline(
    config: &AppConfig,
    skills: toolhost_skills::SkillStore,
    public: toolhost_skills::PublicSkillStates,
) -> Pipeline {
    let mut layers: Vec<Arc<dyn Middleware>> = vec![
        Arc::new(ToolResultSanitizationMiddleware),
        Arc::new(SandboxAuditMiddleware),
        Arc::new(ReadBeforeWriteMiddleware::new(config.read_before_write.enabled)),
        Arc::new(ToolErrorHandlingMiddleware),
        Arc::new(SkillToolPolicyMiddleware::new(skills, public)),
        Arc::new(DeferredToolFilterMiddleware),
        Arc::new(ClarificationMiddleware { disable: false }),
    ];
    // toolhost's own layer, only when configured: right inside the read-before-write gate, so a
    // write the gate refuses never counts.
    if let Some(mb) = config.sandbox.as_ref().and_then(|s| s.thread_disk_quota_mb) {
        layers.insert(3, Arc::new(ThreadDiskQuotaMiddleware::new(mb)));
    }
    Pipeline::new(layers)
}

/// DeerFlow's `BUILTIN_TOOLS` in order, with their conditions (spec §1 step 4).
pub fn builtins(config: &AppConfig, _opts: &HostOptions, skills: toolhost_skills::SkillStore) -> Vec<Builtin> {
    use toolhost_builtins::{AskClarificationTool, ListUploadedFilesTool, PresentFilesTool, ViewImageTool};
    let manage = toolhost_skills::SkillManageConfig {
        security_fail_closed: config.skill_evolution.security_fail_closed,
        ..toolhost_skills::SkillManageConfig::new(skills)
    };
    vec![
        Builtin { tool: Arc::new(PresentFilesTool::new()), condition: BuiltinCondition::Always },
        Builtin { tool: Arc::new(AskClarificationTool::new(false)), condition: BuiltinCondition::Always },
        Builtin { tool: Arc::new(ListUploadedFilesTool::new()), condition: BuiltinCondition::UploadTool },
        Builtin {
            tool: Arc::new(toolhost_skills::SkillManageTool::new(manage)),
            condition: BuiltinCondition::SkillEvolution,
        },
        Builtin { tool: Arc::new(ViewImageTool::new()), condition: BuiltinCondition::Vision },
    ]
}

/// The lead agent's tools appended after assembly (spec §1.1); never deferred.
pub fn agent_tools(config: &AppConfig, data_dir: &Path, req: &AssemblyRequest, assembly: &mut Assembly) {
    use toolhost_builtins::{AgentStore, SetupAgentTool, UpdateAgentTool, WriteTodosTool};
    let store = AgentStore::new(data_dir.join("agents"), data_dir.to_path_buf());
    let run = &req.agent;
    let mut extra: Vec<(Arc<dyn Tool>, &str)> = Vec::new();
    if run.bootstrap {
        extra.push((Arc::new(SetupAgentTool::new(store.clone(), run.agent_name.clone())), "bootstrap run"));
    } else if run.agent_name.is_some() && run.channel_name.as_deref() != Some("github") {
        let models = config.models.iter().map(|m| m.name.clone()).collect();
        extra.push((
            Arc::new(UpdateAgentTool::new(store, run.agent_name.clone(), run.channel_name.clone(), models)),
            "custom agent run",
        ));
    }
    if run.plan_mode {
        extra.push((Arc::new(WriteTodosTool::new()), "plan mode"));
    }
    for (tool, why) in extra {
        let name = tool.spec().name.clone();
        if assembly.tools.iter().any(|t| t.spec().name == name) {
            continue;
        }
        assembly.explain.push(Explanation {
            name,
            layer: "agent",
            included: true,
            reason: format!("lead agent tool ({why})"),
        });
        assembly.tools.push(tool);
    }
}

/// The skills directory as a store (`<skills>/{public,custom,…}`).
pub fn skill_store(config: &AppConfig, shared: &SharedRoots) -> toolhost_skills::SkillStore {
    let root = shared.skills().map(|s| s.host.clone()).unwrap_or_else(|| PathBuf::from("/nonexistent-toolhost-skills"));
    toolhost_skills::SkillStore::new(
        toolhost_skills::SkillsLayout::new(root).with_container_path(config.skills.container_path.clone()),
    )
}

/// `extensions_config.json` as JSON, for the parts the host reads itself (`skills`).
pub fn extensions(opts: &HostOptions, base: &Path, problems: &mut Vec<Problem>) -> Option<Value> {
    let path = match toolhost_mcp::config::resolve_config_path(opts.extensions_path.as_deref(), base) {
        Ok(p) => p?,
        Err(e) => {
            problems.push(Problem { severity: Severity::Error, message: e.to_string() });
            return None;
        }
    };
    match std::fs::read(&path)
        .map_err(|e| e.to_string())
        .and_then(|b| serde_json::from_slice::<Value>(&b).map_err(|e| e.to_string()))
    {
        Ok(v) => Some(v),
        Err(e) => {
            problems.push(Problem { severity: Severity::Error, message: format!("{}: {e}", path.display()) });
            None
        }
    }
}

/// Public skills' enabled state from `extensions_config.json` `skills`.
pub fn public_skill_states(extensions: Option<&Value>) -> toolhost_skills::PublicSkillStates {
    toolhost_skills::PublicSkillStates::from_extensions_skills(extensions.and_then(|e| e.get("skills")))
}

/// The MCP layer: servers of `extensions_config.json`, discovered in parallel and cached.
pub fn mcp_layer(opts: &HostOptions, base: &Path) -> Option<Arc<dyn ToolLayer>> {
    let manager = toolhost_mcp::McpManager::from_files(opts.extensions_path.clone(), base.to_path_buf());
    Some(Arc::new(McpLayer {
        manager: Arc::new(manager),
        explicit: opts.extensions_path.clone(),
        project_dir: base.to_path_buf(),
    }))
}

/// The MCP tools as an assembly layer. A broken config or server never breaks assembly.
pub struct McpLayer {
    pub manager: Arc<toolhost_mcp::McpManager>,
    explicit: Option<PathBuf>,
    project_dir: PathBuf,
}

#[async_trait]
impl ToolLayer for McpLayer {
    fn kind(&self) -> LayerKind {
        LayerKind::Mcp
    }

    async fn generation(&self) -> u64 {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        // The manager's counter moves on list_changed and rebuilds; the file's identity tells a
        // config edit apart without reading it (the manager re-reads and hashes it on change).
        self.manager.subscribe().borrow().hash(&mut h);
        match toolhost_mcp::config::resolve_config_path(self.explicit.as_deref(), &self.project_dir) {
            Ok(Some(path)) => {
                path.hash(&mut h);
                if let Ok(meta) = std::fs::metadata(&path) {
                    meta.len().hash(&mut h);
                    meta.modified().ok().hash(&mut h);
                }
            }
            other => other.is_ok().hash(&mut h),
        }
        h.finish()
    }

    async fn warnings(&self) -> Vec<String> {
        match self.manager.tools().await {
            Ok(set) => set.warnings,
            Err(e) => vec![format!("MCP tools unavailable: {e}")],
        }
    }

    async fn routing(&self) -> Vec<(String, toolhost_deferred::RoutingMeta)> {
        let Ok(set) = self.manager.tools().await else { return Vec::new() };
        set.tools
            .iter()
            .filter_map(|t| {
                let r = t.routing()?;
                let mode = match r.mode {
                    toolhost_mcp::RoutingMode::Prefer => "prefer",
                    toolhost_mcp::RoutingMode::Off => "off",
                };
                let meta = toolhost_deferred::RoutingMeta {
                    mode: mode.into(),
                    priority: r.priority,
                    keywords: r.keywords.clone(),
                };
                Some((t.spec().name.clone(), meta))
            })
            .collect()
    }

    async fn tools(&self) -> Vec<Arc<dyn Tool>> {
        match self.manager.tools().await {
            Ok(set) => {
                for w in &set.warnings {
                    tracing::warn!("mcp: {w}");
                }
                set.tools.into_iter().map(|t| t as Arc<dyn Tool>).collect()
            }
            Err(e) => {
                tracing::warn!("mcp: no MCP tools: {e}");
                Vec::new()
            }
        }
    }
}

/// The host bash tool for a config entry (`deerflow.sandbox.tools:bash_tool`). Assembly's gate
/// decides whether it is offered; the tool itself refuses when host bash is not allowed.
pub fn host_bash(
    config: &AppConfig,
    shared: &SharedRoots,
    extensions: Option<&Value>,
    group: &str,
) -> Arc<toolhost_hostbash::BashTool> {
    let s = config.sandbox_or_default();
    let mcp_server_args = extensions
        .and_then(|e| e.get("mcpServers"))
        .and_then(Value::as_object)
        .map(|servers| {
            servers
                .values()
                .filter(|srv| srv.get("enabled").and_then(Value::as_bool).unwrap_or(true))
                .map(|srv| {
                    srv.get("args")
                        .and_then(Value::as_array)
                        .map(|a| a.iter().filter_map(|x| x.as_str().map(str::to_string)).collect())
                        .unwrap_or_default()
                })
                .collect()
        })
        .unwrap_or_default();
    let defaults = toolhost_hostbash::BashConfig::default();
    let cfg = toolhost_hostbash::BashConfig {
        allow_host_bash: config.is_host_bash_allowed(),
        command_timeout_secs: s.bash_command_timeout,
        output_max_chars: s.bash_output_max_chars,
        skills_host_path: shared.skills().map(|s| s.host.clone()),
        skills_container_path: config.skills.container_path.clone(),
        mounts: shared
            .mounts()
            .iter()
            .map(|m| toolhost_hostbash::HostMount {
                host_path: m.host.clone(),
                container_path: m.vpath.clone(),
                read_only: m.read_only,
            })
            .collect(),
        mcp_server_args,
        confine: match s.bash_confinement {
            crate::config::BashConfinement::Full => toolhost_hostbash::ConfineMode::Full,
            crate::config::BashConfinement::Off => toolhost_hostbash::ConfineMode::Off,
        },
        shell: s.bash_shell.map(PathBuf::from).unwrap_or(defaults.shell),
        user: s.bash_user.map(|u| u.0),
        env: s.bash_env.into_iter().map(|e| e.0).collect(),
        network: match s.bash_network {
            crate::config::BashNetworkConfig::None => toolhost_hostbash::BashNetwork::None,
            crate::config::BashNetworkConfig::Allowlist(grant) => toolhost_hostbash::BashNetwork::Allowlist(grant),
        },
        max_file_bytes: s.bash_max_file_size_mb.bytes(),
        ..defaults
    };
    Arc::new(toolhost_hostbash::BashTool::new(cfg).with_group(Some(group.to_string())))
}

/// What the host learns about a host-bash entry: what its commands get, and a warning when
/// they run unconfined.
pub struct HostBashEntry {
    pub report: Option<Vec<String>>,
    pub warning: Option<String>,
}

/// Decide whether host bash is offered: where host bash is allowed, its start-up self-test must
/// prove the confinement engages, or the tool is left out with the reason (never run
/// unconfined silently). Confinement turned off in the config is offered, with a warning.
pub fn host_bash_entry(
    config: &AppConfig,
    tool: Arc<toolhost_hostbash::BashTool>,
) -> (crate::assembly::ConfigEntryState, HostBashEntry) {
    use crate::assembly::ConfigEntryState;
    if !config.is_host_bash_allowed() {
        // Assembly's gate leaves it out; nothing to prove.
        return (ConfigEntryState::Ready(tool), HostBashEntry { report: None, warning: None });
    }
    let warning = (tool.config().confine == toolhost_hostbash::ConfineMode::Off).then(|| {
        "sandbox.bash_confinement is off: host bash commands run UNCONFINED, with toolhost's own privileges, every file it can reach and the open network".to_string()
    });
    if let Some(w) = &warning {
        tracing::warn!("{w}");
    }
    let state = match tool.self_test() {
        Ok(_) => ConfigEntryState::Ready(tool.clone()),
        Err(why) => ConfigEntryState::Unavailable(format!("host bash's confinement did not engage: {why}")),
    };
    (state, HostBashEntry { report: Some(tool.explain()), warning })
}

/// The container paths of disabled skills, for the file tools' disabled-skill gate. Read once
/// when the host opens; an unreadable state fails closed (every skill of that kind disabled).
pub fn disabled_skill_dirs(
    store: &toolhost_skills::SkillStore,
    public: &toolhost_skills::PublicSkillStates,
    problems: &mut Vec<Problem>,
) -> Vec<String> {
    if !store.layout().root.is_dir() {
        return Vec::new();
    }
    match store.load_registry(public) {
        Ok(registry) => {
            registry.skills.iter().filter(|s| !s.enabled).map(|s| s.container_path(&registry.container_path)).collect()
        }
        Err(e) => {
            problems.push(Problem {
                severity: Severity::Warning,
                message: format!("skills: {e}; treating skills as disabled"),
            });
            vec![store.layout().container_path.clone()]
        }
    }
}

/// `assemble_deferred_tools` (spec §8): with `tool_search.enabled` and MCP tools present, the MCP
/// tools become deferred and `tool_search` is added. If no deferred set can be built, MCP tools
/// are left out rather than bound with their schemas (DeerFlow's fail-closed rule).
pub fn defer(config: &AppConfig, assembly: &mut Assembly) {
    if !config.tool_search.enabled {
        return;
    }
    let tools = std::mem::take(&mut assembly.tools);
    match toolhost_deferred::assemble_deferred_tools(tools.clone(), true) {
        Ok((tools, setup)) => {
            assembly.tools = tools;
            if setup.is_empty() {
                return;
            }
            for e in assembly.explain.iter_mut().filter(|e| e.included && setup.deferred_names.contains(&e.name)) {
                e.reason.push_str("; deferred: hidden until tool_search promotes it");
            }
            if let Some(ts) = &setup.tool_search {
                assembly.explain.push(Explanation {
                    name: ts.spec().name.clone(),
                    layer: "deferred",
                    included: true,
                    reason: format!("tool_search over {} deferred MCP tool(s)", setup.deferred_names.len()),
                });
            }
            let filter = setup.filter();
            assembly.deferred = Some(Arc::new(crate::assembly::Deferred { setup, filter }));
        }
        Err(e) => {
            let w = format!("tool_search: {e}; MCP tools left out");
            tracing::warn!("{w}");
            assembly.warnings.push(w);
            assembly.tools = tools.into_iter().filter(|t| !t.spec().is_mcp()).collect();
        }
    }
}

/// The ACP layer: `invoke_acp_agent`, appended last when `acp_agents` is non-empty (spec §1
/// step 6). The enabled MCP servers of `extensions_config.json` are forwarded to the agent.
pub fn acp_layer(config: &AppConfig, extensions: Option<&Value>) -> Option<Arc<dyn ToolLayer>> {
    if config.acp_agents.is_empty() {
        return None;
    }
    let agents = config.acp_agents.clone();
    let str_of = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).map(str::to_string);
    let map_of = |v: &Value, k: &str| -> indexmap::IndexMap<String, String> {
        v.get(k)
            .and_then(Value::as_object)
            .map(|m| m.iter().filter_map(|(k, v)| v.as_str().map(|s| (k.clone(), s.to_string()))).collect())
            .unwrap_or_default()
    };
    let servers = extensions
        .and_then(|e| e.get("mcpServers"))
        .and_then(Value::as_object)
        .map(|servers| {
            servers
                .iter()
                .filter(|(_, s)| s.get("enabled").and_then(Value::as_bool).unwrap_or(true))
                .map(|(name, s)| toolhost_acp::AcpMcpServerConfig {
                    name: name.clone(),
                    transport: str_of(s, "type").or_else(|| str_of(s, "transport")),
                    command: str_of(s, "command"),
                    args: s
                        .get("args")
                        .and_then(Value::as_array)
                        .map(|a| a.iter().filter_map(|x| x.as_str().map(str::to_string)).collect())
                        .unwrap_or_default(),
                    env: map_of(s, "env"),
                    url: str_of(s, "url"),
                    headers: map_of(s, "headers"),
                })
                .collect()
        })
        .unwrap_or_default();
    let tool: Arc<dyn Tool> = Arc::new(toolhost_acp::InvokeAcpAgentTool::new(agents).with_mcp_servers(servers));
    Some(Arc::new(AcpLayer { tool }))
}

/// The ACP tool as an assembly layer.
pub struct AcpLayer {
    tool: Arc<dyn Tool>,
}

#[async_trait]
impl ToolLayer for AcpLayer {
    fn kind(&self) -> LayerKind {
        LayerKind::Acp
    }

    async fn tools(&self) -> Vec<Arc<dyn Tool>> {
        vec![self.tool.clone()]
    }
}
