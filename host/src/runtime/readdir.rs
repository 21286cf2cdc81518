//! `wasi:filesystem` directory listings with each entry's type taken from the listing itself.
//!
//! wasmtime-wasi's `read-directory` asks the kernel for every entry's full metadata (a `statx`
//! per entry, cap-std's `DirEntry::metadata`) only to report its type, which `getdents` already
//! returned. For the file tools' walks (`glob`, `grep`, `ls`) that `statx` was most of the time a
//! call spent (perf over `glob` of a 20 000-file tree: 61 % in the kernel, most of it those
//! `statx`). This replaces the three functions of the `directory-entry-stream` resource with
//! ones that read the directory once with `getdents` and take the type from `d_type`, asking
//! the kernel (`fstatat`, without following a link, as before) only when the file system does
//! not fill it in (`DT_UNKNOWN`). What a guest sees is unchanged: the same entries in the same
//! order (the directory's own order; `.` and `..` left out), the same types (a FIFO or a socket
//! is `unknown`, as wasmtime-wasi reports them), a name that is not UTF-8 is an
//! `illegal-byte-sequence` error at its place in the stream, a file is `not-directory`.

use std::os::fd::AsFd;

use wasmtime::component::{Linker, Resource, ResourceType};
use wasmtime_wasi::filesystem::Descriptor;
use wasmtime_wasi::p2::bindings::filesystem::types::{DescriptorType, DirectoryEntry, ErrorCode};
use wasmtime_wasi::WasiView;

/// The `wasi:filesystem/types` instance wasmtime-wasi's `add_to_linker_async` defines (guests
/// importing any earlier 0.2 version are linked to it).
const TYPES: &str = "wasi:filesystem/types@0.2.12";

/// A directory's entries, read when the stream was opened (as wasmtime-wasi reads them).
pub struct DirEntries(std::vec::IntoIter<Result<DirectoryEntry, ErrorCode>>);

/// Replace wasmtime-wasi's `read-directory`, `read-directory-entry` and the stream resource.
/// Call after `wasmtime_wasi::p2::add_to_linker_async`.
pub fn add_to_linker<T: WasiView + 'static>(linker: &mut Linker<T>) -> anyhow::Result<()> {
    linker.allow_shadowing(true);
    let mut inst = linker.instance(TYPES)?;
    inst.resource("directory-entry-stream", ResourceType::host::<DirEntries>(), |mut store, rep| {
        store.data_mut().ctx().table.delete(Resource::<DirEntries>::new_own(rep))?;
        Ok(())
    })?;
    inst.func_wrap("[method]descriptor.read-directory", |mut store, (fd,): (Resource<Descriptor>,)| {
        let table = store.data_mut().ctx().table;
        let entries = match table.get(&fd)? {
            Descriptor::Dir(d) => read_entries(&d.dir),
            Descriptor::File(_) => Err(ErrorCode::NotDirectory),
        };
        let stream = match entries {
            Ok(entries) => Ok(table.push(DirEntries(entries.into_iter()))?),
            Err(e) => Err(e),
        };
        Ok((stream,))
    })?;
    inst.func_wrap(
        "[method]directory-entry-stream.read-directory-entry",
        |mut store, (stream,): (Resource<DirEntries>,)| {
            let entries = store.data_mut().ctx().table.get_mut(&stream)?;
            Ok((entries.0.next().transpose(),))
        },
    )?;
    linker.allow_shadowing(false);
    Ok(())
}

fn io_error(e: impl Into<std::io::Error>) -> ErrorCode {
    ErrorCode::from(e.into())
}

