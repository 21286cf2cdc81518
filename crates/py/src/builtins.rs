//! Python's builtins where DeerFlow's output depends on them, for values that arrive as JSON
//! (config values, provider responses): `bool()` (truthiness), `int()`, `float()`, `str()`,
//! `repr()` and slicing by code point. Numbers follow the `serde_json::Number` they come in:
//! an integer beyond 64 bits is exact only with serde_json's `arbitrary_precision` (the guest
//! components enable it; without it serde_json has already made the number a float).

use serde_json::{Number, Value};

/// Python's `bool(x)`.
pub fn truthy(v: &Value) -> bool {
    match v {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => !is_zero(n),
        Value::String(s) => !s.is_empty(),
        Value::Array(a) => !a.is_empty(),
        Value::Object(o) => !o.is_empty(),
    }
}

/// `x or y` on optional values: the first truthy one, else the last.
pub fn or<'a>(a: Option<&'a Value>, b: Option<&'a Value>) -> Option<&'a Value> {
    match a {
        Some(v) if truthy(v) => Some(v),
        _ => b,
    }
}

fn is_zero(n: &Number) -> bool {
    n.as_f64() == Some(0.0) || n.as_i64() == Some(0)
}

/// Whether a JSON number is a Python `float` (its literal has a fraction or an exponent).
pub fn is_float(n: &Number) -> bool {
    let s = n.to_string();
    s.contains(['.', 'e', 'E'])
}

/// Python's `int(x)`: `None` where Python raises (TypeError / ValueError). Floats truncate,
/// booleans are 0/1, strings may carry surrounding whitespace, a sign and `_` between digits.
pub fn int(v: &Value) -> Option<i64> {
    match v {
        Value::Bool(b) => Some(i64::from(*b)),
        Value::Number(n) if is_float(n) => {
            let f = n.as_f64()?;
            (f.is_finite() && f.abs() < 9.2e18).then(|| f.trunc() as i64)
        }
        Value::Number(n) => n.as_i64().or_else(|| n.as_u64().map(|u| u.min(i64::MAX as u64) as i64)),
        Value::String(s) => int_str(s),
        _ => None,
    }
}

/// Python's `int(str)`.
pub fn int_str(s: &str) -> Option<i64> {
    let t = s.trim();
    let (neg, digits) = match t.strip_prefix('-') {
        Some(d) => (true, d),
        None => (false, t.strip_prefix('+').unwrap_or(t)),
    };
    if digits.is_empty() || digits.starts_with('_') || digits.ends_with('_') || digits.contains("__") {
        return None;
    }
    let clean: String = digits.chars().filter(|c| *c != '_').collect();
    if !clean.chars().all(|c| c.is_ascii_digit()) {
        return None;
    }
    // Python's ints are unbounded; one past i64 is as good as infinite for a count.
    let n: i64 = clean.parse().unwrap_or(i64::MAX);
    Some(if neg { -n } else { n })
}

/// Python's `float(x)` for the types a config value can have.
pub fn float(v: &Value) -> Option<f64> {
    match v {
        Value::Bool(b) => Some(if *b { 1.0 } else { 0.0 }),
        Value::Number(n) => n.as_f64(),
        Value::String(s) => {
            let t = s.trim().to_ascii_lowercase();
            match t.as_str() {
                "inf" | "+inf" | "infinity" | "+infinity" => Some(f64::INFINITY),
                "-inf" | "-infinity" => Some(f64::NEG_INFINITY),
                "nan" | "+nan" | "-nan" => Some(f64::NAN),
                _ => t.replace('_', "").parse::<f64>().ok().filter(|_| !t.contains("__")),
            }
        }
        _ => None,
    }
}

/// Python's `str(x)` of a value from JSON.
pub fn str_of(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => repr(other),
    }
}

/// Python's `repr(x)` of a value from JSON.
pub fn repr(v: &Value) -> String {
    match v {
        Value::Null => "None".into(),
        Value::Bool(true) => "True".into(),
        Value::Bool(false) => "False".into(),
        Value::Number(n) => number_repr(n),
        Value::String(s) => str_repr(s),
        Value::Array(a) => format!("[{}]", a.iter().map(repr).collect::<Vec<_>>().join(", ")),
        Value::Object(o) => format!(
            "{{{}}}",
            o.iter().map(|(k, v)| format!("{}: {}", str_repr(k), repr(v))).collect::<Vec<_>>().join(", ")
        ),
    }
}

