//! The `grep` hot path, one file at a time. A file is read once into a reused buffer. When the
//! pattern requires one of a few literals (`prefilter`), a SIMD scan finds them in the raw bytes
//! and only the line around each hit is decoded and checked with the exact Python-semantics
//! regex. Otherwise a line-aware regex scans the whole decoded buffer for candidate lines, each
//! confirmed the same way. Patterns that need look-around or back-references fall back to
//! `fancy-regex`, line by line.
//!
//! Every path gives the answer of DeerFlow's loop: decode the file as UTF-8 with U+FFFD for bad
//! bytes, split it into lines at `\n`, `\r\n` or `\r` (each line ending in `\n`), skip lines over
//! 2000 characters, and `re.search` each line.

use std::borrow::Cow;
use std::path::Path;

use regex::{Regex, RegexBuilder};

use crate::prefilter::Prefilter;
use crate::text::char_len;
use crate::wasifs;
use toolhost_py::re::grep::{translate, Anchors};

/// DeerFlow skips files larger than this (ReDoS guard).
pub const MAX_FILE_SIZE: u64 = 1_000_000;
/// Binary sniffing window.
const BINARY_SAMPLE: usize = 8192;
/// Files larger than this have their first `BINARY_SAMPLE` bytes read and sniffed before the rest.
const SNIFF_FIRST_ABOVE: usize = 32 * 1024;
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
    /// Every match holds one of the prefilter's literals: hits in the raw bytes pick the lines
    /// `line` checks.
    Literals { prefilter: Prefilter, line: Regex },
    /// `buffer` finds candidates over the whole file, `line` confirms one line.
    Fast { buffer: Regex, line: Regex },
    /// Look-around / back-references: line by line.
    Fancy(Box<fancy_regex::Regex>),
}

impl Matcher {
    /// Compile like DeerFlow: `literal` escapes the pattern, matching is case-insensitive unless
    /// `case_sensitive`. `Err` carries the text after "Invalid regex pattern: ".
    pub fn new(pattern: &str, literal: bool, case_sensitive: bool) -> Result<Self, String> {
        Self::compile(pattern, literal, case_sensitive, true)
    }

    /// [`Matcher::new`]; without `prefilter`, the whole-buffer form every pattern had before the
    /// prefilter existed (the tests compare the two).
    fn compile(pattern: &str, literal: bool, case_sensitive: bool, prefilter: bool) -> Result<Self, String> {
        let build = |p: &str| {
            RegexBuilder::new(p)
                .case_insensitive(!case_sensitive)
                .size_limit(REGEX_SIZE_LIMIT)
                .build()
                .map_err(|e| first_line(&e.to_string()))
        };
        let (line, buffer) = if literal {
            let p = regex::escape(pattern);
            (p.clone(), p)
        } else {
            let line = translate(pattern, Anchors::Line).map_err(|e| e.0)?;
            if line.fancy {
                let flags = if case_sensitive { "" } else { "(?i)" };
                let re = fancy_regex::Regex::new(&format!("{flags}{}", line.pattern))
                    .map_err(|e| first_line(&e.to_string()))?;
                return Ok(Self::Fancy(Box::new(re)));
            }
            (line.pattern, translate(pattern, Anchors::Buffer).map_err(|e| e.0)?.pattern)
        };
        let line_re = build(&line);
        let prefilter = if prefilter && line_re.is_ok() { Prefilter::new(&line, !case_sensitive) } else { None };
        match (line_re, prefilter) {
            (Ok(line), Some(prefilter)) => Ok(Self::Literals { prefilter, line }),
            // The whole-buffer regex reports first, as it did when both were always compiled.
            (line, _) => Ok(Self::Fast { buffer: build(&buffer)?, line: line? }),
        }
    }

    fn line_matches(&self, line: &str) -> bool {
        match self {
            Self::Literals { line: re, .. } | Self::Fast { line: re, .. } => re.is_match(line),
            // A backtracking limit hit counts as no match rather than an error for the whole call.
            Self::Fancy(re) => re.is_match(line).unwrap_or(false),
        }
    }
}

fn first_line(s: &str) -> String {
    s.lines().find(|l| !l.trim().is_empty()).unwrap_or(s).trim().to_string()
}

