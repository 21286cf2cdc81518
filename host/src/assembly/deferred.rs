//! DeerFlow's `assemble_deferred_tools` (spec §8): with `tool_search.enabled`, the MCP tools of an
//! assembly become deferred — hidden from the model until `tool_search` promotes them — and
//! `tool_search` joins the tools.

use std::sync::Arc;

use toolhost_core::Tool as _;

use super::{Assembly, Deferred, Explanation};
use crate::config::AppConfig;

/// `assemble_deferred_tools` (spec §8): with `tool_search.enabled` and MCP tools present, the MCP
/// tools become deferred and `tool_search` is added. If no deferred set can be built, MCP tools
/// are left out rather than bound with their schemas (DeerFlow's fail-closed rule).
pub fn defer(config: &AppConfig, assembly: &mut Assembly) {
    if !config.tool_search.enabled {
        return;
    }
    let tools = std::mem::take(&mut assembly.tools);
    match toolhost_deferred::assemble_deferred_tools(tools.clone(), true) {
        Ok((tools, setup)) => {
            assembly.tools = tools;
            if setup.is_empty() {
                return;
            }
            for e in assembly.explain.iter_mut().filter(|e| e.included && setup.deferred_names.contains(&e.name)) {
                e.reason.push_str("; deferred: hidden until tool_search promotes it");
            }
            if let Some(ts) = &setup.tool_search {
                assembly.explain.push(Explanation {
                    name: ts.spec().name.clone(),
                    layer: "deferred",
                    included: true,
                    reason: format!("tool_search over {} deferred MCP tool(s)", setup.deferred_names.len()),
                });
            }
            let filter = setup.filter();
            assembly.deferred = Some(Arc::new(Deferred { setup, filter }));
        }
        Err(e) => {
            let w = format!("tool_search: {e}; MCP tools left out");
            tracing::warn!("{w}");
            assembly.warnings.push(w);
            assembly.tools = tools.into_iter().filter(|t| !t.spec().is_mcp()).collect();
        }
    }
}
