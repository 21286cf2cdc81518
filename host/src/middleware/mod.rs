//! DeerFlow's agent middlewares, in two stages. The tool-call pipeline: the middlewares around
//! one tool call (`wrap_tool_call`), in DeerFlow's order, as one explicit list
//! ([`lead_agent_pipeline`]); the first layer is the outermost wrapper, and the same layers filter
//! the tool list the model sees. The turn stage ([`turn`]): the middlewares that see a model turn
//! as a whole (`before_model`/`after_model`: McpRouting, SubagentLimit, Clarification's sibling
//! drop), before any of its calls enters the pipeline.

mod clarification;
mod deferred_tool_filter;
mod disk_quota;
mod read_before_write;
mod sandbox_audit;
mod skill_tool_policy;
mod tool_error_handling;
mod tool_result_sanitization;
pub mod turn;

use std::collections::BTreeSet;
use std::sync::Arc;

use async_trait::async_trait;
use serde_json::Value;
use toolhost_core::{CallContext, Tool, ToolOutcome};

use crate::assembly::Deferred;

pub use clarification::ClarificationMiddleware;
pub use deferred_tool_filter::DeferredToolFilterMiddleware;
pub use disk_quota::ThreadDiskQuotaMiddleware;
pub use read_before_write::{ReadBeforeWriteConfig, ReadBeforeWriteMiddleware};
pub use sandbox_audit::SandboxAuditMiddleware;
pub use skill_tool_policy::SkillToolPolicyMiddleware;
pub use tool_error_handling::ToolErrorHandlingMiddleware;
pub use tool_result_sanitization::ToolResultSanitizationMiddleware;

/// The lead agent's tool-call chain, outermost first, in DeerFlow's order (spec §1.2):
/// ToolResultSanitization → SandboxAudit → ReadBeforeWrite → ToolErrorHandling → SkillToolPolicy
/// → DeferredToolFilter → Clarification. (McpRouting, SubagentLimit and Clarification's sibling
/// drop act on a whole model turn, not around a tool call: they are the turn stage,
/// [`turn::lead_agent_turn_stage`].) toolhost's own
/// ThreadDiskQuota layer, only when `sandbox.thread_disk_quota_mb` is set, sits right inside the
/// read-before-write gate, so a write the gate refuses never counts; `read_only_tools` names the
/// component tools it need not watch (see [`ThreadDiskQuotaMiddleware::new`]).
pub(crate) fn lead_agent_pipeline(
    read_before_write: &ReadBeforeWriteConfig,
    thread_disk_quota_mb: Option<u64>,
    read_only_tools: std::collections::HashSet<(String, String)>,
    skills: toolhost_skills::SkillStore,
    public: toolhost_skills::PublicSkillStates,
) -> Pipeline {
    let mut layers: Vec<Arc<dyn Middleware>> = vec![
        Arc::new(ToolResultSanitizationMiddleware),
        Arc::new(SandboxAuditMiddleware),
        Arc::new(ReadBeforeWriteMiddleware::new(read_before_write.enabled)),
        Arc::new(ToolErrorHandlingMiddleware),
        Arc::new(SkillToolPolicyMiddleware::new(skills, public)),
        Arc::new(DeferredToolFilterMiddleware),
        Arc::new(ClarificationMiddleware { disable: false }),
    ];
    if let Some(mb) = thread_disk_quota_mb {
        layers.insert(3, Arc::new(ThreadDiskQuotaMiddleware::new(mb, read_only_tools)));
    }
    Pipeline::new(layers)
}

/// One tool call travelling through the pipeline.
pub struct ToolRequest<'a> {
    pub name: &'a str,
    pub args: &'a Value,
    pub ctx: &'a CallContext,
    /// `None`: no tool of that name is available (the innermost layer answers so).
    pub tool: Option<&'a Arc<dyn Tool>>,
    /// Every tool of the run, in DeerFlow's order (LangGraph `ToolNode`'s tools, whose names an
    /// unknown tool's answer lists).
    pub tools: &'a [Arc<dyn Tool>],
    /// The assembly's deferred tools, when tool search is on.
    pub deferred: Option<&'a Deferred>,
    /// The run's skill allowlist (a custom agent's or subagent's `skills`); `None`: all.
    pub available_skills: Option<&'a BTreeSet<String>>,
}

/// What the model-view filters see besides the tools.
pub struct ModelView<'a> {
    pub ctx: &'a CallContext,
    pub deferred: Option<&'a Deferred>,
    /// The run's skill allowlist; `None`: all.
    pub available_skills: Option<&'a BTreeSet<String>>,
}

/// A middleware layer.
#[async_trait]
pub trait Middleware: Send + Sync {
    fn name(&self) -> &'static str;

    /// Wrap one call; call `next.run(req)` to go on inward.
    async fn wrap_call(&self, req: &ToolRequest<'_>, next: Next<'_>) -> ToolOutcome;

    /// Filter what the model sees; by default, everything.
    fn filter_tools(&self, tools: Vec<Arc<dyn Tool>>, _view: &ModelView<'_>) -> Vec<Arc<dyn Tool>> {
        tools
    }
}

/// The rest of the chain.
pub struct Next<'a> {
    rest: &'a [Arc<dyn Middleware>],
}

impl Next<'_> {
    pub async fn run(self, req: &ToolRequest<'_>) -> ToolOutcome {
        match self.rest.split_first() {
            Some((layer, rest)) => layer.wrap_call(req, Next { rest }).await,
            None => match req.tool {
                Some(tool) => tool.call(req.ctx, req.args.clone()).await,
                None => ToolOutcome::not_a_valid_tool(
                    req.name,
                    crate::assembly::tool_node_names(&req.tools.iter().map(|t| t.spec()).collect::<Vec<_>>()),
                ),
            },
        }
    }
}

/// The ordered chain.
#[derive(Clone, Default)]
pub struct Pipeline {
    layers: Vec<Arc<dyn Middleware>>,
}

impl Pipeline {
    /// Build from layers given outermost first.
    pub fn new(layers: Vec<Arc<dyn Middleware>>) -> Self {
        Self { layers }
    }

    /// The layer names, outermost first.
    pub fn layer_names(&self) -> Vec<&'static str> {
        self.layers.iter().map(|l| l.name()).collect()
    }

    pub async fn call(&self, req: &ToolRequest<'_>) -> ToolOutcome {
        Next { rest: &self.layers }.run(req).await
    }

    /// What the model sees: every layer's filter, outermost first.
    pub fn filter_tools(&self, mut tools: Vec<Arc<dyn Tool>>, view: &ModelView<'_>) -> Vec<Arc<dyn Tool>> {
        for l in &self.layers {
            tools = l.filter_tools(tools, view);
        }
        tools
    }
}
