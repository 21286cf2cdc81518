//! Builds the guest tool components (the `guest-tools` workspace, target wasm32-wasip2) and
//! embeds the bundled ones in the binary, so `toolhost` ships its own tools. The guest build uses
//! its own target dir, `guest/` inside the outer build's target dir (wherever `CARGO_TARGET_DIR`
//! puts it; never the source tree), so it never waits on the outer build's lock.
//!
//! `TOOLHOST_SKIP_GUEST_BUILD=1` uses whatever is already in that `guest/` directory.
//!
//! The bundled components are also precompiled here, with the runtime's own engine configuration
//! (`toolhost-engine`), and the native code embedded beside them: a fresh install lists and runs
//! its bundled tools without compiling anything. The runtime uses an artifact only when its
//! engine's compatibility hash is the one recorded here (another CPU, another wasmtime, a cross
//! build: it compiles instead). Being part of the binary, the artifacts are as trusted as it is.

use std::path::{Path, PathBuf};
use std::process::Command;

use sha2::Digest;

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
    let gen_dir = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    // Precompiling only makes sense for the machine the build runs on; a cross build compiles at
    // run time.
    let engine = (std::env::var("TARGET").ok() == std::env::var("HOST").ok()).then(|| {
        wasmtime::Engine::new(&toolhost_engine::config(toolhost_engine::Allocation::OnDemand))
            .expect("a wasmtime engine for precompiling")
    });
    let mut generated = String::from(
        "/// Components built into this binary: (name, bytes).\npub const BUNDLED: &[(&str, &[u8])] = &[\n",
    );
    let mut precompiled = String::from(
        "/// Their native code for an engine of compatibility hash [`ENGINE_HASH`]: (sha256 of the\n\
         /// component, artifact).\npub const PRECOMPILED: &[(&str, &[u8])] = &[\n",
    );
    for (name, artifact) in BUNDLED {
        let file = out_dir.join(format!("{artifact}.wasm"));
        println!("cargo:rerun-if-changed={}", file.display());
        let Ok(bytes) = std::fs::read(&file) else {
            println!("cargo:warning=bundled component {name} was not built ({} missing)", file.display());
            continue;
        };
        // The embedded bytes are this copy, so they are the ones the artifact was made from.
        let copy = gen_dir.join(format!("{artifact}.wasm"));
        std::fs::write(&copy, &bytes).expect("copy a bundled component");
        generated.push_str(&format!("    ({name:?}, include_bytes!({:?})),\n", copy.display().to_string()));
        if let Some(engine) = &engine {
            let start = std::time::Instant::now();
            match engine.precompile_component(&bytes) {
                Ok(cwasm) => {
                    let out = gen_dir.join(format!("{artifact}.cwasm"));
                    std::fs::write(&out, cwasm).expect("write a precompiled component");
                    let sha256 = hex::encode(sha2::Sha256::digest(&bytes));
                    precompiled
                        .push_str(&format!("    ({sha256:?}, include_bytes!({:?})),\n", out.display().to_string()));
                    eprintln!("precompiled {name} in {:?}", start.elapsed());
                }
                Err(e) => println!("cargo:warning=bundled component {name} not precompiled: {e:#}"),
            }
        }
    }
    generated.push_str("];\n");
    precompiled.push_str("];\n");
    generated.push_str(&precompiled);
    let engine_hash = engine.as_ref().map_or(0, toolhost_engine::compatibility_hash);
    generated.push_str(&format!(
        "/// The compatibility hash of the engine that made [`PRECOMPILED`] (0: none made).\npub const ENGINE_HASH: u64 = {engine_hash};\n"
    ));
    generated.push_str(&format!(
        "/// Where the guest build puts components (tests load non-bundled ones from here).\npub const GUEST_DIR: &str = {:?};\n",
        out_dir.display().to_string()
    ));
    std::fs::write(gen_dir.join("bundled.rs"), generated).expect("write bundled.rs");
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
