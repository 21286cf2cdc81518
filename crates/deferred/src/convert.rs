//! langchain's `convert_to_openai_function` for a tool whose args schema is a JSON-schema dict
//! (how DeerFlow's MCP tools arrive): `$ref` inlining and `$defs` removal, title stripping,
//! the description fallback and the `__arg1` case (langchain_core 1.8.3, `utils/function_calling.py`
//! and `utils/json_schema.py`).

use crate::error::ConvertError;
use serde_json::{Map, Value};
use toolhost_py::json::text::{Kind as TextKind, Tape};
use toolhost_py::json::{
    write_indented_rm_titles, write_json_sorted, write_json_sorted_rm_titles, write_py_str, write_sorted_rm_titles,
    PyDict, PyValue,
};

/// Deeper than Python's recursion limit would allow; deeper schemas are rejected.
const MAX_DEPTH: usize = 400;
/// Values produced while inlining `$ref`s; a schema that expands past this (references
/// doubling at every level) is rejected instead of exhausting memory.
const MAX_NODES: usize = 2_000_000;

/// Keys `_convert_json_schema_to_openai_function` pops from the top of the resolved schema.
const POPPED: [&str; 4] = ["definitions", "$defs", "title", "description"];

/// The result of `convert_to_openai_function` for one tool, `{name, description, parameters}`,
/// kept as the (resolved) schema plus the title-stripping still to apply, so that a catalog of
/// thousands of tools does not copy every schema: the renderers strip while writing.
#[derive(Debug, Clone, PartialEq)]
pub struct OpenAiFunction {
    pub name: PyValue,
    pub description: PyValue,
    /// The schema as given (`$ref`-free) or `$ref`-resolved, before title stripping.
    params: PyDict,
    /// Drop `POPPED` from the top of `params` when rendering (the `$ref`-free path).
    skip_top: bool,
    /// langchain strips titles on the JSON-schema path only, not on the `__arg1` path.
    strip_titles: bool,
}

impl OpenAiFunction {
    fn top_skip(&self) -> &'static [&'static str] {
        if self.skip_top {
            &POPPED
        } else {
            &[]
        }
    }

    /// The `parameters` value as langchain builds it.
    pub fn parameters(&self) -> PyValue {
        if self.strip_titles {
            PyValue::Dict(rm_titles(&self.params, "", self.top_skip()))
        } else {
            PyValue::Dict(self.params.clone())
        }
    }

    /// The function as a dict `{name, description, parameters}`.
    pub fn to_value(&self) -> PyValue {
        let mut out = PyDict::with_capacity(3);
        out.push_unique("name".to_string(), self.name.clone());
        out.push_unique("description".to_string(), self.description.clone());
        out.push_unique("parameters".to_string(), self.parameters());
        PyValue::Dict(out)
    }

    /// `json.dumps(function, sort_keys=True, ensure_ascii=False)`.
    pub fn write_sorted(&self, out: &mut String) {
        out.push_str("{\"description\": ");
        self.description.write_sorted(out);
        out.push_str(", \"name\": ");
        self.name.write_sorted(out);
        out.push_str(", \"parameters\": ");
        if self.strip_titles {
            write_sorted_rm_titles(&self.params, "", self.top_skip(), out);
        } else {
            PyValue::Dict(self.params.clone()).write_sorted(out);
        }
        out.push('}');
    }

    /// `json.dumps(function, indent=2, ensure_ascii=False)` at nesting `level`.
    pub fn write_indented(&self, out: &mut String, level: usize) {
        let pad = |out: &mut String, n: usize| {
            out.push('\n');
            for _ in 0..n {
                out.push_str("  ");
            }
        };
        out.push('{');
        pad(out, level + 1);
        write_py_str("name", out);
        out.push_str(": ");
        self.name.write_indented(out, level + 1);
        out.push(',');
        pad(out, level + 1);
        write_py_str("description", out);
        out.push_str(": ");
        self.description.write_indented(out, level + 1);
        out.push(',');
        pad(out, level + 1);
        write_py_str("parameters", out);
        out.push_str(": ");
        if self.strip_titles {
            write_indented_rm_titles(&self.params, "", self.top_skip(), out, level + 1);
        } else {
            PyValue::Dict(self.params.clone()).write_indented(out, level + 1);
        }
        pad(out, level);
        out.push('}');
    }
}

