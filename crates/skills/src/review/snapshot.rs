//! Package snapshots (`H/skills/review/readers.py`): what a reader found in a package — its files
//! (text with content, binary, symlink with its target), whether it was cut short, and the
//! reader errors. Nothing is executed, installed, extracted to disk or followed.
//!
//! Three sources: pasted SKILL.md text, a directory tree walked through
//! [`toolhost_core::DirHandle`] (no symlink is ever entered), and a `.skill` ZIP archive read in
//! place from an open file with every member's decompression bounded.

use std::io::{Read, Seek};

use serde_json::{json, Value};
use toolhost_core::{DirHandle, FsError};
use toolhost_py::builtins::str_repr as py_repr;

use super::models::{normalize_relative_path, sha256_hex, PackageLimits};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    Text,
    Binary,
    Symlink,
}

impl FileKind {
    pub fn as_str(self) -> &'static str {
        match self {
            FileKind::Text => "text",
            FileKind::Binary => "binary",
            FileKind::Symlink => "symlink",
        }
    }
}

#[derive(Debug, Clone)]
pub struct FileEntry {
    pub path: String,
    pub kind: FileKind,
    pub size: u64,
    pub sha256: String,
    /// Text files only.
    pub content: Option<String>,
    /// Symlinks only.
    pub target: Option<String>,
}

#[derive(Debug, Clone)]
pub struct ReaderError {
    pub code: &'static str,
    pub path: Option<String>,
    pub message: String,
}

impl ReaderError {
    fn new(code: &'static str, path: Option<&str>, message: impl Into<String>) -> Self {
        Self { code, path: path.map(str::to_string), message: message.into() }
    }

    pub fn to_json(&self) -> Value {
        json!({"code": self.code, "path": self.path, "message": self.message})
    }
}

/// `PackageSnapshot` (`subject`, `files`, `truncated`, `reader_errors`).
#[derive(Debug, Clone)]
pub struct Snapshot {
    pub source: &'static str,
    pub category: Option<String>,
    pub display_ref: String,
    pub limits: PackageLimits,
    pub files: Vec<FileEntry>,
    pub truncated: bool,
    pub reader_errors: Vec<ReaderError>,
}

impl Snapshot {
    pub fn new(source: &'static str, display_ref: impl Into<String>, category: Option<String>) -> Self {
        Self {
            source,
            category,
            display_ref: display_ref.into(),
            limits: PackageLimits::default(),
            files: Vec::new(),
            truncated: false,
            reader_errors: Vec::new(),
        }
    }

    fn sort(&mut self) {
        self.files.sort_by(|a, b| a.path.cmp(&b.path));
        self.reader_errors
            .sort_by(|a, b| (a.path.as_deref().unwrap_or(""), a.code).cmp(&(b.path.as_deref().unwrap_or(""), b.code)));
    }

    fn error(&mut self, code: &'static str, path: Option<&str>, message: impl Into<String>) {
        self.reader_errors.push(ReaderError::new(code, path, message));
    }

    fn push_data(&mut self, path: String, data: &[u8]) {
        let sha256 = sha256_hex(data);
        match decode_text(data, &path) {
            Some(text) => self.files.push(FileEntry {
                path,
                kind: FileKind::Text,
                size: data.len() as u64,
                sha256,
                content: Some(text),
                target: None,
            }),
            None => self.files.push(FileEntry {
                path,
                kind: FileKind::Binary,
                size: data.len() as u64,
                sha256,
                content: None,
                target: None,
            }),
        }
    }

    fn push_too_large(&mut self, path: String, size: u64) {
        self.files.push(FileEntry {
            path,
            kind: FileKind::Binary,
            size,
            sha256: String::new(),
            content: None,
            target: None,
        });
    }

    fn push_symlink(&mut self, path: String, target: String) {
        self.files.push(FileEntry {
            path,
            kind: FileKind::Symlink,
            size: 0,
            sha256: sha256_hex(target.as_bytes()),
            content: None,
            target: Some(target),
        });
    }
}

