//! A command's whole process tree, so the timeout (or the host's shutdown) can end all of it:
//! a cgroup v2 per command under a toolhost-owned parent, which the child joins before `exec`
//! and which `setsid` cannot leave; `cgroup.kill` ends it (or SIGKILL to every member until it
//! is empty, on kernels without `cgroup.kill`). Where no cgroup2 hierarchy is writable, the
//! command runs under a subreaper supervisor instead (`crate::reaper`).
//!
//! The tree's process and memory caps ([`TreeLimits`]) are `pids.max` and `memory.max` of that
//! cgroup where the v2 hierarchy has those controllers; on a hybrid host whose `pids` and
//! `memory` controllers are mounted as cgroup v1 hierarchies, a cgroup per tree in each of those
//! (`pids.max`, `memory.limit_in_bytes`), joined the same way.

use std::fs;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

/// How long a kill waits for the tree to be gone before giving up on removing its cgroup.
const KILL_WAIT: Duration = Duration::from_secs(5);

/// How many processes and how much memory a whole tree may use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TreeLimits {
    /// Processes (and threads) alive at once in the tree.
    pub max_processes: Option<u64>,
    /// Memory of the whole tree, in bytes (the kernel's OOM killer acts inside the tree).
    pub memory_bytes: Option<u64>,
}

/// Where each cap is enforced, for `--explain`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LimitMechanism {
    CgroupV2,
    CgroupV1(PathBuf),
    /// No controller: `RLIMIT_NPROC` (not for uid 0, whom the kernel exempts) or nothing.
    Rlimit,
}

/// The toolhost-owned cgroup that holds one cgroup per command.
#[derive(Debug, Clone)]
pub struct CgroupParent {
    pub dir: PathBuf,
    /// `cgroup.kill` exists (Linux 5.14+).
    pub has_kill: bool,
    /// `pids` is enabled for the per-tree cgroups in the v2 hierarchy, else its v1 parent.
    pub pids: LimitMechanism,
    /// `memory` likewise.
    pub memory: LimitMechanism,
}

/// A v1 hierarchy's toolhost parent for `controller`: `<mount><own path>/toolhost`, created.
fn v1_parent(controller: &str) -> Option<PathBuf> {
    let info = fs::read_to_string("/proc/self/mountinfo").ok()?;
    let mount = info.lines().find_map(|line| {
        let (left, right) = line.split_once(" - ")?;
        let mut fields = right.split_whitespace();
        if fields.next()? != "cgroup" {
            return None;
        }
        let options = fields.nth(1)?;
        options
            .split(',')
            .any(|o| o == controller)
            .then(|| left.split_whitespace().nth(4).map(|p| PathBuf::from(unescape_mountinfo(p))))?
    })?;
    let own = fs::read_to_string("/proc/self/cgroup").ok()?;
    let own = own.lines().find_map(|l| {
        let mut parts = l.splitn(3, ':');
        let _id = parts.next()?;
        let controllers = parts.next()?;
        controllers.split(',').any(|c| c == controller).then(|| parts.next().map(str::to_string))?
    })?;
    let dir = mount.join(own.trim_start_matches('/')).join("toolhost");
    match fs::create_dir(&dir) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(_) => return None,
    }
    // A v1 hierarchy checks only the destination's `cgroup.procs` when a process joins.
    usable(&dir, None).ok()?;
    Some(dir)
}

/// Whether this process can make the per-tree cgroups under `dir` and move a child into them:
/// make one, open its `cgroup.procs` (and the `join_ancestor`'s: cgroup v2 wants write access
/// where the child's cgroup and the new one meet), remove it. A `toolhost` cgroup root made
/// earlier exists for an unprivileged toolhost too, but is not its to use.
fn usable(dir: &Path, join_ancestor: Option<&Path>) -> io::Result<()> {
    let probe = dir.join(format!("{}-probe", std::process::id()));
    match fs::create_dir(&probe) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e),
    }
    let writable = |d: &Path| fs::OpenOptions::new().write(true).open(d.join("cgroup.procs")).map(drop);
    let result = writable(&probe).and_then(|()| join_ancestor.map_or(Ok(()), writable));
    let removed = fs::remove_dir(&probe);
    result.and(removed)
}

