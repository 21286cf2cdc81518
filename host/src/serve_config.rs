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
    /// HTTP: sessions one client address (an IPv6 client's /64) may hold at once, so that one
    /// client cannot take every session for the idle timeout; unset: a quarter of `max_sessions`.
    #[serde(deserialize_with = "max_sessions_per_client")]
    pub max_sessions_per_client: Option<usize>,
    /// HTTP: a connection that has not sent a complete request head this long after it opened,
    /// or after its last response (an idle keep-alive connection), is closed.
    #[serde(deserialize_with = "header_timeout_s")]
    pub header_timeout_s: u64,
    /// HTTP: a POST whose body has not fully arrived this long after its head is answered 408.
    #[serde(deserialize_with = "body_timeout_s")]
    pub body_timeout_s: u64,
    /// HTTP: TCP connections open at once (each holds a file descriptor); lowered at start when
    /// the process's file limit (`ulimit -n`) cannot hold them beside the rest of the host.
    #[serde(deserialize_with = "max_connections")]
    pub max_connections: usize,
    /// HTTP: connections one client address may hold; unset: a quarter of `max_connections`.
    #[serde(deserialize_with = "max_connections_per_client")]
    pub max_connections_per_client: Option<usize>,
    /// HTTP: connections kept for clients that passed the token check; the others may hold only
    /// `max_connections` minus these. Unset: an eighth of `max_connections`.
    #[serde(deserialize_with = "reserved_connections")]
    pub reserved_connections: Option<usize>,
}

/// Two `serve` keys that contradict each other.
#[derive(Debug, thiserror::Error)]
#[error("{key} ({value}) must be at most {limit_key} ({limit}){why}")]
pub struct ServeConfigError {
    key: &'static str,
    value: usize,
    limit_key: &'static str,
    limit: usize,
    why: &'static str,
}

/// `deserialize_with` for the `serve:` section: each key in its range, then
/// [`ServeConfig::check`].
pub fn checked<'de, D: serde::Deserializer<'de>>(d: D) -> Result<ServeConfig, D::Error> {
    let c = <ServeConfig as serde::Deserialize>::deserialize(d)?;
    c.check().map_err(serde::de::Error::custom)?;
    Ok(c)
}

impl Default for ServeConfig {
    fn default() -> Self {
        Self {
            max_sessions: 1000,
            session_idle_timeout_s: 300,
            thread_ttl_s: 86_400,
            sse_poll_after_s: 0,
            max_sessions_per_client: None,
            header_timeout_s: 10,
            body_timeout_s: 30,
            max_connections: 1024,
            max_connections_per_client: None,
            reserved_connections: None,
        }
    }
}

impl ServeConfig {
    /// The keys that must agree with each other do.
    pub fn check(&self) -> Result<(), ServeConfigError> {
        let at_most = |key, value: Option<usize>, limit_key, limit: usize, why| match value {
            Some(value) if value > limit => Err(ServeConfigError { key, value, limit_key, limit, why }),
            _ => Ok(()),
        };
        at_most("max_sessions_per_client", self.max_sessions_per_client, "max_sessions", self.max_sessions, "")?;
        at_most(
            "max_connections_per_client",
            self.max_connections_per_client,
            "max_connections",
            self.max_connections,
            "",
        )?;
        at_most(
            "reserved_connections",
            self.reserved_connections,
            "max_connections",
            self.max_connections - 1,
            " minus 1, so that a new connection always has a slot to present its token in",
        )
    }

    /// `max_sessions_per_client`, or a quarter of `max_sessions`; between 1 and `max_sessions`
    /// (a `--max-sessions` flag may have lowered that below the configured share).
    pub fn sessions_per_client(&self) -> usize {
        self.max_sessions_per_client.unwrap_or(self.max_sessions.div_ceil(4)).clamp(1, self.max_sessions.max(1))
    }

    /// `header_timeout_s` as a duration.
    pub fn header_timeout(&self) -> Duration {
        Duration::from_secs(self.header_timeout_s)
    }

    /// `body_timeout_s` as a duration.
    pub fn body_timeout(&self) -> Duration {
        Duration::from_secs(self.body_timeout_s)
    }

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

fn optional<'de, D: serde::Deserializer<'de>>(d: D, key: &str, min: u64, max: u64) -> Result<Option<usize>, D::Error> {
    bounded(d, key, min, max).map(|n| Some(n as usize))
}

fn max_sessions_per_client<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<usize>, D::Error> {
    optional(d, "max_sessions_per_client", 1, 1_000_000)
}

fn header_timeout_s<'de, D: serde::Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    bounded(d, "header_timeout_s", 1, 600)
}

fn body_timeout_s<'de, D: serde::Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    bounded(d, "body_timeout_s", 1, 3600)
}

// At least 2: one slot may be reserved and one must stay for a connection to present its token.
fn max_connections<'de, D: serde::Deserializer<'de>>(d: D) -> Result<usize, D::Error> {
    bounded(d, "max_connections", 2, 1_000_000).map(|n| n as usize)
}

fn max_connections_per_client<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<usize>, D::Error> {
    optional(d, "max_connections_per_client", 1, 1_000_000)
}

fn reserved_connections<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<usize>, D::Error> {
    optional(d, "reserved_connections", 0, 1_000_000)
}
