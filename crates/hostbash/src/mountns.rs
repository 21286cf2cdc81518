//! A read-only view of the host for a command that runs as uid 0: a private mount namespace in
//! which every mount is read-only except clones of the thread's writable directories. Without
//! capabilities, uid 0 still owns root's files, and Landlock does not govern `chmod`, `chown` or
//! extended attributes; on a read-only mount they fail (`EROFS`) outside the thread while they
//! keep working inside it (a virtualenv sets modes as it copies). The writable clones are made
//! from the directory handles the parent opened; the child runs only `open_tree`, `unshare`,
//! `mount`, `mount_setattr`, `fstatat`, `move_mount` and `fchdir`.

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

/// At most this many writable directories (the thread's five plus writable mounts).
pub const MAX_WRITABLE: usize = 32;

/// One writable directory: its handle, where it is seen from the command's namespace (a name
/// under `user-data`, or a mount's absolute path), and the identity that place must have.
pub struct Writable {
    pub source: OwnedFd,
    pub target: CString,
    dev: u64,
    ino: u64,
}

impl Writable {
    pub fn new(source: OwnedFd, target: &Path) -> io::Result<Self> {
        let target = CString::new(target.as_os_str().as_bytes())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a path with a NUL byte"))?;
        let meta = std::fs::File::from(source.try_clone()?).metadata()?;
        Ok(Self { source, target, dev: meta.dev(), ino: meta.ino() })
    }
}

/// The writable directories of one command, workspace first, and the thread's `user-data`
/// (the directory their names are relative to).
pub struct ReadOnlyView {
    anchor: OwnedFd,
    writable: Vec<Writable>,
}

impl ReadOnlyView {
    pub fn new(anchor: OwnedFd, writable: Vec<Writable>) -> io::Result<Self> {
        if writable.is_empty() || writable.len() > MAX_WRITABLE {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("between 1 and {MAX_WRITABLE} writable directories, not {}", writable.len()),
            ));
        }
        Ok(Self { anchor, writable })
    }

    /// The `pre_exec` step. Writable clones are taken from the handles before the namespace
    /// exists (a handle keeps pointing into the host's namespace); then a private namespace,
    /// every mount read-only, and each clone attached where the command sees its directory —
    /// after checking that place is the same directory — and the working directory moved onto
    /// the workspace's clone.
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
        // The working directory crosses into the new namespace: names resolve from there.
        // SAFETY: fchdir on an open directory.
        check(unsafe { libc::fchdir(self.anchor.as_raw_fd()) } as libc::c_long)?;
        // SAFETY: unshare in the single-threaded child.
        check(unsafe { libc::unshare(libc::CLONE_NEWNS) } as libc::c_long)?;
        // Nothing done here may propagate back to the host's mounts.
        // SAFETY: static NUL-terminated strings.
        check(unsafe {
            libc::mount(
                std::ptr::null(),
                c"/".as_ptr(),
                std::ptr::null(),
                libc::MS_REC | libc::MS_SLAVE,
                std::ptr::null(),
            )
        } as libc::c_long)?;
        let ro = MountAttr { attr_set: MOUNT_ATTR_RDONLY, attr_clr: 0, propagation: 0, userns_fd: 0 };
        mount_setattr(libc::AT_FDCWD, c"/", AT_RECURSIVE, &ro)?;
        for (tree, dir) in trees.iter().zip(&self.writable) {
            // SAFETY: a zeroed stat is valid output space.
            let mut st: libc::stat = unsafe { std::mem::zeroed() };
            // SAFETY: a NUL-terminated path and a valid stat buffer.
            check(unsafe { libc::fstatat(libc::AT_FDCWD, dir.target.as_ptr(), &mut st, libc::AT_SYMLINK_NOFOLLOW) }
                as libc::c_long)?;
            if st.st_dev != dir.dev || st.st_ino != dir.ino {
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
        // SAFETY: fchdir on the workspace's attached clone.
        check(unsafe { libc::fchdir(trees[0]) } as libc::c_long).map(drop)
    }
}
