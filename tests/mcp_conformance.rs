//! The official MCP conformance suite (`@modelcontextprotocol/conformance`, pinned and installed
//! with Node 22 by scripts/install-conformance.sh) against `toolhost serve --http`, whose tools
//! are the test tools of the `conformance-fixture` component plus DeerFlow's file tools. Every
//! server scenario runs (`--suite all`); the test fails when a scenario not listed in
//! `tests/mcp-expected-failures.yaml` fails, and when a listed one passes.
//!
//! Also: `completion/complete` answered by the server itself (output paths, unknown references),
//! and the official Python SDK over HTTP: progress, content blocks, resources and completion.

#[path = "support/paths.rs"]
mod paths;
#[path = "support/serve_harness.rs"]
mod serve_harness;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use rmcp::model::{ArgumentInfo, CompleteRequestParams, Reference};
use serde_json::{json, Value};

use paths::root;
use serve_harness::{call, http_session, HttpServer};

/// The fixture's tools, as the suite names them.
const FIXTURE_TOOLS: [&str; 29] = [
    "test_simple_text",
    "test_image_content",
    "test_audio_content",
    "test_multiple_content_types",
    "test_embedded_resource",
    "test_elicitation",
    "test_elicitation_sep1034_defaults",
    "test_elicitation_sep1330_enums",
    "test_sampling",
    "test_tool_with_progress",
    "test_tool_with_logging",
    "test_error_handling",
    "json_schema_2020_12_tool",
    "greet",
    "slow_compute",
    "failing_job",
    "protocol_error_job",
    "test_param_header",
    "test_reconnection",
    "test_input_required_result_elicitation",
    "test_input_required_result_sampling",
    "test_input_required_result_request_state",
    "test_input_required_result_tampered_state",
    "test_input_required_result_multiple_inputs",
    "test_input_required_result_multi_round",
    "test_input_required_result_capabilities",
    "test_input_required_result_list_roots",
    "confirm_delete",
    "multi_input",
];

/// A fixture tool's extra config keys: how the tasks scenarios want it to run as an MCP task
/// (`task_support:`; the rest keep the default, `optional` for components), and what it may ask
/// the client (`capabilities.client`).
fn extra_keys(tool: &str) -> &'static str {
    match tool {
        "greet" => ", task_support: forbidden",
        "failing_job" => ", task_support: required",
        // Asking the client is granted per tool, like every capability.
        "test_elicitation" | "test_elicitation_sep1034_defaults" | "test_elicitation_sep1330_enums" => {
            ", capabilities: {client: [elicitation]}"
        }
        "test_sampling" | "test_input_required_result_sampling" => ", capabilities: {client: [sampling]}",
        "test_input_required_result_elicitation"
        | "test_input_required_result_request_state"
        | "test_input_required_result_tampered_state"
        | "test_input_required_result_multi_round"
        | "confirm_delete"
        | "multi_input" => ", capabilities: {client: [elicitation]}",
        "test_input_required_result_capabilities" => ", capabilities: {client: [elicitation, sampling]}",
        "test_input_required_result_multiple_inputs" => ", capabilities: {client: [elicitation, sampling, roots]}",
        "test_input_required_result_list_roots" => ", capabilities: {client: [roots]}",
        _ => "",
    }
}

/// The whole suite must finish within this (it takes about 19 s).
const SUITE_DEADLINE: Duration = Duration::from_secs(600);

fn conformance_dir() -> PathBuf {
    let dir = root().join(".peers/conformance/node_modules");
    assert!(
        dir.join("@modelcontextprotocol/conformance/dist/index.js").is_file() && dir.join(".bin/node").exists(),
        "the MCP conformance suite is missing under {}: run scripts/install-conformance.sh first",
        dir.display()
    );
    dir
}

