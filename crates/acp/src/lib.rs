//! DeerFlow's `invoke_acp_agent` tool: hands a prompt to a configured Agent Client Protocol
//! (Zed ACP) agent subprocess running in the thread's acp-workspace and returns its answer.
//! Owns the agent config, the tool's spec and strings, and the call; the protocol exchange is in
//! `session`, the subprocess in `process`, MCP server forwarding in `mcp_servers`.

mod mcp_servers;
mod process;
mod session;

use std::path::PathBuf;
use std::time::Duration;

use async_trait::async_trait;
use indexmap::IndexMap;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
pub use toolhost_core::Environment;
use toolhost_core::{CallContext, Tool, ToolOutcome, ToolSource, ToolSpec};

pub use mcp_servers::{AcpMcpServerConfig, McpServerError};

use process::AgentProcess;
use toolhost_confine::process::{Launch, LaunchPolicy, LaunchRequest, ProcessKind};

/// The tool's name, as DeerFlow registers it.
pub const TOOL_NAME: &str = "invoke_acp_agent";

/// DeerFlow's default `acp_agents.<name>.timeout_seconds`.
pub const DEFAULT_TIMEOUT_SECONDS: u64 = 1800;

fn default_timeout() -> u64 {
    DEFAULT_TIMEOUT_SECONDS
}

/// One `acp_agents.<name>` entry of config.yaml (DeerFlow's `ACPAgentConfig`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AcpAgentConfig {
    /// The program to launch (looked up on PATH).
    pub command: String,
    #[serde(default)]
    pub args: Vec<String>,
    /// Extra environment for the agent. A value starting with `$` names a host variable and is
    /// resolved at call time (unset → `""`); pass values unexpanded.
    #[serde(default)]
    pub env: IndexMap<String, String>,
    /// Shown to the model in the tool description.
    pub description: String,
    /// Model hint, sent in `session/new` `_meta.model` when non-empty.
    #[serde(default)]
    pub model: Option<String>,
    /// Approve the agent's permission requests (`allow_once` preferred); otherwise all are
    /// answered `cancelled`.
    #[serde(default)]
    pub auto_approve_permissions: bool,
    /// Per invocation; on expiry the agent's process group is killed.
    #[serde(default = "default_timeout")]
    pub timeout_seconds: u64,
}

impl AcpAgentConfig {
    /// An agent with DeerFlow's defaults for everything but command and description.
    pub fn new(command: impl Into<String>, description: impl Into<String>) -> Self {
        Self {
            command: command.into(),
            args: Vec::new(),
            env: IndexMap::new(),
            description: description.into(),
            model: None,
            auto_approve_permissions: false,
            timeout_seconds: DEFAULT_TIMEOUT_SECONDS,
        }
    }
}

/// The `invoke_acp_agent` tool over a fixed agent map (order kept for the description and the
/// "Available:" list).
pub struct InvokeAcpAgentTool {
    spec: ToolSpec,
    agents: IndexMap<String, AcpAgentConfig>,
    mcp_servers: Vec<AcpMcpServerConfig>,
    /// How agents are started; `None`: as plain subprocesses (the crate on its own — the host
    /// always sets one).
    launch: Option<LaunchPolicy>,
    /// The host environment: agents' `$VAR`s, what they inherit and a grant passes through
    /// (default: empty; the tool reads no process environment).
    env: Environment,
}

impl InvokeAcpAgentTool {
    pub fn new(agents: IndexMap<String, AcpAgentConfig>) -> Self {
        let spec = ToolSpec {
            name: TOOL_NAME.to_string(),
            description: description(&agents),
            parameters: parameters(),
            group: None,
            source: ToolSource::Acp,
        };
        Self { spec, agents, mcp_servers: Vec::new(), launch: None, env: Environment::default() }
    }

    /// Take variables from `env` (the host's [`Environment`]).
    pub fn with_env(mut self, env: Environment) -> Self {
        self.env = env;
        self
    }

