//! The subagent's tool loop (DeerFlow `H/subagents/executor.py` with the guard middlewares its
//! runtime gets): call the model with the subagent's tools, run the tool calls it asks for
//! through the host, and stop on a final answer or one of DeerFlow's three caps — the turn
//! budget (`max_turns`, LangGraph's recursion limit), the token budget
//! (`TokenBudgetMiddleware`) and a repeated tool-call loop (`LoopDetectionMiddleware`).

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Mutex;

use serde_json::{json, Value};
use toolhost_core::{ContentPart, ThreadState, ToolOutcome};

use crate::config::TokenBudgetConfig;
use crate::model::{AssistantTurn, ChatClient};
use crate::registry::{tool_allowed, SubagentConfig};
use crate::status::{StopReason, SubagentOutcome, SubagentStatus, TokenUsage};
use crate::{SubagentHost, SubagentScope, ToolCall};

const LOOP_WARNING_MSG: &str = "[LOOP DETECTED] You are repeating the same tool calls. Stop calling tools and produce your final answer now. If you cannot complete the task, summarize what you accomplished so far.";
const LOOP_HARD_STOP_MSG: &str =
    "[FORCED STOP] Repeated tool calls exceeded the safety limit. Producing final answer with results collected so far.";

/// `LoopDetectionConfig`'s defaults.
#[derive(Debug, Clone)]
pub struct LoopDetectionConfig {
    pub enabled: bool,
    pub warn_threshold: usize,
    pub hard_limit: usize,
    pub window_size: usize,
    pub tool_freq_warn: usize,
    pub tool_freq_hard_limit: usize,
}

impl Default for LoopDetectionConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            warn_threshold: 3,
            hard_limit: 5,
            window_size: 20,
            tool_freq_warn: 30,
            tool_freq_hard_limit: 50,
        }
    }
}

/// One subagent run: its type, its model, the host that runs its tools and its limits.
pub struct SubagentRun<'a> {
    pub config: &'a SubagentConfig,
    pub client: &'a ChatClient,
    pub host: &'a dyn SubagentHost,
    pub scope: &'a SubagentScope,
    pub thread_id: &'a str,
    pub token_budget: TokenBudgetConfig,
    pub loop_detection: LoopDetectionConfig,
    /// Cumulative usage, readable while the run is going (a timed-out run still reports it).
    pub usage: &'a Mutex<Option<TokenUsage>>,
    /// Where the `task` call's progress goes (an MCP client's progress token): one report per
    /// subagent message.
    pub progress: Option<Progressor<'a>>,
    /// The subagent's model `supports_vision` (DeerFlow then adds ViewImageMiddleware, two
    /// more graph nodes per turn: see [`GraphSteps`]).
    pub vision: bool,
}

/// DeerFlow's subagent is a LangGraph graph (`create_agent` with
/// `build_subagent_runtime_middlewares`) in which every middleware hook is a node, and
/// `max_turns` is the run's `recursion_limit`: it counts graph steps, not model calls. The nodes
/// of the hooks present: before the agent ThreadData, Sandbox, SubagentDateContext (+ the loop
/// and token-budget guards); before each model call DurableContext (+ ViewImage); after it
/// SafetyFinishReason, DurableContext (+ the guards, + ViewImage); after the agent Sandbox (+
/// the guards). Checked against DeerFlow's own runs (`tests/conformance/subagent_turns.json`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GraphSteps {
    before_agent: u64,
    before_model: u64,
    after_model: u64,
    after_agent: u64,
}

impl GraphSteps {
    pub fn new(loop_detection: bool, token_budget: bool, vision: bool) -> Self {
        let guards = u64::from(loop_detection) + u64::from(token_budget);
        let vision = u64::from(vision);
        Self {
            before_agent: 3 + guards,
            before_model: 1 + vision,
            after_model: 2 + guards + vision,
            after_agent: 1 + guards,
        }
    }

    /// The step at which model call `n` (1-based) runs.
    fn model_step(&self, n: u64) -> u64 {
        let per_turn = 1 + self.after_model + 1 + self.before_model;
        self.before_agent + self.before_model + 1 + (n - 1) * per_turn
    }

    /// Model call `n` runs within `max_turns`.
    pub fn model_runs(&self, n: u64, max_turns: u64) -> bool {
        self.model_step(n) <= max_turns
    }

