//! The types every part of toolhost shares: the [`Tool`] trait through which the host sees every
//! tool whatever its source, what a call returns ([`ToolOutcome`], DeerFlow's `ToolMessage` plus
//! `Command(update=…)`), thread state with DeerFlow's reducers, the thread directory layout and the thread filesystem layer through which host code touches thread files.

pub mod client;
pub mod env;
pub mod paths;
pub mod state;
pub mod tempname;
pub mod threadfs;
pub mod tool;
pub mod untrusted;
pub mod usage;

pub use client::{
    Client, ClientRequests, ElicitAction, Elicited, Role, Root, SamplingAnswer, SamplingMessage, SamplingRequest,
};
pub use env::Environment;
pub use paths::{ThreadPaths, VIRTUAL_ACP, VIRTUAL_SKILLS, VIRTUAL_USER_DATA};
pub use state::{StateUpdate, ThreadState};
pub use threadfs::{DirHandle, FsError, SharedDir, SharedRoots, ThreadDir, ThreadFs, ThreadFsError, Threads};
pub use tool::{
    CallContext, CancelSignal, CatalogSlot, ContentPart, ErrorKind, LogLevel, LogLine, LogSink, Progress, ProgressSink,
    Status, Tool, ToolException, ToolOutcome, ToolSource, ToolSpec,
};

/// The largest character boundary of `text` at or below `max` bytes: where to cut a text to at
/// most `max` bytes without splitting a character (`str::floor_char_boundary`, stable only after
/// this workspace's MSRV).
pub fn floor_char_boundary(text: &str, max: usize) -> usize {
    if max >= text.len() {
        return text.len();
    }
    (0..=max).rev().find(|&i| text.is_char_boundary(i)).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    #[test]
    fn cuts_fall_on_character_boundaries() {
        let t = "aé€𝄞";
        let cuts: Vec<usize> = (0..=11).map(|m| super::floor_char_boundary(t, m)).collect();
        assert_eq!(cuts, [0, 1, 1, 3, 3, 3, 6, 6, 6, 6, 10, 10]);
    }
}
