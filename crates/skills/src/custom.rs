//! The editable custom-skill tree on disk (DeerFlow's `SkillStorage` write side): name and
//! support-path validation, atomic writes confined to the skill directory, removal, and the
//! per-skill history log. Blocking I/O; `skill_manage` runs it off the async executor.

// Python's `repr()` of a string, for messages that quote a path that way.
use std::fs;
use std::io::{self, Write};
use std::path::{Component, Path, PathBuf};
use std::sync::OnceLock;
use toolhost_core::state::py_repr_str as py_repr;

use regex::Regex;
use serde_json::Value;

use crate::frontmatter::validate_skill_frontmatter;
use crate::registry::{SkillsLayout, SKILL_MD_FILE};

/// Support files live in one of these directories of a skill.
pub const ALLOWED_SUPPORT_SUBDIRS: [&str; 4] = ["assets", "references", "scripts", "templates"];

/// A failure as DeerFlow raises it: the Python exception class the model sees, and its text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{class}: {message}")]
pub struct ManageError {
    pub class: &'static str,
    pub message: String,
}

impl ManageError {
    pub fn value(message: impl Into<String>) -> Self {
        Self { class: "ValueError", message: message.into() }
    }

    pub fn not_found(message: impl Into<String>) -> Self {
        Self { class: "FileNotFoundError", message: message.into() }
    }

    /// An I/O failure, named by its Python class. The host path is left out on purpose: tool
    /// output never shows host paths.
    pub fn io(what: &str, err: &io::Error) -> Self {
        let class = match err.kind() {
            io::ErrorKind::NotFound => "FileNotFoundError",
            io::ErrorKind::PermissionDenied => "PermissionError",
            io::ErrorKind::AlreadyExists => "FileExistsError",
            io::ErrorKind::IsADirectory => "IsADirectoryError",
            io::ErrorKind::NotADirectory => "NotADirectoryError",
            io::ErrorKind::InvalidData => "UnicodeDecodeError",
            _ => "OSError",
        };
        Self { class, message: format!("{what}: {}", err.kind()) }
    }
}

fn skill_name_re() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| Regex::new(r"\A[a-z0-9]+(?:-[a-z0-9]+)*\z").expect("static regex"))
}

/// `SkillStorage.validate_skill_name`: strip, hyphen-case, at most 64 characters.
pub fn validate_skill_name(name: &str) -> Result<String, ManageError> {
    let normalized = name.trim();
    if !skill_name_re().is_match(normalized) {
        return Err(ManageError::value(
            "Skill name must be hyphen-case using lowercase letters, digits, and hyphens only.",
        ));
    }
    if normalized.chars().count() > 64 {
        return Err(ManageError::value("Skill name must be 64 characters or fewer."));
    }
    Ok(normalized.to_string())
}

/// `validate_skill_markdown_content`: the strict frontmatter check plus "the name in the file is
/// the name asked for".
pub fn validate_skill_markdown_content(name: &str, content: &str) -> Result<(), ManageError> {
    let name = validate_skill_name(name)?;
    let parsed = validate_skill_frontmatter(content).map_err(ManageError::value)?;
    if parsed != name {
        return Err(ManageError::value(format!(
            "Frontmatter name '{parsed}' must match requested skill name '{name}'."
        )));
    }
    Ok(())
}

/// `windows_incompatible_segment`: names that alias devices or lose characters on Windows.
pub fn windows_incompatible_segment(segment: &str) -> Option<&'static str> {
    if matches!(segment, "" | "." | "..") {
        return None;
    }
    if segment.ends_with(' ') || segment.ends_with('.') {
        return Some("trailing dot or space");
    }
    let stem = segment.split('.').next().unwrap_or_default().to_uppercase();
    let reserved = matches!(stem.as_str(), "CON" | "PRN" | "AUX" | "NUL" | "CONIN$" | "CONOUT$")
        || ["COM", "LPT"].iter().any(|p| {
            stem.strip_prefix(p)
                .is_some_and(|d| matches!(d, "1" | "2" | "3" | "4" | "5" | "6" | "7" | "8" | "9" | "¹" | "²" | "³"))
        });
    reserved.then_some("reserved Windows device name")
}

/// `Path.resolve()` (non-strict): the deepest existing ancestor canonicalised, the rest
/// appended, so a symlink anywhere on the way is followed.
pub fn resolve_lenient(path: &Path) -> PathBuf {
    let mut existing = path.to_path_buf();
    let mut rest: Vec<std::ffi::OsString> = Vec::new();
    loop {
        if let Ok(real) = existing.canonicalize() {
            let mut out = real;
            for part in rest.iter().rev() {
                out.push(part);
            }
            return out;
        }
        match (existing.file_name().map(|n| n.to_os_string()), existing.parent()) {
            (Some(name), Some(parent)) => {
                rest.push(name);
                existing = parent.to_path_buf();
            }
            _ => return path.to_path_buf(),
        }
    }
}

