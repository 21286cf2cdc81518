//! `setup_agent` and `update_agent` (DeerFlow `H/tools/builtins/setup_agent_tool.py`,
//! `update_agent_tool.py`) over DeerFlow's file agent store (`H/persistence/agents/file.py`):
//! an agent lives in `<base>/users/<user_id>/agents/<name>/` (`config.yaml`, `SOUL.md`, written
//! together through temp files and renames); `<base>/agents/<name>/` is the legacy shared layout,
//! still read but never written.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use async_trait::async_trait;
use serde_json::Value;
use toolhost_core::state::py_repr_str;
use toolhost_core::{CallContext, StateUpdate, Tool, ToolOutcome, ToolSpec};

use crate::{args_object, builtin_spec, invalid_args};

pub const SOUL_FILENAME: &str = "SOUL.md";
const CONFIG_FILENAME: &str = "config.yaml";
/// `config.yaml` keys `update_agent` manages; every other key is carried over untouched.
const MANAGED_KEYS: [&str; 5] = ["name", "description", "model", "tool_groups", "skills"];
/// Channels whose messages come from untrusted commenters (`_UNTRUSTED_CHANNELS`).
const UNTRUSTED_CHANNELS: [&str; 1] = ["github"];

#[derive(Debug, thiserror::Error)]
pub enum AgentStoreError {
    #[error("Invalid agent name '{0}'. Must match pattern: ^[A-Za-z0-9-]+$")]
    InvalidName(String),
    /// DeerFlow's `_validate_user_id`; the id is shown as Python's `repr`.
    #[error("Invalid user_id {}: only alphanumeric characters, hyphens, and underscores are allowed.", py_repr_str(.0))]
    InvalidUserId(String),
    /// `update_agent` on an agent only the legacy shared layout has.
    #[error("Agent '{0}' only exists in the legacy shared layout and is not scoped to a user. Run scripts/migrate_user_isolation.py to move legacy agents into the per-user layout before updating.")]
    LegacyOnly(String),
    /// Paths are given relative to the store so no host path reaches the model.
    #[error("cannot write {file}: {source}")]
    Write { file: String, source: std::io::Error },
    #[error("cannot read {file}: {source}")]
    Read { file: String, source: std::io::Error },
    #[error("Failed to parse agent config {file}: {reason}")]
    Parse { file: String, reason: String },
}

/// DeerFlow's `validate_agent_name`: `^[A-Za-z0-9-]+$`, since the name becomes a directory.
pub fn validate_agent_name(name: &str) -> Result<&str, AgentStoreError> {
    let ok = !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-');
    if ok {
        Ok(name)
    } else {
        Err(AgentStoreError::InvalidName(name.to_string()))
    }
}

/// DeerFlow's `DEFAULT_USER_ID`: the user of a run that names none (no-auth mode).
pub const DEFAULT_USER_ID: &str = "default";

/// DeerFlow's `_validate_user_id`: `^[A-Za-z0-9_-]+$`, since the id becomes a directory.
pub fn validate_user_id(user_id: &str) -> Result<&str, AgentStoreError> {
    let ok = !user_id.is_empty() && user_id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if ok {
        Ok(user_id)
    } else {
        Err(AgentStoreError::InvalidUserId(user_id.to_string()))
    }
}

/// A custom agent's `config.yaml` as `update_agent` reads it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct AgentConfig {
    pub name: String,
    pub description: String,
    pub model: Option<String>,
    pub tool_groups: Option<Vec<String>>,
    pub skills: Option<Vec<String>>,
    /// Keys the tools do not manage (e.g. `github:`), kept as written.
    pub other: BTreeMap<String, serde_yaml::Value>,
}

/// The on-disk agent store of one user (DeerFlow's `FileAgentStore` with `paths.base_dir`).
#[derive(Debug, Clone)]
pub struct AgentStore {
    base_dir: PathBuf,
    user_id: String,
}

impl AgentStore {
    /// The agents of `user_id` under `base_dir` (DeerFlow's base dir: toolhost's data dir), which
    /// also holds the default agent's `SOUL.md`. An invalid user id is reported by each use.
    pub fn new(base_dir: PathBuf, user_id: impl Into<String>) -> Self {
        Self { base_dir, user_id: user_id.into() }
    }