    /// One warning per `$VAR` in an agent's `env` that the environment does not set (it becomes
    /// `""`), worded as the config's.
    pub fn unset_variables(&self) -> Vec<String> {
        let mut warnings = Vec::new();
        for (name, agent) in &self.agents {
            process::resolve_env(&agent.env, &self.env, &mut |var| {
                warnings.push(format!("acp_agents.{name}.env: environment variable ${var} is not set; using \"\""))
            });
        }
        warnings
    }

    /// Start agents as `policy` decides (confined, or refused with the reason).
    pub fn with_launch_policy(mut self, policy: LaunchPolicy) -> Self {
        self.launch = Some(policy);
        self
    }

    /// The host's enabled MCP servers, forwarded to every agent's `session/new` as DeerFlow does.
    /// Checked at call time: one invalid entry → none are sent, with a warning.
    pub fn with_mcp_servers(mut self, servers: Vec<AcpMcpServerConfig>) -> Self {
        self.mcp_servers = servers;
        self
    }
}

/// DeerFlow's generated description: the agent list between a fixed head and tail.
pub fn description(agents: &IndexMap<String, AcpAgentConfig>) -> String {
    let lines: Vec<String> = agents.iter().map(|(name, cfg)| format!("- {name}: {}", cfg.description)).collect();
    format!(
        "Invoke an external ACP-compatible agent and return its final response.\n\nAvailable agents:\n{}\n\n\
         IMPORTANT: ACP agents operate in their own independent workspace. \
         Do NOT include /mnt/user-data paths in the prompt. \
         Give the agent a self-contained task description — it will produce results in its own workspace. \
         After the agent completes, its output files are accessible at /mnt/acp-workspace/ (read-only).",
        lines.join("\n")
    )
}

/// The argument schema as the model sees it (pydantic's, titles stripped like the other tools).
fn parameters() -> Value {
    json!({
        "properties": {
            "agent": {"description": "Name of the ACP agent to invoke", "type": "string"},
            "prompt": {"description": "The concise task prompt to send to the agent", "type": "string"}
        },
        "required": ["agent", "prompt"],
        "type": "object"
    })
}

fn invalid_args(detail: &str) -> ToolOutcome {
    ToolOutcome::error(format!("Error: Invalid arguments for {TOOL_NAME}: {detail}"))
}

/// A required string argument, or what is wrong with it.
fn string_arg(args: &Value, key: &str) -> Result<String, String> {
    match args.get(key) {
        Some(Value::String(s)) => Ok(s.clone()),
        Some(_) => Err(format!("{key} must be a string")),
        None => Err(format!("{key} is required")),
    }
}

/// DeerFlow's `_format_invocation_error` for a command that could not be found.
fn not_found_error(agent: &str, cmd: &str, path: Option<&str>) -> String {
    let message = format!("Error invoking ACP agent '{agent}': Command '{cmd}' was not found on PATH.");
    if cmd == "codex-acp" && process::on_path("codex", path) {
        return format!(
            "{message} The installed `codex` CLI does not speak ACP directly. Install a Codex ACP adapter (for \
             example `npx @zed-industries/codex-acp`) or update `acp_agents.codex.command` and `args` in config.yaml."
        );
    }
    if agent == "mcode" {
        return format!(
            "{message} Install it with `npm install --global @minimax-ai/code`, run `mcode login`, and restart \
             DeerFlow so it inherits the updated PATH. If the Gateway runs in Docker, ensure `mcode` is installed and \
             authenticated inside the Gateway container/image."
        );
    }
    format!("{message} Install the agent binary or update `acp_agents.{agent}.command` in config.yaml.")
}

/// How long a failed exchange waits for the agent's exit status (a crash closes stdout a moment
/// before the process is reaped).
const EXIT_STATUS_WAIT: Duration = Duration::from_millis(500);

