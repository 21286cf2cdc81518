//! Capabilities as values, one module per capability — Spin's factors in miniature: [`files`],
//! [`network`], [`env`], [`client`] and [`limits`]. Each reads its keys of a tool's `capabilities:` block
//! ([`CapabilitiesConfig`]), merges field by field over a bundled component's defaults, checks its
//! values (config errors with their location), describes itself for `--explain`, and takes its
//! part in one call's WASI context. Deny by default: no env, no network, no sockets, no files.

pub mod client;
pub mod env;
pub mod files;
pub mod limits;
pub mod network;

use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;
use toolhost_net::NetGrant;
use wasmtime_wasi::{FsPerms, WasiCtx, WasiCtxBuilder};

pub use client::{ClientGrant, ClientRequest};
pub use files::{thread_preopens, FilesGrant, Preopen, PreopenDir};
pub use limits::CallLimits;
pub use network::NetworkEntry;

/// A tool's `capabilities:` block as written. Every key is optional, so a block merges over a
/// bundled component's defaults key by key ([`merged_over`](Self::merged_over)): giving
/// sandbox-fs only `timeout_s: 10` keeps its file access.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct CapabilitiesConfig {
    /// Outbound HTTPS hosts (`api.example.com`, `*.example.com`, `host:8443`); none by default.
    /// Raw sockets are never granted.
    #[serde(default)]
    pub network: Option<Vec<NetworkEntry>>,
    /// Whether those hosts may resolve to private, loopback or link-local addresses (cloud
    /// metadata also needs an entry naming it exactly).
    #[serde(default)]
    pub allow_private_addresses: Option<bool>,
    /// Whether `resolve-host` answers any name, not only names the `network:` entries cover: for
    /// a tool that checks a URL another service fetches (each lookup is a DNS query the tool
    /// names, a small channel out). Off by default.
    #[serde(default)]
    pub resolve_any_host: Option<bool>,
    /// What the component sees of the thread's files.
    #[serde(default)]
    pub filesystem: Option<FilesGrant>,
    /// Host environment variable names passed through.
    #[serde(default)]
    pub env: Option<Vec<String>>,
    /// Linear memory limit, MiB (1 to 4096).
    #[serde(default, deserialize_with = "limits::memory_mb")]
    pub memory_mb: Option<u64>,
    /// Deadline of a call, seconds (above 0, at most a day); waiting for a free slot counts.
    #[serde(default, deserialize_with = "limits::timeout_s")]
    pub timeout_s: Option<f64>,
    /// Result size cap, bytes.
    #[serde(default, deserialize_with = "limits::output_bytes")]
    pub output_bytes: Option<u64>,
    /// WASI handles (files, directories, streams, HTTP objects) a call may hold open at once;
    /// each open file or directory is a host file descriptor.
    #[serde(default, deserialize_with = "limits::handles")]
    pub handles: Option<u64>,
    /// Requests the component may send back to the MCP client during a call
    /// (`[elicitation, sampling]`); none by default.
    #[serde(default)]
    pub client: Option<Vec<ClientRequest>>,
}

impl CapabilitiesConfig {
    /// This block over `defaults`: every key this block sets wins, every other comes from
    /// `defaults` (a list is replaced, not extended: `network: []` means no network).
    pub fn merged_over(&self, defaults: &CapabilitiesConfig) -> CapabilitiesConfig {
        CapabilitiesConfig {
            network: self.network.clone().or_else(|| defaults.network.clone()),
            allow_private_addresses: self.allow_private_addresses.or(defaults.allow_private_addresses),
            resolve_any_host: self.resolve_any_host.or(defaults.resolve_any_host),
            filesystem: self.filesystem.or(defaults.filesystem),
            env: self.env.clone().or_else(|| defaults.env.clone()),
            memory_mb: self.memory_mb.or(defaults.memory_mb),
            timeout_s: self.timeout_s.or(defaults.timeout_s),
            output_bytes: self.output_bytes.or(defaults.output_bytes),
            handles: self.handles.or(defaults.handles),
            client: self.client.clone().or_else(|| defaults.client.clone()),
        }
    }
}

/// Everything a call of one tool is allowed, resolved from a [`CapabilitiesConfig`].
#[derive(Debug, Clone)]
pub struct CapabilitySet {
    /// Which thread directories (and shared roots) the component sees.
    pub fs: FilesGrant,
    /// Env vars handed to the component: (name, value), resolved when the tool was assembled.
    pub env: Vec<(String, String)>,
    /// Outbound HTTPS hosts (wasi:http). Raw sockets are never granted.
    pub network: Arc<NetGrant>,
    /// CPU time, memory, output size and handles of one call.
    pub limits: CallLimits,
    /// What the component may ask the MCP client.
    pub client: ClientGrant,
}

/// Handles a call may hold open when its `capabilities.handles` is not set: plenty for a tool
/// walking a deep tree or making HTTP requests, a small share of the host's file descriptors.
pub const DEFAULT_HANDLES: usize = 256;

