//! Distribution commands: `keygen` (a password-less minisign key pair), `sign` (a component's
//! `.minisig`), `push` (a component, and its signature, to an OCI registry), and what
//! `inspect` shows about where a component comes from.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context as _;
use clap::Subcommand;

use toolhost::provenance::{self, Fetcher, Provenance, TrustPolicy};
use toolhost::runtime::{ComponentRef, Inspection};
use toolhost::Environment;

use super::{Cli, Output};

#[derive(Subcommand, Debug, Clone)]
pub(super) enum DistCommand {
    /// Make a password-less minisign key pair for `toolhost sign` (the public key goes into
    /// config.yaml's `trust.keys`).
    Keygen {
        /// Where to write the public key.
        #[arg(long, default_value = "toolhost.pub")]
        public_key: PathBuf,
        /// Where to write the secret key (mode 0600).
        #[arg(long, default_value = "toolhost.key")]
        secret_key: PathBuf,
    },
    /// Sign a component: writes COMPONENT.minisig (minisign format, checkable with `minisign -V`).
    Sign {
        component: PathBuf,
        /// A password-less minisign secret key file (`toolhost keygen`, `minisign -G -W`).
        #[arg(long)]
        key: PathBuf,
        /// Where to write the signature (default: COMPONENT.minisig).
        #[arg(long)]
        output: Option<PathBuf>,
    },
    /// Push a component to an OCI registry as a wasm artifact, with its signature (COMPONENT.minisig
    /// if present, or made with --sign) as an extra layer; prints the `use:` line that pins it.
    Push {
        component: PathBuf,
        /// oci://REGISTRY/REPO:TAG
        reference: String,
        /// Sign with this password-less minisign secret key first.
        #[arg(long, value_name = "SECRET_KEY")]
        sign: Option<PathBuf>,
        /// Speak plain HTTP to this registry although it is not on loopback.
        #[arg(long)]
        insecure: bool,
    },
}

pub(super) async fn run(cmd: &DistCommand, cache: &super::UserCache) -> anyhow::Result<ExitCode> {
    let out = match cmd {
        DistCommand::Keygen { public_key, secret_key } => keygen(public_key, secret_key)?,
        DistCommand::Sign { component, key, output } => sign(component, key, output.as_deref())?,
        DistCommand::Push { component, reference, sign, insecure } => {
            push(component, reference, sign.as_deref(), *insecure, cache).await?
        }
    };
    super::render(out, false)
}

fn keygen(public_key: &Path, secret_key: &Path) -> anyhow::Result<Output> {
    let (pk, sk, id) = provenance::keygen().map_err(anyhow::Error::msg)?;
    for p in [public_key, secret_key] {
        anyhow::ensure!(!p.exists(), "{} exists; not overwriting it", p.display());
    }
    let mut f = create_private(secret_key)?;
    f.write_all(sk.as_bytes()).with_context(|| format!("cannot write {}", secret_key.display()))?;
    std::fs::write(public_key, &pk).with_context(|| format!("cannot write {}", public_key.display()))?;
    let text = format!(
        "key id:      {id}\npublic key:  {} ({})\nsecret key:  {} (no password: keep it private)\ntrust it in config.yaml:\n  trust:\n    keys: [\"{}\"]\n",
        public_key.display(),
        pk.lines().nth(1).unwrap_or(""),
        secret_key.display(),
        pk.lines().nth(1).unwrap_or("")
    );
    Ok(Output::new(serde_json::json!({"key_id": id}), text))
}

fn create_private(path: &Path) -> anyhow::Result<std::fs::File> {
    let mut o = std::fs::OpenOptions::new();
    o.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut o, 0o600);
    o.open(path).with_context(|| format!("cannot create {}", path.display()))
}

fn sign_bytes(component: &Path, bytes: &[u8], key: &Path) -> anyhow::Result<(String, String)> {
    let sk = std::fs::read_to_string(key).with_context(|| format!("cannot read the secret key {}", key.display()))?;
    let name = component.file_name().and_then(|n| n.to_str()).unwrap_or("component.wasm");
    provenance::sign(bytes, &sk, name).map_err(|e| anyhow::anyhow!("{}: {e}", key.display()))
}

fn sign(component: &Path, key: &Path, output: Option<&Path>) -> anyhow::Result<Output> {
    let bytes = std::fs::read(component).with_context(|| format!("cannot read {}", component.display()))?;
    let (sig, id) = sign_bytes(component, &bytes, key)?;
    let out = output.map(Path::to_path_buf).unwrap_or_else(|| provenance::signature_path(component));
    std::fs::write(&out, sig).with_context(|| format!("cannot write {}", out.display()))?;
    let digest = toolhost_oci::sha256_digest(&bytes);
    let text = format!("signed {} ({digest}) with key {id}: {}\n", component.display(), out.display());
    Ok(Output::new(serde_json::json!({"signature": out, "key_id": id, "digest": digest}), text))
}