fn s(v: &str) -> PyValue {
    PyValue::Str(v.to_string())
}

/// `convert_to_openai_function(StructuredTool(name, description, args_schema=schema))`:
/// a dict `{name, description, parameters}` in that key order.
pub fn convert_to_openai_function(name: &str, description: &str, schema: &PyValue) -> Result<PyValue, ConvertError> {
    Ok(convert_tool(name, description, schema.clone())?.to_value())
}

/// [`convert_to_openai_function`] taking the schema by value, without copying it when it has
/// no `$ref`.
pub fn convert_tool(name: &str, description: &str, schema: PyValue) -> Result<OpenAiFunction, ConvertError> {
    let tool = || name.to_string();
    let PyValue::Dict(schema) = schema else {
        return Err(ConvertError::SchemaNotObject { tool: tool() });
    };

    if schema.is_empty() && description.is_empty() {
        // A falsy tool_call_schema takes langchain's single-string-argument branch, titles kept.
        let arg1: PyDict =
            [("title".to_string(), s("__arg1")), ("type".to_string(), s("string"))].into_iter().collect();
        let props: PyDict = [("__arg1".to_string(), PyValue::Dict(arg1))].into_iter().collect();
        let params: PyDict = [
            ("properties".to_string(), PyValue::Dict(props)),
            ("required".to_string(), PyValue::List(vec![s("__arg1")])),
            ("type".to_string(), s("object")),
        ]
        .into_iter()
        .collect();
        return Ok(OpenAiFunction {
            name: s(name),
            description: s(description),
            params,
            skip_top: false,
            strip_titles: false,
        });
    }

    let (title, default_description, params, skip_top) = if contains_ref(&schema, 0) {
        // `BaseTool.tool_call_schema` for a dict args_schema: the tool description overrides
        // the schema's (and a `$ref` to `#/description` sees it).
        let mut call_schema = schema;
        if !description.is_empty() {
            call_schema.insert("description".to_string(), s(description));
        }
        let full = PyValue::Dict(call_schema);
        let mut deref = Deref { full: &full, tool: name, active: Vec::new(), nodes: 0 };
        let PyValue::Dict(mut resolved) = deref.value(&full, 0)? else {
            return Err(ConvertError::ResolvedNotObject { tool: tool() });
        };
        resolved.remove("definitions");
        resolved.remove("$defs");
        let title = resolved.remove("title");
        let default_description = resolved.remove("description");
        (title, default_description, resolved, false)
    } else {
        // Without any `$ref`, dereferencing is a plain copy: keep the schema, skip at render.
        // Its title and description are only needed when the tool has no name / description.
        let title = if name.is_empty() { schema.get("title").cloned() } else { None };
        let default_description = if description.is_empty() { schema.get("description").cloned() } else { None };
        (title, default_description, schema, true)
    };

    let title = title.unwrap_or_else(|| s(""));
    let description =
        if description.is_empty() { default_description.unwrap_or_else(|| s("")) } else { s(description) };
    Ok(OpenAiFunction {
        name: if name.is_empty() { title } else { s(name) },
        description,
        params,
        skip_top,
        strip_titles: true,
    })
}

/// The schema, when `convert_tool` of `PyValue::from_json(schema)` would take its plain path: an
/// object without any `$ref` (nor nesting too deep to scan), and not the `__arg1` case. Its
/// function can then be rendered straight from the `serde_json` value
/// ([`write_json_function_sorted`]), with no `PyValue` tree built.
pub(crate) fn json_plain_schema<'v>(description: &str, schema: &'v Value) -> Option<&'v Map<String, Value>> {
    let Value::Object(m) = schema else { return None };
    if (m.is_empty() && description.is_empty()) || json_contains_ref(m, 0) {
        return None;
    }
    Some(m)
}

