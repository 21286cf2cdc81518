//! ClarificationMiddleware (spec §4): the innermost layer. An `ask_clarification` call never
//! reaches a tool: the middleware validates the options and fields, formats the question, builds
//! the `human_input` payload and ends the run.

use async_trait::async_trait;
use toolhost_core::ToolOutcome;

use super::{Middleware, Next, ToolRequest};

pub struct ClarificationMiddleware {
    /// `disable_clarification`: tell the agent to go on instead of ending the run.
    pub disable: bool,
}

#[async_trait]
impl Middleware for ClarificationMiddleware {
    fn name(&self) -> &'static str {
        "clarification"
    }

    async fn wrap_call(&self, req: &ToolRequest<'_>, next: Next<'_>) -> ToolOutcome {
        if req.name == toolhost_builtins::clarification::NAME && req.tool.is_some() {
            return toolhost_builtins::clarification::intercept(&req.ctx.tool_call_id, req.args, self.disable)
                .into_outcome();
        }
        next.run(req).await
    }
}
