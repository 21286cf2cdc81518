//! toolhost: a WebAssembly component-based tool host for AI agents. It re-implements the tool
//! system of [DeerFlow](https://github.com/bytedance/deer-flow) — names, schemas, outputs, error
//! strings, middleware order, reducers — and runs config and community tools as wasm components
//! that get only the capabilities their config grants.
//!
//! Open a [`Toolhost`] from a DeerFlow `config.yaml` (or config text) with [`HostOptions`], take
//! a [`Thread`] handle and make [`ToolCall`]s; each [`CallResult`] holds DeerFlow's text, the
//! state update already merged into the thread's [`ThreadState`], and an [`ErrorKind`] for
//! errors. `docs/embedding.md` walks through it; `examples/embed.rs` is the shortest program.
//!
//! Data flows one way: config → [`assembly`] (DeerFlow's `get_available_tools`) → the middleware
//! pipeline → a tool → a state update merged with DeerFlow's reducers.
#![warn(missing_docs)]

pub mod assembly;
pub mod bundled;
mod community;
mod config;
mod error;
mod host;
mod middleware;
mod options;
pub mod provenance;
pub mod runtime;
mod serve_config;
pub mod state_store;
mod subagents;
mod tools;

pub use assembly::{AgentRun, AssemblyRequest, Builtin, BuiltinCondition, LayerKind, ToolLayer};
pub use config::{validate as validate_config, AppConfig, ConfigError, ConfigLoadError, TaskSupport};
pub use error::{HostError, Problem, Severity};
pub use host::{list_agents, AgentConfig, AgentError, CallOptions, CallResult, Thread, ToolCall, Toolhost};
pub use options::{ConfigSource, Environment, HostOptions};
pub use serve_config::ServeConfig;
pub use state_store::{StateError, StateStore, StateStoreConfig};
/// Harden this process before opening a host that may run host bash or confined MCP servers
/// and ACP agents: non-dumpable, so a command of the same uid cannot read toolhost's
/// `/proc/<pid>/environ` or memory. Call once, early in `main`.
pub use toolhost_confine::harden_process;
pub use toolhost_core as core;
pub use toolhost_core::{
    CallContext, CancelSignal, ErrorKind, LogLevel, LogLine, LogSink, ProgressSink, ThreadState, Tool, ToolOutcome,
    ToolSpec,
};

/// The `toolhost.serve` section of config text (session cap, idle timeout, thread TTL), read
/// before the rest of the host opens; `$VAR`s are taken from `env`.
pub fn serve_limits(text: &str, file: &str, env: &Environment) -> Result<ServeConfig, ConfigError> {
    Ok(config::parse(text, file, env)?.0.toolhost.serve)
}

/// The `trust:` section of config text (for commands that check signatures without opening a
/// host, such as `toolhost inspect`).
pub fn trust_config(text: &str, file: &str, env: &Environment) -> Result<provenance::TrustConfig, ConfigError> {
    Ok(config::parse(text, file, env)?.0.trust)
}

/// Call once when this process's binary is not toolhost but a program embedding the library (an
/// interpreter: the Python package does, on import). toolhost refuses to start a stdio MCP
/// server whose command is its own binary (it would serve itself, again and again); in an
/// embedding program that binary is the interpreter, which is what MCP servers commonly run.
pub fn embedded_in_another_program() {
    toolhost_mcp::embedded_in_another_program();
}

/// One line about host bash confinement on this machine (Landlock, seccomp, user namespaces),
/// for `toolhost tools --explain`.
pub fn confinement_line() -> String {
    toolhost_hostbash::confinement_status().to_string()
}
