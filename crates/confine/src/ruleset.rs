//! Landlock rules of a host-bash command: read-write on the thread's own directories (given as
//! open handles), read-only on the ACP workspace, skills, mounts and system directories — `/etc`
//! only as far as an unprivileged user could read it, because a uid-0 command without
//! capabilities still owns `/etc/shadow` — list-only on `user-data`, no FIFOs or device nodes
//! anywhere, TCP only to the proxy port, signals and abstract sockets scoped to the command. The
//! ruleset is built in the parent; the child only calls `landlock_restrict_self`.

use std::fmt;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use landlock::{
    Access, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, NetPort, PathBeneath, Ruleset, RulesetAttr,
    RulesetCreated, RulesetCreatedAttr, RulesetError, Scope, ABI,
};

use crate::paths::open_path;

/// The newest ABI whose filesystem rights toolhost asks for (v9 adds `ResolveUnix`, the connect
/// right on pathname UNIX sockets). Rights a kernel lacks are dropped (best effort) and the
/// self-test checks what must hold.
const FS_ABI: ABI = ABI::V9;
/// Landlock ABI of TCP bind/connect rules.
pub const NET_ABI: u32 = 4;
/// Landlock ABI of the signal and abstract-socket scopes.
pub const SCOPE_ABI: u32 = 6;
/// Landlock ABI that governs `connect` to pathname UNIX sockets. Below it Landlock lets a
/// command connect to any socket path it can name (a Docker socket included), so seccomp
/// refuses `AF_UNIX` sockets altogether.
pub const RESOLVE_UNIX_ABI: u32 = 9;

/// System directories a command may read and execute from, whole.
const SYSTEM_READ_DIRS: [&str; 10] =
    ["/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/opt", "/proc", "/nix/store"];
/// Read only as far as an unprivileged user could (see [`etc_rules`]).
const FILTERED_READ_DIR: &str = "/etc";
/// Device files a command may read and write (`/dev/null` and friends).
const DEVICE_FILES: [&str; 5] = ["/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom"];
/// How many entries of `/etc` the filter looks at before it stops granting more.
const ETC_WALK_BUDGET: usize = 50_000;

/// Why a command cannot be confined.
#[derive(Debug, thiserror::Error)]
pub enum ConfineError {
    #[error("landlock: {0}")]
    Landlock(#[from] RulesetError),
    #[error("cannot open {path} for a Landlock rule: {source}")]
    Open { path: PathBuf, source: io::Error },
}

/// What the kernel offers, for `toolhost tools --explain`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfinementStatus {
    /// Landlock is available at this ABI.
    Active { abi: u32 },
    /// Commands cannot be confined, and why.
    Unavailable { reason: String },
}

impl fmt::Display for ConfinementStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfinementStatus::Active { abi } => write!(f, "landlock ABI v{abi}: active"),
            ConfinementStatus::Unavailable { reason } => write!(f, "unavailable: {reason}"),
        }
    }
}

/// Whether the kernel offers Landlock, asked once per process.
pub fn confinement_status() -> ConfinementStatus {
    static STATUS: OnceLock<ConfinementStatus> = OnceLock::new();
    STATUS
        .get_or_init(|| match kernel_abi() {
            Ok(abi) => ConfinementStatus::Active { abi },
            Err(reason) => ConfinementStatus::Unavailable { reason },
        })
        .clone()
}

/// The kernel's Landlock ABI, or 0 when it has none.
pub fn abi() -> u32 {
    match confinement_status() {
        ConfinementStatus::Active { abi } => abi,
        ConfinementStatus::Unavailable { .. } => 0,
    }
}

/// The kernel's Landlock ABI version (`landlock_create_ruleset(NULL, 0, VERSION)`).
fn kernel_abi() -> Result<u32, String> {
    const LANDLOCK_CREATE_RULESET_VERSION: libc::c_uint = 1;
    // SAFETY: the version query reads no memory (null attr, size 0) and returns an int.
    let v = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    if v > 0 {
        return Ok(v as u32);
    }
    let err = io::Error::last_os_error();
    Err(match err.raw_os_error() {
        Some(libc::EOPNOTSUPP) => {
            "the kernel has Landlock but it is disabled (add `landlock` to the `lsm=` boot parameter)".into()
        }
        Some(libc::ENOSYS) => {
            "the kernel does not implement Landlock (Linux 5.13 or later with CONFIG_SECURITY_LANDLOCK)".into()
        }
        _ => format!("landlock_create_ruleset failed: {err}"),
    })
}