/// The text after `Error invoking ACP agent '{a}': ` for a failed exchange, on one line.
fn failure_detail(e: &agent_client_protocol::Error, exited: Option<std::process::ExitStatus>, stderr: &str) -> String {
    match exited {
        Some(status) if stderr.is_empty() => format!("{} (agent process exited: {status})", e.message),
        Some(status) => format!("{} (agent process exited: {status}; stderr: {stderr})", e.message),
        None => match &e.data {
            Some(Value::Object(map)) if map.len() == 1 && map.values().all(Value::is_string) => {
                format!("{}: {}", e.message, map.values().filter_map(Value::as_str).collect::<String>())
            }
            Some(data) => format!("{}: {data}", e.message),
            None => e.message.clone(),
        },
    }
}

fn timeout_error(agent: &str, seconds: u64) -> String {
    format!(
        "Error: ACP agent '{agent}' timed out after {seconds} seconds without responding. The agent subprocess has \
         been terminated. If this agent handles long-running tasks, increase acp_agents.{agent}.timeout_seconds in \
         config.yaml."
    )
}

/// The thread's acp-workspace, created through the thread filesystem layer (refused if it was
/// replaced by a link), as an absolute path (ACP requires an absolute cwd).
fn work_dir(ctx: &CallContext) -> std::io::Result<PathBuf> {
    ctx.fs.dir(toolhost_core::ThreadDir::Acp).map_err(std::io::Error::other)?;
    std::path::absolute(ctx.paths().acp_workspace())
}

#[async_trait]
impl Tool for InvokeAcpAgentTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn call(&self, ctx: &CallContext, args: Value) -> ToolOutcome {
        let (agent, prompt) = match (string_arg(&args, "agent"), string_arg(&args, "prompt")) {
            (Ok(a), Ok(p)) => (a, p),
            (Err(e), _) | (_, Err(e)) => return invalid_args(&e),
        };
        tracing::info!(agent = %agent, prompt_len = prompt.len(), "invoking ACP agent");
        let Some(config) = self.agents.get(&agent) else {
            let available: Vec<&str> = self.agents.keys().map(String::as_str).collect();
            return ToolOutcome::error(format!("Error: Unknown agent '{agent}'. Available: {}", available.join(", ")));
        };
        let masked_error = |detail: String| ToolOutcome::error(ctx.paths().mask(&detail));
        let invocation_error =
            |e: &dyn std::fmt::Display| masked_error(format!("Error invoking ACP agent '{agent}': {e}"));

