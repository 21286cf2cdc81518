//! Python's `json` module: a JSON value as `json.loads` holds it ([`PyValue`]) and the text
//! `json.dumps` writes for it, in the three layouts DeerFlow's outputs use — `sort_keys=True`
//! (catalog_hash), `indent=2` (tool_search's content) and the default separators ([`dumps`],
//! for values that are already `serde_json` values: `list_uploaded_files`, clarification forms).
//! Owns number fidelity (integers of any size kept as their digits, floats printed as Python's
//! `repr`) so that those texts match DeerFlow byte for byte.

mod decode;
mod serde_text;
pub mod text;

use std::collections::HashMap;

use serde_json::Value;

pub use decode::loads;
pub use serde_text::{write_json_compact, write_json_number, write_json_sorted, write_json_sorted_rm_titles};

/// JSON text that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid JSON at byte {offset}: {message}")]
pub struct JsonError {
    pub offset: usize,
    pub message: String,
}

/// A decoded JSON value. Objects keep insertion order (Python dicts do); a repeated key keeps its
/// first position and its last value, as `json.loads` into a dict does.
#[derive(Debug, Clone, PartialEq)]
pub enum PyValue {
    Null,
    Bool(bool),
    /// A JSON integer, as the decimal digits of Python's `int` (no size limit, `-0` is `0`).
    Int(String),
    Float(f64),
    Str(String),
    List(Vec<PyValue>),
    Dict(PyDict),
}

/// A Python dict of a JSON object: insertion-ordered `(key, value)` pairs with unique keys.
/// Schemas have few keys per object, so a vector beats a hash map here.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PyDict(Vec<(String, PyValue)>);

impl PyDict {
    pub fn new() -> Self {
        Self(Vec::new())
    }

    pub fn with_capacity(n: usize) -> Self {
        Self(Vec::with_capacity(n))
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn get(&self, key: &str) -> Option<&PyValue> {
        self.0.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    pub fn contains_key(&self, key: &str) -> bool {
        self.0.iter().any(|(k, _)| k == key)
    }

    /// `d[key] = value`: an existing key keeps its position.
    pub fn insert(&mut self, key: String, value: PyValue) {
        match self.0.iter_mut().find(|(k, _)| *k == key) {
            Some(slot) => slot.1 = value,
            None => self.0.push((key, value)),
        }
    }

    /// Append a key known not to be present (copying from another dict).
    fn push_new(&mut self, key: String, value: PyValue) {
        self.0.push((key, value));
    }

    /// `d.pop(key)`, keeping the order of the rest.
    pub fn remove(&mut self, key: &str) -> Option<PyValue> {
        let i = self.0.iter().position(|(k, _)| k == key)?;
        Some(self.0.remove(i).1)
    }

    pub fn iter(&self) -> impl Iterator<Item = (&String, &PyValue)> {
        self.0.iter().map(|(k, v)| (k, v))
    }
}

impl IntoIterator for PyDict {
    type Item = (String, PyValue);
    type IntoIter = std::vec::IntoIter<(String, PyValue)>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.into_iter()
    }
}

impl FromIterator<(String, PyValue)> for PyDict {
    /// Collect pairs; a repeated key keeps its first position and its last value.
    fn from_iter<I: IntoIterator<Item = (String, PyValue)>>(iter: I) -> Self {
        let mut d = PyDict::new();
        for (k, v) in iter {
            d.insert(k, v);
        }
        d
    }
}

impl PyDict {
    /// Copy pairs whose keys are already unique (from another dict), without the key check.
    pub fn from_unique(pairs: impl Iterator<Item = (String, PyValue)>) -> Self {
        let mut d = PyDict::new();
        for (k, v) in pairs {
            d.push_new(k, v);
        }
        d
    }

    /// Append a key the caller knows is not present yet, without the key check.
    pub fn push_unique(&mut self, key: String, value: PyValue) {
        self.push_new(key, value);
    }
}

/// Nesting deeper than this is rejected; Python's own recursion limit is 1 000 frames.
const MAX_DEPTH: usize = 512;

impl PyValue {
    /// Parse JSON text, keeping every number exactly as Python would decode it.
    pub fn parse(text: &str) -> Result<PyValue, JsonError> {
        let mut p = Parser { s: text.as_bytes(), text, pos: 0 };
        p.ws();
        let v = p.value(0)?;
        p.ws();
        if p.pos != p.s.len() {
            return Err(p.err("trailing characters after the JSON value"));
        }
        Ok(v)
    }

