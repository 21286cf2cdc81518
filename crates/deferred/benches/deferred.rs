//! 10 000-tool catalog: from the MCP tool schemas to `catalog_hash` (conversion included, as
//! DeerFlow's figure is), a rebuild after one tool changed, the search index a first search
//! builds, and `tool_search` for each query form. Criterion prints its estimates (means); under
//! `cargo bench` a plain loop then prints medians (`DEFERRED_MEDIAN_RUNS`, default 30), with the
//! catalog's hash so that scripts/bench-deerflow.py's figure can be checked to hash the same tools.

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{criterion_group, BatchSize, Criterion};
use serde_json::json;
use std::sync::Arc;

use toolhost_core::{CallContext, Tool, ToolOutcome, ToolSpec};
use toolhost_deferred::{build_deferred_tool_setup, DeferredCatalog, DeferredToolInput, ToolSearchTool};
use toolhost_py::re::CatalogRegex;

const SERVICES: [&str; 10] =
    ["slack", "github", "calendar", "gmail", "notion", "jira", "gdrive", "postgres", "maps", "weather"];
const VERBS: [&str; 8] = ["send", "list", "search", "create", "export", "delete", "update", "get"];

/// The catalog as MCP servers list it: name, description, input schema (scripts/bench-deerflow.py
/// builds the same tools for DeerFlow).
fn specs(n: usize) -> Vec<ToolSpec> {
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
            ToolSpec {
                name: format!("{service}_{verb}_{i}"),
                description: format!("{verb} {service} data for item {i}; works with the {service} API."),
                parameters: schema,
                group: None,
                source: toolhost_core::ToolSource::Mcp { server: service.to_string() },
            }
        })
        .collect()
}

/// An MCP tool as the host holds it (`toolhost_mcp::McpTool`): a `dyn Tool` whose spec has the
/// `serde_json` schema, that schema's compact text, written when the tool was listed, and room
/// for its rendered catalog entry. Without the text (`None`): a tool rendered from the
/// `serde_json` tree.
struct McpLike(ToolSpec, Option<String>, toolhost_core::CatalogSlot);

#[async_trait::async_trait]
impl Tool for McpLike {
    fn spec(&self) -> &ToolSpec {
        &self.0
    }
    fn parameters_text(&self) -> Option<&str> {
        self.1.as_deref()
    }
    fn catalog_slot(&self) -> Option<&toolhost_core::CatalogSlot> {
        // Read the switch once: a `getenv` per tool took ~9 % of a first build's samples (the
        // lookup takes the environment lock and scans it), a cost the host's `McpTool` never had.
        static NO_SLOT: std::sync::LazyLock<bool> =
            std::sync::LazyLock::new(|| std::env::var_os("DEFERRED_NO_SLOT").is_some());
        Some(&self.2).filter(|_| !*NO_SLOT)
    }
    async fn call(&self, _ctx: &CallContext, _args: serde_json::Value) -> ToolOutcome {
        ToolOutcome::text("")
    }
}

/// The tools as `toolhost_mcp` lists them (with their schemas' text).
fn host_tools(specs: &[ToolSpec]) -> Vec<Arc<dyn Tool>> {
    specs
        .iter()
        .map(|s| {
            Arc::new(McpLike(s.clone(), Some(serde_json::to_string(&s.parameters).unwrap()), Default::default()))
                as Arc<dyn Tool>
        })
        .collect()
}

/// The tools without their schemas' text: rendered from the `serde_json` trees.
fn tree_tools(specs: &[ToolSpec]) -> Vec<Arc<dyn Tool>> {
    specs.iter().map(|s| Arc::new(McpLike(s.clone(), None, Default::default())) as Arc<dyn Tool>).collect()
}

fn inputs(specs: &[ToolSpec]) -> Vec<DeferredToolInput> {
    specs.iter().map(DeferredToolInput::from_spec).collect()
}

/// A new version of one tool (its description changed), for a rebuild that keeps the others.
fn one_changed(inputs: &[DeferredToolInput]) -> DeferredToolInput {
    let mut t = inputs[4321 % inputs.len()].clone();
    t.description.push_str(" (v2)");
    t
}