/// Python's `repr(str)`: single quotes unless the text has one and no double quote.
pub fn str_repr(s: &str) -> String {
    let quote = if s.contains('\'') && !s.contains('"') { '"' } else { '\'' };
    let mut out = String::with_capacity(s.len() + 2);
    out.push(quote);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c if (c as u32) < 0x20 || c as u32 == 0x7f => out.push_str(&format!("\\x{:02x}", c as u32)),
            c if is_unprintable(c) => {
                let n = c as u32;
                if n <= 0xff {
                    out.push_str(&format!("\\x{n:02x}"));
                } else if n <= 0xffff {
                    out.push_str(&format!("\\u{n:04x}"));
                } else {
                    out.push_str(&format!("\\U{n:08x}"));
                }
            }
            c => out.push(c),
        }
    }
    out.push(quote);
    out
}

/// The characters Python's `str.isprintable()` rejects that `repr` escapes besides the C0
/// controls and DEL: C1 controls, separators other than the space (Zs, Zl, Zp), format
/// characters (Cf), private use (Co) and the unassigned code points among them.
fn is_unprintable(c: char) -> bool {
    let n = c as u32;
    (0x80..=0xa0).contains(&n)
        || n == 0xad
        || n == 0x1680
        || n == 0x180e
        || (0x2000..=0x200f).contains(&n)
        || (0x2028..=0x202f).contains(&n)
        || (0x205f..=0x206f).contains(&n)
        || n == 0x3000
        || (0xe000..=0xf8ff).contains(&n)
        || n == 0xfeff
        || (0xfff9..=0xfffb).contains(&n)
        || (0xe0000..=0xe007f).contains(&n)
        || (0xf0000..).contains(&n)
}

/// A JSON number as Python prints it: ints exactly, floats by `float.__repr__`.
pub fn number_repr(n: &Number) -> String {
    if is_float(n) {
        return float_repr(n.as_f64().unwrap_or(f64::NAN));
    }
    let s = n.to_string();
    // `-0` is the int 0 in Python.
    match s.trim_start_matches('-').trim_start_matches('0') {
        "" => "0".into(),
        _ => s,
    }
}

/// Python's `float.__repr__`: the shortest round-tripping digits, scientific notation when the
/// exponent is below -4 or at least 16 ([`crate::json::write_py_float`], which spells the
/// non-finite values as JSON does instead of `nan` / `inf`).
pub fn float_repr(f: f64) -> String {
    if f.is_nan() {
        return "nan".into();
    }
    if f.is_infinite() {
        return if f > 0.0 { "inf".into() } else { "-inf".into() };
    }
    let mut out = String::new();
    crate::json::write_py_float(f, &mut out);
    out
}

/// The first `n` code points of `s` (Python's `s[:n]`).
pub fn take_chars(s: &str, n: usize) -> &str {
    match s.char_indices().nth(n) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn str_repr_escapes_what_python_does_not_print() {
        // CPython 3.11: repr('\x07\xa0\u1680\u2065\ue000\U000e0001\U000f0000é日🚀')
        assert_eq!(
            str_repr("\u{7}\u{a0}\u{1680}\u{2065}\u{e000}\u{e0001}\u{f0000}é日🚀"),
            "'\\x07\\xa0\\u1680\\u2065\\ue000\\U000e0001\\U000f0000é日🚀'"
        );
        assert_eq!(str_repr("it's"), "\"it's\"");
    }

    #[test]
    fn ints_follow_python() {
        for (v, want) in [
            (json!(3), Some(3)),
            (json!(3.9), Some(3)),
            (json!(-3.9), Some(-3)),
            (json!(true), Some(1)),
            (json!(" 7 "), Some(7)),
            (json!("1_000"), Some(1000)),
            (json!("3.0"), None),
            (json!("x"), None),
            (json!(null), None),
            (json!([]), None),
        ] {
            assert_eq!(int(&v), want, "{v}");
        }
    }

    #[test]
    fn floats_print_like_python() {
        for (f, want) in [
            (1.0, "1.0"),
            (0.1, "0.1"),
            (1e16, "1e+16"),
            (1.5e16, "1.5e+16"),
            (123456789012345.0, "123456789012345.0"),
            (1e-5, "1e-05"),
            (0.0001, "0.0001"),
            (-0.0, "-0.0"),
            (2.5e-300, "2.5e-300"),
        ] {
            assert_eq!(float_repr(f), want, "{f}");
        }
    }

    #[test]
    fn reprs_follow_python() {
        assert_eq!(repr(&json!({"a": [1, "x'y", null, true]})), "{'a': [1, \"x'y\", None, True]}");
        assert_eq!(str_repr("a\nb"), "'a\\nb'");
        assert_eq!(take_chars("héllo", 2), "hé");
    }
}
