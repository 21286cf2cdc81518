//! Why a component call produced no result: every way a call can end without one, each naming
//! what happened and the Python exception DeerFlow would report.

use std::time::Duration;

/// Why a component call produced no result.
#[derive(Debug, thiserror::Error)]
pub enum ComponentCallError {
    #[error("timed out after {0:?} and was stopped")]
    /// The call ran past its `timeout_s`.
    Timeout(Duration),
    #[error("was cancelled by its caller and stopped")]
    /// The caller gave the call up (an MCP client's `notifications/cancelled`).
    Cancelled,
    #[error("timed out after {timeout:?} waiting for a free slot ({queue}); it did not run")]
    /// No slot freed up within the call's timeout; `queue` names the queue it waited in.
    QueueTimeout {
        /// The call's timeout.
        timeout: Duration,
        /// The queue it waited in.
        queue: String,
    },
    #[error("held more than {0} open handles (files, directories, streams) at once and was stopped; capabilities.handles sets the limit")]
    /// The call held more open handles than `capabilities.handles` allows.
    TooManyHandles(usize),
    #[error("exceeded its memory limit of {0} MiB and was stopped")]
    /// The instance grew past its `memory_mb` (MiB).
    Memory(u64),
    #[error("returned {size} bytes of output, over its limit of {limit} bytes")]
    /// The result was larger than `output_bytes`.
    OutputTooLarge {
        /// The size returned, in bytes.
        size: u64,
        /// The limit, in bytes.
        limit: u64,
    },
    /// A result whose content blocks break the contract (see `content`).
    #[error("returned {0}")]
    InvalidContent(String),
    #[error("crashed: {0}")]
    /// The component trapped (a panic, an unreachable, a bad memory access).
    Trap(String),
    #[error("could not start: {0}")]
    /// The component could not be instantiated (an import not granted, a start trap).
    Instantiate(String),
    #[error("has no tool named '{0}'")]
    /// The component has no tool of that name.
    UnknownTool(String),
    #[error("rejected the arguments: {0}")]
    /// The component refused the arguments; the text names what is wrong.
    InvalidArguments(String),
    #[error("failed: {0}")]
    /// The tool failed; the text says why (`SomeError: detail` reads as a raised exception).
    Failed(String),
}

impl ComponentCallError {
    /// The Python exception DeerFlow would report for this failure.
    pub fn exception_class(&self) -> &'static str {
        match self {
            Self::Timeout(_) | Self::QueueTimeout { .. } => "TimeoutError",
            Self::Cancelled => "CancelledError",
            Self::Memory(_) => "MemoryError",
            Self::TooManyHandles(_) => "OSError",
            Self::InvalidContent(_) => "ValueError",
            _ => "RuntimeError",
        }
    }
}
