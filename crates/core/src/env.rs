//! The environment a host sees, and DeerFlow's `$VAR` rule over it. The library reads no process
//! environment by itself: whoever opens a host builds an [`Environment`] (the CLI from its own
//! process, an embedder from what it chooses) and every part that needs a variable — the config's
//! and `extensions_config.json`'s `$VAR`s, an ACP agent's `env`, the variables host bash, MCP
//! servers and ACP agents inherit — reads it from there.

use std::collections::BTreeMap;
use std::sync::Arc;

/// The environment a host sees: a fixed set of variables, cheap to clone and share.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Environment(Arc<BTreeMap<String, String>>);

impl std::fmt::Debug for Environment {
    // Names only: values are often secrets.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_set().entries(self.0.keys()).finish()
    }
}

impl Environment {
    /// An environment holding exactly `vars`.
    pub fn new<K: Into<String>, V: Into<String>>(vars: impl IntoIterator<Item = (K, V)>) -> Self {
        Self(Arc::new(vars.into_iter().map(|(k, v)| (k.into(), v.into())).collect()))
    }

    /// This process's environment (what the CLI passes). Calling it is the embedder's choice:
    /// the library never reads the environment by itself. Variables whose name or value is not
    /// UTF-8 are left out.
    pub fn from_process() -> Self {
        Self::new(std::env::vars_os().filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?))))
    }

    /// The value of `name`, if set.
    pub fn get(&self, name: &str) -> Option<String> {
        self.0.get(name).cloned()
    }

    /// Every variable, in name order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.0.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }

    /// This environment with `name` set to `value` (the others shared with `self` until now).
    pub fn with(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        Arc::make_mut(&mut self.0).insert(name.into(), value.into());
        self
    }

    /// DeerFlow's `$VAR` rule for one value: `$NAME` is replaced by `NAME`'s value; an unset
    /// variable gives `""` and is reported to `unset` (the config warns about it). `None` when
    /// `value` is not a reference (no leading `$`, or a bare `$`): it stays as written.
    pub fn expand(&self, value: &str, unset: &mut dyn FnMut(&str)) -> Option<String> {
        let name = value.strip_prefix('$').filter(|n| !n.is_empty())?;
        Some(self.get(name).unwrap_or_else(|| {
            unset(name);
            String::new()
        }))
    }

    /// [`Environment::expand`] over every string value of a JSON document, in place; keys are
    /// left alone.
    pub fn expand_json(&self, value: &mut serde_json::Value, unset: &mut dyn FnMut(&str)) {
        match value {
            serde_json::Value::String(s) => {
                if let Some(v) = self.expand(s, unset) {
                    *s = v;
                }
            }
            serde_json::Value::Array(items) => items.iter_mut().for_each(|v| self.expand_json(v, unset)),
            serde_json::Value::Object(map) => map.values_mut().for_each(|v| self.expand_json(v, unset)),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dollar_values_expand_and_unset_ones_are_reported_and_empty() {
        let env = Environment::new([("A", "a-value")]);
        let mut unset = Vec::new();
        let mut doc = serde_json::json!({"x": "$A", "y": ["$B", "lit $A", "$", 3], "$A": "k"});
        env.expand_json(&mut doc, &mut |n| unset.push(n.to_string()));
        assert_eq!(doc, serde_json::json!({"x": "a-value", "y": ["", "lit $A", "$", 3], "$A": "k"}));
        assert_eq!(unset, ["B"]);
    }

    #[test]
    fn debug_shows_names_not_values() {
        let env = Environment::new([("TOKEN", "s3cret")]).with("PATH", "/bin");
        let shown = format!("{env:?}");
        assert!(shown.contains("TOKEN") && shown.contains("PATH") && !shown.contains("s3cret"), "{shown}");
        assert_eq!(env.get("PATH").as_deref(), Some("/bin"));
    }
}