/// A temp dir with a config serving the fixture's tools and the file tools, and no MCP servers.
fn setup() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let wasm = Path::new(toolhost::bundled::GUEST_DIR).join("conformance_fixture.wasm");
    assert!(wasm.is_file(), "{} is missing: the host build script builds it", wasm.display());
    // SSE polling (SEP-1699): a call's stream is ended after a second (test_reconnection runs
    // 1.5 s) and the client polls for the rest.
    let mut config = String::from("toolhost:\n  serve: {sse_poll_after_s: 1}\ntools:\n");
    for t in FIXTURE_TOOLS {
        config.push_str(&format!(
            "  - {{name: {t}, group: conformance, use: '{}:{t}'{}}}\n",
            wasm.display(),
            extra_keys(t)
        ));
    }
    config.push_str("  - {name: read_file, group: file:read, use: 'deerflow.sandbox.tools:read_file_tool'}\n");
    config.push_str("  - {name: write_file, group: file:write, use: 'deerflow.sandbox.tools:write_file_tool'}\n");
    // One skill, for the skills extension's scenarios (SEP-2640).
    config.push_str("skills:\n  path: skills\n  container_path: /mnt/skills\n");
    let skill = dir.path().join("skills/public/conformance-skill");
    std::fs::create_dir_all(skill.join("references")).unwrap();
    std::fs::write(
        skill.join("SKILL.md"),
        "---\nname: conformance-skill\ndescription: A skill for the conformance suite.\n---\n# Conformance\nRead references/guide.md.\n",
    )
    .unwrap();
    std::fs::write(skill.join("references/guide.md"), "# Guide\n").unwrap();
    std::fs::write(dir.path().join("config.yaml"), config).unwrap();
    std::fs::write(dir.path().join("extensions_config.json"), r#"{"mcpServers": {}}"#).unwrap();
    dir
}

fn serve(dir: &Path) -> HttpServer {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_toolhost"));
    cmd.arg("serve").arg("--config").arg(dir.join("config.yaml")).args(["--http", "127.0.0.1:0"]);
    cmd.env("TOOLHOST_HOME", dir.join("data"))
        .env_remove("DEER_FLOW_EXTENSIONS_CONFIG_PATH")
        .env_remove("TOOLHOST_SERVE_TOKEN");
    HttpServer::spawn(cmd)
}

