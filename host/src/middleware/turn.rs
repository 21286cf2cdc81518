//! The turn stage: DeerFlow's middlewares that see a model turn as a whole — their `before_model`
//! and `after_model` hooks — where the call-level layers ([`super::Pipeline`]) see one call.
//! [`lead_agent_turn_stage`] lists them in DeerFlow's order (`build_middlewares`): McpRouting,
//! SubagentLimit, Clarification. As in LangChain's `create_agent`, `before_model` hooks run in
//! list order and `after_model` hooks in reverse list order.

use std::sync::Arc;

use async_trait::async_trait;
use toolhost_core::{StateUpdate, ThreadState, ToolOutcome};

use crate::assembly::{AssemblyRequest, Deferred, ToolLayer};
use crate::config::AppConfig;

/// One tool call of the model's response, as the turn stage sees it (its tool's name: what
/// DeerFlow's turn-level middlewares decide by).
#[derive(Debug, Clone, Copy)]
pub struct TurnCall<'a> {
    pub name: &'a str,
}

/// A model response's tool calls on their way to the tools (`after_model`).
pub struct Turn<'a> {
    /// The calls, in the model's order.
    pub calls: &'a [TurnCall<'a>],
    /// The thread's state before the turn.
    pub state: &'a ThreadState,
    /// The run the turn belongs to.
    pub req: &'a AssemblyRequest,
    /// For each call: the answer it gets instead of running, once a layer removed it. DeerFlow
    /// rewrites the model's message without the call; here every call of a turn gets an answer.
    pub dropped: Vec<Option<ToolOutcome>>,
}

impl<'a> Turn<'a> {
    /// The calls no layer has removed: their indices and names.
    pub fn kept(&self) -> Vec<(usize, &'a str)> {
        let calls: &'a [TurnCall<'a>] = self.calls;
        calls.iter().enumerate().filter(|(i, _)| self.dropped[*i].is_none()).map(|(i, c)| (i, c.name)).collect()
    }
}

/// What `before_model` sees: the user's latest message and the run's deferred tools.
pub struct BeforeModel<'a> {
    pub user_message: &'a str,
    /// The assembly's deferred tools, when tool search is on.
    pub deferred: Option<&'a Deferred>,
    /// The host's tool layers (MCP servers carry routing metadata).
    pub layers: &'a [Arc<dyn ToolLayer>],
}

/// A turn-level middleware.
#[async_trait]
pub trait TurnMiddleware: Send + Sync {
    fn name(&self) -> &'static str;

    /// Before the model is called: a state update to merge first (none by default).
    async fn before_model(&self, _view: &BeforeModel<'_>) -> Option<StateUpdate> {
        None
    }

    /// After the model answered, before any of its tool calls runs: remove calls from the turn.
    fn after_model(&self, _turn: &mut Turn<'_>) {}
}

/// The turn-level middlewares, in DeerFlow's list order.
#[derive(Clone, Default)]
pub struct TurnStage {
    layers: Vec<Arc<dyn TurnMiddleware>>,
}

impl TurnStage {
    pub fn new(layers: Vec<Arc<dyn TurnMiddleware>>) -> Self {
        Self { layers }
    }

    /// The layer names, in DeerFlow's list order.
    pub fn layer_names(&self) -> Vec<&'static str> {
        self.layers.iter().map(|l| l.name()).collect()
    }

    /// Every `before_model` hook, in list order; the updates to merge, in that order.
    pub async fn before_model(&self, view: &BeforeModel<'_>) -> Vec<StateUpdate> {
        let mut updates = Vec::new();
        for l in &self.layers {
            if let Some(u) = l.before_model(view).await {
                updates.push(u);
            }
        }
        updates
    }