    /// Convert from a `serde_json::Value`. Integers that fit i64/u64 stay integers. Without
    /// serde_json's `arbitrary_precision` (the host workspace) any other number was already
    /// decoded to f64, so an integer beyond u64 arrives here as a float: callers that need exact
    /// big integers hand the JSON text to [`PyValue::parse`] instead. With it (the guest
    /// components) the number's text is at hand and an integer of any size keeps its digits.
    pub fn from_json(v: &Value) -> PyValue {
        match v {
            Value::Null => PyValue::Null,
            Value::Bool(b) => PyValue::Bool(*b),
            Value::Number(n) => {
                if let Some(i) = n.as_i64() {
                    PyValue::Int(i.to_string())
                } else if let Some(u) = n.as_u64() {
                    PyValue::Int(u.to_string())
                } else if let Some(digits) = integer_text(n) {
                    PyValue::Int(digits)
                } else {
                    PyValue::Float(n.as_f64().unwrap_or(f64::NAN))
                }
            }
            Value::String(s) => PyValue::Str(s.clone()),
            Value::Array(a) => PyValue::List(a.iter().map(PyValue::from_json).collect()),
            Value::Object(m) => {
                PyValue::Dict(PyDict::from_unique(m.iter().map(|(k, v)| (k.clone(), PyValue::from_json(v)))))
            }
        }
    }

    /// Convert to a `serde_json::Value` (lossy for integers beyond u64 and non-finite floats,
    /// which become a float and `null`).
    pub fn to_json(&self) -> Value {
        match self {
            PyValue::Null => Value::Null,
            PyValue::Bool(b) => Value::Bool(*b),
            PyValue::Int(digits) => {
                if let Ok(i) = digits.parse::<i64>() {
                    Value::from(i)
                } else if let Ok(u) = digits.parse::<u64>() {
                    Value::from(u)
                } else {
                    digits.parse::<f64>().ok().and_then(serde_json::Number::from_f64).map_or(Value::Null, Value::Number)
                }
            }
            PyValue::Float(f) => serde_json::Number::from_f64(*f).map_or(Value::Null, Value::Number),
            PyValue::Str(s) => Value::String(s.clone()),
            PyValue::List(l) => Value::Array(l.iter().map(PyValue::to_json).collect()),
            PyValue::Dict(d) => Value::Object(d.iter().map(|(k, v)| (k.clone(), v.to_json())).collect()),
        }
    }

    pub fn as_dict(&self) -> Option<&PyDict> {
        match self {
            PyValue::Dict(d) => Some(d),
            _ => None,
        }
    }

    /// Python truthiness.
    pub fn is_truthy(&self) -> bool {
        match self {
            PyValue::Null => false,
            PyValue::Bool(b) => *b,
            PyValue::Int(d) => d != "0",
            PyValue::Float(f) => *f != 0.0,
            PyValue::Str(s) => !s.is_empty(),
            PyValue::List(l) => !l.is_empty(),
            PyValue::Dict(d) => !d.is_empty(),
        }
    }

    /// `json.dumps(v, sort_keys=True, ensure_ascii=False)` appended to `out`.
    pub fn write_sorted(&self, out: &mut String) {
        self.write_one_line(out, true);
    }

    /// `json.dumps(v, ensure_ascii=False)` appended to `out`: insertion order, separators
    /// `", "` and `": "`.
    pub fn write_compact(&self, out: &mut String) {
        self.write_one_line(out, false);
    }

    /// `json.dumps` on one line (separators `", "` and `": "`), keys sorted or in insertion order.
    fn write_one_line(&self, out: &mut String, sort_keys: bool) {
        match self {
            PyValue::List(l) => {
                out.push('[');
                for (i, v) in l.iter().enumerate() {
                    write_separator(i, out);
                    v.write_one_line(out, sort_keys);
                }
                out.push(']');
            }
            PyValue::Dict(d) => {
                out.push('{');
                let mut entry = |i: usize, k: &str, v: &PyValue| {
                    write_key(i, k, out);
                    v.write_one_line(out, sort_keys);
                };
                if sort_keys {
                    for_sorted_entries(d, |_, _| true, entry);
                } else {
                    d.iter().enumerate().for_each(|(i, (k, v))| entry(i, k, v));
                }
                out.push('}');
            }
            scalar => scalar.write_scalar(out),
        }
    }

    /// `json.dumps(v, indent=2, ensure_ascii=False)` appended to `out`, at nesting `level`.
    pub fn write_indented(&self, out: &mut String, level: usize) {
        match self {
            PyValue::List(l) if !l.is_empty() => {
                out.push('[');
                for (i, v) in l.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    newline_indent(out, level + 1);
                    v.write_indented(out, level + 1);
                }
                newline_indent(out, level);
                out.push(']');
            }
            PyValue::Dict(d) if !d.is_empty() => {
                out.push('{');
                for (i, (k, v)) in d.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    newline_indent(out, level + 1);
                    write_py_str(k, out);
                    out.push_str(": ");
                    v.write_indented(out, level + 1);
                }
                newline_indent(out, level);
                out.push('}');
            }
            PyValue::List(_) => out.push_str("[]"),
            PyValue::Dict(_) => out.push_str("{}"),
            scalar => scalar.write_scalar(out),
        }
    }

    fn write_scalar(&self, out: &mut String) {
        match self {
            PyValue::Null => out.push_str("null"),
            PyValue::Bool(true) => out.push_str("true"),
            PyValue::Bool(false) => out.push_str("false"),
            PyValue::Int(d) => push_text(out, d),
            PyValue::Float(f) => write_py_float(*f, out),
            PyValue::Str(s) => write_py_str(s, out),
            PyValue::List(_) | PyValue::Dict(_) => {}
        }
    }
}

