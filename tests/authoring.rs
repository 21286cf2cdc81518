//! docs/authoring.md cannot rot: every fenced ```sh block in it is run, in document order, in one
//! bash session (`set -euo pipefail`, so `cd` carries from one block to the next) in an empty
//! temp dir, with this build's `toolhost` and the pinned Python/JS toolchains on PATH. A section
//! added later (signing, publishing) is run the same way as soon as it has a ```sh block; use
//! ```text for output or commands that must not run.
//!
//! Also here: `toolhost new` / `toolhost build` refusals that need no toolchain.

use std::path::Path;
use std::process::Command;

#[path = "support/authoring.rs"]
mod authoring;
#[path = "support/paths.rs"]
mod paths;

/// The ```sh blocks of a Markdown text, in order.
fn sh_blocks(md: &str) -> Vec<String> {
    let mut blocks = Vec::new();
    let mut current: Option<String> = None;
    for line in md.lines() {
        let fence = line.trim_start();
        match &mut current {
            None if fence.starts_with("```") => {
                if fence.trim_start_matches('`').trim() == "sh" {
                    current = Some(String::new());
                } else {
                    // Skip a non-sh block whole.
                    current = Some("\u{0}skip".to_string());
                }
            }
            Some(_) if fence.starts_with("```") => {
                let b = current.take().unwrap();
                if !b.starts_with('\u{0}') {
                    blocks.push(b);
                }
            }
            Some(b) => {
                b.push_str(line);
                b.push('\n');
            }
            None => {}
        }
    }
    assert!(current.is_none(), "an unclosed code fence");
    blocks
}

#[test]
fn sh_blocks_are_found_in_order_and_other_fences_skipped() {
    let md = "a\n```sh\necho one\n```\n```yaml\nx: 1\n```\n```text\nno\n```\n```sh\necho two\necho three\n```\n";
    assert_eq!(sh_blocks(md), vec!["echo one\n".to_string(), "echo two\necho three\n".to_string()]);
}

#[test]
fn every_command_in_docs_authoring_md_runs() {
    let doc = authoring::root().join("docs/authoring.md");
    let md = std::fs::read_to_string(&doc).unwrap();
    let blocks = sh_blocks(&md);
    assert!(blocks.len() >= 8, "docs/authoring.md has only {} sh blocks", blocks.len());
    let mut script = String::from("set -euo pipefail\n");
    for (i, b) in blocks.iter().enumerate() {
        let first = b.lines().next().unwrap_or("");
        script += &format!("echo \">>> block {} of {}: {}\" >&2\n{b}", i + 1, blocks.len(), first.replace('"', "'"));
    }
    let dir = tempfile::tempdir().unwrap();
    let bin = authoring::toolhost_bin();
    let bin_dir = bin.parent().unwrap();
    // One cargo target dir for the Rust template across runs (its dependencies build once).
    let rust_target = Path::new(env!("CARGO_TARGET_TMPDIR")).join("authoring-rust-target");
    // The registry the "Sign and publish" section starts, pushes to and pulls from: on a free
    // loopback port, stopped when the test ends, whatever happened.
    let registry_host =
        format!("127.0.0.1:{}", std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port());
    let _registry = StopRegistry(dir.path().join("registry/pid"));
    let started = std::time::Instant::now();
    let out = Command::new("bash")
        .arg("-c")
        .arg(&script)
        .current_dir(dir.path())
        .env("PATH", authoring::path_with(&[bin_dir]))
        .env("TOOLHOST_REPO", authoring::root())
        .env("TOOLHOST_REGISTRY", &registry_host)
        .env("CARGO_TARGET_DIR", &rust_target)
        .env_remove("TOOLHOST_CONFIG")
        .env_remove("TOOLHOST_HOME")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    eprintln!("docs/authoring.md ran in {:?}", started.elapsed());
    assert!(
        out.status.success(),
        "a command in docs/authoring.md failed ({}):\n--- stdout\n{stdout}\n--- stderr\n{stderr}",
        out.status
    );
    // What the walk-through says happens, checked on its output.
    assert!(stdout.contains("created Python tool project 'greet'"), "{stdout}");
    assert!(stdout.contains("paste into config.yaml:") && stdout.contains("@sha256:"), "{stdout}");
    assert!(stdout.contains("Hello, Ada.\n"), "{stdout}");
    assert!(stdout.contains("\"content\": \"Hello, Ada!\""), "{stdout}");
    assert!(stdout.contains("ValueError: name must not be empty") && stdout.contains("exit status 2"), "{stdout}");
    assert!(stdout.contains("name: expected string, got 3"), "{stdout}");
    assert!(stdout.contains("sales.csv: 2 rows, 2 columns"), "{stdout}");
    // Signed, pushed, and pulled by a config that requires the publisher's signature.
    assert!(stdout.contains("signed by trusted key"), "{stdout}");
    assert!(stdout.contains(&format!("pushed build/greet.wasm to oci://{registry_host}/tools/greet:1.0")), "{stdout}");
    assert!(stdout.contains("Hi, Grace."), "{stdout}");
    assert_eq!(stdout.matches("refused: exit status 2").count(), 2, "{stdout}");
    assert!(!stdout.contains("root:x:0:0"), "a read outside the grant leaked /etc/passwd: {stdout}");
    // Without the grant, the reason names it instead of reading like a missing file.
    assert!(
        stdout.contains(
            "NotGrantedError: /mnt/user-data/uploads/sales.csv is not granted: this tool's capabilities.filesystem is `none`"
        ),
        "{stdout}"
    );
    assert!(stdout.contains("NotGrantedError: /etc/passwd is not granted"), "{stdout}");
    // `toolhost build` of csv-summary prints the grant its config.yaml gives (user-data), not none.
    let csv_entry = stdout.split("csv-summary.wasm@sha256:").nth(1).unwrap_or_default();
    let csv_entry: String = csv_entry.lines().take(5).collect::<Vec<_>>().join("\n");
    assert!(csv_entry.contains("capabilities:\n      filesystem: user-data"), "{csv_entry}");
    // A component changed after signing: the call says why, and where to look.
    assert!(stdout.contains("changed after signing: exit status 2"), "{stdout}");
    assert!(stderr.contains("toolhost: tool 'greet' is not available: refused:"), "{stderr}");
    assert!(stderr.contains("`toolhost check --config config.yaml`"), "{stderr}");
    // The JavaScript builds print no bundler warnings about the WIT imports.
    assert!(stdout.contains("built ") && stderr.contains("jco componentize app.js"), "{stderr}");
    assert!(!stdout.contains("UNRESOLVED_IMPORT") && !stderr.contains("UNRESOLVED_IMPORT"), "{stderr}");
}

