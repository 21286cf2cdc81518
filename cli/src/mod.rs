//! The `toolhost` commands: `tools`, `call`, `inspect`, `check`, `audit`, `route`, `serve`,
//! `agents`, `new`, `build`, and the distribution commands of `dist` (`keygen`, `sign`, `push`).
//! Results go to stdout, diagnostics to stderr; a failed command exits non-zero.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context as _;
use clap::{Parser, Subcommand};
use serde_json::Value;

mod author;
mod dist;

use toolhost::{AssemblyRequest, Environment, HostOptions, Severity, Toolhost};

#[derive(Parser, Debug, Clone)]
#[command(
    name = "toolhost",
    version,
    about = "A WebAssembly component-based tool host for AI agents (DeerFlow's tool system, sandboxed)."
)]
struct Cli {
    /// The config file (DeerFlow's config.yaml format).
    #[arg(long, global = true, env = "TOOLHOST_CONFIG", default_value = "config.yaml")]
    config: PathBuf,
    /// Data dir for thread files and state (the precompile cache is per user, in
    /// $XDG_CACHE_HOME/toolhost or ~/.cache/toolhost).
    #[arg(long, global = true, env = "TOOLHOST_HOME", default_value = ".toolhost")]
    data_dir: PathBuf,
    /// extensions_config.json (MCP servers, skill states); default: DeerFlow's search.
    #[arg(long, global = true)]
    extensions: Option<PathBuf>,
    /// The user whose custom agents `--agent`, `agents`, `setup_agent` and `update_agent` use
    /// (`<data>/users/USER/agents/`, as DeerFlow writes them; DeerFlow's no-auth user is `default`).
    #[arg(long, global = true, env = "TOOLHOST_USER", default_value = "default", value_name = "USER")]
    user: String,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug, Clone)]
