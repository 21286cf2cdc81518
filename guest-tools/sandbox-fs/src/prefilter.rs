//! Candidate finding for `grep`: the literals every match of a pattern must contain, read off the
//! pattern's syntax tree (`regex-syntax`'s literal extractor, as ripgrep's `grep-regex` does), and
//! a SIMD scan for them that folds ASCII case. A prefilter only says where a matching line may
//! be; the exact regex decides (see `search`).
//!
//! Why not the regex crate's own prefilter: a case-insensitive word is 16 literals (`TODO`), an
//! alternation of two 48, and for several literals the regex crate uses Teddy, which exists for
//! x86-64 and aarch64 only; in wasm it falls back to a byte-at-a-time automaton.

use regex_syntax::hir::literal::{rank, ExtractKind, Extractor, Seq};
use regex_syntax::hir::{Hir, HirKind};

/// More distinct needles than this scan slower than the regex's own search.
const MAX_NEEDLES: usize = 8;
/// Starting points tried in a top-level concatenation (`fn\s+\w+_test` is best found by `_test`).
const MAX_STARTS: usize = 32;
/// Beyond this length a longer needle is not rarer in practice: the pair of bytes decides.
const USEFUL_LEN: usize = 4;

/// How good a needle set is, larger first: its shortest needle (up to `USEFUL_LEN`), then fewer
/// needles, then rarer pair bytes.
type Score = (usize, std::cmp::Reverse<usize>, std::cmp::Reverse<u32>);

/// One literal as the scan compares it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Needle {
    /// The literal with its case-folded ASCII letters in lower case.
    bytes: Vec<u8>,
    /// Per byte, what is OR-ed into the haystack byte before comparing: 0x20 where ASCII case
    /// is folded (`A`..`Z` become `a`..`z`, nothing else lands on a letter), else 0.
    fold: Vec<u8>,
    /// The two positions the vector scan tests first: the rarest bytes of the needle.
    i1: usize,
    i2: usize,
}

impl Needle {
    fn new(lit: &[u8], fold_case: bool) -> Self {
        let fold: Vec<u8> = lit.iter().map(|b| if fold_case && b.is_ascii_alphabetic() { 0x20 } else { 0 }).collect();
        let bytes: Vec<u8> = lit.iter().zip(&fold).map(|(b, f)| b | f).collect();
        // A folded letter occurs as often as its two cases together; the rarer case says little.
        let weight = |i: usize| {
            let b = bytes[i];
            if fold[i] != 0 {
                rank(b).max(rank(b.to_ascii_uppercase()))
            } else {
                rank(b)
            }
        };
        let mut order: Vec<usize> = (0..bytes.len()).collect();
        order.sort_by_key(|&i| (weight(i), i));
        let i1 = order[0];
        // The second byte should differ from the first, or the pair tests one byte twice.
        let i2 = order.iter().copied().find(|&i| bytes[i] != bytes[i1] || fold[i] != fold[i1]).unwrap_or(i1);
        Self { bytes, fold, i1, i2 }
    }

    fn matches_at(&self, hay: &[u8], at: usize) -> bool {
        hay.get(at..at + self.bytes.len())
            .is_some_and(|w| w.iter().zip(&self.bytes).zip(&self.fold).all(|((h, b), f)| (h | f) == *b))
    }
}

/// A set of needles at least one of which occurs in every match.
#[derive(Debug, Clone)]
pub struct Prefilter {
    needles: Vec<Needle>,
    /// The furthest byte a needle's vector test reads past a start: `max(i1, i2)` over needles.
    reach: usize,
}

impl Prefilter {
    /// A prefilter for `pattern` (regex-crate syntax, as the line regex is compiled) matched with
    /// or without case, or `None` when no small set of non-empty literals is required.
    ///
    /// Needles are searched in the raw bytes of a file while the regex sees its decoded lines, so
    /// a needle never holds anything that can read differently from the bytes: a line break
    /// (a line ends in `\n` whether the file has `\n`, `\r\n` or `\r`) and U+FFFD (what
    /// undecodable bytes read as). Any other UTF-8 text is in the decoded file exactly where its
    /// bytes are in the raw one.
    pub fn new(pattern: &str, case_insensitive: bool) -> Option<Self> {
        let hir = regex_syntax::ParserBuilder::new().case_insensitive(case_insensitive).build().parse(pattern).ok()?;
        let mut best: Option<(Score, Vec<Needle>)> = None;
        for seq in required_literals(&hir) {
            let Some(needles) = needles_of(&seq, case_insensitive) else { continue };
            let min_len = needles.iter().map(|n| n.bytes.len()).min().unwrap_or(0).min(USEFUL_LEN);
            let cost: u32 =
                needles.iter().map(|n| u32::from(rank(n.bytes[n.i1])) + u32::from(rank(n.bytes[n.i2]))).sum();
            let score = (min_len, std::cmp::Reverse(needles.len()), std::cmp::Reverse(cost));
            if best.as_ref().is_none_or(|(s, _)| score > *s) {
                best = Some((score, needles));
            }
        }
        let (_, needles) = best?;
        let reach = needles.iter().map(|n| n.i1.max(n.i2)).max().unwrap_or(0);
        Some(Self { needles, reach })
    }

