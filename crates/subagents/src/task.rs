//! The `task` tool (DeerFlow `H/tools/builtins/task_tool.py`): resolve the subagent type, its
//! model and skills under the parent's, run the subagent's loop under its timeout, and answer with
//! the status contract's text, the `subagent_*` metadata and a delegation-ledger entry.

use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::{Duration, SystemTime};

use async_trait::async_trait;
use serde_json::{json, Map, Value};
use toolhost_core::{CallContext, StateUpdate, Tool, ToolOutcome, ToolSpec};

use crate::config::SubagentsAppConfig;
use crate::executor::{LoopDetectionConfig, Progressor, SubagentRun};
use crate::model::{ChatClient, ChatModel};
use crate::registry::{
    available_subagent_names, get_subagent_config, merge_skill_allowlists, resolve_model_name, SubagentConfig,
};
use crate::status::{bound_metadata_text, sha256_hex, SubagentOutcome, SubagentStatus};
use crate::{SubagentHost, SubagentScope, ToolCall};

/// `LOCAL_BASH_SUBAGENT_DISABLED_MESSAGE`.
pub const LOCAL_BASH_SUBAGENT_DISABLED_MESSAGE: &str = "Bash subagent is disabled for LocalSandboxProvider because host bash execution is not a secure sandbox boundary. Switch to AioSandboxProvider for isolated bash access, or set sandbox.allow_host_bash: true only in a fully trusted local environment.";

/// Where the task tool finds the host that runs a subagent's tools. The host fills it once it
/// is shared (`Arc`); the tool holds only a weak reference, so the host and its tools do not keep
/// each other alive.
#[derive(Clone, Default)]
pub struct HostSlot(Arc<OnceLock<Weak<dyn SubagentHost>>>);

impl HostSlot {
    pub fn bind(&self, host: Weak<dyn SubagentHost>) {
        let _ = self.0.set(host);
    }

    fn get(&self) -> Option<Arc<dyn SubagentHost>> {
        self.0.get().and_then(Weak::upgrade)
    }
}

/// An environment lookup (the host's environment, not necessarily the process's).
pub type EnvLookup = Arc<dyn Fn(&str) -> Option<String> + Send + Sync>;

/// What every `task` tool of a host shares.
pub struct TaskSettings {
    pub subagents: SubagentsAppConfig,
    /// The `models:` entries as written (with `$VAR`s expanded), in order.
    pub models: Vec<Map<String, Value>>,
    pub host_bash_allowed: bool,
    pub host: HostSlot,
    pub loop_detection: LoopDetectionConfig,
    /// Environment lookups ChatOpenAI makes (`OPENAI_API_KEY`, `OPENAI_BASE_URL`).
    /// The environment the host was given (this crate never reads the process's).
    pub env: EnvLookup,
}

/// The parent run's facts a subagent inherits (DeerFlow's run metadata).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ParentRun {
    pub model_name: Option<String>,
    pub tool_groups: Option<Vec<String>>,
    pub available_skills: Option<Vec<String>>,
}

/// `task`, bound to one parent run.
pub struct TaskTool {
    spec: ToolSpec,
    settings: Arc<TaskSettings>,
    parent: ParentRun,
}

impl TaskTool {
    pub fn new(settings: Arc<TaskSettings>, parent: ParentRun) -> Self {
        Self { spec: toolhost_builtins::builtin_spec("task"), settings, parent }
    }

    /// The same tool for another parent run.
    pub fn for_parent(&self, parent: ParentRun) -> Self {
        Self::new(self.settings.clone(), parent)
    }

    fn model_entry(&self, name: &str) -> Option<&Map<String, Value>> {
        self.settings.models.iter().find(|m| m.get("name").and_then(Value::as_str) == Some(name))
    }

