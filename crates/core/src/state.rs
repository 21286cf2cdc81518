//! `ThreadState` (DeerFlow's `H/agents/thread_state.py`) and `StateUpdate`, DeerFlow's
//! `Command(update=…)`, merged with DeerFlow's reducers (spec §10), including the errors they raise.
//!
//! The reducers work on JSON values where DeerFlow's own channel types are loose, so that state
//! written by DeerFlow round-trips unchanged. Each `merge_*` follows the Python function case by
//! case (`None` keeps, `{}` clears, …); `tests/conformance/reducers.json` and `merge_promoted.json` pin
//! them down.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// A partial write to thread state. `None` means "this call does not write the field".
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct StateUpdate {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub artifacts: Option<Vec<String>>,
    /// path → `{mime_type, size, actual_path}`; an empty map clears.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub viewed_images: Option<Map<String, Value>>,
    /// `{catalog_hash, names}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub promoted: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub todos: Option<Value>,
    /// `GoalState`; anything but `None` replaces.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub goal: Option<Value>,
    /// `DelegationEntry` list (`task` ledger), merged by id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delegations: Option<Vec<Value>>,
    /// `{sandbox_id}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread_data: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uploaded_files: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skill_context: Option<Vec<Value>>,
    /// Written by `setup_agent` (undeclared state in DeerFlow, kept as last value).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_agent_name: Option<String>,
    /// Read marks for read-before-write: virtual path → sha256 of the content read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_marks: Option<Map<String, Value>>,
}

impl StateUpdate {
    pub fn is_empty(&self) -> bool {
        self == &StateUpdate::default()
    }
}

/// The thread's state as tools see it. Messages are the model loop's business and are not kept.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ThreadState {
    #[serde(default)]
    pub artifacts: Vec<String>,
    #[serde(default)]
    pub viewed_images: Map<String, Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub promoted: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub todos: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub goal: Option<Value>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub delegations: Vec<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread_data: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uploaded_files: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(default)]
    pub skill_context: Vec<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_agent_name: Option<String>,
    #[serde(default)]
    pub read_marks: Map<String, Value>,
}

/// What a DeerFlow reducer raises. `Display` is Python's `str(exc)`; [`ReducerError::py_type`]
/// the exception class.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReducerError {
    /// DeerFlow's `ValueError("Conflicting sandbox state updates: …")`.
    #[error("{0}")]
    Value(String),
    /// A missing key, e.g. `KeyError('catalog_hash')` from `merge_promoted`; holds the key.
    #[error("'{0}'")]
    Key(String),
    /// A value of the wrong JSON type where the reducer indexes into it (Python would raise
    /// `TypeError`/`AttributeError`); names the field and what it got.
    #[error("{0}")]
    Type(String),
    /// LangGraph's `InvalidUpdateError`: two writes to a last-value channel in one step.
    #[error("At key '{0}': Can receive only one value per step. Use an Annotated key to handle multiple values.")]
    ConcurrentWrite(String),
}

impl ReducerError {
    /// The Python exception class DeerFlow raises for this error.
    pub fn py_type(&self) -> &'static str {
        match self {
            ReducerError::Value(_) => "ValueError",
            ReducerError::Key(_) => "KeyError",
            ReducerError::Type(_) => "TypeError",
            ReducerError::ConcurrentWrite(_) => "InvalidUpdateError",
        }
    }
}

/// Channels without a reducer (LangGraph `LastValue`): two writes in one step are an error.
const LAST_VALUE_CHANNELS: [&str; 3] = ["thread_data", "uploaded_files", "title"];