/// Enable `controller` for the per-tree cgroups under `dir` in the v2 hierarchy: in its parent's
/// `cgroup.subtree_control` (possible when that is the hierarchy's root, or holds no process) and
/// in its own.
fn enable_v2(dir: &Path, controller: &str) -> bool {
    let available = |d: &Path| {
        fs::read_to_string(d.join("cgroup.controllers")).is_ok_and(|c| c.split_whitespace().any(|x| x == controller))
    };
    if !available(dir) {
        if let Some(parent) = dir.parent() {
            let _ = fs::write(parent.join("cgroup.subtree_control"), format!("+{controller}"));
        }
    }
    available(dir) && fs::write(dir.join("cgroup.subtree_control"), format!("+{controller}")).is_ok()
}

/// The cgroup2 mount point, from `/proc/self/mountinfo`.
fn cgroup2_mount() -> Option<PathBuf> {
    let info = fs::read_to_string("/proc/self/mountinfo").ok()?;
    info.lines().find_map(|line| {
        let (left, right) = line.split_once(" - ")?;
        if right.split_whitespace().next()? != "cgroup2" {
            return None;
        }
        left.split_whitespace().nth(4).map(|p| PathBuf::from(unescape_mountinfo(p)))
    })
}

/// mountinfo escapes space, tab, newline and backslash as octal.
fn unescape_mountinfo(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\\' {
            let code: String = chars.clone().take(3).collect();
            if code.len() == 3 && code.chars().all(|d| ('0'..='7').contains(&d)) {
                if let Ok(v) = u8::from_str_radix(&code, 8) {
                    out.push(v as char);
                    chars.nth(2);
                    continue;
                }
            }
        }
        out.push(c);
    }
    out
}

/// This process's cgroup in the v2 hierarchy (`0::/path` in `/proc/self/cgroup`).
fn own_cgroup() -> Option<String> {
    let text = fs::read_to_string("/proc/self/cgroup").ok()?;
    text.lines().find_map(|l| l.strip_prefix("0::")).map(|p| p.trim().to_string())
}

/// Find (and create) the parent cgroup, once per process: `<mount><own cgroup>/toolhost`.
/// `Err` says why there is none this process may use (then a subreaper holds each tree): no
/// cgroup2 hierarchy, or one this process may not write — an unprivileged toolhost outside a
/// delegated cgroup, including when root made `toolhost` there before.
pub fn cgroup_parent() -> Result<CgroupParent, String> {
    static PARENT: OnceLock<Result<CgroupParent, String>> = OnceLock::new();
    PARENT
        .get_or_init(|| {
            let mount = cgroup2_mount().ok_or("no cgroup2 hierarchy is mounted")?;
            let own = own_cgroup().ok_or("this process has no cgroup2 membership (/proc/self/cgroup)")?;
            let dir = mount.join(own.trim_start_matches('/')).join("toolhost");
            match fs::create_dir(&dir) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(format!("cannot create the cgroup {}: {e}", dir.display())),
            }
            let own_dir = dir.parent().unwrap_or(&mount);
            usable(&dir, Some(own_dir))
                .map_err(|e| format!("cannot make cgroups under {} and join them: {e}", dir.display()))?;
            let has_kill = dir.join("cgroup.kill").exists();
            let mechanism = |controller: &str| {
                if enable_v2(&dir, controller) {
                    LimitMechanism::CgroupV2
                } else if let Some(v1) = v1_parent(controller) {
                    LimitMechanism::CgroupV1(v1)
                } else {
                    LimitMechanism::Rlimit
                }
            };
            let (pids, memory) = (mechanism("pids"), mechanism("memory"));
            let parent = CgroupParent { dir, has_kill, pids, memory };
            sweep_dead(&parent);
            Ok(parent)
        })
        .clone()
}

/// Remove the cgroups left by toolhost processes that are gone (names are `<pid>-<n>`), killing
/// what still runs in them: a tree never outlives the toolhost that started it by more than
/// the next start (the supervisor kills it at once where there is one).
fn sweep_dead(parent: &CgroupParent) {
    let Ok(entries) = fs::read_dir(&parent.dir) else { return };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(|n| n.split('-').next()).and_then(|p| p.parse::<u32>().ok()) else {
            continue;
        };
        if pid != std::process::id() && !Path::new(&format!("/proc/{pid}")).exists() {
            let stale = Cgroup { dir: entry.path(), has_kill: parent.has_kill, v1: Vec::new() };
            if stale.populated() {
                stale.kill();
            }
        }
    }
    for mechanism in [&parent.pids, &parent.memory] {
        if let LimitMechanism::CgroupV1(dir) = mechanism {
            let Ok(entries) = fs::read_dir(dir) else { continue };
            for entry in entries.flatten() {
                let dead = entry
                    .file_name()
                    .to_str()
                    .and_then(|n| n.split('-').next())
                    .and_then(|p| p.parse::<u32>().ok())
                    .is_some_and(|pid| pid != std::process::id() && !Path::new(&format!("/proc/{pid}")).exists());
                if dead {
                    let _ = fs::remove_dir(entry.path());
                }
            }
        }
    }
}

