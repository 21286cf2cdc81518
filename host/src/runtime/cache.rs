//! The on-disk precompile cache: `<dir>/<component sha256>-<engine hash>.cwasm`. The engine
//! hash is wasmtime's compatibility hash (version, target, settings), so an artifact is only
//! ever loaded by an engine that could have produced it.
//!
//! An artifact is native code: whoever can place a file in the cache can run code in the host.
//! So every artifact ends with an HMAC-SHA256 tag over its file name and its bytes, keyed by a
//! secret of this install kept *outside* the cache dir (`keys/precompile-cache.key` beside it).
//! An index of digests inside the cache would fall to whoever can write the cache; a key outside
//! it means write access to the cache alone (a shared volume, a restored backup, a stray mount)
//! cannot forge an artifact, and because the name is tagged, a genuine artifact of another
//! component or engine fails too. An artifact is read into memory once, checked, and
//! deserialized from those same bytes, so nothing can swap it between check and use. A cache
//! dir or key that another user owns or could write is not used at all.

use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use ring::hmac;
use ring::rand::{SecureRandom, SystemRandom};
use rustix::fs::{AtFlags, FileType, Mode, OFlags};
use rustix::io::Errno;
use wasmtime::component::Component;
use wasmtime::Engine;

/// Ends every artifact file: (tag, magic). The magic says which format follows the artifact.
const MAGIC: &[u8; 8] = b"thmac-v1";
const TAG_LEN: usize = 32;
const TRAILER_LEN: usize = TAG_LEN + MAGIC.len();
/// What the tag covers besides the artifact: a domain label, then the file name.
const TAG_DOMAIN: &[u8] = b"toolhost precompile cache v1\0";
/// The key file, in the keys directory beside the cache dir.
const KEY_FILE: &str = "precompile-cache.key";
const KEY_LEN: usize = 32;
/// No real artifact is this big; a bigger file is not read into memory.
const MAX_ARTIFACT_BYTES: u64 = 1 << 30;

/// An open, verified cache: the directory (held open, so a swapped path cannot redirect it) and
/// the install's key.
pub struct Cache {
    dir: PathBuf,
    dir_fd: OwnedFd,
    key: hmac::Key,
}

/// What a lookup found.
pub enum Lookup {
    Hit(Component),
    Miss,
    /// A file was there but is not used; the reason names what is wrong with it.
    Rejected(String),
}

/// The file name of the tool specs `sha256` lists (any engine's: they do not depend on it).
pub fn specs_name(sha256: &str) -> String {
    format!("{sha256}.tools.json")
}

/// The file name of `sha256`'s artifact for this engine.
pub fn artifact_name(engine: &Engine, sha256: &str) -> String {
    format!("{sha256}-{:016x}.cwasm", toolhost_engine::compatibility_hash(engine))
}

fn euid() -> u32 {
    rustix::process::geteuid().as_raw()
}

/// Creates `name` in `parent` as a 0700 directory if missing, then opens it without following
/// a link and checks that this user owns it and nobody else can write it.
fn open_private_dir(parent: &Path, name: &str) -> Result<OwnedFd, String> {
    let path = parent.join(name);
    std::fs::create_dir_all(parent).map_err(|e| format!("cannot create {}: {e}", parent.display()))?;
    match rustix::fs::mkdir(&path, Mode::from_raw_mode(0o700)) {
        Ok(()) | Err(Errno::EXIST) => {}
        Err(e) => return Err(format!("cannot create {}: {e}", path.display())),
    }
    let fd =
        rustix::fs::open(&path, OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::RDONLY, Mode::empty())
            .map_err(|e| match e {
                Errno::LOOP | Errno::NOTDIR => {
                    format!("{} is not a directory (a link is not followed)", path.display())
                }
                e => format!("cannot open {}: {e}", path.display()),
            })?;
    let st = rustix::fs::fstat(&fd).map_err(|e| format!("cannot stat {}: {e}", path.display()))?;
    check_owner_and_mode(&path, st.st_uid, st.st_mode, 0o022)?;
    Ok(fd)
}

/// [`open_private_dir`] for a path given whole.
fn open_private_dir_at(path: &Path) -> Result<OwnedFd, String> {
    match (path.parent(), path.file_name().and_then(|n| n.to_str())) {
        (Some(p), Some(n)) => open_private_dir(if p.as_os_str().is_empty() { Path::new(".") } else { p }, n),
        _ => Err(format!("{} cannot hold a cache (no parent directory or name)", path.display())),
    }
}

/// Refuses a file this user does not own or whose mode has any of `forbidden` bits.
fn check_owner_and_mode(path: &Path, uid: u32, mode: u32, forbidden: u32) -> Result<(), String> {
    if uid != euid() {
        return Err(format!("{} is owned by uid {uid}, not by this user (uid {})", path.display(), euid()));
    }
    let bad = mode & forbidden;
    if bad != 0 {
        let who = if bad & 0o007 != 0 { "everyone" } else { "its group" };
        let what = if bad & 0o022 != 0 { "writable" } else { "readable" };
        return Err(format!("{} is {what} by {who} (mode {:04o})", path.display(), mode & 0o7777));
    }
    Ok(())
}

