//! Deferred-tool assembly and gating: `assemble_deferred_tools` (fail closed), the
//! `<available-deferred-tools>` prompt section, and `DeferredToolFilterMiddleware`'s two checks —
//! which tools the model sees and whether a call to a deferred tool may run.

use std::collections::HashSet;
use std::sync::Arc;

use serde_json::Value;
use toolhost_core::{Tool, ToolOutcome, ToolSpec};

use crate::catalog::{CatalogSource, DeferredCatalog};
use crate::error::DeferredError;
use crate::tool::ToolSearchTool;

/// DeerFlow's `DeferredToolSetup`: all three set, or all three empty.
#[derive(Clone, Default)]
pub struct DeferredToolSetup {
    pub tool_search: Option<Arc<ToolSearchTool>>,
    /// Shared with the filters made from this setup ([`DeferredToolSetup::filter`]).
    pub deferred_names: Arc<HashSet<String>>,
    pub catalog_hash: Option<String>,
}

impl std::fmt::Debug for DeferredToolSetup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeferredToolSetup")
            .field("deferred_names", &self.deferred_names)
            .field("catalog_hash", &self.catalog_hash)
            .finish()
    }
}

impl DeferredToolSetup {
    /// The populated setup for a catalog (at least one tool).
    pub fn from_catalog(catalog: DeferredCatalog) -> Self {
        let deferred_names = catalog.name_set().clone();
        let catalog_hash = Some(catalog.hash().to_string());
        Self { tool_search: Some(Arc::new(ToolSearchTool::new(Arc::new(catalog)))), deferred_names, catalog_hash }
    }

    pub fn is_empty(&self) -> bool {
        self.tool_search.is_none()
    }

    /// The filter that gates this setup's deferred tools (sharing this setup's names).
    pub fn filter(&self) -> DeferredToolFilter {
        DeferredToolFilter::new(self.deferred_names.clone(), self.catalog_hash.clone())
    }

    /// This setup's `<available-deferred-tools>` section.
    pub fn prompt_section(&self) -> String {
        deferred_tools_prompt_section(self.deferred_names.iter().map(String::as_str))
    }
}

/// `build_deferred_tool_setup`: empty when disabled or when no candidate is an MCP tool.
pub fn build_deferred_tool_setup(
    candidates: &[Arc<dyn Tool>],
    enabled: bool,
) -> Result<DeferredToolSetup, DeferredError> {
    if !enabled {
        return Ok(DeferredToolSetup::default());
    }
    // The tools themselves: a schema is rendered straight from the spec's serde_json value (or
    // from the tool's exact schema, where integers beyond 64 bits keep their digits, as in
    // DeerFlow's catalog_hash) and converted from the tool when a search first returns it.
    let deferred: Vec<CatalogSource<'_>> =
        candidates.iter().filter(|t| t.spec().is_mcp()).map(|t| CatalogSource::Tool(t.clone())).collect();
    if deferred.is_empty() {
        return Ok(DeferredToolSetup::default());
    }
    Ok(DeferredToolSetup::from_catalog(DeferredCatalog::from_sources(deferred)?))
}

/// `assemble_deferred_tools`: the final tool list (candidates, then `tool_search` when set up)
/// and the setup. MCP tools stay in the list (still executable); the filter hides their schemas.
/// Fails closed rather than bind MCP schemas without a deferred set.
pub fn assemble_deferred_tools(
    candidates: Vec<Arc<dyn Tool>>,
    enabled: bool,
) -> Result<(Vec<Arc<dyn Tool>>, DeferredToolSetup), DeferredError> {
    let setup = build_deferred_tool_setup(&candidates, enabled)?;
    finish_assembly(candidates, enabled, setup)
}

/// The tail of [`assemble_deferred_tools`] for a setup built another way (e.g. from MCP schema
/// text with [`DeferredCatalog::new`]); applies the same fail-closed check.
pub fn finish_assembly(
    candidates: Vec<Arc<dyn Tool>>,
    enabled: bool,
    setup: DeferredToolSetup,
) -> Result<(Vec<Arc<dyn Tool>>, DeferredToolSetup), DeferredError> {
    let mcp_present = candidates.iter().any(|t| t.spec().is_mcp());
    if enabled && mcp_present && (setup.deferred_names.is_empty() || setup.catalog_hash.is_none()) {
        return Err(DeferredError::FailClosed);
    }
    let mut tools = candidates;
    if let Some(ts) = &setup.tool_search {
        tools.push(ts.clone() as Arc<dyn Tool>);
    }
    Ok((tools, setup))
}

