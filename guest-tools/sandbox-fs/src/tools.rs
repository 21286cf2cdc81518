//! The six tools over `std::fs`: `ls`, `read_file`, `write_file`, `str_replace`, `glob`, `grep`,
//! each returning DeerFlow's exact text. Path policy and symlink handling live in `paths`; the
//! grep hot path lives in `search`.

use std::fs;
use std::io::{self, Write};

use crate::fsutil::{py_os_error, read_dir_sorted, Kind};
use crate::glob::{should_ignore_name, GlobMatcher};
use crate::paths::Layout;
use crate::ranged::{ranged_read, read_for_range};
use crate::search::{self, GrepMatch};
use crate::settings::{SandboxSettings, SandboxSettingsExt};
use crate::text::{
    format_write_file_error, python_decode_error, truncate_head, truncate_middle_write_error, universal_newlines,
    LS_HINT, READ_FILE_HINT,
};

const THREAD_DATA_MISSING: &str = "Thread data not available for local sandbox";
const GLOB_DEFAULT: i64 = 200;
const GLOB_MAX: i64 = 1000;
const GREP_DEFAULT: i64 = 100;
const GREP_MAX: i64 = 500;

/// A tool's answer: the text the model reads, flagged as an error when it starts with `Error:`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    pub content: String,
    pub is_error: bool,
}

impl Outcome {
    fn of(content: String) -> Self {
        let is_error = content.starts_with("Error:");
        Self { content, is_error }
    }
}

/// The sandbox one call runs in.
#[derive(Debug, Clone)]
pub struct Sandbox {
    pub settings: SandboxSettings,
    pub layout: Layout,
    /// False when the host has no thread for the call (DeerFlow's missing `thread_data`).
    pub thread_data: bool,
}

/// `min(clamp(requested), clamp(config))` with DeerFlow's clamp: default when `<= 0`.
pub fn effective_max(requested: i64, config: Option<i64>, default: i64, upper: i64) -> usize {
    let clamp = |v: i64| if v <= 0 { default } else { v.min(upper) };
    let r = clamp(requested).min(clamp(config.unwrap_or(default)));
    usize::try_from(r).unwrap_or(0)
}

impl Sandbox {
    pub fn new(settings: SandboxSettings, host: crate::paths::HostMap, thread_data: bool) -> Self {
        let layout = Layout::new(&settings, host);
        Self { settings, layout, thread_data }
    }

    fn real(&self, vpath: &str) -> std::path::PathBuf {
        self.layout.host.real(vpath)
    }

    // ---- ls -------------------------------------------------------------------------------

    pub fn ls(&self, path: &str) -> Outcome {
        Outcome::of(self.ls_text(path))
    }

    fn ls_text(&self, path: &str) -> String {
        if let Some(name) = self.layout.disabled_skill(path) {
            return Layout::disabled_message(&name);
        }
        if !self.thread_data {
            return format!("Error: {THREAD_DATA_MISSING}");
        }
        let denied = || format!("Error: Permission denied: {path}");
        if self.layout.validate(path, true).is_err() {
            return denied();
        }
        let Ok(root) = self.layout.resolve(path) else { return denied() };
        let mut entries = Vec::new();
        if root == self.layout.skills_root() {
            // DeerFlow mounts skills per category, so its `ls` of the skills root shows only the
            // category directories (its mount overlay) — every one of them, since its skill
            // projection creates them all, whether or not this skills directory has one. Other
            // directories here are served too, so they are listed as well.
            entries.extend(self.layout.skill_category_roots().map(|r| format!("{r}/")));
            if let Ok(list) = read_dir_sorted(&self.layout, &root) {
                for e in list {
                    if e.kind == Kind::Dir && !e.symlink && !should_ignore_name(&e.name) {
                        entries.push(format!("{}/", e.vpath));
                    }
                }
            }
        } else {
            match fs::metadata(self.real(&root)) {
                // A category root DeerFlow would have created empty (see above).
                Err(e)
                    if e.kind() == io::ErrorKind::NotFound && self.layout.skill_category_roots().any(|r| r == root) =>
                {
                    return "(empty)".to_string()
                }
                Err(e) if e.kind() == io::ErrorKind::NotFound => return format!("Error: Directory not found: {path}"),
                Err(e) if e.kind() == io::ErrorKind::PermissionDenied => return denied(),
                Err(e) => return format!("Error: Unexpected error listing directory: {}", py_os_error(&e, path)),
                // Deviation 4: DeerFlow printed "(empty)" for a file.
                Ok(m) if !m.is_dir() => return format!("Error: Path is not a directory: {path}"),
                Ok(_) => {}
            }
            self.ls_walk(&root, &root, 1, &mut entries);
        }
        entries.sort();
        // Deviation 3: DeerFlow lists a symlink by its target, so an entry could appear twice.
        entries.dedup();
        entries.retain(|e| self.layout.disabled_skill(e).is_none());
        if entries.is_empty() {
            return "(empty)".to_string();
        }
        truncate_head(&entries.join("\n"), self.settings.ls_max_chars(), LS_HINT)
    }

