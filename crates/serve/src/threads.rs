//! Which toolhost thread a request runs in, and how long a thread's files outlive their use.
//! A session has a thread of its own (random, `mcp-`/`stdio-`, never nameable by a client); a
//! request may name another one (`_meta["toolhost/thread"]`, or the `Toolhost-Thread` header),
//! so a client that opens a new session per call keeps its files. Threads used through `serve`
//! carry a marker; once unused for `thread_ttl_s` their directory is removed.

use std::collections::HashMap;
use std::os::unix::fs::DirBuilderExt as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use toolhost::Toolhost;

/// The `_meta` key of a request that names its thread.
pub const META_THREAD: &str = "toolhost/thread";
/// The HTTP header that names the thread, for clients that cannot set `_meta`.
pub const THREAD_HEADER: &str = "toolhost-thread";
/// The `_meta` key of a request that names its agent run (DeerFlow's `run_id`, one per user
/// message): `task`'s delegations are capped per run (`max_total_per_run`). Without it, a
/// session is one run.
pub const META_RUN: &str = "toolhost/run";
/// The HTTP header that names the run.
pub const RUN_HEADER: &str = "toolhost-run";
/// The longest run id a request may name.
pub const MAX_RUN_ID_BYTES: usize = 256;
/// Prefixes of the threads the server makes up for sessions; a client cannot name them, so
/// knowing a thread directory's name never lets anyone into another session's thread.
pub const RESERVED_PREFIXES: [&str; 2] = ["mcp-", "stdio-"];
/// In `<thread>/host/`: its modification time is the thread's last use through `serve`.
const MARKER: &str = "served";
/// A thread directory being removed is first renamed to this prefix (not a valid thread id).
const TRASH_PREFIX: &str = ".expired-";

/// Why a client's thread name is refused (answered as -32602).
pub fn check_client_thread(name: &str) -> Result<(), String> {
    let shown = super::jsonrpc::cap_text(name, 160);
    if toolhost_core::ThreadPaths::new(Path::new(""), name).is_err() {
        return Err(format!("invalid thread id '{shown}': use 1-128 characters of [A-Za-z0-9_-]"));
    }
    if RESERVED_PREFIXES.iter().any(|p| name.starts_with(p)) {
        return Err(format!(
            "invalid thread id '{shown}': the prefixes {} are reserved for the threads the server gives sessions",
            RESERVED_PREFIXES.join(", ")
        ));
    }
    Ok(())
}

/// A fresh thread id: `prefix` and 128 random bits in hex.
pub fn fresh_thread_id(prefix: &str) -> std::io::Result<String> {
    use ring::rand::SecureRandom as _;
    let mut bits = [0u8; 16];
    ring::rand::SystemRandom::new()
        .fill(&mut bits)
        .map_err(|_| std::io::Error::other("the system random number generator failed"))?;
    Ok(format!("{prefix}{}", hex::encode(bits)))
}

#[derive(Default)]
struct Live {
    holds: usize,
    used: bool,
}

/// The threads in use by this process, and the removal of those unused for too long.
pub struct ThreadKeeper {
    /// Set once the host is open; until then nothing is in its memory to forget.
    host: std::sync::OnceLock<Arc<Toolhost>>,
    threads_dir: PathBuf,
    /// `None`: thread directories are kept for ever.
    ttl: Option<Duration>,
    live: Mutex<HashMap<String, Live>>,
}

/// A thread kept from expiring while a session or a request uses it; dropping it lets go.
pub struct Hold {
    keeper: Arc<ThreadKeeper>,
    thread: String,
    /// A tool call (not a session, not a listing).
    call: bool,
}

impl Drop for Hold {
    fn drop(&mut self) {
        self.keeper.release(&self.thread, self.call);
    }
}

impl ThreadKeeper {
    /// A keeper of the threads under `data_dir`, removing those unused for `ttl`.
    pub fn new(data_dir: &Path, ttl: Option<Duration>) -> Arc<Self> {
        let threads_dir = data_dir.join("threads");
        Arc::new(Self { host: std::sync::OnceLock::new(), threads_dir, ttl, live: Mutex::new(HashMap::new()) })
    }

