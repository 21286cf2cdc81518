//! DeerFlow's conformance vectors (`tests/conformance/tool_search.json`, `merge_promoted.json`)
//! run against this crate: exact hash blobs and hashes, search results, `tool_search` content and
//! promotions, prompt sections, and the `promoted` reducer.

use std::sync::Arc;

use serde_json::{json, Value};
use toolhost_core::state::{merge_promoted, try_merge_promoted};
use toolhost_deferred::{
    deferred_tools_prompt_section, DeferredCatalog, DeferredToolInput, PyValue, ToolSearchTool, MAX_RESULTS,
};

const TOOL_SEARCH: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/conformance/tool_search.json");
const MERGE_PROMOTED: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/conformance/merge_promoted.json");

fn load(path: &str) -> (Value, PyValue) {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {path}: {e}"));
    let value: Value = serde_json::from_str(&text).expect("vector file is JSON");
    // The same file through this crate's own parser, which keeps numbers as Python does.
    let py = PyValue::parse(&text).expect("vector file parses with PyValue::parse");
    (value, py)
}

fn py_get<'a>(v: &'a PyValue, key: &str) -> &'a PyValue {
    v.as_dict().and_then(|d| d.get(key)).unwrap_or_else(|| panic!("missing key {key}"))
}

fn py_list(v: &PyValue) -> &[PyValue] {
    match v {
        PyValue::List(l) => l,
        other => panic!("expected a list, got {other:?}"),
    }
}

fn py_str(v: &PyValue) -> &str {
    match v {
        PyValue::Str(s) => s,
        other => panic!("expected a string, got {other:?}"),
    }
}

/// Catalog inputs from a vector's `catalog` list: the `args_schema` as the server sent it, or,
/// for DeerFlow's pydantic-derived test tools, the already-converted `parameters`.
fn inputs(catalog: &PyValue) -> Vec<DeferredToolInput> {
    py_list(catalog)
        .iter()
        .map(|t| {
            let d = t.as_dict().expect("catalog tool is an object");
            let schema = match d.get("args_schema") {
                Some(s) => s.clone(),
                None => py_get(py_get(t, "openai_function"), "parameters").clone(),
            };
            DeferredToolInput {
                name: py_str(py_get(t, "name")).to_string(),
                description: py_str(py_get(t, "description")).to_string(),
                schema,
            }
        })
        .collect()
}

fn indented(v: &PyValue) -> String {
    let mut s = String::new();
    v.write_indented(&mut s, 0);
    s
}

fn check_catalog(
    label: &str,
    catalog_py: &PyValue,
    expected_hash: &str,
    expected_blob: Option<&str>,
) -> DeferredCatalog {
    let catalog = DeferredCatalog::new(inputs(catalog_py)).unwrap_or_else(|e| panic!("{label}: {e}"));
    if let Some(blob) = expected_blob {
        assert_eq!(catalog.hash_blob(), blob, "{label}: hash blob");
    }
    assert_eq!(catalog.hash(), expected_hash, "{label}: catalog_hash");
    // Each converted function equals DeerFlow's, key order included.
    for (tool, vector) in catalog.tools().iter().zip(py_list(catalog_py)) {
        let expected = py_get(vector, "openai_function");
        assert_eq!(indented(&tool.function.to_value()), indented(expected), "{label}: function of {}", tool.name());
    }
    catalog
}

fn check_cases(label: &str, catalog: DeferredCatalog, cases: &Value) -> usize {
    let tool = ToolSearchTool::new(Arc::new(catalog));
    let cases = cases.as_array().expect("cases is a list");
    for case in cases {
        let query = case["query"].as_str().expect("query");
        let id = case.get("id").and_then(Value::as_str).unwrap_or(query);
        let outcome = tool.run(&json!({ "query": query }));
        assert!(!outcome.is_error(), "{label} {id}");
        assert_eq!(outcome.text_content(), case["content"].as_str().expect("content"), "{label} {id}: content");
        assert_eq!(outcome.update.promoted.as_ref(), Some(&case["promoted"]), "{label} {id}: promoted");
        assert_eq!(case["promoted"]["names"], case["result_names"], "{label} {id}: vector self-consistency");
        let searched: Vec<&str> = tool.catalog().search(query).iter().map(|t| t.name()).collect();
        assert_eq!(json!(searched), case["result_names"], "{label} {id}: search");
    }
    cases.len()
}

#[test]
fn every_catalog_hash_and_blob_matches() {
    let (_, py) = load(TOOL_SEARCH);
    let catalogs = py_list(py_get(&py, "catalogs"));
    assert!(catalogs.len() >= 17);
    for c in catalogs {
        let label = py_str(py_get(c, "label"));
        let catalog = check_catalog(
            label,
            py_get(c, "catalog"),
            py_str(py_get(c, "catalog_hash")),
            Some(py_str(py_get(c, "hash_blob"))),
        );
        let order: Vec<&str> = catalog.tools().iter().map(|t| t.name()).collect();
        let expected: Vec<&str> = py_list(py_get(c, "tool_names_in_order")).iter().map(py_str).collect();
        assert_eq!(order, expected, "{label}: catalog order");
    }
}