    async fn run(
        &self,
        ctx: &CallContext,
        prompt: &str,
        subagent_type: &str,
        progress: Option<Progressor<'_>>,
    ) -> Result<SubagentOutcome, ToolOutcome> {
        let s = &self.settings;
        let Some(mut config) = get_subagent_config(subagent_type, &s.subagents) else {
            let available = available_subagent_names(&s.subagents, s.host_bash_allowed).join(", ");
            return Ok(SubagentOutcome::failed(format!(
                "Unknown subagent type '{subagent_type}'. Available: {available}"
            )));
        };
        if subagent_type == "bash" && !s.host_bash_allowed {
            return Ok(SubagentOutcome::failed(LOCAL_BASH_SUBAGENT_DISABLED_MESSAGE));
        }
        if let Some(parent_skills) = &self.parent.available_skills {
            config.skills = merge_skill_allowlists(Some(parent_skills), config.skills.as_deref());
        }
        if let Some(agent) = config.acp.clone() {
            return Ok(self.run_acp(ctx, &config, &agent, prompt, progress).await);
        }
        let first = s.models.first().and_then(|m| m.get("name")).and_then(Value::as_str);
        let model_name = resolve_model_name(&config, self.parent.model_name.as_deref(), first)
            .map_err(|e| ToolOutcome::raised("ValueError", e))?;
        let with_model = |mut o: SubagentOutcome| {
            o.model_name = Some(model_name.clone());
            o
        };
        let Some(entry) = self.model_entry(&model_name) else {
            return Ok(with_model(SubagentOutcome::failed(format!("Model {model_name} not found in config"))));
        };
        let client = match ChatModel::from_entry(entry, &*s.env)
            .map_err(|e| e.to_string())
            .and_then(|m| ChatClient::new(m).map_err(|e| e.0))
        {
            Ok(c) => c,
            Err(e) => return Ok(with_model(SubagentOutcome::failed(e))),
        };
        let Some(host) = s.host.get() else {
            return Ok(with_model(SubagentOutcome::failed(
                "subagents need a shared host: open it with Toolhost::into_shared so the task tool can run the subagent's tools",
            )));
        };
        let scope = SubagentScope {
            model_name: model_name.clone(),
            groups: self.parent.tool_groups.clone(),
            skills: config.skills.clone(),
        };
        let usage = Mutex::new(None);
        let run = SubagentRun {
            config: &config,
            client: &client,
            host: host.as_ref(),
            scope: &scope,
            thread_id: &ctx.thread_id,
            token_budget: s.subagents.token_budget_for(subagent_type),
            loop_detection: s.loop_detection.clone(),
            usage: &usage,
            progress,
            vision: entry.get("supports_vision").and_then(Value::as_bool).unwrap_or(false),
        };
        tracing::info!(subagent = subagent_type, model = %model_name, timeout = config.timeout_seconds, "task: starting subagent");
        // Dropping the loop on timeout drops its model request and its running tool calls.
        let timeout = Duration::from_secs(config.timeout_seconds);
        Ok(match tokio::time::timeout(timeout, run.execute(prompt)).await {
            Ok(outcome) => outcome,
            Err(_) => SubagentOutcome {
                model_name: Some(model_name.clone()),
                usage: *usage.lock().unwrap_or_else(|p| p.into_inner()),
                ..SubagentOutcome::timed_out(config.timeout_seconds)
            },
        })
    }
}

impl TaskTool {
    /// A subagent that is an ACP agent (`acp: NAME`): the prompt (after the subagent's system
    /// prompt) goes to `invoke_acp_agent` through the host's pipeline, in the parent's thread,
    /// under the subagent's timeout; its answer is the result, an `Error…` answer the failure.
    async fn run_acp(
        &self,
        ctx: &CallContext,
        config: &SubagentConfig,
        agent: &str,
        prompt: &str,
        progress: Option<Progressor<'_>>,
    ) -> SubagentOutcome {
        let Some(host) = self.settings.host.get() else {
            return SubagentOutcome::failed(
                "subagents need a shared host: open it with Toolhost::into_shared so the task tool can run the subagent",
            );
        };
        let first = self.settings.models.first().and_then(|m| m.get("name")).and_then(Value::as_str);
        let scope = SubagentScope {
            model_name: self.parent.model_name.as_deref().or(first).unwrap_or_default().to_string(),
            groups: self.parent.tool_groups.clone(),
            skills: config.skills.clone(),
        };
        let text = match config.system_prompt.as_deref().map(str::trim).filter(|p| !p.is_empty()) {
            Some(system) => format!("{system}\n\n{prompt}"),
            None => prompt.to_string(),
        };
        let call = ToolCall {
            name: "invoke_acp_agent".into(),
            args: json!({"agent": agent, "prompt": text}),
            id: format!("{}-acp", ctx.tool_call_id),
        };
        tracing::info!(subagent = %config.name, acp = agent, "task: starting ACP subagent");
        let mut state = toolhost_core::ThreadState::default();
        let timeout = Duration::from_secs(config.timeout_seconds);
        let run = host.run_tool_calls(&scope, &ctx.thread_id, &mut state, vec![call]);
        let outcome = match tokio::time::timeout(timeout, run).await {
            Err(_) => return SubagentOutcome::timed_out(config.timeout_seconds),
            Ok(Err(e)) => return SubagentOutcome::failed(e),
            Ok(Ok(mut outcomes)) => match outcomes.pop() {
                Some(o) => o,
                None => return SubagentOutcome::failed("the ACP agent gave no answer"),
            },
        };
        let answer = outcome.text_content();
        if let Some(p) = &progress {
            p.report(format!("ACP agent {agent} answered"));
        }
        if outcome.is_error() || answer.starts_with("Error") {
            return SubagentOutcome::failed(answer);
        }
        let answer = if answer.trim().is_empty() { "No response generated".to_string() } else { answer };
        SubagentOutcome::completed(answer)
    }
}