/// Python `Path(p).parts` for a relative POSIX path: empty and `.` segments vanish.
fn path_parts(rel: &str) -> Vec<&str> {
    rel.split('/').filter(|p| !p.is_empty() && *p != ".").collect()
}

/// Operations on `custom/<name>/…`.
#[derive(Debug, Clone)]
pub struct CustomSkills {
    pub layout: SkillsLayout,
}

impl CustomSkills {
    pub fn skill_dir(&self, name: &str) -> PathBuf {
        self.layout.custom_root.join(name)
    }

    pub fn exists(&self, name: &str) -> bool {
        self.skill_dir(name).join(SKILL_MD_FILE).exists()
    }

    /// Public, or a shared (legacy) custom skill: both are read-only here.
    pub fn read_only_exists(&self, name: &str) -> bool {
        self.is_public(name) || self.is_legacy(name)
    }

    fn is_public(&self, name: &str) -> bool {
        self.layout.public_root().join(name).join(SKILL_MD_FILE).exists()
    }

    fn is_legacy(&self, name: &str) -> bool {
        self.layout.legacy_root.as_ref().is_some_and(|r| r.join(name).join(SKILL_MD_FILE).exists())
    }

    fn is_integration(&self, name: &str) -> bool {
        let Ok(providers) = fs::read_dir(&self.layout.integrations_root) else { return false };
        providers.filter_map(Result::ok).any(|p| p.path().join(name).join(SKILL_MD_FILE).exists())
    }

    /// `ensure_custom_skill_is_editable` with DeerFlow's per-category messages.
    pub fn ensure_editable(&self, name: &str) -> Result<(), ManageError> {
        if self.exists(name) {
            return Ok(());
        }
        if self.is_public(name) {
            return Err(ManageError::value(format!(
                "'{name}' is a built-in skill. Use the skill_manage tool to create your own version — it will shadow the built-in one."
            )));
        }
        if self.is_legacy(name) {
            return Err(ManageError::value(format!(
                "'{name}' is a legacy shared skill (not editable). To customise it, create your own version with the same name — it will shadow the shared one."
            )));
        }
        if self.is_integration(name) {
            return Err(ManageError::value(format!(
                "'{name}' is a managed integration skill and cannot be edited. Create a custom skill with another name if you need a modified workflow."
            )));
        }
        Err(ManageError::not_found(format!("Custom skill '{name}' not found.")))
    }

    pub fn read_skill_md(&self, name: &str) -> Result<String, ManageError> {
        if !self.exists(name) {
            return Err(ManageError::not_found(format!("Custom skill '{name}' not found.")));
        }
        fs::read_to_string(self.skill_dir(name).join(SKILL_MD_FILE))
            .map_err(|e| ManageError::io("cannot read SKILL.md", &e))
    }

    /// `ensure_safe_support_path`: a file under one of [`ALLOWED_SUPPORT_SUBDIRS`] that stays
    /// there after symlinks are resolved. Portability is not enforced for removal, so a file
    /// stored before the rule can still be deleted.
    pub fn safe_support_path(&self, name: &str, rel: &str, enforce_portability: bool) -> Result<PathBuf, ManageError> {
        let skill_dir = resolve_lenient(&self.skill_dir(name));
        if rel.is_empty() || rel.ends_with('/') {
            return Err(ManageError::value("Supporting file path must include a filename."));
        }
        if rel.starts_with('/') {
            return Err(ManageError::value("Supporting file path must be relative."));
        }
        let parts = path_parts(rel);
        if parts.contains(&"..") {
            return Err(ManageError::value("Supporting file path must not contain parent-directory traversal."));
        }
        if enforce_portability {
            for part in &parts {
                if let Some(reason) = windows_incompatible_segment(part) {
                    return Err(ManageError::value(format!(
                        "Supporting file path is not portable to Windows: {} ({reason})",
                        py_repr(rel)
                    )));
                }
            }
        }
        let top = parts.first().copied().unwrap_or_default();
        if !ALLOWED_SUPPORT_SUBDIRS.contains(&top) {
            return Err(ManageError::value(format!(
                "Supporting files must live under one of: {}.",
                ALLOWED_SUPPORT_SUBDIRS.join(", ")
            )));
        }
        if parts.len() < 2 {
            return Err(ManageError::value(format!("Supporting file path must name a file inside '{top}/'.")));
        }
        let target = resolve_lenient(&parts.iter().fold(skill_dir.clone(), |p, s| p.join(s)));
        let allowed_root = resolve_lenient(&skill_dir.join(top));
        if !target.starts_with(&allowed_root) || target == allowed_root {
            return Err(ManageError::value("Supporting file path must stay within the selected support directory."));
        }
        Ok(target)
    }

