//! The directory listings and file reads of the hot paths (`ls`, the `glob` and `grep` walks,
//! `grep`'s reads), made on `wasi:filesystem` directly when the component runs, and on `std::fs`
//! natively (tests, benches).
//!
//! Why not `std::fs` in the component: under it, wasi-libc spends host calls these paths do not
//! need. Its `readdir` asks the host for `metadata-hash-at` on every entry (a path `stat`, only
//! to fill in `d_ino`), its `open` asks for the new descriptor's type, and its `pread` copies each
//! read out of the list the host returned. Here a listing costs one host call per entry, a file
//! `open-at` + `stat` + one `read` per 64 KiB, and the bytes a read returns are used where they
//! land.
//!
//! Paths are the real paths `HostMap::real` gives. The preopen a path lies under is found the way
//! wasi-libc finds it (the longest preopened prefix), so the sandbox boundary is the host's, as
//! before: `open-at` beneath a preopen cannot leave it.

use std::io;
use std::path::Path;

/// What a directory entry is, as the listing reports it (a symlink is not followed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryKind {
    Dir,
    Symlink,
    /// A regular file.
    File,
    /// A FIFO, a device, a socket (or a type the host could not tell): never opened by a reader.
    Other,
}

/// One directory entry.
#[derive(Debug, Clone)]
pub struct RawEntry {
    pub name: String,
    pub kind: EntryKind,
}

/// What `OpenFile::meta` reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileMeta {
    pub regular: bool,
    pub dir: bool,
    pub size: u64,
}

#[cfg(target_os = "wasi")]
mod imp {
    use std::cell::OnceCell;
    use std::io;
    use std::path::Path;

    use wasip2::filesystem::preopens::get_directories;
    use wasip2::filesystem::types::{Descriptor, DescriptorFlags, DescriptorType, ErrorCode, OpenFlags, PathFlags};

    use super::{EntryKind, FileMeta, RawEntry};

    thread_local! {
        /// This instance's preopens (each call is a fresh instance: nothing outlives a call).
        static PREOPENS: OnceCell<Vec<(Descriptor, String)>> = const { OnceCell::new() };
    }

    fn error(e: ErrorCode) -> io::Error {
        let kind = match e {
            ErrorCode::NoEntry => io::ErrorKind::NotFound,
            ErrorCode::Access | ErrorCode::NotPermitted => io::ErrorKind::PermissionDenied,
            ErrorCode::IsDirectory => io::ErrorKind::IsADirectory,
            ErrorCode::NotDirectory => io::ErrorKind::NotADirectory,
            ErrorCode::Interrupted => io::ErrorKind::Interrupted,
            _ => io::ErrorKind::Other,
        };
        io::Error::from(kind)
    }

    /// Open `path` beneath the preopen with the longest matching prefix.
    fn open_at(path: &Path, open: OpenFlags) -> io::Result<Descriptor> {
        let path = path.to_str().ok_or_else(|| io::Error::from(io::ErrorKind::InvalidInput))?;
        PREOPENS.with(|cell| {
            let preopens = cell.get_or_init(get_directories);
            let mut best: Option<(&Descriptor, &str)> = None;
            for (dir, prefix) in preopens {
                let rest = if prefix == "/" {
                    path.strip_prefix('/')
                } else {
                    path.strip_prefix(prefix.as_str()).and_then(|r| {
                        if r.is_empty() {
                            Some(r)
                        } else {
                            r.strip_prefix('/')
                        }
                    })
                };
                if let Some(rest) = rest {
                    if best.is_none_or(|(_, b)| rest.len() < b.len()) {
                        best = Some((dir, rest));
                    }
                }
            }
            let (dir, rest) = best.ok_or_else(|| io::Error::from(io::ErrorKind::NotFound))?;
            let rest = if rest.is_empty() { "." } else { rest };
            dir.open_at(PathFlags::SYMLINK_FOLLOW, rest, open, DescriptorFlags::READ).map_err(error)
        })
    }

    pub fn list(path: &Path) -> io::Result<Vec<RawEntry>> {
        let dir = open_at(path, OpenFlags::DIRECTORY)?;
        let stream = dir.read_directory().map_err(error)?;
        let mut out = Vec::new();
        while let Some(e) = stream.read_directory_entry().map_err(error)? {
            let kind = match e.type_ {
                DescriptorType::Directory => EntryKind::Dir,
                DescriptorType::SymbolicLink => EntryKind::Symlink,
                DescriptorType::RegularFile => EntryKind::File,
                // The host could not tell: ask, without following a link.
                DescriptorType::Unknown => match dir.stat_at(PathFlags::empty(), &e.name) {
                    Ok(s) if s.type_ == DescriptorType::Directory => EntryKind::Dir,
                    Ok(s) if s.type_ == DescriptorType::SymbolicLink => EntryKind::Symlink,
                    Ok(s) if s.type_ == DescriptorType::RegularFile => EntryKind::File,
                    _ => EntryKind::Other,
                },
                _ => EntryKind::Other,
            };
            out.push(RawEntry { name: e.name, kind });
        }
        Ok(out)
    }

    pub struct OpenFile(Descriptor);

