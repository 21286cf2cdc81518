//! Builds the guest tool components (the `guest-tools` workspace, target wasm32-wasip2) and
//! embeds the bundled ones in the binary, so `toolhost` ships its own tools. The guest build uses
//! its own target dir, `guest/` inside the outer build's target dir (wherever `CARGO_TARGET_DIR`
//! puts it; never the source tree), so it never waits on the outer build's lock.
//!
//! `TOOLHOST_SKIP_GUEST_BUILD=1` uses whatever is already in that `guest/` directory.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Components embedded in the binary: (bundled name, crate artifact name).
const BUNDLED: [(&str, &str); 3] = [("sandbox-fs", "sandbox_fs"), ("hello", "hello"), ("community", "community")];

fn main() {
    let manifest_dir = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let root = manifest_dir.parent().expect("host/ has a parent").to_path_buf();
    let guest_ws = root.join("guest-tools");
    let target_dir = outer_target_dir().join("guest");
    println!("cargo:rerun-if-changed={}", guest_ws.join("Cargo.toml").display());
    for dir in [
        "sdk",
        "hello",
        "hostile",
        "legacy-hello",
        "legacy-v0-2",
        "legacy-v0-3",
        "sandbox-fs",
        "community",
        "conformance-fixture",
    ] {
        println!("cargo:rerun-if-changed={}", guest_ws.join(dir).display());
    }
    println!("cargo:rerun-if-changed={}", root.join("wit").display());
    println!("cargo:rerun-if-env-changed=TOOLHOST_SKIP_GUEST_BUILD");

    if std::env::var_os("TOOLHOST_SKIP_GUEST_BUILD").is_none() {
        build_guests(&guest_ws, &target_dir);
    }

    let out_dir = target_dir.join("wasm32-wasip2").join("release");
    let mut generated = String::from(
        "/// Components built into this binary: (name, bytes).\npub const BUNDLED: &[(&str, &[u8])] = &[\n",
    );
    for (name, artifact) in BUNDLED {
        let file = out_dir.join(format!("{artifact}.wasm"));
        if file.exists() {
            generated.push_str(&format!("    ({name:?}, include_bytes!({:?})),\n", file.display().to_string()));
        } else {
            println!("cargo:warning=bundled component {name} was not built ({} missing)", file.display());
        }
    }
    generated.push_str("];\n");
    generated.push_str(&format!(
        "/// Where the guest build puts components (tests load non-bundled ones from here).\npub const GUEST_DIR: &str = {:?};\n",
        out_dir.display().to_string()
    ));
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR")).join("bundled.rs");
    std::fs::write(&out, generated).expect("write bundled.rs");
}

/// The outer build's target dir: `OUT_DIR` is `<target>[/<triple>]/<profile>/build/<pkg>-<hash>/out`.
fn outer_target_dir() -> PathBuf {
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    let profile_dir = out.ancestors().nth(3).expect("OUT_DIR is <target>/<profile>/build/<pkg>/out");
    let parent = profile_dir.parent().expect("a profile dir has a parent");
    // With `--target <triple>` the profile dir sits one level deeper.
    match std::env::var("TARGET") {
        Ok(t) if parent.file_name().is_some_and(|n| n == t.as_str()) => parent.parent().unwrap_or(parent).to_path_buf(),
        _ => parent.to_path_buf(),
    }
}

fn build_guests(guest_ws: &Path, target_dir: &Path) {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.args(["build", "--release", "--target", "wasm32-wasip2", "--workspace", "--manifest-path"])
        .arg(guest_ws.join("Cargo.toml"))
        .arg("--target-dir")
        .arg(target_dir);
    // The outer build's settings are for the host target, not for the guests.
    // Guests may use wasm SIMD (wasmtime supports it; memchr and friends get their fast paths).
    cmd.env("CARGO_TARGET_WASM32_WASIP2_RUSTFLAGS", "-C target-feature=+simd128");
    for var in [
        "CARGO_ENCODED_RUSTFLAGS",
        "RUSTFLAGS",
        "CARGO_BUILD_TARGET",
        "CARGO_TARGET_DIR",
        "CARGO_BUILD_RUSTFLAGS",
        "RUSTC_WORKSPACE_WRAPPER",
        "RUSTC_WRAPPER",
        "CARGO_PROFILE_RELEASE_DEBUG",
        "CARGO_MAKEFLAGS",
        "MAKEFLAGS",
        "MFLAGS",
        "CARGO_LLVM_COV",
    ] {
        cmd.env_remove(var);
    }
    let output = cmd.output().expect("run cargo to build the guest tool components");
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let hint = if stderr.contains("wasm32-wasip2") && stderr.contains("target may not be installed") {
            "\nhint: run `rustup target add wasm32-wasip2`"
        } else {
            ""
        };
        panic!("building the guest tool components failed:\n{stderr}{hint}");
    }
}
