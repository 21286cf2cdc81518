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
