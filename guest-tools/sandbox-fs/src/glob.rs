//! Glob matching with DeerFlow's semantics: Python 3.12 `PurePosixPath(rel).match(pattern)`
//! (right-anchored, segment-wise, `**` is just `*`), retried without a leading `**/`, and the
//! `IGNORE_PATTERNS` name filter. The pattern is translated the way CPython does
//! (`fnmatch.translate` per segment, segments joined by newlines) into a `regex`.

use regex::Regex;

const IGNORE_EXACT: &[&str] = &[
    ".git",
    ".svn",
    ".hg",
    ".bzr",
    "node_modules",
    "__pycache__",
    ".venv",
    "venv",
    ".env",
    "env",
    ".tox",
    ".nox",
    ".eggs",
    "site-packages",
    "dist",
    "build",
    ".next",
    ".nuxt",
    ".output",
    ".turbo",
    "target",
    "out",
    ".idea",
    ".vscode",
    ".project",
    ".classpath",
    ".settings",
    ".DS_Store",
    "Thumbs.db",
    "desktop.ini",
    ".cache",
    "logs",
    ".coverage",
    "coverage",
    ".nyc_output",
    "htmlcov",
    ".pytest_cache",
    ".mypy_cache",
    ".ruff_cache",
];

/// `*X` patterns of IGNORE_PATTERNS, as suffixes.
const IGNORE_SUFFIXES: &[&str] = &[".egg-info", ".swp", ".swo", "~", ".lnk", ".log", ".tmp", ".temp", ".bak", ".cache"];

/// DeerFlow's `should_ignore_name` (POSIX: case-sensitive).
pub fn should_ignore_name(name: &str) -> bool {
    IGNORE_EXACT.contains(&name)
        || IGNORE_SUFFIXES.iter().any(|s| name.ends_with(s))
        || (name.starts_with(".upload-") && name.ends_with(".part") && name.len() >= ".upload-".len() + ".part".len())
}

/// A compiled `path_matches(pattern, rel)`.
#[derive(Debug, Clone)]
pub struct GlobMatcher {
    main: Option<Compiled>,
    /// The pattern without its `**/` prefix, tried when the whole pattern fails.
    retry: Option<Compiled>,
}

#[derive(Debug, Clone)]
struct Compiled {
    regex: Regex,
    /// Absolute patterns must match from the start (`re.match`), others anywhere at a segment
    /// boundary (`re.search` with `^` in MULTILINE mode).
    anchored: bool,
    /// The regex ends in `\z`, so a path it matches ends with one of these (`*.py`: `.py`): most
    /// paths of a tree are ruled out without running the regex. `None` when no such set is known.
    suffixes: Option<Vec<Vec<u8>>>,
}

/// Raised (like Python's `ValueError("empty pattern")`) when a pattern has no segments.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("empty pattern")]
pub struct EmptyPattern;

impl GlobMatcher {
    pub fn new(pattern: &str) -> Self {
        let retry = pattern.strip_prefix("**/").and_then(compile);
        Self { main: compile(pattern), retry }
    }

    /// Match a relative path (`/`-separated). `Err` for an empty pattern, as Python raises.
    pub fn matches(&self, rel: &str) -> Result<bool, EmptyPattern> {
        self.matches_lines(&swap_sep(rel))
    }

    /// [`GlobMatcher::matches`] for a path already in pathlib's `_lines` form (`/` and `\n`
    /// swapped, see [`push_swapped`]), which a tree walk builds once per directory.
    pub fn matches_lines(&self, lines: &str) -> Result<bool, EmptyPattern> {
        let main = self.main.as_ref().ok_or(EmptyPattern)?;
        if main.is_match(lines) {
            return Ok(true);
        }
        Ok(self.retry.as_ref().is_some_and(|r| r.is_match(lines)))
    }
}

impl Compiled {
    fn is_match(&self, lines: &str) -> bool {
        if self.suffixes.as_ref().is_some_and(|s| !s.iter().any(|x| lines.as_bytes().ends_with(x))) {
            return false;
        }
        if self.anchored {
            self.regex.find(lines).is_some_and(|m| m.start() == 0)
        } else {
            self.regex.is_match(lines)
        }
    }
}

