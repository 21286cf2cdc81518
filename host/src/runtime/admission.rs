//! Admission of component calls: a fair queue per thread and one for the whole process, both
//! below the instance pool, so that one caller (a thread, a `serve` session) can fill its own
//! share and then waits in line instead of taking every instance and making everyone else's
//! calls fail. Waiting counts against the call's own deadline.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::call_error::ComponentCallError;
use super::capabilities::limits::MAX_CONCURRENT_CALLS;

/// How many component calls may run at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConcurrencyLimits {
    /// In the whole process (at most [`MAX_CONCURRENT_CALLS`]).
    pub global: usize,
    /// In one thread.
    pub per_thread: usize,
}

impl Default for ConcurrencyLimits {
    fn default() -> Self {
        Self { global: 64, per_thread: 16 }
    }
}

/// The `toolhost:` section: settings of toolhost itself, beside DeerFlow's sections (DeerFlow's
/// loader ignores top-level keys it does not know).
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ToolhostConfig {
    /// Component calls running at once in the whole process; more wait in line (first come,
    /// first served) within their own `timeout_s`.
    #[serde(deserialize_with = "concurrent_calls")]
    pub concurrent_calls: usize,
    /// Component calls running at once in one thread (one `serve` session is one thread).
    #[serde(deserialize_with = "concurrent_calls_per_thread")]
    pub concurrent_calls_per_thread: usize,
    /// `toolhost serve`: sessions, connections and thread expiry.
    #[serde(deserialize_with = "crate::serve_config::checked")]
    pub serve: crate::serve_config::ServeConfig,
    /// What each stdio MCP server of `extensions_config.json` may reach, by server name.
    pub mcp_servers: indexmap::IndexMap<String, crate::config::ProcessGrantConfig>,
    /// What each `acp_agents` entry may reach, by agent name.
    pub acp_agents: indexmap::IndexMap<String, crate::config::ProcessGrantConfig>,
}

impl Default for ToolhostConfig {
    fn default() -> Self {
        let d = ConcurrencyLimits::default();
        Self {
            concurrent_calls: d.global,
            concurrent_calls_per_thread: d.per_thread,
            serve: Default::default(),
            mcp_servers: Default::default(),
            acp_agents: Default::default(),
        }
    }
}

impl ToolhostConfig {
    /// The queue sizes this section asks for.
    pub fn concurrency(&self) -> ConcurrencyLimits {
        ConcurrencyLimits { global: self.concurrent_calls, per_thread: self.concurrent_calls_per_thread }
    }
}

fn concurrent_calls<'de, D: serde::Deserializer<'de>>(d: D) -> Result<usize, D::Error> {
    d.deserialize_any(super::capabilities::limits::IntVisitor(super::capabilities::limits::CONCURRENT_CALLS))
        .map(|n| n as usize)
}

fn concurrent_calls_per_thread<'de, D: serde::Deserializer<'de>>(d: D) -> Result<usize, D::Error> {
    d.deserialize_any(super::capabilities::limits::IntVisitor(super::capabilities::limits::CONCURRENT_CALLS_PER_THREAD))
        .map(|n| n as usize)
}

/// The right to run one call until `deadline`; dropping it lets the next waiting call in.
#[derive(Debug)]
pub struct CallPermit {
    pub(super) deadline: Instant,
    _thread: OwnedSemaphorePermit,
    _global: OwnedSemaphorePermit,
}

impl CallPermit {
    /// When the call must have ended (its timeout counted from when it asked to run).
    pub fn deadline(&self) -> Instant {
        self.deadline
    }
}

/// The queues.
pub(super) struct Admission {
    limits: ConcurrencyLimits,
    global: Arc<Semaphore>,
    /// Each thread's queue; idle ones are swept as the map grows.
    threads: Mutex<ThreadQueues>,
}

struct ThreadQueues {
    by_thread: HashMap<String, Arc<Semaphore>>,
    /// Sweep idle queues when the map reaches this size (amortised: it doubles).
    sweep_at: usize,
}

impl Admission {
    pub(super) fn new(limits: ConcurrencyLimits) -> Self {
        let limits = ConcurrencyLimits {
            global: limits.global.clamp(1, MAX_CONCURRENT_CALLS),
            per_thread: limits.per_thread.clamp(1, MAX_CONCURRENT_CALLS),
        };
        Self {
            limits,
            global: Arc::new(Semaphore::new(limits.global)),
            threads: Mutex::new(ThreadQueues { by_thread: HashMap::new(), sweep_at: 1024 }),
        }
    }

