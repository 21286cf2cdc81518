//! DeerFlow's builtin tools, natively: `present_files`, `ask_clarification` (with the
//! ClarificationMiddleware interception the host pipeline calls), `view_image`,
//! `list_uploaded_files`, `write_todos`, `setup_agent` and `update_agent`.
//!
//! Names, model-visible schemas and descriptions come from `data/tool_specs.json`, which
//! LangChain generated from DeerFlow's own signatures and docstrings (see
//! `data/gen_tool_specs.py`); outputs and error strings follow DeerFlow's code.

pub mod agents;
pub mod clarification;
pub mod present_files;
pub mod pyjson;
pub mod todos;
pub mod uploads;
pub mod view_image;

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

/// DeerFlow's `PermissionError("Access denied: path traversal detected")`.
pub const TRAVERSAL: &str = "Access denied: path traversal detected";

use serde_json::Value;
use toolhost_core::{Tool, ToolOutcome, ToolSource, ToolSpec};

pub use agents::{AgentStore, SetupAgentTool, UpdateAgentTool};
pub use clarification::{AskClarificationTool, Clarification};
pub use present_files::PresentFilesTool;
pub use todos::WriteTodosTool;
pub use uploads::ListUploadedFilesTool;
pub use view_image::ViewImageTool;

/// What the builtins need from the host besides the per-call [`toolhost_core::CallContext`]:
/// DeerFlow reads these from `runtime.context` and the app config.
#[derive(Debug, Clone, Default)]
pub struct BuiltinsConfig {
    /// The custom agents of the current user: `<agents_dir>/<name>/{config.yaml,SOUL.md}`
    /// (DeerFlow's `{base_dir}/users/{user_id}/agents`).
    pub agents_dir: PathBuf,
    /// Where `setup_agent` writes the default agent's `SOUL.md` when the run has no agent name
    /// (DeerFlow's `base_dir`).
    pub base_dir: PathBuf,
    /// `runtime.context["agent_name"]`: the custom agent being created (`setup_agent`) or
    /// updated (`update_agent`).
    pub agent_name: Option<String>,
    /// `runtime.context["channel_name"]`; `update_agent` refuses to run on `github`.
    pub channel_name: Option<String>,
    /// The `models[].name` of config.yaml; `update_agent(model=…)` must name one of them.
    pub model_names: Vec<String>,
    /// `runtime.context["disable_clarification"]`: `ask_clarification` tells the agent to go on
    /// instead of ending the run.
    pub disable_clarification: bool,
}

/// Which conditional builtins to build; the lead decides from the model and the run
/// (DeerFlow: `supports_vision`, plan mode, bootstrap, custom agent).
#[derive(Debug, Clone, Copy, Default)]
pub struct BuiltinSelection {
    pub view_image: bool,
    pub write_todos: bool,
    pub setup_agent: bool,
    pub update_agent: bool,
}

/// The builtins this crate owns, in DeerFlow's `BUILTIN_TOOLS` order (`present_files`,
/// `ask_clarification`, `list_uploaded_files`, `view_image`), followed by the lead-agent tools
/// `setup_agent`, `update_agent` and the plan-mode `write_todos` when selected. The tools of
/// other crates (`review_skill_package`, background tasks, `skill_manage`, `task`) slot in
/// between by name.
pub fn builtin_tools(config: &BuiltinsConfig, select: BuiltinSelection) -> Vec<Arc<dyn Tool>> {
    let mut tools: Vec<Arc<dyn Tool>> = vec![
        Arc::new(PresentFilesTool::new()),
        Arc::new(AskClarificationTool::new(config.disable_clarification)),
        Arc::new(ListUploadedFilesTool::new()),
    ];
    if select.view_image {
        tools.push(Arc::new(ViewImageTool::new()));
    }
    let store = AgentStore::new(config.agents_dir.clone(), config.base_dir.clone());
    if select.setup_agent {
        tools.push(Arc::new(SetupAgentTool::new(store.clone(), config.agent_name.clone())));
    }
    if select.update_agent {
        tools.push(Arc::new(UpdateAgentTool::new(
            store,
            config.agent_name.clone(),
            config.channel_name.clone(),
            config.model_names.clone(),
        )));
    }
    if select.write_todos {
        tools.push(Arc::new(WriteTodosTool::new()));
    }
    tools
}

static SPECS: OnceLock<Value> = OnceLock::new();

/// The model-visible spec of builtin `name` as DeerFlow presents it.
///
/// # Panics
/// Only if `data/tool_specs.json`, compiled into the crate, lacks `name` — a build defect that
/// the unit tests catch, never reachable from input.
pub fn builtin_spec(name: &str) -> ToolSpec {
    let specs = SPECS.get_or_init(|| {
        serde_json::from_str(include_str!("../data/tool_specs.json")).expect("embedded tool_specs.json is JSON")
    });
    let entry = specs.get(name).unwrap_or_else(|| panic!("embedded tool_specs.json has no entry for {name}"));
    ToolSpec {
        name: name.to_string(),
        description: entry["description"].as_str().unwrap_or_default().to_string(),
        parameters: entry["parameters"].clone(),
        group: None,
        source: ToolSource::Builtin,
    }
}