/// `str.translate` swapping `/` and `\n`, as pathlib's `_lines`.
fn swap_sep(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    push_swapped(&mut out, s);
    out
}

/// Append `s` to `out` with `/` and `\n` swapped.
pub fn push_swapped(out: &mut String, s: &str) {
    if !s.contains(['/', '\n']) {
        out.push_str(s);
        return;
    }
    out.extend(s.chars().map(|c| match c {
        '/' => '\n',
        '\n' => '/',
        c => c,
    }));
}

/// `str(PurePosixPath(pattern))`, then pathlib's `_compile_pattern_lines`. `None` when the
/// pattern has no segments (Python raises "empty pattern"; a bare root never matches a relative path).
fn compile(pattern: &str) -> Option<Compiled> {
    let root = if pattern.starts_with("//") && !pattern.starts_with("///") {
        "//"
    } else if pattern.starts_with('/') {
        "/"
    } else {
        ""
    };
    let parts: Vec<&str> = pattern.split('/').filter(|s| !s.is_empty() && *s != ".").collect();
    if parts.is_empty() && root.is_empty() {
        return None;
    }
    let normalized = format!("{root}{}", parts.join("/"));
    let lines = swap_sep(&normalized);
    let mut re = String::from("(?m)^");
    let mut rest = lines.as_str();
    while !rest.is_empty() {
        let (part, tail) = match rest.find('\n') {
            Some(i) => rest.split_at(i + 1),
            None => (rest, ""),
        };
        match part {
            "*\n" => re.push_str(r".+\n"),
            "*" => re.push_str(".+"),
            _ => re.push_str(&fnmatch_translate(part)),
        }
        rest = tail;
    }
    re.push_str(r"\z");
    let regex = Regex::new(&re).ok()?;
    Some(Compiled { suffixes: required_suffixes(&re), regex, anchored: !root.is_empty() })
}

/// Literals every match of `re` ends with, none of them empty, or `None` (regex-syntax's suffix
/// extractor: each match of the whole ends with one of the set).
fn required_suffixes(re: &str) -> Option<Vec<Vec<u8>>> {
    let hir = regex_syntax::Parser::new().parse(re).ok()?;
    let mut extractor = regex_syntax::hir::literal::Extractor::new();
    extractor.kind(regex_syntax::hir::literal::ExtractKind::Suffix);
    let seq = extractor.extract(&hir);
    let lits = seq.literals()?;
    if lits.is_empty() || lits.iter().any(|l| l.is_empty()) {
        return None;
    }
    Some(lits.iter().map(|l| l.as_bytes().to_vec()).collect())
}

/// CPython 3.12 `fnmatch.translate` without its `(?s:` … `)\Z` wrapper, rendered for `regex`.
fn fnmatch_translate(pat: &str) -> String {
    let chars: Vec<char> = pat.chars().collect();
    let n = chars.len();
    let mut out = String::new();
    let mut i = 0;
    let mut last_star = false;
    while i < n {
        let c = chars[i];
        i += 1;
        if c == '*' {
            if !last_star {
                out.push_str(".*");
            }
            last_star = true;
            continue;
        }
        last_star = false;
        if c == '?' {
            out.push('.');
        } else if c == '[' {
            let mut j = i;
            if j < n && chars[j] == '!' {
                j += 1;
            }
            if j < n && chars[j] == ']' {
                j += 1;
            }
            while j < n && chars[j] != ']' {
                j += 1;
            }
            if j >= n {
                out.push_str(r"\[");
            } else {
                out.push_str(&class(&chars[i..j]));
                i = j + 1;
            }
        } else {
            out.push_str(&regex::escape(&c.to_string()));
        }
    }
    out
}

