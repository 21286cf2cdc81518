//! The thread directories a bash command is given, as open directory handles: Landlock rules and
//! the command's working directory are made from these handles, never from a path that could be
//! swapped (a `workspace` renamed and replaced by a link) between the check and the use.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use toolhost_core::CallContext;

/// A directory of one thread that host bash uses. Mirrors the lead's `toolhost_core::ThreadDir`
/// (same names), so the swap to `ThreadFs` is one function.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ThreadDir {
    Workspace,
    Uploads,
    Outputs,
    Acp,
    /// `user-data/.tmp`: the command's `TMPDIR`.
    BashTmp,
    /// `user-data/.home`: the command's `HOME`.
    BashHome,
    UserData,
}

impl ThreadDir {
    /// The directory's name under `user-data` (or under the thread root for `Acp`).
    pub(crate) fn name(self) -> &'static str {
        match self {
            ThreadDir::Workspace => "workspace",
            ThreadDir::Uploads => "uploads",
            ThreadDir::Outputs => "outputs",
            ThreadDir::Acp => "acp-workspace",
            ThreadDir::BashTmp => ".tmp",
            ThreadDir::BashHome => ".home",
            ThreadDir::UserData => "user-data",
        }
    }
}

/// Open one of the thread's directories, never following a link on the way: the thread root,
/// then `user-data`, then the directory, each with `O_DIRECTORY|O_NOFOLLOW`. The bash tmp and
/// home directories are created (0700) when missing.
///
/// This is the one place the lead's `ThreadFs::dir` replaces (`ctx.fs.dir(which)`).
pub(crate) fn thread_dir(ctx: &CallContext, which: ThreadDir) -> io::Result<OwnedFd> {
    let root = open_dir_at(None, &ctx.paths.root)?;
    if which == ThreadDir::Acp {
        return open_dir_at(Some(&root), Path::new(which.name()));
    }
    let user_data = open_dir_at(Some(&root), Path::new("user-data"))?;
    match which {
        ThreadDir::UserData => Ok(user_data),
        ThreadDir::BashTmp | ThreadDir::BashHome => {
            let name = cstring(Path::new(which.name()))?;
            // SAFETY: a valid dirfd and NUL-terminated name.
            if unsafe { libc::mkdirat(user_data.as_raw_fd(), name.as_ptr(), 0o700) } != 0 {
                let err = io::Error::last_os_error();
                if err.raw_os_error() != Some(libc::EEXIST) {
                    return Err(err);
                }
            }
            open_dir_at(Some(&user_data), Path::new(which.name()))
        }
        _ => open_dir_at(Some(&user_data), Path::new(which.name())),
    }
}

/// Open a directory with `O_DIRECTORY|O_NOFOLLOW|O_CLOEXEC`, relative to `dir` when given.
pub(crate) fn open_dir_at(dir: Option<&OwnedFd>, path: &Path) -> io::Result<OwnedFd> {
    let c = cstring(path)?;
    let at = dir.map(|d| d.as_raw_fd()).unwrap_or(libc::AT_FDCWD);
    // SAFETY: a valid dirfd (or AT_FDCWD) and NUL-terminated path; the fd is owned on success.
    let fd = unsafe {
        libc::openat(at, c.as_ptr(), libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC)
    };
    if fd < 0 {
        let err = io::Error::last_os_error();
        return Err(match err.raw_os_error() {
            // O_NOFOLLOW on a link: say so rather than "too many levels of symbolic links".
            Some(libc::ELOOP) | Some(libc::ENOTDIR) => io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{} is not a directory (a link or a file was put in its place)", path.display()),
            ),
            _ => io::Error::new(err.kind(), format!("{}: {err}", path.display())),
        });
    }
    // SAFETY: fd was just returned by openat and is owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// A host directory outside the thread (skills, mounts, system dirs) as an `O_PATH` handle.
pub(crate) fn open_path(path: &Path) -> io::Result<OwnedFd> {
    let c = cstring(path)?;
    // SAFETY: NUL-terminated path; the fd is owned on success.
    let fd = unsafe { libc::open(c.as_ptr(), libc::O_PATH | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fd was just returned by open.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn cstring(path: &Path) -> io::Result<CString> {
    CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, format!("{} contains a NUL byte", path.display())))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use toolhost_core::{ThreadPaths, ThreadState};

    fn ctx(data: &Path) -> CallContext {
        let paths = ThreadPaths::new(data, "t1").unwrap();
        paths.ensure_again().unwrap();
        CallContext { thread_id: "t1".into(), tool_call_id: "c".into(), paths, state: Arc::new(ThreadState::default()) }
    }

    #[test]
    fn opens_real_directories_and_refuses_a_swapped_one() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let c = ctx(dir.path());
        for which in [ThreadDir::Workspace, ThreadDir::Uploads, ThreadDir::Outputs, ThreadDir::Acp, ThreadDir::UserData]
        {
            thread_dir(&c, which).unwrap_or_else(|e| panic!("{which:?}: {e}"));
        }
        thread_dir(&c, ThreadDir::BashTmp).unwrap();
        let mode = std::fs::metadata(c.paths.user_data().join(".tmp")).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700);
        // `workspace` moved away and replaced by a link to `/`: refused, not followed.
        std::fs::rename(c.paths.workspace(), c.paths.user_data().join("ws-old")).unwrap();
        std::os::unix::fs::symlink("/", c.paths.workspace()).unwrap();
        let err = thread_dir(&c, ThreadDir::Workspace).unwrap_err();
        assert!(err.to_string().contains("workspace is not a directory"), "{err}");
        // The positive control beside it still opens.
        thread_dir(&c, ThreadDir::Outputs).unwrap();
    }
}
