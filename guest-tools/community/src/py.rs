//! Python's semantics where DeerFlow's output depends on them, from `toolhost-py` (the one home
//! of toolhost's Python compatibility, shared with the host), plus the two helpers that are
//! DeerFlow's or this component's own: `_coerce_bool` and an insertion-ordered object builder.
//! This crate enables serde_json's `arbitrary_precision`, so integers beyond 64 bits keep their
//! digits through `int()`, `repr()` and `json.dumps` here.

use serde_json::{Map, Value};

pub use toolhost_py::builtins::{float, float_repr, int, int_str, is_float, or, repr, str_of, take_chars, truthy};
pub use toolhost_py::json::{dumps, dumps_indented, loads};

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

/// A JSON object built in insertion order.
pub fn object(pairs: Vec<(&str, Value)>) -> Value {
    let mut m = Map::new();
    for (k, v) in pairs {
        m.insert(k.to_string(), v);
    }
    Value::Object(m)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `toolhost-py` under this crate's `arbitrary_precision`: the host workspace builds it
    /// without, so the exact big integer is checked here.
    #[test]
    fn dumps_matches_python() {
        let v: Value =
            serde_json::from_str(r#"{"a": [1, 2.50, "é\n\u0001"], "b": {}, "c": [], "d": null, "e": 1e2}"#).unwrap();
        assert_eq!(dumps(&v), r#"{"a": [1, 2.5, "é\n\u0001"], "b": {}, "c": [], "d": null, "e": 100.0}"#);
        assert_eq!(
            dumps_indented(&v),
            "{\n  \"a\": [\n    1,\n    2.5,\n    \"é\\n\\u0001\"\n  ],\n  \"b\": {},\n  \"c\": [],\n  \"d\": null,\n  \"e\": 100.0\n}"
        );
        let big: Value = serde_json::from_str("123456789012345678901234567890").unwrap();
        assert_eq!(dumps(&big), "123456789012345678901234567890");
        assert_eq!(repr(&big), "123456789012345678901234567890");
        let neg: Value = serde_json::from_str("[-98765432109876543210987654321, -0, 1.0]").unwrap();
        assert_eq!(dumps(&neg), "[-98765432109876543210987654321, 0, 1.0]");
    }

    #[test]
    fn coerce_bool_follows_deerflow() {
        assert!(coerce_bool(Some(&Value::String(" Yes ".into())), false));
        assert!(!coerce_bool(Some(&Value::String("off".into())), true));
        assert!(coerce_bool(Some(&Value::String("maybe".into())), true));
        assert!(!coerce_bool(None, false));
    }
}