async fn push(
    component: &Path,
    reference: &str,
    key: Option<&Path>,
    insecure: bool,
    cache: &super::UserCache,
) -> anyhow::Result<Output> {
    let r: toolhost_oci::Reference = reference.parse()?;
    let bytes = std::fs::read(component).with_context(|| format!("cannot read {}", component.display()))?;
    // Only a valid tool component is pushed; its world goes into the artifact's config.
    let runtime = cache.runtime()?;
    let inspection = runtime.inspect(component)?;
    let sig_file = provenance::signature_path(component);
    let (signature, signer) = match key {
        Some(k) => {
            let (s, id) = sign_bytes(component, &bytes, k)?;
            (Some(s.into_bytes()), Some(id))
        }
        None if sig_file.is_file() => {
            let s = std::fs::read(&sig_file).with_context(|| format!("cannot read {}", sig_file.display()))?;
            let id = std::str::from_utf8(&s).ok().and_then(provenance::signature_key_id);
            let id = id.with_context(|| format!("{} is not a minisign signature", sig_file.display()))?;
            (Some(s), Some(id))
        }
        None => (None, None),
    };
    let env = Environment::from_process();
    let opts = toolhost_oci::ClientOptions {
        credentials: toolhost_oci::CredentialStore::from_env(&|k| env.get(k)),
        insecure_registries: if insecure { vec![r.registry.clone()] } else { Vec::new() },
    };
    let client = toolhost_oci::Client::new(opts).map_err(anyhow::Error::msg)?;
    let req = toolhost_oci::PushRequest {
        wasm: &bytes,
        signature: signature.as_deref(),
        component: toolhost_oci::ComponentInfo {
            exports: inspection.exports.clone(),
            imports: inspection.imports.clone(),
            target: None,
        },
        created: created(&env)?,
    };
    let digest = client.push(&r, &req).await?;
    let signed = match &signer {
        Some(id) => format!("signed by key {id}"),
        None => "unsigned".to_string(),
    };
    let text = format!(
        "pushed {} to {r} ({signed})\ndigest: {digest}\npin it:  use: {}\n",
        component.display(),
        r.pinned(&digest)
    );
    Ok(Output::new(serde_json::json!({"digest": digest, "key_id": signer}), text))
}

/// `toolhost inspect`'s subject, fetched and checked against the config's `trust:` policy (when
/// the config file exists) before it is compiled.
pub(super) fn inspect(cli: &Cli, subject: &str) -> anyhow::Result<(ComponentRef, Inspection, Provenance)> {
    let env = Environment::from_process();
    let (cfg, base) = match std::fs::read_to_string(&cli.config) {
        Ok(text) => {
            let cfg = toolhost::trust_config(&text, &cli.config.display().to_string(), &env)?;
            let base =
                cli.config.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new(".")).to_path_buf();
            (cfg, base)
        }
        Err(_) => (Default::default(), PathBuf::from(".")),
    };
    let policy = TrustPolicy::from_config(&cfg, &base).map_err(anyhow::Error::msg)?;
    let fetcher = Fetcher::new(policy, &cfg, &cli.data_dir, &|k| env.get(k));
    let component = if subject.starts_with("oci://") {
        ComponentRef::Oci(subject.parse()?)
    } else {
        ComponentRef::File { path: PathBuf::from(subject), sha256: None }
    };
    let obtained = tokio::task::block_in_place(|| fetcher.obtain(&component)).map_err(anyhow::Error::msg)?;
    for n in &obtained.notes {
        eprintln!("warning: {n}");
    }
    let bytes = obtained.bytes.context("inspect takes a component file or an oci:// reference")?;
    let runtime = super::UserCache::new(&env, &cli.data_dir).runtime()?;
    let i = runtime.inspect_bytes(&obtained.component, &bytes)?;
    Ok((obtained.component, i, obtained.provenance))
}

/// The config blob's `created`: `$SOURCE_DATE_EPOCH` (the reproducible-builds convention) when
/// set, else the Unix epoch — never the time of the push, so pushing the same bytes (and the
/// same signature) again gives the same manifest digest and pins stay valid.
fn created(env: &Environment) -> anyhow::Result<String> {
    let secs = match env.get("SOURCE_DATE_EPOCH").filter(|v| !v.is_empty()) {
        Some(v) => v.trim().parse::<u64>().with_context(|| {
            format!("SOURCE_DATE_EPOCH must be whole seconds since 1970-01-01 (the reproducible-builds convention), got {v:?}")
        })?,
        None => 0,
    };
    Ok(rfc3339(std::time::UNIX_EPOCH + std::time::Duration::from_secs(secs)))
}

/// `t` as RFC 3339 UTC.
fn rfc3339(t: std::time::SystemTime) -> String {
    let t = toolhost_py::datetime::UtcFields::of(t);
    format!("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}Z", t.year, t.month, t.day, t.hour, t.minute, t.second)
}

#[cfg(test)]
mod tests {
    use toolhost::Environment;

    #[test]
    fn created_is_the_epoch_or_source_date_epoch_never_now() {
        let env = |v: Option<&str>| Environment::new(v.map(|v| ("SOURCE_DATE_EPOCH".to_string(), v.to_string())));
        assert_eq!(super::created(&env(None)).unwrap(), "1970-01-01T00:00:00Z");
        assert_eq!(super::created(&env(Some("1700000000"))).unwrap(), "2023-11-14T22:13:20Z");
        let err = super::created(&env(Some("yesterday"))).unwrap_err().to_string();
        assert!(err.contains("SOURCE_DATE_EPOCH") && err.contains("yesterday"), "{err}");
    }
}
