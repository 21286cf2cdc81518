//! The MCP `ServerHandler` of `toolhost serve`: one value per MCP session, bound to one toolhost
//! thread. tools/list is the model's view in that thread; tools/call runs through the pipeline
//! there; promotions by `tool_search` are announced with `notifications/tools/list_changed`.
//! Resources (the thread's outputs and artifacts), prompts (the enabled skills) and log messages
//! are served too.

// MCP logging is deprecated by SEP-2577 (revision 2026-07-28) but part of 2025-06-18 and
// 2025-11-25, which the clients in use speak.
#![allow(deprecated)]

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CancelTaskParams, ClientCapabilities,
    CompleteRequestParams, CompleteResult, CompletionInfo, ContentBlock, CreateTaskResult, GetPromptRequestParams,
    GetPromptResponse, GetTaskParams, GetTaskResult, Implementation, InputRequiredResult, JsonObject,
    ListPromptsResult, ListResourceTemplatesResult, ListResourcesResult, ListToolsResult, LoggingLevel,
    LoggingMessageNotificationParam, PaginatedRequestParams, ProgressNotificationParam, ProgressToken,
    ReadResourceRequestParams, ReadResourceResponse, Reference, RequestParamsMeta, Resource,
    ResourceUpdatedNotificationParam, ServerCapabilities, ServerConfig, SetLevelRequestParams, SubscribeRequestParams,
    SubscriptionFilter, Tool, UnsubscribeRequestParams, UpdateTaskParams,
};
use rmcp::service::{RequestContext, SubscriptionContext};
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};
use serde_json::Value;
use toolhost_core::{CancelSignal, ContentPart, LogLevel, LogLine, LogSink, Progress, ProgressSink, ToolOutcome};

use super::call_log::CallLog;
use super::jsonrpc::{cap_text, ECHO_MAX_BYTES};
use super::listen::{Changes, Listeners};
use super::mrtr::{call_binding, Round, RoundEnd, StateSeal};
use super::tasks::TaskStore;
use super::threads::{
    check_client_thread, fresh_thread_id, Hold, ThreadKeeper, MAX_RUN_ID_BYTES, META_RUN, META_THREAD, RUN_HEADER,
    THREAD_HEADER,
};
use toolhost::AssemblyRequest;
use toolhost::TaskSupport;
use toolhost::{CallOptions, CallResult, Toolhost};

/// What every session of one `serve` shares once the host is open.
pub struct Served {
    /// The host.
    pub host: Arc<Toolhost>,
    /// What every session's tools are assembled for.
    pub request: AssemblyRequest,
    /// Which tools are served.
    pub filter: ToolFilter,
    /// The served tools with `x-mcp-header` parameters, for rmcp's header checks.
    pub param_headers: super::param_headers::ParamHeaderTools,
    /// Seals the `requestState` of calls that ask the client in rounds (protocol 2026-07-28).
    pub state_seal: Arc<StateSeal>,
    /// The open `subscriptions/listen` streams (protocol 2026-07-28).
    pub listeners: Arc<Listeners>,
}

impl Served {
    /// A served tool as `tools/list` shows it: its schema (an empty object schema when it has
    /// none, as MCP requires one) and how it runs as a task in `_meta`.
    pub fn mcp_tool(&self, spec: &toolhost_core::ToolSpec) -> Tool {
        let schema: JsonObject = match &spec.parameters {
            Value::Object(o) => o.clone(),
            _ => serde_json::json!({"type": "object", "properties": {}}).as_object().cloned().unwrap_or_default(),
        };
        let mut tool = Tool::new(spec.name.clone(), spec.description.clone(), Arc::new(schema));
        let support = self.host.task_support(&spec.name, Some(spec));
        let mut meta = rmcp::model::MetaObject::default();
        meta.0.insert(META_TASK_SUPPORT.into(), Value::String(support.as_str().into()));
        tool.meta = Some(meta);
        tool
    }

    /// Bring [`Self::param_headers`] up to date with the assembly (a no-op when it has not changed).
    pub async fn refresh_param_headers(&self) {
        let assembly = self.host.get_available_tools(&self.request).await;
        self.param_headers.refresh(&assembly, |name| self.filter.serves(name), |spec| self.mcp_tool(spec));
    }
}

/// The host being opened. Sessions start before it is ready, so that `initialize` is answered
/// at once even while a cold start compiles the components; their requests wait for it.
#[derive(Clone)]
pub struct Opening(pub tokio::sync::watch::Receiver<Option<Result<Arc<Served>, Arc<str>>>>);

impl Opening {
    /// Wait until the host is open (or failed to open).
    pub async fn ready(&self) -> Result<Arc<Served>, McpError> {
        let mut rx = self.0.clone();
        let state = rx
            .wait_for(Option::is_some)
            .await
            .map_err(|_| McpError::internal_error("toolhost stopped before it was ready", None))?;
        match state.as_ref() {
            Some(Ok(served)) => Ok(served.clone()),
            Some(Err(e)) => Err(McpError::internal_error(format!("toolhost could not start: {e}"), None)),
            None => Err(McpError::internal_error("toolhost is not ready", None)),
        }
    }
}

/// `--tools` / `--exclude`: which of the assembled tools are served.
#[derive(Debug, Clone, Default)]
pub struct ToolFilter {
    /// Only these (`None`: all).
    pub only: Option<Vec<String>>,
    /// Never these.
    pub exclude: Vec<String>,
}

impl ToolFilter {
    /// Whether `name` is served.
    pub fn serves(&self, name: &str) -> bool {
        self.only.as_ref().is_none_or(|only| only.iter().any(|n| n == name)) && !self.exclude.iter().any(|n| n == name)
    }
}