/// `json.dumps(value, ensure_ascii=False)` of a `serde_json` value: separators `", "` and
/// `": "`, non-ASCII kept, control characters escaped as `\n`, `\u001f`, …, floats as Python's
/// `repr`. What LangChain makes of a tool that returns a dict (`list_uploaded_files`), and the
/// size DeerFlow measures a clarification form by.
pub fn dumps(value: &Value) -> String {
    let mut out = String::new();
    PyValue::from_json(value).write_compact(&mut out);
    out
}

/// `json.dumps(value, indent=2, ensure_ascii=False)` of a `serde_json` value: what DeerFlow's
/// search tools print.
pub fn dumps_indented(value: &Value) -> String {
    let mut out = String::new();
    PyValue::from_json(value).write_indented(&mut out, 0);
    out
}

/// The digits of a number whose text is an integer literal: only with `arbitrary_precision`
/// does a `serde_json::Number` beyond 64 bits print as one (otherwise it is an f64 and prints
/// with a `.` or an exponent).
fn integer_text(n: &serde_json::Number) -> Option<String> {
    let text = n.to_string();
    let digits = text.strip_prefix('-').unwrap_or(&text);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some(if digits.bytes().all(|b| b == b'0') { "0".to_string() } else { text })
}

/// `_rm_titles`' rule for one dict entry: a `title` key is dropped unless its value is a dict
/// directly under `properties` (a property named "title").
fn keeps_title_rule(k: &str, v: &PyValue, prev_key: &str) -> bool {
    k != "title" || (matches!(v, PyValue::Dict(_)) && prev_key == "properties")
}

/// `json.dumps(_rm_titles(d), sort_keys=True, …)` without building the stripped copy; `skip`
/// drops further keys of this dict only. (`_rm_titles` is langchain's, in
/// `convert_to_openai_function`; it lives here because it renders while it strips.)
pub fn write_sorted_rm_titles(d: &PyDict, prev_key: &str, skip: &[&str], out: &mut String) {
    out.push('{');
    for_sorted_entries(
        d,
        |k, v| keeps_title_rule(k, v, prev_key) && !skip.contains(&k),
        |i, k, v| {
            write_key(i, k, out);
            match v {
                PyValue::Dict(inner) => write_sorted_rm_titles(inner, k, &[], out),
                other => other.write_sorted(out),
            }
        },
    );
    out.push('}');
}

/// Call `f(i, key, value)` for the entries `keep` accepts, in key (code point) order.
fn for_sorted_entries(d: &PyDict, keep: impl Fn(&str, &PyValue) -> bool, mut f: impl FnMut(usize, &str, &PyValue)) {
    // Schemas' objects are small: sort positions on the stack, not in a heap vector, by the
    // keys' first eight bytes (most keys differ there), then by the whole key.
    if d.0.len() <= 32 {
        let mut order = [(0u64, 0u8); 32];
        let mut n = 0;
        for (i, (k, v)) in d.0.iter().enumerate() {
            if keep(k, v) {
                order[n] = (key_prefix(k), i as u8);
                n += 1;
            }
        }
        // Rust orders strings by UTF-8 bytes, which is Python's code-point order.
        order[..n].sort_unstable_by(|a, b| a.0.cmp(&b.0).then_with(|| d.0[a.1 as usize].0.cmp(&d.0[b.1 as usize].0)));
        for (i, &(_, ix)) in order[..n].iter().enumerate() {
            let (k, v) = &d.0[ix as usize];
            f(i, k, v);
        }
    } else {
        let mut entries: Vec<&(String, PyValue)> = d.0.iter().filter(|(k, v)| keep(k, v)).collect();
        entries.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        for (i, (k, v)) in entries.into_iter().enumerate() {
            f(i, k, v);
        }
    }
}

/// The first eight bytes of `k`, zero-padded, as a number that orders like the bytes: two keys
/// whose prefixes differ compare as their prefixes do (a shorter key is padded with zeros, below
/// any byte it could be compared with, except a NUL, which the full comparison then decides).
fn key_prefix(k: &str) -> u64 {
    let mut b = [0u8; 8];
    let n = k.len().min(8);
    b[..n].copy_from_slice(&k.as_bytes()[..n]);
    u64::from_be_bytes(b)
}