    /// The user whose agents these are.
    pub fn user_id(&self) -> &str {
        &self.user_id
    }

    /// `paths.user_agents_dir(user_id)`: `<base>/users/<user_id>/agents`.
    pub fn user_agents_dir(&self) -> Result<PathBuf, AgentStoreError> {
        Ok(self.base_dir.join("users").join(validate_user_id(&self.user_id)?).join("agents"))
    }

    /// `paths.agents_dir`: the legacy shared layout, `<base>/agents`.
    pub fn legacy_agents_dir(&self) -> PathBuf {
        self.base_dir.join("agents")
    }

    /// `paths.user_agent_dir`: where the agent is written (its name lower-cased, as DeerFlow's).
    pub fn user_agent_dir(&self, name: &str) -> Result<PathBuf, AgentStoreError> {
        Ok(self.user_agents_dir()?.join(validate_agent_name(name)?.to_lowercase()))
    }

    /// `paths.agent_dir`: the agent's legacy shared directory.
    pub fn legacy_agent_dir(&self, name: &str) -> Result<PathBuf, AgentStoreError> {
        Ok(self.legacy_agents_dir().join(validate_agent_name(name)?.to_lowercase()))
    }

    /// `resolve_agent_dir`: the per-user directory when it holds a `config.yaml`, else the legacy
    /// one when that does, else the per-user one (where a new agent goes).
    pub fn agent_dir(&self, name: &str) -> Result<PathBuf, AgentStoreError> {
        let user = self.user_agent_dir(name)?;
        if user.join(CONFIG_FILENAME).exists() {
            return Ok(user);
        }
        let legacy = self.legacy_agent_dir(name)?;
        if legacy.join(CONFIG_FILENAME).exists() {
            return Ok(legacy);
        }
        Ok(user)
    }

    /// `FileAgentStore.list`: the agents with a `config.yaml`, per-user ones first and shadowing
    /// legacy ones of the same directory name, sorted by name.
    pub fn list_names(&self) -> Result<Vec<String>, AgentStoreError> {
        let mut seen = std::collections::BTreeSet::new();
        for root in [self.user_agents_dir()?, self.legacy_agents_dir()] {
            let Ok(entries) = std::fs::read_dir(&root) else { continue };
            for e in entries.filter_map(Result::ok) {
                let Ok(name) = e.file_name().into_string() else { continue };
                if e.file_type().is_ok_and(|t| t.is_dir())
                    && validate_agent_name(&name).is_ok()
                    && e.path().join(CONFIG_FILENAME).is_file()
                {
                    seen.insert(name);
                }
            }
        }
        Ok(seen.into_iter().collect())
    }

    /// The `config.yaml` the agent is read from (see [`agent_dir`](Self::agent_dir)).
    pub fn config_file(&self, name: &str) -> Result<PathBuf, AgentStoreError> {
        Ok(self.agent_dir(name)?.join(CONFIG_FILENAME))
    }

