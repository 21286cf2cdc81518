//! DeerFlow's `DeferredToolCatalog`: the deferred tools in catalog order, their OpenAI function
//! form, `catalog_hash`, and `search` with the `select:` / `+required rest` / regex grammar.
//! Everything a search needs per tool is computed once when the catalog is built.

use std::collections::{HashMap, HashSet};
use std::ops::Deref;
use std::sync::{Arc, Mutex, OnceLock};

use memchr::memmem;

use sha2::{Digest, Sha256};
use toolhost_core::{Tool, ToolSpec};

use serde_json::Value;

use crate::chunks::{map_chunks, Split};
use crate::convert::{
    convert_tool, json_plain_schema, write_json_function_sorted, write_text_function_sorted, OpenAiFunction,
};
use crate::error::ConvertError;
use toolhost_py::json::text::Tape;
use toolhost_py::json::{write_json_compact, write_py_str, PyValue};
use toolhost_py::re::CatalogRegex;
use toolhost_py::str_methods::{py_lower, py_split_once_ws, py_strip};

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

    /// From a tool spec whose schema is given exactly (see [`toolhost_core::Tool::exact_parameters`]).
    pub fn from_spec_with_schema(spec: &ToolSpec, schema: PyValue) -> Self {
        Self { name: spec.name.clone(), description: spec.description.clone(), schema }
    }

    /// From the schema's JSON text as the MCP server sent it: every number kept exactly.
    pub fn from_schema_text(name: &str, description: &str, schema_json: &str) -> Result<Self, ConvertError> {
        let schema =
            PyValue::parse(schema_json).map_err(|source| ConvertError::Json { tool: name.to_string(), source })?;
        Ok(Self { name: name.to_string(), description: description.to_string(), schema })
    }
}

/// A tool as the catalog receives it: already parsed ([`DeferredToolInput`]), or borrowed as the
/// host has it, a `serde_json` schema (an MCP tool's `ToolSpec::parameters`).
///
/// A `Json` or `Tool` schema without `$ref` (nearly every MCP tool's) is rendered into the hash
/// blob straight from the `serde_json` value, with Python's rules (integers as their digits,
/// floats as `repr`, keys sorted by code point), and converted into its [`OpenAiFunction`] only
/// when a search returns it: from the tool itself (`Tool`), or from the schema's compact text the
/// catalog keeps (`Json`). A `Tool` that keeps its schema's text ([`Tool::parameters_text`], as
/// MCP tools do) is rendered from that text instead, in one linear pass
/// (`toolhost_py::json::text`), unless the text is off that writer's path. Any other schema takes
/// the `PyValue` path (`PyValue::from_json`, then the conversion). All give the same hash and
/// functions (tested).
#[derive(Clone)]
pub enum CatalogSource<'a> {
    Parsed(DeferredToolInput),
    Json {
        name: &'a str,
        description: &'a str,
        schema: &'a Value,
    },
    /// A tool as the host holds it: its spec's `serde_json` schema, or its exact schema when it
    /// has one ([`Tool::exact_parameters`]: integers beyond 64 bits keep their digits).
    Tool(Arc<dyn Tool>),
}

impl std::fmt::Debug for CatalogSource<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Parsed(t) => f.debug_tuple("Parsed").field(t).finish(),
            Self::Json { name, description, schema } => f
                .debug_struct("Json")
                .field("name", name)
                .field("description", description)
                .field("schema", schema)
                .finish(),
            Self::Tool(t) => f.debug_tuple("Tool").field(&t.spec().name).finish(),
        }
    }
}

impl<'a> CatalogSource<'a> {
    /// A tool spec's name, description and `serde_json` schema (see
    /// [`DeferredToolInput::from_spec`] on number precision).
    pub fn from_spec(spec: &'a ToolSpec) -> Self {
        Self::Json { name: &spec.name, description: &spec.description, schema: &spec.parameters }
    }
}

impl From<DeferredToolInput> for CatalogSource<'_> {
    fn from(t: DeferredToolInput) -> Self {
        Self::Parsed(t)
    }
}

/// One catalog entry: the tool's name, its own description, and its function.
///
/// The name and description are read where the tool already holds them (the tool itself, or
/// the schema texts the catalog kept), not copied for each catalog built.
#[derive(Debug, Clone)]
pub struct CatalogTool {
    /// `convert_to_openai_function(tool)`: `{name, description, parameters}`.
    pub function: CatalogFunction,
}

impl CatalogTool {
    /// The tool's name.
    pub fn name(&self) -> &str {
        match &self.function.0 {
            FunctionRepr::Converted { name, .. } => name,
            FunctionRepr::FromTool { tool, .. } => &tool.spec().name,
            FunctionRepr::FromText { text, b, .. } => &text[b[0]..b[1]],
        }
    }

    /// The tool's own description (what search matches; the function's description can differ,
    /// e.g. when the tool has none and the schema's is taken).
    pub fn description(&self) -> &str {
        match &self.function.0 {
            FunctionRepr::Converted { description, .. } => description,
            FunctionRepr::FromTool { tool, .. } => &tool.spec().description,
            FunctionRepr::FromText { text, b, .. } => &text[b[1]..b[2]],
        }
    }
}

/// A tool's `convert_to_openai_function` result (dereferences to [`OpenAiFunction`]): converted
/// when the catalog was built, or, for a tool whose hash entry was rendered straight from its
/// `serde_json` schema, converted on first use from the schema's compact text the catalog kept.
#[derive(Debug, Clone)]
pub struct CatalogFunction(FunctionRepr);

#[derive(Clone)]
enum FunctionRepr {
    /// Converted when the catalog was built, with the tool's name and own description.
    Converted { name: String, description: String, function: OpenAiFunction },
    /// Converted on first use from the tool's spec.
    FromTool { tool: Arc<dyn Tool>, function: OnceLock<OpenAiFunction> },
    /// `text[b[0]..b[1]]` is the name, `text[b[1]..b[2]]` the description, `text[b[2]..b[3]]` the
    /// schema as `json.dumps` writes it (insertion order), which reads back as
    /// `PyValue::from_json` of the schema.
    FromText { text: Arc<String>, b: [usize; 4], function: OnceLock<OpenAiFunction> },
}

impl std::fmt::Debug for FunctionRepr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Converted { function, .. } => f.debug_tuple("Converted").field(function).finish(),
            Self::FromTool { tool, function } => {
                f.debug_struct("FromTool").field("tool", &tool.spec().name).field("function", function).finish()
            }
            Self::FromText { b, function, .. } => {
                f.debug_struct("FromText").field("bounds", b).field("function", function).finish()
            }
        }
    }
}

impl CatalogFunction {
    /// Whether the function has been converted (always, unless it was rendered from a
    /// `serde_json` schema and not needed since).
    pub fn is_converted(&self) -> bool {
        match &self.0 {
            FunctionRepr::Converted { .. } => true,
            FunctionRepr::FromText { function, .. } | FunctionRepr::FromTool { function, .. } => {
                function.get().is_some()
            }
        }
    }
}

impl Deref for CatalogFunction {
    type Target = OpenAiFunction;

    fn deref(&self) -> &OpenAiFunction {
        match &self.0 {
            FunctionRepr::Converted { function, .. } => function,
            FunctionRepr::FromTool { tool, function } => function.get_or_init(|| {
                let spec = tool.spec();
                convert_tool(&spec.name, &spec.description, PyValue::from_json(&spec.parameters))
                    .expect("a $ref-free object schema converts")
            }),
            FunctionRepr::FromText { text, b, function } => function.get_or_init(|| {
                let schema =
                    PyValue::parse(&text[b[2]..b[3]]).expect("a schema's compact text, written by the catalog, parses");
                convert_tool(&text[b[0]..b[1]], &text[b[1]..b[2]], schema).expect("a $ref-free object schema converts")
            }),
        }
    }
}

impl CatalogTool {
    /// This tool's function as one element of `json.dumps([...], indent=2)`.
    fn write_content_item(&self, out: &mut String) {
        out.push_str("\n  ");
        self.function.write_indented(out, 1);
    }
}

/// Texts joined with `'\n'` so that one regex scan covers them all, with each text's byte span.
/// The separator is a non-word character, so `\b` behaves at a span's edges as at a text's.
#[derive(Debug, Clone, Default)]
struct Joined {
    text: String,
    spans: Vec<(usize, usize)>,
}

