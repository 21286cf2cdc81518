//! toolhost's MCP client layer: reads DeerFlow's `extensions_config.json`, connects to the MCP
//! servers it lists (stdio child processes, streamable HTTP, legacy SSE; OAuth header injection),
//! discovers their tools in parallel, and exposes each as a [`toolhost_core::Tool`].
//!
//! Entry point: [`McpManager`]. `manager.tools().await?` gives the current [`McpTools`]; each
//! [`McpTool`] is a `Tool` with `ToolSource::Mcp { server }`.

pub mod config;
mod exact;
mod manager;
pub mod oauth;
mod pool;
mod session;
pub mod sse;
mod tool;

/// Set (to "1") in the environment of every stdio MCP server toolhost starts, so that a toolhost
/// started that way knows it: `toolhost serve` then starts no MCP servers of its own, and a
/// config that lists toolhost itself stops at one level.
pub const CHILD_MARKER: &str = "TOOLHOST_MCP_CHILD";

/// Sent on every HTTP request toolhost's MCP client makes, with [`instance_id`]: a
/// `toolhost serve --http` that receives its own id knows an `extensions_config.json` entry names
/// its own URL — the HTTP counterpart of [`CHILD_MARKER`] — and refuses at once, where it would
/// otherwise hold the request until its host opens, which waits for that request.
pub const INSTANCE_HEADER: &str = "toolhost-instance";

/// This process's id for [`INSTANCE_HEADER`]: random, made once.
pub fn instance_id() -> &'static str {
    static ID: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    ID.get_or_init(|| {
        use std::io::Read as _;
        let mut bits = [0u8; 16];
        let random = std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut bits));
        if random.is_err() {
            // No urandom: unique enough for telling this process from others.
            use sha2::Digest as _;
            let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
            let seed = format!("{}-{}-{:p}", std::process::id(), now.as_nanos(), &bits);
            bits.copy_from_slice(&sha2::Sha256::digest(seed.as_bytes())[..16]);
        }
        hex::encode(bits)
    })
}

pub use config::{ConfigError, ExtensionsConfig, McpServerConfig, Routing, RoutingMode, Transport};
pub use manager::{embedded_in_another_program, runs_this_binary, ConfigSource, McpManager, McpTools, ServerReport};
pub use pool::SessionError;
pub use session::ConnectError;
pub use tool::{exposed_name, invalid_name_warning, is_valid_tool_name, McpTool};
pub use toolhost_core::Environment;
