//! The seccomp filter of a host-bash command, a classic BPF program built in the parent and
//! installed in the child just before `exec`: the architecture is checked first (another ABI is
//! killed), then the syscalls that reach past the sandbox — other processes' memory, mounts and
//! namespaces, kernel modules, keyrings, BPF, io_uring (which would bypass this filter's socket
//! checks) — are refused with `EPERM`, and sockets are limited to what the network mode allows.

use std::io;

/// How the filter treats sockets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SocketPolicy {
    /// No `socket()` of any family except `AF_UNIX` when `unix` (see `SeccompPolicy::unix`).
    None,
    /// TCP stream sockets (`AF_INET`/`AF_INET6`, protocol 0 or TCP) for the proxy; no `listen`,
    /// no TCP Fast Open (`sendto` with `MSG_FASTOPEN` connects without `connect`).
    TcpClient,
}

/// What one command's filter refuses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SeccompPolicy {
    pub sockets: SocketPolicy,
    /// `AF_UNIX` sockets may be created: only where Landlock governs connecting to pathname
    /// sockets (ABI ≥ 9); elsewhere a command could connect to any socket path it can name.
    pub unix: bool,
    /// The command runs as toolhost's own uid without a read-only view of the host: it owns
    /// files outside its directories (uid 0 without capabilities every root-owned file, an
    /// unprivileged toolhost its own), and Landlock does not govern `chmod`, `chown` or extended
    /// attributes (ACLs) — so they are refused.
    pub owner_denied: bool,
}

/// The audit architecture this build runs on, checked first by the filter.
#[cfg(target_arch = "x86_64")]
const AUDIT_ARCH: u32 = 0xC000_003E;
#[cfg(target_arch = "aarch64")]
const AUDIT_ARCH: u32 = 0xC000_00B7;
/// The name of that architecture, for `--explain`.
#[cfg(target_arch = "x86_64")]
pub const ARCH_NAME: &str = "x86_64";
#[cfg(target_arch = "aarch64")]
pub const ARCH_NAME: &str = "aarch64";

/// x32 syscalls on x86_64 carry this bit under the same audit arch; none is allowed.
#[cfg(target_arch = "x86_64")]
const X32_SYSCALL_BIT: u32 = 0x4000_0000;

// Syscalls added after libc's tables for every target: the numbers are the same on all
// architectures from 424 on.
const SYS_FCHMODAT2: i64 = 452;
const SYS_SETXATTRAT: i64 = 463;
const SYS_REMOVEXATTRAT: i64 = 466;
const SYS_OPEN_TREE_ATTR: i64 = 467;

