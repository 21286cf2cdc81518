//! ReadBeforeWriteMiddleware (spec §3.8): `write_file` and `str_replace` on an existing file are
//! refused until the thread has read the file's current version with `read_file`. A successful
//! `read_file` stamps a mark (normalised path → sha256 of the full current content) into thread
//! state; writes never refresh marks. Gate check and write (and read and mark) run under one lock
//! per (thread, path), so two writes of one model turn cannot both pass on the same mark; the lock
//! also serialises writes when the gate is off.
//!
//! The gate reads the file the write will touch through the thread filesystem layer (resolved as
//! sandbox-fs resolves it, no link followed out of the thread, no FIFO opened, a streamed hash with
//! a cap). Like DeerFlow it lets the tool answer for itself when the file is missing, is a
//! directory, is refused by the path policy, or is not UTF-8 text; unlike DeerFlow it fails
//! CLOSED when it cannot inspect a file the tool could still write (a FIFO or device, a file over
//! the cap, an I/O error, a thread directory replaced by a link).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};

use async_trait::async_trait;
use serde_json::{Map, Value};
use toolhost_core::{CallContext, ErrorKind, FsError, StateUpdate, ToolOutcome};

use super::{Middleware, Next, ToolRequest};

/// The `read_before_write:` section of `config.yaml` (toolhost's; on by default).
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(default)]
pub struct ReadBeforeWriteConfig {
    /// Whether a write to an existing file needs a read of its current version first.
    pub enabled: bool,
}

impl Default for ReadBeforeWriteConfig {
    fn default() -> Self {
        Self { enabled: true }
    }
}

/// The largest file the gate hashes; a bigger one cannot be verified and its writes are refused.
pub const GATE_MAX_BYTES: u64 = 64 << 20;

const BLOCK_MESSAGE: &str = "Error: {tool_name} blocked — {path} already exists and you have not read its current version. Any write invalidates earlier reads, so re-read before every modification. Call read_file on it (a ranged read of the relevant section is enough, e.g. the last ~30 lines before an append), check what is already there, then retry.";

type LockMap = Mutex<HashMap<(String, String), Weak<tokio::sync::Mutex<()>>>>;

pub struct ReadBeforeWriteMiddleware {
    /// `read_before_write.enabled`; when false only the per-path write lock remains.
    pub enabled: bool,
    locks: LockMap,
}

impl ReadBeforeWriteMiddleware {
    pub fn new(enabled: bool) -> Self {
        Self { enabled, locks: Mutex::new(HashMap::new()) }
    }

    fn lock_for(&self, thread: &str, path: &str) -> Arc<tokio::sync::Mutex<()>> {
        let mut map = self.locks.lock().unwrap_or_else(|p| p.into_inner());
        map.retain(|_, w| w.strong_count() > 0);
        let key = (thread.to_string(), path.to_string());
        if let Some(l) = map.get(&key).and_then(Weak::upgrade) {
            return l;
        }
        let l = Arc::new(tokio::sync::Mutex::new(()));
        map.insert(key, Arc::downgrade(&l));
        l
    }
}

/// `posixpath.normpath`.
pub fn normpath(path: &str) -> String {
    if path.is_empty() {
        return ".".into();
    }
    let initial = if path.starts_with("//") && !path.starts_with("///") {
        2
    } else if path.starts_with('/') {
        1
    } else {
        0
    };
    let mut parts: Vec<&str> = Vec::new();
    for comp in path.split('/') {
        if comp.is_empty() || comp == "." {
            continue;
        }
        if comp != ".." || (initial == 0 && parts.is_empty()) || parts.last() == Some(&"..") {
            parts.push(comp);
        } else if !parts.is_empty() {
            parts.pop();
        }
    }
    let body = parts.join("/");
    let out = format!("{}{body}", "/".repeat(initial));
    if out.is_empty() {
        ".".into()
    } else {
        out
    }
}

/// What the gate learns about the file a write would touch.
enum Current {
    /// Nothing to protect, or nothing the gate may judge: the tool answers for itself (missing
    /// file, a directory, a path the policy refuses, content that is not UTF-8 text).
    PassThrough,
    /// The sha256 of its full content.
    Hash(String),
}