/// One command's cgroup: created in the parent before the spawn; the child joins it by writing
/// `0` to the already-open `cgroup.procs`.
#[derive(Debug)]
pub struct Cgroup {
    dir: PathBuf,
    has_kill: bool,
    /// The tree's cgroups in v1 controller hierarchies (its caps on a hybrid host).
    v1: Vec<PathBuf>,
}

impl Cgroup {
    /// Create a fresh cgroup with `limits` and open its `cgroup.procs` (and those of its v1
    /// controller cgroups) for the child to join.
    pub fn create(parent: &CgroupParent, limits: TreeLimits) -> io::Result<(Self, Vec<OwnedFd>)> {
        static SEQ: AtomicU64 = AtomicU64::new(0);
        let name = format!("{}-{}", std::process::id(), SEQ.fetch_add(1, Ordering::Relaxed));
        let dir = parent.dir.join(&name);
        fs::create_dir(&dir)?;
        // From here on, dropping `cgroup` removes what was made.
        let mut cgroup = Self { dir, has_kill: parent.has_kill, v1: Vec::new() };
        let open_procs = |d: &Path| fs::OpenOptions::new().write(true).open(d.join("cgroup.procs")).map(OwnedFd::from);
        let mut procs = vec![open_procs(&cgroup.dir)?];
        let caps = [
            (&parent.pids, limits.max_processes, "pids.max", "pids.max"),
            (&parent.memory, limits.memory_bytes, "memory.max", "memory.limit_in_bytes"),
        ];
        for (mechanism, value, v2_file, v1_file) in caps {
            let Some(value) = value else { continue };
            match mechanism {
                LimitMechanism::CgroupV2 => fs::write(cgroup.dir.join(v2_file), value.to_string())?,
                LimitMechanism::CgroupV1(v1_parent) => {
                    let dir = v1_parent.join(&name);
                    fs::create_dir(&dir)?;
                    cgroup.v1.push(dir.clone());
                    fs::write(dir.join(v1_file), value.to_string())?;
                    procs.push(open_procs(&dir)?);
                }
                LimitMechanism::Rlimit => {}
            }
        }
        Ok((cgroup, procs))
    }

    /// Whether the process cap was reached at least once (`pids.events`' `max` counter).
    pub fn hit_process_cap(&self) -> bool {
        std::iter::once(&self.dir).chain(&self.v1).any(|d| {
            fs::read_to_string(d.join("pids.events"))
                .is_ok_and(|e| e.lines().any(|l| l.strip_prefix("max ").is_some_and(|n| n.trim() != "0")))
        })
    }

    /// Whether any process of the tree is alive.
    pub fn populated(&self) -> bool {
        fs::read_to_string(self.dir.join("cgroup.events"))
            .map(|e| e.lines().any(|l| l == "populated 1"))
            .unwrap_or(false)
    }

    /// The pids in the cgroup now.
    pub fn pids(&self) -> Vec<i32> {
        fs::read_to_string(self.dir.join("cgroup.procs"))
            .map(|t| t.lines().filter_map(|l| l.trim().parse().ok()).collect())
            .unwrap_or_default()
    }

