//! Enabled state of skills: `extensions_config.json` `skills.{name}.enabled` for public skills
//! and the per-user `_skill_states.json` for the rest. Unreadable state is an error so every
//! caller can fail closed.

use std::collections::{BTreeMap, HashMap};
use std::fs;
use std::io;
use std::path::Path;

use serde_json::Value;

use crate::registry::SkillsError;

/// Enabled state of public skills: `extensions_config.json` `skills.{name}.enabled`, default
/// enabled. `Unavailable` (the config could not be read) makes every public skill disabled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PublicSkillStates {
    Loaded(BTreeMap<String, bool>),
    Unavailable(String),
}

impl Default for PublicSkillStates {
    fn default() -> Self {
        PublicSkillStates::Loaded(BTreeMap::new())
    }
}

impl PublicSkillStates {
    /// From the `skills` object of `extensions_config.json` (absent or null = no entries). An
    /// entry that is not `{enabled?: bool}` makes the whole config unusable, as DeerFlow's
    /// pydantic model would.
    pub fn from_extensions_skills(skills: Option<&Value>) -> Self {
        let mut map = BTreeMap::new();
        match skills {
            None | Some(Value::Null) => {}
            Some(Value::Object(entries)) => {
                for (name, entry) in entries {
                    let Value::Object(fields) = entry else {
                        return PublicSkillStates::Unavailable(format!("skills.{name} must be an object"));
                    };
                    let enabled = match fields.get("enabled") {
                        None => true,
                        Some(v) => match pydantic_bool(v) {
                            Some(b) => b,
                            None => {
                                return PublicSkillStates::Unavailable(format!(
                                    "skills.{name}.enabled must be a boolean"
                                ))
                            }
                        },
                    };
                    map.insert(name.clone(), enabled);
                }
            }
            Some(_) => return PublicSkillStates::Unavailable("skills must be an object".to_string()),
        }
        PublicSkillStates::Loaded(map)
    }

    /// `ExtensionsConfig.is_skill_enabled`: an explicit entry wins, otherwise enabled.
    pub fn is_enabled(&self, name: &str) -> Result<bool, SkillsError> {
        match self {
            PublicSkillStates::Loaded(map) => Ok(map.get(name).copied().unwrap_or(true)),
            PublicSkillStates::Unavailable(reason) => Err(SkillsError::PublicStatesUnavailable(reason.clone())),
        }
    }
}

/// pydantic's lax `bool`: booleans, 0/1 and the usual yes/no strings; anything else is invalid.
fn pydantic_bool(v: &Value) -> Option<bool> {
    match v {
        Value::Bool(b) => Some(*b),
        Value::Number(n) => match n.as_f64() {
            Some(1.0) => Some(true),
            Some(0.0) => Some(false),
            _ => None,
        },
        Value::String(s) => match s.to_ascii_lowercase().as_str() {
            "1" | "on" | "t" | "true" | "y" | "yes" => Some(true),
            "0" | "off" | "f" | "false" | "n" | "no" => Some(false),
            _ => None,
        },
        _ => None,
    }
}

/// `_skill_states.json`: `{name: {"enabled": bool}}`. A missing file means "all enabled"; a file
/// that cannot be read or parsed is an error, so callers fail closed.
pub fn read_skill_states(path: &Path) -> Result<HashMap<String, bool>, SkillsError> {
    let text = match fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(HashMap::new()),
        Err(source) => return Err(SkillsError::StatesIo { path: path.to_path_buf(), source }),
    };
    let invalid = |reason: String| SkillsError::StatesInvalid { path: path.to_path_buf(), reason };
    let doc: Value = serde_json::from_str(&text).map_err(|e| invalid(e.to_string()))?;
    let Value::Object(entries) = doc else { return Err(invalid("top level must be an object".into())) };
    let mut out = HashMap::new();
    for (name, entry) in entries {
        let enabled = match entry {
            Value::Object(m) => match m.get("enabled") {
                None => true,
                Some(Value::Bool(b)) => *b,
                Some(_) => return Err(invalid(format!("{name}.enabled must be a boolean"))),
            },
            _ => return Err(invalid(format!("{name} must be an object"))),
        };
        out.insert(name, enabled);
    }
    Ok(out)
}
