//! Where the end-to-end tests find things: the repository root, the test peers installed by
//! scripts/install-peers.sh, and the conformance vectors kept in `tests/conformance/`.

#![allow(dead_code)]

use std::path::{Path, PathBuf};

/// The repository root (tests are registered from `host/Cargo.toml`).
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

/// A peer under `.peers/`; a clear failure when the install script has not run.
pub fn peer(rel: &str) -> PathBuf {
    let p = root().join(".peers").join(rel);
    assert!(p.exists(), "{} is missing: run scripts/install-peers.sh first", p.display());
    p
}

/// `tests/conformance`: DeerFlow's vectors, copied into the repository (see its README).
pub fn conformance() -> PathBuf {
    root().join("tests/conformance")
}
