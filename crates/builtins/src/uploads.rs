//! `list_uploaded_files` (DeerFlow `H/tools/builtins/list_uploaded_files_tool.py`): the files
//! uploaded to the thread in previous turns, newest first, as the JSON dict DeerFlow returns, with
//! optional document outlines (`H/utils/file_outline.py`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use async_trait::async_trait;
use regex::Regex;
use serde_json::{json, Map, Value};
use toolhost_core::{CallContext, ThreadPaths, ThreadState, Tool, ToolOutcome, ToolSpec};

use crate::view_image::py_suffix;
use crate::{args_object, builtin_spec, invalid_args, pyjson};

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
        let paths = ctx.paths.clone();
        let state = ctx.state.clone();
        let thread_id = ctx.thread_id.clone();
        let result = tokio::task::spawn_blocking(move || {
            if thread_id.is_empty() {
                return json!({"files": [], "message": "Thread not found."});
            }
            list_uploaded_files(&paths, &state, &include_outline, max_results)
        })
        .await;
        match result {
            // LangChain hands a dict result to the model as json.dumps(…, ensure_ascii=False).
            Ok(value) => ToolOutcome::text(pyjson::dumps(&value)),
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

/// DeerFlow's `_list_uploaded_files_impl` over the thread's uploads directory.
pub fn list_uploaded_files(
    paths: &ThreadPaths,
    state: &ThreadState,
    include_outline: &IncludeOutline,
    max_results: i64,
) -> Value {
    let uploads = paths.uploads();
    if !uploads.exists() {
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

    let failed = || json!({"files": [], "message": format!("Failed to read uploads directory: {}", paths.mask(&uploads.to_string_lossy()))});
    let Ok(dir) = std::fs::read_dir(&uploads) else { return failed() };
    // Regular files only: symlinks and in-flight staging files are never listed.
    let mut entries: Vec<(String, PathBuf, std::fs::Metadata)> = Vec::new();
    for entry in dir {
        let Ok(entry) = entry else { return failed() };
        let Ok(link_meta) = entry.path().symlink_metadata() else { return failed() };
        let name = entry.file_name().to_string_lossy().into_owned();
        if !link_meta.is_file() || (name.starts_with(UPLOAD_STAGING_PREFIX) && name.ends_with(UPLOAD_STAGING_SUFFIX)) {
            continue;
        }
        entries.push((name, entry.path(), link_meta));
    }
    let all_names: Vec<String> = entries.iter().map(|(n, _, _)| n.clone()).collect();
    let mut candidates: Vec<(std::time::SystemTime, String, PathBuf, u64)> = Vec::new();
    for (name, path, meta) in entries {
        if current_run.contains(&name.as_str()) {
            continue;
        }
        // `report.md` next to `report.pdf` is the pdf's conversion, not an upload of its own.
        if let Some(stem) = name.strip_suffix(".md") {
            if all_names.iter().any(|n| *n != name && py_stem(n) == stem) {
                continue;
            }
        }
        let mtime = meta.modified().unwrap_or(std::time::UNIX_EPOCH);
        candidates.push((mtime, name, path, meta.len()));
    }
    if candidates.is_empty() {
        return json!({"files": [], "message": "No historical uploaded files in this thread."});
    }
    // Newest first; the name breaks ties so the listing is deterministic.
    candidates.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    let total_count = candidates.len();
    let omitted: Vec<&str> = candidates.iter().skip(max_results).map(|c| c.1.as_str()).collect();

    let mut files = Vec::new();
    for (_, filename, path, size) in candidates.iter().take(max_results) {
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
            let (outline, preview) = extract_outline_for_file(path);
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

/// A text file's lines as Python's universal-newline iteration sees them (terminators dropped);
/// `None` when the file cannot be read as UTF-8.
fn read_lines(path: &Path) -> Option<Vec<String>> {
    let bytes = std::fs::read(path).ok()?;
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
pub fn extract_outline(md_path: &Path) -> Vec<Value> {
    let re = outline_res();
    let Some(lines) = read_lines(md_path) else { return Vec::new() };
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

/// DeerFlow's `extract_outline_for_file`: the outline of the file's Markdown (itself, or its
/// same-stem `.md` conversion); when it has no headings, up to five non-empty lines as a preview.
pub fn extract_outline_for_file(file_path: &Path) -> (Vec<Value>, Vec<String>) {
    let name = file_path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let md_path = if py_suffix(&name).to_lowercase() == ".md" {
        file_path.to_path_buf()
    } else {
        file_path.with_file_name(format!("{}.md", py_stem(&name)))
    };
    if !md_path.is_file() {
        return (Vec::new(), Vec::new());
    }
    let outline = extract_outline(&md_path);
    if !outline.is_empty() {
        return (outline, Vec::new());
    }
    let mut preview = Vec::new();
    let mut remaining = OUTLINE_PREVIEW_MAX_CHARS;
    for line in read_lines(&md_path).unwrap_or_default() {
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
    use std::time::{Duration, SystemTime};

    fn write(dir: &Path, name: &str, body: &str, age_secs: u64) {
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
        let up = ctx.paths.uploads();
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
        std::fs::remove_dir(ctx.paths.uploads()).unwrap();
        assert_eq!(
            call(&ctx, json!({})).await,
            json!({"files": [], "message": "No uploads directory for this thread."})
        );
        let out = ListUploadedFilesTool::new().call(&ctx, json!({"max_results": "many"})).await;
        assert!(out.is_error() && out.text_content().contains("max_results must be an integer"));
        let out = ListUploadedFilesTool::new().call(&ctx, json!({"include_outline": 3})).await;
        assert!(out.is_error() && out.text_content().contains("include_outline"));
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
            extract_outline(&md),
            [
                json!({"title": "Intro", "line": 1}),
                json!({"title": "ITEM 1. BUSINESS", "line": 6}),
                json!({"title": "1 Overview", "line": 7})
            ]
        );
        let many: String = (0..60).map(|i| format!("# H{i}\n")).collect();
        std::fs::write(&md, many).unwrap();
        let outline = extract_outline(&md);
        assert_eq!(outline.len(), 51);
        assert_eq!(outline[50], json!({"truncated": true}));
        assert_eq!(truncate_outline_text(&"x".repeat(300), 200).chars().count(), 200);
        assert!(truncate_outline_text(&"x".repeat(300), 200).ends_with(TRUNCATION_MARKER));
    }
}