    /// The agent's config, or `None` when it has no `config.yaml`.
    pub fn load_config(&self, name: &str) -> Result<Option<AgentConfig>, AgentStoreError> {
        let file = self.agent_dir(name)?.join(CONFIG_FILENAME);
        let shown = format!("{name}/{CONFIG_FILENAME}");
        let text = match std::fs::read_to_string(&file) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(source) => return Err(AgentStoreError::Read { file: shown, source }),
        };
        let parse_err = |reason: String| AgentStoreError::Parse { file: shown.clone(), reason };
        let value: serde_yaml::Value = serde_yaml::from_str(&text).map_err(|e| parse_err(e.to_string()))?;
        let map = match value {
            serde_yaml::Value::Null => serde_yaml::Mapping::new(),
            serde_yaml::Value::Mapping(m) => m,
            _ => return Err(parse_err("the top level is not a mapping".into())),
        };
        let mut config = AgentConfig { name: name.to_string(), ..Default::default() };
        for (k, v) in map {
            let Some(key) = k.as_str().map(str::to_string) else { continue };
            match key.as_str() {
                "name" => config.name = yaml_string(&v).ok_or_else(|| parse_err("name must be a string".into()))?,
                "description" => {
                    config.description =
                        yaml_string(&v).ok_or_else(|| parse_err("description must be a string".into()))?
                }
                "model" => {
                    config.model = yaml_opt_string(&v).map_err(|_| parse_err("model must be a string".into()))?
                }
                "tool_groups" => {
                    config.tool_groups =
                        yaml_opt_list(&v).map_err(|_| parse_err("tool_groups must be a list of strings".into()))?
                }
                "skills" => {
                    config.skills =
                        yaml_opt_list(&v).map_err(|_| parse_err("skills must be a list of strings".into()))?
                }
                _ => {
                    config.other.insert(key, v);
                }
            }
        }
        Ok(Some(config))
    }

    /// Upsert: write `config` (when given) as the whole `config.yaml`, keys sorted as PyYAML
    /// writes them, and `soul` (when given) as `SOUL.md`. Both are staged in temp files and then
    /// renamed into place; a directory created by a failed call is removed again.
    pub fn update(
        &self,
        name: &str,
        config: Option<&BTreeMap<String, serde_yaml::Value>>,
        soul: Option<&str>,
    ) -> Result<(), AgentStoreError> {
        let dir = self.user_agent_dir(name)?;
        let is_new = !dir.exists();
        let result = (|| {
            std::fs::create_dir_all(&dir)
                .map_err(|source| AgentStoreError::Write { file: format!("{name}/"), source })?;
            let mut staged: Vec<(PathBuf, PathBuf, String)> = Vec::new();
            if let Some(config) = config {
                let yaml = serde_yaml::to_string(config).map_err(|e| AgentStoreError::Parse {
                    file: format!("{name}/{CONFIG_FILENAME}"),
                    reason: e.to_string(),
                })?;
                staged.push(stage(&dir, name, CONFIG_FILENAME, &yaml)?);
            }
            if let Some(soul) = soul {
                staged.push(stage(&dir, name, SOUL_FILENAME, soul)?);
            }
            for (tmp, dest, shown) in &staged {
                std::fs::rename(tmp, dest).map_err(|source| AgentStoreError::Write { file: shown.clone(), source })?;
            }
            Ok(())
        })();
        if result.is_err() && is_new {
            let _ = std::fs::remove_dir_all(&dir);
        }
        result
    }

    /// The default agent's `SOUL.md` under the base dir (`setup_agent` without an agent name).
    pub fn write_default_soul(&self, soul: &str) -> Result<(), AgentStoreError> {
        std::fs::create_dir_all(&self.base_dir)
            .map_err(|source| AgentStoreError::Write { file: SOUL_FILENAME.into(), source })?;
        let (tmp, dest, shown) = stage(&self.base_dir, "", SOUL_FILENAME, soul)?;
        std::fs::rename(&tmp, &dest).map_err(|source| AgentStoreError::Write { file: shown, source })
    }
}

fn stage(dir: &Path, name: &str, file: &str, content: &str) -> Result<(PathBuf, PathBuf, String), AgentStoreError> {
    let shown = if name.is_empty() { file.to_string() } else { format!("{name}/{file}") };
    // Unique per call, process and machine: two writers (or replicas sharing `<data>`) never
    // share a temp file.
    let tmp = dir.join(toolhost_core::tempname::temp_file_name(file));
    std::fs::write(&tmp, content).map_err(|source| AgentStoreError::Write { file: shown.clone(), source })?;
    Ok((tmp, dir.join(file), shown))
}

fn yaml_string(v: &serde_yaml::Value) -> Option<String> {
    v.as_str().map(str::to_string)
}

fn yaml_opt_string(v: &serde_yaml::Value) -> Result<Option<String>, ()> {
    match v {
        serde_yaml::Value::Null => Ok(None),
        serde_yaml::Value::String(s) => Ok(Some(s.clone())),
        _ => Err(()),
    }
}

