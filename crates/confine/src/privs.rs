//! The identity a host-bash command runs with: a configured unprivileged user, or — when
//! toolhost runs as root — uid 0 with every capability dropped (effective, permitted,
//! inheritable, ambient and bounding sets, with `SECBIT_NOROOT` so `exec` cannot give them back)
//! and `no_new_privs`. Also the resource limits set in the child.

use std::ffi::CString;
use std::fmt;
use std::io;

/// A configured unprivileged user for commands (`sandbox.bash_user`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BashUser {
    pub uid: u32,
    pub gid: u32,
}

impl BashUser {
    /// `name`, `uid` or `uid:gid`. A name is looked up in the passwd database (its primary
    /// group); uid 0 is refused, since the point is not to be root.
    pub fn parse(spec: &str) -> Result<Self, String> {
        let spec = spec.trim();
        let number = |s: &str, what: &str| {
            s.parse::<u32>().map_err(|_| format!("bash_user '{spec}': {what} '{s}' is not a number"))
        };
        let user = if let Some((u, g)) = spec.split_once(':') {
            BashUser { uid: number(u, "uid")?, gid: number(g, "gid")? }
        } else if spec.bytes().all(|b| b.is_ascii_digit()) && !spec.is_empty() {
            let uid = number(spec, "uid")?;
            BashUser { uid, gid: uid }
        } else {
            lookup_user(spec)?
        };
        if user.uid == 0 || user.gid == 0 {
            return Err(format!(
                "bash_user '{spec}': uid and gid must not be 0 (commands drop root's capabilities without it)"
            ));
        }
        Ok(user)
    }
}

impl fmt::Display for BashUser {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "uid {} gid {}", self.uid, self.gid)
    }
}

fn lookup_user(name: &str) -> Result<BashUser, String> {
    let c = CString::new(name).map_err(|_| format!("bash_user '{name}': contains a NUL byte"))?;
    let mut pwd: libc::passwd = unsafe { std::mem::zeroed() };
    let mut buf = vec![0 as libc::c_char; 16 * 1024];
    let mut result: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: all pointers are valid for the call; buf outlives the use of pwd's strings (none).
    let rc = unsafe { libc::getpwnam_r(c.as_ptr(), &mut pwd, buf.as_mut_ptr(), buf.len(), &mut result) };
    if rc != 0 {
        return Err(format!("bash_user '{name}': cannot look it up: {}", io::Error::from_raw_os_error(rc)));
    }
    if result.is_null() {
        return Err(format!("bash_user '{name}': no such user (write a name from /etc/passwd, a uid or uid:gid)"));
    }
    Ok(BashUser { uid: pwd.pw_uid, gid: pwd.pw_gid })
}

/// Capability sets of a process, from `/proc/<pid>/status`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CapSets {
    pub inheritable: u64,
    pub permitted: u64,
    pub effective: u64,
    pub bounding: u64,
    pub ambient: u64,
}

impl CapSets {
    /// Parse the `Cap*` lines of a `/proc/<pid>/status` text.
    pub fn parse(status: &str) -> Option<Self> {
        let field = |name: &str| {
            status.lines().find_map(|l| l.strip_prefix(name)).and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        };
        Some(Self {
            inheritable: field("CapInh:")?,
            permitted: field("CapPrm:")?,
            effective: field("CapEff:")?,
            bounding: field("CapBnd:")?,
            ambient: field("CapAmb:")?,
        })
    }

    /// This process's sets.
    pub fn current() -> Option<Self> {
        Self::parse(&std::fs::read_to_string("/proc/self/status").ok()?)
    }

    pub fn has(&self, cap: u32) -> bool {
        self.effective & (1u64 << cap) != 0
    }
}