impl ThreadState {
    /// Merge one update with DeerFlow's reducers. All or nothing: on error the state is unchanged.
    pub fn apply(&mut self, update: &StateUpdate) -> Result<(), ReducerError> {
        // The fallible reducers run first so that an error leaves nothing half-applied.
        let sandbox = match &update.sandbox {
            Some(new) => merge_sandbox(self.sandbox.as_ref(), Some(new))?,
            None => self.sandbox.clone(),
        };
        let promoted = match &update.promoted {
            Some(new) => try_merge_promoted(self.promoted.as_ref(), Some(new))?,
            None => self.promoted.clone(),
        };
        let delegations = match &update.delegations {
            Some(new) => Some(try_merge_delegations(Some(&self.delegations), Some(new))?),
            None => None,
        };
        let skill_context = match &update.skill_context {
            Some(new) => Some(try_merge_skill_context(Some(&self.skill_context), Some(new))?),
            None => None,
        };

        self.sandbox = sandbox;
        self.promoted = promoted;
        if let Some(d) = delegations {
            self.delegations = d;
        }
        if let Some(s) = skill_context {
            self.skill_context = s;
        }
        if let Some(new) = &update.artifacts {
            self.artifacts = merge_artifacts(&self.artifacts, new);
        }
        if let Some(new) = &update.viewed_images {
            self.viewed_images = merge_viewed_images(&self.viewed_images, new);
        }
        self.todos = merge_todos(self.todos.as_ref(), update.todos.as_ref());
        self.goal = merge_goal(self.goal.as_ref(), update.goal.as_ref());
        if update.thread_data.is_some() {
            self.thread_data = update.thread_data.clone();
        }
        if update.uploaded_files.is_some() {
            self.uploaded_files = update.uploaded_files.clone();
        }
        if update.title.is_some() {
            self.title = update.title.clone();
        }
        if update.created_agent_name.is_some() {
            self.created_agent_name = update.created_agent_name.clone();
        }
        if let Some(new) = &update.read_marks {
            for (k, v) in new {
                self.read_marks.insert(k.clone(), v.clone());
            }
        }
        Ok(())
    }

    /// Merge the updates of several calls of one model turn (one LangGraph step), in call order:
    /// the reducers fold them left to right, so e.g. `artifacts` keeps call order and a later
    /// `todos` wins. An update whose reducer raises is skipped and its error returned beside the
    /// others' success. As in LangGraph, a second write to a channel without a reducer
    /// (`thread_data`, `uploaded_files`, `title`) in the same step is an error.
    pub fn apply_all<'a>(&mut self, updates: impl IntoIterator<Item = &'a StateUpdate>) -> Vec<ReducerError> {
        self.apply_turn(updates).into_iter().filter_map(Result::err).collect()
    }

    /// [`apply_all`](Self::apply_all) with one result per update, in call order, so a caller can
    /// tell which call's update was refused.
    pub fn apply_turn<'a>(
        &mut self,
        updates: impl IntoIterator<Item = &'a StateUpdate>,
    ) -> Vec<Result<(), ReducerError>> {
        let mut written: Vec<&'static str> = Vec::new();
        let mut results = Vec::new();
        for update in updates {
            let keys = last_value_keys(update);
            if let Some(dup) = keys.iter().find(|k| written.contains(k)) {
                results.push(Err(ReducerError::ConcurrentWrite((*dup).to_string())));
                continue;
            }
            let r = self.apply(update);
            if r.is_ok() {
                written.extend(keys);
            }
            results.push(r);
        }
        results
    }
}

fn last_value_keys(update: &StateUpdate) -> Vec<&'static str> {
    let set = [update.thread_data.is_some(), update.uploaded_files.is_some(), update.title.is_some()];
    LAST_VALUE_CHANNELS.iter().zip(set).filter(|(_, s)| *s).map(|(k, _)| *k).collect()
}

/// `merge_artifacts` where the channel already holds a list: ordered dedupe of existing + new.
pub fn merge_artifacts(existing: &[String], new: &[String]) -> Vec<String> {
    merge_artifacts_opt(Some(existing), Some(new))
}

/// `merge_artifacts` exactly: existing `None` takes `new` as it is (no dedupe, DeerFlow's
/// behaviour), new `None` keeps, otherwise `dict.fromkeys(existing + new)`.
pub fn merge_artifacts_opt(existing: Option<&[String]>, new: Option<&[String]>) -> Vec<String> {
    match (existing, new) {
        (None, new) => new.map(<[String]>::to_vec).unwrap_or_default(),
        (Some(existing), None) => existing.to_vec(),
        (Some(existing), Some(new)) => {
            let mut out: Vec<String> = Vec::with_capacity(existing.len() + new.len());
            for item in existing.iter().chain(new) {
                if !out.contains(item) {
                    out.push(item.clone());
                }
            }
            out
        }
    }
}

