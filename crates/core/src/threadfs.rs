//! The thread filesystem layer: the one way host code touches a thread's files.
//!
//! A thread directory is shaped by the tools that run in it (a component with `filesystem:
//! user-data`, a bash command): it may hold symlinks, FIFOs, sparse multi-GiB files, or a thread
//! directory replaced by a link. So nothing here trusts a path. The thread's directories are opened
//! once, beneath a trusted root, with `O_NOFOLLOW`, and cached as open handles (component preopens
//! and the bash confinement are built from these handles, so nothing is re-resolved between check
//! and use). A virtual path is resolved in virtual space with the resolver sandbox-fs uses
//! ([`toolhost_vpath`]), then opened beneath its root with no symlink resolution at all
//! (`openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)`, or one `O_NOFOLLOW` step per component where
//! `openat2` is missing). Files are opened `O_NONBLOCK` and must be regular by `fstat` (a FIFO
//! never blocks), and every read has a cap fitted to its purpose.

use std::collections::HashMap;
use std::fs::File;
use std::io::{self, Read};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use rustix::fs::{AtFlags, FileType, Mode, OFlags, ResolveFlags};
use rustix::io::Errno;
use sha2::{Digest as _, Sha256};
use toolhost_vpath::{Root, RootKind};

use crate::paths::{PathsError, ThreadPaths, VIRTUAL_ACP, VIRTUAL_USER_DATA};

/// Mode of every directory the host creates for a thread.
const DIR_MODE: u32 = 0o700;
/// Mode of the host's private files (thread state, marks).
const PRIVATE_FILE_MODE: u32 = 0o600;

/// One of a thread's directories.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ThreadDir {
    /// `<data>/threads/<id>`
    Root,
    /// `user-data`: holds the three tool-visible directories (and the bash tmp/home).
    UserData,
    /// `/mnt/user-data/workspace`
    Workspace,
    /// `/mnt/user-data/uploads`
    Uploads,
    /// `/mnt/user-data/outputs`
    Outputs,
    /// `/mnt/acp-workspace`
    Acp,
    /// Host-side files no tool sees (state, marks).
    Host,
    /// `TMPDIR` of confined bash commands.
    BashTmp,
    /// `HOME` of confined bash commands.
    BashHome,
}

impl ThreadDir {
    const COUNT: usize = 9;

    fn index(self) -> usize {
        self as usize
    }

    fn parent(self) -> Option<ThreadDir> {
        use ThreadDir::*;
        match self {
            Root => None,
            UserData | Acp | Host => Some(Root),
            Workspace | Uploads | Outputs | BashTmp | BashHome => Some(UserData),
        }
    }

    /// The directory's name inside its parent.
    pub fn name(self) -> &'static str {
        use ThreadDir::*;
        match self {
            Root => ".",
            UserData => "user-data",
            Workspace => "workspace",
            Uploads => "uploads",
            Outputs => "outputs",
            Acp => "acp-workspace",
            Host => "host",
            BashTmp => ".tmp",
            BashHome => ".home",
        }
    }

    /// How messages name the directory: its virtual path where tools see it.
    pub fn label(self) -> &'static str {
        use ThreadDir::*;
        match self {
            Root => "the thread directory",
            UserData => "/mnt/user-data",
            Workspace => "/mnt/user-data/workspace",
            Uploads => "/mnt/user-data/uploads",
            Outputs => "/mnt/user-data/outputs",
            Acp => "/mnt/acp-workspace",
            Host => "the thread's host directory",
            BashTmp => "/mnt/user-data/.tmp",
            BashHome => "/mnt/user-data/.home",
        }
    }

    /// The directory's path relative to the thread root (`user-data/workspace`).
    pub fn relative(self) -> PathBuf {
        match self.parent() {
            None => PathBuf::new(),
            Some(p) => p.relative().join(self.name()),
        }
    }
}

/// Why a thread directory could not be opened or created.
#[derive(Debug, thiserror::Error)]
pub enum ThreadFsError {
    #[error(transparent)]
    Paths(#[from] PathsError),
    #[error("{} was replaced by something that is not a directory (a symlink?); refusing to use it", .0.label())]
    Replaced(ThreadDir),
    #[error("cannot open {}: {source}", .dir.label())]
    Open { dir: ThreadDir, source: io::Error },
    #[error("cannot open the threads directory {path}: {source}")]
    Threads { path: PathBuf, source: io::Error },
}

/// Why a file of a thread could not be read. Messages name virtual paths only.
#[derive(Debug, thiserror::Error)]
pub enum FsError {
    #[error("{0}: no such file")]
    NotFound(String),
    #[error("{0}: the path leaves the thread's directories")]
    Escapes(String),
    #[error("{0}: too many levels of symbolic links")]
    Loop(String),
    #[error("{path}: not a regular file (a {kind})")]
    NotRegular { path: String, kind: &'static str },
    #[error("{path}: {size} bytes, over the {cap}-byte limit for this read")]
    TooLarge { path: String, size: u64, cap: u64 },
    #[error("{path}: a symbolic link appeared while it was being opened; refusing")]
    Changed { path: String },
    #[error(transparent)]
    Dir(#[from] ThreadFsError),
    #[error("{path}: {source}")]
    Io { path: String, source: io::Error },
}

impl FsError {
    /// Whether the file (or a directory on its way) does not exist.
    pub fn is_not_found(&self) -> bool {
        matches!(self, FsError::NotFound(_))
    }
}

/// A directory every thread sees besides its own (the skills directory, a `sandbox.mounts`
/// entry). Its host path comes from the config, so it is opened by path once; what is inside it
/// is read with the same no-follow opens as a thread's files.
#[derive(Debug)]
pub struct SharedDir {
    /// Where tools see it (`/mnt/skills`, a mount's `container_path`).
    pub vpath: String,
    pub host: PathBuf,
    pub read_only: bool,
    fd: Arc<OwnedFd>,
}

impl SharedDir {
    /// Open `host` (following links: the config names it) as a directory.
    pub fn open(vpath: &str, host: &Path, read_only: bool) -> io::Result<Self> {
        let fd = rustix::fs::open(host, OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty())?;
        Ok(Self { vpath: toolhost_vpath::normalize(vpath), host: host.to_path_buf(), read_only, fd: Arc::new(fd) })
    }

    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// The open handle (kept alive by the caller while a preopen is built from it).
    pub fn handle(&self) -> Arc<OwnedFd> {
        self.fd.clone()
    }
}

/// The skills directory and the mounts: shared by every thread of a host.
#[derive(Debug, Default)]
pub struct SharedRoots {
    skills: Option<SharedDir>,
    mounts: Vec<SharedDir>,
}

impl SharedRoots {
    pub fn new(skills: Option<SharedDir>, mounts: Vec<SharedDir>) -> Self {
        Self { skills, mounts }
    }

    pub fn skills(&self) -> Option<&SharedDir> {
        self.skills.as_ref()
    }

    pub fn mounts(&self) -> &[SharedDir] {
        &self.mounts
    }
}

/// Where a resolved virtual path lives: which directory handle it is opened beneath.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Base {
    Thread(ThreadDir),
    Skills,
    Mount(usize),
}

/// A virtual path after symlink resolution.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    /// The resolved virtual path (`/mnt/user-data/workspace/real.md`).
    pub vpath: String,
    pub base: Base,
    /// The path below the base directory; empty for the base itself.
    pub rel: String,
}

/// An entry of a thread directory, as `lstat` sees it (links are never followed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirEntry {
    pub name: String,
    pub kind: EntryKind,
    /// Apparent size in bytes.
    pub len: u64,
    /// Bytes allocated on disk (a sparse file's apparent size may be far larger).
    pub allocated: u64,
    pub modified: SystemTime,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryKind {
    File,
    Dir,
    Symlink,
    /// A FIFO, socket or device.
    Special,
}

/// A regular file of a thread, open for reading.
#[derive(Debug)]
pub struct ThreadFile {
    file: File,
    /// Its size when it was opened.
    pub len: u64,
    /// The resolved virtual path.
    pub vpath: String,
}

impl ThreadFile {
    /// When the file was last modified.
    pub fn modified(&self) -> io::Result<SystemTime> {
        self.file.metadata()?.modified()
    }

