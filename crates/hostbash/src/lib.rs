//! The native host `bash` tool: DeerFlow's local-provider `bash_tool` (same schema, strings and
//! output), with each command confined by Landlock to its thread's directories where the
//! kernel allows. The audit is not applied here: the host wraps every `bash` call with
//! [`audit::call_audited`], DeerFlow's `SandboxAuditMiddleware`.

pub mod audit;
mod confine;
mod rewrite;
mod run;

use std::path::PathBuf;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{json, Value};
use toolhost_audit::{mcp_allowed_paths, truncate_middle, validate_local_bash_command_paths, BashPathPolicy};
use toolhost_core::{CallContext, Tool, ToolOutcome, ToolSource, ToolSpec, VIRTUAL_ACP, VIRTUAL_SKILLS};

pub use confine::{confinement_status, ConfineMode, ConfinementStatus};
pub use rewrite::Mapping;
pub use run::{is_secret_env_name, CAPTURE_LIMIT_BYTES};

/// DeerFlow's `LOCAL_HOST_BASH_DISABLED_MESSAGE`.
pub const LOCAL_HOST_BASH_DISABLED_MESSAGE: &str = "Host bash execution is disabled for LocalSandboxProvider because it is not a secure sandbox boundary. Switch to AioSandboxProvider for isolated bash access, or set sandbox.allow_host_bash: true only in a fully trusted local environment.";

/// The tool description the model sees (langchain's `parse_docstring` of `bash_tool`).
pub const BASH_DESCRIPTION: &str = "Execute a bash command in a Linux environment. \n- Use `python` to run Python code.\n- Prefer a thread-local virtual environment in `/mnt/user-data/workspace/.venv`.\n- Use `python -m pip` (inside the virtual environment) to install Python packages.\n- To start a long-lived process such as a web server, ALWAYS run it in the background with its\n  output redirected, e.g. `your-command > /mnt/user-data/workspace/server.log 2>&1 &`, then check\n  the log file or poll the port. A long-lived process run in the foreground blocks the turn until\n  it is killed at the command timeout.";

const DESCRIPTION_ARG: &str =
    "Explain why you are running this command in short words. ALWAYS PROVIDE THIS PARAMETER FIRST.";
const COMMAND_ARG: &str = "The bash command to execute. Always use absolute paths for files and directories.";

/// A `sandbox.mounts` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostMount {
    pub host_path: PathBuf,
    pub container_path: String,
    pub read_only: bool,
}

/// Configuration of the host `bash` tool (DeerFlow's `sandbox:` section plus toolhost's
/// confinement).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BashConfig {
    /// `is_host_bash_allowed`: `sandbox.allow_host_bash` for the local provider.
    pub allow_host_bash: bool,
    /// `sandbox.bash_command_timeout` in seconds (default 600).
    pub command_timeout_secs: u64,
    /// `sandbox.bash_output_max_chars` (default 20 000; 0 disables truncation).
    pub output_max_chars: usize,
    /// The skills directory on the host, if it exists.
    pub skills_host_path: Option<PathBuf>,
    /// `skills.container_path` (default `/mnt/skills`).
    pub skills_container_path: String,
    /// `sandbox.mounts`; entries whose host path is missing are ignored, as DeerFlow does.
    pub mounts: Vec<HostMount>,
    /// The `args` of each enabled MCP server (filesystem servers' roots become allowed paths).
    pub mcp_server_args: Vec<Vec<String>>,
    /// Landlock confinement.
    pub confine: ConfineMode,
    /// Further host directories a confined command may read (e.g. a toolchain under $HOME).
    pub extra_read_paths: Vec<PathBuf>,
    /// The shell (`/bin/bash`).
    pub shell: PathBuf,
}

impl Default for BashConfig {
    fn default() -> Self {
        Self {
            allow_host_bash: false,
            command_timeout_secs: 600,
            output_max_chars: 20_000,
            skills_host_path: None,
            skills_container_path: VIRTUAL_SKILLS.to_string(),
            mounts: Vec::new(),
            mcp_server_args: Vec::new(),
            confine: ConfineMode::BestEffort,
            extra_read_paths: Vec::new(),
            shell: PathBuf::from("/bin/bash"),
        }
    }
}

