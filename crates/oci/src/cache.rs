//! The pull cache under `<data>/oci/`: `blobs/sha256/<hex>` holds verified blobs (manifests,
//! configs, components, signatures), each written to a temporary file and renamed into place;
//! `tags/<hash>.json` remembers which manifest digest a tag resolved to last time.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::{sha256_digest, valid_digest, Reference};

/// Blobs by digest, and the last digest of each tag.
#[derive(Debug, Clone)]
pub struct BlobCache {
    dir: PathBuf,
}

/// What a tag resolved to last time.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TagRecord {
    /// The reference (`oci://registry/repo:tag`).
    pub reference: String,
    /// The manifest digest it resolved to.
    pub digest: String,
}

impl BlobCache {
    /// The cache rooted at `dir` (created on first write).
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        BlobCache { dir: dir.into() }
    }

    /// The cache directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Where the blob `digest` lives (`None` for a digest that is not `sha256:HEX`).
    pub fn blob_path(&self, digest: &str) -> Option<PathBuf> {
        valid_digest(digest).then(|| self.dir.join("blobs").join("sha256").join(&digest["sha256:".len()..]))
    }

    /// The blob `digest`, if cached and still intact. A file whose bytes no longer hash to its
    /// name is removed and reported as absent.
    pub fn get(&self, digest: &str, max: u64) -> Option<Vec<u8>> {
        let path = self.blob_path(digest)?;
        let meta = std::fs::symlink_metadata(&path).ok()?;
        if !meta.is_file() || meta.len() > max {
            return None;
        }
        let bytes = std::fs::read(&path).ok()?;
        if sha256_digest(&bytes) != digest {
            tracing::warn!("cached blob {} does not match its digest; removed", path.display());
            let _ = std::fs::remove_file(&path);
            return None;
        }
        Some(bytes)
    }

    /// Whether `digest` is cached (without reading it).
    pub fn contains(&self, digest: &str) -> bool {
        self.blob_path(digest).is_some_and(|p| p.is_file())
    }

    /// Store `bytes` under their own digest, atomically; returns the digest.
    pub fn put(&self, bytes: &[u8]) -> std::io::Result<String> {
        let digest = sha256_digest(bytes);
        let path = self.blob_path(&digest).ok_or_else(|| std::io::Error::other("bad digest"))?;
        if path.is_file() {
            return Ok(digest);
        }
        atomic_write(&path, bytes)?;
        Ok(digest)
    }

    /// What `reference`'s tag resolved to last time.
    pub fn tag_record(&self, reference: &Reference) -> Option<TagRecord> {
        let bytes = std::fs::read(self.tag_path(reference)).ok()?;
        let rec: TagRecord = serde_json::from_slice(&bytes).ok()?;
        valid_digest(&rec.digest).then_some(rec)
    }

    /// Remember that `reference`'s tag resolved to `digest`.
    pub fn set_tag_record(&self, reference: &Reference, digest: &str) -> std::io::Result<()> {
        let rec = TagRecord { reference: tag_key(reference), digest: digest.to_string() };
        atomic_write(&self.tag_path(reference), &serde_json::to_vec_pretty(&rec).map_err(std::io::Error::other)?)
    }

    /// Store what [`crate::Client::pull`] fetched and the caller accepted: the component, its
    /// signature, then the manifest (so a cached manifest means its layers are cached), then the
    /// tag's resolution.
    pub fn commit(&self, p: &crate::Pulled) -> Result<(), crate::OciError> {
        let err = |e: std::io::Error| crate::OciError::Cache {
            reference: p.reference.to_string(),
            why: format!("cannot write the cache {}: {e}", self.dir.display()),
        };
        self.put(&p.wasm).map_err(err)?;
        if let Some(s) = &p.signature {
            self.put(s).map_err(err)?;
        }
        self.put(&p.manifest_bytes).map_err(err)?;
        if p.record_tag {
            self.set_tag_record(&p.reference, &p.manifest_digest).map_err(err)?;
        }
        Ok(())
    }

    fn tag_path(&self, reference: &Reference) -> PathBuf {
        let key = tag_key(reference);
        let name = &sha256_digest(key.as_bytes())["sha256:".len()..];
        self.dir.join("tags").join(format!("{name}.json"))
    }
}

fn tag_key(r: &Reference) -> String {
    format!("oci://{}/{}:{}", r.registry, r.repository, r.tag.as_deref().unwrap_or("latest"))
}

/// Write `bytes` to `path` through a temporary file in the same directory and a rename, so that
/// a reader sees the whole file or none.
fn atomic_write(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = path.parent().ok_or_else(|| std::io::Error::other("no parent directory"))?;
    std::fs::create_dir_all(dir)?;
    // Unique per call, process and machine: replicas may share `<data>/oci`.
    let tmp =
        dir.join(toolhost_core::tempname::temp_file_name(path.file_name().and_then(|n| n.to_str()).unwrap_or("blob")));
    let result = (|| {
        let mut f = std::fs::OpenOptions::new().write(true).create_new(true).open(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blobs_are_checked_on_read() {
        let dir = tempfile::tempdir().unwrap();
        let c = BlobCache::new(dir.path());
        let d = c.put(b"hello").unwrap();
        assert_eq!(c.get(&d, 100).unwrap(), b"hello");
        assert!(c.get(&d, 2).is_none(), "over the cap");
        std::fs::write(c.blob_path(&d).unwrap(), b"jello").unwrap();
        assert!(c.get(&d, 100).is_none());
        assert!(!c.contains(&d), "a corrupt blob is removed");
        assert!(c.blob_path("sha256:../../etc/passwd").is_none());
        let r: Reference = "oci://127.0.0.1:5000/a/b:v1".parse().unwrap();
        assert!(c.tag_record(&r).is_none());
        c.set_tag_record(&r, &d).unwrap();
        assert_eq!(c.tag_record(&r).unwrap().digest, d);
        let leftovers: Vec<_> = std::fs::read_dir(dir.path().join("tags")).unwrap().collect();
        assert_eq!(leftovers.len(), 1, "no temporary file left");
    }
}
