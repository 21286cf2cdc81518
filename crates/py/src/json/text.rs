//! `json.dumps` text written from JSON *text*, in one linear pass: the text is read into a flat
//! tape of nodes (reused from one schema to the next, so it stays in cache), and the output is
//! written from the tape with Python's rules: keys sorted by code point, integers as their digits
//! (of any size, as `json.loads` keeps them), floats as `repr`, strings re-escaped as
//! `ensure_ascii=False` does. For the deferred catalog's hash blob of thousands of MCP tool
//! schemas: walking one contiguous text is far cheaper than walking a `serde_json` tree spread
//! over the heap.
//!
//! Anything off the common path (a key with an escape, a duplicate key, a float that is not
//! finite, a lone surrogate, nesting deeper than [`MAX_DEPTH`], text that is not JSON) makes a
//! writer return `false`: the caller then takes its tree path, which decides those cases.

use super::{push_key, push_quoted, push_text, write_py_float, write_py_str};

/// Nesting deeper than this is not read (the tree path decides it).
pub const MAX_DEPTH: usize = 400;

/// What a node is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Null,
    True,
    False,
    Int,
    Float,
    /// A string without escapes: its bytes are its text.
    Str,
    /// A string with escapes.
    StrEscaped,
    Array,
    Object,
}

/// One value of a parsed text. For a string, `start..end` is its content between the quotes;
/// for a number its text; for an array or object the whole value. `next` is the index of the
/// node after this value's subtree; an object's nodes are its keys and values alternating.
#[derive(Debug, Clone, Copy)]
pub struct Node {
    pub kind: Kind,
    pub start: u32,
    pub end: u32,
    pub next: u32,
}

/// A parsed JSON text.
#[derive(Debug, Default)]
pub struct Tape {
    nodes: Vec<Node>,
    /// Some object key has an escape (its bytes are not its text).
    pub escaped_key: bool,
    /// Some object, at any depth, has the key `$ref`.
    pub has_ref: bool,
    /// Decoded strings, reused.
    scratch: String,
    /// The entries of the objects being written, `(key prefix, key start, key end, value)`.
    keys: Vec<(u64, u32, u32, u32)>,
}