/// `json.dumps(_rm_titles(d), indent=2, …)` at nesting `level`, without the stripped copy.
pub fn write_indented_rm_titles(d: &PyDict, prev_key: &str, skip: &[&str], out: &mut String, level: usize) {
    let mut first = true;
    for (k, v) in d.0.iter().filter(|(k, v)| keeps_title_rule(k, v, prev_key) && !skip.contains(&k.as_str())) {
        out.push_str(if first { "{" } else { "," });
        first = false;
        newline_indent(out, level + 1);
        write_py_str(k, out);
        out.push_str(": ");
        match v {
            PyValue::Dict(inner) => write_indented_rm_titles(inner, k, &[], out, level + 1),
            other => other.write_indented(out, level + 1),
        }
    }
    if first {
        out.push_str("{}");
    } else {
        newline_indent(out, level);
        out.push('}');
    }
}

/// `", "` before every item but the first, as `json.dumps` separates them on one line.
fn write_separator(i: usize, out: &mut String) {
    if i > 0 {
        out.push_str(", ");
    }
}

/// An entry's separator, key and `": "`, on one line.
fn write_key(i: usize, k: &str, out: &mut String) {
    write_separator(i, out);
    write_py_str(k, out);
    out.push_str(": ");
}

fn newline_indent(out: &mut String, level: usize) {
    out.push('\n');
    for _ in 0..level {
        out.push_str("  ");
    }
}

/// A string as `json.dumps(..., ensure_ascii=False)` writes it: only `"`, `\` and the C0
/// controls are escaped; everything else, DEL and U+2028 included, is written as is.
pub fn write_py_str(s: &str, out: &mut String) {
    if !needs_escape(s.as_bytes()) {
        push_quoted(out, s);
        return;
    }
    out.push('"');
    let mut start = 0;
    for (i, b) in s.bytes().enumerate() {
        let esc: Option<&str> = match b {
            b'"' => Some("\\\""),
            b'\\' => Some("\\\\"),
            b'\n' => Some("\\n"),
            b'\r' => Some("\\r"),
            b'\t' => Some("\\t"),
            0x08 => Some("\\b"),
            0x0c => Some("\\f"),
            0..=0x1f => None,
            _ => continue,
        };
        out.push_str(&s[start..i]);
        match esc {
            Some(e) => out.push_str(e),
            None => out.push_str(&format!("\\u{b:04x}")),
        }
        start = i + 1;
    }
    out.push_str(&s[start..]);
    out.push('"');
}

/// Whether a string needs any escape in JSON (`"`, `\\` or a C0 control): eight bytes at a time.
fn needs_escape(b: &[u8]) -> bool {
    const LO: u64 = 0x0101_0101_0101_0101;
    const HI: u64 = 0x8080_8080_8080_8080;
    // High bit of each byte set where that byte of `x` is below `n` (bytes of `x` below 0x80).
    let below = |x: u64, n: u8| x.wrapping_sub(LO * u64::from(n)) & !x & HI;
    let equal = |x: u64, c: u8| below(x ^ (LO * u64::from(c)), 1);
    let mut chunks = b.chunks_exact(8);
    for c in &mut chunks {
        let x = u64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]);
        // Bytes >= 0x80 (UTF-8 beyond ASCII) never need escaping; mask them out of the tests.
        let ascii = !x & HI;
        if (below(x, 0x20) | equal(x, b'"') | equal(x, b'\\')) & ascii != 0 {
            return true;
        }
    }
    chunks.remainder().iter().any(|&b| b < 0x20 || b == b'"' || b == b'\\')
}

/// `out.push_str(s)` for the short texts JSON rendering writes (keys, punctuation, small
/// values): up to 32 bytes are copied as two overlapping loads and stores of the widest size
/// that fits, where `push_str`'s copy is a call into the C library's `memcpy` (and a byte loop
/// costs an instruction or more per byte).
#[inline(always)]
fn push_text(out: &mut String, s: &str) {
    if s.len() > 32 {
        out.push_str(s);
        return;
    }
    // SAFETY: the bytes of a `str` appended to a `String` keep it valid UTF-8.
    let v = unsafe { out.as_mut_vec() };
    v.reserve(s.len());
    // SAFETY: `reserve` made room for `s.len()` more bytes after `len`.
    unsafe {
        copy_small(s.as_ptr(), v.as_mut_ptr().add(v.len()), s.len());
        v.set_len(v.len() + s.len());
    }
}

/// `"s"`: a string needing no escape, quoted, with one capacity check.
#[inline(always)]
fn push_quoted(out: &mut String, s: &str) {
    let n = s.len();
    // SAFETY: ASCII quotes around a `str` keep the `String` valid UTF-8.
    let v = unsafe { out.as_mut_vec() };
    v.reserve(n + 2);
    // SAFETY: `reserve` made room for `n + 2` more bytes after `len`; `s` is borrowed apart
    // from `out`, so the copy's regions do not overlap.
    unsafe {
        let dst = v.as_mut_ptr().add(v.len());
        *dst = b'"';
        if n > 32 {
            std::ptr::copy_nonoverlapping(s.as_ptr(), dst.add(1), n);
        } else {
            copy_small(s.as_ptr(), dst.add(1), n);
        }
        *dst.add(n + 1) = b'"';
        v.set_len(v.len() + n + 2);
    }
}

