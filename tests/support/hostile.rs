//! Helpers shared by the tests that drive the hostile component (`guest-tools/hostile`): where it
//! is, one call through the whole host, and the check that a good tool still works after a bad one.

use std::path::{Path, PathBuf};

use serde_json::{json, Value};
use toolhost::assembly::AssemblyRequest;
use toolhost::Toolhost;

pub fn hostile_wasm() -> PathBuf {
    Path::new(toolhost::bundled::GUEST_DIR).join("hostile.wasm")
}

/// Call `name` in thread `t1`: (text, is_error).
pub async fn call(host: &Toolhost, name: &str, args: Value) -> (String, bool) {
    let r = host.call(&AssemblyRequest::default(), "t1", name, args, None).await.unwrap();
    (r.outcome.text_content(), r.outcome.is_error())
}

/// The `ok` tool answers `ok`.
pub async fn assert_ok_still_works(host: &Toolhost) {
    let (text, err) = call(host, "ok", json!({})).await;
    assert!(!err && text == "ok", "good tool after a bad one: {text}");
}

/// A file tool still answers: `read_file` of a missing file is DeerFlow's not-found error.
#[allow(dead_code)]
pub async fn assert_ok_still_works_named(host: &Toolhost, read_file: &str) {
    let (text, _) = call(host, read_file, json!({"description": "d", "path": "/mnt/user-data/workspace/none"})).await;
    assert!(text.starts_with("Error: File not found"), "a normal call after a hostile one: {text}");
}
