//! The Python `str` methods DeerFlow's search, routing and bash audit call — `strip()`,
//! `split()`, `split(None, 1)`, `lower()`, `casefold()` — with Python's notion of whitespace
//! and case.

mod casefold_table;

use casefold_table::CASEFOLD_EXCEPTIONS;

/// `str.isspace()` for one character: Unicode White_Space plus the C0 separators U+001C..U+001F
/// that Python also counts.
pub fn py_isspace(c: char) -> bool {
    c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c)
}

/// `str.strip()`.
pub fn py_strip(s: &str) -> &str {
    s.trim_matches(py_isspace)
}

/// Python's `" ".join(text.split())`.
pub fn collapse_whitespace(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for word in text.split(py_isspace).filter(|w| !w.is_empty()) {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(word);
    }
    out
}

/// `s.split(None, 1)`: `None` for no token, else the first token and the rest (leading
/// whitespace removed, `None` if nothing remains).
pub fn py_split_once_ws(s: &str) -> Option<(&str, Option<&str>)> {
    let s = s.trim_start_matches(py_isspace);
    if s.is_empty() {
        return None;
    }
    match s.find(py_isspace) {
        None => Some((s, None)),
        Some(i) => {
            let rest = s[i..].trim_start_matches(py_isspace);
            Some((&s[..i], if rest.is_empty() { None } else { Some(rest) }))
        }
    }
}

/// `str.lower()` (full mappings, final sigma in context, as Python does).
pub fn py_lower(s: &str) -> String {
    s.to_lowercase()
}

/// `str.casefold()`: per-character full case folding (no final-sigma context).
pub fn py_casefold(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match CASEFOLD_EXCEPTIONS.binary_search_by_key(&(c as u32), |(k, _)| *k) {
            Ok(i) => out.push_str(CASEFOLD_EXCEPTIONS[i].1),
            Err(_) => out.extend(c.to_lowercase()),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_and_strip_follow_python() {
        assert_eq!(py_split_once_ws(""), None);
        assert_eq!(py_split_once_ws("  "), None);
        assert_eq!(py_split_once_ws("slack"), Some(("slack", None)));
        assert_eq!(py_split_once_ws(" slack  send msg "), Some(("slack", Some("send msg "))));
        assert_eq!(py_strip("\u{1f} x\u{a0}"), "x");
    }

    #[test]
    fn collapse_and_strip_follow_python() {
        assert_eq!(collapse_whitespace("  a \t b\n\u{1c}c  "), "a b c");
        assert_eq!(py_strip("\r\n x \u{a0}"), "x");
    }

    #[test]
    fn casefold_differs_from_lower_where_python_does() {
        assert_eq!(py_casefold("Straße"), "strasse");
        assert_eq!(py_casefold("ΣΑΣ"), "σασ");
        assert_eq!(py_lower("ΣΑΣ"), "σας");
        assert_eq!(py_casefold("ORDERS 订单"), "orders 订单");
        assert_eq!(py_casefold("\u{13A0}"), "\u{13A0}");
    }
}
