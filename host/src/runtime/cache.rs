//! The on-disk precompile cache: `<dir>/<component sha256>-<engine hash>.cwasm`. The engine
//! hash is wasmtime's compatibility hash (version, target, settings), so an artifact is only
//! ever loaded by an engine that could have produced it.

use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};

use wasmtime::component::Component;
use wasmtime::Engine;

/// Where the artifact of `sha256` for this engine lives.
pub fn artifact_path(dir: &Path, engine: &Engine, sha256: &str) -> PathBuf {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    engine.precompile_compatibility_hash().hash(&mut h);
    dir.join(format!("{sha256}-{:016x}.cwasm", h.finish()))
}

/// Load an artifact if present and valid. A corrupt or incompatible file is removed.
pub fn load(engine: &Engine, path: &Path) -> Option<Component> {
    if !path.exists() {
        return None;
    }
    // SAFETY: the file is one this process family wrote with `Component::serialize` for an engine
    // with the same compatibility hash (the file name says so), in a directory the user owns;
    // wasmtime additionally checks the header and engine settings before using it.
    match unsafe { Component::deserialize_file(engine, path) } {
        Ok(c) => Some(c),
        Err(e) => {
            tracing::warn!("discarding precompiled artifact {}: {e:#}", path.display());
            let _ = std::fs::remove_file(path);
            None
        }
    }
}

/// Write an artifact atomically (temp file + rename); failure only costs a recompile later.
pub fn store(component: &Component, path: &Path) {
    let Some(dir) = path.parent() else { return };
    let result = (|| -> anyhow::Result<()> {
        std::fs::create_dir_all(dir)?;
        let bytes = component.serialize()?;
        let tmp = dir.join(format!(
            ".{}.{}.tmp",
            path.file_name().and_then(|n| n.to_str()).unwrap_or("a"),
            std::process::id()
        ));
        std::fs::write(&tmp, bytes)?;
        std::fs::rename(&tmp, path)?;
        Ok(())
    })();
    if let Err(e) = result {
        tracing::warn!("cannot write precompiled artifact {}: {e:#}", path.display());
    }
}