fn yaml_opt_list(v: &serde_yaml::Value) -> Result<Option<Vec<String>>, ()> {
    match v {
        serde_yaml::Value::Null => Ok(None),
        serde_yaml::Value::Sequence(items) => {
            items.iter().map(|i| i.as_str().map(str::to_string).ok_or(())).collect::<Result<_, _>>().map(Some)
        }
        _ => Err(()),
    }
}

fn yaml_strings(items: &[String]) -> serde_yaml::Value {
    serde_yaml::Value::Sequence(items.iter().map(|s| serde_yaml::Value::String(s.clone())).collect())
}

/// An optional string argument; `None` for absent or null.
fn opt_string(tool: &str, obj: &serde_json::Map<String, Value>, key: &str) -> Result<Option<String>, Box<ToolOutcome>> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(other) => Err(Box::new(invalid_args(tool, format!("{key} must be a string, got {other}")))),
    }
}

fn opt_string_list(
    tool: &str,
    obj: &serde_json::Map<String, Value>,
    key: &str,
) -> Result<Option<Vec<String>>, Box<ToolOutcome>> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Array(items)) => items
            .iter()
            .map(|v| v.as_str().map(str::to_string))
            .collect::<Option<Vec<_>>>()
            .map(Some)
            .ok_or_else(|| Box::new(invalid_args(tool, format!("{key} must be a list of strings")))),
        Some(other) => Err(Box::new(invalid_args(tool, format!("{key} must be a list of strings, got {other}")))),
    }
}

/// `"null"`, `"none"`, `"undefined"` (any case, trimmed): `update_agent` treats them as omitted.
fn is_nullish(v: &Value) -> bool {
    v.as_str().is_some_and(|s| matches!(s.trim().to_lowercase().as_str(), "null" | "none" | "undefined"))
}

/// `setup_agent` (bootstrap flow): writes the new custom agent's `config.yaml` and `SOUL.md`
/// (or the default agent's `SOUL.md` when the run has no agent name) and records
/// `created_agent_name`.
pub struct SetupAgentTool {
    spec: ToolSpec,
    store: AgentStore,
    agent_name: Option<String>,
}

impl SetupAgentTool {
    pub fn new(store: AgentStore, agent_name: Option<String>) -> Self {
        Self { spec: builtin_spec("setup_agent"), store, agent_name }
    }
}

#[async_trait]
impl Tool for SetupAgentTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn call(&self, _ctx: &CallContext, args: Value) -> ToolOutcome {
        const TOOL: &str = "setup_agent";
        let parsed = (|| {
            let obj = args_object(TOOL, &args)?;
            let soul =
                opt_string(TOOL, obj, "soul")?.ok_or_else(|| Box::new(invalid_args(TOOL, "soul is required")))?;
            let description = opt_string(TOOL, obj, "description")?
                .ok_or_else(|| Box::new(invalid_args(TOOL, "description is required")))?;
            let skills = opt_string_list(TOOL, obj, "skills")?;
            Ok::<_, Box<ToolOutcome>>((soul, description, skills))
        })();
        let (soul, description, skills) = match parsed {
            Ok(p) => p,
            Err(outcome) => return *outcome,
        };
        if soul.trim().is_empty() {
            return ToolOutcome::error("Error: soul content is empty; refusing to create agent with an empty SOUL.md");
        }
        let result = match self.agent_name.as_deref() {
            Some(name) => validate_agent_name(name).and_then(|name| {
                let mut config = BTreeMap::new();
                config.insert("name".to_string(), serde_yaml::Value::String(name.to_string()));
                if !description.is_empty() {
                    config.insert("description".to_string(), serde_yaml::Value::String(description.clone()));
                }
                if let Some(skills) = &skills {
                    config.insert("skills".to_string(), yaml_strings(skills));
                }
                self.store.update(name, Some(&config), Some(&soul))
            }),
            None => self.store.write_default_soul(&soul),
        };
        // DeerFlow formats a missing name as Python's None.
        let shown = self.agent_name.as_deref().unwrap_or("None");
        match result {
            Ok(()) => {
                tracing::info!(agent = ?self.agent_name, "[agent_creator] Created agent");
                ToolOutcome::text(format!("Agent '{shown}' created successfully!"))
                    .with_update(StateUpdate { created_agent_name: self.agent_name.clone(), ..Default::default() })
            }
            Err(e) => {
                tracing::error!(agent = ?self.agent_name, error = %e, "[agent_creator] Failed to create agent");
                ToolOutcome::error(format!("Error: {e}"))
            }
        }
    }
}