fn random_bytes<const N: usize>() -> Result<[u8; N], String> {
    let mut buf = [0u8; N];
    SystemRandom::new().fill(&mut buf).map_err(|_| "the system random number generator failed".to_string())?;
    Ok(buf)
}

/// A name for a temporary file in a directory only this user can write; unique per process,
/// machine and call, so concurrent writers (replicas sharing a data dir) never share one.
fn temp_name(final_name: &str) -> String {
    toolhost_core::tempname::temp_file_name(final_name)
}

/// Writes `bytes` to a new 0600 file `name` in `dir` (temp file, then a rename or a link so
/// readers never see a partial file). With `replace: false` an existing file wins.
fn write_atomically(dir: &OwnedFd, dir_path: &Path, name: &str, bytes: &[&[u8]], replace: bool) -> Result<(), String> {
    let tmp = temp_name(name);
    let fd = rustix::fs::openat(
        dir,
        &tmp,
        OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::from_raw_mode(0o600),
    )
    .map_err(|e| format!("cannot create {}: {e}", dir_path.join(&tmp).display()))?;
    let mut file = File::from(fd);
    let written = bytes.iter().try_for_each(|b| file.write_all(b)).and_then(|()| file.sync_all());
    let placed = written.map_err(|e| e.to_string()).and_then(|()| {
        if replace {
            rustix::fs::renameat(dir, &tmp, dir, name).map_err(|e| e.to_string())
        } else {
            match rustix::fs::linkat(dir, &tmp, dir, name, AtFlags::empty()) {
                Ok(()) | Err(Errno::EXIST) => Ok(()),
                Err(e) => Err(e.to_string()),
            }
        }
    });
    if !replace || placed.is_err() {
        let _ = rustix::fs::unlinkat(dir, &tmp, AtFlags::empty());
    }
    placed.map_err(|e| format!("cannot write {}: {e}", dir_path.join(name).display()))
}

/// Opens `name` in `dir` for reading without following a link or blocking on a FIFO, and checks
/// it is a regular file this user owns that nobody else may write (or, with `private`, read).
fn open_own_file(dir: &OwnedFd, dir_path: &Path, name: &str, private: bool) -> Result<Option<(File, u64)>, String> {
    let path = dir_path.join(name);
    let fd = match rustix::fs::openat(
        dir,
        name,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC,
        Mode::empty(),
    ) {
        Ok(fd) => fd,
        Err(Errno::NOENT) => return Ok(None),
        Err(Errno::LOOP) => return Err(format!("{} is a symbolic link", path.display())),
        Err(e) => return Err(format!("cannot open {}: {e}", path.display())),
    };
    let st = rustix::fs::fstat(&fd).map_err(|e| format!("cannot stat {}: {e}", path.display()))?;
    if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile {
        return Err(format!("{} is not a regular file", path.display()));
    }
    check_owner_and_mode(&path, st.st_uid, st.st_mode, if private { 0o077 } else { 0o022 })?;
    Ok(Some((File::from(fd), st.st_size as u64)))
}

/// The install's key: read from `keys/precompile-cache.key`, or created there (0600, random)
/// by the first process that needs it; processes racing to create it all end up with the winner's.
fn load_or_create_key(keys: &OwnedFd, keys_path: &Path) -> Result<hmac::Key, String> {
    let key_path = keys_path.join(KEY_FILE);
    if open_own_file(keys, keys_path, KEY_FILE, true)?.is_none() {
        let fresh = random_bytes::<KEY_LEN>()?;
        write_atomically(keys, keys_path, KEY_FILE, &[&fresh], false)?;
    }
    let Some((mut file, size)) = open_own_file(keys, keys_path, KEY_FILE, true)? else {
        return Err(format!("{} vanished while it was being created", key_path.display()));
    };
    let mut key = Vec::with_capacity(KEY_LEN);
    Read::by_ref(&mut file)
        .take(KEY_LEN as u64 + 1)
        .read_to_end(&mut key)
        .map_err(|e| format!("cannot read {}: {e}", key_path.display()))?;
    if key.len() != KEY_LEN || size != KEY_LEN as u64 {
        return Err(format!("{} is not a {KEY_LEN}-byte key ({} bytes)", key_path.display(), key.len()));
    }
    Ok(hmac::Key::new(hmac::HMAC_SHA256, &key))
}

