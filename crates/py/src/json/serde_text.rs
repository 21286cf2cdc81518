//! `json.dumps` text written straight from a `serde_json::Value`, without building the
//! [`PyValue`](super::PyValue) tree first: each writer here gives exactly what
//! `PyValue::from_json(v)` followed by the `PyValue` writer of the same name gives (tested), with
//! no allocation per value. For large inputs that only need rendering once (the deferred
//! catalog's hash blob of thousands of MCP tool schemas).

use serde_json::{Map, Number, Value};

use super::{key_prefix, push_text, write_py_float, write_py_str, StackText};

static NULL: Value = Value::Null;

/// A number as `PyValue::from_json` keeps it, written as Python writes it: an integer (of any
/// size when serde_json kept its text) as its digits, anything else as a float's `repr`.
/// `false` when the float is not finite (its `repr` is not JSON).
pub fn write_json_number(n: &Number, out: &mut String) -> bool {
    use std::fmt::Write as _;
    if let Some(i) = n.as_i64() {
        let _ = write!(out, "{i}");
        return true;
    }
    if let Some(u) = n.as_u64() {
        let _ = write!(out, "{u}");
        return true;
    }
    // An integer beyond 64 bits prints as one only with serde_json's `arbitrary_precision`;
    // without it the number is an f64 and prints with a point or an exponent.
    let mut small = StackText::default();
    let heap;
    let text = if write!(small, "{n}").is_ok() {
        small.as_str()
    } else {
        heap = n.to_string();
        heap.as_str()
    };
    let digits = text.strip_prefix('-').unwrap_or(text);
    if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
        if digits.bytes().all(|b| b == b'0') {
            out.push('0');
        } else {
            push_text(out, text);
        }
        return true;
    }
    let f = n.as_f64().unwrap_or(f64::NAN);
    write_py_float(f, out);
    f.is_finite()
}

fn write_json_scalar(v: &Value, out: &mut String) -> bool {
    match v {
        Value::Null => push_text(out, "null"),
        Value::Bool(true) => push_text(out, "true"),
        Value::Bool(false) => push_text(out, "false"),
        Value::Number(n) => return write_json_number(n, out),
        Value::String(s) => write_py_str(s, out),
        Value::Array(_) | Value::Object(_) => {}
    }
    true
}

/// `json.dumps(v, sort_keys=True, ensure_ascii=False)` of `PyValue::from_json(v)`.
pub fn write_json_sorted(v: &Value, out: &mut String) {
    match v {
        Value::Array(a) => {
            out.push('[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    push_text(out, ", ");
                }
                write_json_sorted(x, out);
            }
            out.push(']');
        }
        Value::Object(m) => {
            out.push('{');
            for_sorted_json_entries(
                m,
                |_, _| true,
                |i, k, v| {
                    if i > 0 {
                        push_text(out, ", ");
                    }
                    write_py_str(k, out);
                    push_text(out, ": ");
                    write_json_sorted(v, out);
                },
            );
            out.push('}');
        }
        scalar => {
            write_json_scalar(scalar, out);
        }
    }
}

/// [`super::write_sorted_rm_titles`] of `PyValue::from_json(m)`: `json.dumps(_rm_titles(m),
/// sort_keys=True, …)`, `skip` dropping further keys of this object only.
pub fn write_json_sorted_rm_titles(m: &Map<String, Value>, prev_key: &str, skip: &[&str], out: &mut String) {
    out.push('{');
    for_sorted_json_entries(
        m,
        |k, v| (k != "title" || (v.is_object() && prev_key == "properties")) && !skip.contains(&k),
        |i, k, v| {
            if i > 0 {
                push_text(out, ", ");
            }
            write_py_str(k, out);
            push_text(out, ": ");
            match v {
                Value::Object(inner) => write_json_sorted_rm_titles(inner, k, &[], out),
                other => write_json_sorted(other, out),
            }
        },
    );
    out.push('}');
}

