//! A catalog built from `serde_json` schemas as the host has them (`DeferredCatalog::from_specs`,
//! `CatalogSource::Json`: rendered straight from the values, functions converted on first use)
//! is the catalog `DeferredCatalog::new` builds from the parsed schemas: the same hash blob and
//! hash, the same functions and search answers — on DeerFlow's conformance vectors, on the
//! benchmark's synthetic 10 000-tool catalog and on edge cases of the conversion.

use std::sync::Arc;

use serde_json::{json, Value};
use toolhost_core::{CallContext, CatalogSlot, Tool, ToolOutcome, ToolSource, ToolSpec};
use toolhost_deferred::{
    build_deferred_tool_setup, CatalogSource, DeferredCatalog, DeferredToolInput, PyValue, ToolSearchTool,
};

/// A tool as the host holds an MCP tool, with its schema's text (`toolhost_mcp::McpTool` keeps
/// the compact text) or without, and room for its rendered catalog entry.
struct HostTool(ToolSpec, Option<String>, CatalogSlot);

#[async_trait::async_trait]
impl Tool for HostTool {
    fn spec(&self) -> &ToolSpec {
        &self.0
    }
    fn parameters_text(&self) -> Option<&str> {
        self.1.as_deref()
    }
    fn catalog_slot(&self) -> Option<&CatalogSlot> {
        Some(&self.2)
    }
    async fn call(&self, _ctx: &CallContext, _args: Value) -> ToolOutcome {
        ToolOutcome::text("")
    }
}

/// How a host tool holds its schema.
#[derive(Clone, Copy, Debug)]
enum Text {
    /// No text: rendered from the `serde_json` value.
    None,
    /// `serde_json::to_string`, as `toolhost_mcp::McpTool` keeps it.
    Compact,
    /// Indented (any JSON text of the value will do).
    Pretty,
}

/// The catalog of the host's path: `build_deferred_tool_setup` over the tools (`CatalogSource::Tool`).
fn from_tools(tools: &[(String, String, Value)]) -> DeferredCatalog {
    from_tools_with(tools, Text::None)
}

fn from_tools_with(tools: &[(String, String, Value)], text: Text) -> DeferredCatalog {
    let tools: Vec<Arc<dyn Tool>> = tools
        .iter()
        .map(|(name, description, schema)| {
            let text = match text {
                Text::None => None,
                Text::Compact => Some(serde_json::to_string(schema).unwrap()),
                Text::Pretty => Some(serde_json::to_string_pretty(schema).unwrap()),
            };
            let spec = ToolSpec {
                name: name.clone(),
                description: description.clone(),
                parameters: schema.clone(),
                group: None,
                source: ToolSource::Mcp { server: "s".into() },
            };
            Arc::new(HostTool(spec, text, CatalogSlot::new())) as Arc<dyn Tool>
        })
        .collect();
    let catalog = DeferredCatalog::from_sources(tools.iter().map(|t| CatalogSource::Tool(t.clone()))).unwrap();
    // The first build kept each tool's rendered entry in the tool; a second catalog of the same
    // tools (the host's next setup) reuses them and is the same catalog.
    let again = DeferredCatalog::from_sources(tools.iter().map(|t| CatalogSource::Tool(t.clone()))).unwrap();
    assert_eq!(again.hash_blob(), catalog.hash_blob());
    assert_eq!(again.hash(), catalog.hash());
    let setup = build_deferred_tool_setup(&tools, true).unwrap();
    // (No MCP tool, no setup.)
    assert_eq!(setup.catalog_hash.as_deref(), (!tools.is_empty()).then(|| catalog.hash()));
    catalog
}

