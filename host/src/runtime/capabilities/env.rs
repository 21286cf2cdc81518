//! The env capability: host environment variables a component may read, by name. Values come
//! from the environment the host was given (`HostOptions`), never from the process behind the
//! embedder's back, and are resolved when the tool is assembled.

/// The granted names with their values; a name that is not set is left out with a warning.
pub fn resolve(
    names: &[String],
    lookup: &dyn Fn(&str) -> Option<String>,
    warnings: &mut Vec<String>,
) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for name in names {
        match lookup(name) {
            Some(v) => out.push((name.clone(), v)),
            None => warnings.push(format!("capability env var {name} is not set on the host; not passed")),
        }
    }
    out
}

/// How `--explain` names the granted variables (names only, never values).
pub fn describe(env: &[(String, String)]) -> String {
    let names: Vec<&str> = env.iter().map(|(k, _)| k.as_str()).collect();
    format!("[{}]", names.join(", "))
}
