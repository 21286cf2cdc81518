//! The `skill_manage` tool (assembled only when `skill_evolution.enabled`): create, patch, edit
//! and delete custom skills and their support files, with SKILL.md validation, the content
//! security scan, a history record per change and one lock per skill.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock, Weak};

use async_trait::async_trait;
use serde_json::{json, Map, Value};
use toolhost_core::{CallContext, Tool, ToolOutcome, ToolSource, ToolSpec};

use crate::custom::{
    read_optional_text, validate_skill_markdown_content, validate_skill_name, CustomSkills, ManageError,
};
use crate::registry::{SkillStore, SKILL_MD_FILE};

pub const SKILL_MANAGE_TOOL_NAME: &str = "skill_manage";

/// What a content scan decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScanDecision {
    Allow,
    Warn,
    Block,
}

impl ScanDecision {
    fn as_str(self) -> &'static str {
        match self {
            ScanDecision::Allow => "allow",
            ScanDecision::Warn => "warn",
            ScanDecision::Block => "block",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScanResult {
    pub decision: ScanDecision,
    pub reason: String,
}

/// DeerFlow's moderation scan of skill content (an LLM call there). The host supplies one when
/// it has a moderation model; `Err` means the scan was unavailable and DeerFlow's conservative
/// fallback applies. A scanner whose model answered with garbage should return `Block`.
#[async_trait]
pub trait SkillContentScanner: Send + Sync {
    async fn scan(&self, content: &str, executable: bool, location: &str) -> Result<ScanResult, String>;
}

/// `skill_evolution` config and where the skills live.
#[derive(Clone)]
pub struct SkillManageConfig {
    pub store: SkillStore,
    /// `skill_evolution.security_fail_closed` (default true): with no scan available, block
    /// every write; when false, non-executable content is written with a warning.
    pub security_fail_closed: bool,
    pub scanner: Option<Arc<dyn SkillContentScanner>>,
}

impl SkillManageConfig {
    pub fn new(store: SkillStore) -> Self {
        Self { store, security_fail_closed: true, scanner: None }
    }
}

/// The model's arguments, checked the way the tool's schema declares them.
#[derive(Debug, Default)]
struct Args {
    action: String,
    name: String,
    content: Option<String>,
    path: Option<String>,
    find: Option<String>,
    replace: Option<String>,
    expected_count: Option<i64>,
}

fn validation_error(msg: String) -> ManageError {
    ManageError { class: "ValidationError", message: format!("1 validation error for skill_manage\n{msg}") }
}

impl Args {
    fn parse(args: &Value) -> Result<Self, ManageError> {
        let obj = args.as_object().ok_or_else(|| validation_error("arguments must be a JSON object".into()))?;
        let required = |key: &str| match obj.get(key) {
            Some(Value::String(s)) => Ok(s.clone()),
            None => Err(validation_error(format!("{key}\n  Field required"))),
            Some(_) => Err(validation_error(format!("{key}\n  Input should be a valid string"))),
        };
        let optional = |key: &str| match obj.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(_) => Err(validation_error(format!("{key}\n  Input should be a valid string"))),
        };
        let expected_count = match obj.get("expected_count") {
            None | Some(Value::Null) => None,
            Some(Value::Number(n)) if n.as_i64().is_some() => n.as_i64(),
            Some(Value::Number(n)) if n.as_f64().is_some_and(|f| f.fract() == 0.0 && f.abs() < 9.0e15) => {
                n.as_f64().map(|f| f as i64)
            }
            // pydantic's lax mode accepts an integer written as a string.
            Some(Value::String(s)) if s.trim().parse::<i64>().is_ok() => s.trim().parse().ok(),
            Some(_) => return Err(validation_error("expected_count\n  Input should be a valid integer".into())),
        };
        Ok(Self {
            action: required("action")?,
            name: required("name")?,
            content: optional("content")?,
            path: optional("path")?,
            find: optional("find")?,
            replace: optional("replace")?,
            expected_count,
        })
    }
}

/// One lock per (custom root, skill): concurrent calls on a skill run one after the other,
/// calls on different skills do not wait for each other.
fn skill_lock(custom_root: &std::path::Path, name: &str) -> Arc<tokio::sync::Mutex<()>> {
    type Locks = Mutex<HashMap<(PathBuf, String), Weak<tokio::sync::Mutex<()>>>>;
    static LOCKS: OnceLock<Locks> = OnceLock::new();
    let locks = LOCKS.get_or_init(Default::default);
    let mut map = locks.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    map.retain(|_, weak| weak.strong_count() > 0);
    let key = (custom_root.to_path_buf(), name.to_string());
    if let Some(lock) = map.get(&key).and_then(Weak::upgrade) {
        return lock;
    }
    let lock = Arc::new(tokio::sync::Mutex::new(()));
    map.insert(key, Arc::downgrade(&lock));
    lock
}

/// Python's `str.count` (an empty needle matches at every character boundary).
fn py_count(haystack: &str, needle: &str) -> usize {
    if needle.is_empty() {
        haystack.chars().count() + 1
    } else {
        haystack.matches(needle).count()
    }
}

/// Python's `str.replace(old, new, count)`.
fn py_replace(haystack: &str, old: &str, new: &str, count: usize) -> String {
    if !old.is_empty() {
        return haystack.replacen(old, new, count);
    }
    let mut out = String::with_capacity(haystack.len() + new.len() * count);
    let mut done = 0;
    for c in haystack.chars() {
        if done < count {
            out.push_str(new);
            done += 1;
        }
        out.push(c);
    }
    if done < count {
        out.push_str(new);
    }
    out
}

/// `ToolErrorHandlingMiddleware`'s text for an exception; `skill_manage` raises in DeerFlow and
/// a toolhost tool answers instead, so the tool writes what the model would have read.
pub fn tool_failure_message(tool: &str, err: &ManageError) -> String {
    let mut detail = err.message.trim().to_string();
    if detail.is_empty() {
        detail = err.class.to_string();
    }
    if detail.chars().count() > 500 {
        detail = detail.chars().take(497).collect::<String>() + "...";
    }
    format!(
        "Error: Tool '{tool}' failed with {}: {detail}. Continue with available context, or choose an alternative tool.",
        err.class
    )
}

fn history_record(
    action: &str,
    file_path: &str,
    prev: Option<String>,
    new: Option<String>,
    thread_id: Option<&str>,
    scanner: Value,
) -> Value {
    json!({
        "action": action,
        "author": "agent",
        "thread_id": thread_id,
        "file_path": file_path,
        "prev_content": prev,
        "new_content": new,
        "scanner": scanner,
    })
}

pub struct SkillManageTool {
    spec: ToolSpec,
    config: SkillManageConfig,
}

impl SkillManageTool {
    pub fn new(config: SkillManageConfig) -> Self {
        Self { spec: skill_manage_spec(), config }
    }

