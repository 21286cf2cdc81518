//! Filesystem plumbing shared by the tools: sorted directory listings whose symlinks are resolved
//! in virtual space (a link leaving the sandbox is dropped, never followed), and Python-style
//! `OSError` text for the few errors DeerFlow prints verbatim.

use std::io;

use crate::paths::Layout;
use crate::wasifs::{EntryKind, RawEntry};

/// What an entry is, as `os.walk` classifies it (symlinks by their target).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Dir,
    File,
    /// A FIFO, socket or device: listed like a file, never opened (opening a FIFO blocks until a
    /// writer appears, and the thread directory is shaped by tools).
    Special,
}

impl Kind {
    fn of(ft: std::fs::FileType) -> Self {
        if ft.is_dir() {
            Kind::Dir
        } else if ft.is_file() {
            Kind::File
        } else {
            Kind::Special
        }
    }
}

/// Whether `real` exists and is neither a regular file nor a directory. Checked before any open:
/// a FIFO blocks `open` itself, so the open file's metadata would come too late.
pub fn is_special(real: &std::path::Path) -> bool {
    std::fs::metadata(real).is_ok_and(|m| Kind::of(m.file_type()) == Kind::Special)
}

/// One entry of a directory.
#[derive(Debug, Clone)]
pub struct Entry {
    pub name: String,
    /// The entry's own virtual path (the link itself for a symlink).
    pub vpath: String,
    /// A symlink's resolved target (virtual).
    pub target: Option<String>,
    pub kind: Kind,
    pub symlink: bool,
}

impl Entry {
    /// The path DeerFlow prints: the resolved target for a symlink, else `vpath`.
    pub fn shown(&self) -> &str {
        self.target.as_deref().unwrap_or(&self.vpath)
    }
}

/// List `vdir` sorted by name (code point order). Symlinks are resolved with [`Layout::resolve`];
/// those that leave the sandbox are left out entirely.
pub fn read_dir_sorted(layout: &Layout, vdir: &str) -> io::Result<Vec<Entry>> {
    let raw = crate::wasifs::list(&layout.host.real(vdir))?;
    let mut out = Vec::with_capacity(raw.len());
    for RawEntry { name, kind } in raw {
        let mut vpath = String::with_capacity(vdir.len() + 1 + name.len());
        vpath.push_str(vdir);
        if vdir != "/" {
            vpath.push('/');
        }
        vpath.push_str(&name);
        if kind == EntryKind::Symlink {
            let Ok(target) = layout.resolve(&vpath) else { continue };
            let kind = match std::fs::metadata(layout.host.real(&target)) {
                Ok(m) => Kind::of(m.file_type()),
                Err(_) => Kind::File,
            };
            out.push(Entry { name, vpath, target: Some(target), kind, symlink: true });
        } else {
            let kind = match kind {
                EntryKind::Dir => Kind::Dir,
                EntryKind::File => Kind::File,
                EntryKind::Symlink | EntryKind::Other => Kind::Special,
            };
            out.push(Entry { name, vpath, target: None, kind, symlink: false });
        }
    }
    // Names in one directory are distinct: an unstable sort gives the same order.
    out.sort_unstable_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}

/// Python's exception class and `[Errno N] strerror` for an I/O error kind (Linux numbering, so
/// the text is the same whatever the platform under the component reports).
pub fn py_os_error(e: &io::Error, path: &str) -> String {
    use io::ErrorKind as K;
    let (class, errno, msg) = match e.kind() {
        K::NotFound => ("FileNotFoundError", 2, "No such file or directory"),
        K::PermissionDenied => ("PermissionError", 13, "Permission denied"),
        K::AlreadyExists => ("FileExistsError", 17, "File exists"),
        K::NotADirectory => ("NotADirectoryError", 20, "Not a directory"),
        K::IsADirectory => ("IsADirectoryError", 21, "Is a directory"),
        K::StorageFull => ("OSError", 28, "No space left on device"),
        K::ReadOnlyFilesystem => ("OSError", 30, "Read-only file system"),
        K::InvalidFilename => ("OSError", 36, "File name too long"),
        K::DirectoryNotEmpty => ("OSError", 39, "Directory not empty"),
        _ => ("OSError", 5, "Input/output error"),
    };
    format!("{class}: [Errno {errno}] {msg}: {}", py_repr(path))
}