#[test]
fn main_catalog_queries_content_and_promotions() {
    let (v, py) = load(TOOL_SEARCH);
    assert_eq!(v["max_results"], json!(MAX_RESULTS));
    let main = py_get(&py, "main");
    let catalog = check_catalog(
        "main",
        py_get(main, "catalog"),
        py_str(py_get(main, "catalog_hash")),
        Some(py_str(py_get(main, "hash_blob"))),
    );
    let mut names: Vec<&str> = catalog.names().iter().map(String::as_str).collect();
    names.sort_unstable();
    assert_eq!(json!(names), v["main"]["deferred_names_sorted"]);
    assert_eq!(deferred_tools_prompt_section(catalog.names().iter().map(String::as_str)), v["main"]["prompt_section"]);
    let n = check_cases("main", catalog, &v["main"]["cases"]);
    assert!(n >= 40, "ran {n} main cases");
}

#[test]
fn key_order_case_keeps_the_servers_key_order() {
    let (v, py) = load(TOOL_SEARCH);
    let case = &v["key_order_case"];
    let label = case["catalog_label"].as_str().expect("label");
    let c = py_list(py_get(&py, "catalogs"))
        .iter()
        .find(|c| py_str(py_get(c, "label")) == label)
        .expect("catalog of key_order_case");
    let catalog = check_catalog(label, py_get(c, "catalog"), py_str(py_get(c, "catalog_hash")), None);
    check_cases(label, catalog, &json!([case]));
}

#[test]
fn deerflow_test_catalogs() {
    let (v, py) = load(TOOL_SEARCH);
    for key in ["tests_wide_catalog", "tests_calc_catalog"] {
        let c = py_get(&py, key);
        let catalog = check_catalog(key, py_get(c, "catalog"), py_str(py_get(c, "catalog_hash")), None);
        let n = check_cases(key, catalog, &v[key]["cases"]);
        assert!(n > 0);
    }
}

#[test]
fn prompt_section_cases() {
    let (v, _) = load(TOOL_SEARCH);
    let cases = v["prompt_section_cases"].as_array().expect("list");
    assert!(!cases.is_empty());
    for case in cases {
        let names: Vec<&str> = case["names"].as_array().expect("names").iter().filter_map(Value::as_str).collect();
        assert_eq!(deferred_tools_prompt_section(names.iter().copied()), case["prompt_section"], "{names:?}");
    }
}

/// The `promoted` reducer against DeerFlow's vectors, error cases included: where DeerFlow
/// raises (`KeyError` for a missing key), `try_merge_promoted` must raise the same class with the
/// same message, and the infallible `merge_promoted` the pipeline uses keeps the existing value.
#[test]
fn merge_promoted_vectors() {
    let (v, _) = load(MERGE_PROMOTED);
    let cases = v["cases"].as_array().expect("cases");
    let mut checked = 0;
    let mut errors = Vec::new();
    for case in cases {
        let id = case["id"].as_str().expect("id");
        let existing = (!case["existing"].is_null()).then_some(&case["existing"]);
        let new = (!case["new"].is_null()).then_some(&case["new"]);
        let got = merge_promoted(existing, new);
        let tried = try_merge_promoted(existing, new);
        if let Some(err) = case.get("error") {
            let e = tried.expect_err(id);
            assert_eq!(e.py_type(), err["type"], "{id}: exception class ({})", case["note"]);
            assert_eq!(e.to_string(), err["message"], "{id}: exception message ({})", case["note"]);
            assert_eq!(got, existing.cloned(), "{id}: merge_promoted keeps the existing value");
            errors.push(id.to_string());
            continue;
        }
        let expected = (!case["expected"].is_null()).then(|| case["expected"].clone());
        assert_eq!(got, expected, "{id}: {}", case["note"]);
        assert_eq!(tried.unwrap_or_else(|e| panic!("{id}: {e}")), expected, "{id}: try_merge_promoted");
        checked += 1;
    }
    assert!(checked >= 25, "checked {checked}");
    assert_eq!(errors, ["promoted-022", "promoted-023", "promoted-024", "promoted-025", "promoted-026"]);
}

/// `tool_search` as DeerFlow's model sees it: `convert_to_openai_function` of the tool DeerFlow's
/// `build_deferred_tool_setup` builds (`tests/conformance/tool_schemas.json`).
#[test]
fn tool_search_schema_is_deerflows() {
    let raw =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/conformance/tool_schemas.json"))
            .expect("tool_schemas.json");
    let doc: Value = serde_json::from_str(&raw).expect("JSON");
    let want = &doc["builtins"]["tool_search"];
    let spec = toolhost_deferred::tool_search_spec();
    assert_eq!(json!({"name": spec.name, "description": spec.description, "parameters": spec.parameters}), *want);
}
