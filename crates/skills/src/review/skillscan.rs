//! SkillScan's per-file rules as the review core runs them (`H/skills/skillscan/orchestrator.py`,
//! `scan_skill_dir` over the snapshot's text files): package properties, secrets, SKILL.md
//! declarations, shell idioms, network and resource patterns — with DeerFlow's rule texts,
//! severities, evidence and line numbers.
//!
//! Not ported: the Python analyzer (`_scan_python`), which walks CPython's `ast` of each Python
//! file. toolhost has no Python parser; each Python file is reported instead (see
//! [`ScanOutput::python_files`]) and the review marks `skillscan.python` as not assessed.

use std::collections::HashSet;
use std::io::Read;
use std::sync::OnceLock;

use fancy_regex::Regex as FancyRegex;
use regex::Regex;

use super::analyzer::is_eval_fixture_skill_md;

pub const MAX_FILE_BYTES: u64 = 64 * 1024 * 1024;

/// A SkillScan finding (`SecurityFinding`).
#[derive(Debug, Clone)]
pub struct SecurityFinding {
    pub rule_id: &'static str,
    pub severity: &'static str,
    pub file: Option<String>,
    pub line: Option<u64>,
    pub message: &'static str,
    pub remediation: &'static str,
    pub evidence: Option<String>,
}

pub struct ScanOutput {
    pub findings: Vec<SecurityFinding>,
    /// Python files whose AST rules were not run.
    pub python_files: Vec<String>,
}

struct Spec {
    severity: &'static str,
    message: &'static str,
    remediation: &'static str,
}

fn spec(rule_id: &str) -> Spec {
    let (severity, message, remediation) = match rule_id {
        "package-symlink" => ("HIGH", "Package contains a symlink entry.", "Remove symlinks from the skill package."),
        "package-nested-skill-md" => {
            ("CRITICAL", "Package contains a nested SKILL.md file.", "Keep exactly one SKILL.md at the skill root.")
        }
        "package-oversized-file" => (
            "CRITICAL",
            "Package contains a file that exceeds the per-file size limit.",
            "Remove or shrink the oversized file.",
        ),
        "package-executable-binary" => {
            ("CRITICAL", "Package contains an executable binary.", "Remove binary executables from the skill package.")
        }
        "package-nested-archive" => (
            "HIGH",
            "Package contains a nested archive file.",
            "Unpack and review nested archives before packaging the skill.",
        ),
        "package-hidden-sensitive-file" => (
            "HIGH",
            "Package contains a hidden sensitive file.",
            "Remove hidden credential or package-manager config files.",
        ),
        "package-git-directory" => (
            "MEDIUM",
            "Package contains a .git directory.",
            "Package only source files needed by the skill, excluding repository metadata.",
        ),
        "secret-private-key" => (
            "CRITICAL",
            "Private key material is embedded in skill content.",
            "Move private keys to a managed secret store and remove them from the skill.",
        ),
        "secret-cloud-token" => (
            "CRITICAL",
            "High-confidence cloud or API token is embedded in skill content.",
            "Move tokens to environment variables or a secret store.",
        ),
        "secret-env-assignment" => (
            "HIGH",
            "Secret-like assignment contains a non-placeholder value.",
            "Replace hardcoded credentials with documented runtime configuration.",
        ),
        "declaration-prompt-override" => (
            "HIGH",
            "SKILL.md contains a prompt override phrase.",
            "Rephrase examples so they describe unsafe text instead of instructing the agent to follow it.",
        ),
        "declaration-sensitive-capability" => (
            "HIGH",
            "SKILL.md declares a sensitive capability.",
            "Make the capability explicit, narrow, and justified, or remove it.",
        ),
        "declaration-sensitive-path" => (
            "HIGH",
            "SKILL.md references sensitive host or credential paths.",
            "Remove references to sensitive host paths unless they are harmless documentation.",
        ),
        "declaration-external-endpoint" => (
            "MEDIUM",
            "SKILL.md declares an external network endpoint.",
            "Document why the endpoint is needed and prefer HTTPS.",
        ),
        "shell-reverse-shell" => (
            "CRITICAL",
            "Shell script contains a reverse-shell idiom.",
            "Remove reverse-shell behavior from the skill.",
        ),
        "shell-reverse-shell-heuristic" => (
            "HIGH",
            "Shell script resembles a reverse-shell idiom.",
            "Confirm this is not reverse-shell behavior; unmistakable reverse-shell signals are blocked outright.",
        ),
        "shell-sensitive-exfil" => (
            "CRITICAL",
            "Shell script reads sensitive paths and sends data over the network.",
            "Remove sensitive reads or outbound transfer commands.",
        ),
        "shell-curl-pipe-shell" => (
            "HIGH",
            "Shell script pipes remote content into a shell.",
            "Download, verify, and execute reviewed code explicitly instead.",
        ),
        "shell-destructive-command" => (
            "HIGH",
            "Shell script contains an unmistakably destructive command.",
            "Remove destructive commands from skill scripts.",
        ),
        "shell-env-dump" => {
            ("MEDIUM", "Shell script dumps the environment.", "Avoid bulk environment dumps in skills.")
        }
        "network-cloud-metadata" => (
            "CRITICAL",
            "Skill content references a cloud metadata service.",
            "Remove cloud metadata access from the skill.",
        ),
        "resource-fork-bomb" => {
            ("CRITICAL", "Skill content contains a fork-bomb pattern.", "Remove resource-exhaustion payloads.")
        }
        "network-cleartext-http" => (
            "MEDIUM",
            "Skill content references a non-local cleartext HTTP endpoint.",
            "Use HTTPS or document why cleartext local development is required.",
        ),
        "network-local-http" => (
            "LOW",
            "Skill content references a local HTTP endpoint.",
            "Confirm the local endpoint is expected for this skill.",
        ),
        other => unreachable!("unknown SkillScan rule {other}"),
    };
    Spec { severity, message, remediation }
}

