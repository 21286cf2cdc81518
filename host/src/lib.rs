pub use toolhost_core as core;
