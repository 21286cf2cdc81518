//! An MCP server's tool seen as a toolhost [`Tool`]: name and schema from `tools/list`, calls
//! over a pooled session (per thread for stdio), results converted the way DeerFlow's adapter
//! does (`isError` → error, text/image/resource → content parts, `structuredContent` kept).

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use rmcp::model::CallToolRequestParams;
use rmcp::ServiceError;
use serde_json::{Map, Value};
use toolhost_core::untrusted::{sanitize_py_schema_texts, sanitize_tool_spec};
use toolhost_core::{CallContext, CatalogSlot, ContentPart, Tool, ToolOutcome, ToolSource, ToolSpec};
use toolhost_py::json::PyValue;

use crate::config::{Routing, Transport};
use crate::pool::ServerRuntime;

/// DeerFlow's name rule for MCP tools (after prefixing): `^[A-Za-z0-9_-]+$`.
pub fn is_valid_tool_name(name: &str) -> bool {
    !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// The name the model sees: `{server}_{tool}`, or the raw name with `tool_name_prefix: false`.
pub fn exposed_name(server: &str, tool: &str, prefix: bool) -> String {
    if prefix {
        format!("{server}_{tool}")
    } else {
        tool.to_string()
    }
}

/// DeerFlow's warning for a dropped tool (exact text; see tests/conformance/assembly.json).
pub fn invalid_name_warning(server: &str, name: &str) -> String {
    format!(
        "Dropping MCP tool from server '{server}' with invalid name '{name}': tool names must match \
         ^[A-Za-z0-9_-]+$. A name outside this charset cannot be bound as a function tool and could forge \
         prompt structure when listed as a deferred tool."
    )
}

/// One tool of one MCP server.
pub struct McpTool {
    spec: ToolSpec,
    /// The schema with every number as the server sent it, when `spec.parameters` cannot hold
    /// one exactly (an integer beyond 64 bits).
    exact_parameters: Option<PyValue>,
    /// `spec.parameters` as compact JSON text, written once when the tool is listed: the
    /// deferred catalog renders the tool's `catalog_hash` entry from it in one linear pass.
    parameters_text: String,
    /// The tool's rendered `catalog_hash` entry, once a deferred catalog has rendered it.
    catalog_slot: CatalogSlot,
    original_name: String,
    routing: Option<Routing>,
    output_schema: Option<Value>,
    runtime: Arc<ServerRuntime>,
}

impl std::fmt::Debug for McpTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpTool").field("name", &self.spec.name).field("server", &self.runtime.name()).finish()
    }
}

impl McpTool {
    pub(crate) fn new(
        runtime: Arc<ServerRuntime>,
        tool: rmcp::model::Tool,
        exposed: String,
        exact_parameters: Option<PyValue>,
    ) -> Self {
        let original_name = tool.name.to_string();
        let mut spec = ToolSpec {
            name: exposed,
            description: tool.description.map(|d| d.to_string()).unwrap_or_default(),
            parameters: Value::Object((*tool.input_schema).clone()),
            group: None,
            source: ToolSource::Mcp { server: runtime.name().to_string() },
        };
        // A server's description and schema texts reach the model as they are: neutralized here,
        // once, like its results are on every call.
        sanitize_tool_spec(&mut spec);
        let routing = runtime.config().effective_routing(&original_name);
        let output_schema = tool.output_schema.map(|s| Value::Object((*s).clone()));
        let exact_parameters = exact_parameters.map(sanitize_py_schema_texts);
        let parameters_text = serde_json::to_string(&spec.parameters).unwrap_or_default();
        Self {
            spec,
            exact_parameters,
            parameters_text,
            catalog_slot: CatalogSlot::new(),
            original_name,
            routing,
            output_schema,
            runtime,
        }
    }

    /// The configured server name.
    pub fn server(&self) -> &str {
        self.runtime.name()
    }

    /// The tool's name on its server (without the `{server}_` prefix).
    pub fn original_name(&self) -> &str {
        &self.original_name
    }

