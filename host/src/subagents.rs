//! The host's side of DeerFlow's subagents and custom agents: the `task` builtin with the
//! settings it shares, binding it to each run, running a subagent's tools through this host
//! ([`toolhost_subagents::SubagentHost`]), and custom agents (DeerFlow's
//! `<data>/users/<user_id>/agents/NAME/config.yaml`, or the legacy `<data>/agents/NAME/`, turned
//! into an [`AssemblyRequest`]).

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::{Arc, Weak};

use async_trait::async_trait;
use toolhost_core::{ThreadState, Tool, ToolOutcome};
use toolhost_subagents::{
    agents, HostSlot, ParentRun, SubagentHost, SubagentScope, SubagentToolset, TaskSettings, TaskTool,
};

use crate::assembly::{AgentRun, Assembly, AssemblyRequest};
use crate::config::AppConfig;
use crate::options::Environment;
use crate::Toolhost;

/// The `task` tool's shared settings and the slot through which it reaches the host.
pub(crate) struct Subagents {
    settings: Arc<TaskSettings>,
}

impl Subagents {
    pub fn new(config: &AppConfig, env: &Environment) -> Self {
        let env = env.clone();
        let settings = TaskSettings {
            subagents: config.subagents.clone(),
            models: config.models.iter().map(|m| m.entry()).collect(),
            host_bash_allowed: config.is_host_bash_allowed(),
            host: HostSlot::default(),
            loop_detection: Default::default(),
            env: Arc::new(move |k| env.get(k)),
        };
        Self { settings: Arc::new(settings) }
    }

    /// The `task` builtin as the builtin list holds it (no parent run yet).
    pub fn builtin(&self) -> Arc<dyn Tool> {
        Arc::new(TaskTool::new(self.settings.clone(), ParentRun::default()))
    }

    /// Give the `task` tools a way back to the host (a weak reference: the host owns its tools).
    pub fn bind_host(&self, host: Weak<Toolhost>) {
        let host: Weak<dyn SubagentHost> = host;
        self.settings.host.bind(host);
    }

    /// Replace the assembled `task` with one bound to this run: its subagents inherit the run's
    /// model, tool groups and skills (DeerFlow reads them from the run's metadata).
    pub fn bind_task(&self, req: &AssemblyRequest, assembly: &mut Assembly) {
        let Some(slot) = assembly.tools.iter_mut().find(|t| t.spec().name == "task" && t.spec().group.is_none()) else {
            return;
        };
        if !matches!(slot.spec().source, toolhost_core::ToolSource::Builtin) {
            return;
        }
        let parent = ParentRun {
            model_name: req.model_name.clone(),
            tool_groups: req.groups.clone(),
            available_skills: req.agent.available_skills.clone(),
        };
        *slot = Arc::new(TaskTool::new(self.settings.clone(), parent));
    }
}

/// The request a subagent's tools are assembled with (DeerFlow's `task_tool`:
/// `get_available_tools(model_name=effective_model, groups=<parent tool_groups>,
/// subagent_enabled=False, include_upload_tool=False)`).
fn subagent_request(scope: &SubagentScope) -> AssemblyRequest {
    AssemblyRequest {
        groups: scope.groups.clone(),
        include_mcp: true,
        model_name: Some(scope.model_name.clone()),
        subagent_enabled: false,
        include_upload_tool: false,
        agent: AgentRun { available_skills: scope.skills.clone(), ..Default::default() },
    }
}

#[async_trait]
impl SubagentHost for Toolhost {
    async fn subagent_tools(
        &self,
        scope: &SubagentScope,
        thread_id: &str,
        state: &ThreadState,
    ) -> Result<SubagentToolset, String> {
        let req = subagent_request(scope);
        let assembly = self.get_available_tools(&req).await;
        let tools = self.model_tools_with_state(&req, thread_id, state.clone()).await.map_err(|e| e.to_string())?;
        Ok(SubagentToolset {
            tools,
            deferred_prompt: assembly.deferred.as_ref().map(|d| d.setup.prompt_section()),
            skills_prompt: self.subagent_skills_prompt(scope),
        })
    }

    async fn run_tool_calls(
        &self,
        scope: &SubagentScope,
        thread_id: &str,
        state: &mut ThreadState,
        calls: Vec<toolhost_subagents::ToolCall>,
    ) -> Result<Vec<ToolOutcome>, String> {
        let req = subagent_request(scope);
        let calls = calls.into_iter().map(|c| (c.name, c.args, Some(c.id))).collect();
        let results = self.call_turn_with_state(&req, thread_id, state, calls).await.map_err(|e| e.to_string())?;
        Ok(results.into_iter().map(|r| r.outcome).collect())
    }
}

impl Toolhost {
    /// `SubagentExecutor._load_skills` then `get_skills_prompt_section`: the enabled skills the
    /// subagent's allowlist keeps (`[]`: none), as its `<skill_system>` section; `None` when it
    /// has none.
    fn subagent_skills_prompt(&self, scope: &SubagentScope) -> Option<String> {
        if scope.skills.as_ref().is_some_and(Vec::is_empty) {
            return None;
        }
        let registry = self.skill_registry()?;
        let available: BTreeSet<String> = registry
            .skills
            .iter()
            .filter(|s| s.enabled && scope.skills.as_ref().is_none_or(|allowed| allowed.iter().any(|a| a == s.name())))
            .map(|s| s.name().to_string())
            .collect();
        if available.is_empty() {
            return None;
        }
        let section = toolhost_skills::prompt::skills_prompt_section(
            &registry,
            Some(&available),
            self.config().skill_evolution.enabled,
        );
        (!section.is_empty()).then_some(section)
    }
}

/// The run's skill allowlist as the skill policy takes it.
pub(crate) fn skill_allowlist(req: &AssemblyRequest) -> Option<BTreeSet<String>> {
    req.agent.available_skills.as_ref().map(|s| s.iter().cloned().collect())
}

/// A custom agent applied to `req`: its `tool_groups` restrict config tools, its `model` decides
/// `view_image` (a model the config does not have falls back to the first, as DeerFlow's
/// `_resolve_model_name` does, with a warning), its `skills` the skill policy, and the run gets
/// `update_agent`. A model already in `req` wins over the agent's, as a request's model does in
/// DeerFlow. Returns the warnings.
pub(crate) fn apply_agent(
    config: &AppConfig,
    data_dir: &Path,
    name: &str,
    req: &mut AssemblyRequest,
) -> Result<Vec<String>, agents::AgentError> {
    let agent = agents::load_agent(&req.agent.agent_store(data_dir), name)?;
    let mut warnings = Vec::new();
    req.groups = agent.tool_groups.clone();
    if req.model_name.is_none() {
        req.model_name = match agent.model {
            Some(m) if config.models.iter().any(|c| c.name == m) => Some(m),
            Some(m) => {
                warnings
                    .push(format!("agent '{name}': model '{m}' not found in config; fallback to the default model"));
                None
            }
            None => None,
        };
    }
    req.agent.agent_name = Some(name.to_string());
    req.agent.available_skills = agent.skills;
    Ok(warnings)
}