/// One MCP session's handler, bound to one toolhost thread.
#[derive(Clone)]
pub struct McpSessionHandler {
    opening: Opening,
    keeper: Arc<ThreadKeeper>,
    /// The session's own thread: named up front on stdio (`--thread`), otherwise a random id
    /// ([`super::threads::fresh_thread_id`]), unrelated to the `Mcp-Session-Id`, so that a thread directory's
    /// name never tells anyone how to speak in that session.
    thread: String,
    /// The session's own agent run (DeerFlow's `run_id`), for requests that name none.
    run: String,
    /// Keeps the session's thread from expiring while the session lives.
    _hold: Arc<Hold>,
    /// `resources/subscribe`: URI → thread and what the file looked like when last seen.
    subscriptions: Arc<Mutex<Subscriptions>>,
    /// `logging/setLevel`: the least severe level the client wants (`None`: no log messages).
    log_level: Arc<Mutex<Option<LoggingLevel>>>,
    /// MCP tasks (the tasks extension): calls running in the background and their results,
    /// shared by every session of the server.
    tasks: Arc<TaskStore>,
}

/// A session's resource subscriptions: URI → (thread, the file as last seen).
type Subscriptions = HashMap<String, (String, Option<super::resources::Stamp>)>;

/// Severity order of MCP log levels.
fn severity(l: LoggingLevel) -> u8 {
    match l {
        LoggingLevel::Debug => 0,
        LoggingLevel::Info => 1,
        LoggingLevel::Notice => 2,
        LoggingLevel::Warning => 3,
        LoggingLevel::Error => 4,
        LoggingLevel::Critical => 5,
        LoggingLevel::Alert => 6,
        LoggingLevel::Emergency => 7,
    }
}

impl McpSessionHandler {
    /// A session in `thread`, whose MCP tasks live in `tasks`.
    pub fn new(opening: Opening, keeper: Arc<ThreadKeeper>, thread: String, tasks: Arc<TaskStore>) -> Self {
        let hold = Arc::new(keeper.hold_session(&thread));
        // Only tells this session's delegations from others': a clock-and-pid id does when the
        // random source fails.
        let run = fresh_thread_id("run-").unwrap_or_else(|_| {
            let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
            format!("run-{}-{}", std::process::id(), now.as_nanos())
        });
        Self {
            opening,
            keeper,
            thread,
            run,
            _hold: hold,
            subscriptions: Default::default(),
            log_level: Default::default(),
            tasks,
        }
    }

    /// Run one call in `thread` until it ends, forwarding its progress (when `token` is set) and
    /// log lines; `cancel` stops it. The tool's questions go to `client`, else (`None`) to the
    /// session's client.
    #[allow(clippy::too_many_arguments)]
    async fn run_call(
        &self,
        served: &Served,
        thread: &str,
        name: &str,
        args: Value,
        token: Option<ProgressToken>,
        cancel: CancelSignal,
        client: Option<toolhost_core::Client>,
        cx: &RequestContext<RoleServer>,
    ) -> Result<CallResult, McpError> {
        // The tool's progress reports (when the request asked for them) and log lines (when
        // the client set a log level) arrive on the thread that runs it; one task per kind
        // sends them in order, and all of them are sent before the result.
        let client =
            client.unwrap_or_else(|| toolhost_core::Client::new(super::client::PeerClient { peer: cx.peer.clone() }));
        let mut opts = CallOptions { cancel: Some(cancel), client: Some(client), ..CallOptions::default() };
        let mut forwards = Vec::new();
        if let Some(token) = token {
            let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Progress>();
            let peer = cx.peer.clone();
            forwards.push(tokio::spawn(async move {
                while let Some(p) = rx.recv().await {
                    let mut n = ProgressNotificationParam::new(token.clone(), p.progress);
                    n.total = p.total;
                    n.message = p.message;
                    if let Err(e) = peer.notify_progress(n).await {
                        tracing::debug!("cannot send a progress notification: {e}");
                    }
                }
            }));
            opts.progress = Some(ProgressSink::new(move |p| drop(tx.send(p))));
        }
        if self.log_level.lock().unwrap_or_else(|p| p.into_inner()).is_some() {
            let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<LogLine>();
            let (peer, wanted, own_stream) = (cx.peer.clone(), self.log_level.clone(), CallLog::of(cx));
            forwards.push(tokio::spawn(async move {
                while let Some(line) = rx.recv().await {
                    let level = match line.level {
                        LogLevel::Trace | LogLevel::Debug => LoggingLevel::Debug,
                        LogLevel::Info => LoggingLevel::Info,
                        LogLevel::Warn => LoggingLevel::Warning,
                        LogLevel::Error => LoggingLevel::Error,
                    };
                    let min = *wanted.lock().unwrap_or_else(|p| p.into_inner());
                    if min.is_none_or(|m| severity(level) < severity(m)) {
                        continue;
                    }
                    let mut p = LoggingMessageNotificationParam::new(level, Value::String(line.message));
                    p.logger = Some(line.tool);
                    send_log(&peer, own_stream.as_ref(), p).await;
                }
            }));
            opts.log = Some(LogSink::new(move |l| drop(tx.send(l))));
        }
        let mut request = served.request.clone();
        request.agent.run_id = Some(self.run_id(cx)?);
        let r = served.host.call_with(&request, thread, name, args, None, opts).await;
        for f in forwards {
            if let Err(e) = f.await {
                tracing::debug!("notification forwarding ended: {e}");
            }
        }
        r.map_err(internal)
    }