    /// Every `after_model` hook, in reverse list order (LangChain chains `after_model` nodes
    /// last to first). Returns, for each call, the answer of a removed call.
    pub fn after_model(
        &self,
        calls: &[TurnCall<'_>],
        state: &ThreadState,
        req: &AssemblyRequest,
    ) -> Vec<Option<ToolOutcome>> {
        let mut turn = Turn { calls, state, req, dropped: vec![None; calls.len()] };
        for l in self.layers.iter().rev() {
            l.after_model(&mut turn);
        }
        turn.dropped
    }
}

/// The lead agent's turn stage in DeerFlow's order (`build_middlewares` appends
/// McpRoutingMiddleware before the deferred filter, SubagentLimitMiddleware after it, and
/// ClarificationMiddleware last).
pub(crate) fn lead_agent_turn_stage(config: &AppConfig) -> TurnStage {
    TurnStage::new(vec![
        Arc::new(McpRoutingMiddleware { top_k: config.tool_search.auto_promote_top_k }),
        Arc::new(SubagentLimitMiddleware { default_max_total: config.subagents.max_total_per_run }),
        Arc::new(ClarificationTurnMiddleware { disable: false }),
    ])
}

/// DeerFlow's McpRoutingMiddleware (`before_model`): promote the deferred MCP tools whose
/// routing keywords occur in the user's latest message — at most `tool_search.auto_promote_top_k`,
/// by priority — as if `tool_search` had selected them.
pub struct McpRoutingMiddleware {
    pub top_k: i64,
}

#[async_trait]
impl TurnMiddleware for McpRoutingMiddleware {
    fn name(&self) -> &'static str {
        "mcp_routing"
    }

    async fn before_model(&self, view: &BeforeModel<'_>) -> Option<StateUpdate> {
        let d = view.deferred?;
        let hash = d.setup.catalog_hash.as_deref()?;
        let mut metas = Vec::new();
        for layer in view.layers {
            metas.extend(layer.routing().await);
        }
        let index =
            toolhost_deferred::build_routing_index(metas.iter().map(|(n, m)| (n.as_str(), m)), &d.setup.deferred_names);
        let routing = toolhost_deferred::McpRouting::new(&index, hash, self.top_k);
        let message = toolhost_deferred::ChatMessage::Human(toolhost_deferred::HumanMessage {
            text: view.user_message.to_string(),
            ..Default::default()
        });
        routing.before_model(&[message])
    }
}

/// DeerFlow's SubagentLimitMiddleware (`after_model`): of a response's `task` calls, at most
/// `max_concurrent_subagents` run, and no more than what is left of the run's total after the
/// delegations the thread's ledger holds for this run (`AgentRun::run_id`; without a run id,
/// every delegation of the thread counts, as in DeerFlow).
pub struct SubagentLimitMiddleware {
    /// `subagents.max_total_per_run`, for a run that does not set `max_total_subagents`.
    pub default_max_total: i64,
}

impl TurnMiddleware for SubagentLimitMiddleware {
    fn name(&self) -> &'static str {
        "subagent_limit"
    }

    fn after_model(&self, turn: &mut Turn<'_>) {
        use toolhost_subagents::limit;
        let req = turn.req;
        if !req.subagent_enabled {
            return;
        }
        let kept = turn.kept();
        if !kept.iter().any(|(_, n)| *n == "task") {
            return;
        }
        let limits = limit::SubagentLimits::new(
            req.agent.max_concurrent_subagents.unwrap_or(toolhost_subagents::config::DEFAULT_MAX_CONCURRENT_SUBAGENTS),
            req.agent.max_total_subagents.unwrap_or(self.default_max_total),
        );
        let run_id = req.agent.run_id.as_deref();
        if run_id.is_none() {
            tracing::warn!("Subagent limit middleware received no run_id; counting all thread delegations as prior usage. Pass run_id in runtime context to enforce the total cap per run.");
        }
        let prior = limit::prior_delegations(&turn.state.delegations, run_id);
        let names: Vec<&str> = kept.iter().map(|(_, n)| *n).collect();
        let t = limit::truncate_task_calls(&names, prior, limits);
        if t.dropped.is_empty() {
            return;
        }
        tracing::warn!(
            "Truncated {} excess task tool call(s) from model response (concurrent limit: {}; total limit: {}; prior delegations: {})",
            t.dropped.len(),
            limits.max_concurrent,
            limits.max_total,
            prior
        );
        let text = limit::dropped_message(limits, &t);
        for k in &t.dropped {
            turn.dropped[kept[*k].0] = Some(ToolOutcome::error(text.clone()));
        }
    }
}