fn bench(c: &mut Criterion) {
    let specs = specs(10_000);
    let inputs = inputs(&specs);
    let catalog = DeferredCatalog::new(inputs.clone()).expect("bench catalog converts");
    c.bench_function("catalog_from_specs_10k (schemas -> hash, end to end)", |b| {
        b.iter_with_large_drop(|| DeferredCatalog::from_specs(black_box(&specs)))
    });
    c.bench_function("deferred_setup_10k (the host's MCP tools -> tool_search setup, first build)", |b| {
        b.iter_batched(|| host_tools(&specs), |tools| build_deferred_tool_setup(&tools, true), BatchSize::PerIteration)
    });
    let tools = host_tools(&specs);
    c.bench_function("deferred_setup_10k again (the tools' entries kept from the first build)", |b| {
        b.iter_with_large_drop(|| build_deferred_tool_setup(black_box(&tools), true))
    });
    c.bench_function("deferred_setup_10k from serde_json trees (no schema text, first build)", |b| {
        b.iter_batched(|| tree_tools(&specs), |tools| build_deferred_tool_setup(&tools, true), BatchSize::PerIteration)
    });
    c.bench_function("catalog_build_10k (parsed schemas -> hash)", |b| {
        b.iter_batched(|| inputs.clone(), DeferredCatalog::new, BatchSize::LargeInput)
    });
    c.bench_function("catalog_rebuild_10k (one tool changed)", |b| {
        b.iter_batched(
            || (catalog.clone(), one_changed(&inputs)),
            |(c, t)| c.rebuild(|k| k.name() != t.name, [t.clone()]),
            BatchSize::LargeInput,
        )
    });
    c.bench_function("catalog_hash_10k (render + sha256, converted)", |b| {
        b.iter(|| black_box(&catalog).compute_hash())
    });
    let blob = catalog.hash_blob();
    c.bench_function("sha256_of_blob_10k", |b| {
        b.iter(|| {
            use sha2::Digest;
            sha2::Sha256::digest(black_box(blob.as_bytes()))[0]
        })
    });
    c.bench_function("first search (builds the search index)", |b| {
        b.iter_batched(|| catalog.clone(), |c| c.search("select:slack_send_0").len(), BatchSize::LargeInput)
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

/// Medians of plain timed loops, for BENCHMARKS.md (criterion's point estimates are means).
/// Inputs are prepared and results dropped outside the timed part.
fn medians() {
    let runs: usize = std::env::var("DEFERRED_MEDIAN_RUNS").ok().and_then(|r| r.parse().ok()).unwrap_or(30);
    let specs = specs(10_000);
    let inputs = inputs(&specs);
    let catalog = DeferredCatalog::new(inputs.clone()).expect("bench catalog converts");
    /// (median, minimum) in ms; on a loaded machine the minimum is the closer to the cost itself.
    fn median_ms<I, O>(runs: usize, mut prepare: impl FnMut() -> I, mut run: impl FnMut(I) -> O) -> (f64, f64) {
        let mut t: Vec<f64> = (0..runs)
            .map(|_| {
                let input = prepare();
                let start = Instant::now();
                let out = black_box(run(input));
                let ms = start.elapsed().as_secs_f64() * 1000.0;
                drop(out);
                ms
            })
            .collect();
        t.sort_by(f64::total_cmp);
        (t[t.len() / 2], t[0])
    }
    println!("\ncatalog of 10 000 tools, medians of {runs} runs (catalog_hash {})", catalog.hash());
    let tools = host_tools(&specs);
    let _ = build_deferred_tool_setup(&tools, true);
    let rows = [
        (
            "host: MCP tools -> tool_search setup, first build",
            median_ms(runs, || host_tools(&specs), |tools| build_deferred_tool_setup(&tools, true)),
        ),
        (
            "host: the same tools again (entries kept per tool)",
            median_ms(runs, || (), |()| build_deferred_tool_setup(&tools, true)),
        ),
        (
            "host, tools without schema text (serde_json trees)",
            median_ms(runs, || tree_tools(&specs), |tools| build_deferred_tool_setup(&tools, true)),
        ),
        (
            "listing: schema text of 10 000 tools (serde_json::to_string)",
            median_ms(
                runs,
                || (),
                |()| specs.iter().map(|s| serde_json::to_string(&s.parameters).unwrap()).collect::<Vec<_>>(),
            ),
        ),
        (
            "from_specs: MCP schemas -> catalog_hash (end to end)",
            median_ms(runs, || (), |()| DeferredCatalog::from_specs(&specs)),
        ),
        ("new: parsed schemas -> catalog_hash", median_ms(runs, || inputs.clone(), DeferredCatalog::new)),
        (
            "rebuild: one tool changed",
            median_ms(
                runs,
                || (catalog.clone(), one_changed(&inputs)),
                |(c, t)| c.rebuild(|k| k.name() != t.name, [t.clone()]),
            ),
        ),
        ("render + sha256 of converted tools", median_ms(runs, || (), |()| catalog.compute_hash())),
        (
            "first search (index build + select)",
            median_ms(runs, || catalog.clone(), |c| c.search("select:slack_send_0").len()),
        ),
    ];
    for (name, (median, min)) in rows {
        println!("DEFERRED_MEDIAN {name:<52} {median:>8.2} ms (min {min:.2})");
    }
}

/// Nanoseconds this thread has run on a CPU (Linux: `/proc/thread-self/schedstat`; 0 elsewhere):
/// on a loaded machine, the time the work took without the time it waited for a core.
fn thread_cpu_ns() -> u64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next().and_then(|n| n.parse().ok()))
        .unwrap_or(0)
}

criterion_group! {
    name = benches;
    config = Criterion::default().warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(3));
    targets = bench
}

