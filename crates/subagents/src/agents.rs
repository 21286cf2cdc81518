//! Custom agents (DeerFlow `H/config/agents_config.py`): `<agents_dir>/<name>/config.yaml`
//! chooses the lead agent's tool set — `tool_groups` restricts config tools, `model` decides
//! `view_image`, `skills` (`null` = all, `[]` = none) the skills whose `allowed-tools` count.
//! The file store itself (what `setup_agent` / `update_agent` write) is
//! [`toolhost_builtins::AgentStore`].

use std::path::{Path, PathBuf};

pub use toolhost_builtins::agents::{validate_agent_name, AgentConfig, AgentStoreError};
use toolhost_builtins::AgentStore;

#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    #[error("{0}")]
    InvalidName(String),
    #[error("agent '{name}' not found: {} does not exist (setup_agent creates an agent; `toolhost agents` lists them)", .file.display())]
    NotFound { name: String, file: PathBuf },
    #[error("{}: {reason}", .file.display())]
    Invalid { file: PathBuf, reason: String },
}

/// The `config.yaml` of agent `name`.
pub fn config_file(agents_dir: &Path, name: &str) -> PathBuf {
    agents_dir.join(name).join("config.yaml")
}

/// Load agent `name` for a run: its name must be valid, its `config.yaml` must exist and its
/// fields have their types. Errors name the file and the field.
pub fn load_agent(agents_dir: &Path, name: &str) -> Result<AgentConfig, AgentError> {
    validate_agent_name(name).map_err(|e| AgentError::InvalidName(e.to_string()))?;
    let file = config_file(agents_dir, name);
    let store = AgentStore::new(agents_dir.to_path_buf(), agents_dir.to_path_buf());
    match store.load_config(name) {
        Ok(Some(config)) => Ok(config),
        Ok(None) => Err(AgentError::NotFound { name: name.to_string(), file }),
        Err(AgentStoreError::Parse { reason, .. }) => {
            Err(AgentError::Invalid { file, reason: format!("invalid agent config: {reason}") })
        }
        Err(e) => Err(AgentError::Invalid { file, reason: e.to_string() }),
    }
}

/// Every agent under `agents_dir` (directories holding a `config.yaml`), by name; an agent whose
/// config cannot be read is listed with its error.
pub fn list_agents(agents_dir: &Path) -> Vec<(String, Result<AgentConfig, AgentError>)> {
    let Ok(entries) = std::fs::read_dir(agents_dir) else { return Vec::new() };
    let mut names: Vec<String> = entries
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| validate_agent_name(n).is_ok() && config_file(agents_dir, n).is_file())
        .collect();
    names.sort();
    names.into_iter().map(|n| (n.clone(), load_agent(agents_dir, &n))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn load_and_errors() {
        let dir = tempfile::tempdir().unwrap();
        let agents = dir.path();
        std::fs::create_dir_all(agents.join("research")).unwrap();
        std::fs::write(
            agents.join("research/config.yaml"),
            "name: research\ndescription: Finds things\nmodel: m1\ntool_groups: [\"file:read\"]\nskills: []\n",
        )
        .unwrap();
        let a = load_agent(agents, "research").unwrap();
        assert_eq!(a.tool_groups, Some(vec!["file:read".to_string()]));
        assert_eq!(a.skills, Some(vec![]));
        assert_eq!(a.model.as_deref(), Some("m1"));

        let e = load_agent(agents, "nobody").unwrap_err().to_string();
        assert!(e.starts_with("agent 'nobody' not found: ") && e.contains("nobody/config.yaml does not exist"), "{e}");
        let e = load_agent(agents, "../x").unwrap_err().to_string();
        assert_eq!(e, "Invalid agent name '../x'. Must match pattern: ^[A-Za-z0-9-]+$");

        std::fs::create_dir_all(agents.join("broken")).unwrap();
        std::fs::write(agents.join("broken/config.yaml"), "tool_groups: file:read\n").unwrap();
        let e = load_agent(agents, "broken").unwrap_err().to_string();
        assert!(
            e.contains("broken/config.yaml: invalid agent config: ")
                && e.contains("tool_groups must be a list of strings"),
            "{e}"
        );

        let listed = list_agents(agents);
        let names: Vec<&str> = listed.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["broken", "research"]);
        assert!(listed[0].1.is_err() && listed[1].1.is_ok());
    }
}