fn rule(rule_id: &'static str) -> &'static str {
    rule_id
}

fn finding(rule_id: &'static str, file: &str, line: Option<u64>, evidence: Option<String>) -> SecurityFinding {
    let s = spec(rule_id);
    let evidence =
        if evidence.is_some() && rule_id.starts_with("secret-") { Some("[redacted]".into()) } else { evidence };
    SecurityFinding {
        rule_id: rule(rule_id),
        severity: s.severity,
        file: Some(file.to_string()),
        line,
        message: s.message,
        remediation: s.remediation,
        evidence,
    }
}

fn line_number(text: &str, index: usize) -> u64 {
    text.as_bytes()[..index.min(text.len())].iter().filter(|b| **b == b'\n').count() as u64 + 1
}

fn from_match(rule_id: &'static str, file: &str, text: &str, start: usize, matched: &str) -> SecurityFinding {
    finding(rule_id, file, Some(line_number(text, start)), Some(matched.to_string()))
}

macro_rules! re {
    ($pat:expr) => {{
        static RE: OnceLock<Regex> = OnceLock::new();
        RE.get_or_init(|| Regex::new($pat).expect("static regex"))
    }};
}

fn search<'t>(re: &Regex, text: &'t str) -> Option<regex::Match<'t>> {
    re.find(text)
}

const LOCAL_HTTP_HOSTS: [&str; 4] = ["localhost", "127.0.0.1", "0.0.0.0", "::1"];
const PLACEHOLDER_VALUES: [&str; 13] = [
    "",
    "x",
    "xx",
    "xxx",
    "xxxx",
    "changeme",
    "change-me",
    "example",
    "placeholder",
    "test",
    "dummy",
    "your-key",
    "<your-key>",
];
const ARCHIVE_SUFFIXES: [&str; 11] =
    [".zip", ".tar", ".tar.gz", ".tgz", ".tar.bz2", ".tbz2", ".tar.xz", ".txz", ".7z", ".rar", ".whl"];

