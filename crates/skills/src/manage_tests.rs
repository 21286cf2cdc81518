//! Tests of `skill_manage`: every action's success and error paths, the scan fallback, and the
//! per-skill lock under parallel calls.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use toolhost_core::{CallContext, ThreadState, Tool};

use super::*;
use crate::registry::SkillsLayout;

struct FixedScanner {
    decision: ScanDecision,
    delay: Duration,
    in_flight: AtomicUsize,
    max_in_flight: AtomicUsize,
}

impl FixedScanner {
    fn new(decision: ScanDecision) -> Arc<Self> {
        Arc::new(Self { decision, delay: Duration::ZERO, in_flight: 0.into(), max_in_flight: 0.into() })
    }
}

#[async_trait]
impl SkillContentScanner for FixedScanner {
    async fn scan(&self, _content: &str, _executable: bool, _location: &str) -> Result<ScanResult, String> {
        let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        self.max_in_flight.fetch_max(now, Ordering::SeqCst);
        tokio::time::sleep(self.delay).await;
        self.in_flight.fetch_sub(1, Ordering::SeqCst);
        Ok(ScanResult { decision: self.decision, reason: format!("fixed {}", self.decision.as_str()) })
    }
}

struct Fixture {
    dir: tempfile::TempDir,
    tool: SkillManageTool,
    ctx: CallContext,
}

impl Fixture {
    fn new(scanner: Option<Arc<dyn SkillContentScanner>>, fail_closed: bool) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let store = SkillStore::new(SkillsLayout::new(dir.path().join("skills")));
        let tool = SkillManageTool::new(SkillManageConfig { store, security_fail_closed: fail_closed, scanner });
        let fs = toolhost_core::ThreadFs::open(dir.path(), "t1").unwrap();
        let ctx = CallContext::new(Arc::new(fs), "c1", Arc::new(ThreadState::default()));
        Self { dir, tool, ctx }
    }

    fn allowing() -> Self {
        Self::new(Some(FixedScanner::new(ScanDecision::Allow)), true)
    }

    fn root(&self) -> std::path::PathBuf {
        self.dir.path().join("skills")
    }

    async fn call(&self, args: Value) -> ToolOutcome {
        self.tool.call(&self.ctx, args).await
    }

    async fn ok(&self, args: Value) -> String {
        let out = self.call(args.clone()).await;
        assert!(!out.is_error(), "{args}: {}", out.text_content());
        out.text_content()
    }

    async fn err(&self, args: Value) -> String {
        let out = self.call(args.clone()).await;
        assert!(out.is_error(), "{args} should fail: {}", out.text_content());
        out.text_content()
    }

    fn history(&self, name: &str) -> Vec<Value> {
        self.tool.custom().read_history(name).unwrap()
    }
}

fn md(name: &str, body: &str) -> String {
    format!("---\nname: {name}\ndescription: A test skill\n---\n{body}")
}

fn wrapped(class: &str, detail: &str) -> String {
    format!("Error: Tool 'skill_manage' failed with {class}: {detail}. Continue with available context, or choose an alternative tool.")
}

#[tokio::test]
async fn create_edit_delete_round_trip() {
    let f = Fixture::allowing();
    assert_eq!(
        f.ok(json!({"action": "create", "name": "demo", "content": md("demo", "v1\n")})).await,
        "Created custom skill 'demo'."
    );
    let file = f.root().join("custom/demo/SKILL.md");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), md("demo", "v1\n"));
    assert_eq!(
        f.err(json!({"action": "create", "name": "demo", "content": md("demo", "")})).await,
        wrapped("ValueError", "Custom skill 'demo' already exists.")
    );
    assert_eq!(
        f.ok(json!({"action": "edit", "name": "demo", "content": md("demo", "v2\n")})).await,
        "Updated custom skill 'demo'."
    );
    assert_eq!(std::fs::read_to_string(&file).unwrap(), md("demo", "v2\n"));
    assert_eq!(f.ok(json!({"action": "delete", "name": "demo"})).await, "Deleted custom skill 'demo'.");
    assert!(!f.root().join("custom/demo").exists());

    let history = f.history("demo");
    let actions: Vec<&str> = history.iter().map(|r| r["action"].as_str().unwrap()).collect();
    assert_eq!(actions, ["create", "edit", "delete"]);
    assert_eq!(history[1]["prev_content"], json!(md("demo", "v1\n")));
    assert_eq!(history[2]["prev_content"], json!(md("demo", "v2\n")));
    assert_eq!(history[0]["scanner"], json!({"decision": "allow", "reason": "fixed allow"}));
    assert_eq!(history[0]["thread_id"], json!("t1"));
    assert_eq!(history[0]["author"], json!("agent"));
    let keys: Vec<&String> = history[0].as_object().unwrap().keys().collect();
    assert_eq!(keys, ["ts", "action", "author", "thread_id", "file_path", "prev_content", "new_content", "scanner"]);
    let raw = std::fs::read_to_string(f.root().join("custom/.history/demo.jsonl")).unwrap();
    assert!(raw.contains("\"action\": \"create\", \"author\": \"agent\""), "Python separators: {raw}");
}