fn main() {
    // `DEFERRED_PROFILE=render|new|rebuild|search|setup|again|trees|specs:N`: only that, N times, printing the
    // median and minimum; for a profiler, `perf stat`, or a side-by-side with another build.
    // `DEFERRED_TOOLS=M`: a catalog of M tools instead of 10 000 (the size from which a build
    // renders on more than one thread was measured with it).
    if let Ok(what) = std::env::var("DEFERRED_PROFILE") {
        let (what, n) = what.split_once(':').unwrap_or((what.as_str(), "20"));
        let n: usize = n.parse().unwrap_or(20);
        let tools: usize = std::env::var("DEFERRED_TOOLS").ok().and_then(|m| m.parse().ok()).unwrap_or(10_000);
        let specs = specs(tools);
        let inputs = inputs(&specs);
        let catalog = DeferredCatalog::new(inputs.clone()).expect("converts");
        // Only the inputs of the mode measured (more copies of the schemas in memory would
        // change what the others find in cache).
        // `setup`/`trees`: a first build of freshly listed tools each time; `again`: the same
        // tools each time, their entries kept from the first build.
        let fresh = |what: &str| match what {
            "setup" => host_tools(&specs),
            "trees" => tree_tools(&specs),
            _ => Vec::new(),
        };
        let kept = if what == "again" { host_tools(&specs) } else { Vec::new() };
        for ts in [&fresh(what), &kept].into_iter().filter(|ts| !ts.is_empty()) {
            let setup = build_deferred_tool_setup(ts, true).expect("converts");
            assert_eq!(setup.catalog_hash.as_deref(), Some(catalog.hash()), "the host's path hashes the same");
        }
        let mut t: Vec<f64> = Vec::new();
        let mut cpu: Vec<f64> = Vec::new();
        for _ in 0..n {
            let i = if what == "new" { inputs.clone() } else { Vec::new() };
            let c = if matches!(what, "search" | "rebuild") { Some(catalog.clone()) } else { None };
            let tools = fresh(what);
            let trees = tools.clone();
            let start = Instant::now();
            let cpu_start = thread_cpu_ns();
            let out: Box<dyn std::any::Any> = match (what, c) {
                ("render", _) => Box::new(catalog.compute_hash()),
                ("new", _) => Box::new(DeferredCatalog::new(i)),
                ("rebuild", Some(c)) => {
                    let t = one_changed(&inputs);
                    Box::new(c.rebuild(|k| k.name() != t.name, [t.clone()]))
                }
                ("search", Some(c)) => Box::new(c.search("select:slack_send_0").len()),
                ("setup", _) => Box::new(build_deferred_tool_setup(&tools, true)),
                ("again", _) => Box::new(build_deferred_tool_setup(&kept, true)),
                ("trees", _) => Box::new(build_deferred_tool_setup(&trees, true)),
                _ => Box::new(DeferredCatalog::from_specs(&specs)),
            };
            t.push(start.elapsed().as_secs_f64() * 1000.0);
            cpu.push((thread_cpu_ns() - cpu_start) as f64 / 1e6);
            drop(black_box(out));
        }
        t.sort_by(f64::total_cmp);
        cpu.sort_by(f64::total_cmp);
        if !t.is_empty() {
            println!(
                "{what}: median {:.2} min {:.2}, on-CPU median {:.2} (hash {})",
                t[t.len() / 2],
                t[0],
                cpu[cpu.len() / 2],
                catalog.hash()
            );
        }
        return;
    }
    let bench_mode = std::env::args().any(|a| a == "--bench");
    if std::env::var_os("DEFERRED_MEDIANS_ONLY").is_none() {
        benches();
        criterion::Criterion::default().configure_from_args().final_summary();
    }
    if bench_mode {
        medians();
    }
}
