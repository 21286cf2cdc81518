//! The `grep` hot path. A file is read once into a reused buffer; a line-aware regex scans the
//! whole buffer for candidate lines (literal prefilters do the heavy lifting), and each
//! candidate line is confirmed with the exact Python-semantics regex. Patterns that need
//! look-around or back-references fall back to `fancy-regex`, line by line.

use std::fs::File;
use std::path::Path;

use regex::{Regex, RegexBuilder};

use crate::pyre::{translate, Anchors};
use crate::text::char_len;

/// DeerFlow skips files larger than this (ReDoS guard).
pub const MAX_FILE_SIZE: u64 = 1_000_000;
/// Binary sniffing window.
const BINARY_SAMPLE: usize = 8192;
/// Lines longer than this (in characters, terminator included) are skipped.
const MAX_LINE_CHARS: usize = 2000;
/// Matched lines are cut to this many characters.
const LINE_SUMMARY: usize = 200;
/// Compiled-size ceiling for user patterns.
const REGEX_SIZE_LIMIT: usize = 50 * 1024 * 1024;

/// One matching line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GrepMatch {
    pub path: String,
    pub line_number: usize,
    pub line: String,
}

/// A compiled grep pattern.
#[derive(Debug)]
pub enum Matcher {
    /// `buffer` finds candidates over the whole file, `line` confirms one line.
    Fast { buffer: Regex, line: Regex },
    /// Look-around / back-references: line by line.
    Fancy(Box<fancy_regex::Regex>),
}

impl Matcher {
    /// Compile like DeerFlow: `literal` escapes the pattern, matching is case-insensitive unless
    /// `case_sensitive`. `Err` carries the text after "Invalid regex pattern: ".
    pub fn new(pattern: &str, literal: bool, case_sensitive: bool) -> Result<Self, String> {
        let build = |p: &str| {
            RegexBuilder::new(p)
                .case_insensitive(!case_sensitive)
                .size_limit(REGEX_SIZE_LIMIT)
                .build()
                .map_err(|e| first_line(&e.to_string()))
        };
        if literal {
            let p = regex::escape(pattern);
            return Ok(Self::Fast { buffer: build(&p)?, line: build(&p)? });
        }
        let line = translate(pattern, Anchors::Line).map_err(|e| e.0)?;
        if line.fancy {
            let flags = if case_sensitive { "" } else { "(?i)" };
            let re =
                fancy_regex::Regex::new(&format!("{flags}{}", line.pattern)).map_err(|e| first_line(&e.to_string()))?;
            return Ok(Self::Fancy(Box::new(re)));
        }
        let buffer = translate(pattern, Anchors::Buffer).map_err(|e| e.0)?;
        Ok(Self::Fast { buffer: build(&buffer.pattern)?, line: build(&line.pattern)? })
    }

    fn line_matches(&self, line: &str) -> bool {
        match self {
            Self::Fast { line: re, .. } => re.is_match(line),
            // A backtracking limit hit counts as no match rather than an error for the whole call.
            Self::Fancy(re) => re.is_match(line).unwrap_or(false),
        }
    }
}

fn first_line(s: &str) -> String {
    s.lines().find(|l| !l.trim().is_empty()).unwrap_or(s).trim().to_string()
}

/// Read a candidate file into `buf` unless DeerFlow would skip it: not a regular file, over
/// 1 MB, or binary (a NUL in the first 8 KiB). Unreadable files are skipped too.
pub fn load_candidate(real: &Path, buf: &mut Vec<u8>) -> bool {
    buf.clear();
    let Ok(f) = File::open(real) else { return false };
    let Ok(meta) = f.metadata() else { return false };
    if !meta.is_file() || meta.len() > MAX_FILE_SIZE {
        return false;
    }
    if crate::fsutil::read_to_end_at(&f, buf, meta.len()).is_err() {
        return false;
    }
    let sample = &buf[..buf.len().min(BINARY_SAMPLE)];
    memchr::memchr(0, sample).is_none()
}

/// Python's `truncate_line`: strip the line terminator, cut to 200 characters with `...`.
fn summarize(line: &str) -> String {
    let l = line.trim_end_matches(['\n', '\r']);
    if l.len() <= LINE_SUMMARY || char_len(l) <= LINE_SUMMARY {
        return l.to_string();
    }
    format!("{}...", crate::text::char_prefix(l, LINE_SUMMARY - 3))
}

fn too_long(line: &str) -> bool {
    line.len() > MAX_LINE_CHARS && char_len(line) > MAX_LINE_CHARS
}

