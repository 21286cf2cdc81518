//! ThreadDiskQuotaMiddleware (toolhost's own, not a DeerFlow middleware; present only when
//! `sandbox.thread_disk_quota_mb` is set): whatever writes a thread's files — host bash, a
//! component with a filesystem grant, an MCP server or ACP agent — the thread does not end a
//! call above its quota. Usage is what the user data and the ACP workspace occupy on disk
//! (allocated blocks, each inode once, no link followed: `toolhost_core::usage`).
//!
//! A call that may write is measured before it starts (a snapshot of every file's size) and
//! watched while it runs; once the thread passes its quota the call is stopped (a component by
//! its cancel signal, anything else by dropping it, which kills a bash command's tree), and what
//! it wrote past the quota is taken back: only files it created are deleted, files it grew are
//! cut back to their earlier size, nothing stored before loses a byte. `write_file` and
//! `str_replace` are checked before they run, with the exact growth (`replace_all` counts every
//! occurrence), so a write that cannot fit is refused and the file stays as it was. Calls that
//! cannot write (builtins, components granted no files or read-only files) pass untouched.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use serde_json::Value;
use toolhost_core::usage::Trimmed;
use toolhost_core::{CallContext, CancelSignal, ErrorKind, ThreadFs, ToolOutcome, ToolSource};

use super::{Middleware, Next, ToolRequest};

/// How long a call runs before the watcher first measures the thread: most calls end sooner and
/// pay only the two measurements around them.
const FIRST_LOOK: Duration = Duration::from_millis(10);
/// The shortest wait between two measurements of a running call.
const MIN_INTERVAL: Duration = Duration::from_millis(10);
/// Each wait is this many times the last walk's duration, so the watcher of a large thread
/// spends at most a quarter of one core.
const WALK_SHARE: u32 = 3;
/// How often the watcher passes the caller's cancellation on to a call it watches.
const CANCEL_CHECK: Duration = Duration::from_millis(5);
/// After a stopped call is dropped, how long to wait before looking again: a killed process may
/// still finish the one `write` it was in.
const SETTLE: Duration = Duration::from_millis(30);
/// Paths an error names at most.
const SHOWN: usize = 5;

pub struct ThreadDiskQuotaMiddleware {
    quota_bytes: u64,
    /// Component tools (component label, tool name) whose grant cannot write the thread: not
    /// watched.
    read_only: HashSet<(String, String)>,
}

impl ThreadDiskQuotaMiddleware {
    /// A quota of `quota_mb` MiB; `read_only` names the component tools (component label, tool
    /// name) whose grant gives no writable thread directory.
    pub fn new(quota_mb: u64, read_only: HashSet<(String, String)>) -> Self {
        Self { quota_bytes: quota_mb.saturating_mul(1 << 20), read_only }
    }

    /// Whether the call may write the thread: builtins write no user files, and a component
    /// granted no files or read-only files cannot.
    fn may_write(&self, req: &ToolRequest<'_>) -> bool {
        let Some(tool) = req.tool else { return false };
        match &tool.spec().source {
            ToolSource::Builtin => false,
            ToolSource::Component { component } => {
                !self.read_only.contains(&(component.clone(), tool.spec().name.clone()))
            }
            _ => true,
        }
    }
}

/// Run blocking file work off the async workers.
async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> Result<T, String> {
    tokio::task::spawn_blocking(f).await.map_err(|e| format!("the measuring task failed: {e}"))
}

