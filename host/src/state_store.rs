//! Where thread state lives between calls: in memory, and (for the CLI, where every call is a
//! new process) also as JSON under the thread's host dir. Updates of one thread are applied one
//! at a time with DeerFlow's reducers.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use toolhost_core::state::ReducerError;
use toolhost_core::{StateUpdate, ThreadPaths, ThreadState};

#[derive(Debug, thiserror::Error)]
pub enum StateError {
    #[error("thread state file {path} is not valid: {message}")]
    Corrupt { path: PathBuf, message: String },
    #[error("cannot write thread state {path}: {source}")]
    Write { path: PathBuf, source: std::io::Error },
    #[error(transparent)]
    Reducer(#[from] ReducerError),
}

/// Thread states, owned by the host.
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

    fn file(paths: &ThreadPaths) -> PathBuf {
        paths.host_dir().join("state.json")
    }

    fn load(&self, paths: &ThreadPaths) -> Result<ThreadState, StateError> {
        if !self.persist {
            return Ok(ThreadState::default());
        }
        let path = Self::file(paths);
        match std::fs::read_to_string(&path) {
            Ok(text) => serde_json::from_str(&text).map_err(|e| StateError::Corrupt { path, message: e.to_string() }),
            Err(_) => Ok(ThreadState::default()),
        }
    }

    /// The thread's current state.
    pub async fn get(&self, paths: &ThreadPaths) -> Result<ThreadState, StateError> {
        let slot = self.slot(&paths.thread_id);
        let mut guard = slot.lock().await;
        if guard.is_none() {
            *guard = Some(self.load(paths)?);
        }
        Ok(guard.clone().unwrap_or_default())
    }

    /// Merge updates (of one model turn, in call order) and persist. Returns one result per
    /// update: a refused update (a reducer raised) is skipped, the others are applied.
    pub async fn apply(
        &self,
        paths: &ThreadPaths,
        updates: &[&StateUpdate],
    ) -> Result<Vec<Result<(), ReducerError>>, StateError> {
        let slot = self.slot(&paths.thread_id);
        let mut guard = slot.lock().await;
        let mut state = match guard.take() {
            Some(s) => s,
            None => self.load(paths)?,
        };
        let errors = state.apply_turn(updates.iter().copied());
        if self.persist && updates.iter().any(|u| !u.is_empty()) {
            let path = Self::file(paths);
            let write = || -> std::io::Result<()> {
                std::fs::create_dir_all(paths.host_dir())?;
                let tmp = path.with_extension("json.tmp");
                std::fs::write(&tmp, serde_json::to_vec_pretty(&state).unwrap_or_default())?;
                std::fs::rename(&tmp, &path)
            };
            if let Err(source) = write() {
                *guard = Some(state);
                return Err(StateError::Write { path, source });
            }
        }
        *guard = Some(state);
        Ok(errors)
    }
}
