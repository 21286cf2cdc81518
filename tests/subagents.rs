//! `task` end to end: a subagent's model loop against a loopback chat-completions server with
//! scripted replies, its tool calls run by the real host (the sandbox-fs component's
//! `read_file`), DeerFlow's status strings and `subagent_*` metadata, the caps (turns, loop,
//! timeout), hostile model replies, the parallel/total limits; and custom agents (`--agent`).
//! Every hostile case ends with a normal task that still works.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use toolhost::assembly::{AgentRun, AssemblyRequest};
use toolhost::{HostOptions, Toolhost};

#[path = "support/chat_server.rs"]
mod chat_server;
use chat_server::{answer, tool_calls, ChatServer, Reply};

struct Env {
    dir: tempfile::TempDir,
    host: Arc<Toolhost>,
}

fn config_yaml(base_url: &str, extra: &str) -> String {
    format!(
        "models:\n  - {{name: scripted, use: 'langchain_openai:ChatOpenAI', model: scripted-1, base_url: '{base_url}', api_key: test-key}}\n  - {{name: seeing, use: 'langchain_openai:ChatOpenAI', model: v, base_url: '{base_url}', supports_vision: true}}\ntools:\n  - {{name: read_file, group: 'file:read', use: 'deerflow.sandbox.tools:read_file_tool'}}\n  - {{name: ls, group: 'file:read', use: 'deerflow.sandbox.tools:ls_tool'}}\n  - {{name: write_file, group: 'file:write', use: 'deerflow.sandbox.tools:write_file_tool'}}\nsubagents:\n  custom_agents:\n    reader: {{description: Reads files, system_prompt: You read files., tools: [read_file]}}\n    slow: {{description: Slow, system_prompt: p, timeout_seconds: 1}}\n    helper: {{description: An ACP agent, system_prompt: Be brief., acp: echo, timeout_seconds: 60}}\n    broken: {{description: A failing ACP agent, system_prompt: '', acp: fail, timeout_seconds: 60}}\n{extra}"
    )
}

fn open(base_url: &str, extra: &str) -> Env {
    open_with(base_url, extra, |_| {})
}

