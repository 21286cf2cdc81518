//! The types every part of toolhost shares: the [`Tool`] trait through which the host sees every
//! tool whatever its source, what a call returns ([`ToolOutcome`], DeerFlow's `ToolMessage` plus
//! `Command(update=…)`), thread state with DeerFlow's reducers, the thread directory layout and the thread filesystem layer through which host code touches thread files.

pub mod client;
pub mod paths;
pub mod state;
pub mod tempname;
pub mod threadfs;
pub mod tool;
pub mod untrusted;

pub use client::{
    Client, ClientRequests, ElicitAction, Elicited, Role, SamplingAnswer, SamplingMessage, SamplingRequest,
};
pub use paths::{ThreadPaths, VIRTUAL_ACP, VIRTUAL_SKILLS, VIRTUAL_USER_DATA};
pub use state::{StateUpdate, ThreadState};
pub use threadfs::{DirHandle, FsError, SharedDir, SharedRoots, ThreadDir, ThreadFs, ThreadFsError, Threads};
pub use tool::{
    CallContext, CancelSignal, CatalogSlot, ContentPart, ErrorKind, LogLevel, LogLine, LogSink, Progress, ProgressSink,
    Status, Tool, ToolException, ToolOutcome, ToolSource, ToolSpec,
};
