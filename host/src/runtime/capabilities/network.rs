//! The network capability: `capabilities.network` entries (`api.example.com`, `*.example.com`,
//! `host:8443`), `allow_private_addresses` and `resolve_any_host`, parsed when the config is read so a bad entry is
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

/// The grant of a call: the entries, whether private addresses may be reached and whether
/// `resolve-host` answers names outside the entries.
pub fn grant(entries: &[NetworkEntry], allow_private: bool, resolve_any_host: bool) -> Arc<NetGrant> {
    Arc::new(
        NetGrant::new(entries.iter().map(|e| e.0.clone()).collect(), allow_private)
            .with_any_name_lookups(resolve_any_host),
    )
}

/// How `--explain` names a grant.
pub fn describe(grant: &NetGrant) -> String {
    if grant.is_empty() {
        "none".to_string()
    } else {
        let notes: Vec<&str> = [
            grant.allow_private().then_some("private addresses allowed"),
            grant.any_name_lookups().then_some("any name resolved"),
        ]
        .into_iter()
        .flatten()
        .collect();
        match notes.is_empty() {
            true => grant.describe(),
            false => format!("{} ({})", grant.describe(), notes.join(", ")),
        }
    }
}
