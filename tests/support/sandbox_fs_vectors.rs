//! The sandbox_fs.json vector logic shared by the native conformance test
//! (guest-tools/sandbox-fs/tests/conformance.rs) and the host end-to-end test (tests/file_tools.rs):
//! rebuilding the fixture, snapshotting the thread dir, and deriving each expected value, with
//! toolhost's deliberate deviations (tests/conformance/README.md) applied in one place.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::{json, Value};

/// The vectors, parsed.
pub fn load(path: &str) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {path}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("parse {path}: {e}"))
}

/// Standard base64 (the fixture stores binary files this way).
pub fn b64(s: &str) -> Vec<u8> {
    let val = |c: u8| -> u32 {
        match c {
            b'A'..=b'Z' => u32::from(c - b'A'),
            b'a'..=b'z' => u32::from(c - b'a') + 26,
            b'0'..=b'9' => u32::from(c - b'0') + 52,
            b'+' => 62,
            b'/' => 63,
            _ => 0,
        }
    };
    let clean: Vec<u8> = s.bytes().filter(|c| !c.is_ascii_whitespace()).collect();
    let mut out = Vec::new();
    for chunk in clean.chunks(4) {
        let pad = chunk.iter().filter(|&&c| c == b'=').count();
        let mut n = 0u32;
        for (i, &c) in chunk.iter().enumerate() {
            n |= val(c) << (18 - 6 * i);
        }
        let bytes = [(n >> 16) as u8, (n >> 8) as u8, n as u8];
        out.extend_from_slice(&bytes[..3 - pad]);
    }
    out
}

/// Recreate `fixture.entries` under `thread` (the thread dir), plus the four thread dirs.
pub fn build_fixture(v: &Value, thread: &Path) {
    for e in v["fixture"]["entries"].as_array().expect("entries") {
        let p = thread.join(e["path"].as_str().expect("path"));
        match e["type"].as_str().expect("type") {
            "dir" => std::fs::create_dir_all(&p).expect("mkdir"),
            "file" => {
                std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
                let bytes = match e.get("base64") {
                    Some(b) => b64(b.as_str().expect("b64")),
                    None => e["content"].as_str().expect("content").as_bytes().to_vec(),
                };
                std::fs::write(&p, bytes).expect("write");
            }
            "symlink" => {
                std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
                std::os::unix::fs::symlink(e["target"].as_str().expect("target"), &p).expect("symlink");
            }
            other => panic!("unknown fixture type {other}"),
        }
    }
    for d in ["user-data/workspace", "user-data/uploads", "user-data/outputs", "acp-workspace"] {
        std::fs::create_dir_all(thread.join(d)).expect("mkdir");
    }
}

/// Write `environment.skills_dir_files` under `skills`.
pub fn build_skills(v: &Value, skills: &Path) {
    for (rel, content) in v["environment"]["skills_dir_files"].as_object().expect("skills") {
        let p = skills.join(rel);
        std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        std::fs::write(&p, content.as_str().expect("skill content")).expect("write");
    }
}

/// The virtual dirs of the skills `extensions_config` disables.
pub fn disabled_skill_dirs(v: &Value) -> Vec<String> {
    v["environment"]["extensions_config"]["skills"]
        .as_object()
        .map(|m| {
            m.iter()
                .filter(|(_, s)| s["enabled"] == json!(false))
                .map(|(name, _)| format!("/mnt/skills/public/{name}"))
                .collect()
        })
        .unwrap_or_default()
}

/// Snapshot of a dir: relative path → file bytes / dir / symlink target.
pub fn snapshot(root: &Path) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<String, String>) {
        let Ok(rd) = std::fs::read_dir(dir) else { return };
        for e in rd.flatten() {
            let p = e.path();
            let rel = p.strip_prefix(root).expect("prefix").to_string_lossy().into_owned();
            let ft = e.file_type().expect("ft");
            if ft.is_symlink() {
                out.insert(rel, format!("link:{}", std::fs::read_link(&p).expect("link").display()));
            } else if ft.is_dir() {
                out.insert(rel, "dir".into());
                walk(root, &p, out);
            } else {
                let bytes = std::fs::read(&p).expect("read");
                out.insert(rel, format!("file:{}", String::from_utf8_lossy(&bytes)));
            }
        }
    }
    walk(root, root, &mut out);
    out
}

/// A limit no case reaches, to count every match of a truncated case.
pub fn uncapped_max(tool: &str) -> i64 {
    if tool == "glob" {
        1000
    } else {
        500
    }
}

/// Deviation 1 (glob): a link leaving the sandbox is neither followed nor printed. Drop the
/// lines DeerFlow printed with a host path, renumber, and fix the count.
pub fn drop_host_path_lines(expected: &str) -> String {
    let mut lines: Vec<&str> = expected.lines().collect();
    let header = lines.remove(0);
    let kept: Vec<String> = lines
        .iter()
        .filter(|l| !l.contains("{THREAD_DIR}"))
        .filter_map(|l| l.split_once(". ").map(|(_, p)| p.to_string()))
        .collect();
    let under = header.split_once(" paths under ").map(|(_, r)| r).unwrap_or_default();
    let mut out = vec![format!("Found {} paths under {under}", kept.len())];
    out.extend(kept.iter().enumerate().map(|(i, p)| format!("{}. {p}", i + 1)));
    out.join("\n")
}

/// Deviation 5: no "truncated" notice when nothing was cut.
pub fn drop_truncation_notice(expected: &str) -> String {
    let mut lines: Vec<String> = expected.lines().map(str::to_string).collect();
    if let Some(first) = lines.first_mut() {
        if let Some(i) = first.find(" (showing first ") {
            first.truncate(i);
        }
    }
    if lines.last().is_some_and(|l| l.starts_with("Results truncated.")) {
        lines.pop();
    }
    lines.join("\n")
}

