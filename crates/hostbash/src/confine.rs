//! Landlock confinement of a host-bash command: read-write only under the thread's user-data
//! directory, read-only system directories and configured extras, nothing else; signals and
//! abstract UNIX sockets scoped to the command's own domain. The ruleset is built in the parent
//! before fork; the child only calls `landlock_restrict_self` between fork and exec.

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use landlock::{
    path_beneath_rules, Access, AccessFs, CompatLevel, Compatible, Ruleset, RulesetAttr, RulesetCreated,
    RulesetCreatedAttr, RulesetError, Scope, ABI,
};

/// The newest Landlock ABI whose rights toolhost asks for. Filesystem rights stop growing at
/// v5 (`IoctlDev`); v6 adds the signal and abstract-socket scopes.
const FS_ABI: ABI = ABI::V5;
const SCOPE_ABI: ABI = ABI::V6;

/// System directories a command may read and execute from.
const SYSTEM_READ_DIRS: [&str; 11] =
    ["/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt", "/proc", "/nix/store"];
/// Device files a command may read and write (`/dev/null` and friends).
const DEVICE_FILES: [&str; 5] = ["/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom"];

/// How strictly the host `bash` tool confines commands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ConfineMode {
    /// Run unconfined, as DeerFlow does.
    Off,
    /// Confine with Landlock when the kernel offers it; run unconfined (and say so in
    /// [`confinement_status`]) when it does not.
    #[default]
    BestEffort,
    /// Refuse to run a command that cannot be confined.
    Required,
}

/// What the kernel offers, for `toolhost tools --explain`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfinementStatus {
    /// Landlock works: a confined probe command ran.
    Active { abi: u32 },
    /// Commands run unconfined, and why.
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

/// Whether Landlock works here, checked once per process: the ABI query, then a real
/// confined `/bin/sh -c 'exit 0'`.
pub fn confinement_status() -> ConfinementStatus {
    static STATUS: OnceLock<ConfinementStatus> = OnceLock::new();
    STATUS.get_or_init(probe).clone()
}

fn probe() -> ConfinementStatus {
    let abi = match kernel_abi() {
        Ok(abi) => abi,
        Err(reason) => return ConfinementStatus::Unavailable { reason },
    };
    let result = (|| -> Result<std::process::ExitStatus, String> {
        let mut ruleset = Some(build_ruleset(&Rules::system_only()).map_err(|e| e.to_string())?);
        let mut command = std::process::Command::new("/bin/sh");
        command.args(["-c", "exit 0"]).stdin(std::process::Stdio::null());
        // SAFETY: the hook only calls `landlock_restrict_self`/`prctl` (no allocation on the
        // success path) in the freshly forked child.
        unsafe {
            use std::os::unix::process::CommandExt;
            command.pre_exec(move || restrict_in_child(&mut ruleset));
        }
        command.status().map_err(|e| format!("a confined probe command failed to start: {e}"))
    })();
    match result {
        Ok(status) if status.success() => ConfinementStatus::Active { abi },
        Ok(status) => ConfinementStatus::Unavailable { reason: format!("a confined probe command failed ({status})") },
        Err(reason) => ConfinementStatus::Unavailable { reason },
    }
}

/// The paths one command may touch.
#[derive(Debug, Clone, Default)]
pub struct Rules {
    pub read_write: Vec<PathBuf>,
    pub read_only: Vec<PathBuf>,
}

impl Rules {
    fn system_only() -> Self {
        Self::default()
    }

    /// The thread's user-data directory read-write; the extras read-only (or read-write).
    pub fn for_thread(user_data: &Path, read_only: Vec<PathBuf>, extra_read_write: Vec<PathBuf>) -> Self {
        let mut read_write = vec![user_data.to_path_buf()];
        read_write.extend(extra_read_write);
        Self { read_write, read_only }
    }
}

/// Build the ruleset in the parent (opening every allowed path there, so the child does no
/// filesystem work). Missing paths are skipped.
pub fn build_ruleset(rules: &Rules) -> Result<RulesetCreated, RulesetError> {
    let read = AccessFs::from_read(FS_ABI);
    let device = AccessFs::ReadFile | AccessFs::WriteFile | AccessFs::Truncate | AccessFs::IoctlDev;
    Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(AccessFs::from_all(FS_ABI))?
        .scope(Scope::from_all(SCOPE_ABI))?
        .create()?
        .no_new_privs(true)
        .add_rules(path_beneath_rules(SYSTEM_READ_DIRS, read))?
        .add_rules(path_beneath_rules(DEVICE_FILES, device))?
        .add_rules(path_beneath_rules(&rules.read_only, read))?
        .add_rules(path_beneath_rules(&rules.read_write, AccessFs::from_all(FS_ABI)))
}

/// The `pre_exec` body: enforce the prepared ruleset on the child. Async-signal-safe on the
/// success path (two syscalls); a failure is reported as `EPERM` without allocating.
pub fn restrict_in_child(ruleset: &mut Option<RulesetCreated>) -> io::Result<()> {
    match ruleset.take() {
        Some(ruleset) => match ruleset.restrict_self() {
            Ok(_) => Ok(()),
            Err(_) => Err(io::Error::from_raw_os_error(libc::EPERM)),
        },
        None => Ok(()),
    }
}