/// The bytes a `write_file` or `str_replace` adds at most, from its arguments and the file as
/// it is now: an append adds its content, an overwrite what it writes beyond the file's
/// present size, a replacement `(new − old)` per occurrence it replaces — every occurrence with
/// `replace_all`, counted where sandbox-fs matches (the file with universal newlines). `None`
/// for other tools.
fn growth(fs: &ThreadFs, name: &str, args: &Value) -> Option<u64> {
    let text = |k: &str| args.get(k).and_then(Value::as_str).unwrap_or("");
    let path = text("path");
    match name {
        "write_file" => {
            let content = text("content").len() as u64;
            let append = args.get("append").and_then(Value::as_bool).unwrap_or(false);
            let present = if append { 0 } else { fs.open_regular(path).map(|f| f.len).unwrap_or(0) };
            Some(content.saturating_sub(present))
        }
        "str_replace" => {
            let (old, new) = (text("old_str"), text("new_str"));
            if old.is_empty() || new.len() <= old.len() {
                return Some(0);
            }
            let per = (new.len() - old.len()) as u64;
            let all = args.get("replace_all").and_then(Value::as_bool).unwrap_or(false);
            if !all {
                return Some(per);
            }
            let Ok(file) = fs.open_regular(path) else { return Some(per) };
            let len = file.len;
            let count = match file.read_capped(MAX_COUNTED_FILE) {
                Ok(bytes) => count_in_universal_newlines(&bytes, old.as_bytes()),
                // Too large to read for a count: no more occurrences than fit in it.
                Err(_) => len / old.len() as u64,
            };
            Some(count.max(1).saturating_mul(per))
        }
        _ => None,
    }
}

/// Files larger than this are not read to count `replace_all`'s occurrences (the bound from
/// their size is used instead).
const MAX_COUNTED_FILE: u64 = 64 << 20;

/// Non-overlapping occurrences of `needle` in `raw` seen with universal newlines (`\r\n` and
/// `\r` as `\n`), left to right: what sandbox-fs's `str_replace` replaces.
fn count_in_universal_newlines(raw: &[u8], needle: &[u8]) -> u64 {
    let mut norm = Vec::with_capacity(raw.len());
    let mut i = 0;
    while i < raw.len() {
        if raw[i] == b'\r' {
            norm.push(b'\n');
            i += if raw.get(i + 1) == Some(&b'\n') { 2 } else { 1 };
        } else {
            norm.push(raw[i]);
            i += 1;
        }
    }
    let (mut count, mut pos) = (0u64, 0usize);
    while let Some(off) = find(&norm[pos..], needle) {
        count += 1;
        pos += off + needle.len();
    }
    count
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    if needle.is_empty() || hay.len() < needle.len() {
        return None;
    }
    hay.windows(needle.len()).position(|w| w == needle)
}

/// Measure the thread while a call runs; once it passes `limit`, raise `stop` and report the
/// usage seen. Passes the caller's own cancellation on to `stop` as well.
async fn watch(
    fs: Arc<ThreadFs>,
    limit: u64,
    stop: CancelSignal,
    caller: Option<CancelSignal>,
    passed: tokio::sync::oneshot::Sender<u64>,
) {
    let mut wait = FIRST_LOOK;
    loop {
        let until = Instant::now() + wait;
        while Instant::now() < until {
            tokio::time::sleep(CANCEL_CHECK.min(until.saturating_duration_since(Instant::now()))).await;
            if caller.as_ref().is_some_and(CancelSignal::is_cancelled) {
                stop.cancel();
            }
        }
        let started = Instant::now();
        let fs2 = fs.clone();
        let Ok(Ok(used)) = blocking(move || fs2.disk_usage()).await else { continue };
        if used > limit {
            stop.cancel();
            let _ = passed.send(used);
            return;
        }
        wait = MIN_INTERVAL.max(started.elapsed() * WALK_SHARE);
    }
}