/// `get_deferred_tools_prompt_section`: `""` for no names, else the sorted, HTML-escaped names
/// (`html.escape(n, quote=False)`) inside `<available-deferred-tools>`.
pub fn deferred_tools_prompt_section<'a>(names: impl IntoIterator<Item = &'a str>) -> String {
    let mut names: Vec<&str> = names.into_iter().collect();
    if names.is_empty() {
        return String::new();
    }
    names.sort_unstable();
    names.dedup();
    let mut out = String::from("<available-deferred-tools>\n");
    for (i, n) in names.into_iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        for c in n.chars() {
            match c {
                '&' => out.push_str("&amp;"),
                '<' => out.push_str("&lt;"),
                '>' => out.push_str("&gt;"),
                c => out.push(c),
            }
        }
    }
    out.push_str("\n</available-deferred-tools>");
    out
}

/// DeerFlow's `DeferredToolFilterMiddleware`: deferred tools are hidden from the model, and
/// calls to them refused, until promoted under this exact catalog hash.
#[derive(Debug, Clone, Default)]
pub struct DeferredToolFilter {
    deferred: Arc<HashSet<String>>,
    catalog_hash: Option<String>,
}

impl DeferredToolFilter {
    pub fn new(deferred: impl Into<Arc<HashSet<String>>>, catalog_hash: Option<String>) -> Self {
        Self { deferred: deferred.into(), catalog_hash }
    }

    pub fn is_active(&self) -> bool {
        !self.deferred.is_empty()
    }

