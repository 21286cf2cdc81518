//! 10 000-tool catalog: building the catalog (conversion + hash), hashing alone, and
//! `tool_search` for each query form.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use serde_json::json;
use toolhost_deferred::pyre::CatalogRegex;
use toolhost_deferred::{DeferredCatalog, DeferredToolInput, PyValue, ToolSearchTool};

const SERVICES: [&str; 10] =
    ["slack", "github", "calendar", "gmail", "notion", "jira", "gdrive", "postgres", "maps", "weather"];
const VERBS: [&str; 8] = ["send", "list", "search", "create", "export", "delete", "update", "get"];

fn tools(n: usize) -> Vec<DeferredToolInput> {
    (0..n)
        .map(|i| {
            let service = SERVICES[i % SERVICES.len()];
            let verb = VERBS[(i / SERVICES.len()) % VERBS.len()];
            let schema = json!({
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
            });
            DeferredToolInput {
                name: format!("{service}_{verb}_{i}"),
                description: format!("{verb} {service} data for item {i}; works with the {service} API."),
                schema: PyValue::from_json(&schema),
            }
        })
        .collect()
}

fn bench(c: &mut Criterion) {
    let inputs = tools(10_000);
    let catalog = DeferredCatalog::new(inputs.clone()).expect("bench catalog converts");
    c.bench_function("catalog_build_10k (convert + hash)", |b| {
        b.iter_batched(|| inputs.clone(), DeferredCatalog::new, BatchSize::LargeInput)
    });
    c.bench_function("catalog_hash_10k (blob + sha256)", |b| b.iter(|| black_box(&catalog).compute_hash()));
    c.bench_function("catalog_blob_10k (blob only)", |b| b.iter(|| black_box(&catalog).hash_blob().len()));
    let blob = catalog.hash_blob();
    c.bench_function("sha256_of_blob_10k", |b| {
        b.iter(|| {
            use sha2::Digest;
            sha2::Sha256::digest(black_box(blob.as_bytes()))[0]
        })
    });
    for q in ["item 9999", "calendar.*export", "send"] {
        c.bench_function(&format!("compile `{q}`"), |b| b.iter(|| CatalogRegex::compile(black_box(q)).is_literal()));
    }
    let tool = ToolSearchTool::new(std::sync::Arc::new(catalog));
    for (label, query) in [
        ("select", "select:slack_send_0,github_list_11"),
        ("required", "+slack send"),
        ("regex", "calendar.*export"),
        ("literal", "item 9999"),
    ] {
        c.bench_function(&format!("tool_search_10k {label} `{query}`"), |b| {
            b.iter(|| tool.search(black_box(query)).names.len())
        });
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
