//! DeerFlow's `DeferredToolCatalog`: the deferred tools in catalog order, their OpenAI function
//! form, `catalog_hash`, and `search` with the `select:` / `+required rest` / regex grammar.
//! Everything a search needs per tool is computed once when the catalog is built.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use memchr::memmem;

use sha2::{Digest, Sha256};
use toolhost_core::ToolSpec;

use crate::convert::{convert_tool, OpenAiFunction};
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
    pub function: OpenAiFunction,
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
#[derive(Debug, Clone)]
pub struct DeferredCatalog {
    tools: Vec<CatalogTool>,
    names: HashSet<String>,
    hash: String,
    /// name → positions in catalog order (names may repeat).
    by_name: HashMap<String, Vec<usize>>,
    /// Every tool's `"{name} {description}"`.
    searchable: Joined,
    /// Every tool's lowercased name.
    names_lower: Joined,
    /// Some searchable character is a word character for the regex engine but not for Python
    /// or the reverse; `\b` then needs the exact (slower) spelling.
    word_chars_differ: bool,
    /// Compiled queries, as Python's `re` module caches compiled patterns.
    regex_cache: Arc<Mutex<HashMap<String, Arc<CatalogRegex>>>>,
}

/// Compiled queries kept per catalog before the cache starts over.
const REGEX_CACHE_SIZE: usize = 256;

impl DeferredCatalog {
    /// Convert every tool and compute the hash. Fails, as DeerFlow's hashing does, when a
    /// schema cannot be converted (e.g. an unresolvable `$ref`).
    pub fn new(tools: impl IntoIterator<Item = DeferredToolInput>) -> Result<Self, ConvertError> {
        let tools = tools
            .into_iter()
            .map(|t| {
                let function = convert_tool(&t.name, &t.description, t.schema)?;
                Ok(CatalogTool { name: t.name, description: t.description, function })
            })
            .collect::<Result<Vec<_>, ConvertError>>()?;
        let names = tools.iter().map(|t| t.name.clone()).collect();
        let mut by_name: HashMap<String, Vec<usize>> = HashMap::with_capacity(tools.len());
        for (i, t) in tools.iter().enumerate() {
            by_name.entry(t.name.clone()).or_default().push(i);
        }
        // `f"{name} {description}"`, the text regex queries run over, for every tool.
        let mut searchable = Joined::default();
        let mut names_lower = Joined::default();
        for t in &tools {
            searchable.push(&t.name, Some(&t.description));
            names_lower.push(&py_lower(&t.name), None);
        }
        let word_chars_differ = word_chars_differ(&searchable.text);
        let mut catalog = Self {
            tools,
            names,
            hash: String::new(),
            by_name,
            searchable,
            names_lower,
            word_chars_differ,
            regex_cache: Arc::default(),
        };
        catalog.hash = catalog.compute_hash();
        Ok(catalog)
    }