const CAP_SETPCAP: u32 = 8;
const CAP_SETUID: u32 = 7;
const CAP_CHOWN: u32 = 0;
const LINUX_CAPABILITY_VERSION_3: u32 = 0x2008_0522;
const PR_SET_SECUREBITS: libc::c_int = 28;
// SECBIT_NOROOT, SECBIT_NO_SETUID_FIXUP, SECBIT_KEEP_CAPS_LOCKED, SECBIT_NO_CAP_AMBIENT_RAISE
// and their locks: uid 0 gains nothing at exec, and nothing can turn that off.
const SECUREBITS: libc::c_ulong = 0b1111_1111 & !(1 << 4);

/// What the child does to its identity, decided in the parent.
#[derive(Debug, Clone, Copy)]
pub struct Identity {
    pub user: Option<BashUser>,
    /// The highest capability number the kernel knows (`/proc/sys/kernel/cap_last_cap`).
    last_cap: u32,
    /// The parent holds `CAP_SETPCAP`, so the bounding set and securebits can be changed.
    setpcap: bool,
    /// RLIMIT_FSIZE, in bytes; `None`: unlimited.
    pub max_file_bytes: Option<u64>,
    /// RLIMIT_NPROC where no cgroup caps the tree's processes (the kernel exempts uid 0).
    pub max_processes: Option<u64>,
}

impl Identity {
    pub fn new(user: Option<BashUser>, max_file_bytes: Option<u64>) -> Self {
        let last_cap = std::fs::read_to_string("/proc/sys/kernel/cap_last_cap")
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(63);
        let setpcap = CapSets::current().is_some_and(|c| c.has(CAP_SETPCAP));
        Self { user, last_cap, setpcap, max_file_bytes, max_processes: None }
    }

    /// Cap the processes of the user with `RLIMIT_NPROC` (the fallback where no cgroup can).
    pub fn with_max_processes(mut self, max: Option<u64>) -> Self {
        self.max_processes = max;
        self
    }

    /// Whether the parent can switch to the configured user.
    pub fn check(&self) -> Result<(), String> {
        if self.user.is_some() {
            let caps = CapSets::current().unwrap_or_default();
            if !caps.has(CAP_SETUID) || !caps.has(CAP_CHOWN) {
                return Err("sandbox.bash_user needs toolhost to run as root (CAP_SETUID, CAP_CHOWN)".into());
            }
        }
        Ok(())
    }

    /// The command runs as uid 0 (no `bash_user`, toolhost is root).
    pub fn is_uid0(&self) -> bool {
        // SAFETY: getuid cannot fail.
        self.user.is_none() && unsafe { libc::getuid() } == 0
    }

    /// The command runs as toolhost's own uid (no `bash_user`): it owns what toolhost owns —
    /// every root-owned file when that is uid 0 — and only a read-only view or seccomp keeps it
    /// from changing those files' modes, owners and extended attributes.
    pub fn is_own_uid(&self) -> bool {
        self.user.is_none()
    }

    /// Whether the bounding set is emptied (the parent holds CAP_SETPCAP).
    pub fn drops_bounding(&self) -> bool {
        self.setpcap
    }