/// The host's setup keeps each MCP tool's rendered entry in the tool: a later setup where one
/// tool changed (a new tool object, as a re-listed server gives) renders that tool only, reuses
/// the others' entries, and equals a build from scratch.
#[test]
fn a_later_setup_renders_only_the_changed_tool() {
    let tool = |name: &str, description: &str| -> Arc<dyn Tool> {
        let schema = json!({"type": "object", "properties": {"q": {"type": "string", "title": "Q"}}, "title": "T"});
        let spec = ToolSpec {
            name: name.into(),
            description: description.into(),
            parameters: schema.clone(),
            group: None,
            source: ToolSource::Mcp { server: "s".into() },
        };
        Arc::new(HostTool(spec, Some(serde_json::to_string(&schema).unwrap()), CatalogSlot::new()))
    };
    // 3 000 entries fill several 64 KiB buffers, so slots are filled as buffers fill up and at
    // the end.
    let mut tools: Vec<Arc<dyn Tool>> = (0..3000).map(|i| tool(&format!("t{i:04}"), "first")).collect();
    let first = build_deferred_tool_setup(&tools, true).unwrap();
    let kept: Vec<_> = tools.iter().map(|t| t.catalog_slot().unwrap().get().cloned().expect("entry kept")).collect();
    tools[123] = tool("t0123", "changed");
    let second = build_deferred_tool_setup(&tools, true).unwrap();
    for (i, (t, before)) in tools.iter().zip(&kept).enumerate() {
        let now = t.catalog_slot().unwrap().get().expect("entry kept");
        assert_eq!(Arc::ptr_eq(now, before), i != 123, "tool {i}");
    }
    let specs: Vec<ToolSpec> = tools.iter().map(|t| t.spec().clone()).collect();
    let scratch = DeferredCatalog::from_specs(&specs).unwrap();
    assert_eq!(second.catalog_hash.as_deref(), Some(scratch.hash()));
    assert_ne!(second.catalog_hash, first.catalog_hash);
    // Back to the first version: the first hash again.
    tools[123] = tool("t0123", "first");
    assert_eq!(build_deferred_tool_setup(&tools, true).unwrap().catalog_hash, first.catalog_hash);
}

const TOOL_SEARCH: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/conformance/tool_search.json");

fn indented(v: &PyValue) -> String {
    let mut s = String::new();
    v.write_indented(&mut s, 0);
    s
}

/// Both catalogs agree on everything observable; the `serde_json` one converts its functions
/// only when asked.
fn assert_same(label: &str, from_json: &DeferredCatalog, parsed: &DeferredCatalog) {
    assert_eq!(from_json.hash_blob(), parsed.hash_blob(), "{label}: hash blob");
    assert_eq!(from_json.hash(), parsed.hash(), "{label}: catalog_hash");
    assert_eq!(from_json.len(), parsed.len(), "{label}: size");
    for (a, b) in from_json.tools().iter().zip(parsed.tools()) {
        assert_eq!((a.name(), a.description()), (b.name(), b.description()), "{label}");
        assert_eq!(indented(&a.function.to_value()), indented(&b.function.to_value()), "{label}: {}", a.name());
    }
    // Rendered afresh from the (now converted) functions: still the same blob.
    assert_eq!(from_json.compute_hash(), parsed.hash(), "{label}: recomputed hash");
}

/// A vector catalog's tools as the host would have them: `serde_json` schemas.
fn json_tools(catalog: &Value) -> Vec<(String, String, Value)> {
    catalog
        .as_array()
        .expect("catalog is a list")
        .iter()
        .map(|t| {
            let schema = t.get("args_schema").cloned().unwrap_or_else(|| t["openai_function"]["parameters"].clone());
            (t["name"].as_str().unwrap().to_string(), t["description"].as_str().unwrap().to_string(), schema)
        })
        .collect()
}

fn from_json(tools: &[(String, String, Value)]) -> DeferredCatalog {
    DeferredCatalog::from_sources(tools.iter().map(|(name, description, schema)| CatalogSource::Json {
        name,
        description,
        schema,
    }))
    .expect("converts")
}

fn parsed(tools: &[(String, String, Value)]) -> DeferredCatalog {
    DeferredCatalog::new(tools.iter().map(|(name, description, schema)| DeferredToolInput {
        name: name.clone(),
        description: description.clone(),
        schema: PyValue::from_json(schema),
    }))
    .expect("converts")
}

