//! DeerFlow's `validate_local_bash_command_paths`: the best-effort check that a host-bash
//! command only names virtual paths (user data, skills, ACP workspace, custom mounts, MCP
//! filesystem roots) and a few system prefixes. Not a boundary — confinement is.

use std::sync::LazyLock;

use fancy_regex::Regex;

use toolhost_py::shlex;
use toolhost_py::str_methods::py_isspace;

const VIRTUAL_PATH_PREFIX: &str = "/mnt/user-data";
const SYSTEM_PATH_PREFIXES: [&str; 6] = ["/bin/", "/usr/bin/", "/usr/sbin/", "/sbin/", "/opt/homebrew/bin/", "/dev/"];
const CWD_COMMANDS: [&str; 2] = ["cd", "pushd"];
const COMMAND_WRAPPERS: [&str; 2] = ["command", "builtin"];
const PREFIX_AND_END_KEYWORDS: [&str; 17] = [
    "!", "{", "case", "do", "elif", "else", "for", "if", "select", "then", "time", "until", "while", "}", "done",
    "esac", "fi",
];
const ROOT_PATH_COMMANDS: [&str; 16] =
    ["awk", "cat", "cp", "du", "find", "grep", "head", "less", "ln", "ls", "more", "mv", "rm", "sed", "tail", "tar"];
const SEPARATORS: [&str; 8] = [";", "&&", "||", "|", "|&", "&", "(", ")"];
const REDIRECTIONS: [&str; 11] = ["<", ">", "<<", ">>", "<<<", "<>", ">&", "<&", "&>", "&>>", ">|"];

fn re(pattern: &str) -> Regex {
    // Constant patterns: a failure is a bug every test catches.
    Regex::new(pattern).expect("path validation pattern compiles")
}

