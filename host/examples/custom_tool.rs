//! A native Rust tool beside DeerFlow's builtins. Its calls go through the same pipeline as every
//! other tool: argument errors, audit, result sanitization and state merging included.
use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{json, Value};
use toolhost::core::{ErrorKind, StateUpdate, ToolSource};
use toolhost::{Builtin, BuiltinCondition, CallContext, HostOptions, Tool, ToolCall, ToolOutcome, ToolSpec, Toolhost};

/// `word_count`: counts the words of a text and adds a todo when the text is long.
struct WordCount {
    spec: ToolSpec,
}

impl WordCount {
    fn new() -> Self {
        let parameters = json!({
            "type": "object",
            "properties": {"text": {"type": "string", "description": "The text to count."}},
            "required": ["text"],
        });
        let spec = ToolSpec {
            name: "word_count".into(),
            description: "Count the words of a text.".into(),
            parameters,
            group: None,
            source: ToolSource::Other { label: "example".into() },
        };
        Self { spec }
    }
}

#[async_trait]
impl Tool for WordCount {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn call(&self, _ctx: &CallContext, args: Value) -> ToolOutcome {
        let Some(text) = args.get("text").and_then(Value::as_str) else {
            return ToolOutcome::error_of(ErrorKind::InvalidArguments, "Error: 'text' must be a string");
        };
        let words = text.split_whitespace().count();
        let outcome = ToolOutcome::text(format!("{words} words"));
        if words > 5 {
            let todos = json!([{"content": "shorten the text", "status": "pending"}]);
            return outcome.with_update(StateUpdate { todos: Some(todos), ..Default::default() });
        }
        outcome
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let data = std::env::temp_dir().join(format!("toolhost-custom-{}", std::process::id()));
    let mut host = Toolhost::open(HostOptions::from_yaml("tools: []\n", ".").data_dir(&data)).await?;
    host.add_builtin(Builtin { tool: Arc::new(WordCount::new()), condition: BuiltinCondition::Always });
    let thread = host.thread("demo");
    let names: Vec<String> = thread.tools().await?.into_iter().map(|t| t.name).collect();
    println!("tools: {}", names.join(", "));
    let text = "one two three four five six seven";
    let counted = thread.call(ToolCall::new("word_count", json!({ "text": text }))).await?;
    println!("word_count: {}", counted.text());
    println!("todos: {}", serde_json::to_string(&thread.state().await?.todos)?);
    let bad = thread.call(ToolCall::new("word_count", json!({ "text": 7 }))).await?;
    println!("{:?}: {}", bad.error_kind(), bad.text());
    std::fs::remove_dir_all(&data)?;
    Ok(())
}
