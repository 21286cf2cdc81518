//! A read-only view of the host for a command that runs as uid 0: a private mount namespace in
//! which every mount is read-only except clones of the thread's `user-data` and writable mounts
//! (where Landlock still decides what may change). Without capabilities, uid 0 still owns root's
//! files, and Landlock does not govern `chmod`, `chown` or extended attributes; on a read-only
//! mount they fail (`EROFS`) outside the thread while they keep working inside it (a virtualenv
//! sets modes as it copies). The writable clones are made from the directory handles the parent
//! opened; the child runs only `open_tree`, `unshare`, `mount`, `mount_setattr`, `fstatat`,
//! `move_mount`, `openat` and `fchdir`.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

const MOUNT_ATTR_RDONLY: u64 = 0x1;
const AT_RECURSIVE: libc::c_uint = 0x8000;
const OPEN_TREE_CLONE: libc::c_uint = 1;
const MOVE_MOUNT_F_EMPTY_PATH: libc::c_uint = 0x4;

#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

fn check(rc: libc::c_long) -> io::Result<libc::c_long> {
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}

fn mount_setattr(dirfd: libc::c_int, path: &std::ffi::CStr, flags: libc::c_uint, attr: &MountAttr) -> io::Result<()> {
    // SAFETY: valid path and attr for the call.
    check(unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            dirfd,
            path.as_ptr(),
            flags,
            attr as *const MountAttr,
            std::mem::size_of::<MountAttr>(),
        )
    })
    .map(drop)
}

/// Whether this kernel and process can build the view: `mount_setattr` exists (Linux 5.12) and
/// the process holds CAP_SYS_ADMIN (checked by the caller).
pub fn supported() -> bool {
    // An invalid call: EBADF/EINVAL when the syscall exists, ENOSYS when it does not.
    let attr = MountAttr { attr_set: 0, attr_clr: 0, propagation: 0, userns_fd: 0 };
    match mount_setattr(-1, c"", 0, &attr) {
        Ok(()) => true,
        Err(e) => e.raw_os_error() != Some(libc::ENOSYS),
    }
}

/// At most this many writable directories (the thread's `user-data` and writable mounts).
pub const MAX_WRITABLE: usize = 32;

/// A directory's identity, to check that a place seen from the new namespace is the directory
/// the parent opened.
#[derive(Clone, Copy)]
struct Id {
    dev: u64,
    ino: u64,
}

impl Id {
    fn of(fd: &OwnedFd) -> io::Result<Self> {
        let meta = std::fs::File::from(fd.try_clone()?).metadata()?;
        Ok(Self { dev: meta.dev(), ino: meta.ino() })
    }

    fn matches(&self, st: &libc::stat) -> bool {
        st.st_dev == self.dev && st.st_ino == self.ino
    }
}

/// One writable directory: its handle, where it is seen from the command's namespace (`.` for
/// the thread's `user-data`, or a mount's absolute path), and the identity that place must have.
pub struct Writable {
    source: OwnedFd,
    target: CString,
    id: Id,
}

impl Writable {
    pub fn new(source: OwnedFd, target: &Path) -> io::Result<Self> {
        let target = CString::new(target.as_os_str().as_bytes())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a path with a NUL byte"))?;
        let id = Id::of(&source)?;
        Ok(Self { source, target, id })
    }
}

/// Where the confined process starts inside the view.
enum Workdir {
    /// The directory of this name inside the first writable clone (a thread's `workspace`
    /// inside its `user-data`).
    InFirst { name: CString, id: Id },
    /// A writable directory's place, by its absolute path (a server's home).
    At { path: CString, id: Id },
}

/// The host read-only but for some writable clones: for a bash command the thread's
/// `user-data` — one writable clone, so renames between `workspace`, `uploads`, `outputs` and
/// the bash tmp and home directories stay within one mount; Landlock still keeps `user-data`
/// itself unchangeable — plus writable mounts; for a server its home, tmp and granted
/// directories. With `fresh_proc` a new `/proc` is mounted, showing only the process's own pid
/// namespace.
pub struct ReadOnlyView {
    /// The directory relative targets (`.`) are seen from.
    base: OwnedFd,
    workdir: Workdir,
    writable: Vec<Writable>,
    fresh_proc: bool,
}

