//! The per-call settings this component reads: the sandbox settings (limits, mounts, skills, the
//! write-size guard; typed in `toolhost:tool@0.2.0`, a JSON object in the conformance vectors) and
//! `ctx.config` (per-tool keys). Parsing is lenient on purpose: a missing or mistyped key falls
//! back to DeerFlow's default, the way DeerFlow's config loader behaves.

use serde_json::Value;

/// DeerFlow's default `read_file_output_max_chars`.
pub const DEFAULT_READ_FILE_MAX_CHARS: usize = 50_000;
/// DeerFlow's default `ls_output_max_chars`.
pub const DEFAULT_LS_MAX_CHARS: usize = 20_000;
/// DeerFlow's default skills container path.
pub const DEFAULT_SKILLS_CONTAINER_PATH: &str = "/mnt/skills";
/// The 80 KiB single-call cap of `write_file` (issue #3189).
pub const DEFAULT_WRITE_FILE_MAX_BYTES: i128 = 80 * 1024;

/// A configured custom mount, as the host exposes it at its container path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mount {
    pub container_path: String,
    pub read_only: bool,
}

/// The sandbox settings of one call (`ctx.sandbox`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxSettings {
    /// Head-truncation limit of `read_file` output in characters; 0 disables truncation.
    pub read_file_output_max_chars: usize,
    /// Head-truncation limit of `ls` output in characters; 0 disables truncation.
    pub ls_output_max_chars: usize,
    pub mounts: Vec<Mount>,
    pub skills_container_path: String,
    /// DeerFlow's `DEERFLOW_WRITE_FILE_MAX_BYTES` as the host was given it (raw text).
    pub write_file_max_bytes: Option<String>,
    /// Virtual directories of disabled skills, e.g. `/mnt/skills/public/some-skill`.
    pub disabled_skills: Vec<String>,
}

impl Default for SandboxSettings {
    fn default() -> Self {
        Self {
            read_file_output_max_chars: DEFAULT_READ_FILE_MAX_CHARS,
            ls_output_max_chars: DEFAULT_LS_MAX_CHARS,
            mounts: Vec::new(),
            skills_container_path: DEFAULT_SKILLS_CONTAINER_PATH.to_string(),
            write_file_max_bytes: None,
            disabled_skills: Vec::new(),
        }
    }
}

fn usize_key(v: &Value, key: &str, default: usize) -> usize {
    match v.get(key) {
        Some(Value::Number(n)) => n.as_u64().map(|n| usize::try_from(n).unwrap_or(usize::MAX)).unwrap_or(default),
        _ => default,
    }
}

impl SandboxSettings {
    /// Read the settings from a JSON object with the WIT record's fields (`snake_case`), as the
    /// conformance vectors write them and `toolhost:tool@0.1.0` sent them.
    pub fn from_json(v: &Value) -> Self {
        let d = Self::default();
        let mounts = v
            .get("mounts")
            .and_then(Value::as_array)
            .map(|list| {
                list.iter()
                    .filter_map(|m| {
                        let container_path = m.get("container_path")?.as_str()?.to_string();
                        let read_only = m.get("read_only").and_then(Value::as_bool).unwrap_or(false);
                        Some(Mount { container_path, read_only })
                    })
                    .collect()
            })
            .unwrap_or_default();
        let skills_container_path = v
            .get("skills_container_path")
            .and_then(Value::as_str)
            .map(str::to_string)
            .unwrap_or(d.skills_container_path);
        let write_file_max_bytes = match v.get("write_file_max_bytes") {
            Some(Value::String(s)) => Some(s.clone()),
            Some(Value::Number(n)) => Some(n.to_string()),
            _ => None,
        };
        let disabled_skills = v
            .get("disabled_skills")
            .and_then(Value::as_array)
            .map(|l| l.iter().filter_map(Value::as_str).map(str::to_string).collect())
            .unwrap_or_default();
        Self {
            read_file_output_max_chars: usize_key(v, "read_file_output_max_chars", d.read_file_output_max_chars),
            ls_output_max_chars: usize_key(v, "ls_output_max_chars", d.ls_output_max_chars),
            mounts,
            skills_container_path,
            write_file_max_bytes,
            disabled_skills,
        }
        .normalized()
    }

