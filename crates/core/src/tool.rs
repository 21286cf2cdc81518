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

/// One part of a tool result. DeerFlow's tools almost always return one text part. Serialized
/// with a `type` tag (`text`, `image`, `audio`, `resource_link`, `resource`) and MCP's field
/// meanings; the names are stable (`toolhost call --json` prints them).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ContentPart {
    Text {
        text: String,
    },
    /// An image, base64-encoded.
    Image {
        data: String,
        mime_type: String,
    },
    /// An audio clip, base64-encoded (MCP's `audio` content).
    Audio {
        data: String,
        mime_type: String,
    },
    /// A link to a resource the client may read or open (MCP's `resource_link`).
    ResourceLink {
        uri: String,
        name: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        mime_type: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        description: Option<String>,
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
    /// What kind of error this is, when the layer that produced it knows (a policy refusal,
    /// an unknown tool, bad arguments); see [`ToolOutcome::error_kind`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<ErrorKind>,
    /// DeerFlow's `ToolMessage.additional_kwargs` where a tool sets some (`task`'s
    /// `subagent_*` metadata).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub additional_kwargs: Option<serde_json::Map<String, Value>>,
}

/// What kind of error a call ended in, so a caller can tell errors apart without reading their
/// text (which stays DeerFlow's).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ErrorKind {
    /// The arguments do not match the tool's schema.
    InvalidArguments,
    /// No tool of that name is available to this call.
    NotFound,
    /// A policy refused the call before the tool ran (skill policy, deferred filter,
    /// read-before-write, the audit's block list, a quota).
    Refused,
    /// The call ran out of time.
    Timeout,
    /// The caller gave the call up and it was stopped.
    Cancelled,
    /// The tool ran and failed.
    Failed,
    /// The tool crashed instead of answering (a component trap: a panic, an unreachable, a bad
    /// memory access). MCP tasks report it as `failed`, not as a completed error result.
    Crashed,
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

    /// LangGraph `ToolNode`'s answer to a call of a tool it does not have
    /// (`INVALID_TOOL_NAME_ERROR_TEMPLATE`): `Error: NAME is not a valid tool, try one of [a, b].`,
    /// naming every tool of the run in the node's order.
    pub fn not_a_valid_tool<'a>(name: &str, available: impl IntoIterator<Item = &'a str>) -> Self {
        let names: Vec<&str> = available.into_iter().collect();
        Self::error_of(
            ErrorKind::NotFound,
            format!("Error: {name} is not a valid tool, try one of [{}].", names.join(", ")),
        )
    }

    /// An error of a known kind (see [`ErrorKind`]).
    pub fn error_of(kind: ErrorKind, text: impl Into<String>) -> Self {
        Self { kind: Some(kind), ..Self::error(text) }
    }

    /// The kind of error this outcome is, `None` for a success. A raised `TimeoutError` is a
    /// timeout, a raised `CancelledError` a cancellation; any other error not tagged by the layer that made it is a failure of the tool.
    pub fn error_kind(&self) -> Option<ErrorKind> {
        if !self.is_error() {
            return None;
        }
        Some(self.kind.unwrap_or(match &self.exception {
            Some(e) if e.class == "TimeoutError" => ErrorKind::Timeout,
            Some(e) if e.class == "CancelledError" => ErrorKind::Cancelled,
            _ => ErrorKind::Failed,
        }))
    }

    pub fn with_update(mut self, update: StateUpdate) -> Self {
        self.update = update;
        self
    }

    pub fn is_error(&self) -> bool {
        self.status == Status::Error
    }

    /// All text parts joined, as a string `ToolMessage.content` would read (images, audio and
    /// links are not text).
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

/// How far a running call has come (MCP's `notifications/progress`): `progress` grows from one
/// report of a call to the next; `total` is its value at completion, when known.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Progress {
    /// The call the report is about.
    pub tool_call_id: String,
    pub progress: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// Where the progress reports of a call go: set by whoever makes the call
