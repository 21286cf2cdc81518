//! DeerFlow's skills for toolhost (spec §9): SKILL.md parsing and validation, the skill registry
//! with enabled state and the file tools' disabled-skill gate, the `allowed-tools` policy of
//! active skills, the `skill_manage` tool for custom skills, and the
//! `review_skill_package` tool (static skill package review).

pub mod config;
pub mod custom;
pub mod frontmatter;
pub mod manage;
pub mod policy;
pub mod prompt;
pub mod registry;
pub mod review;
pub mod states;

pub use config::{SkillEvolutionConfig, SkillsConfig};
pub use frontmatter::{parse_skill_md, validate_skill_frontmatter, ParseError, SecretRequirement, SkillMeta};
pub use manage::{
    skill_manage_spec, ScanDecision, ScanResult, SkillContentScanner, SkillManageConfig, SkillManageTool,
    SKILL_MANAGE_TOOL_NAME,
};
pub use policy::{
    allowed_tool_names_for_skills, filter_tools_by_skill_allowed_tools, ActiveSkills, NamedTool, PolicySource,
    SkillToolPolicy, ALWAYS_AVAILABLE_BUILTIN_TOOL_NAMES,
};
pub use registry::{
    disabled_skill_message, read_skill_states, PublicSkillStates, Skill, SkillCategory, SkillRegistry, SkillStore,
    SkillsError, SkillsLayout, DEFAULT_SKILLS_CONTAINER_PATH,
};
pub use review::{ReviewSkillPackageTool, REVIEW_SKILL_PACKAGE_TOOL_NAME};