    /// The whole file, refusing one larger than `cap` bytes (by its size, and by what is read, so a
    /// file that grows while being read cannot push past the cap).
    pub fn read_capped(self, cap: u64) -> Result<Vec<u8>, FsError> {
        if self.len > cap {
            return Err(FsError::TooLarge { path: self.vpath, size: self.len, cap });
        }
        let mut data = Vec::with_capacity(self.len as usize);
        let path = self.vpath;
        (&self.file)
            .take(cap + 1)
            .read_to_end(&mut data)
            .map_err(|source| FsError::Io { path: path.clone(), source })?;
        if data.len() as u64 > cap {
            return Err(FsError::TooLarge { path, size: data.len() as u64, cap });
        }
        Ok(data)
    }

    /// At most the first `limit` bytes (a preview, an outline).
    pub fn read_prefix(self, limit: u64) -> Result<Vec<u8>, FsError> {
        let mut data = Vec::with_capacity(self.len.min(limit) as usize);
        (&self.file)
            .take(limit)
            .read_to_end(&mut data)
            .map_err(|source| FsError::Io { path: self.vpath.clone(), source })?;
        Ok(data)
    }

    /// The sha256 (hex) of the whole file, streamed, refusing one larger than `cap` bytes.
    pub fn sha256_capped(self, cap: u64) -> Result<String, FsError> {
        self.digest_capped(cap).map(|d| d.sha256)
    }

    /// The sha256 of the whole file and whether it is valid UTF-8, streamed, refusing one larger
    /// than `cap` bytes.
    pub fn digest_capped(self, cap: u64) -> Result<Digest, FsError> {
        if self.len > cap {
            return Err(FsError::TooLarge { path: self.vpath, size: self.len, cap });
        }
        let mut hasher = Sha256::new();
        let mut buf = vec![0u8; 64 * 1024];
        let mut total = 0u64;
        let mut utf8 = Utf8Stream::default();
        let mut reader = (&self.file).take(cap + 1);
        loop {
            let n = match reader.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(source) => return Err(FsError::Io { path: self.vpath, source }),
            };
            total += n as u64;
            if total > cap {
                return Err(FsError::TooLarge { path: self.vpath, size: total, cap });
            }
            hasher.update(&buf[..n]);
            utf8.feed(&buf[..n]);
        }
        Ok(Digest { sha256: hex(&hasher.finalize()), utf8: utf8.finish() })
    }
}

impl ThreadFile {
    /// The open file itself, for a reader that needs `Seek` (an archive read in place).
    pub fn into_file(self) -> File {
        self.file
    }
}

/// A directory opened beneath a thread root or a shared root with no symlink followed, walked
/// one entry at a time: every step below it is an `O_NOFOLLOW` open relative to this handle, so
/// a link inside the tree is reported as a link and never entered (a package reader walks a
/// whole tree through it).
#[derive(Debug)]
pub struct DirHandle {
    fd: OwnedFd,
    /// How messages name the directory (its virtual path).
    pub vpath: String,
}

impl DirHandle {
    /// A directory named by the host's own configuration (the skills root), opened by path
    /// (following links, as [`SharedDir::open`] does); what is below it is opened with no link
    /// followed.
    pub fn open_config_path(host: &Path, vpath: &str) -> Result<Self, FsError> {
        let fd = rustix::fs::open(host, OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty())
            .map_err(|e| dir_open_error(e, vpath))?;
        Ok(Self { fd, vpath: vpath.to_string() })
    }

    /// The entries, by `lstat` (links are reported as links), sorted by name.
    pub fn entries(&self) -> Result<Vec<DirEntry>, FsError> {
        let mut out = list_fd(self.fd.as_fd(), &self.vpath)?;
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }

    fn child_vpath(&self, name: &str) -> String {
        format!("{}/{name}", self.vpath.trim_end_matches('/'))
    }

    /// The subdirectory `name` (one path component), refusing a symlink.
    pub fn subdir(&self, name: &str) -> Result<Self, FsError> {
        let shown = self.child_vpath(name);
        check_component(name, &shown)?;
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let fd = rustix::fs::openat(&self.fd, name, flags, Mode::empty()).map_err(|e| dir_open_error(e, &shown))?;
        Ok(Self { fd, vpath: shown })
    }

    /// The regular file `name` (one path component), opened `O_NOFOLLOW | O_NONBLOCK` and
    /// refused unless `fstat` says it is a regular file.
    pub fn open_file(&self, name: &str) -> Result<ThreadFile, FsError> {
        let shown = self.child_vpath(name);
        check_component(name, &shown)?;
        let flags = OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC | OFlags::NOFOLLOW;
        let fd = rustix::fs::openat(&self.fd, name, flags, Mode::empty()).map_err(|e| match e {
            Errno::NOENT | Errno::NOTDIR => FsError::NotFound(shown.clone()),
            Errno::LOOP => FsError::NotRegular { path: shown.clone(), kind: "symbolic link" },
            e => FsError::Io { path: shown.clone(), source: e.into() },
        })?;
        let st = rustix::fs::fstat(&fd).map_err(|e| FsError::Io { path: shown.clone(), source: e.into() })?;
        match FileType::from_raw_mode(st.st_mode) {
            FileType::RegularFile => {}
            other => return Err(FsError::NotRegular { path: shown, kind: kind_name(other) }),
        }
        Ok(ThreadFile { file: File::from(fd), len: st.st_size as u64, vpath: shown })
    }