#[tokio::test]
async fn create_and_edit_errors() {
    let f = Fixture::allowing();
    let cases = [
        (
            json!({"action": "create", "name": "Bad_Name", "content": "x"}),
            wrapped("ValueError", "Skill name must be hyphen-case using lowercase letters, digits, and hyphens only."),
        ),
        (json!({"action": "create", "name": "demo"}), wrapped("ValueError", "content is required for create.")),
        (
            json!({"action": "create", "name": "demo", "content": "# none"}),
            wrapped("ValueError", "No YAML frontmatter found"),
        ),
        (
            json!({"action": "create", "name": "demo", "content": md("other", "")}),
            wrapped("ValueError", "Frontmatter name 'other' must match requested skill name 'demo'."),
        ),
        (
            json!({"action": "create", "name": "demo", "content": "---\nname: demo\ndescription: d\nextra: 1\n---\n"}),
            wrapped("ValueError", "Unexpected key(s) in SKILL.md frontmatter: extra"),
        ),
        (
            json!({"action": "edit", "name": "ghost", "content": md("ghost", "")}),
            wrapped("FileNotFoundError", "Custom skill 'ghost' not found."),
        ),
        (json!({"action": "delete", "name": "ghost"}), wrapped("FileNotFoundError", "Custom skill 'ghost' not found.")),
        (json!({"action": "frobnicate", "name": "ghost"}), wrapped("ValueError", "Unsupported action 'frobnicate'.")),
    ];
    for (args, want) in cases {
        assert_eq!(f.err(args.clone()).await, want, "{args}");
    }
    assert!(!f.root().join("custom/demo").exists(), "failed creates write nothing");
    f.ok(json!({"action": "create", "name": "demo", "content": md("demo", "")})).await;
    assert_eq!(
        f.err(json!({"action": "edit", "name": "demo"})).await,
        wrapped("ValueError", "content is required for edit.")
    );

    let missing = f.err(json!({"name": "demo"})).await;
    assert!(
        missing.starts_with("Error: Tool 'skill_manage' failed with ValidationError:") && missing.contains("action"),
        "{missing}"
    );
    let bad_count = f.err(json!({"action": "patch", "name": "demo", "expected_count": "two"})).await;
    assert!(bad_count.contains("expected_count"), "{bad_count}");
}

#[tokio::test]
async fn read_only_skills() {
    let f = Fixture::allowing();
    let public = f.root().join("public/builtin/SKILL.md");
    std::fs::create_dir_all(public.parent().unwrap()).unwrap();
    std::fs::write(&public, md("builtin", "")).unwrap();
    assert_eq!(
        f.err(json!({"action": "edit", "name": "builtin", "content": md("builtin", "")})).await,
        wrapped("ValueError", "'builtin' is a built-in skill. Use the skill_manage tool to create your own version — it will shadow the built-in one.")
    );
    assert_eq!(
        f.err(json!({"action": "rename", "name": "builtin"})).await,
        wrapped("ValueError", "'builtin' is a read-only skill (built-in or legacy shared). To customise it, create your own version with the same name.")
    );
    // A custom skill may shadow a built-in one.
    f.ok(json!({"action": "create", "name": "builtin", "content": md("builtin", "mine")})).await;
    assert_eq!(std::fs::read_to_string(&public).unwrap(), md("builtin", ""));
}