/// `merge_viewed_images` where the channel holds a dict: `{}` clears, otherwise dict merge with
/// the new value winning (an existing key keeps its position).
pub fn merge_viewed_images(existing: &Map<String, Value>, new: &Map<String, Value>) -> Map<String, Value> {
    merge_viewed_images_opt(Some(existing), Some(new))
}

/// `merge_viewed_images` exactly, including `None` on either side.
pub fn merge_viewed_images_opt(
    existing: Option<&Map<String, Value>>,
    new: Option<&Map<String, Value>>,
) -> Map<String, Value> {
    match (existing, new) {
        (None, new) => new.cloned().unwrap_or_default(),
        (Some(existing), None) => existing.clone(),
        (Some(_), Some(new)) if new.is_empty() => Map::new(),
        (Some(existing), Some(new)) => {
            let mut out = existing.clone();
            for (k, v) in new {
                out.insert(k.clone(), v.clone());
            }
            out
        }
    }
}

/// `merge_todos` (and the same rule for `goal`): `None` keeps, anything else (even `[]`) replaces.
pub fn merge_todos(existing: Option<&Value>, new: Option<&Value>) -> Option<Value> {
    match new {
        None | Some(Value::Null) => existing.cloned(),
        Some(n) => Some(n.clone()),
    }
}

/// `merge_goal`: `None` keeps, anything else (even `{}`) replaces.
pub fn merge_goal(existing: Option<&Value>, new: Option<&Value>) -> Option<Value> {
    merge_todos(existing, new)
}

/// `merge_sandbox`: None keeps; the same `sandbox_id` (a missing id counts as `None`) is
/// idempotent and keeps the existing object; a different id raises
/// `ValueError("Conflicting sandbox state updates: {existing_id!r} != {new_id!r}")`.
pub fn merge_sandbox(existing: Option<&Value>, new: Option<&Value>) -> Result<Option<Value>, ReducerError> {
    let new = match new {
        None | Some(Value::Null) => return Ok(existing.cloned()),
        Some(n) => n,
    };
    let existing = match existing {
        None | Some(Value::Null) => return Ok(Some(new.clone())),
        Some(e) => e,
    };
    let id_of = |v: &Value, side: &str| -> Result<Value, ReducerError> {
        match v {
            Value::Object(m) => Ok(m.get("sandbox_id").cloned().unwrap_or(Value::Null)),
            other => Err(ReducerError::Type(format!("{side} sandbox state must be an object, got {other}"))),
        }
    };
    let (existing_id, new_id) = (id_of(existing, "existing")?, id_of(new, "new")?);
    if existing_id == new_id {
        Ok(Some(existing.clone()))
    } else {
        Err(ReducerError::Value(format!(
            "Conflicting sandbox state updates: {} != {}",
            py_repr(&existing_id),
            py_repr(&new_id)
        )))
    }
}

/// `merge_promoted` (spec §8) for callers that cannot fail: as [`try_merge_promoted`], but a
/// malformed update (where DeerFlow raises `KeyError`) keeps the existing value.
pub fn merge_promoted(existing: Option<&Value>, new: Option<&Value>) -> Option<Value> {
    try_merge_promoted(existing, new).unwrap_or_else(|_| existing.cloned())
}

