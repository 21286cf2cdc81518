//! Capabilities as values: what one component call may touch, built from the tool's
//! `capabilities:` block and turned into a WASI context. Deny by default: no env, no network, no
//! sockets, no files unless granted.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use wasmtime_wasi::{FsPerms, WasiCtx, WasiCtxBuilder};

use super::exec::CallLimits;
use toolhost_net::NetGrant;

/// File access of a component.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FsGrant {
    None,
    /// The thread's directories, read-only.
    ReadOnly,
    /// The thread's user-data read-write; skills, ACP workspace and read-only mounts read-only.
    UserData,
    /// Only the thread's outputs directory, read-write: where a tool writes what it presents.
    Outputs,
}

/// A host directory made visible to the component at a guest path.
#[derive(Debug, Clone)]
pub struct Preopen {
    pub host: PreopenDir,
    pub guest: String,
    pub read_only: bool,
}

/// Which host directory a preopen gives.
#[derive(Debug, Clone)]
pub enum PreopenDir {
    /// An already open directory handle (the thread filesystem layer's): the preopen is exactly
    /// that directory, whatever happens to its name.
    Open(Arc<std::os::fd::OwnedFd>),
    /// A path opened when the call starts (benchmarks, embedders' own directories).
    Path(PathBuf),
}

impl PreopenDir {
    /// What to hand `WasiCtxBuilder::preopened_dir`, which only takes paths: for an open handle,
    /// the `/proc/self/fd/N` magic link, which opens that very directory.
    fn path(&self) -> PathBuf {
        match self {
            PreopenDir::Open(fd) => toolhost_core::threadfs::fd_path(std::os::fd::AsFd::as_fd(&**fd)),
            PreopenDir::Path(p) => p.clone(),
        }
    }
}

/// Everything a call of one tool is allowed.
#[derive(Debug, Clone)]
pub struct CapabilitySet {
    pub fs: FsGrant,
    /// Env vars handed to the component: (name, value), resolved when the tool was assembled.
    pub env: Vec<(String, String)>,
    /// Outbound HTTPS hosts (wasi:http). Raw sockets are never granted.
    pub network: Arc<NetGrant>,
    pub limits: CallLimits,
}

/// Handles a call may hold open when its `capabilities.handles` is not set: plenty for a tool
/// walking a deep tree or making HTTP requests, a small share of the host's file descriptors.
pub const DEFAULT_HANDLES: usize = 256;

impl Default for CapabilitySet {
    fn default() -> Self {
        Self {
            fs: FsGrant::None,
            env: Vec::new(),
            network: Arc::default(),
            limits: CallLimits {
                timeout: Duration::from_secs(30),
                memory_bytes: 64 << 20,
                output_bytes: 4 << 20,
                handles: DEFAULT_HANDLES,
            },
        }
    }
}

impl CapabilitySet {
    /// One line for `tools --explain`: files, network, env and limits.
    pub fn describe(&self) -> String {
        let fs = match self.fs {
            FsGrant::None => "none",
            FsGrant::ReadOnly => "read-only",
            FsGrant::UserData => "user-data",
            FsGrant::Outputs => "outputs",
        };
        let network = if self.network.is_empty() {
            "none".to_string()
        } else if self.network.allow_private() {
            format!("{} (private addresses allowed)", self.network.describe())
        } else {
            self.network.describe()
        };
        let env: Vec<&str> = self.env.iter().map(|(k, _)| k.as_str()).collect();
        format!(
            "[files {fs}, network {network}, env [{}], memory {} MiB, timeout {:?}, output {} bytes, handles {}]",
            env.join(", "),
            self.limits.memory_bytes >> 20,
            self.limits.timeout,
            self.limits.output_bytes,
            self.limits.handles
        )
    }

    /// The WASI context of one call. `preopens` are the directories the caller computed for
    /// this thread; they are only attached when the grant allows files, and read-only grants
    /// turn every preopen read-only.
    pub fn wasi_ctx(
        &self,
        preopens: &[Preopen],
        stderr: wasmtime_wasi::p2::pipe::MemoryOutputPipe,
    ) -> anyhow::Result<WasiCtx> {
        let mut b = WasiCtxBuilder::new();
        b.stderr(stderr);
        // Calls already run on a blocking thread: do file I/O in place instead of handing each
        // read to another thread.
        b.allow_blocking_current_thread(true);
        for (k, v) in &self.env {
            b.env(k, v);
        }
        // Sockets stay denied: the default socket address check refuses every address, and
        // name lookup is off unless allowed.
        b.allow_ip_name_lookup(false);
        b.allow_tcp(false);
        b.allow_udp(false);
        if self.fs != FsGrant::None {
            for p in preopens {
                let read_only = p.read_only || self.fs == FsGrant::ReadOnly;
                let perms = if read_only { FsPerms::ReadOnly } else { FsPerms::ReadWrite };
                // The handle (if any) lives in `p` until this returns; the builder opens its own.
                b.preopened_dir(p.host.path(), &p.guest, perms)?;
            }
        }
        Ok(b.build())
    }
}
