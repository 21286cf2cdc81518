//! The `toolhost` commands: `tools`, `call`, `inspect`, `check`, `audit`, `route`, `serve`.
//! Results go to stdout, diagnostics to stderr; a failed command exits non-zero.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use clap::{Parser, Subcommand};
use serde_json::Value;

use crate::assembly::AssemblyRequest;
use crate::host::{HostOptions, Severity, Toolhost};
use crate::runtime::Runtime;

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
    /// Data dir for thread files, state and the precompile cache.
    #[arg(long, global = true, env = "TOOLHOST_HOME", default_value = ".toolhost")]
    data_dir: PathBuf,
    /// extensions_config.json (MCP servers, skill states); default: DeerFlow's search.
    #[arg(long, global = true)]
    extensions: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug, Clone)]
enum Command {
    /// List the assembled tools (DeerFlow's get_available_tools).
    Tools {
        /// Keep only config tools of these groups (comma-separated).
        #[arg(long, value_delimiter = ',')]
        groups: Option<Vec<String>>,
        /// The model whose supports_vision decides view_image (default: the first model).
        #[arg(long)]
        model: Option<String>,
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
        /// The arguments, a JSON object.
        #[arg(default_value = "{}")]
        args: String,
        #[arg(long, default_value = "default")]
        thread: String,
        #[arg(long)]
        groups: Option<String>,
        #[arg(long)]
        model: Option<String>,
        /// Print {"content", "status", "update"}.
        #[arg(long)]
        json: bool,
    },
    /// Show a component's tools, schemas, imports and sha256.
    Inspect { file: PathBuf },
    /// Validate a config and report every problem.
    Check,
    /// Auto-promote deferred MCP tools whose routing keywords match a user message (DeerFlow's
    /// McpRoutingMiddleware), in a thread.
    Route {
        message: String,
        #[arg(long, default_value = "default")]
        thread: String,
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
        /// HTTP: require `Authorization: Bearer TOKEN` (needed on a non-loopback address).
        #[arg(long, hide_env_values = true)]
        token: Option<String>,
        /// HTTP: serve a non-loopback address without a token (anyone who reaches it can call tools).
        #[arg(long)]
        insecure_no_auth: bool,
        /// Serve only config tools of these groups (comma-separated).
        #[arg(long, value_delimiter = ',')]
        groups: Option<Vec<String>>,
        /// The model whose supports_vision decides view_image (default: the first model).
        #[arg(long)]
        model: Option<String>,
        /// Serve only these tools (comma-separated names).
        #[arg(long, value_delimiter = ',', value_name = "NAMES")]
        tools: Option<Vec<String>>,
        /// Do not serve these tools (comma-separated names), e.g. a client's own present_files.
        #[arg(long, value_delimiter = ',', value_name = "NAMES")]
        exclude: Vec<String>,
        /// HTTP: sessions open at once (default: toolhost.serve.max_sessions, 1000).
        #[arg(long, value_name = "N")]
        max_sessions: Option<usize>,
        /// HTTP: close a session idle this long (default: toolhost.serve.session_idle_timeout_s, 300).
        #[arg(long, value_name = "SECONDS")]
        session_idle_timeout: Option<u64>,
        /// Remove a thread used through serve once unused this long; 0 keeps threads
        /// (default: toolhost.serve.thread_ttl_s, 86400).
        #[arg(long, value_name = "SECONDS")]
        thread_ttl: Option<u64>,
    },
}