    /// The target of the symlink `name`, as written (never followed).
    pub fn read_link(&self, name: &str) -> Result<String, FsError> {
        let shown = self.child_vpath(name);
        check_component(name, &shown)?;
        rustix::fs::readlinkat(&self.fd, name, Vec::new())
            .map(|t| String::from_utf8_lossy(t.as_bytes()).into_owned())
            .map_err(|e| FsError::Io { path: shown, source: e.into() })
    }
}

fn check_component(name: &str, shown: &str) -> Result<(), FsError> {
    if name.is_empty() || name == "." || name == ".." || name.contains('/') {
        return Err(FsError::Escapes(shown.to_string()));
    }
    Ok(())
}

fn dir_open_error(e: Errno, shown: &str) -> FsError {
    match e {
        Errno::NOENT => FsError::NotFound(shown.to_string()),
        Errno::NOTDIR => FsError::NotRegular { path: shown.to_string(), kind: "file that is not a directory" },
        Errno::LOOP => FsError::NotRegular { path: shown.to_string(), kind: "symbolic link" },
        e => FsError::Io { path: shown.to_string(), source: e.into() },
    }
}

/// What [`ThreadFile::digest_capped`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Digest {
    pub sha256: String,
    /// The whole file is valid UTF-8.
    pub utf8: bool,
}

/// UTF-8 validation over chunks: a sequence cut by a chunk boundary is carried to the next chunk.
#[derive(Default)]
struct Utf8Stream {
    carry: Vec<u8>,
    invalid: bool,
}

impl Utf8Stream {
    fn feed(&mut self, chunk: &[u8]) {
        if self.invalid {
            return;
        }
        let mut joined = std::mem::take(&mut self.carry);
        let chunk = if joined.is_empty() {
            chunk
        } else {
            joined.extend_from_slice(chunk);
            &joined[..]
        };
        match std::str::from_utf8(chunk) {
            Ok(_) => {}
            // `error_len() == None`: the chunk ends inside a sequence that may complete later.
            Err(e) if e.error_len().is_none() => self.carry = chunk[e.valid_up_to()..].to_vec(),
            Err(_) => self.invalid = true,
        }
    }

    fn finish(self) -> bool {
        !self.invalid && self.carry.is_empty()
    }
}

fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(DIGITS[(b >> 4) as usize] as char);
        s.push(DIGITS[(b & 15) as usize] as char);
    }
    s
}

/// One thread's files.
#[derive(Debug)]
pub struct ThreadFs {
    paths: ThreadPaths,
    shared: Arc<SharedRoots>,
    threads_dir: Arc<OwnedFd>,
    dirs: Mutex<[Option<Arc<OwnedFd>>; ThreadDir::COUNT]>,
}

impl ThreadFs {
    /// The thread `thread_id` under `data_dir`, with no shared directories (tests, tools that
    /// need only the thread's own files). Creates `<data>/threads` 0700 if missing.
    pub fn open(data_dir: &Path, thread_id: &str) -> Result<Self, ThreadFsError> {
        let threads = open_threads_dir(data_dir)?;
        Self::with_threads_dir(data_dir, thread_id, Arc::new(threads), Arc::default())
    }

    fn with_threads_dir(
        data_dir: &Path,
        thread_id: &str,
        threads_dir: Arc<OwnedFd>,
        shared: Arc<SharedRoots>,
    ) -> Result<Self, ThreadFsError> {
        let paths = ThreadPaths::new(data_dir, thread_id)?;
        let fs = Self { paths, shared, threads_dir, dirs: Mutex::new(Default::default()) };
        fs.dir(ThreadDir::Root)?;
        Ok(fs)
    }

    pub fn paths(&self) -> &ThreadPaths {
        &self.paths
    }

    /// Whether the thread's root handle is still the directory its name leads to under the
    /// threads directory (not removed, renamed away or replaced since it was opened).
    pub fn still_in_place(&self) -> bool {
        let Some(root) = self.cached(ThreadDir::Root) else { return true };
        let named = rustix::fs::statat(&*self.threads_dir, self.paths.thread_id.as_str(), AtFlags::SYMLINK_NOFOLLOW);
        match (named, rustix::fs::fstat(&*root)) {
            (Ok(named), Ok(open)) => named.st_dev == open.st_dev && named.st_ino == open.st_ino,
            _ => false,
        }
    }

    pub fn thread_id(&self) -> &str {
        &self.paths.thread_id
    }

    pub fn shared(&self) -> &SharedRoots {
        &self.shared
    }

    /// An open handle on one of the thread's directories, created (0700) if missing. The handle
    /// is opened with `O_NOFOLLOW` beneath its parent's handle and cached: a directory replaced by
    /// a symlink is refused, and a rename after opening cannot redirect it.
    pub fn dir(&self, which: ThreadDir) -> Result<Arc<OwnedFd>, ThreadFsError> {
        if let Some(fd) = self.cached(which) {
            return Ok(fd);
        }
        let opened = match which.parent() {
            None => open_or_create_dir(&self.threads_dir, &self.paths.thread_id, which)?,
            Some(parent) => {
                let parent = self.dir(parent)?;
                open_or_create_dir(&parent, which.name(), which)?
            }
        };
        let mut dirs = self.lock_dirs();
        Ok(dirs[which.index()].get_or_insert_with(|| Arc::new(opened)).clone())
    }

    /// The cached handle, unless its directory was deleted since (`rm -rf` of a thread by an
    /// operator): a handle on a deleted directory would swallow writes.
    fn cached(&self, which: ThreadDir) -> Option<Arc<OwnedFd>> {
        let mut dirs = self.lock_dirs();
        let fd = dirs[which.index()].clone()?;
        if rustix::fs::fstat(&*fd).is_ok_and(|st| st.st_nlink > 0) {
            return Some(fd);
        }
        dirs[which.index()] = None;
        None
    }

    fn lock_dirs(&self) -> std::sync::MutexGuard<'_, [Option<Arc<OwnedFd>>; ThreadDir::COUNT]> {
        self.dirs.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether one of the thread's directories exists, without creating it (or any parent).
    pub fn exists(&self, which: ThreadDir) -> bool {
        if self.cached(which).is_some() {
            return true;
        }
        let Some(parent) = which.parent() else { return true };
        if !self.exists(parent) {
            return false;
        }
        self.dir(parent)
            .ok()
            .and_then(|p| rustix::fs::statat(&*p, which.name(), AtFlags::SYMLINK_NOFOLLOW).ok())
            .is_some()
    }

