//! Shared by the authoring tests: the `toolhost` binary, a PATH with the pinned Python and
//! JavaScript toolchains (`scripts/install-authoring-toolchains.sh` installs them under
//! `.peers/`), and one precompile cache for every test binary of a run, so a Python or JS
//! component (tens of MB) is compiled by wasmtime once, not once per test.

#![allow(dead_code)]

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

// The test file declares `#[path = "support/paths.rs"] mod paths;` beside this module.
pub use super::paths::root;

/// The `toolhost` binary of this build.
pub fn toolhost_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_toolhost"))
}

/// Directories holding the pinned toolchains; a clear failure when they are missing.
pub fn toolchain_dirs() -> Vec<PathBuf> {
    let py = root().join(".peers/componentize-py/bin");
    let js = root().join(".peers/componentize-js/node_modules/.bin");
    for (dir, exe) in [(&py, "componentize-py"), (&js, "jco")] {
        assert!(
            dir.join(exe).exists(),
            "{} is missing: run scripts/install-authoring-toolchains.sh first",
            dir.join(exe).display()
        );
    }
    vec![py, js]
}

/// PATH with `extra` first, then the toolchains, then the process's own.
pub fn path_with(extra: &[&Path]) -> OsString {
    let mut dirs: Vec<PathBuf> = extra.iter().map(|p| p.to_path_buf()).collect();
    dirs.extend(toolchain_dirs());
    if let Some(p) = std::env::var_os("PATH") {
        dirs.extend(std::env::split_paths(&p));
    }
    std::env::join_paths(dirs).expect("PATH entries")
}

/// The data dir `toolhost build` loads components with: its `cache/` is the precompile cache
/// every authoring test shares (`CARGO_TARGET_TMPDIR` lives for the whole target dir).
pub fn shared_data_dir() -> PathBuf {
    let d = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("authoring-data");
    std::fs::create_dir_all(&d).unwrap();
    d
}

pub fn shared_cache_dir() -> PathBuf {
    shared_data_dir().join("cache")
}

/// Run `toolhost ARGS` in `cwd` with the toolchains on PATH; panics with its output on failure.
pub fn toolhost_ok(cwd: &Path, args: &[&str]) -> Output {
    let out = Command::new(toolhost_bin())
        .current_dir(cwd)
        .env("PATH", path_with(&[]))
        .env("TOOLHOST_HOME", shared_data_dir())
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "toolhost {args:?} failed ({}):\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Copy `src` to `dst`, following links (the examples link the SDKs and the WIT).
pub fn copy_tree(src: &Path, dst: &Path) {
    std::fs::create_dir_all(dst).unwrap();
    for e in std::fs::read_dir(src).unwrap() {
        let e = e.unwrap();
        let from = e.path();
        let to = dst.join(e.file_name());
        if e.file_name() == "build" || e.file_name() == ".toolhost" || e.file_name() == "node_modules" {
            continue;
        }
        if std::fs::metadata(&from).unwrap().is_dir() {
            copy_tree(&from, &to);
        } else {
            std::fs::copy(&from, &to).unwrap();
        }
    }
}

/// Every file under `dir` (sorted, `build/` and caches left out), hashed with the toolchain
/// stamps: the key of a build.
fn source_key(dir: &Path) -> String {
    use sha2::{Digest, Sha256};
    fn walk(root: &Path, dir: &Path, out: &mut Vec<(String, Vec<u8>)>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let e = e.unwrap();
            let name = e.file_name();
            if name == "build" || name == ".toolhost" || name == "node_modules" || name == "__pycache__" {
                continue;
            }
            let p = e.path();
            if std::fs::metadata(&p).unwrap().is_dir() {
                walk(root, &p, out);
            } else {
                out.push((p.strip_prefix(root).unwrap().display().to_string(), std::fs::read(&p).unwrap()));
            }
        }
    }
    let mut files = Vec::new();
    walk(dir, dir, &mut files);
    files.sort();
    let mut h = Sha256::new();
    for stamp in [".peers/componentize-py/.installed", ".peers/componentize-js/.installed"] {
        h.update(std::fs::read(root().join(stamp)).unwrap_or_default());
    }
    for (name, bytes) in files {
        h.update(name.as_bytes());
        h.update([0]);
        h.update((bytes.len() as u64).to_le_bytes());
        h.update(&bytes);
    }
    hex::encode(h.finalize())
}

/// `toolhost build .` in `dir` (printing what it prints), unless the same sources were built
/// before in this target dir: then that build's component is reused. Python and JS builds take
/// a minute each; CI keeps its target dir between runs. Returns `build/NAME.wasm`.
pub fn build_once(dir: &Path, name: &str) -> PathBuf {
    let out = dir.join("build").join(format!("{name}.wasm"));
    let store = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("authoring-builds");
    std::fs::create_dir_all(&store).unwrap();
    let kept = store.join(format!("{}.wasm", source_key(dir)));
    if kept.is_file() {
        std::fs::create_dir_all(out.parent().unwrap()).unwrap();
        std::fs::copy(&kept, &out).unwrap();
        eprintln!("{name}: same sources as {}, not rebuilt", kept.display());
        return out;
    }
    let started = std::time::Instant::now();
    let printed = toolhost_ok(dir, &["build", "."]);
    let text = String::from_utf8_lossy(&printed.stdout).to_string();
    eprintln!("built {name} in {:?}:\n{text}", started.elapsed());
    assert!(text.contains("sha256: ") && text.contains("paste into config.yaml"), "{text}");
    let tmp = store.join(format!(".{}.{}", name, std::process::id()));
    std::fs::copy(&out, &tmp).unwrap();
    std::fs::rename(&tmp, &kept).unwrap();
    out
}
