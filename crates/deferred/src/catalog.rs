//! DeerFlow's `DeferredToolCatalog`: the deferred tools in catalog order, their OpenAI function
//! form, `catalog_hash`, and `search` with the `select:` / `+required rest` / regex grammar.
//! Everything a search needs per tool is computed once when the catalog is built.

use std::collections::HashSet;

use sha2::{Digest, Sha256};
use toolhost_core::ToolSpec;

use crate::convert::convert_to_openai_function;
use crate::error::ConvertError;
use crate::pyjson::{write_py_str, PyValue};
use crate::pyre::CatalogRegex;
use crate::pystr::{py_lower, py_split_once_ws, py_strip};

/// DeerFlow's `MAX_RESULTS`.
pub const MAX_RESULTS: usize = 5;

/// A tool as the catalog receives it: name, the tool's own description, and its input schema.
#[derive(Debug, Clone, PartialEq)]
pub struct DeferredToolInput {
    pub name: String,
    pub description: String,
    pub schema: PyValue,
}

impl DeferredToolInput {
    /// From a tool spec. Numbers in `spec.parameters` are as exact as serde_json kept them
    /// (integers beyond u64 arrive as floats); use [`DeferredToolInput::from_schema_text`]
    /// when the schema's JSON text is at hand.
    pub fn from_spec(spec: &ToolSpec) -> Self {
        Self {
            name: spec.name.clone(),
            description: spec.description.clone(),
            schema: PyValue::from_json(&spec.parameters),
        }
    }

    /// From the schema's JSON text as the MCP server sent it: every number kept exactly.
    pub fn from_schema_text(name: &str, description: &str, schema_json: &str) -> Result<Self, ConvertError> {
        let schema =
            PyValue::parse(schema_json).map_err(|source| ConvertError::Json { tool: name.to_string(), source })?;
        Ok(Self { name: name.to_string(), description: description.to_string(), schema })
    }
}

/// One catalog entry with what search and hashing need, precomputed.
#[derive(Debug, Clone)]
pub struct CatalogTool {
    pub name: String,
    pub description: String,
    /// `convert_to_openai_function(tool)`: `{name, description, parameters}`.
    pub function: PyValue,
    /// `f"{name} {description}"`, the text regex queries run over.
    searchable: String,
    name_lower: String,
}

impl CatalogTool {
    /// This tool's function as one element of `json.dumps([...], indent=2)`.
    fn write_content_item(&self, out: &mut String) {
        out.push_str("\n  ");
        self.function.write_indented(out, 1);
    }
}

/// An immutable catalog of deferred tools.
#[derive(Debug, Clone)]
pub struct DeferredCatalog {
    tools: Vec<CatalogTool>,
    names: HashSet<String>,
    hash: String,
}

impl DeferredCatalog {
    /// Convert every tool and compute the hash. Fails, as DeerFlow's hashing does, when a
    /// schema cannot be converted (e.g. an unresolvable `$ref`).
    pub fn new(tools: impl IntoIterator<Item = DeferredToolInput>) -> Result<Self, ConvertError> {
        let tools = tools
            .into_iter()
            .map(|t| {
                let function = convert_to_openai_function(&t.name, &t.description, &t.schema)?;
                Ok(CatalogTool {
                    searchable: format!("{} {}", t.name, t.description),
                    name_lower: py_lower(&t.name),
                    name: t.name,
                    description: t.description,
                    function,
                })
            })
            .collect::<Result<Vec<_>, ConvertError>>()?;
        let names = tools.iter().map(|t| t.name.clone()).collect();
        let mut catalog = Self { tools, names, hash: String::new() };
        catalog.hash = hex::encode(&Sha256::digest(catalog.hash_blob().as_bytes())[..8]);
        Ok(catalog)
    }

