//! The audit's rules: DeerFlow's `_HIGH_RISK_PATTERNS`, command-position patterns and
//! `_MEDIUM_RISK_PATTERNS` copied verbatim, and toolhost's stricter checks (conformance
//! deviation 6) that close the known bypasses. Every regex is compiled once.

use std::sync::LazyLock;

use regex::{Regex, RegexSet};

use toolhost_py::shlex;
use toolhost_py::str_methods::{collapse_whitespace, py_isspace};

/// DeerFlow's `_RISKY_SUBSTITUTION_EXECUTABLES`.
const EXE: &str = r"(?:curl|wget|bash|sh|python[\d.]*|ruby|perl|base64)\b";
/// DeerFlow's interpreter alternation for the code-string rules.
const INTERP: &str = r"(?:(?:ba|da|k|z)?sh|python[\d.]*|perl|ruby|node|php)";
const FLAGS: &str = r"(?:-\w+\s+){0,4}";
/// DeerFlow's `_COMMAND_POSITION_PREFIX`.
const PREFIX: &str = r"(?:(?:env|command|builtin|exec|nohup|time|sudo|doas)\s+|\w+=\S*\s+){0,8}";

fn subst(exe: &str) -> String {
    format!(r"(?:[$<]\(\s*|`\s*){exe}")
}