/// `json.dumps(convert_to_openai_function(tool), sort_keys=True, ensure_ascii=False)` for a
/// schema [`json_plain_schema`] accepted: what [`OpenAiFunction::write_sorted`] writes for
/// `convert_tool(name, description, PyValue::from_json(schema))` (tested).
pub(crate) fn write_json_function_sorted(name: &str, description: &str, schema: &Map<String, Value>, out: &mut String) {
    out.push_str("{\"description\": ");
    match (description.is_empty(), schema.get("description")) {
        (false, _) => write_py_str(description, out),
        (true, Some(d)) => write_json_sorted(d, out),
        (true, None) => out.push_str("\"\""),
    }
    out.push_str(", \"name\": ");
    match (name.is_empty(), schema.get("title")) {
        (false, _) => write_py_str(name, out),
        (true, Some(t)) => write_json_sorted(t, out),
        (true, None) => out.push_str("\"\""),
    }
    out.push_str(", \"parameters\": ");
    write_json_sorted_rm_titles(schema, "", &POPPED, out);
    out.push('}');
}

/// [`write_json_function_sorted`] from the schema's JSON text, read into `tape` (reused from one
/// tool to the next): what [`OpenAiFunction::write_sorted`] writes for `convert_tool(name,
/// description, PyValue::parse(text))` (tested). `false`, with `out` as it was, when the schema
/// is off the plain path (not an object, a `$ref`, the `__arg1` case) or off the text writer's
/// (see [`Tape`]): the caller then converts it from its value.
pub(crate) fn write_text_function_sorted(
    name: &str,
    description: &str,
    text: &str,
    tape: &mut Tape,
    out: &mut String,
) -> bool {
    if !tape.parse(text) || tape.has_ref || tape.escaped_key {
        return false;
    }
    if tape.nodes().first().map(|n| n.kind) != Some(TextKind::Object) || (tape.is_empty(0) && description.is_empty()) {
        return false;
    }
    let mark = out.len();
    let ok = (|| {
        out.push_str("{\"description\": ");
        // The schema's own `description` / `title` is looked up only when the tool has none.
        for (own, key, sep) in [(description, "description", ""), (name, "title", ", \"name\": ")] {
            out.push_str(sep);
            if !own.is_empty() {
                write_py_str(own, out);
            } else if let Some(at) = tape.get(text, 0, key) {
                if !tape.write_sorted(text, at, out) {
                    return false;
                }
            } else {
                out.push_str("\"\"");
            }
        }
        out.push_str(", \"parameters\": ");
        if !tape.write_sorted_rm_titles(text, 0, &POPPED, out) {
            return false;
        }
        out.push('}');
        true
    })();
    if !ok {
        out.truncate(mark);
    }
    ok
}

/// [`contains_ref`] of `PyValue::from_json(m)`.
fn json_contains_ref(m: &Map<String, Value>, depth: usize) -> bool {
    if depth > MAX_DEPTH {
        return true;
    }
    m.iter().any(|(k, v)| k == "$ref" || json_value_contains_ref(v, depth + 1))
}

fn json_value_contains_ref(v: &Value, depth: usize) -> bool {
    match v {
        Value::Object(m) => json_contains_ref(m, depth),
        Value::Array(l) => l.iter().any(|x| json_value_contains_ref(x, depth + 1)),
        _ => false,
    }
}

/// Whether any object in the schema has a `$ref` key (outside nothing: `$defs` counts too,
/// since a `$ref` inside `$defs` is resolved when something points there).
fn contains_ref(d: &PyDict, depth: usize) -> bool {
    // Too deep to scan here means too deep to convert; let the full path report it.
    if depth > MAX_DEPTH {
        return true;
    }
    d.iter().any(|(k, v)| k == "$ref" || value_contains_ref(v, depth + 1))
}

fn value_contains_ref(v: &PyValue, depth: usize) -> bool {
    match v {
        PyValue::Dict(d) => contains_ref(d, depth),
        PyValue::List(l) => l.iter().any(|x| value_contains_ref(x, depth + 1)),
        _ => false,
    }
}

/// `_rm_titles`: drop every `title` key of a dict, except a dict-valued one directly under
/// `properties` (a property named "title"); lists are not entered. `skip` drops further keys
/// of this dict only (the top-level keys `_convert_json_schema_to_openai_function` pops).
fn rm_titles(kv: &PyDict, prev_key: &str, skip: &[&str]) -> PyDict {
    let mut out = PyDict::with_capacity(kv.len());
    for (k, v) in kv.iter() {
        if skip.contains(&k.as_str()) {
            continue;
        }
        match v {
            PyValue::Dict(d) if k == "title" && prev_key == "properties" => {
                out.push_unique(k.clone(), PyValue::Dict(rm_titles(d, k, &[])));
            }
            _ if k == "title" => {}
            PyValue::Dict(d) => out.push_unique(k.clone(), PyValue::Dict(rm_titles(d, k, &[]))),
            other => out.push_unique(k.clone(), other.clone()),
        }
    }
    out
}