/// `update_agent` (inside a custom agent's chat): persists the fields passed, keeps the rest.
pub struct UpdateAgentTool {
    spec: ToolSpec,
    store: AgentStore,
    agent_name: Option<String>,
    channel_name: Option<String>,
    model_names: Vec<String>,
}

impl UpdateAgentTool {
    pub fn new(
        store: AgentStore,
        agent_name: Option<String>,
        channel_name: Option<String>,
        model_names: Vec<String>,
    ) -> Self {
        Self { spec: builtin_spec("update_agent"), store, agent_name, channel_name, model_names }
    }
}

#[async_trait]
impl Tool for UpdateAgentTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn call(&self, _ctx: &CallContext, args: Value) -> ToolOutcome {
        const TOOL: &str = "update_agent";
        let err = |m: String| ToolOutcome::error(format!("Error: {m}"));
        let obj = match args_object(TOOL, &args) {
            Ok(o) => o.clone(),
            Err(outcome) => return *outcome,
        };
        // Null-like strings count as omitted, before any type check (pydantic BeforeValidator).
        let obj: serde_json::Map<String, Value> =
            obj.into_iter().map(|(k, v)| if is_nullish(&v) { (k, Value::Null) } else { (k, v) }).collect();
        let parsed = (|| {
            Ok::<_, Box<ToolOutcome>>((
                opt_string(TOOL, &obj, "soul")?,
                opt_string(TOOL, &obj, "description")?,
                opt_string_list(TOOL, &obj, "skills")?,
                opt_string_list(TOOL, &obj, "tool_groups")?,
                opt_string(TOOL, &obj, "model")?,
            ))
        })();
        let (soul, description, skills, tool_groups, model) = match parsed {
            Ok(p) => p,
            Err(outcome) => return *outcome,
        };

        if let Some(channel) = self.channel_name.as_deref().filter(|c| UNTRUSTED_CHANNELS.contains(c)) {
            return err(format!(
                "update_agent is disabled on the {} channel. Self-mutation requests must come from an operator-trusted surface (chat UI or the HTTP API), not a webhook fan-out.",
                py_repr_str(channel)
            ));
        }
        if soul.is_none() && description.is_none() && skills.is_none() && tool_groups.is_none() && model.is_none() {
            return err("No fields provided. Pass at least one of: soul, description, skills, tool_groups, model. Omit unchanged fields instead of passing null-like strings such as \"null\", \"none\", or \"undefined\".".into());
        }
        if soul.as_deref().is_some_and(|s| s.trim().is_empty()) {
            return err("soul content is empty; refusing to update agent with an empty SOUL.md. Omit the soul field if you do not want to change it.".into());
        }
        let Some(raw_name) = self.agent_name.as_deref() else {
            return err("update_agent is only available inside a custom agent's chat. There is no agent_name in the current runtime context, so there is nothing to update. If you are inside the bootstrap flow, use setup_agent instead.".into());
        };
        let name = match validate_agent_name(raw_name) {
            Ok(n) => n,
            Err(e) => return err(e.to_string()),
        };
        if let Some(m) = model.as_deref().filter(|m| !self.model_names.iter().any(|n| n == m)) {
            return err(format!("Unknown model '{m}'. Pass a model name that exists in config.yaml's models section."));
        }
        // DeerFlow never writes over a legacy shared agent: it asks for the migration first.
        let legacy_only = match (self.store.user_agent_dir(name), self.store.legacy_agent_dir(name)) {
            (Ok(user), Ok(legacy)) => !user.join(CONFIG_FILENAME).exists() && legacy.join(CONFIG_FILENAME).exists(),
            (Err(e), _) | (_, Err(e)) => return err(e.to_string()),
        };
        if legacy_only {
            return err(AgentStoreError::LegacyOnly(name.to_string()).to_string());
        }
        let existing = match self.store.load_config(name) {
            Ok(Some(c)) => c,
            Ok(None) => {
                return err(format!(
                    "Agent '{name}' does not exist for the current user. Use setup_agent to create a new agent first."
                ))
            }
            Err(e) => return err(format!("Agent '{name}' has an unreadable config: {e}")),
        };

