//! The `grep` hot path. A file is read once into a reused buffer; a line-aware regex scans the
//! whole buffer for candidate lines (literal prefilters do the heavy lifting), and each
//! candidate line is confirmed with the exact Python-semantics regex. Patterns that need
//! look-around or back-references fall back to `fancy-regex`, line by line.

use std::fs::File;
use std::io::Read;
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
    let Ok(mut f) = File::open(real) else { return false };
    let Ok(meta) = f.metadata() else { return false };
    if !meta.is_file() || meta.len() > MAX_FILE_SIZE {
        return false;
    }
    if f.read_to_end(buf).is_err() {
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
}
