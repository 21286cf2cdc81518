//! `present_files` (DeerFlow `H/tools/builtins/present_file_tool.py`): makes files in the
//! thread's outputs visible to the user by writing their `/mnt/user-data/outputs/<rel>` paths to
//! the `artifacts` state (merged by `merge_artifacts`). Anything outside outputs is refused.

use std::path::{Path, PathBuf};

use async_trait::async_trait;
use serde_json::Value;
use toolhost_core::{CallContext, FsError, StateUpdate, Tool, ToolOutcome, ToolSpec, VIRTUAL_USER_DATA};

use crate::TRAVERSAL;
use crate::{args_object, builtin_spec, invalid_args};

const NAME: &str = "present_files";
const OUTPUTS_VIRTUAL_PREFIX: &str = "/mnt/user-data/outputs";

pub struct PresentFilesTool {
    spec: ToolSpec,
}

impl PresentFilesTool {
    pub fn new() -> Self {
        Self { spec: builtin_spec(NAME) }
    }
}

impl Default for PresentFilesTool {
    fn default() -> Self {
        Self::new()
    }
}

#[async_trait]
impl Tool for PresentFilesTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn call(&self, ctx: &CallContext, args: Value) -> ToolOutcome {
        let filepaths = match parse_args(&args) {
            Ok(f) => f,
            Err(outcome) => return *outcome,
        };
        let mut normalized = Vec::with_capacity(filepaths.len());
        for filepath in &filepaths {
            match normalize_presented_filepath(ctx, filepath) {
                Ok(p) => normalized.push(p),
                // One bad path fails the whole call and no artifacts are written.
                Err(e) => return ToolOutcome::error(format!("Error: {e}")),
            }
        }
        ToolOutcome::text("Successfully presented files")
            .with_update(StateUpdate { artifacts: Some(normalized), ..Default::default() })
    }
}

fn parse_args(args: &Value) -> Result<Vec<String>, Box<ToolOutcome>> {
    let obj = args_object(NAME, args)?;
    let list = match obj.get("filepaths") {
        Some(Value::Array(items)) => items,
        Some(other) => {
            return Err(Box::new(invalid_args(NAME, format!("filepaths must be a list of strings, got {other}"))))
        }
        None => return Err(Box::new(invalid_args(NAME, "filepaths is required"))),
    };
    list.iter()
        .enumerate()
        .map(|(i, v)| match v {
            Value::String(s) => Ok(s.clone()),
            other => Err(Box::new(invalid_args(NAME, format!("filepaths[{i}] must be a string, got {other}")))),
        })
        .collect()
}

/// DeerFlow's `_normalize_presented_filepath`: a virtual `/mnt/user-data/...` path or a host path
/// must resolve (symlinks followed inside the thread) into the thread's outputs; the result is
/// `/mnt/user-data/outputs/<relative path>`. The error is the text after `Error: `.
///
/// Resolution goes through the thread filesystem layer. A host path is accepted only when it
/// names the thread's own user data; toolhost never resolves a host path outside the thread
/// (DeerFlow would follow a link elsewhere on the host that happens to point into outputs).
pub fn normalize_presented_filepath(ctx: &CallContext, filepath: &str) -> Result<String, String> {
    if ctx.thread_id.is_empty() {
        return Err(
            "Thread ID is not available in runtime context, runtime config, or LangGraph thread-local config".into()
        );
    }
    let only_outputs = || format!("Only files in {OUTPUTS_VIRTUAL_PREFIX} can be presented: {filepath}");
    let stripped = filepath.trim_start_matches('/');
    let virtual_prefix = VIRTUAL_USER_DATA.trim_start_matches('/');
    let vpath = if stripped == virtual_prefix || stripped.starts_with(&format!("{virtual_prefix}/")) {
        format!("/{stripped}")
    } else {
        match host_to_virtual(ctx, &expand_user(filepath)) {
            Some(v) => v,
            None => return Err(only_outputs()),
        }
    };
    // `/mnt/user-data` itself (or a path that climbs back to it) is in the thread but no output.
    if lexical_parent_depth(&vpath) == Some(0) {
        return Err(only_outputs());
    }
    let resolved = match ctx.fs.resolve_with_parent_segments(&vpath) {
        Ok(r) => r,
        Err(FsError::Loop(_)) => return Err(format!("Too many levels of symbolic links: {filepath}")),
        Err(_) => return Err(TRAVERSAL.to_string()),
    };
    let rel = match resolved.vpath.strip_prefix(OUTPUTS_VIRTUAL_PREFIX) {
        Some("") => ".".to_string(),
        Some(rest) if rest.starts_with('/') => rest[1..].to_string(),
        _ => return Err(only_outputs()),
    };
    Ok(format!("{OUTPUTS_VIRTUAL_PREFIX}/{rel}"))
}

/// How many segments below `/mnt/user-data` a path ends after applying `..` lexically; `None`
/// when it climbs above `/mnt/user-data` or is not under it.
fn lexical_parent_depth(vpath: &str) -> Option<usize> {
    let rest = vpath.strip_prefix(VIRTUAL_USER_DATA)?;
    let mut depth = 0usize;
    for seg in rest.split('/').filter(|s| !s.is_empty() && *s != ".") {
        if seg == ".." {
            depth = depth.checked_sub(1)?;
        } else {
            depth += 1;
        }
    }
    Some(depth)
}