    /// A catalog of tool specs (see [`DeferredToolInput::from_spec`] on number precision).
    pub fn from_specs<'a>(specs: impl IntoIterator<Item = &'a ToolSpec>) -> Result<Self, ConvertError> {
        Self::new(specs.into_iter().map(DeferredToolInput::from_spec))
    }

    /// Recompute the hash from the converted functions (what construction stores in `hash`).
    /// The blob is streamed into the hasher in chunks rather than built whole.
    pub fn compute_hash(&self) -> String {
        let mut hasher = Sha256::new();
        self.write_blob(|chunk| hasher.update(chunk.as_bytes()));
        hex::encode(&hasher.finalize()[..8])
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
        let mut blob = String::new();
        self.write_blob(|chunk| blob.push_str(chunk));
        blob
    }

    fn write_blob(&self, mut sink: impl FnMut(&str)) {
        let mut order: Vec<&CatalogTool> = self.tools.iter().collect();
        // Stable, by code point (byte order of UTF-8), like Python's `sorted(key=name)`.
        order.sort_by(|a, b| a.name.cmp(&b.name));
        // Large catalogs are rendered in slices on all cores; the slices are hashed in order, so
        // the bytes are exactly those of the sequential rendering.
        let threads = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1).min(8);
        let parts: Vec<String> = if order.len() < PARALLEL_BLOB_MIN_TOOLS || threads < 2 {
            vec![render_entries(&order)]
        } else {
            let per = order.len().div_ceil(threads);
            std::thread::scope(|scope| {
                let handles: Vec<_> =
                    order.chunks(per).map(|slice| scope.spawn(move || render_entries(slice))).collect();
                handles
                    .into_iter()
                    .map(|h| match h.join() {
                        Ok(part) => part,
                        Err(panic) => std::panic::resume_unwind(panic),
                    })
                    .collect()
            })
        };
        sink("[");
        for (i, part) in parts.iter().enumerate() {
            if i > 0 {
                sink(", ");
            }
            sink(part);
        }
        sink("]");
    }

    /// `DeferredToolCatalog.search(query)`: matching tools, in result order.
    pub fn search(&self, query: &str) -> Vec<&CatalogTool> {
        let query = py_strip(query);
        if query.is_empty() {
            return Vec::new();
        }
        if let Some(list) = query.strip_prefix("select:") {
            // Uncapped, catalog order, unknown names ignored.
            let mut hits: Vec<usize> =
                list.split(',').map(py_strip).filter_map(|n| self.by_name.get(n)).flatten().copied().collect();
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
                let counts: Vec<usize> = if re.is_context_sensitive() {
                    candidates.iter().map(|&i| re.count(self.searchable.entry(i))).collect()
                } else {
                    Joined::new(candidates.iter().map(|&i| self.searchable.entry(i))).counts(&re)
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
            if re.is_match(&t.name) {
                best.push(t);
            } else if rest.len() < MAX_RESULTS {
                rest.push(t);
            }
            best.len() < MAX_RESULTS
        };
        if let Some(bytes) = re.required_bytes() {
            // A literal query: only texts holding its caseless run can match; verify those.
            let mut last = usize::MAX;
            for pos in memmem::find_iter(self.searchable.text.as_bytes(), bytes.as_bytes()) {
                let i = self.searchable.entry_at(pos);
                if i != last {
                    last = i;
                    if re.is_match(self.searchable.entry(i)) && !take(i) {
                        break;
                    }
                }
            }
        } else if re.is_context_sensitive() {
            for i in 0..self.tools.len() {
                if re.is_match(self.searchable.entry(i)) && !take(i) {
                    break;
                }
            }
        } else {
            self.searchable.for_each_match(&re, take);
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
        let re = Arc::new(CatalogRegex::compile_with(pattern, self.word_chars_differ));
        cache.insert(pattern.to_string(), re.clone());
        re
    }

    /// Positions of tools whose lowercased name contains `needle`, in catalog order.
    fn name_contains(&self, needle: &str) -> Vec<usize> {
        let mut hits: Vec<usize> = Vec::new();
        for pos in memmem::find_iter(self.names_lower.text.as_bytes(), needle.as_bytes()) {
            let e = self.names_lower.entry_at(pos);
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

/// Catalogs at least this large render their hash blob on several threads.
const PARALLEL_BLOB_MIN_TOOLS: usize = 1024;

/// `{"name": …, "schema": …}` of each tool, joined with `", "`.
fn render_entries(tools: &[&CatalogTool]) -> String {
    let mut out = String::with_capacity(tools.len() * 256);
    for (i, t) in tools.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        out.push_str("{\"name\": ");
        write_py_str(&t.name, &mut out);
        out.push_str(", \"schema\": ");
        t.function.write_sorted(&mut out);
        out.push('}');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A catalog large enough to render its blob on several threads hashes exactly the bytes of
    /// the one-thread rendering, in name order.
    #[test]
    fn parallel_blob_is_the_sequential_blob() {
        let schema = r#"{"type": "object", "title": "T", "properties": {"x": {"type": "number", "default": 1e-07, "title": "X"}, "title": {"type": "string"}}, "required": ["x"]}"#;
        let tools = (0..3 * PARALLEL_BLOB_MIN_TOOLS)
            .rev()
            .map(|i| DeferredToolInput::from_schema_text(&format!("tool_{i:05}"), "Does ✓ things.", schema).unwrap());
        let catalog = DeferredCatalog::new(tools).unwrap();
        let mut order: Vec<&CatalogTool> = catalog.tools().iter().collect();
        order.sort_by(|a, b| a.name.cmp(&b.name));
        let sequential = format!("[{}]", render_entries(&order));
        assert_eq!(catalog.hash_blob(), sequential);
        assert_eq!(catalog.hash(), hex::encode(&Sha256::digest(sequential.as_bytes())[..8]));
        assert!(sequential.starts_with("[{\"name\": \"tool_00000\""), "name order");
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
                .filter(|t| re.is_match(&format!("{} {}", t.name, t.description)))
                .map(|t| (if re.is_match(&t.name) { 2 } else { 1 }, t.name.as_str()))
                .collect();
            scored.sort_by_key(|s| std::cmp::Reverse(s.0));
            let expected: Vec<&str> = scored.into_iter().map(|(_, n)| n).take(MAX_RESULTS).collect();
            let got: Vec<&str> = cat.search(q).iter().map(|t| t.name.as_str()).collect();
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
        assert!(cat.word_chars_differ);
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
        let names = |q: &str| cat.search(q).iter().map(|t| t.name.clone()).collect::<Vec<_>>();
        assert_eq!(names("^b_"), ["b_two"]);
        assert_eq!(names("one$"), ["c"]);
        assert_eq!(names("line$"), ["b_two"]);
        assert_eq!(names("+_ one"), ["a_one", "b_two"]);
        assert_eq!(names("+_ ^a"), ["a_one", "b_two"]);
        assert_eq!(names("select:c,a_one,c"), ["a_one", "c"]);
    }
}
