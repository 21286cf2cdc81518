//! langchain's `convert_to_openai_function` for a tool whose args schema is a JSON-schema dict
//! (how DeerFlow's MCP tools arrive): `$ref` inlining and `$defs` removal, title stripping,
//! the description fallback and the `__arg1` case (langchain_core 1.8.3, `utils/function_calling.py`
//! and `utils/json_schema.py`).

use indexmap::IndexMap;

use crate::error::ConvertError;
use crate::pyjson::PyValue;

/// Deeper than Python's recursion limit would allow; deeper schemas are rejected.
const MAX_DEPTH: usize = 400;
/// Values produced while inlining `$ref`s; a schema that expands past this (references
/// doubling at every level) is rejected instead of exhausting memory.
const MAX_NODES: usize = 2_000_000;

/// `convert_to_openai_function(StructuredTool(name, description, args_schema=schema))`:
/// a dict `{name, description, parameters}` in that key order.
pub fn convert_to_openai_function(name: &str, description: &str, schema: &PyValue) -> Result<PyValue, ConvertError> {
    let tool = || name.to_string();
    let schema = schema.as_dict().ok_or_else(|| ConvertError::SchemaNotObject { tool: tool() })?;

    // `BaseTool.tool_call_schema` for a dict args_schema: the tool description overrides the
    // schema's (and a `$ref` to `#/description` sees it).
    let mut call_schema = schema.clone();
    if !description.is_empty() {
        call_schema.insert("description".to_string(), PyValue::Str(description.to_string()));
    }

    let mut out = IndexMap::with_capacity(3);
    if call_schema.is_empty() {
        // A falsy tool_call_schema takes langchain's single-string-argument branch, titles kept.
        let mut arg1 = IndexMap::new();
        arg1.insert("title".to_string(), PyValue::Str("__arg1".to_string()));
        arg1.insert("type".to_string(), PyValue::Str("string".to_string()));
        let mut props = IndexMap::new();
        props.insert("__arg1".to_string(), PyValue::Dict(arg1));
        let mut params = IndexMap::new();
        params.insert("properties".to_string(), PyValue::Dict(props));
        params.insert("required".to_string(), PyValue::List(vec![PyValue::Str("__arg1".to_string())]));
        params.insert("type".to_string(), PyValue::Str("object".to_string()));
        out.insert("name".to_string(), PyValue::Str(name.to_string()));
        out.insert("description".to_string(), PyValue::Str(description.to_string()));
        out.insert("parameters".to_string(), PyValue::Dict(params));
        return Ok(PyValue::Dict(out));
    }

    let full = PyValue::Dict(call_schema);
    let mut deref = Deref { full: &full, tool: name, active: Vec::new(), nodes: 0 };
    let resolved = deref.value(&full, 0)?;
    let PyValue::Dict(mut resolved) = resolved else {
        return Err(ConvertError::ResolvedNotObject { tool: tool() });
    };
    resolved.shift_remove("definitions");
    resolved.shift_remove("$defs");
    let title = resolved.shift_remove("title").unwrap_or_else(|| PyValue::Str(String::new()));
    let default_description = resolved.shift_remove("description").unwrap_or_else(|| PyValue::Str(String::new()));

    out.insert("name".to_string(), if name.is_empty() { title } else { PyValue::Str(name.to_string()) });
    out.insert(
        "description".to_string(),
        if description.is_empty() { default_description } else { PyValue::Str(description.to_string()) },
    );
    out.insert("parameters".to_string(), PyValue::Dict(rm_titles(&resolved, "")));
    Ok(PyValue::Dict(out))
}

/// `_rm_titles`: drop every `title` key of a dict, except a dict-valued one directly under
/// `properties` (a property named "title"); lists are not entered.
fn rm_titles(kv: &IndexMap<String, PyValue>, prev_key: &str) -> IndexMap<String, PyValue> {
    let mut out = IndexMap::with_capacity(kv.len());
    for (k, v) in kv {
        match v {
            PyValue::Dict(d) if k == "title" && prev_key == "properties" => {
                out.insert(k.clone(), PyValue::Dict(rm_titles(d, k)));
            }
            _ if k == "title" => {}
            PyValue::Dict(d) => {
                out.insert(k.clone(), PyValue::Dict(rm_titles(d, k)));
            }
            other => {
                out.insert(k.clone(), other.clone());
            }
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
    ) -> Result<IndexMap<String, PyValue>, ConvertError> {
        let mut out = IndexMap::new();
        for (k, v) in items {
            let nv = match v {
                _ if k == "$defs" => {
                    self.count(v)?;
                    v.clone()
                }
                PyValue::Dict(_) | PyValue::List(_) => self.value(v, depth + 1)?,
                other => other.clone(),
            };
            out.insert(k.clone(), nv);
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

    fn reference(
        &mut self,
        obj: &IndexMap<String, PyValue>,
        r: &PyValue,
        depth: usize,
    ) -> Result<PyValue, ConvertError> {
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
            _ => IndexMap::new(),
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
