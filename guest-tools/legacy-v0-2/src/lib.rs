//! A `toolhost:tool@0.2.0` component, built straight from `wit/v0.2.0` with wit-bindgen and no
//! SDK, the way a tool compiled before 0.3.0 looks to the host. Test-only: it shows that such a
//! component loads and runs unchanged next to 0.3.0 ones — typed sandbox settings, every 0.2.0
//! content block, progress, and a state update come through as before.

wit_bindgen::generate!({
    world: "tool-component",
    path: "../../wit/v0.2.0",
});

use exports::toolhost::tool::tool::Guest;
use serde_json::Value;
use toolhost::tool::host;
use toolhost::tool::types::{
    CallContext, CallError, ContentBlock, Media, ResourceLink, StateUpdate, ToolResult, ToolSpec,
};

struct Legacy;

impl Guest for Legacy {
    fn list_tools() -> Vec<ToolSpec> {
        vec![ToolSpec {
            name: "legacy2_blocks".into(),
            description: "Text, an image, audio and a link (a toolhost:tool@0.2.0 component).".into(),
            parameters:
                serde_json::json!({"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]})
                    .to_string(),
        }]
    }

    fn call(ctx: CallContext, name: String, args: String) -> Result<ToolResult, CallError> {
        if name != "legacy2_blocks" {
            return Err(CallError::UnknownTool(name));
        }
        let args: Value = serde_json::from_str(&args).map_err(|e| CallError::InvalidArguments(e.to_string()))?;
        let who = args.get("name").and_then(Value::as_str).unwrap_or("nobody");
        host::progress(1.0, Some(2.0), Some("half way"));
        host::log(host::Level::Info, &format!("legacy2_blocks for {who}"));
        let media = |bytes: &[u8], mime: &str| Media { bytes: bytes.to_vec(), mime_type: mime.into() };
        Ok(ToolResult {
            content: vec![
                ContentBlock::Text(format!(
                    "Hello, {who}. (toolhost:tool@0.2.0, read_file cut at {})",
                    ctx.sandbox.read_file_output_max_chars
                )),
                ContentBlock::Image(media(b"\x89PNG", "image/png")),
                ContentBlock::Audio(media(b"RIFF", "audio/wav")),
                ContentBlock::ResourceLink(ResourceLink {
                    uri: "https://example.com/legacy".into(),
                    name: "legacy".into(),
                    mime_type: Some("text/html".into()),
                    description: None,
                }),
            ],
            is_error: false,
            update: Some(StateUpdate {
                artifacts: None,
                viewed_images: None,
                todos: Some(r#"[{"content":"legacy","status":"pending"}]"#.into()),
            }),
        })
    }
}

export!(Legacy);