/// Refused for every command, by name (for `--explain`) and number.
fn always_denied() -> Vec<(&'static str, i64)> {
    use libc::*;
    let mut list = vec![
        ("ptrace", SYS_ptrace),
        ("process_vm_readv", SYS_process_vm_readv),
        ("process_vm_writev", SYS_process_vm_writev),
        ("process_madvise", SYS_process_madvise),
        ("pidfd_getfd", SYS_pidfd_getfd),
        ("kcmp", SYS_kcmp),
        ("move_pages", SYS_move_pages),
        ("migrate_pages", SYS_migrate_pages),
        ("mount", SYS_mount),
        ("umount2", SYS_umount2),
        ("pivot_root", SYS_pivot_root),
        ("chroot", SYS_chroot),
        ("fsopen", SYS_fsopen),
        ("fsconfig", SYS_fsconfig),
        ("fsmount", SYS_fsmount),
        ("fspick", SYS_fspick),
        ("move_mount", SYS_move_mount),
        ("open_tree", SYS_open_tree),
        ("open_tree_attr", SYS_OPEN_TREE_ATTR),
        ("mount_setattr", SYS_mount_setattr),
        ("open_by_handle_at", SYS_open_by_handle_at),
        ("name_to_handle_at", SYS_name_to_handle_at),
        ("reboot", SYS_reboot),
        ("init_module", SYS_init_module),
        ("finit_module", SYS_finit_module),
        ("delete_module", SYS_delete_module),
        ("kexec_load", SYS_kexec_load),
        ("kexec_file_load", SYS_kexec_file_load),
        ("bpf", SYS_bpf),
        ("perf_event_open", SYS_perf_event_open),
        ("keyctl", SYS_keyctl),
        ("add_key", SYS_add_key),
        ("request_key", SYS_request_key),
        ("setns", SYS_setns),
        ("unshare", SYS_unshare),
        ("io_uring_setup", SYS_io_uring_setup),
        ("io_uring_enter", SYS_io_uring_enter),
        ("io_uring_register", SYS_io_uring_register),
        ("userfaultfd", SYS_userfaultfd),
        ("swapon", SYS_swapon),
        ("swapoff", SYS_swapoff),
        ("syslog", SYS_syslog),
        ("acct", SYS_acct),
        ("quotactl", SYS_quotactl),
        ("quotactl_fd", SYS_quotactl_fd),
        ("settimeofday", SYS_settimeofday),
        ("clock_settime", SYS_clock_settime),
        ("clock_adjtime", SYS_clock_adjtime),
        ("adjtimex", SYS_adjtimex),
        ("sethostname", SYS_sethostname),
        ("setdomainname", SYS_setdomainname),
        ("vhangup", SYS_vhangup),
    ];
    #[cfg(target_arch = "x86_64")]
    list.extend([("iopl", SYS_iopl), ("ioperm", SYS_ioperm), ("uselib", SYS_uselib)]);
    list
}

/// Refused when the command runs as toolhost's own uid (it owns files outside its directories).
fn owner_denied() -> Vec<(&'static str, i64)> {
    use libc::*;
    let mut list = vec![
        ("fchmod", SYS_fchmod),
        ("fchmodat", SYS_fchmodat),
        ("fchmodat2", SYS_FCHMODAT2),
        ("fchown", SYS_fchown),
        ("fchownat", SYS_fchownat),
        ("setxattr", SYS_setxattr),
        ("lsetxattr", SYS_lsetxattr),
        ("fsetxattr", SYS_fsetxattr),
        ("setxattrat", SYS_SETXATTRAT),
        ("removexattr", SYS_removexattr),
        ("lremovexattr", SYS_lremovexattr),
        ("fremovexattr", SYS_fremovexattr),
        ("removexattrat", SYS_REMOVEXATTRAT),
    ];
    #[cfg(target_arch = "x86_64")]
    list.extend([("chmod", SYS_chmod), ("chown", SYS_chown), ("lchown", SYS_lchown)]);
    list
}

/// Namespace flags `clone` may not carry.
const CLONE_NS_FLAGS: u32 = (libc::CLONE_NEWNS
    | libc::CLONE_NEWUSER
    | libc::CLONE_NEWPID
    | libc::CLONE_NEWNET
    | libc::CLONE_NEWUTS
    | libc::CLONE_NEWIPC
    | libc::CLONE_NEWCGROUP) as u32;
/// Terminal ioctls that push input into (or drive) another process's terminal.
const DENIED_IOCTLS: [u32; 2] = [libc::TIOCSTI as u32, 0x541C /* TIOCLINUX */];
const MSG_FASTOPEN: u32 = 0x2000_0000;
const SOCK_TYPE_MASK: u32 = 0xf;