#[async_trait]
impl Middleware for ThreadDiskQuotaMiddleware {
    fn name(&self) -> &'static str {
        "thread_disk_quota"
    }

    async fn wrap_call(&self, req: &ToolRequest<'_>, next: Next<'_>) -> ToolOutcome {
        if !self.may_write(req) {
            return next.run(req).await;
        }
        let quota_mb = self.quota_bytes >> 20;
        let (fs, name, args) = (req.ctx.fs.clone(), req.name.to_string(), req.args.clone());
        let measured = blocking(move || fs.usage_snapshot().map(|s| (growth(&fs, &name, &args), s))).await;
        let (adds, before) = match measured {
            Ok(Ok(m)) => m,
            Ok(Err(e)) => return ToolOutcome::error_of(ErrorKind::Refused, unmeasurable(req.name, &e.to_string())),
            Err(e) => return ToolOutcome::error_of(ErrorKind::Refused, unmeasurable(req.name, &e)),
        };
        if let Some(adds) = adds {
            if before.total.saturating_add(adds) > self.quota_bytes {
                return ToolOutcome::error_of(
                    ErrorKind::Refused,
                    format!(
                        "Error: {} refused — the thread's files would exceed its disk quota of {quota_mb} MB ({} bytes \
                         in use, this write adds up to {adds} bytes). Delete files that are no longer needed, or write less.",
                        req.name, before.total
                    ),
                );
            }
        }
        // A thread already above its quota (a lowered quota) may shrink, never grow.
        let limit = self.quota_bytes.max(before.total);
        let stop = CancelSignal::new();
        let ctx = CallContext { cancel: Some(stop.clone()), ..req.ctx.clone() };
        let inner = ToolRequest { ctx: &ctx, ..*req };
        let (tx, mut passed) = tokio::sync::oneshot::channel();
        let watcher = tokio::spawn(watch(req.ctx.fs.clone(), limit, stop.clone(), req.ctx.cancel.clone(), tx));
        // A component stops at its cancel signal within one epoch tick and must be waited for
        // (its instance may run on a thread of its own); anything else is dropped, which kills a
        // bash command's process tree.
        let stops_itself = matches!(req.tool.map(|t| &t.spec().source), Some(ToolSource::Component { .. }));
        let call = next.run(&inner);
        let mut seen = None;
        let outcome = if stops_itself {
            Some(call.await)
        } else {
            tokio::select! {
                biased;
                o = call => Some(o),
                Ok(used) = &mut passed => {
                    seen = Some(used);
                    None
                }
            }
        };
        watcher.abort();
        let seen = seen.or_else(|| passed.try_recv().ok());
        let (dropped, stopped) = (outcome.is_none(), outcome.is_none() || seen.is_some());
        let fs = req.ctx.fs.clone();
        let checked = blocking(move || -> Result<Option<(u64, Trimmed)>, String> {
            let used = fs.disk_usage().map_err(|e| e.to_string())?;
            if used <= limit && !stopped {
                return Ok(None);
            }
            let mut trimmed = fs.trim_usage(&before, limit).map_err(|e| e.to_string())?;
            if dropped {
                std::thread::sleep(SETTLE);
                let again = fs.trim_usage(&before, limit).map_err(|e| e.to_string())?;
                trimmed.removed.extend(again.removed);
                trimmed.truncated.extend(again.truncated);
                trimmed.usage = again.usage;
            }
            Ok(Some((used, trimmed)))
        })
        .await;
        match checked {
            Ok(Ok(None)) => outcome.unwrap_or_else(|| ToolOutcome::error("Error: the call was stopped")),
            Ok(Ok(Some((used, trimmed)))) => {
                let peak = seen.unwrap_or(0).max(used);
                let already = if limit > self.quota_bytes {
                    format!(" (the thread was already at {limit} bytes, over its quota, and may not grow)")
                } else {
                    String::new()
                };
                ToolOutcome::error_of(
                    ErrorKind::Refused,
                    format!(
                        "Error: {} stopped — the thread's files passed their disk quota of {quota_mb} MB{already}: \
                         {peak} bytes in use, {} allowed. What the call wrote past the quota was taken back ({}); the \
                         thread now uses {} bytes. Delete files that are no longer needed, or write less.",
                        req.name,
                        self.quota_bytes,
                        trimmed.describe(SHOWN),
                        trimmed.usage
                    ),
                )
            }
            Ok(Err(e)) | Err(e) => ToolOutcome::error_of(
                ErrorKind::Refused,
                format!("Error: {} ended, but the thread's disk usage cannot be measured afterwards: {e}", req.name),
            ),
        }
    }
}

fn unmeasurable(name: &str, why: &str) -> String {
    format!("Error: {name} refused — the thread's disk usage cannot be measured: {why}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replace_all_counts_every_occurrence_as_sandbox_fs_matches_them() {
        assert_eq!(count_in_universal_newlines(b"a a a", b"a"), 3);
        assert_eq!(count_in_universal_newlines(b"aaaa", b"aa"), 2, "non-overlapping, left to right");
        assert_eq!(count_in_universal_newlines(b"x\r\ny\rz\n", b"\n"), 3, "CRLF and CR read as LF");
        assert_eq!(count_in_universal_newlines(b"abc", b"abcd"), 0);
    }
}
