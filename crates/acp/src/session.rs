//! One ACP exchange with a spawned agent, as DeerFlow's `_CollectingClient` does it:
//! `initialize` → `session/new` → `session/prompt`, collecting `agent_message_chunk` text and
//! answering permission requests by the agent's `auto_approve_permissions`.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::schema::{
    ClientCapabilities, ContentBlock, ContentChunk, Implementation, InitializeRequest, McpServer, NewSessionRequest,
    PermissionOption, PermissionOptionKind, PromptRequest, RequestPermissionOutcome, RequestPermissionRequest,
    RequestPermissionResponse, SelectedPermissionOutcome, SessionNotification, SessionUpdate, TextContent,
};
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::{Agent, ByteStreams, Client, Responder, V1};
use tokio::process::{ChildStdin, ChildStdout};
use tokio_util::compat::{TokioAsyncReadCompatExt, TokioAsyncWriteCompatExt};

/// What DeerFlow sends as `clientInfo`.
pub const CLIENT_NAME: &str = "deerflow";
pub const CLIENT_TITLE: &str = "DeerFlow";
pub const CLIENT_VERSION: &str = "0.1.0";

/// The per-call inputs of the exchange.
pub struct Exchange {
    pub agent: String,
    pub prompt: String,
    /// Absolute; sent as `session/new.cwd` (also the process cwd).
    pub cwd: PathBuf,
    pub model: Option<String>,
    pub mcp_servers: Vec<McpServer>,
    pub auto_approve: bool,
}

/// DeerFlow's `_build_permission_response`: with auto-approve, the first `allow_once` option,
/// else the first `allow_always`; otherwise (or with no allow option) `cancelled`.
pub fn choose_permission(options: &[PermissionOption], auto_approve: bool) -> RequestPermissionOutcome {
    if auto_approve {
        for kind in [PermissionOptionKind::AllowOnce, PermissionOptionKind::AllowAlways] {
            if let Some(option) = options.iter().find(|o| o.kind == kind) {
                return RequestPermissionOutcome::Selected(SelectedPermissionOutcome::new(option.option_id.clone()));
            }
        }
    }
    RequestPermissionOutcome::Cancelled
}

/// Run the exchange over the agent's stdio and return the concatenated message text. The
/// caller owns the timeout and the process.
pub async fn run(stdin: ChildStdin, stdout: ChildStdout, ex: Exchange) -> Result<String, agent_client_protocol::Error> {
    let collected = Arc::new(Mutex::new(String::new()));
    let sink = collected.clone();
    let auto_approve = ex.auto_approve;
    let agent_name = ex.agent.clone();
    let transport = ByteStreams::new(stdin.compat_write(), stdout.compat());
    Client
        .v1()
        .name(CLIENT_NAME)
        .on_receive_notification(
            async move |n: SessionNotification, _cx| {
                // Only the agent's message text is the answer; thoughts, tool calls and plans
                // are progress, not result.
                if let SessionUpdate::AgentMessageChunk(ContentChunk { content: ContentBlock::Text(t), .. }) = n.update
                {
                    if let Ok(mut out) = sink.lock() {
                        out.push_str(&t.text);
                    }
                }
                Ok(())
            },
            agent_client_protocol::on_receive_notification!(),
        )
        .on_receive_request(
            async move |req: RequestPermissionRequest,
                        responder: Responder<RequestPermissionResponse, V1>,
                        _cx: ConnectionTo<Agent>| {
                let outcome = choose_permission(&req.options, auto_approve);
                if matches!(outcome, RequestPermissionOutcome::Selected(_)) {
                    tracing::info!(
                        agent = %agent_name,
                        tool_call = %req.tool_call.tool_call_id,
                        "ACP permission auto-approved"
                    );
                } else {
                    tracing::warn!(
                        agent = %agent_name,
                        tool_call = %req.tool_call.tool_call_id,
                        "ACP permission denied (set auto_approve_permissions: true in config.yaml to enable)"
                    );
                }
                responder.respond(RequestPermissionResponse::new(outcome))
            },
            agent_client_protocol::on_receive_request!(),
        )
        .connect_with(transport, async move |cx: ConnectionTo<Agent>| {
            cx.send_request(
                InitializeRequest::new(ProtocolVersion::V1)
                    .client_capabilities(ClientCapabilities::new())
                    .client_info(Implementation::new(CLIENT_NAME, CLIENT_VERSION).title(CLIENT_TITLE.to_string())),
            )
            .block_task()
            .await?;
            let mut new_session = NewSessionRequest::new(ex.cwd).mcp_servers(ex.mcp_servers);
            // DeerFlow passes `model` as an extra keyword of the Python SDK's `new_session`,
            // which puts it into `_meta`.
            if let Some(model) = ex.model.filter(|m| !m.is_empty()) {
                let mut meta = serde_json::Map::new();
                meta.insert("model".to_string(), serde_json::Value::String(model));
                new_session = new_session.meta(meta);
            }
            let session = cx.send_request(new_session).block_task().await?;
            cx.send_request(PromptRequest::new(
                session.session_id,
                vec![ContentBlock::Text(TextContent::new(ex.prompt))],
            ))
            .block_task()
            .await?;
            Ok(())
        })
        .await?;
    let text = collected.lock().map(|s| s.clone()).unwrap_or_default();
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn option(id: &str, kind: PermissionOptionKind) -> PermissionOption {
        PermissionOption::new(id.to_string(), id.to_string(), kind)
    }

    fn selected(outcome: RequestPermissionOutcome) -> Option<String> {
        match outcome {
            RequestPermissionOutcome::Selected(s) => Some(s.option_id.to_string()),
            _ => None,
        }
    }

    #[test]
    fn auto_approve_prefers_allow_once_then_allow_always() {
        let opts = vec![
            option("always", PermissionOptionKind::AllowAlways),
            option("reject", PermissionOptionKind::RejectOnce),
            option("once", PermissionOptionKind::AllowOnce),
        ];
        assert_eq!(selected(choose_permission(&opts, true)).as_deref(), Some("once"));
        assert_eq!(selected(choose_permission(&opts[..2], true)).as_deref(), Some("always"));
        assert_eq!(selected(choose_permission(&opts[1..2], true)), None, "no allow option → cancelled");
        assert_eq!(selected(choose_permission(&opts, false)), None, "not auto-approving → cancelled");
    }
}