/// `json.dumps(PyValue::from_json(v), ensure_ascii=False)`: insertion order, separators `", "`
/// and `": "`. `false` when a float is not finite (written as Python writes it, `Infinity`,
/// which [`super::PyValue::parse`] does not read back).
pub fn write_json_compact(v: &Value, out: &mut String) -> bool {
    match v {
        Value::Array(a) => {
            let mut ok = true;
            out.push('[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    push_text(out, ", ");
                }
                ok &= write_json_compact(x, out);
            }
            out.push(']');
            ok
        }
        Value::Object(m) => {
            let mut ok = true;
            out.push('{');
            for (i, (k, x)) in m.iter().enumerate() {
                if i > 0 {
                    push_text(out, ", ");
                }
                write_py_str(k, out);
                push_text(out, ": ");
                ok &= write_json_compact(x, out);
            }
            out.push('}');
            ok
        }
        scalar => write_json_scalar(scalar, out),
    }
}

/// Call `f(i, key, value)` for the entries `keep` accepts, in key (code point) order: the
/// `serde_json` twin of `for_sorted_entries`.
fn for_sorted_json_entries<'a>(
    m: &'a Map<String, Value>,
    keep: impl Fn(&str, &Value) -> bool,
    mut f: impl FnMut(usize, &'a str, &'a Value),
) {
    if m.len() <= 32 {
        let mut order: [(u64, &str, &Value); 32] = [(0, "", &NULL); 32];
        let mut n = 0;
        for (k, v) in m {
            if keep(k, v) {
                order[n] = (key_prefix(k), k.as_str(), v);
                n += 1;
            }
        }
        order[..n].sort_unstable_by(|a, b| a.0.cmp(&b.0).then_with(|| a.1.cmp(b.1)));
        for (i, &(_, k, v)) in order[..n].iter().enumerate() {
            f(i, k, v);
        }
    } else {
        let mut entries: Vec<(&String, &Value)> = m.iter().filter(|(k, v)| keep(k, v)).collect();
        entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
        for (i, (k, v)) in entries.into_iter().enumerate() {
            f(i, k, v);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::{write_sorted_rm_titles, PyValue};
    use super::*;

    fn cases() -> Vec<Value> {
        let texts = [
            r#"{"b": 1, "a": [1, 2.5, -0.0, 1e16, 1e-7, 0.1, -3, 18446744073709551615, -9223372036854775808]}"#,
            r#"{"title": "T", "description": "D", "properties": {"title": {"title": "x"}, "a": {"title": "A", "k": [{"title": "kept"}]}}}"#,
            r#"{"s": "é\n\"\\\u0001\u007f🚀", "n": null, "t": true, "f": false, "e": {}, "l": []}"#,
            r#"{"big": 123456789012345678901234567890, "neg": -123456789012345678901234567890, "z": -0, "x": 1.0}"#,
            r#"[{"zz": 1, "z": 2, "zzzzzzzzzb": 3, "zzzzzzzzza": 4, "": 5, "\u0000": 6, "é": 7, "e": 8}]"#,
        ];
        let mut out: Vec<Value> = texts.iter().map(|t| serde_json::from_str(t).unwrap()).collect();
        // An object past the stack-sorted size.
        let wide: Map<String, Value> = (0..40).rev().map(|i| (format!("k{i}"), Value::from(i))).collect();
        out.push(Value::Object(wide));
        out
    }

    #[test]
    fn writers_equal_the_pyvalue_writers_of_from_json() {
        for v in cases() {
            let py = PyValue::from_json(&v);
            let (mut a, mut b) = (String::new(), String::new());
            write_json_sorted(&v, &mut a);
            py.write_sorted(&mut b);
            assert_eq!(a, b);
            let (mut a, mut b) = (String::new(), String::new());
            assert!(write_json_compact(&v, &mut a));
            py.write_compact(&mut b);
            assert_eq!(a, b);
            // The compact text reads back as the same value.
            assert_eq!(PyValue::parse(&a).unwrap(), py);
            if let (Value::Object(m), PyValue::Dict(d)) = (&v, &py) {
                for skip in [&[][..], &["title", "description", "$defs", "definitions"][..]] {
                    let (mut a, mut b) = (String::new(), String::new());
                    write_json_sorted_rm_titles(m, "", skip, &mut a);
                    write_sorted_rm_titles(d, "", skip, &mut b);
                    assert_eq!(a, b);
                }
            }
        }
    }
}
