//! The MCP `ServerHandler` of `toolhost serve`: one value per MCP session, bound to one toolhost
//! thread. tools/list is the model's view in that thread; tools/call runs through the pipeline
//! there; promotions by `tool_search` are announced with `notifications/tools/list_changed`; a
//! call whose request carries a `progressToken` has its tool's progress reports sent as
//! `notifications/progress`.

use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ElicitRequestParams, ElicitationAction,
    Implementation, JsonObject, ListToolsResult, PaginatedRequestParams, ProgressNotificationParam, RequestParamsMeta,
    Resource, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};
use serde_json::Value;
use toolhost_core::{ContentPart, Progress, ProgressSink, ToolOutcome};

use crate::assembly::AssemblyRequest;
use crate::host::Toolhost;

/// One MCP session's handler, bound to one toolhost thread.
#[derive(Clone)]
pub struct McpSessionHandler {
    host: Arc<Toolhost>,
    request: Arc<AssemblyRequest>,
    /// stdio: named up front (`--thread`). Streamable HTTP: a random id per session
    /// ([`session_thread_id`]), unrelated to the `Mcp-Session-Id`, so that a thread directory's
    /// name never tells anyone how to speak in that session.
    thread: String,
}

impl McpSessionHandler {
    pub fn new(host: Arc<Toolhost>, request: Arc<AssemblyRequest>, thread: String) -> Self {
        Self { host, request, thread }
    }

    /// The toolhost thread this session's requests run in.
    fn thread(&self, _cx: &RequestContext<RoleServer>) -> String {
        self.thread.clone()
    }
}

/// A fresh thread id for an HTTP session: `mcp-` and 128 random bits in hex.
pub fn session_thread_id() -> std::io::Result<String> {
    use ring::rand::SecureRandom as _;
    let mut bits = [0u8; 16];
    ring::rand::SystemRandom::new()
        .fill(&mut bits)
        .map_err(|_| std::io::Error::other("the system random number generator failed"))?;
    Ok(format!("mcp-{}", hex::encode(bits)))
}

fn internal(e: impl std::fmt::Display) -> McpError {
    McpError::internal_error(e.to_string(), None)
}

/// A toolhost outcome as an MCP tool result: text, image, audio and resource-link parts as MCP's
/// content of that type, MCP resources as the server sent them, `isError` from the status,
/// `structuredContent` when present.
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
            // The MCP layer keeps the whole block it received; anything else is shown as JSON text.
            ContentPart::Resource { resource } => serde_json::from_value::<ContentBlock>(resource.clone())
                .unwrap_or_else(|_| ContentBlock::text(resource.to_string())),
        })
        .collect();
    let mut result = if outcome.is_error() { CallToolResult::error(content) } else { CallToolResult::success(content) };
    result.structured_content = outcome.structured.clone();
    result
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
        ServerConfig::new(ServerCapabilities::builder().enable_tools().enable_tool_list_changed().build())
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
        let thread = self.thread(&cx);
        let tools = self.host.model_tools(&self.request, &thread).await.map_err(internal)?;
        let tools = tools
            .iter()
            .map(|t| {
                let s = t;
                let schema: JsonObject = match &s.parameters {
                    Value::Object(o) => o.clone(),
                    // MCP requires an object schema; a tool without parameters takes an empty object.
                    _ => {
                        serde_json::json!({"type": "object", "properties": {}}).as_object().cloned().unwrap_or_default()
                    }
                };
                Tool::new(s.name.clone(), s.description.clone(), Arc::new(schema))
            })
            .collect();
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        req: CallToolRequestParams,
        cx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let thread = self.thread(&cx);
        let token = req.progress_token().or_else(|| cx.meta.get_progress_token());
        let args = Value::Object(req.arguments.unwrap_or_default());
        let name = req.name.to_string();
        tracing::debug!(thread = %thread, tool = %name, "tools/call");
        let result = match token {
            None => self.host.call(&self.request, &thread, &name, args, None).await,
            Some(token) => {
                // The tool reports on the thread that runs it; a task sends the notifications in
                // order, and all of them are sent before the result.
                let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Progress>();
                let peer = cx.peer.clone();
                let forward = tokio::spawn(async move {
                    while let Some(p) = rx.recv().await {
                        let mut n = ProgressNotificationParam::new(token.clone(), p.progress);
                        n.total = p.total;
                        n.message = p.message;
                        if let Err(e) = peer.notify_progress(n).await {
                            tracing::debug!("cannot send a progress notification: {e}");
                        }
                    }
                });
                let sink = ProgressSink::new(move |p| drop(tx.send(p)));
                let r = self.host.call_with_progress(&self.request, &thread, &name, args, None, sink).await;
                if let Err(e) = forward.await {
                    tracing::debug!("progress forwarding ended: {e}");
                }
                r
            }
        }
        .map_err(internal)?;
        for e in &result.state_errors {
            tracing::warn!(thread = %thread, tool = %name, "state update refused: {e}");
        }
        let outcome = result.outcome;
        if promoted_something(&outcome) {
            if let Err(e) = cx.peer.notify_tool_list_changed().await {
                tracing::warn!("cannot send tools/list_changed: {e}");
            }
        }
        let mut mcp = outcome_to_result(&outcome);
        if name == toolhost_builtins::clarification::NAME && outcome.end_run && !outcome.is_error() {
            if let Some(answer) = elicit_answer(&cx, &outcome.text_content()).await {
                mcp.content.push(ContentBlock::text(format!("The user answered: {answer}")));
            }
        }
        Ok(mcp.into())
    }
}

