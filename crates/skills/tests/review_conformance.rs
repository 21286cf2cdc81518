//! `review_skill_package` against DeerFlow's own output: every case of
//! `tests/conformance/review_skill_package.json` (produced by `scripts/gen-review-vectors.py`,
//! which runs DeerFlow's tool at f1f4af99 on the fixture packages the file carries) is run
//! through toolhost's tool on a thread whose workspace holds the same packages, and the content
//! the model sees, `additional_kwargs` and the artifact must be equal byte for byte.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::Value;
use toolhost_core::{CallContext, SharedDir, SharedRoots, ThreadState, Threads, Tool};
use toolhost_skills::registry::SkillsLayout;
use toolhost_skills::{ReviewSkillPackageTool, SkillStore};

fn vectors() -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/conformance/review_skill_package.json");
    serde_json::from_str(&std::fs::read_to_string(&path).expect("review vectors")).expect("json")
}

fn b64(text: &str) -> Vec<u8> {
    let mut out = Vec::new();
    let mut buf = 0u32;
    let mut bits = 0;
    for c in text.bytes() {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => continue,
        };
        buf = (buf << 6) | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((buf >> bits) as u8);
        }
    }
    out
}

pub fn materialize(base: &Path, files: &Value) {
    for (rel, spec) in files.as_object().expect("files") {
        let target = base.join(rel);
        std::fs::create_dir_all(target.parent().unwrap()).unwrap();
        match spec {
            Value::String(s) => std::fs::write(&target, s).unwrap(),
            Value::Object(o) if o.contains_key("symlink") => {
                std::os::unix::fs::symlink(o["symlink"].as_str().unwrap(), &target).unwrap()
            }
            Value::Object(o) => std::fs::write(&target, b64(o["bytes_b64"].as_str().unwrap())).unwrap(),
            other => panic!("{other:?}"),
        }
    }
}

struct Setup {
    _dir: tempfile::TempDir,
    skills: PathBuf,
    ctx: CallContext,
}

fn setup(doc: &Value) -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let skills = dir.path().join("skills");
    materialize(&skills.join("public/good-skill"), &doc["packages"]["good-skill"]);
    let shared = SharedRoots::new(Some(SharedDir::open("/mnt/skills", &skills, true).unwrap()), vec![]);
    let threads = Threads::new(dir.path().join("data"), Arc::new(shared));
    let fs = threads.get("t1").unwrap();
    fs.ensure_tool_dirs().unwrap();
    let ws = fs.paths().workspace();
    for (name, files) in doc["packages"].as_object().unwrap() {
        materialize(&ws.join(name), files);
    }
    for (name, data) in doc["archives"].as_object().unwrap() {
        std::fs::write(ws.join(name), b64(data.as_str().unwrap())).unwrap();
    }
    let ctx = CallContext::new(fs, "call", Arc::new(ThreadState::default()));
    Setup { _dir: dir, skills, ctx }
}

#[tokio::test]
async fn every_case_matches_deerflow_byte_for_byte() {
    let doc = vectors();
    let s = setup(&doc);
    let tool = ReviewSkillPackageTool::new(Some(SkillStore::new(SkillsLayout::new(&s.skills))))
        .with_completed_at(doc["completed_at"].as_str().unwrap());
    assert_eq!(tool.spec().name, doc["tool"]["name"]);
    assert_eq!(tool.spec().description, doc["tool"]["description"]);
    assert_eq!(tool.spec().parameters, doc["tool"]["parameters"]);
    assert_eq!(
        serde_json::to_string(&tool.spec().parameters).unwrap(),
        serde_json::to_string(&doc["tool"]["parameters"]).unwrap(),
        "key order"
    );
    let mut failures = Vec::new();
    for case in doc["cases"].as_array().unwrap() {
        let id = case["id"].as_str().unwrap();
        let mut args = case["args"].clone();
        if let Some(t) = args["target"].as_str() {
            args["target"] = Value::String(t.replace("{DIR}", "/mnt/user-data/workspace"));
        }
        let out = tool.call(&s.ctx, args).await;
        let expected = &case["expected"];
        let status = if out.is_error() { "error" } else { "success" };
        if status != expected["status"] {
            failures.push(format!("{id}: status {status}: {}", out.text_content()));
            continue;
        }
        if out.text_content() != expected["content"].as_str().unwrap() {
            failures.push(format!("{id}: content\n  got:  {}\n  want: {}", out.text_content(), expected["content"]));
            continue;
        }
        let kwargs = out.additional_kwargs.clone().map(Value::Object).unwrap_or(Value::Object(Default::default()));
        if kwargs != expected["additional_kwargs"] {
            failures.push(format!("{id}: additional_kwargs {kwargs} != {}", expected["additional_kwargs"]));
        }
        let artifact = out.structured.clone().unwrap_or(Value::Null);
        // Deliberate difference: toolhost's artifact (MCP structuredContent) is neutralized.
        let mut want = expected["artifact"].clone();
        toolhost_skills::review::tool::neutralize_strings(&mut want);
        if artifact != want {
            failures.push(format!("{id}: artifact\n  got:  {artifact}\n  want: {want}"));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases differ:\n{}",
        failures.len(),
        doc["cases"].as_array().unwrap().len(),
        failures.join("\n")
    );
}
