//! `get_available_tools` (DeerFlow spec §1): config tools with the group filter and the
//! host-bash gate, builtins with their conditions, then the MCP and ACP layers, deduplicated by
//! name with the first occurrence winning. Every candidate gets a line saying why it is in or
//! out (`toolhost tools --explain`).

mod builtins;
pub mod children;
mod deferred;
mod host_bash;
mod layers;
mod lead;
mod sources;

use std::sync::Arc;

pub(crate) use deferred::defer;
pub use layers::{AcpLayer, McpLayer};
pub(crate) use lead::add_lead_agent_tools;
pub use sources::Extensions;
pub(crate) use sources::Sources;

use async_trait::async_trait;
use serde::Serialize;
use toolhost_core::Tool;

use crate::config::BASH_TOOL_USE;

/// What a caller asks for (DeerFlow's `get_available_tools` arguments).
#[derive(Debug, Clone)]
pub struct AssemblyRequest {
    /// Keep only config tools whose group is listed. `None`: no filter.
    pub groups: Option<Vec<String>>,
    /// Include MCP tools (DeerFlow's `include_mcp`).
    pub include_mcp: bool,
    /// The model whose `supports_vision` decides `view_image`; `None`: the first model.
    pub model_name: Option<String>,
    /// Subagents are enabled (adds `task`).
    pub subagent_enabled: bool,
    /// Subagents pass false: no `list_uploaded_files`.
    pub include_upload_tool: bool,
    /// The lead agent's run (spec §1.1), for the tools appended after assembly.
    pub agent: AgentRun,
}

/// What kind of lead-agent run the tools are for.
#[derive(Debug, Clone, Default)]
pub struct AgentRun {
    /// A custom agent's name: adds `update_agent` (unless on the `github` channel).
    pub agent_name: Option<String>,
    /// The channel the run came from (`github` gets no `update_agent`).
    pub channel_name: Option<String>,
    /// Bootstrapping a new agent: adds `setup_agent`.
    pub bootstrap: bool,
    /// Plan mode: adds `write_todos`.
    pub plan_mode: bool,
    /// The custom agent's `skills`: whose `allowed-tools` the skill policy may use. `None`: all
    /// skills, `[]`: none.
    pub available_skills: Option<Vec<String>>,
    /// `max_concurrent_subagents` (default 3, clamped 1..=4) for DeerFlow's
    /// SubagentLimitMiddleware.
    pub max_concurrent_subagents: Option<i64>,
    /// `max_total_subagents` (default `subagents.max_total_per_run`, clamped 1..=50).
    pub max_total_subagents: Option<i64>,
    /// The run's id (DeerFlow's `runtime.context["run_id"]`, one per user message): `task` tags
    /// its delegations with it and SubagentLimitMiddleware's total cap counts this run's only.
    /// `None`: every delegation of the thread counts (DeerFlow's fallback, with its warning).
    /// Runs share their assembly: the id decides no tool.
    pub run_id: Option<String>,
    /// The user the run belongs to (DeerFlow's `user_id`; `None`: `default`, DeerFlow's no-auth
    /// user): whose custom agents `setup_agent`, `update_agent` and the agent's own config come
    /// from (`<data>/users/<user_id>/agents/`).
    pub user_id: Option<String>,
}

impl AgentRun {
    /// The run's custom-agent store: the user's agents under `data_dir`, DeerFlow's base dir.
    pub fn agent_store(&self, data_dir: &std::path::Path) -> toolhost_builtins::AgentStore {
        toolhost_builtins::AgentStore::new(
            data_dir.to_path_buf(),
            self.user_id.as_deref().unwrap_or(toolhost_builtins::agents::DEFAULT_USER_ID),
        )
    }
}

impl Default for AssemblyRequest {
    fn default() -> Self {
        Self {
            groups: None,
            include_mcp: true,
            model_name: None,
            subagent_enabled: false,
            include_upload_tool: true,
            agent: AgentRun::default(),
        }
    }
}