/// ([`CallContext::with_progress`]), fed by the tool. It runs on the thread that runs the tool,
/// so it must not block: hand the report on (a channel, an MCP notification queue) and return.
///
/// ```
/// use toolhost_core::ProgressSink;
/// let (tx, rx) = std::sync::mpsc::channel();
/// let sink = ProgressSink::new(move |p| drop(tx.send(p)));
/// # drop((sink, rx));
/// ```
#[derive(Clone)]
pub struct ProgressSink(Arc<dyn Fn(Progress) + Send + Sync>);

impl ProgressSink {
    pub fn new(f: impl Fn(Progress) + Send + Sync + 'static) -> Self {
        Self(Arc::new(f))
    }

    /// Hand a report on.
    pub fn report(&self, progress: Progress) {
        (self.0)(progress)
    }
}

impl std::fmt::Debug for ProgressSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ProgressSink")
    }
}

/// How severe a tool's log line is (the WIT `host.level`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogLevel {
    Trace,
    Debug,
    Info,
    Warn,
    Error,
}

/// One line a tool wrote to its log during a call (a component's `host.log`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LogLine {
    /// The call the line is about.
    pub tool_call_id: String,
    /// The tool that wrote it.
    pub tool: String,
    pub level: LogLevel,
    pub message: String,
}

/// Where the log lines of a call go besides the host's own log (an MCP client's
/// `notifications/message`): set by whoever makes the call ([`CallContext::with_log`]). Like
/// [`ProgressSink`] it runs on the thread that runs the tool and must not block.
#[derive(Clone)]
pub struct LogSink(Arc<dyn Fn(LogLine) + Send + Sync>);

impl LogSink {
    pub fn new(f: impl Fn(LogLine) + Send + Sync + 'static) -> Self {
        Self(Arc::new(f))
    }

    /// Hand a line on.
    pub fn write(&self, line: LogLine) {
        (self.0)(line)
    }
}

impl std::fmt::Debug for LogSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LogSink")
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
    /// The only call of its turn: nothing runs beside it, so a tool that blocks (a component)
    /// may block the calling thread instead of handing the work to another thread and back.
    pub alone_in_turn: bool,
    /// Where the tool's progress reports go; `None`: nobody listens. Component tools report
    /// through the WIT `progress` import (thinned by the runtime); a native tool may report here
    /// directly.
    pub progress: Option<ProgressSink>,
    /// Where the tool's log lines go besides the host's log; `None`: only the host's log.
    /// Component tools write through the WIT `log` import (capped per call by the runtime).
    pub log: Option<LogSink>,
    /// Raised when whoever asked for the call no longer wants its result (an MCP client's
    /// `notifications/cancelled`): a tool that runs long checks it and stops. Component tools
    /// are stopped by the runtime within one epoch tick. `None`: the call cannot be cancelled.
    pub cancel: Option<CancelSignal>,
    /// Whoever made the call, for a tool that asks them something during it (a component's
    /// `client` import, when its config grants it); `None`: nobody to ask.
    pub client: Option<crate::Client>,
    /// The agent run the call belongs to (DeerFlow's `runtime.context["run_id"]`): `task` tags
    /// its delegation-ledger entry with it, and the per-run cap on delegations counts by it.
    /// `None`: the caller named no run.
    pub run_id: Option<Arc<str>>,
}

/// A flag that asks a running call to stop, shared by the caller (who raises it) and the call
/// (which checks it). Cheap to clone and to check; raising it cannot be undone.
#[derive(Debug, Clone, Default)]
pub struct CancelSignal(Arc<std::sync::atomic::AtomicBool>);

impl CancelSignal {
    /// A signal not raised yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Ask the call to stop.
    pub fn cancel(&self) {
        self.0.store(true, std::sync::atomic::Ordering::Release);
    }

    /// Whether the call was asked to stop.
    pub fn is_cancelled(&self) -> bool {
        self.0.load(std::sync::atomic::Ordering::Acquire)
    }
}

impl CallContext {
    /// A call in the thread of `fs`.
    pub fn new(fs: Arc<ThreadFs>, tool_call_id: impl Into<String>, state: Arc<ThreadState>) -> Self {
        Self {
            thread_id: fs.thread_id().to_string(),
            tool_call_id: tool_call_id.into(),
            fs,
            state,
            alone_in_turn: false,
            progress: None,
            log: None,
            cancel: None,
            client: None,
            run_id: None,
        }
    }