/// TCP a command may use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NetRule {
    /// No TCP bind or connect at all.
    DenyAll,
    /// Connect to this port only (the bash proxy); no bind.
    ConnectOnly(u16),
}

/// The handles of one command's rules. Thread directories come as open directories from
/// the caller; the rest are opened from configured paths.
#[derive(Default)]
pub struct FsRules {
    pub read_write: Vec<OwnedFd>,
    pub read_only: Vec<OwnedFd>,
    /// Listing only (`user-data`: its entries are the thread's own directories).
    pub list_only: Vec<OwnedFd>,
}

impl FsRules {
    /// Add a configured directory by path (skills, a mount); missing ones are skipped, as
    /// DeerFlow skips mounts whose host path is missing.
    pub fn add_path(&mut self, path: &Path, writable: bool) -> Result<(), ConfineError> {
        match open_path(path) {
            Ok(fd) => {
                if writable {
                    self.read_write.push(fd);
                } else {
                    self.read_only.push(fd);
                }
                Ok(())
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(source) => Err(ConfineError::Open { path: path.to_path_buf(), source }),
        }
    }
}

/// The rights of a thread directory: everything except creating FIFOs and device nodes.
fn read_write_rights() -> BitFlags<AccessFs> {
    AccessFs::from_all(FS_ABI) & !(AccessFs::MakeFifo | AccessFs::MakeChar | AccessFs::MakeBlock)
}

fn rule(fd: BorrowedFd<'_>, access: BitFlags<AccessFs>) -> PathBeneath<BorrowedFd<'_>> {
    PathBeneath::new(fd, access)
}

fn read_rights() -> BitFlags<AccessFs> {
    AccessFs::from_read(FS_ABI)
}

/// System paths opened once per process: the directories read whole, the readable parts of
/// `/etc`, and the device files.
struct SystemRules {
    read: Vec<OwnedFd>,
    list: Vec<OwnedFd>,
    devices: Vec<OwnedFd>,
    /// Entries of `/etc` left out because an unprivileged user could not read them.
    etc_hidden: usize,
}

fn system_rules() -> &'static SystemRules {
    static RULES: OnceLock<SystemRules> = OnceLock::new();
    RULES.get_or_init(|| {
        let open_all = |paths: &mut dyn Iterator<Item = PathBuf>| -> Vec<OwnedFd> {
            paths.filter_map(|p| open_path(&p).ok()).collect()
        };
        let mut etc_read = Vec::new();
        let mut etc_list = Vec::new();
        let mut hidden = 0;
        let mut budget = ETC_WALK_BUDGET;
        etc_rules(Path::new(FILTERED_READ_DIR), &mut etc_read, &mut etc_list, &mut hidden, &mut budget);
        let mut read = open_all(&mut SYSTEM_READ_DIRS.iter().map(PathBuf::from));
        read.extend(open_all(&mut etc_read.into_iter()));
        SystemRules {
            read,
            list: open_all(&mut etc_list.into_iter()),
            devices: open_all(&mut DEVICE_FILES.iter().map(PathBuf::from)),
            etc_hidden: hidden,
        }
    })
}

/// How many `/etc` entries a command cannot read (they are not world-readable).
pub fn etc_hidden_entries() -> usize {
    system_rules().etc_hidden
}

/// Open the system rules now (they are read once per process), off any async worker.
pub fn warm_up() {
    let _ = system_rules();
}

fn world_readable(meta: &std::fs::Metadata) -> bool {
    let mode = meta.permissions().mode();
    if meta.is_dir() {
        mode & 0o005 == 0o005
    } else {
        meta.is_file() && mode & 0o004 != 0
    }
}

/// Whether everything under `dir` is readable by anyone (links are not followed: a Landlock
/// rule on a directory does not extend through a link to elsewhere).
fn subtree_world_readable(dir: &Path, budget: &mut usize) -> bool {
    let Ok(entries) = std::fs::read_dir(dir) else { return false };
    for entry in entries {
        if *budget == 0 {
            return false;
        }
        *budget -= 1;
        let Ok(entry) = entry else { return false };
        let Ok(meta) = entry.metadata() else { return false };
        if meta.file_type().is_symlink() {
            continue;
        }
        if !world_readable(&meta) || (meta.is_dir() && !subtree_world_readable(&entry.path(), budget)) {
            return false;
        }
    }
    true
}

/// The rules that let a command read what an unprivileged user could read under `dir`: the
/// whole directory when all of it is world-readable, else a listing right on it and a rule for
/// each readable entry. A uid-0 command without capabilities still passes the owner check on
/// root's 0600 files (`/etc/shadow`, TLS keys), so Landlock must not offer them.
fn etc_rules(dir: &Path, read: &mut Vec<PathBuf>, list: &mut Vec<PathBuf>, hidden: &mut usize, budget: &mut usize) {
    match std::fs::metadata(dir) {
        Ok(m) if world_readable(&m) => {}
        _ => {
            *hidden += 1;
            return;
        }
    }
    if subtree_world_readable(dir, &mut budget.clone()) {
        read.push(dir.to_path_buf());
        return;
    }
    list.push(dir.to_path_buf());
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        if *budget == 0 {
            return;
        }
        *budget -= 1;
        let path = entry.path();
        let Ok(meta) = entry.metadata() else { continue };
        if meta.is_dir() {
            etc_rules(&path, read, list, hidden, budget);
        } else if meta.file_type().is_symlink() {
            // A rule on a link is a rule on its target: grant a readable file, or a directory
            // that is readable all the way down; never recurse through a link.
            match std::fs::metadata(&path) {
                Ok(t) if t.is_file() && world_readable(&t) => read.push(path),
                Ok(t) if t.is_dir() && world_readable(&t) && subtree_world_readable(&path, &mut budget.clone()) => {
                    read.push(path)
                }
                _ => *hidden += 1,
            }
        } else if world_readable(&meta) {
            read.push(path);
        } else {
            *hidden += 1;
        }
    }
}