/// The bytes of a candidate file, unless DeerFlow would skip it: not a regular file, over 1 MB,
/// or binary (a NUL in the first 8 KiB). Unreadable files are skipped too. `spare` is a buffer to
/// reuse; a file read in one host call comes back in the buffer that call filled instead.
pub fn load_candidate(real: &Path, spare: Vec<u8>) -> Option<Vec<u8>> {
    let f = wasifs::open(real).ok()?;
    let meta = f.meta().ok()?;
    if !meta.regular || meta.size > MAX_FILE_SIZE {
        return None;
    }
    let mut head = spare;
    head.clear();
    if meta.size as usize > SNIFF_FIRST_ABOVE {
        // A large file's first 8 KiB are sniffed before the rest is read: a binary one costs one
        // small read.
        head.extend_from_slice(&f.read(BINARY_SAMPLE, 0).ok()?);
        if memchr::memchr(0, &head).is_some() {
            return None;
        }
    }
    let data = wasifs::read_whole(&f, meta.size, head).ok()?;
    memchr::memchr(0, &data[..data.len().min(BINARY_SAMPLE)]).is_none().then_some(data)
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
    if let Matcher::Literals { prefilter, .. } = m {
        return search_raw(m, prefilter, data, vpath, room, out);
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
        // (`Literals` was searched by `search_raw` above.)
        Matcher::Fancy(_) | Matcher::Literals { .. } => {
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

/// The prefilter path: nothing is decoded but the lines the prefilter hits. Line boundaries and
/// numbers are found in the raw bytes, where `\r\n` and a lone `\r` also end a line; a file
/// without any `\r` (found out at its first hit) only looks for `\n`.
fn search_raw(m: &Matcher, prefilter: &Prefilter, data: &[u8], vpath: &str, room: usize, out: &mut Vec<GrepMatch>) {
    let mut pos = 0;
    let mut has_cr: Option<bool> = None;
    // Line breaks are counted up to `counted`, a line start, lazily: only when a line is reported.
    let (mut counted, mut line_no) = (0usize, 1usize);
    let mut added = 0;
    while let Some(hit) = prefilter.find(data, pos) {
        let cr = *has_cr.get_or_insert_with(|| memchr::memchr(b'\r', data).is_some());
        let before = &data[pos..hit];
        let start = if cr { memchr::memrchr2(b'\n', b'\r', before) } else { memchr::memrchr(b'\n', before) }
            .map_or(pos, |i| pos + i + 1);
        let after = &data[hit..];
        let end = if cr { memchr::memchr2(b'\n', b'\r', after) } else { memchr::memchr(b'\n', after) }
            .map_or(data.len(), |i| hit + i);
        let next = match data.get(end) {
            None => end,
            Some(b'\r') if data.get(end + 1) == Some(&b'\n') => end + 2,
            Some(_) => end + 1,
        };
        let line = python_line(data, start, end, next);
        if !too_long(&line) && m.line_matches(&line) {
            line_no += count_breaks(&data[counted..start], cr);
            counted = start;
            out.push(GrepMatch { path: vpath.to_string(), line_number: line_no, line: summarize(&line) });
            added += 1;
            if added >= room {
                return;
            }
        }
        pos = next;
    }
}

/// The line Python reads for the raw bytes `data[start..next]` (`end` is where its terminator
/// starts): decoded with U+FFFD for bad bytes, ending in `\n` when it has a terminator. Bad bytes
/// never swallow a line break (UTF-8 continuation bytes are never ASCII), so decoding a line
/// alone gives what decoding the whole file gives.
fn python_line(data: &[u8], start: usize, end: usize, next: usize) -> Cow<'_, str> {
    if data.get(end) == Some(&b'\n') {
        if let Ok(s) = std::str::from_utf8(&data[start..next]) {
            return Cow::Borrowed(s);
        }
    } else if end == next {
        if let Ok(s) = std::str::from_utf8(&data[start..end]) {
            return Cow::Borrowed(s);
        }
    }
    let mut line = String::from_utf8_lossy(&data[start..end]).into_owned();
    if next > end {
        line.push('\n');
    }
    Cow::Owned(line)
}

/// Line breaks in `bytes`, which starts and ends at line starts: `\n`, `\r\n` and lone `\r` count
/// one each. Without `\r` in the file only `\n` is counted.
fn count_breaks(bytes: &[u8], cr: bool) -> usize {
    let lf = memchr::memchr_iter(b'\n', bytes).count();
    if !cr {
        return lf;
    }
    let cr_count = memchr::memchr_iter(b'\r', bytes).count();
    lf + cr_count - memchr::memmem::find_iter(bytes, b"\r\n").count()
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
    /// The prefilter path gives the answer of the whole-buffer path (the previous implementation
    /// for every pattern) and of DeerFlow's line loop, on pseudo-random texts mixing every kind of
    /// line break, undecodable bytes, case and Unicode-fold variants, and long lines.
    #[test]
    fn prefilter_path_equals_the_whole_buffer_path() {
        let pieces: [&[u8]; 20] = [
            b"TODO",
            b"todo",
            b"ToDo",
            b"FIXME",
            b"fixme",
            b"\r\n",
            b"\r",
            b"\n",
            b"\xff",
            b"\xe2\x82",
            b"\xc3\xa9",
            b"\xc3\x89",
            "\u{17f}".as_bytes(),
            "\u{212a}".as_bytes(),
            b"fn ",
            b"_test",
            b"parse",
            b" ",
            b"x",
            b"\t",
        ];
        let patterns = [
            ("TODO", false, false),
            ("TODO", false, true),
            ("todo|FIXME", false, false),
            (r"fn\s+\w+_test", false, false),
            ("^TODO", false, false),
            ("TODO$", false, false),
            (r"\bTODO\b", false, false),
            ("xs", false, false),
            ("k", false, false),
            ("\u{e9}", false, false),
            ("a.b", true, false),
            ("o\\r", false, false),
            ("TODO\\n", false, false),
        ];
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for round in 0..400 {
            let mut text = Vec::new();
            let len = (next() % 60) as usize;
            for _ in 0..len {
                let p = pieces[(next() % pieces.len() as u64) as usize];
                if p == b"x" && next() % 8 == 0 {
                    text.extend(std::iter::repeat_n(b'x', 1990 + (next() % 20) as usize));
                } else {
                    text.extend_from_slice(p);
                }
            }
            for (pattern, literal, cs) in patterns {
                let fast = Matcher::compile(pattern, literal, cs, true).unwrap();
                let whole = Matcher::compile(pattern, literal, cs, false).unwrap();
                let (mut a, mut b) = (Vec::new(), Vec::new());
                search_buffer(&fast, &text, "/f", 1000, &mut a);
                search_buffer(&whole, &text, "/f", 1000, &mut b);
                assert_eq!(a, b, "round {round}, {pattern:?} in {:?}", String::from_utf8_lossy(&text));
                // DeerFlow's loop: decode, universal newlines, each line ending in \n, search.
                let decoded = String::from_utf8_lossy(&text).replace("\r\n", "\n").replace('\r', "\n");
                let expected: Vec<(usize, String)> = decoded
                    .split_inclusive('\n')
                    .enumerate()
                    .filter(|(_, l)| l.chars().count() <= 2000 && whole.line_matches(l))
                    .map(|(i, l)| (i + 1, summarize(l)))
                    .collect();
                let got: Vec<(usize, String)> = a.into_iter().map(|m| (m.line_number, m.line)).collect();
                assert_eq!(got, expected, "round {round}, {pattern:?}");
            }
        }
        // The patterns above do take the prefilter path.
        for (pattern, literal, cs) in patterns {
            assert!(matches!(Matcher::new(pattern, literal, cs).unwrap(), Matcher::Literals { .. }), "{pattern}");
        }
    }

    /// The prefilter replaced a whole-file literal check (`LiteralFilter`); its cases still hold:
    /// the scan agrees with a naive search at every alignment and around the word-scan
    /// boundaries, and whatever it rejects the full search finds nothing in.
    #[test]
    fn literal_prefilter_is_exact_where_it_applies() {
        let f = |p: &str, lit: bool, cs: bool| {
            let p = if lit { regex::escape(p) } else { p.to_string() };
            crate::prefilter::Prefilter::new(&p, !cs)
        };
        // Built for any required literal now, Unicode case folding included (`s` and `k` fold
        // to U+017F and U+212A, which become needles of their own).
        assert!(f("task", false, false).is_some() && f("Kelvin", false, false).is_some());
        assert!(f("naïve", true, true).is_some() && f("a.b", true, true).is_some());
        assert!(f("task", false, true).is_some() && f("a\nb", true, true).is_some());
        let naive = |hay: &[u8], needle: &[u8], fold: bool| {
            hay.windows(needle.len()).any(|w| if fold { w.eq_ignore_ascii_case(needle) } else { w == needle })
        };
        for (needle, cs) in
            [("TODO", false), ("TODO", true), ("a.b", true), ("@`", false), ("[]", false), ("zz", false)]
        {
            let filter = f(needle, true, cs).unwrap();
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
                            filter.find(&hay, 0).is_some(),
                            want,
                            "{needle} cs={cs} in {:?}",
                            String::from_utf8_lossy(&hay)
                        );
                    }
                }
            }
        }
        let m = Matcher::new("todo", false, false).unwrap();
        let filter = f("todo", false, false).unwrap();
        for text in ["TODO\r\nx", "xx tOdO", "to do", "tod\ro", "T\u{0}ODO", "caf\u{e9} todo"] {
            let mut out = Vec::new();
            search_buffer(&m, text.as_bytes(), "/f", 10, &mut out);
            assert_eq!(filter.find(text.as_bytes(), 0).is_some(), !out.is_empty(), "{text:?}");
        }
    }
}