/// Stops the registry the docs started (its pid in `registry/pid`) when the test ends.
struct StopRegistry(std::path::PathBuf);

impl Drop for StopRegistry {
    fn drop(&mut self) {
        if let Some(pid) = std::fs::read_to_string(&self.0).ok().and_then(|p| p.trim().parse::<i32>().ok()) {
            let _ = Command::new("kill").arg(pid.to_string()).status();
        }
    }
}

#[test]
fn new_refuses_bad_names_and_non_empty_dirs_and_build_names_what_it_needs() {
    let dir = tempfile::tempdir().unwrap();
    let run =
        |args: &[&str]| Command::new(authoring::toolhost_bin()).current_dir(dir.path()).args(args).output().unwrap();
    for bad in ["Greet", "1tool", "a/b", "-x", ""] {
        let out = run(&["new", bad, "--lang", "python"]);
        assert!(!out.status.success(), "{bad}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("invalid project name") || err.contains("error:"), "{bad}: {err}");
    }
    std::fs::create_dir(dir.path().join("taken")).unwrap();
    std::fs::write(dir.path().join("taken/keep.txt"), "mine").unwrap();
    let out = run(&["new", "taken", "--lang", "js"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("already exists and is not empty"));
    assert_eq!(std::fs::read_to_string(dir.path().join("taken/keep.txt")).unwrap(), "mine");
    assert!(!dir.path().join("taken/app.js").exists());

    let out = run(&["build", "taken"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("expected Cargo.toml (Rust), app.py (Python) or app.js"));

    // A Python project with no componentize-py anywhere: the error names the toolchain.
    assert!(run(&["new", "pytool", "--lang", "python"]).status.success());
    let out = Command::new(authoring::toolhost_bin())
        .current_dir(dir.path())
        .args(["build", "pytool"])
        .env("PATH", "/nonexistent")
        .env_remove("TOOLHOST_COMPONENTIZE_PY")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("componentize-py not found") && err.contains("pip install 'componentize-py==0.25.1'"),
        "{err}"
    );
    let out = Command::new(authoring::toolhost_bin())
        .current_dir(dir.path())
        .args(["new", "jstool", "--lang", "js"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let out = Command::new(authoring::toolhost_bin())
        .current_dir(dir.path())
        .args(["build", "jstool"])
        .env("PATH", "/nonexistent")
        .env_remove("TOOLHOST_JCO")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("jco not found") && err.contains("@bytecodealliance/componentize-js@0.22.0"), "{err}");
    // Nothing was built.
    assert!(
        !dir.path().join("pytool/build/pytool.wasm").exists() && !dir.path().join("jstool/build/jstool.wasm").exists()
    );
}