    fn ls_walk(&self, root: &str, dir: &str, depth: usize, out: &mut Vec<String>) {
        let Ok(list) = read_dir_sorted(&self.layout, dir) else { return };
        for e in list {
            if should_ignore_name(&e.name) {
                continue;
            }
            let slash = if e.kind == Kind::Dir { "/" } else { "" };
            if e.symlink {
                if Layout::within(e.shown(), root) {
                    out.push(format!("{}{slash}", e.shown()));
                }
                continue;
            }
            out.push(format!("{}{slash}", e.vpath));
            if e.kind == Kind::Dir && depth < 2 {
                self.ls_walk(root, &e.vpath, depth + 1, out);
            }
        }
    }

    // ---- read_file ------------------------------------------------------------------------

    pub fn read_file(&self, path: &str, start_line: Option<i64>, end_line: Option<i64>) -> Outcome {
        Outcome::of(self.read_file_text(path, start_line, end_line))
    }

    fn read_file_text(&self, path: &str, start_line: Option<i64>, end_line: Option<i64>) -> String {
        if let Some(name) = self.layout.disabled_skill(path) {
            return Layout::disabled_message(&name);
        }
        if start_line.is_some_and(|s| s < 1) {
            return "(start_line must be >= 1)".to_string();
        }
        let effective_start = start_line.unwrap_or(1);
        if end_line.is_some_and(|e| e < 1) {
            return "(end_line must be >= 1)".to_string();
        }
        if end_line.is_some_and(|e| effective_start > e) {
            return "(start_line > end_line — no lines in range)".to_string();
        }
        if !self.thread_data {
            return format!("Error: {THREAD_DATA_MISSING}");
        }
        let denied = || format!("Error: Permission denied reading file: {path}");
        if self.layout.validate(path, true).is_err() {
            return denied();
        }
        let Ok(target) = self.layout.resolve(path) else { return denied() };
        if target == self.layout.skills_root() {
            // The skills root is no single mount in DeerFlow: nothing to open there.
            return format!("Error: File not found: {path}");
        }
        let real = self.real(&target);
        if crate::fsutil::is_special(&real) {
            return format!("Error: Path is not a regular file: {path}");
        }
        // One open, then the open file's metadata: fewer host calls than stat + read by path.
        let bytes = crate::wasifs::open(&real).and_then(|file| {
            let meta = file.meta()?;
            if meta.dir {
                return Err(io::Error::from(io::ErrorKind::IsADirectory));
            }
            match end_line {
                // A range with an end needs only a prefix of the file (`read_for_range`).
                Some(e) => read_for_range(&file, usize::try_from(e).unwrap_or(usize::MAX)),
                None => crate::wasifs::read_whole(&file, meta.size, Vec::new()),
            }
        });
        let bytes = match bytes {
            Ok(b) => b,
            Err(e) => match e.kind() {
                io::ErrorKind::NotFound => return format!("Error: File not found: {path}"),
                io::ErrorKind::PermissionDenied => return denied(),
                io::ErrorKind::IsADirectory => return format!("Error: Path is a directory, not a file: {path}"),
                _ => return format!("Error: Unexpected error reading file: {}", py_os_error(&e, path)),
            },
        };
        let ranged = start_line.is_some() || end_line.is_some();
        let binary = || {
            format!(
                "Error: cannot read '{path}' as text — it appears to be a binary file (e.g. .xlsx, .pdf, or an image). \
                 read_file only supports UTF-8 text. Use bash with a suitable library instead (pandas/openpyxl for \
                 spreadsheets), or view_image for images."
            )
        };
        let content = if !ranged {
            if memchr::memchr(b'\r', &bytes).is_some() {
                match std::str::from_utf8(&universal_newlines(&bytes)) {
                    Ok(s) => s.to_string(),
                    Err(_) => return binary(),
                }
            } else {
                // The common case: the bytes read become the text without a copy.
                match String::from_utf8(bytes) {
                    Ok(s) => s,
                    Err(_) => return binary(),
                }
            }
        } else {
            let start = usize::try_from(effective_start).unwrap_or(usize::MAX);
            let end = end_line.map(|e| usize::try_from(e).unwrap_or(usize::MAX));
            match ranged_read(&bytes, start, end) {
                Some(s) => s,
                None => return binary(),
            }
        };
        if content.is_empty() {
            if start_line.is_some_and(|s| s > 1) {
                return "(start_line exceeds file length)".to_string();
            }
            return "(empty)".to_string();
        }
        truncate_head(&content, self.settings.read_file_max_chars(), READ_FILE_HINT)
    }

