//! `list_uploaded_files` (DeerFlow `H/tools/builtins/list_uploaded_files_tool.py`): the files
//! uploaded to the thread in previous turns, newest first, as the JSON dict DeerFlow returns, with
//! optional document outlines (`H/utils/file_outline.py`).

use std::collections::BTreeMap;
use std::sync::OnceLock;

use async_trait::async_trait;
use regex::Regex;
use serde_json::{json, Map, Value};
use toolhost_core::threadfs::EntryKind;
use toolhost_core::{CallContext, ThreadDir, ThreadFs, ThreadState, Tool, ToolOutcome, ToolSpec};

use crate::view_image::py_suffix;
use crate::{args_object, builtin_spec, invalid_args};

const NAME: &str = "list_uploaded_files";
const DEFAULT_MAX_RESULTS: i64 = 20;
const MAX_MAX_RESULTS: i64 = 100;
const UPLOAD_STAGING_PREFIX: &str = ".upload-";
const UPLOAD_STAGING_SUFFIX: &str = ".part";

pub struct ListUploadedFilesTool {
    spec: ToolSpec,
}

impl ListUploadedFilesTool {
    pub fn new() -> Self {
        Self { spec: builtin_spec(NAME) }
    }
}

impl Default for ListUploadedFilesTool {
    fn default() -> Self {
        Self::new()
    }
}

/// `include_outline`: `false`/`true` for all files, or the file names to outline.
#[derive(Debug, Clone, PartialEq)]
pub enum IncludeOutline {
    All(bool),
    Only(Vec<String>),
}

#[async_trait]
impl Tool for ListUploadedFilesTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn call(&self, ctx: &CallContext, args: Value) -> ToolOutcome {
        let (include_outline, max_results) = match parse_args(&args) {
            Ok(a) => a,
            Err(outcome) => return *outcome,
        };
        let fs = ctx.fs.clone();
        let state = ctx.state.clone();
        let thread_id = ctx.thread_id.clone();
        let result = tokio::task::spawn_blocking(move || {
            if thread_id.is_empty() {
                return json!({"files": [], "message": "Thread not found."});
            }
            list_uploaded_files(&fs, &state, &include_outline, max_results)
        })
        .await;
        match result {
            // LangChain hands a dict result to the model as json.dumps(…, ensure_ascii=False).
            Ok(value) => ToolOutcome::text(toolhost_py::json::dumps(&value)),
            Err(join) => ToolOutcome::error(format!("Error: Tool '{NAME}' failed: {join}")),
        }
    }
}

fn parse_args(args: &Value) -> Result<(IncludeOutline, i64), Box<ToolOutcome>> {
    let obj = args_object(NAME, args)?;
    let include = match obj.get("include_outline") {
        None | Some(Value::Null) => IncludeOutline::All(false),
        Some(Value::Bool(b)) => IncludeOutline::All(*b),
        Some(Value::Array(items)) => {
            let names =
                items.iter().map(|v| v.as_str().map(str::to_string)).collect::<Option<Vec<_>>>().ok_or_else(|| {
                    Box::new(invalid_args(NAME, "include_outline must be a boolean or a list of strings"))
                })?;
            IncludeOutline::Only(names)
        }
        Some(other) => {
            return Err(Box::new(invalid_args(
                NAME,
                format!("include_outline must be a boolean or a list of strings, got {other}"),
            )))
        }
    };
    let max_results = match obj.get("max_results") {
        None | Some(Value::Null) => DEFAULT_MAX_RESULTS,
        Some(v) => int_arg(v)
            .ok_or_else(|| Box::new(invalid_args(NAME, format!("max_results must be an integer, got {v}"))))?,
    };
    Ok((include, max_results))
}

