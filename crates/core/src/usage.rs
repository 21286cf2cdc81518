//! What a thread's files occupy on disk, and taking back what one call wrote past a limit.
//!
//! A thread's user data (and its ACP workspace) is written by tools the host does not control —
//! a bash command, a component with a filesystem grant — so the walk trusts nothing it meets:
//! it never follows a link, counts allocated blocks (a sparse file counts what it really uses)
//! and each inode once (a thousand hard links to one file are one file). [`trim`] removes what a
//! call added beyond a limit, using a [`Snapshot`] taken before the call to tell the call's
//! files from those already stored: only files the call created are deleted, files it grew are
//! cut back to their size before the call, and nothing that existed before loses a byte.

use std::collections::{HashMap, HashSet};
use std::ffi::{OsStr, OsString};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;

use rustix::fs::{AtFlags, FileType, Mode, OFlags};
use rustix::io::Errno;

/// Directory depth the walk descends to; deeper trees are counted up to here.
const MAX_WALK_DEPTH: usize = 128;

/// An inode, by device and number.
type InodeKey = (u64, u64);

/// One directory the walk covers: its handle and how paths under it are shown (a virtual path).
pub struct WalkRoot {
    pub fd: std::sync::Arc<OwnedFd>,
    pub label: &'static str,
}

/// What the walk tells of each entry.
struct Meta {
    dir: bool,
    len: u64,
    allocated: u64,
    inode: InodeKey,
}

/// One entry the walk met, with where it is (for [`trim`]).
struct Entry {
    root: usize,
    /// Names from the root to the entry's parent.
    parent: Vec<OsString>,
    name: OsString,
    dir: bool,
    len: u64,
    allocated: u64,
    inode: InodeKey,
    depth: usize,
}

impl Entry {
    fn shown(&self, roots: &[WalkRoot]) -> String {
        let mut s = roots[self.root].label.to_string();
        for part in self.parent.iter().chain(std::iter::once(&self.name)) {
            s.push('/');
            s.push_str(&String::from_utf8_lossy(part.as_bytes()));
        }
        s
    }
}

/// The thread's usage at one moment, with each file's size, so a later [`trim`] can tell what
/// was there before.
#[derive(Debug, Default, Clone)]
pub struct Snapshot {
    /// Bytes allocated, each inode counted once.
    pub total: u64,
    /// Size in bytes of every inode met.
    sizes: HashMap<InodeKey, u64>,
}

/// What [`trim`] took back.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Trimmed {
    /// Files and directories the call created, deleted (virtual paths).
    pub removed: Vec<String>,
    /// Files that existed before and grew, cut back to their earlier size (virtual path, size).
    pub truncated: Vec<(String, u64)>,
    /// The usage once done.
    pub usage: u64,
}

impl Trimmed {
    /// One line naming what was taken back, at most `max` paths.
    pub fn describe(&self, max: usize) -> String {
        let mut parts: Vec<String> = self.removed.iter().take(max).map(|p| format!("removed {p}")).collect();
        let room = max.saturating_sub(parts.len());
        parts.extend(self.truncated.iter().take(room).map(|(p, n)| format!("cut {p} back to {n} bytes")));
        let more = (self.removed.len() + self.truncated.len()).saturating_sub(parts.len());
        if more > 0 {
            parts.push(format!("and {more} more"));
        }
        if parts.is_empty() {
            "nothing could be taken back".into()
        } else {
            parts.join(", ")
        }
    }
}

/// Bytes the roots occupy (allocated blocks, each inode once), walking without following links.
pub fn total(roots: &[WalkRoot]) -> u64 {
    let mut seen = HashSet::new();
    let mut total = 0u64;
    walk(roots, &mut |_, _, _, m| {
        if seen.insert(m.inode) {
            total = total.saturating_add(m.allocated);
        }
    });
    total
}

/// The roots' usage with every inode's size.
pub fn snapshot(roots: &[WalkRoot]) -> Snapshot {
    let mut snap = Snapshot::default();
    walk(roots, &mut |_, _, _, m| {
        if snap.sizes.insert(m.inode, m.len).is_none() {
            snap.total = snap.total.saturating_add(m.allocated);
        }
    });
    snap
}