    // ---- write_file -----------------------------------------------------------------------

    pub fn write_file(&self, path: &str, content: &str, append: bool) -> Outcome {
        Outcome::of(self.write_file_text(path, content, append))
    }

    fn write_file_text(&self, path: &str, content: &str, append: bool) -> String {
        if !append {
            let cap = self.settings.write_cap();
            let n = content.len() as i128;
            if cap > 0 && n > cap {
                return format!(
                    "Error: write_file content ({n} bytes) exceeds the {cap}-byte single-call limit. Split the content \
                     into smaller pieces: either (a) write the first section now, then use `str_replace` for further \
                     edits, or (b) call write_file again with append=True carrying the next section. See SIZE POLICY \
                     in the tool docstring or issue #3189 for the rationale."
                );
            }
        }
        if !self.thread_data {
            return format_write_file_error(path, &format!("SandboxRuntimeError: {THREAD_DATA_MISSING}"));
        }
        let denied = || truncate_middle_write_error(&format!("Error: Permission denied writing to file: {path}"), 2000);
        if self.layout.validate(path, false).is_err() {
            return denied();
        }
        let Ok(target) = self.layout.resolve(path) else { return denied() };
        let real = self.real(&target);
        if target == self.layout.skills_root() {
            return truncate_middle_write_error(&format!("Error: Path is a directory, not a file: {path}"), 2000);
        }
        if crate::fsutil::is_special(&real) {
            return truncate_middle_write_error(&format!("Error: Path is not a regular file: {path}"), 2000);
        }
        let result = (|| -> io::Result<()> {
            // The common case first: the parent exists and the open succeeds. When it fails,
            // take DeerFlow's order (make the parents, then open), so the error is the one
            // Python raises (a parent that is a file fails in makedirs, a directory in open).
            let open = || fs::OpenOptions::new().write(true).create(true).append(append).open(&real);
            let f = match open() {
                Ok(f) => f,
                Err(_) => {
                    if let Some(parent) = real.parent() {
                        fs::create_dir_all(parent)?;
                    }
                    open()?
                }
            };
            if append {
                return (&f).write_all(content.as_bytes());
            }
            overwrite(f, content.as_bytes())
        })();
        match result {
            Ok(()) => "OK".to_string(),
            Err(e) if e.kind() == io::ErrorKind::PermissionDenied => denied(),
            Err(e) if e.kind() == io::ErrorKind::IsADirectory => {
                truncate_middle_write_error(&format!("Error: Path is a directory, not a file: {path}"), 2000)
            }
            Err(e) => format_write_file_error(path, &py_os_error(&e, path)),
        }
    }

