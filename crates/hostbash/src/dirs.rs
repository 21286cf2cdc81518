//! The thread directories a bash command is given, as open directory handles: Landlock rules and
//! the command's working directory are made from these handles, never from a path that could be
//! swapped (a `workspace` renamed and replaced by a link) between the check and the use.

use std::ffi::CString;
use std::io;
use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use toolhost_core::CallContext;

pub(crate) use toolhost_core::ThreadDir;

/// One of the thread's directories as an owned handle, from the thread filesystem layer: opened
/// beneath the thread root with `O_NOFOLLOW` (a directory replaced by a link is refused), the
/// bash tmp and home created 0700 when missing. The handle is the layer's own, duplicated, so a
/// rename after it was opened cannot redirect it.
pub(crate) fn thread_dir(ctx: &CallContext, which: ThreadDir) -> io::Result<OwnedFd> {
    ctx.fs.dir(which).map_err(io::Error::other)?.try_clone()
}

/// A host directory the host owns (the threads directory) opened for reading its metadata and
/// changing its mode.
pub(crate) fn open_path_dir(path: &Path) -> io::Result<OwnedFd> {
    rustix::fs::open(
        path,
        rustix::fs::OFlags::RDONLY | rustix::fs::OFlags::DIRECTORY | rustix::fs::OFlags::CLOEXEC,
        rustix::fs::Mode::empty(),
    )
    .map_err(Into::into)
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
    use std::os::unix::fs::MetadataExt;
    use std::sync::Arc;
    use toolhost_core::{ThreadFs, ThreadState};

    fn ctx(data: &Path) -> CallContext {
        let fs = ThreadFs::open(data, "t1").unwrap();
        fs.ensure_tool_dirs().unwrap();
        CallContext::new(Arc::new(fs), "c", Arc::new(ThreadState::default()))
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
        let mode = std::fs::metadata(c.paths().user_data().join(".tmp")).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700);
        // `workspace` moved away and replaced by a link to `/`.
        std::fs::rename(c.paths().workspace(), c.paths().user_data().join("ws-old")).unwrap();
        std::os::unix::fs::symlink("/", c.paths().workspace()).unwrap();
        // A handle opened before the swap still names the real directory, never the link's target.
        let held = thread_dir(&c, ThreadDir::Workspace).unwrap();
        let held_ino = std::fs::File::from(held).metadata().unwrap().ino();
        assert_eq!(held_ino as u64, std::fs::metadata(c.paths().user_data().join("ws-old")).unwrap().ino());
        // A fresh look at the thread refuses the link.
        let fresh = ThreadFs::open(dir.path(), "t1").unwrap();
        let fresh = CallContext::new(Arc::new(fresh), "c", Arc::new(ThreadState::default()));
        let err = thread_dir(&fresh, ThreadDir::Workspace).unwrap_err();
        assert!(err.to_string().contains("/mnt/user-data/workspace was replaced"), "{err}");
        // The positive control beside it still opens.
        thread_dir(&fresh, ThreadDir::Outputs).unwrap();
    }
}