    /// Effective routing (server `routing` + `tools.{name}.routing`), `None` when off. This is
    /// DeerFlow's `metadata["deerflow_mcp_routing"]`, for the routing middleware.
    pub fn routing(&self) -> Option<&Routing> {
        self.routing.as_ref()
    }

    /// The tool's `outputSchema`, if it declared one.
    pub fn output_schema(&self) -> Option<&Value> {
        self.output_schema.as_ref()
    }

    /// A failure DeerFlow's adapter would raise (class as Python names it); the host's
    /// error-handling middleware renders it as `Error: Tool '…' failed with {class}: …`.
    fn failure(&self, class: &str, detail: &str) -> ToolOutcome {
        ToolOutcome::raised(class, detail)
    }
}

#[async_trait]
impl Tool for McpTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn exact_parameters(&self) -> Option<&PyValue> {
        self.exact_parameters.as_ref()
    }

    fn parameters_text(&self) -> Option<&str> {
        Some(self.parameters_text.as_str()).filter(|t| !t.is_empty())
    }

    fn catalog_slot(&self) -> Option<&CatalogSlot> {
        Some(&self.catalog_slot)
    }

    async fn call(&self, ctx: &CallContext, args: Value) -> ToolOutcome {
        let arguments = match args {
            Value::Object(map) => map,
            Value::Null => Map::new(),
            other => {
                return self.failure("ValidationError", &format!("arguments must be a JSON object, got {other}"));
            }
        };
        let stdio = self.runtime.transport() == Transport::Stdio;
        // stdio servers run per thread with the thread's workspace as their working directory
        // (created through the thread filesystem layer, which refuses one replaced by a link).
        if stdio {
            if let Err(e) = ctx.fs.dir(toolhost_core::ThreadDir::Workspace) {
                return self.failure("OSError", &e.to_string());
            }
        }
        let workspace = ctx.paths().workspace();
        let (thread, cwd) =
            if stdio { (Some(ctx.thread_id.as_str()), Some(workspace.as_path())) } else { (None, None) };
        let session = match self.runtime.session(thread, cwd, true).await {
            Ok(s) => s,
            Err(e) => return self.failure("McpError", &format!("MCP server '{}' is unavailable: {e}", self.server())),
        };
        let params = CallToolRequestParams::new(self.original_name.clone()).with_arguments(arguments);
        let call = session.service.peer().call_tool(params);
        let result = match self.runtime.config().tool_call_timeout {
            Some(secs) => match tokio::time::timeout(Duration::from_secs_f64(secs), call).await {
                Ok(r) => r,
                Err(_) => {
                    // Dropping the call sent notifications/cancelled, but a stdio server that
                    // ignores it would stay stuck and block every later call of this thread, so
                    // its process is replaced on the next call. The shared http/sse session stays.
                    if stdio {
                        self.runtime.forget(thread, &session).await;
                    }
                    return self.failure(
                        "McpError",
                        &format!("Timed out while waiting for response to ClientRequest. Waiting {secs:?} seconds."),
                    );
                }
            },
            None => call.await,
        };
        match result {
            Ok(r) => {
                let mask = |text: String| if stdio { ctx.paths().mask(&text) } else { text };
                if r.is_error == Some(true) {
                    let blocks: Vec<Value> = r.content.iter().filter_map(|b| serde_json::to_value(b).ok()).collect();
                    let texts: Vec<&str> = blocks
                        .iter()
                        .filter(|b| b.get("type").and_then(Value::as_str) == Some("text"))
                        .filter_map(|b| b.get("text").and_then(Value::as_str))
                        .collect();
                    let detail =
                        if texts.is_empty() { Value::Array(blocks.clone()).to_string() } else { texts.join("\n") };
                    return self.failure("ToolException", &mask(detail));
                }
                let content = r
                    .content
                    .iter()
                    .filter_map(|b| serde_json::to_value(b).ok())
                    .map(|b| convert_block(b, &mask))
                    .collect();
                ToolOutcome { content, structured: r.structured_content, ..ToolOutcome::default() }
            }
            Err(ServiceError::McpError(e)) => self.failure("McpError", &e.message),
            Err(e) => {
                // The connection is gone (crash, killed, network): forget the session so the
                // next call starts the server again.
                self.runtime.forget(thread, &session).await;
                if session.stderr.is_some() {
                    // Let the stderr reader catch the dying server's last lines.
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                let note = session.stderr_note();
                self.failure(
                    "McpError",
                    &format!("Connection closed: MCP server '{}' failed during the call ({e}){note}", self.server()),
                )
            }
        }
    }
}

