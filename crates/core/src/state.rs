//! `ThreadState` (DeerFlow's `H/agents/thread_state.py`) and `StateUpdate`, DeerFlow's
//! `Command(update=…)`, merged with DeerFlow's reducers (spec §10).
//!
//! The reducers work on JSON values where DeerFlow's own channel types are loose, so that state
//! written by DeerFlow round-trips unchanged.

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

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReducerError {
    /// DeerFlow's `ValueError("Conflicting sandbox state updates: …")`.
    #[error("{0}")]
    Value(String),
}

impl ThreadState {
    /// Merge one update with DeerFlow's reducers. On error the state is unchanged.
    pub fn apply(&mut self, update: &StateUpdate) -> Result<(), ReducerError> {
        let sandbox = merge_sandbox(self.sandbox.as_ref(), update.sandbox.as_ref())?;
        if let Some(new) = &update.artifacts {
            self.artifacts = merge_artifacts(&self.artifacts, new);
        }
        if let Some(new) = &update.viewed_images {
            self.viewed_images = merge_viewed_images(&self.viewed_images, new);
        }
        if let Some(new) = &update.promoted {
            self.promoted = merge_promoted(self.promoted.as_ref(), Some(new));
        }
        if update.todos.is_some() {
            self.todos = update.todos.clone();
        }
        self.sandbox = sandbox;
        if update.thread_data.is_some() {
            self.thread_data = update.thread_data.clone();
        }
        if update.uploaded_files.is_some() {
            self.uploaded_files = update.uploaded_files.clone();
        }
        if update.title.is_some() {
            self.title = update.title.clone();
        }
        if let Some(new) = &update.skill_context {
            self.skill_context = merge_skill_context(&self.skill_context, new);
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

    /// Merge the updates of several calls of one model turn, in call order. An update whose
    /// reducer raises is skipped and its error returned beside the others' success.
    pub fn apply_all<'a>(&mut self, updates: impl IntoIterator<Item = &'a StateUpdate>) -> Vec<ReducerError> {
        updates.into_iter().filter_map(|u| self.apply(u).err()).collect()
    }
}

/// `merge_artifacts`: ordered dedupe of existing + new.
pub fn merge_artifacts(existing: &[String], new: &[String]) -> Vec<String> {
    let mut out: Vec<String> = Vec::with_capacity(existing.len() + new.len());
    for item in existing.iter().chain(new) {
        if !out.contains(item) {
            out.push(item.clone());
        }
    }
    out
}

/// `merge_viewed_images`: `{}` clears, otherwise dict merge with the new value winning.
pub fn merge_viewed_images(existing: &Map<String, Value>, new: &Map<String, Value>) -> Map<String, Value> {
    if new.is_empty() {
        return Map::new();
    }
    let mut out = existing.clone();
    for (k, v) in new {
        out.insert(k.clone(), v.clone());
    }
    out
}

/// `merge_sandbox`: None keeps; same id idempotent; a different id is an error.
pub fn merge_sandbox(existing: Option<&Value>, new: Option<&Value>) -> Result<Option<Value>, ReducerError> {
    match (existing, new) {
        (_, None) | (_, Some(Value::Null)) => Ok(existing.cloned()),
        (None, Some(n)) | (Some(Value::Null), Some(n)) => Ok(Some(n.clone())),
        (Some(e), Some(n)) => {
            let (ei, ni) = (e.get("sandbox_id"), n.get("sandbox_id"));
            if ei == ni {
                Ok(Some(e.clone()))
            } else {
                Err(ReducerError::Value(format!("Conflicting sandbox state updates: {e} != {n}")))
            }
        }
    }
}

/// `merge_promoted` (spec §8): a new hash replaces wholesale, the same hash unions names.
pub fn merge_promoted(existing: Option<&Value>, new: Option<&Value>) -> Option<Value> {
    let new = match new {
        None | Some(Value::Null) => return existing.cloned(),
        Some(Value::Object(m)) if m.is_empty() => return existing.cloned(),
        Some(n) => n,
    };
    let names = |v: &Value| -> Vec<Value> { v.get("names").and_then(Value::as_array).cloned().unwrap_or_default() };
    let hash = new.get("catalog_hash").cloned().unwrap_or(Value::Null);
    let mut merged: Vec<Value> = Vec::new();
    if let Some(e) = existing {
        if e.get("catalog_hash") == Some(&hash) {
            merged.extend(names(e));
        }
    }
    for n in names(new) {
        if !merged.contains(&n) {
            merged.push(n);
        }
    }
    let mut dedup: Vec<Value> = Vec::new();
    for n in merged {
        if !dedup.contains(&n) {
            dedup.push(n);
        }
    }
    Some(serde_json::json!({"catalog_hash": hash, "names": dedup}))
}

/// `skill_context`: dedupe by path keeping the most recent, at most 8.
pub fn merge_skill_context(existing: &[Value], new: &[Value]) -> Vec<Value> {
    let mut out: Vec<Value> = Vec::new();
    for item in existing.iter().chain(new) {
        let path = item.get("path");
        out.retain(|o| o.get("path") != path);
        out.push(item.clone());
    }
    let excess = out.len().saturating_sub(8);
    out.drain(..excess);
    out
}
