//! The process-tree fallback where no cgroup can be made: the command's first `pre_exec` step
//! forks, and the process that stays behind becomes a supervisor — a child subreaper, so every
//! orphan of the command (a `setsid`, double-forked daemon included) is re-parented to it rather
//! than to init. It reports the shell's exit status on a pipe, reaps orphans, exits once the
//! tree is empty, and on SIGTERM (the timeout, a cancelled call) or toolhost's death kills its
//! children until none is left. Only syscalls run in it.
//!
//! toolhost's death is seen on the *lifeline*: a pipe made once per toolhost process whose write
//! end only toolhost holds (each supervisor closes its inherited copy first thing; commands lose
//! theirs at exec). When toolhost exits, however it exits, the read end hangs up. Not
//! `PR_SET_PDEATHSIG`: that fires when the *thread* that forked exits, and toolhost forks from
//! whatever thread asks (a tokio blocking-pool thread ends after ten idle seconds), which would
//! kill a long-lived MCP server's whole tree.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::Duration;

/// What the supervisor needs, prepared in the parent.
pub struct ReaperPlan {
    /// Write end of the status pipe (the shell's raw wait status, 4 bytes).
    status: OwnedFd,
    /// `/dev/null`, to let go of the command's stdout and stderr.
    null: OwnedFd,
    /// Where toolhost's own command line lies in memory (`/proc/self/stat`'s `arg_start` and
    /// `arg_end`): the supervisor is a fork of toolhost and, as init of a pid namespace, is the
    /// one process the command sees; its copy of that line is cleared.
    argv: Option<(usize, usize)>,
    /// The lifeline's ends ([`lifeline`]), as this process holds them.
    lifeline: (libc::c_int, libc::c_int),
}

/// The lifeline pipe, made once: (read end, write end), both close-on-exec.
fn lifeline() -> io::Result<(libc::c_int, libc::c_int)> {
    static LIFELINE: std::sync::OnceLock<(OwnedFd, OwnedFd)> = std::sync::OnceLock::new();
    if let Some((r, w)) = LIFELINE.get() {
        return Ok((r.as_raw_fd(), w.as_raw_fd()));
    }
    let (r, w) = pipe()?;
    let (r, w) = LIFELINE.get_or_init(|| (r, w));
    Ok((r.as_raw_fd(), w.as_raw_fd()))
}

fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: pipe2 fills two descriptors.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both were just created.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// Signals a supervisor waits for, blocked, and a signalfd that reports them (set up in the
/// forked child: syscalls only).
struct Signals {
    set: libc::sigset_t,
    old: libc::sigset_t,
}

impl Signals {
    /// Block SIGCHLD and SIGTERM, keeping the mask they replaced.
    fn block() -> Self {
        // SAFETY: sigset operations on stack values.
        unsafe {
            let mut s = Signals { set: std::mem::zeroed(), old: std::mem::zeroed() };
            libc::sigemptyset(&mut s.set);
            libc::sigaddset(&mut s.set, libc::SIGCHLD);
            libc::sigaddset(&mut s.set, libc::SIGTERM);
            libc::sigprocmask(libc::SIG_BLOCK, &s.set, &mut s.old);
            s
        }
    }

    /// Back to the mask before [`block`](Self::block) (in the process that will exec).
    fn restore(&self) {
        // SAFETY: restores the saved mask.
        unsafe { libc::sigprocmask(libc::SIG_SETMASK, &self.old, std::ptr::null_mut()) };
    }