/// The delegation-ledger entry DeerFlow's DurableContextMiddleware derives from the call and
/// its result (`extract_delegations`).
fn ledger_entry(id: &str, description: &str, subagent_type: &str, o: &SubagentOutcome, run_id: Option<&str>) -> Value {
    let kwargs = o.additional_kwargs();
    let mut entry = json!({
        "id": id,
        "description": description.chars().take(200).collect::<String>(),
        "subagent_type": subagent_type,
        "status": o.status.as_str(),
        "created_at": toolhost_py::datetime::utc_isoformat(SystemTime::now()).replace("+00:00", "Z"),
    });
    if let Some(r) = kwargs.get("subagent_stop_reason") {
        entry["stop_reason"] = r.clone();
    }
    let status_only = match o.status {
        SubagentStatus::Completed => None,
        SubagentStatus::Failed => Some("Task failed."),
        SubagentStatus::Cancelled => Some("Task cancelled by user."),
        SubagentStatus::TimedOut => Some("Task timed out."),
        SubagentStatus::PollingTimedOut => Some("Task polling timed out."),
    };
    let text = kwargs
        .get("subagent_result_brief")
        .or_else(|| kwargs.get("subagent_error"))
        .and_then(Value::as_str)
        .map(str::to_string)
        .or_else(|| status_only.map(str::to_string));
    if let Some(text) = text {
        let sha = kwargs
            .get("subagent_result_sha256")
            .and_then(Value::as_str)
            .map(str::to_string)
            .unwrap_or_else(|| sha256_hex(&text));
        entry["result_brief"] = json!(bound_metadata_text(&text));
        entry["result_sha256"] = json!(sha);
        entry["result_ref"] = json!(id);
    }
    // DurableContextMiddleware's `_with_run_id`: a new delegation carries the run it began in.
    if let Some(run) = run_id {
        entry["run_id"] = json!(run);
    }
    entry
}

// The refusal is the tool's answer, returned once per call: its size does not matter.
#[allow(clippy::result_large_err)]
fn arg<'a>(args: &'a Value, key: &str) -> Result<&'a str, ToolOutcome> {
    match args.get(key) {
        Some(Value::String(s)) => Ok(s),
        Some(other) => {
            Err(ToolOutcome::error(format!("Error: Invalid arguments for task: {key} must be a string, got {other}")))
        }
        None => Err(ToolOutcome::error(format!("Error: Invalid arguments for task: {key} is required"))),
    }
}

#[async_trait]
impl Tool for TaskTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn call(&self, ctx: &CallContext, args: Value) -> ToolOutcome {
        let seq = std::sync::atomic::AtomicU64::new(0);
        let progress =
            ctx.progress.as_ref().map(|sink| Progressor { sink, tool_call_id: &ctx.tool_call_id, seq: &seq });
        #[allow(clippy::result_large_err)]
        let parsed = (|| {
            Ok::<_, ToolOutcome>((arg(&args, "description")?, arg(&args, "prompt")?, arg(&args, "subagent_type")?))
        })();
        let (description, prompt, subagent_type) = match parsed {
            Ok(p) => p,
            Err(o) => return o,
        };
        if let Some(p) = &progress {
            p.report(format!(
                "subagent {subagent_type} started: {}",
                description.chars().take(200).collect::<String>()
            ));
        }
        let outcome = match self.run(ctx, prompt, subagent_type, progress).await {
            Ok(o) => o,
            Err(raised) => return raised,
        };
        tracing::info!(subagent = subagent_type, status = outcome.status.as_str(), "task: finished");
        if let Some(p) = &progress {
            p.report(format!("subagent {subagent_type} {}", outcome.status.as_str()));
        }
        let entry = ledger_entry(&ctx.tool_call_id, description, subagent_type, &outcome, ctx.run_id.as_deref());
        let mut out = ToolOutcome::text(outcome.message())
            .with_update(StateUpdate { delegations: Some(vec![entry]), ..Default::default() });
        out.additional_kwargs = Some(outcome.additional_kwargs());
        out
    }
}