        let cwd = match work_dir(ctx) {
            Ok(dir) => dir,
            Err(e) => return invocation_error(&format!("cannot create the ACP workspace: {e}")),
        };
        let mcp_servers = mcp_servers::to_acp(&self.mcp_servers).unwrap_or_else(|e| {
            tracing::warn!(agent = %agent, "Invalid MCP server configuration for ACP agent; continuing without MCP servers: {e}");
            Vec::new()
        });
        let launch = match &self.launch {
            Some(policy) => policy(&LaunchRequest {
                kind: ProcessKind::AcpAgent,
                name: &agent,
                command: &config.command,
                args: &config.args,
            }),
            None => Launch::Unconfined,
        };
        let mut env = process::agent_environment(&config.env, &self.env);
        let confined = match &launch {
            Launch::Refused(why) => return invocation_error(&format!("not started: {why}")),
            Launch::Unconfined => None,
            Launch::Confined(confiner) => {
                let prepared = match confiner.self_test().await {
                    Ok(_) => confiner.prepare(Some(&cwd)).await,
                    Err(e) => Err(e),
                };
                match prepared {
                    Ok(p) => {
                        for key in &confiner.spec().env {
                            if let Some(v) = self.env.get(key) {
                                env.entry(key.clone()).or_insert(v);
                            }
                        }
                        Some(p)
                    }
                    Err(e) => return invocation_error(&format!("not started: {e}")),
                }
            }
        };
        let (mut child, stdin, stdout) = match AgentProcess::spawn(&config.command, &config.args, &env, &cwd, confined)
        {
            Ok(spawned) => spawned,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return masked_error(not_found_error(&agent, &config.command, self.env.get("PATH").as_deref()))
            }
            Err(e) => return invocation_error(&e),
        };
        tracing::info!(agent = %agent, command = %config.command, cwd = %cwd.display(), "spawned ACP agent");
        let exchange = session::Exchange {
            agent: agent.clone(),
            prompt,
            cwd,
            model: config.model.clone(),
            mcp_servers,
            auto_approve: config.auto_approve_permissions,
        };
        // The deadline covers the whole exchange, not only `session/prompt`: an agent that hangs
        // in `initialize` must not hold the call forever.
        let deadline = Duration::from_secs(config.timeout_seconds);
        match tokio::time::timeout(deadline, session::run(stdin, stdout, exchange)).await {
            Ok(Ok(text)) => {
                child.finish().await;
                tracing::info!(agent = %agent, chars = text.chars().count(), "ACP agent returned");
                let text = if text.is_empty() { "(no response)".to_string() } else { text };
                ToolOutcome::text(ctx.paths().mask(&text))
            }
            Ok(Err(e)) => {
                // An agent that died takes the connection with it; its exit status and stderr
                // say why, the protocol error alone does not. (After an error *reply* the agent
                // exits because its stdin closed: that status says nothing.)
                let exited = if agent_client_protocol::is_incoming_transport_closed(&e) {
                    child.exit_status_within(EXIT_STATUS_WAIT).await
                } else {
                    None
                };
                let stderr = child.stderr_tail();
                child.kill().await;
                tracing::error!(agent = %agent, "ACP agent invocation failed: {e}");
                invocation_error(&failure_detail(&e, exited, &stderr))
            }
            Err(_) => {
                child.kill().await;
                tracing::error!(agent = %agent, seconds = config.timeout_seconds, "ACP agent timed out; killed");
                ToolOutcome::error(timeout_error(&agent, config.timeout_seconds))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn description_lists_agents_in_config_order() {
        let mut agents = IndexMap::new();
        agents.insert("codex".to_string(), AcpAgentConfig::new("codex-acp", "Codex coding agent"));
        agents.insert("claude".to_string(), AcpAgentConfig::new("claude-code-acp", "Claude Code"));
        let d = description(&agents);
        assert!(d.starts_with(
            "Invoke an external ACP-compatible agent and return its final response.\n\nAvailable agents:\n\
             - codex: Codex coding agent\n- claude: Claude Code\n\nIMPORTANT: ACP agents operate"
        ));
        assert!(d.ends_with("its output files are accessible at /mnt/acp-workspace/ (read-only)."));
        let tool = InvokeAcpAgentTool::new(agents);
        assert_eq!(tool.spec().name, "invoke_acp_agent");
        assert_eq!(tool.spec().source, ToolSource::Acp);
        assert_eq!(tool.spec().parameters["required"], json!(["agent", "prompt"]));
    }

    #[test]
    fn config_defaults_follow_deerflow() {
        let cfg: AcpAgentConfig = serde_json::from_value(json!({"command": "x", "description": "d"})).unwrap();
        assert_eq!(cfg, AcpAgentConfig::new("x", "d"));
        assert_eq!(cfg.timeout_seconds, 1800);
        assert!(!cfg.auto_approve_permissions);
    }

    #[test]
    fn not_found_hints() {
        assert_eq!(
            not_found_error("a", "nope", None),
            "Error invoking ACP agent 'a': Command 'nope' was not found on PATH. Install the agent binary or update \
             `acp_agents.a.command` in config.yaml."
        );
        assert!(not_found_error("mcode", "mcode", None).contains("run `mcode login`"));
    }
}
