//! toolhost: a WebAssembly component-based tool host for AI agents. It re-implements the tool
//! system of DeerFlow and runs config and community tools as wasm components that get only the
//! capabilities their config grants.
//!
//! Data flows one way: [`config`] → [`assembly`] → [`middleware`] (the pipeline) → a tool →
//! a state update merged into [`state_store`].

pub mod assembly;
pub mod bundled;
pub mod cli;
pub mod community;
pub mod config;
pub mod host;
pub mod middleware;
pub mod runtime;
pub mod server;
pub mod state_store;
pub mod tools;
pub mod wiring;

pub use host::{default_data_dir, CallResult, HostError, HostOptions, Problem, Severity, Toolhost};
pub use toolhost_core as core;