impl Joined {
    fn new<'a>(texts: impl IntoIterator<Item = &'a str>) -> Self {
        let mut j = Joined::default();
        for t in texts {
            j.push(t, None);
        }
        j
    }

    /// Append one entry: `head`, or `"{head} {tail}"`.
    fn push(&mut self, head: &str, tail: Option<&str>) {
        if !self.spans.is_empty() {
            self.text.push('\n');
        }
        let start = self.text.len();
        self.text.push_str(head);
        if let Some(tail) = tail {
            self.text.push(' ');
            self.text.push_str(tail);
        }
        self.spans.push((start, self.text.len()));
    }

    /// The entry whose span (or the separator right after it) holds byte `pos`.
    fn entry_at(&self, pos: usize) -> usize {
        self.spans.partition_point(|s| s.0 <= pos).saturating_sub(1)
    }

    fn entry(&self, i: usize) -> &str {
        let (start, end) = self.spans[i];
        &self.text[start..end]
    }

    /// Call `f(i)` for each entry `i` the regex matches (`re.search(text_i)`), in order, until
    /// `f` returns false. A match that runs past its entry is re-checked on the entry alone.
    fn for_each_match(&self, re: &CatalogRegex, mut f: impl FnMut(usize) -> bool) {
        if self.spans.is_empty() {
            return; // an empty match in the empty text belongs to no entry
        }
        let mut pos = 0;
        while pos <= self.text.len() {
            let Some((start, end)) = re.find_at(&self.text, pos) else { break };
            let e = self.entry_at(start);
            let span_end = self.spans[e].1;
            let hit = end <= span_end || re.is_match(self.entry(e));
            if hit && !f(e) {
                break;
            }
            pos = span_end + 1;
        }
    }

    /// `len(re.findall(text_i))` for every entry.
    fn counts(&self, re: &CatalogRegex) -> Vec<usize> {
        let mut counts = vec![0; self.spans.len()];
        if self.spans.is_empty() {
            return counts;
        }
        let mut pos = 0;
        while pos <= self.text.len() {
            let Some((start, end)) = re.find_at(&self.text, pos) else { break };
            let e = self.entry_at(start);
            let span_end = self.spans[e].1;
            if end > span_end {
                counts[e] = re.count(self.entry(e));
                pos = span_end + 1;
                continue;
            }
            counts[e] += 1;
            pos = if end > start {
                end
            } else if end >= span_end {
                span_end + 1
            } else {
                end + self.text[end..].chars().next().map_or(1, char::len_utf8)
            };
        }
        counts
    }
}

/// Whether `text` holds a character that the regex engine's `\w` and Python's `\w`
/// (letters, numbers, `_`) class differently. ASCII is classed alike.
fn word_chars_differ(text: &str) -> bool {
    let (Ok(engine), Ok(python)) = (fancy_regex::Regex::new(r"^\w$"), fancy_regex::Regex::new(r"^[\p{L}\p{N}_]$"))
    else {
        return true; // cannot tell: take the exact spelling
    };
    let mut seen = HashSet::new();
    let mut buf = [0u8; 4];
    text.chars().filter(|c| !c.is_ascii()).any(|c| {
        if !seen.insert(c) {
            return false;
        }
        let c = c.encode_utf8(&mut buf);
        engine.is_match(c).unwrap_or(false) != python.is_match(c).unwrap_or(false)
    })
}

/// An immutable catalog of deferred tools.
///
/// Building one converts every tool and renders each tool's entry of DeerFlow's hash blob once,
/// in catalog order, into pooled 64 KiB buffers; the hash is then taken over the entries in name
/// order, straight from those buffers, without copying them into one blob. Each tool's entry
/// stays a span of its buffer, so [`DeferredCatalog::rebuild`] renders only the tools that
/// changed and shares the buffers of the kept ones. The search indexes are built on the first search: most catalogs are built far
/// more often than searched.
#[derive(Debug, Clone)]
pub struct DeferredCatalog {
    tools: Vec<CatalogTool>,
    /// The tools' names: built beside the hash for a large catalog with a core free, else when
    /// asked for.
    name_set: OnceLock<Arc<HashSet<String>>>,
    hash: String,
    /// The buffers holding the tools' rendered entries of the hash blob, `json.dumps([{"name",
    /// "schema"} sorted by name], sort_keys=True, ensure_ascii=False)` (shared with the catalogs
    /// this one was rebuilt from or into).
    rendered: Vec<Arc<Block>>,
    /// Positions of the tools in blob (name) order.
    order: Vec<usize>,
    /// Per tool, in catalog order: its entry's buffer in `rendered` and byte span there.
    spans: Vec<Span>,
    /// The tools' names, in catalog order, side by side: what sorting, `select:` and the
    /// setup's name set read, without visiting each tool again.
    names: Names,
    index: OnceLock<SearchIndex>,
    /// Compiled queries, as Python's `re` module caches compiled patterns.
    regex_cache: Arc<Mutex<HashMap<String, Arc<CatalogRegex>>>>,
}

/// What a search needs per tool, computed once.
#[derive(Debug, Clone)]
struct SearchIndex {
    /// Every tool's `"{name} {description}"`.
    searchable: Joined,
    /// Every tool's lowercased name.
    names_lower: Joined,
    /// Some searchable character is a word character for the regex engine but not for Python
    /// or the reverse; `\b` then needs the exact (slower) spelling.
    word_chars_differ: bool,
}

impl SearchIndex {
    fn new(tools: &[CatalogTool]) -> Self {
        // `f"{name} {description}"`, the text regex queries run over, for every tool.
        let mut searchable = Joined::default();
        let mut names_lower = Joined::default();
        for t in tools {
            let name = t.name();
            searchable.push(name, Some(t.description()));
            if name.bytes().all(|b| b.is_ascii() && !b.is_ascii_uppercase()) {
                names_lower.push(name, None);
            } else {
                names_lower.push(&py_lower(name), None);
            }
        }
        let word_chars_differ = word_chars_differ(&searchable.text);
        Self { searchable, names_lower, word_chars_differ }
    }
}

/// Compiled queries kept per catalog before the cache starts over.
const REGEX_CACHE_SIZE: usize = 256;

/// A tool's rendered entry: `(buffer, start, end)`.
type Span = (usize, usize, usize);

/// Bytes of blob rendered between two hasher updates: few enough to still be in cache.
const HASH_STEP: usize = 64 * 1024;

/// Bytes of entries gathered between two hasher updates when hashing entries where they are.
const STAGE: usize = 16 * 1024;

/// Bytes per buffer of rendered entries: under the allocator's threshold for mapping fresh pages
/// (glibc: 128 KiB), so that a build reuses the memory earlier builds freed instead of faulting
/// in new pages for one large buffer.
const BLOCK: usize = 64 * 1024;

impl DeferredCatalog {
    /// Convert every tool and compute the hash. Fails, as DeerFlow's hashing does, when a
    /// schema cannot be converted (e.g. an unresolvable `$ref`).
    pub fn new(tools: impl IntoIterator<Item = DeferredToolInput>) -> Result<Self, ConvertError> {
        Self::from_sources(tools.into_iter().map(CatalogSource::Parsed))
    }

