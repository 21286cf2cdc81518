//! DeferredToolFilter (spec §8): with `tool_search.enabled`, MCP tools are hidden from the model
//! and refused at call time until `tool_search` promoted them in this thread under the current
//! `catalog_hash`. A hash mismatch hides everything again (fail closed).

use std::sync::Arc;

use async_trait::async_trait;
use toolhost_core::{Tool, ToolOutcome};

use super::{Middleware, ModelView, Next, ToolRequest};

pub struct DeferredToolFilterMiddleware;

#[async_trait]
impl Middleware for DeferredToolFilterMiddleware {
    fn name(&self) -> &'static str {
        "deferred_tool_filter"
    }

    async fn wrap_call(&self, req: &ToolRequest<'_>, next: Next<'_>) -> ToolOutcome {
        if let Some(d) = req.deferred {
            if let Some(refused) = d.filter.check_call(req.name, req.ctx.state.promoted.as_ref()) {
                return refused;
            }
        }
        next.run(req).await
    }

    fn filter_tools(&self, tools: Vec<Arc<dyn Tool>>, view: &ModelView<'_>) -> Vec<Arc<dyn Tool>> {
        match view.deferred {
            Some(d) => d.filter.visible_tools(&tools, view.ctx.state.promoted.as_ref()),
            None => tools,
        }
    }
}
