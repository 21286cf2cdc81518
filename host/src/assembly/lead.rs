//! The lead agent's own tools, appended after assembly and never deferred (spec §1.1):
//! `setup_agent` when bootstrapping a custom agent, `update_agent` on a custom agent's run (not on
//! the `github` channel), `write_todos` in plan mode.

use std::path::Path;
use std::sync::Arc;

use toolhost_core::Tool;

use super::{Assembly, AssemblyRequest, Explanation};
use crate::config::AppConfig;

/// The lead agent's tools appended after assembly (spec §1.1); never deferred.
pub fn add_lead_agent_tools(config: &AppConfig, data_dir: &Path, req: &AssemblyRequest, assembly: &mut Assembly) {
    use toolhost_builtins::{AgentStore, SetupAgentTool, UpdateAgentTool, WriteTodosTool};
    let store = AgentStore::new(data_dir.join("agents"), data_dir.to_path_buf());
    let run = &req.agent;
    let mut extra: Vec<(Arc<dyn Tool>, &str)> = Vec::new();
    if run.bootstrap {
        extra.push((Arc::new(SetupAgentTool::new(store.clone(), run.agent_name.clone())), "bootstrap run"));
    } else if run.agent_name.is_some() && run.channel_name.as_deref() != Some("github") {
        let models = config.models.iter().map(|m| m.name.clone()).collect();
        extra.push((
            Arc::new(UpdateAgentTool::new(store, run.agent_name.clone(), run.channel_name.clone(), models)),
            "custom agent run",
        ));
    }
    if run.plan_mode {
        extra.push((Arc::new(WriteTodosTool::new()), "plan mode"));
    }
    for (tool, why) in extra {
        let name = tool.spec().name.clone();
        if assembly.tools.iter().any(|t| t.spec().name == name) {
            continue;
        }
        assembly.explain.push(Explanation {
            name,
            layer: "agent",
            included: true,
            reason: format!("lead agent tool ({why})"),
        });
        assembly.tools.push(tool);
    }
}