    /// What a finished call answers: logs and notifications, then its MCP result.
    async fn finish_call(
        &self,
        served: &Served,
        thread: &str,
        name: &str,
        result: CallResult,
        round: Option<&Arc<Round>>,
        cx: &RequestContext<RoleServer>,
    ) -> CallToolResult {
        for e in &result.state_errors {
            tracing::warn!(thread = %thread, tool = %name, "state update refused: {e}");
        }
        let outcome = result.outcome;
        self.after_call(&served.host, thread, name, &outcome, &result.state_errors, cx).await;
        let changes = Changes { tools: promoted_something(&outcome), resources: changes_resources(name, &outcome) };
        served.listeners.after_call(&served.host, thread, &changes).await;
        if changes.tools {
            if let Err(e) = cx.peer.notify_tool_list_changed().await {
                tracing::warn!("cannot send tools/list_changed: {e}");
            }
        }
        let mut mcp = outcome_to_result(&outcome);
        if mcp.is_error == Some(true) {
            cap_error_texts(&mut mcp);
        }
        // view_image: the images the call recorded, as MCP image content next to DeerFlow's text
        // (in DeerFlow, ViewImageMiddleware shows them to the model before its next call).
        if let Some(images) = outcome.update.viewed_images.as_ref().filter(|i| !i.is_empty() && !outcome.is_error()) {
            mcp.content.extend(viewed_image_blocks(&served.host, thread, images).await);
        }
        // present_files: the presented files as resource links the client can read
        // (`resources/read`) and show.
        if name == "present_files" && !outcome.is_error() {
            for vpath in outcome.update.artifacts.iter().flatten() {
                let file = vpath.rsplit('/').next().unwrap_or(vpath);
                let mut link = Resource::new(super::resources::uri_of(vpath), file.to_string());
                link.mime_type = super::resources::mime_of(vpath).map(str::to_string);
                mcp.content.push(ContentBlock::resource_link(link));
            }
        }
        if name == toolhost_builtins::clarification::NAME && outcome.end_run && !outcome.is_error() {
            match elicit_answer(cx, round, &outcome.text_content()).await {
                Some(answer) => mcp.content.push(ContentBlock::text(format!("The user answered: {answer}"))),
                // No answer from the client's user: DeerFlow ends the run here and waits for the
                // user. `_meta["toolhost/end_run"]` tells a client to pause and ask.
                None => {
                    let meta = mcp.meta.get_or_insert_with(Default::default);
                    meta.0.insert("toolhost/end_run".into(), Value::Bool(true));
                }
            }
        }
        mcp
    }

    /// Start `name` as an MCP task: answered at once with the task; the call runs in the
    /// background, `tasks/cancel` raises its cancel signal, and its result (or, when a component
    /// crashed, a `failed` status with the error) is read with `tasks/get`.
    fn start_task(
        &self,
        served: Arc<Served>,
        thread: String,
        name: String,
        args: Value,
        token: Option<ProgressToken>,
        cx: RequestContext<RoleServer>,
    ) -> Result<CreateTaskResult, McpError> {
        let cancel = CancelSignal::new();
        let (task, mut stopped) = self.tasks.create(cancel.clone())?;
        let id = task.task_id.clone();
        let tasks = Arc::downgrade(&self.tasks);
        // The background call holds the task store only weakly, so that the server ending drops
        // it (and stops what still runs).
        let mut session = self.clone();
        session.tasks = Arc::default();
        let in_use = self.keeper.enter(&thread, true);
        tracing::debug!(thread = %thread, tool = %name, task = %id, "tools/call as a task");
        // The call's questions park the task in `input_required` (the client answers with
        // tasks/update); it then runs again with the answers.
        let capabilities = cx.client_capabilities().unwrap_or_default();
        tokio::spawn(async move {
            let _in_use = in_use;
            let run = async {
                let mut rounds = 1;
                loop {
                    let answers = tasks.upgrade().map(|t| t.answers(&id)).unwrap_or_default();
                    let round = Round::with_answers(answers, capabilities.clone());
                    let client = Some(round.client());
                    let r = session.run_call(
                        &served,
                        &thread,
                        &name,
                        args.clone(),
                        token.clone(),
                        cancel.clone(),
                        client,
                        &cx,
                    );
                    let r = r.await;
                    let (open, _) = round.take_asked();
                    if open.is_empty() || r.is_err() || rounds >= super::mrtr::MAX_ROUNDS {
                        break r;
                    }
                    let Some(wake) = tasks.upgrade().and_then(|t| t.park(&id, open)) else { break r };
                    tracing::debug!(task = %id, "task waits for input");
                    wake.notified().await;
                    rounds += 1;
                }
            };
            // tasks/cancel: the call is dropped (host bash's process tree is killed, a subagent
            // stops); a component running on this task's thread stops on the signal first.
            let result = tokio::select! {
                r = run => r,
                _ = stopped.wait_for(|stop| *stop) => Err(McpError::internal_error("the task was cancelled", None)),
            };
            let result = match result {
                Ok(r) if r.outcome.error_kind() == Some(toolhost_core::ErrorKind::Crashed) => {
                    let text = cap_text(&r.outcome.text_content(), ERROR_TEXT_MAX_CHARS);
                    Err(McpError::internal_error(text, Some(serde_json::json!({"tool": name}))))
                }
                Ok(r) => Ok(session.finish_call(&served, &thread, &name, r, None, &cx).await),
                Err(e) => Err(e),
            };
            if let Some(tasks) = tasks.upgrade() {
                tasks.finish(&id, result);
            }
        });
        Ok(CreateTaskResult::new(task))
    }