    /// The `pre_exec` steps: limits, securebits and the bounding set, the user switch, then every
    /// remaining capability dropped and `no_new_privs`. Syscalls only.
    pub fn apply_in_child(&self) -> io::Result<()> {
        fn check(rc: libc::c_long) -> io::Result<()> {
            if rc < 0 {
                Err(io::Error::last_os_error())
            } else {
                Ok(())
            }
        }
        let limit = |resource, value: u64| {
            // Never above the hard limit this process has: only a privileged one may raise it.
            let mut had = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
            // SAFETY: a valid rlimit struct to fill.
            check(unsafe { libc::getrlimit(resource, &mut had) } as libc::c_long)?;
            let value = value.min(had.rlim_max);
            let lim = libc::rlimit { rlim_cur: value, rlim_max: value };
            // SAFETY: a valid rlimit struct.
            check(unsafe { libc::setrlimit(resource, &lim) } as libc::c_long)
        };
        limit(libc::RLIMIT_CORE, 0)?;
        if let Some(bytes) = self.max_file_bytes {
            limit(libc::RLIMIT_FSIZE, bytes)?;
        }
        if let Some(n) = self.max_processes {
            limit(libc::RLIMIT_NPROC, n)?;
        }
        if self.setpcap && self.user.is_none() {
            // SAFETY: prctl with integer arguments.
            check(unsafe { libc::prctl(PR_SET_SECUREBITS, SECUREBITS, 0, 0, 0) } as libc::c_long)?;
        }
        if self.setpcap {
            for cap in 0..=self.last_cap {
                // SAFETY: prctl with integer arguments; EINVAL for an unknown cap is ignored.
                let rc = unsafe { libc::prctl(libc::PR_CAPBSET_DROP, cap as libc::c_ulong, 0, 0, 0) };
                if rc != 0 && io::Error::last_os_error().raw_os_error() != Some(libc::EINVAL) {
                    return Err(io::Error::last_os_error());
                }
            }
        }
        // After the bounding set: dropping it needs CAP_SETPCAP, which the switch to another
        // uid clears.
        if let Some(user) = self.user {
            // SAFETY: plain syscalls with valid arguments.
            unsafe {
                check(libc::setgroups(0, std::ptr::null()) as libc::c_long)?;
                check(libc::setresgid(user.gid, user.gid, user.gid) as libc::c_long)?;
                check(libc::setresuid(user.uid, user.uid, user.uid) as libc::c_long)?;
            }
        }
        // SAFETY: prctl with integer arguments.
        check(unsafe { libc::prctl(libc::PR_CAP_AMBIENT, libc::PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) } as libc::c_long)?;
        #[repr(C)]
        struct CapHeader {
            version: u32,
            pid: libc::c_int,
        }
        #[repr(C)]
        struct CapData {
            effective: u32,
            permitted: u32,
            inheritable: u32,
        }
        let header = CapHeader { version: LINUX_CAPABILITY_VERSION_3, pid: 0 };
        let data = [
            CapData { effective: 0, permitted: 0, inheritable: 0 },
            CapData { effective: 0, permitted: 0, inheritable: 0 },
        ];
        // SAFETY: header and two data words as capset(2) v3 expects.
        check(unsafe { libc::syscall(libc::SYS_capset, &header as *const CapHeader, data.as_ptr()) })?;
        // SAFETY: prctl with integer arguments.
        check(unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } as libc::c_long)
    }
}

/// Harden the toolhost process itself; the CLI calls this once at start. A command runs as the
/// same uid (without capabilities), and non-dumpable makes `/proc/<toolhost>/environ`, `mem` and
/// `fd` unreadable to it whatever else fails — Landlock's ptrace scoping and the capability
/// check already refuse it — and keeps secrets out of core dumps.
pub fn harden_process() -> io::Result<()> {
    // SAFETY: prctl with integer arguments.
    if unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn users_parse_or_say_why_not() {
        assert_eq!(BashUser::parse("1000:1001").unwrap(), BashUser { uid: 1000, gid: 1001 });
        assert_eq!(BashUser::parse("1000").unwrap(), BashUser { uid: 1000, gid: 1000 });
        assert_eq!(BashUser::parse("nobody").unwrap().uid, 65534);
        assert!(BashUser::parse("0").unwrap_err().contains("must not be 0"));
        assert!(BashUser::parse("root").unwrap_err().contains("must not be 0"));
        assert!(BashUser::parse("no-such-user-x").unwrap_err().contains("no such user"));
        assert!(BashUser::parse("a:b").unwrap_err().contains("uid 'a' is not a number"));
    }

    #[test]
    fn cap_lines_parse() {
        let status = "Name:\tx\nCapInh:\t0000000000000000\nCapPrm:\t000001ffffffffff\nCapEff:\t000001ffffffffff\nCapBnd:\t000001ffffffffff\nCapAmb:\t0000000000000000\n";
        let caps = CapSets::parse(status).unwrap();
        assert_eq!(caps.effective, 0x1ff_ffff_ffff);
        assert!(caps.has(CAP_SETPCAP));
        assert_eq!(caps.ambient, 0);
    }
}
