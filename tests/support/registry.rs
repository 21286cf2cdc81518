//! A real OCI registry on 127.0.0.1 for tests: Debian's `docker-registry` (installed by
//! scripts/install-oci-peers.sh), storing blobs in a temp dir, stopped when dropped.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const REGISTRY_BIN: &str = "/usr/bin/docker-registry";

/// A registry on 127.0.0.1, storing blobs in a temp dir; stopped when dropped.
pub struct Registry {
    child: Option<Child>,
    port: u16,
    dir: tempfile::TempDir,
}

impl Registry {
    pub fn start(htpasswd: Option<&Path>) -> Registry {
        assert!(Path::new(REGISTRY_BIN).exists(), "{REGISTRY_BIN} missing: scripts/install-oci-peers.sh installs it");
        let dir = tempfile::tempdir().unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let mut cfg = format!(
            "version: 0.1\nlog:\n  level: error\n  accesslog:\n    disabled: true\nstorage:\n  filesystem:\n    rootdirectory: {}\n  delete:\n    enabled: true\nhttp:\n  addr: 127.0.0.1:{port}\n",
            dir.path().join("storage").display()
        );
        if let Some(h) = htpasswd {
            cfg += &format!("auth:\n  htpasswd:\n    realm: toolhost-test\n    path: {}\n", h.display());
        }
        let cfg_path = dir.path().join("registry.yml");
        std::fs::write(&cfg_path, cfg).unwrap();
        let mut r = Registry { child: None, port, dir };
        r.spawn(&cfg_path);
        r
    }

    pub fn spawn(&mut self, cfg: &Path) {
        let child = Command::new(REGISTRY_BIN)
            .arg("serve")
            .arg(cfg)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::net::TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            assert!(Instant::now() < deadline, "registry did not listen on {}", self.port);
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    pub fn host(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    pub fn reference(&self, repo_tag: &str) -> String {
        format!("oci://{}/{repo_tag}", self.host())
    }

    /// Where the registry keeps blob `digest` on disk.
    pub fn blob_file(&self, digest: &str) -> PathBuf {
        let hex = digest.strip_prefix("sha256:").unwrap();
        self.dir.path().join("storage/docker/registry/v2/blobs/sha256").join(&hex[..2]).join(hex).join("data")
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        self.stop();
    }
}