/// Bring the roots' usage down to `limit` by taking back what was written since `before`, the
/// largest first, until the usage fits: a file `before` does not know is deleted, one that grew
/// is cut back to its size in `before`; then directories `before` does not know, deepest first,
/// if empty. A file `before` knows is never deleted and never cut below its size then, so the
/// usage may stay above `limit` by what `before` holds beyond it plus the blocks of new
/// directories that now hold stored files (moved there).
pub fn trim(roots: &[WalkRoot], before: &Snapshot, limit: u64) -> Trimmed {
    let mut entries = Vec::new();
    walk(roots, &mut |root, parent, name, m| {
        entries.push(Entry {
            root,
            parent: parent.to_vec(),
            name: name.to_os_string(),
            dir: m.dir,
            len: m.len,
            allocated: m.allocated,
            inode: m.inode,
            depth: parent.len(),
        })
    });
    let mut links: HashMap<InodeKey, usize> = HashMap::new();
    for e in &entries {
        *links.entry(e.inode).or_default() += 1;
    }
    let mut usage = total_of(&entries);
    let mut out = Trimmed::default();
    // What the call wrote, largest first (the fewest files touched): a new file frees all it
    // holds, a grown one what it grew by.
    let mut taken: Vec<(&Entry, Option<u64>, u64)> = entries
        .iter()
        .filter(|e| !e.dir)
        .filter_map(|e| match before.sizes.get(&e.inode) {
            None => Some((e, None, e.allocated)),
            Some(&old) if e.len > old => Some((e, Some(old), e.len - old)),
            Some(_) => None,
        })
        .collect();
    taken.sort_by_key(|t| std::cmp::Reverse(t.2));
    let mut cut = HashSet::new();
    for (e, old, _) in taken {
        if usage <= limit {
            break;
        }
        match old {
            None => {
                if remove(roots, e, AtFlags::empty()).is_ok() {
                    out.removed.push(e.shown(roots));
                    let left = links.entry(e.inode).or_default();
                    *left = left.saturating_sub(1);
                    // The blocks are freed with the inode's last link.
                    if *left == 0 {
                        usage = usage.saturating_sub(e.allocated);
                    }
                }
            }
            Some(old) => {
                if !cut.insert(e.inode) {
                    continue;
                }
                if let Ok(now) = truncate(roots, e, old) {
                    usage = usage.saturating_sub(e.allocated.saturating_sub(now));
                    out.truncated.push((e.shown(roots), old));
                }
            }
        }
    }
    // New directories, deepest first (each one's children come before it).
    let mut new_dirs: Vec<&Entry> = entries.iter().filter(|e| e.dir && !before.sizes.contains_key(&e.inode)).collect();
    new_dirs.sort_by_key(|e| std::cmp::Reverse(e.depth));
    for e in new_dirs {
        if usage <= limit {
            break;
        }
        if remove(roots, e, AtFlags::REMOVEDIR).is_ok() {
            out.removed.push(e.shown(roots));
            usage = usage.saturating_sub(e.allocated);
        }
    }
    // What the arithmetic above expects, checked on the disk itself.
    out.usage = total(roots);
    out
}

fn total_of(entries: &[Entry]) -> u64 {
    let mut seen = HashSet::new();
    entries.iter().filter(|e| seen.insert(e.inode)).fold(0u64, |t, e| t.saturating_add(e.allocated))
}

/// The entry's parent directory, opened one `O_NOFOLLOW` step at a time from its root: a
/// directory swapped for a link since the walk fails the open instead of leading elsewhere.
fn open_parent(roots: &[WalkRoot], e: &Entry) -> Result<Option<OwnedFd>, Errno> {
    let mut current: Option<OwnedFd> = None;
    for part in &e.parent {
        let base = current.as_ref().map(|f| f.as_fd()).unwrap_or(roots[e.root].fd.as_fd());
        current = Some(rustix::fs::openat(base, part.as_os_str(), dir_flags(), Mode::empty())?);
    }
    Ok(current)
}

fn remove(roots: &[WalkRoot], e: &Entry, flags: AtFlags) -> Result<(), Errno> {
    let parent = open_parent(roots, e)?;
    let dir = parent.as_ref().map(|f| f.as_fd()).unwrap_or(roots[e.root].fd.as_fd());
    // Only the inode the walk met: a file put in its place since is not ours to judge.
    let st = rustix::fs::statat(dir, e.name.as_os_str(), AtFlags::SYMLINK_NOFOLLOW)?;
    if inode_of(&st) != e.inode {
        return Err(Errno::STALE);
    }
    rustix::fs::unlinkat(dir, e.name.as_os_str(), flags)
}

/// Cut a regular file back to `len` bytes; its allocated bytes after.
fn truncate(roots: &[WalkRoot], e: &Entry, len: u64) -> Result<u64, Errno> {
    let parent = open_parent(roots, e)?;
    let dir = parent.as_ref().map(|f| f.as_fd()).unwrap_or(roots[e.root].fd.as_fd());
    let flags = OFlags::WRONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC;
    let fd = rustix::fs::openat(dir, e.name.as_os_str(), flags, Mode::empty())?;
    let st = rustix::fs::fstat(&fd)?;
    if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile || inode_of(&st) != e.inode {
        return Err(Errno::STALE);
    }
    rustix::fs::ftruncate(&fd, len)?;
    Ok(rustix::fs::fstat(&fd)?.st_blocks as u64 * 512)
}

/// `stat`'s field types differ between targets; the key is the same everywhere.
#[allow(clippy::unnecessary_cast)]
fn inode_of(st: &rustix::fs::Stat) -> InodeKey {
    (st.st_dev as u64, st.st_ino as u64)
}

