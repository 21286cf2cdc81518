//! Virtual paths as the model writes them (`/mnt/user-data/workspace/a.txt`): one normalisation
//! and one symlink resolver. The host's thread filesystem layer and the sandbox-fs component both
//! use this crate, so a path means the same thing on both sides of the sandbox boundary (the
//! read-before-write gate hashes exactly the file the write will touch).
//!
//! Resolution happens in virtual space: a link's target is read as text and applied to the
//! virtual path; the filesystem never follows a link on our behalf. A path whose resolution leaves
//! the area it started in is refused before anything outside is touched.

/// DeerFlow's `VIRTUAL_PATH_PREFIX`.
pub const USER_DATA: &str = "/mnt/user-data";
/// The per-thread ACP workspace (read-only to tools).
pub const ACP_WORKSPACE: &str = "/mnt/acp-workspace";
/// The default skills container path.
pub const SKILLS: &str = "/mnt/skills";
/// Symlink hops before resolution gives up (Linux's `MAXSYMLINKS`).
pub const MAX_SYMLINK_HOPS: usize = 40;

/// The path's non-empty, non-`.` segments: `//`, `/./` and a trailing `/` do not count.
pub fn segments(path: &str) -> impl Iterator<Item = &str> {
    path.split('/').filter(|s| !s.is_empty() && *s != ".")
}

/// The canonical absolute spelling of a path: its [`segments`] joined with `/` after a leading
/// `/` (`/mnt/user-data//workspace/./a/` → `/mnt/user-data/workspace/a`). `..` is kept as written;
/// callers refuse it first ([`has_traversal`]).
pub fn normalize(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    for seg in segments(path) {
        out.push('/');
        out.push_str(seg);
    }
    if out.is_empty() {
        out.push('/');
    }
    out
}

/// DeerFlow's `_reject_path_traversal`: any `..` segment, with `\` read as `/`.
pub fn has_traversal(path: &str) -> bool {
    path.split(['/', '\\']).any(|s| s == "..")
}

/// `path` equals `prefix` or lies below it at a segment boundary (both normalised).
pub fn under(path: &str, prefix: &str) -> bool {
    if prefix == "/" {
        return path.starts_with('/');
    }
    path == prefix || (path.starts_with(prefix) && path.as_bytes().get(prefix.len()) == Some(&b'/'))
}

/// Which area a root belongs to: the user-data roots may link into each other, every other root
/// only into itself (DeerFlow's per-mapping containment check).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RootKind {
    UserData,
    Skills,
    Acp,
    Mount,
}

/// A directory the sandbox exposes at a virtual path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Root {
    /// Normalised virtual path (`/mnt/user-data/workspace`).
    pub vpath: String,
    pub kind: RootKind,
}

impl Root {
    pub fn new(vpath: &str, kind: RootKind) -> Self {
        Self { vpath: normalize(vpath), kind }
    }
}

/// The three user-data roots every thread has.
pub fn user_data_roots() -> [Root; 3] {
    [
        Root::new("/mnt/user-data/workspace", RootKind::UserData),
        Root::new("/mnt/user-data/uploads", RootKind::UserData),
        Root::new("/mnt/user-data/outputs", RootKind::UserData),
    ]
}

/// Why a path could not be resolved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResolveError {
    /// The path, or a link on the way, leaves the area it started in (or no root holds it).
    Escapes,
    /// More than [`MAX_SYMLINK_HOPS`] links.
    Loop,
}

/// The deepest root holding `path` (normalised).
pub fn root_of<'r>(roots: &'r [Root], path: &str) -> Option<&'r Root> {
    roots.iter().filter(|r| under(path, &r.vpath)).max_by_key(|r| r.vpath.len())
}

fn is_ancestor_of_root(roots: &[Root], path: &str) -> bool {
    roots.iter().any(|r| path == "/" || (r.vpath.len() > path.len() && under(&r.vpath, path)))
}

fn join_abs(parts: &[String]) -> String {
    if parts.is_empty() {
        return "/".to_string();
    }
    let mut s = String::new();
    for p in parts {
        s.push('/');
        s.push_str(p);
    }
    s
}