    /// The thread a request runs in: the one it names (`_meta["toolhost/thread"]`, else the
    /// `Toolhost-Thread` header), else the session's.
    fn thread(&self, cx: &RequestContext<RoleServer>) -> Result<String, McpError> {
        let named = match cx.meta.get(META_THREAD) {
            Some(Value::String(name)) => Some(name.clone()),
            Some(other) => {
                let kind = if other.is_null() { "null" } else { "not a string" };
                return Err(McpError::invalid_params(
                    format!("invalid thread id: _meta[\"{META_THREAD}\"] must be a string, got {kind}"),
                    None,
                ));
            }
            None => match cx.extensions.get::<http::request::Parts>().and_then(|p| p.headers.get(THREAD_HEADER)) {
                Some(v) => Some(
                    v.to_str()
                        .map_err(|_| {
                            McpError::invalid_params("invalid thread id: the Toolhost-Thread header is not ASCII", None)
                        })?
                        .to_string(),
                ),
                None => None,
            },
        };
        match named {
            Some(name) => {
                check_client_thread(&name).map_err(|e| McpError::invalid_params(e, None))?;
                Ok(name)
            }
            None => Ok(self.thread.clone()),
        }
    }

    /// The agent run a request belongs to: the one it names (`_meta["toolhost/run"]`, or the
    /// `Toolhost-Run` header), else the session's.
    fn run_id(&self, cx: &RequestContext<RoleServer>) -> Result<String, McpError> {
        let invalid = |why: &str| McpError::invalid_params(format!("invalid run id: {why}"), None);
        let named = match cx.meta.get(META_RUN) {
            Some(Value::String(run)) => Some(run.clone()),
            Some(_) => return Err(invalid(&format!("_meta[\"{META_RUN}\"] must be a string"))),
            None => match cx.extensions.get::<http::request::Parts>().and_then(|p| p.headers.get(RUN_HEADER)) {
                Some(v) => Some(v.to_str().map_err(|_| invalid("the Toolhost-Run header is not ASCII"))?.to_string()),
                None => None,
            },
        };
        match named {
            Some(run) if run.is_empty() || run.len() > MAX_RUN_ID_BYTES || run.chars().any(char::is_control) => {
                Err(invalid(&format!("it must be 1 to {MAX_RUN_ID_BYTES} bytes without control characters")))
            }
            Some(run) => Ok(run),
            None => Ok(self.run.clone()),
        }
    }

    /// Send a log message if the client asked for messages this severe.
    async fn log(&self, cx: &RequestContext<RoleServer>, level: LoggingLevel, data: Value) {
        let wanted = *self.log_level.lock().unwrap_or_else(|p| p.into_inner());
        if wanted.is_some_and(|w| severity(level) >= severity(w)) {
            let mut p = LoggingMessageNotificationParam::new(level, data);
            p.logger = Some("toolhost".into());
            send_log(&cx.peer, CallLog::of(cx).as_ref(), p).await;
        }
    }

    /// After a call: log what went wrong (refusals such as the audit's blocks and quotas, time
    /// limits, failures, refused state updates), tell subscribers which of their resources changed,
    /// and say the resource list changed when the call added artifacts.
    async fn after_call(
        &self,
        host: &Toolhost,
        thread: &str,
        tool: &str,
        outcome: &ToolOutcome,
        state_errors: &[String],
        cx: &RequestContext<RoleServer>,
    ) {
        if let Some(kind) = outcome.error_kind() {
            let level = match kind {
                toolhost_core::ErrorKind::Failed | toolhost_core::ErrorKind::Crashed => LoggingLevel::Error,
                _ => LoggingLevel::Warning,
            };
            let message: String = outcome.text_content().chars().take(500).collect();
            self.log(cx, level, serde_json::json!({"thread": thread, "tool": tool, "kind": kind, "message": message}))
                .await;
        }
        for e in state_errors {
            let data =
                serde_json::json!({"thread": thread, "tool": tool, "message": format!("state update refused: {e}")});
            self.log(cx, LoggingLevel::Warning, data).await;
        }
        let changed: Vec<String> = {
            let mut subs = self.subscriptions.lock().unwrap_or_else(|p| p.into_inner());
            subs.iter_mut()
                .filter(|(_, (t, _))| t == thread)
                .filter_map(|(uri, (t, seen))| super::resources::changed(host, t, uri, seen).then(|| uri.clone()))
                .collect()
        };
        for uri in changed {
            if let Err(e) = cx.peer.notify_resource_updated(ResourceUpdatedNotificationParam::new(uri)).await {
                tracing::debug!("cannot send resources/updated: {e}");
            }
        }
        if changes_resources(tool, outcome) {
            if let Err(e) = cx.peer.notify_resource_list_changed().await {
                tracing::debug!("cannot send resources/list_changed: {e}");
            }
        }
    }
}

/// What a round that left questions open answers instead of the call's result.
fn input_required(served: &Served, round: &Round, call: &[u8]) -> Option<CallToolResponse> {
    match round.end(&served.state_seal, call) {
        RoundEnd::Complete => None,
        RoundEnd::InputRequired { requests, state } => {
            Some(InputRequiredResult::new(Some(requests), Some(state)).into())
        }
        RoundEnd::Failed(e) => Some(CallToolResult::error(vec![ContentBlock::text(e)]).into()),
    }
}

/// A log message on the call's own stream when it has one, else to the session.
async fn send_log(peer: &rmcp::Peer<RoleServer>, own_stream: Option<&CallLog>, p: LoggingMessageNotificationParam) {
    if own_stream.is_some_and(|s| s.send(p.clone())) {
        return;
    }
    if let Err(e) = peer.notify_logging_message(p).await {
        tracing::debug!("cannot send a log message: {e}");
    }
}

/// Whether a call may have changed the thread's resource list (it added artifacts, or wrote
/// files: `write_file`, host `bash`).
fn changes_resources(tool: &str, outcome: &ToolOutcome) -> bool {
    outcome.update.artifacts.is_some() || tool == "write_file" || tool == "bash"
}

fn internal(e: impl std::fmt::Display) -> McpError {
    McpError::internal_error(e.to_string(), None)
}