/// A `tools:` entry after resolving its `use:`.
pub enum ConfigEntryState {
    /// Built and ready.
    Ready(Arc<dyn Tool>),
    /// A DeerFlow community tool toolhost does not provide; `hint` says what to use instead.
    NotBundled {
        /// DeerFlow's module (`deerflow.community.x`).
        module: String,
        /// What to use instead, when there is an answer.
        hint: Option<&'static str>,
    },
    /// Could not be built (unknown component, digest mismatch, …); the text says why.
    Failed(String),
    /// Built but not offered on this host (host bash whose confinement did not engage); why.
    Unavailable(String),
}

/// One `tools:` entry as assembly sees it.
pub struct ConfigEntry {
    /// The entry's `name`.
    pub name: String,
    /// Its `group`.
    pub group: String,
    /// Its `use:` path.
    pub use_: String,
    /// What building it gave.
    pub state: ConfigEntryState,
    /// What a component tool is granted, for `--explain` (None: not a component).
    pub grants: Option<String>,
    /// A component's digest, signer and the trust policy, for `--explain` (None: not a
    /// component, or it could not be read).
    pub provenance: Option<String>,
}

/// When a builtin is assembled (spec §1 step 4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BuiltinCondition {
    /// Always assembled.
    Always,
    /// `include_upload_tool`.
    UploadTool,
    /// `skill_evolution.enabled`.
    SkillEvolution,
    /// `subagent_enabled`.
    Subagents,
    /// The model `supports_vision`.
    Vision,
}

/// A builtin tool and when it is assembled. Add your own with
/// [`Toolhost::add_builtin`](crate::Toolhost::add_builtin).
pub struct Builtin {
    /// The tool.
    pub tool: Arc<dyn Tool>,
    /// When it is assembled.
    pub condition: BuiltinCondition,
}

/// A source of tools assembled after the builtins (MCP, ACP). Failures are the layer's to log;
/// they never break assembly.
#[async_trait]
pub trait ToolLayer: Send + Sync {
    /// `"mcp"` or `"acp"`; decides the position and whether `include_mcp` applies.
    fn kind(&self) -> LayerKind;
    /// The layer's tools now.
    async fn tools(&self) -> Vec<Arc<dyn Tool>>;

    /// Changes whenever what [`tools`](Self::tools) would return may have changed (a config
    /// edit, a server's `tools/list_changed`), so the host can reuse an assembly until then.
    async fn generation(&self) -> u64 {
        0
    }

    /// Warnings of the layer's last discovery (servers that failed, names dropped), in order.
    async fn warnings(&self) -> Vec<String> {
        Vec::new()
    }