    pub(super) fn limits(&self) -> ConcurrencyLimits {
        self.limits
    }

    fn thread_queue(&self, thread_id: &str) -> Arc<Semaphore> {
        let mut q = self.threads.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(sem) = q.by_thread.get(thread_id) {
            return sem.clone();
        }
        if q.by_thread.len() >= q.sweep_at {
            // A queue only the map holds has no call running or waiting: forget it.
            q.by_thread.retain(|_, sem| Arc::strong_count(sem) > 1);
            q.sweep_at = (q.by_thread.len() * 2).max(1024);
        }
        let sem = Arc::new(Semaphore::new(self.limits.per_thread));
        q.by_thread.insert(thread_id.to_string(), sem.clone());
        sem
    }

    /// Wait (first come, first served) for a slot in `thread_id`'s queue, then in the
    /// process's, for at most `timeout`; the permit's deadline is `timeout` from now.
    pub(super) async fn admit(&self, thread_id: &str, timeout: Duration) -> Result<CallPermit, ComponentCallError> {
        let start = Instant::now();
        let deadline = start + timeout;
        // The thread's own queue first: a thread that has filled its share holds no place in
        // the global queue while it waits, so it cannot crowd out other threads there.
        let thread =
            acquire(self.thread_queue(thread_id), deadline).await.ok_or_else(|| ComponentCallError::QueueTimeout {
                timeout,
                queue: format!("thread {thread_id} already runs {} calls", self.limits.per_thread),
            })?;
        let global = acquire(self.global.clone(), deadline).await.ok_or_else(|| ComponentCallError::QueueTimeout {
            timeout,
            queue: format!("the host already runs {} calls", self.limits.global),
        })?;
        Ok(CallPermit { deadline, _thread: thread, _global: global })
    }
}

/// A permit of `sem` by `deadline`, in line behind earlier waiters. A free permit is taken
/// without arming a timer (tokio hands freed permits to waiters first, so one is free only when
/// nobody waits).
async fn acquire(sem: Arc<Semaphore>, deadline: Instant) -> Option<OwnedSemaphorePermit> {
    match sem.clone().try_acquire_owned() {
        Ok(p) => Some(p),
        Err(_) => tokio::time::timeout_at(deadline.into(), sem.acquire_owned()).await.ok()?.ok(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_full_thread_queues_while_other_threads_run() {
        let a = Admission::new(ConcurrencyLimits { global: 3, per_thread: 2 });
        let t = Duration::from_secs(30);
        let p1 = a.admit("busy", t).await.unwrap();
        let p2 = a.admit("busy", t).await.unwrap();
        // The busy thread's third call waits...
        let waiting = a.admit("busy", Duration::from_millis(50)).await.unwrap_err();
        assert!(waiting.to_string().contains("thread busy already runs 2 calls"), "{waiting}");
        // ...while another thread still gets the last global slot, and then the host is full.
        let other = a.admit("other", t).await.unwrap();
        let full = a.admit("third", Duration::from_millis(50)).await.unwrap_err();
        assert!(full.to_string().contains("the host already runs 3 calls"), "{full}");
        // A slot freed goes to the next in line.
        drop(p1);
        let p3 = a.admit("busy", t).await.unwrap();
        assert!(p3.deadline() > Instant::now());
        drop((p2, p3, other));
        assert_eq!(a.global.available_permits(), 3);
    }

    #[tokio::test]
    async fn thread_queues_are_forgotten_when_unused() {
        let a = Admission::new(ConcurrencyLimits { global: 4, per_thread: 1 });
        for i in 0..3000 {
            drop(a.admit(&format!("t{i}"), Duration::from_secs(5)).await.unwrap());
        }
        assert!(a.threads.lock().unwrap().by_thread.len() <= 1024);
        // A queue in use survives a sweep.
        let held = a.admit("kept", Duration::from_secs(5)).await.unwrap();
        for i in 0..3000 {
            drop(a.admit(&format!("u{i}"), Duration::from_secs(5)).await.unwrap());
        }
        assert!(a.admit("kept", Duration::from_millis(20)).await.is_err(), "still the same full queue");
        drop(held);
    }
}