        let mut updated: Vec<&str> = Vec::new();
        let mut config: BTreeMap<String, serde_yaml::Value> = BTreeMap::new();
        config.insert("name".into(), serde_yaml::Value::String(name.to_string()));
        let new_description = description.clone().unwrap_or_else(|| existing.description.clone());
        config.insert("description".into(), serde_yaml::Value::String(new_description));
        if description.as_ref().is_some_and(|d| *d != existing.description) {
            updated.push("description");
        }
        if let Some(m) = model.clone().or_else(|| existing.model.clone()) {
            config.insert("model".into(), serde_yaml::Value::String(m));
        }
        if model.is_some() && model != existing.model {
            updated.push("model");
        }
        if let Some(g) = tool_groups.clone().or_else(|| existing.tool_groups.clone()) {
            config.insert("tool_groups".into(), yaml_strings(&g));
        }
        if tool_groups.is_some() && tool_groups != existing.tool_groups {
            updated.push("tool_groups");
        }
        if let Some(s) = skills.clone().or_else(|| existing.skills.clone()) {
            config.insert("skills".into(), yaml_strings(&s));
        }
        if skills.is_some() && skills != existing.skills {
            updated.push("skills");
        }
        for (k, v) in &existing.other {
            if !MANAGED_KEYS.contains(&k.as_str()) {
                config.entry(k.clone()).or_insert_with(|| v.clone());
            }
        }
        let config_changed = !updated.is_empty();
        if soul.is_some() {
            updated.push("soul");
        }
        if config_changed || soul.is_some() {
            if let Err(e) = self.store.update(name, config_changed.then_some(&config), soul.as_deref()) {
                tracing::error!(agent = name, error = %e, "[update_agent] Failed to update agent");
                return err(format!("Failed to update agent '{name}': {e}"));
            }
        }
        if updated.is_empty() {
            return ToolOutcome::text(format!(
                "No changes applied to agent '{name}'. The provided values matched the existing config."
            ));
        }
        tracing::info!(agent = name, fields = ?updated, "[update_agent] Updated agent");
        ToolOutcome::text(format!(
            "Agent '{name}' updated successfully. Changed: {}. The new configuration takes effect on the next user turn.",
            updated.join(", ")
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::thread;
    use serde_json::json;

    fn store(dir: &Path) -> AgentStore {
        AgentStore::new(dir.to_path_buf(), DEFAULT_USER_ID)
    }

    #[tokio::test]
    async fn setup_agent_creates_config_and_soul() {
        let (dir, ctx) = thread();
        let tool = SetupAgentTool::new(store(dir.path()), Some("code-helper".into()));
        let out =
            tool.call(&ctx, json!({"soul": "# Soul\nBe kind.", "description": "Helps", "skills": ["a", "b"]})).await;
        assert!(!out.is_error(), "{}", out.text_content());
        assert_eq!(out.text_content(), "Agent 'code-helper' created successfully!");
        assert_eq!(out.update.created_agent_name.as_deref(), Some("code-helper"));
        let agent = dir.path().join("users/default/agents/code-helper");
        assert_eq!(std::fs::read_to_string(agent.join("SOUL.md")).unwrap(), "# Soul\nBe kind.");
        let cfg: serde_yaml::Value =
            serde_yaml::from_str(&std::fs::read_to_string(agent.join("config.yaml")).unwrap()).unwrap();
        assert_eq!(cfg["name"], "code-helper");
        assert_eq!(cfg["description"], "Helps");
        assert_eq!(cfg["skills"][1], "b");
        let keys: Vec<&str> = cfg.as_mapping().unwrap().keys().filter_map(|k| k.as_str()).collect();
        assert_eq!(keys, ["description", "name", "skills"], "sorted like yaml.dump");
        // No temp files left behind.
        assert_eq!(std::fs::read_dir(&agent).unwrap().count(), 2);
    }

    #[tokio::test]
    async fn setup_agent_errors_and_default_soul() {
        let (dir, ctx) = thread();
        let out = SetupAgentTool::new(store(dir.path()), Some("x".into()))
            .call(&ctx, json!({"soul": "  \n", "description": "d"}))
            .await;
        assert_eq!(out.text_content(), "Error: soul content is empty; refusing to create agent with an empty SOUL.md");
        assert!(!dir.path().join("users/default/agents/x").exists());
        let out = SetupAgentTool::new(store(dir.path()), Some("../evil".into()))
            .call(&ctx, json!({"soul": "s", "description": "d"}))
            .await;
        assert_eq!(out.text_content(), "Error: Invalid agent name '../evil'. Must match pattern: ^[A-Za-z0-9-]+$");
        assert!(out.update.created_agent_name.is_none());
        let out =
            SetupAgentTool::new(store(dir.path()), None).call(&ctx, json!({"soul": "global", "description": ""})).await;
        assert_eq!(out.text_content(), "Agent 'None' created successfully!");
        assert_eq!(std::fs::read_to_string(dir.path().join("SOUL.md")).unwrap(), "global");
        let out = SetupAgentTool::new(store(dir.path()), None).call(&ctx, json!({"soul": "s"})).await;
        assert!(out.is_error() && out.text_content().contains("description is required"));
    }

    #[tokio::test]
    async fn update_agent_changes_only_what_is_passed() {
        let (dir, ctx) = thread();
        let s = store(dir.path());
        std::fs::create_dir_all(dir.path().join("users/default/agents/bot")).unwrap();
        std::fs::write(
            dir.path().join("users/default/agents/bot/config.yaml"),
            "name: bot\ndescription: old\ngithub:\n  repo: a/b\nskills: [x]\n",
        )
        .unwrap();
        std::fs::write(dir.path().join("users/default/agents/bot/SOUL.md"), "old soul").unwrap();
        let tool = UpdateAgentTool::new(s.clone(), Some("bot".into()), None, vec!["gpt".into()]);

        let out = tool
            .call(&ctx, json!({"description": "new", "model": "gpt", "skills": ["x"], "tool_groups": "null"}))
            .await;
        assert_eq!(
            out.text_content(),
            "Agent 'bot' updated successfully. Changed: description, model. The new configuration takes effect on the next user turn."
        );
        let cfg = s.load_config("bot").unwrap().unwrap();
        assert_eq!((cfg.description.as_str(), cfg.model.as_deref()), ("new", Some("gpt")));
        assert_eq!(cfg.skills, Some(vec!["x".to_string()]));
        assert_eq!(cfg.other["github"]["repo"], "a/b", "unmanaged keys survive");
        assert_eq!(std::fs::read_to_string(dir.path().join("users/default/agents/bot/SOUL.md")).unwrap(), "old soul");

        let out = tool.call(&ctx, json!({"soul": "new soul"})).await;
        assert!(out.text_content().contains("Changed: soul."));
        assert_eq!(std::fs::read_to_string(dir.path().join("users/default/agents/bot/SOUL.md")).unwrap(), "new soul");

        let out = tool.call(&ctx, json!({"description": "new"})).await;
        assert_eq!(
            out.text_content(),
            "No changes applied to agent 'bot'. The provided values matched the existing config."
        );
        assert!(!out.is_error());
    }

    #[tokio::test]
    async fn update_agent_errors() {
        let (dir, ctx) = thread();
        let s = store(dir.path());
        let tool = |name: Option<&str>, channel: Option<&str>| {
            UpdateAgentTool::new(s.clone(), name.map(str::to_string), channel.map(str::to_string), vec!["gpt".into()])
        };
        let cases = [
            (tool(Some("bot"), Some("github")), json!({"soul": "x"}), "Error: update_agent is disabled on the 'github' channel. Self-mutation requests must come from an operator-trusted surface (chat UI or the HTTP API), not a webhook fan-out."),
            (tool(Some("bot"), None), json!({"soul": "None", "model": " UNDEFINED "}), "Error: No fields provided. Pass at least one of: soul, description, skills, tool_groups, model. Omit unchanged fields instead of passing null-like strings such as \"null\", \"none\", or \"undefined\"."),
            (tool(Some("bot"), None), json!({"soul": " "}), "Error: soul content is empty; refusing to update agent with an empty SOUL.md. Omit the soul field if you do not want to change it."),
            (tool(None, None), json!({"soul": "s"}), "Error: update_agent is only available inside a custom agent's chat. There is no agent_name in the current runtime context, so there is nothing to update. If you are inside the bootstrap flow, use setup_agent instead."),
            (tool(Some("a b"), None), json!({"soul": "s"}), "Error: Invalid agent name 'a b'. Must match pattern: ^[A-Za-z0-9-]+$"),
            (tool(Some("bot"), None), json!({"model": "nope"}), "Error: Unknown model 'nope'. Pass a model name that exists in config.yaml's models section."),
            (tool(Some("bot"), None), json!({"soul": "s"}), "Error: Agent 'bot' does not exist for the current user. Use setup_agent to create a new agent first."),
        ];
        for (t, args, expected) in cases {
            let out = t.call(&ctx, args).await;
            assert!(out.is_error());
            assert_eq!(out.text_content(), expected);
        }
        std::fs::create_dir_all(dir.path().join("users/default/agents/bot")).unwrap();
        std::fs::write(dir.path().join("users/default/agents/bot/config.yaml"), "description: [unclosed").unwrap();
        let out = tool(Some("bot"), None).call(&ctx, json!({"soul": "s"})).await;
        assert!(out
            .text_content()
            .starts_with("Error: Agent 'bot' has an unreadable config: Failed to parse agent config bot/config.yaml:"));
        assert!(!out.text_content().contains(&*dir.path().to_string_lossy()), "no host path");
        let out = tool(Some("bot"), None).call(&ctx, json!({"skills": "a"})).await;
        assert!(out.is_error() && out.text_content().contains("skills must be a list of strings"));
    }

    #[tokio::test]
    async fn the_per_user_layout_is_written_and_the_legacy_one_read() {
        let (dir, ctx) = thread();
        let s = store(dir.path());
        // A legacy shared agent (DeerFlow before user isolation) is read...
        std::fs::create_dir_all(dir.path().join("agents/old")).unwrap();
        std::fs::write(dir.path().join("agents/old/config.yaml"), "name: old\ndescription: legacy\n").unwrap();
        assert_eq!(s.load_config("old").unwrap().unwrap().description, "legacy");
        assert_eq!(s.agent_dir("old").unwrap(), dir.path().join("agents/old"));
        // ...but update_agent refuses it, as DeerFlow's does.
        let out = UpdateAgentTool::new(s.clone(), Some("old".into()), None, vec![])
            .call(&ctx, json!({"description": "new"}))
            .await;
        assert_eq!(
            out.text_content(),
            "Error: Agent 'old' only exists in the legacy shared layout and is not scoped to a user. Run scripts/migrate_user_isolation.py to move legacy agents into the per-user layout before updating."
        );
        // setup_agent writes the per-user layout, under the lower-cased name; it then shadows the
        // legacy agent of that name.
        let out = SetupAgentTool::new(s.clone(), Some("Old".into()))
            .call(&ctx, json!({"soul": "s", "description": "mine"}))
            .await;
        assert!(!out.is_error(), "{}", out.text_content());
        assert!(dir.path().join("users/default/agents/old/config.yaml").is_file());
        assert_eq!(s.load_config("old").unwrap().unwrap().description, "mine");
        assert_eq!(s.list_names().unwrap(), ["old"]);
        // Another user sees only the legacy agent.
        let other = AgentStore::new(dir.path().to_path_buf(), "alice");
        assert_eq!(other.load_config("old").unwrap().unwrap().description, "legacy");
        let bad = AgentStore::new(dir.path().to_path_buf(), "a/b");
        assert_eq!(
            bad.load_config("old").unwrap_err().to_string(),
            "Invalid user_id 'a/b': only alphanumeric characters, hyphens, and underscores are allowed."
        );
    }
}
