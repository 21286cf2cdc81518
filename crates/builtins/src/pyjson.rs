//! Python's `json.dumps(value, ensure_ascii=False)` text: what LangChain makes of a tool that
//! returns a dict (`list_uploaded_files`), and the size DeerFlow measures a clarification form by.

use serde_json::Value;

/// `json.dumps(value, ensure_ascii=False)`: separators `", "` and `": "`, non-ASCII kept, control
/// characters escaped as `\n`, `\u001f`, … (the same escapes serde_json writes).
pub fn dumps(value: &Value) -> String {
    let mut out = String::new();
    write_value(value, &mut out);
    out
}

fn write_value(value: &Value, out: &mut String) {
    match value {
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_value(item, out);
            }
            out.push(']');
        }
        Value::Object(map) => {
            out.push('{');
            for (i, (k, v)) in map.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                out.push_str(&Value::String(k.clone()).to_string());
                out.push_str(": ");
                write_value(v, out);
            }
            out.push('}');
        }
        // Scalars: serde_json's escaping of strings matches Python's with ensure_ascii=False
        // (only `"`, `\` and U+0000..U+001F are escaped); integers print the same.
        scalar => out.push_str(&scalar.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn matches_python_separators_and_escapes() {
        let v = json!({"a": [1, true, null], "é": "x\n\"\u{1f}日"});
        assert_eq!(dumps(&v), "{\"a\": [1, true, null], \"é\": \"x\\n\\\"\\u001f日\"}");
        assert_eq!(dumps(&json!([])), "[]");
    }
}