/// Build the ruleset of one command in the parent.
pub fn build_ruleset(fs: &FsRules, net: NetRule) -> Result<RulesetCreated, ConfineError> {
    let system = system_rules();
    let device = AccessFs::ReadFile | AccessFs::WriteFile | AccessFs::Truncate | AccessFs::IoctlDev;
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(AccessFs::from_all(FS_ABI))?
        .handle_access(AccessNet::BindTcp | AccessNet::ConnectTcp)?
        .scope(Scope::AbstractUnixSocket | Scope::Signal)?
        .create()?
        .no_new_privs(true);
    for fd in &system.read {
        ruleset = ruleset.add_rule(rule(fd.as_fd(), read_rights()))?;
    }
    for fd in &system.list {
        ruleset = ruleset.add_rule(rule(fd.as_fd(), AccessFs::ReadDir.into()))?;
    }
    for fd in &system.devices {
        ruleset = ruleset.add_rule(rule(fd.as_fd(), device))?;
    }
    for fd in &fs.read_only {
        ruleset = ruleset.add_rule(rule(fd.as_fd(), read_rights()))?;
    }
    for fd in &fs.list_only {
        ruleset = ruleset.add_rule(rule(fd.as_fd(), AccessFs::ReadDir.into()))?;
    }
    for fd in &fs.read_write {
        ruleset = ruleset.add_rule(rule(fd.as_fd(), read_write_rights()))?;
    }
    if let NetRule::ConnectOnly(port) = net {
        ruleset = ruleset.add_rule(NetPort::new(port, AccessNet::ConnectTcp))?;
    }
    Ok(ruleset)
}

/// The `pre_exec` step: enforce the prepared ruleset. Async-signal-safe on the success path
/// (`prctl` and `landlock_restrict_self`); a failure is reported without allocating.
pub fn restrict_in_child(ruleset: &mut Option<RulesetCreated>) -> io::Result<()> {
    match ruleset.take() {
        Some(ruleset) => match ruleset.restrict_self() {
            Ok(_) => Ok(()),
            Err(_) => Err(io::Error::from_raw_os_error(libc::EPERM)),
        },
        None => Ok(()),
    }
}

/// The `pre_exec` step after a fresh `/proc` was mounted: its inodes are new, so the system
/// rule on the old one does not cover them; add the same read rule on the new one to the
/// ruleset (`ruleset_fd`, a clone of the prepared ruleset's descriptor) before it is enforced.
pub fn allow_fresh_proc_in_child(ruleset_fd: &OwnedFd) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    const LANDLOCK_RULE_PATH_BENEATH: libc::c_int = 1;
    #[repr(C, packed)]
    struct PathBeneathAttr {
        allowed_access: u64,
        parent_fd: i32,
    }
    // SAFETY: a static NUL-terminated path; the descriptor is closed below.
    let fd = unsafe { libc::open(c"/proc".as_ptr(), libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    let attr = PathBeneathAttr { allowed_access: read_rights().bits(), parent_fd: fd };
    // SAFETY: landlock_add_rule with a valid ruleset descriptor and attribute struct.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_landlock_add_rule,
            ruleset_fd.as_raw_fd(),
            LANDLOCK_RULE_PATH_BENEATH,
            &attr as *const PathBeneathAttr,
            0u32,
        )
    };
    let result = if rc < 0 { Err(io::Error::last_os_error()) } else { Ok(()) };
    // SAFETY: closing the descriptor opened above.
    unsafe { libc::close(fd) };
    result
}

