//! ReadBeforeWriteMiddleware (spec §3.8): `write_file` and `str_replace` on an existing file are
//! refused until the thread has read the file's current version with `read_file`. A successful
//! `read_file` stamps a mark (normalised path → sha256 of the full current content) into thread
//! state; writes never refresh marks. The gate fails open when the file cannot be inspected.
//! Gate check and write run under one lock per (thread, path), so two writes of one model turn
//! cannot both pass on the same mark; the lock also serialises writes when the gate is off.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};

use async_trait::async_trait;
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};
use toolhost_core::{CallContext, StateUpdate, ToolOutcome};

use super::{Middleware, Next, ToolRequest};

const BLOCK_MESSAGE: &str = "Error: {tool_name} blocked — {path} already exists and you have not read its current version. Any write invalidates earlier reads, so re-read before every modification. Call read_file on it (a ranged read of the relevant section is enough, e.g. the last ~30 lines before an append), check what is already there, then retry.";

type LockMap = Mutex<HashMap<(String, String), Weak<tokio::sync::Mutex<()>>>>;

pub struct ReadBeforeWrite {
    /// `read_before_write.enabled`; when false only the per-path write lock remains.
    pub enabled: bool,
    locks: LockMap,
}

impl ReadBeforeWrite {
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

/// The current full content of a virtual path, as DeerFlow's gate reads it. `Ok(None)`: the file
/// does not exist. `Err`: cannot inspect (fail open).
fn current_content(ctx: &CallContext, path: &str) -> Result<Option<String>, ()> {
    let host = ctx.paths.to_host(path).ok_or(())?;
    match std::fs::read(&host) {
        Ok(bytes) => String::from_utf8(bytes).map(Some).map_err(|_| ()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(_) => Err(()),
    }
}

fn content_hash(content: &str) -> String {
    hex::encode(Sha256::digest(content.as_bytes()))
}

fn requested_path(args: &Value) -> Option<&str> {
    args.get("path").and_then(Value::as_str).filter(|p| !p.is_empty())
}

#[async_trait]
impl Middleware for ReadBeforeWrite {
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
                    if let Ok(Some(current)) = current_content(req.ctx, path) {
                        let mark = req.ctx.state.read_marks.get(&normpath(path)).and_then(Value::as_str);
                        if mark != Some(content_hash(&current).as_str()) {
                            return ToolOutcome::error(
                                BLOCK_MESSAGE.replace("{tool_name}", req.name).replace("{path}", path),
                            );
                        }
                    }
                }
                next.run(req).await
            }
            "read_file" if self.enabled => {
                let mut outcome = next.run(req).await;
                if !outcome.is_error() {
                    if let Ok(Some(current)) = current_content(req.ctx, path) {
                        let mut marks = outcome.update.read_marks.take().unwrap_or_else(Map::new);
                        marks.insert(normpath(path), Value::String(content_hash(&current)));
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
