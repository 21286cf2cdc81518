//! The limits capability: a tool's `capabilities.{timeout_s, memory_mb, output_bytes, handles}`,
//! each with the range it must fall in (also used by the top-level `toolhost:` section). Both the
//! loader and `toolhost check` read them through these checks, so an absurd value is a config
//! error with its line and column, never a panic further on.

use std::time::Duration;

use serde::Deserializer;

/// The largest linear memory an instance may have (a pooled slot's size): 4 GiB, all of wasm32.
pub use toolhost_engine::MAX_MEMORY_BYTES;

/// The most component calls that may run at once in one process: half the pool's 256
/// component instances, so a component built of a few core instances (Rust guests have three;
/// the pool has 512) and the instances used to list a component's tools at load still fit.
pub const MAX_CONCURRENT_CALLS: usize = 128;

/// Per-call limits.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CallLimits {
    /// CPU and wall time of the call, enforced by epoch interruption.
    pub timeout: Duration,
    /// Linear memory of the instance.
    pub memory_bytes: u64,
    /// Bytes of content the call may return.
    pub output_bytes: u64,
    /// WASI handles (files, directories, streams, HTTP objects) the instance may hold at once;
    /// each open file or directory is a file descriptor of the host process.
    pub handles: usize,
}

/// The longest `timeout_s` accepted: a day. Anything longer is a typo, and `1e300` would not
/// even fit a `Duration`.
pub const MAX_TIMEOUT_S: f64 = 86_400.0;
/// The largest `output_bytes` accepted: 1 GiB (a result goes to a model; the guest has to hold it
/// in its own memory first).
pub const MAX_OUTPUT_BYTES: u64 = 1 << 30;
/// `handles` bounds: a component needs a few for its preopens and stdio; more than this many
/// open at once is no tool's business and would let one call hold a large share of the host's
/// file descriptors.
pub const MIN_HANDLES: u64 = 16;
/// The most `handles` may grant.
pub const MAX_HANDLES: u64 = 65_536;

/// An integer setting and its range.
#[derive(Debug, Clone, Copy)]
pub struct IntLimit {
    /// The config key (`memory_mb`).
    pub key: &'static str,
    /// The smallest value accepted.
    pub min: u64,
    /// The largest value accepted.
    pub max: u64,
    /// Why the maximum, when it is not obvious.
    pub why: &'static str,
}

impl IntLimit {
    /// `v` if it is in range, else a message naming the key, the range and `v`.
    pub fn check(&self, v: i128) -> Result<u64, String> {
        match u64::try_from(v) {
            Ok(n) if (self.min..=self.max).contains(&n) => Ok(n),
            _ => Err(format!("{} must be between {} and {}{}, got {v}", self.key, self.min, self.max, self.why)),
        }
    }
}

/// `capabilities.memory_mb`.
pub const MEMORY_MB: IntLimit =
    IntLimit { key: "memory_mb", min: 1, max: MAX_MEMORY_BYTES >> 20, why: " (a pooled instance maps at most 4 GiB)" };
/// `capabilities.output_bytes`.
pub const OUTPUT_BYTES: IntLimit = IntLimit { key: "output_bytes", min: 1, max: MAX_OUTPUT_BYTES, why: "" };
/// `capabilities.handles`.
pub const HANDLES: IntLimit = IntLimit { key: "handles", min: MIN_HANDLES, max: MAX_HANDLES, why: "" };
/// `toolhost.concurrent_calls`.
pub const CONCURRENT_CALLS: IntLimit = IntLimit {
    key: "concurrent_calls",
    min: 1,
    max: MAX_CONCURRENT_CALLS as u64,
    why: " (each running call holds a slot of the wasm instance pool)",
};
/// `toolhost.concurrent_calls_per_thread`.
pub const CONCURRENT_CALLS_PER_THREAD: IntLimit = IntLimit { key: "concurrent_calls_per_thread", ..CONCURRENT_CALLS };

/// `timeout_s` as a duration: finite, above zero, at most [`MAX_TIMEOUT_S`].
pub fn check_timeout_s(t: f64) -> Result<Duration, String> {
    let err = || format!("timeout_s must be a number of seconds above 0 and at most {MAX_TIMEOUT_S}, got {t:?}");
    if !(t.is_finite() && t > 0.0 && t <= MAX_TIMEOUT_S) {
        return Err(err());
    }
    Duration::try_from_secs_f64(t).map_err(|_| err())
}

