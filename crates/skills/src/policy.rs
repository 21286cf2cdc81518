//! The `allowed-tools` policy (spec §9): `filter_tools_by_skill_allowed_tools`, and
//! SkillToolPolicyMiddleware's active-skill decision — which tools the model may see and call
//! while a slash-activated or read skill is active — plus its `tool_search` sanitising.

use std::collections::BTreeSet;

use serde_json::Value;
use toolhost_core::{ContentPart, ThreadState, ToolOutcome, ToolSpec};

use crate::registry::{normpath, SkillRegistry, SkillsError};

/// `ALWAYS_AVAILABLE_BUILTIN_TOOL_NAMES`: what an active policy always leaves callable.
pub const ALWAYS_AVAILABLE_BUILTIN_TOOL_NAMES: [&str; 4] =
    ["describe_skill", "read_file", "review_skill_package", "tool_search"];

/// Content of a sanitised `tool_search` result when every schema was denied.
pub const NO_TOOLS_MATCHING_POLICY: &str = "No tools found matching the active skill policy.";
/// A `tool_search` result the policy could not check.
pub const TOOL_SEARCH_UNVALIDATED: &str =
    "Error: tool_search returned a result that could not be validated against the active skill policy.";

/// Anything with a tool name, so one filter serves specs, tools and bare names.
pub trait NamedTool {
    fn tool_name(&self) -> &str;
}

impl NamedTool for String {
    fn tool_name(&self) -> &str {
        self
    }
}

impl NamedTool for &str {
    fn tool_name(&self) -> &str {
        self
    }
}

impl NamedTool for ToolSpec {
    fn tool_name(&self) -> &str {
        &self.name
    }
}

impl<T: NamedTool + ?Sized> NamedTool for std::sync::Arc<T> {
    fn tool_name(&self) -> &str {
        (**self).tool_name()
    }
}

impl NamedTool for dyn toolhost_core::Tool {
    fn tool_name(&self) -> &str {
        &self.spec().name
    }
}

/// `allowed_tool_names_for_skills`: `None` (allow all) when there is no skill or none declares
/// `allowed-tools`; otherwise the union of the declared lists (skills without the field and
/// `[]` add nothing).
pub fn allowed_tool_names_for_skills<'a>(
    declarations: impl IntoIterator<Item = Option<&'a [String]>>,
) -> Option<BTreeSet<String>> {
    let mut allowed = BTreeSet::new();
    let mut explicit = false;
    for decl in declarations.into_iter().flatten() {
        explicit = true;
        allowed.extend(decl.iter().cloned());
    }
    explicit.then_some(allowed)
}

/// `filter_tools_by_skill_allowed_tools`: keep tools (in their order, duplicates kept) whose
/// name is allowed or in `always_allowed`; `None` keeps everything. The helper exempts nothing
/// by itself; callers pass [`ALWAYS_AVAILABLE_BUILTIN_TOOL_NAMES`].
pub fn filter_tools_by_skill_allowed_tools<'a, T: NamedTool>(
    tools: Vec<T>,
    declarations: impl IntoIterator<Item = Option<&'a [String]>>,
    always_allowed: &[&str],
) -> Vec<T> {
    match allowed_tool_names_for_skills(declarations) {
        None => tools,
        Some(allowed) => tools
            .into_iter()
            .filter(|t| allowed.contains(t.tool_name()) || always_allowed.contains(&t.tool_name()))
            .collect(),
    }
}

/// The skills that are active for a model step, as data the host derives from the run.
///
/// DeerFlow reads these from the message history and the run context; toolhost has neither, so
/// the host passes them: `slash_paths` are the SKILL.md container paths of a skill the user
/// activated with `/skill-name` at the start of the turn (see
/// [`SkillRegistry::by_container_file`] / `Skill::container_file_path`), `read_paths` are the
/// `path`s of the thread's `skill_context` entries (SKILL.md files the conversation read).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ActiveSkills {
    pub slash_paths: Vec<String>,
    pub read_paths: Vec<String>,
}

impl ActiveSkills {
    /// `read_paths` from `state.skill_context` (entries without a string `path` are ignored),
    /// plus the slash-activated SKILL.md path of this turn, if any.
    pub fn from_thread_state(state: &ThreadState, slash_path: Option<&str>) -> Self {
        let read_paths = state
            .skill_context
            .iter()
            .filter_map(|e| e.get("path").and_then(Value::as_str).map(str::to_string))
            .collect();
        Self { slash_paths: slash_path.map(|p| vec![p.to_string()]).unwrap_or_default(), read_paths }
    }
}

