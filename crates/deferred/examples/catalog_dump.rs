//! Print what the deferred catalog makes of a list of tools, for comparing with DeerFlow.
//! stdin: `{"tools": [{"name", "description", "schema"}], "queries": [..]}` where `schema` is the
//! input schema's JSON text (a string, so numbers reach the catalog exactly). stdout: a JSON
//! object with `hash`, `blob`, per tool `contents` (`tool_search` content for `select:<name>`)
//! and per query `results` (the names `tool_search` returns), or `error` when the catalog cannot
//! be built.

use std::io::Read;
use std::sync::Arc;

use serde_json::{json, Value};
use toolhost_deferred::{DeferredCatalog, DeferredToolInput, ToolSearchTool};

fn main() {
    let mut input = String::new();
    if let Err(e) = std::io::stdin().read_to_string(&mut input) {
        eprintln!("cannot read stdin: {e}");
        std::process::exit(2);
    }
    let request: Value = match serde_json::from_str(&input) {
        Ok(v) => v,
        Err(e) => {
            eprintln!("stdin is not JSON: {e}");
            std::process::exit(2);
        }
    };
    let list = |k: &str| request.get(k).and_then(Value::as_array).cloned().unwrap_or_default();
    let (tools, queries) = (list("tools"), list("queries"));
    let field = |t: &Value, k: &str| t.get(k).and_then(Value::as_str).unwrap_or_default().to_string();
    let inputs: Result<Vec<_>, _> = tools
        .iter()
        .map(|t| DeferredToolInput::from_schema_text(&field(t, "name"), &field(t, "description"), &field(t, "schema")))
        .collect();
    let out = match inputs.and_then(DeferredCatalog::new) {
        Ok(catalog) => {
            let catalog = Arc::new(catalog);
            let tool = ToolSearchTool::new(catalog.clone());
            let contents: Vec<String> =
                catalog.tools().iter().map(|t| tool.search(&format!("select:{}", t.name())).content).collect();
            let results: Vec<Vec<String>> =
                queries.iter().map(|q| tool.search(q.as_str().unwrap_or_default()).names).collect();
            json!({"hash": catalog.hash(), "blob": catalog.hash_blob(), "contents": contents, "results": results})
        }
        Err(e) => json!({"error": e.to_string()}),
    };
    println!("{out}");
}