/// Resolve the symlinks of `path` like `realpath` (non-strict: parts that do not exist are kept
/// as written), in virtual space. `read_link(vpath)` reports what is at a virtual path strictly
/// below a root: `Ok(Some(target))` for a symlink, `Ok(None)` for anything else (including
/// nothing), `Err(())` when the link cannot be read (treated as an escape). The result must end in
/// the area the path started in: a user-data root for a user-data path, the same root otherwise.
pub fn resolve(
    roots: &[Root],
    path: &str,
    mut read_link: impl FnMut(&str) -> Result<Option<String>, ()>,
) -> Result<String, ResolveError> {
    let start = root_of(roots, &normalize(path)).cloned();
    let mut resolved: Vec<String> = Vec::new();
    let mut pending: std::collections::VecDeque<String> = segments(path).map(str::to_string).collect();
    let mut hops = 0usize;
    while let Some(seg) = pending.pop_front() {
        if seg == "." || seg.is_empty() {
            continue;
        }
        if seg == ".." {
            resolved.pop();
            continue;
        }
        resolved.push(seg);
        let cur = join_abs(&resolved);
        match root_of(roots, &cur) {
            Some(root) if root.vpath != cur => {
                let Some(target) = read_link(&cur).map_err(|()| ResolveError::Escapes)? else { continue };
                hops += 1;
                if hops > MAX_SYMLINK_HOPS {
                    return Err(ResolveError::Loop);
                }
                if target.starts_with('/') {
                    resolved.clear();
                } else {
                    resolved.pop();
                }
                for (i, s) in target.split('/').filter(|s| !s.is_empty()).enumerate() {
                    pending.insert(i, s.to_string());
                }
            }
            Some(_) => {}
            None if is_ancestor_of_root(roots, &cur) => {}
            None => return Err(ResolveError::Escapes),
        }
    }
    let out = join_abs(&resolved);
    let end = root_of(roots, &out).ok_or(ResolveError::Escapes)?;
    let ok = match &start {
        Some(s) if s.kind == RootKind::UserData => end.kind == RootKind::UserData,
        Some(s) => s.vpath == end.vpath,
        None => false,
    };
    if ok {
        Ok(out)
    } else {
        Err(ResolveError::Escapes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn roots() -> Vec<Root> {
        let mut r = user_data_roots().to_vec();
        r.push(Root::new("/mnt/skills", RootKind::Skills));
        r.push(Root::new("/mnt/acp-workspace", RootKind::Acp));
        r.push(Root::new("/mnt/data", RootKind::Mount));
        r
    }

    fn links(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect()
    }

    fn res(links: &HashMap<String, String>, path: &str) -> Result<String, ResolveError> {
        resolve(&roots(), path, |p| Ok(links.get(p).cloned()))
    }

    #[test]
    fn normalisation() {
        assert_eq!(normalize("/mnt/user-data//workspace/./a/"), "/mnt/user-data/workspace/a");
        assert_eq!(normalize("x.txt/"), "/x.txt");
        assert_eq!(normalize(""), "/");
        assert!(has_traversal("/a/../b") && has_traversal("a\\..\\b") && !has_traversal("/a/..b"));
        assert!(under("/mnt/user-data/workspace/a", "/mnt/user-data/workspace"));
        assert!(!under("/mnt/user-data/workspaceX", "/mnt/user-data/workspace"));
    }

    #[test]
    fn links_inside_user_data_resolve_and_links_out_escape() {
        let l = links(&[
            ("/mnt/user-data/outputs/ok.md", "../workspace/real.md"),
            ("/mnt/user-data/uploads/abs", "/mnt/user-data/workspace/x"),
            ("/mnt/user-data/uploads/out", "../../../etc/shadow"),
            ("/mnt/user-data/uploads/abs-out", "/etc/passwd"),
            ("/mnt/user-data/workspace/up", ".."),
            ("/mnt/user-data/workspace/loop", "loop"),
            ("/mnt/data/in", "sub/f"),
            ("/mnt/data/to-ud", "/mnt/user-data/workspace/x"),
            ("/mnt/user-data/workspace/to-skills", "/mnt/skills/public/a"),
        ]);
        assert_eq!(res(&l, "/mnt/user-data/outputs/ok.md").unwrap(), "/mnt/user-data/workspace/real.md");
        assert_eq!(res(&l, "/mnt/user-data/uploads/abs/").unwrap(), "/mnt/user-data/workspace/x");
        assert_eq!(res(&l, "/mnt/user-data/uploads/out"), Err(ResolveError::Escapes));
        assert_eq!(res(&l, "/mnt/user-data/uploads/abs-out"), Err(ResolveError::Escapes));
        assert_eq!(res(&l, "/mnt/user-data/workspace/up/x"), Err(ResolveError::Escapes));
        assert_eq!(res(&l, "/mnt/user-data/workspace/loop"), Err(ResolveError::Loop));
        assert_eq!(res(&l, "/mnt/data/in").unwrap(), "/mnt/data/sub/f");
        assert_eq!(res(&l, "/mnt/data/to-ud"), Err(ResolveError::Escapes));
        assert_eq!(res(&l, "/mnt/user-data/workspace/to-skills"), Err(ResolveError::Escapes));
        assert_eq!(res(&l, "/mnt/user-data/"), Err(ResolveError::Escapes));
        assert_eq!(res(&l, "/mnt/user-data/workspaceX"), Err(ResolveError::Escapes));
        assert_eq!(res(&l, "/mnt/user-data/workspace//a/./b/").unwrap(), "/mnt/user-data/workspace/a/b");
        // A link that cannot be read is an escape, never a silent pass.
        assert_eq!(resolve(&roots(), "/mnt/user-data/workspace/a", |_| Err(())), Err(ResolveError::Escapes));
    }
}
