//! The `subagents:` section of config.yaml (DeerFlow `H/config/subagents_config.py`): global
//! timeout and turn defaults, the per-run delegation total, the token budget, per-agent overrides
//! and user-defined subagent types. Values are checked as DeerFlow's pydantic fields are.

use indexmap::IndexMap;
use serde::{Deserialize, Deserializer};

pub const DEFAULT_MAX_TOTAL_SUBAGENTS_PER_RUN: i64 = 6;
pub const MIN_TOTAL_SUBAGENTS_PER_RUN: i64 = 1;
pub const MAX_TOTAL_SUBAGENTS_PER_RUN: i64 = 50;
pub const MIN_CONCURRENT_SUBAGENT_CALLS: i64 = 1;
pub const MAX_CONCURRENT_SUBAGENT_CALLS: i64 = 4;
/// `MAX_CONCURRENT_SUBAGENTS`: the run's default `max_concurrent_subagents`.
pub const DEFAULT_MAX_CONCURRENT_SUBAGENTS: i64 = 3;

/// `clamp_subagent_concurrency`: parallel `task` calls per model response, 1..=4.
pub fn clamp_subagent_concurrency(value: i64) -> usize {
    value.clamp(MIN_CONCURRENT_SUBAGENT_CALLS, MAX_CONCURRENT_SUBAGENT_CALLS) as usize
}

/// `clamp_total_subagents_per_run`: `task` delegations per run, 1..=50.
pub fn clamp_total_subagents_per_run(value: i64) -> usize {
    value.clamp(MIN_TOTAL_SUBAGENTS_PER_RUN, MAX_TOTAL_SUBAGENTS_PER_RUN) as usize
}

/// `SubagentsAppConfig`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default)]
pub struct SubagentsAppConfig {
    /// Timeout of the built-in subagents (custom ones keep their own unless overridden).
    #[serde(deserialize_with = "at_least_one")]
    pub timeout_seconds: u64,
    #[serde(deserialize_with = "opt_at_least_one")]
    pub max_turns: Option<u64>,
    #[serde(deserialize_with = "total_per_run")]
    pub max_total_per_run: i64,
    /// `None`: DeerFlow's default budget (enabled, 2M tokens).
    pub token_budget: Option<TokenBudgetConfig>,
    #[serde(deserialize_with = "null_as_default")]
    pub agents: IndexMap<String, SubagentOverrideConfig>,
    #[serde(deserialize_with = "null_as_default")]
    pub custom_agents: IndexMap<String, CustomSubagentConfig>,
}

impl Default for SubagentsAppConfig {
    fn default() -> Self {
        Self {
            timeout_seconds: 1800,
            max_turns: None,
            max_total_per_run: DEFAULT_MAX_TOTAL_SUBAGENTS_PER_RUN,
            token_budget: None,
            agents: IndexMap::new(),
            custom_agents: IndexMap::new(),
        }
    }
}

impl SubagentsAppConfig {
    /// `get_token_budget_for`: the per-agent override, else the global one, else the default
    /// (enabled, 2,000,000 tokens: toolhost runs no subagent summarization).
    pub fn token_budget_for(&self, agent: &str) -> TokenBudgetConfig {
        self.agents
            .get(agent)
            .and_then(|o| o.token_budget.clone())
            .or_else(|| self.token_budget.clone())
            .unwrap_or_else(TokenBudgetConfig::subagent_default)
    }
}

/// `SubagentOverrideConfig`: `subagents.agents.<name>`.
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(default)]
pub struct SubagentOverrideConfig {
    #[serde(deserialize_with = "opt_at_least_one")]
    pub timeout_seconds: Option<u64>,
    #[serde(deserialize_with = "opt_at_least_one")]
    pub max_turns: Option<u64>,
    pub model: Option<String>,
    pub skills: Option<Vec<String>>,
    pub token_budget: Option<TokenBudgetConfig>,
}

/// `CustomSubagentConfig`: `subagents.custom_agents.<name>`, a user-defined subagent type.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct CustomSubagentConfig {
    pub description: String,
    pub system_prompt: String,
    #[serde(default)]
    pub tools: Option<Vec<String>>,
    #[serde(default = "default_disallowed")]
    pub disallowed_tools: Option<Vec<String>>,
    #[serde(default)]
    pub skills: Option<Vec<String>>,
    #[serde(default = "inherit")]
    pub model: String,
    #[serde(default = "fifty", deserialize_with = "at_least_one")]
    pub max_turns: u64,
    #[serde(default = "nine_hundred", deserialize_with = "at_least_one")]
    pub timeout_seconds: u64,
    /// toolhost: run this subagent as the ACP agent of that name (`acp_agents:`) instead of a
    /// model loop; the prompt goes to it as `invoke_acp_agent` sends it.
    #[serde(default)]
    pub acp: Option<String>,
}

