//! `SubagentLimitMiddleware` (DeerFlow `H/agents/middlewares/subagent_limit_middleware.py`): of
//! the `task` calls in one model response, keep at most `max_concurrent_subagents` (1..=4,
//! default 3) and no more than what is left of `max_total_per_run` (1..=50, default 6) after the
//! delegations the thread's ledger holds for the current run (all of them when the run has no
//! id); the rest never run.

use std::collections::BTreeSet;

use serde_json::Value;

use crate::config::{clamp_subagent_concurrency, clamp_total_subagents_per_run};

/// `_TOTAL_LIMIT_STOP_MSG`: appended to the model's message when the per-run total is spent.
pub const TOTAL_LIMIT_STOP_MSG: &str = "[SUBAGENT LIMIT REACHED] The subagent delegation limit for this run has been reached. Continue using the subagent results already collected, execute remaining simple work directly, or summarize the remaining work instead of launching more subagents.";

/// The limits of one run, clamped as DeerFlow clamps them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SubagentLimits {
    pub max_concurrent: usize,
    pub max_total: usize,
}

impl SubagentLimits {
    pub fn new(max_concurrent: i64, max_total: i64) -> Self {
        Self {
            max_concurrent: clamp_subagent_concurrency(max_concurrent),
            max_total: clamp_total_subagents_per_run(max_total),
        }
    }
}

/// Which calls of a model response are dropped.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Truncation {
    pub dropped: BTreeSet<usize>,
    /// The per-run total is spent (`remaining_total == 0`): the model is told so.
    pub total_exhausted: bool,
}

/// `_count_prior_delegations`: the ledger entries of run `run_id` (their `run_id`), by id; with no
/// run id, every entry of the thread.
pub fn prior_delegations(ledger: &[Value], run_id: Option<&str>) -> usize {
    ledger
        .iter()
        .filter(|e| run_id.is_none() || entry_run_id(e).as_deref() == run_id)
        .filter_map(|e| e.get("id").and_then(Value::as_str))
        .filter(|id| !id.is_empty())
        .collect::<BTreeSet<_>>()
        .len()
}

/// `_delegation_run_id`: `str(entry["run_id"])` when it is truthy.
fn entry_run_id(entry: &Value) -> Option<String> {
    match entry.get("run_id")? {
        Value::Null | Value::Bool(false) => None,
        Value::String(s) if s.is_empty() => None,
        Value::String(s) => Some(s.clone()),
        Value::Number(n) if n.as_f64() == Some(0.0) => None,
        other => Some(toolhost_py_str(other)),
    }
}

/// A non-string run id as Python's `str()` shows a JSON scalar (ledger entries are written by
/// the host with string ids; anything else is only compared).
fn toolhost_py_str(v: &Value) -> String {
    match v {
        Value::Bool(true) => "True".to_string(),
        other => other.to_string(),
    }
}

/// `_truncate_task_calls` over the tool names of one model response.
pub fn truncate_task_calls(names: &[&str], prior: usize, limits: SubagentLimits) -> Truncation {
    let task_indices: Vec<usize> = names.iter().enumerate().filter(|(_, n)| **n == "task").map(|(i, _)| i).collect();
    if task_indices.is_empty() {
        return Truncation::default();
    }
    let remaining = limits.max_total.saturating_sub(prior);
    let allowed = limits.max_concurrent.min(remaining);
    if task_indices.len() <= allowed {
        return Truncation::default();
    }
    Truncation { dropped: task_indices[allowed..].iter().copied().collect(), total_exhausted: remaining == 0 }
}

/// What a dropped call answers, since here every call of a turn gets a result.
pub fn dropped_message(limits: SubagentLimits, t: &Truncation) -> String {
    if t.total_exhausted {
        format!("Error: this task call was not run. {TOTAL_LIMIT_STOP_MSG}")
    } else {
        format!(
            "Error: this task call was not run: at most {} task calls run in parallel per response (max_concurrent_subagents) and at most {} per run (max_total_per_run).",
            limits.max_concurrent, limits.max_total
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn truncates_like_deerflow() {
        let l = SubagentLimits::new(2, 6);
        let names = ["task", "ls", "task", "task", "task"];
        let t = truncate_task_calls(&names, 0, l);
        assert_eq!(t.dropped, BTreeSet::from([3, 4]));
        assert!(!t.total_exhausted);
        let t = truncate_task_calls(&names, 5, l);
        assert_eq!(t.dropped, BTreeSet::from([2, 3, 4]));
        let t = truncate_task_calls(&names, 6, l);
        assert_eq!(t.dropped, BTreeSet::from([0, 2, 3, 4]));
        assert!(t.total_exhausted);
        assert_eq!(truncate_task_calls(&["task", "task"], 0, l), Truncation::default());
        assert_eq!(SubagentLimits::new(99, 0), SubagentLimits { max_concurrent: 4, max_total: 1 });
        assert_eq!(
            prior_delegations(&[json!({"id": "a"}), json!({"id": "a"}), json!({"id": "b"}), json!({})], None),
            2
        );
        let ledger = [
            json!({"id": "a", "run_id": "r1"}),
            json!({"id": "b", "run_id": "r2"}),
            json!({"id": "c"}),
            json!({"id": "d", "run_id": ""}),
        ];
        assert_eq!(prior_delegations(&ledger, Some("r1")), 1);
        assert_eq!(prior_delegations(&ledger, Some("r3")), 0);
        assert_eq!(prior_delegations(&ledger, None), 4);
    }
}