    /// Names promoted for this catalog: the state's names when its `catalog_hash` equals ours,
    /// else none. Fails closed: without a catalog hash nothing counts as promoted.
    pub fn promoted<'s>(&self, promoted_state: Option<&'s Value>) -> HashSet<&'s str> {
        let (Some(state), Some(hash)) = (promoted_state, self.catalog_hash.as_deref()) else {
            return HashSet::new();
        };
        if state.get("catalog_hash").and_then(Value::as_str) != Some(hash) {
            return HashSet::new();
        }
        state
            .get("names")
            .and_then(Value::as_array)
            .map_or_else(HashSet::new, |a| a.iter().filter_map(Value::as_str).collect())
    }

    /// True when `name` is deferred and not promoted.
    pub fn is_hidden(&self, name: &str, promoted_state: Option<&Value>) -> bool {
        self.deferred.contains(name) && !self.promoted(promoted_state).contains(name)
    }

    /// The tools the model sees (`wrap_model_call`), order kept.
    pub fn visible_tools(&self, tools: &[Arc<dyn Tool>], promoted_state: Option<&Value>) -> Vec<Arc<dyn Tool>> {
        let promoted = self.promoted(promoted_state);
        tools
            .iter()
            .filter(|t| {
                let name = t.spec().name.as_str();
                !self.deferred.contains(name) || promoted.contains(name)
            })
            .cloned()
            .collect()
    }

    /// The tool specs the model sees.
    pub fn visible_specs<'t>(
        &self,
        specs: impl IntoIterator<Item = &'t ToolSpec>,
        promoted_state: Option<&Value>,
    ) -> Vec<&'t ToolSpec> {
        let promoted = self.promoted(promoted_state);
        specs.into_iter().filter(|s| !self.deferred.contains(&s.name) || promoted.contains(s.name.as_str())).collect()
    }

    /// `wrap_tool_call`: `Some(error outcome)` for a call to a hidden deferred tool (the tool is
    /// not run), `None` to let the call through.
    pub fn check_call(&self, name: &str, promoted_state: Option<&Value>) -> Option<ToolOutcome> {
        if !self.is_hidden(name, promoted_state) {
            return None;
        }
        tracing::info!(tool = name, "blocked call to a deferred tool that has not been promoted");
        Some(ToolOutcome::error_of(toolhost_core::ErrorKind::Refused, format!(
            "Error: Tool '{name}' is deferred and has not been promoted yet. Call tool_search first to expose and promote this tool's schema, then retry."
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::DeferredToolInput;
    use async_trait::async_trait;
    use serde_json::json;
    use toolhost_core::{CallContext, ToolSource};

    struct Fixed(ToolSpec);

    #[async_trait]
    impl Tool for Fixed {
        fn spec(&self) -> &ToolSpec {
            &self.0
        }
        async fn call(&self, _ctx: &CallContext, _args: Value) -> ToolOutcome {
            ToolOutcome::text(format!("ran {}", self.0.name))
        }
    }

    fn tool(name: &str, source: ToolSource) -> Arc<dyn Tool> {
        Arc::new(Fixed(ToolSpec {
            name: name.to_string(),
            description: format!("{name} does things"),
            parameters: json!({"type": "object", "properties": {"q": {"type": "string"}}}),
            group: None,
            source,
        }))
    }

    fn mcp(name: &str) -> Arc<dyn Tool> {
        tool(name, ToolSource::Mcp { server: "srv".into() })
    }

    fn names(tools: &[Arc<dyn Tool>]) -> Vec<String> {
        tools.iter().map(|t| t.spec().name.clone()).collect()
    }

    #[test]
    fn assembly_appends_tool_search_and_keeps_mcp_tools_executable() {
        let candidates = vec![tool("active_c", ToolSource::Builtin), mcp("mcp_a"), mcp("mcp_b")];
        let (tools, setup) = assemble_deferred_tools(candidates, true).unwrap();
        assert_eq!(names(&tools), ["active_c", "mcp_a", "mcp_b", "tool_search"]);
        assert_eq!(*setup.deferred_names, ["mcp_a", "mcp_b"].into_iter().map(String::from).collect::<HashSet<_>>());
        assert!(Arc::ptr_eq(&setup.deferred_names, &setup.filter().deferred), "the filter shares the names");
        let hash = setup.catalog_hash.clone().unwrap();
        assert_eq!(hash.len(), 16);
        assert_eq!(setup.tool_search.as_ref().unwrap().catalog().hash(), hash);
        assert_eq!(setup.prompt_section(), "<available-deferred-tools>\nmcp_a\nmcp_b\n</available-deferred-tools>");
    }

    #[test]
    fn assembly_is_empty_when_disabled_or_without_mcp() {
        let (tools, setup) = assemble_deferred_tools(vec![mcp("mcp_a")], false).unwrap();
        assert_eq!(names(&tools), ["mcp_a"]);
        assert!(setup.is_empty() && setup.deferred_names.is_empty() && setup.catalog_hash.is_none());
        let (tools, setup) = assemble_deferred_tools(vec![tool("acp", ToolSource::Acp)], true).unwrap();
        assert_eq!(names(&tools), ["acp"]);
        assert!(setup.is_empty());
        assert_eq!(setup.prompt_section(), "");
    }

    #[test]
    fn assembly_fails_closed() {
        // Enabled, MCP tools present, but the setup handed in recovered no deferred set.
        let Err(err) = finish_assembly(vec![mcp("mcp_a")], true, DeferredToolSetup::default()) else {
            panic!("assembly must fail closed")
        };
        assert_eq!(
            err.to_string(),
            "tool_search enabled and MCP candidates exist, but no deferred set was recovered - refusing to bind MCP schemas (fail-closed)."
        );
        // A schema that cannot be converted stops the assembly instead of binding it.
        let bad: Arc<dyn Tool> = Arc::new(Fixed(ToolSpec {
            name: "mcp_bad".into(),
            description: String::new(),
            parameters: json!({"properties": {"x": {"$ref": "#/$defs/Nope"}}}),
            group: None,
            source: ToolSource::Mcp { server: "s".into() },
        }));
        assert!(matches!(assemble_deferred_tools(vec![bad], true), Err(DeferredError::Convert(_))));
    }

    /// A tool whose schema holds an integer beyond 64 bits, exactly and as serde_json has it.
    struct Exact(ToolSpec, toolhost_py::json::PyValue);

    #[async_trait]
    impl Tool for Exact {
        fn spec(&self) -> &ToolSpec {
            &self.0
        }
        async fn call(&self, _ctx: &CallContext, _args: Value) -> ToolOutcome {
            ToolOutcome::text("ran")
        }
        fn exact_parameters(&self) -> Option<&toolhost_py::json::PyValue> {
            Some(&self.1)
        }
    }

    #[test]
    fn the_catalog_takes_a_tools_exact_schema() {
        let text = r#"{"type": "object", "properties": {"n": {"type": "integer", "maximum": 123456789012345678901234567890}}}"#;
        let spec = ToolSpec {
            name: "mcp_big".into(),
            description: "Big.".into(),
            parameters: serde_json::from_str(text).unwrap(),
            group: None,
            source: ToolSource::Mcp { server: "s".into() },
        };
        let exact = toolhost_py::json::PyValue::parse(text).unwrap();
        let lossy = build_deferred_tool_setup(&[Arc::new(Fixed(spec.clone())) as Arc<dyn Tool>], true).unwrap();
        let kept = build_deferred_tool_setup(&[Arc::new(Exact(spec, exact)) as Arc<dyn Tool>], true).unwrap();
        let blob = |s: &DeferredToolSetup| s.tool_search.as_ref().unwrap().catalog().hash_blob();
        assert!(blob(&kept).contains("\"maximum\": 123456789012345678901234567890,"), "{}", blob(&kept));
        assert!(!blob(&lossy).contains("123456789012345678901234567890"), "{}", blob(&lossy));
        assert_ne!(kept.catalog_hash, lossy.catalog_hash);

        // Beside a tool rendered straight from its serde_json schema, the exact one still counts:
        // the setup's catalog is the one built from both tools parsed exactly.
        let plain = ToolSpec {
            name: "mcp_plain".into(),
            description: "Plain.".into(),
            parameters: json!({"type": "object", "properties": {"x": {"type": "number", "default": 1e-7}}}),
            group: None,
            source: ToolSource::Mcp { server: "s".into() },
        };
        let big = ToolSpec {
            name: "mcp_big".into(),
            description: "Big.".into(),
            parameters: serde_json::from_str(text).unwrap(),
            group: None,
            source: ToolSource::Mcp { server: "s".into() },
        };
        let mixed = build_deferred_tool_setup(
            &[
                Arc::new(Fixed(plain.clone())) as Arc<dyn Tool>,
                Arc::new(Exact(big.clone(), toolhost_py::json::PyValue::parse(text).unwrap())) as Arc<dyn Tool>,
            ],
            true,
        )
        .unwrap();
        let parsed = DeferredCatalog::new([
            DeferredToolInput::from_spec(&plain),
            DeferredToolInput::from_schema_text("mcp_big", "Big.", text).unwrap(),
        ])
        .unwrap();
        assert_eq!(blob(&mixed), parsed.hash_blob());
        assert_eq!(mixed.catalog_hash.as_deref(), Some(parsed.hash()));
    }

    #[test]
    fn filter_hides_until_promoted_under_the_same_hash() {
        let all = vec![mcp("mcp_a"), mcp("mcp_b"), tool("active_c", ToolSource::Builtin)];
        let (_, setup) = assemble_deferred_tools(all.clone(), true).unwrap();
        let filter = setup.filter();
        let hash = setup.catalog_hash.clone().unwrap();
        assert_eq!(names(&filter.visible_tools(&all, None)), ["active_c"]);
        let promoted = json!({"catalog_hash": hash, "names": ["mcp_a"]});
        assert_eq!(names(&filter.visible_tools(&all, Some(&promoted))), ["mcp_a", "active_c"]);
        let specs: Vec<ToolSpec> = all.iter().map(|t| t.spec().clone()).collect();
        let visible: Vec<&str> =
            filter.visible_specs(&specs, Some(&promoted)).iter().map(|s| s.name.as_str()).collect();
        assert_eq!(visible, ["mcp_a", "active_c"]);
        let stale = json!({"catalog_hash": "0000000000000000", "names": ["mcp_a"]});
        assert_eq!(names(&filter.visible_tools(&all, Some(&stale))), ["active_c"]);

        let blocked = filter.check_call("mcp_b", Some(&promoted)).unwrap();
        assert!(blocked.is_error());
        assert_eq!(
            blocked.text_content(),
            "Error: Tool 'mcp_b' is deferred and has not been promoted yet. Call tool_search first to expose and promote this tool's schema, then retry."
        );
        assert!(filter.check_call("mcp_a", Some(&promoted)).is_none());
        assert!(filter.check_call("active_c", None).is_none());
        assert!(filter.check_call("mcp_a", Some(&stale)).is_some());
        assert!(filter.check_call("mcp_a", Some(&json!({"catalog_hash": hash, "names": "mcp_a"}))).is_some());
    }

    #[test]
    fn filter_without_hash_fails_closed() {
        let filter = DeferredToolFilter::new(["mcp_a".to_string()].into_iter().collect::<HashSet<_>>(), None);
        let promoted = json!({"catalog_hash": null, "names": ["mcp_a"]});
        assert!(filter.is_active());
        assert!(filter.check_call("mcp_a", Some(&promoted)).is_some());
    }

    #[test]
    fn prompt_section_sorts_dedupes_and_escapes() {
        assert_eq!(deferred_tools_prompt_section([]), "");
        assert_eq!(
            deferred_tools_prompt_section(["b_tool", "a_tool", "a_tool"]),
            "<available-deferred-tools>\na_tool\nb_tool\n</available-deferred-tools>"
        );
        let s = deferred_tools_prompt_section(["x</available-deferred-tools>y"]);
        assert_eq!(s.matches("</available-deferred-tools>").count(), 1);
    }
}
