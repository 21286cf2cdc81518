//! The subagent registry (DeerFlow `H/subagents/registry.py`, `config.py`, `builtins/`): the
//! built-in types `general-purpose` and `bash`, the user-defined `custom_agents`, the per-agent
//! overrides layered on them, and the name allow/deny filter a subagent's tools pass through.

use crate::config::{SubagentsAppConfig, DEFAULT_DISALLOWED};

/// `SubagentConfig`: one subagent type after overrides.
#[derive(Debug, Clone, PartialEq)]
pub struct SubagentConfig {
    pub name: String,
    pub description: String,
    pub system_prompt: Option<String>,
    /// Allowlist of tool names; `None`: every tool of the parent's assembly.
    pub tools: Option<Vec<String>>,
    /// Denylist, applied after the allowlist.
    pub disallowed_tools: Option<Vec<String>>,
    /// Skill allowlist; `None`: all enabled skills, `[]`: none.
    pub skills: Option<Vec<String>>,
    /// A model name, or `inherit` (the parent's model).
    pub model: String,
    pub max_turns: u64,
    pub timeout_seconds: u64,
    /// An ACP agent (`acp_agents:` name) that runs this subagent instead of a model loop.
    pub acp: Option<String>,
}

/// The model name meaning "the parent's model".
pub const INHERIT: &str = "inherit";

/// `BUILTIN_SUBAGENTS` in DeerFlow's order.
pub const BUILTIN_SUBAGENT_NAMES: [&str; 2] = ["general-purpose", "bash"];

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

/// A built-in subagent as DeerFlow defines it, before overrides.
pub fn builtin(name: &str) -> Option<SubagentConfig> {
    let (description, prompt, tools, max_turns) = match name {
        "general-purpose" => (
            include_str!("../data/general-purpose.description.txt"),
            include_str!("../data/general-purpose.system_prompt.txt"),
            None,
            150,
        ),
        "bash" => (
            include_str!("../data/bash.description.txt"),
            include_str!("../data/bash.system_prompt.txt"),
            Some(strings(&["bash", "ls", "read_file", "write_file", "str_replace"])),
            60,
        ),
        _ => return None,
    };
    Some(SubagentConfig {
        name: name.to_string(),
        description: description.to_string(),
        system_prompt: Some(prompt.to_string()),
        tools,
        disallowed_tools: Some(strings(&DEFAULT_DISALLOWED)),
        skills: None,
        model: INHERIT.into(),
        max_turns,
        timeout_seconds: 900,
        acp: None,
    })
}

/// `get_subagent_config`: a built-in, else a custom agent, with `subagents.agents.<name>`
/// overrides and, for built-ins only, the global `timeout_seconds` / `max_turns`.
pub fn get_subagent_config(name: &str, app: &SubagentsAppConfig) -> Option<SubagentConfig> {
    let is_builtin = BUILTIN_SUBAGENT_NAMES.contains(&name);
    let mut config = builtin(name).or_else(|| {
        app.custom_agents.get(name).map(|c| SubagentConfig {
            name: name.to_string(),
            description: c.description.clone(),
            system_prompt: Some(c.system_prompt.clone()),
            tools: c.tools.clone(),
            disallowed_tools: c.disallowed_tools.clone(),
            skills: c.skills.clone(),
            model: c.model.clone(),
            max_turns: c.max_turns,
            timeout_seconds: c.timeout_seconds,
            acp: c.acp.clone(),
        })
    })?;
    let o = app.agents.get(name);
    match o.and_then(|o| o.timeout_seconds) {
        Some(t) => config.timeout_seconds = t,
        None if is_builtin => config.timeout_seconds = app.timeout_seconds,
        None => {}
    }
    match o.and_then(|o| o.max_turns) {
        Some(t) => config.max_turns = t,
        None if is_builtin => {
            if let Some(t) = app.max_turns {
                config.max_turns = t;
            }
        }
        None => {}
    }
    if let Some(m) = o.and_then(|o| o.model.clone()) {
        config.model = m;
    }
    if let Some(s) = o.and_then(|o| o.skills.clone()) {
        config.skills = Some(s);
    }
    Some(config)
}

/// `get_subagent_names`: built-ins, then custom agents.
pub fn subagent_names(app: &SubagentsAppConfig) -> Vec<String> {
    let mut names = strings(&BUILTIN_SUBAGENT_NAMES);
    for n in app.custom_agents.keys() {
        if !names.contains(n) {
            names.push(n.clone());
        }
    }
    names
}