    fn custom(&self) -> CustomSkills {
        CustomSkills { layout: self.config.store.layout().clone() }
    }

    /// Run blocking filesystem work off the async executor.
    async fn fs<T: Send + 'static>(
        &self,
        work: impl FnOnce(CustomSkills) -> Result<T, ManageError> + Send + 'static,
    ) -> Result<T, ManageError> {
        let custom = self.custom();
        tokio::task::spawn_blocking(move || work(custom))
            .await
            .map_err(|e| ManageError { class: "RuntimeError", message: format!("skill_manage worker failed: {e}") })?
    }

    /// `_scan_or_raise`, with DeerFlow's fallback when no scan is available.
    async fn scan(&self, content: &str, executable: bool, location: &str) -> Result<Value, ManageError> {
        let scanned = match &self.config.scanner {
            Some(scanner) => scanner.scan(content, executable, location).await,
            None => Err("no moderation model configured".to_string()),
        };
        let result = scanned.unwrap_or_else(|why| {
            tracing::warn!("skill security scan unavailable ({why}); using conservative fallback");
            let (decision, reason) = if executable {
                (ScanDecision::Block, "Security scan unavailable for executable content; manual review required.")
            } else if self.config.security_fail_closed {
                (ScanDecision::Block, "Security scan unavailable for skill content; manual review required.")
            } else {
                (
                    ScanDecision::Warn,
                    "Security scan unavailable for non-executable skill content; manual review recommended.",
                )
            };
            ScanResult { decision, reason: reason.to_string() }
        });
        if result.decision == ScanDecision::Block {
            return Err(ManageError::value(format!("Security scan blocked the write: {}", result.reason)));
        }
        if executable && result.decision != ScanDecision::Allow {
            return Err(ManageError::value(format!("Security scan rejected executable content: {}", result.reason)));
        }
        Ok(json!({"decision": result.decision.as_str(), "reason": result.reason}))
    }