impl Tape {
    /// Read `text` (one JSON value, surrounding whitespace allowed). `false` when it is not JSON
    /// as Python's `json.loads` reads it, is nested deeper than [`MAX_DEPTH`], or is longer than
    /// 4 GiB.
    pub fn parse(&mut self, text: &str) -> bool {
        self.nodes.clear();
        self.escaped_key = false;
        self.has_ref = false;
        if text.len() >= u32::MAX as usize {
            return false;
        }
        let b = text.as_bytes();
        let mut i = skip_ws(b, 0);
        if !self.value(b, &mut i, 0) {
            return false;
        }
        skip_ws(b, i) == b.len()
    }

    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }

    fn push(&mut self, kind: Kind, start: usize, end: usize) -> usize {
        let at = self.nodes.len();
        self.nodes.push(Node { kind, start: start as u32, end: end as u32, next: at as u32 + 1 });
        at
    }

    fn value(&mut self, b: &[u8], i: &mut usize, depth: usize) -> bool {
        let Some(&c) = b.get(*i) else { return false };
        match c {
            b'{' | b'[' => {
                if depth >= MAX_DEPTH {
                    return false;
                }
                let object = c == b'{';
                let at = self.push(if object { Kind::Object } else { Kind::Array }, *i, *i);
                let close = if object { b'}' } else { b']' };
                *i = skip_ws(b, *i + 1);
                if b.get(*i) == Some(&close) {
                    *i += 1;
                } else {
                    loop {
                        if object {
                            if b.get(*i) != Some(&b'"') {
                                return false;
                            }
                            let key = self.nodes.len();
                            if !self.string(b, i) {
                                return false;
                            }
                            let k = self.nodes[key];
                            if k.kind == Kind::StrEscaped {
                                self.escaped_key = true;
                            } else if &b[k.start as usize..k.end as usize] == b"$ref" {
                                self.has_ref = true;
                            }
                            *i = skip_ws(b, *i);
                            if b.get(*i) != Some(&b':') {
                                return false;
                            }
                            *i = skip_ws(b, *i + 1);
                        }
                        // Scalars are read here, without a call for each.
                        let ok = match b.get(*i) {
                            Some(b'{' | b'[') => self.value(b, i, depth + 1),
                            _ => self.scalar(b, i),
                        };
                        if !ok {
                            return false;
                        }
                        *i = skip_ws(b, *i);
                        match b.get(*i) {
                            Some(b',') => *i = skip_ws(b, *i + 1),
                            Some(&x) if x == close => {
                                *i += 1;
                                break;
                            }
                            _ => return false,
                        }
                    }
                }
                let next = self.nodes.len() as u32;
                let node = &mut self.nodes[at];
                node.end = *i as u32;
                node.next = next;
                true
            }
            _ => self.scalar(b, i),
        }
    }

    /// A value that is not an array or object at `b[*i]`.
    #[inline(always)]
    fn scalar(&mut self, b: &[u8], i: &mut usize) -> bool {
        match b.get(*i) {
            Some(b'"') => self.string(b, i),
            Some(b't') => self.literal(b, i, b"true", Kind::True),
            Some(b'f') => self.literal(b, i, b"false", Kind::False),
            Some(b'n') => self.literal(b, i, b"null", Kind::Null),
            Some(b'-' | b'0'..=b'9') => self.number(b, i),
            _ => false,
        }
    }

    fn literal(&mut self, b: &[u8], i: &mut usize, word: &[u8], kind: Kind) -> bool {
        if !b[*i..].starts_with(word) {
            return false;
        }
        self.push(kind, *i, *i + word.len());
        *i += word.len();
        true
    }

    /// `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`
    fn number(&mut self, b: &[u8], i: &mut usize) -> bool {
        let start = *i;
        let mut j = start;
        let digits = |j: &mut usize| {
            let from = *j;
            while *j < b.len() && b[*j].is_ascii_digit() {
                *j += 1;
            }
            *j - from
        };
        if b.get(j) == Some(&b'-') {
            j += 1;
        }
        match b.get(j) {
            Some(b'0') => j += 1,
            Some(b'1'..=b'9') => {
                digits(&mut j);
            }
            _ => return false,
        }
        let mut float = false;
        if b.get(j) == Some(&b'.') {
            j += 1;
            if digits(&mut j) == 0 {
                return false;
            }
            float = true;
        }
        if matches!(b.get(j), Some(b'e' | b'E')) {
            j += 1;
            if matches!(b.get(j), Some(b'+' | b'-')) {
                j += 1;
            }
            if digits(&mut j) == 0 {
                return false;
            }
            float = true;
        }
        self.push(if float { Kind::Float } else { Kind::Int }, start, j);
        *i = j;
        true
    }

    /// A string at `b[*i] == '"'`; control characters are refused (`json.loads`' strict mode).
    #[inline]
    fn string(&mut self, b: &[u8], i: &mut usize) -> bool {
        let start = *i + 1;
        let mut j = start;
        let mut escaped = false;
        loop {
            j = find_special(b, j);
            match b.get(j) {
                Some(b'"') => break,
                Some(b'\\') => {
                    escaped = true;
                    j += 2;
                }
                _ => return false, // a control character, or the end
            }
        }
        self.push(if escaped { Kind::StrEscaped } else { Kind::Str }, start, j);
        *i = j + 1;
        true
    }

    /// The children of the array or object at `at` (an object's keys and values alternating).
    fn children(&self, at: usize) -> impl Iterator<Item = usize> + '_ {
        let end = self.nodes[at].next as usize;
        let mut i = at + 1;
        std::iter::from_fn(move || {
            (i < end).then(|| {
                let c = i;
                i = self.nodes[c].next as usize;
                c
            })
        })
    }

    /// The value of key `key` in the object at `at` (the last one, as `json.loads` keeps it).
    pub fn get(&self, text: &str, at: usize, key: &str) -> Option<usize> {
        let mut found = None;
        let mut it = self.children(at);
        while let (Some(k), Some(v)) = (it.next(), it.next()) {
            if self.str_bytes(text, k) == Some(key.as_bytes()) {
                found = Some(v);
            }
        }
        found
    }

    /// Number of entries of the object (or elements of the array) at `at`.
    pub fn len(&self, at: usize) -> usize {
        let n = self.children(at).count();
        if self.nodes[at].kind == Kind::Object {
            n / 2
        } else {
            n
        }
    }

    pub fn is_empty(&self, at: usize) -> bool {
        self.nodes[at].next as usize == at + 1
    }

    fn str_bytes<'t>(&self, text: &'t str, at: usize) -> Option<&'t [u8]> {
        let n = self.nodes[at];
        (n.kind == Kind::Str).then(|| &text.as_bytes()[n.start as usize..n.end as usize])
    }

    /// `json.dumps(v, sort_keys=True, ensure_ascii=False)` of the value at `at`.
    pub fn write_sorted(&mut self, text: &str, at: usize, out: &mut String) -> bool {
        self.write_rm_titles(text, at, None, out)
    }

    /// `json.dumps(_rm_titles(v), sort_keys=True, …)` of the object at `at` (see
    /// `write_sorted_rm_titles`), `skip` dropping further keys of this object only.
    pub fn write_sorted_rm_titles(&mut self, text: &str, at: usize, skip: &[&str], out: &mut String) -> bool {
        self.write_rm_titles(text, at, Some(("", skip)), out)
    }

    /// With `rm`, `Some((prev_key, skip))`: titles removed as `_rm_titles` does (a `title` key
    /// is dropped unless its value is an object right under `properties`; lists are not
    /// entered); without it, plain sorted output.
    fn write_rm_titles(&mut self, text: &str, at: usize, rm: Option<(&str, &[&str])>, out: &mut String) -> bool {
        let node = self.nodes[at];
        match node.kind {
            Kind::Object => {
                // The kept entries, sorted, on a stack shared by the nested objects.
                let base = self.keys.len();
                let end = node.next as usize;
                let mut k = at + 1;
                while k < end {
                    let v = self.nodes[k].next as usize;
                    let kn = self.nodes[k];
                    if kn.kind != Kind::Str {
                        self.keys.truncate(base);
                        return false;
                    }
                    k = self.nodes[v].next as usize;
                    let key = &text.as_bytes()[kn.start as usize..kn.end as usize];
                    if let Some((prev_key, skip)) = rm {
                        let is_object = self.nodes[v].kind == Kind::Object;
                        if (key == b"title" && !(is_object && prev_key == "properties"))
                            || skip.iter().any(|s| s.as_bytes() == key)
                        {
                            continue;
                        }
                    }
                    let prefix = text_key_prefix(text.as_bytes(), kn.start as usize, key.len());
                    self.keys.push((prefix, kn.start, kn.end, v as u32));
                }
                let b = text.as_bytes();
                let key = |e: &(u64, u32, u32, u32)| &b[e.1 as usize..e.2 as usize];
                let entries = &mut self.keys[base..];
                entries.sort_unstable_by(|x, y| x.0.cmp(&y.0).then_with(|| key(x).cmp(key(y))));
                if entries.windows(2).any(|w| w[0].0 == w[1].0 && key(&w[0]) == key(&w[1])) {
                    self.keys.truncate(base);
                    return false; // a duplicate key: the tree path keeps the last value
                }
                out.push('{');
                let mut ok = true;
                for j in base..self.keys.len() {
                    let (_, ks, ke, v) = self.keys[j];
                    // Between two ASCII quotes: on character boundaries.
                    let key = &text[ks as usize..ke as usize];
                    let v = v as usize;
                    push_key(out, j == base, key);
                    // Scalars are written here, without a call for each.
                    ok = match self.nodes[v].kind {
                        Kind::Object if rm.is_some() => self.write_rm_titles(text, v, Some((key, &[])), out),
                        Kind::Object | Kind::Array => self.write_rm_titles(text, v, None, out),
                        _ => self.write_scalar(text, v, out),
                    };
                    if !ok {
                        break;
                    }
                }
                self.keys.truncate(base);
                if !ok {
                    return false;
                }
                out.push('}');
                true
            }
            Kind::Array => {
                out.push('[');
                let end = node.next as usize;
                let mut x = at + 1;
                while x < end {
                    if x > at + 1 {
                        push_text(out, ", ");
                    }
                    let ok = match self.nodes[x].kind {
                        Kind::Object | Kind::Array => self.write_rm_titles(text, x, None, out),
                        _ => self.write_scalar(text, x, out),
                    };
                    if !ok {
                        return false;
                    }
                    x = self.nodes[x].next as usize;
                }
                out.push(']');
                true
            }
            _ => self.write_scalar(text, at, out),
        }
    }

    #[inline]
    fn write_scalar(&mut self, text: &str, at: usize, out: &mut String) -> bool {
        let n = self.nodes[at];
        let raw = &text[n.start as usize..n.end as usize];
        match n.kind {
            Kind::Null | Kind::True | Kind::False => push_text(out, raw),
            Kind::Int => {
                if raw.bytes().all(|c| c == b'0' || c == b'-') {
                    out.push('0'); // `-0` is the int 0
                } else {
                    push_text(out, raw);
                }
            }
            Kind::Float if is_own_repr(raw) => push_text(out, raw),
            Kind::Float => {
                let Ok(f) = raw.parse::<f64>() else { return false };
                if !f.is_finite() {
                    return false;
                }
                write_py_float(f, out);
            }
            Kind::Str => write_plain_str(raw, out),
            Kind::StrEscaped => {
                let mut s = std::mem::take(&mut self.scratch);
                s.clear();
                let ok = unescape(raw, &mut s);
                if ok {
                    write_py_str(&s, out);
                }
                self.scratch = s;
                return ok;
            }
            Kind::Array | Kind::Object => return false,
        }
        true
    }
}

