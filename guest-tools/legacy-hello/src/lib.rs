//! A `toolhost:tool@0.1.0` component, built straight from `wit/v0.1.0` with wit-bindgen and no
//! SDK, the way a tool compiled before 0.2.0 looks to the host. Test-only: it shows that such a
//! component loads and runs unchanged next to 0.2.0 ones — its sandbox settings arrive as the JSON
//! string 0.1.0 defines, its result is one string, its state update is 0.1.0's record.

wit_bindgen::generate!({
    world: "tool-component",
    path: "../../wit/v0.1.0",
});

use exports::toolhost::tool::tool::Guest;
use serde_json::Value;
use toolhost::tool::host;
use toolhost::tool::types::{CallContext, CallError, StateUpdate, ToolResult, ToolSpec};

struct Legacy;

fn spec(name: &str, description: &str, parameters: Value) -> ToolSpec {
    ToolSpec { name: name.into(), description: description.into(), parameters: parameters.to_string() }
}

fn text(content: String, is_error: bool) -> ToolResult {
    ToolResult { content, is_error, update: None }
}

impl Guest for Legacy {
    fn list_tools() -> Vec<ToolSpec> {
        vec![
            spec(
                "legacy_hello",
                "Greet someone by name (a toolhost:tool@0.1.0 component).",
                serde_json::json!({"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}),
            ),
            spec(
                "legacy_sandbox",
                "Return the sandbox settings exactly as the host sent them.",
                serde_json::json!({"type": "object", "properties": {}}),
            ),
            spec(
                "legacy_todos",
                "Replace the todo list (a 0.1.0 state update).",
                serde_json::json!({"type": "object", "properties": {"todos": {"type": "array"}}, "required": ["todos"]}),
            ),
        ]
    }

    fn call(ctx: CallContext, name: String, args: String) -> Result<ToolResult, CallError> {
        let args: Value = serde_json::from_str(&args).map_err(|e| CallError::InvalidArguments(e.to_string()))?;
        match name.as_str() {
            "legacy_hello" => {
                let who = args.get("name").and_then(Value::as_str).unwrap_or("");
                if who.trim().is_empty() {
                    return Ok(text("Error: name must not be empty".into(), true));
                }
                let config: Value = serde_json::from_str(&ctx.config).unwrap_or(Value::Null);
                let greeting = config.get("greeting").and_then(Value::as_str).unwrap_or("Hello");
                host::log(host::Level::Info, &format!("legacy_hello greets {who}"));
                Ok(text(format!("{greeting}, {who}. (toolhost:tool@0.1.0)"), false))
            }
            "legacy_sandbox" => Ok(text(ctx.sandbox, false)),
            "legacy_todos" => {
                let todos = args.get("todos").cloned().unwrap_or(Value::Null);
                let update = StateUpdate { artifacts: None, viewed_images: None, todos: Some(todos.to_string()) };
                Ok(ToolResult { content: "Updated todo list".into(), is_error: false, update: Some(update) })
            }
            _ => Err(CallError::UnknownTool(name)),
        }
    }
}

export!(Legacy);