    /// Routing metadata of this layer's tools (MCP `routing`), by exposed tool name.
    async fn routing(&self) -> Vec<(String, toolhost_deferred::RoutingMeta)> {
        Vec::new()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
/// Where a layer's tools go in DeerFlow's order.
pub enum LayerKind {
    /// MCP tools (after the builtins; left out when `include_mcp` is false; deferred with tool search).
    Mcp,
    /// ACP's `invoke_acp_agent` (last).
    Acp,
}

/// Facts of the config that assembly decides on.
#[derive(Debug, Clone, Default)]
pub struct AssemblyFacts {
    /// Host bash is allowed (`sandbox.allow_host_bash` with the local sandbox).
    pub host_bash_allowed: bool,
    /// `skill_evolution.enabled` (adds `skill_manage`).
    pub skill_evolution: bool,
    /// The request's model supports vision (adds `view_image`).
    pub vision: bool,
}

/// Why a candidate is in or out.
#[derive(Debug, Clone, Serialize)]
pub struct Explanation {
    /// The tool's name.
    pub name: String,
    /// Where it comes from: `config`, `builtin`, `mcp`, `acp`, `agent`, `deferred`.
    pub layer: &'static str,
    /// Whether it is in the assembly.
    pub included: bool,
    /// Why.
    pub reason: String,
}

/// The assembled list plus the reasons.
#[derive(Default)]
pub struct Assembly {
    /// The tools, in DeerFlow's order. Not handed out: a call goes through the host's pipeline
    /// ([`Thread::call`](crate::Thread::call)), never around it; [`Assembly::specs`] lists them.
    pub(crate) tools: Vec<Arc<dyn Tool>>,
    /// Why each candidate is in or out.
    pub explain: Vec<Explanation>,
    /// What assembly warns about (a name bound differently, a tool left out).
    pub warnings: Vec<String>,
    /// The deferred-tool setup when `tool_search.enabled` and MCP tools exist (spec §8).
    pub deferred: Option<Arc<Deferred>>,
}

impl Assembly {
    /// What each assembled tool shows the model (name, description, schema, group, source), in
    /// DeerFlow's order.
    pub fn specs(&self) -> Vec<toolhost_core::ToolSpec> {
        self.spec_refs().cloned().collect()
    }

    /// [`specs`](Self::specs) without copying them.
    pub fn spec_refs(&self) -> impl Iterator<Item = &toolhost_core::ToolSpec> + '_ {
        self.tools.iter().map(|t| t.spec())
    }

    /// The tool names in LangGraph `ToolNode`'s order (see [`tool_node_names`]).
    pub fn tool_node_names(&self) -> Vec<&str> {
        tool_node_names(&self.spec_refs().collect::<Vec<_>>())
    }
}

/// A run's tool names in LangGraph `ToolNode`'s order, the order its answer to an unknown tool
/// lists them in: LangChain's `create_agent` puts the middlewares' own tools (TodoMiddleware's
/// `write_todos`, in plan mode) before the agent's tools.
pub fn tool_node_names<'a>(specs: &[&'a toolhost_core::ToolSpec]) -> Vec<&'a str> {
    let middleware_tool = |s: &&toolhost_core::ToolSpec| {
        s.name == "write_todos" && matches!(s.source, toolhost_core::ToolSource::Builtin)
    };
    let middleware = specs.iter().copied().filter(middleware_tool);
    let regular = specs.iter().copied().filter(|s| !middleware_tool(s));
    middleware.chain(regular).map(|s| s.name.as_str()).collect()
}

/// Deferred MCP tools of one assembly: the catalog behind `tool_search` and the filter that
/// hides and gates unpromoted tools.
pub struct Deferred {
    /// The deferred names, the catalog and its hash, `tool_search`.
    pub setup: toolhost_deferred::DeferredToolSetup,
    /// Hides unpromoted tools from the model and refuses calls to them.
    pub filter: toolhost_deferred::DeferredToolFilter,
}

