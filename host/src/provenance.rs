//! Where a component's bytes come from and whether to trust them: the `trust:` section
//! (minisign public keys, `require_signatures`), fetching `oci://` components through the pull
//! cache under `<data>/oci/`, and checking a component's minisign signature (`<file>.minisig`
//! beside a file, the signature layer of an OCI artifact) before anything is compiled.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use base64::Engine as _;
use serde::Deserialize;

use crate::runtime::ComponentRef;

/// The most a `.minisig` file may weigh.
const MAX_SIGNATURE_FILE: u64 = 16 << 10;

/// `trust:` in config.yaml (toolhost's own section; DeerFlow ignores it).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TrustConfig {
    /// Trusted minisign public keys: the base64 key (`RW…`), the text of a `.pub` file, or a
    /// path to one (relative to the config's directory).
    #[serde(deserialize_with = "null_as_default")]
    pub keys: Vec<String>,
    /// Refuse components without a valid signature by a trusted key (bundled components are
    /// part of toolhost and exempt).
    pub require_signatures: bool,
    /// Registries (`host[:port]`) reached over plain HTTP although not on loopback.
    #[serde(deserialize_with = "null_as_default")]
    pub insecure_registries: Vec<String>,
}

fn null_as_default<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

/// One trusted key.
#[derive(Clone)]
pub struct TrustedKey {
    /// minisign's key id (16 upper-case hex digits, as `minisign` prints it).
    pub id: String,
    key: minisign_verify::PublicKey,
}

/// The trust policy, keys parsed.
#[derive(Clone, Default)]
pub struct TrustPolicy {
    keys: Vec<TrustedKey>,
    require: bool,
}

/// Who signed a component, as far as the policy could tell.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Signer {
    /// Shipped inside toolhost.
    Bundled,
    /// A valid signature by this trusted key.
    Trusted(String),
    /// A signature by this key, not checked because `trust.keys` is empty.
    Unchecked(String),
    /// No signature.
    Unsigned,
}

/// What `--explain` and `inspect` show about a component.
#[derive(Debug, Clone)]
pub struct Provenance {
    /// The component's sha256 (`sha256:HEX`).
    pub digest: String,
    /// For an OCI component, the manifest digest it was loaded from.
    pub manifest: Option<String>,
    /// Who signed it.
    pub signer: Signer,
    /// The policy in force, in words.
    pub policy: String,
}

impl std::fmt::Display for Provenance {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "digest {}", self.digest)?;
        if let Some(m) = &self.manifest {
            write!(f, " (manifest {m})")?;
        }
        match &self.signer {
            Signer::Bundled => write!(f, ", bundled with toolhost")?,
            Signer::Trusted(id) => write!(f, ", signed by trusted key {id}")?,
            Signer::Unchecked(id) => write!(f, ", signed by key {id} (not checked: trust.keys is empty)")?,
            Signer::Unsigned => write!(f, ", unsigned")?,
        }
        write!(f, "; policy: {}", self.policy)
    }
}

impl TrustPolicy {
    /// Parse the keys of `cfg`; a relative key path is taken from `base_dir`.
    pub fn from_config(cfg: &TrustConfig, base_dir: &Path) -> Result<Self, String> {
        let mut keys = Vec::new();
        for (i, k) in cfg.keys.iter().enumerate() {
            let k = k.trim();
            // A key is its base64 line (which may contain '/') or a `.pub` file's text; anything
            // else names a file holding one.
            let text = if k.starts_with("untrusted comment:") || parse_public_key(k).is_ok() {
                k.to_string()
            } else {
                let p = Path::new(k);
                let path = if p.is_absolute() { p.to_path_buf() } else { base_dir.join(p) };
                std::fs::read_to_string(&path).map_err(|e| {
                    format!("trust.keys[{i}]: not a minisign public key, and cannot read {}: {e}", path.display())
                })?
            };
            keys.push(parse_public_key(&text).map_err(|e| format!("trust.keys[{i}]: {e}"))?);
        }
        Ok(TrustPolicy { keys, require: cfg.require_signatures })
    }

    /// The trusted key ids.
    pub fn key_ids(&self) -> Vec<String> {
        self.keys.iter().map(|k| k.id.clone()).collect()
    }

    /// The policy in words.
    pub fn describe(&self) -> String {
        let keys = if self.keys.is_empty() {
            "no trusted keys".to_string()
        } else {
            format!("trusted keys {}", self.key_ids().join(", "))
        };
        let req = if self.require { "signatures required" } else { "signatures optional" };
        format!("{req}, {keys}")
    }

