//! Host-path resolution for the builtins: Python's `Path.resolve()` (symlinks followed, a
//! missing tail kept lexically) and DeerFlow's `/mnt/user-data` validation on top of it, so that
//! nothing a tool touches can leave the thread's directories through `..` or a symlink.

use std::io;
use std::path::{Component, Path, PathBuf};

use toolhost_core::ThreadPaths;

/// Symlink hops allowed while resolving one path (Linux's own limit is 40).
const MAX_SYMLINK_HOPS: usize = 40;

/// DeerFlow's `PermissionError("Access denied: path traversal detected")`.
pub const TRAVERSAL: &str = "Access denied: path traversal detected";

/// `Path(path).resolve()` (non-strict): makes `path` absolute against the current directory,
/// follows every symlink of the part that exists, and applies `.`/`..` the way `realpath` does.
/// A component that does not exist is appended as is, and so is the rest of the path.
pub fn resolve_lenient(path: &Path) -> io::Result<PathBuf> {
    let absolute = if path.is_absolute() { path.to_path_buf() } else { std::env::current_dir()?.join(path) };
    let mut pending: Vec<std::ffi::OsString> = Vec::new();
    push_components(&absolute, &mut pending);
    pending.reverse();
    let mut resolved = PathBuf::from("/");
    let mut hops = 0usize;
    let mut missing = false;
    while let Some(part) = pending.pop() {
        if part == "." {
            continue;
        }
        if part == ".." {
            resolved.pop();
            continue;
        }
        let candidate = resolved.join(&part);
        if missing {
            resolved = candidate;
            continue;
        }
        match std::fs::symlink_metadata(&candidate) {
            Ok(meta) if meta.file_type().is_symlink() => {
                hops += 1;
                if hops > MAX_SYMLINK_HOPS {
                    return Err(io::Error::other(format!("too many levels of symbolic links: {}", path.display())));
                }
                let target = std::fs::read_link(&candidate)?;
                let mut parts = Vec::new();
                push_components(&target, &mut parts);
                if target.is_absolute() {
                    resolved = PathBuf::from("/");
                }
                for p in parts.into_iter().rev() {
                    pending.push(p);
                }
            }
            Ok(_) => resolved = candidate,
            Err(e) if e.kind() == io::ErrorKind::NotFound || e.kind() == io::ErrorKind::NotADirectory => {
                missing = true;
                resolved = candidate;
            }
            Err(e) => return Err(e),
        }
    }
    Ok(resolved)
}

fn push_components(path: &Path, out: &mut Vec<std::ffi::OsString>) {
    for c in path.components() {
        match c {
            Component::Normal(s) => out.push(s.to_os_string()),
            Component::ParentDir => out.push("..".into()),
            Component::CurDir => out.push(".".into()),
            Component::RootDir | Component::Prefix(_) => {}
        }
    }
}

/// Whether any `/`- or `\`-separated segment of `path` is `..` (DeerFlow's traversal check).
pub fn has_parent_segment(path: &str) -> bool {
    path.replace('\\', "/").split('/').any(|seg| seg == "..")
}

/// DeerFlow's read-only `validate_local_tool_path` + `resolve_and_validate_user_data_path` for a
/// `/mnt/user-data/...` path: no `..`, mapped to the host, symlinks resolved, and the result must
/// lie inside the thread's workspace, uploads or outputs. The error is the text after `Error: `.
pub fn resolve_user_data_path(paths: &ThreadPaths, virtual_path: &str) -> Result<PathBuf, String> {
    if has_parent_segment(virtual_path) {
        return Err(TRAVERSAL.to_string());
    }
    if !virtual_path.starts_with(&format!("{}/", toolhost_core::VIRTUAL_USER_DATA)) {
        return Err(
            "Only paths under /mnt/user-data/, /mnt/skills/, /mnt/acp-workspace/, or configured mount paths are allowed"
                .to_string(),
        );
    }
    let host = paths.to_host(virtual_path).ok_or_else(|| TRAVERSAL.to_string())?;
    let resolved = resolve_lenient(&host).map_err(|e| e.to_string())?;
    if within_thread_roots(paths, &resolved) {
        Ok(resolved)
    } else {
        Err(TRAVERSAL.to_string())
    }
}

/// Whether a resolved host path lies in (or is) the thread's workspace, uploads or outputs.
pub fn within_thread_roots(paths: &ThreadPaths, resolved: &Path) -> bool {
    [paths.workspace(), paths.uploads(), paths.outputs()]
        .iter()
        .filter_map(|root| resolve_lenient(root).ok())
        .any(|root| resolved.starts_with(&root))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolves_like_python_path_resolve() {
        let dir = tempfile::tempdir().unwrap();
        let base = resolve_lenient(dir.path()).unwrap();
        std::fs::create_dir_all(base.join("a/b")).unwrap();
        std::os::unix::fs::symlink(base.join("a/b"), base.join("link")).unwrap();
        std::os::unix::fs::symlink("../..", base.join("a/b/up")).unwrap();
        assert_eq!(resolve_lenient(&base.join("link/x/../y")).unwrap(), base.join("a/b/y"));
        assert_eq!(resolve_lenient(&base.join("a/b/up")).unwrap(), base.clone());
        assert_eq!(resolve_lenient(&base.join("link/..")).unwrap(), base.join("a"));
        assert_eq!(resolve_lenient(&base.join("missing/../a")).unwrap(), base.join("a"));
        std::os::unix::fs::symlink(base.join("loop"), base.join("loop")).unwrap();
        assert!(resolve_lenient(&base.join("loop")).is_err());
    }

    #[test]
    fn user_data_paths_stay_inside_the_thread() {
        let dir = tempfile::tempdir().unwrap();
        let paths = ThreadPaths::new(dir.path(), "t1").unwrap();
        paths.ensure().unwrap();
        let outside = dir.path().join("secret.png");
        std::fs::write(&outside, b"x").unwrap();
        std::os::unix::fs::symlink(&outside, paths.uploads().join("evil.png")).unwrap();
        assert_eq!(resolve_user_data_path(&paths, "/mnt/user-data/uploads/evil.png").unwrap_err(), TRAVERSAL);
        assert_eq!(resolve_user_data_path(&paths, "/mnt/user-data/uploads/../x").unwrap_err(), TRAVERSAL);
        assert_eq!(resolve_user_data_path(&paths, "/mnt/user-data/x.png").unwrap_err(), TRAVERSAL);
        let ok = resolve_user_data_path(&paths, "/mnt/user-data/workspace/a.png").unwrap();
        assert_eq!(ok, resolve_lenient(&paths.workspace()).unwrap().join("a.png"));
    }
}