/// One MCP content block (as JSON) → a content part. Embedded text resources become text and
/// embedded images become images, as DeerFlow's adapter does; the rest is kept verbatim.
fn convert_block(block: Value, mask: &dyn Fn(String) -> String) -> ContentPart {
    let kind = block.get("type").and_then(Value::as_str).unwrap_or("");
    let str_field = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).map(str::to_string);
    match kind {
        "text" => ContentPart::Text { text: mask(str_field(&block, "text").unwrap_or_default()) },
        "image" => ContentPart::Image {
            data: str_field(&block, "data").unwrap_or_default(),
            mime_type: str_field(&block, "mimeType").unwrap_or_default(),
        },
        "resource" => {
            let res = block.get("resource").cloned().unwrap_or(Value::Null);
            if let Some(text) = str_field(&res, "text") {
                return ContentPart::Text { text: mask(text) };
            }
            let mime = str_field(&res, "mimeType").unwrap_or_default();
            match str_field(&res, "blob") {
                Some(data) if mime.starts_with("image/") => ContentPart::Image { data, mime_type: mime },
                _ => ContentPart::Resource { resource: res },
            }
        }
        _ => ContentPart::Resource { resource: block },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn names_follow_deerflow_rule() {
        // §13 item 19.
        for ok in ["srv_ok", "srv_also_ok", "a-b_C9"] {
            assert!(is_valid_tool_name(ok), "{ok}");
        }
        for bad in ["srv_bad name with spaces", "srv_x\ny", "srv_<x>", "srv_a.b", "", "srv_é"] {
            assert!(!is_valid_tool_name(bad), "{bad:?}");
        }
        assert_eq!(exposed_name("github", "create_issue", true), "github_create_issue");
        assert_eq!(exposed_name("raw", "ls", false), "ls");
    }

    #[test]
    fn drop_warning_matches_deerflow() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/conformance/assembly.json");
        let doc: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        let mut checked = 0;
        for v in doc["variants"].as_array().unwrap() {
            for w in v["warnings"].as_array().unwrap() {
                let w = w.as_str().unwrap();
                if let Some(rest) = w.strip_prefix("Dropping MCP tool from server '") {
                    let server = &rest[..rest.find('\'').unwrap()];
                    let name_start = w.find("invalid name '").unwrap() + "invalid name '".len();
                    let name = &w[name_start..w[name_start..].find("': tool names").unwrap() + name_start];
                    assert!(!is_valid_tool_name(name));
                    assert_eq!(invalid_name_warning(server, name), w);
                    checked += 1;
                }
            }
        }
        assert!(checked >= 2);
    }

    #[test]
    fn content_blocks_convert() {
        let id = |s: String| s;
        assert_eq!(convert_block(json!({"type": "text", "text": "hi"}), &id), ContentPart::Text { text: "hi".into() });
        assert_eq!(
            convert_block(json!({"type": "image", "data": "AA==", "mimeType": "image/png"}), &id),
            ContentPart::Image { data: "AA==".into(), mime_type: "image/png".into() }
        );
        assert_eq!(
            convert_block(json!({"type": "resource", "resource": {"uri": "f://a", "text": "body"}}), &id),
            ContentPart::Text { text: "body".into() }
        );
        let blob = json!({"uri": "f://b", "blob": "AA==", "mimeType": "application/pdf"});
        assert_eq!(
            convert_block(json!({"type": "resource", "resource": blob.clone()}), &id),
            ContentPart::Resource { resource: blob }
        );
        let link = json!({"type": "resource_link", "uri": "f://c", "name": "c"});
        assert_eq!(convert_block(link.clone(), &id), ContentPart::Resource { resource: link });
    }
}