/// A host path under the thread's user-data directory as its virtual path; `None` for any other
/// host path (relative paths included).
fn host_to_virtual(ctx: &CallContext, host: &Path) -> Option<String> {
    let absolute = std::path::absolute(host).ok()?;
    let user_data = std::path::absolute(ctx.paths().user_data()).ok()?;
    let rest = absolute.strip_prefix(&user_data).ok()?;
    let rest = rest.to_str()?;
    Some(if rest.is_empty() { VIRTUAL_USER_DATA.to_string() } else { format!("{VIRTUAL_USER_DATA}/{rest}") })
}

/// `Path.expanduser()` for `~` and `~/…` (the current user's home).
fn expand_user(path: &str) -> PathBuf {
    let home = std::env::var_os("HOME");
    match (path, home) {
        ("~", Some(home)) => PathBuf::from(home),
        (p, Some(home)) if p.starts_with("~/") => PathBuf::from(home).join(&p[2..]),
        (p, _) => PathBuf::from(p),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::thread;
    use serde_json::json;

    #[tokio::test]
    async fn virtual_and_host_paths_under_outputs_are_normalised() {
        let (_dir, ctx) = thread();
        let tool = PresentFilesTool::new();
        let host = ctx.paths().outputs().join("r.md");
        let out = tool
            .call(
                &ctx,
                json!({"filepaths": ["/mnt/user-data/outputs/a/b.csv", host.to_string_lossy(), "mnt/user-data/outputs/日本.png"]}),
            )
            .await;
        assert!(!out.is_error(), "{}", out.text_content());
        assert_eq!(out.text_content(), "Successfully presented files");
        assert_eq!(
            out.update.artifacts.unwrap(),
            ["/mnt/user-data/outputs/a/b.csv", "/mnt/user-data/outputs/r.md", "/mnt/user-data/outputs/日本.png"]
        );
    }

    #[tokio::test]
    async fn paths_outside_outputs_are_refused_without_artifacts() {
        let (dir, ctx) = thread();
        let tool = PresentFilesTool::new();
        let workspace_file = ctx.paths().workspace().join("w.md");
        for bad in [
            workspace_file.to_string_lossy().into_owned(),
            "/mnt/user-data/workspace/w.md".to_string(),
            "/mnt/user-data/outputs/../uploads/u.md".to_string(),
            "/etc/passwd".to_string(),
            "relative/outputs/r.md".to_string(),
        ] {
            let out = tool.call(&ctx, json!({"filepaths": ["/mnt/user-data/outputs/ok.md", bad]})).await;
            assert!(out.is_error());
            assert_eq!(
                out.text_content(),
                format!("Error: Only files in /mnt/user-data/outputs can be presented: {bad}")
            );
            assert!(out.update.artifacts.is_none());
        }
        let out = tool.call(&ctx, json!({"filepaths": ["/mnt/user-data/../../x"]})).await;
        assert_eq!(out.text_content(), "Error: Access denied: path traversal detected");

        // A symlink inside outputs that points elsewhere does not count as an output.
        let outside = dir.path().join("elsewhere.md");
        std::fs::write(&outside, "x").unwrap();
        std::os::unix::fs::symlink(&outside, ctx.paths().outputs().join("link.md")).unwrap();
        let out = tool.call(&ctx, json!({"filepaths": ["/mnt/user-data/outputs/link.md"]})).await;
        assert_eq!(out.text_content(), "Error: Access denied: path traversal detected");
        // One into another thread dir resolves fine but is not an output.
        std::os::unix::fs::symlink(&workspace_file, ctx.paths().outputs().join("ws.md")).unwrap();
        let out = tool.call(&ctx, json!({"filepaths": ["/mnt/user-data/outputs/ws.md"]})).await;
        assert_eq!(
            out.text_content(),
            "Error: Only files in /mnt/user-data/outputs can be presented: /mnt/user-data/outputs/ws.md"
        );
    }

    #[tokio::test]
    async fn bad_arguments_and_missing_thread_are_errors() {
        let (_dir, mut ctx) = thread();
        let tool = PresentFilesTool::new();
        let out = tool.call(&ctx, json!({"filepaths": "x"})).await;
        assert!(out.is_error() && out.text_content().contains("filepaths must be a list"));
        let out = tool.call(&ctx, json!({"filepaths": [1]})).await;
        assert!(out.is_error() && out.text_content().contains("filepaths[0]"));
        let out = tool.call(&ctx, json!({})).await;
        assert!(out.is_error() && out.text_content().contains("filepaths is required"));
        ctx.thread_id.clear();
        let out = tool.call(&ctx, json!({"filepaths": ["/mnt/user-data/outputs/a"]})).await;
        assert!(out.text_content().starts_with("Error: Thread ID is not available"));
        assert!(out.update.artifacts.is_none());
    }
}
