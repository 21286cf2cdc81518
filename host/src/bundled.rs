//! The components built into the binary (see `build.rs`), looked up by bundled name.

include!(concat!(env!("OUT_DIR"), "/bundled.rs"));

/// The bytes of a bundled component.
pub fn bytes(name: &str) -> Option<&'static [u8]> {
    BUNDLED.iter().find(|(n, _)| *n == name).map(|(_, b)| *b)
}

/// The names of all bundled components.
pub fn names() -> Vec<&'static str> {
    BUNDLED.iter().map(|(n, _)| *n).collect()
}

/// The precompiled native code of the bundled component whose bytes have digest `sha256`, if the
/// build made it for an engine of compatibility hash `engine_hash` (see `build.rs`).
pub fn precompiled(sha256: &str, engine_hash: u64) -> Option<&'static [u8]> {
    if ENGINE_HASH == 0 || engine_hash != ENGINE_HASH {
        return None;
    }
    PRECOMPILED.iter().find(|(d, _)| *d == sha256).map(|(_, a)| *a)
}
