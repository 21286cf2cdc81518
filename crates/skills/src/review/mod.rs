//! DeerFlow's deterministic skill review (`H/skills/review/`) and the `review_skill_package`
//! tool: a static analysis of a skill package — structure, frontmatter, resource graph, eval
//! manifests, SkillScan rules — into review facts, a static report and Markdown renders. No
//! model is called and nothing in the package is executed, installed or extracted to disk.

pub mod analyzer;
pub mod models;
pub mod renderer;
pub mod skillscan;
pub mod snapshot;
pub mod tool;

pub use analyzer::analyze_skill_package;
pub use models::{stable_json_dumps, PackageLimits, DEFAULT_PACKAGE_LIMITS};
pub use tool::{
    review, review_skill_package_spec, ReviewArgs, ReviewError, ReviewSkillPackageTool, ReviewSources,
    REVIEW_SKILL_PACKAGE_TOOL_NAME,
};