/// A second handle on a prepared ruleset (rules added through it go to the same ruleset).
pub fn ruleset_fd(ruleset: &RulesetCreated) -> io::Result<Option<OwnedFd>> {
    Ok(ruleset.try_clone()?.into())
}

/// Whether the directory behind `fd` is owned by `uid` (the bash user's directories).
pub fn owned_by(fd: &OwnedFd, uid: u32) -> io::Result<bool> {
    let file = std::fs::File::from(fd.try_clone()?);
    Ok(file.metadata()?.uid() == uid)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Why seccomp refuses `AF_UNIX` sockets below ABI 9: Landlock alone lets a confined process
    /// connect to a socket path outside everything it was granted. The connect runs in the
    /// child after `landlock_restrict_self`; the spawn succeeds only if it connected.
    #[test]
    fn landlock_below_abi_9_does_not_govern_pathname_socket_connect() {
        let abi = match confinement_status() {
            ConfinementStatus::Active { abi } => abi,
            ConfinementStatus::Unavailable { reason } => {
                assert!(reason.contains("does not implement") || reason.contains("disabled"), "{reason}");
                eprintln!("SKIPPED: no Landlock: {reason}");
                return;
            }
        };
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.sock");
        let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
        let mut addr: libc::sockaddr_un = unsafe { std::mem::zeroed() };
        addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
        for (dst, src) in addr.sun_path.iter_mut().zip(std::os::unix::ffi::OsStrExt::as_bytes(path.as_os_str())) {
            *dst = *src as libc::c_char;
        }
        let mut ruleset = Some(build_ruleset(&FsRules::default(), NetRule::DenyAll).unwrap());
        let mut cmd = std::process::Command::new("/bin/true");
        // SAFETY: syscalls only, on values prepared above.
        unsafe {
            std::os::unix::process::CommandExt::pre_exec(&mut cmd, move || {
                restrict_in_child(&mut ruleset)?;
                let fd = libc::socket(libc::AF_UNIX, libc::SOCK_STREAM, 0);
                let len = std::mem::size_of::<libc::sockaddr_un>() as libc::socklen_t;
                if fd < 0 || libc::connect(fd, &addr as *const libc::sockaddr_un as *const libc::sockaddr, len) != 0 {
                    return Err(io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let connected = cmd.status().is_ok();
        if abi < RESOLVE_UNIX_ABI {
            assert!(connected, "ABI {abi}: expected Landlock to let the connect through");
            listener.accept().expect("the confined child reached the socket");
        } else {
            assert!(!connected, "ABI {abi}: ResolveUnix should refuse the connect");
        }
    }

    #[test]
    fn etc_filter_leaves_out_what_others_cannot_read() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("etc");
        std::fs::create_dir_all(root.join("ssl/private")).unwrap();
        std::fs::create_dir_all(root.join("open/deep")).unwrap();
        std::fs::write(root.join("passwd"), "p").unwrap();
        std::fs::write(root.join("shadow"), "s").unwrap();
        std::fs::write(root.join("ssl/cert.pem"), "c").unwrap();
        std::fs::write(root.join("ssl/private/key.pem"), "k").unwrap();
        std::fs::write(root.join("open/deep/x"), "x").unwrap();
        let set = |p: &Path, m: u32| std::fs::set_permissions(p, std::fs::Permissions::from_mode(m)).unwrap();
        set(&root.join("shadow"), 0o640);
        set(&root.join("ssl/private"), 0o700);
        std::os::unix::fs::symlink(root.join("shadow"), root.join("shadow-link")).unwrap();
        let (mut read, mut list, mut hidden, mut budget) = (Vec::new(), Vec::new(), 0, ETC_WALK_BUDGET);
        etc_rules(&root, &mut read, &mut list, &mut hidden, &mut budget);
        read.sort();
        assert_eq!(list, [root.clone(), root.join("ssl")]);
        assert_eq!(read, [root.join("open"), root.join("passwd"), root.join("ssl/cert.pem")]);
        assert_eq!(hidden, 3, "shadow, its link and ssl/private");
    }
}