/// Every catalog of DeerFlow's vectors: the catalog built from `serde_json` schemas has
/// DeerFlow's hash and blob (serde_json keeps every number of these schemas exactly) and equals
/// the parsed one; the main catalog's `tool_search` answers are DeerFlow's.
#[test]
fn conformance_vectors_from_serde_json_equal_new() {
    let v: Value = serde_json::from_str(&std::fs::read_to_string(TOOL_SEARCH).unwrap()).unwrap();
    let mut catalogs: Vec<(String, &Value)> = vec![("main".into(), &v["main"])];
    for key in ["tests_wide_catalog", "tests_calc_catalog"] {
        catalogs.push((key.into(), &v[key]));
    }
    for c in v["catalogs"].as_array().unwrap() {
        catalogs.push((c["label"].as_str().unwrap().to_string(), c));
    }
    assert!(catalogs.len() >= 20);
    for (label, c) in &catalogs {
        let tools = json_tools(&c["catalog"]);
        let a = from_json(&tools);
        let b = parsed(&tools);
        assert_eq!(a.hash(), c["catalog_hash"].as_str().unwrap(), "{label}: DeerFlow's catalog_hash");
        if let Some(blob) = c.get("hash_blob").and_then(Value::as_str) {
            assert_eq!(a.hash_blob(), blob, "{label}: DeerFlow's hash blob");
        }
        assert_same(label, &a, &b);
        assert_same(label, &from_tools(&tools), &b);
        for text in [Text::Compact, Text::Pretty] {
            let t = from_tools_with(&tools, text);
            assert_eq!(t.hash(), c["catalog_hash"].as_str().unwrap(), "{label} {text:?}: DeerFlow's catalog_hash");
            assert_same(&format!("{label}, schema text {text:?}"), &t, &b);
        }
    }
    // tool_search over the serde_json-built main catalog: DeerFlow's content and promotions.
    let tool = ToolSearchTool::new(Arc::new(from_json(&json_tools(&v["main"]["catalog"]))));
    for case in v["main"]["cases"].as_array().unwrap() {
        let query = case["query"].as_str().unwrap();
        let out = tool.run(&json!({ "query": query }));
        assert_eq!(out.text_content(), case["content"].as_str().unwrap(), "main {query}: content");
        assert_eq!(out.update.promoted.as_ref(), Some(&case["promoted"]), "main {query}: promoted");
    }
}

const SERVICES: [&str; 10] =
    ["slack", "github", "calendar", "gmail", "notion", "jira", "gdrive", "postgres", "maps", "weather"];
const VERBS: [&str; 8] = ["send", "list", "search", "create", "export", "delete", "update", "get"];

/// The benchmark's catalog (benches/deferred.rs, scripts/bench-deerflow.py).
fn bench_specs(n: usize) -> Vec<ToolSpec> {
    (0..n)
        .map(|i| {
            let service = SERVICES[i % SERVICES.len()];
            let verb = VERBS[(i / SERVICES.len()) % VERBS.len()];
            ToolSpec {
                name: format!("{service}_{verb}_{i}"),
                description: format!("{verb} {service} data for item {i}; works with the {service} API."),
                parameters: json!({
                    "type": "object",
                    "title": format!("Args{i}"),
                    "properties": {
                        "id": {"type": "string", "title": "Id", "description": format!("Identifier of item {i}")},
                        "limit": {"type": "integer", "minimum": 1, "maximum": 100, "default": 10},
                        "ratio": {"type": "number", "default": 0.5},
                        "tags": {"type": "array", "items": {"type": "string"}},
                        "mode": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": null}
                    },
                    "required": ["id"]
                }),
                group: None,
                source: ToolSource::Mcp { server: service.to_string() },
            }
        })
        .collect()
}

#[test]
fn bench_catalog_from_specs_equals_new() {
    let specs = bench_specs(10_000);
    let a = DeferredCatalog::from_specs(&specs).unwrap();
    let b = DeferredCatalog::new(specs.iter().map(DeferredToolInput::from_spec)).unwrap();
    // The hash BENCHMARKS.md and scripts/bench-deerflow.py print for this catalog.
    assert_eq!(a.hash(), "f07b3d4cd5ae984d");
    assert!(a.tools().iter().all(|t| !t.function.is_converted()), "nothing converted before it is needed");
    let tool = ToolSearchTool::new(Arc::new(a.clone()));
    let answer = tool.search("select:slack_send_0,github_list_11").content;
    assert_eq!(answer, ToolSearchTool::new(Arc::new(b.clone())).search("select:slack_send_0,github_list_11").content);
    let converted = tool.catalog().tools().iter().filter(|t| t.function.is_converted()).count();
    assert_eq!(converted, 2, "only what a search returned");
    assert_same("bench", &a, &b);
    // The host's path: the tools with their schemas' text, as `toolhost_mcp` lists them.
    let tools: Vec<(String, String, Value)> =
        specs.iter().map(|s| (s.name.clone(), s.description.clone(), s.parameters.clone())).collect();
    let c = from_tools_with(&tools, Text::Compact);
    assert_eq!(c.hash(), "f07b3d4cd5ae984d");
    assert_same("bench, schema text", &c, &b);
}