/// `merge_promoted` exactly: new `None`/`{}` keeps existing; a different `catalog_hash` (or no
/// existing value) replaces wholesale with the new names deduped; the same hash unions names in
/// order. Missing keys raise `KeyError` as in DeerFlow; extra keys are dropped.
pub fn try_merge_promoted(existing: Option<&Value>, new: Option<&Value>) -> Result<Option<Value>, ReducerError> {
    let new = match new {
        Some(n) if py_truthy(n) => n,
        _ => return Ok(existing.cloned()),
    };
    let new_map = as_object(new, "promoted update")?;
    let existing = existing.filter(|e| !e.is_null());
    let same_hash = match existing {
        None => false,
        Some(e) => {
            let e = as_object(e, "promoted state")?;
            e.get("catalog_hash").unwrap_or(&Value::Null) == key(new_map, "catalog_hash")?
        }
    };
    let (hash, names) = match existing {
        Some(e) if same_hash => {
            let e = as_object(e, "promoted state")?;
            let hash = key(e, "catalog_hash")?.clone();
            let mut names = as_array(key(e, "names")?, "promoted names")?.clone();
            names.extend(as_array(key(new_map, "names")?, "promoted names")?.iter().cloned());
            (hash, names)
        }
        _ => {
            let hash = key(new_map, "catalog_hash")?.clone();
            (hash, as_array(key(new_map, "names")?, "promoted names")?.clone())
        }
    };
    let mut out = Map::new();
    out.insert("catalog_hash".into(), hash);
    out.insert("names".into(), Value::Array(dedupe(names)));
    Ok(Some(Value::Object(out)))
}

/// Statuses a delegation never leaves for a non-terminal one (`SUBAGENT_STATUS_VALUES`).
const TERMINAL_DELEGATION_STATUSES: [&str; 5] = ["completed", "failed", "cancelled", "timed_out", "polling_timed_out"];
const DELEGATION_LEDGER_MAX_ENTRIES: usize = 50;

/// `merge_delegations`: new `None`/`[]` keeps; entries merge by `id` keeping first-seen order,
/// the latest wins except that a terminal status is never replaced by a non-terminal one; a
/// replaced entry keeps the earlier `created_at` (and `run_id` when the new one has none); the
/// ledger keeps the 50 most recent.
pub fn try_merge_delegations(existing: Option<&[Value]>, new: Option<&[Value]>) -> Result<Vec<Value>, ReducerError> {
    let new = match new {
        Some(n) if !n.is_empty() => n,
        _ => return Ok(existing.map(<[Value]>::to_vec).unwrap_or_default()),
    };
    let is_terminal = |v: &Value| v.as_str().is_some_and(|s| TERMINAL_DELEGATION_STATUSES.contains(&s));
    // (id, entry) in first-seen order; ledgers are at most a few dozen entries.
    let mut merged: Vec<(Value, Value)> = Vec::new();
    for entry in existing.unwrap_or_default().iter().chain(new) {
        let obj = as_object(entry, "delegation entry")?;
        let id = key(obj, "id")?.clone();
        let pos = merged.iter().position(|(i, _)| *i == id);
        let mut entry = obj.clone();
        if let Some(p) = pos {
            let previous = as_object(&merged[p].1, "delegation entry")?;
            if is_terminal(key(previous, "status")?) && !is_terminal(key(&entry, "status")?) {
                continue;
            }
            if let Some(created) = previous.get("created_at").filter(|v| py_truthy(v)) {
                entry.insert("created_at".into(), created.clone());
                let run_id = previous.get("run_id").filter(|v| py_truthy(v));
                if let (Some(run_id), false) = (run_id, entry.get("run_id").is_some_and(py_truthy)) {
                    entry.insert("run_id".into(), run_id.clone());
                }
            }
            merged[p].1 = Value::Object(entry);
        } else {
            merged.push((id, Value::Object(entry)));
        }
    }
    let excess = merged.len().saturating_sub(DELEGATION_LEDGER_MAX_ENTRIES);
    Ok(merged.into_iter().skip(excess).map(|(_, e)| e).collect())
}

const SKILL_CONTEXT_MAX_ENTRIES: usize = 8;
const SKILL_DESCRIPTION_MAX_CHARS: usize = 500;

/// `skill_context` for callers that cannot fail: as [`try_merge_skill_context`], but an entry
/// without `path` (DeerFlow raises `KeyError`) leaves the existing list as it was.
pub fn merge_skill_context(existing: &[Value], new: &[Value]) -> Vec<Value> {
    try_merge_skill_context(Some(existing), Some(new)).unwrap_or_else(|_| existing.to_vec())
}

