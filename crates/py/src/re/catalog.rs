//! DeerFlow's `_compile_catalog_regex`: a model-supplied query compiled as a Python `re`
//! pattern with `re.IGNORECASE`, or, when Python would reject it, matched as an escaped literal.
//! Python syntax is rewritten to fancy-regex syntax here, so that a pattern means what it means
//! in Python (`\Z`, `{` as a literal, `$` before a final newline, `[` inside a class, …).

use fancy_regex::{Regex, RegexBuilder};

/// A compiled catalog query.
#[derive(Debug, Clone)]
pub struct CatalogRegex {
    /// `None` only for a query beyond the engine's size limit, which then matches nothing.
    re: Option<Regex>,
    /// True when the query was taken literally (Python's `re.error` fallback).
    literal: bool,
    /// True when a match may depend on where the text starts or ends (anchors, lookaround),
    /// so the text cannot be searched as part of a longer haystack.
    context_sensitive: bool,
    /// For a query that is a plain literal: its longest run of ASCII digits, punctuation and
    /// spaces (characters that IGNORECASE matches only by themselves), if at least 2 bytes.
    /// Every matching text contains this run byte for byte.
    required_bytes: Option<String>,
}

impl CatalogRegex {
    /// `re.compile(pattern, re.IGNORECASE)`, falling back to `re.escape(pattern)`.
    pub fn compile(pattern: &str) -> CatalogRegex {
        Self::compile_with(pattern, true)
    }

    /// [`Self::compile`]; `exact_word_boundary` spells `\b`/`\B` with Python's word characters
    /// (letters, numbers, `_`) through lookaround. Without it the engine's own `\b` is used, which
    /// agrees whenever the searched texts hold no character the two definitions class
    /// differently (marks, connector punctuation, non-decimal numbers) and is much faster.
    pub fn compile_with(pattern: &str, exact_word_boundary: bool) -> CatalogRegex {
        let plain = !pattern.contains(['\\', '.', '^', '$', '*', '+', '?', '{', '}', '[', ']', '(', ')', '|']);
        if let Some((translated, context_sensitive)) = translate_with(pattern, exact_word_boundary) {
            if let Ok(re) = build(&translated) {
                let required_bytes = if plain { caseless_run(pattern) } else { None };
                return CatalogRegex { re: Some(re), literal: false, context_sensitive, required_bytes };
            }
        }
        // `re.escape(pattern)`; each character through `push_literal`, which also spells out
        // Python's extra case equivalences.
        let mut escaped = String::with_capacity(pattern.len() + 8);
        for c in pattern.chars() {
            push_literal(&mut escaped, c);
        }
        match build(&escaped) {
            Ok(re) => CatalogRegex {
                re: Some(re),
                literal: true,
                context_sensitive: false,
                required_bytes: caseless_run(pattern),
            },
            Err(e) => {
                // Only a pattern beyond the engine's size limit gets here.
                tracing::warn!(error = %e, "tool_search query too large to compile; it matches nothing");
                CatalogRegex { re: None, literal: true, context_sensitive: false, required_bytes: None }
            }
        }
    }

    pub fn is_literal(&self) -> bool {
        self.literal
    }

    /// Bytes every matching text contains (see the field); lets a caller skip texts cheaply.
    pub fn required_bytes(&self) -> Option<&str> {
        self.required_bytes.as_deref()
    }

    pub fn is_context_sensitive(&self) -> bool {
        self.context_sensitive
    }

    /// The first match at or after byte `pos` of `text` (which gives look-behind context).
    pub fn find_at(&self, text: &str, pos: usize) -> Option<(usize, usize)> {
        let re = self.re.as_ref()?;
        match re.find_from_pos(text, pos) {
            Ok(Some(m)) => Some((m.start(), m.end())),
            _ => None,
        }
    }

    /// `regex.search(text) is not None`. A match aborted by the backtracking limit counts as
    /// no match.
    pub fn is_match(&self, text: &str) -> bool {
        self.re.as_ref().is_some_and(|re| re.is_match(text).unwrap_or(false))
    }