#[tokio::test]
async fn patch_paths() {
    let f = Fixture::allowing();
    f.ok(json!({"action": "create", "name": "p", "content": md("p", "a TODO b TODO c\n")})).await;
    let cases = [
        (json!({"action": "patch", "name": "p", "find": "TODO"}), "find and replace are required for patch."),
        (
            json!({"action": "patch", "name": "p", "find": "nope", "replace": "x"}),
            "Patch target not found in SKILL.md.",
        ),
        (
            json!({"action": "patch", "name": "p", "find": "TODO", "replace": "x", "expected_count": 3}),
            "Expected 3 replacements but found 2.",
        ),
        (
            json!({"action": "patch", "name": "p", "find": "name: p", "replace": "name: q"}),
            "Frontmatter name 'q' must match requested skill name 'p'.",
        ),
    ];
    for (args, want) in cases {
        assert_eq!(f.err(args.clone()).await, wrapped("ValueError", want), "{args}");
    }
    assert_eq!(
        f.ok(json!({"action": "patch", "name": "p", "find": "TODO", "replace": "DONE"})).await,
        "Patched custom skill 'p' (1 replacement(s) applied, 2 match(es) found)."
    );
    let file = f.root().join("custom/p/SKILL.md");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), md("p", "a DONE b TODO c\n"));
    f.ok(json!({"action": "patch", "name": "p", "find": "DONE", "replace": "TODO"})).await;
    assert_eq!(
        f.ok(json!({"action": "patch", "name": "p", "find": "TODO", "replace": "X", "expected_count": "2"})).await,
        "Patched custom skill 'p' (2 replacement(s) applied, 2 match(es) found)."
    );
    assert_eq!(std::fs::read_to_string(&file).unwrap(), md("p", "a X b X c\n"));
    assert_eq!(py_replace("ab", "", "-", 2), "-a-b");
    assert_eq!(py_count("ab", ""), 3);
}

#[tokio::test]
async fn support_files() {
    let f = Fixture::allowing();
    f.ok(json!({"action": "create", "name": "s", "content": md("s", "")})).await;
    assert_eq!(
        f.ok(json!({"action": "write_file", "name": "s", "path": "references/api.md", "content": "# API\n"})).await,
        "Wrote 'references/api.md' for custom skill 's'."
    );
    assert_eq!(std::fs::read_to_string(f.root().join("custom/s/references/api.md")).unwrap(), "# API\n");
    f.ok(json!({"action": "write_file", "name": "s", "path": "references/api.md", "content": "# API v2\n"})).await;
    let cases = [
        (
            json!({"action": "write_file", "name": "s", "path": "references/x.md"}),
            "path and content are required for write_file.",
        ),
        (
            json!({"action": "write_file", "name": "s", "path": "../x.md", "content": "x"}),
            "Supporting file path must not contain parent-directory traversal.",
        ),
        (
            json!({"action": "write_file", "name": "s", "path": "SKILL.md", "content": "x"}),
            "Supporting files must live under one of: assets, references, scripts, templates.",
        ),
        (
            json!({"action": "write_file", "name": "s", "path": "references", "content": "x"}),
            "Supporting file path must name a file inside 'references/'.",
        ),
        (json!({"action": "remove_file", "name": "s"}), "path is required for remove_file."),
    ];
    for (args, want) in cases {
        assert_eq!(f.err(args.clone()).await, wrapped("ValueError", want), "{args}");
    }
    std::fs::create_dir_all(f.root().join("custom/s/assets/dir")).unwrap();
    assert_eq!(
        f.err(json!({"action": "write_file", "name": "s", "path": "assets/dir", "content": "x"})).await,
        wrapped("ValueError", "Supporting file path 'assets/dir' is a directory, not a file.")
    );
    assert_eq!(
        f.err(json!({"action": "write_file", "name": "ghost", "path": "assets/a", "content": "x"})).await,
        wrapped("FileNotFoundError", "Custom skill 'ghost' not found.")
    );
    assert_eq!(
        f.ok(json!({"action": "remove_file", "name": "s", "path": "references/api.md"})).await,
        "Removed 'references/api.md' from custom skill 's'."
    );
    assert!(!f.root().join("custom/s/references/api.md").exists());
    assert_eq!(
        f.err(json!({"action": "remove_file", "name": "s", "path": "references/api.md"})).await,
        wrapped("FileNotFoundError", "Supporting file 'references/api.md' not found for skill 's'.")
    );
    let history = f.history("s");
    assert_eq!(history[1]["prev_content"], Value::Null);
    assert_eq!(history[2]["prev_content"], json!("# API\n"));
    assert_eq!(history[3]["action"], json!("remove_file"));
    assert_eq!(history[3]["prev_content"], json!("# API v2\n"));
    assert_eq!(history[3]["scanner"], json!({"decision": "allow", "reason": "Deletion requested."}));
}