/// Run the suite's CLI with `args` and return its stdout; panics (with its output) when it
/// does not finish within [`SUITE_DEADLINE`].
fn suite(modules: &Path, args: &[&str]) -> (std::process::ExitStatus, String) {
    let out = tempfile::NamedTempFile::new().unwrap();
    let mut child = Command::new(modules.join(".bin/node"))
        .arg(modules.join("@modelcontextprotocol/conformance/dist/index.js"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(out.reopen().unwrap())
        .stderr(out.reopen().unwrap())
        .spawn()
        .unwrap();
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if start.elapsed() > SUITE_DEADLINE {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "the conformance suite ran over {SUITE_DEADLINE:?}:\n{}",
                std::fs::read_to_string(out.path()).unwrap()
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    (status, std::fs::read_to_string(out.path()).unwrap())
}

/// The server scenarios `conformance list` names.
fn server_scenarios(modules: &Path) -> BTreeSet<String> {
    let (status, out) = suite(modules, &["list"]);
    assert!(status.success(), "conformance list failed:\n{out}");
    let section = out.split("Server scenarios").nth(1).unwrap_or_else(|| panic!("no server scenarios in:\n{out}"));
    let section = section.split("\n\n").next().unwrap();
    let names: BTreeSet<String> = section
        .lines()
        .filter_map(|l| l.trim().strip_prefix("- "))
        .map(|l| l.split_whitespace().next().unwrap().to_string())
        .collect();
    assert!(names.len() > 30, "too few server scenarios parsed from:\n{out}");
    names
}

/// How one scenario went.
#[derive(Debug)]
struct Outcome {
    passed: bool,
    /// Why it did not pass (the first failing or warning check), or what it verified.
    note: String,
}

/// A scenario passes when no check failed or warned, no check succeeded on toolhost's "not a
/// valid tool" answer, and at least one check other than the suite's generic wire-schema check
/// succeeded (a scenario whose checks were all skipped tested nothing).
fn judge(checks: &[Value]) -> Outcome {
    let status = |c: &Value| c["status"].as_str().unwrap_or("").to_string();
    if let Some(bad) = checks.iter().find(|c| matches!(status(c).as_str(), "FAILURE" | "WARNING")) {
        let why = bad["errorMessage"].as_str().or(bad["description"].as_str()).unwrap_or("");
        let why: String = why.chars().take(160).collect();
        return Outcome {
            passed: false,
            note: format!("{} {}: {why}", status(bad), bad["id"].as_str().unwrap_or("?")),
        };
    }
    // The suite accepts some error results as success; one saying the scenario's tool does not
    // exist here tested nothing of toolhost.
    if checks.iter().any(|c| c["details"].to_string().contains(" is not a valid tool, try one of [")) {
        return Outcome { passed: false, note: "hollow: the scenario's tool does not exist here".into() };
    }
    let verified = checks.iter().filter(|c| status(c) == "SUCCESS" && c["id"] != "wire-schema-valid").count();
    if verified == 0 {
        return Outcome { passed: false, note: "nothing verified (every check skipped)".into() };
    }
    Outcome { passed: true, note: format!("{verified} checks") }
}

/// Scenario → outcome from the suite's output dir (`server-<scenario>-<timestamp>/checks.json`).
fn outcomes(dir: &Path) -> BTreeMap<String, Outcome> {
    let mut out = BTreeMap::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(rest) = name.strip_prefix("server-") else { continue };
        // The timestamp is `YYYY-MM-DDTHH-MM-SS-mmmZ`: six dash-separated fields.
        let scenario = rest.rsplitn(7, '-').last().unwrap().to_string();
        let checks: Vec<Value> = match std::fs::read(entry.path().join("checks.json")) {
            Ok(raw) => serde_json::from_slice(&raw).unwrap_or_default(),
            Err(_) => Vec::new(),
        };
        out.insert(scenario, judge(&checks));
    }
    out
}

fn expected_failures() -> BTreeMap<String, String> {
    let path = root().join("tests/mcp-expected-failures.yaml");
    let raw = std::fs::read_to_string(&path).unwrap();
    let file: BTreeMap<String, BTreeMap<String, String>> =
        serde_yaml::from_str(&raw).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let server = file.get("server").cloned().unwrap_or_default();
    for (scenario, why) in &server {
        assert!(!why.trim().is_empty(), "{}: {scenario} has no reason", path.display());
    }
    server
}

#[test]
fn the_official_conformance_suite_passes_except_the_listed_scenarios() {
    let modules = conformance_dir();
    let scenarios = server_scenarios(&modules);
    let expected = expected_failures();
    for listed in expected.keys() {
        assert!(scenarios.contains(listed), "expected failure {listed} is not a server scenario of the pinned suite");
    }

    let dir = setup();
    let server = serve(dir.path());
    let results = dir.path().join("results");
    let started = Instant::now();
    let (_, log) =
        suite(&modules, &["server", "--url", &server.url(), "--suite", "all", "-o", results.to_str().unwrap()]);
    let took = started.elapsed();
    let got = outcomes(&results);

    let mut problems = Vec::new();
    let mut summary = String::new();
    let (mut passed, mut expected_failed) = (0, 0);
    for scenario in &scenarios {
        let line = match (got.get(scenario), expected.get(scenario)) {
            (None, _) => {
                problems.push(format!("{scenario}: no result (the suite did not run it)"));
                format!("MISSING          {scenario}")
            }
            (Some(o), None) if o.passed => {
                passed += 1;
                format!("pass             {scenario} ({})", o.note)
            }
            (Some(o), None) => {
                problems.push(format!("{scenario} fails: {}", o.note));
                format!("FAIL             {scenario}: {}", o.note)
            }
            (Some(o), Some(_)) if o.passed => {
                problems.push(format!("{scenario} passes now: remove it from mcp-expected-failures.yaml"));
                format!("UNEXPECTED PASS  {scenario}")
            }
            (Some(o), Some(why)) => {
                expected_failed += 1;
                format!("expected failure {scenario}: {why}\n                   ({})", o.note)
            }
        };
        summary.push_str(&line);
        summary.push('\n');
    }
    println!(
        "{summary}\nconformance: {passed} passed, {expected_failed} expected failures, {} problems, of {} server scenarios in {:.1} s",
        problems.len(),
        scenarios.len(),
        took.as_secs_f64()
    );
    assert!(problems.is_empty(), "{}\n\nsuite output:\n{log}", problems.join("\n"));

    // The tools the suite checks are the fixture's, served for real: they passed above.
    for tool_scenario in ["tools-call-simple-text", "tools-call-image", "tools-call-audio", "tools-call-with-progress"]
    {
        assert!(got[tool_scenario].passed, "{tool_scenario}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn completion_suggests_output_paths_and_refuses_unknown_references() {
    let dir = setup();
    let server = serve(dir.path());
    let c = http_session(&server.url(), None).await.unwrap();
    for (path, content) in
        [("/mnt/user-data/outputs/report.md", "# r"), ("/mnt/user-data/outputs/data/rows.csv", "a,b")]
    {
        let r = call(&c, "write_file", json!({"description": "d", "path": path, "content": content})).await;
        assert_ne!(r.is_error, Some(true), "{r:?}");
    }
    let template = "toolhost:///mnt/user-data/outputs/{path}";
    let complete = |r: Reference, name: &str, value: &str| {
        let c = &c;
        let p = CompleteRequestParams::new(r, ArgumentInfo::new(name, value));
        async move { c.complete(p).await }
    };
    let all = complete(Reference::for_resource(template), "path", "").await.unwrap();
    assert_eq!(all.completion.values, ["data/rows.csv", "report.md"]);
    assert_eq!(all.completion.total, Some(2));
    let some = complete(Reference::for_resource(template), "path", "rep").await.unwrap();
    assert_eq!(some.completion.values, ["report.md"]);
    let none = complete(Reference::for_resource(template), "path", "zzz").await.unwrap();
    assert!(none.completion.values.is_empty());

    for (r, arg, what) in [
        (Reference::for_resource("test://template/{id}/data"), "path", "Resource template not found"),
        (Reference::for_resource(template), "id", "its one argument is \"path\""),
        (Reference::for_prompt("test_prompt_with_arguments"), "arg1", "Prompt not found"),
    ] {
        let e = complete(r, arg, "x").await.unwrap_err().to_string();
        assert!(e.contains("-32602") || e.contains("Invalid params") || e.contains(what), "{e}");
        assert!(e.contains(what), "{e}");
    }
    // Still serving after the refusals.
    let r = call(&c, "test_simple_text", json!({})).await;
    assert_eq!(serve_harness::text(&r), "This is a simple text response for testing.");
    c.cancel().await.unwrap();
}

/// The official Python SDK (`mcp`, scripts/install-peers.sh) over streamable HTTP.
const PY_HTTP: &str = r#"
import asyncio, json, sys
from mcp import ClientSession
from mcp.client.streamable_http import streamablehttp_client
from mcp.types import ResourceTemplateReference

async def main():
    out, progress = {}, []
    async def on_progress(p, total, message):
        progress.append([p, total])
    async with streamablehttp_client(sys.argv[1]) as (r, w, _):
        async with ClientSession(r, w) as s:
            await s.initialize()
            res = await s.call_tool("test_tool_with_progress", {}, progress_callback=on_progress)
            out["progress_text"], out["progress"] = res.content[0].text, progress
            img = await s.call_tool("test_image_content", {})
            out["image"] = [img.content[0].type, img.content[0].mimeType, img.content[0].data]
            err = await s.call_tool("test_error_handling", {})
            out["error"] = [err.isError, err.content[0].text]
            wr = await s.call_tool("write_file", {"description": "d", "path": "/mnt/user-data/outputs/note.txt", "content": "hello from python"})
            out["write_error"] = wr.isError
            out["resources"] = [str(x.uri) for x in (await s.list_resources()).resources]
            out["read"] = (await s.read_resource("toolhost:///mnt/user-data/outputs/note.txt")).contents[0].text
            ref = ResourceTemplateReference(type="ref/resource", uri="toolhost:///mnt/user-data/outputs/{path}")
            out["complete"] = (await s.complete(ref, {"name": "path", "value": "no"})).completion.values
    print(json.dumps(out))

asyncio.run(main())
"#;

#[test]
fn the_python_sdk_sees_progress_content_resources_and_completion_over_http() {
    let dir = setup();
    let server = serve(dir.path());
    let python = paths::peer("venv/bin/python");
    let o = Command::new(python).arg("-c").arg(PY_HTTP).arg(server.url()).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out: Value = serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {o:?}"));
    // The component's three host.progress reports, in order, as notifications/progress.
    assert_eq!(out["progress"], json!([[0.0, 100.0], [50.0, 100.0], [100.0, 100.0]]), "{out}");
    assert_eq!(out["progress_text"], "Progress test completed: reported 0, 50 and 100 of 100.", "{out}");
    // The fixture's 69-byte PNG, base64-encoded by the host.
    let png = out["image"][2].as_str().unwrap();
    assert_eq!((&out["image"][0], &out["image"][1]), (&json!("image"), &json!("image/png")), "{out}");
    assert!(png.starts_with("iVBORw0KGgo") && png.len() == 92, "{out}");
    assert_eq!(out["error"], json!([true, "This tool intentionally returns an error for testing"]), "{out}");
    assert_eq!(out["write_error"], false, "{out}");
    // The thread's file, then the skill's SKILL.md (the skills extension).
    assert_eq!(
        out["resources"],
        json!(["toolhost:///mnt/user-data/outputs/note.txt", "skill://public/conformance-skill/SKILL.md"]),
        "{out}"
    );
    assert_eq!(out["read"], "hello from python", "{out}");
    assert_eq!(out["complete"], json!(["note.txt"]), "{out}");
}
