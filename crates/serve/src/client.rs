//! The MCP client of a `tools/call`, as the [`toolhost_core::ClientRequests`] a component asks
//! through the WIT `client` import: elicitation and sampling sent back over the same session,
//! refused with a clear error when the client did not declare the capability. Clients of the
//! 2026-07-28 revision are asked without a session instead, in the call's result
//! ([`super::mrtr`]); both build their requests and read their answers here.
//!
//! Sampling is deprecated by the 2026-07-28 revision (SEP-2577, which lets a server send no
//! requests at all); sessions of the 2025 revisions still offer it, and rmcp marks its types.
#![allow(deprecated)]

use async_trait::async_trait;
use rmcp::model::{
    CreateMessageRequestParams, CreateMessageResult, ElicitRequestParams, ElicitResult, ElicitationAction,
    ListRootsResult, Role as McpRole, SamplingMessage,
};
use rmcp::service::{Peer, RoleServer};
use serde_json::Value;
use toolhost_core::{ClientRequests, ElicitAction, Elicited, Role, Root, SamplingAnswer, SamplingRequest};

/// The client at the other end of one session.
pub struct PeerClient {
    pub peer: Peer<RoleServer>,
}

/// The params of `elicitation/create` (form mode) for a component's question.
pub fn elicit_params(message: String, requested_schema: Value) -> Result<ElicitRequestParams, String> {
    let requested_schema = serde_json::from_value(requested_schema)
        .map_err(|e| format!("the requested schema is not one MCP's form elicitation takes: {e}"))?;
    Ok(ElicitRequestParams::FormElicitationParams { meta: None, message, requested_schema })
}

/// The params of `sampling/createMessage` for a component's request.
pub fn sampling_params(request: SamplingRequest) -> CreateMessageRequestParams {
    let messages = request
        .messages
        .into_iter()
        .map(|m| match m.role {
            Role::User => SamplingMessage::user_text(m.text),
            Role::Assistant => SamplingMessage::assistant_text(m.text),
        })
        .collect();
    let mut params = CreateMessageRequestParams::new(messages, request.max_tokens);
    params.system_prompt = request.system_prompt;
    params.temperature = request.temperature.map(|t| t as f32);
    params
}

/// A client's elicitation answer as the component reads it.
pub fn elicited(r: ElicitResult) -> Elicited {
    Elicited {
        action: match r.action {
            ElicitationAction::Accept => ElicitAction::Accept,
            ElicitationAction::Decline => ElicitAction::Decline,
            // Cancel, and whatever a later revision adds: no answer.
            _ => ElicitAction::Cancel,
        },
        content: r.content,
    }
}

/// A client's sampling answer as the component reads it: its text parts joined.
pub fn sampled(r: CreateMessageResult) -> SamplingAnswer {
    let text =
        r.message.content.into_vec().iter().filter_map(|c| c.as_text().map(|t| t.text.as_str())).collect::<String>();
    SamplingAnswer {
        role: match r.message.role {
            McpRole::User => Role::User,
            McpRole::Assistant => Role::Assistant,
        },
        text,
        model: r.model,
        stop_reason: r.stop_reason,
    }
}

/// A client's roots as the component reads them.
pub fn roots_of(r: ListRootsResult) -> Vec<Root> {
    r.roots.into_iter().map(|r| Root { uri: r.uri, name: r.name }).collect()
}

/// The refusal when the client did not declare `capability`.
pub fn not_offered(capability: &str) -> String {
    format!("the MCP client does not offer {capability} (no `{capability}` capability)")
}

#[async_trait]
impl ClientRequests for PeerClient {
    async fn elicit(&self, message: String, requested_schema: Value) -> Result<Elicited, String> {
        let supports = self.peer.peer_info().is_some_and(|i| i.capabilities.elicitation.is_some());
        if !supports {
            return Err(not_offered("elicitation"));
        }
        let params = elicit_params(message, requested_schema)?;
        let r = self.peer.create_elicitation(params).await.map_err(|e| format!("the client answered: {e}"))?;
        Ok(elicited(r))
    }

    async fn create_message(&self, request: SamplingRequest) -> Result<SamplingAnswer, String> {
        let supports = self.peer.peer_info().is_some_and(|i| i.capabilities.sampling.is_some());
        if !supports {
            return Err(not_offered("sampling"));
        }
        let r = self
            .peer
            .create_message(sampling_params(request))
            .await
            .map_err(|e| format!("the client answered: {e}"))?;
        Ok(sampled(r))
    }

    async fn list_roots(&self, _key: Option<String>) -> Result<Vec<Root>, String> {
        let supports = self.peer.peer_info().is_some_and(|i| i.capabilities.roots.is_some());
        if !supports {
            return Err(not_offered("roots"));
        }
        let r = self.peer.list_roots().await.map_err(|e| format!("the client answered: {e}"))?;
        Ok(roots_of(r))
    }
}
