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
        "models:\n  - {{name: scripted, use: 'langchain_openai:ChatOpenAI', model: scripted-1, base_url: '{base_url}', api_key: test-key}}\n  - {{name: seeing, use: 'langchain_openai:ChatOpenAI', model: v, base_url: '{base_url}', supports_vision: true}}\ntools:\n  - {{name: read_file, group: 'file:read', use: 'deerflow.sandbox.tools:read_file_tool'}}\n  - {{name: ls, group: 'file:read', use: 'deerflow.sandbox.tools:ls_tool'}}\n  - {{name: write_file, group: 'file:write', use: 'deerflow.sandbox.tools:write_file_tool'}}\nsubagents:\n  custom_agents:\n    reader: {{description: Reads files, system_prompt: You read files., tools: [read_file]}}\n    slow: {{description: Slow, system_prompt: p, timeout_seconds: 1}}\n{extra}"
    )
}

fn open(base_url: &str, extra: &str) -> Env {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.yaml");
    std::fs::write(&config, config_yaml(base_url, extra)).unwrap();
    std::fs::write(dir.path().join("extensions_config.json"), r#"{"mcpServers": {}}"#).unwrap();
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
    assert_eq!(reqs[0]["messages"][1], json!({"role": "user", "content": "What do the notes say?"}));
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
        "Task failed. Error: Unknown subagent type 'nope'. Available: general-purpose, reader, slow"
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
    let env = open(&server.base_url, "  agents:\n    general-purpose: {max_turns: 6}\n");
    let r = task(&env, "general-purpose", "x").await;
    assert_eq!(r.outcome.text_content(), "Task failed (capped: turn budget). Error: Reached max_turns=6");
    assert_eq!(kwargs(&r)["subagent_stop_reason"], "turn_capped");
    assert_eq!(server.requests().len(), 3, "model, tools, model, tools, model, tools: six steps");
}

/// Hostile replies: a huge body, arguments that are not JSON, a tool the subagent was not
/// given (never run), an HTTP error. Each is contained; a normal task works after them.
#[tokio::test]
async fn hostile_model_replies() {
    let server = ChatServer::start(Arc::new(|i, req: &Value| {
        let prompt = req["messages"][1]["content"].as_str().unwrap_or("").to_string();
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
        out(&o).contains("agent 'ghost' not found: ") && out(&o).contains("ghost/config.yaml does not exist"),
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
