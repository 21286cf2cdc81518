//! The one trait every tool implements, and the values that go in and out of a call.

use std::sync::Arc;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::paths::ThreadPaths;
use crate::state::{StateUpdate, ThreadState};
use crate::threadfs::ThreadFs;

/// Where a tool comes from. Shown by `toolhost tools --explain` and used by the deferred layer
/// (MCP tools are the ones deferred).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ToolSource {
    /// A `tools:` entry of config.yaml backed by a WebAssembly component.
    Component { component: String },
    /// The native host `bash` tool.
    HostBash,
    /// A native builtin (`present_files`, `ask_clarification`, …).
    Builtin,
    /// A tool of an MCP server from `extensions_config.json`.
    Mcp { server: String },
    /// `invoke_acp_agent`.
    Acp,
    /// Added by a test-only or embedder-provided layer.
    Other { label: String },
}

/// What the model sees of a tool, plus where it came from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    /// JSON Schema of the arguments (an object schema).
    pub parameters: Value,
    /// The config group (`file:read`, `bash`, …) for config tools; `None` for the rest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    pub source: ToolSource,
}

impl ToolSpec {
    pub fn is_mcp(&self) -> bool {
        matches!(self.source, ToolSource::Mcp { .. })
    }
}

/// One part of a tool result. DeerFlow's tools almost always return one text part.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ContentPart {
    Text {
        text: String,
    },
    Image {
        data: String,
        mime_type: String,
    },
    /// An embedded or linked resource (MCP); kept as the server sent it.
    Resource {
        resource: Value,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    #[default]
    Success,
    Error,
}

/// DeerFlow's `ToolMessage` plus `Command(update=…)`: content for the model, success or error,
/// a state update merged with the thread's reducers, and whether the run ends here
/// (`ask_clarification`).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ToolOutcome {
    pub content: Vec<ContentPart>,
    pub status: Status,
    #[serde(default, skip_serializing_if = "StateUpdate::is_empty")]
    pub update: StateUpdate,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub end_run: bool,
    /// MCP `structuredContent`, kept as the server sent it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub structured: Option<Value>,
    /// Set when the tool did not answer but failed the way a Python tool raises an exception
    /// (a trap, a crash, a lost server). The error-handling middleware turns it into DeerFlow's
    /// `Error: Tool '{name}' failed with {class}: {detail}. …` text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exception: Option<ToolException>,
    /// DeerFlow's `ToolMessage.additional_kwargs` where a tool sets some (`task`'s
    /// `subagent_*` metadata).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub additional_kwargs: Option<serde_json::Map<String, Value>>,
}

/// A failure that DeerFlow would see as a raised exception.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolException {
    /// The exception class name DeerFlow would print (`RuntimeError`, `TimeoutError`, …).
    pub class: String,
    pub detail: String,
}

impl ToolOutcome {
    /// A successful text result.
    pub fn text(text: impl Into<String>) -> Self {
        Self { content: vec![ContentPart::Text { text: text.into() }], ..Self::default() }
    }

    /// An error result: the text as the model sees it (DeerFlow's strings start `Error:`).
    pub fn error(text: impl Into<String>) -> Self {
        Self { status: Status::Error, ..Self::text(text) }
    }

    /// A failure DeerFlow would see as a raised exception; content is the bare detail until the
    /// error-handling middleware formats it.
    pub fn raised(class: impl Into<String>, detail: impl Into<String>) -> Self {
        let detail = detail.into();
        Self { exception: Some(ToolException { class: class.into(), detail: detail.clone() }), ..Self::error(detail) }
    }

    pub fn with_update(mut self, update: StateUpdate) -> Self {
        self.update = update;
        self
    }

    pub fn is_error(&self) -> bool {
        self.status == Status::Error
    }

    /// All text parts joined, as a string `ToolMessage.content` would read.
    pub fn text_content(&self) -> String {
        let mut out = String::new();
        for part in &self.content {
            if let ContentPart::Text { text } = part {
                out.push_str(text);
            }
        }
        out
    }
}

/// Everything a tool may know about the call besides its arguments. Runtime context travels
/// here, never as model arguments (DeerFlow's injected `runtime` / `tool_call_id`).
#[derive(Debug, Clone)]
pub struct CallContext {
    pub thread_id: String,
    pub tool_call_id: String,
    /// The thread's files: the only way host code reads or writes them.
    pub fs: Arc<ThreadFs>,
    /// A snapshot of the thread's state when the call started.
    pub state: Arc<ThreadState>,
}

impl CallContext {
    /// A call in the thread of `fs`.
    pub fn new(fs: Arc<ThreadFs>, tool_call_id: impl Into<String>, state: Arc<ThreadState>) -> Self {
        Self { thread_id: fs.thread_id().to_string(), tool_call_id: tool_call_id.into(), fs, state }
    }

    /// The thread's directory layout (host paths, virtual paths, masking).
    pub fn paths(&self) -> &ThreadPaths {
        self.fs.paths()
    }
}

/// A tool, whatever its source. Implementations never panic on bad arguments: they answer with
/// an error outcome that names what was wrong.
#[async_trait]
pub trait Tool: Send + Sync {
    fn spec(&self) -> &ToolSpec;
    async fn call(&self, ctx: &CallContext, args: Value) -> ToolOutcome;
}