    /// A catalog of tool specs (see [`DeferredToolInput::from_spec`] on number precision).
    pub fn from_specs<'a>(specs: impl IntoIterator<Item = &'a ToolSpec>) -> Result<Self, ConvertError> {
        Self::new(specs.into_iter().map(DeferredToolInput::from_spec))
    }

    /// `catalog_hash`: first 16 hex of sha256 over [`Self::hash_blob`].
    pub fn hash(&self) -> &str {
        &self.hash
    }

    pub fn names(&self) -> &HashSet<String> {
        &self.names
    }

    pub fn tools(&self) -> &[CatalogTool] {
        &self.tools
    }

    pub fn len(&self) -> usize {
        self.tools.len()
    }

    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }

    /// The exact text DeerFlow hashes: `json.dumps([{"name", "schema"} sorted by name],
    /// sort_keys=True, ensure_ascii=False)`.
    pub fn hash_blob(&self) -> String {
        let mut order: Vec<&CatalogTool> = self.tools.iter().collect();
        // Stable, by code point (byte order of UTF-8), like Python's `sorted(key=name)`.
        order.sort_by(|a, b| a.name.cmp(&b.name));
        let mut out = String::with_capacity(self.tools.len() * 256);
        out.push('[');
        for (i, t) in order.into_iter().enumerate() {
            if i > 0 {
                out.push_str(", ");
            }
            out.push_str("{\"name\": ");
            write_py_str(&t.name, &mut out);
            out.push_str(", \"schema\": ");
            t.function.write_sorted(&mut out);
            out.push('}');
        }
        out.push(']');
        out
    }

    /// `DeferredToolCatalog.search(query)`: matching tools, in result order.
    pub fn search(&self, query: &str) -> Vec<&CatalogTool> {
        let query = py_strip(query);
        if query.is_empty() {
            return Vec::new();
        }
        if let Some(list) = query.strip_prefix("select:") {
            // Uncapped, catalog order, unknown names ignored.
            let wanted: HashSet<&str> = list.split(',').map(py_strip).collect();
            return self.tools.iter().filter(|t| wanted.contains(t.name.as_str())).collect();
        }
        if let Some(rest) = query.strip_prefix('+') {
            let Some((required, rest)) = py_split_once_ws(rest) else {
                return Vec::new();
            };
            let required = py_lower(required);
            let mut candidates: Vec<&CatalogTool> =
                self.tools.iter().filter(|t| t.name_lower.contains(required.as_str())).collect();
            if let Some(rest) = rest {
                let re = CatalogRegex::compile(rest);
                let mut scored: Vec<(usize, &CatalogTool)> =
                    candidates.into_iter().map(|t| (re.count(&t.searchable), t)).collect();
                // Stable sort, descending, as `list.sort(key=…, reverse=True)`.
                scored.sort_by_key(|s| std::cmp::Reverse(s.0));
                candidates = scored.into_iter().map(|(_, t)| t).collect();
            }
            candidates.truncate(MAX_RESULTS);
            return candidates;
        }
        let re = CatalogRegex::compile(query);
        let mut best: Vec<&CatalogTool> = Vec::new();
        let mut rest: Vec<&CatalogTool> = Vec::new();
        for t in &self.tools {
            // Enough score-2 hits fill the result; score-1 hits are only needed until then.
            if best.len() >= MAX_RESULTS {
                break;
            }
            if re.is_match(&t.searchable) {
                if re.is_match(&t.name) {
                    best.push(t);
                } else if rest.len() < MAX_RESULTS {
                    rest.push(t);
                }
            }
        }
        best.extend(rest);
        best.truncate(MAX_RESULTS);
        best
    }

    /// The `tool_search` content for a non-empty result:
    /// `json.dumps([functions], indent=2, ensure_ascii=False)`.
    pub fn render_content(tools: &[&CatalogTool]) -> String {
        if tools.is_empty() {
            return "[]".to_string();
        }
        let mut out = String::from("[");
        for (i, t) in tools.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            t.write_content_item(&mut out);
        }
        out.push_str("\n]");
        out
    }
}
