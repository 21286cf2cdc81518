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
pub mod todos;
pub mod uploads;
pub mod view_image;

use std::sync::OnceLock;

/// DeerFlow's `PermissionError("Access denied: path traversal detected")`.
pub const TRAVERSAL: &str = "Access denied: path traversal detected";

use serde_json::Value;
use toolhost_core::{ToolOutcome, ToolSource, ToolSpec};

pub use agents::{AgentStore, SetupAgentTool, UpdateAgentTool};
pub use clarification::{AskClarificationTool, Clarification};
pub use present_files::PresentFilesTool;
pub use todos::WriteTodosTool;
pub use uploads::ListUploadedFilesTool;
pub use view_image::ViewImageTool;

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
    ToolOutcome::error_of(
        toolhost_core::ErrorKind::InvalidArguments,
        format!("Error: Invalid arguments for {tool}: {detail}"),
    )
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
    use toolhost_core::{StateUpdate, Tool};

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
        use std::sync::Arc;

        // Every builtin this crate owns (the host's builtin list puts them in DeerFlow's order).
        let store = AgentStore::new(std::env::temp_dir(), agents::DEFAULT_USER_ID);
        let all: Vec<Arc<dyn Tool>> = vec![
            Arc::new(PresentFilesTool::new()),
            Arc::new(AskClarificationTool::new(false)),
            Arc::new(ListUploadedFilesTool::new()),
            Arc::new(ViewImageTool::new()),
            Arc::new(SetupAgentTool::new(store.clone(), None)),
            Arc::new(UpdateAgentTool::new(store, None, None, vec![])),
            Arc::new(WriteTodosTool::new()),
        ];
        let names: Vec<String> = all.iter().map(|t| t.spec().name.clone()).collect();
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
        for tool in &all {
            let spec = tool.spec();
            assert!(!spec.description.is_empty(), "{}", spec.name);
            assert_eq!(spec.parameters["type"], "object", "{}", spec.name);
            let props = spec.parameters["properties"].as_object().expect("properties");
            for hidden in ["runtime", "tool_call_id", "config"] {
                assert!(!props.contains_key(hidden), "{} exposes {hidden}", spec.name);
            }
            assert_eq!(spec.source, ToolSource::Builtin);
        }
    }
}
