//! Python `re` patterns, in the two places DeerFlow hands a user- or model-supplied pattern to
//! `re`: tool_search's catalog query ([`catalog`], compiled for `fancy-regex`, falling back to a
//! literal as DeerFlow does) and the `grep` file tool ([`grep`], translated for the `regex`
//! crate with Python's own error messages).

pub mod catalog;
pub mod grep;

pub use catalog::CatalogRegex;
pub use grep::{Anchors, PyReError, Translated};