    /// [`DeferredCatalog::new`] from tools parsed or as `serde_json` schemas (see
    /// [`CatalogSource`]): the same catalog and hash either way.
    pub fn from_sources<'a>(tools: impl IntoIterator<Item = CatalogSource<'a>>) -> Result<Self, ConvertError> {
        Self::from_sources_split(tools, None)
    }

    /// [`DeferredCatalog::from_sources`], rendering on the threads `split` asks for (`None`:
    /// as many as pay for this many tools on this machine).
    fn from_sources_split<'a>(
        tools: impl IntoIterator<Item = CatalogSource<'a>>,
        split: Option<Split>,
    ) -> Result<Self, ConvertError> {
        // Each tool is rendered right after its conversion (or its `$ref` check) walked its
        // schema, while that is still in cache, in catalog order (rendering in name order was
        // tried: walking the schemas out of their order in memory cost more than it saved).
        let Rendered { bufs, spans, tools, names } = render_sources(tools.into_iter().collect(), split)?;
        Ok(Self::assemble(tools, bufs, spans, names))
    }

    /// The catalog of this one's tools that `keep` accepts (in this catalog's order) followed by
    /// `added`: what [`DeferredCatalog::new`] builds from those tools (tested), in a fraction of
    /// its time when few tools change, as when one MCP server's tools change
    /// (`tools/list_changed`): a kept tool is neither converted nor rendered again, its entry is
    /// copied from this catalog's blob; only the added tools are converted and rendered.
    pub fn rebuild(
        self,
        keep: impl FnMut(&CatalogTool) -> bool,
        added: impl IntoIterator<Item = DeferredToolInput>,
    ) -> Result<Self, ConvertError> {
        self.rebuild_from_sources(keep, added.into_iter().map(CatalogSource::Parsed))
    }

    /// [`DeferredCatalog::rebuild`] with the added tools parsed or as `serde_json` schemas.
    pub fn rebuild_from_sources<'a>(
        self,
        mut keep: impl FnMut(&CatalogTool) -> bool,
        added: impl IntoIterator<Item = CatalogSource<'a>>,
    ) -> Result<Self, ConvertError> {
        let Self { tools: old_tools, rendered: mut buffers, spans: old_spans, names: old_names, .. } = self;
        let mut tools: Vec<CatalogTool> = Vec::with_capacity(old_tools.len());
        let mut spans: Vec<Span> = Vec::with_capacity(old_tools.len());
        let mut names = Names::default();
        for (i, (tool, span)) in old_tools.into_iter().zip(old_spans).enumerate() {
            if keep(&tool) {
                spans.push(span);
                names.push(old_names.get(i));
                tools.push(tool);
            }
        }
        render_sources(added.into_iter().collect(), None)?.append_to(&mut tools, &mut buffers, &mut spans, &mut names);
        // Kept entries stay in the buffers they were rendered into; once those hold more bytes
        // of dropped entries than of live ones, the live ones are copied into fresh buffers.
        let live: usize = spans.iter().map(|&(_, s, e)| e - s).sum();
        let held: usize = buffers.iter().map(|b| b.0.len()).sum();
        if held > 2 * live + BLOCK {
            let mut blocks = Blocks::default();
            for span in &mut spans {
                let entry = &buffers[span.0].0[span.1..span.2];
                *span = blocks.push(|out| out.push_str(entry)).1;
            }
            buffers = blocks.finish();
        }
        Ok(Self::assemble(tools, buffers, spans, names))
    }

    /// The catalog of converted `tools` whose entries are at `spans` in `rendered`: their name
    /// order and the hash. A large catalog builds its name set (which the setup made from it
    /// asks for next) on a second thread meanwhile.
    fn assemble(tools: Vec<CatalogTool>, rendered: Vec<Arc<Block>>, spans: Vec<Span>, names: Names) -> Self {
        let order_and_hash = || {
            let order = name_order(&names);
            let hash = hash_entries(&order, |i| {
                let (b, s, e) = spans[i];
                &rendered[b].0[s..e]
            });
            (order, hash)
        };
        let name_set = OnceLock::new();
        let (order, hash) = if Split::for_machine(names.len(), PARALLEL_MIN_TOOLS, 2, 1).workers > 1 {
            std::thread::scope(|scope| {
                let set = scope.spawn(|| name_set_of(&names));
                let order_and_hash = order_and_hash();
                let _ = name_set.set(set.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic)));
                order_and_hash
            })
        } else {
            order_and_hash()
        };
        Self {
            tools,
            name_set,
            hash,
            rendered,
            order,
            spans,
            names,
            index: OnceLock::new(),
            regex_cache: Arc::default(),
        }
    }

    /// A catalog of tool specs (see [`DeferredToolInput::from_spec`] on number precision).
    pub fn from_specs<'a>(specs: impl IntoIterator<Item = &'a ToolSpec>) -> Result<Self, ConvertError> {
        Self::from_sources(specs.into_iter().map(CatalogSource::from_spec))
    }

    /// Recompute the hash from the converted functions, rendering every entry afresh (what
    /// construction stores in `hash`).
    pub fn compute_hash(&self) -> String {
        render_and_hash(&self.order, |i, out| render_entry(&self.tools[i], out))
    }

    /// `catalog_hash`: first 16 hex of sha256 over [`Self::hash_blob`].
    pub fn hash(&self) -> &str {
        &self.hash
    }

    pub fn names(&self) -> &HashSet<String> {
        self.name_set()
    }

    /// The tools' names, shared (what a [`crate::DeferredToolSetup`] keeps).
    pub fn name_set(&self) -> &Arc<HashSet<String>> {
        self.name_set.get_or_init(|| name_set_of(&self.names))
    }

    /// The tools' names in catalog order (as `tools()[i].name()`), read side by side.
    pub fn tool_names(&self) -> impl ExactSizeIterator<Item = &str> + '_ {
        (0..self.names.len()).map(|i| self.names.get(i))
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
        let len = self.spans.iter().map(|&(_, s, e)| e - s + 2).sum::<usize>();
        let mut blob = String::with_capacity(len + 2);
        blob.push('[');
        for (k, &i) in self.order.iter().enumerate() {
            if k > 0 {
                blob.push_str(", ");
            }
            blob.push_str(self.entry(i));
        }
        blob.push(']');
        blob
    }

    /// Tool `i`'s entry of the hash blob.
    fn entry(&self, i: usize) -> &str {
        let (b, s, e) = self.spans[i];
        &self.rendered[b].0[s..e]
    }

    /// Positions of the tools named `name` (catalog order among them), from the name order.
    fn named(&self, name: &str) -> &[usize] {
        let first = self.order.partition_point(|&i| self.names.get(i) < name);
        let len = self.order[first..].iter().take_while(|&&i| self.names.get(i) == name).count();
        &self.order[first..first + len]
    }

    fn index(&self) -> &SearchIndex {
        self.index.get_or_init(|| SearchIndex::new(&self.tools))
    }

    /// `DeferredToolCatalog.search(query)`: matching tools, in result order.
    pub fn search(&self, query: &str) -> Vec<&CatalogTool> {
        let query = py_strip(query);
        if query.is_empty() {
            return Vec::new();
        }
        if let Some(list) = query.strip_prefix("select:") {
            // Uncapped, catalog order, unknown names ignored.
            let mut hits: Vec<usize> = list.split(',').map(py_strip).flat_map(|n| self.named(n)).copied().collect();
            hits.sort_unstable();
            hits.dedup();
            return hits.into_iter().map(|i| &self.tools[i]).collect();
        }
        if let Some(rest) = query.strip_prefix('+') {
            let Some((required, rest)) = py_split_once_ws(rest) else {
                return Vec::new();
            };
            let mut candidates = self.name_contains(&py_lower(required));
            if let Some(rest) = rest {
                let re = self.compile(rest);
                let searchable = &self.index().searchable;
                let counts: Vec<usize> = if re.is_context_sensitive() {
                    candidates.iter().map(|&i| re.count(searchable.entry(i))).collect()
                } else {
                    Joined::new(candidates.iter().map(|&i| searchable.entry(i))).counts(&re)
                };
                let mut scored: Vec<(usize, usize)> = counts.into_iter().zip(candidates).collect();
                // Stable sort, descending, as `list.sort(key=…, reverse=True)`.
                scored.sort_by_key(|s| std::cmp::Reverse(s.0));
                candidates = scored.into_iter().map(|(_, i)| i).collect();
            }
            candidates.truncate(MAX_RESULTS);
            return candidates.into_iter().map(|i| &self.tools[i]).collect();
        }
        let re = self.compile(query);
        // Score 2 (the name matches too) before score 1, each in catalog order; enough score-2
        // hits end the scan.
        let mut best: Vec<&CatalogTool> = Vec::new();
        let mut rest: Vec<&CatalogTool> = Vec::new();
        let mut take = |i: usize| {
            let t = &self.tools[i];
            if re.is_match(t.name()) {
                best.push(t);
            } else if rest.len() < MAX_RESULTS {
                rest.push(t);
            }
            best.len() < MAX_RESULTS
        };
        let searchable = &self.index().searchable;
        if let Some(bytes) = re.required_bytes() {
            // A literal query: only texts holding its caseless run can match; verify those.
            let mut last = usize::MAX;
            for pos in memmem::find_iter(searchable.text.as_bytes(), bytes.as_bytes()) {
                let i = searchable.entry_at(pos);
                if i != last {
                    last = i;
                    if re.is_match(searchable.entry(i)) && !take(i) {
                        break;
                    }
                }
            }
        } else if re.is_context_sensitive() {
            for i in 0..self.tools.len() {
                if re.is_match(searchable.entry(i)) && !take(i) {
                    break;
                }
            }
        } else {
            searchable.for_each_match(&re, take);
        }
        best.extend(rest);
        best.truncate(MAX_RESULTS);
        best
    }

    /// `_compile_catalog_regex(pattern)` for this catalog's texts, cached.
    fn compile(&self, pattern: &str) -> Arc<CatalogRegex> {
        let mut cache = self.regex_cache.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(re) = cache.get(pattern) {
            return re.clone();
        }
        if cache.len() >= REGEX_CACHE_SIZE {
            cache.clear();
        }
        let re = Arc::new(CatalogRegex::compile_with(pattern, self.index().word_chars_differ));
        cache.insert(pattern.to_string(), re.clone());
        re
    }

    /// Positions of tools whose lowercased name contains `needle`, in catalog order.
    fn name_contains(&self, needle: &str) -> Vec<usize> {
        let names_lower = &self.index().names_lower;
        let mut hits: Vec<usize> = Vec::new();
        for pos in memmem::find_iter(names_lower.text.as_bytes(), needle.as_bytes()) {
            let e = names_lower.entry_at(pos);
            // The needle has no whitespace, so it never spans the '\n' between two names.
            if hits.last() != Some(&e) {
                hits.push(e);
            }
        }
        hits
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

/// Tool positions by name, stable (catalog order among equal names), by code point (the byte
/// order of UTF-8), like Python's `sorted(key=name)`. Each name's first 32 bytes are sorted as
/// two numbers held in the keys themselves (no name is read while sorting); only names whose 32
/// bytes tie (longer names, or names that differ only by trailing NULs) are compared whole.
fn name_order(names: &Names) -> Vec<usize> {
    let prefix = |name: &[u8], at: usize| {
        let mut b = [0u8; 16];
        let part = name.get(at..).unwrap_or_default();
        let n = part.len().min(16);
        b[..n].copy_from_slice(&part[..n]);
        u128::from_be_bytes(b)
    };
    let mut keyed: Vec<(u128, u128, usize)> = (0..names.len())
        .map(|i| {
            let name = names.get(i).as_bytes();
            (prefix(name, 0), prefix(name, 16), i)
        })
        .collect();
    keyed.sort_unstable();
    let mut start = 0;
    while start < keyed.len() {
        let (a, b, _) = keyed[start];
        let end = start + keyed[start..].iter().take_while(|k| k.0 == a && k.1 == b).count();
        if end - start > 1 {
            keyed[start..end].sort_by(|x, y| names.get(x.2).cmp(names.get(y.2)).then(x.2.cmp(&y.2)));
        }
        start = end;
    }
    keyed.into_iter().map(|(_, _, i)| i).collect()
}

/// The set of `names`.
fn name_set_of(names: &Names) -> Arc<HashSet<String>> {
    Arc::new((0..names.len()).map(|i| names.get(i).to_string()).collect())
}

/// Names side by side in one text: `text[ends[i - 1]..ends[i]]` is name `i`.
#[derive(Debug, Clone, Default)]
struct Names {
    text: String,
    ends: Vec<usize>,
}

impl Names {
    fn push(&mut self, name: &str) {
        self.text.push_str(name);
        self.ends.push(self.text.len());
    }

    fn get(&self, i: usize) -> &str {
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        &self.text[start..self.ends[i]]
    }

    fn len(&self) -> usize {
        self.ends.len()
    }

    /// Add `other`'s names after these.
    fn append(&mut self, other: &Names) {
        let offset = self.text.len();
        self.text.push_str(&other.text);
        self.ends.extend(other.ends.iter().map(|&e| e + offset));
    }

    fn with_capacity(n: usize) -> Self {
        Self { text: String::with_capacity(n * 32), ends: Vec::with_capacity(n) }
    }
}

/// Convert one input into its catalog entry.
fn convert_input(t: DeferredToolInput) -> Result<CatalogTool, ConvertError> {
    let function = convert_tool(&t.name, &t.description, t.schema)?;
    Ok(CatalogTool {
        function: CatalogFunction(FunctionRepr::Converted { name: t.name, description: t.description, function }),
    })
}

/// A tool added to a catalog being built, before the texts its function is converted from are
/// shared.
enum Pending {
    Ready(CatalogTool),
    /// Rendered from a `serde_json` schema; bounds in the texts as in [`FunctionRepr::FromText`].
    FromText {
        b: [usize; 4],
    },
    /// Rendered from the tool's spec.
    FromTool(Arc<dyn Tool>),
}

/// Add one tool: convert it or keep its schema's text (in `texts`), and render its hash entry
/// into `out`.
fn add_source(
    t: CatalogSource<'_>,
    out: &mut String,
    texts: &mut String,
    tape: &mut Tape,
) -> Result<Pending, ConvertError> {
    let t = match t {
        CatalogSource::Parsed(t) => t,
        CatalogSource::Tool(tool) => {
            let spec = tool.spec();
            let exact = tool.exact_parameters();
            if let Some(text) = tool.parameters_text().filter(|_| exact.is_none()) {
                // The schema's text: one linear pass, no tree walked.
                let mark = out.len();
                out.push_str("{\"name\": ");
                write_py_str(&spec.name, out);
                out.push_str(", \"schema\": ");
                if write_text_function_sorted(&spec.name, &spec.description, text, tape, out) {
                    out.push('}');
                    return Ok(Pending::FromTool(tool));
                }
                out.truncate(mark);
            }
            if let Some(exact) = exact {
                DeferredToolInput::from_spec_with_schema(spec, exact.clone())
            } else if let Some(plain) = json_plain_schema(&spec.description, &spec.parameters) {
                render_plain_entry(&spec.name, &spec.description, plain, out);
                return Ok(Pending::FromTool(tool));
            } else {
                DeferredToolInput::from_spec(spec)
            }
        }
        CatalogSource::Json { name, description, schema } => {
            if let Some(plain) = json_plain_schema(description, schema) {
                let start = texts.len();
                texts.push_str(name);
                let name_end = texts.len();
                texts.push_str(description);
                let description_end = texts.len();
                if write_json_compact(schema, texts) {
                    render_plain_entry(name, description, plain, out);
                    return Ok(Pending::FromText { b: [start, name_end, description_end, texts.len()] });
                }
                // A float that is not finite has no JSON text to read back: convert now.
                texts.truncate(start);
            }
            DeferredToolInput {
                name: name.to_string(),
                description: description.to_string(),
                schema: PyValue::from_json(schema),
            }
        }
    };
    let tool = convert_input(t)?;
    render_entry(&tool, out);
    Ok(Pending::Ready(tool))
}

/// [`render_entry`] of a tool whose schema [`json_plain_schema`] accepted, from that schema.
fn render_plain_entry(name: &str, description: &str, schema: &serde_json::Map<String, Value>, out: &mut String) {
    out.push_str("{\"name\": ");
    write_py_str(name, out);
    out.push_str(", \"schema\": ");
    write_json_function_sorted(name, description, schema, out);
    out.push('}');
}

/// The catalog tools of `pending`, sharing `texts`.
fn finish_pending(pending: Vec<Pending>, texts: String) -> Vec<CatalogTool> {
    let texts = Arc::new(texts);
    pending
        .into_iter()
        .map(|p| match p {
            Pending::Ready(tool) => tool,
            Pending::FromTool(tool) => {
                CatalogTool { function: CatalogFunction(FunctionRepr::FromTool { tool, function: OnceLock::new() }) }
            }
            Pending::FromText { b } => CatalogTool {
                function: CatalogFunction(FunctionRepr::FromText { text: texts.clone(), b, function: OnceLock::new() }),
            },
        })
        .collect()
}

/// `{"name": …, "schema": …}` of one tool, as an element of the hash blob.
fn render_entry(t: &CatalogTool, out: &mut String) {
    out.push_str("{\"name\": ");
    write_py_str(t.name(), out);
    out.push_str(", \"schema\": ");
    t.function.write_sorted(out);
    out.push('}');
}

/// Bytes reserved per tool for the blob: more than a typical MCP tool's entry (about 500), so the
/// buffer rarely grows (and copies) while being written; only pages written are ever touched.
const ENTRY_GUESS: usize = 1024;

/// The `catalog_hash` of the tools at `order`, `render(i, out)` writing tool `i`'s entry: the
/// blob is rendered into one buffer, hashed a step at a time while the bytes are still in cache.
fn render_and_hash(order: &[usize], mut render: impl FnMut(usize, &mut String)) -> String {
    let mut blob = String::with_capacity(order.len() * ENTRY_GUESS + 2);
    let mut hasher = Sha256::new();
    let mut hashed = 0;
    blob.push('[');
    for (k, &i) in order.iter().enumerate() {
        if k > 0 {
            blob.push_str(", ");
        }
        render(i, &mut blob);
        if blob.len() - hashed >= HASH_STEP {
            hasher.update(&blob.as_bytes()[hashed..]);
            hashed = blob.len();
        }
    }
    blob.push(']');
    hasher.update(&blob.as_bytes()[hashed..]);
    hex::encode(&hasher.finalize()[..8])
}

/// The `catalog_hash` of the rendered entries at `order` (`entry(i)` is tool `i`'s): sha256
/// over `[` entries joined with `, ` `]`, the entries hashed where they are.
fn hash_entries<'a>(order: &[usize], entry: impl Fn(usize) -> &'a str) -> String {
    /// Entries ahead whose bytes are asked for while one is hashed: they lie apart in memory
    /// (rendered in catalog order), so the hardware does not see them coming.
    const AHEAD: usize = 4;
    let mut hasher = Sha256::new();
    hasher.update(b"[");
    for &i in order.iter().take(AHEAD) {
        prefetch(entry(i));
    }
    // The entries are gathered into a small buffer that stays in cache and hashed from there a
    // buffer at a time: the copies wait on memory side by side, the hasher does not wait.
    let mut staged: Vec<u8> = Vec::with_capacity(STAGE + 4096);
    for (k, &i) in order.iter().enumerate() {
        if k > 0 {
            staged.extend_from_slice(b", ");
        }
        if let Some(&next) = order.get(k + AHEAD) {
            prefetch(entry(next));
        }
        staged.extend_from_slice(entry(i).as_bytes());
        if staged.len() >= STAGE {
            hasher.update(&staged);
            staged.clear();
        }
    }
    staged.push(b']');
    hasher.update(&staged);
    hex::encode(&hasher.finalize()[..8])
}