impl Default for CapabilitySet {
    fn default() -> Self {
        Self {
            fs: FilesGrant::None,
            env: Vec::new(),
            network: Arc::default(),
            limits: CallLimits {
                timeout: Duration::from_secs(30),
                memory_bytes: 64 << 20,
                output_bytes: 4 << 20,
                handles: DEFAULT_HANDLES,
            },
            client: ClientGrant::default(),
        }
    }
}

impl CapabilitySet {
    /// Resolve a block: each capability reads its keys; granted env vars are looked up with
    /// `lookup` (names that are not set are left out with a warning); a value out of range is
    /// an error naming the key.
    pub fn resolve(
        c: &CapabilitiesConfig,
        lookup: &dyn Fn(&str) -> Option<String>,
        warnings: &mut Vec<String>,
    ) -> Result<Self, String> {
        let defaults = Self::default();
        Ok(Self {
            fs: c.filesystem.unwrap_or_default(),
            env: env::resolve(c.env.as_deref().unwrap_or_default(), lookup, warnings),
            network: network::grant(
                c.network.as_deref().unwrap_or_default(),
                c.allow_private_addresses.unwrap_or(false),
                c.resolve_any_host.unwrap_or(false),
            ),
            limits: limits::call_limits(c, defaults.limits).map_err(|e| format!("capabilities.{e}"))?,
            client: ClientGrant::from_list(c.client.as_deref().unwrap_or_default()),
        })
    }

    /// One line for `tools --explain`: each capability's own description.
    pub fn describe(&self) -> String {
        format!(
            "[files {}, network {}, env {}, {}{}]",
            self.fs.describe(),
            network::describe(&self.network),
            env::describe(&self.env),
            // Only a grant is shown: most tools ask the client nothing.
            match self.client {
                g if g == ClientGrant::default() => String::new(),
                g => format!("client {}, ", g.describe()),
            },
            limits::describe(&self.limits)
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
        if self.fs != FilesGrant::None {
            for p in preopens {
                let read_only = p.read_only || self.fs == FilesGrant::ReadOnly;
                let perms = if read_only { FsPerms::ReadOnly } else { FsPerms::ReadWrite };
                // The handle (if any) lives in `p` until this returns; the builder opens its own.
                b.preopened_dir(p.host.path(), &p.guest, perms)?;
            }
        }
        Ok(b.build())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(yaml: &str) -> CapabilitiesConfig {
        serde_yaml::from_str(yaml).unwrap()
    }

    #[test]
    fn a_block_merges_over_defaults_key_by_key() {
        let defaults = CapabilitiesConfig {
            filesystem: Some(FilesGrant::UserData),
            memory_mb: Some(256),
            timeout_s: Some(60.0),
            network: Some(vec![NetworkEntry(toolhost_net::HostRule::parse("api.example.com").unwrap())]),
            env: Some(vec!["KEY".into()]),
            ..Default::default()
        };
        // Only a timeout: everything else stays the component's.
        let merged = parse("timeout_s: 10").merged_over(&defaults);
        assert_eq!(merged.timeout_s, Some(10.0));
        assert_eq!(merged.filesystem, Some(FilesGrant::UserData));
        assert_eq!(merged.memory_mb, Some(256));
        assert_eq!(merged.network, defaults.network);
        assert_eq!(merged.env, defaults.env);
        // A list given is the list: `network: []` takes the network away, `env` replaces.
        let merged = parse("network: []\nenv: [OTHER]\nfilesystem: none").merged_over(&defaults);
        assert_eq!(merged.network, Some(vec![]));
        assert_eq!(merged.env, Some(vec!["OTHER".to_string()]));
        assert_eq!(merged.filesystem, Some(FilesGrant::None));
        // Nothing over nothing is deny-by-default.
        let set = CapabilitySet::resolve(&CapabilitiesConfig::default(), &|_| None, &mut Vec::new()).unwrap();
        assert_eq!(set.fs, FilesGrant::None);
        assert!(set.network.is_empty() && set.env.is_empty());
    }

    #[test]
    fn resolving_reads_env_through_the_lookup_and_checks_ranges() {
        let c = parse("env: [A, B]\nmemory_mb: 32");
        let mut warnings = Vec::new();
        let set = CapabilitySet::resolve(&c, &|k| (k == "A").then(|| "1".to_string()), &mut warnings).unwrap();
        assert_eq!(set.env, vec![("A".to_string(), "1".to_string())]);
        assert_eq!(warnings, ["capability env var B is not set on the host; not passed"]);
        assert_eq!(set.limits.memory_bytes, 32 << 20);
        assert!(set.describe().starts_with("[files none, network none, env [A], memory 32 MiB"), "{}", set.describe());
        let bad = CapabilitiesConfig { handles: Some(1), ..Default::default() };
        let err = CapabilitySet::resolve(&bad, &|_| None, &mut Vec::new()).unwrap_err();
        assert!(err.starts_with("capabilities.handles must be between"), "{err}");
        assert!(serde_yaml::from_str::<CapabilitiesConfig>("filesystm: none").is_err(), "unknown keys are errors");
    }
}