    /// The start of the first needle occurrence at or after `from`.
    pub fn find(&self, hay: &[u8], from: usize) -> Option<usize> {
        #[cfg(any(target_arch = "x86_64", all(target_arch = "wasm32", target_feature = "simd128")))]
        let from = match simd::find(self, hay, from) {
            Ok(hit) => return Some(hit),
            Err(resume) => resume,
        };
        (from..hay.len()).find(|&q| self.matches_at(hay, q))
    }

    fn matches_at(&self, hay: &[u8], at: usize) -> bool {
        self.needles.iter().any(|n| n.matches_at(hay, at))
    }
}

/// Literal sets of which every match contains one: the prefixes of the whole pattern and, in a
/// top-level concatenation, of each of its suffixes (a match of the whole holds a match of each).
fn required_literals(hir: &Hir) -> Vec<Seq> {
    let mut extractor = Extractor::new();
    extractor.kind(ExtractKind::Prefix);
    match hir.kind() {
        HirKind::Capture(c) => required_literals(&c.sub),
        HirKind::Concat(parts) => {
            (0..parts.len().min(MAX_STARTS)).map(|i| extractor.extract(&Hir::concat(parts[i..].to_vec()))).collect()
        }
        _ => vec![extractor.extract(hir)],
    }
}

/// The needles of a finite literal set, folded and deduplicated; `None` when unusable.
fn needles_of(seq: &Seq, fold_case: bool) -> Option<Vec<Needle>> {
    let lits = seq.literals()?;
    if lits.is_empty() {
        return None;
    }
    let mut out: Vec<Needle> = Vec::new();
    for lit in lits {
        // Every match this literal starts contains each part of it: keep the longest part without
        // a line break or U+FFFD, of the whole characters (the extractor may cut a literal inside
        // a character).
        let b = lit.as_bytes();
        let text = match std::str::from_utf8(b) {
            Ok(t) => t,
            Err(e) => std::str::from_utf8(&b[..e.valid_up_to()]).ok()?,
        };
        let kept = text
            .split(['\n', '\r', '\u{FFFD}'])
            .fold("", |best, part| if part.len() > best.len() { part } else { best });
        if kept.is_empty() {
            return None;
        }
        let n = Needle::new(kept.as_bytes(), fold_case);
        if !out.contains(&n) {
            out.push(n);
            if out.len() > MAX_NEEDLES {
                return None;
            }
        }
    }
    Some(out)
}

#[cfg(any(target_arch = "x86_64", all(target_arch = "wasm32", target_feature = "simd128")))]
mod simd {
    //! The "packed pair" scan of memchr's `memmem`, for several needles at once and with ASCII
    //! case folding: 16 starts at a time, each needle tested on its two rarest bytes, survivors
    //! verified in full.

    use super::Prefilter;

    #[cfg(target_arch = "wasm32")]
    mod v {
        use core::arch::wasm32::*;
        pub type V = v128;
        #[inline(always)]
        pub fn splat(b: u8) -> V {
            u8x16_splat(b)
        }
        /// # Safety
        /// `p..p + 16` must be readable.
        #[inline(always)]
        pub unsafe fn load(p: *const u8) -> V {
            v128_load(p.cast())
        }
        /// Lanes where `(x | fold) == want`, as a lane mask.
        #[inline(always)]
        pub fn eq_folded(x: V, fold: V, want: V) -> V {
            u8x16_eq(v128_or(x, fold), want)
        }
        #[inline(always)]
        pub fn and(a: V, b: V) -> V {
            v128_and(a, b)
        }
        #[inline(always)]
        pub fn or(a: V, b: V) -> V {
            v128_or(a, b)
        }
        #[inline(always)]
        pub fn zero() -> V {
            u8x16_splat(0)
        }
        #[inline(always)]
        pub fn bits(m: V) -> u32 {
            u32::from(u8x16_bitmask(m))
        }
    }