    /// Wait until a blocked signal arrives or the lifeline (at `lifeline`) hangs up: `true` for
    /// a kill request (SIGTERM, or toolhost gone), `false` for SIGCHLD.
    fn wait(&self, sfd: libc::c_int, lifeline: libc::c_int) -> bool {
        loop {
            let mut fds = [
                libc::pollfd { fd: sfd, events: libc::POLLIN, revents: 0 },
                libc::pollfd { fd: lifeline, events: libc::POLLIN, revents: 0 },
            ];
            // SAFETY: polls two descriptors this process owns.
            let n = unsafe { libc::poll(fds.as_mut_ptr(), 2, -1) };
            if n < 0 {
                if io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) {
                    continue;
                }
                return true;
            }
            if fds[1].revents != 0 {
                return true;
            }
            if fds[0].revents != 0 {
                // SAFETY: a zeroed siginfo buffer the size signalfd reads.
                let mut info: libc::signalfd_siginfo = unsafe { std::mem::zeroed() };
                let size = std::mem::size_of::<libc::signalfd_siginfo>();
                // SAFETY: reads one record into `info`.
                let got = unsafe { libc::read(sfd, (&mut info as *mut libc::signalfd_siginfo).cast(), size) };
                if got == size as isize && info.ssi_signo == libc::SIGTERM as u32 {
                    return true;
                }
                return false;
            }
        }
    }

    /// A signalfd for the blocked signals, at the lowest free descriptor.
    fn fd(&self) -> libc::c_int {
        // SAFETY: a new signalfd for a valid set.
        unsafe { libc::signalfd(-1, &self.set, libc::SFD_CLOEXEC) }
    }
}

/// `arg_start` and `arg_end` of this process, read once.
fn argv_area() -> Option<(usize, usize)> {
    static AREA: std::sync::OnceLock<Option<(usize, usize)>> = std::sync::OnceLock::new();
    *AREA.get_or_init(|| {
        let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
        // Fields after the command name (which may hold spaces), counted from field 3.
        let rest = stat.rsplit_once(") ")?.1;
        let fields: Vec<&str> = rest.split_whitespace().collect();
        let start = fields.get(48 - 3)?.parse().ok()?;
        let end = fields.get(49 - 3)?.parse().ok()?;
        (end > start).then_some((start, end))
    })
}

/// The parent's side: the status pipe's read end.
pub struct StatusPipe(pub OwnedFd);

impl ReaperPlan {
    pub fn new() -> io::Result<(Self, StatusPipe)> {
        let (read, write) = pipe()?;
        let null = OwnedFd::from(std::fs::OpenOptions::new().read(true).write(true).open("/dev/null")?);
        Ok((Self { status: write, null, argv: argv_area(), lifeline: lifeline()? }, StatusPipe(read)))
    }

