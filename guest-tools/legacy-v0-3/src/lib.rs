//! A `toolhost:tool@0.3.0` component, built straight from `wit/v0.3.0` with wit-bindgen and no
//! SDK, the way a tool compiled before 0.4.0 looks to the host. Test-only: it shows that such a
//! component loads and runs unchanged next to 0.4.0 ones — an embedded resource comes through,
//! and its questions to the client (0.3.0's `client.elicit`, without a key) still reach it.

wit_bindgen::generate!({
    world: "tool-component",
    path: "../../wit/v0.3.0",
});

use exports::toolhost::tool::tool::Guest;
use serde_json::Value;
use toolhost::tool::client;
use toolhost::tool::types::{
    CallContext, CallError, ContentBlock, EmbeddedResource, ResourceContents, ToolResult, ToolSpec,
};

struct Legacy;

impl Guest for Legacy {
    fn list_tools() -> Vec<ToolSpec> {
        vec![ToolSpec {
            name: "legacy3_ask".into(),
            description: "Asks the client's user a name and embeds it (a toolhost:tool@0.3.0 component).".into(),
            parameters: serde_json::json!({"type": "object", "properties": {}}).to_string(),
        }]
    }

    fn call(_ctx: CallContext, name: String, _args: String) -> Result<ToolResult, CallError> {
        if name != "legacy3_ask" {
            return Err(CallError::UnknownTool(name));
        }
        let schema = serde_json::json!({"type": "object", "properties": {"name": {"type": "string"}}});
        let answer = client::elicit("Your name?", &schema.to_string()).map_err(CallError::Failed)?;
        let content: Value =
            answer.content.as_deref().and_then(|c| serde_json::from_str(c).ok()).unwrap_or(Value::Null);
        let who = content.get("name").and_then(Value::as_str).unwrap_or("nobody").to_string();
        Ok(ToolResult {
            content: vec![
                ContentBlock::Text(format!("Hello, {who}. (toolhost:tool@0.3.0)")),
                ContentBlock::EmbeddedResource(EmbeddedResource {
                    uri: "https://example.com/legacy3".into(),
                    mime_type: Some("text/plain".into()),
                    contents: ResourceContents::Text(who),
                }),
            ],
            is_error: false,
            update: None,
        })
    }
}

export!(Legacy);