/// The refusals in words, for `--explain`.
pub fn describe(policy: &SeccompPolicy) -> Vec<String> {
    let names = |list: Vec<(&'static str, i64)>| list.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", ");
    let mut lines = vec![
        format!(
            "seccomp ({ARCH_NAME}; another architecture's syscalls kill the command): EPERM for {}; clone with namespace flags; clone3 (ENOSYS, so libc falls back to clone); TIOCSTI/TIOCLINUX ioctls",
            names(always_denied())
        ),
    ];
    if policy.owner_denied {
        lines.push(format!(
            "seccomp (the command runs as toolhost's own uid, which owns files outside the command's directories): EPERM for {}",
            names(owner_denied())
        ));
    }
    let unix = if policy.unix {
        "AF_UNIX sockets allowed (Landlock governs connecting to their paths)"
    } else {
        "no AF_UNIX sockets (Landlock on this kernel does not govern connect to pathname sockets); socketpair of AF_UNIX stream/seqpacket only"
    };
    lines.push(match policy.sockets {
        SocketPolicy::None => format!("seccomp sockets: no AF_INET/AF_INET6/AF_PACKET/AF_NETLINK or any other family; {unix}"),
        SocketPolicy::TcpClient => format!(
            "seccomp sockets: AF_INET/AF_INET6 TCP stream only (no UDP, raw, packet, netlink), no listen, no TCP Fast Open; {unix}"
        ),
    });
    lines
}

// Classic BPF, as `linux/filter.h` and `linux/seccomp.h` define it.
const BPF_LD_W_ABS: u16 = 0x20;
const BPF_JEQ_K: u16 = 0x15;
#[cfg(target_arch = "x86_64")]
const BPF_JGE_K: u16 = 0x35;
const BPF_JSET_K: u16 = 0x45;
const BPF_AND_K: u16 = 0x54;
const BPF_RET_K: u16 = 0x06;
const RET_ALLOW: u32 = 0x7fff_0000;
const RET_KILL_PROCESS: u32 = 0x8000_0000;
const RET_ERRNO: u32 = 0x0005_0000;
const OFF_NR: u32 = 0;
const OFF_ARCH: u32 = 4;
/// Low 32 bits of argument `i` (both supported architectures are little-endian; every argument
/// checked here is a C `int` or a flag word whose bits of interest are in the low half).
const fn arg_lo(i: u32) -> u32 {
    16 + 8 * i
}

/// A jump target: the next instruction, or the end of the current block (a label).
#[derive(Clone, Copy)]
enum To {
    Next,
    Label(usize),
}

struct Asm {
    code: Vec<(u16, To, To, u32)>,
    labels: Vec<Option<usize>>,
}

impl Asm {
    fn new() -> Self {
        Self { code: Vec::new(), labels: Vec::new() }
    }
    fn label(&mut self) -> usize {
        self.labels.push(None);
        self.labels.len() - 1
    }
    fn bind(&mut self, label: usize) {
        self.labels[label] = Some(self.code.len());
    }
    fn load(&mut self, offset: u32) {
        self.code.push((BPF_LD_W_ABS, To::Next, To::Next, offset));
    }
    fn and(&mut self, k: u32) {
        self.code.push((BPF_AND_K, To::Next, To::Next, k));
    }
    fn jump(&mut self, op: u16, k: u32, t: To, f: To) {
        self.code.push((op, t, f, k));
    }
    fn ret(&mut self, k: u32) {
        self.code.push((BPF_RET_K, To::Next, To::Next, k));
    }
    /// `if A == k { return ret }`.
    fn ret_if_eq(&mut self, k: u32, ret: u32) {
        let skip = self.label();
        self.jump(BPF_JEQ_K, k, To::Next, To::Label(skip));
        self.ret(ret);
        self.bind(skip);
    }
    fn finish(self) -> Result<Vec<libc::sock_filter>, String> {
        let mut out = Vec::with_capacity(self.code.len());
        for (pc, (code, t, f, k)) in self.code.iter().enumerate() {
            let offset = |to: &To| -> Result<u8, String> {
                let target = match to {
                    To::Next => return Ok(0),
                    To::Label(l) => self.labels.get(*l).copied().flatten().ok_or("unbound label")?,
                };
                let offset = target.checked_sub(pc + 1).ok_or("a backward jump")?;
                u8::try_from(offset).map_err(|_| "a jump longer than 255 instructions".to_string())
            };
            out.push(libc::sock_filter { code: *code, jt: offset(t)?, jf: offset(f)?, k: *k });
        }
        Ok(out)
    }
}

/// `SECCOMP_RET_ERRNO` with this errno.
const fn errno(e: i32) -> u32 {
    RET_ERRNO | (e as u32 & 0xffff)
}

/// Build the filter program of one command.
pub fn program(policy: &SeccompPolicy) -> Result<Vec<libc::sock_filter>, String> {
    let eperm = errno(libc::EPERM);
    let mut a = Asm::new();
    a.load(OFF_ARCH);
    a.ret_if_eq_else(AUDIT_ARCH, RET_KILL_PROCESS);
    a.load(OFF_NR);
    #[cfg(target_arch = "x86_64")]
    {
        let ok = a.label();
        a.jump(BPF_JGE_K, X32_SYSCALL_BIT, To::Next, To::Label(ok));
        a.ret(eperm);
        a.bind(ok);
    }
    let mut denied = always_denied();
    if policy.owner_denied {
        denied.extend(owner_denied());
    }
    for (_, nr) in &denied {
        a.ret_if_eq(*nr as u32, eperm);
    }
    a.ret_if_eq(libc::SYS_clone3 as u32, errno(libc::ENOSYS));

    // clone: no new namespaces.
    a.block(libc::SYS_clone as u32, |a| {
        a.load(arg_lo(0));
        let fine = a.label();
        a.jump(BPF_JSET_K, CLONE_NS_FLAGS, To::Next, To::Label(fine));
        a.ret(eperm);
        a.bind(fine);
        a.ret(RET_ALLOW);
    });
    a.block(libc::SYS_ioctl as u32, |a| {
        a.load(arg_lo(1));
        for cmd in DENIED_IOCTLS {
            a.ret_if_eq(cmd, eperm);
        }
        a.ret(RET_ALLOW);
    });
    a.block(libc::SYS_socket as u32, |a| {
        a.load(arg_lo(0));
        if policy.unix {
            a.ret_if_eq(libc::AF_UNIX as u32, RET_ALLOW);
        }
        if policy.sockets == SocketPolicy::TcpClient {
            let inet = a.label();
            let refuse = a.label();
            a.jump(BPF_JEQ_K, libc::AF_INET as u32, To::Label(inet), To::Next);
            a.jump(BPF_JEQ_K, libc::AF_INET6 as u32, To::Label(inet), To::Label(refuse));
            a.bind(inet);
            a.load(arg_lo(1));
            a.and(SOCK_TYPE_MASK);
            a.jump(BPF_JEQ_K, libc::SOCK_STREAM as u32, To::Next, To::Label(refuse));
            a.load(arg_lo(2));
            a.ret_if_eq(0, RET_ALLOW);
            a.ret_if_eq(libc::IPPROTO_TCP as u32, RET_ALLOW);
            a.bind(refuse);
        }
        a.ret(eperm);
    });
    // socketpair: connected AF_UNIX stream pairs only; a datagram pair could `sendto` any
    // socket path.
    a.block(libc::SYS_socketpair as u32, |a| {
        let refuse = a.label();
        a.load(arg_lo(0));
        a.jump(BPF_JEQ_K, libc::AF_UNIX as u32, To::Next, To::Label(refuse));
        a.load(arg_lo(1));
        a.and(SOCK_TYPE_MASK);
        a.ret_if_eq(libc::SOCK_STREAM as u32, RET_ALLOW);
        a.ret_if_eq(libc::SOCK_SEQPACKET as u32, RET_ALLOW);
        a.bind(refuse);
        a.ret(eperm);
    });
    if policy.sockets == SocketPolicy::TcpClient {
        a.ret_if_eq(libc::SYS_listen as u32, eperm);
        for (nr, flags_arg) in [(libc::SYS_sendto, 3), (libc::SYS_sendmsg, 2), (libc::SYS_sendmmsg, 3)] {
            a.block(nr as u32, |a| {
                a.load(arg_lo(flags_arg));
                let fine = a.label();
                a.jump(BPF_JSET_K, MSG_FASTOPEN, To::Next, To::Label(fine));
                a.ret(eperm);
                a.bind(fine);
                a.ret(RET_ALLOW);
            });
        }
    }
    a.ret(RET_ALLOW);
    a.finish()
}

impl Asm {
    /// `if A == k { continue } else { return ret }`.
    fn ret_if_eq_else(&mut self, k: u32, ret: u32) {
        let ok = self.label();
        self.jump(BPF_JEQ_K, k, To::Label(ok), To::Next);
        self.ret(ret);
        self.bind(ok);
    }

    /// Run `body` when the syscall number in A is `nr`. `body` must end in a return, so the
    /// checks after the block still find the number in A.
    fn block(&mut self, nr: u32, body: impl FnOnce(&mut Asm)) {
        let after = self.label();
        self.jump(BPF_JEQ_K, nr, To::Next, To::Label(after));
        body(self);
        self.bind(after);
    }
}

/// A filter ready to install in the child.
pub struct Filter {
    program: Vec<libc::sock_filter>,
}

impl Filter {
    pub fn new(policy: &SeccompPolicy) -> Result<Self, String> {
        Ok(Self { program: program(policy)? })
    }

    /// The `pre_exec` step: install the filter (`no_new_privs` is already set). Only syscalls,
    /// no allocation.
    pub fn install_in_child(&self) -> io::Result<()> {
        let prog = libc::sock_fprog {
            len: self.program.len() as libc::c_ushort,
            filter: self.program.as_ptr() as *mut libc::sock_filter,
        };
        // SECCOMP_FILTER_FLAG_SPEC_ALLOW: without it the kernel also forces speculative-store-
        // bypass and indirect-branch mitigations on the process (spec_store_bypass_disable and
        // spectre_v2_user default to "seccomp"), which made a confined Python start a quarter
        // slower. Those mitigations protect a process from itself (its own address space); the
        // boundary here is between processes, which they do not change. runc and systemd pass
        // the same flag.
        let install = |flags: libc::c_ulong| {
            // SAFETY: prog points at a live program for the duration of the call.
            unsafe {
                libc::syscall(libc::SYS_seccomp, libc::SECCOMP_SET_MODE_FILTER, flags, &prog as *const libc::sock_fprog)
            }
        };
        let mut rc = install(libc::SECCOMP_FILTER_FLAG_SPEC_ALLOW);
        if rc != 0 && io::Error::last_os_error().raw_os_error() == Some(libc::EINVAL) {
            // A kernel before 4.17 does not know the flag.
            rc = install(0);
        }
        if rc == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn syscall_numbers_are_this_architectures() {
        #[cfg(target_arch = "x86_64")]
        {
            assert_eq!((libc::SYS_ptrace, libc::SYS_socket, libc::SYS_clone, libc::SYS_chmod), (101, 41, 56, 90));
            assert_eq!(libc::SYS_fchmodat2, SYS_FCHMODAT2);
        }
        #[cfg(target_arch = "aarch64")]
        assert_eq!((libc::SYS_ptrace, libc::SYS_socket, libc::SYS_clone), (117, 198, 220));
        assert_eq!(libc::SYS_clone3, 435);
    }

    #[test]
    fn programs_assemble_for_every_policy() {
        for sockets in [SocketPolicy::None, SocketPolicy::TcpClient] {
            for unix in [false, true] {
                for owner_denied in [false, true] {
                    let p = program(&SeccompPolicy { sockets, unix, owner_denied }).unwrap();
                    assert!(p.len() < 400, "{}", p.len());
                    assert_eq!(p.last().map(|i| (i.code, i.k)), Some((BPF_RET_K, RET_ALLOW)));
                }
            }
        }
    }
}
