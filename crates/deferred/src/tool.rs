//! The `tool_search` tool (DeerFlow's `build_tool_search_tool`): a closure over one catalog that
//! answers with the matched schemas and records the promotion `{catalog_hash, names}`.

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{json, Value};
use toolhost_core::{CallContext, StateUpdate, Tool, ToolOutcome, ToolSource, ToolSpec};

use crate::catalog::DeferredCatalog;

pub const TOOL_SEARCH_NAME: &str = "tool_search";

/// DeerFlow's docstring as langchain's `@tool` turns it into a description
/// (`textwrap.dedent(__doc__).strip()`; the first line starts at the quotes, so the rest keeps
/// its indentation under Python 3.12).
pub const TOOL_SEARCH_DESCRIPTION: &str = "Fetches full schema definitions for deferred tools so they can be called.\n\n        Deferred tools appear by name in <available-deferred-tools> in the system\n        prompt. Until fetched, only the name is known. This tool matches a query\n        against the deferred tools and returns the matched tools complete schemas;\n        once returned, a tool becomes callable.\n\n        Query forms:\n          - \"select:Read,Edit\" -- fetch these exact tools by name\n          - \"notebook jupyter\" -- keyword search, up to max_results best matches\n          - \"+slack send\" -- require \"slack\" in the name, rank by remaining terms";

/// `tool_search`'s spec: one required string `query` (the injected `tool_call_id` is not a
/// model argument), in langchain's key order after title removal.
pub fn tool_search_spec() -> ToolSpec {
    ToolSpec {
        name: TOOL_SEARCH_NAME.to_string(),
        description: TOOL_SEARCH_DESCRIPTION.to_string(),
        parameters: json!({
            "properties": {"query": {"type": "string"}},
            "required": ["query"],
            "type": "object"
        }),
        group: None,
        source: ToolSource::Builtin,
    }
}

/// What one `tool_search` call produced.
#[derive(Debug, Clone, PartialEq)]
pub struct SearchResult {
    pub content: String,
    pub names: Vec<String>,
    /// `{"catalog_hash": H, "names": [...]}`.
    pub promoted: Value,
}

/// The `tool_search` tool over one catalog.
#[derive(Debug, Clone)]
pub struct ToolSearchTool {
    catalog: Arc<DeferredCatalog>,
    spec: ToolSpec,
}

impl ToolSearchTool {
    pub fn new(catalog: Arc<DeferredCatalog>) -> Self {
        Self { catalog, spec: tool_search_spec() }
    }

    pub fn catalog(&self) -> &Arc<DeferredCatalog> {
        &self.catalog
    }

    /// The body of DeerFlow's `tool_search(query)`.
    pub fn search(&self, query: &str) -> SearchResult {
        let matched = self.catalog.search(query);
        let (content, names) = if matched.is_empty() {
            (format!("No tools found matching: {query}"), Vec::new())
        } else {
            (
                DeferredCatalog::render_content(&matched),
                matched.iter().map(|t| t.name().to_string()).collect::<Vec<_>>(),
            )
        };
        let promoted = json!({"catalog_hash": self.catalog.hash(), "names": names});
        SearchResult { content, names, promoted }
    }

    /// [`Self::search`] under an active skill policy (spec §9, `SkillToolPolicyMiddleware`):
    /// denied tools leave both the schemas and `promoted.names`; when every match is denied the
    /// content is `No tools found matching the active skill policy.`. A query that matched
    /// nothing keeps its plain no-match answer (there is nothing to sanitize).
    pub fn search_with_policy(&self, query: &str, allowed: &dyn Fn(&str) -> bool) -> SearchResult {
        let matched = self.catalog.search(query);
        if matched.is_empty() {
            return self.search(query);
        }
        let kept: Vec<_> = matched.into_iter().filter(|t| allowed(t.name())).collect();
        let names: Vec<String> = kept.iter().map(|t| t.name().to_string()).collect();
        let content = if kept.is_empty() {
            "No tools found matching the active skill policy.".to_string()
        } else {
            DeferredCatalog::render_content(&kept)
        };
        let promoted = json!({"catalog_hash": self.catalog.hash(), "names": names});
        SearchResult { content, names, promoted }
    }

    /// The call as the host runs it: content plus `StateUpdate { promoted }`.
    pub fn run(&self, args: &Value) -> ToolOutcome {
        let query = match args.get("query") {
            Some(Value::String(q)) => q,
            Some(other) => {
                return ToolOutcome::error(format!(
                    "Error: tool_search argument 'query' must be a string, got {}",
                    json_type(other)
                ))
            }
            None => return ToolOutcome::error("Error: tool_search requires the argument 'query' (a string)"),
        };
        let result = self.search(query);
        ToolOutcome::text(result.content)
            .with_update(StateUpdate { promoted: Some(result.promoted), ..StateUpdate::default() })
    }
}

fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[async_trait]
impl Tool for ToolSearchTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn call(&self, _ctx: &CallContext, args: Value) -> ToolOutcome {
        self.run(&args)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::DeferredToolInput;
    use std::future::Future;
    use std::task::{Context, Poll, Waker};
    use toolhost_core::ThreadState;
    use toolhost_py::json::PyValue;

