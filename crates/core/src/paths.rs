//! The thread directory layout (DeerFlow's): `<data>/threads/<id>/user-data/{workspace,uploads,
//! outputs}` and `<data>/threads/<id>/acp-workspace`, and the virtual paths the model uses.

use std::path::{Path, PathBuf};

pub const VIRTUAL_USER_DATA: &str = "/mnt/user-data";
pub const VIRTUAL_SKILLS: &str = "/mnt/skills";
pub const VIRTUAL_ACP: &str = "/mnt/acp-workspace";

#[derive(Debug, thiserror::Error)]
pub enum PathsError {
    #[error("invalid thread id {0:?}: use letters, digits, '_' and '-' only (at most 128)")]
    InvalidThreadId(String),
}

/// The host directories of one thread.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ThreadPaths {
    pub thread_id: String,
    /// `<data>/threads/<id>`
    pub root: PathBuf,
}

impl ThreadPaths {
    /// The layout for `thread_id` under the data dir. The id becomes a directory name, so it is
    /// checked like DeerFlow's `user_id`: `^[A-Za-z0-9_\-]+$`.
    pub fn new(data_dir: &Path, thread_id: &str) -> Result<Self, PathsError> {
        let ok = !thread_id.is_empty()
            && thread_id.len() <= 128
            && thread_id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
        if !ok {
            return Err(PathsError::InvalidThreadId(thread_id.to_string()));
        }
        Ok(Self { thread_id: thread_id.to_string(), root: data_dir.join("threads").join(thread_id) })
    }

    pub fn user_data(&self) -> PathBuf {
        self.root.join("user-data")
    }
    pub fn workspace(&self) -> PathBuf {
        self.user_data().join("workspace")
    }
    pub fn uploads(&self) -> PathBuf {
        self.user_data().join("uploads")
    }
    pub fn outputs(&self) -> PathBuf {
        self.user_data().join("outputs")
    }
    pub fn acp_workspace(&self) -> PathBuf {
        self.root.join("acp-workspace")
    }
    /// Host-side files of the thread that are not visible to tools (state, marks).
    pub fn host_dir(&self) -> PathBuf {
        self.root.join("host")
    }

    /// The (virtual prefix, host dir) pairs of the thread, longest virtual prefix first.
    pub fn virtual_dirs(&self) -> Vec<(String, PathBuf)> {
        vec![
            (format!("{VIRTUAL_USER_DATA}/workspace"), self.workspace()),
            (format!("{VIRTUAL_USER_DATA}/uploads"), self.uploads()),
            (format!("{VIRTUAL_USER_DATA}/outputs"), self.outputs()),
            (VIRTUAL_USER_DATA.to_string(), self.user_data()),
            (VIRTUAL_ACP.to_string(), self.acp_workspace()),
        ]
    }

    /// Map a virtual path (`/mnt/user-data/outputs/a.md`) to its host path, at segment
    /// boundaries only. `None` when the path is under none of the thread's virtual dirs or has a
    /// `..` segment.
    pub fn to_host(&self, virtual_path: &str) -> Option<PathBuf> {
        let normalized = virtual_path.replace('\\', "/");
        if normalized.split('/').any(|seg| seg == "..") {
            return None;
        }
        for (prefix, host) in self.virtual_dirs() {
            if let Some(rest) = strip_segment_prefix(&normalized, &prefix) {
                let rest = rest.trim_start_matches('/');
                return Some(if rest.is_empty() { host } else { host.join(rest) });
            }
        }
        None
    }

    /// Rewrite host paths of this thread in `text` back to virtual paths (DeerFlow's
    /// `mask_local_paths_in_output`), longest host path first, at segment boundaries.
    pub fn mask(&self, text: &str) -> String {
        let mut pairs: Vec<(String, String)> =
            self.virtual_dirs().into_iter().map(|(v, h)| (h.to_string_lossy().into_owned(), v)).collect();
        pairs.sort_by_key(|(h, _)| std::cmp::Reverse(h.len()));
        let mut out = text.to_string();
        for (host, virt) in pairs {
            out = replace_at_boundaries(&out, &host, &virt);
        }
        out
    }
}

/// `path` with `prefix` removed when `prefix` matches whole segments.
pub fn strip_segment_prefix<'a>(path: &'a str, prefix: &str) -> Option<&'a str> {
    let rest = path.strip_prefix(prefix)?;
    if rest.is_empty() || rest.starts_with('/') {
        Some(rest)
    } else {
        None
    }
}

/// Replace `from` with `to` wherever `from` is followed by a segment boundary (end, `/`, or a
/// character that cannot continue a path segment).
pub fn replace_at_boundaries(text: &str, from: &str, to: &str) -> String {
    if from.is_empty() {
        return text.to_string();
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(pos) = rest.find(from) {
        let after = &rest[pos + from.len()..];
        let boundary =
            after.chars().next().is_none_or(|c| c == '/' || !(c.is_alphanumeric() || c == '-' || c == '_' || c == '.'));
        out.push_str(&rest[..pos]);
        out.push_str(if boundary { to } else { from });
        rest = after;
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejects_bad_thread_ids() {
        for bad in ["", "../x", "a/b", "a b", "ä"] {
            assert!(ThreadPaths::new(Path::new("/d"), bad).is_err(), "{bad}");
        }
        assert!(ThreadPaths::new(Path::new("/d"), "t-1_A").is_ok());
    }

    #[test]
    fn maps_virtual_paths_at_segment_boundaries() {
        let p = ThreadPaths::new(Path::new("/d"), "t1").unwrap();
        assert_eq!(
            p.to_host("/mnt/user-data/outputs/a.md").unwrap(),
            Path::new("/d/threads/t1/user-data/outputs/a.md")
        );
        assert_eq!(p.to_host("/mnt/user-data/workspace").unwrap(), Path::new("/d/threads/t1/user-data/workspace"));
        assert_eq!(p.to_host("/mnt/user-data/workspacex"), Some(PathBuf::from("/d/threads/t1/user-data/workspacex")));
        assert_eq!(p.to_host("/mnt/user-data/workspace/../../x"), None);
        assert_eq!(p.to_host("/etc/passwd"), None);
    }

    #[test]
    fn masks_host_paths() {
        let p = ThreadPaths::new(Path::new("/d"), "t1").unwrap();
        assert_eq!(
            p.mask("see /d/threads/t1/user-data/workspace/x and /d/threads/t1/user-data-backup"),
            "see /mnt/user-data/workspace/x and /d/threads/t1/user-data-backup"
        );
    }
}