/// `memory_mb` in bytes.
pub fn check_memory_mb(m: u64) -> Result<u64, String> {
    Ok(MEMORY_MB.check(m.into())? << 20)
}

/// `output_bytes`, if in range.
pub fn check_output_bytes(b: u64) -> Result<u64, String> {
    OUTPUT_BYTES.check(b.into())
}

/// `handles`, if in range and within `fd_limit`, the process's open-file limit (`None`:
/// unlimited). Each handle may be a host file descriptor, so a grant above the process's own
/// limit promises what the host cannot keep: one call could exhaust the descriptors every other
/// call and connection needs. Refused rather than clamped, so the config says what happens.
pub fn check_handles(h: u64, fd_limit: Option<u64>) -> Result<usize, String> {
    let h = HANDLES.check(h.into())?;
    match fd_limit {
        Some(limit) if h > limit => Err(format!(
            "handles must be at most this process's open-file limit (RLIMIT_NOFILE {limit}), got {h}: raise the limit (ulimit -n) or lower handles"
        )),
        _ => Ok(h as usize),
    }
}

/// The process's open-file limit (the soft `RLIMIT_NOFILE`, the one `open` is held to), read
/// where the config is read so a test or an operator can set it with `ulimit -n`; `None` when
/// unlimited.
pub fn process_fd_limit() -> Option<u64> {
    rustix::process::getrlimit(rustix::process::Resource::Nofile).current
}

/// The check runs inside the visitor, while the YAML parser still points at the value, so the
/// error's line and column are the value's own (a check after deserializing would be placed
/// at the enclosing mapping).
pub(crate) struct IntVisitor(pub(crate) IntLimit);

impl serde::de::Visitor<'_> for IntVisitor {
    type Value = u64;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        write!(f, "an integer between {} and {}", self.0.min, self.0.max)
    }

    fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<u64, E> {
        self.0.check(v.into()).map_err(E::custom)
    }

    fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<u64, E> {
        self.0.check(v.into()).map_err(E::custom)
    }
}

struct SecondsVisitor;

impl serde::de::Visitor<'_> for SecondsVisitor {
    type Value = f64;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a number of seconds")
    }

    fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<f64, E> {
        check_timeout_s(v).map(|_| v).map_err(E::custom)
    }

    fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<f64, E> {
        self.visit_f64(v as f64)
    }

    fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<f64, E> {
        self.visit_f64(v as f64)
    }
}

/// `Option<T>` whose present value goes through `visitor`.
struct OptionOf<V>(V);

impl<'de, V: serde::de::Visitor<'de>> serde::de::Visitor<'de> for OptionOf<V> {
    type Value = Option<V::Value>;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        self.0.expecting(f)
    }

    fn visit_none<E: serde::de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_unit<E: serde::de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self.0).map(Some)
    }
}

pub(super) fn timeout_s<'de, D: Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
    d.deserialize_option(OptionOf(SecondsVisitor))
}

pub(super) fn memory_mb<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    d.deserialize_option(OptionOf(IntVisitor(MEMORY_MB)))
}

pub(super) fn output_bytes<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    d.deserialize_option(OptionOf(IntVisitor(OUTPUT_BYTES)))
}

/// `handles`: in range, and within the process's open-file limit as it is now.
struct HandlesVisitor;

impl serde::de::Visitor<'_> for HandlesVisitor {
    type Value = u64;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        IntVisitor(HANDLES).expecting(f)
    }

    fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<u64, E> {
        check_handles(v, process_fd_limit()).map(|h| h as u64).map_err(E::custom)
    }

    fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<u64, E> {
        HANDLES.check(v.into()).map_err(E::custom).and_then(|v| self.visit_u64(v))
    }
}

pub(super) fn handles<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    d.deserialize_option(OptionOf(HandlesVisitor))
}