    /// The first `pre_exec` step. Returns in the command's process; the supervisor never
    /// returns from here. With `pid_namespace` the command is init of a new pid namespace: when
    /// it dies, the kernel kills everything else in it, and a `/proc` mounted there shows only
    /// the tree.
    pub fn fork_in_child(&self, pid_namespace: bool) -> io::Result<()> {
        // Only toolhost may hold the lifeline's write end.
        // SAFETY: closes this process's copy of a descriptor it inherited.
        unsafe { libc::close(self.lifeline.1) };
        if pid_namespace {
            // The process toolhost started stays in toolhost's pid namespace and only waits; it
            // kills the namespace's init (and so everything in it) on SIGTERM or when toolhost
            // is gone.
            // SAFETY: unshare in the single-threaded child; it applies to the fork below.
            if unsafe { libc::unshare(libc::CLONE_NEWPID) } != 0 {
                return Err(io::Error::last_os_error());
            }
            let signals = Signals::block();
            // SAFETY: fork in a single-threaded child.
            match unsafe { libc::fork() } {
                -1 => return Err(io::Error::last_os_error()),
                0 => {
                    signals.restore();
                    self.clear_argv();
                    // Init's parent is the waiter, a process of one thread: its death is
                    // toolhost's or the tree's end.
                    // SAFETY: prctl with integer arguments.
                    if unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) } != 0 {
                        return Err(io::Error::last_os_error());
                    }
                }
                init => self.wait_and_exit(init, &signals),
            }
        }
        // SAFETY: prctl with integer arguments.
        if unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) } != 0 {
            return Err(io::Error::last_os_error());
        }
        let signals = Signals::block();
        // SAFETY: fork in a single-threaded child.
        match unsafe { libc::fork() } {
            -1 => Err(io::Error::last_os_error()),
            0 => {
                // The command: its own signal mask back, then the rest of the plan and exec.
                signals.restore();
                Ok(())
            }
            shell => self.supervise(shell, &signals, pid_namespace),
        }
    }

    /// Zero this process's copy of toolhost's command line (what `/proc/1/cmdline` shows in
    /// the namespace).
    fn clear_argv(&self) {
        if let Some((start, end)) = self.argv {
            // SAFETY: the argument area of this process's own stack, mapped and writable (this
            // process is a fork of the one that read the addresses).
            unsafe { std::ptr::write_bytes(start as *mut u8, 0, end - start) };
        }
    }

    /// Let go of every descriptor: `/dev/null` on 0–2, `keep` on 3, 4, … in order, the rest
    /// closed. Each kept one is first copied above any target, so that no `dup2` onto a low
    /// number closes one still to be placed. Syscalls only (this runs after a fork).
    fn keep_only<const N: usize>(&self, keep: [libc::c_int; N]) {
        // SAFETY: descriptor juggling on descriptors this process owns.
        unsafe {
            let lifted = keep.map(|fd| libc::fcntl(fd, libc::F_DUPFD, 64));
            for target in 0..3 {
                libc::dup2(self.null.as_raw_fd(), target);
            }
            for (i, fd) in lifted.into_iter().enumerate() {
                libc::dup2(fd, 3 + i as libc::c_int);
            }
            libc::syscall(libc::SYS_close_range, 3 + N as u32, u32::MAX, 0u32);
        }
    }

    /// The process toolhost started, outside the namespace: let go of every descriptor but the
    /// lifeline, wait for the namespace's init, and exit with its status; on SIGTERM or
    /// toolhost's death kill init first. Init's exit returns only once the kernel has ended
    /// every other process of the namespace, so when this process is gone the tree is.
    fn wait_and_exit(&self, init: libc::pid_t, signals: &Signals) -> ! {
        self.keep_only([self.lifeline.0]);
        release_memory();
        let sfd = signals.fd();
        let mut killed = false;
        loop {
            let mut status: libc::c_int = 0;
            let flags = if killed { 0 } else { libc::WNOHANG };
            // SAFETY: waits for the one child.
            let pid = unsafe { libc::waitpid(init, &mut status, flags) };
            if pid == init {
                let code =
                    if libc::WIFEXITED(status) { libc::WEXITSTATUS(status) } else { 128 + libc::WTERMSIG(status) };
                exit(code);
            }
            if pid < 0 && io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
                exit(127);
            }
            if !killed && (sfd < 0 || signals.wait(sfd, 3)) {
                // SAFETY: kills this process's own child.
                unsafe { libc::kill(init, libc::SIGKILL) };
                killed = true;
            }
        }
    }

    fn supervise(&self, shell: libc::pid_t, signals: &Signals, init: bool) -> ! {
        // Let go of everything but the status pipe and the lifeline: the command's pipes must
        // reach EOF when the command's tree closes them, and std's spawn-error pipe when the
        // shell execs.
        self.keep_only([self.status.as_raw_fd(), self.lifeline.0]);
        release_memory();
        let sfd = signals.fd();
        let mut shell_done = false;
        loop {
            // Reap first, wait after: whatever ended before the signalfd existed is seen here.
            loop {
                let mut status: libc::c_int = 0;
                // SAFETY: reaps any child without blocking.
                let pid = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) };
                if pid == shell {
                    let bytes = status.to_ne_bytes();
                    // SAFETY: writes four bytes to the status pipe.
                    unsafe { libc::write(3, bytes.as_ptr().cast(), bytes.len()) };
                    shell_done = true;
                } else if pid == 0 {
                    break;
                } else if pid < 0 {
                    if shell_done {
                        // Nothing left of the tree.
                        exit(0);
                    }
                    break;
                }
            }
            if sfd < 0 || signals.wait(sfd, 4) {
                // As init of the namespace, exiting is the kill: the kernel ends every process
                // in it (and pids read from /proc here would be the host's, not this
                // namespace's).
                if !init {
                    kill_children();
                }
                exit(0);
            }
        }
    }
}