impl ReadOnlyView {
    /// A bash command's view: `user_data` writable (seen at `.`, the command's base), `mounts`,
    /// and the start in `workspace` (checked to be the directory the parent opened).
    pub fn new(user_data: OwnedFd, workspace: &OwnedFd, mounts: Vec<Writable>) -> io::Result<Self> {
        if mounts.len() + 1 > MAX_WRITABLE {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("at most {} writable mounts, not {}", MAX_WRITABLE - 1, mounts.len()),
            ));
        }
        let mut writable = vec![Writable::new(user_data.try_clone()?, Path::new("."))?];
        writable.extend(mounts);
        let workdir = Workdir::InFirst { name: c"workspace".to_owned(), id: Id::of(workspace)? };
        Ok(Self { base: user_data, workdir, writable, fresh_proc: false })
    }

    /// A view whose writable directories are seen at their absolute paths, starting in
    /// `workdir` (one of them, or any directory the process may read).
    pub fn at_paths(writable: Vec<Writable>, workdir: &OwnedFd, workdir_path: &Path) -> io::Result<Self> {
        if writable.len() > MAX_WRITABLE {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("at most {MAX_WRITABLE} writable directories, not {}", writable.len()),
            ));
        }
        let path = CString::new(workdir_path.as_os_str().as_bytes())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a path with a NUL byte"))?;
        let base = OwnedFd::from(std::fs::File::open("/")?);
        Ok(Self { base, workdir: Workdir::At { path, id: Id::of(workdir)? }, writable, fresh_proc: false })
    }

    /// Mount a fresh `/proc` in the view (the process runs in a pid namespace of its own).
    pub fn with_fresh_proc(mut self, on: bool) -> Self {
        self.fresh_proc = on;
        self
    }

    /// The `pre_exec` step. Writable clones are taken from the handles before the namespace
    /// exists (a handle keeps pointing into the host's namespace); then a private namespace,
    /// every mount read-only, each clone attached where the process sees its directory — after
    /// checking that place is the same directory — a fresh `/proc` if asked, and the working
    /// directory moved onto the start directory inside the view.
    pub fn apply_in_child(&self) -> io::Result<()> {
        let mut trees = [-1 as libc::c_int; MAX_WRITABLE];
        let result = self.attach(&mut trees);
        for fd in trees.iter().filter(|fd| **fd >= 0) {
            // SAFETY: closing descriptors this function opened.
            unsafe { libc::close(*fd) };
        }
        result
    }

    fn attach(&self, trees: &mut [libc::c_int; MAX_WRITABLE]) -> io::Result<()> {
        for (slot, dir) in trees.iter_mut().zip(&self.writable) {
            // SAFETY: open_tree on an open directory with an empty path.
            *slot = check(unsafe {
                libc::syscall(
                    libc::SYS_open_tree,
                    dir.source.as_raw_fd(),
                    c"".as_ptr(),
                    OPEN_TREE_CLONE | libc::O_CLOEXEC as libc::c_uint | libc::AT_EMPTY_PATH as libc::c_uint,
                )
            })? as libc::c_int;
        }
        // The working directory crosses into the new namespace: `.` resolves there.
        // SAFETY: fchdir on an open directory.
        check(unsafe { libc::fchdir(self.base.as_raw_fd()) } as libc::c_long)?;
        private_namespace()?;
        let ro = MountAttr { attr_set: MOUNT_ATTR_RDONLY, attr_clr: 0, propagation: 0, userns_fd: 0 };
        mount_setattr(libc::AT_FDCWD, c"/", AT_RECURSIVE, &ro)?;
        for (tree, dir) in trees.iter().zip(&self.writable) {
            // SAFETY: a zeroed stat is valid output space.
            let mut st: libc::stat = unsafe { std::mem::zeroed() };
            // SAFETY: a NUL-terminated path and a valid stat buffer.
            check(unsafe { libc::fstatat(libc::AT_FDCWD, dir.target.as_ptr(), &mut st, libc::AT_SYMLINK_NOFOLLOW) }
                as libc::c_long)?;
            if !dir.id.matches(&st) {
                return Err(io::Error::from_raw_os_error(libc::ESTALE));
            }
            // SAFETY: move_mount of a detached tree onto a path (links are not followed).
            check(unsafe {
                libc::syscall(
                    libc::SYS_move_mount,
                    *tree,
                    c"".as_ptr(),
                    libc::AT_FDCWD,
                    dir.target.as_ptr(),
                    MOVE_MOUNT_F_EMPTY_PATH,
                )
            })?;
        }
        if self.fresh_proc {
            mount_proc()?;
        }
        let (ws, id) = match &self.workdir {
            // SAFETY: openat below the attached first clone, links not followed.
            Workdir::InFirst { name, id } => (
                unsafe {
                    libc::openat(
                        trees[0],
                        name.as_ptr(),
                        libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
                    )
                },
                id,
            ),
            // SAFETY: open of a NUL-terminated absolute path in the new namespace.
            Workdir::At { path, id } => {
                (unsafe { libc::open(path.as_ptr(), libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC) }, id)
            }
        };
        let ws = check(ws as libc::c_long)? as libc::c_int;
        // SAFETY: a zeroed stat is valid output space.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: fstat and fchdir on the descriptor just opened, which is closed after.
        let moved = unsafe {
            if libc::fstat(ws, &mut st) != 0 {
                Err(io::Error::last_os_error())
            } else if !id.matches(&st) {
                Err(io::Error::from_raw_os_error(libc::ESTALE))
            } else if libc::fchdir(ws) != 0 {
                Err(io::Error::last_os_error())
            } else {
                Ok(())
            }
        };
        // SAFETY: closing the descriptor opened above.
        unsafe { libc::close(ws) };
        moved
    }
}

/// A private mount namespace whose changes never propagate back to the host's mounts.
fn private_namespace() -> io::Result<()> {
    // SAFETY: unshare in the single-threaded child.
    check(unsafe { libc::unshare(libc::CLONE_NEWNS) } as libc::c_long)?;
    // SAFETY: static NUL-terminated strings.
    check(unsafe {
        libc::mount(std::ptr::null(), c"/".as_ptr(), std::ptr::null(), libc::MS_REC | libc::MS_SLAVE, std::ptr::null())
    } as libc::c_long)
    .map(drop)
}

/// A new `/proc` for the process's own pid namespace: the processes of the host, of toolhost
/// and of other commands are not in it, so their command lines and environments are not there
/// to read.
fn mount_proc() -> io::Result<()> {
    // SAFETY: static NUL-terminated strings.
    check(unsafe {
        libc::mount(
            c"proc".as_ptr(),
            c"/proc".as_ptr(),
            c"proc".as_ptr(),
            libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
            std::ptr::null(),
        )
    } as libc::c_long)
    .map(drop)
}

/// A private `/proc` without the read-only view (a process that runs as a configured
/// unprivileged user: it owns nothing of the host's, so only `/proc` needs replacing).
#[derive(Debug, Default)]
pub struct ProcView;

impl ProcView {
    /// The `pre_exec` step: a private mount namespace with a fresh `/proc`.
    pub fn apply_in_child(&self) -> io::Result<()> {
        private_namespace()?;
        mount_proc()
    }
}