/// Ask for `text`'s cache lines ahead of their use.
#[inline]
fn prefetch(text: &str) {
    prefetch_addr(text.as_ptr() as usize, text.len());
}

/// Tools ahead whose schema text is asked for while one is rendered.
const PREFETCH_TOOLS: usize = 3;

/// Ask for the cache lines of `len` bytes at `addr` ahead of their use (up to 1 KiB).
#[inline]
fn prefetch_addr(addr: usize, len: usize) {
    #[cfg(target_arch = "x86_64")]
    for at in (addr..addr + len.min(1024)).step_by(64) {
        // SAFETY: a prefetch is only a hint; it reads nothing and never faults, whatever the
        // address.
        unsafe { std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(at as *const i8) };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (addr, len);
}

/// Tools converted and rendered in catalog order: `bufs` holds their entries, at `spans`.
#[derive(Default)]
struct Rendered {
    bufs: Vec<Arc<Block>>,
    spans: Vec<Span>,
    tools: Vec<CatalogTool>,
    names: Names,
}

impl Rendered {
    /// Append to a catalog's tools, buffers and spans.
    fn append_to(
        self,
        tools: &mut Vec<CatalogTool>,
        buffers: &mut Vec<Arc<Block>>,
        spans: &mut Vec<Span>,
        names: &mut Names,
    ) {
        names.append(&self.names);
        let b = buffers.len();
        spans.extend(self.spans.into_iter().map(|(i, s, e)| (b + i, s, e)));
        buffers.extend(self.bufs);
        tools.extend(self.tools);
    }
}

/// A buffer of rendered entries. A dropped one goes back to a pool (up to [`POOL_BLOCKS`]) that
/// the next build writes into: its pages are already mapped, where a fresh buffer would take a
/// page fault per 4 KiB written (the allocator hands large freed buffers back to the OS).
#[derive(Debug, Default)]
struct Block(String);

/// Buffers kept for reuse: enough for about two 10 000-tool catalogs.
const POOL_BLOCKS: usize = 256;

static POOL: Mutex<Vec<String>> = Mutex::new(Vec::new());

impl Block {
    fn take() -> String {
        let reused = POOL.lock().ok().and_then(|mut pool| pool.pop());
        reused.unwrap_or_else(|| String::with_capacity(BLOCK))
    }
}

impl Drop for Block {
    fn drop(&mut self) {
        let mut text = std::mem::take(&mut self.0);
        if text.capacity() != BLOCK {
            return;
        }
        text.clear();
        if let Ok(mut pool) = POOL.lock() {
            if pool.len() < POOL_BLOCKS {
                pool.push(text);
            }
        }
    }
}

/// Rendered entries, written into buffers of [`BLOCK`] bytes; an entry is never split (one
/// longer than a buffer's room grows that buffer).
struct Blocks {
    done: Vec<Arc<Block>>,
    current: String,
}

impl Default for Blocks {
    fn default() -> Self {
        Self { done: Vec::new(), current: Block::take() }
    }
}

impl Blocks {
    /// Write one entry with `write`: what it returned and where the entry is.
    fn push<R>(&mut self, write: impl FnOnce(&mut String) -> R) -> (R, Span) {
        let start = self.current.len();
        let r = write(&mut self.current);
        let span = (self.done.len(), start, self.current.len());
        // Room left for fewer than a typical entry or two: the next goes into a new buffer.
        if self.current.len() + 2 * 1024 > BLOCK {
            let full = std::mem::replace(&mut self.current, Block::take());
            self.done.push(Arc::new(Block(full)));
        }
        (r, span)
    }

    fn finish(mut self) -> Vec<Arc<Block>> {
        let last = Arc::new(Block(std::mem::take(&mut self.current)));
        if !last.0.is_empty() {
            self.done.push(last);
        }
        self.done
    }
}

/// Tools from which a catalog renders its entries on more than one thread: below, starting a
/// thread costs more than it saves (measured: see BENCHMARKS.md, "Deferred tools").
const PARALLEL_MIN_TOOLS: usize = 1024;

/// Threads rendering one catalog at most (the calling one included).
const MAX_RENDER_THREADS: usize = 4;

/// Chunks of tools per rendering thread: a thread that gets no core for a while (a busy
/// machine) leaves the chunks it has not claimed to the others.
const CHUNKS_PER_THREAD: usize = 8;

/// Convert and render `sources` in order ([`render_run`]), in chunks on a few threads when there
/// are enough of them and cores idle for the helpers ([`Split::for_machine`]; `split`: that
/// split instead, for tests), the chunks joined in order. The
/// entries, spans, tools and kept entries are those of one run over all of them (tested); only
/// the buffers they sit in differ.
fn render_sources(sources: Vec<CatalogSource<'_>>, split: Option<Split>) -> Result<Rendered, ConvertError> {
    let split = split.unwrap_or_else(|| {
        Split::for_machine(sources.len(), PARALLEL_MIN_TOOLS, MAX_RENDER_THREADS, CHUNKS_PER_THREAD)
    });
    let mut runs = map_chunks(sources, split, render_run)?.into_iter();
    let mut all = runs.next().unwrap_or_default();
    for run in runs {
        run.append_to(&mut all.tools, &mut all.bufs, &mut all.spans, &mut all.names);
    }
    Ok(all)
}

/// Convert and render `sources` in order into buffers of [`BLOCK`] bytes, reading each schema
/// text into `tape`.
fn render_run(sources: Vec<CatalogSource<'_>>, tape: &mut Tape) -> Result<Rendered, ConvertError> {
    let n = sources.len();
    // Where each tool's schema text and name are, gathered first in one loop whose loads do not
    // wait on each other: the main loop then asks for a tool's text a few tools ahead, so that
    // it has arrived when the tool is rendered. (Addresses only: a prefetch never faults.)
    let ahead: Vec<[(usize, usize); 3]> = sources
        .iter()
        .map(|s| match s {
            CatalogSource::Tool(t) => {
                let text = t.parameters_text().unwrap_or("");
                let name = &t.spec().name;
                [
                    (text.as_ptr() as usize, text.len()),
                    (name.as_ptr() as usize, name.len()),
                    // The tool itself, whose slot, spec and text fields the render reads.
                    (Arc::as_ptr(t) as *const u8 as usize, std::mem::size_of_val(&**t)),
                ]
            }
            _ => [(0, 0); 3],
        })
        .collect();
    let mut blocks = Blocks::default();
    let mut texts = String::new();
    let mut spans = Vec::with_capacity(n);
    let mut pending = Vec::with_capacity(n);
    // Buffers of entries earlier catalogs rendered for these same tools (see `CachedEntry`);
    // their spans are marked `REUSED` until they go after this run's own buffers.
    let mut reused: Vec<Arc<Block>> = Vec::new();
    // Tools rendered into the current buffer that keep what was rendered for them, with their
    // position: their slots are filled once the buffer is full (and shared), while the tools
    // are still in cache.
    let mut to_keep: Vec<usize> = Vec::new();
    let mut names = Names::with_capacity(n);
    for (k, t) in sources.into_iter().enumerate() {
        if let Some(parts) = ahead.get(k + PREFETCH_TOOLS) {
            for &(addr, len) in parts {
                prefetch_addr(addr, len);
            }
        }
        names.push(match &t {
            CatalogSource::Parsed(t) => &t.name,
            CatalogSource::Json { name, .. } => name,
            CatalogSource::Tool(tool) => &tool.spec().name,
        });
        let mut keep = false;
        if let CatalogSource::Tool(tool) = &t {
            if let Some(slot) = tool.catalog_slot() {
                if let Some(entry) = slot.get().and_then(|c| c.downcast_ref::<CachedEntry>()) {
                    if !reused.last().is_some_and(|b| Arc::ptr_eq(b, &entry.block)) {
                        reused.push(entry.block.clone());
                    }
                    spans.push((REUSED | (reused.len() - 1), entry.start, entry.end));
                    pending.push(Pending::FromTool(tool.clone()));
                    continue;
                }
                keep = true;
            }
        }
        if matches!(t, CatalogSource::Json { .. }) && texts.capacity() == 0 {
            // The compact texts of `Json` schemas, about as long as their entries: reserved
            // once (only the pages written are touched).
            texts.reserve(n * ENTRY_GUESS);
        }
        let full = blocks.done.len();
        let (p, span) = blocks.push(|out| add_source(t, out, &mut texts, tape));
        let p = p?;
        // A tool converted here from a tree (`Ready`: a `$ref`, an exact schema) is converted
        // again next time; one rendered straight from its schema keeps its entry.
        if keep && matches!(p, Pending::FromTool(_)) {
            to_keep.push(k);
        }
        pending.push(p);
        spans.push(span);
        if let Some(block) = blocks.done.get(full) {
            fill_slots(&mut to_keep, &pending, &spans, |_| block);
        }
    }
    let mut bufs = blocks.finish();
    fill_slots(&mut to_keep, &pending, &spans, |b| &bufs[b]);
    let own = bufs.len();
    if !reused.is_empty() {
        for span in spans.iter_mut().filter(|s| s.0 & REUSED != 0) {
            span.0 = own + (span.0 & !REUSED);
        }
        bufs.extend(reused);
    }
    Ok(Rendered { bufs, spans, tools: finish_pending(pending, texts), names })
}

/// Keep in the slot of each tool `k` of `to_keep` (`pending[k]`, rendered from the tool) its
/// entry at `spans[k]`, in the buffer `block(b)` gives for the span's buffer index `b`; empties
/// `to_keep`.
fn fill_slots<'b>(
    to_keep: &mut Vec<usize>,
    pending: &[Pending],
    spans: &[Span],
    block: impl Fn(usize) -> &'b Arc<Block>,
) {
    for k in to_keep.drain(..) {
        if let Pending::FromTool(tool) = &pending[k] {
            if let Some(slot) = tool.catalog_slot() {
                let (b, start, end) = spans[k];
                let _ = slot.set(Arc::new(CachedEntry { block: block(b).clone(), start, end }));
            }
        }
    }
}