    /// `write_custom_skill`: atomic (temp file + rename) write of `custom/<name>/<rel>`, which
    /// must resolve inside the skill directory.
    pub fn write(&self, name: &str, rel: &str, content: &str) -> Result<(), ManageError> {
        if rel.is_empty() {
            return Err(ManageError::value("relative_path must not be empty."));
        }
        let base = resolve_lenient(&self.skill_dir(name));
        let target = resolve_lenient(&base.join(rel));
        let inside = target.starts_with(&base) && !target.components().any(|c| c == Component::ParentDir);
        if !inside {
            return Err(ManageError::value("relative_path must resolve within the skill directory."));
        }
        let parent = target
            .parent()
            .ok_or_else(|| ManageError::value("relative_path must resolve within the skill directory."))?;
        fs::create_dir_all(parent).map_err(|e| ManageError::io("cannot create skill directory", &e))?;
        let file_name = target.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        // Unique per call, process and machine, so two writers (replicas sharing the skills
        // directory included) never share a temp file.
        let tmp = parent.join(toolhost_core::tempname::temp_file_name(&file_name));
        let result = (|| {
            let mut f = fs::File::create(&tmp)?;
            f.write_all(content.as_bytes())?;
            f.sync_all()?;
            fs::rename(&tmp, &target)
        })();
        if let Err(e) = result {
            let _ = fs::remove_file(&tmp);
            return Err(ManageError::io("cannot write skill file", &e));
        }
        Ok(())
    }

    /// `remove_custom_skill_file`: delete one support file, returning its previous text (`None`
    /// for a binary file; that only feeds the history record).
    pub fn remove_support_file(&self, name: &str, rel: &str) -> Result<Option<String>, ManageError> {
        let target = self.safe_support_path(name, rel, false)?;
        if target.is_dir() {
            return Err(ManageError::value(format!("Supporting file path '{rel}' is a directory, not a file.")));
        }
        if !target.exists() {
            return Err(ManageError::not_found(format!("Supporting file '{rel}' not found for skill '{name}'.")));
        }
        let previous = read_optional_text(&target);
        fs::remove_file(&target).map_err(|e| ManageError::io("cannot remove supporting file", &e))?;
        Ok(previous)
    }

    /// `delete_custom_skill`: the history record (with the last SKILL.md) first, then the
    /// directory; an operator-linked package directory is unlinked, never followed.
    pub fn delete(&self, name: &str, history: Option<Value>) -> Result<(), ManageError> {
        self.ensure_editable(name)?;
        if let Some(mut record) = history {
            let prev = self.read_skill_md(name)?;
            if let Value::Object(m) = &mut record {
                m.insert("prev_content".into(), Value::String(prev));
            }
            if let Err(e) = self.append_history(name, &record) {
                // A read-only history dir must not keep the skill alive.
                if e.class != "PermissionError" {
                    return Err(e);
                }
                tracing::warn!("skipping delete history for custom skill {name}: {e}");
            }
        }
        let dir = self.skill_dir(name);
        let is_link = fs::symlink_metadata(&dir).map(|m| m.file_type().is_symlink()).unwrap_or(false);
        let result = if is_link {
            fs::remove_file(&dir)
        } else if dir.exists() {
            fs::remove_dir_all(&dir)
        } else {
            Ok(())
        };
        result.map_err(|e| ManageError::io("cannot delete custom skill", &e))
    }

    /// Append one JSON line `{"ts": …, **record}` to `custom/.history/<name>.jsonl`.
    pub fn append_history(&self, name: &str, record: &Value) -> Result<(), ManageError> {
        let mut payload = serde_json::Map::new();
        payload.insert("ts".into(), Value::String(utc_isoformat(std::time::SystemTime::now())));
        if let Value::Object(m) = record {
            payload.extend(m.clone());
        }
        let path = self.layout.history_file(name);
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent).map_err(|e| ManageError::io("cannot create history directory", &e))?;
        }
        let mut line = python_json(&Value::Object(payload));
        line.push('\n');
        let mut f = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(|e| ManageError::io("cannot open skill history", &e))?;
        f.write_all(line.as_bytes()).map_err(|e| ManageError::io("cannot write skill history", &e))
    }

    /// The history records of a skill, oldest first.
    pub fn read_history(&self, name: &str) -> Result<Vec<Value>, ManageError> {
        let text = match fs::read_to_string(self.layout.history_file(name)) {
            Ok(t) => t,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(ManageError::io("cannot read skill history", &e)),
        };
        text.lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| serde_json::from_str(l).map_err(|e| ManageError::value(format!("invalid history line: {e}"))))
            .collect()
    }
}

