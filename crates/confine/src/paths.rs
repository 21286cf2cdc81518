//! Host paths opened as handles for rules: `O_PATH`, so a directory the process may not read can
//! still be named in a rule.

use std::ffi::CString;
use std::io;
use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// A host path (a directory or a file) as an `O_PATH` handle.
pub fn open_path(path: &Path) -> io::Result<OwnedFd> {
    let c = CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, format!("{} contains a NUL byte", path.display())))?;
    // SAFETY: NUL-terminated path; the fd is owned on success.
    let fd = unsafe { libc::open(c.as_ptr(), libc::O_PATH | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fd was just returned by open.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// A host directory opened for reading its metadata and changing its mode.
pub fn open_dir(path: &Path) -> io::Result<OwnedFd> {
    rustix::fs::open(
        path,
        rustix::fs::OFlags::RDONLY | rustix::fs::OFlags::DIRECTORY | rustix::fs::OFlags::CLOEXEC,
        rustix::fs::Mode::empty(),
    )
    .map_err(Into::into)
}