    #[cfg(target_arch = "x86_64")]
    mod v {
        // SSE2 is part of x86-64: every intrinsic below is always available.
        use core::arch::x86_64::*;
        pub type V = __m128i;
        #[inline(always)]
        pub fn splat(b: u8) -> V {
            unsafe { _mm_set1_epi8(b as i8) }
        }
        /// # Safety
        /// `p..p + 16` must be readable.
        #[inline(always)]
        pub unsafe fn load(p: *const u8) -> V {
            _mm_loadu_si128(p.cast())
        }
        #[inline(always)]
        pub fn eq_folded(x: V, fold: V, want: V) -> V {
            unsafe { _mm_cmpeq_epi8(_mm_or_si128(x, fold), want) }
        }
        #[inline(always)]
        pub fn and(a: V, b: V) -> V {
            unsafe { _mm_and_si128(a, b) }
        }
        #[inline(always)]
        pub fn or(a: V, b: V) -> V {
            unsafe { _mm_or_si128(a, b) }
        }
        #[inline(always)]
        pub fn zero() -> V {
            unsafe { _mm_setzero_si128() }
        }
        #[inline(always)]
        pub fn bits(m: V) -> u32 {
            unsafe { _mm_movemask_epi8(m) as u32 }
        }
    }

    const LANES: usize = 16;

    /// One needle's pair bytes and masks as vectors.
    #[derive(Clone, Copy)]
    struct Lanes {
        off1: usize,
        off2: usize,
        b1: v::V,
        f1: v::V,
        b2: v::V,
        f2: v::V,
    }

    impl Lanes {
        /// Lanes where this needle's pair matches, for the 16 starts at `p`.
        ///
        /// # Safety
        /// `p + max(off1, off2) + 16` bytes must be readable.
        #[inline(always)]
        unsafe fn test(&self, p: *const u8) -> v::V {
            let (x1, x2) = (v::load(p.add(self.off1)), v::load(p.add(self.off2)));
            v::and(v::eq_folded(x1, self.f1, self.b1), v::eq_folded(x2, self.f2, self.b2))
        }
    }

    /// `Ok(start)` of the first occurrence at or after `from`, or `Err(resume)`: no occurrence
    /// starts before `resume`, and the rest is too short for a vector step.
    pub fn find(pf: &Prefilter, hay: &[u8], from: usize) -> Result<usize, usize> {
        let lanes: Vec<Lanes> = pf
            .needles
            .iter()
            .map(|n| Lanes {
                off1: n.i1,
                off2: n.i2,
                b1: v::splat(n.bytes[n.i1]),
                f1: v::splat(n.fold[n.i1]),
                b2: v::splat(n.bytes[n.i2]),
                f2: v::splat(n.fold[n.i2]),
            })
            .collect();
        // One or two needles (a word, a word in any case, `A|B`) are the common case: a fixed
        // count keeps every vector in a register.
        match lanes.as_slice() {
            [a] => find_with(pf, hay, from, [*a]),
            [a, b] => find_with(pf, hay, from, [*a, *b]),
            [a, b, c] => find_with(pf, hay, from, [*a, *b, *c]),
            [a, b, c, d] => find_with(pf, hay, from, [*a, *b, *c, *d]),
            _ => find_with_slice(pf, hay, from, &lanes),
        }
    }

    #[inline(always)]
    fn find_with<const N: usize>(pf: &Prefilter, hay: &[u8], from: usize, lanes: [Lanes; N]) -> Result<usize, usize> {
        let mut at = from;
        let ptr = hay.as_ptr();
        // Two vectors per step: half the loop overhead, and the second load overlaps the first.
        while at + pf.reach + 2 * LANES <= hay.len() {
            let (mut lo, mut hi) = (v::zero(), v::zero());
            for l in &lanes {
                // SAFETY: `at + off + 2 * LANES <= at + reach + 2 * LANES <= hay.len()`.
                unsafe {
                    lo = v::or(lo, l.test(ptr.add(at)));
                    hi = v::or(hi, l.test(ptr.add(at + LANES)));
                }
            }
            let bits = v::bits(lo) | (v::bits(hi) << LANES);
            if bits != 0 {
                if let Some(hit) = verify(pf, hay, at, bits) {
                    return Ok(hit);
                }
            }
            at += 2 * LANES;
        }
        find_with_slice(pf, hay, at, &lanes)
    }

