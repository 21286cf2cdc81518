//! `toolhost.mcp_servers.<name>` and `toolhost.acp_agents.<name>`: what one MCP stdio server or
//! ACP agent may reach, in the vocabulary of a component's `capabilities:` (filesystem, network,
//! env, memory and process limits). They sit under toolhost's own section so that DeerFlow's
//! `extensions_config.json` and `acp_agents` load unchanged. With no entry, a server gets the
//! defaults: the system read-only, its install directories, a private home, HTTPS to public
//! hosts through the proxy, no capabilities.
//!
//! ```yaml
//! toolhost:
//!   mcp_servers:
//!     filesystem:
//!       filesystem: {read_write: [/srv/projects]}
//!       network: none
//!   acp_agents:
//!     claude_code:
//!       network: [api.anthropic.com]
//!       env: [ANTHROPIC_API_KEY]
//!       memory_mb: 4096
//! ```

use std::path::PathBuf;
use std::sync::Arc;

use serde::Deserialize;
use toolhost_net::{HostRule, NetGrant};

use super::EnvName;

/// One server's or agent's grants.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProcessGrantConfig {
    /// `false` starts it as a plain subprocess with toolhost's own rights (a warning says so).
    #[serde(default = "yes")]
    pub confine: bool,
    #[serde(default)]
    pub filesystem: FilesystemGrant,
    /// `none`, a list of hosts, or `{allow: [...], allow_private_addresses: true}`; left out:
    /// HTTPS to any public host through the proxy.
    #[serde(default)]
    pub network: Option<ProcessNetwork>,
    /// Host environment variables passed through (besides PATH, LANG, … and the entry's own
    /// `env`).
    #[serde(default)]
    pub env: Vec<EnvName>,
    /// Memory of its whole process tree.
    #[serde(default, deserialize_with = "positive")]
    pub memory_mb: Option<u64>,
    /// Processes of its tree alive at once.
    #[serde(default, deserialize_with = "positive")]
    pub processes: Option<u64>,
    /// Largest file it may write.
    #[serde(default, deserialize_with = "positive")]
    pub file_size_mb: Option<u64>,
}

impl Default for ProcessGrantConfig {
    fn default() -> Self {
        Self {
            confine: true,
            filesystem: FilesystemGrant::default(),
            network: None,
            env: Vec::new(),
            memory_mb: None,
            processes: None,
            file_size_mb: None,
        }
    }
}

fn yes() -> bool {
    true
}

fn positive<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    match Option::<u64>::deserialize(d)? {
        Some(0) => Err(serde::de::Error::custom("must be at least 1")),
        Some(n) if n > 1 << 40 => Err(serde::de::Error::custom("is too large")),
        other => Ok(other),
    }
}

/// Host paths a process may read or change besides its defaults.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FilesystemGrant {
    #[serde(default)]
    pub read_only: Vec<GrantPath>,
    #[serde(default)]
    pub read_write: Vec<GrantPath>,
}

/// An absolute host path in a grant.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(try_from = "String")]
pub struct GrantPath(pub PathBuf);

impl TryFrom<String> for GrantPath {
    type Error = String;

    fn try_from(s: String) -> Result<Self, String> {
        let path = PathBuf::from(&s);
        if !path.is_absolute() {
            return Err(format!("'{s}' is not an absolute path (grants name host paths, e.g. /srv/data)"));
        }
        if path.components().any(|c| matches!(c, std::path::Component::ParentDir)) {
            return Err(format!("'{s}' contains '..'; write the directory itself"));
        }
        Ok(Self(path))
    }
}

/// A process's network grant.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(try_from = "NetworkSpec")]
pub enum ProcessNetwork {
    None,
    Allow(Arc<NetGrant>),
}

#[derive(Deserialize)]
#[serde(untagged)]
enum NetworkSpec {
    Word(String),
    Hosts(Vec<String>),
    Map {
        allow: Vec<String>,
        #[serde(default)]
        allow_private_addresses: bool,
    },
}

impl TryFrom<NetworkSpec> for ProcessNetwork {
    type Error = String;

    fn try_from(spec: NetworkSpec) -> Result<Self, String> {
        let (hosts, private) = match spec {
            NetworkSpec::Word(w) if w == "none" => return Ok(Self::None),
            NetworkSpec::Word(w) => {
                return Err(format!(
                    "network '{w}': expected `none`, a list of hosts, or `{{allow: [host, …], allow_private_addresses: \
                     false}}`"
                ))
            }
            NetworkSpec::Hosts(h) => (h, false),
            NetworkSpec::Map { allow, allow_private_addresses } => (allow, allow_private_addresses),
        };
        if hosts.is_empty() {
            return Err("network: the list of hosts is empty; write `network: none` to close it".into());
        }
        let mut rules = Vec::new();
        for h in hosts {
            let rule = HostRule::parse(&h).map_err(|e| format!("network: {e}"))?;
            if rule.is_plain_http() {
                return Err(format!("network: '{h}': only HTTPS goes through the proxy; drop the http:// entry"));
            }
            rules.push(rule);
        }
        Ok(Self::Allow(Arc::new(NetGrant::new(rules, private))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(yaml: &str) -> Result<ProcessGrantConfig, String> {
        serde_yaml::from_str(yaml).map_err(|e| e.to_string())
    }

    #[test]
    fn grants_parse_in_the_capabilities_vocabulary() {
        let g = parse("filesystem: {read_only: [/a], read_write: [/b]}\nnetwork: [api.example.com]\nenv: [TOKEN]\nmemory_mb: 512\nprocesses: 64\n").unwrap();
        assert_eq!(g.filesystem.read_only, [GrantPath("/a".into())]);
        assert_eq!(g.filesystem.read_write, [GrantPath("/b".into())]);
        match g.network {
            Some(ProcessNetwork::Allow(n)) => {
                assert!(n.allows("api.example.com", 443) && !n.allows("x.example.com", 443))
            }
            other => panic!("{other:?}"),
        }
        assert!(g.confine);
        assert_eq!(parse("network: none\n").unwrap().network, Some(ProcessNetwork::None));
        let g = parse("network: {allow: ['localhost:8443'], allow_private_addresses: true}\nconfine: false\n").unwrap();
        assert!(!g.confine);
        assert!(matches!(g.network, Some(ProcessNetwork::Allow(n)) if n.allow_private()));
    }

    #[test]
    fn bad_grants_name_what_is_wrong() {
        for (yaml, needle) in [
            ("filesystem: {read_write: [relative/dir]}\n", "not an absolute path"),
            ("filesystem: {read_only: [/a/../etc]}\n", "contains '..'"),
            ("network: everything\n", "network 'everything'"),
            ("network: []\n", "list of hosts is empty"),
            ("network: ['*']\n", "would allow every host"),
            ("memory_mb: 0\n", "at least 1"),
            ("env: [1X]\n", "not an environment variable name"),
            ("filesystem: {write: [/a]}\n", "unknown field `write`"),
            ("networks: none\n", "unknown field `networks`"),
        ] {
            let err = parse(yaml).unwrap_err();
            assert!(err.contains(needle), "{yaml}: {err}");
        }
    }
}