pub fn fixture_entry<'a>(v: &'a Value, rel: &str) -> Option<&'a Value> {
    v["fixture"]["entries"].as_array()?.iter().find(|e| e["path"] == json!(rel))
}

/// The expected text of one call, with the deviations applied, and the deviations' names.
/// `full(tool, args)` runs the tool with `args` (whose `max_results` is [`uncapped_max`]) and no
/// lower config cap; it tells a truncated case that was cut from one exactly at its cap.
pub fn expected_content(
    v: &Value,
    c: &Value,
    full: &mut dyn FnMut(&str, &Value) -> String,
) -> (String, Vec<&'static str>) {
    let tool = c["tool"].as_str().expect("tool");
    let mut notes = Vec::new();
    let mut exp = match c.get("expected_content_sorted_walk") {
        Some(s) if c["order"] == json!("walk") => s.as_str().expect("sorted").to_string(),
        _ => c["expected_content"].as_str().expect("content").to_string(),
    };
    if c.get("host_path_leak") == Some(&json!(true)) && tool == "glob" {
        exp = drop_host_path_lines(&exp);
        notes.push("deviation 1: no host path, links leaving the sandbox dropped");
    }
    if c.get("truncated") == Some(&json!(true)) {
        let mut args = c["args"].clone();
        args["max_results"] = json!(uncapped_max(tool));
        let all = full(tool, &args);
        let shown = exp.lines().filter(|l| !l.starts_with("Found ") && !l.starts_with("Results truncated")).count();
        let total = all.lines().filter(|l| !l.starts_with("Found ") && !l.starts_with("Results truncated")).count();
        if total <= shown {
            exp = drop_truncation_notice(&exp);
            notes.push("deviation 5: truncation only when something was cut");
        }
    }
    if tool == "ls" {
        let path = c["args"]["path"].as_str().unwrap_or_default();
        let rel = path.strip_prefix("/mnt/").map(|r| r.to_string()).unwrap_or_default();
        if exp == "(empty)" && fixture_entry(v, &rel).is_some_and(|e| e["type"] == json!("file")) {
            exp = format!("Error: Path is not a directory: {path}");
            notes.push("deviation 4: ls of a file is an error");
        } else if !exp.starts_with("Error:") && exp != "(empty)" && !exp.contains("[truncated:") {
            let mut lines: Vec<&str> = exp.lines().collect();
            let before = lines.len();
            lines.dedup();
            if lines.len() != before {
                notes.push("deviation 3: each entry once");
            }
            exp = lines.join("\n");
        }
    }
    (exp, notes)
}

/// Expected changes to the thread dir: relative path → snapshot value.
pub fn expected_changes(v: &Value, c: &Value, notes: &mut Vec<&'static str>) -> BTreeMap<String, Option<String>> {
    let mut out = BTreeMap::new();
    let Some(list) = c.get("fs_after").and_then(Value::as_array) else { return out };
    for e in list {
        let rel = e["path"].as_str().expect("fs path").to_string();
        if e.get("marker") == Some(&json!("dir")) {
            out.insert(rel, Some("dir".to_string()));
            continue;
        }
        let mut content = e.get("content").and_then(Value::as_str).map(str::to_string);
        if e.get("contains_host_path") == Some(&json!(true)) {
            content = content.map(|s| s.replace("{THREAD_DIR}/user-data", "/mnt/user-data"));
            notes.push("deviation 1: content written as given, no host path");
        }
        if c["tool"] == json!("str_replace") {
            let original = fixture_entry(v, &rel).and_then(|f| f["content"].as_str()).unwrap_or_default();
            if original.contains("\r\n") && !original.replace("\r\n", "").contains('\n') {
                content = content.map(|s| s.replace('\n', "\r\n"));
                notes.push("deviation 2: CRLF bytes kept");
            }
        }
        // Large files: size plus head and tail.
        let value = match content {
            Some(s) => Some(format!("file:{s}")),
            None => Some(format!(
                "size:{}:{}:{}",
                e["size"].as_u64().expect("size"),
                e["head"].as_str().expect("head"),
                e["tail"].as_str().expect("tail")
            )),
        };
        out.insert(rel, value);
    }
    out
}

/// What changed between two snapshots, in the form of [`expected_changes`].
pub fn actual_changes(
    before: &BTreeMap<String, String>,
    after: &BTreeMap<String, String>,
    expected: &BTreeMap<String, Option<String>>,
) -> BTreeMap<String, Option<String>> {
    let mut out = BTreeMap::new();
    for (k, a) in after {
        if before.get(k) != Some(a) {
            let value = match expected.get(k) {
                Some(Some(e)) if e.starts_with("size:") => {
                    let body = a.strip_prefix("file:").unwrap_or(a);
                    let parts: Vec<&str> = e.splitn(4, ':').collect();
                    let head_len = parts.get(2).map(|h| h.len()).unwrap_or(0);
                    let tail_len = parts.get(3).map(|t| t.len()).unwrap_or(0);
                    Some(format!(
                        "size:{}:{}:{}",
                        body.len(),
                        &body[..head_len.min(body.len())],
                        &body[body.len().saturating_sub(tail_len)..]
                    ))
                }
                _ => Some(a.clone()),
            };
            out.insert(k.clone(), value);
        }
    }
    for k in before.keys() {
        if !after.contains_key(k) {
            out.insert(k.clone(), None);
        }
    }
    out
}

/// A long value cut for a failure message.
pub fn short(s: &str) -> String {
    if s.chars().count() > 600 {
        format!("{}…<{} chars>", s.chars().take(600).collect::<String>(), s.chars().count())
    } else {
        s.to_string()
    }
}