    fn catalog(names: &[&str]) -> Arc<DeferredCatalog> {
        let schema = PyValue::parse(r#"{"type":"object","properties":{"expression":{"type":"string"}}}"#).unwrap();
        Arc::new(
            DeferredCatalog::new(names.iter().map(|n| DeferredToolInput {
                name: n.to_string(),
                description: format!("{n} tool"),
                schema: schema.clone(),
            }))
            .unwrap(),
        )
    }

    fn block_on<F: Future>(f: F) -> F::Output {
        let mut f = std::pin::pin!(f);
        let mut cx = Context::from_waker(Waker::noop());
        match f.as_mut().poll(&mut cx) {
            Poll::Ready(v) => v,
            Poll::Pending => panic!("tool_search never waits"),
        }
    }

    #[test]
    fn call_returns_content_and_promotion() {
        let tool = ToolSearchTool::new(catalog(&["mcp_calc", "other"]));
        assert_eq!(tool.spec().name, "tool_search");
        assert_eq!(tool.spec().parameters["required"], json!(["query"]));
        let dir = tempfile::tempdir().unwrap();
        let fs = toolhost_core::ThreadFs::open(dir.path(), "t1").unwrap();
        let ctx = CallContext::new(Arc::new(fs), "tc1", Arc::new(ThreadState::default()));
        let out = block_on(tool.call(&ctx, json!({"query": "select:mcp_calc"})));
        assert!(!out.is_error());
        assert!(out.text_content().starts_with("[\n  {\n    \"name\": \"mcp_calc\""));
        assert_eq!(out.update.promoted, Some(json!({"catalog_hash": tool.catalog().hash(), "names": ["mcp_calc"]})));
        let none = block_on(tool.call(&ctx, json!({"query": "select:nonexistent"})));
        assert_eq!(none.text_content(), "No tools found matching: select:nonexistent");
        assert_eq!(none.update.promoted.unwrap()["names"], json!([]));
    }

    #[test]
    fn skill_policy_removes_denied_schemas_and_names() {
        let tool = ToolSearchTool::new(catalog(&["mcp_a", "mcp_b"]));
        let only_b = |n: &str| n == "mcp_b";
        let r = tool.search_with_policy("select:mcp_a,mcp_b", &only_b);
        assert_eq!(r.names, ["mcp_b"]);
        assert_eq!(r.content, tool.search("select:mcp_b").content);
        let none = tool.search_with_policy("select:mcp_a", &only_b);
        assert_eq!(none.content, "No tools found matching the active skill policy.");
        assert_eq!(none.promoted, json!({"catalog_hash": tool.catalog().hash(), "names": []}));
        assert_eq!(tool.search_with_policy("zzz", &only_b), tool.search("zzz"));
    }

    #[test]
    fn bad_arguments_are_errors_naming_the_problem() {
        let tool = ToolSearchTool::new(catalog(&["a"]));
        let missing = tool.run(&json!({}));
        assert!(missing.is_error() && missing.text_content().contains("'query'"));
        assert!(missing.update.promoted.is_none());
        let wrong = tool.run(&json!({"query": 3}));
        assert!(wrong.is_error() && wrong.text_content().contains("a number"));
    }

    #[test]
    fn hash_is_order_independent_and_membership_sensitive() {
        assert_eq!(catalog(&["a", "b"]).hash(), catalog(&["b", "a"]).hash());
        assert_ne!(catalog(&["a", "b"]).hash(), catalog(&["a"]).hash());
    }

    #[test]
    fn grammar_edges_from_deerflow_tests() {
        let names: Vec<String> = (b'a'..=b'h').map(|c| format!("tool_{}", c as char)).collect();
        let refs: Vec<&str> = names.iter().map(String::as_str).collect();
        let cat = catalog(&refs);
        let found = |q: &str| cat.search(q).iter().map(|t| t.name().to_string()).collect::<Vec<_>>();
        for q in ["", "   ", "+", " + "] {
            assert!(found(q).is_empty(), "{q:?}");
        }
        assert_eq!(found("select:tool_f,tool_a,tool_b,tool_c,tool_d,tool_e").len(), 6);
        assert_eq!(found("select:tool_f,tool_a")[0], "tool_a");
        assert_eq!(found("+tool_").len(), 5);
        assert_eq!(found("+TOOL_H"), ["tool_h"]);
        // Score 2 (name matches) ranks before score 1 (description only).
        let cat = Arc::new(
            DeferredCatalog::new([("x_first", "mentions beta"), ("beta_second", "other")].map(|(n, d)| {
                DeferredToolInput { name: n.into(), description: d.into(), schema: PyValue::parse("{}").unwrap() }
            }))
            .unwrap(),
        );
        let order: Vec<&str> = cat.search("beta").iter().map(|t| t.name()).collect();
        assert_eq!(order, ["beta_second", "x_first"]);
        // `$` anchors the whole "name description" text, so a name-only match does not count.
        assert!(cat.search("second$").is_empty());
    }
}