/// A tool's entry as a catalog rendered it, kept in the tool's [`Tool::catalog_slot`] for the
/// next catalog holding the tool: the buffer it is in (kept alive while the tool lives) and its
/// byte span there.
struct CachedEntry {
    block: Arc<Block>,
    start: usize,
    end: usize,
}

/// Marks a span's buffer index as one of the reused buffers while a run is rendered.
const REUSED: usize = 1 << (usize::BITS - 1);

#[cfg(test)]
mod tests {
    use super::*;

    /// The blob rendered into one buffer and hashed as it grows is exactly the entries in name
    /// order, hashed whole, at any size (the hasher is fed in steps past `HASH_STEP`).
    #[test]
    fn blob_is_the_entries_in_name_order() {
        let schema = r#"{"type": "object", "title": "T", "properties": {"x": {"type": "number", "default": 1e-07, "title": "X"}, "title": {"type": "string"}}, "required": ["x"]}"#;
        let tools = (0..3000)
            .rev()
            .map(|i| DeferredToolInput::from_schema_text(&format!("tool_{i:05}"), "Does ✓ things.", schema).unwrap());
        let catalog = DeferredCatalog::new(tools).unwrap();
        let mut order: Vec<&CatalogTool> = catalog.tools().iter().collect();
        order.sort_by(|a, b| a.name().cmp(b.name()));
        let mut sequential = String::from("[");
        for (i, t) in order.iter().enumerate() {
            if i > 0 {
                sequential.push_str(", ");
            }
            render_entry(t, &mut sequential);
        }
        sequential.push(']');
        assert!(sequential.len() > 2 * HASH_STEP, "the test covers several hasher steps");
        assert_eq!(catalog.hash_blob(), sequential);
        assert_eq!(catalog.hash(), hex::encode(&Sha256::digest(sequential.as_bytes())[..8]));
        assert_eq!(catalog.compute_hash(), catalog.hash());
        assert!(sequential.starts_with("[{\"name\": \"tool_00000\""), "name order");
    }