    /// Validate, scan, write SKILL.md and record it: the common tail of create/edit/patch.
    async fn write_skill_md(
        &self,
        action: &'static str,
        name: &str,
        content: String,
        prev: Option<String>,
        thread_id: Option<String>,
    ) -> Result<(), ManageError> {
        validate_skill_markdown_content(name, &content)?;
        let scan = self.scan(&content, false, &format!("{name}/{SKILL_MD_FILE}")).await?;
        let name = name.to_string();
        self.fs(move |c| {
            c.write(&name, SKILL_MD_FILE, &content)?;
            let record = history_record(action, SKILL_MD_FILE, prev, Some(content), thread_id.as_deref(), scan);
            c.append_history(&name, &record)
        })
        .await
    }

    async fn run(&self, ctx: &CallContext, args: Args) -> Result<String, ManageError> {
        let name = validate_skill_name(&args.name)?;
        let thread_id = Some(ctx.thread_id.clone()).filter(|t| !t.is_empty());
        let lock = skill_lock(&self.config.store.layout().custom_root, &name);
        let _guard = lock.lock().await;
        let n = name.clone();
        match args.action.as_str() {
            "create" => {
                if self.fs(move |c| Ok(c.exists(&n))).await? {
                    return Err(ManageError::value(format!("Custom skill '{name}' already exists.")));
                }
                let content = args.content.ok_or_else(|| ManageError::value("content is required for create."))?;
                self.write_skill_md("create", &name, content, None, thread_id).await?;
                Ok(format!("Created custom skill '{name}'."))
            }
            "edit" => {
                self.fs(move |c| c.ensure_editable(&n)).await?;
                let content = args.content.ok_or_else(|| ManageError::value("content is required for edit."))?;
                let n = name.clone();
                let prev = self.fs(move |c| c.read_skill_md(&n)).await?;
                self.write_skill_md("edit", &name, content, Some(prev), thread_id).await?;
                Ok(format!("Updated custom skill '{name}'."))
            }
            "patch" => {
                self.fs(move |c| c.ensure_editable(&n)).await?;
                let (Some(find), Some(replace)) = (args.find, args.replace) else {
                    return Err(ManageError::value("find and replace are required for patch."));
                };
                let n = name.clone();
                let prev = self.fs(move |c| c.read_skill_md(&n)).await?;
                let occurrences = py_count(&prev, &find);
                if occurrences == 0 {
                    return Err(ManageError::value("Patch target not found in SKILL.md."));
                }
                if let Some(expected) = args.expected_count {
                    if usize::try_from(expected).ok() != Some(occurrences) {
                        return Err(ManageError::value(format!(
                            "Expected {expected} replacements but found {occurrences}."
                        )));
                    }
                }
                // Equal to `occurrences` when given, so it is a valid count here.
                let applied = args.expected_count.map_or(1, |e| e as usize);
                let new_content = py_replace(&prev, &find, &replace, applied);
                self.write_skill_md("patch", &name, new_content, Some(prev), thread_id).await?;
                Ok(format!(
                    "Patched custom skill '{name}' ({applied} replacement(s) applied, {occurrences} match(es) found)."
                ))
            }
            "delete" => {
                let scanner = json!({"decision": "allow", "reason": "Deletion requested."});
                let record = history_record("delete", SKILL_MD_FILE, None, None, thread_id.as_deref(), scanner);
                self.fs(move |c| c.delete(&n, Some(record))).await?;
                Ok(format!("Deleted custom skill '{name}'."))
            }
            "write_file" => {
                self.fs(move |c| c.ensure_editable(&n)).await?;
                let (Some(path), Some(content)) = (args.path, args.content) else {
                    return Err(ManageError::value("path and content are required for write_file."));
                };
                let (n, p) = (name.clone(), path.clone());
                let prev = self
                    .fs(move |c| {
                        let target = c.safe_support_path(&n, &p, true)?;
                        if target.is_dir() {
                            return Err(ManageError::value(format!(
                                "Supporting file path '{p}' is a directory, not a file."
                            )));
                        }
                        Ok(read_optional_text(&target))
                    })
                    .await?;
                let executable = path.contains("scripts/");
                let scan = self.scan(&content, executable, &format!("{name}/{path}")).await?;
                let (n, p) = (name.clone(), path.clone());
                self.fs(move |c| {
                    c.write(&n, &p, &content)?;
                    let record = history_record("write_file", &p, prev, Some(content), thread_id.as_deref(), scan);
                    c.append_history(&n, &record)
                })
                .await?;
                Ok(format!("Wrote '{path}' for custom skill '{name}'."))
            }
            "remove_file" => {
                self.fs(move |c| c.ensure_editable(&n)).await?;
                let path = args.path.ok_or_else(|| ManageError::value("path is required for remove_file."))?;
                let (n, p) = (name.clone(), path.clone());
                self.fs(move |c| {
                    let prev = c.remove_support_file(&n, &p)?;
                    let scanner = json!({"decision": "allow", "reason": "Deletion requested."});
                    let record = history_record("remove_file", &p, prev, None, thread_id.as_deref(), scanner);
                    c.append_history(&n, &record)
                })
                .await?;
                Ok(format!("Removed '{path}' from custom skill '{name}'."))
            }
            action => {
                if self.fs(move |c| Ok(c.read_only_exists(&n))).await? {
                    return Err(ManageError::value(format!(
                        "'{name}' is a read-only skill (built-in or legacy shared). To customise it, create your own version with the same name."
                    )));
                }
                Err(ManageError::value(format!("Unsupported action '{action}'.")))
            }
        }
    }
}

