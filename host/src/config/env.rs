//! `$VAR` expansion over the config's YAML: [`Environment::expand`] (DeerFlow's rule, the one
//! `extensions_config.json` and ACP agents' `env` use too) applied to every string scalar.

use crate::options::Environment;

/// Expand every string scalar starting with `$` in place, looking names up in `env` (the
/// environment the host was given, never the process's behind the caller's back). `unset` hears
/// each name not set.
pub fn expand_env(value: &mut serde_yaml::Value, env: &Environment, unset: &mut dyn FnMut(&str)) {
    match value {
        serde_yaml::Value::String(s) => {
            if let Some(v) = env.expand(s, unset) {
                *s = v;
            }
        }
        serde_yaml::Value::Sequence(items) => items.iter_mut().for_each(|v| expand_env(v, env, unset)),
        serde_yaml::Value::Mapping(map) => map.iter_mut().for_each(|(_, v)| expand_env(v, env, unset)),
        serde_yaml::Value::Tagged(t) => expand_env(&mut t.value, env, unset),
        _ => {}
    }
}