fn sensitive_path_re() -> &'static Regex {
    re!(r"(~/.ssh|/etc/passwd|/etc/shadow|/var/run/docker\.sock|docker\.sock|169\.254\.169\.254)")
}

/// Python's `str.strip()` / `str.strip(chars)`.
fn py_strip(s: &str) -> &str {
    s.trim_matches(|c: char| c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c))
}

fn looks_like_placeholder(value: &str) -> bool {
    let normalized = py_strip(value).trim_matches(|c| c == '"' || c == '\'').to_lowercase();
    if PLACEHOLDER_VALUES.contains(&normalized.as_str()) {
        return true;
    }
    normalized.starts_with('<')
        || normalized.starts_with("${")
        || normalized.contains("your")
        || normalized.contains("example")
}

/// `str.splitlines()[0]` (empty text has no first line: Python would raise, and callers only ask
/// when the text starts with `#!`).
fn first_line(text: &str) -> &str {
    let end = text
        .find(['\n', '\r', '\u{0b}', '\u{0c}', '\u{1c}', '\u{1d}', '\u{1e}', '\u{85}', '\u{2028}', '\u{2029}'])
        .unwrap_or(text.len());
    &text[..end]
}

fn is_python_path(rel: &str, text: &str) -> bool {
    super::snapshot::posix_suffix(rel).to_lowercase() == ".py"
        || (text.starts_with("#!") && first_line(text).to_lowercase().contains("python"))
}

fn is_shell_path(rel: &str, text: &str) -> bool {
    let suffix = super::snapshot::posix_suffix(rel).to_lowercase();
    suffix == ".sh"
        || suffix == ".bash"
        || (text.starts_with("#!") && {
            let l = first_line(text).to_lowercase();
            ["sh", "bash", "zsh"].iter().any(|s| l.contains(s))
        })
}

fn http_host(url: &str) -> Option<&str> {
    re!(r"\Ahttps?://\[?([^\]/:]+)").captures(url).and_then(|c| c.get(1)).map(|m| m.as_str())
}

