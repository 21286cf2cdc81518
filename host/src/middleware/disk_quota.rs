//! ThreadDiskQuotaMiddleware (toolhost's own, not a DeerFlow middleware; present only when
//! `sandbox.thread_disk_quota_mb` is set): `write_file` and `str_replace` are refused when the
//! thread's user data would grow past the quota. Usage is what the files occupy on disk
//! (allocated blocks, so a sparse file counts what it really uses), measured through the thread
//! filesystem layer without following links, cached per thread and measured again after a write.

use std::collections::HashMap;
use std::sync::Mutex;

use async_trait::async_trait;
use serde_json::Value;
use toolhost_core::{CallContext, ToolOutcome};

use super::{Middleware, Next, ToolRequest};

pub struct ThreadDiskQuotaMiddleware {
    quota_bytes: u64,
    /// Bytes in use per thread, as last measured; `None` once a write may have changed it.
    usage: Mutex<HashMap<String, u64>>,
}

impl ThreadDiskQuotaMiddleware {
    pub fn new(quota_mb: u64) -> Self {
        Self { quota_bytes: quota_mb.saturating_mul(1 << 20), usage: Mutex::new(HashMap::new()) }
    }

    fn cached(&self, thread: &str) -> Option<u64> {
        self.usage.lock().unwrap_or_else(|p| p.into_inner()).get(thread).copied()
    }

    fn store(&self, thread: &str, used: Option<u64>) {
        let mut map = self.usage.lock().unwrap_or_else(|p| p.into_inner());
        match used {
            Some(u) => map.insert(thread.to_string(), u),
            None => map.remove(thread),
        };
    }

    async fn measure(&self, ctx: &CallContext) -> Result<u64, String> {
        if let Some(u) = self.cached(&ctx.thread_id) {
            return Ok(u);
        }
        let fs = ctx.fs.clone();
        let used = tokio::task::spawn_blocking(move || fs.disk_usage())
            .await
            .map_err(|e| e.to_string())?
            .map_err(|e| e.to_string())?;
        self.store(&ctx.thread_id, Some(used));
        Ok(used)
    }
}

/// The bytes a call would add at most: the whole content of a `write_file`, the growth of one
/// `str_replace` replacement (`replace_all` may add more; the next write then sees it).
fn growth(name: &str, args: &Value) -> u64 {
    let len = |k: &str| args.get(k).and_then(Value::as_str).map_or(0, str::len) as u64;
    match name {
        "write_file" => len("content"),
        _ => len("new_str").saturating_sub(len("old_str")),
    }
}

#[async_trait]
impl Middleware for ThreadDiskQuotaMiddleware {
    fn name(&self) -> &'static str {
        "thread_disk_quota"
    }

    async fn wrap_call(&self, req: &ToolRequest<'_>, next: Next<'_>) -> ToolOutcome {
        if !matches!(req.name, "write_file" | "str_replace") {
            return next.run(req).await;
        }
        let adds = growth(req.name, req.args);
        let used = match self.measure(req.ctx).await {
            Ok(u) => u,
            Err(e) => {
                return ToolOutcome::error(format!(
                    "Error: {} refused — the thread's disk usage cannot be measured: {e}",
                    req.name
                ))
            }
        };
        if used.saturating_add(adds) > self.quota_bytes {
            return ToolOutcome::error(format!(
                "Error: {} refused — the thread's files would exceed its disk quota of {} MB ({used} bytes in \
                 use, this write adds up to {adds} bytes). Delete files that are no longer needed, or write less.",
                req.name,
                self.quota_bytes >> 20
            ));
        }
        let outcome = next.run(req).await;
        // Whatever the write did (or a concurrent one), measure again next time.
        self.store(&req.ctx.thread_id, None);
        outcome
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn growth_of_each_write_tool() {
        assert_eq!(growth("write_file", &json!({"content": "abcd"})), 4);
        assert_eq!(growth("str_replace", &json!({"old_str": "a", "new_str": "abc"})), 2);
        assert_eq!(growth("str_replace", &json!({"old_str": "abc", "new_str": ""})), 0);
        assert_eq!(growth("write_file", &json!({})), 0);
    }
}