/// DeerFlow's `bash` tool schema: `description` first, both required.
pub fn bash_spec() -> ToolSpec {
    ToolSpec {
        name: "bash".into(),
        description: BASH_DESCRIPTION.into(),
        parameters: json!({
            "description": BASH_DESCRIPTION,
            "properties": {
                "description": {"description": DESCRIPTION_ARG, "title": "Description", "type": "string"},
                "command": {"description": COMMAND_ARG, "title": "Command", "type": "string"},
            },
            "required": ["description", "command"],
            "title": "bash",
            "type": "object",
        }),
        group: Some("bash".into()),
        source: ToolSource::HostBash,
    }
}

/// The native host `bash` tool.
pub struct BashTool {
    spec: ToolSpec,
    config: BashConfig,
    policy: BashPathPolicy,
    static_mappings: Vec<Mapping>,
    pattern: regex::Regex,
}

impl BashTool {
    pub fn new(config: BashConfig) -> Self {
        let mounts: Vec<&HostMount> = config.mounts.iter().filter(|m| m.host_path.exists()).collect();
        let policy = BashPathPolicy {
            skills_container_path: config.skills_container_path.clone(),
            acp_virtual_path: VIRTUAL_ACP.into(),
            mount_container_paths: mounts.iter().map(|m| m.container_path.clone()).collect(),
            mcp_allowed_paths: config.mcp_server_args.iter().flat_map(|a| mcp_allowed_paths(a)).collect(),
        };
        let mut static_mappings: Vec<Mapping> = mounts
            .iter()
            .map(|m| Mapping {
                virtual_prefix: m.container_path.trim_end_matches('/').to_string(),
                host: m.host_path.clone(),
            })
            .collect();
        if let Some(host) = &config.skills_host_path {
            static_mappings.push(Mapping { virtual_prefix: config.skills_container_path.clone(), host: host.clone() });
        }
        let mut prefixes: Vec<String> = static_mappings.iter().map(|m| m.virtual_prefix.clone()).collect();
        prefixes.extend([toolhost_core::VIRTUAL_USER_DATA.to_string(), VIRTUAL_ACP.to_string()]);
        let pattern = rewrite::command_pattern(&prefixes);
        Self { spec: bash_spec(), config, policy, static_mappings, pattern }
    }

    /// Bind the tool into a config group other than `bash`.
    pub fn with_group(mut self, group: Option<String>) -> Self {
        self.spec.group = group;
        self
    }

    pub fn config(&self) -> &BashConfig {
        &self.config
    }

    /// How this tool confines commands, for `toolhost tools --explain`.
    pub fn confinement(&self) -> String {
        match self.config.confine {
            ConfineMode::Off => "off (sandbox confinement disabled by configuration)".into(),
            mode => {
                let status = confinement_status();
                match (&status, mode) {
                    (ConfinementStatus::Unavailable { .. }, ConfineMode::Required) => {
                        format!("{status} (required: host bash refuses to run)")
                    }
                    _ => status.to_string(),
                }
            }
        }
    }

    fn rules(&self, ctx: &CallContext) -> confine::Rules {
        let mut read_only: Vec<PathBuf> = vec![ctx.paths().acp_workspace()];
        read_only.extend(self.config.skills_host_path.iter().cloned());
        read_only.extend(self.config.extra_read_paths.iter().cloned());
        let mut read_write = Vec::new();
        for mount in self.config.mounts.iter().filter(|m| m.host_path.exists()) {
            if mount.read_only {
                read_only.push(mount.host_path.clone());
            } else {
                read_write.push(mount.host_path.clone());
            }
        }
        confine::Rules::for_thread(&ctx.paths().user_data(), read_only, read_write)
    }