/// ClarificationMiddleware's `after_model` half: a response that batches `ask_clarification`
/// with other calls runs only the clarification, so nothing acts before the user answers (the
/// model calls the rest again afterwards). Not in DeerFlow f1f4af99, whose ToolNode runs the
/// siblings; its fix is DeerFlow PR #4908/#4934 (`_strip_sibling_tool_calls`, issue #4906) —
/// toolhost deviation, see `tests/conformance/README.md`. With clarification disabled nothing is
/// removed.
pub struct ClarificationTurnMiddleware {
    /// `disable_clarification`.
    pub disable: bool,
}

impl TurnMiddleware for ClarificationTurnMiddleware {
    fn name(&self) -> &'static str {
        "clarification"
    }

    fn after_model(&self, turn: &mut Turn<'_>) {
        use toolhost_builtins::clarification::{calls_to_keep, NAME};
        let kept = turn.kept();
        let names: Vec<&str> = kept.iter().map(|(_, n)| *n).collect();
        let keep = calls_to_keep(&names, self.disable);
        if keep.len() == names.len() {
            return;
        }
        for (k, (i, name)) in kept.iter().enumerate() {
            if !keep.contains(&k) {
                turn.dropped[*i] = Some(ToolOutcome::error(format!(
                    "Error: {name} was not run: this response also called {NAME}, so the user is asked first. Call {name} again once the user has answered, if it is still needed."
                )));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn config() -> AppConfig {
        AppConfig::default()
    }

    #[test]
    fn turn_layers_are_in_deerflow_order() {
        // DeerFlow's build_middlewares: McpRoutingMiddleware, …, SubagentLimitMiddleware, …,
        // ClarificationMiddleware (last).
        assert_eq!(lead_agent_turn_stage(&config()).layer_names(), ["mcp_routing", "subagent_limit", "clarification"]);
    }

    fn run(stage: &TurnStage, names: &[&str], req: &AssemblyRequest, state: &ThreadState) -> Vec<bool> {
        let calls: Vec<TurnCall> = names.iter().map(|n| TurnCall { name: n }).collect();
        stage.after_model(&calls, state, req).iter().map(Option::is_some).collect()
    }

    #[test]
    fn a_clarification_runs_alone_and_is_dropped_before_the_task_limit_counts() {
        let stage = lead_agent_turn_stage(&config());
        let req = AssemblyRequest { subagent_enabled: true, ..Default::default() };
        let state = ThreadState::default();
        assert_eq!(run(&stage, &["ask_clarification", "bash"], &req, &state), [false, true]);
        assert_eq!(
            run(&stage, &["bash", "ask_clarification", "ask_clarification"], &req, &state),
            [true, false, false]
        );
        assert_eq!(run(&stage, &["bash", "ls"], &req, &state), [false, false]);
        // Clarification (last in the list) runs first: the task calls are gone before the
        // subagent limit counts them.
        assert_eq!(
            run(&stage, &["task", "task", "task", "task", "ask_clarification"], &req, &state),
            [true, true, true, true, false]
        );
        // Without a clarification, the fourth task is over the concurrent limit of 3.
        assert_eq!(run(&stage, &["task", "task", "task", "task"], &req, &state), [false, false, false, true]);
    }

    #[test]
    fn the_total_cap_counts_this_runs_delegations_only() {
        let stage = lead_agent_turn_stage(&config());
        let state = ThreadState {
            delegations: (0..6).map(|i| json!({"id": format!("d{i}"), "run_id": "run-1"})).collect(),
            ..Default::default()
        };
        let run1 = AssemblyRequest {
            subagent_enabled: true,
            agent: crate::AgentRun { run_id: Some("run-1".into()), ..Default::default() },
            ..Default::default()
        };
        let run2 = AssemblyRequest {
            subagent_enabled: true,
            agent: crate::AgentRun { run_id: Some("run-2".into()), ..Default::default() },
            ..Default::default()
        };
        let no_run = AssemblyRequest { subagent_enabled: true, ..Default::default() };
        assert_eq!(run(&stage, &["task"], &run1, &state), [true]);
        assert_eq!(run(&stage, &["task"], &run2, &state), [false]);
        assert_eq!(run(&stage, &["task"], &no_run, &state), [true]);
    }
}