/// The error a builtin answers when its arguments do not fit its schema (DeerFlow's pydantic
/// validation); names the tool and the offending argument.
pub(crate) fn invalid_args(tool: &str, detail: impl std::fmt::Display) -> ToolOutcome {
    ToolOutcome::error(format!("Error: Invalid arguments for {tool}: {detail}"))
}

/// The arguments as an object, or the error outcome naming the tool.
pub(crate) fn args_object<'a>(
    tool: &str,
    args: &'a Value,
) -> Result<&'a serde_json::Map<String, Value>, Box<ToolOutcome>> {
    args.as_object().ok_or_else(|| Box::new(invalid_args(tool, format!("expected a JSON object, got {args}"))))
}

#[cfg(test)]
pub(crate) mod testutil {
    use std::sync::Arc;

    use toolhost_core::{CallContext, ThreadFs, ThreadState};

    /// A fresh thread under a temp dir, with its directories created.
    pub fn thread() -> (tempfile::TempDir, CallContext) {
        let dir = tempfile::tempdir().expect("tempdir");
        let fs = ThreadFs::open(dir.path(), "thread-1").expect("thread fs");
        fs.ensure_tool_dirs().expect("thread dirs");
        let ctx = CallContext::new(Arc::new(fs), "call-1", Arc::new(ThreadState::default()));
        (dir, ctx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use toolhost_core::StateUpdate;

    /// Tool calls of one model turn run concurrently but their updates merge in call order.
    #[tokio::test]
    async fn concurrent_calls_merge_in_call_order() {
        let (_dir, ctx) = testutil::thread();
        std::fs::write(ctx.paths().workspace().join("i.gif"), b"GIF89a..").unwrap();
        let present = PresentFilesTool::new();
        let view = ViewImageTool::new();
        let todos = WriteTodosTool::new();
        let (a, b, c, d, e) = tokio::join!(
            present.call(&ctx, json!({"filepaths": ["/mnt/user-data/outputs/b.md", "/mnt/user-data/outputs/a.md"]})),
            view.call(&ctx, json!({"image_path": "/mnt/user-data/workspace/i.gif"})),
            present.call(&ctx, json!({"filepaths": ["/mnt/user-data/outputs/c.md", "/mnt/user-data/outputs/b.md"]})),
            todos.call(&ctx, json!({"todos": [{"content": "x", "status": "pending"}]})),
            present.call(&ctx, json!({"filepaths": ["/mnt/user-data/workspace/nope.md"]})),
        );
        assert!(e.is_error() && e.update.is_empty(), "a failed call writes nothing");
        let updates: Vec<StateUpdate> = [a, b, c, d, e].into_iter().map(|o| o.update).collect();
        let mut state =
            toolhost_core::ThreadState { artifacts: vec!["/mnt/user-data/outputs/z.md".into()], ..Default::default() };
        assert!(state.apply_all(&updates).is_empty());
        assert_eq!(
            state.artifacts,
            [
                "/mnt/user-data/outputs/z.md",
                "/mnt/user-data/outputs/b.md",
                "/mnt/user-data/outputs/a.md",
                "/mnt/user-data/outputs/c.md"
            ]
        );
        assert!(state.viewed_images.contains_key("/mnt/user-data/workspace/i.gif"));
        assert_eq!(state.todos, Some(json!([{"content": "x", "status": "pending"}])));
    }

    #[test]
    fn every_builtin_has_a_spec_without_injected_params() {
        let config = BuiltinsConfig::default();
        let all = BuiltinSelection { view_image: true, write_todos: true, setup_agent: true, update_agent: true };
        let names: Vec<String> = builtin_tools(&config, all).iter().map(|t| t.spec().name.clone()).collect();
        assert_eq!(
            names,
            [
                "present_files",
                "ask_clarification",
                "list_uploaded_files",
                "view_image",
                "setup_agent",
                "update_agent",
                "write_todos"
            ]
        );
        for tool in builtin_tools(&config, all) {
            let spec = tool.spec();
            assert!(!spec.description.is_empty(), "{}", spec.name);
            assert_eq!(spec.parameters["type"], "object", "{}", spec.name);
            let props = spec.parameters["properties"].as_object().expect("properties");
            for hidden in ["runtime", "tool_call_id", "config"] {
                assert!(!props.contains_key(hidden), "{} exposes {hidden}", spec.name);
            }
            assert_eq!(spec.source, ToolSource::Builtin);
        }
        let minimal: Vec<String> =
            builtin_tools(&config, BuiltinSelection::default()).iter().map(|t| t.spec().name.clone()).collect();
        assert_eq!(minimal, ["present_files", "ask_clarification", "list_uploaded_files"]);
    }
}