/// Which input decided the policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PolicySource {
    /// No active skill: nothing is filtered.
    Passive,
    /// A slash-activated skill; it dominates anything read later in the run.
    Slash,
    /// SKILL.md files the conversation read.
    SkillContext,
}

/// The decision for one model step: `allowed == None` means every tool is allowed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkillToolPolicy {
    pub source: PolicySource,
    pub active_paths: Vec<String>,
    pub allowed: Option<BTreeSet<String>>,
}

impl SkillToolPolicy {
    /// No active skill.
    pub fn passive() -> Self {
        Self { source: PolicySource::Passive, active_paths: Vec::new(), allowed: None }
    }

    /// SkillToolPolicyMiddleware's decision. `registry` is the freshly loaded registry (an
    /// error fails closed); `available_skills` is the agent's `skills` allowlist (`None` = all).
    /// Unknown, disabled or non-allowlisted active paths are skipped; if none is left the
    /// policy fails closed to [`ALWAYS_AVAILABLE_BUILTIN_TOOL_NAMES`].
    pub fn resolve(
        active: &ActiveSkills,
        registry: Result<&SkillRegistry, &SkillsError>,
        available_skills: Option<&BTreeSet<String>>,
    ) -> Self {
        let (source, paths) = if !active.slash_paths.is_empty() {
            (PolicySource::Slash, &active.slash_paths)
        } else if !active.read_paths.is_empty() {
            (PolicySource::SkillContext, &active.read_paths)
        } else {
            return Self::passive();
        };
        let framework = || ALWAYS_AVAILABLE_BUILTIN_TOOL_NAMES.iter().map(|s| s.to_string()).collect();
        let decided = |allowed| Self { source, active_paths: paths.clone(), allowed };
        let registry = match registry {
            Ok(r) => r,
            Err(e) => {
                tracing::error!("failed to load skills for the allowed-tools policy, failing closed: {e}");
                return decided(Some(framework()));
            }
        };
        let mut active_skills = Vec::new();
        for path in paths {
            let Some(skill) = registry.by_container_file(&normpath(path)) else {
                tracing::warn!("active skill path could not be resolved for allowed-tools policy: {path}");
                continue;
            };
            if !skill.enabled {
                tracing::warn!("active skill is disabled for allowed-tools policy: {path}");
                continue;
            }
            if available_skills.is_some_and(|allow| !allow.contains(skill.name())) {
                tracing::warn!("active skill is outside the agent allowlist for allowed-tools policy: {path}");
                continue;
            }
            if !active_skills.iter().any(|s: &&crate::Skill| s.name() == skill.name()) {
                active_skills.push(skill);
            }
        }
        if active_skills.is_empty() {
            tracing::warn!("no active skill reference could be authorized for allowed-tools policy; failing closed");
            return decided(Some(framework()));
        }
        let allowed = allowed_tool_names_for_skills(active_skills.iter().map(|s| s.allowed_tools())).map(|mut set| {
            set.extend(framework());
            set
        });
        decided(allowed)
    }

    pub fn allows(&self, name: &str) -> bool {
        self.allowed.as_ref().is_none_or(|a| a.contains(name))
    }

    /// The model-view filter (`wrap_model_call`): the tools the model may see, in order.
    pub fn filter_tools<T: NamedTool>(&self, tools: Vec<T>) -> Vec<T> {
        match &self.allowed {
            None => tools,
            Some(allowed) => tools.into_iter().filter(|t| allowed.contains(t.tool_name())).collect(),
        }
    }

    /// The call gate (`wrap_tool_call`): DeerFlow's error outcome when `name` is denied.
    pub fn check_call(&self, name: &str) -> Option<ToolOutcome> {
        if name.is_empty() || self.allows(name) {
            return None;
        }
        Some(ToolOutcome::error(format!("Error: Tool '{name}' is not allowed by the active skill policy.")))
    }

