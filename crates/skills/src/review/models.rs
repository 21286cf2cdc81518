//! Shared contracts and deterministic helpers (`H/skills/review/models.py`, `digest.py`).

use serde_json::{json, Map, Value};
use sha2::{Digest, Sha256};

pub const PACKAGE_SNAPSHOT_SCHEMA_VERSION: &str = "deerflow.skill-package-snapshot.v1";
pub const FACTS_SCHEMA_VERSION: &str = "deerflow.skill-review.facts.v1";
pub const REPORT_SCHEMA_VERSION: &str = "deerflow.skill-review.report.v1";

/// `PackageLimits`: DeerFlow's defaults. Every read is bounded by them before any byte is held:
/// an archive member is decompressed at most to the smaller of the per-file limit and what is
/// left of the total, plus one byte (so a zip bomb is detected, never inflated).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PackageLimits {
    pub max_files: usize,
    pub max_file_bytes: u64,
    pub max_total_bytes: u64,
}

pub const DEFAULT_PACKAGE_LIMITS: PackageLimits =
    PackageLimits { max_files: 4096, max_file_bytes: 64 * 1024 * 1024, max_total_bytes: 512 * 1024 * 1024 };

impl Default for PackageLimits {
    fn default() -> Self {
        DEFAULT_PACKAGE_LIMITS
    }
}

/// `stable_json_dumps`: `json.dumps(data, ensure_ascii=False, sort_keys=True,
/// separators=(",", ":"))`. Review data holds strings, integers, booleans and nulls only.
pub fn stable_json_dumps(value: &Value) -> String {
    let mut out = String::new();
    write_stable(value, &mut out);
    out
}

fn write_stable(value: &Value, out: &mut String) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(true) => out.push_str("true"),
        Value::Bool(false) => out.push_str("false"),
        Value::Number(n) => match (n.as_i64(), n.as_u64(), n.as_f64()) {
            (Some(i), _, _) => out.push_str(&i.to_string()),
            (_, Some(u), _) => out.push_str(&u.to_string()),
            (_, _, Some(f)) => toolhost_py::json::write_py_float(f, out),
            _ => out.push_str(&n.to_string()),
        },
        Value::String(s) => toolhost_py::json::write_py_str(s, out),
        Value::Array(items) => {
            out.push('[');
            for (i, v) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_stable(v, out);
            }
            out.push(']');
        }
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                toolhost_py::json::write_py_str(k, out);
                out.push(':');
                write_stable(&map[k.as_str()], out);
            }
            out.push('}');
        }
    }
}

/// `posixpath.normpath`.
pub fn posix_normpath(path: &str) -> String {
    crate::registry::normpath(path)
}

/// `normalize_relative_path`: a package-relative path, or DeerFlow's `ValueError` text.
pub fn normalize_relative_path(path: &str) -> Result<String, &'static str> {
    let replaced = path.replace('\\', "/");
    let raw = replaced.trim();
    if raw.is_empty() {
        return Err("path must not be empty");
    }
    if raw.starts_with('/') {
        return Err("absolute paths are not allowed");
    }
    let normalized = posix_normpath(raw);
    if normalized.is_empty() || normalized == "." {
        return Err("path must not resolve to package root");
    }
    if normalized.split('/').any(|p| p == ".." || p.is_empty()) {
        return Err("path must not contain parent-directory traversal");
    }
    Ok(normalized)
}

/// `make_finding` (source `review-core`, profile `deerflow` unless given).
#[derive(Debug, Clone)]
pub struct Finding {
    pub rule_id: String,
    pub source: &'static str,
    pub profile: &'static str,
    pub severity: &'static str,
    pub path: Option<String>,
    pub line: Option<u64>,
    pub message: String,
    pub remediation: String,
    pub evidence: Value,
    pub skillscan_severity: Option<&'static str>,
}

impl Finding {
    pub fn new(rule_id: &str, severity: &'static str, message: impl Into<String>, remediation: &str) -> Self {
        Self {
            rule_id: rule_id.to_string(),
            source: "review-core",
            profile: "deerflow",
            severity,
            path: None,
            line: None,
            message: message.into(),
            remediation: remediation.to_string(),
            evidence: Value::Null,
            skillscan_severity: None,
        }
    }

    pub fn path(mut self, path: impl Into<String>) -> Self {
        self.path = Some(path.into());
        self
    }

    pub fn evidence(mut self, evidence: impl Into<Value>) -> Self {
        self.evidence = evidence.into();
        self
    }

