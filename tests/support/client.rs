//! An embedder's MCP-client stand-in for the tests of the WIT `client` interface: it records
//! what a component asked (elicitation, sampling) and answers as told.

use std::sync::Mutex;

use serde_json::{json, Value};

/// Records each request as one line (`elicit MESSAGE SCHEMA`, `sample PROMPT system=… max=…`);
/// accepts an elicitation with `{<first property>: "Ada"}`; samples `echo PROMPT`.
#[derive(Default)]
pub struct RecordingClient {
    pub asked: Mutex<Vec<String>>,
    /// Never answer (a user who walked away).
    pub hang: bool,
}

#[async_trait::async_trait]
impl toolhost::core::ClientRequests for RecordingClient {
    async fn elicit(&self, message: String, schema: Value) -> Result<toolhost::core::Elicited, String> {
        self.asked.lock().unwrap().push(format!("elicit {message} {schema}"));
        if self.hang {
            std::future::pending::<()>().await;
        }
        let name = schema["properties"].as_object().and_then(|p| p.keys().next().cloned()).unwrap_or_default();
        Ok(toolhost::core::Elicited {
            action: toolhost::core::ElicitAction::Accept,
            content: Some(json!({ name: "Ada" })),
        })
    }

    async fn create_message(
        &self,
        request: toolhost::core::SamplingRequest,
    ) -> Result<toolhost::core::SamplingAnswer, String> {
        let prompt = request.messages.iter().map(|m| m.text.as_str()).collect::<Vec<_>>().join("|");
        self.asked
            .lock()
            .unwrap()
            .push(format!("sample {prompt} system={:?} max={}", request.system_prompt, request.max_tokens));
        Ok(toolhost::core::SamplingAnswer {
            role: toolhost::core::Role::Assistant,
            text: format!("echo {prompt}"),
            model: "test-model".into(),
            stop_reason: Some("endTurn".into()),
        })
    }
}