enum Command {
    /// List the assembled tools (DeerFlow's get_available_tools).
    Tools {
        /// Keep only config tools of these groups (comma-separated).
        #[arg(long, value_delimiter = ',', conflicts_with = "agent")]
        groups: Option<Vec<String>>,
        /// The model whose supports_vision decides view_image (default: the first model).
        #[arg(long)]
        model: Option<String>,
        /// Assemble for custom agent NAME (`<data>/users/USER/agents/NAME/config.yaml`, or the legacy
        /// `<data>/agents/NAME/`).
        #[arg(long, value_name = "NAME")]
        agent: Option<String>,
        /// Assemble as with subagents enabled (adds `task`).
        #[arg(long)]
        subagents: bool,
        /// Leave out MCP tools.
        #[arg(long)]
        no_mcp: bool,
        /// Show what the model sees in this thread (deferred tools hidden until promoted, …).
        #[arg(long)]
        thread: Option<String>,
        /// JSON output: name, description, parameters, source.
        #[arg(long)]
        json: bool,
        /// Say for every candidate why it is in or out.
        #[arg(long)]
        explain: bool,
    },
    /// Run one tool call through the pipeline.
    Call {
        name: String,
        /// The arguments, a JSON object; `-` reads them from stdin, `@FILE` from a file (for
        /// arguments larger than the command line allows).
        #[arg(default_value = "{}")]
        args: String,
        #[arg(long, default_value = "default")]
        thread: String,
        #[arg(long, conflicts_with = "agent")]
        groups: Option<String>,
        #[arg(long)]
        model: Option<String>,
        /// Call as custom agent NAME (`<data>/users/USER/agents/NAME/config.yaml`, or the legacy
        /// `<data>/agents/NAME/`).
        #[arg(long, value_name = "NAME")]
        agent: Option<String>,
        /// Subagents enabled: `task` is available.
        #[arg(long)]
        subagents: bool,
        /// Print {"content", "status", "update"}.
        #[arg(long)]
        json: bool,
    },
    /// Show a component's tools, schemas, imports, digest, signer and the trust policy: a file
    /// or an oci:// reference (pulled into the cache and checked first).
    Inspect { file: PathBuf },
    #[command(flatten)]
    Dist(dist::DistCommand),
    /// Validate a config and report every problem.
    Check,
    /// Write a new tool project (source with one example tool, build file, README, test).
    New {
        /// The project's name (and, with `_` for `-`, its tool's).
        name: String,
        #[arg(long, value_enum)]
        lang: author::Lang,
        /// Where to write it (default: ./NAME).
        #[arg(long)]
        dir: Option<PathBuf>,
    },
    /// Build a tool project with its language's toolchain; print its sha256 and `tools:` entry.
    Build {
        #[arg(default_value = ".")]
        dir: PathBuf,
    },
    /// Auto-promote deferred MCP tools whose routing keywords match a user message (DeerFlow's
    /// McpRoutingMiddleware), in a thread.
    Route {
        message: String,
        #[arg(long, default_value = "default")]
        thread: String,
        /// Route for custom agent NAME.
        #[arg(long, value_name = "NAME")]
        agent: Option<String>,
    },
    /// List the custom agents of `--user` (`<data>/users/USER/agents/*/config.yaml`, then the legacy
    /// `<data>/agents/*/`) with their groups, skills and model.
    Agents {
        /// JSON output.
        #[arg(long)]
        json: bool,
    },
    /// Classify a bash command as the audit would (block / warn / pass) without running it.
    Audit {
        command: String,
        /// JSON output: {"verdict", "message"}.
        #[arg(long)]
        json: bool,
    },
    /// Serve the assembled tools as an MCP server: stdio by default, streamable HTTP with --http.
    Serve {
        /// Serve streamable HTTP at http://ADDR/mcp instead of stdio: HOST:PORT with an IP address
        /// or a host name (127.0.0.1:8765, localhost:8765; port 0 picks one).
        #[arg(long, value_name = "HOST:PORT")]
        http: Option<String>,
        /// stdio: the thread of the session (default: a fresh `stdio-…` thread per process). HTTP:
        /// each MCP session is its own thread; a request may name one (`_meta`, `Toolhost-Thread`).
        #[arg(long)]
        thread: Option<String>,
        /// HTTP: accept this Host (and Origin) besides the loopback names; repeatable.
        #[arg(long = "allow-host", value_name = "HOST[:PORT]")]
        allow_host: Vec<String>,
        /// HTTP: require `Authorization: Bearer TOKEN` (needed on a non-loopback address). Visible
        /// to every process on the machine in /proc/PID/cmdline: prefer --token-file or
        /// TOOLHOST_SERVE_TOKEN.
        #[arg(long, hide_env_values = true, conflicts_with = "token_file")]
        token: Option<String>,
        /// HTTP: read the bearer token from this file (its first line), keeping it off the
        /// command line.
        #[arg(long, value_name = "PATH")]
        token_file: Option<PathBuf>,
        /// HTTP: serve a non-loopback address without a token (anyone who reaches it can call tools).
        #[arg(long)]
        insecure_no_auth: bool,
        /// Serve only config tools of these groups (comma-separated).
        #[arg(long, value_delimiter = ',', conflicts_with = "agent")]
        groups: Option<Vec<String>>,
        /// The model whose supports_vision decides view_image (default: the first model).
        #[arg(long)]
        model: Option<String>,
        /// Serve the tools of custom agent NAME (`<data>/users/USER/agents/NAME/config.yaml`, or the
        /// legacy `<data>/agents/NAME/`).
        #[arg(long, value_name = "NAME")]
        agent: Option<String>,
        /// Subagents enabled: serve `task`.
        #[arg(long)]
        subagents: bool,
        /// DeerFlow's plan mode: serve `write_todos` (the thread's todo list).
        #[arg(long)]
        plan_mode: bool,
        /// Serve only these tools (comma-separated names).
        #[arg(long, value_delimiter = ',', value_name = "NAMES")]
        tools: Option<Vec<String>>,
        /// Do not serve these tools (comma-separated names), e.g. a client's own present_files.
        #[arg(long, value_delimiter = ',', value_name = "NAMES")]
        exclude: Vec<String>,
        /// HTTP: sessions open at once (default: toolhost.serve.max_sessions, 1000).
        #[arg(long, value_name = "N")]
        max_sessions: Option<usize>,
        /// HTTP: sessions one client address may hold (default:
        /// toolhost.serve.max_sessions_per_client, a quarter of max sessions).
        #[arg(long, value_name = "N")]
        max_sessions_per_client: Option<usize>,
        /// HTTP: close a session idle this long (default: toolhost.serve.session_idle_timeout_s, 300).
        #[arg(long, value_name = "SECONDS")]
        session_idle_timeout: Option<u64>,
        /// Remove a thread used through serve once unused this long; 0 keeps threads
        /// (default: toolhost.serve.thread_ttl_s, 86400).
        #[arg(long, value_name = "SECONDS")]
        thread_ttl: Option<u64>,
        /// HTTP: end a tools/call's SSE stream after this long and let the client poll for the
        /// rest (GET with Last-Event-ID); 0 never does (default: toolhost.serve.sse_poll_after_s, 0).
        #[arg(long, value_name = "SECONDS")]
        sse_poll_after: Option<u64>,
    },
}

