//! What the library reports: [`HostError`] when an operation cannot be carried out, and the
//! [`Problem`]s found while building a host from its config (an entry refused, a tool left out),
//! which never stop the host from opening.

use crate::config::ConfigLoadError;
use crate::state_store::StateError;

/// Why a host could not be opened or a thread could not be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HostError {
    /// The config file cannot be read or is not valid (the message has file, line and column).
    #[error(transparent)]
    Config(#[from] ConfigLoadError),
    /// The wasm engine or its precompile cache could not be set up.
    #[error("cannot start the wasm runtime: {0}")]
    Runtime(String),
    /// A thread id that cannot name a directory.
    #[error(transparent)]
    Paths(#[from] toolhost_core::paths::PathsError),
    /// A thread's directory cannot be opened (or one was replaced by a link).
    #[error(transparent)]
    ThreadFs(#[from] toolhost_core::ThreadFsError),
    /// The thread's state cannot be read or written.
    #[error(transparent)]
    State(#[from] StateError),
    /// Tool calls run on tokio (components on its blocking pool): call from a tokio runtime.
    #[error("toolhost calls must run inside a tokio runtime (e.g. #[tokio::main]); none is running here")]
    NoTokioRuntime,
    /// A custom agent's config is missing or malformed (the message names the file).
    #[error(transparent)]
    Agent(#[from] toolhost_subagents::agents::AgentError),
}

/// A problem found while building the host from config: the entry and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Problem {
    /// Errors refuse a tool; warnings leave something out or note it.
    pub severity: Severity,
    /// What is wrong and where (file, line and column when it is in the config).
    pub message: String,
}

impl Problem {
    pub(crate) fn warning(message: impl Into<String>) -> Self {
        Self { severity: Severity::Warning, message: message.into() }
    }

    pub(crate) fn error(message: impl Into<String>) -> Self {
        Self { severity: Severity::Error, message: message.into() }
    }
}

/// How serious a [`Problem`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// A tool was refused (a bad entry, a component that does not load).
    Error,
    /// Something was left out or needs attention; everything else works.
    Warning,
}