    /// The name order is a stable sort by the whole name: names that tie on their first 32
    /// bytes, differ only by trailing NULs, repeat, or hold non-ASCII characters.
    #[test]
    fn name_order_is_a_stable_sort_by_name() {
        let long = "github_create_pull_request_review_comment";
        let names: Vec<String> = [
            "b",
            "a",
            "",
            "a\0",
            "a",
            "\0",
            long,
            "github_create_pull_request_review",
            "é",
            "z",
            "Z",
            "github_create_pull_request_review_comment_reply",
            long,
            "github_create_pull_request_revieW",
            "0123456789abcdef",
            "0123456789abcdef\0",
            "0123456789abcdeg",
            "ÿ",
            "\u{10000}",
            "\u{ffff}",
        ]
        .iter()
        .map(|n| n.to_string())
        .chain((0..200).map(|i| format!("{long}_{}", (i * 37) % 50)))
        .collect();
        let mut side_by_side = Names::default();
        for n in &names {
            side_by_side.push(n);
        }
        let mut expected: Vec<usize> = (0..names.len()).collect();
        expected.sort_by(|&a, &b| names[a].cmp(&names[b]));
        assert_eq!(name_order(&side_by_side), expected);
    }

    /// Rebuilds share the kept tools' buffers, and copy the live entries into one buffer once
    /// dropped entries would outweigh them; the catalog is the fresh build's throughout.
    #[test]
    fn repeated_rebuilds_stay_fresh_and_compact() {
        let schema = |v: usize| format!(r#"{{"type":"object","properties":{{"q{v}":{{"type":"string"}}}}}}"#);
        let mut current: Vec<DeferredToolInput> =
            (0..2000).map(|i| input(&format!("t{i:04}"), "first", &schema(0))).collect();
        let mut catalog = DeferredCatalog::new(current.clone()).unwrap();
        for round in 1..12 {
            let changed: Vec<DeferredToolInput> = (0..2000)
                .filter(|i| i % 3 == round % 3)
                .map(|i| input(&format!("t{i:04}"), &format!("round {round}"), &schema(round)))
                .collect();
            let names: HashSet<String> = changed.iter().map(|t| t.name.clone()).collect();
            catalog = catalog.rebuild(|t| !names.contains(t.name()), changed.clone()).unwrap();
            current.retain(|t| !names.contains(&t.name));
            current.extend(changed);
            let fresh = DeferredCatalog::new(current.clone()).unwrap();
            assert_eq!(catalog.hash_blob(), fresh.hash_blob(), "round {round}");
            assert_eq!(catalog.hash(), fresh.hash(), "round {round}");
            let live: usize = catalog.spans.iter().map(|&(_, s, e)| e - s).sum();
            let held: usize = catalog.rendered.iter().map(|b| b.0.len()).sum();
            assert!(held <= 2 * live + BLOCK, "round {round}: {held} bytes held for {live}");
        }
    }

    fn input(name: &str, description: &str, schema: &str) -> DeferredToolInput {
        DeferredToolInput::from_schema_text(name, description, schema).unwrap()
    }

    /// An MCP tool as the host holds it: its schema's text (or none) and room for its entry.
    struct SlotTool(ToolSpec, Option<String>, toolhost_core::CatalogSlot);

    #[async_trait::async_trait]
    impl Tool for SlotTool {
        fn spec(&self) -> &ToolSpec {
            &self.0
        }
        fn parameters_text(&self) -> Option<&str> {
            self.1.as_deref()
        }
        fn catalog_slot(&self) -> Option<&toolhost_core::CatalogSlot> {
            Some(&self.2)
        }
        async fn call(&self, _ctx: &toolhost_core::CallContext, _args: Value) -> toolhost_core::ToolOutcome {
            toolhost_core::ToolOutcome::text("")
        }
    }

    /// Rendering in chunks on several threads builds the catalog one run over the tools builds:
    /// the same entries per tool, hash, names, functions and answers, every kind of source mixed
    /// (tools with and without schema text, `serde_json` schemas, parsed ones with `$ref`), the
    /// entries kept in the tools and reused by the next build, and the first failing tool's error.
    #[test]
    fn chunks_on_threads_build_the_one_run_catalog() {
        let mut values: Vec<Value> = Vec::new();
        let mut specs: Vec<ToolSpec> = Vec::new();
        for i in 0..3000 {
            let schema = serde_json::json!({
                "type": "object",
                "title": format!("Args{i}"),
                "properties": {
                    "id": {"type": "string", "title": "Id", "description": format!("Item {i} ✓")},
                    "ratio": {"type": "number", "default": 0.5 + i as f64},
                    "mode": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": null}
                },
                "required": ["id"]
            });
            values.push(schema.clone());
            specs.push(ToolSpec {
                name: format!("{}_{i}", ["zeta", "alpha", "mid"][i % 3]),
                description: if i % 5 == 0 { String::new() } else { format!("tool {i}") },
                parameters: schema,
                group: None,
                source: toolhost_core::ToolSource::Mcp { server: "s".into() },
            });
        }
        let with_ref = r##"{"properties":{"a":{"$ref":"#/$defs/X"}},"$defs":{"X":{"type":"integer","title":"X"}}}"##;
        let tools: Vec<Arc<dyn Tool>> = specs
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let text = (i % 4 != 1).then(|| serde_json::to_string(&s.parameters).unwrap());
                Arc::new(SlotTool(s.clone(), text, Default::default())) as Arc<dyn Tool>
            })
            .collect();
        let parsed: Vec<DeferredToolInput> =
            (0..40).map(|i| input(&format!("ref_{i}"), "with a $ref", with_ref)).collect();
        let sources = || -> Vec<CatalogSource<'_>> {
            let mut all: Vec<CatalogSource<'_>> = Vec::new();
            for (i, t) in tools.iter().enumerate() {
                all.push(match i % 7 {
                    3 => CatalogSource::from_spec(&specs[i]),
                    _ => CatalogSource::Tool(t.clone()),
                });
                if i % 75 == 0 {
                    all.push(CatalogSource::Parsed(parsed[i / 75].clone()));
                }
            }
            all
        };
        let n = sources().len();
        let entries = |c: &DeferredCatalog| (0..c.len()).map(|i| c.entry(i).to_string()).collect::<Vec<_>>();
        // A first build on threads fills the slots; the one-run build after it reuses them.
        let split = Split { chunk: 97, workers: 3 };
        let threaded = DeferredCatalog::from_sources_split(sources(), Some(split)).unwrap();
        let kept: Vec<_> = tools.iter().map(|t| t.catalog_slot().unwrap().get().cloned()).collect();
        assert!(kept.iter().filter(|k| k.is_some()).count() > 2000, "rendered entries are kept in the tools");
        let again = DeferredCatalog::from_sources_split(sources(), Some(Split::sequential(n))).unwrap();
        for (t, before) in tools.iter().zip(&kept) {
            let now = t.catalog_slot().unwrap().get();
            assert_eq!(now.map(Arc::as_ptr), before.as_ref().map(Arc::as_ptr), "{}: the kept entry", t.spec().name);
        }
        // A first build in one run, of the same tools listed afresh.
        let fresh: Vec<Arc<dyn Tool>> = tools
            .iter()
            .map(|t| {
                let text = t.parameters_text().map(str::to_string);
                Arc::new(SlotTool(t.spec().clone(), text, Default::default())) as Arc<dyn Tool>
            })
            .collect();
        let fresh_sources: Vec<CatalogSource<'_>> = sources()
            .into_iter()
            .map(|s| match s {
                CatalogSource::Tool(t) => {
                    let i = tools.iter().position(|u| Arc::ptr_eq(u, &t)).unwrap();
                    CatalogSource::Tool(fresh[i].clone())
                }
                other => other,
            })
            .collect();
        let one_run = DeferredCatalog::from_sources_split(fresh_sources, Some(Split::sequential(n))).unwrap();
        for (label, c) in [("threaded", &threaded), ("again", &again)] {
            assert_eq!(c.len(), n);
            assert_eq!(c.hash(), one_run.hash(), "{label}");
            assert_eq!(c.hash_blob(), one_run.hash_blob(), "{label}");
            assert_eq!(entries(c), entries(&one_run), "{label}");
            assert!(c.tool_names().eq(one_run.tool_names()), "{label}");
            assert!(c.tool_names().eq(c.tools().iter().map(CatalogTool::name)), "{label}");
            for (a, b) in c.tools().iter().zip(one_run.tools()) {
                assert_eq!(a.description(), b.description(), "{label}");
                assert_eq!(*a.function, *b.function, "{label}: {}", a.name());
            }
            let found =
                |c: &DeferredCatalog| c.search("tool 12").iter().map(|t| t.name()).collect::<Vec<_>>().join(",");
            assert_eq!(found(c), found(&one_run), "{label}");
        }
        assert_eq!(threaded.compute_hash(), threaded.hash());
        // The kept entries are the entries (tools rendered from their text or tree).
        for (i, t) in tools.iter().enumerate() {
            if let Some(entry) = t.catalog_slot().unwrap().get().and_then(|c| c.downcast_ref::<CachedEntry>()) {
                let text = &entry.block.0[entry.start..entry.end];
                let position = threaded.tools().iter().position(|c| c.name() == t.spec().name).unwrap();
                assert_eq!(text, threaded.entry(position), "tool {i}");
            }
        }
        // A rebuild of the threaded catalog is a fresh build.
        let changed = input("alpha_1", "changed", with_ref);
        let rebuilt = threaded.rebuild(|t| t.name() != "alpha_1", [changed.clone()]).unwrap();
        let mut expected = sources();
        expected.retain(|s| !matches!(s, CatalogSource::Tool(t) if t.spec().name == "alpha_1"));
        expected.push(CatalogSource::Parsed(changed));
        assert_eq!(rebuilt.hash_blob(), DeferredCatalog::from_sources(expected).unwrap().hash_blob());
        // The error is the first failing tool's, on threads as in one run.
        let bad = |name: &str| input(name, "", r##"{"properties":{"a":{"$ref":"#/$defs/Missing"}}}"##);
        let failing = || {
            let mut all = sources();
            all.insert(2500, CatalogSource::Parsed(bad("late")));
            all.insert(700, CatalogSource::Parsed(bad("early")));
            all
        };
        let one = DeferredCatalog::from_sources_split(failing(), Some(Split::sequential(n + 2))).unwrap_err();
        let many = DeferredCatalog::from_sources_split(failing(), Some(split)).unwrap_err();
        assert_eq!(many, one);
        assert!(one.to_string().contains("'early'"), "{one}");
    }

    /// A rebuilt catalog is the catalog built from scratch from the kept tools and the added
    /// ones: tools changed, added, removed, renamed or repeated, `$ref` schemas, floats printed
    /// apart although equal (`-0.0`).
    #[test]
    fn rebuild_equals_a_fresh_build() {
        let plain = r#"{"type":"object","title":"A","properties":{"q":{"type":"string","title":"Q"}}}"#;
        let with_ref = r##"{"properties":{"a":{"$ref":"#/$defs/X"}},"$defs":{"X":{"type":"integer","title":"X"}}}"##;
        let base: Vec<DeferredToolInput> = (0..50)
            .map(|i| input(&format!("t{i:02}"), &format!("tool {i}"), if i % 7 == 0 { with_ref } else { plain }))
            .chain([input("dup", "first", plain), input("dup", "second", plain), input("empty", "", "{}")])
            .collect();
        let zero = plain.replace(r#""type":"string","#, r#""type":"number","default":-0.0,"#);
        type Keep = Box<dyn Fn(&str) -> bool>;
        let cases: Vec<(Keep, Vec<DeferredToolInput>)> = vec![
            (Box::new(|_| true), Vec::new()),
            (Box::new(|n| n != "t03"), vec![input("t03", "changed", plain)]),
            (Box::new(|n| n != "t07"), vec![input("t07", "tool 7", &with_ref.replace("integer", "string"))]),
            (Box::new(|n| n != "t12"), vec![input("t12", "tool 12", &zero)]),
            (Box::new(|n| !n.starts_with("t1")), vec![input("new", "added", plain), input("t15", "back", plain)]),
            (Box::new(|n| n != "dup"), vec![input("dup", "third", plain), input("dup", "fourth", with_ref)]),
            (Box::new(|_| false), vec![input("only", "one", plain)]),
            (Box::new(|_| false), Vec::new()),
        ];
        for (n, (keep, added)) in cases.into_iter().enumerate() {
            let old = DeferredCatalog::new(base.clone()).unwrap();
            let mut expected: Vec<DeferredToolInput> = base.iter().filter(|t| keep(&t.name)).cloned().collect();
            expected.extend(added.iter().cloned());
            let fresh = DeferredCatalog::new(expected).unwrap();
            let rebuilt = old.rebuild(|t| keep(t.name()), added).unwrap();
            assert_eq!(rebuilt.hash_blob(), fresh.hash_blob(), "case {n}");
            assert_eq!(rebuilt.hash(), fresh.hash(), "case {n}");
            let entries = |c: &DeferredCatalog| (0..c.len()).map(|i| c.entry(i).to_string()).collect::<Vec<_>>();
            assert_eq!(entries(&rebuilt), entries(&fresh), "case {n}");
            let names = |c: &DeferredCatalog| c.tools().iter().map(|t| t.name().to_string()).collect::<Vec<_>>();
            assert_eq!(names(&rebuilt), names(&fresh), "case {n}");
            assert!(rebuilt.tool_names().eq(rebuilt.tools().iter().map(CatalogTool::name)), "case {n}");
            let selected = |c: &DeferredCatalog| c.search("select:t03,dup,t12").len();
            assert_eq!(selected(&rebuilt), selected(&fresh), "case {n}");
            let found = |c: &DeferredCatalog| c.search("tool").iter().map(|t| t.name().to_string()).collect::<Vec<_>>();
            assert_eq!(found(&rebuilt), found(&fresh), "case {n}");
        }
    }

    /// A rebuild copies a kept tool's entry from the old blob and renders an added one: old
    /// entries altered here (same length) show up in the rebuilt blob for the kept tools only.
    #[test]
    fn rebuild_renders_only_added_tools() {
        let schema = r#"{"type":"object","properties":{"q":{"type":"string"}}}"#;
        let tools: Vec<DeferredToolInput> = ["a", "b", "c"].iter().map(|n| input(n, "desc", schema)).collect();
        let mut old = DeferredCatalog::new(tools.clone()).unwrap();
        for i in 0..3 {
            let (b, s, e) = old.spans[i];
            let buf = &mut Arc::get_mut(&mut old.rendered[b]).unwrap().0;
            let marked = buf[s..e].replace("desc", "DESC");
            buf.replace_range(s..e, &marked);
        }
        let changed = input("b", "desc", r#"{"type":"object","properties":{"r":{"type":"string"}}}"#);
        let rebuilt = old.rebuild(|t| t.name() != "b", [changed]).unwrap();
        let entry = |name: &str| {
            let i = rebuilt.tools().iter().position(|t| t.name() == name).unwrap();
            rebuilt.entry(i)
        };
        assert!(entry("a").contains("DESC") && entry("c").contains("DESC"), "kept tools keep their entries");
        assert!(entry("b").contains("\"desc\"") && entry("b").contains("\"r\""), "the added tool is rendered");
    }

    /// One scan over the joined texts gives what a search of each text alone gives, including
    /// for matches that would run across the separator and for empty matches.
    #[test]
    fn joined_scan_equals_per_text_search() {
        let texts = [
            "slack_send_message Send a message",
            "",
            "x",
            "calendar_export_ics Export calendar\nevents",
            "gmail_send Send mail; send again",
            "ends with e",
            "ñandú émoji 🚀 send",
        ];
        let joined = Joined::new(texts.iter().copied());
        let patterns = [
            "send",
            "e",
            "e\\b",
            "\\Be",
            "\\s",
            "\\s+",
            "[^x]+",
            ".*",
            "x*",
            "(send|mail).*",
            "calendar.*export",
            "é",
            "a|",
            "sum(",
            "🚀\\s",
            "(?s).+",
            "[\\s\\S]{3}",
        ];
        for p in patterns {
            let re = CatalogRegex::compile(p);
            assert!(!re.is_context_sensitive(), "{p}");
            let expected_counts: Vec<usize> = texts.iter().map(|t| re.count(t)).collect();
            assert_eq!(joined.counts(&re), expected_counts, "counts for {p:?}");
            let expected_hits: Vec<usize> = (0..texts.len()).filter(|&i| re.is_match(texts[i])).collect();
            let mut hits = Vec::new();
            joined.for_each_match(&re, |i| {
                hits.push(i);
                true
            });
            assert_eq!(hits, expected_hits, "hits for {p:?}");
        }
        for p in ["^send", "send$", "(?=e)", "\\Aslack", "x\\Z", "(?<=a)b"] {
            assert!(CatalogRegex::compile(p).is_context_sensitive(), "{p}");
        }
    }

    /// The regex form, whichever scan it takes, equals DeerFlow's loop over each tool.
    #[test]
    fn regex_form_equals_per_tool_loop() {
        let descs = [
            "item 12",
            "ITEM 12 again",
            "item 123",
            "item12",
            "other 12",
            "Item 1 2",
            "x item 12 item 12",
            "📦 item 12",
        ];
        let cat = DeferredCatalog::new(descs.iter().enumerate().map(|(i, d)| DeferredToolInput {
            name: if i % 3 == 0 { format!("item_12_{i}") } else { format!("tool_{i}") },
            description: d.to_string(),
            schema: PyValue::parse("{}").unwrap(),
        }))
        .unwrap();
        for q in ["item 12", "Item 12", "m 1", "em 12", "zzz 9", "12", "item.12", "1 2", "item_12", "_12"] {
            let re = CatalogRegex::compile(q);
            let mut scored: Vec<(usize, &str)> = cat
                .tools()
                .iter()
                .filter(|t| re.is_match(&format!("{} {}", t.name(), t.description())))
                .map(|t| (if re.is_match(t.name()) { 2 } else { 1 }, t.name()))
                .collect();
            scored.sort_by_key(|s| std::cmp::Reverse(s.0));
            let expected: Vec<&str> = scored.into_iter().map(|(_, n)| n).take(MAX_RESULTS).collect();
            let got: Vec<&str> = cat.search(q).iter().map(|t| t.name()).collect();
            assert_eq!(got, expected, "{q:?}");
        }
    }

    #[test]
    fn word_boundary_uses_pythons_word_characters_when_the_texts_need_it() {
        assert!(!word_chars_differ("plain ascii and 日本語 émoji 🚀"));
        // U+FE0F (a mark) is a word character for the engine, not for Python.
        assert!(word_chars_differ("sunny \u{2600}\u{FE0F}"));
        let cat = DeferredCatalog::new([DeferredToolInput {
            name: "weather".into(),
            description: "sunny \u{2600}\u{FE0F}".into(),
            schema: PyValue::parse("{}").unwrap(),
        }])
        .unwrap();
        assert!(cat.index().word_chars_differ);
        // Python: no boundary after U+FE0F at the end (neither side is a word character).
        assert!(cat.search("\u{FE0F}\\b").is_empty());
        assert_eq!(cat.search("y\\b").len(), 1);
    }

    #[test]
    fn queries_that_match_empty_text_on_no_entries() {
        let empty = DeferredCatalog::new([]).unwrap();
        for q in ["x*", "|", "+a |", ".*", "^$"] {
            assert!(empty.search(q).is_empty(), "{q}");
        }
        let one = DeferredCatalog::new([DeferredToolInput {
            name: "github_x".into(),
            description: "d".into(),
            schema: PyValue::parse("{}").unwrap(),
        }])
        .unwrap();
        assert!(one.search("+zz |").is_empty());
        assert_eq!(one.search("+git |").len(), 1);
        assert_eq!(one.search("|").len(), 1);
        // A cached compiled query answers the same.
        assert_eq!(one.search("|").len(), 1);
        assert_eq!(one.regex_cache.lock().unwrap().len(), 1); // "|" from both forms
    }

    #[test]
    fn anchored_queries_search_each_text_alone() {
        let input = |n: &str, d: &str| DeferredToolInput {
            name: n.into(),
            description: d.into(),
            schema: PyValue::parse("{}").unwrap(),
        };
        let cat =
            DeferredCatalog::new([input("a_one", "first"), input("b_two", "second\nline"), input("c", "one")]).unwrap();
        let names = |q: &str| cat.search(q).iter().map(|t| t.name().to_string()).collect::<Vec<_>>();
        assert_eq!(names("^b_"), ["b_two"]);
        assert_eq!(names("one$"), ["c"]);
        assert_eq!(names("line$"), ["b_two"]);
        assert_eq!(names("+_ one"), ["a_one", "b_two"]);
        assert_eq!(names("+_ ^a"), ["a_one", "b_two"]);
        assert_eq!(names("select:c,a_one,c"), ["a_one", "c"]);
    }
}