    // ---- str_replace ----------------------------------------------------------------------

    pub fn str_replace(&self, path: &str, old_str: &str, new_str: &str, replace_all: bool) -> Outcome {
        Outcome::of(self.str_replace_text(path, old_str, new_str, replace_all))
    }

    fn str_replace_text(&self, path: &str, old_str: &str, new_str: &str, replace_all: bool) -> String {
        if !self.thread_data {
            return format!("Error: {THREAD_DATA_MISSING}");
        }
        let denied = || format!("Error: Permission denied accessing file: {path}");
        if self.layout.validate(path, false).is_err() {
            return denied();
        }
        let Ok(target) = self.layout.resolve(path) else { return denied() };
        let real = self.real(&target);
        let unexpected = |detail: String| format!("Error: Unexpected error replacing string: {detail}");
        let raw = match fs::metadata(&real) {
            Ok(m) if m.is_dir() => return unexpected(py_os_error(&io::Error::from(io::ErrorKind::IsADirectory), path)),
            Ok(m) if !m.is_file() => return format!("Error: Path is not a regular file: {path}"),
            _ => fs::File::open(&real).and_then(|f| {
                let mut buf = Vec::new();
                let hint = f.metadata().map(|m| m.len()).unwrap_or(0);
                crate::fsutil::read_to_end_at(&f, &mut buf, hint).map(|()| buf)
            }),
        };
        let raw = match raw {
            Ok(b) => b,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return format!("Error: File not found: {path}"),
            Err(e) if e.kind() == io::ErrorKind::PermissionDenied => return denied(),
            Err(e) => return unexpected(py_os_error(&e, path)),
        };
        if let Err(e) = std::str::from_utf8(&raw) {
            return unexpected(format!("UnicodeDecodeError: {}", python_decode_error(&raw, &e)));
        }
        if old_str.is_empty() {
            return "OK".to_string();
        }
        let Some(updated) = replace_keeping_bytes(&raw, old_str, new_str, replace_all) else {
            return format!("Error: String to replace not found in file: {path}");
        };
        let written = fs::OpenOptions::new().write(true).open(&real).and_then(|f| overwrite(f, &updated));
        match written {
            Ok(()) => "OK".to_string(),
            Err(e) if e.kind() == io::ErrorKind::PermissionDenied => denied(),
            Err(e) => unexpected(py_os_error(&e, path)),
        }
    }

    // ---- glob -----------------------------------------------------------------------------

    /// Resolve the root of a search, mapping failures to DeerFlow's messages.
    fn search_root(&self, path: &str) -> Result<String, String> {
        if let Some(name) = self.layout.disabled_skill(path) {
            return Err(Layout::disabled_message(&name));
        }
        if !self.thread_data {
            return Err(format!("Error: {THREAD_DATA_MISSING}"));
        }
        let denied = || format!("Error: Permission denied: {path}");
        if self.layout.validate(path, true).is_err() {
            return Err(denied());
        }
        let root = self.layout.resolve(path).map_err(|_| denied())?;
        if root == self.layout.skills_root() {
            return Err(format!("Error: Directory not found: {path}"));
        }
        Ok(root)
    }

    pub fn glob(
        &self,
        pattern: &str,
        path: &str,
        include_dirs: bool,
        max_results: i64,
        config: Option<i64>,
    ) -> Outcome {
        Outcome::of(self.glob_text(pattern, path, include_dirs, max_results, config))
    }