/// Assemble. `layers` are consulted in order, MCP ones before ACP ones.
pub async fn get_available_tools(
    req: &AssemblyRequest,
    facts: &AssemblyFacts,
    entries: &[ConfigEntry],
    builtins: &[Builtin],
    layers: &[Arc<dyn ToolLayer>],
) -> Assembly {
    let mut candidates: Vec<(Arc<dyn Tool>, &'static str, String)> = Vec::new();
    let mut out = Assembly::default();
    let mut explain_out = |name: &str, layer: &'static str, reason: String| {
        out.explain.push(Explanation { name: name.to_string(), layer, included: false, reason });
    };

    // 1–3: config tools.
    for e in entries {
        if let Some(groups) = &req.groups {
            if !groups.contains(&e.group) {
                explain_out(
                    &e.name,
                    "config",
                    format!("group '{}' is not among the requested groups {groups:?}", e.group),
                );
                continue;
            }
        }
        if !facts.host_bash_allowed && (e.group == "bash" || crate::config::deerflow_use(&e.use_) == BASH_TOOL_USE) {
            let why =
                if e.group == "bash" { "it is in group 'bash'" } else { "it uses deerflow.sandbox.tools:bash_tool" };
            explain_out(
                &e.name,
                "config",
                format!("host bash is not allowed (local sandbox without sandbox.allow_host_bash: true) and {why}"),
            );
            continue;
        }
        match &e.state {
            ConfigEntryState::Ready(tool) => {
                let bound = tool.spec().name.clone();
                let mut reason = format!("config tool (group '{}', use {})", e.group, e.use_);
                if let Some(g) = &e.grants {
                    reason.push_str(&format!("; grants {g}"));
                }
                if let Some(p) = &e.provenance {
                    reason.push_str(&format!("; {p}"));
                }
                if bound != e.name {
                    let w = format!(
                        "tool config name '{}' differs from the tool's own name '{bound}'; binding '{bound}'",
                        e.name
                    );
                    tracing::warn!("{w}");
                    out.warnings.push(w);
                    reason.push_str(&format!("; bound as '{bound}'"));
                }
                candidates.push((tool.clone(), "config", reason));
            }
            ConfigEntryState::NotBundled { module, hint } => {
                let w = match hint {
                    Some(h) => format!("tool '{}': {} is not provided by toolhost; left out: {h}", e.name, e.use_),
                    None => format!(
                        "tool '{}': DeerFlow community tool '{module}' ({}) is not bundled with toolhost yet; left out",
                        e.name, e.use_
                    ),
                };
                out.warnings.push(w.clone());
                explain_out(&e.name, "config", w);
            }
            ConfigEntryState::Failed(why) => {
                explain_out(&e.name, "config", format!("refused: {why}"));
            }
            ConfigEntryState::Unavailable(why) => {
                let w = format!("tool '{}': left out: {why}", e.name);
                out.warnings.push(w.clone());
                explain_out(&e.name, "config", w);
            }
        }
    }

    // 4: builtins, in DeerFlow's order, with their conditions.
    for b in builtins {
        let name = b.tool.spec().name.clone();
        let (ok, why) = match b.condition {
            BuiltinCondition::Always => (true, "builtin".to_string()),
            BuiltinCondition::UploadTool => (req.include_upload_tool, "builtin; include_upload_tool".to_string()),
            BuiltinCondition::SkillEvolution => (facts.skill_evolution, "builtin; skill_evolution.enabled".to_string()),
            BuiltinCondition::Subagents => (req.subagent_enabled, "builtin; subagent_enabled".to_string()),
            BuiltinCondition::Vision => (facts.vision, "builtin; the model supports_vision".to_string()),
        };
        if ok {
            candidates.push((b.tool.clone(), "builtin", why));
        } else {
            explain_out(&name, "builtin", format!("condition not met ({})", why.trim_start_matches("builtin; ")));
        }
    }

    // 5–6: MCP then ACP.
    for kind in [LayerKind::Mcp, LayerKind::Acp] {
        for layer in layers.iter().filter(|l| l.kind() == kind) {
            if kind == LayerKind::Mcp && !req.include_mcp {
                continue;
            }
            let label = if kind == LayerKind::Mcp { "mcp" } else { "acp" };
            for t in layer.tools().await {
                candidates.push((t, label, format!("{label} tool")));
            }
            out.warnings.extend(layer.warnings().await);
        }
    }

    // 7: dedup by name, first wins. Both sides of a shadowing say so in their explanation.
    let mut seen: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    for (tool, layer, reason) in candidates {
        let name = tool.spec().name.clone();
        if let Some(&winner) = seen.get(&name) {
            let w = format!(
                "Duplicate tool name '{name}' detected and skipped — check your config.yaml and MCP server registrations (issue #1803)."
            );
            tracing::warn!("{w}");
            out.warnings.push(w.clone());
            let won = &mut out.explain[winner];
            won.reason.push_str(&format!("; shadows the {layer} tool '{name}'"));
            let reason = format!("shadowed by the {} tool '{name}', which comes first: {w}", won.layer);
            out.explain.push(Explanation { name, layer, included: false, reason });
        } else {
            seen.insert(name.clone(), out.explain.len());
            out.explain.push(Explanation { name, layer, included: true, reason });
            out.tools.push(tool);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;
    use toolhost_core::{CallContext, ToolOutcome, ToolSource, ToolSpec};

    struct Named(ToolSpec);

    #[async_trait]
    impl Tool for Named {
        fn spec(&self) -> &ToolSpec {
            &self.0
        }
        async fn call(&self, _: &CallContext, _: Value) -> ToolOutcome {
            ToolOutcome::text(self.0.description.clone())
        }
    }

    fn tool(name: &str, label: &str) -> Arc<dyn Tool> {
        Arc::new(Named(ToolSpec {
            name: name.into(),
            description: label.into(),
            parameters: serde_json::json!({"type": "object"}),
            group: None,
            source: ToolSource::Other { label: label.into() },
        }))
    }

    fn entry(name: &str, group: &str, use_: &str) -> ConfigEntry {
        ConfigEntry {
            name: name.into(),
            group: group.into(),
            use_: use_.into(),
            state: ConfigEntryState::Ready(tool(name, "config")),
            grants: None,
            provenance: None,
        }
    }

    struct Layer(LayerKind, Vec<Arc<dyn Tool>>);

    #[async_trait]
    impl ToolLayer for Layer {
        fn kind(&self) -> LayerKind {
            self.0
        }
        async fn tools(&self) -> Vec<Arc<dyn Tool>> {
            self.1.clone()
        }
    }

    fn names(a: &Assembly) -> Vec<String> {
        a.tools.iter().map(|t| t.spec().name.clone()).collect()
    }

    #[tokio::test]
    async fn order_is_config_builtins_mcp_acp_and_first_wins() {
        let entries = vec![entry("ls", "file:read", "x"), entry("present_files", "file:read", "x")];
        let builtins = vec![
            Builtin { tool: tool("present_files", "builtin"), condition: BuiltinCondition::Always },
            Builtin { tool: tool("ask_clarification", "builtin"), condition: BuiltinCondition::Always },
        ];
        // ACP layer listed first on purpose: its position comes from its kind.
        let layers: Vec<Arc<dyn ToolLayer>> = vec![
            Arc::new(Layer(LayerKind::Acp, vec![tool("invoke_acp_agent", "acp")])),
            Arc::new(Layer(LayerKind::Mcp, vec![tool("srv_a", "mcp"), tool("ls", "mcp")])),
        ];
        let a =
            get_available_tools(&AssemblyRequest::default(), &AssemblyFacts::default(), &entries, &builtins, &layers)
                .await;
        assert_eq!(names(&a), ["ls", "present_files", "ask_clarification", "srv_a", "invoke_acp_agent"]);
        // The config tool won over the builtin of the same name, and both explanations say so.
        assert_eq!(a.tools[1].spec().description, "config");
        let of = |name: &str, layer: &str| a.explain.iter().find(|e| e.name == name && e.layer == layer).unwrap();
        assert!(of("present_files", "config").included);
        assert!(of("present_files", "config").reason.contains("shadows the builtin tool 'present_files'"));
        let lost = of("present_files", "builtin");
        assert!(
            !lost.included && lost.reason.starts_with("shadowed by the config tool 'present_files'"),
            "{}",
            lost.reason
        );
        assert_eq!(a.warnings.iter().filter(|w| w.contains("Duplicate tool name")).count(), 2);
        let no_mcp = AssemblyRequest { include_mcp: false, ..Default::default() };
        let a = get_available_tools(&no_mcp, &AssemblyFacts::default(), &entries, &builtins, &layers).await;
        assert_eq!(names(&a), ["ls", "present_files", "ask_clarification", "invoke_acp_agent"]);
    }

    #[tokio::test]
    async fn groups_filter_only_config_tools() {
        let entries = vec![entry("ls", "file:read", "x"), entry("write_file", "file:write", "x")];
        let builtins = vec![Builtin { tool: tool("present_files", "b"), condition: BuiltinCondition::Always }];
        let layers: Vec<Arc<dyn ToolLayer>> = vec![Arc::new(Layer(LayerKind::Mcp, vec![tool("srv_a", "mcp")]))];
        let req = AssemblyRequest { groups: Some(vec!["file:read".into()]), ..Default::default() };
        let a = get_available_tools(&req, &AssemblyFacts::default(), &entries, &builtins, &layers).await;
        assert_eq!(names(&a), ["ls", "present_files", "srv_a"]);
        let out = a.explain.iter().find(|e| e.name == "write_file").unwrap();
        assert!(!out.included && out.reason.contains("file:write"));
    }

    #[tokio::test]
    async fn host_bash_gate_drops_group_and_renamed_aliases() {
        let entries = vec![
            entry("bash", "bash", BASH_TOOL_USE),
            entry("shell", "shell", BASH_TOOL_USE),
            entry("other_in_bash_group", "bash", "hello"),
            entry("ls", "file:read", "x"),
        ];
        let a = get_available_tools(&AssemblyRequest::default(), &AssemblyFacts::default(), &entries, &[], &[]).await;
        assert_eq!(names(&a), ["ls"]);
        let allowed = AssemblyFacts { host_bash_allowed: true, ..Default::default() };
        let a = get_available_tools(&AssemblyRequest::default(), &allowed, &entries, &[], &[]).await;
        assert_eq!(names(&a), ["bash", "shell", "other_in_bash_group", "ls"]);
    }

    #[tokio::test]
    async fn builtin_conditions() {
        let builtins = vec![
            Builtin { tool: tool("present_files", "b"), condition: BuiltinCondition::Always },
            Builtin { tool: tool("list_uploaded_files", "b"), condition: BuiltinCondition::UploadTool },
            Builtin { tool: tool("skill_manage", "b"), condition: BuiltinCondition::SkillEvolution },
            Builtin { tool: tool("task", "b"), condition: BuiltinCondition::Subagents },
            Builtin { tool: tool("view_image", "b"), condition: BuiltinCondition::Vision },
        ];
        let a = get_available_tools(&AssemblyRequest::default(), &AssemblyFacts::default(), &[], &builtins, &[]).await;
        assert_eq!(names(&a), ["present_files", "list_uploaded_files"]);
        let req = AssemblyRequest { subagent_enabled: true, include_upload_tool: false, ..Default::default() };
        let facts = AssemblyFacts { skill_evolution: true, vision: true, ..Default::default() };
        let a = get_available_tools(&req, &facts, &[], &builtins, &[]).await;
        assert_eq!(names(&a), ["present_files", "skill_manage", "task", "view_image"]);
    }

    #[tokio::test]
    async fn not_bundled_and_failed_entries_are_explained() {
        let entries = vec![
            ConfigEntry {
                name: "web_search".into(),
                group: "web".into(),
                use_: "deerflow.community.ddg_search.tools:web_search_tool".into(),
                state: ConfigEntryState::NotBundled { module: "ddg_search".into(), hint: None },
                grants: None,
                provenance: None,
            },
            ConfigEntry {
                name: "pinned".into(),
                group: "x".into(),
                use_: "a.wasm@sha256:00".into(),
                state: ConfigEntryState::Failed("digest mismatch".into()),
                grants: None,
                provenance: None,
            },
        ];
        let a = get_available_tools(&AssemblyRequest::default(), &AssemblyFacts::default(), &entries, &[], &[]).await;
        assert!(a.tools.is_empty());
        assert!(a.warnings.iter().any(|w| w.contains("ddg_search") && w.contains("not bundled")));
        assert!(a.explain.iter().any(|e| e.name == "pinned" && e.reason.contains("digest mismatch")));
    }
}