/// A toolhost outcome as an MCP tool result: text and image parts as such, MCP resources as the
/// server sent them, `isError` from the status, `structuredContent` when present, a tool's
/// `additional_kwargs` as `_meta`.
pub fn outcome_to_result(outcome: &ToolOutcome) -> CallToolResult {
    let content: Vec<ContentBlock> = outcome
        .content
        .iter()
        .map(|part| match part {
            ContentPart::Text { text } => ContentBlock::text(text.clone()),
            ContentPart::Image { data, mime_type } => ContentBlock::image(data.clone(), mime_type.clone()),
            ContentPart::Audio { data, mime_type } => ContentBlock::audio(data.clone(), mime_type.clone()),
            ContentPart::ResourceLink { uri, name, mime_type, description } => {
                let mut link = Resource::new(uri.clone(), name.clone());
                link.mime_type = mime_type.clone();
                link.description = description.clone();
                ContentBlock::resource_link(link)
            }
            // A whole MCP block (what an MCP server sent), or an embedded resource's contents
            // (`uri` with `text` or `blob`: a component's, or an MCP server's blob); anything
            // else is shown as JSON text.
            ContentPart::Resource { resource } => {
                let block = if resource.get("type").is_none() && resource.get("uri").is_some() {
                    serde_json::json!({"type": "resource", "resource": resource})
                } else {
                    resource.clone()
                };
                serde_json::from_value::<ContentBlock>(block)
                    .unwrap_or_else(|_| ContentBlock::text(resource.to_string()))
            }
        })
        .collect();
    let mut result = if outcome.is_error() { CallToolResult::error(content) } else { CallToolResult::success(content) };
    result.structured_content = outcome.structured.clone();
    // DeerFlow's ToolMessage.additional_kwargs (`task`'s subagent_* metadata) travel as `_meta`.
    if let Some(k) = &outcome.additional_kwargs {
        result.meta = Some(rmcp::model::MetaObject(k.clone()));
    }
    result
}

/// The images of a `viewed_images` update as MCP image blocks: each read again through the
/// thread filesystem layer and sent only if it is still the file the call checked
/// (`image_details_content`); a changed or vanished one is left out.
async fn viewed_image_blocks(
    host: &Arc<toolhost::Toolhost>,
    thread: &str,
    images: &serde_json::Map<String, Value>,
) -> Vec<ContentBlock> {
    let Ok(fs) = host.thread_fs(thread) else { return Vec::new() };
    let state = toolhost::ThreadState { viewed_images: images.clone(), ..Default::default() };
    // Up to 20 MiB per image of blocking reads: off the async workers.
    let parts = tokio::task::spawn_blocking(move || toolhost_builtins::view_image::image_details_content(&state, &fs))
        .await
        .unwrap_or_default();
    parts
        .into_iter()
        .filter_map(|p| match p {
            ContentPart::Image { data, mime_type } => Some(ContentBlock::image(data, mime_type)),
            _ => None,
        })
        .collect()
}

/// `_meta` key of a tool in `tools/list`: how it runs as an MCP task (`forbidden`, `optional`,
/// `required`). rmcp 3.11 follows the tasks extension's revision that dropped
/// `execution.taskSupport` from `Tool`, so toolhost says it here.
pub const META_TASK_SUPPORT: &str = "toolhost/taskSupport";

/// An error text may quote the arguments (a 5 MiB path comes back in "File not found: …"):
/// like a tool's output, it is cut in the middle to `sandbox.bash_output_max_chars`' default.
pub const ERROR_TEXT_MAX_CHARS: usize = 20_000;

fn cap_error_texts(result: &mut CallToolResult) {
    for block in &mut result.content {
        if let Some(t) = block.as_text() {
            if t.text.len() > ERROR_TEXT_MAX_CHARS {
                *block = ContentBlock::text(toolhost_audit::truncate_middle(&t.text, ERROR_TEXT_MAX_CHARS));
            }
        }
    }
}

/// Whether a `tool_search` outcome promoted at least one tool.
fn promoted_something(outcome: &ToolOutcome) -> bool {
    outcome
        .update
        .promoted
        .as_ref()
        .and_then(|p| p.get("names"))
        .and_then(Value::as_array)
        .is_some_and(|names| !names.is_empty())
}