    /// The host is open: forget threads there from now on, and start sweeping.
    pub fn attach(self: &Arc<Self>, host: Arc<Toolhost>) {
        if self.host.set(host).is_ok() {
            self.spawn_sweeper();
        }
    }

    fn forget(&self, thread: &str) {
        if let Some(host) = self.host.get() {
            host.forget_thread(thread);
        }
    }

    fn live(&self) -> std::sync::MutexGuard<'_, HashMap<String, Live>> {
        self.live.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A session's own thread, held for as long as the session lives.
    pub fn hold_session(self: &Arc<Self>, thread: &str) -> Hold {
        self.live().entry(thread.to_string()).or_default().holds += 1;
        Hold { keeper: self.clone(), thread: thread.to_string(), call: false }
    }

    /// A request running in `thread`. A tool call (`call`) makes it a used thread, kept until it
    /// expires; a listing does not.
    pub fn enter(self: &Arc<Self>, thread: &str, call: bool) -> Hold {
        self.live().entry(thread.to_string()).or_default().holds += 1;
        Hold { keeper: self.clone(), thread: thread.to_string(), call }
    }

    fn release(&self, thread: &str, call: bool) {
        let anonymous = RESERVED_PREFIXES.iter().any(|p| thread.starts_with(p));
        let mut live = self.live();
        let Some(entry) = live.get_mut(thread) else { return };
        entry.used |= call;
        entry.holds = entry.holds.saturating_sub(1);
        let (used, idle) = (entry.used, entry.holds == 0);
        if call || !anonymous {
            // The expiry clock starts at the last use.
            self.mark_used(thread);
        }
        if !idle {
            return;
        }
        live.remove(thread);
        if !anonymous {
            return;
        }
        // Nobody can name this thread again: its state need not stay in memory, and if no tool
        // ever ran in it (a session that only listed tools, or named other threads), its
        // directory holds nothing but the empty layout.
        self.forget(thread);
        if !used {
            let dir = self.threads_dir.join(thread);
            if dir.exists() {
                let trash = self.threads_dir.join(format!("{TRASH_PREFIX}{thread}"));
                if std::fs::rename(&dir, &trash).is_ok() {
                    drop(live);
                    let _ = std::fs::remove_dir_all(&trash);
                }
            }
        }
    }

    fn mark_used(&self, thread: &str) {
        let root = self.threads_dir.join(thread);
        if !root.is_dir() {
            // Never materialized (nothing ran in it): nothing to keep or expire.
            return;
        }
        let host_dir = root.join("host");
        let touch = || -> std::io::Result<()> {
            if !host_dir.is_dir() {
                std::fs::DirBuilder::new().mode(0o700).recursive(true).create(&host_dir)?;
            }
            let f = std::fs::File::options().create(true).truncate(false).write(true).open(host_dir.join(MARKER))?;
            f.set_modified(SystemTime::now())
        };
        if let Err(e) = touch() {
            tracing::debug!(thread, "cannot mark the thread as used: {e}");
        }
    }

    /// Remove the directories of threads used through `serve`, not in use now, and last used
    /// longer ago than the TTL. Returns how many were removed.
    pub fn sweep(&self) -> usize {
        self.sweep_expired().len()
    }