/// `get_available_subagent_names`: without host bash, `bash` is not offered.
pub fn available_subagent_names(app: &SubagentsAppConfig, host_bash_allowed: bool) -> Vec<String> {
    subagent_names(app).into_iter().filter(|n| host_bash_allowed || n != "bash").collect()
}

/// `_filter_tools`: the allowlist (when set), then the denylist.
pub fn tool_allowed(config: &SubagentConfig, name: &str) -> bool {
    config.tools.as_ref().is_none_or(|allow| allow.iter().any(|a| a == name))
        && !config.disallowed_tools.as_ref().is_some_and(|deny| deny.iter().any(|d| d == name))
}

/// `resolve_subagent_model_name`: the subagent's own model, else the parent's, else the first
/// configured model.
pub fn resolve_model_name(
    config: &SubagentConfig,
    parent_model: Option<&str>,
    first_model: Option<&str>,
) -> Result<String, String> {
    if config.model != INHERIT {
        return Ok(config.model.clone());
    }
    parent_model
        .or(first_model)
        .map(str::to_string)
        .ok_or_else(|| "No chat models are configured. Please configure at least one model in config.yaml.".to_string())
}

/// `_merge_skill_allowlists`: the subagent's skills within the parent's.
pub fn merge_skill_allowlists(parent: Option<&[String]>, child: Option<&[String]>) -> Option<Vec<String>> {
    match (parent, child) {
        (None, c) => c.map(<[String]>::to_vec),
        (Some(p), None) => Some(p.to_vec()),
        (Some(p), Some(c)) => Some(c.iter().filter(|s| p.contains(s)).cloned().collect()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn app(yaml: &str) -> SubagentsAppConfig {
        serde_yaml::from_str(yaml).unwrap()
    }

    #[test]
    fn builtins_and_overrides() {
        let a = app("timeout_seconds: 100\nmax_turns: 7\nagents: {bash: {timeout_seconds: 5, model: fast, skills: []}}\ncustom_agents: {rev: {description: d, system_prompt: p, tools: [read_file]}}\n");
        let gp = get_subagent_config("general-purpose", &a).unwrap();
        assert_eq!((gp.timeout_seconds, gp.max_turns, gp.tools.as_ref()), (100, 7, None));
        assert!(gp.system_prompt.as_deref().unwrap().starts_with("You are a general-purpose subagent"));
        let bash = get_subagent_config("bash", &a).unwrap();
        assert_eq!((bash.timeout_seconds, bash.max_turns, bash.model.as_str()), (5, 7, "fast"));
        assert_eq!(bash.skills, Some(vec![]));
        assert!(tool_allowed(&bash, "read_file") && !tool_allowed(&bash, "glob") && !tool_allowed(&gp, "task"));
        // Global defaults do not touch custom agents.
        let rev = get_subagent_config("rev", &a).unwrap();
        assert_eq!((rev.timeout_seconds, rev.max_turns), (900, 50));
        assert!(get_subagent_config("nope", &a).is_none());
        assert_eq!(available_subagent_names(&a, false), ["general-purpose", "rev"]);
        assert_eq!(available_subagent_names(&a, true), ["general-purpose", "bash", "rev"]);
        let d = get_subagent_config("general-purpose", &SubagentsAppConfig::default()).unwrap();
        assert_eq!((d.timeout_seconds, d.max_turns), (1800, 150));
    }

    #[test]
    fn model_and_skills() {
        let gp = builtin("general-purpose").unwrap();
        assert_eq!(resolve_model_name(&gp, Some("p"), Some("f")).unwrap(), "p");
        assert_eq!(resolve_model_name(&gp, None, Some("f")).unwrap(), "f");
        assert!(resolve_model_name(&gp, None, None).is_err());
        let own = SubagentConfig { model: "x".into(), ..gp };
        assert_eq!(resolve_model_name(&own, Some("p"), None).unwrap(), "x");
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        assert_eq!(merge_skill_allowlists(None, None), None);
        assert_eq!(merge_skill_allowlists(Some(&s(&["a", "b"])), None), Some(s(&["a", "b"])));
        assert_eq!(merge_skill_allowlists(Some(&s(&["a"])), Some(&s(&["b", "a"]))), Some(s(&["a"])));
    }
}
