//! The `<skill_system>` section of a system prompt (DeerFlow `H/agents/lead_agent/prompt.py`,
//! `get_skills_prompt_section`'s full-metadata path and `_get_cached_skills_prompt_section`):
//! the enabled skills an agent may use, with where their `SKILL.md` is, and the installed but
//! disabled ones it must not touch. A subagent's prompt carries it too.

use std::collections::BTreeSet;

use crate::registry::{SkillCategory, SkillRegistry};

/// `_build_skill_evolution_section`.
fn skill_evolution_section(enabled: bool) -> &'static str {
    if !enabled {
        return "";
    }
    "
## Skill Self-Evolution
After completing a task, consider creating or updating a skill when:
- The task required 5+ tool calls to resolve
- You overcame non-obvious errors or pitfalls
- The user corrected your approach and the corrected version worked
- You discovered a non-trivial, recurring workflow
If you used a skill and encountered issues not covered by it, patch it immediately.

**CRITICAL: You MUST use the `skill_manage` tool for ALL skill operations.**
- `skill_manage(action=\"create\", name=\"my-skill\", content=\"...\")` — Create a new skill
- `skill_manage(action=\"patch\", name=\"my-skill\", find=\"...\", replace=\"...\")` — Patch an existing skill
- `skill_manage(action=\"edit\", name=\"my-skill\", content=\"...\")` — Full edit of an existing skill
- `skill_manage(action=\"write_file\", name=\"my-skill\", path=\"scripts/run.py\", content=\"...\")` — Add supporting files
- `skill_manage(action=\"delete\", name=\"my-skill\")` — Delete a skill

**⛔ NEVER write SKILL.md files to `/mnt/user-data/workspace` or `/mnt/user-data/outputs`.**
Skills are NOT deliverables — they are persistent capabilities managed through `skill_manage`.
The tool stores skills in the per-user skills directory automatically; you do NOT need to specify a path.

Prefer patch over edit. Before creating a new skill, confirm with the user first.
Skip simple one-off tasks.
"
}

/// Python's `html.escape(text, quote=False)`.
fn escape(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

/// `_skill_mutability_label`.
fn mutability_label(category: SkillCategory) -> &'static str {
    match category {
        SkillCategory::Custom => "[custom, editable]",
        SkillCategory::Legacy => "[legacy, read-only]",
        _ => "[built-in]",
    }
}

/// `get_skills_prompt_section(available_skills)` on the full-metadata path: `available` limits
/// the skills shown (`None`: all); `""` when there is nothing to show.
pub fn skills_prompt_section(
    registry: &SkillRegistry,
    available: Option<&BTreeSet<String>>,
    skill_evolution: bool,
) -> String {
    let enabled: Vec<_> = registry.skills.iter().filter(|s| s.enabled).collect();
    let disabled: Vec<_> = registry.skills.iter().filter(|s| !s.enabled).collect();
    if enabled.is_empty() && disabled.is_empty() && !skill_evolution {
        return String::new();
    }
    let shown = |name: &str| available.is_none_or(|a| a.contains(name));
    if available.is_some() && !enabled.iter().any(|s| shown(s.name())) {
        return String::new();
    }
    if enabled.is_empty() && disabled.is_empty() && available.is_some() {
        return String::new();
    }
    let root = &registry.container_path;
    let items: Vec<String> = enabled
        .iter()
        .filter(|s| shown(s.name()))
        .map(|s| {
            format!(
                "    <skill>\n        <name>{}</name>\n        <description>{} {}</description>\n        <location>{}</location>\n    </skill>",
                escape(s.name()),
                escape(&s.meta.description),
                mutability_label(s.category),
                escape(&s.container_file_path(root))
            )
        })
        .collect();
    let skills_list = if items.is_empty() {
        String::new()
    } else {
        format!("<available_skills>\n{}\n</available_skills>", items.join("\n"))
    };
    let disabled_items: Vec<String> = disabled
        .iter()
        .filter(|s| shown(s.name()))
        .map(|s| format!("    - {} ({})", escape(s.name()), s.category.as_str()))
        .collect();
    let disabled_section = if disabled_items.is_empty() {
        String::new()
    } else {
        format!(
            "<disabled_skills>\nThe following skills are INSTALLED but DISABLED. You MUST NOT read,\nreference, or use any of these skills — including their SKILL.md,\nsupporting resources, or workflows — even if their files exist on disk.\nAccessing a disabled skill violates user preferences.\n{}\n</disabled_skills>",
            disabled_items.join("\n")
        )
    };
    format!(
        "<skill_system>
You have access to skills that provide optimized workflows for specific tasks. Each skill contains best practices, frameworks, and references to additional resources.

**Progressive Loading Pattern:**
1. When a user query matches a skill's use case, immediately call `read_file` on the skill's main file using the path attribute provided in the skill tag below
2. Read and understand the skill's workflow and instructions
3. The skill file contains references to external resources under the same folder
4. Load referenced resources only when needed during execution
5. Follow the skill's instructions precisely

**Explicit Slash Skill Activation:**
- If the user starts a request with `/<skill-name>`, that skill was explicitly requested for the current turn.
- Follow the activated skill before choosing a general workflow.
- The runtime injects the activated skill content for explicit slash activations; do not call `read_file` for that SKILL.md again unless the injected skill references supporting resources you need.

**Skills are located at:** {root}
{}
{skills_list}
{disabled_section}

</skill_system>",
        skill_evolution_section(skill_evolution)
    )
}
