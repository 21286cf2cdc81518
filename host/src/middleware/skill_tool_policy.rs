//! SkillToolPolicyMiddleware (spec §9): while a skill is active (slash-activated, or its
//! SKILL.md was read in this thread) only the tools its `allowed-tools` names, plus the
//! framework tools, are visible and callable. A successful read of a SKILL.md makes that skill
//! active by adding a `skill_context` entry to thread state.

use std::collections::BTreeSet;
use std::sync::Arc;

use async_trait::async_trait;
use toolhost_core::{CallContext, StateUpdate, Tool, ToolOutcome};
use toolhost_skills::{ActiveSkills, PublicSkillStates, SkillStore, SkillToolPolicy};

use super::{Middleware, ModelView, Next, ToolRequest};

/// Tools whose successful read of a SKILL.md activates the skill (DeerFlow's
/// `skill_file_read_tool_names` default).
const SKILL_READ_TOOLS: [&str; 4] = ["read_file", "read", "view", "cat"];

pub struct SkillToolPolicyMiddleware {
    store: SkillStore,
    public: PublicSkillStates,
}

impl SkillToolPolicyMiddleware {
    pub fn new(store: SkillStore, public: PublicSkillStates) -> Self {
        Self { store, public }
    }

    fn policy(&self, ctx: &CallContext, available_skills: Option<&BTreeSet<String>>) -> SkillToolPolicy {
        let active = ActiveSkills::from_thread_state(&ctx.state, None);
        if active.slash_paths.is_empty() && active.read_paths.is_empty() {
            // No active skill: nothing to filter, and no need to read the skills tree.
            return SkillToolPolicy::passive();
        }
        let registry = self.store.load_registry(&self.public);
        SkillToolPolicy::resolve(&active, registry.as_ref(), available_skills)
    }
}

#[async_trait]
impl Middleware for SkillToolPolicyMiddleware {
    fn name(&self) -> &'static str {
        "skill_tool_policy"
    }

    async fn wrap_call(&self, req: &ToolRequest<'_>, next: Next<'_>) -> ToolOutcome {
        let policy = self.policy(req.ctx, req.available_skills);
        if let Some(mut denied) = policy.check_call(req.name) {
            denied.kind.get_or_insert(toolhost_core::ErrorKind::Refused);
            return denied;
        }
        let mut outcome = next.run(req).await;
        if req.name == "tool_search" {
            outcome = policy.sanitize_tool_search(outcome);
        }
        if SKILL_READ_TOOLS.contains(&req.name) && !outcome.is_error() {
            let container = &self.store.layout().container_path;
            let in_skills = |p: &&str| toolhost_core::paths::strip_segment_prefix(p, container).is_some();
            if let Some(path) = req.args.get("path").and_then(|p| p.as_str()).filter(in_skills) {
                if let Ok(registry) = self.store.load_registry(&self.public) {
                    let now = std::time::SystemTime::now()
                        .duration_since(std::time::UNIX_EPOCH)
                        .map(|d| d.as_secs() as i64)
                        .unwrap_or_default();
                    if let Some(entry) = registry.skill_context_entry(path, now) {
                        let mut list = outcome.update.skill_context.take().unwrap_or_default();
                        list.push(entry);
                        outcome.update =
                            StateUpdate { skill_context: Some(list), ..std::mem::take(&mut outcome.update) };
                    }
                }
            }
        }
        outcome
    }

    fn filter_tools(&self, tools: Vec<Arc<dyn Tool>>, view: &ModelView<'_>) -> Vec<Arc<dyn Tool>> {
        self.policy(view.ctx, view.available_skills).filter_tools(tools)
    }
}