impl ServerHandler for McpSessionHandler {
    fn get_info(&self) -> ServerConfig {
        let capabilities = ServerCapabilities::builder()
            .enable_logging()
            .enable_completions()
            .enable_prompts()
            .enable_resources()
            .enable_resources_subscribe()
            .enable_resources_list_changed()
            .enable_tools()
            .enable_tool_list_changed()
            .enable_tasks()
            // The skills extension (SEP-2640), with `resources/directory/read` on skill directories.
            .enable_skills_with_directory_read()
            .build();
        ServerConfig::new(capabilities)
            .with_server_info(Implementation::new("toolhost", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "DeerFlow's tool set, sandboxed. Files live under /mnt/user-data/{workspace,uploads,outputs}; \
                 each MCP session is its own thread with its own directories.",
            )
    }

    async fn list_tools(
        &self,
        _req: Option<PaginatedRequestParams>,
        cx: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        let thread = self.thread(&cx)?;
        let served = self.opening.ready().await?;
        let _in_use = self.keeper.enter(&thread, false);
        let tools = served.host.model_tools(&served.request, &thread).await.map_err(internal)?;
        let tools = tools.iter().filter(|t| served.filter.serves(&t.name)).map(|t| served.mcp_tool(t)).collect();
        served.refresh_param_headers().await;
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn list_resources(
        &self,
        _req: Option<PaginatedRequestParams>,
        cx: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        let thread = self.thread(&cx)?;
        let served = self.opening.ready().await?;
        let _in_use = self.keeper.enter(&thread, false);
        let mut list = super::resources::list(&served.host, &thread).await.map_err(internal)?;
        list.extend(super::skills::resources(served.host.skill_registry().as_ref()));
        Ok(ListResourcesResult::with_all_items(list))
    }

    async fn list_resource_templates(
        &self,
        _req: Option<PaginatedRequestParams>,
        _cx: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, McpError> {
        Ok(ListResourceTemplatesResult::with_all_items(super::resources::templates()))
    }

    async fn read_resource(
        &self,
        req: ReadResourceRequestParams,
        cx: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        let thread = self.thread(&cx)?;
        let served = self.opening.ready().await?;
        let _in_use = self.keeper.enter(&thread, false);
        let uri = cap_text(&req.uri, ECHO_MAX_BYTES);
        if req.uri.starts_with(super::skills::SCHEME) {
            let registry = served.host.skill_registry();
            let (contents, skill_md) = super::skills::read(registry.as_ref(), &req.uri).map_err(skill_error)?;
            // Reading a SKILL.md activates the skill in this thread, as `read_file` of it does.
            if let Some(path) = skill_md {
                let args = serde_json::json!({"description": "Load the skill", "path": path});
                if let Err(e) = served.host.call(&served.request, &thread, "read_file", args, None).await {
                    tracing::warn!(thread = %thread, "activating the skill read as {uri}: {e}");
                }
            }
            return Ok(rmcp::model::ReadResourceResult::new(vec![contents]).into());
        }
        match super::resources::read(&served.host, &thread, &req.uri).await {
            Ok(r) => Ok(r.into()),
            // -32002 is the spec's "resource not found".
            Err(super::resources::ReadError::NotFound(_)) => Err(McpError::new(
                rmcp::model::ErrorCode(-32002),
                format!("Resource not found: {uri}"),
                Some(serde_json::json!({"uri": uri})),
            )),
            Err(e) => Err(McpError::invalid_params(cap_text(&e.to_string(), ECHO_MAX_BYTES), None)),
        }
    }

    /// `skills/list` (SEP-2640): every enabled skill with a valid name, on one page.
    async fn list_skills(
        &self,
        _req: Option<PaginatedRequestParams>,
        _cx: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::ListSkillsResult, McpError> {
        let served = self.opening.ready().await?;
        Ok(super::skills::list(served.host.skill_registry().as_ref()))
    }

    /// `skills/get` (SEP-2640): one skill's entry, by its SKILL.md's URI.
    async fn get_skill(
        &self,
        req: rmcp::model::GetSkillRequestParams,
        _cx: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::GetSkillResult, McpError> {
        let served = self.opening.ready().await?;
        super::skills::get(served.host.skill_registry().as_ref(), &req.uri).map_err(skill_error)
    }

    /// `resources/directory/read` (SEP-2640): the children of a skill directory.
    async fn read_resource_directory(
        &self,
        req: rmcp::model::ReadResourceDirectoryRequestParams,
        _cx: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::ReadResourceDirectoryResult, McpError> {
        let served = self.opening.ready().await?;
        super::skills::read_directory(served.host.skill_registry().as_ref(), &req.uri).map_err(skill_error)
    }

    /// `subscriptions/listen`: what it asks for, with only thread files watched.
    fn accepted_subscription_filter(&self, requested: &SubscriptionFilter) -> Option<SubscriptionFilter> {
        Some(super::listen::accepted_filter(requested))
    }

    /// A listen stream stays open, registered on the thread its request names, until the client
    /// ends it.
    async fn listen(&self, context: SubscriptionContext) -> Result<(), McpError> {
        let thread = self.thread(context.request_context())?;
        let served = self.opening.ready().await?;
        let _hold = self.keeper.hold_session(&thread);
        let _registered = served.listeners.add(&served.host, &thread, context.sink().clone(), context.accepted())?;
        tracing::debug!(thread = %thread, "subscriptions/listen");
        context.cancelled().await;
        Ok(())
    }

    async fn subscribe(&self, req: SubscribeRequestParams, cx: RequestContext<RoleServer>) -> Result<(), McpError> {
        let thread = self.thread(&cx)?;
        if super::resources::vpath_of(&req.uri).is_none() {
            let uri = cap_text(&req.uri, ECHO_MAX_BYTES);
            return Err(McpError::invalid_params(format!("not a toolhost resource: {uri}"), None));
        }
        let served = self.opening.ready().await?;
        let stamp = super::resources::stamp(&served.host, &thread, &req.uri);
        let mut subs = self.subscriptions.lock().unwrap_or_else(|p| p.into_inner());
        if subs.len() >= 1000 && !subs.contains_key(&req.uri) {
            return Err(McpError::invalid_params("at most 1000 subscriptions per session", None));
        }
        subs.insert(req.uri, (thread, stamp));
        Ok(())
    }

    async fn unsubscribe(
        &self,
        req: UnsubscribeRequestParams,
        _cx: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.subscriptions.lock().unwrap_or_else(|p| p.into_inner()).remove(&req.uri);
        Ok(())
    }

    async fn list_prompts(
        &self,
        _req: Option<PaginatedRequestParams>,
        _cx: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, McpError> {
        let served = self.opening.ready().await?;
        Ok(ListPromptsResult::with_all_items(super::resources::prompts(&served.host)))
    }

    async fn get_prompt(
        &self,
        req: GetPromptRequestParams,
        cx: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, McpError> {
        let thread = self.thread(&cx)?;
        let served = self.opening.ready().await?;
        let _in_use = self.keeper.enter(&thread, true);
        let r = super::resources::get_prompt(&served.host, &served.request, &thread, &req.name)
            .await
            .map_err(|e| McpError::invalid_params(cap_text(&e, ECHO_MAX_BYTES), None))?;
        Ok(r.into())
    }

    /// `completion/complete`. A prompt (a skill) declares no arguments, so there is nothing to
    /// suggest for one: an empty list. The outputs template's `path` completes to the thread's
    /// outputs files. An unknown prompt, template or argument is `-32602`, as the spec asks.
    async fn complete(
        &self,
        req: CompleteRequestParams,
        cx: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, McpError> {
        let thread = self.thread(&cx)?;
        let served = self.opening.ready().await?;
        let arg = cap_text(&req.argument.name, ECHO_MAX_BYTES);
        let completion = match &req.r#ref {
            Reference::Prompt(p) => {
                if !super::resources::prompts(&served.host).iter().any(|known| known.name == p.name) {
                    let name = cap_text(&p.name, ECHO_MAX_BYTES);
                    return Err(McpError::invalid_params(
                        format!("Prompt not found: {name} (prompts are the enabled skills)"),
                        None,
                    ));
                }
                CompletionInfo::default()
            }
            Reference::Resource(r) => {
                if !super::resources::templates().iter().any(|t| t.uri_template == r.uri) {
                    let uri = cap_text(&r.uri, ECHO_MAX_BYTES);
                    return Err(McpError::invalid_params(format!("Resource template not found: {uri}"), None));
                }
                if req.argument.name != "path" {
                    return Err(McpError::invalid_params(
                        format!("the template has no argument {arg:?}; its one argument is \"path\""),
                        None,
                    ));
                }
                let _in_use = self.keeper.enter(&thread, false);
                let (values, total) =
                    super::resources::complete_output_path(&served.host, &thread, &req.argument.value)
                        .await
                        .map_err(internal)?;
                let has_more = total > values.len();
                CompletionInfo::with_pagination(values, Some(u32::try_from(total).unwrap_or(u32::MAX)), has_more)
                    .map_err(internal)?
            }
            _ => return Err(McpError::invalid_params("unknown completion reference type", None)),
        };
        Ok(CompleteResult::new(completion))
    }

    async fn set_level(&self, req: SetLevelRequestParams, _cx: RequestContext<RoleServer>) -> Result<(), McpError> {
        *self.log_level.lock().unwrap_or_else(|p| p.into_inner()) = Some(req.level);
        Ok(())
    }

    /// A tool with `x-mcp-header` parameters, for rmcp's check of a `tools/call`'s `Mcp-Param-*`
    /// headers (SEP-2243, protocol 2026-07-28 and later). Synchronous: read from the table kept
    /// by [`Served::refresh_param_headers`]. Before the host is open there is nothing to answer,
    /// which is why the HTTP door holds `tools/call` until it is.
    fn get_tool(&self, name: &str) -> Option<Tool> {
        match self.opening.0.borrow().as_ref() {
            Some(Ok(served)) => served.param_headers.get(name),
            _ => None,
        }
    }

    async fn call_tool(
        &self,
        mut req: CallToolRequestParams,
        cx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let thread = self.thread(&cx)?;
        let token = req.progress_token().or_else(|| cx.meta.get_progress_token());
        let (state, responses) = (req.request_state.take(), req.input_responses.take());
        let args = Value::Object(req.arguments.unwrap_or_default());
        let name = req.name.to_string();
        tracing::debug!(thread = %thread, tool = %name, "tools/call");
        let served = self.opening.ready().await?;
        if !served.filter.serves(&name) {
            // What the pipeline answers for a tool that is not there (--tools / --exclude),
            // naming the served ones as LangGraph's ToolNode names its tools.
            let assembly = served.host.get_available_tools(&served.request).await;
            let names = assembly.tool_node_names();
            let outcome = toolhost::ToolOutcome::not_a_valid_tool(
                &cap_text(&name, ECHO_MAX_BYTES),
                names.into_iter().filter(|n| served.filter.serves(n)),
            );
            return Ok(CallToolResult::error(vec![ContentBlock::text(outcome.text_content())]).into());
        }
        // MCP tasks: a client that supports them gets the tools that may run long as a task.
        // Server-directed, as SEP-2663 has it: the client does not opt in per request (the
        // earlier revision's `params.task` is gone), and the official conformance suite's
        // `tasks-lifecycle` checks exactly that — declaring the extension is the opt-in.
        let wants_tasks = cx.client_capabilities().is_some_and(|c| c.supports_tasks());
        // Without tasks only a configured `required` matters, and that needs no spec.
        let support = if wants_tasks {
            let specs = served.host.model_tools(&served.request, &thread).await.map_err(internal)?;
            served.host.task_support(&name, specs.iter().find(|s| s.name == name))
        } else {
            served.host.task_support(&name, None)
        };
        match support {
            TaskSupport::Required if !wants_tasks => {
                return Err(McpError::missing_required_client_capability(
                    ClientCapabilities::builder().enable_tasks().build(),
                ));
            }
            TaskSupport::Optional | TaskSupport::Required if wants_tasks => {
                let task = self.start_task(served, thread, name, args, token, cx)?;
                return Ok(CallToolResponse::Task(task));
            }
            _ => {}
        }
        // Protocol 2026-07-28 lets a server send no requests: the tool's questions go to the
        // client in the result, and it sends the call again with the answers (SEP-2322).
        let round = if cx.protocol_version().is_some_and(|v| !v.has_initialize()) {
            // Bound to the thread only when the client names it: a request that does not gets a
            // fresh thread each time, as there is no session to keep one.
            let named = (thread != self.thread).then_some(thread.as_str());
            let call = call_binding(named, &name, &args);
            let capabilities = cx.client_capabilities().unwrap_or_default();
            let round = Round::start(&served.state_seal, &call, state.as_deref(), responses, capabilities)?;
            Some((round, call))
        } else {
            None
        };
        let _in_use = self.keeper.enter(&thread, true);
        // A client's `notifications/cancelled` cancels `cx.ct`; the signal carries that into the
        // call, which may be running a component on this very thread (the select below cannot
        // preempt it): the runtime stops the guest within one epoch tick.
        let cancel = CancelSignal::new();
        let raise = {
            let (ct, cancel) = (cx.ct.clone(), cancel.clone());
            AbortOnDrop(tokio::spawn(async move {
                ct.cancelled().await;
                cancel.cancel();
            }))
        };
        let client = round.as_ref().map(|(round, _)| round.client());
        let run = self.run_call(&served, &thread, &name, args, token, cancel.clone(), client, &cx);
        // A client's `notifications/cancelled` cancels `cx.ct`: dropping the call stops it (a
        // subagent's model request and its running tool calls with it). rmcp sends no response
        // for a cancelled request.
        let result = tokio::select! {
            r = run => r?,
            _ = cx.ct.cancelled() => {
                // The call may go on without this future (a component on a blocking thread):
                // raised here too, in case the task above has not run yet.
                cancel.cancel();
                tracing::info!(thread = %thread, tool = %name, "tools/call cancelled by the client");
                return Err(McpError::internal_error("the request was cancelled", None));
            }
        };
        drop(raise);
        // A round's questions are checked twice: the tool's own (its result is then dropped: it
        // ran without the answers), then ask_clarification's, which is asked as the call ends.
        if let Some(ended) = round.as_ref().and_then(|(round, call)| input_required(&served, round, call)) {
            tracing::debug!(thread = %thread, tool = %name, "tools/call needs input");
            return Ok(ended);
        }
        let mcp = self.finish_call(&served, &thread, &name, result, round.as_ref().map(|(r, _)| r), &cx).await;
        if let Some(ended) = round.as_ref().and_then(|(round, call)| input_required(&served, round, call)) {
            return Ok(ended);
        }
        Ok(mcp.into())
    }

    async fn get_task(&self, req: GetTaskParams, _cx: RequestContext<RoleServer>) -> Result<GetTaskResult, McpError> {
        Ok(GetTaskResult::new(self.tasks.get(&req.task_id)?))
    }

    async fn update_task(&self, req: UpdateTaskParams, _cx: RequestContext<RoleServer>) -> Result<(), McpError> {
        self.tasks.update(&req.task_id, req.input_responses)
    }

    async fn cancel_task(&self, req: CancelTaskParams, _cx: RequestContext<RoleServer>) -> Result<(), McpError> {
        self.tasks.cancel(&req.task_id)
    }
}

/// `ask_clarification` as an elicitation: ask the client's user the formatted question and
/// return the answer. `None` when the client cannot elicit or the user declines; the tool result
/// then ends with the question, as in DeerFlow, and the client's agent asks it.
async fn elicit_answer(cx: &RequestContext<RoleServer>, round: Option<&Arc<Round>>, question: &str) -> Option<String> {
    let schema = serde_json::json!({
        "type": "object",
        "properties": {"answer": {"type": "string", "title": "Answer", "description": "Your answer to the question"}},
        "required": ["answer"],
    });
    // Protocol 2026-07-28: asked in the call's result like a component's question; with no
    // answer yet, the round notes the question and the call ends with it (SEP-2322). Otherwise
    // over the session, as a component's question is.
    let client = match round {
        Some(round) => round.client(),
        None => toolhost_core::Client::new(super::client::PeerClient { peer: cx.peer.clone() }),
    };
    match client.elicit(question.to_string(), schema).await {
        Ok(r) if r.action == toolhost_core::ElicitAction::Accept => {
            r.content.as_ref().and_then(|c| c.get("answer")).and_then(Value::as_str).map(str::to_string)
        }
        Ok(_) => None,
        Err(e) => {
            tracing::debug!("ask_clarification: no answer from the client: {e}");
            None
        }
    }
}

/// A skill request's error: what the client named wrong is `-32602`, the rest `-32603`.
fn skill_error(e: super::skills::SkillError) -> McpError {
    let text = cap_text(&e.to_string(), ECHO_MAX_BYTES);
    match e {
        super::skills::SkillError::Unknown(_) => McpError::invalid_params(text, None),
        super::skills::SkillError::Unreadable(_) => McpError::internal_error(text, None),
    }
}

/// A spawned task that is aborted when this is dropped.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outcomes_map_to_mcp_results() {
        let mut o = ToolOutcome::error("Error: nope");
        o.content.push(ContentPart::Image { data: "aGk=".into(), mime_type: "image/png".into() });
        o.structured = Some(serde_json::json!({"k": 1}));
        let r = outcome_to_result(&o);
        assert_eq!(r.is_error, Some(true));
        assert_eq!(r.content.len(), 2);
        assert_eq!(r.content[0].as_text().map(|t| t.text.as_str()), Some("Error: nope"));
        assert!(matches!(&r.content[1], ContentBlock::Image(i) if i.mime_type == "image/png"));
        assert_eq!(r.structured_content, Some(serde_json::json!({"k": 1})));
        // An embedded resource's contents become a `resource` block; a whole block stays one.
        let mut o = ToolOutcome::text("x");
        o.content.push(ContentPart::Resource { resource: serde_json::json!({"uri": "test://r", "text": "hi"}) });
        o.content.push(ContentPart::Resource {
            resource: serde_json::json!({"type": "resource_link", "uri": "https://e.com/", "name": "e"}),
        });
        let r = outcome_to_result(&o);
        let json = serde_json::to_value(&r.content).unwrap();
        assert_eq!(json[1], serde_json::json!({"type": "resource", "resource": {"uri": "test://r", "text": "hi"}}));
        assert_eq!(json[2]["type"], "resource_link");
        let ok = outcome_to_result(&ToolOutcome::text("fine"));
        assert_eq!(ok.is_error, Some(false));
        assert!(ok.structured_content.is_none());
    }
}