/// `merge_skill_context` exactly: every entry is normalised to `{name, path, description,
/// loaded_at}` (description whitespace collapsed and cut to 500 characters, a non-integer
/// `loaded_at` becomes 0, legacy keys dropped); dedupe by path with a re-read moving to the end;
/// the 8 most recent are kept.
pub fn try_merge_skill_context(existing: Option<&[Value]>, new: Option<&[Value]>) -> Result<Vec<Value>, ReducerError> {
    let normalized_existing =
        existing.unwrap_or_default().iter().map(normalize_skill_entry).collect::<Result<Vec<_>, _>>()?;
    let new = match new {
        Some(n) if !n.is_empty() => n,
        _ => return Ok(normalized_existing.into_iter().map(|(_, e)| e).collect()),
    };
    let mut merged: Vec<(String, Value)> = Vec::new();
    for (path, entry) in normalized_existing {
        match merged.iter_mut().find(|(p, _)| *p == path) {
            Some(slot) => slot.1 = entry,
            None => merged.push((path, entry)),
        }
    }
    for entry in new {
        let (path, entry) = normalize_skill_entry(entry)?;
        merged.retain(|(p, _)| *p != path);
        merged.push((path, entry));
    }
    let excess = merged.len().saturating_sub(SKILL_CONTEXT_MAX_ENTRIES);
    Ok(merged.into_iter().skip(excess).map(|(_, e)| e).collect())
}

/// `_normalize_skill_entry`; returns the path (the dedupe key) beside the entry.
fn normalize_skill_entry(entry: &Value) -> Result<(String, Value), ReducerError> {
    let obj = as_object(entry, "skill_context entry")?;
    let path = py_str(key(obj, "path")?);
    let description = match obj.get("description") {
        Some(Value::String(d)) => {
            let collapsed = d.split(is_py_whitespace).filter(|s| !s.is_empty()).collect::<Vec<_>>().join(" ");
            collapsed.chars().take(SKILL_DESCRIPTION_MAX_CHARS).collect()
        }
        _ => String::new(),
    };
    let name = match obj.get("name") {
        Some(v) if py_truthy(v) => py_str(v),
        _ => String::new(),
    };
    // Python's isinstance(x, int) accepts bools too.
    let loaded_at = match obj.get("loaded_at") {
        Some(v @ Value::Bool(_)) => v.clone(),
        Some(Value::Number(n)) if n.is_i64() || n.is_u64() => Value::Number(n.clone()),
        _ => Value::from(0),
    };
    let mut out = Map::new();
    out.insert("name".into(), Value::String(name));
    out.insert("path".into(), Value::String(path.clone()));
    out.insert("description".into(), Value::String(description));
    out.insert("loaded_at".into(), loaded_at);
    Ok((path, Value::Object(out)))
}

fn as_object<'a>(v: &'a Value, what: &str) -> Result<&'a Map<String, Value>, ReducerError> {
    v.as_object().ok_or_else(|| ReducerError::Type(format!("{what} must be an object, got {v}")))
}

fn as_array<'a>(v: &'a Value, what: &str) -> Result<&'a Vec<Value>, ReducerError> {
    v.as_array().ok_or_else(|| ReducerError::Type(format!("{what} must be a list, got {v}")))
}

fn key<'a>(m: &'a Map<String, Value>, k: &str) -> Result<&'a Value, ReducerError> {
    m.get(k).ok_or_else(|| ReducerError::Key(k.to_string()))
}

/// `list(dict.fromkeys(items))`.
fn dedupe(items: Vec<Value>) -> Vec<Value> {
    let mut out: Vec<Value> = Vec::with_capacity(items.len());
    for item in items {
        if !out.contains(&item) {
            out.push(item);
        }
    }
    out
}

/// Python truthiness of a JSON value.
fn py_truthy(v: &Value) -> bool {
    match v {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64().is_some_and(|f| f != 0.0),
        Value::String(s) => !s.is_empty(),
        Value::Array(a) => !a.is_empty(),
        Value::Object(o) => !o.is_empty(),
    }
}

/// Python's `str.isspace` for the characters `str.split()` splits on.
fn is_py_whitespace(c: char) -> bool {
    c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c)
}

