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
    use toolhost_builtins::{SetupAgentTool, UpdateAgentTool, WriteTodosTool};
    let run = &req.agent;
    let store = run.agent_store(data_dir);
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
            let winner = assembly.explain.iter_mut().find(|e| e.included && e.name == name);
            let by = winner.map_or("assembled", |e| {
                e.reason.push_str(&format!("; shadows the lead agent tool '{name}'"));
                e.layer
            });
            assembly.explain.push(Explanation {
                name,
                layer: "agent",
                included: false,
                reason: format!("lead agent tool ({why}) shadowed by the {by} tool of that name, which comes first"),
            });
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

/// The names of every lead-agent tool, whatever the run: a config tool of one of these names
/// takes its place (`toolhost check` warns).
pub(crate) fn lead_agent_tool_names() -> Vec<String> {
    use toolhost_builtins::{AgentStore, SetupAgentTool, UpdateAgentTool, WriteTodosTool};
    let store = AgentStore::new(Default::default(), toolhost_builtins::agents::DEFAULT_USER_ID);
    let tools: [Arc<dyn Tool>; 3] = [
        Arc::new(SetupAgentTool::new(store.clone(), None)),
        Arc::new(UpdateAgentTool::new(store, None, None, Vec::new())),
        Arc::new(WriteTodosTool::new()),
    ];
    tools.iter().map(|t| t.spec().name.clone()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::assembly::AgentRun;

    #[test]
    fn a_config_tool_of_a_lead_agent_tools_name_takes_its_place_and_says_so() {
        assert_eq!(lead_agent_tool_names(), ["setup_agent", "update_agent", "write_todos"]);
        // Any tool named `write_todos` assembled before: the lead agent's own is not added.
        let mut a = Assembly::default();
        a.tools.push(Arc::new(toolhost_builtins::WriteTodosTool::new()));
        a.explain.push(Explanation {
            name: "write_todos".into(),
            layer: "config",
            included: true,
            reason: "config tool".into(),
        });
        let req = AssemblyRequest { agent: AgentRun { plan_mode: true, ..Default::default() }, ..Default::default() };
        add_lead_agent_tools(&AppConfig::default(), Path::new("/nonexistent"), &req, &mut a);
        assert_eq!(a.tools.len(), 1);
        assert_eq!(a.explain[0].reason, "config tool; shadows the lead agent tool 'write_todos'");
        let lost = &a.explain[1];
        assert!(!lost.included && lost.layer == "agent", "{lost:?}");
        assert_eq!(
            lost.reason,
            "lead agent tool (plan mode) shadowed by the config tool of that name, which comes first"
        );
    }
}
