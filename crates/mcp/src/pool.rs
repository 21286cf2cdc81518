//! The live side of one configured server: its sessions, keyed by thread for stdio servers (each
//! thread gets its own process with the thread workspace as cwd, DeerFlow's pool) and a single
//! shared session for http/sse servers. A dead session is replaced on the next use.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Mutex;

use crate::config::{McpServerConfig, Transport};
use crate::session::{ConnectError, ServerHandle, Session};

/// `None` = the server-wide session (discovery, http/sse calls); `Some(thread)` = a stdio
/// session of that thread.
type SessionKey = Option<String>;

#[derive(Default)]
struct Slot(Mutex<Option<Arc<Session>>>);

pub(crate) struct ServerRuntime {
    handle: ServerHandle,
    sessions: Mutex<HashMap<SessionKey, Arc<Slot>>>,
}

#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    #[error(transparent)]
    Connect(#[from] ConnectError),
    #[error("no session within session_init_timeout ({0} s)")]
    Timeout(f64),
}

impl ServerRuntime {
    pub(crate) fn new(handle: ServerHandle) -> Self {
        Self { handle, sessions: Mutex::new(HashMap::new()) }
    }

    pub(crate) fn name(&self) -> &str {
        &self.handle.name
    }

    pub(crate) fn config(&self) -> &McpServerConfig {
        &self.handle.config
    }

    pub(crate) fn transport(&self) -> Transport {
        self.handle.transport
    }

    /// The live session for `thread` (ignored unless stdio), opening one if there is none or the
    /// last one died. `bounded` applies `session_init_timeout` to the connect.
    pub(crate) async fn session(
        &self,
        thread: Option<&str>,
        cwd: Option<&Path>,
        bounded: bool,
    ) -> Result<Arc<Session>, SessionError> {
        let key = self.key(thread);
        let slot = self.sessions.lock().await.entry(key).or_default().clone();
        // Held while connecting so that concurrent calls of one thread start one process.
        let mut current = slot.0.lock().await;
        if let Some(s) = current.as_ref().filter(|s| s.is_usable()) {
            return Ok(s.clone());
        }
        *current = None;
        let connect = self.handle.connect(cwd);
        let session = if bounded {
            let secs = self.handle.config.session_init_timeout;
            tokio::time::timeout(Duration::from_secs_f64(secs), connect)
                .await
                .map_err(|_| SessionError::Timeout(secs))??
        } else {
            connect.await?
        };
        let session = Arc::new(session);
        *current = Some(session.clone());
        Ok(session)
    }

    /// Drop `session` from its slot if it is still the current one (the next use reconnects).
    pub(crate) async fn forget(&self, thread: Option<&str>, session: &Arc<Session>) {
        let key = self.key(thread);
        let slot = self.sessions.lock().await.get(&key).cloned();
        if let Some(slot) = slot {
            let mut current = slot.0.lock().await;
            if current.as_ref().is_some_and(|s| Arc::ptr_eq(s, session)) {
                *current = None;
            }
        }
    }

    /// Close the stdio session of one thread.
    pub(crate) async fn close_thread(&self, thread: &str) {
        if self.handle.transport == Transport::Stdio {
            self.sessions.lock().await.remove(&Some(thread.to_string()));
        }
    }

    /// Close every session (their processes are killed when the last user lets go).
    pub(crate) async fn close_all(&self) {
        self.sessions.lock().await.clear();
    }

    fn key(&self, thread: Option<&str>) -> SessionKey {
        match self.handle.transport {
            Transport::Stdio => thread.map(str::to_string),
            Transport::Http | Transport::Sse => None,
        }
    }
}