static ABSOLUTE_PATH: LazyLock<Regex> = LazyLock::new(|| re(r#"(?<![:\w])(?<!:/)/(?:[^\s"'`;&|<>()]+)"#));
static IDENTIFIER_BRACE_BLOCK: LazyLock<Regex> = LazyLock::new(|| re(r"\{([^{}]*)\}"));
static IDENTIFIER: LazyLock<Regex> = LazyLock::new(|| re(r"^[A-Za-z_][A-Za-z0-9_]*$"));
static FILE_URL: LazyLock<Regex> = LazyLock::new(|| re(r"(?i)\bfile://\S+"));
static URL_WITH_SCHEME: LazyLock<Regex> = LazyLock::new(|| re(r"(?i)^[a-z][a-z0-9+.-]*://"));
static URL_IN_COMMAND: LazyLock<Regex> = LazyLock::new(|| re(r#"(?i)\b[a-z][a-z0-9+.-]*://[^\s"'`;&|<>()]+"#));
static DOTDOT_SEGMENT: LazyLock<Regex> = LazyLock::new(|| re(r"(?:^|[/\\=])\.\.(?:$|[/\\])"));
static CD_IN_SUBSTITUTION: LazyLock<Regex> = LazyLock::new(|| re(r"\$\([^)]*\b(?:cd|pushd)\b"));
static ASSIGNMENT_NAME: LazyLock<Regex> = LazyLock::new(|| re(r"^[A-Za-z_][A-Za-z0-9_]*$"));

/// The prefixes a host-bash command may name besides `/mnt/user-data`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BashPathPolicy {
    /// `skills.container_path` (default `/mnt/skills`).
    pub skills_container_path: String,
    /// The ACP workspace's virtual path (`/mnt/acp-workspace`).
    pub acp_virtual_path: String,
    /// `sandbox.mounts[].container_path` of mounts whose host path exists.
    pub mount_container_paths: Vec<String>,
    /// Allowed prefixes from MCP filesystem servers, each ending in `/` (see
    /// [`mcp_allowed_paths`]).
    pub mcp_allowed_paths: Vec<String>,
}

impl Default for BashPathPolicy {
    fn default() -> Self {
        Self {
            skills_container_path: "/mnt/skills".into(),
            acp_virtual_path: "/mnt/acp-workspace".into(),
            mount_container_paths: Vec::new(),
            mcp_allowed_paths: Vec::new(),
        }
    }
}

/// DeerFlow's `_get_mcp_allowed_paths` for one enabled MCP server's `args`: when an argument
/// mentions `server-filesystem`, every absolute, non-option argument becomes an allowed
/// prefix (with a trailing `/`).
pub fn mcp_allowed_paths(args: &[String]) -> Vec<String> {
    if !args.iter().any(|a| a.contains("server-filesystem")) {
        return Vec::new();
    }
    args.iter()
        .filter(|a| !a.starts_with('-') && a.starts_with('/'))
        .map(|a| format!("{}/", a.trim_end_matches('/')))
        .collect()
}

/// A command the validator refuses; `Display` is DeerFlow's exact `PermissionError` text (the
/// tool answers `Error: {it}`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct PathViolation(pub String);

fn traversal() -> PathViolation {
    PathViolation("Access denied: path traversal detected".into())
}

fn reject_path_traversal(path: &str) -> Result<(), PathViolation> {
    if path.replace('\\', "/").split('/').any(|segment| segment == "..") {
        return Err(traversal());
    }
    Ok(())
}

fn is_under(path: &str, prefix: &str) -> bool {
    path == prefix || path.strip_prefix(prefix).is_some_and(|rest| rest.starts_with('/'))
}

fn matches(regex: &Regex, text: &str) -> bool {
    // fancy-regex only errors when its backtrack limit is hit; treat that as a match so a
    // hostile input fails closed.
    regex.is_match(text).unwrap_or(true)
}

impl BashPathPolicy {
    fn is_allowed_absolute(&self, path: &str, allow_system_paths: bool) -> Result<bool, PathViolation> {
        let mcp =
            self.mcp_allowed_paths.iter().any(|a| path.starts_with(a.as_str()) || path == a.trim_end_matches('/'));
        if mcp
            || is_under(path, VIRTUAL_PATH_PREFIX)
            || is_under(path, &self.skills_container_path)
            || is_under(path, &self.acp_virtual_path)
            || self.mount_container_paths.iter().any(|m| is_under(path, m))
        {
            reject_path_traversal(path)?;
            return Ok(true);
        }
        Ok(allow_system_paths
            && SYSTEM_PATH_PREFIXES.iter().any(|p| path == p.trim_end_matches('/') || path.starts_with(p)))
    }

    fn validate_cwd_target(&self, command: &str, target: Option<&str>) -> Result<(), PathViolation> {
        let unsafe_cwd = |shown: String| {
            Err(PathViolation(format!(
                "Unsafe working directory change in command: {shown}. Use paths under {VIRTUAL_PATH_PREFIX}"
            )))
        };
        let Some(target) = target.filter(|t| *t != "-") else {
            return unsafe_cwd(command.to_string());
        };
        if target.starts_with(['$', '`', '~']) {
            return unsafe_cwd(format!("{command} {target}"));
        }
        if target.starts_with('/') {
            reject_path_traversal(target)?;
            if !self.is_allowed_absolute(target, false)? {
                return unsafe_cwd(format!("{command} {target}"));
            }
        }
        Ok(())
    }
}

fn is_separator(token: &str) -> bool {
    SEPARATORS.contains(&token)
}

fn is_redirection(token: &str) -> bool {
    REDIRECTIONS.contains(&token)
}

fn is_assignment(token: &str) -> bool {
    token.split_once('=').is_some_and(|(name, _)| !name.is_empty() && matches(&ASSIGNMENT_NAME, name))
}

fn is_non_file_url_token(token: &str) -> bool {
    let mut values = vec![token];
    if let Some((_, value)) = token.split_once('=') {
        values.push(value);
    }
    values.iter().any(|v| matches(&URL_WITH_SCHEME, v) && !v.to_lowercase().starts_with("file://"))
}

fn split_shell_tokens(command: &str) -> Vec<String> {
    let normalized = command.replace("\r\n", "\n").replace('\r', "\n").replace('\n', " ; ");
    shlex::split_punctuation(&normalized)
        .unwrap_or_else(|_| command.split(py_isspace).filter(|w| !w.is_empty()).map(String::from).collect())
}

fn last_segment(token: &str) -> &str {
    token.rsplit('/').next().unwrap_or(token)
}

/// `_next_cd_target`: the first operand of `cd`/`pushd` and the index after it.
fn next_cd_target(tokens: &[String], start: usize) -> (Option<&str>, usize) {
    let mut i = start;
    while i < tokens.len() {
        let token = tokens[i].as_str();
        if is_separator(token) {
            return (None, i);
        }
        if is_redirection(token) {
            i += 2;
            continue;
        }
        if token.starts_with('-') && token != "-" {
            i += 1;
            continue;
        }
        return (Some(token), i + 1);
    }
    (None, i)
}

fn validate_root_path_args(command: &str, tokens: &[String], start: usize) -> Result<(), PathViolation> {
    if !ROOT_PATH_COMMANDS.contains(&command) {
        return Ok(());
    }
    let mut i = start;
    while i < tokens.len() {
        let token = tokens[i].as_str();
        if is_separator(token) {
            return Ok(());
        }
        if is_redirection(token) {
            i += 2;
            continue;
        }
        if token == "/" {
            return Err(PathViolation(format!(
                "Unsafe absolute paths in command: /. Use paths under {VIRTUAL_PATH_PREFIX}"
            )));
        }
        i += 1;
    }
    Ok(())
}

/// `_validate_local_bash_shell_tokens`: relative escapes the absolute-path scan cannot see.
fn validate_shell_tokens(policy: &BashPathPolicy, command: &str) -> Result<(), PathViolation> {
    if matches(&CD_IN_SUBSTITUTION, command) {
        return Err(PathViolation(format!(
            "Unsafe working directory change in command substitution. Use paths under {VIRTUAL_PATH_PREFIX}"
        )));
    }
    let tokens = split_shell_tokens(command);
    for token in &tokens {
        if is_separator(token) || is_redirection(token) {
            continue;
        }
        if !is_non_file_url_token(token) && matches(&DOTDOT_SEGMENT, token) {
            return Err(traversal());
        }
    }

    let mut at_command_start = true;
    let mut i = 0;
    while i < tokens.len() {
        let token = tokens[i].as_str();
        if is_separator(token) {
            at_command_start = true;
            i += 1;
            continue;
        }
        if is_redirection(token) {
            i += 1;
            continue;
        }
        if at_command_start && is_assignment(token) {
            i += 1;
            continue;
        }
        let name = last_segment(token);
        if at_command_start && PREFIX_AND_END_KEYWORDS.contains(&name) {
            i += 1;
            continue;
        }
        if !at_command_start {
            i += 1;
            continue;
        }
        at_command_start = false;
        if COMMAND_WRAPPERS.contains(&name) && i + 1 < tokens.len() {
            let wrapped = last_segment(&tokens[i + 1]);
            if CWD_COMMANDS.contains(&wrapped) {
                let (target, next) = next_cd_target(&tokens, i + 2);
                policy.validate_cwd_target(wrapped, target)?;
                i = next;
                continue;
            }
            validate_root_path_args(wrapped, &tokens, i + 2)?;
        }
        if !CWD_COMMANDS.contains(&name) {
            validate_root_path_args(name, &tokens, i + 1)?;
            i += 1;
            continue;
        }
        let (target, next) = next_cd_target(&tokens, i + 1);
        policy.validate_cwd_target(name, target)?;
        i = next;
    }
    Ok(())
}

/// `_braces_are_identifier_placeholders_only`.
fn braces_are_identifier_placeholders_only(fragment: &str) -> bool {
    if fragment.contains("${") {
        return false;
    }
    let blocks: Vec<String> = IDENTIFIER_BRACE_BLOCK
        .captures_iter(fragment)
        .filter_map(|c| c.ok().and_then(|c| c.get(1).map(|m| m.as_str().to_string())))
        .collect();
    if fragment.matches('{').count() != blocks.len() || fragment.matches('}').count() != blocks.len() {
        return false;
    }
    blocks.iter().all(|inner| matches(&IDENTIFIER, inner))
}

/// `_is_non_path_literal_fragment`: text that only looks like a path (non-ASCII, `{id}`).
fn is_non_path_literal_fragment(fragment: &str) -> bool {
    if !fragment.is_ascii() {
        return true;
    }
    if fragment.contains(['{', '}']) {
        return braces_are_identifier_placeholders_only(fragment);
    }
    false
}

/// DeerFlow's `validate_local_bash_command_paths` with the allowed prefixes of `policy`.
/// `Err` carries DeerFlow's exact message.
pub fn validate_local_bash_command_paths(command: &str, policy: &BashPathPolicy) -> Result<(), PathViolation> {
    if let Ok(Some(m)) = FILE_URL.find(command) {
        return Err(PathViolation(format!(
            "Unsafe file:// URL in command: {}. Use paths under {VIRTUAL_PATH_PREFIX}",
            m.as_str()
        )));
    }
    validate_shell_tokens(policy, command)?;

    let url_spans: Vec<(usize, usize)> = URL_IN_COMMAND
        .find_iter(command)
        .filter_map(Result::ok)
        .filter(|m| !m.as_str().to_lowercase().starts_with("file://"))
        .map(|m| (m.start(), m.end()))
        .collect();
    let mut unsafe_paths: Vec<&str> = Vec::new();
    for m in ABSOLUTE_PATH.find_iter(command) {
        let m = match m {
            Ok(m) => m,
            // Backtrack limit: fail closed on the whole command.
            Err(_) => {
                return Err(PathViolation(format!(
                    "Unsafe absolute paths in command: {command}. Use paths under {VIRTUAL_PATH_PREFIX}"
                )))
            }
        };
        if url_spans.iter().any(|&(s, e)| s <= m.start() && m.start() < e) {
            continue;
        }
        let path = m.as_str();
        if is_non_path_literal_fragment(path) || policy.is_allowed_absolute(path, true)? {
            continue;
        }
        if !unsafe_paths.contains(&path) {
            unsafe_paths.push(path);
        }
    }
    if unsafe_paths.is_empty() {
        return Ok(());
    }
    // Python sorts by code point; Rust's `str` order is the same for UTF-8.
    unsafe_paths.sort_unstable();
    Err(PathViolation(format!(
        "Unsafe absolute paths in command: {}. Use paths under {VIRTUAL_PATH_PREFIX}",
        unsafe_paths.join(", ")
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(command: &str) -> Result<(), String> {
        validate_local_bash_command_paths(command, &BashPathPolicy::default()).map_err(|e| e.to_string())
    }

    // Spec §13 item 8, case by case.
    #[test]
    fn spec_item_8() {
        assert_eq!(check("cat ../uploads/secret.txt"), Err("Access denied: path traversal detected".into()));
        assert_eq!(
            check("cd / && cat etc/passwd"),
            Err("Unsafe working directory change in command: cd /. Use paths under /mnt/user-data".into())
        );
        assert_eq!(
            check("cd $HOME && ls"),
            Err("Unsafe working directory change in command: cd $HOME. Use paths under /mnt/user-data".into())
        );
        assert_eq!(
            check("echo \"$(cd $HOME && cat x)\""),
            Err("Unsafe working directory change in command substitution. Use paths under /mnt/user-data".into())
        );
        assert_eq!(check("ls /"), Err("Unsafe absolute paths in command: /. Use paths under /mnt/user-data".into()));
        assert_eq!(
            check("cat /etc/{passwd,shadow}"),
            Err("Unsafe absolute paths in command: /etc/{passwd,shadow}. Use paths under /mnt/user-data".into())
        );
        assert_eq!(
            check("cat /home/${USER}/.ssh/id_rsa"),
            Err("Unsafe absolute paths in command: /home/${USER}/.ssh/id_rsa. Use paths under /mnt/user-data".into())
        );
        assert_eq!(check("curl https://example.com/a/../b -o /mnt/user-data/workspace/x"), Ok(()));
        assert_eq!(check("python3 -c \"print(f'/端口{port}')\""), Ok(()));
        assert_eq!(check("echo cd /"), Ok(()));
        assert_eq!(
            check("cat file:///etc/passwd"),
            Err("Unsafe file:// URL in command: file:///etc/passwd. Use paths under /mnt/user-data".into())
        );
    }

    #[test]
    fn cd_forms_and_allowed_prefixes() {
        assert_eq!(
            check("cd"),
            Err("Unsafe working directory change in command: cd. Use paths under /mnt/user-data".into())
        );
        assert_eq!(
            check("cd -"),
            Err("Unsafe working directory change in command: cd. Use paths under /mnt/user-data".into())
        );
        assert_eq!(
            check("command pushd ~/x"),
            Err("Unsafe working directory change in command: pushd ~/x. Use paths under /mnt/user-data".into())
        );
        assert_eq!(check("cd /mnt/user-data/workspace && ls /mnt/skills/public /dev/null /usr/bin/env"), Ok(()));
        assert_eq!(
            check("cd /usr/bin"),
            Err("Unsafe working directory change in command: cd /usr/bin. Use paths under /mnt/user-data".into())
        );
        assert_eq!(
            check("cat /etc/passwd /tmp/a /etc/passwd"),
            Err("Unsafe absolute paths in command: /etc/passwd, /tmp/a. Use paths under /mnt/user-data".into())
        );
        assert_eq!(check("curl -H 'x' https://h/api/v1/items"), Ok(()));
        assert_eq!(check("ls /mnt/user-data/../etc"), Err("Access denied: path traversal detected".into()));
        assert_eq!(check("curl /devices/{id}/port"), Ok(()));
    }

    #[test]
    fn policy_prefixes() {
        let args: Vec<String> =
            ["-y", "@modelcontextprotocol/server-filesystem", "/srv/data/"].iter().map(|s| s.to_string()).collect();
        let policy = BashPathPolicy {
            mount_container_paths: vec!["/mnt/data".into()],
            mcp_allowed_paths: mcp_allowed_paths(&args),
            ..BashPathPolicy::default()
        };
        assert_eq!(policy.mcp_allowed_paths, vec!["/srv/data/".to_string()]);
        assert!(validate_local_bash_command_paths("cat /mnt/data/x /srv/data/y /srv/data", &policy).is_ok());
        assert!(validate_local_bash_command_paths("cat /srv/database", &policy).is_err());
        assert!(mcp_allowed_paths(&["/x".to_string()]).is_empty());
    }
}