fn scan_secrets(rel: &str, text: &str, out: &mut Vec<SecurityFinding>) {
    if let Some(m) = search(re!(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----"), text) {
        out.push(from_match("secret-private-key", rel, text, m.start(), m.as_str()));
    }
    let token_patterns: [&Regex; 4] = [
        re!(r"\b(?:AKIA|ASIA)[A-Z0-9]{16}\b"),
        re!(r"\bgh[pousr]_[A-Za-z0-9_]{20,}\b"),
        re!(r"\bxox[baprs]-[A-Za-z0-9-]{20,}\b"),
        re!(r"\bsk-[A-Za-z0-9]{20,}\b"),
    ];
    for re in token_patterns {
        if let Some(m) = re.find(text) {
            if !looks_like_placeholder(m.as_str()) {
                out.push(from_match("secret-cloud-token", rel, text, m.start(), m.as_str()));
                break;
            }
        }
    }
    let assignment =
        re!(r#"(?im)\b(token|password|passwd|api[_-]?key|secret|credential)s?\b\s*[:=]\s*["']?([^"'\s#]+)"#);
    for c in assignment.captures_iter(text) {
        let value = py_strip(c.get(2).map_or("", |m| m.as_str()));
        if !looks_like_placeholder(value) {
            let m = c.get(0).expect("group 0");
            out.push(from_match("secret-env-assignment", rel, text, m.start(), m.as_str()));
            break;
        }
    }
}

fn scan_declaration(rel: &str, text: &str, out: &mut Vec<SecurityFinding>) {
    let prompt = re!(
        r"(?i)\b(ignore|disregard)\s+(all\s+)?(previous|prior)\s+instructions\b|\boverride\s+(the\s+)?(system|developer)\s+instructions\b"
    );
    if let Some(m) = prompt.find(text) {
        out.push(from_match("declaration-prompt-override", rel, text, m.start(), m.as_str()));
    }
    let capability = re!(
        r"(?i)(execute\s+(arbitrary\s+)?commands?|shell\s+commands?|credential\s+access|read\s+secrets?|arbitrary\s+network|network\s+egress)"
    );
    if let Some(m) = capability.find(text) {
        out.push(from_match("declaration-sensitive-capability", rel, text, m.start(), m.as_str()));
    }
    if let Some(m) = sensitive_path_re().find(text) {
        out.push(from_match("declaration-sensitive-path", rel, text, m.start(), m.as_str()));
    }
    for m in re!(r#"https?://[^\s)'"<>]+"#).find_iter(text) {
        if m.as_str().starts_with("http://") {
            if let Some(host) = http_host(m.as_str()) {
                if !LOCAL_HTTP_HOSTS.contains(&host) {
                    out.push(from_match("declaration-external-endpoint", rel, text, m.start(), m.as_str()));
                    break;
                }
            }
        }
    }
}

const DESTRUCTIVE_RM: &str = r"\brm\s+(?:-\S+\s+|--no-preserve-root\s+)*-\S*[rR]\S*\s+(?:-\S+\s+|--no-preserve-root\s+)*/(?:\*|\s|\z|(?:bin|boot|dev|etc|home|lib|lib64|opt|proc|root|run|sbin|srv|sys|usr|var)(?:/\*?)?(?:\s|\z))";

fn scan_shell(rel: &str, text: &str, out: &mut Vec<SecurityFinding>) {
    if let Some(m) = re!(r"(/dev/tcp/|nc\s+-e\b)").find(text) {
        out.push(from_match("shell-reverse-shell", rel, text, m.start(), m.as_str()));
    }
    if let Some(m) = re!(r"(bash\s+-i\b|mkfifo\s+)").find(text) {
        out.push(from_match("shell-reverse-shell-heuristic", rel, text, m.start(), m.as_str()));
    }
    if re!(r"(/etc/shadow|/etc/passwd)").is_match(text) && re!(r"\b(curl|wget|nc|scp)\b").is_match(text) {
        let index = text.find("/etc").unwrap_or(0);
        out.push(finding("shell-sensitive-exfil", rel, Some(line_number(text, index)), Some("/etc".into())));
    }
    if let Some(m) = re!(r"\b(curl|wget)\b[^\n|;]*\|\s*(?:sh|bash)\b").find(text) {
        out.push(from_match("shell-curl-pipe-shell", rel, text, m.start(), m.as_str()));
    }
    static DESTRUCTIVE: OnceLock<Regex> = OnceLock::new();
    let destructive = DESTRUCTIVE.get_or_init(|| {
        Regex::new(&format!(r"{DESTRUCTIVE_RM}|:\(\)\{{\s*:\|:&\s*\}};:|dd\s+[^#\n]*\bof=/dev/")).expect("static regex")
    });
    if let Some(m) = destructive.find(text) {
        out.push(from_match("shell-destructive-command", rel, text, m.start(), m.as_str()));
    }
    if let Some(m) = re!(r"\b(env|printenv|export\s+-p)\b").find(text) {
        out.push(from_match("shell-env-dump", rel, text, m.start(), m.as_str()));
    }
}

fn scan_network_and_resource(rel: &str, text: &str, out: &mut Vec<SecurityFinding>) {
    if let Some(m) = re!(r"(169\.254\.169\.254|metadata\.google\.internal)").find(text) {
        out.push(from_match("network-cloud-metadata", rel, text, m.start(), m.as_str()));
    }
    if let Some(m) = re!(r":\(\)\{\s*:\|:&\s*\};:").find(text) {
        out.push(from_match("resource-fork-bomb", rel, text, m.start(), m.as_str()));
    }
    if let Some(c) = re!(r"http://([A-Za-z0-9.-]+)(?::\d+)?(?:/|\b)").captures(text) {
        let host = c.get(1).map_or("", |m| m.as_str());
        let m = c.get(0).expect("group 0");
        let local = LOCAL_HTTP_HOSTS.contains(&host)
            || host.starts_with("10.")
            || host.starts_with("192.168.")
            || re!(r"\A172\.(1[6-9]|2\d|3[01])\.").is_match(host);
        let rule = if local { "network-local-http" } else { "network-cleartext-http" };
        out.push(from_match(rule, rel, text, m.start(), m.as_str()));
    }
}

/// `_is_hidden_sensitive_path` (SkillScan's version).
fn is_hidden_sensitive_path(rel: &str) -> bool {
    let parts: Vec<&str> = rel.split('/').collect();
    let last = parts.last().copied().unwrap_or("");
    if parts.contains(&".aws") && last == "credentials" {
        return true;
    }
    if parts.contains(&".git") && last == "config" {
        return true;
    }
    let listed = [".env", ".npmrc", ".pypirc", ".netrc", "credentials", "config"].contains(&last);
    listed
        && (last.starts_with('.')
            || ["credential", "npmrc", "pypirc", "netrc"].iter().any(|t| last.to_lowercase().contains(t)))
}

fn is_nested_archive_name(rel: &str) -> bool {
    let lower = rel.to_lowercase();
    ARCHIVE_SUFFIXES.iter().any(|s| lower.ends_with(s))
}

fn looks_like_archive(bytes: &[u8]) -> bool {
    bytes.starts_with(b"PK\x03\x04") || bytes.starts_with(b"\x1f\x8b") || bytes.starts_with(b"7z\xbc\xaf\x27\x1c")
}

fn is_executable_binary(prefix: &[u8]) -> bool {
    prefix.starts_with(b"\x7fELF")
        || prefix.starts_with(b"MZ")
        || prefix.starts_with(b"\xfe\xed\xfa")
        || prefix.starts_with(b"\xcf\xfa\xed\xfe")
        || prefix.starts_with(b"\xca\xfe\xba\xbe")
}

fn binary_magic_evidence(prefix: &[u8]) -> &'static str {
    if prefix.starts_with(b"\x7fELF") {
        "ELF"
    } else if prefix.starts_with(b"MZ") {
        "PE"
    } else {
        "Mach-O"
    }
}

/// `_nested_zip_contains_executable`: the first 256 members of an embedded ZIP, 8 bytes each.
fn nested_zip_contains_executable(data: &[u8]) -> bool {
    let Ok(mut zf) = zip::ZipArchive::new(std::io::Cursor::new(data)) else { return false };
    for i in 0..zf.len().min(256) {
        let Ok(member) = zf.by_index(i) else { continue };
        if member.is_dir() {
            continue;
        }
        let mut prefix = Vec::with_capacity(8);
        if member.take(8).read_to_end(&mut prefix).is_ok() && is_executable_binary(&prefix) {
            return true;
        }
    }
    false
}

fn scan_package_properties(rel: &str, bytes: &[u8], out: &mut Vec<SecurityFinding>) {
    let parts: Vec<&str> = rel.split('/').collect();
    let name = parts.last().copied().unwrap_or("");
    if name == "SKILL.md" && parts.len() > 1 && !is_eval_fixture_skill_md(rel) {
        out.push(finding("package-nested-skill-md", rel, None, Some(rel.to_string())));
    }
    if bytes.len() as u64 > MAX_FILE_BYTES {
        out.push(finding("package-oversized-file", rel, None, Some(format!("{} bytes", bytes.len()))));
    }
    if is_hidden_sensitive_path(rel) {
        out.push(finding("package-hidden-sensitive-file", rel, None, Some(name.to_string())));
    }
    if parts.contains(&".git") {
        out.push(finding("package-git-directory", rel, None, Some(".git".into())));
    }
    let prefix = &bytes[..bytes.len().min(8)];
    if is_nested_archive_name(rel) || looks_like_archive(bytes) {
        let mut f = finding("package-nested-archive", rel, None, Some(name.to_string()));
        if prefix.starts_with(b"PK\x03\x04") && nested_zip_contains_executable(bytes) {
            f.evidence = Some(format!("{name}: contains an executable binary member"));
            f.severity = "CRITICAL";
        }
        out.push(f);
    }
    if is_executable_binary(prefix) {
        out.push(finding("package-executable-binary", rel, None, Some(binary_magic_evidence(prefix).into())));
    }
}

/// Python's `sorted()` of `Path` objects: by their parts, not their text.
fn path_parts_cmp(a: &str, b: &str) -> std::cmp::Ordering {
    a.split('/').cmp(b.split('/'))
}

/// `scan_skill_dir` over the text files DeerFlow writes to its temporary directory (paths
/// already unique and normalized; the caller checks they can all be written).
pub fn scan_text_files(files: &[(&str, &str)]) -> ScanOutput {
    let mut sorted: Vec<(&str, &str)> = files.to_vec();
    sorted.sort_by(|a, b| path_parts_cmp(a.0, b.0));
    let mut findings = Vec::new();
    let mut python_files = Vec::new();
    for (rel, content) in sorted {
        let bytes = content.as_bytes();
        scan_package_properties(rel, bytes, &mut findings);
        if bytes[..bytes.len().min(4096)].contains(&0) {
            continue;
        }
        let text = content;
        scan_secrets(rel, text, &mut findings);
        if rel.rsplit('/').next() == Some("SKILL.md") {
            scan_declaration(rel, text, &mut findings);
        }
        if is_python_path(rel, text) {
            python_files.push(rel.to_string());
        }
        if is_shell_path(rel, text) {
            scan_shell(rel, text, &mut findings);
        }
        scan_network_and_resource(rel, text, &mut findings);
    }
    let mut seen: HashSet<(&'static str, Option<String>, Option<u64>)> = HashSet::new();
    findings.retain(|f| seen.insert((f.rule_id, f.file.clone(), f.line)));
    ScanOutput { findings, python_files }
}

/// Whether DeerFlow could write every text file into its scan directory: a path that is also
/// the directory of another (`a` and `a/b`) makes its `mkdir` fail (`FileExistsError`).
pub fn write_conflict(paths: &[&str]) -> bool {
    let set: HashSet<&str> = paths.iter().copied().collect();
    paths.iter().any(|p| {
        let mut idx = 0;
        while let Some(i) = p[idx..].find('/') {
            if set.contains(&p[..idx + i]) {
                return true;
            }
            idx += i + 1;
        }
        false
    })
}

/// `_PATH_TOKEN_RE` needs a look-behind.
pub fn path_token_re() -> &'static FancyRegex {
    static RE: OnceLock<FancyRegex> = OnceLock::new();
    RE.get_or_init(|| {
        FancyRegex::new(r"(?<![\w./-])(?:references|scripts|templates|assets|evals)/[A-Za-z0-9._~/%+-]+")
            .expect("static regex")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_order_is_by_parts() {
        let mut v = vec!["a.b", "a/b", "a"];
        v.sort_by(|a, b| path_parts_cmp(a, b));
        assert_eq!(v, ["a", "a/b", "a.b"]);
    }

    #[test]
    fn write_conflicts_are_found() {
        assert!(write_conflict(&["a", "a/b"]));
        assert!(!write_conflict(&["a.md", "a/b"]));
    }

    #[test]
    fn secrets_are_redacted() {
        let out = scan_text_files(&[("x.md", "key: AKIAABCDEFGHIJKLMNOP\n")]);
        let f = out.findings.iter().find(|f| f.rule_id == "secret-cloud-token").expect("token");
        assert_eq!(f.evidence.as_deref(), Some("[redacted]"));
    }
}