    /// The tool calls model call `n` asked for run within `max_turns`.
    pub fn tools_run(&self, n: u64, max_turns: u64) -> bool {
        self.model_step(n) + self.after_model < max_turns
    }

    /// A final answer at model call `n` ends the graph within `max_turns` (else LangGraph raises
    /// its recursion error and DeerFlow recovers the answer as a capped partial result).
    pub fn finishes(&self, n: u64, max_turns: u64) -> bool {
        self.model_step(n) + self.after_model + self.after_agent < max_turns
    }
}

/// The run's end before the status contract: `Ok(final text, stop reason)` or a failure.
enum End {
    Done(String, Option<StopReason>),
    TurnCapped,
    Failed(String),
}

impl SubagentRun<'_> {
    /// Run `task` to its end. Never panics on what the model or a tool sends.
    pub async fn execute(&self, task: &str) -> SubagentOutcome {
        let mut messages: Vec<Value> = Vec::new();
        let mut state = ThreadState::default();
        let mut last_ai_text: Option<String> = None;
        let end = self.run_loop(task, &mut messages, &mut state, &mut last_ai_text).await;
        let usage = *self.usage.lock().unwrap_or_else(|p| p.into_inner());
        let model_name = Some(self.client.model().name.clone());
        let (status, result, error, stop_reason) = match end {
            End::Done(text, stop) => {
                let text = if text.is_empty() { "No response generated".to_string() } else { text };
                (SubagentStatus::Completed, Some(text), None, stop)
            }
            // DeerFlow recovers the last assistant text as a partial result.
            End::TurnCapped => match last_ai_text.map(|t| t.trim().to_string()).filter(|t| !t.is_empty()) {
                Some(partial) => (SubagentStatus::Completed, Some(partial), None, Some(StopReason::TurnCapped)),
                None => (
                    SubagentStatus::Failed,
                    None,
                    Some(format!("Reached max_turns={}", self.config.max_turns)),
                    Some(StopReason::TurnCapped),
                ),
            },
            End::Failed(e) => (SubagentStatus::Failed, None, Some(e), None),
        };
        SubagentOutcome { status, result, error, stop_reason, model_name, usage }
    }

    async fn run_loop(
        &self,
        task: &str,
        messages: &mut Vec<Value>,
        state: &mut ThreadState,
        last_ai_text: &mut Option<String>,
    ) -> End {
        let first = match self.host.subagent_tools(self.scope, self.thread_id, state).await {
            Ok(t) => t,
            Err(e) => return End::Failed(e),
        };
        // `_build_initial_state`: the subagent's prompt, its skills, its deferred tools, as one
        // system message.
        let mut system: Vec<String> = Vec::new();
        if let Some(p) = self.config.system_prompt.as_deref().filter(|p| !p.is_empty()) {
            system.push(p.to_string());
        }
        if let Some(s) = first.skills_prompt.as_deref().filter(|s| !s.is_empty()) {
            system.push(s.to_string());
        }
        if let Some(d) = first.deferred_prompt.as_deref().filter(|d| !d.is_empty()) {
            system.push(d.to_string());
        }
        if !system.is_empty() {
            messages.push(json!({"role": "system", "content": system.join("\n\n")}));
        }
        // InputSanitizationMiddleware (the outermost model wrapper): the task is the genuine user
        // message, framed in DeerFlow's user-input markers for every model call.
        messages.push(json!({"role": "user", "content": toolhost_core::untrusted::frame_untrusted_text(task)}));

        let steps = GraphSteps::new(self.loop_detection.enabled, self.token_budget.enabled, self.vision);
        let max_turns = self.config.max_turns;
        let mut model_calls: u64 = 0;
        let mut guard = LoopGuard::new(self.loop_detection.clone());
        let mut budget = BudgetGuard::new(self.token_budget.clone());
        let mut pending_warnings: Vec<String> = Vec::new();
        let mut toolset = Some(first);
        loop {
            model_calls += 1;
            if !steps.model_runs(model_calls, max_turns) {
                return End::TurnCapped;
            }
            let tools = match toolset.take() {
                Some(t) => t,
                None => match self.host.subagent_tools(self.scope, self.thread_id, state).await {
                    Ok(t) => t,
                    Err(e) => return End::Failed(e),
                },
            };
            let visible: Vec<&toolhost_core::ToolSpec> =
                tools.tools.iter().filter(|t| t.name == "tool_search" || tool_allowed(self.config, &t.name)).collect();
            let functions: Vec<Value> = visible
                .iter()
                .map(|t| json!({"type": "function", "function": {"name": t.name, "description": t.description, "parameters": t.parameters}}))
                .collect();
            let mut request = messages.clone();
            if !pending_warnings.is_empty() {
                request.push(json!({"role": "user", "content": pending_warnings.join("\n\n")}));
                pending_warnings.clear();
            }
            let mut turn: AssistantTurn = match self.client.complete(&request, &functions).await {
                Ok(t) => t,
                Err(e) => return End::Failed(e.0),
            };
            if let Some(u) = turn.usage {
                let mut total = self.usage.lock().unwrap_or_else(|p| p.into_inner());
                total.get_or_insert_with(TokenUsage::default).add(u);
                budget.add(u);
            }
            let mut stop = None;
            if let Some((text, hard)) = budget.check() {
                if hard {
                    stop = Some((text, StopReason::TokenCapped));
                } else {
                    pending_warnings.push(text);
                }
            }
            if stop.is_none() && !turn.tool_calls.is_empty() {
                if let Some((text, hard)) = guard.check(&turn.tool_calls) {
                    if hard {
                        stop = Some((text, StopReason::LoopCapped));
                    } else {
                        pending_warnings.push(text);
                    }
                }
            }
            if let Some((text, _)) = &stop {
                // The hard stops strip the tool calls and append their note: the run ends here.
                turn.tool_calls.clear();
                turn.content = format!("{}\n\n{text}", turn.content);
            }
            messages.push(turn.to_message());
            *last_ai_text = Some(turn.content.clone());
            if let Some(p) = &self.progress {
                p.report(subagent_message(&turn.content, &turn.tool_calls));
            }
            if turn.tool_calls.is_empty() {
                if !steps.finishes(model_calls, max_turns) {
                    return End::TurnCapped;
                }
                return End::Done(turn.content, stop.map(|(_, r)| r));
            }
            if !steps.tools_run(model_calls, max_turns) {
                return End::TurnCapped;
            }
            let replies = self.run_tools(&turn, &visible, state).await;
            match replies {
                Ok(replies) => messages.extend(replies),
                Err(e) => return End::Failed(e),
            }
        }
    }

    /// Run one turn's tool calls: refused ones (not among the subagent's tools, arguments that
    /// are not JSON) get an error reply and never reach the host; the rest run through the
    /// host's pipeline together. Replies come back in call order.
    async fn run_tools(
        &self,
        turn: &AssistantTurn,
        visible: &[&toolhost_core::ToolSpec],
        state: &mut ThreadState,
    ) -> Result<Vec<Value>, String> {
        let names: Vec<&str> = visible.iter().map(|t| t.name.as_str()).collect();
        let mut replies: Vec<Option<String>> = vec![None; turn.tool_calls.len()];
        let mut batch: Vec<ToolCall> = Vec::new();
        let mut batch_index: Vec<usize> = Vec::new();
        for (i, call) in turn.tool_calls.iter().enumerate() {
            if !names.contains(&call.name.as_str()) {
                // LangGraph ToolNode's reply to a tool the model was not given.
                replies[i] =
                    Some(format!("Error: {} is not a valid tool, try one of [{}].", call.name, names.join(", ")));
                continue;
            }
            let args: Value = if call.arguments.trim().is_empty() {
                json!({})
            } else {
                match serde_json::from_str(&call.arguments) {
                    Ok(v) => v,
                    Err(e) => {
                        replies[i] = Some(format!(
                            "Error: the arguments of {} are not valid JSON ({e}); call it again with a JSON object.",
                            call.name
                        ));
                        continue;
                    }
                }
            };
            batch.push(ToolCall { name: call.name.clone(), args, id: call.id.clone() });
            batch_index.push(i);
        }
        if !batch.is_empty() {
            let outcomes = self.host.run_tool_calls(self.scope, self.thread_id, state, batch).await?;
            for (i, outcome) in batch_index.into_iter().zip(outcomes) {
                replies[i] = Some(reply_text(&outcome));
            }
        }
        Ok(turn
            .tool_calls
            .iter()
            .zip(replies)
            .map(|(call, text)| {
                json!({"role": "tool", "tool_call_id": call.id, "content": text.unwrap_or_else(|| "Error: no result".into())})
            })
            .collect())
    }
}

