//! `get_available_tools` against DeerFlow itself: every variant of
//! `tests/conformance/assembly.json` (config.yaml variants, real stdio MCP servers from
//! `fixtures/fake_mcp_server.py`, the deferred assembly with its `catalog_hash`).
//!
//! toolhost's output is compared with DeerFlow's full lists. The only names taken out of
//! DeerFlow's lists are the ones in [`NOT_PROVIDED`] — DeerFlow builtins that need a durable
//! task runtime toolhost does not have — each with its reason; nothing is taken out on
//! the strength of what toolhost itself reports. Everything else — order, gates, conditions, MCP
//! names, every warning, the ACP tool, the deferred set, its prompt section and its hash — must
//! match exactly, so a tool toolhost stops assembling, or a new difference, fails.

use std::path::PathBuf;

use serde_json::Value;
use toolhost::assembly::AssemblyRequest;
use toolhost::{HostOptions, Toolhost};

#[path = "support/paths.rs"]
mod paths;
use paths::root;

/// DeerFlow builtins toolhost does not provide, with the reason; the known, documented
/// differences of assembly. Each must still be in DeerFlow's lists (checked below), so the list
/// cannot go stale.
const NOT_PROVIDED: [(&str, &str); 2] = [
    ("list_background_tasks", "lists DeerFlow's durable background tasks; toolhost has no task runtime"),
    ("cancel_background_task", "cancels DeerFlow's durable background tasks; toolhost has no task runtime"),
];

fn not_provided(name: &str) -> bool {
    NOT_PROVIDED.iter().any(|(n, _)| *n == name)
}

fn vectors() -> PathBuf {
    paths::conformance()
}

fn python() -> PathBuf {
    let p = root().join(".peers/venv/bin/python");
    assert!(p.exists(), "{} is missing: run scripts/install-peers.sh first", p.display());
    p
}

fn substitute(v: &mut Value) {
    match v {
        Value::String(s) => {
            *s = s
                .replace("{PYTHON}", &python().display().to_string())
                .replace("{FAKE_MCP_SERVER}", &vectors().join("fixtures/fake_mcp_server.py").display().to_string());
        }
        Value::Array(a) => a.iter_mut().for_each(substitute),
        Value::Object(m) => m.values_mut().for_each(substitute),
        _ => {}
    }
}

#[tokio::test]
async fn every_assembly_variant_matches_deerflow() {
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(vectors().join("assembly.json")).unwrap()).unwrap();
    let variants = doc["variants"].as_array().unwrap();
    assert!(variants.len() >= 19);
    let mut checked_hashes = 0;
    let mut differences_seen: Vec<&str> = Vec::new();
    for v in variants {
        let id = v["id"].as_str().unwrap();
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("config.yaml"), v["config_yaml"].as_str().unwrap()).unwrap();
        let mut ext = v["extensions_config"].clone();
        substitute(&mut ext);
        std::fs::write(dir.path().join("extensions_config.json"), serde_json::to_vec(&ext).unwrap()).unwrap();
        let opts = HostOptions::new(dir.path().join("config.yaml"))
            .data_dir(dir.path().join("data"))
            .cache_dir(Some(root().join("target/test-cache")))
            .extensions(Some(dir.path().join("extensions_config.json")));
        let host = Toolhost::open_blocking(opts).unwrap_or_else(|e| panic!("{id}: {e}"));
        assert_eq!(host.config().is_host_bash_allowed(), v["is_host_bash_allowed"].as_bool().unwrap(), "{id}");

        let call = &v["call"];
        let req = AssemblyRequest {
            groups: call
                .get("groups")
                .map(|g| g.as_array().unwrap().iter().map(|x| x.as_str().unwrap().to_string()).collect()),
            model_name: call.get("model_name").and_then(Value::as_str).map(str::to_string),
            subagent_enabled: call.get("subagent_enabled").and_then(Value::as_bool).unwrap_or(false),
            include_upload_tool: call.get("include_upload_tool").and_then(Value::as_bool).unwrap_or(true),
            include_mcp: call.get("include_mcp").and_then(Value::as_bool).unwrap_or(true),
            ..Default::default()
        };
        let a = host.get_available_tools(&req).await;
        let specs = a.specs();
        let names: Vec<String> = specs.iter().map(|t| t.name.clone()).collect();

        let (expected_key, expected): (&str, Vec<&str>) = match v.get("deferred_assembly") {
            Some(d) => (
                "final_tool_names",
                d["final_tool_names"].as_array().unwrap().iter().map(|x| x.as_str().unwrap()).collect(),
            ),
            None => (
                "expected_tool_names",
                v["expected_tool_names"].as_array().unwrap().iter().map(|x| x.as_str().unwrap()).collect(),
            ),
        };
        differences_seen.extend(expected.iter().copied().filter(|n| not_provided(n)));
        let expected: Vec<&str> = expected.into_iter().filter(|n| !not_provided(n)).collect();
        assert_eq!(names, expected, "{id} ({expected_key}): {}", v["note"]);

        let mcp: Vec<&str> = specs.iter().filter(|t| t.is_mcp()).map(|t| t.name.as_str()).collect();
        let tagged: Vec<&str> = v["mcp_tagged"].as_array().unwrap().iter().map(|x| x.as_str().unwrap()).collect();
        assert_eq!(mcp, tagged, "{id}: MCP-tagged tools");

        let expected_warnings: Vec<&str> =
            v["warnings"].as_array().unwrap().iter().map(|x| x.as_str().unwrap()).collect();
        let warnings: Vec<&str> = a.warnings.iter().map(String::as_str).collect();
        assert_eq!(warnings, expected_warnings, "{id}: warnings");

        if let Some(d) = v.get("deferred_assembly") {
            let deferred = a.deferred.as_deref();
            let hash = deferred.and_then(|d| d.setup.catalog_hash.clone());
            assert_eq!(hash.as_deref(), d["catalog_hash"].as_str(), "{id}: catalog_hash");
            let mut sorted: Vec<String> =
                deferred.map(|d| d.setup.deferred_names.iter().cloned().collect()).unwrap_or_default();
            sorted.sort();
            assert_eq!(serde_json::json!(sorted), d["deferred_names_sorted"], "{id}: deferred names");
            let section = deferred.map(|d| d.setup.prompt_section()).unwrap_or_default();
            assert_eq!(section, d["prompt_section"].as_str().unwrap(), "{id}: prompt section");
            if d["catalog_hash"].is_string() {
                checked_hashes += 1;
            }
            // The MCP schemas arrive unchanged from the wire.
            if let Some(schemas) = d["mcp_tool_args_schemas"].as_object() {
                for (name, schema) in schemas {
                    let tool = specs.iter().find(|t| t.name == *name).unwrap_or_else(|| panic!("{id}: {name}"));
                    assert_eq!(&tool.parameters, schema, "{id}: {name} schema");
                }
            }
        }
    }
    assert_eq!(checked_hashes, 2, "both deferred catalogs were compared");
    for (name, why) in NOT_PROVIDED {
        assert!(differences_seen.contains(&name), "{name} ({why}) is in no DeerFlow list: drop it from NOT_PROVIDED");
    }
}
