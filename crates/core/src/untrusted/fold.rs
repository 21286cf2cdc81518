//! The matching copy of untrusted text: what a reader (a model) takes it to say. DeerFlow matches
//! framework tags on the raw text, so `<sys\u{200B}tem>`, `＜system＞` or `‹system›` pass as
//! plain text yet read as `<system>`. Here each character is folded to its compatibility form
//! (NFKD), with default-ignorable code points (zero-width characters, soft hyphen, variation
//! selectors, tag characters, bidi controls) and combining marks dropped and angle-bracket and
//! dash look-alikes mapped to `<`, `>` and `-`; matches in the copy map back to whole characters
//! of the original, so only what matched is rewritten.

use std::borrow::Cow;
use std::ops::Range;

use regex::Regex;
use unicode_normalization::char::{decompose_compatible, is_combining_mark};

/// Unicode's `Default_Ignorable_Code_Point` (DerivedCoreProperties.txt, Unicode 15.1): code
/// points that render as nothing when a font has no glyph for them, so they can sit inside a
/// tag name unseen.
pub(crate) fn is_default_ignorable(c: char) -> bool {
    matches!(
        c,
        '\u{00AD}'
            | '\u{034F}'
            | '\u{061C}'
            | '\u{115F}'..='\u{1160}'
            | '\u{17B4}'..='\u{17B5}'
            | '\u{180B}'..='\u{180F}'
            | '\u{200B}'..='\u{200F}'
            | '\u{202A}'..='\u{202E}'
            | '\u{2060}'..='\u{206F}'
            | '\u{3164}'
            | '\u{FE00}'..='\u{FE0F}'
            | '\u{FEFF}'
            | '\u{FFA0}'
            | '\u{FFF0}'..='\u{FFF8}'
            | '\u{1BCA0}'..='\u{1BCA3}'
            | '\u{1D173}'..='\u{1D17A}'
            | '\u{E0000}'..='\u{E0FFF}'
    )
}

/// Characters that look like `<`, `>` or `-` but have no compatibility decomposition to them
/// (NFKD already maps `＜` U+FF1C, `﹤` U+FE64, `－` U+FF0D and `﹣` U+FE63; `〈` U+2329 decomposes
/// to U+3008, listed here).
fn look_alike(c: char) -> char {
    match c {
        '\u{2039}' | '\u{3008}' | '\u{27E8}' | '\u{276C}' | '\u{276E}' | '\u{2770}' | '\u{02C2}' | '\u{1438}'
        | '\u{29FC}' | '\u{227A}' | '\u{22D6}' | '\u{300A}' | '\u{00AB}' | '\u{FF5F}' => '<',
        '\u{203A}' | '\u{3009}' | '\u{27E9}' | '\u{276D}' | '\u{276F}' | '\u{2771}' | '\u{02C3}' | '\u{1433}'
        | '\u{29FD}' | '\u{227B}' | '\u{22D7}' | '\u{300B}' | '\u{00BB}' | '\u{FF60}' => '>',
        '\u{2010}'..='\u{2015}' | '\u{2043}' | '\u{2212}' | '\u{2E3A}' | '\u{2E3B}' | '\u{30FC}' | '\u{FF70}' => '-',
        other => other,
    }
}

/// Append the folded form of `c` to `out` (nothing for an ignorable character or a mark).
pub(crate) fn fold_char(c: char, out: &mut String) {
    if c.is_ascii() {
        out.push(c);
        return;
    }
    if is_default_ignorable(c) {
        return;
    }
    decompose_compatible(c, |d| {
        if !is_combining_mark(d) && !is_default_ignorable(d) {
            out.push(look_alike(d));
        }
    });
}

/// The matching copy of `text`.
pub(crate) fn fold(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    text.chars().for_each(|c| fold_char(c, &mut out));
    out
}

/// One character of the original that left something in the copy: where it is in each.
struct Piece {
    original: Range<usize>,
    copy: Range<usize>,
}

/// `text` with each match of `re` in its matching copy rewritten: `rewrite` gets the stretch of
/// the original that folded into the match (whole characters, ignorable ones between included)
/// and the match in the copy, and returns what replaces the stretch. Borrowed when nothing
/// matched.
pub(crate) fn rewrite_matches<'t>(text: &'t str, re: &Regex, rewrite: impl Fn(&str, &str) -> String) -> Cow<'t, str> {
    let copy = fold(text);
    if !re.is_match(&copy) {
        return Cow::Borrowed(text);
    }
    let mut pieces = Vec::new();
    let mut folded = String::with_capacity(copy.len());
    for (i, c) in text.char_indices() {
        let start = folded.len();
        fold_char(c, &mut folded);
        if folded.len() > start {
            pieces.push(Piece { original: i..i + c.len_utf8(), copy: start..folded.len() });
        }
    }
    let mut out = String::with_capacity(text.len() + 16);
    let mut done = 0;
    for m in re.find_iter(&copy) {
        let first = pieces.partition_point(|p| p.copy.end <= m.start());
        let last = pieces.partition_point(|p| p.copy.start < m.end());
        let (Some(a), Some(b)) = (pieces.get(first), last.checked_sub(1).and_then(|l| pieces.get(l))) else {
            continue;
        };
        // Two matches can share a character that folds to several; the first one rewrote it.
        let span = a.original.start.max(done)..b.original.end;
        if span.start >= span.end {
            continue;
        }
        out.push_str(&text[done..span.start]);
        out.push_str(&rewrite(&text[span.clone()], m.as_str()));
        done = span.end;
    }
    out.push_str(&text[done..]);
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folding_sees_through_disguises() {
        assert_eq!(fold("＜ｓｙｓｔｅｍ＞"), "<system>");
        assert_eq!(fold("‹sys\u{200B}tem›"), "<system>");
        assert_eq!(fold("〈s\u{0336}yste\u{FE0F}m〉"), "<system>");
        assert_eq!(fold("——— END\u{00A0}USER INPUT ———"), "--- END USER INPUT ---");
        assert_eq!(fold("café"), "cafe");
        assert_eq!(fold("plain"), "plain");
    }

    #[test]
    fn matches_map_back_to_whole_characters() {
        let re = Regex::new("<system>").unwrap();
        let out = rewrite_matches("a\u{200B}＜sys\u{200B}tem＞b", &re, |s, m| format!("[{s}|{m}]"));
        assert_eq!(out, "a\u{200B}[＜sys\u{200B}tem＞|<system>]b");
        assert!(matches!(rewrite_matches("＜div＞", &re, |s, _| s.to_string()), Cow::Borrowed(_)));
    }
}
