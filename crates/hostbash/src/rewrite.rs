//! Virtual paths ↔ host paths for one host-bash call: `/mnt/user-data/…`, the skills dir, the
//! thread's ACP workspace and custom mounts become host paths in the command (at segment
//! boundaries, longest prefix first), and host paths in the output become virtual again.

use std::path::PathBuf;

use regex::{Captures, Regex};
use toolhost_core::paths::{replace_at_boundaries, strip_segment_prefix};
use toolhost_core::ThreadPaths;

/// One virtual prefix and the host directory behind it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mapping {
    pub virtual_prefix: String,
    pub host: PathBuf,
}

/// The mappings of one call: the thread's dirs plus the configured static ones, longest virtual
/// prefix first.
pub fn mappings(paths: &ThreadPaths, static_mappings: &[Mapping]) -> Vec<Mapping> {
    let mut all: Vec<Mapping> =
        paths.virtual_dirs().into_iter().map(|(virtual_prefix, host)| Mapping { virtual_prefix, host }).collect();
    all.extend(static_mappings.iter().cloned());
    all.sort_by_key(|m| std::cmp::Reverse(m.virtual_prefix.len()));
    all
}

/// A regex that finds any virtual path of `prefixes` in a command, as DeerFlow's
/// `_command_pattern`: the prefix at a segment boundary plus the rest of the shell word.
pub fn command_pattern(prefixes: &[String]) -> Regex {
    // Only the roots: a path under a nested prefix is found through its root and mapped by the
    // longest prefix in `to_host`, so `/mnt/user-data/workspacex` maps like DeerFlow's.
    let mut roots: Vec<&String> = prefixes
        .iter()
        .filter(|p| !prefixes.iter().any(|other| other != *p && strip_segment_prefix(p, other).is_some()))
        .collect();
    roots.sort_by_key(|p| std::cmp::Reverse(p.len()));
    roots.dedup();
    let alternation: Vec<String> = roots.iter().map(|p| regex::escape(p)).collect();
    // `(?=/|$|[^\w./-])` has no look-ahead in `regex`; the boundary is checked in `rewrite`.
    let pattern = format!(r#"(?:{})(?:/[^\s"';&|<>()]*)?"#, alternation.join("|"));
    // Escaped literals only: this cannot fail.
    Regex::new(&pattern).expect("virtual path pattern compiles")
}

fn continues_segment(c: char) -> bool {
    c.is_alphanumeric() || c == '_' || c == '.' || c == '-'
}

/// Rewrite every virtual path in `command` to its host path.
pub fn rewrite_command(command: &str, pattern: &Regex, mappings: &[Mapping]) -> String {
    pattern
        .replace_all(command, |caps: &Captures| {
            let Some(m) = caps.get(0) else { return String::new() };
            let matched = m.as_str();
            let boundary_ok = command[m.end()..].chars().next().is_none_or(|c| c == '/' || !continues_segment(c));
            if boundary_ok {
                if let Some(host) = to_host(matched, mappings) {
                    return host;
                }
            }
            matched.to_string()
        })
        .into_owned()
}

fn to_host(virtual_path: &str, mappings: &[Mapping]) -> Option<String> {
    for mapping in mappings {
        if let Some(rest) = strip_segment_prefix(virtual_path, &mapping.virtual_prefix) {
            let host = mapping.host.to_string_lossy();
            let rest = rest.trim_start_matches('/');
            let mut out =
                if rest.is_empty() { host.into_owned() } else { format!("{}/{rest}", host.trim_end_matches('/')) };
            if virtual_path.ends_with('/') && !out.ends_with('/') {
                out.push('/');
            }
            return Some(out);
        }
    }
    None
}

/// Mask host paths back to virtual ones (DeerFlow's `mask_local_paths_in_output`), both as
/// configured and symlink-resolved, longest host path first, at segment boundaries.
pub fn mask_output(text: &str, mappings: &[Mapping]) -> String {
    let mut pairs: Vec<(String, &str)> = Vec::new();
    for mapping in mappings {
        let raw = mapping.host.to_string_lossy().into_owned();
        if let Ok(resolved) = std::fs::canonicalize(&mapping.host) {
            let resolved = resolved.to_string_lossy().into_owned();
            if resolved != raw {
                pairs.push((resolved, &mapping.virtual_prefix));
            }
        }
        pairs.push((raw, &mapping.virtual_prefix));
    }
    pairs.sort_by_key(|(host, _)| std::cmp::Reverse(host.len()));
    let mut out = text.to_string();
    for (host, virtual_prefix) in pairs {
        if !host.is_empty() && out.contains(host.as_str()) {
            out = replace_at_boundaries(&out, &host, virtual_prefix);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn setup() -> (ThreadPaths, Vec<Mapping>, Regex) {
        let paths = ThreadPaths::new(Path::new("/d"), "t1").expect("valid id");
        let statics = vec![Mapping { virtual_prefix: "/mnt/skills".into(), host: PathBuf::from("/srv/skills") }];
        let all = mappings(&paths, &statics);
        let prefixes: Vec<String> = all.iter().map(|m| m.virtual_prefix.clone()).collect();
        (paths, all, command_pattern(&prefixes))
    }

    #[test]
    fn rewrites_at_segment_boundaries() {
        let (_, all, re) = setup();
        assert_eq!(
            rewrite_command("cat /mnt/user-data/workspace/a.txt > /mnt/user-data/outputs/", &re, &all),
            "cat /d/threads/t1/user-data/workspace/a.txt > /d/threads/t1/user-data/outputs/"
        );
        assert_eq!(
            rewrite_command("ls /mnt/user-data-backup /mnt/skills/x", &re, &all),
            "ls /mnt/user-data-backup /srv/skills/x"
        );
        assert_eq!(rewrite_command("echo /mnt/user-data;ls", &re, &all), "echo /d/threads/t1/user-data;ls");
        assert_eq!(rewrite_command("ls /mnt/user-data/workspacex", &re, &all), "ls /d/threads/t1/user-data/workspacex");
    }

    #[test]
    fn masks_back() {
        let (_, all, _) = setup();
        assert_eq!(
            mask_output("/d/threads/t1/user-data/workspace/x /srv/skills/a /d/threads/t1/user-data-b", &all),
            "/mnt/user-data/workspace/x /mnt/skills/a /d/threads/t1/user-data-b"
        );
    }
}