/// `, "key": ` (without the `, ` for an object's first entry): a key needing no escape, with one
/// capacity check.
#[inline(always)]
fn push_key(out: &mut String, first: bool, key: &str) {
    let n = key.len();
    // SAFETY: ASCII punctuation around a `str` keeps the `String` valid UTF-8.
    let v = unsafe { out.as_mut_vec() };
    v.reserve(n + 6);
    // SAFETY: `reserve` made room for the `n + 6` bytes at most written after `len`; `key` is
    // borrowed apart from `out`, so the copy's regions do not overlap.
    unsafe {
        let mut dst = v.as_mut_ptr().add(v.len());
        let written = if first { n + 4 } else { n + 6 };
        if !first {
            std::ptr::copy_nonoverlapping(b", ".as_ptr(), dst, 2);
            dst = dst.add(2);
        }
        *dst = b'"';
        if n > 32 {
            std::ptr::copy_nonoverlapping(key.as_ptr(), dst.add(1), n);
        } else {
            copy_small(key.as_ptr(), dst.add(1), n);
        }
        std::ptr::copy_nonoverlapping(b"\": ".as_ptr(), dst.add(n + 1), 3);
        v.set_len(v.len() + written);
    }
}

/// Copy `n` bytes, at most 32, from `src` to `dst` as two overlapping loads and stores of the
/// widest size that fits in `n` (one from each end).
///
/// # Safety
/// `src..src + n` must be readable, `dst..dst + n` writable, the two apart, and `n <= 32`.
#[inline(always)]
unsafe fn copy_small(src: *const u8, dst: *mut u8, n: usize) {
    #[inline(always)]
    unsafe fn two<T: Copy>(src: *const u8, dst: *mut u8, n: usize) {
        // `n >= size_of::<T>()`: both copies lie inside the `n` bytes.
        let size = std::mem::size_of::<T>();
        let head = std::ptr::read_unaligned(src as *const T);
        let tail = std::ptr::read_unaligned(src.add(n - size) as *const T);
        std::ptr::write_unaligned(dst as *mut T, head);
        std::ptr::write_unaligned(dst.add(n - size) as *mut T, tail);
    }
    debug_assert!(n <= 32);
    if n >= 16 {
        two::<u128>(src, dst, n);
    } else if n >= 8 {
        two::<u64>(src, dst, n);
    } else if n >= 4 {
        two::<u32>(src, dst, n);
    } else if n > 0 {
        *dst = *src;
        *dst.add(n / 2) = *src.add(n / 2);
        *dst.add(n - 1) = *src.add(n - 1);
    }
}

/// A float as Python's `float.__repr__` (what `json.dumps` uses): the shortest round-trip
/// digits, positional when the decimal exponent is in -4..16, else `d.ddde±XX`.
pub fn write_py_float(f: f64, out: &mut String) {
    if f.is_nan() {
        out.push_str("NaN");
        return;
    }
    if f.is_infinite() {
        out.push_str(if f > 0.0 { "Infinity" } else { "-Infinity" });
        return;
    }
    if f.is_sign_negative() {
        out.push('-');
    }
    // `{:e}` prints the shortest round-trip digits, e.g. "1.5e-7", "1e16", "0e0" (at most 17
    // digits, a point and a three-digit exponent: a small stack buffer holds it).
    let mut sci = StackText::default();
    let _ = std::fmt::Write::write_fmt(&mut sci, format_args!("{:e}", f.abs()));
    let sci = sci.as_str();
    let (mantissa, exp) = sci.split_once('e').unwrap_or((sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let mut digit_buf = [0u8; 32];
    let mut n = 0;
    for b in mantissa.bytes().filter(|b| *b != b'.') {
        digit_buf[n] = b;
        n += 1;
    }
    let digits = std::str::from_utf8(&digit_buf[..n]).unwrap_or("0");
    let n = n as i32;
    // Value = 0.DIGITS × 10^decpt.
    let decpt = exp + 1;
    if !(-4 < decpt && decpt <= 16) {
        out.push_str(&digits[..1]);
        if n > 1 {
            out.push('.');
            out.push_str(&digits[1..]);
        }
        let e = decpt - 1;
        out.push('e');
        out.push(if e < 0 { '-' } else { '+' });
        out.push_str(&format!("{:02}", e.abs()));
    } else if decpt <= 0 {
        out.push_str("0.");
        for _ in 0..(-decpt) {
            out.push('0');
        }
        out.push_str(digits);
    } else if decpt >= n {
        out.push_str(digits);
        for _ in 0..(decpt - n) {
            out.push('0');
        }
        out.push_str(".0");
    } else {
        out.push_str(&digits[..decpt as usize]);
        out.push('.');
        out.push_str(&digits[decpt as usize..]);
    }
}

/// A short text formatted on the stack (a float's digits), without a heap allocation.
#[derive(Default)]
struct StackText {
    buf: [u8; 32],
    len: usize,
}

impl StackText {
    fn as_str(&self) -> &str {
        std::str::from_utf8(&self.buf[..self.len]).unwrap_or("")
    }
}

impl std::fmt::Write for StackText {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        let end = self.len + s.len();
        if end > self.buf.len() {
            return Err(std::fmt::Error);
        }
        self.buf[self.len..end].copy_from_slice(s.as_bytes());
        self.len = end;
        Ok(())
    }
}

struct Parser<'a> {
    s: &'a [u8],
    text: &'a str,
    pos: usize,
}