/// The per-call limits of a capabilities block, each unset one taken from `defaults`. Values
/// are checked again here (embedders build the block in code, not only from YAML): an
/// out-of-range value is an error, never a silent default.
pub fn call_limits(c: &super::CapabilitiesConfig, defaults: CallLimits) -> Result<CallLimits, String> {
    Ok(CallLimits {
        timeout: c.timeout_s.map(check_timeout_s).transpose()?.unwrap_or(defaults.timeout),
        memory_bytes: c.memory_mb.map(check_memory_mb).transpose()?.unwrap_or(defaults.memory_bytes),
        output_bytes: c.output_bytes.map(check_output_bytes).transpose()?.unwrap_or(defaults.output_bytes),
        handles: c.handles.map(|h| check_handles(h, process_fd_limit())).transpose()?.unwrap_or(defaults.handles),
    })
}

/// How `--explain` names the limits.
pub fn describe(l: &CallLimits) -> String {
    format!(
        "memory {} MiB, timeout {:?}, output {} bytes, handles {}",
        l.memory_bytes >> 20,
        l.timeout,
        l.output_bytes,
        l.handles
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_hold_at_their_edges() {
        assert!(check_timeout_s(MAX_TIMEOUT_S).is_ok() && check_timeout_s(0.001).is_ok());
        for bad in [0.0, -1.0, f64::NAN, f64::INFINITY, f64::NEG_INFINITY, 1e300, MAX_TIMEOUT_S + 1.0] {
            let e = check_timeout_s(bad).unwrap_err();
            assert!(e.starts_with("timeout_s must be"), "{bad}: {e}");
        }
        assert_eq!(check_memory_mb(4096), Ok(4096 << 20));
        assert!(check_memory_mb(0).is_err() && check_memory_mb(4097).is_err() && check_memory_mb(u64::MAX).is_err());
        assert!(check_output_bytes(1).is_ok() && check_output_bytes(0).is_err());
        assert!(check_output_bytes(MAX_OUTPUT_BYTES + 1).is_err());
        assert!(check_handles(MIN_HANDLES, None).is_ok() && check_handles(MIN_HANDLES - 1, None).is_err());
        assert!(check_handles(MAX_HANDLES + 1, None).is_err());
        assert!(CONCURRENT_CALLS.check(1).is_ok() && CONCURRENT_CALLS.check(0).is_err());
        assert!(CONCURRENT_CALLS.check(MAX_CONCURRENT_CALLS as i128 + 1).is_err());
        assert_eq!(
            MEMORY_MB.check(-3).unwrap_err(),
            "memory_mb must be between 1 and 4096 (a pooled instance maps at most 4 GiB), got -3"
        );
    }

    /// 65536 handles while the process may open 20000 files: refused, naming the limit; at the
    /// limit and below it: accepted.
    #[test]
    fn handles_above_the_process_fd_limit_are_refused() {
        let e = check_handles(MAX_HANDLES, Some(20_000)).unwrap_err();
        assert_eq!(
            e,
            "handles must be at most this process's open-file limit (RLIMIT_NOFILE 20000), got 65536: raise the limit (ulimit -n) or lower handles"
        );
        assert_eq!(check_handles(20_000, Some(20_000)), Ok(20_000));
        assert_eq!(check_handles(64, Some(100)), Ok(64));
        assert!(check_handles(101, Some(100)).is_err());
        // The range still comes first: below the minimum is refused whatever the limit.
        assert!(check_handles(8, Some(100)).unwrap_err().starts_with("handles must be between"));
        assert_eq!(check_handles(MAX_HANDLES, None), Ok(MAX_HANDLES as usize));
    }

    #[test]
    fn call_limits_refuse_instead_of_defaulting() {
        let defaults = crate::runtime::CapabilitySet::default().limits;
        let caps = super::super::CapabilitiesConfig { timeout_s: Some(f64::NAN), ..Default::default() };
        assert!(call_limits(&caps, defaults).unwrap_err().contains("timeout_s"));
        let caps = super::super::CapabilitiesConfig { timeout_s: Some(2.5), handles: Some(32), ..Default::default() };
        let limits = call_limits(&caps, defaults).unwrap();
        assert_eq!(limits.timeout, Duration::from_millis(2500));
        assert_eq!(limits.handles, 32);
        assert_eq!(limits.memory_bytes, defaults.memory_bytes);
    }
}
