//! The `task` result contract (DeerFlow `H/subagents/status_contract.py`): the model-visible text
//! for each terminal status and the `subagent_*` metadata DeerFlow stamps on the ToolMessage's
//! `additional_kwargs`.

use serde_json::{json, Map, Value};
use sha2::{Digest, Sha256};

pub const SUBAGENT_METADATA_TEXT_MAX_CHARS: usize = 2000;

/// `SubagentStatusValue`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SubagentStatus {
    Completed,
    Failed,
    Cancelled,
    TimedOut,
    PollingTimedOut,
}

impl SubagentStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Completed => "completed",
            Self::Failed => "failed",
            Self::Cancelled => "cancelled",
            Self::TimedOut => "timed_out",
            Self::PollingTimedOut => "polling_timed_out",
        }
    }
}

/// `SubagentStopReasonValue`: which guardrail cap ended the run early.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReason {
    TokenCapped,
    TurnCapped,
    LoopCapped,
}

impl StopReason {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::TokenCapped => "token_capped",
            Self::TurnCapped => "turn_capped",
            Self::LoopCapped => "loop_capped",
        }
    }

    fn label(self) -> &'static str {
        match self {
            Self::TokenCapped => "token budget",
            Self::TurnCapped => "turn budget",
            Self::LoopCapped => "repeated tool-call loop",
        }
    }
}

/// Cumulative token usage of a subagent run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TokenUsage {
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub total_tokens: u64,
}

impl TokenUsage {
    pub fn add(&mut self, other: TokenUsage) {
        self.input_tokens += other.input_tokens;
        self.output_tokens += other.output_tokens;
        self.total_tokens += other.total_tokens;
    }
}

/// How a subagent run ended.
#[derive(Debug, Clone, PartialEq)]
pub struct SubagentOutcome {
    pub status: SubagentStatus,
    pub result: Option<String>,
    pub error: Option<String>,
    pub stop_reason: Option<StopReason>,
    pub model_name: Option<String>,
    /// `None` when the provider reported no usage.
    pub usage: Option<TokenUsage>,
}

impl SubagentOutcome {
    /// A run that ended with `result`.
    pub fn completed(result: impl Into<String>) -> Self {
        Self { status: SubagentStatus::Completed, result: Some(result.into()), error: None, ..Self::failed("") }
    }

    /// A run its timeout of `seconds` ended (DeerFlow's text).
    pub fn timed_out(seconds: u64) -> Self {
        Self {
            status: SubagentStatus::TimedOut,
            error: Some(format!("Execution timed out after {seconds} seconds")),
            ..Self::failed("")
        }
    }

    pub fn failed(error: impl Into<String>) -> Self {
        Self {
            status: SubagentStatus::Failed,
            result: None,
            error: Some(error.into()),
            stop_reason: None,
            model_name: None,
            usage: None,
        }
    }

    /// `format_subagent_result_message`'s text.
    pub fn message(&self) -> String {
        format_result_message(self.status, self.result.as_deref(), self.error.as_deref(), self.stop_reason).0
    }

    /// `make_subagent_additional_kwargs`.
    pub fn additional_kwargs(&self) -> Map<String, Value> {
        let (_, metadata_error) =
            format_result_message(self.status, self.result.as_deref(), self.error.as_deref(), self.stop_reason);
        let mut out = Map::new();
        out.insert("subagent_status".into(), json!(self.status.as_str()));
        if self.status == SubagentStatus::Completed {
            if let Some(r) = self.result.as_deref().filter(|r| !r.trim().is_empty()) {
                out.insert("subagent_result_brief".into(), json!(bound_metadata_text(r)));
                out.insert("subagent_result_sha256".into(), json!(sha256_hex(r)));
            }
        }
        if self.status != SubagentStatus::Completed {
            if let Some(e) = metadata_error.as_deref().filter(|e| !e.trim().is_empty()) {
                out.insert("subagent_error".into(), json!(bound_metadata_text(e)));
            }
        }
        if let Some(s) = self.stop_reason {
            out.insert("subagent_stop_reason".into(), json!(s.as_str()));
        }
        if let Some(m) = self.model_name.as_deref().map(str::trim).filter(|m| !m.is_empty()) {
            out.insert("subagent_model_name".into(), json!(m));
        }
        if let Some(u) = self.usage {
            out.insert(
                "subagent_token_usage".into(),
                json!({"input_tokens": u.input_tokens, "output_tokens": u.output_tokens, "total_tokens": u.total_tokens}),
            );
        }
        out
    }
}

pub fn sha256_hex(text: &str) -> String {
    hex::encode(Sha256::digest(text.as_bytes()))
}

/// Python's `str.strip()` on whitespace.
fn py_strip(s: &str) -> &str {
    s.trim_matches(char::is_whitespace)
}