impl Cache {
    /// Open (creating if needed) the cache at `dir` and the install key in `keys_dir` (`None`:
    /// `keys/` beside `dir`). `Err` says why the cache must not be used.
    pub fn open(dir: &Path, keys_dir: Option<&Path>) -> Result<Self, String> {
        let dir_fd = open_private_dir_at(dir)?;
        let keys_path = match keys_dir {
            Some(k) => k.to_path_buf(),
            None => dir.parent().unwrap_or(Path::new(".")).join("keys"),
        };
        if keys_path.starts_with(dir) {
            return Err(format!("the key directory {} is inside the cache", keys_path.display()));
        }
        let keys = open_private_dir_at(&keys_path)?;
        let key = load_or_create_key(&keys, &keys_path)?;
        Ok(Self { dir: dir.to_path_buf(), dir_fd, key })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn tag(&self, name: &str, artifact: &[u8]) -> hmac::Tag {
        let mut ctx = hmac::Context::with_key(&self.key);
        ctx.update(TAG_DOMAIN);
        ctx.update(name.as_bytes());
        ctx.update(b"\0");
        ctx.update(artifact);
        ctx.sign()
    }

    /// Load the artifact `name` if present and genuine. A file that is not (tampered, written
    /// for another name, truncated, not a regular file) is removed and reported.
    pub fn load(&self, engine: &Engine, name: &str) -> Lookup {
        match self.read_verified(name) {
            Ok(None) => Lookup::Miss,
            Ok(Some(bytes)) => {
                let artifact = &bytes[..bytes.len() - TRAILER_LEN];
                // SAFETY: the bytes carry a valid tag under this install's key for this very
                // name, so this install serialized them with `Component::serialize` for an
                // engine with this compatibility hash; they are deserialized from memory, not
                // re-read from the file. wasmtime also checks the header and engine settings.
                match unsafe { Component::deserialize(engine, artifact) } {
                    Ok(c) => Lookup::Hit(c),
                    Err(e) => self.reject(name, format!("wasmtime refused it: {e:#}")),
                }
            }
            Err(why) => self.reject(name, why),
        }
    }

    fn reject(&self, name: &str, why: String) -> Lookup {
        let _ = rustix::fs::unlinkat(&self.dir_fd, name, AtFlags::empty());
        Lookup::Rejected(why)
    }

    /// The file's bytes (artifact + trailer) when its tag checks out; `Ok(None)` when absent.
    fn read_verified(&self, name: &str) -> Result<Option<Vec<u8>>, String> {
        let Some((file, size)) = open_own_file(&self.dir_fd, &self.dir, name, false)? else { return Ok(None) };
        if size > MAX_ARTIFACT_BYTES {
            return Err(format!("it is {size} bytes, more than any artifact"));
        }
        let mut bytes = Vec::with_capacity(size as usize);
        file.take(MAX_ARTIFACT_BYTES + 1).read_to_end(&mut bytes).map_err(|e| format!("cannot read it: {e}"))?;
        if bytes.len() < TRAILER_LEN || !bytes.ends_with(MAGIC) {
            return Err("it has no integrity tag (not written by this version of toolhost)".into());
        }
        let (artifact, trailer) = bytes.split_at(bytes.len() - TRAILER_LEN);
        let expected = self.tag(name, artifact);
        // Compared in constant time: how far a forged tag matches must not show in timing.
        let diff = expected.as_ref().iter().zip(&trailer[..TAG_LEN]).fold(0u8, |acc, (a, b)| acc | (a ^ b));
        if diff != 0 {
            return Err("its integrity tag does not match: this install did not write it under this name".into());
        }
        Ok(Some(bytes))
    }

    /// Write `component`'s artifact as `name` (0600, atomically, tagged).
    pub fn store(&self, component: &Component, name: &str) -> Result<(), String> {
        let bytes = component.serialize().map_err(|e| format!("cannot serialize {name}: {e:#}"))?;
        self.store_bytes(name, &bytes)
    }

    /// Write `bytes` as `name` (0600, atomically, tagged like an artifact).
    pub fn store_bytes(&self, name: &str, bytes: &[u8]) -> Result<(), String> {
        let tag = self.tag(name, bytes);
        write_atomically(&self.dir_fd, &self.dir, name, &[bytes, tag.as_ref(), MAGIC], true)
    }

    /// The bytes stored as `name` by [`store_bytes`](Self::store_bytes), if present and genuine;
    /// a file that is not is removed and the reason returned.
    pub fn load_bytes(&self, name: &str) -> Result<Option<Vec<u8>>, String> {
        match self.read_verified(name) {
            Ok(Some(mut bytes)) => {
                bytes.truncate(bytes.len() - TRAILER_LEN);
                Ok(Some(bytes))
            }
            Ok(None) => Ok(None),
            Err(why) => {
                let _ = rustix::fs::unlinkat(&self.dir_fd, name, AtFlags::empty());
                Err(why)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn racing_first_opens_agree_on_one_key() {
        let dir = tempfile::tempdir().unwrap();
        let cache = dir.path().join("cache");
        let caches: Vec<Cache> = std::thread::scope(|s| {
            let opens: Vec<_> = (0..8).map(|_| s.spawn(|| Cache::open(&cache, None).unwrap())).collect();
            opens.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let tags: Vec<Vec<u8>> = caches.iter().map(|c| c.tag("name", b"bytes").as_ref().to_vec()).collect();
        assert!(tags.windows(2).all(|w| w[0] == w[1]), "every opener uses the same key");
        let keys: Vec<_> =
            std::fs::read_dir(dir.path().join("keys")).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(keys, [KEY_FILE], "no temporary file is left behind");
        // The tag covers the name: the same bytes under another name do not verify.
        assert_ne!(caches[0].tag("a", b"bytes").as_ref(), caches[0].tag("b", b"bytes").as_ref());
    }
}