    fn find_with_slice(pf: &Prefilter, hay: &[u8], from: usize, lanes: &[Lanes]) -> Result<usize, usize> {
        let mut at = from;
        let ptr = hay.as_ptr();
        while at + pf.reach + LANES <= hay.len() {
            let mut any = v::zero();
            for l in lanes {
                // SAFETY: `at + off + LANES <= at + reach + LANES <= hay.len()`.
                any = v::or(any, unsafe { l.test(ptr.add(at)) });
            }
            let bits = v::bits(any);
            if bits != 0 {
                if let Some(hit) = verify(pf, hay, at, bits) {
                    return Ok(hit);
                }
            }
            at += LANES;
        }
        Err(at)
    }

    /// The first start `at + k`, for the set bits `k` of `bits`, where a needle really occurs.
    #[inline(never)]
    fn verify(pf: &Prefilter, hay: &[u8], at: usize, mut bits: u32) -> Option<usize> {
        while bits != 0 {
            let start = at + bits.trailing_zeros() as usize;
            if pf.matches_at(hay, start) {
                return Some(start);
            }
            bits &= bits - 1;
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn folded(pf: &Prefilter) -> Vec<String> {
        pf.needles.iter().map(|n| String::from_utf8_lossy(&n.bytes).into_owned()).collect()
    }

    #[test]
    fn needles_are_the_required_literals() {
        let pf = |p: &str, ci: bool| Prefilter::new(p, ci).map(|f| folded(&f));
        assert_eq!(pf("TODO", true), Some(vec!["todo".into()]));
        assert_eq!(pf("TODO", false), Some(vec!["TODO".into()]));
        assert_eq!(pf("TODO|FIXME", true), Some(vec!["todo".into(), "fixme".into()]));
        // The required literal after the classes beats the short prefix; Unicode folding adds
        // the long s (U+017F) spelling as a needle of its own.
        assert_eq!(pf(r"fn\s+\w+_test", true), Some(vec!["_test".into(), "_te\u{17f}t".into()]));
        assert_eq!(pf(r"fn\s+\w+_test", false), Some(vec!["_test".into()]));
        assert_eq!(pf("k", true), Some(vec!["k".into(), "\u{212a}".into()]));
        // Of equally long sets, the one with fewer needles (no Kelvin sign to look for).
        assert_eq!(pf("kelvin", true), Some(vec!["elvin".into()]));
        // Needles stop at a line break (Python's `$` is `\n?\z` at the end of a line) and U+FFFD.
        assert_eq!(pf(r"\ATODO(?:\n?\z)", false), Some(vec!["TODO".into()]));
        assert_eq!(pf("o\\r", false), Some(vec!["o".into()]));
        assert_eq!(pf("ab\u{FFFD}", false), Some(vec!["ab".into()]));
        // Nothing required, nothing before a break, or too many alternatives: no prefilter.
        assert_eq!(pf("\\nx", false), Some(vec!["x".into()]));
        for p in [r"\w+", "a*", ".", "a|b|c|d|e|f|g|h|i", "\u{FFFD}", "(?:\\n?\\z)"] {
            assert!(pf(p, true).is_none(), "{p}");
        }
    }

    /// The scan finds exactly the first position where some needle starts, at every alignment,
    /// around the vector width and near the end.
    #[test]
    fn find_equals_a_naive_search() {
        let naive = |pf: &Prefilter, hay: &[u8], from: usize| (from..hay.len()).find(|&q| pf.matches_at(hay, q));
        for (pattern, ci) in
            [("TODO", true), ("TODO|FIXME", true), ("a.b", false), ("x", true), (r"fn\s+\w+_test", true)]
        {
            let pf = Prefilter::new(pattern, ci).unwrap();
            for len in 0..50 {
                for needle in ["TODO", "todo", "tOdO", "FIXME", "a\u{17f}b", "x", "X", "_test", "_te\u{17f}t", "_TEST"]
                {
                    for at in 0..len {
                        let mut hay = vec![b'.'; len];
                        let n = needle.as_bytes();
                        if at + n.len() <= len {
                            hay[at..at + n.len()].copy_from_slice(n);
                        }
                        for from in [0, at.saturating_sub(1), at, at + 1] {
                            assert_eq!(pf.find(&hay, from), naive(&pf, &hay, from), "{pattern} in {hay:?} from {from}");
                        }
                    }
                }
            }
        }
    }
}