/// `_bound_metadata_text`: at most 2000 characters, head ⅔ + `\n...\n` + tail.
pub fn bound_metadata_text(text: &str) -> String {
    let cleaned: Vec<char> = py_strip(text).chars().collect();
    let cap = SUBAGENT_METADATA_TEXT_MAX_CHARS;
    if cleaned.len() <= cap {
        return cleaned.into_iter().collect();
    }
    let marker = "\n...\n";
    let head = cap * 2 / 3;
    let tail = cap - head - marker.len();
    let mut out: String = cleaned[..head].iter().collect();
    out.push_str(marker);
    out.extend(&cleaned[cleaned.len() - tail..]);
    out
}

/// `format_subagent_result_message`: the model-visible text and the normalized error.
pub fn format_result_message(
    status: SubagentStatus,
    result: Option<&str>,
    error: Option<&str>,
    stop_reason: Option<StopReason>,
) -> (String, Option<String>) {
    let result_text = result.unwrap_or("");
    let error_text = error.map(py_strip).unwrap_or("");
    let capped = stop_reason.map(StopReason::label);
    let or = |default: &str| if error_text.is_empty() { default.to_string() } else { error_text.to_string() };
    match status {
        SubagentStatus::Completed => match capped {
            Some(c) => (format!("Task Succeeded (capped: {c}). Result: {result_text}"), None),
            None => (format!("Task Succeeded. Result: {result_text}"), None),
        },
        SubagentStatus::Cancelled => {
            let detail = or("Task cancelled by user.");
            if detail == "Task cancelled by user." {
                (detail.clone(), Some(detail))
            } else {
                (format!("Task cancelled by user. Error: {detail}"), Some(detail))
            }
        }
        SubagentStatus::TimedOut => {
            let detail = or("Task timed out.");
            if detail == "Task timed out." {
                (detail.clone(), Some(detail))
            } else {
                (format!("Task timed out. Error: {detail}"), Some(detail))
            }
        }
        SubagentStatus::PollingTimedOut => {
            let detail = or("Task polling timed out.");
            (detail.clone(), Some(detail))
        }
        SubagentStatus::Failed => {
            let detail = or("Task failed.");
            let text = match (capped, detail == "Task failed.") {
                (Some(c), true) => format!("Task failed (capped: {c})."),
                (Some(c), false) => format!("Task failed (capped: {c}). Error: {detail}"),
                (None, true) => detail.clone(),
                (None, false) => format!("Task failed. Error: {detail}"),
            };
            (text, Some(detail))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages() {
        use StopReason::*;
        use SubagentStatus::*;
        let f = |s, r, e, c| format_result_message(s, r, e, c).0;
        assert_eq!(f(Completed, Some("ok"), None, None), "Task Succeeded. Result: ok");
        assert_eq!(
            f(Completed, Some("ok"), None, Some(TokenCapped)),
            "Task Succeeded (capped: token budget). Result: ok"
        );
        assert_eq!(f(Failed, None, Some("boom"), None), "Task failed. Error: boom");
        assert_eq!(
            f(Failed, None, Some("Reached max_turns=3"), Some(TurnCapped)),
            "Task failed (capped: turn budget). Error: Reached max_turns=3"
        );
        assert_eq!(f(Failed, None, None, Some(LoopCapped)), "Task failed (capped: repeated tool-call loop).");
        assert_eq!(f(Cancelled, None, None, None), "Task cancelled by user.");
        assert_eq!(
            f(Cancelled, None, Some("Cancelled by user"), None),
            "Task cancelled by user. Error: Cancelled by user"
        );
        assert_eq!(
            f(TimedOut, None, Some("Execution timed out after 5 seconds"), None),
            "Task timed out. Error: Execution timed out after 5 seconds"
        );
        assert_eq!(f(PollingTimedOut, None, Some("x"), None), "x");
    }

    #[test]
    fn metadata() {
        let long = "a".repeat(1500) + &"b".repeat(1500);
        let o = SubagentOutcome {
            status: SubagentStatus::Completed,
            result: Some(long.clone()),
            error: Some("ignored".into()),
            stop_reason: Some(StopReason::TurnCapped),
            model_name: Some(" m ".into()),
            usage: Some(TokenUsage { input_tokens: 1, output_tokens: 2, total_tokens: 3 }),
        };
        let k = o.additional_kwargs();
        let brief = k["subagent_result_brief"].as_str().unwrap();
        assert_eq!(brief.chars().count(), 2000);
        assert!(brief.starts_with(&"a".repeat(1333)) && brief.contains("\n...\n") && brief.ends_with(&"b".repeat(662)));
        assert_eq!(k["subagent_result_sha256"], sha256_hex(&long));
        assert_eq!(k["subagent_stop_reason"], "turn_capped");
        assert_eq!(k["subagent_model_name"], "m");
        assert_eq!(k["subagent_token_usage"]["total_tokens"], 3);
        assert!(!k.contains_key("subagent_error"));
        let k = SubagentOutcome::failed("  bad ").additional_kwargs();
        assert_eq!(k["subagent_status"], "failed");
        assert_eq!(k["subagent_error"], "bad");
        assert!(!k.contains_key("subagent_result_brief"));
    }
}