/// A tool outcome as the text of a tool message.
fn reply_text(o: &ToolOutcome) -> String {
    let mut out = String::new();
    for p in &o.content {
        match p {
            ContentPart::Text { text } => out.push_str(text),
            ContentPart::Image { mime_type, .. } => out.push_str(&format!("[image: {mime_type}]")),
            ContentPart::Audio { mime_type, .. } => out.push_str(&format!("[audio: {mime_type}]")),
            ContentPart::ResourceLink { uri, name, .. } => out.push_str(&format!("[link: {name} <{uri}>]")),
            ContentPart::Resource { resource } => out.push_str(&resource.to_string()),
        }
    }
    out
}

/// Python's `f"{n:,}"`.
fn grouped(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// `TokenBudgetMiddleware` for one run.
struct BudgetGuard {
    cfg: TokenBudgetConfig,
    used: TokenUsage,
    warned: bool,
}

impl BudgetGuard {
    fn new(cfg: TokenBudgetConfig) -> Self {
        Self { cfg, used: TokenUsage::default(), warned: false }
    }

    fn add(&mut self, u: TokenUsage) {
        self.used.input_tokens += u.input_tokens;
        self.used.output_tokens += u.output_tokens;
        self.used.total_tokens += u.input_tokens + u.output_tokens;
    }

    /// The text to append (hard stop) or inject (warning) after a model call.
    fn check(&mut self) -> Option<(String, bool)> {
        if !self.cfg.enabled || self.used.total_tokens == 0 {
            return None;
        }
        let mut fractions = vec![("total", self.used.total_tokens, self.cfg.max_tokens)];
        if let Some(m) = self.cfg.max_input_tokens {
            fractions.push(("input", self.used.input_tokens, m));
        }
        if let Some(m) = self.cfg.max_output_tokens {
            fractions.push(("output", self.used.output_tokens, m));
        }
        let mut best = (0.0f64, "", 0u64, 0u64);
        for (reason, used, limit) in fractions {
            let frac = used as f64 / limit.max(1) as f64;
            if frac > best.0 {
                best = (frac, reason, used, limit);
            }
        }
        let (frac, reason, used, limit) = best;
        if frac >= self.cfg.hard_stop_threshold {
            return Some((
                format!(
                    "[TOKEN BUDGET EXCEEDED] The {reason} token usage ({}) has exceeded the safety limit ({}). Producing final answer with results collected so far.",
                    grouped(used),
                    grouped(limit)
                ),
                true,
            ));
        }
        if frac >= self.cfg.warn_threshold && !self.warned {
            self.warned = true;
            return Some((
                format!(
                    "[TOKEN BUDGET WARNING] You have used {} of your {} {reason} token budget ({:.0}%). Wrap up your current work and produce a final answer. Avoid starting new tool calls unless absolutely necessary.",
                    grouped(used),
                    grouped(limit),
                    frac * 100.0
                ),
                false,
            ));
        }
        None
    }
}

/// `LoopDetectionMiddleware` for one run: identical tool-call sets within a window, and calls
/// per tool name.
struct LoopGuard {
    cfg: LoopDetectionConfig,
    history: VecDeque<String>,
    warned: HashSet<String>,
    per_tool: HashMap<String, usize>,
    tool_warned: HashSet<String>,
}

impl LoopGuard {
    fn new(cfg: LoopDetectionConfig) -> Self {
        Self {
            cfg,
            history: VecDeque::new(),
            warned: HashSet::new(),
            per_tool: HashMap::new(),
            tool_warned: HashSet::new(),
        }
    }

    fn check(&mut self, calls: &[crate::model::ToolCallRequest]) -> Option<(String, bool)> {
        if !self.cfg.enabled {
            return None;
        }
        let mut keys: Vec<String> = calls
            .iter()
            .map(|c| {
                let args = serde_json::from_str::<Value>(&c.arguments)
                    .map(|v| canonical(&v))
                    .unwrap_or_else(|_| c.arguments.clone());
                format!("{}:{args}", c.name)
            })
            .collect();
        keys.sort();
        let hash = crate::status::sha256_hex(&keys.join("\u{1f}"));
        self.history.push_back(hash.clone());
        while self.history.len() > self.cfg.window_size {
            self.history.pop_front();
        }
        self.warned.retain(|h| self.history.contains(h));
        let count = self.history.iter().filter(|h| **h == hash).count();
        if count >= self.cfg.hard_limit {
            return Some((LOOP_HARD_STOP_MSG.to_string(), true));
        }
        if count >= self.cfg.warn_threshold && self.warned.insert(hash) {
            return Some((LOOP_WARNING_MSG.to_string(), false));
        }
        for c in calls {
            if c.name.is_empty() {
                continue;
            }
            let n = self.per_tool.entry(c.name.clone()).or_default();
            *n += 1;
            let n = *n;
            if n >= self.cfg.tool_freq_hard_limit {
                return Some((
                    format!("[FORCED STOP] Tool {} called {n} times — exceeded the per-tool safety limit. Producing final answer with results collected so far.", c.name),
                    true,
                ));
            }
            if n >= self.cfg.tool_freq_warn && self.tool_warned.insert(c.name.clone()) {
                return Some((
                    format!("[LOOP DETECTED] You have called {} {n} times without producing a final answer. Stop calling tools and produce your final answer now. If you cannot complete the task, summarize what you accomplished so far.", c.name),
                    false,
                ));
            }
        }
        None
    }
}

/// JSON with object keys sorted, so argument order does not make two calls differ.
fn canonical(v: &Value) -> String {
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            let parts: Vec<String> =
                keys.into_iter().map(|k| format!("{}:{}", Value::String(k.clone()), canonical(&m[k]))).collect();
            format!("{{{}}}", parts.join(","))
        }
        Value::Array(a) => format!("[{}]", a.iter().map(canonical).collect::<Vec<_>>().join(",")),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ToolCallRequest;

    fn call(name: &str, args: &str) -> ToolCallRequest {
        ToolCallRequest { id: "x".into(), name: name.into(), arguments: args.into() }
    }

    #[test]
    fn loop_guard_warns_then_stops() {
        let mut g = LoopGuard::new(LoopDetectionConfig::default());
        let c = [call("ls", r#"{"path": "/a", "n": 1}"#)];
        let same = [call("ls", r#"{"n": 1, "path": "/a"}"#)];
        assert!(g.check(&c).is_none());
        assert!(g.check(&same).is_none());
        assert_eq!(g.check(&c), Some((LOOP_WARNING_MSG.to_string(), false)));
        assert!(g.check(&c).is_none(), "warned once");
        assert_eq!(g.check(&c), Some((LOOP_HARD_STOP_MSG.to_string(), true)));
    }

    #[test]
    fn budget_guard() {
        let mut b = BudgetGuard::new(TokenBudgetConfig {
            enabled: true,
            max_tokens: 1000,
            warn_threshold: 0.5,
            ..Default::default()
        });
        b.add(TokenUsage { input_tokens: 400, output_tokens: 200, total_tokens: 600 });
        let (w, hard) = b.check().unwrap();
        assert!(
            !hard && w.starts_with("[TOKEN BUDGET WARNING] You have used 600 of your 1,000 total token budget (60%).")
        );
        assert!(b.check().is_none());
        b.add(TokenUsage { input_tokens: 1000, output_tokens: 0, total_tokens: 1000 });
        let (s, hard) = b.check().unwrap();
        assert!(hard);
        assert_eq!(s, "[TOKEN BUDGET EXCEEDED] The total token usage (1,600) has exceeded the safety limit (1,000). Producing final answer with results collected so far.");
        assert_eq!(grouped(2_000_000), "2,000,000");
    }
}

/// Progress reports of one `task` call: the sink, the call they are about, and a counter so
/// that each report's `progress` is larger than the last (as MCP requires).
#[derive(Clone, Copy)]
pub struct Progressor<'a> {
    pub sink: &'a toolhost_core::ProgressSink,
    pub tool_call_id: &'a str,
    pub seq: &'a std::sync::atomic::AtomicU64,
}

impl Progressor<'_> {
    /// Report `message` (no total: a subagent's length is not known in advance).
    pub fn report(&self, message: String) {
        let n = self.seq.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.sink.report(toolhost_core::Progress {
            tool_call_id: self.tool_call_id.to_string(),
            progress: n as f64,
            total: None,
            message: Some(message),
        });
    }
}

/// A subagent message as a progress line: its text (first 200 characters) or the tools it calls.
fn subagent_message(content: &str, calls: &[crate::model::ToolCallRequest]) -> String {
    let text: String = content.trim().chars().take(200).collect();
    if !calls.is_empty() {
        let names: Vec<&str> = calls.iter().map(|c| c.name.as_str()).collect();
        if text.is_empty() {
            return format!("subagent calls {}", names.join(", "));
        }
        return format!("subagent: {text} (calls {})", names.join(", "));
    }
    format!("subagent: {text}")
}