/// Search one file's bytes (decoded like Python: UTF-8 with U+FFFD replacement, universal
/// newlines) and append at most `room` matches.
pub fn search_buffer(m: &Matcher, data: &[u8], vpath: &str, room: usize, out: &mut Vec<GrepMatch>) {
    if room == 0 || data.is_empty() {
        return;
    }
    let norm = crate::text::universal_newlines(data);
    let text: std::borrow::Cow<'_, str> = match std::str::from_utf8(&norm) {
        Ok(s) => std::borrow::Cow::Borrowed(s),
        Err(_) => std::borrow::Cow::Owned(String::from_utf8_lossy(&norm).into_owned()),
    };
    let text: &str = &text;
    let bytes = text.as_bytes();
    let mut added = 0usize;
    match m {
        Matcher::Fast { buffer, .. } => {
            let mut pos = 0usize;
            let mut line_no = 1usize;
            let mut counted = 0usize;
            while pos < bytes.len() {
                let Some(hit) = buffer.find_at(text, pos) else { break };
                let hs = hit.start().min(bytes.len());
                let ls = memchr::memrchr(b'\n', &bytes[pos..hs]).map(|i| pos + i + 1).unwrap_or(pos);
                if hs == bytes.len() && bytes.last() == Some(&b'\n') {
                    // An empty match after the final newline: there is no line there.
                    break;
                }
                let le = memchr::memchr(b'\n', &bytes[hs..]).map(|i| hs + i + 1).unwrap_or(bytes.len());
                line_no += memchr::memchr_iter(b'\n', &bytes[counted..ls]).count();
                counted = ls;
                let line = &text[ls..le];
                if !too_long(line) && m.line_matches(line) {
                    out.push(GrepMatch { path: vpath.to_string(), line_number: line_no, line: summarize(line) });
                    added += 1;
                    if added >= room {
                        return;
                    }
                }
                pos = le;
            }
        }
        Matcher::Fancy(_) => {
            for (i, line) in text.split_inclusive('\n').enumerate() {
                if !too_long(line) && m.line_matches(line) {
                    out.push(GrepMatch { path: vpath.to_string(), line_number: i + 1, line: summarize(line) });
                    added += 1;
                    if added >= room {
                        return;
                    }
                }
            }
        }
    }
}

/// A cheap whole-file test for plain-literal patterns (`TODO`, `fn main`, or any `literal`
/// search): a file whose raw bytes do not contain the needle cannot match, so it is skipped
/// before decoding and the regex. Why: in wasm the regex crate has no SIMD prefilter (Teddy is
/// x86/aarch64 only), so a case-insensitive literal ran a byte-at-a-time Aho-Corasick scan over
/// every file; this word-at-a-time scan is several times faster and most files are skipped.
///
/// Built only when the raw-byte test is exact: the needle is ASCII (decoding never creates or
/// removes ASCII bytes), has no line break (universal newlines only rewrite `\r`), and, when
/// matching ignores case, has no `k` or `s` (Unicode folding also matches U+212A and U+017F,
/// which are not ASCII). The full search still decides every file that passes.
#[derive(Debug, Clone)]
pub struct LiteralFilter {
    /// The needle, lower-cased when `fold`.
    needle: Vec<u8>,
    fold: bool,
}

/// Python `re` metacharacters: a pattern without any is matched as the literal string.
const PY_META: &[u8] = b".^$*+?{}[]\\|()";

impl LiteralFilter {
    pub fn new(pattern: &str, literal: bool, case_sensitive: bool) -> Option<Self> {
        let bytes = pattern.as_bytes();
        if bytes.len() < 2 || !pattern.is_ascii() || bytes.iter().any(|b| matches!(b, b'\n' | b'\r')) {
            return None;
        }
        if !literal && bytes.iter().any(|b| PY_META.contains(b)) {
            return None;
        }
        if !case_sensitive && bytes.iter().any(|b| matches!(b.to_ascii_lowercase(), b'k' | b's')) {
            return None;
        }
        let fold = !case_sensitive;
        let needle = if fold { pattern.to_ascii_lowercase().into_bytes() } else { bytes.to_vec() };
        Some(Self { needle, fold })
    }