const TEXT_EXTENSIONS: [&str; 14] =
    [".css", ".csv", ".html", ".js", ".json", ".md", ".py", ".sh", ".svg", ".toml", ".ts", ".txt", ".yaml", ".yml"];

/// `PurePosixPath(path).suffix`.
pub fn posix_suffix(path: &str) -> &str {
    let name = path.rsplit('/').next().unwrap_or("");
    match name.rfind('.') {
        Some(i) if i > 0 && i < name.len() - 1 => &name[i..],
        _ => "",
    }
}

/// `_decode_text`: UTF-8 text, unless a file without a text extension holds a NUL byte.
fn decode_text(data: &[u8], path: &str) -> Option<String> {
    let suffix = posix_suffix(path).to_lowercase();
    if !TEXT_EXTENSIONS.contains(&suffix.as_str()) && data.contains(&0) {
        return None;
    }
    std::str::from_utf8(data).ok().map(str::to_string)
}

/// `build_inline_snapshot`.
pub fn inline_snapshot(content: &str, name_hint: Option<&str>, limits: PackageLimits) -> Snapshot {
    let display = name_hint.filter(|n| !n.is_empty()).unwrap_or("inline://SKILL.md");
    let mut snap = Snapshot::new("inline", display, None);
    snap.limits = limits;
    let mut content = content;
    if content.len() as u64 > limits.max_file_bytes {
        snap.truncated = true;
        snap.error("file_too_large", Some("SKILL.md"), "Inline SKILL.md exceeds the per-file review limit");
        content = &content[..toolhost_core::floor_char_boundary(content, limits.max_file_bytes as usize)];
    }
    snap.files.push(FileEntry {
        path: "SKILL.md".into(),
        kind: FileKind::Text,
        size: content.len() as u64,
        sha256: sha256_hex(content.as_bytes()),
        content: Some(content.to_string()),
        target: None,
    });
    snap
}

/// `LocalDirectoryReader.read` over an open directory: walked top-down in sorted order like
/// `os.walk(followlinks=False)`, a symlink recorded with its target and never entered, a file
/// read only when it is regular and within the limits.
pub fn directory_snapshot(root: Option<Result<DirHandle, FsError>>, mut snap: Snapshot) -> Snapshot {
    let root = match root {
        None | Some(Err(FsError::NotFound(_))) => {
            snap.error("root_not_found", None, "Package root does not exist");
            return snap;
        }
        Some(Err(_)) => {
            snap.error("root_not_directory", None, "Package root is not a directory");
            return snap;
        }
        Some(Ok(dir)) => dir,
    };
    let mut walk = Walk { snap, total_bytes: 0, file_count: 0 };
    walk.dir(&root, "", 0);
    let mut snap = walk.snap;
    snap.sort();
    snap
}

/// Directory depth the walk descends to (a deeper tree is reported, not followed).
const MAX_DEPTH: usize = 64;

struct Walk {
    snap: Snapshot,
    total_bytes: u64,
    file_count: usize,
}

enum Flow {
    Continue,
    Stop,
}

impl Walk {
    fn rel(prefix: &str, name: &str) -> String {
        if prefix.is_empty() {
            name.to_string()
        } else {
            format!("{prefix}/{name}")
        }
    }

    fn dir(&mut self, dir: &DirHandle, prefix: &str, depth: usize) -> Flow {
        let entries = match dir.entries() {
            Ok(e) => e,
            Err(e) => {
                self.snap.error("read_failed", Some(prefix).filter(|p| !p.is_empty()), e.to_string());
                return Flow::Continue;
            }
        };
        use toolhost_core::threadfs::EntryKind;
        let (dirs, files): (Vec<_>, Vec<_>) = entries.into_iter().partition(|e| e.kind == EntryKind::Dir);
        for e in &files {
            if let Flow::Stop = self.entry(dir, prefix, e) {
                return Flow::Stop;
            }
        }
        for d in &dirs {
            let rel = Self::rel(prefix, &d.name);
            if depth + 1 >= MAX_DEPTH {
                self.snap.truncated = true;
                self.snap.error("too_deep", Some(&rel), "Package directory nesting exceeds the review limit");
                continue;
            }
            match dir.subdir(&d.name) {
                Ok(sub) => {
                    if let Flow::Stop = self.dir(&sub, &rel, depth + 1) {
                        return Flow::Stop;
                    }
                }
                Err(e) => self.snap.error("read_failed", Some(&rel), e.to_string()),
            }
        }
        Flow::Continue
    }

