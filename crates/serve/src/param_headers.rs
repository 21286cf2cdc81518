//! SEP-2243 `Mcp-Param-*` headers: the served tools whose input schema marks parameters with
//! `x-mcp-header`, kept where rmcp's streamable HTTP service can look them up synchronously
//! ([`rmcp::ServerHandler::get_tool`]) to check each `tools/call`'s headers against its body.
//! rmcp does the checking (Base64 values, missing or mismatched headers, `-32020`); this owns
//! which tools it checks.

use std::collections::HashMap;
use std::sync::{Arc, RwLock, Weak};

use rmcp::model::Tool;
use serde_json::Value;

use toolhost::assembly::Assembly;

/// Name → MCP tool, for the served tools that declare `x-mcp-header` parameters. Shared by
/// every session of one `serve` (rmcp makes a handler per session, and per request when
/// stateless), rebuilt when the assembly changes.
#[derive(Default)]
pub struct ParamHeaderTools {
    inner: RwLock<Built>,
}

#[derive(Default)]
struct Built {
    /// The assembly the map was built from (not kept alive by it).
    from: Weak<Assembly>,
    tools: HashMap<String, Tool>,
}

impl ParamHeaderTools {
    /// The tool called `name`, when it declares `x-mcp-header` parameters.
    pub fn get(&self, name: &str) -> Option<Tool> {
        self.inner.read().unwrap_or_else(|p| p.into_inner()).tools.get(name).cloned()
    }

    /// Rebuild from `assembly` unless it is the one the map was built from. `serves` says which
    /// tools are served; `to_mcp` is how `tools/list` shows one.
    pub fn refresh(
        &self,
        assembly: &Arc<Assembly>,
        serves: impl Fn(&str) -> bool,
        to_mcp: impl Fn(&toolhost_core::ToolSpec) -> Tool,
    ) {
        if self.inner.read().unwrap_or_else(|p| p.into_inner()).from.as_ptr() == Arc::as_ptr(assembly) {
            return;
        }
        let tools: HashMap<String, Tool> = assembly
            .spec_refs()
            .filter(|s| serves(&s.name) && declares_param_headers(&s.parameters))
            .map(|s| (s.name.clone(), to_mcp(s)))
            .collect();
        if !tools.is_empty() {
            let names: Vec<&str> = tools.keys().map(String::as_str).collect();
            tracing::debug!("tools with Mcp-Param headers (x-mcp-header): {names:?}");
        }
        *self.inner.write().unwrap_or_else(|p| p.into_inner()) = Built { from: Arc::downgrade(assembly), tools };
    }
}

/// Whether a property reached from the root through `properties` alone carries `x-mcp-header`
/// (where SEP-2243 allows it, and where rmcp looks).
pub fn declares_param_headers(schema: &Value) -> bool {
    let Some(Value::Object(properties)) = schema.get("properties") else {
        return false;
    };
    properties.values().any(|p| p.get("x-mcp-header").is_some() || declares_param_headers(p))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn only_annotations_on_the_properties_chain_count() {
        let flat = json!({"type": "object", "properties": {"region": {"type": "string", "x-mcp-header": "Region"}}});
        assert!(declares_param_headers(&flat));
        let nested = json!({"properties": {"a": {"type": "object", "properties": {"b": {"x-mcp-header": "B"}}}}});
        assert!(declares_param_headers(&nested));
        for none in [
            json!({"type": "object", "properties": {"region": {"type": "string"}}}),
            json!({"type": "object"}),
            json!({"$defs": {"x": {"properties": {"y": {"x-mcp-header": "Y"}}}}, "properties": {}}),
            json!({"properties": {"list": {"items": {"x-mcp-header": "I"}}}}),
            json!(null),
        ] {
            assert!(!declares_param_headers(&none), "{none}");
        }
    }
}
