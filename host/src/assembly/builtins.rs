//! The builtins in DeerFlow's `BUILTIN_TOOLS` order, with their conditions (spec §1 step 4), and
//! the skills they and the skill policy read: the skill store, the public skills' enabled state
//! from `extensions_config.json`, and the disabled skills the file tools refuse.

use std::path::PathBuf;
use std::sync::Arc;

use toolhost_core::{SharedRoots, Tool};

use super::{Builtin, BuiltinCondition, Extensions};
use crate::config::AppConfig;
use crate::error::Problem;

/// DeerFlow's `BUILTIN_TOOLS` in order, with their conditions (spec §1 step 4).
/// `task` comes built: it shares its settings with the host that runs its subagents.
pub fn builtins(config: &AppConfig, skills: toolhost_skills::SkillStore, task: Arc<dyn Tool>) -> Vec<Builtin> {
    use toolhost_builtins::{AskClarificationTool, ListUploadedFilesTool, PresentFilesTool, ViewImageTool};
    let review = toolhost_skills::ReviewSkillPackageTool::new(Some(skills.clone()));
    let manage = toolhost_skills::SkillManageConfig {
        security_fail_closed: config.skill_evolution.security_fail_closed,
        ..toolhost_skills::SkillManageConfig::new(skills)
    };
    vec![
        Builtin { tool: Arc::new(PresentFilesTool::new()), condition: BuiltinCondition::Always },
        Builtin { tool: Arc::new(AskClarificationTool::new(false)), condition: BuiltinCondition::Always },
        Builtin { tool: Arc::new(review), condition: BuiltinCondition::Always },
        Builtin { tool: Arc::new(ListUploadedFilesTool::new()), condition: BuiltinCondition::UploadTool },
        Builtin {
            tool: Arc::new(toolhost_skills::SkillManageTool::new(manage)),
            condition: BuiltinCondition::SkillEvolution,
        },
        Builtin { tool: task, condition: BuiltinCondition::Subagents },
        Builtin { tool: Arc::new(ViewImageTool::new()), condition: BuiltinCondition::Vision },
    ]
}

/// The skills directory as a store (`<skills>/{public,custom,…}`).
pub fn skill_store(config: &AppConfig, shared: &SharedRoots) -> toolhost_skills::SkillStore {
    let root = shared.skills().map(|s| s.host.clone()).unwrap_or_else(|| PathBuf::from("/nonexistent-toolhost-skills"));
    toolhost_skills::SkillStore::new(
        toolhost_skills::SkillsLayout::new(root).with_container_path(config.skills.container_path.clone()),
    )
}

/// Public skills' enabled state from `extensions_config.json` `skills`.
pub fn public_skill_states(extensions: &Extensions) -> toolhost_skills::PublicSkillStates {
    match extensions {
        Extensions::None => toolhost_skills::PublicSkillStates::default(),
        Extensions::Loaded(e) => toolhost_skills::PublicSkillStates::from_extensions_skills(Some(
            &serde_json::Value::Object(e.skills.clone()),
        )),
        // DeerFlow's pydantic model refuses the whole file: every public skill is disabled.
        Extensions::Invalid(why) => toolhost_skills::PublicSkillStates::Unavailable(why.clone()),
    }
}

/// The container paths of disabled skills, for the file tools' disabled-skill gate. Read once
/// when the host opens; an unreadable state fails closed (every skill of that kind disabled).
pub fn disabled_skill_dirs(
    store: &toolhost_skills::SkillStore,
    public: &toolhost_skills::PublicSkillStates,
    problems: &mut Vec<Problem>,
) -> Vec<String> {
    if !store.layout().root.is_dir() {
        return Vec::new();
    }
    match store.load_registry(public) {
        Ok(registry) => {
            registry.skills.iter().filter(|s| !s.enabled).map(|s| s.container_path(&registry.container_path)).collect()
        }
        Err(e) => {
            problems.push(Problem::warning(format!("skills: {e}; treating skills as disabled")));
            vec![store.layout().container_path.clone()]
        }
    }
}