/// `ask_clarification` as an elicitation: ask the client's user the formatted question and
/// return the answer. `None` when the client cannot elicit or the user declines; the tool result
/// then ends with the question, as in DeerFlow, and the client's agent asks it.
async fn elicit_answer(cx: &RequestContext<RoleServer>, question: &str) -> Option<String> {
    let supports = cx.peer.peer_info().is_some_and(|i| i.capabilities.elicitation.is_some());
    if !supports {
        return None;
    }
    let schema = serde_json::json!({
        "type": "object",
        "properties": {"answer": {"type": "string", "title": "Answer", "description": "Your answer to the question"}},
        "required": ["answer"],
    });
    let requested_schema = match serde_json::from_value(schema) {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!("elicitation schema: {e}");
            return None;
        }
    };
    let params =
        ElicitRequestParams::FormElicitationParams { meta: None, message: question.to_string(), requested_schema };
    match cx.peer.create_elicitation(params).await {
        Ok(r) if r.action == ElicitationAction::Accept => {
            r.content.as_ref().and_then(|c| c.get("answer")).and_then(Value::as_str).map(str::to_string)
        }
        Ok(_) => None,
        Err(e) => {
            tracing::warn!("elicitation for ask_clarification failed: {e}");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_threads_are_random_and_valid() {
        let (a, b) = (session_thread_id().unwrap(), session_thread_id().unwrap());
        assert_ne!(a, b);
        assert!(a.len() == 36 && a.starts_with("mcp-") && a[4..].chars().all(|c| c.is_ascii_hexdigit()), "{a}");
        assert!(toolhost_core::ThreadPaths::new(std::path::Path::new("/tmp"), &a).is_ok());
    }

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
        let mut rich = ToolOutcome::text("t");
        rich.content.push(ContentPart::Audio { data: "UklGRg==".into(), mime_type: "audio/wav".into() });
        rich.content.push(ContentPart::ResourceLink {
            uri: "https://example.com/r".into(),
            name: "r".into(),
            mime_type: Some("text/html".into()),
            description: Some("d".into()),
        });
        let json = serde_json::to_value(&outcome_to_result(&rich).content).unwrap();
        // MCP's wire shapes (2025-06-18 `AudioContent`, `ResourceLink`).
        assert_eq!(
            json,
            serde_json::json!([
                {"type": "text", "text": "t"},
                {"type": "audio", "data": "UklGRg==", "mimeType": "audio/wav"},
                {"type": "resource_link", "uri": "https://example.com/r", "name": "r", "description": "d", "mimeType": "text/html"},
            ])
        );
        assert_eq!(r.structured_content, Some(serde_json::json!({"k": 1})));
        let ok = outcome_to_result(&ToolOutcome::text("fine"));
        assert_eq!(ok.is_error, Some(false));
        assert!(ok.structured_content.is_none());
    }
}