    /// Whether `hay` contains the needle (ignoring ASCII case when folding).
    pub fn may_match(&self, hay: &[u8]) -> bool {
        let n = self.needle.len();
        if hay.len() < n {
            return false;
        }
        let first = self.needle[0];
        let last = self.needle[n - 1];
        // Letters compare with bit 0x20 set; other bytes exactly.
        let mask = |b: u8| if self.fold && b.is_ascii_alphabetic() { 0x20u8 } else { 0 };
        let (m1, m2) = (mask(first), mask(last));
        let folded_eq = |h: u8, b: u8, m: u8| (h | m) == b;
        let verify = |at: usize| hay[at..at + n].iter().zip(&self.needle).all(|(&h, &b)| folded_eq(h, b, mask(b)));
        const LO: u64 = 0x0101_0101_0101_0101;
        const SEVEN: u64 = 0x7f7f_7f7f_7f7f_7f7f;
        // High bit of each byte set exactly where that byte of `x` is zero.
        let zero_bytes = |x: u64| !(((x & SEVEN).wrapping_add(SEVEN)) | x | SEVEN);
        let (f1, f2) = (LO * u64::from(first), LO * u64::from(last));
        let (o1, o2) = (LO * u64::from(m1), LO * u64::from(m2));
        // Packed pair: the first needle byte at `i + k` and the last at `i + k + n - 1`.
        let end = hay.len() - n + 1;
        let mut i = 0;
        while i + 8 <= end {
            let a = u64::from_le_bytes(hay[i..i + 8].try_into().unwrap_or([0; 8]));
            let b = u64::from_le_bytes(hay[i + n - 1..i + n + 7].try_into().unwrap_or([0; 8]));
            let mut hits = zero_bytes((a | o1) ^ f1) & zero_bytes((b | o2) ^ f2);
            while hits != 0 {
                let k = (hits.trailing_zeros() / 8) as usize;
                if verify(i + k) {
                    return true;
                }
                hits &= hits - 1;
            }
            i += 8;
        }
        (i..end).any(|at| folded_eq(hay[at], first, m1) && verify(at))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(p: &str, text: &str, cs: bool) -> Vec<(usize, String)> {
        let m = Matcher::new(p, false, cs).unwrap();
        let mut out = Vec::new();
        search_buffer(&m, text.as_bytes(), "/f", 1000, &mut out);
        out.into_iter().map(|g| (g.line_number, g.line)).collect()
    }

    #[test]
    fn candidates_are_confirmed_per_line() {
        assert_eq!(lines("^", "a\n\nb", true), vec![(1, "a".into()), (2, "".into()), (3, "b".into())]);
        assert_eq!(lines("a\\s+b", "a\nb\na b\n", true), vec![(3, "a b".into())]);
        assert_eq!(lines("x$", "ax\nxa\n", true), vec![(1, "ax".into())]);
        assert_eq!(lines("^b", "ab\nb\n", true), vec![(2, "b".into())]);
        assert_eq!(lines("todo", "TODO\r\nx\rtodo", false), vec![(1, "TODO".into()), (3, "todo".into())]);
        assert_eq!(lines("TODO(?=:)", "TODO: a\nTODO b\n", true), vec![(1, "TODO: a".into())]);
        assert_eq!(lines("o\\n", "foo\nbar", true), vec![(1, "foo".into())]);
        assert_eq!(lines("$", "abc", true), vec![(1, "abc".into())]);
    }

    #[test]
    fn long_lines_skipped_and_summaries_cut() {
        let long = format!("{}NEEDLE\n", "x".repeat(2000));
        assert!(lines("NEEDLE", &long, true).is_empty());
        let mid = format!("{}NEEDLE\n", "y".repeat(300));
        let got = lines("NEEDLE", &mid, true);
        assert_eq!(got[0].1.chars().count(), 200);
        assert!(got[0].1.ends_with("..."));
    }

    #[test]
    fn invalid_pattern_message() {
        assert_eq!(Matcher::new("[invalid", false, false).unwrap_err(), "unterminated character set at position 0");
        assert!(Matcher::new("[invalid", true, false).is_ok());
    }
    #[test]
    fn literal_filter_is_exact_where_it_applies() {
        let f = |p: &str, lit: bool, cs: bool| LiteralFilter::new(p, lit, cs);
        // Not built where the raw bytes would not decide.
        assert!(f("a.b", false, true).is_none() && f("x", false, true).is_none());
        assert!(f("task", false, false).is_none() && f("Kelvin", false, false).is_none());
        assert!(f("naïve", true, true).is_none() && f("a\nb", true, true).is_none());
        assert!(f("task", false, true).is_some() && f("a.b", true, true).is_some());
        // Against a naive search, at every alignment and around the word-scan boundaries.
        let naive = |hay: &[u8], needle: &[u8], fold: bool| {
            hay.windows(needle.len()).any(|w| if fold { w.eq_ignore_ascii_case(needle) } else { w == needle })
        };
        for (needle, cs) in
            [("TODO", false), ("TODO", true), ("a.b", true), ("@`", false), ("[]", false), ("zz", false)]
        {
            let filter = f(needle, needle.bytes().any(|b| PY_META.contains(&b)), cs).unwrap();
            for len in 0..40 {
                for at in 0..len {
                    for variant in
                        [needle.to_string(), needle.to_ascii_lowercase(), "ToDo".to_string(), "`@".to_string()]
                    {
                        let mut hay = vec![b'x'; len];
                        let v = variant.as_bytes();
                        if at + v.len() <= len {
                            hay[at..at + v.len()].copy_from_slice(v);
                        }
                        let want = naive(&hay, needle.as_bytes(), !cs);
                        assert_eq!(
                            filter.may_match(&hay),
                            want,
                            "{needle} cs={cs} in {:?}",
                            String::from_utf8_lossy(&hay)
                        );
                    }
                }
            }
        }
        // Whatever the filter rejects, the full search finds nothing in.
        let m = Matcher::new("todo", false, false).unwrap();
        let filter = f("todo", false, false).unwrap();
        for text in ["TODO\r\nx", "xx tOdO", "to do", "tod\ro", "T\u{0}ODO", "caf\u{e9} todo"] {
            let mut out = Vec::new();
            search_buffer(&m, text.as_bytes(), "/f", 10, &mut out);
            assert_eq!(filter.may_match(text.as_bytes()), !out.is_empty(), "{text:?}");
        }
    }
}
