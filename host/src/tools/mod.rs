//! Native tool families and the adapter that shows a wasm component's tool as a [`Tool`].
//!
//! [`Tool`]: toolhost_core::Tool

pub mod component;

/// One line about host bash confinement, for `toolhost tools --explain`.
pub fn confinement_line() -> String {
    toolhost_hostbash::confinement_status().to_string()
}
