//! Components from an OCI registry, end to end: a real registry (Debian's `docker-registry`) on
//! loopback, `toolhost push` / `keygen` / `sign`, Debian's `minisign` for a cross-check, and the
//! `toolhost` binary pulling, verifying and calling. Hostile cases (a tampered layer, a moved tag,
//! missing or untrusted signatures) end with a normal call that works and check that nothing of
//! the bad component was cached or compiled.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use base64::Engine as _;
use sha2::Digest as _;

#[path = "support/registry.rs"]
mod registry;
use registry::Registry;

/// A scratch project: components, keys, configs, a data dir and an empty docker config.
struct Project {
    dir: tempfile::TempDir,
}

impl Project {
    fn new() -> Project {
        let p = Project { dir: tempfile::tempdir().unwrap() };
        std::fs::create_dir_all(p.path("docker")).unwrap();
        p
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    /// Write one of the built guest components into the project.
    fn component(&self, name: &str) -> PathBuf {
        let bytes = match name {
            "hello" => toolhost::bundled::bytes("hello").unwrap().to_vec(),
            other => std::fs::read(Path::new(toolhost::bundled::GUEST_DIR).join(format!("{other}.wasm"))).unwrap(),
        };
        let p = self.path(&format!("{name}.wasm"));
        std::fs::write(&p, bytes).unwrap();
        p
    }

    fn run(&self, data: &str, args: &[&str], env: &[(&str, &str)]) -> Output {
        let mut c = Command::new(env!("CARGO_BIN_EXE_toolhost"));
        c.args(args)
            .env("TOOLHOST_HOME", self.path(data))
            // Each data dir stands for a user of its own: its own precompile cache and key.
            .env("XDG_CACHE_HOME", self.path(data).join("xdg-cache"))
            .env("XDG_DATA_HOME", self.path(data).join("xdg-data"))
            .env("DOCKER_CONFIG", self.path("docker"))
            .env_remove("TOOLHOST_CONFIG")
            .env_remove("TOOLHOST_OCI_USERNAME")
            .env_remove("TOOLHOST_OCI_PASSWORD")
            .current_dir(self.dir.path());
        for (k, v) in env {
            c.env(k, v);
        }
        c.output().unwrap()
    }

    /// Run and require success; stdout.
    fn ok(&self, data: &str, args: &[&str]) -> String {
        let o = self.run(data, args, &[]);
        assert!(o.status.success(), "toolhost {args:?} failed:\n{}{}", text(&o.stdout), text(&o.stderr));
        text(&o.stdout)
    }

    fn config(&self, name: &str, yaml: &str) -> String {
        let p = self.path(name);
        std::fs::write(&p, yaml).unwrap();
        p.to_str().unwrap().to_string()
    }

    /// `toolhost keygen` into NAME.pub / NAME.key; the key id.
    fn keygen(&self, name: &str) -> String {
        let (p, s) = (self.path(&format!("{name}.pub")), self.path(&format!("{name}.key")));
        let out =
            self.ok("data", &["keygen", "--public-key", p.to_str().unwrap(), "--secret-key", s.to_str().unwrap()]);
        out.lines().find_map(|l| l.strip_prefix("key id:")).unwrap().trim().to_string()
    }

    /// `toolhost push`; the manifest digest.
    fn push(&self, file: &Path, reference: &str, sign: Option<&str>) -> String {
        let key;
        let mut args = vec!["push", file.to_str().unwrap(), reference];
        if let Some(k) = sign {
            key = self.path(&format!("{k}.key"));
            args.extend(["--sign", key.to_str().unwrap()]);
        }
        let out = self.ok("data", &args);
        out.lines().find_map(|l| l.strip_prefix("digest: ")).unwrap().trim().to_string()
    }

    /// The precompile cache and pull cache of data dir `data` hold nothing of `bytes`.
    fn assert_nothing_of(&self, data: &str, bytes: &[u8]) {
        let hex = hex::encode(sha2::Sha256::digest(bytes));
        assert!(!self.path(data).join("oci/blobs/sha256").join(&hex).exists(), "the refused component was cached");
        let cache = self.path(data).join("xdg-cache/toolhost");
        assert!(cache.is_dir() || !self.path(data).join("xdg-data/toolhost/keys").exists(), "the cache is elsewhere");
        if let Ok(rd) = std::fs::read_dir(cache) {
            for e in rd.flatten() {
                let n = e.file_name().to_string_lossy().into_owned();
                assert!(!n.starts_with(&hex), "the refused component was compiled: {n}");
            }
        }
    }
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn tool_config(trust: &str, use_: &str) -> String {
    format!("tool_groups:\n  - name: t\n{trust}tools:\n  - name: hello\n    group: t\n    use: \"{use_}\"\n")
}

fn trust(keys: &[&Path], require: bool) -> String {
    let keys: Vec<String> = keys.iter().map(|k| format!("\"{}\"", k.display())).collect();
    format!("trust:\n  keys: [{}]\n  require_signatures: {require}\n", keys.join(", "))
}

/// `toolhost call hello {"name": who}` with config `cfg`: (status ok, stdout+stderr).
fn call_hello(p: &Project, data: &str, cfg: &str, who: &str) -> (bool, String) {
    let args = format!("{{\"name\": \"{who}\"}}");
    let o = p.run(data, &["call", "--config", cfg, "hello", &args], &[]);
    (o.status.success(), format!("{}{}", text(&o.stdout), text(&o.stderr)))
}

fn explain(p: &Project, data: &str, cfg: &str) -> String {
    let o = p.run(data, &["tools", "--config", cfg, "--explain"], &[]);
    format!("{}{}", text(&o.stdout), text(&o.stderr))
}

#[test]
fn pull_by_tag_and_by_digest_then_offline_from_the_pinned_cache() {
    let mut reg = Registry::start(None);
    let p = Project::new();
    let hello = p.component("hello");
    let id = p.keygen("dev");
    let digest = p.push(&hello, &reg.reference("tools/hello:v1"), Some("dev"));
    assert!(digest.starts_with("sha256:") && digest.len() == 71, "{digest}");
    let t = trust(&[&p.path("dev.pub")], true);

    let by_tag = p.config("tag.yaml", &tool_config(&t, &reg.reference("tools/hello:v1:hello")));
    let (ok, out) = call_hello(&p, "d-tag", &by_tag, "registry");
    assert!(ok && out.contains("Hello, registry"), "{out}");
    let ex = explain(&p, "d-tag", &by_tag);
    let layer = format!("sha256:{}", hex::encode(sha2::Sha256::digest(std::fs::read(&hello).unwrap())));
    for want in [layer.as_str(), digest.as_str(), &format!("signed by trusted key {id}"), "signatures required"] {
        assert!(ex.contains(want), "--explain lacks {want}: {ex}");
    }

    let pinned_ref = format!("{}@{digest}:hello", reg.reference("tools/hello:v1"));
    let pinned = p.config("pin.yaml", &tool_config(&t, &pinned_ref));
    let (ok, out) = call_hello(&p, "d-pin", &pinned, "pinned");
    assert!(ok && out.contains("Hello, pinned"), "{out}");
    let inspect =
        p.ok("d-pin", &["inspect", "--config", &pinned, &format!("{}@{digest}", reg.reference("tools/hello:v1"))]);
    assert!(inspect.contains(&format!("signed by trusted key {id}")) && inspect.contains(&layer), "{inspect}");

    reg.stop();
    // Pinned and cached: no registry needed.
    let (ok, out) = call_hello(&p, "d-pin", &pinned, "offline");
    assert!(ok && out.contains("Hello, offline"), "{out}");
    // Unpinned: the last resolution is used, with a warning saying so.
    let (ok, out) = call_hello(&p, "d-tag", &by_tag, "stale");
    assert!(ok && out.contains("Hello, stale"), "{out}");
    let ex = explain(&p, "d-tag", &by_tag);
    assert!(ex.contains("cannot reach the registry") && ex.contains("last resolution"), "{ex}");
    // Pinned but never pulled: the error names the reference and the unreachable registry.
    let ex = explain(&p, "d-cold", &pinned);
    assert!(ex.contains("refused") && ex.contains(&digest) && ex.contains("cannot reach the registry"), "{ex}");
}

#[test]
fn a_tampered_layer_is_refused_and_nothing_of_it_is_kept() {
    let reg = Registry::start(None);
    let p = Project::new();
    let hello = p.component("hello");
    let good = std::fs::read(&hello).unwrap();
    p.push(&hello, &reg.reference("tools/hello:v1"), None);
    let layer = format!("sha256:{}", hex::encode(sha2::Sha256::digest(&good)));
    let blob = reg.blob_file(&layer);
    assert_eq!(std::fs::read(&blob).unwrap(), good, "registry layout as expected");
    let cfg = p.config("c.yaml", &tool_config("", &reg.reference("tools/hello:v1:hello")));

    // Same size, one byte flipped: the digest check refuses it.
    let mut bad = good.clone();
    let mid = bad.len() / 2;
    bad[mid] ^= 0x55;
    std::fs::write(&blob, &bad).unwrap();
    let ex = explain(&p, "d", &cfg);
    assert!(ex.contains("- hello") && ex.contains("refused") && ex.contains(&format!("expected {layer}")), "{ex}");
    let (ok, out) = call_hello(&p, "d", &cfg, "x");
    assert!(!ok, "{out}");
    p.assert_nothing_of("d", &bad);
    p.assert_nothing_of("d", &good);

    // Longer than the manifest says: refused on the size.
    let mut long = good.clone();
    long.extend_from_slice(b"trailing");
    std::fs::write(&blob, &long).unwrap();
    let ex = explain(&p, "d", &cfg);
    assert!(ex.contains("the manifest says") && ex.contains(&good.len().to_string()), "{ex}");
    p.assert_nothing_of("d", &long);

    // The registry repaired: the same data dir pulls and calls normally.
    std::fs::write(&blob, &good).unwrap();
    let (ok, out) = call_hello(&p, "d", &cfg, "repaired");
    assert!(ok && out.contains("Hello, repaired"), "{out}");
}

#[test]
fn a_moved_tag_is_reported_and_a_pinned_entry_keeps_its_digest() {
    let reg = Registry::start(None);
    let p = Project::new();
    let hello = p.component("hello");
    let legacy = p.component("legacy_hello");
    let r = reg.reference("tools/hello:v1");
    let d1 = p.push(&hello, &r, None);
    // No tool named: the component's only tool.
    let first = p.config("u.yaml", &tool_config("", &r));
    let pinned = p.config("p.yaml", &tool_config("", &format!("{r}@{d1}:hello")));
    assert!(call_hello(&p, "du", &first, "a").0);

    // The tag now names another component (legacy-hello, whose tool is `legacy_hello`).
    let d2 = p.push(&legacy, &r, None);
    assert_ne!(d1, d2);
    // Unpinned: follows the tag and says it moved, naming both digests.
    let unpinned = p.config("u2.yaml", &tool_config("", &format!("{r}:legacy_hello")));
    let ex = explain(&p, "du", &unpinned);
    assert!(ex.contains("moved") && ex.contains(&d1) && ex.contains(&d2), "{ex}");
    assert!(ex.contains("+ legacy_hello"), "{ex}");
    let o = p.run("du", &["call", "--config", &unpinned, "legacy_hello", r#"{"name": "b"}"#], &[]);
    assert!(o.status.success(), "{}{}", text(&o.stdout), text(&o.stderr));
    // Said once: the next open has nothing to report.
    assert!(!explain(&p, "du", &unpinned).contains("moved"));

    // Pinned (cold cache): loads d1 by digest, never the moved tag's component.
    let ex = explain(&p, "dp", &pinned);
    assert!(ex.contains("+ hello") && ex.contains(&d1) && !ex.contains(&d2), "{ex}");
    p.assert_nothing_of("dp", &std::fs::read(&legacy).unwrap());
    // A pin the registry does not have is refused with a 404 naming the reference.
    let missing = format!("sha256:{}", "0".repeat(64));
    let gone = p.config("g.yaml", &tool_config("", &format!("{r}@{missing}:hello")));
    let ex = explain(&p, "dg", &gone);
    assert!(ex.contains("refused") && ex.contains(&missing) && ex.contains("404"), "{ex}");
    let (ok, out) = call_hello(&p, "dp", &pinned, "still");
    assert!(ok && out.contains("Hello, still"), "{out}");
}

#[test]
fn signatures_are_required_checked_and_cross_checked_with_minisign() {
    let reg = Registry::start(None);
    let p = Project::new();
    let hello = p.component("hello");
    let bytes = std::fs::read(&hello).unwrap();
    let trusted = p.keygen("trusted");
    let stranger = p.keygen("stranger");
    p.push(&hello, &reg.reference("t/unsigned:v1"), None);
    p.push(&hello, &reg.reference("t/stranger:v1"), Some("stranger"));
    p.push(&hello, &reg.reference("t/good:v1"), Some("trusted"));
    let t = trust(&[&p.path("trusted.pub")], true);

    // Unsigned, signatures required: refused, naming the component and the expected key.
    let cfg = p.config("u.yaml", &tool_config(&t, &reg.reference("t/unsigned:v1:hello")));
    let ex = explain(&p, "d1", &cfg);
    assert!(ex.contains("not signed") && ex.contains("t/unsigned") && ex.contains(&trusted), "{ex}");
    p.assert_nothing_of("d1", &bytes);
    // `call` says why, not only DeerFlow's "not a valid tool" (which the model still reads).
    let refused_call = |data: &str, cfg: &str, why: &str| {
        let o = p.run(data, &["call", "--config", cfg, "hello", r#"{"name": "x"}"#], &[]);
        let (out, err) = (text(&o.stdout), text(&o.stderr));
        assert_eq!(o.status.code(), Some(2), "{out}{err}");
        assert!(out.contains("Error: hello is not a valid tool, try one of ["), "{out}");
        assert!(err.contains("tool 'hello' is not available: refused:") && err.contains(why), "{err}");
        assert!(err.contains(&format!("`toolhost check --config {cfg}`")), "{err}");
    };
    refused_call("d1", &cfg, "not signed");

    // Signed by a key that is not trusted: refused, whether or not signatures are required.
    for require in [true, false] {
        let t = trust(&[&p.path("trusted.pub")], require);
        let cfg = p.config("s.yaml", &tool_config(&t, &reg.reference("t/stranger:v1:hello")));
        let ex = explain(&p, "d2", &cfg);
        assert!(
            ex.contains(&format!("signed by key {stranger}, which is not trusted")) && ex.contains(&trusted),
            "{ex}"
        );
        refused_call("d2", &cfg, &format!("signed by key {stranger}, which is not trusted"));
        p.assert_nothing_of("d2", &bytes);
    }

    // A local file signed, then changed: refused.
    let local = p.path("local.wasm");
    std::fs::write(&local, &bytes).unwrap();
    p.ok("d3", &["sign", local.to_str().unwrap(), "--key", p.path("trusted.key").to_str().unwrap()]);
    let mut changed = bytes.clone();
    changed.push(0);
    std::fs::write(&local, &changed).unwrap();
    let cfg = p.config("l.yaml", &tool_config(&t, &format!("{}:hello", local.display())));
    let ex = explain(&p, "d3", &cfg);
    assert!(ex.contains("does not match") && ex.contains(&trusted), "{ex}");
    refused_call("d3", &cfg, "does not match");
    p.assert_nothing_of("d3", &changed);
    // A pin that is not the file's: refused, and `call` names the digests.
    let unsigned = p.path("pin.wasm");
    std::fs::write(&unsigned, &bytes).unwrap();
    let pinned = format!("{}@sha256:{}:hello", unsigned.display(), "0".repeat(64));
    let cfg = p.config("pin.yaml", &tool_config("", &pinned));
    refused_call("d3", &cfg, &"0".repeat(64));

    // Debian's minisign signs; toolhost verifies (a file, and the same signature pushed).
    let status = Command::new("minisign")
        .args(["-G", "-W", "-p"])
        .arg(p.path("deb.pub"))
        .arg("-s")
        .arg(p.path("deb.key"))
        .stdin(Stdio::null())
        .output()
        .expect("Debian's minisign (scripts/install-oci-peers.sh installs it)");
    assert!(status.status.success(), "{}", text(&status.stderr));
    let deb_file = p.path("deb.wasm");
    std::fs::write(&deb_file, &bytes).unwrap();
    let o =
        Command::new("minisign").arg("-S").arg("-s").arg(p.path("deb.key")).arg("-m").arg(&deb_file).output().unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    // minisign prints the key id without leading zeros; toolhost always with 16 digits.
    let deb_id = std::fs::read_to_string(p.path("deb.pub"))
        .unwrap()
        .lines()
        .next()
        .unwrap()
        .rsplit(' ')
        .next()
        .unwrap()
        .to_string();
    let deb_id = format!("{deb_id:0>16}");
    let both = trust(&[&p.path("trusted.pub"), &p.path("deb.pub")], true);
    let cfg = p.config("deb.yaml", &tool_config(&both, &format!("{}:hello", deb_file.display())));
    let (ok, out) = call_hello(&p, "d4", &cfg, "debian");
    assert!(ok && out.contains("Hello, debian"), "{out}");
    assert!(explain(&p, "d4", &cfg).contains(&format!("signed by trusted key {deb_id}")));
    // toolhost's signature verifies with Debian's minisign too.
    let o =
        Command::new("minisign").arg("-V").arg("-p").arg(p.path("trusted.pub")).arg("-m").arg(&local).output().unwrap();
    assert!(!o.status.success(), "minisign accepted a changed file");
    std::fs::write(&local, &bytes).unwrap();
    let o =
        Command::new("minisign").arg("-V").arg("-p").arg(p.path("trusted.pub")).arg("-m").arg(&local).output().unwrap();
    assert!(o.status.success(), "minisign rejects toolhost's signature: {}", text(&o.stderr));
    // The .minisig beside the file travels with `push`.
    let d = p.push(&deb_file, &reg.reference("t/debian:v1"), None);
    let cfg = p.config("debr.yaml", &tool_config(&both, &format!("{}@{d}:hello", reg.reference("t/debian:v1"))));
    assert!(explain(&p, "d5", &cfg).contains(&format!("signed by trusted key {deb_id}")));

    // After all that, the trusted, signed component loads and answers in the same data dirs.
    let cfg = p.config("g.yaml", &tool_config(&t, &reg.reference("t/good:v1:hello")));
    for data in ["d1", "d2", "d3"] {
        let (ok, out) = call_hello(&p, data, &cfg, "trusted");
        assert!(ok && out.contains("Hello, trusted"), "{data}: {out}");
    }
    // Optional signatures: a valid one is still checked and reported.
    let t = trust(&[&p.path("trusted.pub")], false);
    let cfg = p.config("o.yaml", &tool_config(&t, &reg.reference("t/good:v1:hello")));
    let ex = explain(&p, "d1", &cfg);
    assert!(ex.contains(&format!("signed by trusted key {trusted}")) && ex.contains("signatures optional"), "{ex}");
}

#[test]
fn basic_auth_registry_with_docker_config_credentials() {
    let p = Project::new();
    let htpasswd = p.path("htpasswd");
    let o = Command::new("htpasswd")
        .args(["-Bbn", "alice", "s3cret"])
        .output()
        .expect("htpasswd (apache2-utils; scripts/install-oci-peers.sh installs it)");
    assert!(o.status.success());
    std::fs::write(&htpasswd, &o.stdout).unwrap();
    let reg = Registry::start(Some(&htpasswd));
    let hello = p.component("hello");
    let r = reg.reference("private/hello:v1");

    // No credentials: the push fails naming the registry and where credentials would come from.
    let o = p.run("data", &["push", hello.to_str().unwrap(), &r], &[]);
    let err = text(&o.stderr);
    assert!(!o.status.success() && err.contains("authentication failed") && err.contains(&r), "{err}");
    assert!(err.contains("config.json"), "{err}");

    let docker = |user: &str, pass: &str| {
        let auth = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{pass}"));
        let json = format!(r#"{{"auths": {{"{}": {{"auth": "{auth}"}}}}}}"#, reg.host());
        std::fs::write(p.path("docker/config.json"), json).unwrap();
    };
    docker("alice", "wrong");
    let o = p.run("data", &["push", hello.to_str().unwrap(), &r], &[]);
    assert!(!o.status.success() && text(&o.stderr).contains("refused"), "{}", text(&o.stderr));

    docker("alice", "s3cret");
    let digest = p.push(&hello, &r, None);
    let cfg = p.config("c.yaml", &tool_config("", &format!("{r}:hello")));
    let (ok, out) = call_hello(&p, "d", &cfg, "private");
    assert!(ok && out.contains("Hello, private"), "{out}");

    // Credentials from the environment instead, for a pinned pull into a fresh data dir.
    std::fs::remove_file(p.path("docker/config.json")).unwrap();
    let pinned = p.config("p.yaml", &tool_config("", &format!("{r}@{digest}:hello")));
    let args = ["call", "--config", pinned.as_str(), "hello", r#"{"name": "env"}"#];
    let o = p.run("d-env", &args, &[]);
    assert!(!o.status.success(), "pulled without credentials");
    let o = p.run("d-env", &args, &[("TOOLHOST_OCI_USERNAME", "alice"), ("TOOLHOST_OCI_PASSWORD", "s3cret")]);
    assert!(o.status.success() && text(&o.stdout).contains("Hello, env"), "{}{}", text(&o.stdout), text(&o.stderr));
}

/// Run the ORAS project's Python SDK (`.peers/oras`, scripts/install-oci-peers.sh) with `script`
/// and `args`, in the project dir; panics with its output on failure.
fn oras(p: &Project, script: &str, args: &[&str]) -> String {
    let python = Path::new(env!("CARGO_MANIFEST_DIR")).join("../.peers/oras/bin/python");
    assert!(python.exists(), "{} missing: run scripts/install-oci-peers.sh", python.display());
    let o = Command::new(python)
        .arg("-c")
        .arg(script)
        .args(args)
        .current_dir(p.dir.path())
        .env("DOCKER_CONFIG", p.path("docker"))
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(o.status.success(), "oras script failed:\n{}{}", text(&o.stdout), text(&o.stderr));
    text(&o.stdout)
}

/// `oras push TARGET FILE:MEDIA_TYPE` with the wasm config type (plain HTTP: a loopback registry).
const ORAS_PUSH: &str = r#"
import json, sys, oras.client
target, file, media_type = sys.argv[1:4]
with open("config.json", "w") as f:
    json.dump({"architecture": "wasm", "os": "wasip2", "layerDigests": []}, f)
c = oras.client.OrasClient(insecure=True)
r = c.push(target=target, files=[f"{file}:{media_type}"],
           manifest_config="config.json:application/vnd.wasm.config.v0+json", disable_path_validation=True)
print(r.status_code)
"#;

/// `oras pull TARGET` into OUTDIR; prints the files it wrote.
const ORAS_PULL: &str = r#"
import sys, oras.client
c = oras.client.OrasClient(insecure=True)
for f in c.pull(target=sys.argv[1], outdir=sys.argv[2]):
    print(f)
"#;

/// Interop with an independent client: what the ORAS SDK pushes in the wasm artifact layout,
/// toolhost pulls and runs; what `toolhost push` publishes, ORAS pulls byte for byte. An artifact
/// ORAS pushed without a wasm layer is refused with the layer types named, and a normal pull
/// still works afterwards.
#[test]
fn interop_with_the_oras_client_both_ways() {
    let reg = Registry::start(None);
    let p = Project::new();
    let hello = p.component("hello");
    let hello_bytes = std::fs::read(&hello).unwrap();

    let pushed = oras(&p, ORAS_PUSH, &[&format!("{}/tools/hello:oras", reg.host()), "hello.wasm", "application/wasm"]);
    assert_eq!(pushed.trim(), "201", "{pushed}");
    let cfg = p.config("oras.yaml", &tool_config("", &reg.reference("tools/hello:oras")));
    let (ok, out) = call_hello(&p, "d-oras", &cfg, "oras");
    assert!(ok && out.contains("Hello, oras."), "{out}");

    let digest = p.push(&hello, &reg.reference("tools/hello:toolhost"), None);
    let listed = oras(&p, ORAS_PULL, &[&format!("{}/tools/hello:toolhost", reg.host()), "pulled"]);
    let files: Vec<&str> = listed.lines().collect();
    assert_eq!(files.len(), 1, "one layer: {listed}");
    assert_eq!(std::fs::read(files[0]).unwrap(), hello_bytes, "ORAS pulled other bytes than toolhost pushed");
    let pinned = format!("{}@{digest}", reg.reference("tools/hello:toolhost"));
    let cfg_pinned = p.config("pinned.yaml", &tool_config("", &pinned));
    let (ok, out) = call_hello(&p, "d-pinned", &cfg_pinned, "pinned");
    assert!(ok && out.contains("Hello, pinned."), "{out}");

    // Hostile: an artifact whose only layer is a tarball, not a component.
    std::fs::write(p.path("payload.tar"), b"not a component").unwrap();
    oras(
        &p,
        ORAS_PUSH,
        &[&format!("{}/tools/hello:tarball", reg.host()), "payload.tar", "application/vnd.oci.image.layer.v1.tar"],
    );
    let cfg_tar = p.config("tar.yaml", &tool_config("", &reg.reference("tools/hello:tarball")));
    let (ok, out) = call_hello(&p, "d-tar", &cfg_tar, "tar");
    assert!(!ok && out.contains("hello is not a valid tool"), "{out}");
    let ex = explain(&p, "d-tar", &cfg_tar);
    assert!(ex.contains("no application/wasm layer") && ex.contains("application/vnd.oci.image.layer.v1.tar"), "{ex}");
    p.assert_nothing_of("d-tar", b"not a component");
    let (ok, out) = call_hello(&p, "d-oras", &cfg, "again");
    assert!(ok && out.contains("Hello, again."), "{out}");
}

/// The same bytes pushed twice (again with the same signature file) give the same manifest
/// digest, so a pin stays valid across re-pushes; `SOURCE_DATE_EPOCH` is what `created` records.
#[test]
fn pushing_the_same_bytes_again_gives_the_same_digest() {
    let reg = Registry::start(None);
    let p = Project::new();
    let hello = p.component("hello");
    let r = reg.reference("tools/hello:v1");
    let first = p.push(&hello, &r, None);
    std::thread::sleep(std::time::Duration::from_millis(1100));
    assert_eq!(p.push(&hello, &r, None), first, "a re-push changed the manifest digest");
    assert_eq!(p.push(&hello, &reg.reference("other/hello:v2"), None), first, "another tag, the same artifact");
    p.keygen("dev");
    p.ok("data", &["sign", hello.to_str().unwrap(), "--key", p.path("dev.key").to_str().unwrap()]);
    let signed = p.push(&hello, &r, None);
    assert_ne!(signed, first, "the signature layer is part of the artifact");
    std::thread::sleep(std::time::Duration::from_millis(1100));
    assert_eq!(p.push(&hello, &r, None), signed);
    // The config blob says when by SOURCE_DATE_EPOCH, not by the clock.
    let o = p.run("data", &["push", hello.to_str().unwrap(), &r], &[("SOURCE_DATE_EPOCH", "1700000000")]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let dated = text(&o.stdout).lines().find_map(|l| l.strip_prefix("digest: ")).unwrap().trim().to_string();
    assert_ne!(dated, signed);
    let manifest: serde_json::Value = serde_json::from_slice(&std::fs::read(reg.blob_file(&dated)).unwrap()).unwrap();
    let config = std::fs::read(reg.blob_file(manifest["config"]["digest"].as_str().unwrap())).unwrap();
    let config: serde_json::Value = serde_json::from_slice(&config).unwrap();
    assert_eq!(config["created"], "2023-11-14T22:13:20Z");
}

/// `push` of a file that is not a component says so, naming the file and what was expected,
/// instead of printing the parser's byte array; nothing reaches the registry.
#[test]
fn pushing_a_file_that_is_not_a_component_names_it() {
    let reg = Registry::start(None);
    let p = Project::new();
    let notes = p.path("notes.wasm");
    std::fs::write(&notes, "hello, not wasm").unwrap();
    let core = p.path("core.wasm");
    std::fs::write(&core, b"\0asm\x01\0\0\0").unwrap();
    let empty = p.path("empty.wasm");
    std::fs::write(&empty, b"").unwrap();
    for (file, what) in [
        (&notes, "not WebAssembly: a component starts with the bytes \\0asm, this file with \"hello, n\""),
        (&core, "a core WebAssembly module, not a component"),
        (&empty, "the file is empty"),
    ] {
        let o = p.run("data", &["push", file.to_str().unwrap(), &reg.reference("tools/bad:v1")], &[]);
        let err = text(&o.stderr);
        assert!(!o.status.success(), "{err}");
        assert!(err.contains(&file.display().to_string()) && err.contains(what), "{err}");
        assert!(!err.contains("0x"), "a byte array: {err}");
    }
    let o = p.run("data", &["inspect", &reg.reference("tools/bad:v1")], &[]);
    assert!(!o.status.success(), "something was pushed: {}", text(&o.stdout));
}
