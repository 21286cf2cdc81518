//! The network capability: `capabilities.network` entries (`api.example.com`, `*.example.com`,
//! `host:8443`) and `allow_private_addresses`, parsed when the config is read so a bad entry is
//! reported with its line and column. The rules themselves live in `toolhost-net`; the per-call
//! wasi:http hooks that apply them are in `runtime/net.rs`.

use std::sync::Arc;

use serde::Deserialize;
use toolhost_net::{HostRule, NetGrant};

/// One `capabilities.network` entry.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(try_from = "String")]
pub struct NetworkEntry(pub HostRule);

impl TryFrom<String> for NetworkEntry {
    type Error = String;

    fn try_from(entry: String) -> Result<Self, String> {
        HostRule::parse(&entry).map(Self)
    }
}

/// The grant of a call: the entries, and whether private addresses may be reached.
pub fn grant(entries: &[NetworkEntry], allow_private: bool) -> Arc<NetGrant> {
    Arc::new(NetGrant::new(entries.iter().map(|e| e.0.clone()).collect(), allow_private))
}

/// How `--explain` names a grant.
pub fn describe(grant: &NetGrant) -> String {
    if grant.is_empty() {
        "none".to_string()
    } else if grant.allow_private() {
        format!("{} (private addresses allowed)", grant.describe())
    } else {
        grant.describe()
    }
}
