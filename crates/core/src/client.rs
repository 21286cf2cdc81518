//! Asking whoever made a call during it: an MCP client's user (elicitation) or its model
//! (sampling). `toolhost serve` supplies a [`ClientRequests`] that sends MCP requests back to
//! the client; an embedder may supply its own; without one, a tool's question fails with an
//! error that says nobody is there to answer.

use std::sync::Arc;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// What the user did with an elicitation (MCP's `action`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ElicitAction {
    Accept,
    Decline,
    Cancel,
}

/// The answer to an elicitation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Elicited {
    pub action: ElicitAction,
    /// On `Accept`: the answer, a JSON object matching the requested schema.
    pub content: Option<Value>,
}

/// Who said a message of a sampling conversation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    User,
    Assistant,
}

/// One text message of a sampling conversation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SamplingMessage {
    pub role: Role,
    pub text: String,
}

/// MCP `sampling/createMessage`, text only.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SamplingRequest {
    pub messages: Vec<SamplingMessage>,
    pub system_prompt: Option<String>,
    pub max_tokens: u32,
    pub temperature: Option<f64>,
}

/// What the client's model answered.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SamplingAnswer {
    pub role: Role,
    /// The answer's text; empty when the model answered with something else (an image).
    pub text: String,
    /// The model that answered, as the client names it.
    pub model: String,
    pub stop_reason: Option<String>,
}

/// Requests a tool may send back to whoever made its call. Errors are texts the tool (and so the
/// model) reads: say what failed ("the client does not offer elicitation", "the client answered
/// -32603: …").
#[async_trait]
pub trait ClientRequests: Send + Sync {
    /// Show `message` to the client's user and ask for an object matching `requested_schema`
    /// (MCP `elicitation/create`, form mode).
    async fn elicit(&self, message: String, requested_schema: Value) -> Result<Elicited, String>;

    /// Ask the client's model for a completion (MCP `sampling/createMessage`).
    async fn create_message(&self, request: SamplingRequest) -> Result<SamplingAnswer, String>;

    /// [`Self::elicit`] under the tool's own key for the question. The key matters to clients
    /// that answer in rounds (MCP 2026-07-28); the default ignores it.
    async fn elicit_as(
        &self,
        key: Option<String>,
        message: String,
        requested_schema: Value,
    ) -> Result<Elicited, String> {
        let _ = key;
        self.elicit(message, requested_schema).await
    }

    /// [`Self::create_message`] under the tool's own key (see [`Self::elicit_as`]).
    async fn create_message_as(&self, key: Option<String>, request: SamplingRequest) -> Result<SamplingAnswer, String> {
        let _ = key;
        self.create_message(request).await
    }

    /// The client's roots (MCP `roots/list`), under the tool's key if given. The default: none
    /// to give.
    async fn list_roots(&self, key: Option<String>) -> Result<Vec<Root>, String> {
        let _ = key;
        Err("this client offers no roots".into())
    }
}

/// A root the client exposes (MCP `roots/list`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Root {
    /// A `file://` URI on the client's side.
    pub uri: String,
    pub name: Option<String>,
}

/// A shared client is a client: an embedder keeps its own `Arc` to look at what was asked.
#[async_trait]
impl<T: ClientRequests + ?Sized> ClientRequests for Arc<T> {
    async fn elicit(&self, message: String, requested_schema: Value) -> Result<Elicited, String> {
        (**self).elicit(message, requested_schema).await
    }

    async fn create_message(&self, request: SamplingRequest) -> Result<SamplingAnswer, String> {
        (**self).create_message(request).await
    }

    async fn elicit_as(
        &self,
        key: Option<String>,
        message: String,
        requested_schema: Value,
    ) -> Result<Elicited, String> {
        (**self).elicit_as(key, message, requested_schema).await
    }

    async fn create_message_as(&self, key: Option<String>, request: SamplingRequest) -> Result<SamplingAnswer, String> {
        (**self).create_message_as(key, request).await
    }

    async fn list_roots(&self, key: Option<String>) -> Result<Vec<Root>, String> {
        (**self).list_roots(key).await
    }
}

/// A shared [`ClientRequests`], as calls carry it.
#[derive(Clone)]
pub struct Client(Arc<dyn ClientRequests>);

impl Client {
    pub fn new(requests: impl ClientRequests + 'static) -> Self {
        Self(Arc::new(requests))
    }

    /// See [`ClientRequests::elicit`].
    pub async fn elicit(&self, message: String, requested_schema: Value) -> Result<Elicited, String> {
        self.0.elicit(message, requested_schema).await
    }

    /// See [`ClientRequests::create_message`].
    pub async fn create_message(&self, request: SamplingRequest) -> Result<SamplingAnswer, String> {
        self.0.create_message(request).await
    }

    /// See [`ClientRequests::elicit_as`].
    pub async fn elicit_as(
        &self,
        key: Option<String>,
        message: String,
        requested_schema: Value,
    ) -> Result<Elicited, String> {
        self.0.elicit_as(key, message, requested_schema).await
    }

    /// See [`ClientRequests::create_message_as`].
    pub async fn create_message_as(
        &self,
        key: Option<String>,
        request: SamplingRequest,
    ) -> Result<SamplingAnswer, String> {
        self.0.create_message_as(key, request).await
    }

    /// See [`ClientRequests::list_roots`].
    pub async fn list_roots(&self, key: Option<String>) -> Result<Vec<Root>, String> {
        self.0.list_roots(key).await
    }
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Client")
    }
}