#[async_trait]
impl Tool for SkillManageTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn call(&self, ctx: &CallContext, args: Value) -> ToolOutcome {
        let result = match Args::parse(&args) {
            Ok(args) => self.run(ctx, args).await,
            Err(e) => Err(e),
        };
        match result {
            Ok(text) => ToolOutcome::text(text),
            Err(e) => ToolOutcome::error(tool_failure_message(SKILL_MANAGE_TOOL_NAME, &e)),
        }
    }
}

/// The schema LangChain derives from DeerFlow's signature and docstring (keys in pydantic's
/// sorted order, titles removed as in `convert_to_openai_function`).
pub fn skill_manage_spec() -> ToolSpec {
    let text = |d: &str| json!({"description": d, "type": "string"});
    let opt = |ty: &str, d: &str| json!({"anyOf": [{"type": ty}, {"type": "null"}], "default": null, "description": d});
    let mut props = Map::new();
    props.insert("action".into(), text("One of create, patch, edit, delete, write_file, remove_file."));
    props.insert("name".into(), text("Skill name in hyphen-case."));
    props.insert("content".into(), opt("string", "New file content for create, edit, or write_file."));
    props.insert("path".into(), opt("string", "Supporting file path for write_file or remove_file."));
    props.insert("find".into(), opt("string", "Existing text to replace for patch."));
    props.insert("replace".into(), opt("string", "Replacement text for patch."));
    props.insert("expected_count".into(), opt("integer", "Optional expected number of replacements for patch."));
    ToolSpec {
        name: SKILL_MANAGE_TOOL_NAME.to_string(),
        description: "Manage custom skills under skills/custom/.".to_string(),
        parameters: json!({"properties": props, "required": ["action", "name"], "type": "object"}),
        group: None,
        source: ToolSource::Builtin,
    }
}

#[cfg(test)]
#[path = "manage_tests.rs"]
mod tests;