    fn glob_text(
        &self,
        pattern: &str,
        path: &str,
        include_dirs: bool,
        max_results: i64,
        config: Option<i64>,
    ) -> String {
        let limit = effective_max(max_results, config, GLOB_DEFAULT, GLOB_MAX);
        let root = match self.search_root(path) {
            Ok(r) => r,
            Err(e) => return e,
        };
        match fs::metadata(self.real(&root)) {
            Err(_) => return format!("Error: Directory not found: {path}"),
            Ok(m) if !m.is_dir() => return format!("Error: Path is not a directory: {path}"),
            Ok(_) => {}
        }
        let matcher = GlobMatcher::new(pattern);
        let mut found = Vec::new();
        let mut walk =
            GlobWalk { sb: self, matcher: &matcher, include_dirs, limit, found: &mut found, rel: String::new() };
        match walk.dir(&root) {
            Ok(_) => {}
            Err(e) => return format!("Error: Unexpected error searching paths: ValueError: {e}"),
        }
        let truncated = found.len() > limit;
        found.truncate(limit);
        if found.is_empty() {
            return format!("No files matched under {path}");
        }
        let mut lines = vec![format!("Found {} paths under {path}", found.len())];
        // Deviation 5: "truncated" only when a match was actually left out.
        if truncated {
            lines[0].push_str(&format!(" (showing first {})", found.len()));
        }
        lines.extend(found.iter().enumerate().map(|(i, p)| format!("{}. {p}", i + 1)));
        if truncated {
            lines.push("Results truncated. Narrow the path or pattern to see fewer matches.".to_string());
        }
        lines.join("\n")
    }

    // ---- grep -----------------------------------------------------------------------------

    #[allow(clippy::too_many_arguments)]
    pub fn grep(
        &self,
        pattern: &str,
        path: &str,
        glob: Option<&str>,
        literal: bool,
        case_sensitive: bool,
        max_results: i64,
        config: Option<i64>,
    ) -> Outcome {
        Outcome::of(self.grep_text(pattern, path, glob, literal, case_sensitive, max_results, config))
    }

    #[allow(clippy::too_many_arguments)]
    fn grep_text(
        &self,
        pattern: &str,
        path: &str,
        glob: Option<&str>,
        literal: bool,
        case_sensitive: bool,
        max_results: i64,
        config: Option<i64>,
    ) -> String {
        let limit = effective_max(max_results, config, GREP_DEFAULT, GREP_MAX);
        let root = match self.search_root(path) {
            Ok(r) => r,
            Err(e) => return e,
        };
        let is_file = match fs::metadata(self.real(&root)) {
            Err(_) => return format!("Error: Directory not found: {path}"),
            Ok(m) if m.is_file() => true,
            Ok(m) if m.is_dir() => false,
            Ok(_) => return format!("Error: Path is not a directory: {path}"),
        };
        let matcher = match search::Matcher::new(pattern, literal, case_sensitive) {
            Ok(m) => m,
            Err(e) => return format!("Error: Invalid regex pattern: {e}"),
        };
        let glob = glob.map(GlobMatcher::new);
        let mut g =
            GrepWalk { sb: self, matcher: &matcher, glob: glob.as_ref(), limit, found: Vec::new(), buf: Vec::new() };
        let res = if is_file {
            let name = root.rsplit('/').next().unwrap_or_default().to_string();
            g.file(&root, &name).map(|_| ())
        } else {
            g.dir(&root, "").map(|_| ())
        };
        if let Err(e) = res {
            return format!("Error: Unexpected error searching file contents: ValueError: {e}");
        }
        let mut found = g.found;
        let truncated = found.len() > limit;
        found.truncate(limit);
        if found.is_empty() {
            return format!("No matches found under {path}");
        }
        let mut lines = vec![format!("Found {} matches under {path}", found.len())];
        if truncated {
            lines[0].push_str(&format!(" (showing first {})", found.len()));
        }
        lines.extend(found.iter().map(|m| format!("{}:{}: {}", m.path, m.line_number, m.line)));
        if truncated {
            lines.push("Results truncated. Narrow the path or add a glob filter.".to_string());
        }
        lines.join("\n")
    }
}

/// Whether an entry lies inside a disabled skill (dropped from listings and searches).
fn hidden(sb: &Sandbox, vpath: &str) -> bool {
    sb.layout.disabled_skill(vpath).is_some()
}

