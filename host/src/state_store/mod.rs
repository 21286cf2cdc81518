//! Where thread state lives between calls, behind one trait: [`StateStore`]. The embedded store
//! (the default) keeps it in memory and, for the CLI, in `<thread>/host/state.json`; the
//! PostgreSQL store (`state_store: {url: postgres://…}`) keeps it in one table, so that several
//! `serve` replicas share threads. Either way a turn's updates are merged with DeerFlow's
//! reducers ([`ThreadState::apply_turn`]) one turn at a time per thread.

mod embedded;
mod postgres;

use std::sync::Arc;

use async_trait::async_trait;
use toolhost_core::state::ReducerError;
use toolhost_core::{FsError, StateUpdate, ThreadFs, ThreadState};

pub use embedded::ThreadStore;
pub use postgres::{PostgresStateStore, POSTGRES_SCHEMA_VERSION, POSTGRES_TABLE};

/// One result per update of a turn: a refused update (a reducer raised) is skipped, the others
/// are applied.
pub type TurnResults = Vec<Result<(), ReducerError>>;

/// Thread state storage. `apply` is atomic per thread: the updates of one turn are merged into
/// the latest stored state and written back before another turn of that thread (in this process
/// or, for a shared store, in any process) can read it to merge its own.
#[async_trait]
pub trait StateStore: Send + Sync {
    /// The thread's current state (a fresh thread's is empty).
    async fn get(&self, fs: &ThreadFs) -> Result<ThreadState, StateError>;

    /// Merge the updates of one model turn, in call order, with DeerFlow's reducers, and store
    /// the result.
    async fn apply(&self, fs: &ThreadFs, updates: &[&StateUpdate]) -> Result<TurnResults, StateError>;

    /// Drop what this process keeps in memory for the thread (its stored state stays).
    fn forget(&self, thread_id: &str);

    /// The thread expired (its directory was removed): remove its stored state too.
    async fn remove(&self, thread_id: &str) -> Result<(), StateError>;

    /// Where state is kept, for logs and `--explain`-style output (never a password).
    fn describe(&self) -> String;

    /// Make sure the store can be used (connect, create what is missing): a start-up check, so
    /// that a wrong setting is reported before the first call rather than by it.
    async fn check(&self) -> Result<(), StateError> {
        Ok(())
    }
}

/// `state_store:` in config.yaml (toolhost's own key; DeerFlow ignores it). Absent: the
/// embedded store.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StateStoreConfig {
    /// `postgres://user:password@host:port/dbname` (or `postgresql://`, or libpq's
    /// `key=value` form). `$VAR` is expanded like every config value, so the password can come
    /// from the environment: `url: $TOOLHOST_STATE_URL`.
    pub url: String,
    /// Connections the pool keeps at most (default 4).
    #[serde(default = "default_pool_size")]
    pub pool_size: usize,
}

fn default_pool_size() -> usize {
    4
}

/// The store a config asks for: PostgreSQL when `state_store.url` is set, else the embedded one
/// (`persist`: also in the thread's `host/state.json`). Connecting happens on first use (or in
/// [`StateStore`]'s owner's start-up check); a URL that cannot be parsed is an error here.
pub fn open_store(config: Option<&StateStoreConfig>, persist: bool) -> Result<Arc<dyn StateStore>, StateError> {
    match config {
        None => Ok(Arc::new(ThreadStore::new(persist))),
        Some(c) => Ok(Arc::new(PostgresStateStore::new(c)?)),
    }
}

#[derive(Debug, thiserror::Error)]
/// Why a thread's state cannot be read or written.
pub enum StateError {
    #[error("thread state of '{thread}' is not valid: {message}")]
    /// The stored state is not valid.
    Corrupt {
        /// The thread's id.
        thread: String,
        /// What is wrong.
        message: String,
    },
    #[error("cannot read thread state of '{thread}': {source}")]
    /// The stored state cannot be read.
    Read {
        /// The thread's id.
        thread: String,
        /// The underlying error.
        source: FsError,
    },
    #[error("cannot write thread state of '{thread}': {source}")]
    /// The state cannot be written.
    Write {
        /// The thread's id.
        thread: String,
        /// The underlying error.
        source: FsError,
    },
    #[error("thread state of '{thread}' in PostgreSQL ({target}): {message}")]
    /// The database could not be reached, or a statement failed; the turn's updates were not
    /// stored (its transaction was rolled back or never committed).
    Database {
        /// The thread's id.
        thread: String,
        /// Which database (host, port, database name; never the password).
        target: String,
        /// What went wrong.
        message: String,
    },
    #[error("state_store.url: {0}")]
    /// The `state_store:` setting is unusable (a bad URL, an unreachable server at start-up, a
    /// schema newer than this toolhost).
    Config(String),
    #[error(transparent)]
    /// A reducer refused an update (DeerFlow raises the same error).
    Reducer(#[from] ReducerError),
}

/// Whether every update of a turn is empty (nothing to store).
fn nothing_to_store(updates: &[&StateUpdate]) -> bool {
    updates.iter().all(|u| u.is_empty())
}