/// Let go of toolhost's memory. A supervisor is a fork of toolhost and lives as long as its
/// tree: without this it would keep every page toolhost had at the fork, and each page toolhost
/// writes afterwards becomes a second copy that only the supervisor holds (a server started
/// from a 300 MB toolhost pinned 300 MB until it exited). After [`ReaperPlan::keep_only`] a
/// supervisor needs only its stack, its thread's TLS (errno), and the code and data of the
/// binary and libc, so every private anonymous writable mapping but the two holding the stack
/// and the thread pointer is dropped with `MADV_DONTNEED`. Signal handlers go back to their
/// defaults first (SIGPIPE stays ignored): a handler toolhost installed could reach into what was
/// dropped.
/// Syscalls on stack buffers only.
fn release_memory() {
    let Some(tp) = thread_pointer() else { return };
    let marker = 0u8;
    let sp = std::ptr::addr_of!(marker) as usize;
    for sig in 1..=libc::SIGRTMAX() {
        // A status write to a toolhost that is gone must not end the supervisor (Rust ignores
        // SIGPIPE; keep it that way).
        let disposition = if sig == libc::SIGPIPE { libc::SIG_IGN } else { libc::SIG_DFL };
        // SIGCHLD and SIGTERM are blocked and read from a signalfd: their handlers never run,
        // and setting SIGCHLD to SIG_DFL (whose action is to ignore) would discard one already
        // pending — a child that exited before this line would never be seen.
        if ![libc::SIGKILL, libc::SIGSTOP, libc::SIGCHLD, libc::SIGTERM].contains(&sig) {
            // SAFETY: resets a disposition; no handler of toolhost's runs here any more.
            unsafe { libc::signal(sig, disposition) };
        }
    }
    // SAFETY: a static path; the descriptor is closed below.
    let fd = unsafe { libc::open(c"/proc/self/maps".as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
    if fd < 0 {
        return;
    }
    let mut buf = [0u8; 4096];
    let mut line = [0u8; 160];
    let mut len = 0;
    loop {
        // SAFETY: reads into a stack buffer.
        let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
        if n <= 0 {
            break;
        }
        for &b in &buf[..n as usize] {
            if b == b'\n' {
                if let Some((start, end)) = droppable(&line[..len], [sp, tp]) {
                    // SAFETY: drops this process's own pages of a private anonymous mapping
                    // that holds neither the stack nor the TLS; nothing below touches it.
                    unsafe { libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_DONTNEED) };
                }
                len = 0;
            } else if len < line.len() {
                line[len] = b;
                len += 1;
            }
        }
    }
    // SAFETY: closing the descriptor opened above.
    unsafe { libc::close(fd) };
}

/// The range of one `/proc/self/maps` line (`start-end perms offset dev inode [path]`) when it
/// is a private anonymous writable mapping that holds none of `keep`.
fn droppable(line: &[u8], keep: [usize; 2]) -> Option<(usize, usize)> {
    let mut fields = line.split(|b| *b == b' ').filter(|f| !f.is_empty());
    let range = fields.next()?;
    let perms = fields.next()?;
    let _offset = fields.next()?;
    let _dev = fields.next()?;
    let inode = fields.next()?;
    let path = fields.next().unwrap_or(b"");
    let dash = range.iter().position(|b| *b == b'-')?;
    let (start, end) = (hex(&range[..dash])?, hex(&range[dash + 1..])?);
    let anonymous = inode == b"0" && (path.is_empty() || path == b"[heap]" || path == b"[stack]");
    let writable_private = perms.len() == 4 && perms[1] == b'w' && perms[3] == b'p';
    (anonymous && writable_private && end > start && !keep.iter().any(|a| (start..end).contains(a)))
        .then_some((start, end))
}

fn hex(digits: &[u8]) -> Option<usize> {
    let mut v: usize = 0;
    for &d in digits {
        v = v.checked_mul(16)?.checked_add((d as char).to_digit(16)? as usize)?;
    }
    Some(v)
}

/// The thread pointer (where this thread's TLS and errno live), or `None` where it is not read.
fn thread_pointer() -> Option<usize> {
    #[cfg(target_arch = "x86_64")]
    {
        let tp: usize;
        // SAFETY: glibc and musl keep the thread control block's own address at %fs:0.
        unsafe {
            std::arch::asm!("mov {}, qword ptr fs:[0]", out(reg) tp, options(nostack, readonly, preserves_flags))
        };
        Some(tp)
    }
    #[cfg(target_arch = "aarch64")]
    {
        let tp: usize;
        // SAFETY: reads the thread pointer register.
        unsafe { std::arch::asm!("mrs {}, tpidr_el0", out(reg) tp, options(nostack, nomem, preserves_flags)) };
        Some(tp)
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        None
    }
}

/// SIGKILL every child, reap, repeat until there are none: orphans of killed children are
/// re-parented here and killed in the next round.
fn kill_children() {
    let mut buf = [0u8; 4096];
    loop {
        // SAFETY: a static path; the fd is closed below.
        let fd = unsafe { libc::open(c"/proc/thread-self/children".as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
        if fd >= 0 {
            loop {
                // SAFETY: reads into a stack buffer.
                let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
                if n <= 0 {
                    break;
                }
                let mut pid: libc::pid_t = 0;
                for &b in &buf[..n as usize] {
                    if b.is_ascii_digit() {
                        pid = pid * 10 + (b - b'0') as libc::pid_t;
                    } else if pid > 0 {
                        // SAFETY: a child of this process.
                        unsafe { libc::kill(pid, libc::SIGKILL) };
                        pid = 0;
                    }
                }
                if pid > 0 {
                    // SAFETY: a child of this process.
                    unsafe { libc::kill(pid, libc::SIGKILL) };
                }
            }
            // SAFETY: closing the descriptor opened above.
            unsafe { libc::close(fd) };
        }
        loop {
            let mut status = 0;
            // SAFETY: reaps without blocking.
            let pid = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) };
            if pid < 0 {
                return; // ECHILD: no child left.
            }
            if pid == 0 {
                break;
            }
        }
        let pause = libc::timespec { tv_sec: 0, tv_nsec: 1_000_000 };
        // SAFETY: a short sleep before the next round.
        unsafe { libc::nanosleep(&pause, std::ptr::null_mut()) };
    }
}

fn exit(code: libc::c_int) -> ! {
    // SAFETY: leaves without running the parent's atexit handlers or destructors.
    unsafe { libc::_exit(code) }
}

/// The supervisor of one command, from the parent: a pidfd, so a signal never reaches a reused
/// pid.
#[derive(Debug)]
pub struct Supervisor {
    pidfd: OwnedFd,
}

impl Supervisor {
    pub fn new(pid: u32) -> io::Result<Self> {
        // SAFETY: pidfd_open with a pid and no flags.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: just opened.
        Ok(Self { pidfd: unsafe { OwnedFd::from_raw_fd(fd as libc::c_int) } })
    }

    /// Ask the supervisor to kill the tree (it exits when done).
    pub fn signal_kill(&self) {
        // SAFETY: signals through the pidfd; an exited process is ESRCH.
        unsafe {
            libc::syscall(libc::SYS_pidfd_send_signal, self.pidfd.as_raw_fd(), libc::SIGTERM, std::ptr::null::<u8>(), 0)
        };
    }

    /// Whether the supervisor (and so the tree) is gone.
    pub fn exited(&self, wait: Duration) -> bool {
        let mut poll = libc::pollfd { fd: self.pidfd.as_raw_fd(), events: libc::POLLIN, revents: 0 };
        // SAFETY: polls one descriptor.
        let n = unsafe { libc::poll(&mut poll, 1, wait.as_millis().min(i32::MAX as u128) as libc::c_int) };
        n > 0
    }

    /// Kill the tree and wait (bounded) until the supervisor is gone.
    pub fn kill(&self, wait: Duration) -> bool {
        self.signal_kill();
        self.exited(wait)
    }
}