    async fn execute(&self, ctx: &CallContext, command: &str) -> Result<String, String> {
        if !self.config.allow_host_bash {
            return Err(format!("Error: {LOCAL_HOST_BASH_DISABLED_MESSAGE}"));
        }
        ctx.fs.ensure_tool_dirs().map_err(|e| format!("Error: {e}"))?;
        validate_local_bash_command_paths(command, &self.policy).map_err(|e| format!("Error: {e}"))?;

        let mappings = rewrite::mappings(ctx.paths(), &self.static_mappings);
        let host_command = rewrite::rewrite_command(command, &self.pattern, &mappings);
        let workspace = ctx.paths().workspace();
        let mut env = run::inherited_env();
        env.insert("PWD".into(), workspace.to_string_lossy().into_owned());

        let ruleset = match self.config.confine {
            ConfineMode::Off => None,
            // The first call probes with a real process; keep that off the async worker.
            mode => match (
                tokio::task::spawn_blocking(confinement_status).await.unwrap_or_else(|e| {
                    ConfinementStatus::Unavailable { reason: format!("the confinement probe failed: {e}") }
                }),
                mode,
            ) {
                (ConfinementStatus::Active { .. }, _) => {
                    // A confined command cannot reach /tmp or $HOME: give it its own inside the
                    // thread's user data.
                    let tmp = ctx.paths().user_data().join(".tmp");
                    let home = ctx.paths().user_data().join(".home");
                    for dir in [toolhost_core::ThreadDir::BashTmp, toolhost_core::ThreadDir::BashHome] {
                        ctx.fs.dir(dir).map_err(|e| format!("Error: {e}"))?;
                    }
                    env.insert("TMPDIR".into(), tmp.to_string_lossy().into_owned());
                    env.insert("HOME".into(), home.to_string_lossy().into_owned());
                    let ruleset = confine::build_ruleset(&self.rules(ctx))
                        .map_err(|e| format!("Error: Cannot confine the command with Landlock: {e}"))?;
                    Some(ruleset)
                }
                (ConfinementStatus::Unavailable { reason }, ConfineMode::Required) => {
                    return Err(format!(
                        "Error: Host bash requires Landlock confinement, which is unavailable: {reason}"
                    ));
                }
                _ => None,
            },
        };

        let invocation = run::Invocation {
            shell: self.config.shell.clone(),
            command: host_command,
            cwd: workspace,
            env,
            timeout: Duration::from_secs(self.config.command_timeout_secs),
            ruleset,
        };
        let outcome = run::run(invocation).await.map_err(|e| {
            format!("Error: Unexpected error executing command: {}", rewrite::mask_output(&e.to_string(), &mappings))
        })?;
        let output = run::format_output(&outcome, self.config.command_timeout_secs);
        Ok(truncate_middle(&rewrite::mask_output(&output, &mappings), self.config.output_max_chars))
    }
}

/// The string argument `name`, or an error naming it.
fn string_arg<'a>(args: &'a Value, name: &str) -> Result<&'a str, String> {
    match args.get(name) {
        Some(Value::String(s)) => Ok(s),
        Some(other) => Err(format!(
            "Error: Invalid arguments for bash: '{name}' must be a string, got {}",
            match other {
                Value::Null => "null",
                Value::Bool(_) => "a boolean",
                Value::Number(_) => "a number",
                Value::Array(_) => "an array",
                Value::Object(_) => "an object",
                Value::String(_) => "a string",
            }
        )),
        None => Err(format!("Error: Invalid arguments for bash: missing required field '{name}'")),
    }
}

#[async_trait]
impl Tool for BashTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn call(&self, ctx: &CallContext, args: Value) -> ToolOutcome {
        let parsed = string_arg(&args, "description").and_then(|_| string_arg(&args, "command"));
        let result = match parsed {
            Ok(command) => self.execute(ctx, command).await,
            Err(e) => Err(e),
        };
        match result {
            Ok(text) => ToolOutcome::text(text),
            Err(text) => ToolOutcome::error(text),
        }
    }
}
