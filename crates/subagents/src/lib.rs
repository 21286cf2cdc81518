//! DeerFlow's subagent system (`H/subagents/`, `H/tools/builtins/task_tool.py`,
//! `H/config/subagents_config.py`, `H/config/agents_config.py`): the `subagents:` config, the
//! subagent registry, custom agent configs, the `task` tool and the model loop it runs, the status
//! contract and the limits on parallel and total delegations.
//!
//! The loop runs inside toolhost: it calls an OpenAI-compatible chat-completions endpoint and
//! hands every tool call to the host through [`SubagentHost`], so a subagent's calls pass the
//! same middleware pipeline as the lead agent's.

pub mod agents;
pub mod config;
pub mod executor;
pub mod limit;
pub mod model;
pub mod registry;
pub mod status;
pub mod task;

use async_trait::async_trait;
use serde_json::Value;
use toolhost_core::{ThreadState, ToolOutcome, ToolSpec};

pub use config::SubagentsAppConfig;
pub use limit::SubagentLimits;
pub use status::{StopReason, SubagentOutcome, SubagentStatus, TokenUsage};
pub use task::{HostSlot, ParentRun, TaskSettings, TaskTool};

/// What a subagent's tools are assembled for: DeerFlow's
/// `get_available_tools(model_name, groups=<parent tool_groups>, subagent_enabled=False,
/// include_upload_tool=False)`, with the subagent's skill allowlist deciding the skill policy.
#[derive(Debug, Clone, PartialEq)]
pub struct SubagentScope {
    pub model_name: String,
    pub groups: Option<Vec<String>>,
    pub skills: Option<Vec<String>>,
}

/// The tools a subagent's model sees now, before its allow/deny lists.
#[derive(Debug, Clone, Default)]
pub struct SubagentToolset {
    pub tools: Vec<ToolSpec>,
    /// The `<available-deferred-tools>` section for its system prompt, when tools are deferred.
    pub deferred_prompt: Option<String>,
    /// The `<skill_system>` section for its system prompt (DeerFlow's
    /// `get_skills_prompt_section` over the subagent's enabled skills), when it has skills.
    pub skills_prompt: Option<String>,
}

/// One tool call of a model turn.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCall {
    pub name: String,
    pub args: Value,
    pub id: String,
}

/// What the host does for a subagent: assemble its tools and run its tool calls through the
/// pipeline, in the parent's thread (its files) with the subagent's own state (its promotions).
#[async_trait]
pub trait SubagentHost: Send + Sync {
    /// The tools of `scope` as the model sees them given `state` (deferred tools hidden until
    /// promoted there).
    async fn subagent_tools(
        &self,
        scope: &SubagentScope,
        thread_id: &str,
        state: &ThreadState,
    ) -> Result<SubagentToolset, String>;

    /// Run the calls of one model turn through the pipeline; their updates are merged into
    /// `state`. One outcome per call, in order.
    async fn run_tool_calls(
        &self,
        scope: &SubagentScope,
        thread_id: &str,
        state: &mut ThreadState,
        calls: Vec<ToolCall>,
    ) -> Result<Vec<ToolOutcome>, String>;
}