/// `TokenBudgetConfig` (DeerFlow `H/config/token_budget_config.py`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default)]
pub struct TokenBudgetConfig {
    pub enabled: bool,
    pub max_tokens: u64,
    pub max_input_tokens: Option<u64>,
    pub max_output_tokens: Option<u64>,
    pub warn_threshold: f64,
    pub hard_stop_threshold: f64,
}

impl Default for TokenBudgetConfig {
    fn default() -> Self {
        Self {
            enabled: false,
            max_tokens: 200_000,
            max_input_tokens: None,
            max_output_tokens: None,
            warn_threshold: 0.8,
            hard_stop_threshold: 1.0,
        }
    }
}

impl TokenBudgetConfig {
    /// `default_subagent_token_budget(summarization_enabled=False)`.
    pub fn subagent_default() -> Self {
        Self { enabled: true, max_tokens: 2_000_000, warn_threshold: 0.7, ..Self::default() }
    }
}

pub(crate) const DEFAULT_DISALLOWED: [&str; 3] = ["task", "ask_clarification", "present_files"];

fn default_disallowed() -> Option<Vec<String>> {
    Some(DEFAULT_DISALLOWED.iter().map(|s| s.to_string()).collect())
}
fn inherit() -> String {
    "inherit".into()
}
fn fifty() -> u64 {
    50
}
fn nine_hundred() -> u64 {
    900
}

fn null_as_default<'de, D: Deserializer<'de>, T: Default + Deserialize<'de>>(d: D) -> Result<T, D::Error> {
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

fn at_least_one<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    let v = i64::deserialize(d)?;
    u64::try_from(v)
        .ok()
        .filter(|v| *v >= 1)
        .ok_or_else(|| serde::de::Error::custom(format!("must be at least 1, got {v}")))
}

fn opt_at_least_one<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    match Option::<i64>::deserialize(d)? {
        None => Ok(None),
        Some(v) if v >= 1 => Ok(Some(v as u64)),
        Some(v) => Err(serde::de::Error::custom(format!("must be at least 1, got {v}"))),
    }
}

fn total_per_run<'de, D: Deserializer<'de>>(d: D) -> Result<i64, D::Error> {
    let v = i64::deserialize(d)?;
    if (MIN_TOTAL_SUBAGENTS_PER_RUN..=MAX_TOTAL_SUBAGENTS_PER_RUN).contains(&v) {
        Ok(v)
    } else {
        Err(serde::de::Error::custom(format!(
            "must be between {MIN_TOTAL_SUBAGENTS_PER_RUN} and {MAX_TOTAL_SUBAGENTS_PER_RUN}, got {v}"
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_validation() {
        let c: SubagentsAppConfig = serde_yaml::from_str("{}").unwrap();
        assert_eq!(c, SubagentsAppConfig::default());
        assert_eq!(c.token_budget_for("x"), TokenBudgetConfig::subagent_default());
        let c: SubagentsAppConfig = serde_yaml::from_str(
            "timeout_seconds: 60\nagents: {bash: {max_turns: 3, token_budget: {enabled: false}}}\ncustom_agents:\n  rev: {description: d, system_prompt: p}\n",
        )
        .unwrap();
        assert_eq!(c.agents["bash"].max_turns, Some(3));
        assert!(!c.token_budget_for("bash").enabled);
        let rev = &c.custom_agents["rev"];
        assert_eq!((rev.model.as_str(), rev.max_turns, rev.timeout_seconds), ("inherit", 50, 900));
        assert_eq!(rev.disallowed_tools.as_deref().unwrap(), DEFAULT_DISALLOWED);
        for bad in ["timeout_seconds: 0", "max_total_per_run: 51", "custom_agents: {x: {description: d}}"] {
            assert!(serde_yaml::from_str::<SubagentsAppConfig>(bad).is_err(), "{bad}");
        }
        // Unknown keys are ignored, as pydantic does.
        let ok = "nope: 1";
        assert!(serde_yaml::from_str::<SubagentsAppConfig>(ok).is_ok(), "{ok}");
    }

    #[test]
    fn clamps() {
        assert_eq!(clamp_subagent_concurrency(0), 1);
        assert_eq!(clamp_subagent_concurrency(9), 4);
        assert_eq!(clamp_total_subagents_per_run(-3), 1);
        assert_eq!(clamp_total_subagents_per_run(500), 50);
    }
}
