//! `invoke_acp_agent` against real ACP agent subprocesses: `tests/agents/py_agent.py` on the
//! Python ACP SDK (PyPI `agent-client-protocol`, installed by `scripts/install-acp-peers.sh`),
//! in well-behaved and faulty modes.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use indexmap::IndexMap;
use serde_json::{json, Value};
use toolhost_acp::{AcpAgentConfig, AcpMcpServerConfig, Environment, InvokeAcpAgentTool};
use toolhost_core::{CallContext, ThreadFs, ThreadState, Tool, ToolOutcome};

fn python() -> PathBuf {
    let py = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../.peers/acp-venv/bin/python"));
    assert!(py.exists(), "the Python ACP peer is missing ({}); run scripts/install-acp-peers.sh first", py.display());
    py
}

fn agent(mode: &str) -> AcpAgentConfig {
    let mut cfg = AcpAgentConfig::new(python().to_string_lossy(), format!("test agent in {mode} mode"));
    cfg.args = vec![concat!(env!("CARGO_MANIFEST_DIR"), "/tests/agents/py_agent.py").to_string(), mode.to_string()];
    cfg.timeout_seconds = 60;
    cfg
}

/// The tool for `agents`, seeing this process's environment (as under the CLI).
fn tool(agents: Vec<(&str, AcpAgentConfig)>) -> InvokeAcpAgentTool {
    InvokeAcpAgentTool::new(agents.into_iter().map(|(n, c)| (n.to_string(), c)).collect::<IndexMap<_, _>>())
        .with_env(Environment::from_process())
}

struct Thread {
    _data: tempfile::TempDir,
    ctx: CallContext,
}

fn thread(id: &str) -> Thread {
    let data = tempfile::tempdir().unwrap();
    let fs = ThreadFs::open(data.path(), id).unwrap();
    let ctx = CallContext::new(Arc::new(fs), "call-1", Arc::new(ThreadState::default()));
    Thread { _data: data, ctx }
}

async fn invoke(tool: &InvokeAcpAgentTool, t: &Thread, agent: &str, prompt: &str) -> ToolOutcome {
    tool.call(&t.ctx, json!({"agent": agent, "prompt": prompt})).await
}

#[tokio::test]
async fn echo_agent_answers_and_writes_into_the_threads_acp_workspace() {
    let tool = tool(vec![("echo", agent("echo"))]);
    let (a, b) = (thread("thread-a"), thread("thread-b"));
    // The workspace does not exist yet: the tool creates it.
    assert!(!a.ctx.paths().acp_workspace().exists());
    let out = invoke(&tool, &a, "echo", "hello agent").await;
    assert!(!out.is_error(), "{out:?}");
    // Thought chunks are not part of the answer; the agent's absolute path comes back masked.
    assert_eq!(out.text_content(), "echo: hello agent\nwrote /mnt/acp-workspace/echo.txt");
    let written = a.ctx.paths().acp_workspace().join("echo.txt");
    assert_eq!(std::fs::read_to_string(&written).unwrap(), "hello agent");

    let out = invoke(&tool, &b, "echo", "second thread").await;
    assert_eq!(out.text_content(), "echo: second thread\nwrote /mnt/acp-workspace/echo.txt");
    assert_eq!(std::fs::read_to_string(b.ctx.paths().acp_workspace().join("echo.txt")).unwrap(), "second thread");
    assert_eq!(std::fs::read_to_string(&written).unwrap(), "hello agent", "threads must not share a workspace");
}

