//! The `skills:` and `skill_evolution:` sections of `config.yaml`, with DeerFlow's defaults.

use serde::Deserialize;

/// `skills:`: where the skills live on the host and in the sandbox.
#[derive(Debug, Clone, Deserialize)]
#[serde(default)]
pub struct SkillsConfig {
    /// The host directory of the skills (relative to the config's directory); `None`: the default.
    pub path: Option<String>,
    /// Where the skills appear in the sandbox (`/mnt/skills`).
    pub container_path: String,
    /// Whether skills are discovered on demand rather than listed up front.
    pub deferred_discovery: bool,
}

impl Default for SkillsConfig {
    fn default() -> Self {
        Self { path: None, container_path: "/mnt/skills".into(), deferred_discovery: false }
    }
}

/// `skill_evolution:`: whether the agent may write skills (`skill_manage`), and how those writes
/// are scanned.
#[derive(Debug, Clone, Deserialize)]
#[serde(default)]
pub struct SkillEvolutionConfig {
    /// Adds `skill_manage` to the tools.
    pub enabled: bool,
    /// The model that moderates skill writes.
    pub moderation_model_name: Option<String>,
    /// With no content scan available, block every `skill_manage` write (DeerFlow's default).
    pub security_fail_closed: bool,
}

impl Default for SkillEvolutionConfig {
    fn default() -> Self {
        Self { enabled: false, moderation_model_name: None, security_fail_closed: true }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_deerflows() {
        let s: SkillsConfig = serde_json::from_str("{}").unwrap();
        assert_eq!((s.path, s.container_path.as_str(), s.deferred_discovery), (None, "/mnt/skills", false));
        let e: SkillEvolutionConfig = serde_json::from_str(r#"{"enabled": true}"#).unwrap();
        assert!(e.enabled && e.security_fail_closed && e.moderation_model_name.is_none());
        assert!(serde_json::from_str::<SkillsConfig>(r#"{"container_path": 3}"#).is_err());
    }
}