struct GlobWalk<'a> {
    sb: &'a Sandbox,
    matcher: &'a GlobMatcher,
    include_dirs: bool,
    limit: usize,
    found: &'a mut Vec<String>,
    /// The relative path being tested, in the matcher's form (`GlobMatcher::matches_lines`),
    /// built in place: the current directory's part, then one entry's name at a time.
    rel: String,
}

impl GlobWalk<'_> {
    /// `os.walk` order (sorted): a directory's matching subdirs (with `include_dirs`), then its
    /// matching files, then each subdirectory. `Ok(true)` once one match past the limit is found.
    fn dir(&mut self, vdir: &str) -> Result<bool, crate::glob::EmptyPattern> {
        let Ok(list) = read_dir_sorted(&self.sb.layout, vdir) else { return Ok(false) };
        let dir_len = self.rel.len();
        let dirs: Vec<_> = list.iter().filter(|e| e.kind == Kind::Dir && !should_ignore_name(&e.name)).collect();
        if self.include_dirs {
            for d in &dirs {
                if hidden(self.sb, d.shown()) {
                    continue;
                }
                if self.test(dir_len, &d.name)? {
                    self.found.push(d.shown().to_string());
                    if self.found.len() > self.limit {
                        return Ok(true);
                    }
                }
            }
        }
        for f in list.iter().filter(|e| e.kind != Kind::Dir) {
            if should_ignore_name(&f.name) || hidden(self.sb, f.shown()) {
                continue;
            }
            if self.test(dir_len, &f.name)? {
                self.found.push(f.shown().to_string());
                if self.found.len() > self.limit {
                    return Ok(true);
                }
            }
        }
        for d in dirs {
            if d.symlink || hidden(self.sb, &d.vpath) {
                continue;
            }
            self.enter(dir_len, &d.name);
            let done = self.dir(&d.vpath)?;
            self.rel.truncate(dir_len);
            if done {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Point `rel` at `name` inside the directory whose part is `rel[..dir_len]`.
    fn enter(&mut self, dir_len: usize, name: &str) {
        self.rel.truncate(dir_len);
        if dir_len > 0 {
            self.rel.push('\n');
        }
        crate::glob::push_swapped(&mut self.rel, name);
    }

    fn test(&mut self, dir_len: usize, name: &str) -> Result<bool, crate::glob::EmptyPattern> {
        self.enter(dir_len, name);
        let hit = self.matcher.matches_lines(&self.rel);
        self.rel.truncate(dir_len);
        hit
    }
}

struct GrepWalk<'a> {
    sb: &'a Sandbox,
    matcher: &'a search::Matcher,
    glob: Option<&'a GlobMatcher>,
    limit: usize,
    found: Vec<GrepMatch>,
    buf: Vec<u8>,
}

impl GrepWalk<'_> {
    fn dir(&mut self, vdir: &str, rel_dir: &str) -> Result<bool, crate::glob::EmptyPattern> {
        let Ok(list) = read_dir_sorted(&self.sb.layout, vdir) else { return Ok(false) };
        let rel = |name: &str| if rel_dir.is_empty() { name.to_string() } else { format!("{rel_dir}/{name}") };
        for f in list.iter().filter(|e| e.kind == Kind::File) {
            // Symlinked files are never searched in directory mode (DeerFlow skips them too).
            if f.symlink || should_ignore_name(&f.name) || hidden(self.sb, &f.vpath) {
                continue;
            }
            if self.file(&f.vpath, &rel(&f.name))? {
                return Ok(true);
            }
        }
        for d in list.iter().filter(|e| e.kind == Kind::Dir) {
            if d.symlink || should_ignore_name(&d.name) || hidden(self.sb, &d.vpath) {
                continue;
            }
            if self.dir(&d.vpath, &rel(&d.name))? {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Search one file; `Ok(true)` once one match past the limit is found.
    fn file(&mut self, vpath: &str, rel: &str) -> Result<bool, crate::glob::EmptyPattern> {
        if let Some(g) = self.glob {
            if !g.matches(rel)? {
                return Ok(false);
            }
        }
        let Some(data) = search::load_candidate(&self.sb.layout.host.real(vpath), std::mem::take(&mut self.buf)) else {
            return Ok(false);
        };
        let room = self.limit + 1 - self.found.len().min(self.limit + 1);
        search::search_buffer(self.matcher, &data, vpath, room, &mut self.found);
        self.buf = data;
        Ok(self.found.len() > self.limit)
    }
}

/// Replace the whole content of an open file: write from the start, then cut the old tail.
/// The bytes on disk end up as with open-truncate-write (Python's `open(path, "w")`), but a
/// rewrite of a file of about the same size frees and reallocates no blocks, and ext4 does not
/// flush the file on close as it does after a truncate to zero (its `auto_da_alloc` heuristic):
/// about 8 µs instead of 160-230 µs per small rewrite on this machine's ext4.
fn overwrite(file: fs::File, bytes: &[u8]) -> io::Result<()> {
    let old_len = file.metadata()?.len();
    crate::fsutil::write_all_at(&file, bytes, 0)?;
    // Only a longer old file has a tail to cut; a same-size set_len still costs ext4 a truncate.
    if old_len > bytes.len() as u64 {
        file.set_len(bytes.len() as u64)?;
    }
    Ok(())
}

/// Replace `old` (first occurrence, or all) as Python does on the universal-newline view of the
/// file, but splice the replacement into the raw bytes so every other byte — CRLF included —
/// stays as it was (deviation 2). `None` when `old` does not occur.
fn replace_keeping_bytes(raw: &[u8], old: &str, new: &str, all: bool) -> Option<Vec<u8>> {
    // Normalized text plus, for each normalized byte, its offset in `raw`.
    let mut norm = Vec::with_capacity(raw.len());
    let mut map = Vec::with_capacity(raw.len() + 1);
    let mut i = 0;
    while i < raw.len() {
        map.push(i);
        if raw[i] == b'\r' {
            norm.push(b'\n');
            i += if raw.get(i + 1) == Some(&b'\n') { 2 } else { 1 };
        } else {
            norm.push(raw[i]);
            i += 1;
        }
    }
    map.push(raw.len());
    let finder = memchr::memmem::Finder::new(old.as_bytes());
    let mut spans = Vec::new();
    let mut pos = 0;
    while let Some(off) = finder.find(&norm[pos..]) {
        let s = pos + off;
        let e = s + old.len();
        spans.push((map[s], map[e]));
        pos = e;
        if !all {
            break;
        }
    }
    if spans.is_empty() {
        return None;
    }
    let mut out = Vec::with_capacity(raw.len() + new.len() * spans.len());
    let mut last = 0;
    for (s, e) in spans {
        out.extend_from_slice(&raw[last..s]);
        out.extend_from_slice(new.as_bytes());
        last = e;
    }
    out.extend_from_slice(&raw[last..]);
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_crlf_bytes() {
        let raw = b"line1\r\nline2 TODO\r\nline3\r\n";
        assert_eq!(replace_keeping_bytes(raw, "line2", "LINE2", false).unwrap(), b"line1\r\nLINE2 TODO\r\nline3\r\n");
        assert_eq!(replace_keeping_bytes(raw, "line1\nline2", "x", false).unwrap(), b"x TODO\r\nline3\r\n");
        assert!(replace_keeping_bytes(raw, "line1\r\nline2", "x", false).is_none());
        assert_eq!(replace_keeping_bytes(b"x x x", "x", "y", true).unwrap(), b"y y y");
    }

    #[test]
    fn clamps() {
        assert_eq!(effective_max(0, Some(200), 200, 1000), 200);
        assert_eq!(effective_max(5000, Some(200), 200, 1000), 200);
        assert_eq!(effective_max(10000, Some(100), 100, 500), 100);
        assert_eq!(effective_max(50, None, 100, 500), 50);
    }
}