#[tokio::test]
async fn handshake_env_model_and_mcp_servers_reach_the_agent() {
    let mut cfg = agent("handshake");
    cfg.env.insert("TOKEN".into(), "$TOOLHOST_ACP_TEST_TOKEN".into());
    cfg.env.insert("MISSING".into(), "$TOOLHOST_ACP_TEST_UNSET_VAR".into());
    cfg.env.insert("LITERAL".into(), "plain".into());
    cfg.model = Some("model-x".into());
    let servers = vec![
        AcpMcpServerConfig { name: "files".into(), command: Some("npx".into()), ..Default::default() },
        AcpMcpServerConfig {
            name: "web".into(),
            transport: Some("http".into()),
            url: Some("http://127.0.0.1:9/mcp".into()),
            ..Default::default()
        },
    ];
    // The host environment the agent's `$VAR`s and inherited names come from: this process's
    // (HOME, PATH) plus the test's, handed over here and never with `set_var`.
    let host_env = Environment::from_process()
        .with("TOOLHOST_ACP_TEST_TOKEN", "tok-123")
        .with("TOOLHOST_ACP_TEST_SECRET", "must-not-leak");
    let tool = tool(vec![("hs", cfg.clone())]).with_mcp_servers(servers).with_env(host_env.clone());
    assert_eq!(
        tool.unset_variables(),
        ["acp_agents.hs.env: environment variable $TOOLHOST_ACP_TEST_UNSET_VAR is not set; using \"\""]
    );
    let t = thread("t1");
    let out = invoke(&tool, &t, "hs", "x").await;
    assert_eq!(
        out.text_content(),
        "protocol=1 client=deerflow/DeerFlow/0.1.0 session_cwd_is_process_cwd=True mcp=[files,web] model=model-x \
         env_TOKEN='tok-123' env_MISSING='' env_LITERAL='plain' inherits_SECRET=False"
    );

    // One invalid MCP server drops them all (DeerFlow), the call still succeeds.
    let bad = vec![
        AcpMcpServerConfig { name: "files".into(), command: Some("npx".into()), ..Default::default() },
        AcpMcpServerConfig { name: "broken".into(), transport: Some("sse".into()), ..Default::default() },
    ];
    cfg.model = None;
    let tool = self::tool(vec![("hs", cfg)]).with_mcp_servers(bad).with_env(host_env);
    let out = invoke(&tool, &t, "hs", "x").await;
    let text = out.text_content();
    assert!(text.contains(" mcp=[] model=None "), "{text}");
}

#[tokio::test]
async fn permission_requests_are_approved_only_with_auto_approve() {
    let mut approving = agent("permission");
    approving.auto_approve_permissions = true;
    let tool = tool(vec![("yes", approving), ("no", agent("permission"))]);

    let t = thread("perm-yes");
    let out = invoke(&tool, &t, "yes", "granted").await;
    assert_eq!(out.text_content(), "permission selected once", "allow_once is preferred over allow_always");
    assert_eq!(std::fs::read_to_string(t.ctx.paths().acp_workspace().join("permitted.txt")).unwrap(), "granted");

    let t = thread("perm-no");
    let out = invoke(&tool, &t, "no", "refused").await;
    assert_eq!(out.text_content(), "permission cancelled");
    assert!(!t.ctx.paths().acp_workspace().join("permitted.txt").exists());
}

fn gone(pid: i32) -> bool {
    // Dead or a zombie waiting for its new parent: either way it no longer runs.
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat.rsplit(')').next().map(|rest| rest.trim_start().starts_with('Z')).unwrap_or(false),
    }
}

#[tokio::test]
async fn a_hung_agent_times_out_and_its_process_group_is_killed() {
    let mut cfg = agent("hang");
    // Long enough for the Python agent to start and reach its prompt on a loaded machine.
    cfg.timeout_seconds = 8;
    let tool = tool(vec![("slow", cfg)]);
    let t = thread("hang");
    let started = Instant::now();
    let out = invoke(&tool, &t, "slow", "wait").await;
    assert!(out.is_error());
    assert_eq!(
        out.text_content(),
        "Error: ACP agent 'slow' timed out after 8 seconds without responding. The agent subprocess has been \
         terminated. If this agent handles long-running tasks, increase acp_agents.slow.timeout_seconds in config.yaml."
    );
    // The timeout is 8 s and the agent sleeps an hour: 20 s is room for a loaded machine to kill
    // the group, and far below what an unenforced timeout would take.
    assert!(started.elapsed() < Duration::from_secs(20), "took {:?}", started.elapsed());
    let pids = std::fs::read_to_string(t.ctx.paths().acp_workspace().join("hang.pid")).unwrap();
    let pids: Vec<i32> = pids.split_whitespace().map(|p| p.parse().unwrap()).collect();
    let deadline = Instant::now() + Duration::from_secs(5);
    while !pids.iter().all(|p| gone(*p)) && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    for pid in pids {
        assert!(gone(pid), "process {pid} of the timed-out agent still runs");
    }
}