    /// SIGKILL the whole tree: `cgroup.kill`, or freeze and kill every member until none is
    /// left. Returns once the tree is gone (or after [`KILL_WAIT`]).
    pub fn kill(&self) {
        let deadline = Instant::now() + KILL_WAIT;
        if self.has_kill {
            let _ = fs::write(self.dir.join("cgroup.kill"), b"1");
        } else {
            // Frozen members cannot fork while their siblings are being killed.
            let _ = fs::write(self.dir.join("cgroup.freeze"), b"1");
            while Instant::now() < deadline {
                let pids = self.pids();
                if pids.is_empty() {
                    break;
                }
                for pid in pids {
                    // SAFETY: plain syscall; a pid that is gone is ESRCH.
                    unsafe { libc::kill(pid, libc::SIGKILL) };
                }
                std::thread::sleep(Duration::from_millis(2));
            }
            let _ = fs::write(self.dir.join("cgroup.freeze"), b"0");
        }
        while self.populated() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    /// Send the kill without waiting for the tree to be gone (a guard dropped on an async
    /// worker; the cgroup is removed later, once empty).
    pub fn signal_kill(&self) {
        if self.has_kill {
            let _ = fs::write(self.dir.join("cgroup.kill"), b"1");
        } else {
            for pid in self.pids() {
                // SAFETY: plain syscall; a pid that is gone is ESRCH.
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
        }
    }

    /// Remove the cgroup if nothing is left in it.
    pub fn remove(&self) -> bool {
        if self.populated() {
            return false;
        }
        for dir in &self.v1 {
            let _ = fs::remove_dir(dir);
        }
        fs::remove_dir(&self.dir).is_ok()
    }
}

impl Drop for Cgroup {
    /// An empty cgroup goes with its handle (a spawn that failed, a call that errored before
    /// it); a populated one cannot be removed and stays for `sweep_dead` of a later process.
    fn drop(&mut self) {
        for dir in &self.v1 {
            let _ = fs::remove_dir(dir);
        }
        let _ = fs::remove_dir(&self.dir);
    }
}

/// The `pre_exec` step: join the command's cgroup. One `write` on a descriptor the parent
/// opened; nothing else.
pub fn join_in_child(procs: &OwnedFd) -> io::Result<()> {
    // SAFETY: writes one byte from a static buffer to an open descriptor.
    let n = unsafe { libc::write(procs.as_raw_fd(), b"0".as_ptr().cast(), 1) };
    if n == 1 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// How one command's tree is held: its cgroup, or its subreaper supervisor.
#[derive(Debug)]
pub enum Tree {
    Cgroup(Cgroup),
    Reaper(crate::reaper::Supervisor),
}

impl Tree {
    /// Kill the whole tree and wait (bounded) until it is gone. Blocking.
    pub fn kill(&self) {
        match self {
            Tree::Cgroup(c) => c.kill(),
            Tree::Reaper(r) => {
                r.kill(KILL_WAIT);
            }
        }
    }

    /// Send the kill without waiting.
    pub fn signal_kill(&self) {
        match self {
            Tree::Cgroup(c) => c.signal_kill(),
            Tree::Reaper(r) => r.signal_kill(),
        }
    }

    /// Whether any process of the tree still runs.
    pub fn alive(&self) -> bool {
        match self {
            Tree::Cgroup(c) => c.populated(),
            Tree::Reaper(r) => !r.exited(Duration::ZERO),
        }
    }

    /// Let go of the tree's resources once it is empty; `false` while it runs.
    pub fn remove(&self) -> bool {
        match self {
            Tree::Cgroup(c) => c.remove(),
            Tree::Reaper(r) => r.exited(Duration::ZERO),
        }
    }
}

/// Trees of finished commands whose background processes still run. They are let go of once
/// empty, and killed when the tool is dropped (the host shuts down).
#[derive(Debug, Default)]
pub struct Lingering {
    trees: Mutex<Vec<Tree>>,
}

impl Lingering {
    pub fn keep(&self, tree: Tree) {
        if !tree.remove() {
            if let Ok(mut list) = self.trees.lock() {
                list.push(tree);
            }
        }
    }

    /// Let go of the trees whose processes have all exited.
    pub fn sweep(&self) {
        if let Ok(mut list) = self.trees.lock() {
            list.retain(|t| !t.remove());
        }
    }

    /// Kill every lingering tree.
    pub fn kill_all(&self) {
        let list = self.trees.lock().map(|mut l| std::mem::take(&mut *l)).unwrap_or_default();
        for tree in list {
            tree.kill();
            tree.remove();
        }
    }
}

impl Drop for Lingering {
    fn drop(&mut self) {
        self.kill_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mountinfo_paths_unescape() {
        assert_eq!(unescape_mountinfo(r"/sys/fs/cgroup\040x"), "/sys/fs/cgroup x");
        assert_eq!(unescape_mountinfo("/plain"), "/plain");
    }
}