#[tokio::test]
async fn scan_decisions_and_fallbacks() {
    let warn = Fixture::new(Some(FixedScanner::new(ScanDecision::Warn)), true);
    warn.ok(json!({"action": "create", "name": "s", "content": md("s", "")})).await;
    assert_eq!(
        warn.err(json!({"action": "write_file", "name": "s", "path": "scripts/run.sh", "content": "echo hi"})).await,
        wrapped("ValueError", "Security scan rejected executable content: fixed warn")
    );
    warn.ok(json!({"action": "write_file", "name": "s", "path": "templates/t.md", "content": "t"})).await;

    let block = Fixture::new(Some(FixedScanner::new(ScanDecision::Block)), true);
    assert_eq!(
        block.err(json!({"action": "create", "name": "s", "content": md("s", "")})).await,
        wrapped("ValueError", "Security scan blocked the write: fixed block")
    );
    assert!(!block.root().join("custom/s").exists());

    let closed = Fixture::new(None, true);
    assert_eq!(
        closed.err(json!({"action": "create", "name": "s", "content": md("s", "")})).await,
        wrapped(
            "ValueError",
            "Security scan blocked the write: Security scan unavailable for skill content; manual review required."
        )
    );
    let open = Fixture::new(None, false);
    open.ok(json!({"action": "create", "name": "s", "content": md("s", "")})).await;
    assert_eq!(open.history("s")[0]["scanner"]["decision"], json!("warn"));
    assert_eq!(
        open.err(json!({"action": "write_file", "name": "s", "path": "scripts/a.py", "content": "print(1)"})).await,
        wrapped("ValueError", "Security scan blocked the write: Security scan unavailable for executable content; manual review required.")
    );
}

#[test]
fn failure_detail_is_capped() {
    let long = ManageError::value("x".repeat(600));
    let msg = tool_failure_message("skill_manage", &long);
    assert!(msg.contains(&format!("ValueError: {}.... Continue", "x".repeat(497))), "{msg}");
}

#[test]
fn spec_shape() {
    let spec = skill_manage_spec();
    assert_eq!(spec.name, "skill_manage");
    assert_eq!(spec.parameters["required"], json!(["action", "name"]));
    let keys: Vec<&String> = spec.parameters["properties"].as_object().unwrap().keys().collect();
    assert_eq!(keys, ["action", "name", "content", "path", "find", "replace", "expected_count"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn calls_on_one_skill_serialise() {
    let scanner = Arc::new(FixedScanner {
        decision: ScanDecision::Allow,
        delay: Duration::from_millis(20),
        in_flight: 0.into(),
        max_in_flight: 0.into(),
    });
    let f = Arc::new(Fixture::new(Some(scanner.clone()), true));
    f.ok(json!({"action": "create", "name": "one", "content": md("one", "MARK\n")})).await;
    f.ok(json!({"action": "create", "name": "two", "content": md("two", "MARK\n")})).await;
    scanner.max_in_flight.store(0, Ordering::SeqCst);

    // Every patch reads, scans (slowly) and writes: without the lock, patches would overwrite
    // each other and marks would be lost.
    let mut tasks = Vec::new();
    for _ in 0..8 {
        let f = f.clone();
        tasks.push(tokio::spawn(async move {
            f.ok(json!({"action": "patch", "name": "one", "find": "MARK", "replace": "MARK+"})).await
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    assert_eq!(scanner.max_in_flight.load(Ordering::SeqCst), 1, "one skill, one call at a time");
    let text = std::fs::read_to_string(f.root().join("custom/one/SKILL.md")).unwrap();
    assert_eq!(text, md("one", &format!("MARK{}\n", "+".repeat(8))));
    assert_eq!(f.history("one").len(), 9);

    // Different skills do not wait for each other.
    scanner.max_in_flight.store(0, Ordering::SeqCst);
    let (a, b) = tokio::join!(
        f.call(json!({"action": "patch", "name": "one", "find": "MARK", "replace": "M"})),
        f.call(json!({"action": "patch", "name": "two", "find": "MARK", "replace": "M"})),
    );
    assert!(!a.is_error() && !b.is_error());
    assert_eq!(scanner.max_in_flight.load(Ordering::SeqCst), 2);
}