    /// Check `bytes` of `component` against its signature (`signature`, read from `found_at`):
    /// a bad or untrusted signature is always refused; a missing one only when signatures are
    /// required. Returns who signed.
    pub fn check(
        &self,
        component: &str,
        bytes: &[u8],
        signature: Option<&[u8]>,
        found_at: &str,
    ) -> Result<Signer, String> {
        let expected = || {
            if self.keys.is_empty() {
                "no key is trusted (trust.keys is empty)".to_string()
            } else {
                format!("expected a signature by {}", self.key_ids().join(" or "))
            }
        };
        let Some(sig) = signature else {
            if self.require {
                return Err(format!(
                    "component {component} is not signed (no signature at {found_at}) and trust.require_signatures is on; {}",
                    expected()
                ));
            }
            return Ok(Signer::Unsigned);
        };
        let text = std::str::from_utf8(sig)
            .map_err(|_| format!("component {component}: the signature at {found_at} is not text"))?;
        let parsed = minisign_verify::Signature::decode(text)
            .map_err(|e| format!("component {component}: the signature at {found_at} cannot be read: {e}"))?;
        let id = signature_key_id(text).unwrap_or_else(|| "?".into());
        if self.keys.is_empty() && !self.require {
            return Ok(Signer::Unchecked(id));
        }
        let Some(key) = self.keys.iter().find(|k| k.id == id) else {
            return Err(format!(
                "component {component} is signed by key {id}, which is not trusted; {} (signature at {found_at})",
                expected()
            ));
        };
        key.key.verify(bytes, &parsed, false).map_err(|e| {
            format!(
                "component {component}: the signature by key {id} at {found_at} does not match its bytes ({e}); refusing it"
            )
        })?;
        Ok(Signer::Trusted(id))
    }
}

/// A minisign public key from its base64 line or the text of a `.pub` file.
pub fn parse_public_key(text: &str) -> Result<TrustedKey, String> {
    let text = text.trim();
    let line = if text.starts_with("untrusted comment:") { text.lines().nth(1).unwrap_or("").trim() } else { text };
    let key = minisign_verify::PublicKey::from_base64(line).map_err(|e| format!("not a minisign public key: {e}"))?;
    let id = key_id_of(line, 2).ok_or("not a minisign public key")?;
    Ok(TrustedKey { id, key })
}

/// The key id a signature (`.minisig` text) names.
pub fn signature_key_id(text: &str) -> Option<String> {
    key_id_of(text.lines().nth(1)?.trim(), 2)
}

/// minisign prints a key id as the 8 bytes after the 2-byte algorithm, little-endian, in hex.
fn key_id_of(b64: &str, at: usize) -> Option<String> {
    let bin = base64::engine::general_purpose::STANDARD.decode(b64).ok()?;
    let id: [u8; 8] = bin.get(at..at + 8)?.try_into().ok()?;
    Some(format!("{:016X}", u64::from_le_bytes(id)))
}

/// Component bytes ready to compile, with their provenance.
pub struct Obtained {
    /// What the runtime loads (for OCI: pinned to the manifest digest).
    pub component: ComponentRef,
    /// The bytes (None: bundled, the runtime has them).
    pub bytes: Option<Vec<u8>>,
    /// Digest, signer, policy.
    pub provenance: Provenance,
    /// Things to tell the user (a tag that moved).
    pub notes: Vec<String>,
}

/// Fetches components and checks them against the trust policy, for one host.
pub struct Fetcher {
    policy: TrustPolicy,
    cache: toolhost_oci::BlobCache,
    client_opts: toolhost_oci::ClientOptions,
    client: OnceLock<Result<toolhost_oci::Client, String>>,
}

impl Fetcher {
    /// A fetcher caching under `<data_dir>/oci`, with credentials from `env`.
    pub fn new(policy: TrustPolicy, cfg: &TrustConfig, data_dir: &Path, env: &dyn Fn(&str) -> Option<String>) -> Self {
        let credentials = toolhost_oci::CredentialStore::from_env(env);
        for p in credentials.problems() {
            tracing::warn!("{p}");
        }
        Fetcher {
            policy,
            cache: toolhost_oci::BlobCache::new(data_dir.join("oci")),
            client_opts: toolhost_oci::ClientOptions {
                credentials,
                insecure_registries: cfg.insecure_registries.clone(),
            },
            client: OnceLock::new(),
        }
    }