    /// After an allowed `tool_search` call: drop denied names from the `promoted` update and
    /// denied schemas from the content. A result that cannot be checked becomes an error.
    pub fn sanitize_tool_search(&self, outcome: ToolOutcome) -> ToolOutcome {
        let Some(allowed) = &self.allowed else { return outcome };
        let unvalidated = || ToolOutcome::error(TOOL_SEARCH_UNVALIDATED);
        let Some(Value::Object(promoted)) = outcome.update.promoted.clone() else { return unvalidated() };
        let Some(Value::Array(raw_names)) = promoted.get("names") else { return unvalidated() };
        let Some(raw_names) = raw_names.iter().map(Value::as_str).collect::<Option<Vec<&str>>>() else {
            return unvalidated();
        };
        let [ContentPart::Text { text }] = outcome.content.as_slice() else { return unvalidated() };
        let permitted: Vec<String> =
            raw_names.iter().filter(|n| allowed.contains(**n)).map(|n| n.to_string()).collect();
        let mut content = text.clone();
        if !raw_names.is_empty() {
            let Ok(Value::Array(schemas)) = serde_json::from_str::<Value>(text) else { return unvalidated() };
            let schema_name = |s: &Value| -> Option<String> {
                let direct = s.get("name").and_then(Value::as_str);
                let nested = s.get("function").and_then(|f| f.get("name")).and_then(Value::as_str);
                let ok = |n: &&str| permitted.iter().any(|p| p == n);
                direct.filter(ok).or(nested.filter(ok)).map(str::to_string)
            };
            let kept: Vec<Value> = schemas.into_iter().filter(|s| s.is_object() && schema_name(s).is_some()).collect();
            content = if kept.is_empty() {
                NO_TOOLS_MATCHING_POLICY.to_string()
            } else {
                serde_json::to_string_pretty(&kept).unwrap_or_else(|_| NO_TOOLS_MATCHING_POLICY.to_string())
            };
        }
        let mut promoted = promoted;
        promoted.insert("names".to_string(), Value::Array(permitted.into_iter().map(Value::String).collect()));
        let mut out = outcome;
        out.update.promoted = Some(Value::Object(promoted));
        out.content = vec![ContentPart::Text { text: content }];
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frontmatter::SkillMeta;
    use crate::registry::{Skill, SkillCategory};
    use serde_json::json;
    use toolhost_core::StateUpdate;

    const VECTORS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/conformance/skill_policy.json");

    fn vectors() -> Value {
        serde_json::from_str(&std::fs::read_to_string(VECTORS).expect("read skill_policy.json")).expect("json")
    }

    fn strings(v: &Value) -> Vec<String> {
        serde_json::from_value(v.clone()).expect("string list")
    }

    #[test]
    fn always_available_set_matches_deerflow() {
        let doc = vectors();
        let mut ours: Vec<String> = ALWAYS_AVAILABLE_BUILTIN_TOOL_NAMES.iter().map(|s| s.to_string()).collect();
        ours.sort();
        assert_eq!(ours, strings(&doc["always_available_builtin_tool_names"]));
    }

    #[test]
    fn conformance_policy_cases() {
        let doc = vectors();
        let cases = doc["cases"].as_array().expect("cases");
        assert!(!cases.is_empty());
        for case in cases {
            let id = case["id"].as_str().unwrap_or("?");
            let decls: Vec<Option<Vec<String>>> = case["skills"]
                .as_array()
                .expect("skills")
                .iter()
                .map(|s| serde_json::from_value(s["allowed_tools"].clone()).expect("allowed_tools"))
                .collect();
            let allowed = allowed_tool_names_for_skills(decls.iter().map(|d| d.as_deref()));
            let expected_allowed: Option<Vec<String>> =
                serde_json::from_value(case["expected_allowed_tool_names"].clone()).expect("expected_allowed");
            assert_eq!(allowed.map(|s| s.into_iter().collect::<Vec<_>>()), expected_allowed, "{id}");
            let always = strings(&case["always_allowed"]);
            let always: Vec<&str> = always.iter().map(String::as_str).collect();
            let got = filter_tools_by_skill_allowed_tools(
                strings(&case["tools"]),
                decls.iter().map(|d| d.as_deref()),
                &always,
            );
            assert_eq!(got, strings(&case["expected"]), "{id}");
        }
    }

    fn skill(name: &str, category: SkillCategory, allowed: Option<&[&str]>, enabled: bool) -> Skill {
        Skill {
            meta: SkillMeta {
                name: name.into(),
                description: "d".into(),
                license: None,
                allowed_tools: allowed.map(|a| a.iter().map(|s| s.to_string()).collect()),
                required_secrets: vec![],
                secrets_autonomous: true,
            },
            category,
            relative_path: name.into(),
            skill_dir: name.into(),
            enabled,
        }
    }

    fn registry() -> SkillRegistry {
        SkillRegistry {
            container_path: "/mnt/skills".into(),
            skills: vec![
                skill("empty", SkillCategory::Public, Some(&[]), true),
                skill("legacy", SkillCategory::Public, None, true),
                skill("off", SkillCategory::Custom, Some(&["bash"]), false),
                skill("web", SkillCategory::Custom, Some(&["web_search"]), true),
            ],
        }
    }

    const SPEC_21_TOOLS: [&str; 7] = [
        "task",
        "list_background_tasks",
        "cancel_background_task",
        "read_file",
        "review_skill_package",
        "tool_search",
        "describe_skill",
    ];

    #[test]
    fn spec_13_item_21() {
        let reg = registry();
        let read = |paths: &[&str]| ActiveSkills {
            slash_paths: vec![],
            read_paths: paths.iter().map(|p| p.to_string()).collect(),
        };
        let framework = ["read_file", "review_skill_package", "tool_search", "describe_skill"];

        let policy = SkillToolPolicy::resolve(&read(&["/mnt/skills/public/empty/SKILL.md"]), Ok(&reg), None);
        assert_eq!(policy.filter_tools(SPEC_21_TOOLS.to_vec()), framework);

        // Every active path unknown or disabled: only the framework tools.
        let policy = SkillToolPolicy::resolve(
            &read(&["/mnt/skills/public/nope/SKILL.md", "/mnt/skills/custom/off/SKILL.md"]),
            Ok(&reg),
            None,
        );
        assert_eq!(policy.source, PolicySource::SkillContext);
        assert_eq!(policy.filter_tools(SPEC_21_TOOLS.to_vec()), framework);

        // Passive: no filtering.
        let policy = SkillToolPolicy::resolve(&ActiveSkills::default(), Ok(&reg), None);
        assert_eq!(policy, SkillToolPolicy::passive());
        assert_eq!(policy.filter_tools(SPEC_21_TOOLS.to_vec()), SPEC_21_TOOLS);
        assert!(policy.check_call("task").is_none());
    }

    #[test]
    fn slash_dominates_and_failures_close() {
        let reg = registry();
        let both = ActiveSkills {
            slash_paths: vec!["/mnt/skills/custom/web/SKILL.md".into()],
            read_paths: vec!["/mnt/skills/public/legacy/SKILL.md".into()],
        };
        let policy = SkillToolPolicy::resolve(&both, Ok(&reg), None);
        assert_eq!(policy.source, PolicySource::Slash);
        assert_eq!(policy.filter_tools(vec!["web_search", "bash", "read_file"]), ["web_search", "read_file"]);
        let denied = policy.check_call("bash").unwrap();
        assert!(denied.is_error());
        assert_eq!(denied.text_content(), "Error: Tool 'bash' is not allowed by the active skill policy.");
        assert!(policy.check_call("web_search").is_none());

        // A legacy skill alone keeps allow-all.
        let legacy =
            ActiveSkills { slash_paths: vec![], read_paths: vec!["/mnt/skills/public/./legacy/SKILL.md".into()] };
        assert_eq!(SkillToolPolicy::resolve(&legacy, Ok(&reg), None).allowed, None);

        // Outside the agent's skills allowlist: skipped, so fail closed.
        let only_empty: BTreeSet<String> = ["empty".to_string()].into();
        let web = ActiveSkills { slash_paths: vec![], read_paths: vec!["/mnt/skills/custom/web/SKILL.md".into()] };
        let policy = SkillToolPolicy::resolve(&web, Ok(&reg), Some(&only_empty));
        assert_eq!(policy.filter_tools(vec!["web_search", "tool_search"]), ["tool_search"]);

        // The registry failed to load.
        let err = SkillsError::PublicStatesUnavailable("x".into());
        let policy = SkillToolPolicy::resolve(&web, Err(&err), None);
        assert_eq!(policy.filter_tools(vec!["web_search", "describe_skill"]), ["describe_skill"]);
    }

    #[test]
    fn active_skills_from_thread_state() {
        let state = ThreadState {
            skill_context: vec![
                json!({"name": "web", "path": "/mnt/skills/custom/web/SKILL.md"}),
                json!({"name": "x"}),
            ],
            ..ThreadState::default()
        };
        let active = ActiveSkills::from_thread_state(&state, Some("/mnt/skills/public/empty/SKILL.md"));
        assert_eq!(active.read_paths, ["/mnt/skills/custom/web/SKILL.md"]);
        assert_eq!(active.slash_paths, ["/mnt/skills/public/empty/SKILL.md"]);
    }

    #[test]
    fn policy_from_a_skills_tree_on_disk() {
        let dir = tempfile::tempdir().unwrap();
        let write = |rel: &str, text: &str| {
            let p = dir.path().join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        };
        write("public/web/SKILL.md", "---\nname: web\ndescription: d\nallowed-tools: [web_search]\n---\n");
        write("custom/mine/SKILL.md", "---\nname: mine\ndescription: d\nallowed-tools: [bash]\n---\n");
        let store = crate::SkillStore::new(crate::SkillsLayout::new(dir.path()));
        let public = crate::PublicSkillStates::default();
        let state = ThreadState {
            skill_context: vec![
                json!({"name": "web", "path": "/mnt/skills/public/web/SKILL.md"}),
                json!({"name": "mine", "path": "/mnt/skills/custom/mine/SKILL.md"}),
            ],
            ..ThreadState::default()
        };
        let active = ActiveSkills::from_thread_state(&state, None);
        let tools = vec!["web_search", "bash", "task", "read_file"];
        let policy = SkillToolPolicy::resolve(&active, store.load_registry(&public).as_ref(), None);
        assert_eq!(policy.filter_tools(tools.clone()), ["web_search", "bash", "read_file"]);

        // The user disables their skill: only the public one still counts.
        write("_skill_states.json", r#"{"mine": {"enabled": false}}"#);
        let policy = SkillToolPolicy::resolve(&active, store.load_registry(&public).as_ref(), None);
        assert_eq!(policy.filter_tools(tools.clone()), ["web_search", "read_file"]);

        // The state file is unreadable: the registry fails, the policy fails closed.
        write("_skill_states.json", "{");
        let policy = SkillToolPolicy::resolve(&active, store.load_registry(&public).as_ref(), None);
        assert_eq!(policy.filter_tools(tools), ["read_file"]);
    }

    fn search_outcome(names: &[&str], content: &str) -> ToolOutcome {
        ToolOutcome::text(content).with_update(StateUpdate {
            promoted: Some(json!({"catalog_hash": "h", "names": names})),
            ..StateUpdate::default()
        })
    }

    #[test]
    fn tool_search_results_are_sanitized() {
        let reg = registry();
        let web = ActiveSkills { slash_paths: vec!["/mnt/skills/custom/web/SKILL.md".into()], read_paths: vec![] };
        let policy = SkillToolPolicy::resolve(&web, Ok(&reg), None);
        let content = serde_json::to_string_pretty(&json!([
            {"name": "web_search", "description": "s", "parameters": {}},
            {"type": "function", "function": {"name": "mcp_x"}}
        ]))
        .unwrap();
        let out = policy.sanitize_tool_search(search_outcome(&["web_search", "mcp_x"], &content));
        assert_eq!(out.update.promoted, Some(json!({"catalog_hash": "h", "names": ["web_search"]})));
        let kept: Value = serde_json::from_str(&out.text_content()).unwrap();
        assert_eq!(kept, json!([{"name": "web_search", "description": "s", "parameters": {}}]));

        let out = policy.sanitize_tool_search(search_outcome(&["mcp_x"], &content));
        assert_eq!(out.text_content(), NO_TOOLS_MATCHING_POLICY);
        assert_eq!(out.update.promoted, Some(json!({"catalog_hash": "h", "names": []})));

        // No names: content passes unchanged (e.g. "No tools found matching: …").
        let out = policy.sanitize_tool_search(search_outcome(&[], "No tools found matching: x"));
        assert_eq!(out.text_content(), "No tools found matching: x");

        for bad in [ToolOutcome::error("Error: boom"), search_outcome(&["web_search"], "not json")] {
            let out = policy.sanitize_tool_search(bad);
            assert!(out.is_error());
            assert_eq!(out.text_content(), TOOL_SEARCH_UNVALIDATED);
        }
        // Passive policies never touch the result.
        let raw = search_outcome(&["mcp_x"], &content);
        assert_eq!(SkillToolPolicy::passive().sanitize_tool_search(raw.clone()), raw);
    }
}