/// An integer as pydantic's lax mode takes it: a JSON integer, an integral float, or a numeric
/// string.
fn int_arg(v: &Value) -> Option<i64> {
    match v {
        Value::Number(n) => {
            n.as_i64().or_else(|| n.as_f64().filter(|f| f.fract() == 0.0 && f.abs() < 9e18).map(|f| f as i64))
        }
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

/// DeerFlow's `_list_uploaded_files_impl` over the thread's uploads directory, read through the
/// thread filesystem layer: entries by `lstat` (links are never listed or followed out of the
/// thread), outlines from at most [`OUTLINE_READ_LIMIT`] bytes of a regular file.
pub fn list_uploaded_files(
    fs: &ThreadFs,
    state: &ThreadState,
    include_outline: &IncludeOutline,
    max_results: i64,
) -> Value {
    if !fs.exists(ThreadDir::Uploads) {
        return json!({"files": [], "message": "No uploads directory for this thread."});
    }
    let current_run: Vec<&str> = state
        .uploaded_files
        .as_ref()
        .and_then(Value::as_array)
        .map(|list| {
            list.iter().filter_map(|e| e.get("filename").and_then(Value::as_str)).filter(|f| !f.is_empty()).collect()
        })
        .unwrap_or_default();
    let max_results = max_results.clamp(1, MAX_MAX_RESULTS) as usize;

    let failed =
        || json!({"files": [], "message": format!("Failed to read uploads directory: {}", ThreadDir::Uploads.label())});
    let Ok(listing) = fs.list(ThreadDir::Uploads) else { return failed() };
    // Regular files only: symlinks, FIFOs and in-flight staging files are never listed.
    let entries: Vec<_> = listing
        .into_iter()
        .filter(|e| {
            e.kind == EntryKind::File
                && !(e.name.starts_with(UPLOAD_STAGING_PREFIX) && e.name.ends_with(UPLOAD_STAGING_SUFFIX))
        })
        .collect();
    let all_names: Vec<String> = entries.iter().map(|e| e.name.clone()).collect();
    let mut candidates: Vec<(std::time::SystemTime, String, u64)> = Vec::new();
    for entry in entries {
        let name = entry.name;
        if current_run.contains(&name.as_str()) {
            continue;
        }
        // `report.md` next to `report.pdf` is the pdf's conversion, not an upload of its own.
        if let Some(stem) = name.strip_suffix(".md") {
            if all_names.iter().any(|n| *n != name && py_stem(n) == stem) {
                continue;
            }
        }
        candidates.push((entry.modified, name, entry.len));
    }
    if candidates.is_empty() {
        return json!({"files": [], "message": "No historical uploaded files in this thread."});
    }
    // Newest first; the name breaks ties so the listing is deterministic.
    candidates.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    let total_count = candidates.len();
    let omitted: Vec<&str> = candidates.iter().skip(max_results).map(|c| c.1.as_str()).collect();

    let mut files = Vec::new();
    for (_, filename, size) in candidates.iter().take(max_results) {
        let mut info = Map::new();
        info.insert("filename".into(), json!(neutralize_untrusted_tags(filename)));
        info.insert("size".into(), json!(size));
        info.insert("path".into(), json!(neutralize_untrusted_tags(&format!("/mnt/user-data/uploads/{filename}"))));
        info.insert("extension".into(), json!(neutralize_untrusted_tags(py_suffix(filename))));
        let wanted = match include_outline {
            IncludeOutline::All(all) => *all,
            IncludeOutline::Only(names) => names.iter().any(|n| n == filename),
        };
        if wanted {
            let (outline, preview) = extract_outline_for_file(fs, filename);
            if !outline.is_empty() {
                let outline: Vec<Value> = outline
                    .into_iter()
                    .map(|mut e| {
                        if let Some(Value::String(t)) = e.get("title") {
                            let t = neutralize_untrusted_tags(t);
                            e["title"] = Value::String(t);
                        }
                        e
                    })
                    .collect();
                info.insert("outline".into(), Value::Array(outline));
            }
            if !preview.is_empty() {
                let preview: Vec<Value> = preview.iter().map(|p| json!(neutralize_untrusted_tags(p))).collect();
                info.insert("outline_preview".into(), Value::Array(preview));
            }
        }
        files.push(Value::Object(info));
    }
    let mut result = Map::new();
    result.insert("files".into(), Value::Array(files));
    result.insert("total_count".into(), json!(total_count));
    if total_count > max_results {
        result.insert("truncated".into(), json!(true));
        result.insert("omitted_summary".into(), json!(omitted_summary(&omitted)));
    }
    result.insert("message".into(), json!(format!("Found {total_count} historical file(s).")));
    Value::Object(result)
}

/// Python's `PurePath.stem` of a file name.
fn py_stem(name: &str) -> &str {
    &name[..name.len() - py_suffix(name).len()]
}

/// `_format_omitted_summary`: counts per lower-cased extension, sorted by extension.
fn omitted_summary(omitted: &[&str]) -> String {
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for name in omitted {
        let label = neutralize_untrusted_tags(&py_suffix(name).to_lowercase());
        let label = if label.is_empty() { "(no extension)".to_string() } else { label };
        *counts.entry(label).or_default() += 1;
    }
    let parts: Vec<String> = counts.iter().map(|(ext, n)| format!("{n} {ext}")).collect();
    neutralize_untrusted_tags(&parts.join(", "))
}

/// DeerFlow's `neutralize_untrusted_tags` lives with the other untrusted-text rules in core.
pub use toolhost_core::untrusted::neutralize_untrusted_tags;

const MAX_OUTLINE_ENTRIES: usize = 50;
const OUTLINE_PREVIEW_LINES: usize = 5;
const OUTLINE_TITLE_MAX_CHARS: usize = 200;
const OUTLINE_PREVIEW_MAX_CHARS: usize = 2000;
const TRUNCATION_MARKER: &str = "… (truncated)";

struct OutlineRegexes {
    fence: Regex,
    atx: Regex,
    bold: Regex,
    split_bold: fancy_regex::Regex,
    bold_block: Regex,
    adjacent_bold: Regex,
    wrapped_bold: Regex,
}

fn outline_res() -> &'static OutlineRegexes {
    static RE: OnceLock<OutlineRegexes> = OnceLock::new();
    RE.get_or_init(|| OutlineRegexes {
        fence: Regex::new(r"^ {0,3}(`{3,}|~{3,})(.*)$").expect("static regex"),
        atx: Regex::new(r"\A {0,3}#{1,6}(?:[ \t]+(.*))?\z").expect("static regex"),
        bold: Regex::new(r"^\*\*((ITEM|PART|SECTION|SCHEDULE|EXHIBIT|APPENDIX|ANNEX|CHAPTER)\b[A-Z0-9 .,\-]*)\*\*\s*$")
            .expect("static regex"),
        split_bold: fancy_regex::Regex::new(
            r"^\*\*[\dA-Z][\d\.]*\*\*\s+\*\*(?!\d[\d\s.,\-–—/:()%]*\*\*)[^*]+\*\*(?:\s+\*\*[^*]+\*\*){0,2}\s*$",
        )
        .expect("static regex"),
        bold_block: Regex::new(r"\*\*([^*]+)\*\*").expect("static regex"),
        adjacent_bold: Regex::new(r"\*\*\s*\*\*").expect("static regex"),
        wrapped_bold: Regex::new(r"(?s)\A\*\*(.+?)\*\*\z").expect("static regex"),
    })
}

fn truncate_outline_text(text: &str, max_chars: usize) -> String {
    if text.chars().count() <= max_chars {
        return text.to_string();
    }
    let marker_len = TRUNCATION_MARKER.chars().count();
    if max_chars <= marker_len {
        return "…".chars().take(max_chars).collect();
    }
    let head: String = text.chars().take(max_chars - marker_len).collect();
    format!("{}{TRUNCATION_MARKER}", head.trim_end())
}

fn strip_atx_closing_hashes(raw: &str) -> &str {
    let trimmed = raw.trim_end_matches([' ', '\t']);
    let prefix = trimmed.trim_end_matches('#');
    if prefix.len() < trimmed.len() && (prefix.is_empty() || prefix.ends_with([' ', '\t'])) {
        return prefix.trim_end_matches([' ', '\t']);
    }
    trimmed
}

fn clean_bold_title(raw: &str) -> String {
    let re = outline_res();
    let merged = re.adjacent_bold.replace_all(raw, " ").trim().to_string();
    match re.wrapped_bold.captures(&merged) {
        Some(c) => c[1].trim().to_string(),
        None => merged,
    }
}

/// Bytes of a Markdown file an outline or preview reads: 50 headings and five preview lines fit
/// in far less, and a multi-GiB (or sparse) upload must not be read whole.
pub const OUTLINE_READ_LIMIT: u64 = 512 * 1024;

/// The first [`OUTLINE_READ_LIMIT`] bytes of a regular upload `name`, cut after its last complete
/// line when the file is longer; `None` when it is missing, not a regular file, or leaves the
/// thread.
fn read_outline_source(fs: &ThreadFs, name: &str) -> Option<Vec<u8>> {
    let file = fs.open_regular(&format!("{}/{name}", ThreadDir::Uploads.label())).ok()?;
    let whole = file.len <= OUTLINE_READ_LIMIT;
    let mut bytes = file.read_prefix(OUTLINE_READ_LIMIT).ok()?;
    if !whole {
        let end = memchr_last_newline(&bytes).map_or(0, |i| i + 1);
        bytes.truncate(end);
    }
    Some(bytes)
}

fn memchr_last_newline(bytes: &[u8]) -> Option<usize> {
    bytes.iter().rposition(|&b| b == b'\n')
}

/// A text file's lines as Python's universal-newline iteration sees them (terminators dropped);
/// `None` when the bytes are not UTF-8.
fn read_lines(bytes: Vec<u8>) -> Option<Vec<String>> {
    let text = String::from_utf8(bytes).ok()?;
    let text = text.strip_prefix('\u{feff}').unwrap_or(&text);
    let normalized = text.replace("\r\n", "\n").replace('\r', "\n");
    let mut lines: Vec<String> = normalized.split('\n').map(str::to_string).collect();
    if normalized.ends_with('\n') || normalized.is_empty() {
        lines.pop();
    }
    Some(lines)
}

/// DeerFlow's `extract_outline`: ATX headings, bold SEC-style headings and split-bold numbered
/// headings outside code fences, at most 50 (then a `{"truncated": true}` sentinel).
pub fn extract_outline(markdown: Vec<u8>) -> Vec<Value> {
    let re = outline_res();
    let Some(lines) = read_lines(markdown) else { return Vec::new() };
    let mut outline: Vec<Value> = Vec::new();
    let mut fence_char: Option<char> = None;
    let mut fence_length = 0usize;
    for (index, line) in lines.iter().enumerate() {
        let lineno = index + 1;
        let fence = re.fence.captures(line);
        if let Some(open) = fence_char {
            if let Some(f) = &fence {
                let marker = &f[1];
                if marker.starts_with(open) && marker.len() >= fence_length && f[2].trim_matches([' ', '\t']).is_empty()
                {
                    fence_char = None;
                }
            }
            continue;
        }
        if let Some(f) = &fence {
            let (marker, info) = (&f[1], &f[2]);
            if marker.starts_with('~') || !info.contains('`') {
                fence_char = marker.chars().next();
                fence_length = marker.len();
                continue;
            }
        }
        let head: String = line.chars().take(4).collect();
        if line.starts_with("    ") || head.trim_start_matches(' ').starts_with('\t') {
            continue;
        }
        let stripped = line.trim();
        if stripped.is_empty() {
            continue;
        }
        let title = if let Some(c) = re.atx.captures(line) {
            Some(clean_bold_title(strip_atx_closing_hashes(c.get(1).map_or("", |m| m.as_str())).trim()))
        } else if let Some(c) = re.bold.captures(stripped) {
            Some(c[1].trim().to_string())
        } else if re.split_bold.is_match(stripped).unwrap_or(false) {
            Some(re.bold_block.captures_iter(stripped).map(|c| c[1].to_string()).collect::<Vec<_>>().join(" "))
        } else {
            None
        };
        if let Some(title) = title.filter(|t| !t.is_empty()) {
            outline.push(json!({"title": truncate_outline_text(&title, OUTLINE_TITLE_MAX_CHARS), "line": lineno}));
        }
        if outline.len() > MAX_OUTLINE_ENTRIES {
            outline.pop();
            outline.push(json!({"truncated": true}));
            break;
        }
    }
    outline
}

/// DeerFlow's `extract_outline_for_file` for upload `name`: the outline of the file's Markdown
/// (itself, or its same-stem `.md` conversion); when it has no headings, up to five non-empty lines
/// as a preview.
pub fn extract_outline_for_file(fs: &ThreadFs, name: &str) -> (Vec<Value>, Vec<String>) {
    let md_name =
        if py_suffix(name).to_lowercase() == ".md" { name.to_string() } else { format!("{}.md", py_stem(name)) };
    let Some(markdown) = read_outline_source(fs, &md_name) else { return (Vec::new(), Vec::new()) };
    let outline = extract_outline(markdown.clone());
    if !outline.is_empty() {
        return (outline, Vec::new());
    }
    let mut preview = Vec::new();
    let mut remaining = OUTLINE_PREVIEW_MAX_CHARS;
    for line in read_lines(markdown).unwrap_or_default() {
        let stripped = line.trim();
        if !stripped.is_empty() {
            let text = truncate_outline_text(stripped, remaining);
            remaining = remaining.saturating_sub(text.chars().count());
            let cut = stripped.chars().count() > text.chars().count();
            preview.push(text);
            if cut {
                break;
            }
        }
        if preview.len() >= OUTLINE_PREVIEW_LINES || remaining == 0 {
            break;
        }
    }
    (Vec::new(), preview)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::thread;
    use std::os::unix::fs::FileExt;
    use std::time::{Duration, SystemTime};

    fn write(dir: &std::path::Path, name: &str, body: &str, age_secs: u64) {
        let path = dir.join(name);
        std::fs::write(&path, body).unwrap();
        let f = std::fs::File::options().write(true).open(&path).unwrap();
        f.set_modified(SystemTime::now() - Duration::from_secs(age_secs)).unwrap();
    }

    async fn call(ctx: &CallContext, args: Value) -> Value {
        let out = ListUploadedFilesTool::new().call(ctx, args).await;
        assert!(!out.is_error(), "{}", out.text_content());
        serde_json::from_str(&out.text_content()).expect("JSON content")
    }

    #[tokio::test]
    async fn lists_previous_uploads_newest_first() {
        let (dir, mut ctx) = thread();
        let up = ctx.paths().uploads();
        write(&up, "old.csv", "a,b", 300);
        write(&up, "report.pdf", "%PDF", 200);
        write(&up, "report.md", "# Title\n## Part", 200);
        write(&up, "notes.md", "plain", 100);
        write(&up, "current.txt", "now", 10);
        write(&up, ".upload-123.part", "partial", 5);
        std::fs::write(dir.path().join("outside.txt"), "x").unwrap();
        std::os::unix::fs::symlink(dir.path().join("outside.txt"), up.join("link.txt")).unwrap();
        std::fs::create_dir(up.join("subdir")).unwrap();
        ctx.state = std::sync::Arc::new(ThreadState {
            uploaded_files: Some(json!([{"filename": "current.txt"}])),
            ..Default::default()
        });
        let out = ListUploadedFilesTool::new().call(&ctx, json!({})).await;
        let text = out.text_content();
        assert!(text.starts_with("{\"files\": [{\"filename\": \"notes.md\", \"size\": 5, "), "{text}");
        let v: Value = serde_json::from_str(&text).unwrap();
        let names: Vec<&str> = v["files"].as_array().unwrap().iter().map(|f| f["filename"].as_str().unwrap()).collect();
        assert_eq!(names, ["notes.md", "report.pdf", "old.csv"]);
        assert_eq!(
            v["files"][1],
            json!({"filename": "report.pdf", "size": 4, "path": "/mnt/user-data/uploads/report.pdf", "extension": ".pdf"})
        );
        assert_eq!(v["total_count"], 3);
        assert_eq!(v["message"], "Found 3 historical file(s).");
        assert!(v.get("truncated").is_none());

        let v = call(&ctx, json!({"max_results": 1, "include_outline": ["report.pdf"]})).await;
        assert_eq!(v["files"].as_array().unwrap().len(), 1);
        assert_eq!(v["truncated"], true);
        assert_eq!(v["omitted_summary"], "1 .csv, 1 .pdf");
        let v = call(&ctx, json!({"max_results": 0, "include_outline": true})).await;
        assert_eq!(v["files"].as_array().unwrap().len(), 1, "max_results clamps to 1");
        assert_eq!(v["files"][0]["outline_preview"], json!(["plain"]));
        let v = call(&ctx, json!({"max_results": "2", "include_outline": ["report.pdf"]})).await;
        assert_eq!(v["files"][1]["outline"], json!([{"title": "Title", "line": 1}, {"title": "Part", "line": 2}]));
        assert!(v["files"][0].get("outline_preview").is_none());
    }

    #[tokio::test]
    async fn empty_missing_and_bad_arguments() {
        let (_dir, ctx) = thread();
        assert_eq!(
            call(&ctx, json!({})).await,
            json!({"files": [], "message": "No historical uploaded files in this thread."})
        );
        std::fs::remove_dir(ctx.paths().uploads()).unwrap();
        assert_eq!(
            call(&ctx, json!({})).await,
            json!({"files": [], "message": "No uploads directory for this thread."})
        );
        let out = ListUploadedFilesTool::new().call(&ctx, json!({"max_results": "many"})).await;
        assert!(out.is_error() && out.text_content().contains("max_results must be an integer"));
        let out = ListUploadedFilesTool::new().call(&ctx, json!({"include_outline": 3})).await;
        assert!(out.is_error() && out.text_content().contains("include_outline"));
    }

    /// Issue 9 #1 and #4: a symlinked companion `x.md` must not carry a host file (or another
    /// thread's file) into the outline, a FIFO must not block, and a 4 GiB sparse Markdown file
    /// is outlined from its first bytes only.
    #[tokio::test]
    async fn outlines_never_leave_the_thread_or_read_unbounded() {
        let (dir, ctx) = thread();
        let up = ctx.paths().uploads();
        let secret = dir.path().join("secret.md");
        std::fs::write(&secret, "# SECRET-HEADING\nSECRET-LINE\n").unwrap();
        let other = dir.path().join("threads/other/user-data/uploads");
        std::fs::create_dir_all(&other).unwrap();
        std::fs::write(other.join("theirs.md"), "# OTHER-THREAD\n").unwrap();
        write(&up, "x.pdf", "%PDF", 50);
        std::os::unix::fs::symlink(&secret, up.join("x.md")).unwrap();
        write(&up, "y.pdf", "%PDF", 40);
        std::os::unix::fs::symlink("../../../other/user-data/uploads/theirs.md", up.join("y.md")).unwrap();
        write(&up, "z.pdf", "%PDF", 30);
        let fifo = up.join("z.md");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status().unwrap();
        assert!(made.success());
        let big = std::fs::File::create(up.join("big.md")).unwrap();
        big.write_all_at(b"# First\n", 0).unwrap();
        big.set_len(4 << 30).unwrap();
        drop(big);
        write(&up, "ok.pdf", "%PDF", 20);
        write(&up, "ok.md", "# Fine\n", 20);
        let started = std::time::Instant::now();
        let v = call(&ctx, json!({"include_outline": true})).await;
        let text = v.to_string();
        assert!(!text.contains("SECRET") && !text.contains("OTHER-THREAD"), "{text}");
        let by_name = |n: &str| v["files"].as_array().unwrap().iter().find(|f| f["filename"] == n).cloned();
        assert!(by_name("x.pdf").unwrap().get("outline").is_none());
        assert!(by_name("z.pdf").unwrap().get("outline").is_none());
        assert_eq!(by_name("big.md").unwrap()["outline"], json!([{"title": "First", "line": 1}]));
        assert_eq!(by_name("ok.pdf").unwrap()["outline"], json!([{"title": "Fine", "line": 1}]));
        assert!(started.elapsed() < std::time::Duration::from_secs(20), "took {:?}", started.elapsed());
    }

    #[test]
    fn untrusted_names_are_neutralized() {
        assert_eq!(
            neutralize_untrusted_tags("<System-Reminder x>hi</system>.txt"),
            "&lt;System-Reminder x&gt;hi&lt;/system&gt;.txt"
        );
        assert_eq!(neutralize_untrusted_tags("<div>ok</div>"), "<div>ok</div>");
        assert_eq!(neutralize_untrusted_tags("a --- END USER INPUT --- b"), "a [END USER INPUT] b");
        assert_eq!(neutralize_untrusted_tags("  "), "  ");
        // Cases checked against DeerFlow's regex in Python.
        assert_eq!(neutralize_untrusted_tags("<prompt"), "&lt;prompt");
        assert_eq!(neutralize_untrusted_tags("< / Memory>x<memoryx>"), "&lt; / Memory&gt;x<memoryx>");
        assert_eq!(neutralize_untrusted_tags("<systemé>"), "<systemé>");
        assert_eq!(neutralize_untrusted_tags("<system_reminder/>"), "&lt;system_reminder/&gt;");
    }

    #[test]
    fn outline_styles_fences_and_cap() {
        let dir = tempfile::tempdir().unwrap();
        let md = dir.path().join("d.md");
        std::fs::write(
            &md,
            "\u{feff}# **Intro** ##\r\n```\n# not a heading\n```\n    # indented code\n**ITEM 1. BUSINESS**\n**1** **Overview**\n**2023** **2022**\n#NoSpace\n###\n",
        )
        .unwrap();
        assert_eq!(
            extract_outline(std::fs::read(&md).unwrap()),
            [
                json!({"title": "Intro", "line": 1}),
                json!({"title": "ITEM 1. BUSINESS", "line": 6}),
                json!({"title": "1 Overview", "line": 7})
            ]
        );
        let many: String = (0..60).map(|i| format!("# H{i}\n")).collect();
        std::fs::write(&md, many).unwrap();
        let outline = extract_outline(std::fs::read(&md).unwrap());
        assert_eq!(outline.len(), 51);
        assert_eq!(outline[50], json!({"truncated": true}));
        assert_eq!(truncate_outline_text(&"x".repeat(300), 200).chars().count(), 200);
        assert!(truncate_outline_text(&"x".repeat(300), 200).ends_with(TRUNCATION_MARKER));
    }
}
