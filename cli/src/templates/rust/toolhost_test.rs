//! Calls the built component through toolhost (`toolhost build` first; `toolhost` on PATH or
//! in $TOOLHOST_BIN).

use std::process::Command;

fn call(args: &str) -> (serde_json::Value, Option<i32>) {
    let bin = std::env::var("TOOLHOST_BIN").unwrap_or_else(|_| "toolhost".to_string());
    let dir = env!("CARGO_MANIFEST_DIR");
    assert!(
        std::path::Path::new(dir).join("build/__NAME__.wasm").is_file(),
        "build/__NAME__.wasm is missing: run `toolhost build` first"
    );
    let out = Command::new(&bin)
        .current_dir(dir)
        .args(["call", "__TOOL__", args, "--json"])
        .output()
        .unwrap_or_else(|e| panic!("cannot run {bin}: {e}"));
    let json = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("toolhost printed no JSON ({e}): {}", String::from_utf8_lossy(&out.stderr)));
    (json, out.status.code())
}

#[test]
fn greets() {
    let (r, code) = call(r#"{"name": "Ada", "excited": true}"#);
    assert_eq!(r["content"], "Hello, Ada!");
    assert_eq!(code, Some(0));
}

#[test]
fn an_empty_name_is_an_error() {
    let (r, code) = call(r#"{"name": " "}"#);
    assert_eq!(r["status"], "error");
    assert!(r["content"].as_str().unwrap().contains("ValueError: name must not be empty"), "{r}");
    assert_eq!(code, Some(2));
}