    /// The trust policy.
    pub fn policy(&self) -> &TrustPolicy {
        &self.policy
    }

    /// The pull cache.
    pub fn cache(&self) -> &toolhost_oci::BlobCache {
        &self.cache
    }

    fn client(&self) -> Result<&toolhost_oci::Client, String> {
        self.client.get_or_init(|| toolhost_oci::Client::new(self.client_opts.clone())).as_ref().map_err(Clone::clone)
    }

    /// Read (file), pull (OCI) or find (bundled) a component and check its signature. Nothing
    /// is compiled here; an `Err` names the component and what was wrong.
    pub fn obtain(&self, component: &ComponentRef) -> Result<Obtained, String> {
        let policy = self.policy.describe();
        match component {
            ComponentRef::Bundled(_) => obtain_bundled(component, policy),
            ComponentRef::File { path, sha256 } => {
                let bytes =
                    std::fs::read(path).map_err(|e| format!("cannot read component {}: {e}", path.display()))?;
                let digest = toolhost_oci::sha256_digest(&bytes);
                if let Some(pin) = sha256 {
                    if digest["sha256:".len()..] != *pin {
                        return Err(format!(
                            "component {component}: sha256 is {}, but the config pins {pin}; refusing to load it",
                            &digest["sha256:".len()..]
                        ));
                    }
                }
                let sig_path = signature_path(path);
                let sig = read_signature(&sig_path)?;
                let signer = self.policy.check(
                    &component.to_string(),
                    &bytes,
                    sig.as_deref(),
                    &sig_path.display().to_string(),
                )?;
                Ok(Obtained {
                    component: component.clone(),
                    bytes: Some(bytes),
                    provenance: Provenance { digest, manifest: None, signer, policy },
                    notes: Vec::new(),
                })
            }
            ComponentRef::Oci(reference) => {
                let client = self.client()?;
                let pulled = toolhost_oci::block_on(client.pull(&self.cache, reference))?.map_err(|e| e.to_string())?;
                let label = pulled.reference.to_string();
                let signer = self.policy.check(
                    &label,
                    &pulled.wasm,
                    pulled.signature.as_deref(),
                    &format!("the signature layer of {label}"),
                )?;
                // Accepted: only now does it enter the pull cache.
                self.cache.commit(&pulled).map_err(|e| e.to_string())?;
                Ok(Obtained {
                    component: ComponentRef::Oci(pulled.reference.clone()),
                    bytes: Some(pulled.wasm),
                    provenance: Provenance {
                        digest: pulled.wasm_digest,
                        manifest: Some(pulled.manifest_digest),
                        signer,
                        policy,
                    },
                    notes: pulled.notes,
                })
            }
        }
    }
}

/// A bundled component: part of toolhost, so no signature is asked for; `policy` is how the
/// policy in force is described.
pub fn obtain_bundled(component: &ComponentRef, policy: String) -> Result<Obtained, String> {
    let ComponentRef::Bundled(name) = component else {
        return Err(format!("component {component} is not bundled"));
    };
    let bytes = crate::bundled::bytes(name).ok_or_else(|| {
        format!("no bundled component named '{name}' (bundled: {})", crate::bundled::names().join(", "))
    })?;
    Ok(Obtained {
        component: component.clone(),
        bytes: None,
        provenance: Provenance {
            digest: toolhost_oci::sha256_digest(bytes),
            manifest: None,
            signer: Signer::Bundled,
            policy,
        },
        notes: Vec::new(),
    })
}

/// `<file>.minisig`.
pub fn signature_path(component: &Path) -> PathBuf {
    let mut s = component.as_os_str().to_owned();
    s.push(".minisig");
    PathBuf::from(s)
}

/// The signature file, if there is one (refused past 16 KiB or when not a regular file).
fn read_signature(path: &Path) -> Result<Option<Vec<u8>>, String> {
    match std::fs::metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(format!("cannot read the signature {}: {e}", path.display())),
        Ok(m) if !m.is_file() || m.len() > MAX_SIGNATURE_FILE => Err(format!(
            "the signature {} is not a signature file (at most {MAX_SIGNATURE_FILE} bytes)",
            path.display()
        )),
        Ok(_) => {
            std::fs::read(path).map(Some).map_err(|e| format!("cannot read the signature {}: {e}", path.display()))
        }
    }
}