fn high_risk_patterns() -> Vec<String> {
    let subst = subst(EXE);
    vec![
        r"rm\s+-[^\s]*r[^\s]*\s+(/\*?|~/?\*?|/home\b|/root\b)\s*$".into(),
        r"dd\s+if=".into(),
        r"mkfs".into(),
        r"cat\s+/etc/shadow".into(),
        r">+\s*/etc/".into(),
        r"\|\s*(ba)?sh\b".into(),
        format!(r#"\b(eval|source)\s+["']?{subst}"#),
        format!(r#"\b{INTERP}\s+{FLAGS}-[cepr]\s+["']?{subst}"#),
        format!(r#"\b{INTERP}\s+{FLAGS}<<<\s*["']?{subst}"#),
        r"base64\s+.*-d.*\|".into(),
        r">+\s*(/usr/bin/|/bin/|/sbin/)".into(),
        r">+\s*~/?\.(bashrc|profile|zshrc|bash_profile)".into(),
        r"/proc/[^/]+/environ".into(),
        r"\b(LD_PRELOAD|LD_LIBRARY_PATH)\s*=".into(),
        r"/dev/tcp/".into(),
        r"\S+\(\)\s*\{[^}]*\|\s*\S+\s*&".into(),
        r"while\s+true.*&\s*done".into(),
    ]
}

fn command_position_patterns() -> Vec<String> {
    vec![format!(r#"^{PREFIX}["']?\$\(\s*{EXE}"#), format!(r#"^{PREFIX}["']?`\s*{EXE}"#)]
}

fn set(patterns: Vec<String>) -> RegexSet {
    // Every `\b` here sits next to an ASCII letter of the pattern, so the ASCII boundary finds a
    // boundary wherever Python's Unicode one does (and also before a non-ASCII letter): never
    // weaker, and it keeps the whole set on the lazy DFA.
    let ascii: Vec<String> = patterns.iter().map(|p| p.replace(r"\b", r"(?-u:\b)")).collect();
    // The patterns are compile-time constants; a failure here is a bug caught by every test.
    RegexSet::new(ascii).expect("audit patterns compile")
}

/// Pass 1 of `_classify_command`: the high-risk patterns, searched.
static HIGH_RISK: LazyLock<RegexSet> = LazyLock::new(|| set(high_risk_patterns()));

/// `_matches_high_risk`: the high-risk patterns searched plus the command-position patterns
/// matched at the start (they carry their own `^`).
static HIGH_RISK_WITH_POSITION: LazyLock<RegexSet> = LazyLock::new(|| {
    let mut all = high_risk_patterns();
    all.extend(command_position_patterns());
    set(all)
});

static MEDIUM_RISK: LazyLock<RegexSet> = LazyLock::new(|| {
    set(vec![
        r"chmod\s+777".into(),
        r"pip3?\s+install".into(),
        r"apt(-get)?\s+install".into(),
        r"\b(sudo|su)\b".into(),
        r"\bPATH\s*=".into(),
    ])
});

/// DeerFlow's verdict for one sub-command.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    Pass,
    Warn,
    Block,
}

/// Pass 1: the whole (whitespace-collapsed) command against the high-risk patterns.
pub fn whole_command_is_high_risk(normalized: &str) -> bool {
    HIGH_RISK.is_match(normalized)
}

/// `_classify_single_command`.
pub fn classify_single(command: &str) -> Level {
    let normalized = collapse_whitespace(command);
    if HIGH_RISK_WITH_POSITION.is_match(&normalized) {
        return Level::Block;
    }
    // Without quotes, escapes or whitespace shlex does not know, `shlex.split` joined is the
    // collapsed text already checked.
    let shlex_differs = command
        .chars()
        .any(|c| matches!(c, '\'' | '"' | '\\') || (py_isspace(c) && !matches!(c, ' ' | '\t' | '\r' | '\n')));
    if shlex_differs {
        if let Ok(tokens) = shlex::split(command) {
            if HIGH_RISK_WITH_POSITION.is_match(&tokens.join(" ")) {
                return Level::Block;
            }
        }
    }
    if MEDIUM_RISK.is_match(&normalized) {
        return Level::Warn;
    }
    Level::Pass
}

// ---------------------------------------------------------------------------------------------
// toolhost's stricter rules (tests/conformance/README.md, deviation 6)
// ---------------------------------------------------------------------------------------------

/// Which stricter rule blocked a command DeerFlow would let through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StrictRule {
    /// Recursive `rm` of `/`, `~`, `/home` (or a top-level directory) in any flag spelling.
    RecursiveRmOfRoot,
    /// A pipe into a shell, or into an interpreter that reads its program from stdin.
    PipeIntoInterpreter,
    /// A fetched/interpreted substitution handed to an interpreter as code (`bash -lc
    /// "$(curl …)"`, `. <(curl …)`).
    CodeStringSubstitution,
    /// A risky substitution in command position after wrappers or keywords DeerFlow does not
    /// look through (`nice`, `if`, `{`, `!`, `xargs`, any number of assignments, …).
    SubstitutionInCommandPosition,
}

impl StrictRule {
    pub fn name(self) -> &'static str {
        match self {
            StrictRule::RecursiveRmOfRoot => "recursive-rm-of-root",
            StrictRule::PipeIntoInterpreter => "pipe-into-interpreter",
            StrictRule::CodeStringSubstitution => "code-string-substitution",
            StrictRule::SubstitutionInCommandPosition => "substitution-in-command-position",
        }
    }
}

/// Executables whose output must not be executed, widened from DeerFlow's list with the other
/// shells, interpreters and raw network tools.
const EXE_STRICT: &str =
    r"(?:curl|wget|nc|ncat|socat|(?:ba|da|k|z|c|tc|a)?sh|fish|python[\d.]*|ruby|perl|node|nodejs|php|base64)\b";
const INTERP_STRICT: &str =
    r"(?:(?:ba|da|k|z|c|tc|a)?sh|fish|python[\d.]*|pypy[\d.]*|perl|ruby|node|nodejs|php|lua|deno|bun)";

static CODE_STRING: LazyLock<RegexSet> = LazyLock::new(|| {
    let subst = subst(EXE_STRICT);
    let flags = r"(?:-[\w-]+\s+){0,8}";
    set(vec![
        // Code-string flags combined with others (`-lc`, `-xc`, `-Ic`) or spelled long.
        format!(
            r#"\b{INTERP_STRICT}\s+{flags}(?:-[A-Za-z]*[cepr][A-Za-z]*|--(?:eval|print|command))(?:\s+|=)["']?{subst}"#
        ),
        format!(r#"\b{INTERP_STRICT}\s+{flags}<<<\s*["']?{subst}"#),
        // Process substitution run as a script: `bash <(curl …)`, `. <(curl …)`.
        format!(r#"\b{INTERP_STRICT}\s+{flags}["']?<\(\s*{EXE_STRICT}"#),
        format!(r#"(?:^|[\s;&|({{])\.\s+["']?{subst}"#),
        format!(r#"\b(?:eval|source)\s+["']?{subst}"#),
    ])
});

static ASSIGNMENT: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^[A-Za-z_][A-Za-z0-9_]*(?:\[[^\]]*\])?\+?=").expect("assignment pattern compiles"));

static RISKY_SUBSTITUTION_START: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(&format!(r#"^["']?(?:\$\(|`)\s*{EXE_STRICT}"#)).expect("substitution pattern compiles")
});

/// Words that keep the next word in command position. The value lists the options of each
/// wrapper that take a separate argument, and how many leading operands it takes before the
/// command (`timeout 10 cmd`).
fn wrapper(word: &str) -> Option<(&'static [&'static str], usize)> {
    Some(match word {
        "if" | "then" | "else" | "elif" | "do" | "while" | "until" | "!" | "{" | "time" | "exec" | "command"
        | "builtin" | "nohup" | "setsid" => (&[], 0),
        "env" => (&["-u", "-C", "-S", "--unset", "--chdir", "--split-string"], 0),
        "sudo" => (&["-u", "-g", "-h", "-p", "-C", "-D", "-r", "-t", "-U", "-T"], 0),
        "doas" => (&["-u", "-C"], 0),
        "nice" => (&["-n", "--adjustment"], 0),
        "ionice" => (&["-c", "-n", "-p", "-P", "-u"], 0),
        "stdbuf" => (&["-i", "-o", "-e"], 0),
        "xargs" => {
            (&["-I", "-i", "-n", "-P", "-L", "-l", "-s", "-d", "-E", "-e", "-a", "--arg-file", "--delimiter"], 0)
        }
        "timeout" => (&["-s", "-k", "--signal", "--kill-after"], 1),
        "chrt" | "taskset" => (&[], 1),
        _ => return None,
    })
}

/// Split a (sub-)command into shell words on unquoted whitespace, keeping quotes and
/// `$(…)`/backtick substitutions inside one word.
pub fn shell_words(text: &str) -> Vec<&str> {
    let mut words = Vec::new();
    let mut start: Option<usize> = None;
    let (mut single, mut double, mut backtick, mut escaping) = (false, false, false, false);
    let mut depth = 0usize;
    let mut prev = '\0';
    for (i, c) in text.char_indices() {
        let boundary = !single && !double && !backtick && depth == 0 && !escaping && py_isspace(c);
        if boundary {
            if let Some(s) = start.take() {
                words.push(&text[s..i]);
            }
            prev = c;
            continue;
        }
        if start.is_none() {
            start = Some(i);
        }
        if escaping {
            escaping = false;
        } else if c == '\\' && !single {
            escaping = true;
        } else if c == '\'' && !double && !backtick && depth == 0 {
            single = !single;
        } else if c == '"' && !single {
            double = !double;
        } else if c == '`' && !single {
            backtick = !backtick;
        } else if c == '(' && !single && (prev == '$' || prev == '<' || depth > 0) {
            depth += 1;
        } else if c == ')' && !single && depth > 0 {
            depth -= 1;
        }
        prev = c;
    }
    if let Some(s) = start {
        words.push(&text[s..]);
    }
    words
}

fn unquote(word: &str) -> String {
    if !word.contains(['\'', '"', '\\']) {
        return word.to_string();
    }
    shlex::split(word).ok().and_then(|t| t.into_iter().next()).unwrap_or_else(|| word.to_string())
}

fn basename(word: &str) -> &str {
    let word = word.trim_start_matches('\\');
    word.rsplit('/').next().unwrap_or(word)
}

/// Index of the command word of `words`, after assignments and wrappers with their options.
fn command_index(words: &[&str]) -> Option<usize> {
    let mut i = 0;
    while i < words.len() {
        let word = words[i].trim_start_matches('(');
        if word.is_empty() || ASSIGNMENT.is_match(word) {
            i += 1;
            continue;
        }
        let Some((arg_options, operands)) = wrapper(basename(&unquote(word))) else {
            return Some(i);
        };
        i += 1;
        // The wrapper's own options (and the separate arguments of those that take one).
        while i < words.len() && words[i].starts_with('-') && words[i] != "-" {
            let option = words[i];
            i += 1;
            if option == "--" {
                break;
            }
            if arg_options.contains(&option) {
                i += 1;
            }
        }
        i += operands;
    }
    None
}

/// A risky substitution in command position (after any wrappers, keywords and assignments).
pub fn substitution_in_command_position(part: &str) -> bool {
    let words = shell_words(part);
    command_index(&words).is_some_and(|i| RISKY_SUBSTITUTION_START.is_match(words[i].trim_start_matches('(')))
}

/// A code-string, eval/source or process-substitution rule, on the collapsed text.
pub fn code_string_substitution(normalized: &str) -> bool {
    // Every pattern names an interpreter, `eval`/`source` or `.`; `sh` also covers the shells.
    const NEEDLES: [&str; 11] = ["sh", "python", "pypy", "perl", "ruby", "node", "php", "lua", "deno", "bun", "eval"];
    let candidate =
        NEEDLES.iter().any(|n| normalized.contains(n)) || normalized.contains("source") || normalized.contains('.');
    candidate && CODE_STRING.is_match(normalized)
}

fn is_shell(name: &str) -> bool {
    matches!(
        name,
        "sh" | "bash"
            | "dash"
            | "ksh"
            | "zsh"
            | "csh"
            | "tcsh"
            | "ash"
            | "fish"
            | "mksh"
            | "rbash"
            | "yash"
            | "busybox"
    )
}

/// Interpreters that run a program read from stdin when given no script, with the short
/// options that instead give the program inline (`-c`, `-e`) or name a module, and the
/// options that take a separate argument.
fn interpreter(name: &str) -> Option<(&'static [char], &'static [&'static str])> {
    let trimmed = name.trim_end_matches(|c: char| c.is_ascii_digit() || c == '.');
    Some(match trimmed {
        "python" | "pypy" => (&['c', 'm'], &["-W", "-X", "-Q"]),
        "perl" => (&['e', 'E'], &["-I", "-M", "-m"]),
        "ruby" | "irb" => (&['e'], &["-I", "-r"]),
        "node" | "nodejs" => (&['e', 'p'], &["-r", "--require", "--import"]),
        "php" => (&['r'], &["-c", "-d"]),
        "lua" | "luajit" => (&['e'], &["-l"]),
        "R" | "Rscript" | "julia" => (&['e', 'E'], &[]),
        "tclsh" | "pwsh" => (&['c'], &[]),
        _ => return None,
    })
}

/// Whether an interpreter invoked with `args` takes its program from stdin.
fn reads_program_from_stdin(args: &[&str], inline: &[char], arg_options: &[&str]) -> bool {
    let mut i = 0;
    while i < args.len() {
        let arg = unquote(args[i]);
        if arg.starts_with('<') || arg.ends_with('<') {
            return false; // stdin redirected away from the pipe
        }
        if arg == "-" {
            return true;
        }
        if let Some(long) = arg.strip_prefix("--") {
            if long.is_empty() {
                return args.len() > i + 1 && unquote(args[i + 1]) == "-";
            }
            if ["eval", "print", "command"].iter().any(|o| long == *o || long.starts_with(&format!("{o}="))) {
                return false;
            }
            if arg_options.contains(&arg.as_str()) {
                i += 1;
            }
            i += 1;
            continue;
        }
        if let Some(short) = arg.strip_prefix('-') {
            if short.chars().any(|c| inline.contains(&c)) {
                return false;
            }
            if arg_options.contains(&arg.as_str()) {
                i += 1;
            }
            i += 1;
            continue;
        }
        if arg.starts_with('>') || arg.chars().next().is_some_and(|c| c.is_ascii_digit()) && arg.contains('>') {
            i += 1;
            continue;
        }
        return false; // a script file: stdin is data
    }
    true
}

/// The command word of a part that reads a pipe is a shell, or an interpreter reading its
/// program from that pipe.
pub fn pipe_into_interpreter(part: &str) -> bool {
    let words = shell_words(part);
    let Some(i) = command_index(&words) else {
        return false;
    };
    let name = unquote(words[i]);
    let name = basename(&name);
    if is_shell(name) {
        return true;
    }
    let Some((inline, arg_options)) = interpreter(name) else {
        return false;
    };
    let args = &words[i + 1..];
    if words[..i].iter().any(|w| basename(&unquote(w)) == "xargs") {
        // xargs appends stdin as arguments: the program comes from the pipe only when an
        // inline-code flag is left without its code (`xargs -0 python3 -c`).
        return args.last().is_some_and(|last| {
            let last = unquote(last);
            last.strip_prefix('-').is_some_and(|f| !f.starts_with('-') && f.ends_with(|c: char| inline.contains(&c)))
                || ["--eval", "--print", "--command"].contains(&last.as_str())
        });
    }
    reads_program_from_stdin(args, inline, arg_options)
}

/// Lexically normalise an `rm` operand: `$HOME` → `~`, duplicate slashes, `.`/`..`, a trailing
/// `/` or `/*`.
fn normalize_rm_target(operand: &str) -> String {
    let mut target = operand.to_string();
    for home in ["${HOME}", "$HOME"] {
        if let Some(rest) = target.strip_prefix(home) {
            target = format!("~{rest}");
        }
    }
    let absolute = target.starts_with('/');
    let mut segments: Vec<&str> = Vec::new();
    for segment in target.split('/') {
        match segment {
            "" | "." => {}
            ".." => {
                if segments.len() > usize::from(!absolute && segments.first().is_some_and(|s| s.starts_with('~'))) {
                    segments.pop();
                }
            }
            s => segments.push(s),
        }
    }
    while segments.last().is_some_and(|s| s.chars().all(|c| c == '*')) {
        segments.pop();
    }
    let joined = segments.join("/");
    if absolute {
        format!("/{joined}")
    } else {
        joined
    }
}

fn is_catastrophic_rm_target(operand: &str) -> bool {
    let target = normalize_rm_target(operand);
    if target == "/" || target.is_empty() && operand.starts_with('/') {
        return true;
    }
    if target.starts_with('~') {
        // `~`, `~/`, `~/*`, `~user`: a whole home directory.
        return !target.contains('/');
    }
    let Some(rest) = target.strip_prefix('/') else {
        return false;
    };
    let segments: Vec<&str> = rest.split('/').collect();
    // Any top-level directory, and one user's home under /home.
    segments.len() == 1 || (segments.len() == 2 && segments[0] == "home")
}

/// A recursive `rm` whose operands include `/`, `~`, `/home`, a home directory or any other
/// top-level directory, whatever the flag spelling.
pub fn recursive_rm_of_root(part: &str) -> bool {
    let owned: Vec<String> = match shlex::split(part) {
        Ok(tokens) => tokens,
        Err(_) => shell_words(part).into_iter().map(unquote).collect(),
    };
    let words: Vec<&str> = owned.iter().map(String::as_str).collect();
    let Some(i) = command_index(&words) else {
        return false;
    };
    if basename(words[i]) != "rm" {
        return false;
    }
    let mut recursive = false;
    let mut operands = Vec::new();
    let mut options_done = false;
    for &arg in &words[i + 1..] {
        if options_done || arg == "-" || !arg.starts_with('-') {
            operands.push(arg);
        } else if arg == "--" {
            options_done = true;
        } else if let Some(long) = arg.strip_prefix("--") {
            recursive |= long == "recursive";
        } else {
            recursive |= arg.contains(['r', 'R']);
        }
    }
    recursive && operands.iter().any(|o| is_catastrophic_rm_target(o))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shell_words_keep_substitutions_and_quotes_whole() {
        assert_eq!(shell_words(r#"a "b c" $(d e) `f g` 'h i'"#), vec!["a", "\"b c\"", "$(d e)", "`f g`", "'h i'"]);
    }

    #[test]
    fn rm_targets() {
        for bad in [
            "/", "//", "/.", "/*", "~", "~/", "~/*", "$HOME", "${HOME}/", "/home", "/home/", "/home/*", "/home/al",
            "/etc", "/..", "/tmp/../",
        ] {
            assert!(is_catastrophic_rm_target(bad), "{bad}");
        }
        for ok in ["build", "./x", "/tmp/build", "~/proj/x", "/mnt/user-data/workspace/x", "/home/al/x"] {
            assert!(!is_catastrophic_rm_target(ok), "{ok}");
        }
    }

    #[test]
    fn interpreter_stdin_detection() {
        assert!(pipe_into_interpreter("python3"));
        assert!(pipe_into_interpreter("python3 -"));
        assert!(pipe_into_interpreter("sudo -u root python3 -u"));
        assert!(!pipe_into_interpreter("python3 -c 'import json'"));
        assert!(!pipe_into_interpreter("python3 -m json.tool"));
        assert!(!pipe_into_interpreter("python3 script.py"));
        assert!(!pipe_into_interpreter("grep x"));
        assert!(pipe_into_interpreter("/usr/bin/env zsh -s"));
        assert!(pipe_into_interpreter("xargs -0 python3 -c"));
        assert!(!pipe_into_interpreter("xargs python3"));
        assert!(!pipe_into_interpreter("xargs -n1 python3 -m py_compile"));
    }
}