/// One `[...]` set. Ranges whose start is above their end are dropped (as CPython does); every
/// other member is escaped for `regex`.
fn class(stuff: &[char]) -> String {
    if stuff.is_empty() {
        return "(?:[^\\x00-\\x{10FFFF}])".to_string();
    }
    let (negate, body) = if stuff[0] == '!' { (true, &stuff[1..]) } else { (false, stuff) };
    if negate && body.is_empty() {
        return ".".to_string();
    }
    // Parse members: single chars and `a-b` ranges (a `-` first or last is literal).
    let mut items: Vec<(char, char)> = Vec::new();
    let mut k = 0;
    while k < body.len() {
        let a = body[k];
        if k + 2 < body.len() && body[k + 1] == '-' {
            let b = body[k + 2];
            if a <= b {
                items.push((a, b));
            }
            k += 3;
        } else {
            items.push((a, a));
            k += 1;
        }
    }
    if items.is_empty() {
        return if negate { ".".to_string() } else { "(?:[^\\x00-\\x{10FFFF}])".to_string() };
    }
    let esc = |c: char| format!("\\x{{{:X}}}", c as u32);
    let mut s = String::from(if negate { "[^" } else { "[" });
    for (a, b) in items {
        if a == b {
            s.push_str(&esc(a));
        } else {
            s.push_str(&format!("{}-{}", esc(a), esc(b)));
        }
    }
    s.push(']');
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(p: &str, r: &str) -> bool {
        GlobMatcher::new(p).matches(r).unwrap()
    }

    #[test]
    fn right_anchored_segments() {
        assert!(m("*.py", "a/b/c.py"));
        assert!(m("**/*.py", "c.py"));
        assert!(m("**/sub/*.py", "pkg/sub/deep.py"));
        assert!(!m("docs", "docs/guide.md"));
        assert!(m("docs", "docs"));
        assert!(!m("/mnt/x/*.py", "a.py"));
        assert!(m("f0[0-3].py", "many/f02.py"));
        assert!(!m("f?.py", "many/f02.py"));
        assert!(m("[!a]*", "b"));
        assert!(!m("[!a]*", "a"));
        assert!(m(".*", ".hidden"));
        assert!(m("src/*.rs", "x/src/a.rs"));
        assert!(!m("src/*.rs", "src/a/b.rs"));
        assert!(!m("[z-a]x", "x"));
        assert!(m("a[", "a["));
    }

    /// The suffix check only rules out paths the regex would not match: with and without it,
    /// every pattern gives the same answer on every path.
    #[test]
    fn suffix_check_changes_no_answer() {
        let patterns = [
            "**/*.py",
            "*.py",
            "*.[ch]",
            "src/*.rs",
            "**/sub/*.py",
            "f0[0-3].py",
            "[!a]*",
            "*",
            "**",
            "docs",
            "a[",
            "/mnt/x/*.py",
            "*.tar.gz",
            "x?",
            "**/",
            "*~",
            ".*",
            "*.p[!y]",
        ];
        let paths = [
            "a.py",
            "a/b/c.py",
            "c.pyc",
            "x.c",
            "x.h",
            "x.ch",
            "src/a.rs",
            "x/src/a.rs",
            "pkg/sub/deep.py",
            "many/f02.py",
            "b",
            "a",
            "docs",
            "docs/guide.md",
            "a[",
            "t.tar.gz",
            "gz",
            "xy",
            "x",
            "a~",
            ".hidden",
            "a.pt",
            "a.py\nb",
            "",
        ];
        for p in patterns {
            let with = GlobMatcher::new(p);
            let mut without = with.clone();
            for c in [without.main.as_mut(), without.retry.as_mut()].into_iter().flatten() {
                c.suffixes = None;
            }
            for r in paths {
                assert_eq!(with.matches(r), without.matches(r), "{p} on {r:?}");
            }
        }
        assert!(GlobMatcher::new("**/*.py").main.unwrap().suffixes.is_some());
    }

    #[test]
    fn empty_pattern_errors() {
        assert_eq!(GlobMatcher::new("").matches("a"), Err(EmptyPattern));
        assert_eq!(GlobMatcher::new("./").matches("a"), Err(EmptyPattern));
    }

    #[test]
    fn ignore_names() {
        for n in ["node_modules", ".git", "x.log", "a.bak", ".upload-1.part", "x~", "build"] {
            assert!(should_ignore_name(n), "{n}");
        }
        for n in [".hidden_file", ".config", "app.py", "builds"] {
            assert!(!should_ignore_name(n), "{n}");
        }
    }
}