pub fn main() -> ExitCode {
    let filter = tracing_subscriber::EnvFilter::try_from_env("TOOLHOST_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    // Colour escapes only for a terminal: a log file or a pipe gets plain text.
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).with_ansi(ansi).init();
    // Host-bash commands run as this process's uid: keep its /proc entries (environ, mem) and
    // core dumps out of their reach.
    if let Err(e) = toolhost::harden_process() {
        tracing::warn!("cannot mark the process non-dumpable: {e}");
    }
    let cli = Cli::parse();
    let rt = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("toolhost: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match rt.block_on(run(cli)) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("toolhost: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// The host for a command. The CLI is where the environment is read: `$VAR`s and
/// `capabilities.env` see this process's environment, `TOOLHOST_EXTRA_CA_CERTS` and
/// `DEERFLOW_WRITE_FILE_MAX_BYTES` fill their options, and `extensions_config.json` is found
/// DeerFlow's way (`--extensions`, `$DEER_FLOW_EXTENSIONS_CONFIG_PATH`, then beside the config).
fn open(cli: &Cli) -> anyhow::Result<Arc<Toolhost>> {
    let env = Environment::from_process();
    let project_dir = match cli.config.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let extensions = toolhost_mcp::config::deerflow_config_path(
        cli.extensions.as_deref(),
        env.get(toolhost_mcp::config::CONFIG_PATH_ENV).filter(|v| !v.is_empty()).map(PathBuf::from),
        &project_dir,
    )?;
    let cache = UserCache::new(&env, &cli.data_dir);
    let opts = HostOptions::new(&cli.config)
        .data_dir(&cli.data_dir)
        .cache_dir(Some(cache.dir))
        .cache_keys_dir(cache.keys)
        .persist_state(true)
        .extensions(extensions)
        .extra_ca_certs(env.get("TOOLHOST_EXTRA_CA_CERTS").filter(|v| !v.is_empty()).map(PathBuf::from))
        .write_file_max_bytes(env.get("DEERFLOW_WRITE_FILE_MAX_BYTES"))
        .env(env);
    let host = Toolhost::open_blocking(opts)?;
    for p in host.problems() {
        let tag = if p.severity == Severity::Error { "error" } else { "warning" };
        tracing::debug!("{tag}: {}", p.message);
    }
    // Shared, so that `task` can run its subagents' tools through it.
    Ok(host.into_shared())
}

/// The precompile cache every command shares, one per user whatever the working directory or
/// data dir: `$XDG_CACHE_HOME/toolhost` (else `~/.cache/toolhost`), authenticated by a key kept
/// outside it in `$XDG_DATA_HOME/toolhost/keys` (else `~/.local/share/toolhost/keys`). Without
/// a home directory, `cache/` in the data dir with `keys/` beside it.
#[derive(Debug, Clone)]
pub(crate) struct UserCache {
    dir: PathBuf,
    keys: Option<PathBuf>,
}

impl UserCache {
    fn new(env: &Environment, data_dir: &std::path::Path) -> Self {
        // The XDG base directory rules: a relative value is ignored.
        let base = |xdg: &str, fallback: &str| {
            env.get(xdg)
                .map(PathBuf::from)
                .filter(|p| p.is_absolute())
                .or_else(|| env.get("HOME").map(PathBuf::from).filter(|p| p.is_absolute()).map(|h| h.join(fallback)))
        };
        match (base("XDG_CACHE_HOME", ".cache"), base("XDG_DATA_HOME", ".local/share")) {
            (Some(cache), Some(data)) => {
                Self { dir: cache.join("toolhost"), keys: Some(data.join("toolhost").join("keys")) }
            }
            _ => Self { dir: data_dir.join("cache"), keys: None },
        }
    }

    fn of(cli: &Cli) -> Self {
        Self::new(&Environment::from_process(), &cli.data_dir)
    }

    /// A runtime that compiles into (and loads from) this cache.
    fn runtime(&self) -> anyhow::Result<Arc<toolhost::runtime::Runtime>> {
        Ok(toolhost::runtime::Runtime::with_options(toolhost::runtime::RuntimeOptions {
            cache_dir: Some(self.dir.clone()),
            cache_keys_dir: self.keys.clone(),
            ..Default::default()
        })?)
    }
}

/// `req` for `--user`, as custom agent `agent` asks (`--agent`).
fn with_agent(
    cli: &Cli,
    host: &Toolhost,
    agent: Option<&str>,
    mut req: AssemblyRequest,
) -> anyhow::Result<AssemblyRequest> {
    req.agent.user_id = Some(cli.user.clone());
    Ok(match agent {
        Some(name) => host.agent_request(name, req)?,
        None => req,
    })
}

/// `call`'s arguments: JSON text, `-` for stdin, or `@FILE`; always a JSON object.
fn call_arguments(given: &str) -> anyhow::Result<Value> {
    let (text, from) = if given == "-" {
        let mut text = String::new();
        std::io::Read::read_to_string(&mut std::io::stdin(), &mut text)
            .context("cannot read the arguments from stdin")?;
        (text, "stdin".to_string())
    } else if let Some(file) = given.strip_prefix('@') {
        let text = std::fs::read_to_string(file).with_context(|| format!("cannot read the arguments from {file}"))?;
        (text, file.to_string())
    } else {
        (given.to_string(), "the command line".to_string())
    };
    let args: Value = serde_json::from_str(&text).with_context(|| {
        let shown: String = text.chars().take(200).collect();
        let more = if text.chars().count() > 200 { "…" } else { "" };
        format!("the arguments from {from} are not valid JSON: {shown}{more}")
    })?;
    if !args.is_object() {
        let shown: String = args.to_string().chars().take(200).collect();
        anyhow::bail!("the arguments from {from} must be a JSON object, got: {shown}");
    }
    Ok(args)
}

/// What a command prints: the same result as text and as JSON (`--json`), one renderer for both.
struct Output {
    json: Value,
    text: String,
    /// Lines for stderr (warnings, refused updates), printed in text mode only.
    notes: Vec<String>,
    code: ExitCode,
}

impl Output {
    fn new(json: Value, text: String) -> Self {
        Self { json, text, notes: Vec::new(), code: ExitCode::SUCCESS }
    }

    fn code(mut self, code: ExitCode) -> Self {
        self.code = code;
        self
    }

    fn notes(mut self, notes: Vec<String>) -> Self {
        self.notes = notes;
        self
    }
}

/// Print `out` as `--json` asks, and give its exit code.
fn render(out: Output, json: bool) -> anyhow::Result<ExitCode> {
    if json {
        println!("{}", serde_json::to_string_pretty(&out.json)?);
    } else {
        print!("{}", out.text);
        for n in &out.notes {
            eprintln!("{n}");
        }
    }
    Ok(out.code)
}

async fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match &cli.command {
        Command::Tools { groups, model, agent, subagents, no_mcp, thread, json, explain } => {
            let req = AssemblyRequest {
                groups: groups.clone(),
                include_mcp: !no_mcp,
                model_name: model.clone(),
                subagent_enabled: *subagents,
                ..Default::default()
            };
            render(tools(&cli, req, agent.as_deref(), thread.as_deref(), *explain).await?, *json)
        }
        Command::Call { name, args, thread, groups, model, agent, subagents, json } => {
            let req = AssemblyRequest {
                groups: groups.as_ref().map(|g| g.split(',').map(str::to_string).collect()),
                model_name: model.clone(),
                subagent_enabled: *subagents,
                ..Default::default()
            };
            render(call(&cli, req, agent.as_deref(), thread, name, args).await?, *json)
        }
        Command::Inspect { file } => render(inspect(&cli, file)?, false),
        Command::Route { message, thread, agent } => {
            render(route(&cli, agent.as_deref(), thread, message).await?, false)
        }
        Command::Agents { json } => render(agents(&cli)?, *json),
        Command::Audit { command, json } => render(audit(command), *json),
        Command::Serve {
            http,
            thread,
            allow_host,
            token,
            token_file,
            insecure_no_auth,
            groups,
            model,
            agent,
            subagents,
            plan_mode,
            tools,
            exclude,
            max_sessions,
            max_sessions_per_client,
            session_idle_timeout,
            thread_ttl,
            sse_poll_after,
        } => {
            // Read here rather than by clap: clap takes an empty variable for an unset one, and
            // an empty token must be refused, never mean "no authentication".
            let token = match (token, token_file) {
                (Some(t), _) => {
                    eprintln!(
                        "toolhost: warning: --token puts the secret on the command line, where every process on \
                         this machine can read it (/proc/{}/cmdline, ps); use --token-file PATH or \
                         TOOLHOST_SERVE_TOKEN instead",
                        std::process::id()
                    );
                    Some(t.clone())
                }
                (None, Some(path)) => Some(read_token_file(path)?),
                (None, None) => std::env::var("TOOLHOST_SERVE_TOKEN").ok(),
            };
            let request = AssemblyRequest {
                groups: groups.clone(),
                model_name: model.clone(),
                subagent_enabled: *subagents,
                agent: toolhost::AgentRun {
                    plan_mode: *plan_mode,
                    user_id: Some(cli.user.clone()),
                    ..Default::default()
                },
                ..Default::default()
            };
            let opts = toolhost_serve::ServeOptions {
                http: http.clone(),
                thread: thread.clone(),
                allow_hosts: allow_host.clone(),
                // Only HTTP uses a token; there an empty one is an error, never "no auth".
                token: if http.is_some() { token } else { None },
                insecure_no_auth: *insecure_no_auth,
                request,
                agent: agent.clone(),
                filter: toolhost_serve::ToolFilter { only: tools.clone(), exclude: exclude.clone() },
                limits: Default::default(),
                // The server's own settings, read here so that the library reads no environment.
                child_of_toolhost: std::env::var_os(toolhost_serve::CHILD_MARKER).is_some(),
                state_key: std::env::var(toolhost_serve::mrtr::STATE_KEY_ENV).ok(),
            };
            let flags = LimitFlags {
                max_sessions: *max_sessions,
                max_sessions_per_client: *max_sessions_per_client,
                session_idle_timeout: *session_idle_timeout,
                thread_ttl: *thread_ttl,
                sse_poll_after: *sse_poll_after,
            };
            serve(&cli, opts, flags).await
        }
        Command::Check => render(check(&cli).await?, false),
        Command::New { name, lang, dir } => {
            print!("{}", author::new_project(name, *lang, dir.as_deref())?);
            Ok(ExitCode::SUCCESS)
        }
        Command::Build { dir } => {
            print!("{}", author::build(dir, &UserCache::of(&cli))?);
            Ok(ExitCode::SUCCESS)
        }
        Command::Dist(d) => dist::run(d, &UserCache::of(&cli)).await,
    }
}

/// `toolhost tools`: the assembly (or a thread's model view), with `--explain` the reasons.
async fn tools(
    cli: &Cli,
    req: AssemblyRequest,
    agent: Option<&str>,
    thread: Option<&str>,
    explain: bool,
) -> anyhow::Result<Output> {
    let host = open(cli)?;
    let req = &with_agent(cli, &host, agent, req)?;
    let assembly = host.get_available_tools(req).await;
    let tools = match thread {
        Some(t) => host.model_tools(req, t).await?,
        None => assembly.specs(),
    };
    let list: Vec<Value> = tools
        .iter()
        .map(|s| {
            serde_json::json!({"name": s.name, "description": s.description, "parameters": s.parameters, "group": s.group, "source": s.source})
        })
        .collect();
    let confinement =
        host.host_bash_report().map(<[String]>::to_vec).unwrap_or_else(|| vec![toolhost::confinement_line()]);
    let prompt_section = assembly.deferred.as_ref().map(|d| d.setup.prompt_section());
    if !explain {
        let mut text = String::new();
        for s in &tools {
            text += &format!("{:<24} {}\n", s.name, s.description.lines().next().unwrap_or(""));
        }
        return Ok(Output::new(Value::Array(list), text));
    }
    let json = serde_json::json!({
        "tools": list,
        "explain": assembly.explain,
        "warnings": assembly.warnings,
        "pipeline": host.pipeline_layers(),
        "host_bash_confinement": confinement,
        "processes": host.process_reports().iter().map(|r| serde_json::json!({
            "name": r.label, "verdict": r.verdict, "gets": r.lines,
        })).collect::<Vec<_>>(),
        "deferred_prompt_section": prompt_section,
    });
    let mut text = String::new();
    for e in &assembly.explain {
        let mark = if e.included { "+" } else { "-" };
        text += &format!("{mark} {:<24} [{}] {}\n", e.name, e.layer, e.reason);
    }
    if let Some(t) = thread {
        let visible: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
        text += &format!("model view in thread {t}: {}\n", visible.join(", "));
    }
    if let Some(section) = &prompt_section {
        text += &format!("deferred tools, as the system prompt lists them:\n{section}\n");
    }
    text += &format!("pipeline (outermost first): {}\n", host.pipeline_layers().join(" → "));
    match host.host_bash_report() {
        Some(lines) => {
            text += "host bash:\n";
            for l in lines {
                text += &format!("  {l}\n");
            }
        }
        None => text += &format!("host bash confinement: {}\n", toolhost::confinement_line()),
    }
    text += &process_report_text(&host);
    let notes = host.problems().iter().map(|p| format!("{}: {}", severity(p.severity), p.message)).collect();
    Ok(Output::new(json, text).notes(notes))
}

/// The MCP servers and ACP agents toolhost starts, and what each gets.
fn process_report_text(host: &toolhost::Toolhost) -> String {
    let mut text = String::new();
    for r in host.process_reports() {
        text += &format!("{}: {}\n", r.label, r.verdict);
        for l in &r.lines {
            text += &format!("  {l}\n");
        }
    }
    text
}

/// `toolhost call`: one call through the pipeline; exit code 2 when the tool answered an error.
async fn call(
    cli: &Cli,
    req: AssemblyRequest,
    agent: Option<&str>,
    thread: &str,
    name: &str,
    args: &str,
) -> anyhow::Result<Output> {
    let args = call_arguments(args)?;
    let host = open(cli)?;
    let req = with_agent(cli, &host, agent, req)?;
    let result = host.call(&req, thread, name, args, None).await?;
    let o = &result.outcome;
    let mut json = serde_json::json!({
        "content": o.text_content(),
        "status": o.status,
        "update": o.update,
    });
    if !o.content.iter().all(|p| matches!(p, toolhost::core::ContentPart::Text { .. })) {
        json["parts"] = serde_json::to_value(&o.content)?;
    }
    if o.end_run {
        json["end_run"] = Value::Bool(true);
    }
    if let Some(s) = &o.structured {
        json["structured"] = s.clone();
    }
    if let Some(k) = &o.additional_kwargs {
        json["additional_kwargs"] = Value::Object(k.clone());
    }
    if let Some(kind) = result.error_kind() {
        json["error_kind"] = serde_json::to_value(kind)?;
    }
    if !result.state_errors.is_empty() {
        json["state_errors"] = serde_json::to_value(&result.state_errors)?;
    }
    let mut notes: Vec<String> = result.state_errors.iter().map(|e| format!("state update refused: {e}")).collect();
    // The model reads DeerFlow's "not a valid tool"; the person at the terminal gets why.
    if result.error_kind() == Some(toolhost::core::ErrorKind::NotFound) {
        if let Some(why) = why_unavailable(&host, &req, name).await {
            json["unavailable"] = Value::String(why.clone());
            notes.push(format!("toolhost: tool '{name}' is not available: {why}"));
            notes.push(format!(
                "toolhost: `toolhost check --config {}` lists every problem of the config",
                cli.config.display()
            ));
        }
    }
    let code = if o.is_error() { ExitCode::from(2) } else { ExitCode::SUCCESS };
    Ok(Output::new(json, format!("{}\n", o.text_content())).notes(notes).code(code))
}

/// Why the assembly left `name` out (a component refused by the trust policy or its pin, a
/// group not requested, a condition not met, shadowed), if a candidate of that name exists.
async fn why_unavailable(host: &Toolhost, req: &AssemblyRequest, name: &str) -> Option<String> {
    let assembly = host.get_available_tools(req).await;
    let reasons: Vec<String> =
        assembly.explain.iter().filter(|e| e.name == name && !e.included).map(|e| e.reason.clone()).collect();
    (!reasons.is_empty()).then(|| reasons.join("; "))
}

/// `toolhost inspect`: a component's digest, provenance, interfaces and tools.
fn inspect(cli: &Cli, file: &std::path::Path) -> anyhow::Result<Output> {
    let (component, i, provenance) = dist::inspect(cli, &file.to_string_lossy())?;
    let pin = match &component {
        toolhost::runtime::ComponentRef::Oci(r) => r.to_string(),
        _ => format!("{}@sha256:{}", file.display(), i.sha256),
    };
    let mut text = format!(
        "file:    {component}\nsha256:  {}\nsize:    {} bytes\ninterface: {}\npin:     use: {pin}\nprovenance: {provenance}\nimports:\n",
        i.sha256, i.size, i.interface,
    );
    for im in &i.imports {
        text += &format!("  {im}\n");
    }
    text += "exports:\n";
    for ex in &i.exports {
        text += &format!("  {ex}\n");
    }
    text += "tools:\n";
    for t in &i.tools {
        text += &format!("  {} — {}\n    parameters: {}\n", t.name, t.description, t.parameters);
    }
    let json = serde_json::json!({
        "file": file, "sha256": i.sha256, "size": i.size, "imports": i.imports, "exports": i.exports,
        "provenance": provenance.to_string(),
        "tools": i.tools.iter().map(|t| serde_json::json!({"name": t.name, "description": t.description, "parameters": t.parameters})).collect::<Vec<_>>(),
    });
    Ok(Output::new(json, text))
}

/// `toolhost route`: DeerFlow's McpRoutingMiddleware on one user message.
async fn route(cli: &Cli, agent: Option<&str>, thread: &str, message: &str) -> anyhow::Result<Output> {
    let host = open(cli)?;
    let req = with_agent(cli, &host, agent, AssemblyRequest::default())?;
    let names = host.auto_promote(&req, thread, message).await?;
    let text = if names.is_empty() {
        "no deferred tool matched\n".to_string()
    } else {
        format!("promoted: {}\n", names.join(", "))
    };
    Ok(Output::new(serde_json::json!({ "promoted": names }), text))
}

/// `toolhost audit`: the bash audit's verdict, nothing run.
fn audit(command: &str) -> Output {
    let verdict = toolhost_audit::audit(command);
    let message = match &verdict {
        toolhost_audit::Verdict::Block { message, .. } | toolhost_audit::Verdict::Warn { message } => {
            message.trim().to_string()
        }
        toolhost_audit::Verdict::Pass => String::new(),
    };
    let text = if message.is_empty() {
        format!("{}\n", verdict.as_str())
    } else {
        format!("{}: {message}\n", verdict.as_str())
    };
    Output::new(serde_json::json!({"verdict": verdict.as_str(), "message": message}), text)
}

/// `serve`'s flags that override `toolhost: serve:` keys.
struct LimitFlags {
    max_sessions: Option<usize>,
    max_sessions_per_client: Option<usize>,
    session_idle_timeout: Option<u64>,
    thread_ttl: Option<u64>,
    sse_poll_after: Option<u64>,
}

/// The token in `path`: its first line without the line end (an empty one is refused later,
/// like an empty `--token`).
fn read_token_file(path: &std::path::Path) -> anyhow::Result<String> {
    let text = std::fs::read_to_string(path).with_context(|| format!("cannot read --token-file {}", path.display()))?;
    Ok(text.lines().next().unwrap_or_default().to_string())
}

/// Raise the soft limit on open files to the hard one, as servers do (Go's runtime does it for
/// every program): `serve --http` sizes its connection cap to fit it.
fn raise_file_limit() {
    use rustix::process::{getrlimit, setrlimit, Resource};
    let limit = getrlimit(Resource::Nofile);
    // The soft limit is never above the hard one: different means lower.
    if limit.current != limit.maximum {
        let raised = rustix::process::Rlimit { current: limit.maximum, maximum: limit.maximum };
        if let Err(e) = setrlimit(Resource::Nofile, raised) {
            tracing::debug!("cannot raise the open-file limit: {e}");
        }
    }
}

/// `toolhost serve`: refuses an unauthenticated public bind before loading anything; answers
/// `initialize` at once while the host opens in the background (a cold start compiles components).
async fn serve(
    cli: &Cli,
    mut opts: toolhost_serve::ServeOptions,
    LimitFlags { max_sessions, max_sessions_per_client, session_idle_timeout, thread_ttl, sse_poll_after }: LimitFlags,
) -> anyhow::Result<ExitCode> {
    if let Some(addr) = &opts.http {
        toolhost_serve::check_auth(&opts.http_options(addr)?)?;
        raise_file_limit();
    }
    // The `toolhost:` section now; the rest of the config and the components load in the
    // background while the first session starts.
    let text = std::fs::read_to_string(&cli.config).with_context(|| format!("cannot read {}", cli.config.display()))?;
    let mut limits = toolhost::serve_limits(&text, &cli.config.display().to_string(), &Environment::from_process())?;
    if let Some(n) = max_sessions {
        anyhow::ensure!(n >= 1, "--max-sessions must be at least 1");
        limits.max_sessions = n;
    }
    if let Some(n) = max_sessions_per_client {
        anyhow::ensure!(n >= 1, "--max-sessions-per-client must be at least 1");
        limits.max_sessions_per_client = Some(n);
    }
    if let Some(s) = session_idle_timeout {
        anyhow::ensure!(s >= 1, "--session-idle-timeout must be at least 1 second");
        limits.session_idle_timeout_s = s;
    }
    if let Some(s) = thread_ttl {
        limits.thread_ttl_s = s;
    }
    if let Some(s) = sse_poll_after {
        anyhow::ensure!(s <= 86_400, "--sse-poll-after must be at most 86400 seconds");
        limits.sse_poll_after_s = s;
    }
    opts.limits = limits;
    let for_open = cli.clone();
    let host: toolhost_serve::HostOpening = Box::pin(async move {
        match tokio::task::spawn_blocking(move || open(&for_open)).await {
            // A shared state store is connected now: a wrong `state_store.url` or an unreachable
            // server stops serving with that error instead of failing every call.
            Ok(Ok(host)) => match host.check_state_store().await {
                Ok(()) => Ok(host),
                Err(e) => Err(e.to_string()),
            },
            Ok(Err(e)) => Err(format!("{e:#}")),
            Err(e) => Err(format!("opening the host failed: {e}")),
        }
    });
    toolhost_serve::run(&cli.data_dir, host, opts).await?;
    Ok(ExitCode::SUCCESS)
}

/// `toolhost agents`: the custom agents with their groups, skills and model; an agent whose
/// config cannot be read is listed with its error and fails the command.
fn agents(cli: &Cli) -> anyhow::Result<Output> {
    let listed = toolhost::list_agents(&cli.data_dir, Some(&cli.user));
    let show = |v: &Option<Vec<String>>, all: &str| match v {
        None => all.to_string(),
        Some(v) if v.is_empty() => "none".to_string(),
        Some(v) => v.join(","),
    };
    let (mut json, mut text, mut notes) = (Vec::new(), String::new(), Vec::new());
    for (name, agent) in &listed {
        match agent {
            Ok(a) => {
                json.push(serde_json::json!({"name": name, "description": a.description, "model": a.model, "tool_groups": a.tool_groups, "skills": a.skills}));
                text += &format!(
                    "{name:<20} groups: {}  skills: {}  model: {}  {}\n",
                    show(&a.tool_groups, "all"),
                    show(&a.skills, "all"),
                    a.model.as_deref().unwrap_or("default"),
                    a.description.lines().next().unwrap_or("")
                );
            }
            Err(e) => {
                json.push(serde_json::json!({"name": name, "error": e.to_string()}));
                notes.push(format!("error: {e}"));
            }
        }
    }
    if listed.is_empty() {
        notes.push(format!(
            "no agents under {} or {}",
            cli.data_dir.join("users").join(&cli.user).join("agents").display(),
            cli.data_dir.join("agents").display()
        ));
    }
    let code = if notes.iter().any(|n| n.starts_with("error:")) { ExitCode::FAILURE } else { ExitCode::SUCCESS };
    Ok(Output::new(Value::Array(json), text).notes(notes).code(code))
}

/// `toolhost check`: every problem of the config, then what assembles.
async fn check(cli: &Cli) -> anyhow::Result<Output> {
    let text = std::fs::read_to_string(&cli.config).with_context(|| format!("cannot read {}", cli.config.display()))?;
    let errors = toolhost::validate_config(&text, &cli.config.display().to_string(), &Environment::from_process());
    if !errors.is_empty() {
        let mut out = String::new();
        for e in &errors {
            out += &format!("error: {e}\n");
        }
        out += &format!("{} error(s)\n", errors.len());
        let json = serde_json::json!({"errors": errors.iter().map(|e| e.to_string()).collect::<Vec<_>>()});
        return Ok(Output::new(json, out).code(ExitCode::FAILURE));
    }
    let host = open(cli)?;
    let mut out = String::new();
    for p in host.problems() {
        out += &format!("{}: {}\n", severity(p.severity), p.message);
    }
    let n_err = host.problems().iter().filter(|p| p.severity == Severity::Error).count();
    let assembly = host.get_available_tools(&AssemblyRequest::default()).await;
    out += &process_report_text(&host);
    out += &format!(
        "{}: {} error(s), {} warning(s); {} tool(s) assemble\n",
        cli.config.display(),
        n_err,
        host.problems().len() - n_err,
        assembly.specs().len()
    );
    let processes: Vec<Value> = host
        .process_reports()
        .iter()
        .map(|r| serde_json::json!({"name": r.label, "verdict": r.verdict, "gets": r.lines}))
        .collect();
    let json =
        serde_json::json!({"problems": host.problems(), "tools": assembly.specs().len(), "processes": processes});
    Ok(Output::new(json, out).code(if n_err > 0 { ExitCode::FAILURE } else { ExitCode::SUCCESS }))
}

fn severity(s: Severity) -> &'static str {
    if s == Severity::Error {
        "error"
    } else {
        "warning"
    }
}