    /// DeerFlow's `ensure_thread_dirs`: the directories tools see exist (idempotent, cheap once the
    /// handles are cached).
    pub fn ensure_tool_dirs(&self) -> Result<(), ThreadFsError> {
        for d in [ThreadDir::Workspace, ThreadDir::Uploads, ThreadDir::Outputs, ThreadDir::Acp] {
            self.dir(d)?;
        }
        Ok(())
    }

    /// The virtual roots of this thread: the user-data directories, the ACP workspace, the skills
    /// directory and the mounts.
    pub fn roots(&self) -> Vec<Root> {
        let mut roots = toolhost_vpath::user_data_roots().to_vec();
        roots.push(Root::new(VIRTUAL_ACP, RootKind::Acp));
        if let Some(s) = &self.shared.skills {
            roots.push(Root::new(&s.vpath, RootKind::Skills));
        }
        for m in &self.shared.mounts {
            roots.push(Root::new(&m.vpath, RootKind::Mount));
        }
        roots
    }

    /// Map a normalised virtual path that lies in (or is) a root to its base directory and the
    /// path below it.
    fn locate(&self, vpath: &str) -> Option<(Base, String)> {
        let rest_of = |prefix: &str| -> Option<String> {
            toolhost_vpath::under(vpath, prefix).then(|| vpath[prefix.len()..].trim_start_matches('/').to_string())
        };
        for (dir, prefix) in [
            (ThreadDir::Workspace, "/mnt/user-data/workspace"),
            (ThreadDir::Uploads, "/mnt/user-data/uploads"),
            (ThreadDir::Outputs, "/mnt/user-data/outputs"),
            (ThreadDir::Acp, VIRTUAL_ACP),
        ] {
            if let Some(rest) = rest_of(prefix) {
                return Some((Base::Thread(dir), rest));
            }
        }
        let mut best: Option<(Base, String, usize)> = None;
        for (i, m) in self.shared.mounts.iter().enumerate() {
            if let Some(rest) = rest_of(&m.vpath) {
                if best.as_ref().is_none_or(|b| m.vpath.len() > b.2) {
                    best = Some((Base::Mount(i), rest, m.vpath.len()));
                }
            }
        }
        if let Some(s) = &self.shared.skills {
            if let Some(rest) = rest_of(&s.vpath) {
                if best.as_ref().is_none_or(|b| s.vpath.len() > b.2) {
                    best = Some((Base::Skills, rest, s.vpath.len()));
                }
            }
        }
        best.map(|(b, r, _)| (b, r))
    }

    /// The open handle of a base directory.
    pub fn base_dir(&self, base: Base) -> Result<Arc<OwnedFd>, FsError> {
        match base {
            Base::Thread(d) => Ok(self.dir(d)?),
            Base::Skills => self
                .shared
                .skills
                .as_ref()
                .map(SharedDir::handle)
                .ok_or_else(|| FsError::NotFound("/mnt/skills".into())),
            Base::Mount(i) => {
                self.shared.mounts.get(i).map(SharedDir::handle).ok_or_else(|| FsError::NotFound(format!("mount #{i}")))
            }
        }
    }

    /// Resolve the symlinks of a virtual path in virtual space (links are read, never followed),
    /// exactly as sandbox-fs does: `//`, `.` and a trailing `/` are dropped, `..` is refused, and a
    /// path that leaves its area is refused.
    pub fn resolve(&self, vpath: &str) -> Result<Resolved, FsError> {
        if toolhost_vpath::has_traversal(vpath) {
            return Err(FsError::Escapes(vpath.to_string()));
        }
        self.resolve_with_parent_segments(vpath)
    }

    /// [`resolve`](Self::resolve) that applies `..` segments the way `realpath` does (after the
    /// links before them), for the callers whose DeerFlow counterpart accepts them
    /// (`present_files`); the result must still lie in a root.
    pub fn resolve_with_parent_segments(&self, vpath: &str) -> Result<Resolved, FsError> {
        let roots = self.roots();
        let resolved = toolhost_vpath::resolve(&roots, vpath, |cur| {
            let Some((base, rel)) = self.locate(cur) else { return Ok(None) };
            if rel.is_empty() {
                return Ok(None);
            }
            let dir = self.base_dir(base).map_err(|_| ())?;
            match rustix::fs::readlinkat(&*dir, rel.as_str(), Vec::new()) {
                Ok(target) => {
                    let target = String::from_utf8_lossy(target.as_bytes()).into_owned();
                    Ok(Some(self.host_target_to_virtual(&target).unwrap_or(target)))
                }
                // Not a link, or nothing there: resolution keeps the segment as written.
                Err(Errno::INVAL | Errno::NOENT | Errno::NOTDIR) => Ok(None),
                Err(_) => Err(()),
            }
        })
        .map_err(|e| match e {
            toolhost_vpath::ResolveError::Escapes => FsError::Escapes(vpath.to_string()),
            toolhost_vpath::ResolveError::Loop => FsError::Loop(vpath.to_string()),
        })?;
        let (base, rel) = self.locate(&resolved).ok_or_else(|| FsError::Escapes(vpath.to_string()))?;
        Ok(Resolved { vpath: resolved, base, rel })
    }

    /// A link target that names one of this thread's directories (or a shared one) by its host
    /// path, as its virtual path. Host bash rewrites `/mnt/user-data/...` to host paths, so the
    /// links it creates carry them; any other host path is left as written and then refused.
    fn host_target_to_virtual(&self, target: &str) -> Option<String> {
        if !target.starts_with('/') {
            return None;
        }
        let mut pairs: Vec<(PathBuf, String)> = self.paths.virtual_dirs().into_iter().map(|(v, h)| (h, v)).collect();
        if let Some(s) = &self.shared.skills {
            pairs.push((s.host.clone(), s.vpath.clone()));
        }
        for m in &self.shared.mounts {
            pairs.push((m.host.clone(), m.vpath.clone()));
        }
        let target = Path::new(target);
        pairs
            .iter()
            .flat_map(|(h, v)| {
                let absolute = std::path::absolute(h).ok();
                [Some(h.clone()), absolute].into_iter().flatten().map(move |h| (h, v))
            })
            .filter_map(|(h, v)| {
                let rest = target.strip_prefix(&h).ok()?.to_str()?.to_string();
                Some((h.as_os_str().len(), if rest.is_empty() { v.clone() } else { format!("{v}/{rest}") }))
            })
            .max_by_key(|(len, _)| *len)
            .map(|(_, v)| v)
    }

