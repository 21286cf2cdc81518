//! The `serve` keys of the `toolhost:` config section: always parsed (a config that sets them
//! loads whether or not this build has the server), used by `toolhost::server`.

use std::time::Duration;

/// The `serve` keys of the `toolhost:` config section (flags override them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ServeConfig {
    /// HTTP sessions open at once; an `initialize` past it is refused (503) until one ends.
    #[serde(deserialize_with = "max_sessions")]
    pub max_sessions: usize,
    /// An HTTP session with no request for this long is closed (its thread stays).
    #[serde(deserialize_with = "session_idle_timeout_s")]
    pub session_idle_timeout_s: u64,
    /// A thread used through `serve` and then unused for this long has its directory removed;
    /// 0 keeps threads for ever.
    #[serde(deserialize_with = "thread_ttl_s")]
    pub thread_ttl_s: u64,
    /// HTTP: a `tools/call` whose SSE stream has been open this long has it ended with an event
    /// the client resumes from (GET with `Last-Event-ID`, SEP-1699), for proxies that cut long
    /// responses; 0 never ends one.
    #[serde(deserialize_with = "sse_poll_after_s")]
    pub sse_poll_after_s: u64,
}

impl Default for ServeConfig {
    fn default() -> Self {
        Self { max_sessions: 1000, session_idle_timeout_s: 300, thread_ttl_s: 86_400, sse_poll_after_s: 0 }
    }
}

impl ServeConfig {
    /// `session_idle_timeout_s` as a duration.
    pub fn session_idle_timeout(&self) -> Duration {
        Duration::from_secs(self.session_idle_timeout_s)
    }

    /// `sse_poll_after_s` as a duration; `None`: streams are not ended.
    pub fn sse_poll_after(&self) -> Option<Duration> {
        (self.sse_poll_after_s > 0).then(|| Duration::from_secs(self.sse_poll_after_s))
    }

    /// `thread_ttl_s` as a duration; `None`: threads are kept.
    pub fn thread_ttl(&self) -> Option<Duration> {
        (self.thread_ttl_s > 0).then(|| Duration::from_secs(self.thread_ttl_s))
    }
}

fn bounded<'de, D: serde::Deserializer<'de>>(d: D, key: &str, min: u64, max: u64) -> Result<u64, D::Error> {
    let n = <u64 as serde::Deserialize>::deserialize(d)?;
    if !(min..=max).contains(&n) {
        return Err(serde::de::Error::custom(format!("{key} must be between {min} and {max}")));
    }
    Ok(n)
}

fn max_sessions<'de, D: serde::Deserializer<'de>>(d: D) -> Result<usize, D::Error> {
    bounded(d, "max_sessions", 1, 1_000_000).map(|n| n as usize)
}

fn session_idle_timeout_s<'de, D: serde::Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    bounded(d, "session_idle_timeout_s", 1, 7 * 86_400)
}

fn sse_poll_after_s<'de, D: serde::Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    bounded(d, "sse_poll_after_s", 0, 86_400)
}

fn thread_ttl_s<'de, D: serde::Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    bounded(d, "thread_ttl_s", 0, 10 * 365 * 86_400)
}