/// The index of the first byte from `i` on that is `"`, `\` or a C0 control (`b.len()` if
/// none): eight bytes at a time.
fn find_special(b: &[u8], mut i: usize) -> usize {
    const LO: u64 = 0x0101_0101_0101_0101;
    const HI: u64 = 0x8080_8080_8080_8080;
    // High bit of each byte set where that byte of `x` is below `n`; exact for bytes below 0x80
    // (no borrow crosses bytes unless a byte is a hit), bytes from 0x80 are masked out.
    let below = |x: u64, n: u8| x.wrapping_sub(LO * u64::from(n)) & !x & HI;
    let equal = |x: u64, c: u8| below(x ^ (LO * u64::from(c)), 1);
    while let Some(word) = b.get(i..i + 8) {
        let x = u64::from_le_bytes([word[0], word[1], word[2], word[3], word[4], word[5], word[6], word[7]]);
        let hits = (below(x, 0x20) | equal(x, b'"') | equal(x, b'\\')) & !x & HI;
        if hits != 0 {
            // A borrow can only mark bytes above a real hit: the lowest mark is the first hit.
            return i + (hits.trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    while i < b.len() && !(b[i] < 0x20 || b[i] == b'"' || b[i] == b'\\') {
        i += 1;
    }
    i
}

/// Whether a JSON float's text is already Python's `repr` of its value, as most floats in
/// schemas are (`0.5`, `1.0`, `-2.25`): positional (`-?D+.D+`, no exponent), at most 15
/// significant digits, no trailing zero after the point (but `X.0`), and a decimal exponent in
/// `repr`'s positional range. Any decimal of at most 15 significant digits is the only one of
/// that length or shorter that rounds to its double, so the shortest round-trip digits `repr`
/// prints are its own.
fn is_own_repr(raw: &str) -> bool {
    let b = raw.as_bytes();
    let b = b.strip_prefix(b"-").unwrap_or(b);
    let Some(point) = b.iter().position(|&c| c == b'.') else { return false };
    let (int, frac) = (&b[..point], &b[point + 1..]);
    if int.is_empty() || frac.is_empty() || !int.iter().chain(frac).all(u8::is_ascii_digit) {
        return false;
    }
    if frac.len() > 1 && frac.ends_with(b"0") {
        return false;
    }
    let significant = if int == b"0" {
        // `0.000x`: positional down to an exponent of -4 (three zeros after the point).
        let zeros = frac.iter().take_while(|&&c| c == b'0').count();
        if zeros == frac.len() {
            return true; // 0.0
        }
        if zeros > 3 {
            return false;
        }
        frac.len() - zeros
    } else {
        int.len() + if frac == b"0" { 0 } else { frac.len() }
    };
    significant <= 15
}

/// [`super::key_prefix`] of the key of `len` bytes at `start` in `b`: one unaligned load when eight bytes are
/// there (a copy of fewer bytes into a zeroed word stalls the load that reads it back).
#[inline]
fn text_key_prefix(b: &[u8], start: usize, len: usize) -> u64 {
    match b.get(start..start + 8) {
        Some(w) => {
            let x = u64::from_be_bytes([w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7]]);
            if len >= 8 {
                x
            } else {
                x & !(u64::MAX >> (8 * len))
            }
        }
        None => {
            let mut w = [0u8; 8];
            w[..len].copy_from_slice(&b[start..start + len]);
            u64::from_be_bytes(w)
        }
    }
}

/// A string without `"`, `\` or C0 controls as `json.dumps` writes it: quoted as it is.
#[inline(always)]
fn write_plain_str(s: &str, out: &mut String) {
    push_quoted(out, s);
}

fn skip_ws(b: &[u8], mut i: usize) -> usize {
    while i < b.len() && matches!(b[i], b' ' | b'\t' | b'\n' | b'\r') {
        i += 1;
    }
    i
}

/// Decode a JSON string's content (between its quotes) into `out`; `false` on a bad escape or
/// a lone surrogate (which Python keeps but cannot write as UTF-8; the tree path decides).
fn unescape(raw: &str, out: &mut String) -> bool {
    let mut rest = raw;
    while let Some(p) = rest.find('\\') {
        out.push_str(&rest[..p]);
        let b = rest.as_bytes();
        let Some(&e) = b.get(p + 1) else { return false };
        let mut used = 2;
        let c = match e {
            b'"' => '"',
            b'\\' => '\\',
            b'/' => '/',
            b'b' => '\u{8}',
            b'f' => '\u{c}',
            b'n' => '\n',
            b'r' => '\r',
            b't' => '\t',
            b'u' => {
                let hex = |at: usize| rest.get(at..at + 4).and_then(|h| u32::from_str_radix(h, 16).ok());
                let Some(hi) = hex(p + 2).filter(|_| rest[p + 2..p + 6].bytes().all(|c| c.is_ascii_hexdigit())) else {
                    return false;
                };
                used = 6;
                let code = if (0xD800..0xDC00).contains(&hi) {
                    let lo = (rest.get(p + 6..p + 8) == Some("\\u")).then(|| hex(p + 8)).flatten().filter(|lo| {
                        (0xDC00..0xE000).contains(lo) && rest[p + 8..p + 12].bytes().all(|c| c.is_ascii_hexdigit())
                    });
                    let Some(lo) = lo else { return false };
                    used = 12;
                    0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00)
                } else {
                    hi
                };
                let Some(c) = char::from_u32(code) else { return false };
                c
            }
            _ => return false,
        };
        out.push(c);
        rest = &rest[p + used..];
    }
    out.push_str(rest);
    true
}

#[cfg(test)]
mod tests {
    use super::super::{key_prefix, write_sorted_rm_titles, PyValue};
    use super::*;

    fn sorted(text: &str) -> Option<String> {
        let mut t = Tape::default();
        let mut out = String::new();
        (t.parse(text) && t.write_sorted(text, 0, &mut out)).then_some(out)
    }

    /// Whatever the text writers write is what `PyValue::parse` (Python's `json.loads`) and the
    /// `PyValue` writers give; what they refuse is off their path.
    #[test]
    fn text_writers_equal_pyvalue_writers() {
        let texts = [
            r#"{"b": 1, "a": [1, 2.5, -0.0, 1e16, 1e-7, 0.1, -3, 18446744073709551615, -9223372036854775808, -0, 1E2, 1.5e+300]}"#,
            r#"{"title": "T", "description": "D", "properties": {"title": {"title": "x"}, "a": {"title": "A", "k": [{"title": "kept"}]}}}"#,
            r#"{"s": "\u00e9\n\"\\\u0001\u007f\ud83d\ude80\/", "n": null, "t": true, "f": false, "e": {}, "l": []}"#,
            r#"{"big": 123456789012345678901234567890, "neg": -123456789012345678901234567890, "z": -0, "x": 1.0}"#,
            r#"[{"zz": 1, "z": 2, "zzzzzzzzzb": 3, "zzzzzzzzza": 4, "": 5, "é": 7, "e": 8, "title": {"title": 1}}]"#,
            " \n{\"type\":\"object\",\"properties\":{\"q\":{\"type\":\"string\",\"title\":\"Q\"}},\"required\":[\"q\"]} \t",
            r#""plain""#,
            "12",
        ];
        for text in texts {
            let py = PyValue::parse(text).unwrap();
            let mut expected = String::new();
            py.write_sorted(&mut expected);
            assert_eq!(sorted(text).as_deref(), Some(expected.as_str()), "{text}");
            if let PyValue::Dict(d) = &py {
                for skip in [&[][..], &["title", "description", "$defs", "definitions"][..]] {
                    let mut t = Tape::default();
                    assert!(t.parse(text));
                    let (mut a, mut b) = (String::new(), String::new());
                    assert!(t.write_sorted_rm_titles(text, 0, skip, &mut a), "{text}");
                    write_sorted_rm_titles(d, "", skip, &mut b);
                    assert_eq!(a, b, "{text}");
                }
            }
        }
        // A wide object (past the stack-sorted size).
        let wide = format!("{{{}}}", (0..40).rev().map(|i| format!("\"k{i}\": {i}")).collect::<Vec<_>>().join(", "));
        let mut expected = String::new();
        PyValue::parse(&wide).unwrap().write_sorted(&mut expected);
        assert_eq!(sorted(&wide).unwrap(), expected);
    }

    /// The word-at-a-time scan finds what a byte loop finds, at every offset, next to UTF-8.
    #[test]
    fn find_special_equals_a_byte_loop() {
        let naive = |b: &[u8], i: usize| (i..b.len()).find(|&j| b[j] < 0x20 || b[j] == b'"' || b[j] == b'\\');
        for special in ["\"", "\\", "\u{0}", "\u{1f}", "\n", "\\\"", "é\"\u{1}"] {
            for len in 0..24 {
                for at in 0..=len {
                    let mut s: String = "aé🚀\u{7f} ~".chars().cycle().take(len).collect();
                    let cut = s.char_indices().map(|(i, _)| i).nth(at).unwrap_or(s.len());
                    s.insert_str(cut, special);
                    let b = s.as_bytes();
                    for from in 0..b.len() {
                        assert_eq!(
                            Some(find_special(b, from)).filter(|&j| j < b.len()),
                            naive(b, from),
                            "{s:?} {from}"
                        );
                    }
                }
            }
        }
    }

    /// A float written as its own text is exactly what `repr` of its value gives.
    #[test]
    fn own_repr_floats_equal_repr() {
        let mut texts: Vec<String> = [
            "0.5",
            "-0.5",
            "1.0",
            "-0.0",
            "0.0",
            "0.1",
            "0.001",
            "0.0001",
            "0.00001",
            "0.00012",
            "123.456",
            "100.0",
            "10.50",
            "1.00",
            "123456789012345.0",
            "1234567890123456.0",
            "0.123456789012345",
            "0.1234567890123456",
            "99999999999999.9",
            "999999999999999.9",
            "5e-324",
            "1e5",
            "1.5e3",
            "0.30000000000000004",
            "2.675",
            "9007199254740993.0",
            "0.000123456789012345",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        for _ in 0..20_000 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let int = ["0".to_string(), (seed % 1_000_000_000).to_string(), (seed >> 40).to_string()];
            let digits = (seed >> 20) % 19;
            let frac: String = (0..=digits).map(|k| char::from(b'0' + ((seed >> (k * 3)) % 10) as u8)).collect();
            texts.push(format!("{}{}.{}", if seed & 1 == 1 { "-" } else { "" }, int[(seed >> 8) as usize % 3], frac));
        }
        let mut taken = 0;
        for raw in &texts {
            if is_own_repr(raw) {
                taken += 1;
                let mut expected = String::new();
                write_py_float(raw.parse().unwrap(), &mut expected);
                assert_eq!(raw, &expected);
            }
        }
        assert!(taken > 1000, "the fast path is exercised ({taken})");
        for raw in ["1e5", "10.50", "0.00001", "1234567890123456.0", "0.1234567890123456", "1.00"] {
            assert!(!is_own_repr(raw), "{raw}");
        }
    }

    #[test]
    fn text_key_prefix_is_key_prefix() {
        let text = r#"{"": 1, "a": 2, "abcdefg": 3, "abcdefgh": 4, "abcdefghij": 5, "é": 6, "x"}"#;
        let mut at = 0;
        while let Some(p) = text[at..].find('"') {
            let start = at + p + 1;
            let end = start + text[start..].find('"').unwrap();
            let key = &text[start..end];
            assert_eq!(text_key_prefix(text.as_bytes(), start, key.len()), key_prefix(key), "{key:?}");
            at = end + 1;
        }
    }

    #[test]
    fn off_the_path_is_refused() {
        for text in [
            r#"{"a": 1, "a": 2}"#,
            r#"{"\u0061": 1}"#,
            r#"{"a": 1e400}"#,
            r#"{"a": "\ud800"}"#,
            r#"{"a": "\x"}"#,
            "{\"a\": \"\u{1}\"}",
            r#"{"a": NaN}"#,
            r#"{"a": 01}"#,
            r#"{"a": 1.}"#,
            r#"{"a": [1,]}"#,
            r#"{"a": 1} x"#,
            r#"{"a" 1}"#,
            "",
        ] {
            assert_eq!(sorted(text), None, "{text}");
        }
        let deep = format!("{}{}", "[".repeat(MAX_DEPTH + 1), "]".repeat(MAX_DEPTH + 1));
        assert_eq!(sorted(&deep), None);
        let mut t = Tape::default();
        assert!(t.parse(r##"{"a": [{"b": {"$ref": "#/x"}}]}"##) && t.has_ref && !t.escaped_key);
        assert!(t.parse(r#"{"\u0024ref": 1}"#) && t.escaped_key);
        assert!(t.parse(r#"{"a": "$ref"}"#) && !t.has_ref);
    }
}