/// Sign `bytes` with the password-less minisign secret key in `secret_key` (text of the key
/// file); returns the `.minisig` text and the key id.
pub fn sign(bytes: &[u8], secret_key: &str, file_name: &str) -> Result<(String, String), String> {
    let sk_box =
        minisign::SecretKeyBox::from_string(secret_key).map_err(|e| format!("not a minisign secret key: {e}"))?;
    let sk = sk_box.into_unencrypted_secret_key().map_err(|e| {
        format!("cannot use the secret key ({e}); toolhost signs with password-less keys (toolhost keygen, or minisign -G -W)")
    })?;
    let pk = minisign::PublicKey::from_secret_key(&sk).map_err(|e| format!("cannot derive the public key: {e}"))?;
    let ts = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    let trusted = format!("timestamp:{ts}\tfile:{file_name}");
    let sig = minisign::sign(Some(&pk), &sk, bytes, Some(&trusted), Some("signature from toolhost secret key"))
        .map_err(|e| format!("signing failed: {e}"))?;
    let text = sig.into_string();
    let id = signature_key_id(&text).ok_or("signing produced an unreadable signature")?;
    Ok((text, id))
}

/// A new password-less key pair: (public key file text, secret key file text, key id).
pub fn keygen() -> Result<(String, String, String), String> {
    let kp =
        minisign::KeyPair::generate_unencrypted_keypair().map_err(|e| format!("cannot generate a key pair: {e}"))?;
    let pk = kp.pk.to_box().map_err(|e| e.to_string())?.into_string();
    let sk = kp.sk.to_box(None).map_err(|e| e.to_string())?.into_string();
    let id = parse_public_key(&pk)?.id;
    Ok((pk, sk, id))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(keys: &[&str], require: bool) -> TrustPolicy {
        let cfg = TrustConfig {
            keys: keys.iter().map(|k| k.to_string()).collect(),
            require_signatures: require,
            ..Default::default()
        };
        TrustPolicy::from_config(&cfg, Path::new("/")).unwrap()
    }

    #[test]
    fn signatures_by_trusted_keys_only() {
        let (pk, sk, id) = keygen().unwrap();
        let (other_pk, other_sk, other_id) = keygen().unwrap();
        let (sig, sig_id) = sign(b"component", &sk, "c.wasm").unwrap();
        assert_eq!(sig_id, id);
        let p = policy(&[&pk], true);
        assert_eq!(p.check("c", b"component", Some(sig.as_bytes()), "c.minisig").unwrap(), Signer::Trusted(id.clone()));
        let e = p.check("c", b"componenT", Some(sig.as_bytes()), "c.minisig").unwrap_err();
        assert!(e.contains("does not match") && e.contains(&id), "{e}");
        let e = p.check("c", b"component", None, "c.minisig").unwrap_err();
        assert!(e.contains("not signed") && e.contains(&id), "{e}");
        let (other_sig, _) = sign(b"component", &other_sk, "c.wasm").unwrap();
        let e = p.check("c", b"component", Some(other_sig.as_bytes()), "c.minisig").unwrap_err();
        assert!(e.contains(&other_id) && e.contains("not trusted") && e.contains(&id), "{e}");
        // Optional signatures: still checked when present.
        let p = policy(&[&pk], false);
        assert_eq!(p.check("c", b"component", None, "x").unwrap(), Signer::Unsigned);
        assert!(p.check("c", b"component", Some(other_sig.as_bytes()), "x").is_err());
        assert!(p.check("c", b"x", Some(sig.as_bytes()), "x").is_err());
        // The base64 line alone is a key too (whatever characters it holds; many have a '/');
        // a public key file's text as well.
        let line = pk.lines().nth(1).unwrap();
        assert_eq!(policy(&[line], true).key_ids(), vec![id.clone()]);
        for _ in 0..64 {
            let (pk, _, id) = keygen().unwrap();
            assert_eq!(policy(&[pk.lines().nth(1).unwrap()], true).key_ids(), vec![id]);
        }
        assert_eq!(policy(&[&other_pk], true).key_ids(), vec![other_id]);
        // No keys, not required: a signature is reported, not checked.
        assert_eq!(policy(&[], false).check("c", b"x", Some(sig.as_bytes()), "x").unwrap(), Signer::Unchecked(id));
        assert!(TrustPolicy::from_config(
            &TrustConfig { keys: vec!["RWnotakey".into()], ..Default::default() },
            Path::new("/nonexistent")
        )
        .is_err());
    }
}