    /// `len(regex.findall(text))`: non-overlapping matches, an empty match advancing by one
    /// character.
    pub fn count(&self, text: &str) -> usize {
        let Some(re) = &self.re else { return 0 };
        let mut n = 0;
        let mut pos = 0;
        while pos <= text.len() {
            let Ok(Some(m)) = re.find_from_pos(text, pos) else { break };
            n += 1;
            if m.end() > m.start() {
                pos = m.end();
            } else {
                match text[m.end()..].chars().next() {
                    Some(c) => pos = m.end() + c.len_utf8(),
                    None => break,
                }
            }
        }
        n
    }
}

/// The longest run of ASCII non-letters (digits, punctuation, space) in a literal query.
fn caseless_run(literal: &str) -> Option<String> {
    literal
        .split(|c: char| !c.is_ascii() || c.is_ascii_alphabetic() || c.is_ascii_control())
        .max_by_key(|run| run.len())
        .filter(|run| run.len() >= 2)
        .map(str::to_string)
}

fn build(pattern: &str) -> Result<Regex, fancy_regex::Error> {
    RegexBuilder::new(pattern).case_insensitive(true).build()
}

/// Characters that must be escaped to be literal in fancy-regex syntax.
fn is_meta(c: char) -> bool {
    matches!(
        c,
        '\\' | '.' | '+' | '*' | '?' | '(' | ')' | '|' | '[' | ']' | '{' | '}' | '^' | '$' | '#' | '&' | '-' | '~'
    )
}

/// Characters Python's IGNORECASE treats as equal beyond Unicode simple case folding (which
/// the regex engine applies): `sre_compile._equivalences` entries and `İ`, whose simple
/// lowercase is `i`.
fn extra_case_equivalents(c: char) -> Option<&'static str> {
    match c {
        'i' | 'I' | '\u{131}' | '\u{130}' => Some("iI\u{131}\u{130}"),
        '\u{390}' | '\u{1FD3}' => Some("\u{390}\u{1FD3}"),
        '\u{3B0}' | '\u{1FE3}' => Some("\u{3B0}\u{1FE3}"),
        '\u{FB05}' | '\u{FB06}' => Some("\u{FB05}\u{FB06}"),
        _ => None,
    }
}

fn push_literal(out: &mut String, c: char) {
    if let Some(class) = extra_case_equivalents(c) {
        out.push('[');
        out.push_str(class);
        out.push(']');
        return;
    }
    if is_meta(c) {
        out.push('\\');
    }
    out.push(c);
}

fn hex_digits(chars: &[char], i: usize, n: usize) -> Option<u32> {
    if i + n > chars.len() {
        return None;
    }
    let s: String = chars[i..i + n].iter().collect();
    if !s.chars().all(|c| c.is_ascii_hexdigit()) {
        return None;
    }
    u32::from_str_radix(&s, 16).ok()
}

/// Rewrite a Python `re` pattern into fancy-regex syntax; `None` when Python's parser would
/// raise `re.error` (the caller then matches the query literally, as DeerFlow does). The flag
/// tells whether the pattern has anchors or lookaround (see [`CatalogRegex::is_context_sensitive`]).
pub fn translate(pattern: &str) -> Option<(String, bool)> {
    translate_with(pattern, true)
}

fn translate_with(pattern: &str, exact_word_boundary: bool) -> Option<(String, bool)> {
    let mut sensitive = false;
    let out = translate_inner(pattern, &mut sensitive, exact_word_boundary)?;
    Some((out, sensitive))
}

/// Python's `\w` for `str` patterns: `isalnum()` or `_`.
const PY_WORD: &str = "\\p{L}\\p{N}_";
/// Python's `\s`: Unicode White_Space plus U+001C..U+001F.
const PY_SPACE: &str = "\\s\\x{1C}-\\x{1F}";