    pub fn to_json(&self) -> Value {
        let mut m = Map::new();
        m.insert("rule_id".into(), json!(self.rule_id));
        m.insert("source".into(), json!(self.source));
        m.insert("profile".into(), json!(self.profile));
        m.insert("severity".into(), json!(self.severity));
        m.insert("path".into(), json!(self.path));
        m.insert("line".into(), json!(self.line));
        m.insert("message".into(), json!(self.message));
        m.insert("remediation".into(), json!(self.remediation));
        m.insert("evidence".into(), self.evidence.clone());
        if let Some(s) = self.skillscan_severity {
            m.insert("skillscan_severity".into(), json!(s));
        }
        Value::Object(m)
    }
}

fn severity_rank(s: &str) -> u32 {
    match s {
        "blocker" => 0,
        "error" => 1,
        "warning" => 2,
        "info" => 3,
        _ => 99,
    }
}

/// `sort_findings` (stable, as Python's `sorted`).
pub fn sort_findings(findings: &mut [Finding]) {
    findings.sort_by(|a, b| {
        severity_rank(a.severity)
            .cmp(&severity_rank(b.severity))
            .then_with(|| a.path.as_deref().unwrap_or("").cmp(b.path.as_deref().unwrap_or("")))
            .then_with(|| a.line.unwrap_or(1_000_000_000).cmp(&b.line.unwrap_or(1_000_000_000)))
            .then_with(|| a.rule_id.cmp(&b.rule_id))
            .then_with(|| a.message.cmp(&b.message))
    });
}

/// `summarize_findings`.
pub fn summarize_findings(findings: &[Finding]) -> Value {
    let (mut b, mut e, mut w, mut i) = (0, 0, 0, 0);
    for f in findings {
        match f.severity {
            "blocker" => b += 1,
            "error" => e += 1,
            "warning" => w += 1,
            _ => i += 1,
        }
    }
    json!({"blockers": b, "errors": e, "warnings": w, "infos": i})
}

/// `compute_package_digest`: a host-path-independent sha256 over (kind, path, size, sha256) of
/// every file, records sorted, each prefixed with its length.
pub fn compute_package_digest(files: &[super::snapshot::FileEntry]) -> Result<String, &'static str> {
    let mut records: Vec<Vec<u8>> = Vec::with_capacity(files.len());
    for f in files {
        let path = normalize_relative_path(&f.path)?;
        let mut record = Vec::new();
        record.extend_from_slice(f.kind.as_str().as_bytes());
        record.push(0);
        record.extend_from_slice(path.as_bytes());
        record.push(0);
        record.extend_from_slice(f.size.to_string().as_bytes());
        record.push(0);
        record.extend_from_slice(f.sha256.as_bytes());
        records.push(record);
    }
    records.sort();
    let mut h = Sha256::new();
    for r in &records {
        h.update((r.len() as u64).to_be_bytes());
        h.update(r);
    }
    Ok(format!("sha256:{}", hex(&h.finalize())))
}

pub fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(DIGITS[(b >> 4) as usize] as char);
        s.push(DIGITS[(b & 15) as usize] as char);
    }
    s
}

pub fn sha256_hex(data: &[u8]) -> String {
    hex(&Sha256::digest(data))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_paths_normalize_like_deerflow() {
        assert_eq!(normalize_relative_path("a/./b//c"), Ok("a/b/c".into()));
        assert_eq!(normalize_relative_path("ok/../fine.txt"), Ok("fine.txt".into()));
        assert_eq!(normalize_relative_path("../x"), Err("path must not contain parent-directory traversal"));
        assert_eq!(normalize_relative_path("a/../../x"), Err("path must not contain parent-directory traversal"));
        assert_eq!(normalize_relative_path("/etc/passwd"), Err("absolute paths are not allowed"));
        assert_eq!(normalize_relative_path("\\etc"), Err("absolute paths are not allowed"));
        assert_eq!(normalize_relative_path("a/.."), Err("path must not resolve to package root"));
        assert_eq!(normalize_relative_path("  "), Err("path must not be empty"));
    }

    #[test]
    fn stable_dumps_sorts_keys_compactly() {
        let v = json!({"b": [1, "é\n", null], "a": {"y": true, "x": false}});
        assert_eq!(stable_json_dumps(&v), r#"{"a":{"x":false,"y":true},"b":[1,"é\n",null]}"#);
    }
}