/// `dereference_refs(schema)` with its defaults: `$defs` values copied untouched, a reference
/// already being resolved on the current path yields only its sibling keys (so a pure cycle
/// becomes `{}`), sibling keys of a `$ref` override the referenced dict's keys.
struct Deref<'a> {
    full: &'a PyValue,
    tool: &'a str,
    active: Vec<String>,
    nodes: usize,
}

impl Deref<'_> {
    fn too_large(&self) -> ConvertError {
        ConvertError::TooLarge { tool: self.tool.to_string() }
    }

    fn value(&mut self, v: &PyValue, depth: usize) -> Result<PyValue, ConvertError> {
        self.nodes += 1;
        if depth > MAX_DEPTH || self.nodes > MAX_NODES {
            return Err(self.too_large());
        }
        match v {
            PyValue::Dict(d) => match d.get("$ref") {
                Some(r) => self.reference(d, r, depth),
                None => Ok(PyValue::Dict(self.dict(d.iter(), depth)?)),
            },
            PyValue::List(l) => {
                Ok(PyValue::List(l.iter().map(|x| self.value(x, depth + 1)).collect::<Result<_, _>>()?))
            }
            other => Ok(other.clone()),
        }
    }

    /// `_process_dict_properties`.
    fn dict<'v>(
        &mut self,
        items: impl Iterator<Item = (&'v String, &'v PyValue)>,
        depth: usize,
    ) -> Result<PyDict, ConvertError> {
        let mut out = PyDict::new();
        for (k, v) in items {
            let nv = match v {
                _ if k == "$defs" => {
                    self.count(v)?;
                    v.clone()
                }
                PyValue::Dict(_) | PyValue::List(_) => self.value(v, depth + 1)?,
                other => other.clone(),
            };
            out.push_unique(k.clone(), nv);
        }
        Ok(out)
    }

    fn count(&mut self, v: &PyValue) -> Result<(), ConvertError> {
        self.nodes += match v {
            PyValue::Dict(d) => d.len() + 1,
            PyValue::List(l) => l.len() + 1,
            _ => 1,
        };
        if self.nodes > MAX_NODES {
            return Err(self.too_large());
        }
        Ok(())
    }

    fn reference(&mut self, obj: &PyDict, r: &PyValue, depth: usize) -> Result<PyValue, ConvertError> {
        let PyValue::Str(path) = r else {
            let mut found = String::new();
            r.write_sorted(&mut found);
            return Err(ConvertError::RefNotString { tool: self.tool.to_string(), found });
        };
        let additional = obj.iter().filter(|(k, _)| k.as_str() != "$ref");
        if self.active.iter().any(|a| a == path) {
            return Ok(PyValue::Dict(self.dict(additional, depth)?));
        }
        self.active.push(path.clone());
        let target = retrieve_ref(path, self.full, self.tool)?;
        let resolved = self.value(target, depth + 1);
        self.active.pop();
        let resolved = resolved?;
        if obj.len() == 1 {
            return Ok(resolved);
        }
        let mut merged = match resolved {
            PyValue::Dict(d) => d,
            _ => PyDict::new(),
        };
        for (k, v) in self.dict(additional, depth)? {
            merged.insert(k, v);
        }
        Ok(PyValue::Dict(merged))
    }
}