fn translate_inner(pattern: &str, sensitive: &mut bool, exact_word_boundary: bool) -> Option<String> {
    let chars: Vec<char> = pattern.chars().collect();
    let mut out = String::with_capacity(pattern.len() + 8);
    let mut i = 0;
    let mut multiline = false;
    let mut ascii = false;
    let mut verbose = false;
    // Python only accepts global flag groups at the very start of the pattern.
    let mut at_start = true;
    let mut prev_atom = false;
    let mut last_quant = 0u8;
    while i < chars.len() {
        let c = chars[i];
        let was_start = at_start;
        if verbose && (c.is_whitespace() || c == '#') {
            // re.VERBOSE: whitespace is ignored and `#` comments run to the end of the line.
            if c == '#' {
                i = chars[i..].iter().position(|&x| x == '\n').map_or(chars.len(), |p| i + p);
            }
            i += 1;
            continue;
        }
        at_start = false;
        // 0: the previous token was no quantifier, 1: a quantifier, 2: a quantifier with its
        // lazy `?` or possessive `+` modifier. Python rejects any further repeat.
        let quant_before = last_quant;
        last_quant = 0;
        match c {
            '\\' => {
                let next = chars.get(i + 1).copied();
                let (consumed, emitted) = match next {
                    Some('b' | 'B') if exact_word_boundary && !ascii => {
                        let w = PY_WORD;
                        let e = if next == Some('b') {
                            format!("(?:(?<=[{w}])(?![{w}])|(?<![{w}])(?=[{w}]))")
                        } else {
                            format!("(?:(?<=[{w}])(?=[{w}])|(?<![{w}])(?![{w}]))")
                        };
                        (2, e)
                    }
                    _ => escape(&chars, i, false, ascii)?,
                };
                *sensitive |= matches!(next, Some('A' | 'Z'));
                out.push_str(&emitted);
                i += consumed;
                // Anchors and boundaries cannot be repeated ("nothing to repeat").
                prev_atom = !matches!(next, Some('A' | 'Z' | 'b' | 'B'));
                continue;
            }
            '[' => {
                i = class(&chars, i, &mut out, ascii)?;
                prev_atom = true;
                continue;
            }
            '{' => {
                if let Some((len, lo, hi)) = quantifier(&chars, i) {
                    if !prev_atom || quant_before != 0 {
                        return None; // "nothing to repeat" / "multiple repeat"
                    }
                    last_quant = 1;
                    match hi {
                        Some(h) if lo.unwrap_or(0) > h => return None,
                        Some(h) => out.push_str(&format!("{{{},{}}}", lo.unwrap_or(0), h)),
                        None => out.push_str(&format!("{{{},}}", lo.unwrap_or(0))),
                    }
                    i += len;
                    continue;
                }
                out.push_str("\\{");
                prev_atom = true;
            }
            '}' => {
                out.push_str("\\}");
                prev_atom = true;
            }
            '$' => {
                *sensitive = true;
                // Without MULTILINE Python's `$` also matches before a final newline.
                out.push_str(if multiline { "$" } else { "(?=\\n?\\z)" });
                prev_atom = false;
            }
            '(' if chars.get(i + 1) == Some(&'?') => {
                let rest: String = chars[i + 2..].iter().take(3).collect();
                if rest.starts_with('#') {
                    let close = chars[i..].iter().position(|&x| x == ')')?;
                    i += close + 1;
                    at_start = was_start;
                    continue;
                }
                if rest.starts_with('<') && !rest[1..].starts_with(['=', '!']) {
                    return None; // Python has no `(?<name>…)`
                }
                if rest.starts_with("P=") {
                    let close = chars[i..].iter().position(|&x| x == ')')?;
                    let name: String = chars[i + 4..i + close].iter().collect();
                    out.push_str(&format!("\\k<{name}>"));
                    i += close + 1;
                    prev_atom = true;
                    continue;
                }
                if rest.starts_with(|c: char| c.is_ascii_alphabetic() || c == '-') && !rest.starts_with('P') {
                    // A flag group: `(?imsx)` (global) or `(?i-s:…)` (scoped).
                    let mut j = i + 2;
                    let mut flags = String::new();
                    while j < chars.len() && (chars[j].is_ascii_alphabetic() || chars[j] == '-') {
                        flags.push(chars[j]);
                        j += 1;
                    }
                    if flags.chars().any(|f| !matches!(f, 'a' | 'i' | 'm' | 's' | 'x' | 'u' | '-')) {
                        return None; // unknown flags, or LOCALE (bytes patterns only)
                    }
                    let kept: String = flags.chars().filter(|f| !matches!(f, 'u' | 'a')).collect();
                    match chars.get(j) {
                        Some(')') => {
                            if !was_start || flags.contains('-') {
                                return None; // "global flags not at the start of the expression"
                            }
                            multiline |= flags.contains('m');
                            // VERBOSE is applied here (see the loop head), not by the engine,
                            // whose verbose mode also drops whitespace inside classes.
                            let kept: String = kept.chars().filter(|f| *f != 'x').collect();
                            ascii |= flags.contains('a');
                            verbose |= flags.contains('x');
                            if !kept.is_empty() {
                                out.push_str(&format!("(?{kept})"));
                            }
                            i = j + 1;
                            at_start = true;
                            continue;
                        }
                        Some(':') => {
                            if flags.contains('a') {
                                return None; // a scoped ASCII group is not modelled
                            }
                            out.push_str(&format!("(?{kept}:"));
                            i = j + 1;
                            prev_atom = false;
                            continue;
                        }
                        _ => return None,
                    }
                }
                // Any other extension (`(?:`, `(?=`, `(?!`, `(?<=`, `(?<!`, `(?>`, `(?P<n>`,
                // `(?(1)`) is written as is; fancy-regex reads these the way Python does.
                *sensitive |= rest.starts_with(['=', '!', '<']);
                out.push_str("(?");
                i += 2;
                prev_atom = false;
                continue;
            }
            '(' | '|' => {
                out.push(c);
                prev_atom = false;
            }
            '*' | '+' | '?' => {
                match quant_before {
                    0 if prev_atom => last_quant = 1,
                    1 if c != '*' => last_quant = 2,
                    _ => return None, // "nothing to repeat" / "multiple repeat"
                }
                out.push(c);
            }
            '^' => {
                *sensitive = true;
                out.push(c);
                prev_atom = false;
            }
            ')' | '.' => {
                out.push(c);
                prev_atom = true;
            }
            other => {
                push_literal(&mut out, other);
                prev_atom = true;
            }
        }
        i += 1;
    }
    Some(out)
}

