//! Wasm components as OCI artifacts: `oci://REGISTRY/REPO:TAG[@sha256:DIGEST]` references, the
//! distribution API (pull and push, bearer-token and basic auth), and a cache of verified blobs
//! addressed by digest.
//!
//! The artifact layout is the CNCF wasm OCI artifact one that `wkg` and wassette use: an image
//! manifest (`application/vnd.oci.image.manifest.v1+json`) whose config is
//! `application/vnd.wasm.config.v0+json` and whose first layer is the component
//! (`application/wasm`). toolhost adds an optional second layer holding the component's minisign
//! signature ([`SIGNATURE_MEDIA_TYPE`]); clients that do not know it take the wasm layer and
//! ignore it.
//!
//! Every blob is checked against its descriptor's digest and size while it downloads, and is
//! refused past a cap; the cache only ever holds bytes whose sha256 is their name.

mod auth;
mod cache;
mod client;
mod manifest;
mod reference;

pub use auth::{CredentialStore, Credentials};
pub use cache::{BlobCache, TagRecord};
pub use client::{Client, ClientOptions, Pulled, PushRequest};
pub use manifest::{
    ArtifactLayers, ComponentInfo, Descriptor, Manifest, WasmConfig, CONFIG_MEDIA_TYPE, MANIFEST_MEDIA_TYPE,
    SIGNATURE_MEDIA_TYPE, WASM_LAYER_MEDIA_TYPE,
};
pub use reference::{split_use, Reference};

/// The most a manifest may weigh.
pub const MAX_MANIFEST_BYTES: u64 = 4 << 20;
/// The most a config blob may weigh.
pub const MAX_CONFIG_BYTES: u64 = 1 << 20;
/// The most a signature layer may weigh (a minisign signature is under 500 bytes).
pub const MAX_SIGNATURE_BYTES: u64 = 16 << 10;
/// The most a component layer may weigh.
pub const MAX_COMPONENT_BYTES: u64 = 256 << 20;

/// What can go wrong talking to a registry or reading the cache. Each names the reference (or
/// the registry) and what happened.
#[derive(Debug, thiserror::Error)]
pub enum OciError {
    /// The reference text is not an `oci://` reference toolhost understands.
    #[error("'{reference}' is not a valid OCI reference: {why}")]
    BadReference {
        /// The text.
        reference: String,
        /// What is wrong.
        why: String,
    },
    /// The registry cannot be reached.
    #[error("{reference}: cannot reach the registry: {why}")]
    Unreachable {
        /// The reference.
        reference: String,
        /// The transport error.
        why: String,
    },
    /// The registry answered 404.
    #[error("{reference}: {what} not found in the registry (404)")]
    NotFound {
        /// The reference.
        reference: String,
        /// What was asked for (the manifest, a blob).
        what: String,
    },
    /// The registry refused the credentials, or wants some and there are none.
    #[error("{reference}: authentication failed: {why}")]
    Auth {
        /// The reference.
        reference: String,
        /// What happened.
        why: String,
    },
    /// Another status.
    #[error("{reference}: the registry answered {status} for {what}: {body}")]
    Status {
        /// The reference.
        reference: String,
        /// What was asked for.
        what: String,
        /// The HTTP status.
        status: u16,
        /// The start of the body.
        body: String,
    },
    /// Bytes whose sha256 is not the digest they were asked by.
    #[error("{reference}: {what} has digest {actual}, expected {expected}; refused")]
    DigestMismatch {
        /// The reference.
        reference: String,
        /// The blob or manifest.
        what: String,
        /// The digest asked for.
        expected: String,
        /// The sha256 of what came.
        actual: String,
    },
    /// Bytes of another size than the descriptor says.
    #[error("{reference}: {what} is {actual} bytes, the manifest says {expected}; refused")]
    SizeMismatch {
        /// The reference.
        reference: String,
        /// The blob.
        what: String,
        /// The size the descriptor gives.
        expected: u64,
        /// The size that came (or at least that many, when cut off).
        actual: u64,
    },
    /// More bytes than toolhost accepts for that kind of blob.
    #[error("{reference}: {what} is larger than the {limit}-byte limit; refused")]
    TooBig {
        /// The reference.
        reference: String,
        /// The blob.
        what: String,
        /// The limit.
        limit: u64,
    },
    /// The manifest is not a wasm component artifact.
    #[error("{reference}: not a wasm component artifact: {why}")]
    NotWasm {
        /// The reference.
        reference: String,
        /// What is wrong (a media type, a missing layer).
        why: String,
    },
    /// A pinned digest not in the cache, with the registry unreachable, or a cache I/O error.
    #[error("{reference}: {why}")]
    Cache {
        /// The reference.
        reference: String,
        /// What happened.
        why: String,
    },
}

/// A `sha256:HEX` digest of `bytes`.
pub fn sha256_digest(bytes: &[u8]) -> String {
    use sha2::Digest as _;
    format!("sha256:{}", hex::encode(sha2::Sha256::digest(bytes)))
}

/// Whether `d` is `sha256:` followed by 64 lower-case hex digits (the only digests toolhost
/// accepts, so that a digest is also a safe file name).
pub fn valid_digest(d: &str) -> bool {
    d.strip_prefix("sha256:")
        .is_some_and(|h| h.len() == 64 && h.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')))
}

/// Run `fut` to completion from synchronous code, on a thread of its own with its own runtime:
/// works whether or not the caller is inside a tokio runtime.
pub fn block_on<F, T>(fut: F) -> Result<T, String>
where
    F: std::future::Future<Output = T> + Send,
    T: Send,
{
    std::thread::scope(|s| {
        s.spawn(|| {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| format!("cannot start an async runtime: {e}"))?;
            Ok(rt.block_on(fut))
        })
        .join()
        .map_err(|_| "the registry client thread panicked".to_string())?
    })
}
