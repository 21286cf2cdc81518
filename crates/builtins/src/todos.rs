//! `write_todos` (LangChain's `TodoListMiddleware` tool with DeerFlow's plan-mode description):
//! replaces the thread's `todos` with the given list and echoes it back in Python's repr.

use async_trait::async_trait;
use serde_json::{json, Value};
use toolhost_core::state::py_repr;
use toolhost_core::{CallContext, StateUpdate, Tool, ToolOutcome, ToolSpec};

use crate::{args_object, builtin_spec, invalid_args};

const NAME: &str = "write_todos";
const STATUSES: [&str; 3] = ["pending", "in_progress", "completed"];

pub struct WriteTodosTool {
    spec: ToolSpec,
}

impl WriteTodosTool {
    pub fn new() -> Self {
        Self { spec: builtin_spec(NAME) }
    }
}

impl Default for WriteTodosTool {
    fn default() -> Self {
        Self::new()
    }
}

#[async_trait]
impl Tool for WriteTodosTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn call(&self, _ctx: &CallContext, args: Value) -> ToolOutcome {
        match validate_todos(&args) {
            Ok(todos) => {
                let todos = Value::Array(todos);
                ToolOutcome::text(format!("Updated todo list to {}", py_repr(&todos)))
                    .with_update(StateUpdate { todos: Some(todos), ..Default::default() })
            }
            Err(detail) => invalid_args(NAME, detail),
        }
    }
}

/// The `list[Todo]` validation LangChain's schema implies: each item needs a string `content`
/// and a `status` of pending, in_progress or completed; other keys are dropped and each item is
/// rebuilt as `{content, status}`.
pub fn validate_todos(args: &Value) -> Result<Vec<Value>, String> {
    let obj = args_object(NAME, args).map_err(|o| o.text_content())?;
    let items = match obj.get("todos") {
        Some(Value::Array(items)) => items,
        Some(other) => return Err(format!("todos must be a list, got {other}")),
        None => return Err("todos is required".into()),
    };
    items
        .iter()
        .enumerate()
        .map(|(i, item)| {
            let item =
                item.as_object().ok_or_else(|| format!("todos.{i} must be an object with content and status"))?;
            let content = match item.get("content") {
                Some(Value::String(c)) => c.clone(),
                Some(other) => return Err(format!("todos.{i}.content must be a string, got {other}")),
                None => return Err(format!("todos.{i}.content is required")),
            };
            let status = match item.get("status") {
                Some(Value::String(s)) if STATUSES.contains(&s.as_str()) => s.clone(),
                Some(other) => {
                    return Err(format!(
                        "todos.{i}.status: Input should be 'pending', 'in_progress' or 'completed', got {other}"
                    ))
                }
                None => return Err(format!("todos.{i}.status is required")),
            };
            Ok(json!({"content": content, "status": status}))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::thread;

    #[tokio::test]
    async fn replaces_todos_and_echoes_python_repr() {
        let (_dir, ctx) = thread();
        let out = WriteTodosTool::new()
            .call(
                &ctx,
                json!({"todos": [{"status": "pending", "content": "a 'q'", "extra": 1}, {"content": "b\n\"x\"", "status": "completed"}]}),
            )
            .await;
        assert!(!out.is_error());
        assert_eq!(
            out.text_content(),
            "Updated todo list to [{'content': \"a 'q'\", 'status': 'pending'}, {'content': 'b\\n\"x\"', 'status': 'completed'}]"
        );
        assert_eq!(
            out.update.todos.unwrap(),
            json!([{"content": "a 'q'", "status": "pending"}, {"content": "b\n\"x\"", "status": "completed"}])
        );
        let out = WriteTodosTool::new().call(&ctx, json!({"todos": []})).await;
        assert_eq!(out.text_content(), "Updated todo list to []");
        assert_eq!(out.update.todos, Some(json!([])));
    }

    #[tokio::test]
    async fn invalid_items_are_rejected() {
        let (_dir, ctx) = thread();
        for (args, needle) in [
            (json!({"todos": [{"content": "a", "status": "bad"}]}), "todos.0.status"),
            (json!({"todos": [{"status": "pending"}]}), "todos.0.content is required"),
            (json!({"todos": [{"content": 1, "status": "pending"}]}), "todos.0.content must be a string"),
            (json!({"todos": "x"}), "todos must be a list"),
            (json!({}), "todos is required"),
            (json!([]), "expected a JSON object"),
        ] {
            let out = WriteTodosTool::new().call(&ctx, args).await;
            assert!(out.is_error());
            assert!(out.text_content().contains(needle), "{}", out.text_content());
            assert!(out.update.todos.is_none());
        }
    }
}
