//! SandboxAuditMiddleware (spec §6), the outermost layer: every `bash` call's command is
//! classified before anything runs. Block: the command never runs and the model gets DeerFlow's
//! message. Warn: it runs and the warning is appended. One structured log line per call.

use std::time::SystemTime;

use async_trait::async_trait;
use serde_json::Value;
use toolhost_audit::{audit_log_command, audit_value, BlockReason, Verdict};
use toolhost_core::{ContentPart, ToolOutcome};
use toolhost_py::datetime::utc_isoformat;

use super::{Middleware, Next, ToolRequest};

pub struct SandboxAuditMiddleware;

#[async_trait]
impl Middleware for SandboxAuditMiddleware {
    fn name(&self) -> &'static str {
        "sandbox_audit"
    }

    async fn wrap_call(&self, req: &ToolRequest<'_>, next: Next<'_>) -> ToolOutcome {
        if req.name != "bash" {
            return next.run(req).await;
        }
        let raw = req.args.get("command");
        let command = raw.and_then(Value::as_str).unwrap_or("");
        let verdict = audit_value(raw);
        log_verdict(&req.ctx.thread_id, command, &verdict);
        match verdict {
            Verdict::Block { message, .. } => ToolOutcome::error_of(toolhost_core::ErrorKind::Refused, message),
            Verdict::Warn { message } => {
                let mut outcome = next.run(req).await;
                apply_warning(&mut outcome, &message);
                outcome
            }
            Verdict::Pass => next.run(req).await,
        }
    }
}

/// Append DeerFlow's warning suffix: to the text of a plain-text result, as a new text part
/// otherwise; a result that updates state (DeerFlow's `Command`) is left as it is.
pub fn apply_warning(outcome: &mut ToolOutcome, suffix: &str) {
    if !outcome.update.is_empty() {
        return;
    }
    match outcome.content.as_mut_slice() {
        [ContentPart::Text { text }] => text.push_str(suffix),
        _ => outcome.content.push(ContentPart::Text { text: suffix.to_string() }),
    }
}

/// The audit log line DeerFlow writes for every bash call.
pub fn audit_record(thread_id: &str, command: &str, verdict: &Verdict) -> String {
    let thread_id = if thread_id.is_empty() { "unknown" } else { thread_id };
    // Python's `json.dumps(..., ensure_ascii=False)`: `", "` and `": "` separators.
    let field = |s: &str| serde_json::to_string(s).unwrap_or_else(|_| "\"\"".into());
    format!(
        "{{\"timestamp\": {}, \"thread_id\": {}, \"command\": {}, \"verdict\": {}}}",
        field(&utc_isoformat(SystemTime::now())),
        field(thread_id),
        field(&audit_log_command(command, verdict)),
        field(verdict.as_str())
    )
}

fn log_verdict(thread_id: &str, command: &str, verdict: &Verdict) {
    tracing::info!("[SandboxAudit] {}", audit_record(thread_id, command, verdict));
    match verdict {
        Verdict::Block { reason: BlockReason::InvalidInput(why), .. } => {
            tracing::warn!("[SandboxAudit] INVALID INPUT thread={thread_id} reason={why}")
        }
        Verdict::Block { reason, .. } => {
            tracing::warn!("[SandboxAudit] BLOCKED thread={thread_id} cmd={command:?} rule={reason:?}")
        }
        Verdict::Warn { .. } => tracing::warn!("[SandboxAudit] WARN (medium-risk) thread={thread_id} cmd={command:?}"),
        Verdict::Pass => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, UNIX_EPOCH};

    #[test]
    fn isoformat_matches_python() {
        assert_eq!(utc_isoformat(UNIX_EPOCH), "1970-01-01T00:00:00+00:00");
        // datetime.fromtimestamp(1772392245.5, UTC).isoformat()
        assert_eq!(
            utc_isoformat(UNIX_EPOCH + Duration::from_micros(1_772_392_245_500_000)),
            "2026-03-01T19:10:45.500000+00:00"
        );
    }

    #[test]
    fn warning_goes_to_text_or_a_new_part() {
        let mut text = ToolOutcome::text("ok");
        apply_warning(&mut text, "!W");
        assert_eq!(text.text_content(), "ok!W");
        let mut parts = ToolOutcome { content: vec![], ..ToolOutcome::default() };
        apply_warning(&mut parts, "!W");
        assert_eq!(parts.content, vec![ContentPart::Text { text: "!W".into() }]);
    }

    #[test]
    fn record_uses_python_separators() {
        let line = audit_record("", "ls", &Verdict::Pass);
        assert!(line.ends_with("\"thread_id\": \"unknown\", \"command\": \"ls\", \"verdict\": \"pass\"}"), "{line}");
    }
}
