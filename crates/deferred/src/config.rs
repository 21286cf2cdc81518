//! The `tool_search:` section of `config.yaml`: deferred MCP tools, with DeerFlow's defaults.

use serde::Deserialize;

/// `tool_search:`.
#[derive(Debug, Clone, Deserialize)]
#[serde(default)]
pub struct ToolSearchConfig {
    /// Defer MCP tools behind `tool_search`.
    pub enabled: bool,
    /// How many of the best matches a model turn promotes on its own (McpRouting).
    pub auto_promote_top_k: i64,
}

impl Default for ToolSearchConfig {
    fn default() -> Self {
        Self { enabled: false, auto_promote_top_k: 3 }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_deerflows() {
        let c: ToolSearchConfig = serde_json::from_str("{}").unwrap();
        assert!(!c.enabled);
        assert_eq!(c.auto_promote_top_k, 3);
        assert!(serde_json::from_str::<ToolSearchConfig>(r#"{"enabled": "yes"}"#).is_err());
    }
}
