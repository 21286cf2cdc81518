//! The per-call settings this component reads: the sandbox settings (limits, mounts, skills, the
//! write-size guard; typed in `toolhost:tool@0.2.0`, a JSON object in the conformance vectors) and
//! `ctx.config` (per-tool keys). Parsing is lenient on purpose: a missing or mistyped key falls
//! back to DeerFlow's default, the way DeerFlow's config loader behaves.

use serde_json::Value;

/// DeerFlow's default `read_file_output_max_chars`.
pub const DEFAULT_READ_FILE_MAX_CHARS: u64 = 50_000;
/// DeerFlow's default `ls_output_max_chars`.
pub const DEFAULT_LS_MAX_CHARS: u64 = 20_000;
/// DeerFlow's default skills container path.
pub const DEFAULT_SKILLS_CONTAINER_PATH: &str = "/mnt/skills";
/// The 80 KiB single-call cap of `write_file` (issue #3189).
pub const DEFAULT_WRITE_FILE_MAX_BYTES: i128 = 80 * 1024;

/// The sandbox settings of one call (`ctx.sandbox`) and a configured mount: the guest SDK's types,
/// the one guest copy of the WIT's `sandbox-settings` record.
pub use toolhost_sdk::{Mount, SandboxSettings};

/// A limit in characters as this target counts them: one past `usize` means "no practical limit".
fn chars(n: u64) -> usize {
    usize::try_from(n).unwrap_or(usize::MAX)
}

/// What sandbox-fs reads of the settings beyond the record's fields: DeerFlow's lenient JSON
/// reading, the normalization every source goes through, the output limits in characters and the
/// active `write_file` cap.
pub trait SandboxSettingsExt: Sized {
    /// Read the settings from a JSON object with the WIT record's fields (`snake_case`), as the
    /// conformance vectors write them and `toolhost:tool@0.1.0` sent them.
    fn from_json(v: &Value) -> Self;
    /// The settings as the tools use them, whatever their source: a skills path that is not
    /// absolute falls back to the default and loses a trailing `/`; disabled skills lose theirs,
    /// and empty ones are dropped.
    fn normalized(self) -> Self;
    /// The active `write_file` cap: the env value parsed like Python's `int()`, the default when
    /// absent or not an integer. A value `<= 0` disables the guard.
    fn write_cap(&self) -> i128;
    /// `read_file_output_max_chars` as a character count; 0 disables the cut.
    fn read_file_max_chars(&self) -> usize;
    /// `ls_output_max_chars` as a character count; 0 disables the cut.
    fn ls_max_chars(&self) -> usize;
}

fn u64_key(v: &Value, key: &str, default: u64) -> u64 {
    match v.get(key) {
        Some(Value::Number(n)) => n.as_u64().unwrap_or(default),
        _ => default,
    }
}

impl SandboxSettingsExt for SandboxSettings {
    fn from_json(v: &Value) -> Self {
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
            read_file_output_max_chars: u64_key(v, "read_file_output_max_chars", d.read_file_output_max_chars),
            ls_output_max_chars: u64_key(v, "ls_output_max_chars", d.ls_output_max_chars),
            mounts,
            skills_container_path,
            write_file_max_bytes,
            disabled_skills,
        }
        .normalized()
    }

    fn normalized(mut self) -> Self {
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

    fn write_cap(&self) -> i128 {
        match &self.write_file_max_bytes {
            None => DEFAULT_WRITE_FILE_MAX_BYTES,
            Some(raw) => python_int(raw).unwrap_or(DEFAULT_WRITE_FILE_MAX_BYTES),
        }
    }

    fn read_file_max_chars(&self) -> usize {
        chars(self.read_file_output_max_chars)
    }

    fn ls_max_chars(&self) -> usize {
        chars(self.ls_output_max_chars)
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
    fn the_sdk_defaults_are_deerflows() {
        let d = SandboxSettings::default();
        assert_eq!(
            (d.read_file_output_max_chars, d.ls_output_max_chars),
            (DEFAULT_READ_FILE_MAX_CHARS, DEFAULT_LS_MAX_CHARS)
        );
        assert_eq!(d.skills_container_path, DEFAULT_SKILLS_CONTAINER_PATH);
        assert_eq!((d.read_file_max_chars(), d.ls_max_chars()), (50_000, 20_000));
        assert_eq!(SandboxSettings { ls_output_max_chars: u64::MAX, ..d }.ls_max_chars(), usize::MAX);
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