/// Every entry of the directory open as `dir`, in the directory's order, without `.` and `..`.
fn read_entries(dir: &std::fs::File) -> Result<Vec<Result<DirectoryEntry, ErrorCode>>, ErrorCode> {
    use rustix::fs::{Dir, FileType};
    // `read_from` opens the directory afresh (its own position), as wasmtime-wasi's listing does.
    let mut listing = Dir::read_from(dir.as_fd()).map_err(io_error)?;
    let mut out = Vec::new();
    while let Some(entry) = listing.read() {
        let entry = match entry {
            Ok(e) => e,
            Err(e) => {
                out.push(Err(io_error(e)));
                break;
            }
        };
        let name = entry.file_name().to_bytes();
        if name == b"." || name == b".." {
            continue;
        }
        let Ok(name) = std::str::from_utf8(name) else {
            out.push(Err(ErrorCode::IllegalByteSequence));
            continue;
        };
        let kind = match entry.file_type() {
            FileType::Unknown => {
                match rustix::fs::statat(dir.as_fd(), entry.file_name(), rustix::fs::AtFlags::SYMLINK_NOFOLLOW) {
                    Ok(st) => FileType::from_raw_mode(st.st_mode),
                    Err(e) => {
                        out.push(Err(io_error(e)));
                        continue;
                    }
                }
            }
            known => known,
        };
        let type_ = match kind {
            FileType::Directory => DescriptorType::Directory,
            FileType::Symlink => DescriptorType::SymbolicLink,
            FileType::RegularFile => DescriptorType::RegularFile,
            FileType::BlockDevice => DescriptorType::BlockDevice,
            FileType::CharacterDevice => DescriptorType::CharacterDevice,
            FileType::Fifo | FileType::Socket | FileType::Unknown => DescriptorType::Unknown,
        };
        out.push(Ok(DirectoryEntry { type_, name: name.to_string() }));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The listing equals what wasmtime-wasi reported (the `std::fs` view: `symlink_metadata`
    /// per entry) on a directory with every common kind of entry.
    #[test]
    fn entries_and_types_match_a_metadata_listing() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path();
        std::fs::write(p.join("file.txt"), "x").unwrap();
        std::fs::create_dir(p.join("sub")).unwrap();
        std::os::unix::fs::symlink("file.txt", p.join("link")).unwrap();
        std::os::unix::fs::symlink("missing", p.join("dangling")).unwrap();
        std::os::unix::fs::symlink("sub", p.join("dirlink")).unwrap();
        rustix::fs::mknodat(rustix::fs::CWD, p.join("fifo"), FileType::Fifo, rustix::fs::Mode::from_raw_mode(0o600), 0)
            .unwrap();
        let _sock = std::os::unix::net::UnixListener::bind(p.join("sock")).unwrap();
        use rustix::fs::FileType;
        let got = read_entries(&std::fs::File::open(p).unwrap()).unwrap();
        let mut got: Vec<(String, String)> =
            got.into_iter().map(|e| e.unwrap()).map(|e| (e.name, format!("{:?}", e.type_))).collect();
        got.sort();
        let mut expected: Vec<(String, String)> = std::fs::read_dir(p)
            .unwrap()
            .map(|e| {
                let e = e.unwrap();
                let ft = std::fs::symlink_metadata(e.path()).unwrap().file_type();
                use std::os::unix::fs::FileTypeExt;
                let t = if ft.is_dir() {
                    DescriptorType::Directory
                } else if ft.is_symlink() {
                    DescriptorType::SymbolicLink
                } else if ft.is_file() {
                    DescriptorType::RegularFile
                } else if ft.is_block_device() {
                    DescriptorType::BlockDevice
                } else if ft.is_char_device() {
                    DescriptorType::CharacterDevice
                } else {
                    DescriptorType::Unknown
                };
                (e.file_name().into_string().unwrap(), format!("{t:?}"))
            })
            .collect();
        expected.sort();
        assert_eq!(got, expected);
        assert_eq!(got.len(), 7);
    }

    #[test]
    fn names_that_are_not_utf8_are_errors_in_place() {
        use std::os::unix::ffi::OsStrExt;
        let dir = tempfile::tempdir().unwrap();
        let bad = std::ffi::OsStr::from_bytes(b"bad\xff");
        if std::fs::write(dir.path().join(bad), "x").is_err() {
            return; // a file system that refuses such names
        }
        std::fs::write(dir.path().join("good"), "x").unwrap();
        let got = read_entries(&std::fs::File::open(dir.path()).unwrap()).unwrap();
        assert_eq!(got.len(), 2);
        assert_eq!(got.iter().filter(|e| matches!(e, Err(ErrorCode::IllegalByteSequence))).count(), 1);
        assert!(got.iter().any(|e| matches!(e, Ok(d) if d.name == "good")));
    }
}