    fn too_many(&mut self) -> Flow {
        self.snap.truncated = true;
        self.snap.error("too_many_files", None, "Package file count exceeds the review limit");
        Flow::Stop
    }

    fn entry(&mut self, dir: &DirHandle, prefix: &str, e: &toolhost_core::threadfs::DirEntry) -> Flow {
        use toolhost_core::threadfs::EntryKind;
        let rel = Self::rel(prefix, &e.name);
        let rel = match normalize_relative_path(&rel) {
            Ok(r) => r,
            Err(_) => {
                self.snap.error("path_escaped", None, "Package entry escapes the root");
                return Flow::Continue;
            }
        };
        self.file_count += 1;
        if self.file_count > self.snap.limits.max_files {
            return self.too_many();
        }
        if e.kind == EntryKind::Symlink {
            let target = dir.read_link(&e.name).unwrap_or_default();
            self.snap.push_symlink(rel, target);
            return Flow::Continue;
        }
        let size = e.len;
        self.total_bytes = self.total_bytes.saturating_add(size);
        if self.total_bytes > self.snap.limits.max_total_bytes {
            self.snap.truncated = true;
            self.snap.error("total_size_exceeded", Some(&rel), "Package total size exceeds the review limit");
            return Flow::Stop;
        }
        if size > self.snap.limits.max_file_bytes {
            self.snap.truncated = true;
            self.snap.error("file_too_large", Some(&rel), "File exceeds the per-file review limit");
            self.snap.push_too_large(rel, size);
            return Flow::Continue;
        }
        let data = dir.open_file(&e.name).and_then(|f| f.read_capped(self.snap.limits.max_file_bytes));
        match data {
            Ok(data) => self.snap.push_data(rel, &data),
            Err(err) => self.snap.error("read_failed", Some(&rel), err.to_string()),
        }
        Flow::Continue
    }
}

/// `ArchivePackageReader.read` over an open `.skill` file. Members are never written anywhere:
/// each is decompressed into memory up to `min(max_file_bytes, what is left of max_total_bytes)`
/// plus one byte, so a member that inflates past its budget (whatever its header declares) is
/// reported as too large after reading at most that much.
pub fn archive_snapshot<R: Read + Seek>(reader: Result<R, String>, mut snap: Snapshot) -> Snapshot {
    let result = reader.and_then(|r| zip::ZipArchive::new(r).map_err(|e| zip_open_error(&e)));
    let mut zf = match result {
        Ok(zf) => zf,
        Err(message) => {
            snap.error("archive_read_failed", None, message);
            snap.sort();
            return snap;
        }
    };
    let limits = snap.limits;
    let mut members: Vec<(String, usize)> = Vec::with_capacity(zf.len().min(limits.max_files + 1));
    for i in 0..zf.len() {
        match zf.by_index_raw(i) {
            Ok(f) => members.push((f.name().to_string(), i)),
            Err(e) => {
                snap.error("archive_read_failed", None, zip_open_error(&e));
                snap.sort();
                return snap;
            }
        }
    }
    members.sort_by(|a, b| a.0.cmp(&b.0));
    if members.len() > limits.max_files {
        snap.truncated = true;
        snap.error("too_many_files", None, "Archive member count exceeds the review limit");
        members.truncate(limits.max_files);
    }
    let mut total_bytes: u64 = 0;
    for (name, index) in members {
        if name.ends_with('/') {
            continue;
        }
        let rel = match normalize_relative_path(&name) {
            Ok(r) => r,
            Err(msg) => {
                snap.error("invalid_archive_path", Some(&name), msg);
                continue;
            }
        };
        let (declared, symlink) = match zf.by_index_raw(index) {
            Ok(f) => (f.size(), f.unix_mode().is_some_and(|m| m & 0o170000 == 0o120000)),
            Err(e) => {
                snap.error("archive_member_read_failed", Some(&rel), zip_member_error(&e, &name));
                continue;
            }
        };
        if declared > limits.max_file_bytes {
            snap.truncated = true;
            snap.push_too_large(rel.clone(), declared);
            snap.error("file_too_large", Some(&rel), "Archive member exceeds the per-file review limit");
            continue;
        }
        let remaining = limits.max_total_bytes.saturating_sub(total_bytes);
        if remaining == 0 {
            snap.truncated = true;
            snap.error("total_size_exceeded", Some(&rel), "Archive total size exceeds the review limit");
            break;
        }
        let budget = limits.max_file_bytes.min(remaining);
        let (data, actual, exceeded) = match read_member_bounded(&mut zf, index, budget, &name) {
            Ok(v) => v,
            Err(message) => {
                snap.error("archive_member_read_failed", Some(&rel), message);
                continue;
            }
        };
        if exceeded {
            snap.truncated = true;
            if actual > limits.max_file_bytes {
                snap.push_too_large(rel.clone(), actual);
                snap.error("file_too_large", Some(&rel), "Archive member exceeds the per-file review limit");
                continue;
            }
            snap.error("total_size_exceeded", Some(&rel), "Archive total size exceeds the review limit");
            break;
        }
        total_bytes += actual;
        if symlink {
            let target = String::from_utf8_lossy(&data).into_owned();
            snap.files.push(FileEntry {
                path: rel,
                kind: FileKind::Symlink,
                size: 0,
                sha256: sha256_hex(&data),
                content: None,
                target: Some(target),
            });
            continue;
        }
        snap.push_data(rel, &data);
    }
    snap.sort();
    snap
}