fn dir_flags() -> OFlags {
    OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC
}

/// Visit every entry beneath the roots: (root index, names down to its parent, name, what it is).
type Visit<'a> = dyn FnMut(usize, &[OsString], &OsStr, &Meta) + 'a;

fn walk(roots: &[WalkRoot], visit: &mut Visit<'_>) {
    for (i, root) in roots.iter().enumerate() {
        walk_dir(root.fd.as_fd(), i, &mut Vec::new(), visit);
    }
}

fn walk_dir(dir: BorrowedFd<'_>, root: usize, path: &mut Vec<OsString>, visit: &mut Visit<'_>) {
    let Ok(listing) = rustix::fs::Dir::read_from(dir) else { return };
    for entry in listing {
        let Ok(entry) = entry else { return };
        let name = OsStr::from_bytes(entry.file_name().to_bytes());
        if name == "." || name == ".." {
            continue;
        }
        let Ok(st) = rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) else { continue };
        let is_dir = FileType::from_raw_mode(st.st_mode) == FileType::Directory;
        let meta = Meta {
            dir: is_dir,
            len: st.st_size as u64,
            allocated: (st.st_blocks as u64).saturating_mul(512),
            inode: inode_of(&st),
        };
        visit(root, path, name, &meta);
        if is_dir && path.len() < MAX_WALK_DEPTH {
            if let Ok(sub) = rustix::fs::openat(dir, name, dir_flags(), Mode::empty()) {
                path.push(name.to_os_string());
                walk_dir(sub.as_fd(), root, path, visit);
                path.pop();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn root(dir: &std::path::Path) -> Vec<WalkRoot> {
        let fd = rustix::fs::open(dir, dir_flags(), Mode::empty()).unwrap();
        vec![WalkRoot { fd: Arc::new(fd), label: "/mnt/user-data" }]
    }

    #[test]
    fn hard_links_count_once() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("a"), vec![1u8; 64 << 10]).unwrap();
        let one = total(&root(d.path()));
        for i in 0..20 {
            std::fs::hard_link(d.path().join("a"), d.path().join(format!("l{i}"))).unwrap();
        }
        assert_eq!(total(&root(d.path())), one, "twenty links to one file are one file");
        assert!(one >= 64 << 10);
    }

    /// Trimming deletes only files the snapshot does not know and cuts a grown file back to
    /// its earlier size, never below; a file stored before keeps every byte.
    #[test]
    fn trim_takes_back_only_what_came_after_the_snapshot() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path();
        std::fs::write(p.join("kept"), vec![7u8; 100 << 10]).unwrap();
        std::fs::write(p.join("grown"), vec![1u8; 10 << 10]).unwrap();
        std::fs::create_dir(p.join("old")).unwrap();
        std::fs::write(p.join("old/moved"), vec![2u8; 50 << 10]).unwrap();
        let roots = root(p);
        let before = snapshot(&roots);
        // After the snapshot: two new files (one in a new directory), a grown file, and a stored
        // file moved into the new directory (same inode: still stored).
        std::fs::create_dir(p.join("new")).unwrap();
        std::fs::write(p.join("new/big"), vec![3u8; 400 << 10]).unwrap();
        std::fs::write(p.join("small"), vec![4u8; 4 << 10]).unwrap();
        let mut f = std::fs::OpenOptions::new().append(true).open(p.join("grown")).unwrap();
        std::io::Write::write_all(&mut f, &vec![5u8; 300 << 10]).unwrap();
        drop(f);
        std::fs::rename(p.join("old/moved"), p.join("new/moved")).unwrap();
        let t = trim(&roots, &before, before.total);
        // The new directory holds a stored file: it stays, with its one block.
        assert!(t.usage <= before.total + 4096, "{t:?} over {}", before.total);
        assert!(!p.join("new/big").exists(), "the largest new file went first");
        assert_eq!(std::fs::read(p.join("kept")).unwrap(), vec![7u8; 100 << 10]);
        assert_eq!(std::fs::read(p.join("new/moved")).unwrap(), vec![2u8; 50 << 10], "a moved file is not new");
        assert_eq!(std::fs::read(p.join("grown")).unwrap(), vec![1u8; 10 << 10], "cut back exactly");
        assert!(p.join("new").is_dir(), "a directory holding a stored file stays");
        assert!(t.removed.iter().any(|r| r == "/mnt/user-data/new/big"), "{t:?}");
        assert_eq!(t.truncated, vec![("/mnt/user-data/grown".to_string(), 10 << 10)]);
    }

    /// A limit already met leaves everything as it is.
    #[test]
    fn trim_within_the_limit_touches_nothing() {
        let d = tempfile::tempdir().unwrap();
        let roots = root(d.path());
        let before = snapshot(&roots);
        std::fs::write(d.path().join("n"), b"x").unwrap();
        let t = trim(&roots, &before, u64::MAX);
        assert!(t.removed.is_empty() && t.truncated.is_empty() && d.path().join("n").exists());
    }
}