/// Python's `{m,n}` forms: `{m}`, `{m,}`, `{,n}`, `{m,n}`, `{,}`. Returns (length, lo, hi).
fn quantifier(chars: &[char], i: usize) -> Option<(usize, Option<u64>, Option<u64>)> {
    let mut j = i + 1;
    let mut lo = String::new();
    while j < chars.len() && chars[j].is_ascii_digit() {
        lo.push(chars[j]);
        j += 1;
    }
    let hi = if chars.get(j) == Some(&',') {
        j += 1;
        let mut h = String::new();
        while j < chars.len() && chars[j].is_ascii_digit() {
            h.push(chars[j]);
            j += 1;
        }
        if h.is_empty() {
            None
        } else {
            Some(h.parse().ok()?)
        }
    } else {
        if lo.is_empty() {
            return None; // `{}` or `{x` is a literal brace
        }
        Some(lo.parse().ok()?)
    };
    if chars.get(j) != Some(&'}') {
        return None;
    }
    let lo = if lo.is_empty() { None } else { Some(lo.parse().ok()?) };
    Some((j + 1 - i, lo, hi))
}

/// One escape at `chars[i] == '\\'`: (characters consumed, fancy-regex text).
fn escape(chars: &[char], i: usize, in_class: bool, ascii: bool) -> Option<(usize, String)> {
    let c = *chars.get(i + 1)?;
    let simple = |s: &str| Some((2, s.to_string()));
    if ascii {
        // re.ASCII: the shorthand classes and word boundaries are ASCII-only.
        let (inside, outside) = match c {
            'w' => ("0-9A-Za-z_", "[0-9A-Za-z_]"),
            'd' => ("0-9", "[0-9]"),
            's' => (" \\t\\n\\r\\x0B\\x0C", "[ \\t\\n\\r\\x0B\\x0C]"),
            'W' if !in_class => ("", "[^0-9A-Za-z_]"),
            'D' if !in_class => ("", "[^0-9]"),
            'S' if !in_class => ("", "[^ \\t\\n\\r\\x0B\\x0C]"),
            // One character of lookaround each side; a neighbouring '\n' in a joined haystack
            // reads like the text's edge, as for `\b`.
            'b' if !in_class => ("", "(?:(?<=[0-9A-Za-z_])(?![0-9A-Za-z_])|(?<![0-9A-Za-z_])(?=[0-9A-Za-z_]))"),
            'B' if !in_class => ("", "(?:(?<=[0-9A-Za-z_])(?=[0-9A-Za-z_])|(?<![0-9A-Za-z_])(?![0-9A-Za-z_]))"),
            // A negated class inside a class has no simple ASCII spelling; not modelled.
            'W' | 'D' | 'S' => return None,
            _ => ("", ""),
        };
        if !outside.is_empty() {
            return simple(if in_class { inside } else { outside });
        }
    }
    match c {
        'w' if in_class => simple(PY_WORD),
        'w' => simple(&format!("[{PY_WORD}]")),
        'W' => simple(&format!("[^{PY_WORD}]")),
        's' if in_class => simple(PY_SPACE),
        's' => simple(&format!("[{PY_SPACE}]")),
        'S' => simple(&format!("[^{PY_SPACE}]")),
        'd' | 'D' | 'n' | 'r' | 't' => simple(&format!("\\{c}")),
        'a' => simple("\\x07"),
        'f' => simple("\\x0C"),
        'v' => simple("\\x0B"),
        'b' if in_class => simple("\\x08"),
        'A' | 'b' | 'B' if !in_class => simple(&format!("\\{c}")),
        'Z' if !in_class => simple("\\z"),
        'x' => hex_digits(chars, i + 2, 2).map(|v| (4, format!("\\x{{{v:X}}}"))),
        'u' => hex_digits(chars, i + 2, 4).map(|v| (6, format!("\\x{{{v:X}}}"))),
        'U' => {
            let v = hex_digits(chars, i + 2, 8)?;
            char::from_u32(v)?;
            Some((10, format!("\\x{{{v:X}}}")))
        }
        '0'..='7' => {
            // An octal escape: `\0`, `\0oo`, or three octal digits; otherwise a group
            // reference (outside a class).
            let mut j = i + 1;
            let mut digits = String::new();
            while j < chars.len() && digits.len() < 3 && chars[j].is_digit(8) {
                digits.push(chars[j]);
                j += 1;
            }
            if c == '0' || digits.len() == 3 || in_class {
                let v = u32::from_str_radix(&digits, 8).ok()?;
                if v > 0o377 {
                    return None;
                }
                return Some((j - i, format!("\\x{{{v:X}}}")));
            }
            backref(chars, i, in_class)
        }
        '8' | '9' => backref(chars, i, in_class),
        c if c.is_ascii_alphanumeric() => None, // Python: "bad escape"
        c => {
            let mut s = String::new();
            push_literal(&mut s, c);
            Some((2, s))
        }
    }
}