/// Python's `str(x)`, `repr(x)` and `repr(str)` of a JSON value as DeerFlow would hold it
/// (`None`, `True`, `'text'`, `[…]`, `{'k': …}`), strings quoted and escaped the way CPython does:
/// `toolhost-py`'s, under the names DeerFlow-facing messages here use.
pub use toolhost_py::builtins::{repr as py_repr, str_of as py_str, str_repr as py_repr_str};

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn load(file: &str) -> Vec<Value> {
        let path = format!("{}/../../tests/conformance/{file}", env!("CARGO_MANIFEST_DIR"));
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {path}: {e}"));
        let doc: Value = serde_json::from_str(&text).expect("vector file is JSON");
        doc["cases"].as_array().expect("cases").clone()
    }

    fn opt(v: &Value) -> Option<&Value> {
        (!v.is_null()).then_some(v)
    }

    fn strings(v: Option<&Value>) -> Option<Vec<String>> {
        v.map(|v| serde_json::from_value(v.clone()).expect("string list"))
    }

    /// Run one reducer from the vectors over JSON values.
    fn run(reducer: &str, existing: Option<&Value>, new: Option<&Value>) -> Result<Value, ReducerError> {
        let list = |v: Option<&Value>| v.map(|v| v.as_array().expect("list").clone());
        let map = |v: Option<&Value>| v.map(|v| v.as_object().expect("dict").clone());
        Ok(match reducer {
            "merge_artifacts" => {
                let (e, n) = (strings(existing), strings(new));
                json!(merge_artifacts_opt(e.as_deref(), n.as_deref()))
            }
            "merge_viewed_images" => {
                let (e, n) = (map(existing), map(new));
                Value::Object(merge_viewed_images_opt(e.as_ref(), n.as_ref()))
            }
            "merge_todos" => merge_todos(existing, new).unwrap_or(Value::Null),
            "merge_goal" => merge_goal(existing, new).unwrap_or(Value::Null),
            "merge_sandbox" => merge_sandbox(existing, new)?.unwrap_or(Value::Null),
            "merge_promoted" => try_merge_promoted(existing, new)?.unwrap_or(Value::Null),
            "merge_delegations" => {
                let (e, n) = (list(existing), list(new));
                json!(try_merge_delegations(e.as_deref(), n.as_deref())?)
            }
            "merge_skill_context" => {
                let (e, n) = (list(existing), list(new));
                json!(try_merge_skill_context(e.as_deref(), n.as_deref())?)
            }
            other => panic!("vector names unknown reducer {other}"),
        })
    }

    fn check_vectors(file: &str) {
        let cases = load(file);
        assert!(!cases.is_empty());
        for case in cases {
            let id = case["id"].as_str().unwrap_or("?");
            let reducer = case["reducer"].as_str().expect("reducer");
            let got = run(reducer, opt(&case["existing"]), opt(&case["new"]));
            match (case.get("error"), got) {
                (Some(err), Err(e)) => {
                    assert_eq!(e.py_type(), err["type"], "{id}: error type");
                    assert_eq!(e.to_string(), err["message"], "{id}: error message");
                }
                (Some(err), Ok(v)) => panic!("{id}: expected {err}, got {v}"),
                (None, Ok(v)) => {
                    assert_eq!(v, case["expected"], "{id}");
                    // Key order is part of DeerFlow's output (dict merge keeps positions).
                    assert_eq!(v.to_string(), case["expected"].to_string(), "{id}: key order");
                }
                (None, Err(e)) => panic!("{id}: unexpected error {e}"),
            }
        }
    }

    #[test]
    fn reducers_match_deerflow_vectors() {
        check_vectors("reducers.json");
    }

    #[test]
    fn merge_promoted_matches_deerflow_vectors() {
        check_vectors("merge_promoted.json");
    }

    #[test]
    fn apply_is_all_or_nothing() {
        let mut state = ThreadState { sandbox: Some(json!({"sandbox_id": "a"})), ..Default::default() };
        let update = StateUpdate {
            artifacts: Some(vec!["/mnt/user-data/outputs/x".into()]),
            sandbox: Some(json!({"sandbox_id": "b"})),
            ..Default::default()
        };
        let err = state.apply(&update).unwrap_err();
        assert_eq!(err.to_string(), "Conflicting sandbox state updates: 'a' != 'b'");
        assert!(state.artifacts.is_empty(), "nothing applied on error");

        let bad_promoted =
            StateUpdate { todos: Some(json!([])), promoted: Some(json!({"catalog_hash": "h"})), ..Default::default() };
        assert_eq!(state.apply(&bad_promoted).unwrap_err(), ReducerError::Key("names".into()));
        assert_eq!(state.todos, None);
    }

    #[test]
    fn concurrent_updates_merge_in_call_order() {
        let mut state = ThreadState { artifacts: vec!["/o/a".into()], ..Default::default() };
        let updates = [
            StateUpdate { artifacts: Some(vec!["/o/c".into(), "/o/a".into()]), ..Default::default() },
            StateUpdate {
                viewed_images: Some(json!({"/i/1.png": {"mime_type": "image/png"}}).as_object().unwrap().clone()),
                todos: Some(json!([{"content": "x", "status": "pending"}])),
                ..Default::default()
            },
            StateUpdate { artifacts: Some(vec!["/o/b".into(), "/o/c".into()]), ..Default::default() },
            StateUpdate { promoted: Some(json!({"catalog_hash": "h", "names": ["t1"]})), ..Default::default() },
            StateUpdate { sandbox: Some(json!({"sandbox_id": "local"})), ..Default::default() },
            StateUpdate { sandbox: Some(json!({"sandbox_id": "other"})), ..Default::default() },
            StateUpdate {
                promoted: Some(json!({"catalog_hash": "h", "names": ["t2", "t1"]})),
                todos: Some(json!([])),
                ..Default::default()
            },
            StateUpdate { title: Some("one".into()), ..Default::default() },
            StateUpdate { title: Some("two".into()), ..Default::default() },
        ];
        let errors = state.apply_all(&updates);
        assert_eq!(state.artifacts, ["/o/a", "/o/c", "/o/b"]);
        assert_eq!(state.promoted, Some(json!({"catalog_hash": "h", "names": ["t1", "t2"]})));
        assert_eq!(state.todos, Some(json!([])), "the later todos write wins");
        assert_eq!(state.sandbox, Some(json!({"sandbox_id": "local"})));
        assert_eq!(state.title.as_deref(), Some("one"));
        assert_eq!(state.viewed_images.len(), 1);
        assert_eq!(
            errors,
            [
                ReducerError::Value("Conflicting sandbox state updates: 'local' != 'other'".into()),
                ReducerError::ConcurrentWrite("title".into()),
            ]
        );
        // A new step may write the last-value channel again.
        assert!(state.apply_all([&StateUpdate { title: Some("two".into()), ..Default::default() }]).is_empty());
        assert_eq!(state.title.as_deref(), Some("two"));
    }

    #[test]
    fn python_repr() {
        assert_eq!(py_repr(&json!("it's")), "\"it's\"");
        assert_eq!(py_repr(&json!("a'b\"c")), "'a\\'b\"c'");
        assert_eq!(py_repr(&json!("\u{7}\u{a0}é日\u{2028}\u{1F680}")), "'\\x07\\xa0é日\\u2028🚀'");
        assert_eq!(
            py_repr(&json!([{"content": "a", "status": "pending", "n": null, "ok": true, "f": 1.5}])),
            "[{'content': 'a', 'status': 'pending', 'n': None, 'ok': True, 'f': 1.5}]"
        );
        assert_eq!(py_repr(&json!(2.0)), "2.0");
        assert_eq!(py_repr(&json!(1e-7)), "1e-07");
    }

    #[test]
    fn state_round_trips_through_json() {
        let mut state = ThreadState::default();
        state
            .apply(&StateUpdate {
                goal: Some(json!({"objective": "o"})),
                delegations: Some(vec![json!({"id": "a", "status": "running"})]),
                ..Default::default()
            })
            .unwrap();
        let back: ThreadState = serde_json::from_value(serde_json::to_value(&state).unwrap()).unwrap();
        assert_eq!(back, state);
    }
}
