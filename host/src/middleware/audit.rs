//! SandboxAuditMiddleware (spec §6), the outermost layer: every `bash` call's command is
//! classified before anything runs. Block: the command never runs and the model gets DeerFlow's
//! message. Warn: it runs and the warning is appended. One structured log line per call.

use async_trait::async_trait;
use serde_json::Value;
use toolhost_audit::{audit_value, Verdict};
use toolhost_core::ToolOutcome;

use super::{Middleware, Next, ToolRequest};

pub struct SandboxAudit;

#[async_trait]
impl Middleware for SandboxAudit {
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
        tracing::info!(
            "[SandboxAudit] {}",
            toolhost_hostbash::audit::audit_record(&req.ctx.thread_id, command, &verdict)
        );
        match verdict {
            Verdict::Block { message, .. } => ToolOutcome::error(message),
            Verdict::Warn { message } => {
                let mut outcome = next.run(req).await;
                toolhost_hostbash::audit::apply_warning(&mut outcome, &message);
                outcome
            }
            Verdict::Pass => next.run(req).await,
        }
    }
}