/// Schemas off the plain path (`$ref`, the `__arg1` case, not an object) and the conversion's
/// fallbacks (a name or description taken from the schema), number forms, and rebuilds.
#[test]
fn edge_cases_from_serde_json_equal_new() {
    let schemas = [
        json!({}),
        json!({"type": "object"}),
        json!({"title": "FromTitle", "description": "from schema", "properties": {"title": {"title": "x", "type": "string"}}}),
        json!({"title": 5, "description": ["not", "a", "string"], "properties": {}}),
        json!({"properties": {"a": {"$ref": "#/$defs/X", "title": "over"}}, "$defs": {"X": {"title": "gone", "type": "integer"}}}),
        json!({"definitions": {"a": 1}, "$defs": {"b": 2}, "anyOf": [{"title": "kept"}], "default": {"title": "x", "k": [{"title": "kept"}]}}),
        json!({"n": [0, -0.0, 1.5e300, 1e-7, 1e16, 123.456, 18446744073709551615u64, -9223372036854775808i64, 0.1]}),
        json!({"s": "é\n\"\\\u{1}\u{7f}🚀 \u{2028}", "z": {"zz": {"zzz": {}}}, "l": [[], {}, null, true, false]}),
        json!({"items": [{"$ref": "#/items/1"}, {"type": "string"}]}),
    ];
    let mut tools = Vec::new();
    for (i, schema) in schemas.iter().enumerate() {
        for (name, description) in
            [(format!("t{i}"), "desc"), (format!("u{i}"), ""), (String::new(), ""), (String::new(), "d")]
        {
            tools.push((name, description.to_string(), schema.clone()));
        }
    }
    let a = from_json(&tools);
    let b = parsed(&tools);
    assert_same("edge cases", &a, &b);
    assert_same("edge cases, host tools", &from_tools(&tools), &b);
    for text in [Text::Compact, Text::Pretty] {
        assert_same(&format!("edge cases, schema text {text:?}"), &from_tools_with(&tools, text), &b);
    }
    for q in ["t1", "select:t4,u4,t8", "+u title", "from schema"] {
        let (x, y) = (ToolSearchTool::new(Arc::new(a.clone())), ToolSearchTool::new(Arc::new(b.clone())));
        assert_eq!(x.search(q), y.search(q), "{q}");
    }
    // Rebuilds mixing both kinds keep agreeing.
    let added = [("t3".to_string(), "changed".to_string(), json!({"properties": {"q": {"type": "string"}}}))];
    let a2 = a
        .clone()
        .rebuild_from_sources(
            |t| t.name() != "t3",
            added.iter().map(|(name, description, schema)| CatalogSource::Json { name, description, schema }),
        )
        .unwrap();
    let b2 = b
        .clone()
        .rebuild(
            |t| t.name() != "t3",
            added.iter().map(|(n, d, s)| DeferredToolInput {
                name: n.clone(),
                description: d.clone(),
                schema: PyValue::from_json(s),
            }),
        )
        .unwrap();
    assert_same("rebuild", &a2, &b2);
    // A schema that is not an object fails the same way on both paths.
    let bad = [("x".to_string(), "d".to_string(), json!([1]))];
    let (Err(e1), Err(e2)) = (
        DeferredCatalog::from_sources(bad.iter().map(|(name, description, schema)| CatalogSource::Json {
            name,
            description,
            schema,
        })),
        DeferredCatalog::new(bad.iter().map(|(n, d, s)| DeferredToolInput {
            name: n.clone(),
            description: d.clone(),
            schema: PyValue::from_json(s),
        })),
    ) else {
        panic!("a list schema is refused");
    };
    assert_eq!(e1, e2);
}
