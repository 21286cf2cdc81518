//! The embedded state store (the default): thread state in memory, and (for the CLI, where
//! every call is a new process) also as JSON in the thread's host directory, read and written
//! through the thread filesystem layer (0600, atomic replace, size-capped read). Updates of one
//! thread are applied one at a time with DeerFlow's reducers. One process only: its memory is
//! not shared, so replicas use the PostgreSQL store.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use toolhost_core::{StateUpdate, ThreadFs, ThreadState};

use super::{StateError, StateStore, TurnResults};

/// The state file's name in the thread's host directory.
const STATE_FILE: &str = "state.json";
/// A state file larger than this is refused rather than parsed (state is promotions, marks,
/// artifacts and todos: kilobytes).
const STATE_FILE_MAX_BYTES: u64 = 64 << 20;

/// Thread states in this process (and optionally in each thread's `host/state.json`).
pub struct ThreadStore {
    persist: bool,
    threads: Mutex<HashMap<String, Arc<tokio::sync::Mutex<Option<ThreadState>>>>>,
}

impl ThreadStore {
    /// `persist`: keep each thread's state in `<thread>/host/state.json` as well.
    pub fn new(persist: bool) -> Self {
        Self { persist, threads: Mutex::new(HashMap::new()) }
    }

    fn slot(&self, thread_id: &str) -> Arc<tokio::sync::Mutex<Option<ThreadState>>> {
        self.threads.lock().unwrap_or_else(|p| p.into_inner()).entry(thread_id.to_string()).or_default().clone()
    }

    fn load(&self, fs: &ThreadFs) -> Result<ThreadState, StateError> {
        if !self.persist {
            return Ok(ThreadState::default());
        }
        let thread = || fs.thread_id().to_string();
        match fs.read_private(STATE_FILE, STATE_FILE_MAX_BYTES) {
            Ok(Some(bytes)) => serde_json::from_slice(&bytes)
                .map_err(|e| StateError::Corrupt { thread: thread(), message: e.to_string() }),
            Ok(None) => Ok(ThreadState::default()),
            Err(source) => Err(StateError::Read { thread: thread(), source }),
        }
    }
}

#[async_trait]
impl StateStore for ThreadStore {
    /// Drop the thread's state from memory (it is read from its file on next use).
    fn forget(&self, thread_id: &str) {
        self.threads.lock().unwrap_or_else(|p| p.into_inner()).remove(thread_id);
    }

    /// The state file lives in the thread's directory, removed with it: only memory is left.
    async fn remove(&self, thread_id: &str) -> Result<(), StateError> {
        self.forget(thread_id);
        Ok(())
    }

    fn describe(&self) -> String {
        if self.persist {
            "embedded (memory and <thread>/host/state.json)".into()
        } else {
            "embedded (memory)".into()
        }
    }

    /// The thread's current state.
    async fn get(&self, fs: &ThreadFs) -> Result<ThreadState, StateError> {
        let slot = self.slot(fs.thread_id());
        let mut guard = slot.lock().await;
        if guard.is_none() {
            *guard = Some(self.load(fs)?);
        }
        Ok(guard.clone().unwrap_or_default())
    }

    /// Merge updates (of one model turn, in call order) and persist. Returns one result per
    /// update: a refused update (a reducer raised) is skipped, the others are applied.
    async fn apply(&self, fs: &ThreadFs, updates: &[&StateUpdate]) -> Result<TurnResults, StateError> {
        let slot = self.slot(fs.thread_id());
        let mut guard = slot.lock().await;
        let mut state = match guard.take() {
            Some(s) => s,
            None => self.load(fs)?,
        };
        let errors = state.apply_turn(updates.iter().copied());
        if self.persist && !super::nothing_to_store(updates) {
            let bytes = serde_json::to_vec_pretty(&state).unwrap_or_default();
            if let Err(source) = fs.write_private(STATE_FILE, &bytes) {
                *guard = Some(state);
                return Err(StateError::Write { thread: fs.thread_id().to_string(), source });
            }
        }
        *guard = Some(state);
        Ok(errors)
    }
}