    /// The absolute host path of a resolved virtual path, as Python's `Path.resolve()` would
    /// print it (DeerFlow's `actual_path`); for reporting, never for opening.
    pub fn host_path(&self, r: &Resolved) -> PathBuf {
        let base = match r.base {
            Base::Thread(d) => self.paths().root.join(d.relative()),
            Base::Skills => self.shared.skills.as_ref().map(|s| s.host.clone()).unwrap_or_default(),
            Base::Mount(i) => self.shared.mounts.get(i).map(|m| m.host.clone()).unwrap_or_default(),
        };
        let base = std::fs::canonicalize(&base).unwrap_or_else(|_| std::path::absolute(&base).unwrap_or(base));
        if r.rel.is_empty() {
            base
        } else {
            base.join(&r.rel)
        }
    }

    /// Open a thread file for reading: resolved in virtual space, opened beneath its root with
    /// no symlink followed, `O_NONBLOCK` (a FIFO never blocks the open), and refused unless
    /// `fstat` says it is a regular file. `shown` names the file in errors (the path as the
    /// caller wrote it).
    pub fn open_regular(&self, vpath: &str) -> Result<ThreadFile, FsError> {
        let r = self.resolve(vpath)?;
        self.open_resolved(&r, vpath)
    }

    /// [`open_regular`](Self::open_regular) of an already resolved path.
    pub fn open_resolved(&self, r: &Resolved, shown: &str) -> Result<ThreadFile, FsError> {
        let dir = self.base_dir(r.base)?;
        let fd = open_beneath(dir.as_fd(), &r.rel).map_err(|e| match e {
            Errno::NOENT | Errno::NOTDIR => FsError::NotFound(shown.to_string()),
            Errno::LOOP | Errno::XDEV => FsError::Changed { path: shown.to_string() },
            e => FsError::Io { path: shown.to_string(), source: e.into() },
        })?;
        let st = rustix::fs::fstat(&fd).map_err(|e| FsError::Io { path: shown.to_string(), source: e.into() })?;
        match FileType::from_raw_mode(st.st_mode) {
            FileType::RegularFile => {}
            other => return Err(FsError::NotRegular { path: shown.to_string(), kind: kind_name(other) }),
        }
        Ok(ThreadFile { file: File::from(fd), len: st.st_size as u64, vpath: r.vpath.clone() })
    }

    /// Open a directory of the thread (or of a shared root) by its virtual path: resolved in
    /// virtual space like [`open_regular`](Self::open_regular), opened beneath its root with no
    /// symlink followed, refused unless it is a directory.
    pub fn open_dir_resolved(&self, r: &Resolved, shown: &str) -> Result<DirHandle, FsError> {
        let dir = self.base_dir(r.base)?;
        let fd = open_beneath(dir.as_fd(), &r.rel).map_err(|e| match e {
            Errno::NOENT | Errno::NOTDIR => FsError::NotFound(shown.to_string()),
            Errno::LOOP | Errno::XDEV => FsError::Changed { path: shown.to_string() },
            e => FsError::Io { path: shown.to_string(), source: e.into() },
        })?;
        let st = rustix::fs::fstat(&fd).map_err(|e| FsError::Io { path: shown.to_string(), source: e.into() })?;
        match FileType::from_raw_mode(st.st_mode) {
            FileType::Directory => Ok(DirHandle { fd, vpath: r.vpath.clone() }),
            other => Err(FsError::NotRegular { path: shown.to_string(), kind: kind_name(other) }),
        }
    }

    /// The entries of one of the thread's directories, by `lstat` (links are reported as links).
    pub fn list(&self, which: ThreadDir) -> Result<Vec<DirEntry>, FsError> {
        let dir = self.dir(which)?;
        list_fd(dir.as_fd(), which.label())
    }

    /// Read a host-private file of the thread (state, marks): `Ok(None)` when it does not exist.
    pub fn read_private(&self, name: &str, cap: u64) -> Result<Option<Vec<u8>>, FsError> {
        let dir = self.dir(ThreadDir::Host)?;
        let shown = || format!("{}/{name}", ThreadDir::Host.label());
        let fd = match rustix::fs::openat(
            &*dir,
            name,
            OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC | OFlags::NOCTTY,
            Mode::empty(),
        ) {
            Ok(fd) => fd,
            Err(Errno::NOENT) => return Ok(None),
            Err(e) => return Err(FsError::Io { path: shown(), source: e.into() }),
        };
        let st = rustix::fs::fstat(&fd).map_err(|e| FsError::Io { path: shown(), source: e.into() })?;
        if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile {
            return Err(FsError::NotRegular { path: shown(), kind: kind_name(FileType::from_raw_mode(st.st_mode)) });
        }
        let file = ThreadFile { file: File::from(fd), len: st.st_size as u64, vpath: shown() };
        file.read_capped(cap).map(Some)
    }

    /// Replace a host-private file atomically (a new 0600 file, then a rename over the old one).
    pub fn write_private(&self, name: &str, bytes: &[u8]) -> Result<(), FsError> {
        use std::io::Write;
        let dir = self.dir(ThreadDir::Host)?;
        let shown = || format!("{}/{name}", ThreadDir::Host.label());
        let io = |source: io::Error| FsError::Io { path: shown(), source };
        // Unique across processes and machines: replicas may share the threads directory.
        let tmp = crate::tempname::temp_file_name(name);
        let fd = rustix::fs::openat(
            &*dir,
            tmp.as_str(),
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::from_raw_mode(PRIVATE_FILE_MODE),
        )
        .map_err(|e| io(e.into()))?;
        let written = File::from(fd).write_all(bytes);
        let renamed = written.and_then(|()| rustix::fs::renameat(&*dir, tmp.as_str(), &*dir, name).map_err(Into::into));
        if let Err(e) = renamed {
            let _ = rustix::fs::unlinkat(&*dir, tmp.as_str(), AtFlags::empty());
            return Err(io(e));
        }
        Ok(())
    }

    /// Bytes the thread's tool-written files occupy on disk — its user data and its ACP
    /// workspace: allocated blocks (a sparse file counts what it really uses), each inode once,
    /// walking without following links ([`crate::usage`]).
    pub fn disk_usage(&self) -> Result<u64, FsError> {
        Ok(crate::usage::total(&self.usage_roots()?))
    }

    /// [`disk_usage`](Self::disk_usage) with each file's size, for a later
    /// [`trim_usage`](Self::trim_usage) to tell what was stored before from what came after.
    pub fn usage_snapshot(&self) -> Result<crate::usage::Snapshot, FsError> {
        Ok(crate::usage::snapshot(&self.usage_roots()?))
    }