    /// [`sweep`](Self::sweep), returning the threads removed.
    fn sweep_expired(&self) -> Vec<String> {
        let Some(ttl) = self.ttl else { return Vec::new() };
        let Ok(entries) = std::fs::read_dir(&self.threads_dir) else { return Vec::new() };
        let now = SystemTime::now();
        let mut removed = Vec::new();
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.starts_with(TRASH_PREFIX) {
                // Left by a removal that was interrupted.
                let _ = std::fs::remove_dir_all(entry.path());
                continue;
            }
            if toolhost_core::ThreadPaths::new(Path::new(""), &name).is_err() {
                continue;
            }
            let marker = entry.path().join("host").join(MARKER);
            let meta = match std::fs::symlink_metadata(&marker) {
                Ok(meta) if meta.is_file() => meta,
                // A session thread left by a process that stopped before it could clean up.
                _ if RESERVED_PREFIXES.iter().any(|p| name.starts_with(p)) => match entry.metadata() {
                    Ok(meta) => meta,
                    Err(_) => continue,
                },
                _ => continue,
            };
            let last_use = meta.modified().unwrap_or(now);
            if now.duration_since(last_use).unwrap_or_default() < ttl {
                continue;
            }
            let trash = {
                let live = self.live();
                if live.contains_key(&name) {
                    continue;
                }
                let trash = self.threads_dir.join(format!("{TRASH_PREFIX}{name}"));
                // Renamed while no request can enter the thread, so none sees half of it.
                match std::fs::rename(entry.path(), &trash) {
                    Ok(()) => {}
                    // Another replica sharing the threads directory removed it first.
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                    Err(e) => {
                        tracing::warn!(thread = %name, "cannot remove the expired thread: {e}");
                        continue;
                    }
                }
                self.forget(&name);
                trash
            };
            // `remove_dir_all` does not follow links: a link a tool left points nowhere it goes.
            if let Err(e) = std::fs::remove_dir_all(&trash) {
                tracing::warn!(thread = %name, "cannot remove the expired thread's files: {e}");
            }
            tracing::info!(thread = %name, "thread expired (unused for {}s)", ttl.as_secs());
            removed.push(name);
        }
        removed
    }

    /// Sweep now and then at intervals of half the TTL (between 1 s and 10 min).
    fn spawn_sweeper(self: &Arc<Self>) {
        let Some(ttl) = self.ttl else { return };
        let every = (ttl / 2).clamp(Duration::from_secs(1), Duration::from_secs(600));
        let keeper = Arc::downgrade(self);
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(every);
            loop {
                tick.tick().await;
                let Some(keeper) = keeper.upgrade() else { return };
                let host = keeper.host.get().cloned();
                let expired = match tokio::task::spawn_blocking(move || keeper.sweep_expired()).await {
                    Ok(expired) => expired,
                    Err(e) => {
                        tracing::warn!("thread sweeper: {e}");
                        continue;
                    }
                };
                // The state goes with the files (a shared store keeps it in its own table).
                for thread in expired {
                    if let Some(host) = &host {
                        if let Err(e) = host.remove_thread_state(&thread).await {
                            tracing::warn!(thread = %thread, "cannot remove the expired thread's state: {e}");
                        }
                    }
                }
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_thread_names_follow_deerflow_and_avoid_the_reserved_prefixes() {
        for ok in ["b6f1c1e2-5d7a-4c1e-9a61-0c1d2e3f4a5b", "thread_1", "stdio", "MCP-x"] {
            assert!(check_client_thread(ok).is_ok(), "{ok}");
        }
        for bad in ["", "../x", "a b", "a/b", "é", &"a".repeat(129)] {
            let e = check_client_thread(bad).unwrap_err();
            assert!(e.starts_with("invalid thread id '"), "{e}");
        }
        for reserved in ["mcp-0123", "stdio-x"] {
            assert!(check_client_thread(reserved).unwrap_err().contains("reserved"), "{reserved}");
        }
        assert!(check_client_thread(&"x/".repeat(10_000)).unwrap_err().len() < 400);
    }

    #[test]
    fn fresh_threads_are_random_and_valid() {
        let (a, b) = (fresh_thread_id("mcp-").unwrap(), fresh_thread_id("mcp-").unwrap());
        assert_ne!(a, b);
        assert!(a.len() == 36 && a[4..].chars().all(|c| c.is_ascii_hexdigit()), "{a}");
        assert!(toolhost_core::ThreadPaths::new(Path::new("/tmp"), &a).is_ok());
    }
}
