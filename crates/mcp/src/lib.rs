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

pub use config::{ConfigError, ExtensionsConfig, McpServerConfig, Routing, RoutingMode, Transport};
pub use manager::{
    embedded_in_another_program, runs_this_binary, ConfigSource, EnvLookup, McpManager, McpTools, ServerReport,
};
pub use pool::SessionError;
pub use session::ConnectError;
pub use tool::{exposed_name, invalid_name_warning, is_valid_tool_name, McpTool};