    /// Bring the usage down to `limit` by taking back only what was written since `before`
    /// (see [`crate::usage::trim`]).
    pub fn trim_usage(&self, before: &crate::usage::Snapshot, limit: u64) -> Result<crate::usage::Trimmed, FsError> {
        Ok(crate::usage::trim(&self.usage_roots()?, before, limit))
    }

    /// The directories usage covers: user data always (created if missing), the ACP workspace
    /// when it exists.
    fn usage_roots(&self) -> Result<Vec<crate::usage::WalkRoot>, FsError> {
        let mut roots = vec![crate::usage::WalkRoot { fd: self.dir(ThreadDir::UserData)?, label: VIRTUAL_USER_DATA }];
        if self.exists(ThreadDir::Acp) {
            roots.push(crate::usage::WalkRoot { fd: self.dir(ThreadDir::Acp)?, label: VIRTUAL_ACP });
        }
        Ok(roots)
    }
}

fn kind_name(t: FileType) -> &'static str {
    match t {
        FileType::Directory => "directory",
        FileType::Fifo => "FIFO",
        FileType::Socket => "socket",
        FileType::CharacterDevice | FileType::BlockDevice => "device",
        FileType::Symlink => "symbolic link",
        _ => "special file",
    }
}

fn entry_kind(t: FileType) -> EntryKind {
    match t {
        FileType::RegularFile => EntryKind::File,
        FileType::Directory => EntryKind::Dir,
        FileType::Symlink => EntryKind::Symlink,
        _ => EntryKind::Special,
    }
}

fn list_fd(dir: BorrowedFd<'_>, label: &str) -> Result<Vec<DirEntry>, FsError> {
    let io = |e: Errno| FsError::Io { path: label.to_string(), source: e.into() };
    let mut out = Vec::new();
    for entry in rustix::fs::Dir::read_from(dir).map_err(io)? {
        let entry = entry.map_err(io)?;
        let name = entry.file_name();
        if name.to_bytes() == b"." || name.to_bytes() == b".." {
            continue;
        }
        let st = match rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) => st,
            // Removed between the listing and the stat.
            Err(Errno::NOENT) => continue,
            Err(e) => return Err(io(e)),
        };
        let modified = SystemTime::UNIX_EPOCH
            + std::time::Duration::new(st.st_mtime.max(0) as u64, (st.st_mtime_nsec as u32).min(999_999_999));
        out.push(DirEntry {
            name: String::from_utf8_lossy(name.to_bytes()).into_owned(),
            kind: entry_kind(FileType::from_raw_mode(st.st_mode)),
            len: st.st_size as u64,
            allocated: (st.st_blocks as u64).saturating_mul(512),
            modified,
        });
    }
    Ok(out)
}

/// Open `rel` (normalised, no `..`) beneath `dir` read-only, following no symlink anywhere.
fn open_beneath(dir: BorrowedFd<'_>, rel: &str) -> Result<OwnedFd, Errno> {
    let flags = OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC | OFlags::NOFOLLOW;
    let rel = if rel.is_empty() { "." } else { rel };
    static NO_OPENAT2: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    if !NO_OPENAT2.load(std::sync::atomic::Ordering::Relaxed) {
        let resolve = ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS;
        for _ in 0..4 {
            match rustix::fs::openat2(dir, rel, flags, Mode::empty(), resolve) {
                // A rename somewhere on the system raced the lookup: try again.
                Err(Errno::AGAIN) => continue,
                Err(Errno::NOSYS) | Err(Errno::PERM) => {
                    NO_OPENAT2.store(true, std::sync::atomic::Ordering::Relaxed);
                    break;
                }
                other => return other,
            }
        }
    }
    open_beneath_walk(dir, rel, flags)
}

/// [`open_beneath`] where `openat2` is missing: one `O_NOFOLLOW` step per component, so a
/// symlink anywhere on the way fails the open (`ELOOP`/`ENOTDIR`) instead of being followed.
fn open_beneath_walk(dir: BorrowedFd<'_>, rel: &str, flags: OFlags) -> Result<OwnedFd, Errno> {
    let mut parts = rel.split('/').filter(|s| !s.is_empty() && *s != ".").peekable();
    let mut current: Option<OwnedFd> = None;
    while let Some(part) = parts.next() {
        let base = current.as_ref().map(|f| f.as_fd()).unwrap_or(dir);
        if part == ".." {
            return Err(Errno::XDEV);
        }
        let last = parts.peek().is_none();
        let step = if last { flags } else { OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC };
        current = Some(rustix::fs::openat(base, part, step, Mode::empty())?);
    }
    match current {
        Some(fd) => Ok(fd),
        None => rustix::fs::openat(dir, ".", flags, Mode::empty()),
    }
}

/// `<data>/threads`, created 0700 (with `<data>`) when missing, opened by path: the data dir is
/// the host's own.
fn open_threads_dir(data_dir: &Path) -> Result<OwnedFd, ThreadFsError> {
    use std::os::unix::fs::DirBuilderExt;
    let path = data_dir.join("threads");
    let err = |source: io::Error| ThreadFsError::Threads { path: path.clone(), source };
    if !path.is_dir() {
        std::fs::DirBuilder::new().recursive(true).mode(DIR_MODE).create(&path).map_err(err)?;
    }
    let fd = rustix::fs::open(&path, OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty())
        .map_err(|e| err(e.into()))?;
    restrict_mode(fd.as_fd());
    Ok(fd)
}

/// Open directory `name` of `parent` with `O_NOFOLLOW`, creating it 0700 first when missing.
fn open_or_create_dir(parent: &OwnedFd, name: &str, which: ThreadDir) -> Result<OwnedFd, ThreadFsError> {
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let open = || rustix::fs::openat(parent, name, flags, Mode::empty());
    let fd = match open() {
        Ok(fd) => fd,
        Err(Errno::NOENT) => {
            match rustix::fs::mkdirat(parent, name, Mode::from_raw_mode(DIR_MODE)) {
                Ok(()) | Err(Errno::EXIST) => {}
                Err(e) => return Err(ThreadFsError::Open { dir: which, source: e.into() }),
            }
            open().map_err(|e| classify_dir_error(e, which))?
        }
        Err(e) => return Err(classify_dir_error(e, which)),
    };
    restrict_mode(fd.as_fd());
    Ok(fd)
}

fn classify_dir_error(e: Errno, which: ThreadDir) -> ThreadFsError {
    match e {
        // O_NOFOLLOW on a symlink, or O_DIRECTORY on a file: the directory was replaced.
        Errno::LOOP | Errno::NOTDIR => ThreadFsError::Replaced(which),
        e => ThreadFsError::Open { dir: which, source: e.into() },
    }
}