    pub fn open(path: &Path) -> io::Result<OpenFile> {
        open_at(path, OpenFlags::empty()).map(OpenFile)
    }

    impl OpenFile {
        pub fn meta(&self) -> io::Result<FileMeta> {
            let s = self.0.stat().map_err(error)?;
            Ok(FileMeta {
                regular: s.type_ == DescriptorType::RegularFile,
                dir: s.type_ == DescriptorType::Directory,
                size: s.size,
            })
        }

        pub fn read(&self, len: usize, offset: u64) -> io::Result<Vec<u8>> {
            loop {
                match self.0.read(len as u64, offset) {
                    Ok((bytes, _)) => return Ok(bytes),
                    Err(ErrorCode::Interrupted) => continue,
                    Err(e) => return Err(error(e)),
                }
            }
        }
    }
}

#[cfg(not(target_os = "wasi"))]
mod imp {
    use std::io;
    use std::path::Path;

    use super::{EntryKind, FileMeta, RawEntry};

    pub fn list(path: &Path) -> io::Result<Vec<RawEntry>> {
        let mut out = Vec::new();
        for de in std::fs::read_dir(path)? {
            let Ok(de) = de else { continue };
            let Ok(ft) = de.file_type() else { continue };
            let kind = if ft.is_symlink() {
                EntryKind::Symlink
            } else if ft.is_dir() {
                EntryKind::Dir
            } else if ft.is_file() {
                EntryKind::File
            } else {
                EntryKind::Other
            };
            out.push(RawEntry { name: de.file_name().to_string_lossy().into_owned(), kind });
        }
        Ok(out)
    }

    pub struct OpenFile(std::fs::File);

    pub fn open(path: &Path) -> io::Result<OpenFile> {
        std::fs::File::open(path).map(OpenFile)
    }

    impl OpenFile {
        pub fn meta(&self) -> io::Result<FileMeta> {
            let m = self.0.metadata()?;
            Ok(FileMeta { regular: m.is_file(), dir: m.is_dir(), size: m.len() })
        }

        pub fn read(&self, len: usize, offset: u64) -> io::Result<Vec<u8>> {
            // Like the host, at most 64 KiB per read, so the tests take the same paths.
            let mut buf = vec![0; len.min(64 * 1024)];
            let n = loop {
                match std::os::unix::fs::FileExt::read_at(&self.0, &mut buf, offset) {
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    other => break other?,
                }
            };
            buf.truncate(n);
            Ok(buf)
        }
    }
}

pub use imp::OpenFile;

/// The entries of the directory at `path`, in the order the filesystem lists them.
pub fn list(path: &Path) -> io::Result<Vec<RawEntry>> {
    imp::list(path)
}

/// Open `path` (following symlinks) for reading.
pub fn open(path: &Path) -> io::Result<OpenFile> {
    imp::open(path)
}

/// Read `file`, whose `meta` said `size` bytes, to its end; `out` holds its first `out.len()`
/// bytes already (often none). Returns the whole content: when one host read brings it all, the
/// buffer that read landed in (no copy), else `out` with the rest appended. Each read asks for
/// one byte more than is left, so a read that comes back short once `size` bytes are in is the
/// end, and no call is spent on a zero-length read.
pub fn read_whole(file: &OpenFile, size: u64, mut out: Vec<u8>) -> io::Result<Vec<u8>> {
    let size = usize::try_from(size).unwrap_or(usize::MAX);
    loop {
        let have = out.len();
        // Past `size` (the file grew) read on in host-sized steps.
        let want = if have < size { size - have + 1 } else { 64 * 1024 };
        let chunk = file.read(want, have as u64)?;
        let got = chunk.len();
        // A short read is the end only at `size` or beyond: the host also cuts reads at 64 KiB.
        let end = got == 0 || (got < want && have + got >= size);
        if have == 0 && end {
            // The whole file in one read: keep the host's buffer (`out` is dropped).
            return Ok(chunk);
        }
        out.extend_from_slice(&chunk);
        if end {
            return Ok(out);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_whole_files_of_every_size() {
        let dir = tempfile::tempdir().unwrap();
        for len in [0usize, 1, 4095, 65_535, 65_536, 65_537, 200_000] {
            let p = dir.path().join(format!("f{len}"));
            let bytes: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
            std::fs::write(&p, &bytes).unwrap();
            let f = open(&p).unwrap();
            let meta = f.meta().unwrap();
            assert!(meta.regular && !meta.dir && meta.size == len as u64);
            assert_eq!(read_whole(&f, meta.size, Vec::new()).unwrap(), bytes, "{len}");
            // A stale size (the file grew or shrank since `meta`) still reads to the end.
            for stale in [0u64, 10, len as u64 / 2, len as u64 + 100] {
                assert_eq!(read_whole(&f, stale, Vec::new()).unwrap(), bytes, "{len} stale {stale}");
            }
            // With the first bytes already read (grep sniffs large files first).
            let head = bytes[..len.min(8192)].to_vec();
            assert_eq!(read_whole(&f, meta.size, head).unwrap(), bytes, "{len} after a head");
        }
        let listed = list(dir.path()).unwrap();
        assert_eq!(listed.len(), 7);
        assert!(listed.iter().all(|e| e.kind == EntryKind::File));
    }
}