/// Inspect the current version of `path` through the thread filesystem layer. `Err`: the file
/// exists but cannot be verified (the gate fails closed); the text says why.
fn current(ctx: &CallContext, path: &str) -> Result<Current, String> {
    let resolved = match ctx.fs.resolve(path) {
        Ok(r) => r,
        Err(FsError::Escapes(_) | FsError::Loop(_)) => return Ok(Current::PassThrough),
        Err(e) => return Err(e.to_string()),
    };
    let file = match ctx.fs.open_resolved(&resolved, path) {
        Ok(f) => f,
        Err(FsError::NotFound(_)) | Err(FsError::NotRegular { kind: "directory", .. }) => {
            return Ok(Current::PassThrough)
        }
        Err(e) => return Err(e.to_string()),
    };
    match file.digest_capped(GATE_MAX_BYTES) {
        Ok(d) if d.utf8 => Ok(Current::Hash(d.sha256)),
        Ok(_) => Ok(Current::PassThrough),
        Err(e) => Err(e.to_string()),
    }
}

/// [`current`] off the async workers (it reads up to [`GATE_MAX_BYTES`]).
async fn current_blocking(ctx: &CallContext, path: &str) -> Result<Current, String> {
    let (ctx, path) = (ctx.clone(), path.to_string());
    tokio::task::spawn_blocking(move || current(&ctx, &path))
        .await
        .unwrap_or_else(|e| Err(format!("the read-before-write check failed: {e}")))
}

fn requested_path(args: &Value) -> Option<&str> {
    args.get("path").and_then(Value::as_str).filter(|p| !p.is_empty())
}

#[async_trait]
impl Middleware for ReadBeforeWriteMiddleware {
    fn name(&self) -> &'static str {
        "read_before_write"
    }

    async fn wrap_call(&self, req: &ToolRequest<'_>, next: Next<'_>) -> ToolOutcome {
        let Some(path) = requested_path(req.args) else {
            return next.run(req).await;
        };
        match req.name {
            "write_file" | "str_replace" => {
                let lock = self.lock_for(&req.ctx.thread_id, &normpath(path));
                let _guard = lock.lock().await;
                if self.enabled {
                    let current = match current_blocking(req.ctx, path).await {
                        Ok(c) => c,
                        Err(why) => {
                            return ToolOutcome::error_of(
                                ErrorKind::Refused,
                                format!(
                                    "Error: {} blocked — the current version of {path} cannot be verified: {why}",
                                    req.name
                                ),
                            )
                        }
                    };
                    if let Current::Hash(hash) = current {
                        let mark = req.ctx.state.read_marks.get(&normpath(path)).and_then(Value::as_str);
                        if mark != Some(hash.as_str()) {
                            return ToolOutcome::error_of(
                                ErrorKind::Refused,
                                BLOCK_MESSAGE.replace("{tool_name}", req.name).replace("{path}", path),
                            );
                        }
                    }
                }
                next.run(req).await
            }
            "read_file" if self.enabled => {
                let lock = self.lock_for(&req.ctx.thread_id, &normpath(path));
                let _guard = lock.lock().await;
                let mut outcome = next.run(req).await;
                if !outcome.is_error() {
                    if let Ok(Current::Hash(hash)) = current_blocking(req.ctx, path).await {
                        let mut marks = outcome.update.read_marks.take().unwrap_or_else(Map::new);
                        marks.insert(normpath(path), Value::String(hash));
                        outcome.update = StateUpdate { read_marks: Some(marks), ..std::mem::take(&mut outcome.update) };
                    }
                }
                outcome
            }
            _ => next.run(req).await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normpath_like_python() {
        for (i, o) in [
            ("/mnt/user-data/./a/../b.txt", "/mnt/user-data/b.txt"),
            ("a//b/", "a/b"),
            ("../x", "../x"),
            ("/../x", "/x"),
            ("//a", "//a"),
            ("///a", "/a"),
            ("", "."),
            ("a/..", "."),
        ] {
            assert_eq!(normpath(i), o, "{i}");
        }
    }
}