/// A file's UTF-8 text, or `None` when it is missing or not text.
pub fn read_optional_text(path: &Path) -> Option<String> {
    fs::read(path).ok().and_then(|b| String::from_utf8(b).ok())
}

/// `json.dumps(value, ensure_ascii=False)`: Python's `", "` and `": "` separators.
pub fn python_json(value: &Value) -> String {
    match value {
        Value::Array(items) => format!("[{}]", items.iter().map(python_json).collect::<Vec<_>>().join(", ")),
        Value::Object(m) => format!(
            "{{{}}}",
            m.iter()
                .map(|(k, v)| format!("{}: {}", Value::String(k.clone()), python_json(v)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        scalar => scalar.to_string(),
    }
}

pub use toolhost_py::datetime::utc_isoformat;

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, UNIX_EPOCH};

    #[test]
    fn names() {
        assert_eq!(validate_skill_name("  my-skill-2 ").unwrap(), "my-skill-2");
        for bad in ["", "My", "a_b", "-a", "a-", "a--b", "a/b", "../x"] {
            assert_eq!(
                validate_skill_name(bad).unwrap_err().message,
                "Skill name must be hyphen-case using lowercase letters, digits, and hyphens only.",
                "{bad}"
            );
        }
        assert_eq!(
            validate_skill_name(&"a".repeat(65)).unwrap_err().message,
            "Skill name must be 64 characters or fewer."
        );
    }

    #[test]
    fn windows_segments() {
        assert_eq!(windows_incompatible_segment("nul.txt"), Some("reserved Windows device name"));
        assert_eq!(windows_incompatible_segment("COM¹"), Some("reserved Windows device name"));
        assert_eq!(windows_incompatible_segment("a."), Some("trailing dot or space"));
        assert_eq!(windows_incompatible_segment("console.md"), None);
        assert_eq!(windows_incompatible_segment("com10"), None);
    }

    #[test]
    fn python_formats() {
        assert_eq!(python_json(&serde_json::json!({"a": [1, "é"], "b": null})), r#"{"a": [1, "é"], "b": null}"#);
        assert_eq!(py_repr("it's"), "\"it's\"");
        assert_eq!(py_repr("a\\b"), "'a\\\\b'");
        let t = UNIX_EPOCH + Duration::from_micros(1_764_446_100_123_456);
        assert_eq!(utc_isoformat(t), "2025-11-29T19:55:00.123456+00:00");
        assert_eq!(utc_isoformat(UNIX_EPOCH + Duration::from_secs(951_782_400)), "2000-02-29T00:00:00+00:00");
    }

    #[test]
    fn support_paths() {
        let dir = tempfile::tempdir().unwrap();
        let custom = CustomSkills { layout: SkillsLayout::new(dir.path()) };
        fs::create_dir_all(custom.skill_dir("s").join("scripts")).unwrap();
        let err = |rel: &str, portable: bool| custom.safe_support_path("s", rel, portable).unwrap_err().message;
        assert_eq!(err("", true), "Supporting file path must include a filename.");
        assert_eq!(err("scripts/", true), "Supporting file path must include a filename.");
        assert_eq!(err("/etc/passwd", true), "Supporting file path must be relative.");
        assert_eq!(err("scripts/../../x", true), "Supporting file path must not contain parent-directory traversal.");
        assert_eq!(
            err("scripts/nul.sh", true),
            "Supporting file path is not portable to Windows: 'scripts/nul.sh' (reserved Windows device name)"
        );
        assert_eq!(
            err("SKILL.md", true),
            "Supporting files must live under one of: assets, references, scripts, templates."
        );
        assert_eq!(err("./scripts", true), "Supporting file path must name a file inside 'scripts/'.");
        assert!(custom.safe_support_path("s", "scripts/nul.sh", false).is_ok());
        assert!(custom.safe_support_path("s", "./scripts//run.sh", true).unwrap().ends_with("custom/s/scripts/run.sh"));
        #[cfg(unix)]
        {
            let outside = dir.path().join("outside");
            fs::create_dir_all(&outside).unwrap();
            std::os::unix::fs::symlink(&outside, custom.skill_dir("s").join("scripts/link")).unwrap();
            assert_eq!(
                err("scripts/link/x.sh", true),
                "Supporting file path must stay within the selected support directory."
            );
        }
    }
}