/// `_retrieve_ref`: walk `#/a/b/0` through dicts (by key) and lists (by decimal index). No
/// JSON-pointer unescaping, as in langchain.
fn retrieve_ref<'a>(path: &str, full: &'a PyValue, tool: &str) -> Result<&'a PyValue, ConvertError> {
    let mut parts = path.split('/');
    if parts.next() != Some("#") {
        return Err(ConvertError::RefNotFragment { tool: tool.to_string(), path: path.to_string() });
    }
    let not_found = || ConvertError::RefNotFound { tool: tool.to_string(), path: path.to_string() };
    let mut out = full;
    for comp in parts {
        out = match out {
            PyValue::Dict(d) => d.get(comp).ok_or_else(not_found)?,
            PyValue::List(l) => {
                // Python first tests `comp in list` (element equality), which raises for lists.
                if l.iter().any(|x| matches!(x, PyValue::Str(s) if s == comp)) {
                    return Err(not_found());
                }
                if comp.is_empty() || !comp.bytes().all(|b| b.is_ascii_digit()) {
                    return Err(not_found());
                }
                let idx: usize = comp.parse().map_err(|_| not_found())?;
                l.get(idx).ok_or_else(not_found)?
            }
            _ => return Err(not_found()),
        };
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conv(desc: &str, schema: &str) -> Result<String, ConvertError> {
        let f = convert_to_openai_function("t", desc, &PyValue::parse(schema).unwrap())?;
        let mut s = String::new();
        f.write_sorted(&mut s);
        Ok(s)
    }

    /// The renderers that strip titles while writing give exactly what stripping a copy and
    /// writing it gives.
    #[test]
    fn streaming_renderers_equal_materialized_value() {
        let schemas = [
            r#"{"title":"T","description":"D","properties":{"title":{"title":"x","type":"string"},"a":{"title":"A"}}}"#,
            r#"{"properties":{"title":"plain","t2":{"properties":{"title":{"title":"deep"}}}},"$defs":{"X":{"title":"gone"}}}"#,
            r##"{"properties":{"a":{"$ref":"#/$defs/X","title":"over"}},"$defs":{"X":{"title":"gone","type":"integer"}}}"##,
            r#"{"title":"only"}"#,
            r#"{}"#,
            r#"{"definitions":{"a":1},"anyOf":[{"title":"kept"}],"default":{"title":"x","k":[{"title":"kept"}]}}"#,
        ];
        for schema in schemas {
            for desc in ["", "tool desc"] {
                let f = convert_tool("t", desc, PyValue::parse(schema).unwrap()).unwrap();
                let v = f.to_value();
                let (mut a, mut b) = (String::new(), String::new());
                f.write_sorted(&mut a);
                v.write_sorted(&mut b);
                assert_eq!(a, b, "{schema} / {desc:?}");
                let (mut a, mut b) = (String::new(), String::new());
                f.write_indented(&mut a, 1);
                v.write_indented(&mut b, 1);
                assert_eq!(a, b, "{schema} / {desc:?}");
            }
        }
    }

    /// From a schema's text, a plain schema is rendered as from its `serde_json` value (which
    /// the tree tests tie to `convert_tool`); one off the plain path is left to the caller.
    #[test]
    fn text_renderer_equals_the_value_renderer() {
        let schemas = [
            r#"{"type":"object","title":"Args","properties":{"id":{"type":"string","title":"Id","description":"x\ny \u00e9"},"limit":{"type":"integer","minimum":1,"default":10},"ratio":{"type":"number","default":0.5},"mode":{"anyOf":[{"type":"string","title":"kept"},{"type":"null"}],"default":null}},"required":["id"]}"#,
            r#"{"title":"FromTitle","description":"from schema","properties":{"title":{"title":"x","type":"string"}}}"#,
            r#"{"title":5,"description":["not","a","string"],"properties":{}}"#,
            r#"{"definitions":{"a":1},"$defs":{"b":2},"anyOf":[{"title":"kept"}],"default":{"title":"x","k":[{"title":"kept"}]}}"#,
            r#"{"n":[0,-0.0,1.5e300,1e-7,1e16,123.456,18446744073709551615,-9223372036854775808,0.1]}"#,
            r#"{"type":"object"}"#,
            "{}",
            r##"{"properties":{"a":{"$ref":"#/$defs/X"}},"$defs":{"X":{"type":"integer"}}}"##,
            r##"{"items":[{"$ref":"#/items/1"},{"type":"string"}]}"##,
            "[1]",
        ];
        let mut tape = Tape::default();
        for schema in schemas {
            let value: Value = serde_json::from_str(schema).unwrap();
            for (name, description) in [("t", "desc"), ("t", ""), ("", ""), ("", "d")] {
                let mut expected = String::new();
                let plain = json_plain_schema(description, &value);
                if let Some(m) = plain {
                    write_json_function_sorted(name, description, m, &mut expected);
                }
                let mut out = String::from("kept");
                let ok = write_text_function_sorted(name, description, schema, &mut tape, &mut out);
                assert_eq!(ok, plain.is_some(), "{schema} {name:?} {description:?}");
                assert_eq!(out, format!("kept{expected}"), "{schema} {name:?} {description:?}");
            }
        }
    }

    #[test]
    fn pure_reference_cycle_becomes_empty_object() {
        let s = conv(
            "d",
            r##"{"type":"object","properties":{"node":{"$ref":"#/$defs/N"}},
                "$defs":{"N":{"type":"object","properties":{"next":{"$ref":"#/$defs/N"}}}}}"##,
        )
        .unwrap();
        assert!(s.contains(r#""next": {}"#), "{s}");
        assert!(!s.contains("$defs"), "{s}");
    }

    #[test]
    fn mixed_reference_siblings_override_and_cycle_keeps_siblings() {
        let s = conv(
            "d",
            r##"{"properties":{"a":{"$ref":"#/$defs/A","description":"mine","title":"T"}},
                "$defs":{"A":{"type":"string","description":"theirs","x":{"$ref":"#/$defs/A","k":1}}}}"##,
        )
        .unwrap();
        assert_eq!(
            s,
            r#"{"description": "d", "name": "t", "parameters": {"properties": {"a": {"description": "mine", "type": "string", "x": {"k": 1}}}}}"#
        );
    }

    #[test]
    fn unresolvable_reference_is_an_error() {
        let e = conv("d", r##"{"properties":{"a":{"$ref":"#/$defs/Missing"}}}"##).unwrap_err();
        assert!(matches!(e, ConvertError::RefNotFound { .. }), "{e}");
        assert!(e.to_string().contains("Reference '#/$defs/Missing' not found."));
        let e = conv("d", r##"{"properties":{"a":{"$ref":"http://x/y"}}}"##).unwrap_err();
        assert!(matches!(e, ConvertError::RefNotFragment { .. }));
        let e = conv("d", r##"{"properties":{"a":{"$ref":5}}}"##).unwrap_err();
        assert!(matches!(e, ConvertError::RefNotString { .. }));
    }

    #[test]
    fn list_index_references_resolve() {
        let s = conv("d", r##"{"anyOf":[{"type":"string"}],"properties":{"a":{"$ref":"#/anyOf/0"}}}"##).unwrap();
        assert!(s.contains(r#""a": {"type": "string"}"#), "{s}");
    }

    #[test]
    fn titles_removed_except_property_named_title_and_inside_lists() {
        let s = conv(
            "",
            r#"{"title":"Top","description":"from schema","properties":{"title":{"type":"string","title":"X"},
                "u":{"anyOf":[{"title":"kept","type":"string"}],"default":{"title":"gone","v":1},"title":"gone"}}}"#,
        )
        .unwrap();
        assert_eq!(
            s,
            r#"{"description": "from schema", "name": "t", "parameters": {"properties": {"title": {"type": "string"}, "u": {"anyOf": [{"title": "kept", "type": "string"}], "default": {"v": 1}}}}}"#
        );
    }

    #[test]
    fn empty_schema_and_description_gives_arg1() {
        let s = conv("", "{}").unwrap();
        assert_eq!(
            s,
            r#"{"description": "", "name": "t", "parameters": {"properties": {"__arg1": {"title": "__arg1", "type": "string"}}, "required": ["__arg1"], "type": "object"}}"#
        );
        // With a description the schema is not falsy: parameters become `{}`.
        assert_eq!(conv("d", "{}").unwrap(), r#"{"description": "d", "name": "t", "parameters": {}}"#);
    }

    #[test]
    fn exponential_reference_expansion_is_rejected() {
        let mut defs = String::from(r#""L0":{"type":"string"}"#);
        for i in 1..40 {
            let p = i - 1;
            defs.push_str(&format!(r##","L{i}":{{"a":{{"$ref":"#/$defs/L{p}"}},"b":{{"$ref":"#/$defs/L{p}"}}}}"##));
        }
        let schema = format!(r##"{{"properties":{{"x":{{"$ref":"#/$defs/L39"}}}},"$defs":{{{defs}}}}}"##);
        assert!(matches!(conv("d", &schema).unwrap_err(), ConvertError::TooLarge { .. }));
        assert!(matches!(
            convert_to_openai_function("t", "", &PyValue::Int("1".into())),
            Err(ConvertError::SchemaNotObject { .. })
        ));
    }
}
