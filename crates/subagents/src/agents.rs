//! Custom agents (DeerFlow `H/config/agents_config.py`): `config.yaml` of agent `name` chooses the
//! lead agent's tool set — `tool_groups` restricts config tools, `model` decides `view_image`,
//! `skills` (`null` = all, `[]` = none) the skills whose `allowed-tools` count. Agents live where
//! DeerFlow's `setup_agent` and agents API write them, `<data>/users/<user_id>/agents/<name>/`,
//! with `<data>/agents/<name>/` read as DeerFlow's legacy fallback; the file store itself is
//! [`toolhost_builtins::AgentStore`].

use std::path::PathBuf;

pub use toolhost_builtins::agents::{validate_agent_name, AgentConfig, AgentStoreError, DEFAULT_USER_ID};
use toolhost_builtins::AgentStore;

#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    #[error("{0}")]
    InvalidName(String),
    #[error("agent '{name}' not found: neither {} nor the legacy {} exists (setup_agent creates an agent; `toolhost agents` lists them)", .file.display(), .legacy.display())]
    NotFound { name: String, file: PathBuf, legacy: PathBuf },
    #[error("{}: {reason}", .file.display())]
    Invalid { file: PathBuf, reason: String },
}

/// Load agent `name` for a run: its name (and the store's user id) must be valid, its
/// `config.yaml` must exist in the user's or the legacy layout and its fields have their types.
/// Errors name the file and the field.
pub fn load_agent(store: &AgentStore, name: &str) -> Result<AgentConfig, AgentError> {
    let invalid = |e: AgentStoreError| AgentError::InvalidName(e.to_string());
    let file = store.config_file(name).map_err(invalid)?;
    match store.load_config(name) {
        Ok(Some(config)) => Ok(config),
        Ok(None) => Err(AgentError::NotFound {
            name: name.to_string(),
            file,
            legacy: store.legacy_agent_dir(name).map_err(invalid)?.join("config.yaml"),
        }),
        Err(AgentStoreError::Parse { reason, .. }) => {
            Err(AgentError::Invalid { file, reason: format!("invalid agent config: {reason}") })
        }
        Err(e) => Err(AgentError::Invalid { file, reason: e.to_string() }),
    }
}

/// Every agent of the store's user (directories holding a `config.yaml`, per-user ones shadowing
/// legacy ones), by name; an agent whose config cannot be read is listed with its error.
pub fn list_agents(store: &AgentStore) -> Vec<(String, Result<AgentConfig, AgentError>)> {
    match store.list_names() {
        Ok(names) => names.into_iter().map(|n| (n.clone(), load_agent(store, &n))).collect(),
        Err(e) => vec![(store.user_id().to_string(), Err(AgentError::InvalidName(e.to_string())))],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn load_and_errors() {
        let dir = tempfile::tempdir().unwrap();
        let store = AgentStore::new(dir.path().to_path_buf(), DEFAULT_USER_ID);
        let agents = dir.path().join("users/default/agents");
        std::fs::create_dir_all(agents.join("research")).unwrap();
        std::fs::write(
            agents.join("research/config.yaml"),
            "name: research\ndescription: Finds things\nmodel: m1\ntool_groups: [\"file:read\"]\nskills: []\n",
        )
        .unwrap();
        let a = load_agent(&store, "research").unwrap();
        assert_eq!(a.tool_groups, Some(vec!["file:read".to_string()]));
        assert_eq!(a.skills, Some(vec![]));
        assert_eq!(a.model.as_deref(), Some("m1"));

        let e = load_agent(&store, "nobody").unwrap_err().to_string();
        assert!(
            e.starts_with("agent 'nobody' not found: neither ")
                && e.contains("users/default/agents/nobody/config.yaml nor the legacy ")
                && e.contains("/agents/nobody/config.yaml exists"),
            "{e}"
        );
        let e = load_agent(&store, "../x").unwrap_err().to_string();
        assert_eq!(e, "Invalid agent name '../x'. Must match pattern: ^[A-Za-z0-9-]+$");

        std::fs::create_dir_all(agents.join("broken")).unwrap();
        std::fs::write(agents.join("broken/config.yaml"), "tool_groups: file:read\n").unwrap();
        let e = load_agent(&store, "broken").unwrap_err().to_string();
        assert!(
            e.contains("broken/config.yaml: invalid agent config: ")
                && e.contains("tool_groups must be a list of strings"),
            "{e}"
        );

        // A legacy shared agent is listed too, unless the user has one of that name.
        for (name, description) in [("legacy", "old"), ("research", "shadowed")] {
            std::fs::create_dir_all(dir.path().join("agents").join(name)).unwrap();
            std::fs::write(
                dir.path().join("agents").join(name).join("config.yaml"),
                format!("description: {description}\n"),
            )
            .unwrap();
        }
        let listed = list_agents(&store);
        let names: Vec<&str> = listed.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["broken", "legacy", "research"]);
        assert!(listed[0].1.is_err());
        assert_eq!(listed[1].1.as_ref().unwrap().description, "old");
        assert_eq!(listed[2].1.as_ref().unwrap().description, "Finds things");
    }
}