fn backref(chars: &[char], i: usize, in_class: bool) -> Option<(usize, String)> {
    if in_class {
        return None;
    }
    let mut j = i + 1;
    let mut digits = String::new();
    while j < chars.len() && digits.len() < 2 && chars[j].is_ascii_digit() {
        digits.push(chars[j]);
        j += 1;
    }
    Some((j - i, format!("\\{digits}")))
}

/// A character class starting at `chars[i] == '['`; returns the index after its `]`.
fn class(chars: &[char], i: usize, out: &mut String, ascii: bool) -> Option<usize> {
    let mut j = i + 1;
    out.push('[');
    if chars.get(j) == Some(&'^') {
        out.push('^');
        j += 1;
    }
    // A `]` first in the class is a literal.
    if chars.get(j) == Some(&']') {
        out.push_str("\\]");
        j += 1;
    }
    let mut prev_dash = false;
    // A range covering `i` or `I` also takes their dotless/dotted forms under IGNORECASE.
    let mut dotted_i = false;
    loop {
        let c = *chars.get(j)?;
        if prev_dash && c != ']' && j >= 2 {
            let (lo, hi) = (chars[j - 2], c);
            if lo != '\\' && ((lo..=hi).contains(&'i') || (lo..=hi).contains(&'I')) {
                dotted_i = true;
            }
        }
        match c {
            ']' => {
                if dotted_i {
                    out.push_str("\u{131}\u{130}");
                }
                out.push(']');
                return Some(j + 1);
            }
            '\\' => {
                let (consumed, emitted) = escape(chars, j, true, ascii)?;
                out.push_str(&emitted);
                j += consumed;
                prev_dash = false;
                continue;
            }
            '-' if prev_dash => out.push_str("\\-"),
            '-' => out.push('-'),
            '[' | '&' | '~' => {
                out.push('\\');
                out.push(c);
            }
            c => match extra_case_equivalents(c) {
                // Not as a range start, where extra characters would change the range.
                Some(class) if chars.get(j + 1) != Some(&'-') => out.push_str(class),
                _ => out.push(c),
            },
        }
        prev_dash = c == '-';
        j += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(p: &str, t: &str) -> bool {
        CatalogRegex::compile(p).is_match(t)
    }

    #[test]
    fn python_syntax_means_what_it_means_in_python() {
        assert!(m("calendar.*export", "Calendar data EXPORT"));
        assert!(m("abc\\Z", "xabc"));
        assert!(!m("abc\\Z", "abcx"));
        assert!(m("abc$", "abc\n"));
        assert!(m("a{", "xa{y"));
        assert!(m("a{,2}b", "b"));
        assert!(m("x{2}", "xx"));
        assert!(m("[[:alpha:]]", "x:]"));
        assert!(!m("[[:alpha:]]", ":"));
        assert!(!m("[[:alpha:]]", "q"));
        assert!(m("(?i)foo", "FOO"));
        assert!(m("f(?#comment)oo", "foo"));
        assert!(m("(?P<q>o)(?P=q)", "foo"));
        assert!(m("\\x41", "a"));
        assert!(m("[\\b]", "\u{8}"));
        // Kelvin sign folds to k under IGNORECASE, as in Python.
        assert!(m("kelvin", "\u{212A}elvin"));
        // Python's extra equivalences: i, I, dotless i and dotted capital I are one class.
        assert!(m("\u{131}", "github"));
        assert!(m("G\u{130}T", "git"));
        assert!(m("[\u{131}]", "I"));
        assert!(m("[a-i]", "\u{131}") == m("[a-i]", "i"));
        assert!(m("[a-z]", "\u{131}"));
        assert!(!m("[^a-z]", "\u{130}"));
        assert!(!m("[j-z]", "\u{131}"));
        // re.ASCII narrows the shorthand classes.
        assert!(m("(?a)\\w", "github"));
        assert!(!m("(?a)^\\w+$", "caf\u{e9}"));
        assert!(m("^\\w+$", "caf\u{e9}"));
        assert!(m("(?a)\\bgit\\b", "a git b"));
        assert!(m("(?x) s e n d # a comment", "send"));
        assert!(m("(?x)send #x", "send"));
        assert!(!m("(?x)s[ ]d", "sd"));
        assert!(m("(?x)s[ ]d", "s d"));
        assert!(m("(?x)s\\ d", "s d"));
    }

    #[test]
    fn python_errors_fall_back_to_a_literal() {
        for p in ["sum(", "a(?i)b", "\\p{L}", "\\e", "*x", "[abc", "\\x4", "a{3,1}", "(?<n>x)"] {
            let r = CatalogRegex::compile(p);
            assert!(r.is_literal(), "{p}");
            assert!(r.is_match(&format!("..{p}..")), "{p}");
            assert!(r.is_match(&format!("..{}..", p.to_uppercase())), "{p}");
        }
        assert!(!CatalogRegex::compile("sum(").is_match("sum"));
    }

    #[test]
    fn literal_queries_expose_their_caseless_run() {
        assert_eq!(CatalogRegex::compile("item 9999").required_bytes(), Some(" 9999"));
        assert_eq!(CatalogRegex::compile("sum(a, b").required_bytes(), Some(", "));
        assert_eq!(CatalogRegex::compile("item.*9999").required_bytes(), None);
        assert_eq!(CatalogRegex::compile("slack").required_bytes(), None);
    }

    #[test]
    fn findall_counts_like_python() {
        let r = CatalogRegex::compile("a");
        assert_eq!(r.count("banana"), 3);
        let r = CatalogRegex::compile("x*");
        assert_eq!(r.count("ab"), 3);
        let r = CatalogRegex::compile("send");
        assert_eq!(r.count("slack_send_message Send a message"), 2);
    }
}