/// [`open`] with `before` preparing the directory first (skills are found when the host opens).
fn open_with(base_url: &str, extra: &str, before: impl FnOnce(&Path)) -> Env {
    let dir = tempfile::tempdir().unwrap();
    before(dir.path());
    let config = dir.path().join("config.yaml");
    std::fs::write(&config, config_yaml(base_url, extra)).unwrap();
    if !dir.path().join("extensions_config.json").exists() {
        std::fs::write(dir.path().join("extensions_config.json"), r#"{"mcpServers": {}}"#).unwrap();
    }
    let opts = HostOptions::new(&config)
        .data_dir(dir.path().join("data"))
        .cache_dir(dir.path().join("cache"))
        .extensions(Some(dir.path().join("extensions_config.json")));
    let host = Toolhost::open_blocking(opts).unwrap().into_shared();
    let fs = host.thread_fs("t1").unwrap();
    fs.ensure_tool_dirs().unwrap();
    std::fs::write(fs.paths().workspace().join("notes.txt"), "the answer is 42\n").unwrap();
    Env { dir, host }
}

fn lead() -> AssemblyRequest {
    AssemblyRequest { subagent_enabled: true, ..Default::default() }
}

async fn task(env: &Env, subagent_type: &str, prompt: &str) -> toolhost::CallResult {
    let args = json!({"description": "look it up", "prompt": prompt, "subagent_type": subagent_type});
    env.host.call(&lead(), "t1", "task", args, None).await.unwrap()
}

fn kwargs(r: &toolhost::CallResult) -> Value {
    Value::Object(r.outcome.additional_kwargs.clone().unwrap_or_default())
}

/// The task as the subagent's model received it, without DeerFlow's user-input markers
/// (InputSanitizationMiddleware frames it for every model call).
fn prompt_of(req: &Value) -> String {
    let framed = req["messages"][1]["content"].as_str().unwrap_or("");
    framed
        .strip_prefix("--- BEGIN USER INPUT ---\n")
        .and_then(|t| t.strip_suffix("\n--- END USER INPUT ---"))
        .unwrap_or(framed)
        .to_string()
}

fn read_notes() -> Reply {
    tool_calls(&[("read_file", r#"{"description": "read", "path": "/mnt/user-data/workspace/notes.txt"}"#)])
}

/// The subagent reads a file with read_file and answers; replies stream on the way in.
#[tokio::test]
async fn subagent_reads_a_file_and_answers() {
    let server = ChatServer::scripted(vec![
        read_notes(),
        match answer("The notes say 42.") {
            Reply::Json(j) => Reply::Stream(j),
            other => other,
        },
    ])
    .await;
    let env = open(&server.base_url, "");
    let names: Vec<String> = env.host.get_available_tools(&lead()).await.specs().into_iter().map(|t| t.name).collect();
    assert!(names.contains(&"task".to_string()), "{names:?}");

    let r = task(&env, "general-purpose", "What do the notes say?").await;
    assert_eq!(r.outcome.text_content(), "Task Succeeded. Result: The notes say 42.");
    let k = kwargs(&r);
    assert_eq!(k["subagent_status"], "completed");
    assert_eq!(k["subagent_result_brief"], "The notes say 42.");
    assert_eq!(k["subagent_model_name"], "scripted");
    assert_eq!(k["subagent_token_usage"], json!({"input_tokens": 30, "output_tokens": 12, "total_tokens": 42}));
    assert_eq!(k["subagent_result_sha256"].as_str().unwrap().len(), 64);

    let reqs = server.requests();
    assert_eq!(reqs.len(), 2);
    assert_eq!(reqs[0]["model"], "scripted-1");
    let offered: Vec<&str> =
        reqs[0]["tools"].as_array().unwrap().iter().map(|t| t["function"]["name"].as_str().unwrap()).collect();
    assert!(offered.contains(&"read_file") && offered.contains(&"write_file"), "{offered:?}");
    for hidden in ["task", "ask_clarification", "present_files", "list_uploaded_files"] {
        assert!(!offered.contains(&hidden), "{hidden} offered to a subagent: {offered:?}");
    }
    assert!(reqs[0]["messages"][0]["content"].as_str().unwrap().starts_with("You are a general-purpose subagent"));
    // The task framed as DeerFlow's InputSanitizationMiddleware frames the user message.
    assert_eq!(
        reqs[0]["messages"][1],
        json!({"role": "user", "content": "--- BEGIN USER INPUT ---\nWhat do the notes say?\n--- END USER INPUT ---"})
    );
    let tool_msg = reqs[1]["messages"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(tool_msg["role"], "tool");
    assert!(tool_msg["content"].as_str().unwrap().contains("the answer is 42"), "{tool_msg}");

    let state = env.host.thread_state("t1").await.unwrap();
    assert_eq!(state.delegations.len(), 1);
    assert_eq!(state.delegations[0]["status"], "completed");
    assert_eq!(state.delegations[0]["subagent_type"], "general-purpose");
}

#[tokio::test]
async fn unknown_type_and_bash_disabled() {
    let server = ChatServer::scripted(vec![answer("done")]).await;
    let env = open(&server.base_url, "");
    let r = task(&env, "nope", "x").await;
    assert_eq!(
        r.outcome.text_content(),
        "Task failed. Error: Unknown subagent type 'nope'. Available: general-purpose, reader, slow, helper, broken"
    );
    assert_eq!(kwargs(&r)["subagent_status"], "failed");
    let r = task(&env, "bash", "ls").await;
    assert_eq!(
        r.outcome.text_content(),
        "Task failed. Error: Bash subagent is disabled for LocalSandboxProvider because host bash execution is not a secure sandbox boundary. Switch to AioSandboxProvider for isolated bash access, or set sandbox.allow_host_bash: true only in a fully trusted local environment."
    );
    assert!(server.requests().is_empty(), "no model call for either");
    assert_eq!(task(&env, "general-purpose", "x").await.outcome.text_content(), "Task Succeeded. Result: done");
}

/// A server that never answers: the subagent's timeout ends the loop with DeerFlow's text.
#[tokio::test]
async fn timeout_ends_the_loop() {
    let server = ChatServer::start(Arc::new(|i, _| if i == 0 { Reply::Hang } else { answer("fine") })).await;
    let env = open(&server.base_url, "");
    let t = Instant::now();
    let r = task(&env, "slow", "x").await;
    assert_eq!(r.outcome.text_content(), "Task timed out. Error: Execution timed out after 1 seconds");
    assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
    assert_eq!(kwargs(&r)["subagent_status"], "timed_out");
    assert_eq!(kwargs(&r)["subagent_error"], "Execution timed out after 1 seconds");
    assert_eq!(task(&env, "slow", "x").await.outcome.text_content(), "Task Succeeded. Result: fine");
}

/// A model that repeats the same call: loop detection stops it at the fifth identical turn.
#[tokio::test]
async fn repeated_calls_are_loop_capped() {
    let server = ChatServer::scripted(vec![read_notes()]).await;
    let env = open(&server.base_url, "");
    let r = task(&env, "general-purpose", "x").await;
    assert_eq!(
        r.outcome.text_content(),
        "Task Succeeded (capped: repeated tool-call loop). Result: \n\n[FORCED STOP] Repeated tool calls exceeded the safety limit. Producing final answer with results collected so far."
    );
    assert_eq!(kwargs(&r)["subagent_stop_reason"], "loop_capped");
    let reqs = server.requests();
    assert_eq!(reqs.len(), 5);
    // The warning reached the model after the third identical turn.
    let last = reqs[3]["messages"].as_array().unwrap().last().unwrap().clone();
    assert!(last["content"].as_str().unwrap().starts_with("[LOOP DETECTED]"), "{last}");
}

/// A model that never stops (a new call every turn) is bounded by max_turns.
#[tokio::test]
async fn endless_model_is_turn_capped() {
    let server = ChatServer::start(Arc::new(|i, _| {
        tool_calls(&[("ls", &format!(r#"{{"description": "l", "path": "/mnt/user-data/workspace/{i}"}}"#))])
    }))
    .await;
    let env = open(&server.base_url, "  agents:\n    general-purpose: {max_turns: 20}\n");
    let r = task(&env, "general-purpose", "x").await;
    // DeerFlow's recursion limit counts graph steps: the second model call is step 14, its tools
    // step 19 — there is no third call within 20. No text to recover: a failure.
    assert_eq!(r.outcome.text_content(), "Task failed (capped: turn budget). Error: Reached max_turns=20");
    assert_eq!(kwargs(&r)["subagent_stop_reason"], "turn_capped");
    assert_eq!(server.requests().len(), 2);
}

/// `max_turns` as DeerFlow counts it (`recursion_limit` over graph steps, every middleware hook
/// one): each case of `tests/conformance/subagent_turns.json` — DeerFlow's own executor with a
/// scripted model — replayed against the same script, with the same model calls, tool runs,
/// status, result and stop reason.
#[tokio::test]
async fn max_turns_counts_graph_steps_as_deerflow() {
    let raw =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/conformance/subagent_turns.json"))
            .unwrap();
    let doc: Value = serde_json::from_str(&raw).unwrap();
    let cases = doc["cases"].as_array().unwrap();
    assert!(cases.len() >= 60);
    // One host for every case: a custom subagent per `max_turns` (the same graph as
    // general-purpose's), and a script that follows the case at hand.
    let max: u64 = cases.iter().map(|c| c["max_turns"].as_u64().unwrap()).max().unwrap();
    let agents: String = (1..=max)
        .map(|n| format!("    turns-{n}: {{description: d, system_prompt: You are a subagent., max_turns: {n}}}\n"))
        .collect();
    // (final_at, the first request of this case, the case's number)
    let current: Arc<std::sync::Mutex<(Option<u64>, usize, usize)>> = Arc::default();
    let script = current.clone();
    let server = ChatServer::start(Arc::new(move |i, _| {
        let (final_at, first, case) = *script.lock().unwrap();
        let call = (i - first) as u64 + 1;
        // Model call `call` asks for one tool run (a file write, so runs can be counted) until
        // call `final_at` answers in text, as DeerFlow's scripted model did.
        if final_at.is_some_and(|f| call >= f) {
            return answer(&format!("final {call}"));
        }
        let path = format!("/mnt/user-data/workspace/run-{case}-{call}.txt");
        let args = json!({"description": "count", "path": path, "content": "x"}).to_string();
        match tool_calls(&[("write_file", &args)]) {
            Reply::Json(mut j) => {
                j["choices"][0]["message"]["content"] = json!(format!("step {call}"));
                Reply::Json(j)
            }
            other => other,
        }
    }))
    .await;
    let env = open(&server.base_url, &agents);
    let workspace = env.dir.path().join("data/threads/t1/user-data/workspace");
    for (n, case) in cases.iter().enumerate() {
        let final_at = case["final_at"].as_u64();
        let max_turns = case["max_turns"].as_u64().unwrap();
        let first = server.requests().len();
        *current.lock().unwrap() = (final_at, first, n);
        // A run per case: the thread's earlier delegations belong to other runs.
        let req =
            AssemblyRequest { agent: AgentRun { run_id: Some(format!("case-{n}")), ..Default::default() }, ..lead() };
        let args = json!({"description": "count", "prompt": "do it", "subagent_type": format!("turns-{max_turns}")});
        let r = env.host.call(&req, "t1", "task", args, None).await.unwrap();
        let prefix = format!("run-{n}-");
        let runs = std::fs::read_dir(&workspace)
            .unwrap()
            .filter(|e| e.as_ref().unwrap().file_name().to_string_lossy().starts_with(&prefix))
            .count();
        let k = kwargs(&r);
        let got = json!({
            "model_calls": server.requests().len() - first,
            "tool_runs": runs,
            "status": k["subagent_status"],
            "result": k.get("subagent_result_brief").cloned().unwrap_or(Value::Null),
            "error": k.get("subagent_error").cloned().unwrap_or(Value::Null),
            "stop_reason": k.get("subagent_stop_reason").cloned().unwrap_or(Value::Null),
        });
        let want = json!({
            "model_calls": case["model_calls"],
            "tool_runs": case["tool_runs"],
            "status": case["status"],
            "result": case["result"],
            "error": case["error"],
            "stop_reason": case["stop_reason"],
        });
        assert_eq!(got, want, "final_at {final_at:?}, max_turns {max_turns}: {}", r.outcome.text_content());
    }
}

/// Hostile replies: a huge body, arguments that are not JSON, a tool the subagent was not
/// given (never run), an HTTP error. Each is contained; a normal task works after them.
#[tokio::test]
async fn hostile_model_replies() {
    let server = ChatServer::start(Arc::new(|i, req: &Value| {
        let prompt = prompt_of(req);
        let turn = req["messages"].as_array().map(|m| m.len()).unwrap_or(0);
        let _ = i;
        match (prompt.as_str(), turn) {
            ("huge", _) => Reply::Huge(9 << 20),
            ("error", _) => Reply::Raw(500, r#"{"error": {"message": "boom"}}"#.into()),
            ("bad-args", 2) => tool_calls(&[("read_file", "{not json")]),
            ("forbidden", 2) => tool_calls(&[
                ("write_file", r#"{"description": "w", "path": "/mnt/user-data/workspace/pwned.txt", "content": "x"}"#),
                ("task", r#"{"description": "d", "prompt": "p", "subagent_type": "reader"}"#),
            ]),
            (_, 2) => read_notes(),
            _ => answer("ok"),
        }
    }))
    .await;
    let env = open(&server.base_url, "");

    let r = task(&env, "reader", "huge").await;
    assert_eq!(r.outcome.text_content(), "Task failed. Error: the model response exceeds 8388608 bytes; refused");

    let r = task(&env, "reader", "error").await;
    assert!(
        r.outcome.text_content().starts_with("Task failed. Error: Error code: 500 - "),
        "{}",
        r.outcome.text_content()
    );

    let r = task(&env, "reader", "bad-args").await;
    assert_eq!(r.outcome.text_content(), "Task Succeeded. Result: ok");
    let reqs = server.requests();
    let reply = reqs.last().unwrap()["messages"].as_array().unwrap().last().unwrap().clone();
    assert!(
        reply["content"].as_str().unwrap().starts_with("Error: the arguments of read_file are not valid JSON"),
        "{reply}"
    );

    let r = task(&env, "reader", "forbidden").await;
    assert_eq!(r.outcome.text_content(), "Task Succeeded. Result: ok");
    let reqs = server.requests();
    let msgs = reqs.last().unwrap()["messages"].as_array().unwrap().clone();
    let replies: Vec<&str> =
        msgs.iter().filter(|m| m["role"] == "tool").map(|m| m["content"].as_str().unwrap()).collect();
    assert_eq!(
        replies,
        [
            "Error: write_file is not a valid tool, try one of [read_file].",
            "Error: task is not a valid tool, try one of [read_file]."
        ]
    );
    assert!(!env.dir.path().join("data/threads/t1/user-data/workspace/pwned.txt").exists(), "refused, not run");
    // The reader only ever sees read_file.
    let offered: Vec<&str> = reqs.last().unwrap()["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(offered, ["read_file"]);

    let r = task(&env, "reader", "notes").await;
    assert_eq!(r.outcome.text_content(), "Task Succeeded. Result: ok");
    let reqs = server.requests();
    let tool_reply = &reqs.last().unwrap()["messages"].as_array().unwrap().clone()[3];
    assert!(tool_reply["content"].as_str().unwrap().contains("the answer is 42"), "{tool_reply}");
}

/// SubagentLimitMiddleware: at most max_concurrent task calls per turn, max_total per run.
#[tokio::test]
async fn parallel_and_total_limits() {
    let server = ChatServer::scripted(vec![answer("done")]).await;
    let env = open(&server.base_url, "  max_total_per_run: 3\n");
    let call = |i: usize| {
        (
            "task".to_string(),
            json!({"description": "d", "prompt": "p", "subagent_type": "general-purpose"}),
            Some(format!("tc{i}")),
        )
    };
    let req = AssemblyRequest { agent: AgentRun { max_concurrent_subagents: Some(2), ..Default::default() }, ..lead() };
    let results = env.host.call_turn(&req, "t1", (0..3).map(call).collect()).await.unwrap();
    let texts: Vec<String> = results.iter().map(|r| r.outcome.text_content()).collect();
    assert_eq!(texts[0], "Task Succeeded. Result: done");
    assert_eq!(texts[1], "Task Succeeded. Result: done");
    assert!(texts[2].starts_with("Error: this task call was not run: at most 2 task calls"), "{}", texts[2]);
    assert_eq!(server.requests().len(), 2, "the dropped call never ran");

    // Two delegations are in the ledger; the run's total of 3 leaves one.
    let results = env.host.call_turn(&req, "t1", (3..5).map(call).collect()).await.unwrap();
    assert_eq!(results[0].outcome.text_content(), "Task Succeeded. Result: done");
    assert!(results[1].outcome.text_content().starts_with("Error: this task call was not run: at most"));
    let results = env.host.call_turn(&req, "t1", vec![call(9)]).await.unwrap();
    assert!(
        results[0].outcome.text_content().contains("[SUBAGENT LIMIT REACHED]"),
        "{}",
        results[0].outcome.text_content()
    );
    assert_eq!(server.requests().len(), 3);
    // Another thread is another run.
    let r = env.host.call(&lead(), "t2", "task", call(0).1, None).await.unwrap();
    assert_eq!(r.outcome.text_content(), "Task Succeeded. Result: done");

    // With run ids (DeerFlow's `runtime.context["run_id"]`), the total counts per run: the
    // delegations carry their run, and a new run of the same thread starts again from zero.
    let run =
        |id: &str| AssemblyRequest { agent: AgentRun { run_id: Some(id.into()), ..Default::default() }, ..lead() };
    let r = env.host.call_turn(&run("run-a"), "t3", (10..14).map(call).collect()).await.unwrap();
    let done = r.iter().filter(|r| r.outcome.text_content() == "Task Succeeded. Result: done").count();
    assert_eq!(done, 3, "{r:?}");
    let ledger = env.host.thread_state("t3").await.unwrap().delegations;
    assert!(ledger.len() == 3 && ledger.iter().all(|d| d["run_id"] == "run-a"), "{ledger:?}");
    let r = env.host.call(&run("run-a"), "t3", "task", call(20).1, Some("tc20".into())).await.unwrap();
    assert!(r.outcome.text_content().contains("[SUBAGENT LIMIT REACHED]"), "{}", r.outcome.text_content());
    let r = env.host.call(&run("run-b"), "t3", "task", call(21).1, Some("tc21".into())).await.unwrap();
    assert_eq!(r.outcome.text_content(), "Task Succeeded. Result: done");
    // Without a run id every delegation of the thread counts, as in DeerFlow.
    let r = env.host.call(&lead(), "t3", "task", call(22).1, Some("tc22".into())).await.unwrap();
    assert!(r.outcome.text_content().contains("[SUBAGENT LIMIT REACHED]"), "{}", r.outcome.text_content());
}

fn toolhost(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_toolhost"))
        .args(args)
        .arg("--config")
        .arg(dir.join("config.yaml"))
        .arg("--data-dir")
        .arg(dir.join("data"))
        .arg("--extensions")
        .arg(dir.join("extensions_config.json"))
        .env_remove("TOOLHOST_CONFIG")
        .output()
        .unwrap()
}

fn out(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

fn tool_names(o: &Output) -> Vec<String> {
    let v: Value = serde_json::from_slice(&o.stdout).unwrap_or_else(|_| panic!("{}", out(o)));
    v.as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap().to_string()).collect()
}

/// setup_agent creates `research`; `--agent research` then assembles its tools, update_agent
/// changes it and the next assembly follows; `toolhost agents` lists it.
// The CLI runs as a child process while this runtime serves the model: two workers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn setup_agent_then_agent_end_to_end() {
    let server = ChatServer::scripted(vec![read_notes(), answer("42 it is")]).await;
    let env = open(&server.base_url, "");
    let boot = AssemblyRequest {
        agent: AgentRun { bootstrap: true, agent_name: Some("research".into()), ..Default::default() },
        ..Default::default()
    };
    let r = env
        .host
        .call(
            &boot,
            "t1",
            "setup_agent",
            json!({"soul": "# Research\nFind facts.", "description": "Finds facts", "skills": []}),
            None,
        )
        .await
        .unwrap();
    assert_eq!(r.outcome.text_content(), "Agent 'research' created successfully!");
    let dir = env.dir.path();
    // Where DeerFlow's setup_agent writes it: the per-user layout of its no-auth user.
    assert!(dir.join("data/users/default/agents/research/config.yaml").is_file());
    assert!(!dir.join("data/agents/research").exists());
    // Another user has no such agent; the default user's is found without --user.
    let o = toolhost(dir, &["tools", "--agent", "research", "--user", "alice"]);
    assert!(!o.status.success() && out(&o).contains("agent 'research' not found"), "{}", out(&o));

    let o = toolhost(dir, &["call", "update_agent", r#"{"tool_groups": ["file:read"]}"#, "--agent", "research"]);
    assert!(o.status.success(), "{}", out(&o));
    assert!(out(&o).contains("Changed: tool_groups."), "{}", out(&o));

    let o = toolhost(dir, &["tools", "--agent", "research", "--json"]);
    let names = tool_names(&o);
    assert!(names.contains(&"read_file".to_string()) && names.contains(&"ls".to_string()));
    assert!(!names.contains(&"write_file".to_string()), "file:write is not among the agent's groups: {names:?}");
    assert!(names.contains(&"update_agent".to_string()) && names.contains(&"present_files".to_string()));
    assert!(!names.contains(&"view_image".to_string()), "the first model has no vision");

    let o = toolhost(dir, &["call", "update_agent", r#"{"model": "seeing"}"#, "--agent", "research"]);
    assert!(out(&o).contains("Changed: model."), "{}", out(&o));
    let names = tool_names(&toolhost(dir, &["tools", "--agent", "research", "--json"]));
    assert!(names.contains(&"view_image".to_string()), "the agent's model now sees: {names:?}");

    let o = toolhost(dir, &["agents"]);
    assert!(o.status.success(), "{}", out(&o));
    assert!(
        out(&o).contains("research")
            && out(&o).contains("groups: file:read")
            && out(&o).contains("skills: none")
            && out(&o).contains("model: seeing"),
        "{}",
        out(&o)
    );

    // A task under the agent: its subagent inherits the agent's groups, so write_file is gone.
    let o = toolhost(
        dir,
        &[
            "call",
            "task",
            r#"{"description": "d", "prompt": "notes?", "subagent_type": "general-purpose"}"#,
            "--agent",
            "research",
            "--subagents",
            "--thread",
            "t1",
            "--json",
        ],
    );
    let v: Value = serde_json::from_slice(&o.stdout).unwrap_or_else(|_| panic!("{}", out(&o)));
    assert_eq!(v["content"], "Task Succeeded. Result: 42 it is", "{}", out(&o));
    assert_eq!(v["additional_kwargs"]["subagent_model_name"], "seeing");
    let offered: Vec<String> = server.requests()[0]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap().to_string())
        .collect();
    assert!(offered.contains(&"read_file".to_string()) && !offered.contains(&"write_file".to_string()), "{offered:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_and_missing_agent_configs() {
    let env = open("http://127.0.0.1:9/v1", "");
    let dir: PathBuf = env.dir.path().to_path_buf();
    let agent_dir = dir.join("data/agents/broken");
    std::fs::create_dir_all(&agent_dir).unwrap();
    std::fs::write(agent_dir.join("config.yaml"), "name: broken\ntool_groups: file:read\n").unwrap();
    let o = toolhost(&dir, &["tools", "--agent", "broken"]);
    assert!(!o.status.success());
    let file = agent_dir.join("config.yaml");
    assert!(
        out(&o).contains(&format!("{}: invalid agent config: tool_groups must be a list of strings", file.display())),
        "{}",
        out(&o)
    );
    let o = toolhost(&dir, &["tools", "--agent", "ghost"]);
    assert!(!o.status.success());
    assert!(
        out(&o).contains("agent 'ghost' not found: neither ")
            && out(&o).contains("users/default/agents/ghost/config.yaml nor the legacy ")
            && out(&o).contains("/agents/ghost/config.yaml exists"),
        "{}",
        out(&o)
    );
    let o = toolhost(&dir, &["tools", "--agent", "../etc"]);
    assert!(out(&o).contains("Invalid agent name '../etc'. Must match pattern: ^[A-Za-z0-9-]+$"), "{}", out(&o));
    // `agents` lists the broken one with its error and fails.
    let o = toolhost(&dir, &["agents"]);
    assert!(!o.status.success() && out(&o).contains("tool_groups must be a list of strings"), "{}", out(&o));
    // A normal command still works.
    let o = toolhost(&dir, &["tools", "--json"]);
    assert!(o.status.success(), "{}", out(&o));
}

/// `acp_agents:` entries for the Python ACP peer (`scripts/install-acp-peers.sh`) in `modes`.
fn acp_agents(modes: &[&str]) -> String {
    let python = concat!(env!("CARGO_MANIFEST_DIR"), "/../.peers/acp-venv/bin/python");
    assert!(Path::new(python).exists(), "the Python ACP peer is missing; run scripts/install-acp-peers.sh");
    let agent = concat!(env!("CARGO_MANIFEST_DIR"), "/../crates/acp/tests/agents/py_agent.py");
    let mut out = "acp_agents:\n".to_string();
    for m in modes {
        out += &format!(
            "  {m}: {{command: '{python}', args: ['{agent}', {m}], description: test agent, timeout_seconds: 60}}\n"
        );
    }
    out
}

/// A subagent that is an ACP agent (`acp: echo`): the prompt, after the subagent's system prompt,
/// reaches a real ACP agent process through invoke_acp_agent; its answer is the task's result.
#[tokio::test]
async fn acp_subagent_answers_through_a_real_acp_agent() {
    let server = ChatServer::scripted(vec![answer("model answer")]).await;
    let env = open(&server.base_url, &acp_agents(&["echo", "fail"]));
    let r = task(&env, "helper", "hello agent").await;
    assert_eq!(
        r.outcome.text_content(),
        "Task Succeeded. Result: echo: Be brief.\n\nhello agent\nwrote /mnt/acp-workspace/echo.txt"
    );
    let k = kwargs(&r);
    assert_eq!(k["subagent_status"], "completed");
    let written = env.dir.path().join("data/threads/t1/acp-workspace/echo.txt");
    assert_eq!(std::fs::read_to_string(written).unwrap(), "Be brief.\n\nhello agent");
    assert!(server.requests().is_empty(), "an ACP subagent calls no model");

    let r = task(&env, "broken", "x").await;
    let text = r.outcome.text_content();
    assert!(text.starts_with("Task failed. Error: Error invoking ACP agent 'fail':"), "{text}");
    assert_eq!(kwargs(&r)["subagent_status"], "failed");
    // The ledger has both; a model subagent still works beside them.
    assert_eq!(env.host.thread_state("t1").await.unwrap().delegations.len(), 2);
    assert_eq!(task(&env, "general-purpose", "x").await.outcome.text_content(), "Task Succeeded. Result: model answer");
}

/// Without `acp_agents`, an ACP subagent fails with the pipeline's answer; nothing else runs.
#[tokio::test]
async fn acp_subagent_without_acp_agents_fails_clearly() {
    let server = ChatServer::scripted(vec![answer("done")]).await;
    let env = open(&server.base_url, "");
    let r = task(&env, "helper", "x").await;
    let text = r.outcome.text_content();
    assert!(text.starts_with("Task failed. Error: Error: invoke_acp_agent is not a valid tool"), "{text}");
    assert!(server.requests().is_empty());
}

/// A subagent's system prompt: its own prompt, then DeerFlow's `<skill_system>` section over the
/// enabled skills its allowlist keeps (`_build_initial_state`); none for `skills: []`. The
/// expected section is DeerFlow's own `_get_cached_skills_prompt_section` output for this skill
/// (prompt.py at f1f4af99).
#[tokio::test]
async fn a_subagent_prompt_carries_deerflows_skill_section() {
    let server = ChatServer::scripted(vec![answer("done")]).await;
    let env = open_with(
        &server.base_url,
        "    skill-less: {description: d, system_prompt: No skills., skills: []}\nskills:\n  path: skills\n  container_path: /mnt/skills\n",
        write_skill,
    );
    let section = "<skill_system>\nYou have access to skills that provide optimized workflows for specific tasks. Each skill contains best practices, frameworks, and references to additional resources.\n\n**Progressive Loading Pattern:**\n1. When a user query matches a skill's use case, immediately call `read_file` on the skill's main file using the path attribute provided in the skill tag below\n2. Read and understand the skill's workflow and instructions\n3. The skill file contains references to external resources under the same folder\n4. Load referenced resources only when needed during execution\n5. Follow the skill's instructions precisely\n\n**Explicit Slash Skill Activation:**\n- If the user starts a request with `/<skill-name>`, that skill was explicitly requested for the current turn.\n- Follow the activated skill before choosing a general workflow.\n- The runtime injects the activated skill content for explicit slash activations; do not call `read_file` for that SKILL.md again unless the injected skill references supporting resources you need.\n\n**Skills are located at:** /mnt/skills\n\n<available_skills>\n    <skill>\n        <name>demo-skill</name>\n        <description>A demo skill. [built-in]</description>\n        <location>/mnt/skills/public/demo-skill/SKILL.md</location>\n    </skill>\n</available_skills>\n\n\n</skill_system>";
    assert_eq!(task(&env, "reader", "x").await.outcome.text_content(), "Task Succeeded. Result: done");
    let system = server.requests()[0]["messages"][0]["content"].as_str().unwrap().to_string();
    assert_eq!(system, format!("You read files.\n\n{section}"));
    assert_eq!(task(&env, "skill-less", "x").await.outcome.text_content(), "Task Succeeded. Result: done");
    assert_eq!(server.requests()[1]["messages"][0]["content"], "No skills.");
}

fn write_skill(root: &Path) {
    let skill = root.join("skills/public/demo-skill");
    std::fs::create_dir_all(&skill).unwrap();
    std::fs::write(
        skill.join("SKILL.md"),
        "---\nname: demo-skill\ndescription: A demo skill.\nallowed-tools: [write_file]\n---\n# Demo\nOnly write files.\n",
    )
    .unwrap();
}

/// A custom agent's `skills` decide whose `allowed-tools` count: with the skill active, `null`
/// lets its write_file through, `[]` leaves only the framework tools, a list naming it keeps it.
#[tokio::test]
async fn agent_skills_decide_the_skill_policy() {
    let env =
        open_with("http://127.0.0.1:9/v1", "skills:\n  path: skills\n  container_path: /mnt/skills\n", write_skill);
    let host = &env.host;
    let r = host
        .thread("t1")
        .call(toolhost::ToolCall::new(
            "read_file",
            json!({"description": "load skill", "path": "/mnt/skills/public/demo-skill/SKILL.md"}),
        ))
        .await
        .unwrap();
    assert!(r.outcome.text_content().contains("Only write files."), "{}", r.outcome.text_content());
    let names = |tools: Vec<toolhost::ToolSpec>| tools.into_iter().map(|t| t.name).collect::<Vec<_>>();
    let setup = |name: &str, skills: Value| {
        let dir = env.dir.path().join("data/agents").join(name);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("config.yaml"), format!("name: {name}\nskills: {skills}\n")).unwrap();
    };
    setup("all-skills", Value::Null);
    setup("no-skills", json!([]));
    setup("demo-only", json!(["demo-skill"]));

    let all = names(host.thread("t1").with_agent("all-skills").unwrap().tools().await.unwrap());
    assert!(all.contains(&"write_file".to_string()) && !all.contains(&"ls".to_string()), "{all:?}");
    let none = names(host.thread("t1").with_agent("no-skills").unwrap().tools().await.unwrap());
    assert!(!none.contains(&"write_file".to_string()) && !none.contains(&"ls".to_string()), "{none:?}");
    assert!(none.contains(&"read_file".to_string()), "framework tools stay: {none:?}");
    let demo = names(host.thread("t1").with_agent("demo-only").unwrap().tools().await.unwrap());
    assert_eq!(demo, all);
    // The policy holds for calls too, not only for the listing.
    let write_as = |agent: &'static str| async move {
        let write = json!({"description": "w", "path": "/mnt/user-data/workspace/x.txt", "content": "x"});
        host.thread("t1").with_agent(agent).unwrap().call(toolhost::ToolCall::new("write_file", write)).await.unwrap()
    };
    let r = write_as("no-skills").await;
    assert!(r.outcome.is_error(), "{}", r.outcome.text_content());
    assert!(!env.dir.path().join("data/threads/t1/user-data/workspace/x.txt").exists());
    let r = write_as("demo-only").await;
    assert!(!r.outcome.is_error(), "{}", r.outcome.text_content());
}

/// `toolhost serve` over stdio, driven line by line.
struct Serve {
    child: std::process::Child,
    stdin: std::process::ChildStdin,
    lines: std::sync::mpsc::Receiver<Value>,
}

impl Serve {
    fn start(dir: &Path) -> Self {
        use std::io::BufRead as _;
        let mut child = Command::new(env!("CARGO_BIN_EXE_toolhost"))
            .args(["serve", "--subagents", "--thread", "t1"])
            .arg("--config")
            .arg(dir.join("config.yaml"))
            .arg("--data-dir")
            .arg(dir.join("data"))
            .arg("--extensions")
            .arg(dir.join("extensions_config.json"))
            .env_remove("TOOLHOST_CONFIG")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stdout).lines() {
                let Ok(line) = line else { return };
                let Ok(v) = serde_json::from_str(&line) else { return };
                if tx.send(v).is_err() {
                    return;
                }
            }
        });
        let mut me = Serve { child, stdin, lines };
        me.send(json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}}));
        assert_eq!(me.next()["id"], 0);
        me.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        me
    }

    fn send(&mut self, v: Value) {
        use std::io::Write as _;
        writeln!(self.stdin, "{v}").unwrap();
        self.stdin.flush().unwrap();
    }

    fn next(&mut self) -> Value {
        self.lines.recv_timeout(Duration::from_secs(120)).expect("the server answered nothing")
    }

    fn call_task(&mut self, id: u64, prompt: &str) {
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
            "name": "task", "_meta": {"progressToken": format!("p{id}")},
            "arguments": {"description": "look it up", "prompt": prompt, "subagent_type": "general-purpose"}}}));
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Under `serve`, `task` reports progress (started, each subagent message, finished) to a client
/// that gave a progress token, and a client's cancellation stops the subagent: its model request
/// is dropped and no result is sent. A normal task works afterwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_reports_task_progress_and_cancellation_stops_the_subagent() {
    let server = ChatServer::start(Arc::new(|_, req: &Value| {
        let prompt = prompt_of(req);
        let turn = req["messages"].as_array().map(|m| m.len()).unwrap_or(0);
        match (prompt.as_str(), turn) {
            ("hang", _) => Reply::Hang,
            (_, 2) => read_notes(),
            _ => answer("The notes say 42."),
        }
    }))
    .await;
    let env = open(&server.base_url, "");
    let dir = env.dir.path().to_path_buf();
    let mut serve = tokio::task::spawn_blocking(move || Serve::start(&dir)).await.unwrap();

    let (mut serve, progress, result) = tokio::task::spawn_blocking(move || {
        serve.call_task(1, "notes?");
        let mut progress = Vec::new();
        loop {
            let m = serve.next();
            if m["method"] == "notifications/progress" {
                progress.push(m["params"].clone());
            } else if m["id"] == 1 {
                return (serve, progress, m);
            }
        }
    })
    .await
    .unwrap();
    assert_eq!(result["result"]["content"][0]["text"], "Task Succeeded. Result: The notes say 42.", "{result}");
    assert_eq!(result["result"]["_meta"]["subagent_status"], "completed", "{result}");
    let messages: Vec<&str> = progress.iter().map(|p| p["message"].as_str().unwrap()).collect();
    assert_eq!(
        messages,
        [
            "subagent general-purpose started: look it up",
            "subagent calls read_file",
            "subagent: The notes say 42.",
            "subagent general-purpose completed"
        ]
    );
    assert!(progress.iter().all(|p| p["progressToken"] == "p1"));
    let values: Vec<f64> = progress.iter().map(|p| p["progress"].as_f64().unwrap()).collect();
    assert!(values.windows(2).all(|w| w[0] < w[1]), "progress increases: {values:?}");

    // A hanging model: cancel once the subagent has started.
    let hung_up = server.hung_up.clone();
    let mut serve = tokio::task::spawn_blocking(move || {
        serve.call_task(2, "hang");
        let m = serve.next();
        assert_eq!(m["params"]["message"], "subagent general-purpose started: look it up", "{m}");
        // The model request is under way once the server has it.
        serve
    })
    .await
    .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while server.requests().iter().filter(|r| prompt_of(r) == "hang").count() == 0 {
        assert!(Instant::now() < deadline, "the hanging request never arrived");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    serve.send(
        json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 2, "reason": "user"}}),
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    while hung_up.load(std::sync::atomic::Ordering::SeqCst) == 0 {
        assert!(Instant::now() < deadline, "the subagent's model request was not dropped");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // No result for the cancelled request; the next call is answered normally.
    let (next, _serve) = tokio::task::spawn_blocking(move || {
        serve.send(json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list"}));
        (serve.next(), serve)
    })
    .await
    .unwrap();
    assert_eq!(next["id"], 3, "the cancelled call must not answer: {next}");
    let r = task(&env, "general-purpose", "again").await;
    assert_eq!(r.outcome.text_content(), "Task Succeeded. Result: The notes say 42.");
}

/// tool_search inside a subagent promotes into the subagent's own state: the promoted MCP tool
/// is offered to the subagent's next model call, while the parent thread promotes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subagent_promotions_stay_in_its_own_state() {
    let server = ChatServer::start(Arc::new(|_, req: &Value| {
        let turn = req["messages"].as_array().map(|m| m.len()).unwrap_or(0);
        if turn == 2 {
            tool_calls(&[("tool_search", r#"{"query": "select:time_get_current_time"}"#)])
        } else {
            answer("found it")
        }
    }))
    .await;
    let time = concat!(env!("CARGO_MANIFEST_DIR"), "/../.peers/venv/bin/mcp-server-time");
    assert!(Path::new(time).exists(), "run scripts/install-peers.sh first");
    let env = open_with(&server.base_url, "tool_search:\n  enabled: true\n", |dir| {
        let ext = json!({"mcpServers": {"time": {"type": "stdio", "command": time, "args": ["--local-timezone", "UTC"], "session_init_timeout": 60}}});
        std::fs::write(dir.join("extensions_config.json"), ext.to_string()).unwrap();
    });
    let names = |tools: Vec<toolhost::ToolSpec>| tools.into_iter().map(|t| t.name).collect::<Vec<_>>();
    let before = names(env.host.model_tools(&lead(), "t1").await.unwrap());
    assert!(
        before.contains(&"tool_search".to_string()) && !before.contains(&"time_get_current_time".to_string()),
        "{before:?}"
    );

    let r = task(&env, "general-purpose", "what time is it?").await;
    assert_eq!(r.outcome.text_content(), "Task Succeeded. Result: found it");
    let offered = |req: &Value| -> Vec<String> {
        req["tools"].as_array().unwrap().iter().map(|t| t["function"]["name"].as_str().unwrap().to_string()).collect()
    };
    let reqs = server.requests();
    assert!(!offered(&reqs[0]).contains(&"time_get_current_time".to_string()), "deferred at first");
    assert!(offered(&reqs[1]).contains(&"time_get_current_time".to_string()), "promoted for the subagent");
    let promoted = env.host.thread_state("t1").await.unwrap().promoted;
    let names_promoted = promoted.as_ref().and_then(|p| p.get("names")).and_then(Value::as_array).map_or(0, Vec::len);
    assert_eq!(names_promoted, 0, "parent promoted: {promoted:?}");
    let after = names(env.host.model_tools(&lead(), "t1").await.unwrap());
    assert!(!after.contains(&"time_get_current_time".to_string()), "the parent still sees it deferred: {after:?}");
}

/// Over MCP the total cap counts per run, as DeerFlow's ledger does with its `run_id`: a request
/// names its run (`_meta["toolhost/run"]`), a request naming none belongs to its session's run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_caps_delegations_per_named_run() {
    let server = ChatServer::scripted(vec![answer("done")]).await;
    let env = open(&server.base_url, "  max_total_per_run: 1\n");
    let dir = env.dir.path().to_path_buf();
    let texts = tokio::task::spawn_blocking(move || {
        let mut serve = Serve::start(&dir);
        let mut texts = Vec::new();
        let runs: [Option<&str>; 5] = [Some("run-a"), Some("run-a"), Some("run-b"), None, None];
        for (i, run) in runs.into_iter().enumerate() {
            let mut meta = json!({});
            if let Some(run) = run {
                meta["toolhost/run"] = json!(run);
            }
            let id = 100 + i as u64;
            serve.send(json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
                "name": "task", "_meta": meta,
                "arguments": {"description": "d", "prompt": "p", "subagent_type": "general-purpose"}}}));
            let reply = loop {
                let m = serve.next();
                if m["id"] == id {
                    break m;
                }
            };
            texts.push(reply["result"]["content"][0]["text"].as_str().unwrap_or_default().to_string());
        }
        // A run id that is not a string is refused, naming the key.
        serve.send(json!({"jsonrpc": "2.0", "id": 200, "method": "tools/call", "params": {
            "name": "task", "_meta": {"toolhost/run": 5},
            "arguments": {"description": "d", "prompt": "p", "subagent_type": "general-purpose"}}}));
        let refused = loop {
            let m = serve.next();
            if m["id"] == 200 {
                break m;
            }
        };
        (texts, refused)
    })
    .await
    .unwrap();
    let (texts, refused) = texts;
    let done = "Task Succeeded. Result: done";
    assert_eq!(texts[0], done);
    assert!(texts[1].contains("[SUBAGENT LIMIT REACHED]"), "{}", texts[1]);
    assert_eq!(texts[2], done, "another run starts from zero");
    // The session's own run: its first delegation runs, the second is over the cap of one.
    assert_eq!(texts[3], done);
    assert!(texts[4].contains("[SUBAGENT LIMIT REACHED]"), "{}", texts[4]);
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    assert!(refused["error"]["message"].as_str().unwrap().contains("toolhost/run"), "{refused}");
    // The serve process keeps the ledger in the thread's state file.
    let state: Value = serde_json::from_slice(
        &std::fs::read(env.dir.path().join("data/threads/t1/host/state.json")).expect("serve's state file"),
    )
    .unwrap();
    let ledger = state["delegations"].as_array().cloned().unwrap_or_default();
    let runs: Vec<&str> = ledger.iter().map(|d| d["run_id"].as_str().unwrap_or("")).collect();
    assert_eq!(runs.len(), 3, "{ledger:?}");
    assert_eq!(runs[..2], ["run-a", "run-b"]);
    assert!(runs[2].starts_with("run-"), "{runs:?}");
}