impl Parser<'_> {
    fn err(&self, what: &str) -> JsonError {
        JsonError { offset: self.pos, message: what.to_string() }
    }

    fn ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.s.get(self.pos) {
            self.pos += 1;
        }
    }

    fn value(&mut self, depth: usize) -> Result<PyValue, JsonError> {
        if depth > MAX_DEPTH {
            return Err(self.err("JSON nested too deeply"));
        }
        match self.s.get(self.pos) {
            None => Err(self.err("unexpected end of JSON")),
            Some(b'{') => self.object(depth),
            Some(b'[') => self.array(depth),
            Some(b'"') => Ok(PyValue::Str(self.string()?)),
            Some(b't') => self.keyword("true", PyValue::Bool(true)),
            Some(b'f') => self.keyword("false", PyValue::Bool(false)),
            Some(b'n') => self.keyword("null", PyValue::Null),
            Some(b'-' | b'0'..=b'9') => self.number(),
            Some(_) => Err(self.err("expected a JSON value")),
        }
    }

    fn keyword(&mut self, word: &str, v: PyValue) -> Result<PyValue, JsonError> {
        if self.s[self.pos..].starts_with(word.as_bytes()) {
            self.pos += word.len();
            Ok(v)
        } else {
            Err(self.err("invalid literal"))
        }
    }

    fn object(&mut self, depth: usize) -> Result<PyValue, JsonError> {
        self.pos += 1;
        let mut map = PyDict::new();
        // Key positions, kept only for large objects so that repeated keys stay linear.
        let mut index: Option<HashMap<String, usize>> = None;
        self.ws();
        if self.s.get(self.pos) == Some(&b'}') {
            self.pos += 1;
            return Ok(PyValue::Dict(map));
        }
        loop {
            self.ws();
            if self.s.get(self.pos) != Some(&b'"') {
                return Err(self.err("expected a string key"));
            }
            let k = self.string()?;
            self.ws();
            if self.s.get(self.pos) != Some(&b':') {
                return Err(self.err("expected ':'"));
            }
            self.pos += 1;
            self.ws();
            let v = self.value(depth + 1)?;
            if index.is_none() && map.len() >= 32 {
                index = Some(map.0.iter().enumerate().map(|(i, (k, _))| (k.clone(), i)).collect());
            }
            match &mut index {
                Some(ix) => match ix.get(&k) {
                    Some(&i) => map.0[i].1 = v,
                    None => {
                        ix.insert(k.clone(), map.len());
                        map.push_new(k, v);
                    }
                },
                None => map.insert(k, v),
            }
            self.ws();
            match self.s.get(self.pos) {
                Some(b',') => self.pos += 1,
                Some(b'}') => {
                    self.pos += 1;
                    return Ok(PyValue::Dict(map));
                }
                _ => return Err(self.err("expected ',' or '}'")),
            }
        }
    }

    fn array(&mut self, depth: usize) -> Result<PyValue, JsonError> {
        self.pos += 1;
        let mut items = Vec::new();
        self.ws();
        if self.s.get(self.pos) == Some(&b']') {
            self.pos += 1;
            return Ok(PyValue::List(items));
        }
        loop {
            self.ws();
            items.push(self.value(depth + 1)?);
            self.ws();
            match self.s.get(self.pos) {
                Some(b',') => self.pos += 1,
                Some(b']') => {
                    self.pos += 1;
                    return Ok(PyValue::List(items));
                }
                _ => return Err(self.err("expected ',' or ']'")),
            }
        }
    }

    fn hex4(&mut self) -> Result<u32, JsonError> {
        let h = self.s.get(self.pos..self.pos + 4).ok_or_else(|| self.err("truncated \\u escape"))?;
        let h = std::str::from_utf8(h).map_err(|_| self.err("invalid \\u escape"))?;
        let v = u32::from_str_radix(h, 16).map_err(|_| self.err("invalid \\u escape"))?;
        self.pos += 4;
        Ok(v)
    }

    fn string(&mut self) -> Result<String, JsonError> {
        self.pos += 1;
        let mut out = String::new();
        let mut start = self.pos;
        loop {
            match self.s.get(self.pos) {
                None => return Err(self.err("unterminated string")),
                Some(b'"') => {
                    out.push_str(&self.text[start..self.pos]);
                    self.pos += 1;
                    return Ok(out);
                }
                Some(0..=0x1f) => return Err(self.err("control character in string")),
                Some(b'\\') => {
                    out.push_str(&self.text[start..self.pos]);
                    self.pos += 1;
                    let c = *self.s.get(self.pos).ok_or_else(|| self.err("unterminated string"))?;
                    self.pos += 1;
                    match c {
                        b'"' => out.push('"'),
                        b'\\' => out.push('\\'),
                        b'/' => out.push('/'),
                        b'b' => out.push('\u{8}'),
                        b'f' => out.push('\u{c}'),
                        b'n' => out.push('\n'),
                        b'r' => out.push('\r'),
                        b't' => out.push('\t'),
                        b'u' => {
                            let hi = self.hex4()?;
                            let cp = if (0xD800..0xDC00).contains(&hi) {
                                if self.s.get(self.pos..self.pos + 2) != Some(b"\\u") {
                                    return Err(self.err("lone surrogate in \\u escape"));
                                }
                                self.pos += 2;
                                let lo = self.hex4()?;
                                if !(0xDC00..0xE000).contains(&lo) {
                                    return Err(self.err("lone surrogate in \\u escape"));
                                }
                                0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00)
                            } else {
                                hi
                            };
                            out.push(char::from_u32(cp).ok_or_else(|| self.err("lone surrogate in \\u escape"))?);
                        }
                        _ => return Err(self.err("invalid escape")),
                    }
                    start = self.pos;
                }
                Some(_) => self.pos += 1,
            }
        }
    }

    fn number(&mut self) -> Result<PyValue, JsonError> {
        let start = self.pos;
        let digits = |p: &mut Self| {
            let s = p.pos;
            while let Some(b'0'..=b'9') = p.s.get(p.pos) {
                p.pos += 1;
            }
            p.pos - s
        };
        if self.s.get(self.pos) == Some(&b'-') {
            self.pos += 1;
        }
        let int_start = self.pos;
        let n = digits(self);
        if n == 0 || (n > 1 && self.s[int_start] == b'0') {
            return Err(self.err("invalid number"));
        }
        let mut is_float = false;
        if self.s.get(self.pos) == Some(&b'.') {
            self.pos += 1;
            is_float = true;
            if digits(self) == 0 {
                return Err(self.err("invalid number"));
            }
        }
        if let Some(b'e' | b'E') = self.s.get(self.pos) {
            self.pos += 1;
            is_float = true;
            if let Some(b'+' | b'-') = self.s.get(self.pos) {
                self.pos += 1;
            }
            if digits(self) == 0 {
                return Err(self.err("invalid number"));
            }
        }
        let text = &self.text[start..self.pos];
        if is_float {
            // Rust's float parsing is correctly rounded, like Python's.
            text.parse::<f64>().map(PyValue::Float).map_err(|_| self.err("invalid number"))
        } else if text.trim_start_matches('-').bytes().all(|b| b == b'0') {
            Ok(PyValue::Int("0".to_string()))
        } else {
            Ok(PyValue::Int(text.to_string()))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The overlapping small copies append exactly the text, at every length, after any prefix.
    #[test]
    fn push_text_appends_exactly() {
        let source: String = "abcdefghijklmnopqrstuvwxyzé🚀0123456789ABCDEFGHIJ".repeat(2);
        for start in [0, 1, 3] {
            for len in 0..=70 {
                let Some(s) = source.get(start..start + len) else { continue };
                for prefix in ["", "x", "[{\"name\": "] {
                    let mut out = String::from(prefix);
                    push_text(&mut out, s);
                    assert_eq!(out, format!("{prefix}{s}"));
                    let mut quoted = String::from(prefix);
                    push_quoted(&mut quoted, s);
                    assert_eq!(quoted, format!("{prefix}\"{s}\""));
                    for first in [true, false] {
                        let mut keyed = String::from(prefix);
                        push_key(&mut keyed, first, s);
                        let sep = if first { "" } else { ", " };
                        assert_eq!(keyed, format!("{prefix}{sep}\"{s}\": "));
                    }
                }
            }
        }
        let mut tight = String::with_capacity(0);
        for piece in ["ab", "", "cdefghij", "klmnopqrstuvwxyz0123456789"] {
            push_text(&mut tight, piece);
        }
        assert_eq!(tight, "abcdefghijklmnopqrstuvwxyz0123456789");
    }

    fn repr(f: f64) -> String {
        let mut s = String::new();
        write_py_float(f, &mut s);
        s
    }

    #[test]
    fn dumps_matches_python_separators_and_escapes() {
        use serde_json::json;
        let v = json!({"a": [1, true, null], "é": "x\n\"\u{1f}日"});
        assert_eq!(dumps(&v), "{\"a\": [1, true, null], \"é\": \"x\\n\\\"\\u001f日\"}");
        assert_eq!(dumps(&json!([])), "[]");
        // Floats as `float.__repr__`, where serde_json would write `1e16`.
        assert_eq!(dumps(&json!([1e16, 0.5, -0.0])), "[1e+16, 0.5, -0.0]");
    }

    #[test]
    fn dumps_matches_python() {
        let v: Value =
            serde_json::from_str(r#"{"a": [1, 2.50, "é\n\u0001"], "b": {}, "c": [], "d": null, "e": 1e2}"#).unwrap();
        assert_eq!(dumps(&v), r#"{"a": [1, 2.5, "é\n\u0001"], "b": {}, "c": [], "d": null, "e": 100.0}"#);
        assert_eq!(
            dumps_indented(&v),
            "{\n  \"a\": [\n    1,\n    2.5,\n    \"é\\n\\u0001\"\n  ],\n  \"b\": {},\n  \"c\": [],\n  \"d\": null,\n  \"e\": 100.0\n}"
        );
    }

    #[test]
    fn float_repr_follows_python() {
        assert_eq!(repr(1e-7), "1e-07");
        assert_eq!(repr(1e16), "1e+16");
        assert_eq!(repr(1e15), "1000000000000000.0");
        assert_eq!(repr(-0.0), "-0.0");
        assert_eq!(repr(0.0), "0.0");
        assert_eq!(repr(0.0001), "0.0001");
        assert_eq!(repr(0.00001), "1e-05");
        assert_eq!(repr(1.5), "1.5");
        assert_eq!(repr(123.456), "123.456");
        assert_eq!(repr(1.5e300), "1.5e+300");
        assert_eq!(repr(2.5e-300), "2.5e-300");
        assert_eq!(repr(0.1), "0.1");
        assert_eq!(repr(1e22), "1e+22");
        assert_eq!(repr(12345678901234567.0), "1.2345678901234568e+16");
        assert_eq!(repr(f64::INFINITY), "Infinity");
    }

    #[test]
    fn numbers_keep_python_identity() {
        let v = PyValue::parse(r#"[18446744073709551616123, -0, 1.0, 1e5, -0.0, 1E-7, 3]"#).unwrap();
        let mut s = String::new();
        v.write_sorted(&mut s);
        assert_eq!(s, "[18446744073709551616123, 0, 1.0, 100000.0, -0.0, 1e-07, 3]");
    }

    /// The word-at-a-time check finds exactly the strings a byte loop finds, whatever the
    /// position of the byte to escape and the bytes around it.
    #[test]
    fn escape_check_equals_a_byte_loop() {
        let naive = |b: &[u8]| b.iter().any(|&c| c < 0x20 || c == b'"' || c == b'\\');
        let fillers: [&[u8]; 4] = [b"a", b"\xc3\xa9", b"\x7f", b"\xe2\x9c\x93"];
        for filler in fillers {
            for len in 0..24 {
                let base: Vec<u8> = filler.iter().copied().cycle().take(len).collect();
                assert_eq!(needs_escape(&base), naive(&base));
                for at in 0..len {
                    for special in [0u8, 0x1f, 0x20, b'"', b'\\', b'!', b']', 0x80, 0xa2, 0xdc] {
                        let mut b = base.clone();
                        b[at] = special;
                        assert_eq!(needs_escape(&b), naive(&b), "{b:?}");
                    }
                }
            }
        }
    }

    #[test]
    fn strings_escape_like_ensure_ascii_false() {
        let v = PyValue::parse(r#""a\"b\\c\n\u0001\u007f é 🚀 \ud83d\ude80 \/""#).unwrap();
        let mut s = String::new();
        v.write_sorted(&mut s);
        assert_eq!(s, "\"a\\\"b\\\\c\\n\\u0001\u{7f} é 🚀 🚀 /\"");
    }

    #[test]
    fn duplicate_keys_keep_first_position_last_value() {
        let v = PyValue::parse(r#"{"b": 1, "a": 2, "b": 3}"#).unwrap();
        let mut s = String::new();
        v.write_indented(&mut s, 0);
        assert_eq!(s, "{\n  \"b\": 3,\n  \"a\": 2\n}");
        // Large objects take the indexed path; same rule.
        let mut text = String::from("{");
        for i in 0..100 {
            text.push_str(&format!("\"k{}\": {i}, ", i % 50));
        }
        text.push_str("\"k0\": \"last\"}");
        let PyValue::Dict(d) = PyValue::parse(&text).unwrap() else { panic!("object") };
        assert_eq!(d.len(), 50);
        assert_eq!(d.iter().next().map(|(k, v)| (k.as_str(), v.clone())), Some(("k0", PyValue::Str("last".into()))));
        assert_eq!(d.get("k49"), Some(&PyValue::Int("99".into())));
    }

    #[test]
    fn bad_json_is_an_error_naming_the_offset() {
        for bad in ["", "{", "[1,]", "01", "\"\\ud800\"", "{\"a\" 1}", "1 2", "\"a\u{1}\""] {
            let e = PyValue::parse(bad).unwrap_err();
            assert!(!e.message.is_empty(), "{bad}");
        }
        let deep = "[".repeat(2000);
        assert!(PyValue::parse(&deep).unwrap_err().message.contains("deeply"));
    }
}
