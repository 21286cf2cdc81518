//! Native tool families and the adapter that shows a wasm component's tool as a [`Tool`].
//!
//! [`Tool`]: toolhost_core::Tool

pub mod component;

use crate::assembly::ConfigEntryState;
use crate::config::{LoadedConfig, ToolConfig};

/// The config entry of host bash.
pub fn bash_entry(_tc: &ToolConfig, _config: &LoadedConfig) -> ConfigEntryState {
    ConfigEntryState::Failed("host bash is not wired yet".into())
}

/// One line about host bash confinement, for `toolhost tools --explain`.
pub fn confinement_line() -> String {
    "not wired yet".to_string()
}