pub fn main() -> ExitCode {
    let filter = tracing_subscriber::EnvFilter::try_from_env("TOOLHOST_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).init();
    // Host-bash commands run as this process's uid: keep its /proc entries (environ, mem) and
    // core dumps out of their reach.
    if let Err(e) = toolhost_hostbash::harden_process() {
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

fn open(cli: &Cli) -> anyhow::Result<Toolhost> {
    let opts = HostOptions {
        config_path: cli.config.clone(),
        data_dir: cli.data_dir.clone(),
        persist_state: true,
        cache_dir: None,
        extensions_path: cli.extensions.clone(),
        extra_ca_certs: crate::host::extra_ca_certs_from_env(),
        write_file_max_bytes: std::env::var("DEERFLOW_WRITE_FILE_MAX_BYTES").ok(),
    };
    let host = Toolhost::open(opts)?;
    for p in host.problems() {
        let tag = if p.severity == Severity::Error { "error" } else { "warning" };
        tracing::debug!("{tag}: {}", p.message);
    }
    Ok(host)
}

async fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match &cli.command {
        Command::Tools { groups, model, subagents, no_mcp, thread, json, explain } => {
            let host = open(&cli)?;
            let req = AssemblyRequest {
                groups: groups.clone(),
                include_mcp: !no_mcp,
                model_name: model.clone(),
                subagent_enabled: *subagents,
                ..Default::default()
            };
            let assembly = host.get_available_tools(&req).await;
            let tools = match thread {
                Some(t) => host.model_tools(&req, t).await?,
                None => assembly.tools.clone(),
            };
            if *json {
                let list: Vec<Value> = tools
                    .iter()
                    .map(|t| {
                        let s = t.spec();
                        serde_json::json!({"name": s.name, "description": s.description, "parameters": s.parameters, "group": s.group, "source": s.source})
                    })
                    .collect();
                let out = if *explain {
                    serde_json::json!({
                        "tools": list,
                        "explain": assembly.explain,
                        "warnings": assembly.warnings,
                        "pipeline": host.pipeline_layers(),
                        "host_bash_confinement": host
                            .host_bash_report()
                            .map(<[String]>::to_vec)
                            .unwrap_or_else(|| vec![crate::tools::confinement_line()]),
                        "deferred_prompt_section": assembly.deferred.as_ref().map(|d| d.setup.prompt_section()),
                    })
                } else {
                    Value::Array(list)
                };
                println!("{}", serde_json::to_string_pretty(&out)?);
            } else if *explain {
                for e in &assembly.explain {
                    let mark = if e.included { "+" } else { "-" };
                    println!("{mark} {:<24} [{}] {}", e.name, e.layer, e.reason);
                }
                if let Some(t) = thread {
                    let visible: Vec<&str> = tools.iter().map(|t| t.spec().name.as_str()).collect();
                    println!("model view in thread {t}: {}", visible.join(", "));
                }
                if let Some(d) = &assembly.deferred {
                    println!("deferred tools, as the system prompt lists them:\n{}", d.setup.prompt_section());
                }
                println!("pipeline (outermost first): {}", host.pipeline_layers().join(" → "));
                match host.host_bash_report() {
                    Some(lines) => {
                        println!("host bash:");
                        for l in lines {
                            println!("  {l}");
                        }
                    }
                    None => println!("host bash confinement: {}", crate::tools::confinement_line()),
                }
                for p in host.problems() {
                    eprintln!("{}: {}", if p.severity == Severity::Error { "error" } else { "warning" }, p.message);
                }
            } else {
                for t in &tools {
                    let s = t.spec();
                    let first = s.description.lines().next().unwrap_or("");
                    println!("{:<24} {}", s.name, first);
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Call { name, args, thread, groups, model, json } => {
            let args: Value =
                serde_json::from_str(args).with_context(|| format!("the arguments are not valid JSON: {args}"))?;
            if !args.is_object() {
                anyhow::bail!("the arguments must be a JSON object, got: {args}");
            }
            let host = open(&cli)?;
            let req = AssemblyRequest {
                groups: groups.as_ref().map(|g| g.split(',').map(str::to_string).collect()),
                model_name: model.clone(),
                ..Default::default()
            };
            let result = host.call(&req, thread, name, args, None).await?;
            let o = &result.outcome;
            if *json {
                let mut out = serde_json::json!({
                    "content": o.text_content(),
                    "status": o.status,
                    "update": o.update,
                });
                if !o.content.iter().all(|p| matches!(p, toolhost_core::ContentPart::Text { .. })) {
                    out["parts"] = serde_json::to_value(&o.content)?;
                }
                if o.end_run {
                    out["end_run"] = Value::Bool(true);
                }
                if let Some(s) = &o.structured {
                    out["structured"] = s.clone();
                }
                if !result.state_errors.is_empty() {
                    out["state_errors"] = serde_json::to_value(&result.state_errors)?;
                }
                println!("{}", serde_json::to_string_pretty(&out)?);
            } else {
                println!("{}", o.text_content());
                for e in &result.state_errors {
                    eprintln!("state update refused: {e}");
                }
            }
            Ok(if o.is_error() { ExitCode::from(2) } else { ExitCode::SUCCESS })
        }
        Command::Inspect { file } => {
            let runtime = Runtime::new(Some(cli.data_dir.join("cache"))).map_err(|e| anyhow::anyhow!("{e:#}"))?;
            let i = runtime.inspect(file)?;
            println!("file:    {}", file.display());
            println!("sha256:  {}", i.sha256);
            println!("size:    {} bytes", i.size);
            println!("pin:     use: {}@sha256:{}", file.display(), i.sha256);
            println!("imports:");
            for im in &i.imports {
                println!("  {im}");
            }
            println!("exports:");
            for ex in &i.exports {
                println!("  {ex}");
            }
            println!("tools:");
            for t in &i.tools {
                println!("  {} — {}", t.name, t.description);
                println!("    parameters: {}", t.parameters);
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Route { message, thread } => {
            let host = open(&cli)?;
            let names = host.auto_promote(&AssemblyRequest::default(), thread, message).await?;
            if names.is_empty() {
                println!("no deferred tool matched");
            } else {
                println!("promoted: {}", names.join(", "));
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Audit { command, json } => {
            let verdict = toolhost_audit::audit(command);
            let message = match &verdict {
                toolhost_audit::Verdict::Block { message, .. } | toolhost_audit::Verdict::Warn { message } => {
                    message.trim().to_string()
                }
                toolhost_audit::Verdict::Pass => String::new(),
            };
            if *json {
                println!("{}", serde_json::json!({"verdict": verdict.as_str(), "message": message}));
            } else if message.is_empty() {
                println!("{}", verdict.as_str());
            } else {
                println!("{}: {message}", verdict.as_str());
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Serve {
            http,
            thread,
            allow_host,
            token,
            insecure_no_auth,
            groups,
            model,
            tools,
            exclude,
            max_sessions,
            session_idle_timeout,
            thread_ttl,
        } => {
            // Read here rather than by clap: clap takes an empty variable for an unset one, and
            // an empty token must be refused, never mean "no authentication".
            let token = match token {
                Some(t) => Some(t.clone()),
                None => std::env::var("TOOLHOST_SERVE_TOKEN").ok(),
            };
            let request = AssemblyRequest { groups: groups.clone(), model_name: model.clone(), ..Default::default() };
            let mut opts = crate::server::ServeOptions {
                http: http.clone(),
                thread: thread.clone(),
                allow_hosts: allow_host.clone(),
                // Only HTTP uses a token; there an empty one is an error, never "no auth".
                token: if http.is_some() { token } else { None },
                insecure_no_auth: *insecure_no_auth,
                request,
                filter: crate::server::ToolFilter { only: tools.clone(), exclude: exclude.clone() },
                limits: Default::default(),
            };
            // Before loading anything: a refused start should say so at once.
            if let Some(addr) = http {
                crate::server::check_auth(&opts.http_options(addr)?)?;
            }
            // The `toolhost:` section now; the rest of the config and the components load in the
            // background while the first session starts (a cold start compiles them).
            let mut limits = crate::config::load(&cli.config)
                .with_context(|| format!("cannot load {}", cli.config.display()))?
                .config
                .toolhost
                .serve;
            if let Some(n) = max_sessions {
                anyhow::ensure!(*n >= 1, "--max-sessions must be at least 1");
                limits.max_sessions = *n;
            }
            if let Some(s) = session_idle_timeout {
                anyhow::ensure!(*s >= 1, "--session-idle-timeout must be at least 1 second");
                limits.session_idle_timeout_s = *s;
            }
            if let Some(s) = thread_ttl {
                limits.thread_ttl_s = *s;
            }
            opts.limits = limits;
            let for_open = cli.clone();
            let host: crate::server::HostOpening = Box::pin(async move {
                match tokio::task::spawn_blocking(move || open(&for_open)).await {
                    Ok(Ok(host)) => Ok(std::sync::Arc::new(host)),
                    Ok(Err(e)) => Err(format!("{e:#}")),
                    Err(e) => Err(format!("opening the host failed: {e}")),
                }
            });
            crate::server::run(&cli.data_dir, host, opts).await?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Check => {
            let text = std::fs::read_to_string(&cli.config)
                .with_context(|| format!("cannot read {}", cli.config.display()))?;
            let errors = crate::config::validate(&text, &cli.config.display().to_string());
            if !errors.is_empty() {
                for e in &errors {
                    println!("error: {e}");
                }
                println!("{} error(s)", errors.len());
                return Ok(ExitCode::FAILURE);
            }
            let host = open(&cli)?;
            let mut n_err = 0;
            for p in host.problems() {
                let tag = if p.severity == Severity::Error {
                    n_err += 1;
                    "error"
                } else {
                    "warning"
                };
                println!("{tag}: {}", p.message);
            }
            let assembly = host.get_available_tools(&AssemblyRequest::default()).await;
            println!(
                "{}: {} error(s), {} warning(s); {} tool(s) assemble",
                cli.config.display(),
                n_err,
                host.problems().len() - n_err,
                assembly.tools.len()
            );
            Ok(if n_err > 0 { ExitCode::FAILURE } else { ExitCode::SUCCESS })
        }
    }
}
