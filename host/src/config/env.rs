//! `$VAR` expansion, DeerFlow's rule: a string value that starts with `$` is replaced by the
//! environment variable of that name; an unset one becomes `""`.

use crate::options::Environment;

/// Expand every string scalar starting with `$` in place, looking names up in `env` (the
/// environment the host was given, never the process's behind the caller's back). `unset` hears
/// each name not set.
pub fn expand_env(value: &mut serde_yaml::Value, env: &Environment, unset: &mut dyn FnMut(&str)) {
    match value {
        serde_yaml::Value::String(s) => {
            if let Some(name) = s.strip_prefix('$') {
                if !name.is_empty() {
                    *s = env.get(name).unwrap_or_else(|| {
                        unset(name);
                        String::new()
                    });
                }
            }
        }
        serde_yaml::Value::Sequence(items) => items.iter_mut().for_each(|v| expand_env(v, env, unset)),
        serde_yaml::Value::Mapping(map) => map.iter_mut().for_each(|(_, v)| expand_env(v, env, unset)),
        serde_yaml::Value::Tagged(t) => expand_env(&mut t.value, env, unset),
        _ => {}
    }
}
