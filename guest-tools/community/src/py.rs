//! Python's semantics where DeerFlow's output depends on them: `int()`, `float()`, `str()`,
//! `repr()`, truthiness, slicing by code point, and `json.dumps` / `json.loads` (their text and
//! their error messages). Config values and provider responses arrive as JSON; DeerFlow read them
//! as Python objects, so every coercion here is the Python one.

use serde_json::{Map, Number, Value};

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

/// DeerFlow's `_coerce_bool`: booleans as is, the usual words for strings, else `default`.
pub fn coerce_bool(v: Option<&Value>, default: bool) -> bool {
    match v {
        Some(Value::Bool(b)) => *b,
        Some(Value::String(s)) => match s.trim().to_lowercase().as_str() {
            "1" | "true" | "yes" | "on" => true,
            "0" | "false" | "no" | "off" => false,
            _ => default,
        },
        _ => default,
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

/// The characters Python's `str.isprintable()` rejects that `repr` escapes (the common ones:
/// C1 controls, separators other than the space, format characters, unassigned planes).
fn is_unprintable(c: char) -> bool {
    let n = c as u32;
    (0x80..=0xa0).contains(&n)
        || n == 0xad
        || (0x2000..=0x200f).contains(&n)
        || (0x2028..=0x202f).contains(&n)
        || (0x205f..=0x206f).contains(&n)
        || n == 0x3000
        || n == 0xfeff
        || (0xfff9..=0xfffb).contains(&n)
        || (0xe0000..=0xe007f).contains(&n)
        || (0xd800..=0xdfff).contains(&n)
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
/// exponent is below -4 or at least 16.
pub fn float_repr(f: f64) -> String {
    if f.is_nan() {
        return "nan".into();
    }
    if f.is_infinite() {
        return if f > 0.0 { "inf".into() } else { "-inf".into() };
    }
    let sci = format!("{f:e}");
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let neg = mantissa.starts_with('-');
    let digits: String = mantissa.chars().filter(|c| c.is_ascii_digit()).collect();
    let sign = if neg { "-" } else { "" };
    if (-4..16).contains(&exp) {
        let body = if exp >= 0 {
            let point = exp as usize + 1;
            if digits.len() <= point {
                format!("{}{}.0", digits, "0".repeat(point - digits.len()))
            } else {
                format!("{}.{}", &digits[..point], &digits[point..])
            }
        } else {
            format!("0.{}{}", "0".repeat((-exp - 1) as usize), digits)
        };
        format!("{sign}{body}")
    } else {
        let (first, rest) = digits.split_at(1);
        let frac = if rest.is_empty() { String::new() } else { format!(".{rest}") };
        let esign = if exp < 0 { '-' } else { '+' };
        format!("{sign}{first}{frac}e{esign}{:02}", exp.abs())
    }
}

/// The first `n` code points of `s` (Python's `s[:n]`).
pub fn take_chars(s: &str, n: usize) -> &str {
    match s.char_indices().nth(n) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}

/// `json.dumps(value, ensure_ascii=False)` (no indent: `", "` and `": "` separators) or with
/// `indent=N` (`","` at line ends).
pub fn dumps(v: &Value, indent: Option<usize>) -> String {
    let mut out = String::new();
    dump(v, indent, 0, &mut out);
    out
}

fn dump(v: &Value, indent: Option<usize>, level: usize, out: &mut String) {
    match v {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => {
            if is_float(n) {
                let f = n.as_f64().unwrap_or(f64::NAN);
                out.push_str(&match f {
                    f if f.is_nan() => "NaN".into(),
                    f if f == f64::INFINITY => "Infinity".into(),
                    f if f == f64::NEG_INFINITY => "-Infinity".into(),
                    f => float_repr(f),
                });
            } else {
                out.push_str(&number_repr(n));
            }
        }
        Value::String(s) => dump_str(s, out),
        Value::Array(a) => {
            if a.is_empty() {
                out.push_str("[]");
                return;
            }
            out.push('[');
            for (i, item) in a.iter().enumerate() {
                separate(i, indent, level + 1, out);
                dump(item, indent, level + 1, out);
            }
            close(indent, level, out);
            out.push(']');
        }
        Value::Object(o) => {
            if o.is_empty() {
                out.push_str("{}");
                return;
            }
            out.push('{');
            for (i, (k, item)) in o.iter().enumerate() {
                separate(i, indent, level + 1, out);
                dump_str(k, out);
                out.push_str(": ");
                dump(item, indent, level + 1, out);
            }
            close(indent, level, out);
            out.push('}');
        }
    }
}

fn separate(i: usize, indent: Option<usize>, level: usize, out: &mut String) {
    match indent {
        Some(n) => {
            if i > 0 {
                out.push(',');
            }
            out.push('\n');
            out.push_str(&" ".repeat(n * level));
        }
        None if i > 0 => out.push_str(", "),
        None => {}
    }
}

fn close(indent: Option<usize>, level: usize, out: &mut String) {
    if let Some(n) = indent {
        out.push('\n');
        out.push_str(&" ".repeat(n * level));
    }
}

fn dump_str(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

/// `json.loads(text)`: the value, or Python's `JSONDecodeError` message
/// (`Expecting value: line 1 column 1 (char 0)`).
pub fn loads(text: &str) -> Result<Value, String> {
    match serde_json::from_str::<Value>(text) {
        Ok(v) => Ok(v),
        Err(e) => Err(decode_error(text).unwrap_or_else(|| e.to_string())),
    }
}

/// A JSON object built in insertion order.
pub fn object(pairs: Vec<(&str, Value)>) -> Value {
    let mut m = Map::new();
    for (k, v) in pairs {
        m.insert(k.to_string(), v);
    }
    Value::Object(m)
}

/// The message CPython's json decoder raises for `text`, or `None` when it would accept it.
fn decode_error(text: &str) -> Option<String> {
    let chars: Vec<char> = text.chars().collect();
    let mut p = JsonScan { s: &chars };
    let start = p.ws(0);
    let result = match p.value(start) {
        Ok(end) => {
            let end = p.ws(end);
            if end != chars.len() {
                Err(("Extra data", end))
            } else {
                Ok(())
            }
        }
        Err(Stop::Expecting(at)) => Err(("Expecting value", at)),
        Err(Stop::Error(msg, at)) => Err((msg, at)),
    };
    let (msg, pos) = result.err()?;
    let before = &chars[..pos.min(chars.len())];
    let line = before.iter().filter(|c| **c == '\n').count() + 1;
    let col = match before.iter().rposition(|c| *c == '\n') {
        Some(i) => pos - i,
        None => pos + 1,
    };
    Some(format!("{msg}: line {line} column {col} (char {pos})"))
}

enum Stop {
    /// `StopIteration`: no value starts here.
    Expecting(usize),
    Error(&'static str, usize),
}

struct JsonScan<'a> {
    s: &'a [char],
}

impl JsonScan<'_> {
    fn at(&self, i: usize) -> Option<char> {
        self.s.get(i).copied()
    }

    fn ws(&self, mut i: usize) -> usize {
        while matches!(self.at(i), Some(' ' | '\t' | '\n' | '\r')) {
            i += 1;
        }
        i
    }

    fn starts(&self, i: usize, word: &str) -> bool {
        word.chars().enumerate().all(|(k, c)| self.at(i + k) == Some(c))
    }

    fn value(&mut self, i: usize) -> Result<usize, Stop> {
        match self.at(i) {
            None => Err(Stop::Expecting(i)),
            Some('"') => self.string(i + 1),
            Some('{') => self.object(i + 1),
            Some('[') => self.array(i + 1),
            Some('n') if self.starts(i, "null") => Ok(i + 4),
            Some('t') if self.starts(i, "true") => Ok(i + 4),
            Some('f') if self.starts(i, "false") => Ok(i + 5),
            Some('N') if self.starts(i, "NaN") => Ok(i + 3),
            Some('I') if self.starts(i, "Infinity") => Ok(i + 8),
            Some('-') if self.starts(i, "-Infinity") => Ok(i + 9),
            Some(c) if c == '-' || c.is_ascii_digit() => self.number(i),
            Some(_) => Err(Stop::Expecting(i)),
        }
    }

    fn number(&self, i: usize) -> Result<usize, Stop> {
        let mut j = i;
        if self.at(j) == Some('-') {
            j += 1;
        }
        match self.at(j) {
            Some('0') => j += 1,
            Some(c) if c.is_ascii_digit() => {
                while self.at(j).is_some_and(|c| c.is_ascii_digit()) {
                    j += 1;
                }
            }
            _ => return Err(Stop::Expecting(i)),
        }
        if self.at(j) == Some('.') && self.at(j + 1).is_some_and(|c| c.is_ascii_digit()) {
            j += 1;
            while self.at(j).is_some_and(|c| c.is_ascii_digit()) {
                j += 1;
            }
        }
        if matches!(self.at(j), Some('e' | 'E')) {
            let mut k = j + 1;
            if matches!(self.at(k), Some('+' | '-')) {
                k += 1;
            }
            if self.at(k).is_some_and(|c| c.is_ascii_digit()) {
                while self.at(k).is_some_and(|c| c.is_ascii_digit()) {
                    k += 1;
                }
                j = k;
            }
        }
        Ok(j)
    }

    /// `i` is just past the opening quote.
    fn string(&self, i: usize) -> Result<usize, Stop> {
        let begin = i - 1;
        let mut j = i;
        loop {
            match self.at(j) {
                None => return Err(Stop::Error("Unterminated string starting at", begin)),
                Some('"') => return Ok(j + 1),
                Some('\\') => match self.at(j + 1) {
                    None => return Err(Stop::Error("Unterminated string starting at", begin)),
                    Some('"' | '\\' | '/' | 'b' | 'f' | 'n' | 'r' | 't') => j += 2,
                    Some('u') => {
                        let hex = (j + 2..j + 6).all(|k| self.at(k).is_some_and(|c| c.is_ascii_hexdigit()));
                        if !hex {
                            return Err(Stop::Error("Invalid \\uXXXX escape", j + 1));
                        }
                        j += 6;
                    }
                    Some(_) => return Err(Stop::Error("Invalid \\escape", j)),
                },
                Some(c) if (c as u32) < 0x20 => return Err(Stop::Error("Invalid control character at", j)),
                Some(_) => j += 1,
            }
        }
    }

    fn object(&mut self, i: usize) -> Result<usize, Stop> {
        let mut end = self.ws(i);
        match self.at(end) {
            Some('}') => return Ok(end + 1),
            Some('"') => {}
            _ => return Err(Stop::Error("Expecting property name enclosed in double quotes", end)),
        }
        end += 1;
        loop {
            end = self.string(end)?;
            end = self.ws(end);
            if self.at(end) != Some(':') {
                return Err(Stop::Error("Expecting ':' delimiter", end));
            }
            end = self.ws(end + 1);
            end = self.value(end).map_err(|e| match e {
                Stop::Expecting(at) => Stop::Error("Expecting value", at),
                other => other,
            })?;
            end = self.ws(end);
            let next = self.at(end);
            end += 1;
            match next {
                Some('}') => return Ok(end),
                Some(',') => {}
                _ => return Err(Stop::Error("Expecting ',' delimiter", end - 1)),
            }
            end = self.ws(end);
            let next = self.at(end);
            end += 1;
            if next != Some('"') {
                return Err(Stop::Error("Expecting property name enclosed in double quotes", end - 1));
            }
        }
    }

    fn array(&mut self, i: usize) -> Result<usize, Stop> {
        let mut end = self.ws(i);
        if self.at(end) == Some(']') {
            return Ok(end + 1);
        }
        loop {
            end = self.value(end).map_err(|e| match e {
                Stop::Expecting(at) => Stop::Error("Expecting value", at),
                other => other,
            })?;
            end = self.ws(end);
            let next = self.at(end);
            end += 1;
            match next {
                Some(']') => return Ok(end),
                Some(',') => {}
                _ => return Err(Stop::Error("Expecting ',' delimiter", end - 1)),
            }
            end = self.ws(end);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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
    fn dumps_matches_python() {
        let v: Value =
            serde_json::from_str(r#"{"a": [1, 2.50, "é\n\u0001"], "b": {}, "c": [], "d": null, "e": 1e2}"#).unwrap();
        assert_eq!(dumps(&v, None), r#"{"a": [1, 2.5, "é\n\u0001"], "b": {}, "c": [], "d": null, "e": 100.0}"#);
        assert_eq!(
            dumps(&v, Some(2)),
            "{\n  \"a\": [\n    1,\n    2.5,\n    \"é\\n\\u0001\"\n  ],\n  \"b\": {},\n  \"c\": [],\n  \"d\": null,\n  \"e\": 100.0\n}"
        );
        let big: Value = serde_json::from_str("123456789012345678901234567890").unwrap();
        assert_eq!(dumps(&big, None), "123456789012345678901234567890");
    }

    #[test]
    fn decode_errors_read_like_python() {
        for (text, want) in [
            ("", "Expecting value: line 1 column 1 (char 0)"),
            ("<html>", "Expecting value: line 1 column 1 (char 0)"),
            ("{\"a\": 1", "Expecting ',' delimiter: line 1 column 8 (char 7)"),
            ("{\"a\" 1}", "Expecting ':' delimiter: line 1 column 6 (char 5)"),
            ("{a: 1}", "Expecting property name enclosed in double quotes: line 1 column 2 (char 1)"),
            ("[1, 2", "Expecting ',' delimiter: line 1 column 6 (char 5)"),
            ("[1,]", "Expecting value: line 1 column 4 (char 3)"),
            ("{\"a\": \"b", "Unterminated string starting at: line 1 column 7 (char 6)"),
            ("{} x", "Extra data: line 1 column 4 (char 3)"),
            ("\n\n  {\"é\": tru}", "Expecting value: line 3 column 9 (char 10)"),
            ("{\"a\": 1,}", "Expecting property name enclosed in double quotes: line 1 column 9 (char 8)"),
        ] {
            assert_eq!(loads(text).unwrap_err(), want, "{text:?}");
        }
        assert_eq!(loads("[1]").unwrap(), json!([1]));
    }

    #[test]
    fn reprs_follow_python() {
        assert_eq!(repr(&json!({"a": [1, "x'y", null, true]})), "{'a': [1, \"x'y\", None, True]}");
        assert_eq!(str_repr("a\nb"), "'a\\nb'");
        assert_eq!(take_chars("héllo", 2), "hé");
    }
}