/// Directories created by older versions (0755, readable by everyone) become 0700. A directory
/// that others may only search (0711: host bash's `bash_user` must walk to its workspace, and
/// host bash grants exactly that) is left as it is. A failure (not our directory) leaves the
/// mode unchanged.
fn restrict_mode(fd: BorrowedFd<'_>) {
    if let Ok(st) = rustix::fs::fstat(fd) {
        if st.st_mode & 0o066 != 0 {
            let _ = rustix::fs::fchmod(fd, Mode::from_raw_mode(st.st_mode & 0o7700));
        }
    }
}

/// The path a WASI preopen (or anything else that insists on a path) can open to get exactly the
/// directory behind `fd`: the magic link `/proc/self/fd/N` refers to the open directory itself,
/// not to a name that could be swapped.
pub fn fd_path(fd: BorrowedFd<'_>) -> PathBuf {
    PathBuf::from(format!("/proc/self/fd/{}", fd.as_raw_fd()))
}

/// Thread filesystems of one data dir, opened on demand and kept (a bounded number) so their
/// directory handles are reused across calls.
pub struct Threads {
    data_dir: PathBuf,
    shared: Arc<SharedRoots>,
    threads_dir: Mutex<Option<Arc<OwnedFd>>>,
    cache: Mutex<ThreadCache>,
}

#[derive(Default)]
struct ThreadCache {
    map: HashMap<String, (u64, Arc<ThreadFs>)>,
    tick: u64,
}

/// Threads whose handles stay open; each holds up to nine directory handles.
const CACHED_THREADS: usize = 64;

impl Threads {
    pub fn new(data_dir: PathBuf, shared: Arc<SharedRoots>) -> Self {
        Self { data_dir, shared, threads_dir: Mutex::new(None), cache: Mutex::new(ThreadCache::default()) }
    }

    pub fn data_dir(&self) -> &Path {
        &self.data_dir
    }

    pub fn shared(&self) -> &Arc<SharedRoots> {
        &self.shared
    }

    /// The thread's filesystem, opening (and creating) its root directory on first use.
    pub fn get(&self, thread_id: &str) -> Result<Arc<ThreadFs>, ThreadFsError> {
        {
            let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
            cache.tick += 1;
            let tick = cache.tick;
            if let Some((used, fs)) = cache.map.get_mut(thread_id) {
                if fs.still_in_place() {
                    *used = tick;
                    return Ok(fs.clone());
                }
                // Removed or replaced behind this process's back (another replica sharing the
                // threads directory expired it): open it afresh, never write into a deleted one.
                cache.map.remove(thread_id);
            }
        }
        let threads_dir = {
            let mut slot = self.threads_dir.lock().unwrap_or_else(|p| p.into_inner());
            match &*slot {
                Some(fd) => fd.clone(),
                None => slot.insert(Arc::new(open_threads_dir(&self.data_dir)?)).clone(),
            }
        };
        let fs = Arc::new(ThreadFs::with_threads_dir(&self.data_dir, thread_id, threads_dir, self.shared.clone())?);
        let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        if cache.map.len() >= CACHED_THREADS {
            if let Some(oldest) = cache.map.iter().min_by_key(|(_, (used, _))| *used).map(|(k, _)| k.clone()) {
                cache.map.remove(&oldest);
            }
        }
        let tick = cache.tick;
        Ok(cache.map.entry(thread_id.to_string()).or_insert((tick, fs)).1.clone())
    }

    /// Drop the cached handles of a thread (its directory was removed).
    pub fn forget(&self, thread_id: &str) {
        self.cache.lock().unwrap_or_else(|p| p.into_inner()).map.remove(thread_id);
    }
}