    /// The settings as the tools use them, whatever their source: a skills path that is not
    /// absolute falls back to the default and loses a trailing `/`; disabled skills lose theirs,
    /// and empty ones are dropped.
    pub fn normalized(mut self) -> Self {
        self.skills_container_path = if self.skills_container_path.starts_with('/') {
            let t = self.skills_container_path.trim_end_matches('/');
            if t.is_empty() {
                "/".to_string()
            } else {
                t.to_string()
            }
        } else {
            DEFAULT_SKILLS_CONTAINER_PATH.to_string()
        };
        self.disabled_skills = std::mem::take(&mut self.disabled_skills)
            .into_iter()
            .map(|s| s.trim_end_matches('/').to_string())
            .filter(|s| !s.is_empty())
            .collect();
        self
    }

    /// The active `write_file` cap: the env value parsed like Python's `int()`, the default when
    /// absent or not an integer. A value `<= 0` disables the guard.
    pub fn write_cap(&self) -> i128 {
        match &self.write_file_max_bytes {
            None => DEFAULT_WRITE_FILE_MAX_BYTES,
            Some(raw) => python_int(raw).unwrap_or(DEFAULT_WRITE_FILE_MAX_BYTES),
        }
    }
}

/// Python's `int(str)` for base 10: surrounding whitespace, an optional sign, digits with single
/// underscores between them. Saturates instead of growing without bound.
pub fn python_int(raw: &str) -> Option<i128> {
    let s = raw.trim();
    let (neg, digits) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    if digits.is_empty() || digits.starts_with('_') || digits.ends_with('_') || digits.contains("__") {
        return None;
    }
    let mut value: i128 = 0;
    for c in digits.chars() {
        if c == '_' {
            continue;
        }
        let d = c.to_digit(10)?;
        value = value.saturating_mul(10).saturating_add(i128::from(d));
    }
    Some(if neg { -value } else { value })
}

/// A tool's own config keys (`ctx.config`): only `max_results` is read, by `glob` and `grep`.
/// Like DeerFlow, a non-integer value is ignored.
pub fn config_max_results(config: &Value) -> Option<i64> {
    match config.get("max_results") {
        Some(Value::Number(n)) => n.as_i64(),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn python_int_rules() {
        assert_eq!(python_int(" 2000 "), Some(2000));
        assert_eq!(python_int("-1"), Some(-1));
        assert_eq!(python_int("1_000"), Some(1000));
        assert_eq!(python_int("lots"), None);
        assert_eq!(python_int("1__0"), None);
        assert_eq!(python_int(""), None);
    }

    #[test]
    fn settings_defaults_and_keys() {
        let s = SandboxSettings::from_json(&serde_json::json!({}));
        assert_eq!(s, SandboxSettings::default());
        assert_eq!(s.write_cap(), 81920);
        let s = SandboxSettings::from_json(&serde_json::json!({
            "ls_output_max_chars": 10, "mounts": [{"container_path": "/mnt/data", "read_only": true}],
            "write_file_max_bytes": "lots", "disabled_skills": ["/mnt/skills/public/x/"]
        }));
        assert_eq!(s.ls_output_max_chars, 10);
        assert_eq!(s.mounts, vec![Mount { container_path: "/mnt/data".into(), read_only: true }]);
        assert_eq!(s.write_cap(), 81920);
        assert_eq!(s.disabled_skills, vec!["/mnt/skills/public/x".to_string()]);
    }

    #[test]
    fn typed_settings_are_normalized_like_json() {
        let raw = SandboxSettings {
            skills_container_path: "/mnt/sk/".into(),
            disabled_skills: vec!["/mnt/sk/a/".into(), "/".into(), String::new()],
            ..SandboxSettings::default()
        };
        let json = SandboxSettings::from_json(&serde_json::json!({
            "skills_container_path": "/mnt/sk/", "disabled_skills": ["/mnt/sk/a/", "/", ""]
        }));
        assert_eq!(raw.normalized(), json);
        assert_eq!(json.skills_container_path, "/mnt/sk");
        assert_eq!(json.disabled_skills, vec!["/mnt/sk/a".to_string()]);
        let relative = SandboxSettings { skills_container_path: "skills".into(), ..SandboxSettings::default() };
        assert_eq!(relative.normalized().skills_container_path, DEFAULT_SKILLS_CONTAINER_PATH);
    }
}