#[tokio::test]
async fn unknown_agent_lists_the_configured_ones() {
    let tool = tool(vec![("echo", agent("echo")), ("other", agent("echo"))]);
    let t = thread("t1");
    let out = invoke(&tool, &t, "nope", "x").await;
    assert!(out.is_error());
    assert_eq!(out.text_content(), "Error: Unknown agent 'nope'. Available: echo, other");
    assert!(!t.ctx.paths().acp_workspace().exists(), "nothing is spawned or created for an unknown agent");
}

#[tokio::test]
async fn a_missing_command_gets_deerflows_hint() {
    let tool = tool(vec![("ghost", AcpAgentConfig::new("toolhost-no-such-acp-agent", "missing"))]);
    let out = invoke(&tool, &thread("t1"), "ghost", "x").await;
    assert_eq!(
        out.text_content(),
        "Error invoking ACP agent 'ghost': Command 'toolhost-no-such-acp-agent' was not found on PATH. Install the \
         agent binary or update `acp_agents.ghost.command` in config.yaml."
    );
}

#[tokio::test]
async fn an_agent_that_exits_at_once_reports_its_status_and_stderr() {
    let tool = tool(vec![("crash", agent("exit"))]);
    let started = Instant::now();
    let out = invoke(&tool, &thread("t1"), "crash", "x").await;
    let text = out.text_content();
    assert!(out.is_error());
    assert!(text.starts_with("Error invoking ACP agent 'crash': "), "{text}");
    assert_eq!(
        text,
        "Error invoking ACP agent 'crash': Incoming transport closed (agent process exited: exit status: 3; stderr: \
         fatal: no credentials configured)"
    );
    // `agent()` sets a 60 s timeout: 15 s is room for Python's start-up on a loaded machine and
    // well below it, so passing proves the exit was noticed rather than waited out.
    assert!(started.elapsed() < Duration::from_secs(15), "a dead agent must not wait for the timeout");
}

#[tokio::test]
async fn an_agent_printing_garbage_is_bounded_by_the_timeout() {
    // Non-JSON-RPC lines are skipped by the SDK, so the handshake never completes: the deadline
    // (which covers initialize too) ends the call.
    let mut cfg = agent("garbage");
    cfg.timeout_seconds = 2;
    let tool = tool(vec![("junk", cfg)]);
    let out = invoke(&tool, &thread("t1"), "junk", "x").await;
    assert!(out.is_error());
    assert!(
        out.text_content().starts_with("Error: ACP agent 'junk' timed out after 2 seconds"),
        "{}",
        out.text_content()
    );
}

#[tokio::test]
async fn a_failing_prompt_and_a_silent_agent() {
    let tool = tool(vec![("fail", agent("fail")), ("quiet", agent("silent"))]);
    let t = thread("t1");
    let out = invoke(&tool, &t, "fail", "x").await;
    assert!(out.is_error());
    assert_eq!(out.text_content(), "Error invoking ACP agent 'fail': Internal error: prompt exploded");
    let out = invoke(&tool, &t, "quiet", "x").await;
    assert!(!out.is_error());
    assert_eq!(out.text_content(), "(no response)");
}

#[tokio::test]
async fn bad_arguments_name_the_argument() {
    let tool = tool(vec![("echo", agent("echo"))]);
    let t = thread("t1");
    for (args, want) in [
        (json!({"prompt": "x"}), "agent is required"),
        (json!({"agent": "echo"}), "prompt is required"),
        (json!({"agent": 1, "prompt": "x"}), "agent must be a string"),
        (Value::Null, "agent is required"),
    ] {
        let out = tool.call(&t.ctx, args).await;
        assert!(out.is_error());
        assert_eq!(out.text_content(), format!("Error: Invalid arguments for invoke_acp_agent: {want}"));
    }
}
