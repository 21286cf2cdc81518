//! The adapter that shows a wasm component's tool as a [`Tool`].
//!
//! [`Tool`]: toolhost_core::Tool

pub mod component;