/// `_read_zip_member_bounded`: at most `max_bytes + 1` bytes are ever decompressed.
fn read_member_bounded<R: Read + Seek>(
    zf: &mut zip::ZipArchive<R>,
    index: usize,
    max_bytes: u64,
    name: &str,
) -> Result<(Vec<u8>, u64, bool), String> {
    let member = zf.by_index(index).map_err(|e| zip_member_error(&e, name))?;
    let mut data = Vec::new();
    let mut limited = member.take(max_bytes + 1);
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match limited.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(zip_read_error(&e, name)),
        };
        data.extend_from_slice(&buf[..n]);
    }
    let actual = data.len() as u64;
    if actual > max_bytes {
        return Ok((Vec::new(), actual, true));
    }
    Ok((data, actual, false))
}

/// zipfile's `BadZipFile` text for an archive it cannot open.
fn zip_open_error(e: &zip::result::ZipError) -> String {
    match e {
        zip::result::ZipError::Io(io) => io.to_string(),
        _ => "File is not a zip file".to_string(),
    }
}

fn zip_member_error(e: &zip::result::ZipError, name: &str) -> String {
    match e {
        zip::result::ZipError::UnsupportedArchive(m) if m.contains("ncrypt") || m.contains("assword") => {
            format!("File {} is encrypted, password required for extraction", py_repr(name))
        }
        zip::result::ZipError::UnsupportedArchive(_) => "That compression method is not supported".to_string(),
        zip::result::ZipError::Io(io) => zip_read_error(io, name),
        _ => format!("Bad magic number for file header of {}", py_repr(name)),
    }
}

fn zip_read_error(e: &std::io::Error, name: &str) -> String {
    let text = e.to_string();
    if text.to_lowercase().contains("checksum") || text.contains("CRC") {
        format!("Bad CRC-32 for file {}", py_repr(name))
    } else {
        format!("Error -3 while decompressing data: {text}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suffix_is_pathlibs() {
        assert_eq!(posix_suffix("a/b.tar.gz"), ".gz");
        assert_eq!(posix_suffix(".skill"), "");
        assert_eq!(posix_suffix("x.skill"), ".skill");
        assert_eq!(posix_suffix("x."), "");
    }

    #[test]
    fn repr_quotes_like_python() {
        assert_eq!(py_repr("a'b"), "\"a'b\"");
        assert_eq!(py_repr("ab"), "'ab'");
    }
}