/// The virtual path of a user-data directory, for messages.
pub fn user_data_vpath(which: ThreadDir) -> String {
    match which {
        ThreadDir::Workspace | ThreadDir::Uploads | ThreadDir::Outputs => {
            format!("{VIRTUAL_USER_DATA}/{}", which.name())
        }
        other => other.label().to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{symlink, PermissionsExt};

    fn thread() -> (tempfile::TempDir, ThreadFs) {
        let dir = tempfile::tempdir().unwrap();
        let fs = ThreadFs::open(dir.path(), "t1").unwrap();
        fs.ensure_tool_dirs().unwrap();
        (dir, fs)
    }

    #[test]
    fn creates_the_layout_private() {
        let (dir, fs) = thread();
        for rel in ["threads", "threads/t1", "threads/t1/user-data", "threads/t1/user-data/workspace"] {
            let mode = std::fs::metadata(dir.path().join(rel)).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o700, "{rel}");
        }
        fs.write_private("state.json", b"{}").unwrap();
        let mode = std::fs::metadata(fs.paths().host_dir().join("state.json")).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        assert_eq!(fs.read_private("state.json", 10).unwrap().unwrap(), b"{}");
        assert!(fs.read_private("missing.json", 10).unwrap().is_none());
    }

    #[test]
    fn a_thread_removed_by_another_process_is_opened_afresh_not_written_into_the_trash() {
        let dir = tempfile::tempdir().unwrap();
        let threads = Threads::new(dir.path().to_path_buf(), Arc::default());
        let fs = threads.get("t1").unwrap();
        fs.write_private("a", b"1").unwrap();
        assert!(Arc::ptr_eq(&fs, &threads.get("t1").unwrap()), "unchanged: the cached handles are reused");
        // Another replica's sweeper renames the expired thread away, then removes it.
        let root = dir.path().join("threads/t1");
        std::fs::rename(&root, dir.path().join("threads/.expired-t1")).unwrap();
        let again = threads.get("t1").unwrap();
        assert!(!Arc::ptr_eq(&fs, &again));
        again.write_private("b", b"2").unwrap();
        assert_eq!(std::fs::read(root.join("host/b")).unwrap(), b"2");
        assert!(!dir.path().join("threads/.expired-t1/host/b").exists());
        assert!(again.still_in_place());
        // And a private write leaves no temp file behind.
        let names: Vec<String> = std::fs::read_dir(root.join("host"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, ["b"]);
    }

    #[test]
    fn old_world_readable_dirs_become_private() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("threads/t1/user-data/workspace");
        std::fs::create_dir_all(&ws).unwrap();
        std::fs::set_permissions(&ws, std::fs::Permissions::from_mode(0o755)).unwrap();
        let fs = ThreadFs::open(dir.path(), "t1").unwrap();
        fs.dir(ThreadDir::Workspace).unwrap();
        assert_eq!(std::fs::metadata(&ws).unwrap().permissions().mode() & 0o777, 0o700);
    }

    #[test]
    fn a_replaced_directory_is_refused() {
        let (dir, _) = thread();
        let ud = dir.path().join("threads/t1/user-data");
        std::fs::rename(ud.join("workspace"), ud.join("ws-old")).unwrap();
        symlink("/", ud.join("workspace")).unwrap();
        // A fresh handle (no cached directory) must not follow the link.
        let fs = ThreadFs::open(dir.path(), "t1").unwrap();
        let err = fs.dir(ThreadDir::Workspace).unwrap_err();
        assert!(matches!(err, ThreadFsError::Replaced(ThreadDir::Workspace)), "{err}");
        assert!(err.to_string().contains("/mnt/user-data/workspace was replaced"), "{err}");
        assert!(fs.open_regular("/mnt/user-data/workspace/etc/passwd").is_err());
        // The other directories still work.
        std::fs::write(ud.join("outputs/ok.txt"), "ok").unwrap();
        assert_eq!(fs.open_regular("/mnt/user-data/outputs/ok.txt").unwrap().read_capped(10).unwrap(), b"ok");
    }

    #[test]
    fn links_inside_resolve_links_out_are_refused() {
        let (dir, fs) = thread();
        let ud = fs.paths().user_data();
        let secret = dir.path().join("secret.txt");
        std::fs::write(&secret, "SECRET").unwrap();
        std::fs::write(ud.join("workspace/real.md"), "real").unwrap();
        symlink("../workspace/real.md", ud.join("outputs/ok.md")).unwrap();
        symlink(&secret, ud.join("uploads/abs.md")).unwrap();
        symlink("../../../../secret.txt", ud.join("uploads/rel.md")).unwrap();
        symlink("../../host", ud.join("workspace/host")).unwrap();
        let ok = fs.open_regular("/mnt/user-data/outputs/ok.md/").unwrap();
        assert_eq!(ok.vpath, "/mnt/user-data/workspace/real.md");
        assert_eq!(ok.read_capped(100).unwrap(), b"real");
        for bad in [
            "/mnt/user-data/uploads/abs.md",
            "/mnt/user-data/uploads/rel.md",
            "/mnt/user-data/workspace/host/state.json",
            "/mnt/user-data/workspace/../../host",
            "/etc/passwd",
        ] {
            let err = fs.open_regular(bad).unwrap_err();
            assert!(matches!(err, FsError::Escapes(_)), "{bad}: {err}");
            assert!(!err.to_string().contains(&*dir.path().to_string_lossy()), "host path in {err}");
        }
    }

    #[test]
    fn fifos_devices_and_big_files_are_refused_without_blocking() {
        let (_dir, fs) = thread();
        let ws = fs.paths().workspace();
        let fifo = ws.join("pipe");
        rustix::fs::mknodat(rustix::fs::CWD, &fifo, FileType::Fifo, Mode::from_raw_mode(0o600), 0).unwrap();
        let err = fs.open_regular("/mnt/user-data/workspace/pipe").unwrap_err();
        assert!(matches!(err, FsError::NotRegular { kind: "FIFO", .. }), "{err}");
        symlink("/dev/zero", ws.join("zero")).unwrap();
        assert!(matches!(fs.open_regular("/mnt/user-data/workspace/zero").unwrap_err(), FsError::Escapes(_)));
        let big = File::create(ws.join("sparse")).unwrap();
        big.set_len(4 << 30).unwrap();
        let err = fs.open_regular("/mnt/user-data/workspace/sparse").unwrap().read_capped(1 << 20).unwrap_err();
        assert!(matches!(err, FsError::TooLarge { size, .. } if size == 4 << 30), "{err}");
        let err = fs.open_regular("/mnt/user-data/workspace/sparse").unwrap().sha256_capped(1 << 20).unwrap_err();
        assert!(matches!(err, FsError::TooLarge { .. }), "{err}");
        assert!(fs.disk_usage().unwrap() < 1 << 20, "a sparse file counts what it allocates");
        assert!(matches!(fs.open_regular("/mnt/user-data/workspace/nope").unwrap_err(), FsError::NotFound(_)));
        std::fs::write(ws.join("x.txt"), "hello").unwrap();
        assert_eq!(
            fs.open_regular("/mnt/user-data/workspace/x.txt").unwrap().sha256_capped(10).unwrap(),
            "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"
        );
        // UTF-8 is judged over the whole file, across read-buffer boundaries.
        let mut text = "a".repeat(64 * 1024 - 1).into_bytes();
        text.extend_from_slice("é".as_bytes());
        std::fs::write(ws.join("utf8.txt"), &text).unwrap();
        assert!(fs.open_regular("/mnt/user-data/workspace/utf8.txt").unwrap().digest_capped(1 << 20).unwrap().utf8);
        text.push(0xff);
        std::fs::write(ws.join("bin.txt"), &text).unwrap();
        assert!(!fs.open_regular("/mnt/user-data/workspace/bin.txt").unwrap().digest_capped(1 << 20).unwrap().utf8);
    }

    #[test]
    fn listing_never_follows_links() {
        let (_dir, fs) = thread();
        let up = fs.paths().uploads();
        std::fs::write(up.join("a.pdf"), "%PDF").unwrap();
        symlink("/etc/shadow", up.join("a.md")).unwrap();
        std::fs::create_dir(up.join("sub")).unwrap();
        let mut entries = fs.list(ThreadDir::Uploads).unwrap();
        entries.sort_by(|a, b| a.name.cmp(&b.name));
        let kinds: Vec<(&str, EntryKind)> = entries.iter().map(|e| (e.name.as_str(), e.kind)).collect();
        assert_eq!(kinds, [("a.md", EntryKind::Symlink), ("a.pdf", EntryKind::File), ("sub", EntryKind::Dir)]);
    }

    #[test]
    fn fallback_walk_refuses_links_too() {
        let (dir, fs) = thread();
        let ws = fs.paths().workspace();
        std::fs::create_dir(ws.join("d")).unwrap();
        std::fs::write(ws.join("d/f"), "f").unwrap();
        symlink(dir.path(), ws.join("out")).unwrap();
        let wsfd = fs.dir(ThreadDir::Workspace).unwrap();
        let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
        let walk = |rel: &str| open_beneath_walk(wsfd.as_fd(), rel, flags);
        assert!(walk("d/f").is_ok());
        assert!(matches!(walk("out/secret"), Err(Errno::LOOP) | Err(Errno::NOTDIR)));
        assert!(matches!(walk("out"), Err(Errno::LOOP)));
        assert!(matches!(walk("d/../../x"), Err(Errno::XDEV)));
        assert!(open_beneath(wsfd.as_fd(), "out/secret").is_err());
    }
}