    /// Mark the call as the only one of its turn (see [`CallContext::alone_in_turn`]).
    pub fn alone_in_turn(mut self, alone: bool) -> Self {
        self.alone_in_turn = alone;
        self
    }

    /// The same call, with its progress reports going to `sink`.
    pub fn with_progress(mut self, sink: ProgressSink) -> Self {
        self.progress = Some(sink);
        self
    }

    /// The same call, with its log lines also going to `sink`.
    pub fn with_log(mut self, sink: LogSink) -> Self {
        self.log = Some(sink);
        self
    }

    /// The same call, able to ask `client` (elicitation, sampling).
    pub fn with_client(mut self, client: crate::Client) -> Self {
        self.client = Some(client);
        self
    }

    /// The same call, stopped when `signal` is raised.
    pub fn with_cancel(mut self, signal: CancelSignal) -> Self {
        self.cancel = Some(signal);
        self
    }

    /// Whether the call was asked to stop.
    pub fn is_cancelled(&self) -> bool {
        self.cancel.as_ref().is_some_and(CancelSignal::is_cancelled)
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

    /// The argument schema with every number as its source wrote it, for a tool whose
    /// `spec().parameters` cannot hold one exactly: serde_json keeps integers only up to 64 bits,
    /// while DeerFlow hashes and renders an MCP server's schema as Python decoded it (an integer
    /// of any size keeps all its digits). `None` (the default) when `parameters` is exact.
    fn exact_parameters(&self) -> Option<&toolhost_py::json::PyValue> {
        None
    }

    /// `spec().parameters` as JSON text (any JSON text that reads back as that value), when the
    /// tool keeps it: the deferred catalog then renders the tool's `catalog_hash` entry from
    /// the text in one linear pass instead of walking the `serde_json` tree. `None` (the
    /// default) when the tool keeps no text.
    fn parameters_text(&self) -> Option<&str> {
        None
    }

    /// Room the tool offers for what the deferred catalog derives from it (its rendered
    /// `catalog_hash` entry), for a tool whose name, description and schema never change: the
    /// first catalog holding the tool fills it, every later catalog holding the same tool reuses
    /// it instead of rendering again. `None` (the default): nothing is kept.
    fn catalog_slot(&self) -> Option<&CatalogSlot> {
        None
    }
}

/// See [`Tool::catalog_slot`]: what it holds is the deferred catalog's own business.
pub type CatalogSlot = std::sync::OnceLock<Arc<dyn std::any::Any + Send + Sync>>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_parts_serialize_stably() {
        let parts = vec![
            ContentPart::Text { text: "t".into() },
            ContentPart::Image { data: "AA==".into(), mime_type: "image/png".into() },
            ContentPart::Audio { data: "AQ==".into(), mime_type: "audio/wav".into() },
            ContentPart::ResourceLink {
                uri: "https://example.com/a".into(),
                name: "a".into(),
                mime_type: None,
                description: Some("d".into()),
            },
            ContentPart::Resource { resource: serde_json::json!({"uri": "x://y"}) },
        ];
        let json = serde_json::to_value(&parts).unwrap();
        // Pinned: `toolhost call --json` prints these, and stored outcomes read them back.
        assert_eq!(
            json,
            serde_json::json!([
                {"type": "text", "text": "t"},
                {"type": "image", "data": "AA==", "mime_type": "image/png"},
                {"type": "audio", "data": "AQ==", "mime_type": "audio/wav"},
                {"type": "resource_link", "uri": "https://example.com/a", "name": "a", "description": "d"},
                {"type": "resource", "resource": {"uri": "x://y"}},
            ])
        );
        let back: Vec<ContentPart> = serde_json::from_value(json).unwrap();
        assert_eq!(back, parts);
    }

    #[test]
    fn a_progress_sink_receives_reports() {
        let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
        let s = seen.clone();
        let sink = ProgressSink::new(move |p| s.lock().unwrap().push(p.progress));
        sink.report(Progress { tool_call_id: "c".into(), progress: 0.5, total: Some(1.0), message: None });
        assert_eq!(*seen.lock().unwrap(), vec![0.5]);
        assert_eq!(format!("{sink:?}"), "ProgressSink");
    }
}