/// Python's `repr(str)` for ordinary paths.
pub fn py_repr(s: &str) -> String {
    let quote = if s.contains('\'') && !s.contains('"') { '"' } else { '\'' };
    let mut out = String::with_capacity(s.len() + 2);
    out.push(quote);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c if (c as u32) < 0x20 || c as u32 == 0x7f => out.push_str(&format!("\\x{:02x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push(quote);
    out
}

/// One positioned read into `buf` at `offset`; 0 at the end of the file. On WASI this is the
/// filesystem's own `read(length, offset)`, which the host runs in place; `std`'s `Read` goes
/// through an input stream whose every 4 KiB the host reads on another thread.
#[cfg(target_os = "wasi")]
pub fn read_at(file: &std::fs::File, buf: &mut [u8], offset: u64) -> io::Result<usize> {
    use std::os::fd::AsRawFd;
    let off = libc::off_t::try_from(offset).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    loop {
        // SAFETY: `buf` is a live, writable slice of `buf.len()` bytes and the descriptor belongs
        // to `file`, which outlives the call.
        let n = unsafe { libc::pread(file.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), off) };
        if n >= 0 {
            return Ok(n as usize);
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// One positioned read (native builds, for the tests).
#[cfg(not(target_os = "wasi"))]
pub fn read_at(file: &std::fs::File, buf: &mut [u8], offset: u64) -> io::Result<usize> {
    std::os::unix::fs::FileExt::read_at(file, buf, offset)
}

/// Append the whole file (from its start) to `out` with positioned reads; `size_hint` is the
/// length `metadata` reported, which sizes the first read.
pub fn read_to_end_at(file: &std::fs::File, out: &mut Vec<u8>, size_hint: u64) -> io::Result<()> {
    let start = out.len();
    let mut want = usize::try_from(size_hint).unwrap_or(usize::MAX).saturating_add(1).clamp(4096, 1 << 20);
    loop {
        let len = out.len();
        out.resize(len + want, 0);
        let n = match read_at(file, &mut out[len..], (len - start) as u64) {
            Ok(n) => n,
            Err(e) => {
                out.truncate(len);
                return Err(e);
            }
        };
        out.truncate(len + n);
        if n == 0 {
            return Ok(());
        }
        // The hint was short (the file grew): go on in larger steps.
        want = 64 * 1024;
    }
}

/// Write all of `buf` at `offset` with positioned writes. On WASI this is the filesystem's own
/// `write(buffer, offset)`, which the host runs in place; `std`'s `Write` goes through an output
/// stream whose every write the host hands to another thread and back (about 40 µs each).
#[cfg(target_os = "wasi")]
pub fn write_all_at(file: &std::fs::File, mut buf: &[u8], mut offset: u64) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    while !buf.is_empty() {
        let off = libc::off_t::try_from(offset).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
        // SAFETY: `buf` is a live slice of `buf.len()` bytes and the descriptor belongs to `file`,
        // which outlives the call.
        let n = unsafe { libc::pwrite(file.as_raw_fd(), buf.as_ptr().cast(), buf.len(), off) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        if n == 0 {
            return Err(io::ErrorKind::WriteZero.into());
        }
        let n = n as usize;
        buf = &buf[n..];
        offset += n as u64;
    }
    Ok(())
}

/// Write all of `buf` at `offset` (native builds, for the tests).
#[cfg(not(target_os = "wasi"))]
pub fn write_all_at(file: &std::fs::File, buf: &[u8], offset: u64) -> io::Result<()> {
    std::os::unix::fs::FileExt::write_all_at(file, buf, offset)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn os_error_text() {
        let e = io::Error::from(io::ErrorKind::NotADirectory);
        assert_eq!(py_os_error(&e, "/mnt/a"), "NotADirectoryError: [Errno 20] Not a directory: '/mnt/a'");
        assert_eq!(py_repr("it's"), "\"it's\"");
    }
}
