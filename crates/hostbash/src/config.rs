//! toolhost's own `sandbox:` keys for host bash's confinement, as `config.yaml` spells them:
//! `bash_confinement`, `bash_network`, `bash_user`, `bash_env`, `bash_shell`,
//! `bash_max_file_size_mb`. DeerFlow's `SandboxConfig` allows extra keys (`extra="allow"`), so a
//! file that sets them still loads there. Each value is checked as it is read, so a bad one is a
//! config error with its line (the host's config loader places it).

use std::fmt;
use std::sync::Arc;

use serde::de::{self, MapAccess, Visitor};
use serde::{Deserialize, Deserializer};

use toolhost_net::{HostRule, NetGrant};

use crate::{BashNetwork, BashUser, ConfineMode, DEFAULT_MAX_FILE_BYTES};

/// `sandbox.bash_confinement`: `full` (the default) or `off` — the [`ConfineMode`] itself.
pub type BashConfinement = ConfineMode;

/// `sandbox.bash_network`: `none` (the default), or `{allow: [hosts…], allow_private_addresses:
/// false}` — HTTPS through the host's proxy to the hosts listed, with the entry syntax and
/// address rules of a component's `capabilities.network`. The [`BashNetwork`] itself.
pub type BashNetworkConfig = BashNetwork;

/// One `allow` entry, with the syntax of a component's `capabilities.network` entry.
#[derive(Deserialize)]
#[serde(try_from = "String")]
struct NetworkEntry(HostRule);

impl TryFrom<String> for NetworkEntry {
    type Error = String;

    fn try_from(entry: String) -> Result<Self, String> {
        HostRule::parse(&entry).map(Self)
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AllowlistConfig {
    allow: Vec<NetworkEntry>,
    #[serde(default)]
    allow_private_addresses: bool,
}

impl<'de> Deserialize<'de> for BashNetwork {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = BashNetwork;

            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("`none` or `{allow: [host, …], allow_private_addresses: false}`")
            }

            fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
                Ok(BashNetwork::None)
            }

            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                match v {
                    "none" => Ok(BashNetwork::None),
                    "allowlist" => Err(E::custom(
                        "allowlist needs its hosts: write `bash_network: {allow: [host, …]}` (entries as in capabilities.network)",
                    )),
                    other => Err(E::custom(format!(
                        "unknown bash_network '{other}': expected `none` or `{{allow: [host, …], allow_private_addresses: false}}`"
                    ))),
                }
            }

            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
                let c = AllowlistConfig::deserialize(de::value::MapAccessDeserializer::new(map))?;
                if c.allow.is_empty() {
                    return Err(de::Error::custom(
                        "allow is empty: list the hosts commands may reach, or write `bash_network: none`",
                    ));
                }
                if let Some(plain) = c.allow.iter().find(|h| h.0.is_plain_http()) {
                    return Err(de::Error::custom(format!(
                        "'{}': only HTTPS is allowed for host bash (its proxy speaks CONNECT); plain-HTTP entries are for components' capabilities.network",
                        plain.0.written()
                    )));
                }
                let rules = c.allow.into_iter().map(|h| h.0).collect();
                Ok(BashNetwork::Allowlist(Arc::new(NetGrant::new(rules, c.allow_private_addresses))))
            }
        }
        d.deserialize_any(V)
    }
}

/// `sandbox.bash_user`: a user name, a uid, or `uid:gid` — never root.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BashUserConfig(pub BashUser);

impl<'de> Deserialize<'de> for BashUserConfig {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = BashUserConfig;

            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a user name, a uid or `uid:gid`")
            }

            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
                self.visit_str(&v.to_string())
            }

            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
                self.visit_str(&v.to_string())
            }

            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                BashUser::parse(v).map(BashUserConfig).map_err(E::custom)
            }
        }
        d.deserialize_any(V)
    }
}

/// One `sandbox.bash_env` entry: an environment variable name.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(try_from = "String")]
pub struct EnvName(pub String);

impl TryFrom<String> for EnvName {
    type Error = String;

    fn try_from(name: String) -> Result<Self, String> {
        let mut bytes = name.bytes();
        let ok = bytes.next().is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
            && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_');
        if ok {
            Ok(Self(name))
        } else {
            Err(format!(
                "'{name}' is not an environment variable name (letters, digits and '_', not starting with a digit)"
            ))
        }
    }
}

/// The default of `sandbox.bash_max_file_size_mb`.
pub const DEFAULT_MAX_FILE_SIZE_MB: u64 = DEFAULT_MAX_FILE_BYTES >> 20;

/// `sandbox.bash_max_file_size_mb`: whole MiB, 0 for no limit, at most 8 TiB.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
#[serde(try_from = "u64")]
pub struct FileSizeMb(pub u64);

impl Default for FileSizeMb {
    fn default() -> Self {
        Self(DEFAULT_MAX_FILE_SIZE_MB)
    }
}

impl TryFrom<u64> for FileSizeMb {
    type Error = String;

    fn try_from(mb: u64) -> Result<Self, String> {
        if mb > 8 << 20 {
            return Err(format!("{mb} MiB is more than 8 TiB; write 0 for no limit"));
        }
        Ok(Self(mb))
    }
}

impl FileSizeMb {
    /// The limit in bytes; `None` for no limit.
    pub fn bytes(self) -> Option<u64> {
        (self.0 > 0).then_some(self.0 << 20)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn de<T: serde::de::DeserializeOwned>(v: serde_json::Value) -> Result<T, String> {
        serde_json::from_value(v).map_err(|e| e.to_string())
    }

    #[test]
    fn values_parse() {
        let net: BashNetworkConfig =
            de(serde_json::json!({"allow": ["pypi.org", "localhost:8443"], "allow_private_addresses": true})).unwrap();
        match net {
            BashNetwork::Allowlist(g) => {
                assert!(g.allows("pypi.org", 443) && g.allows("localhost", 8443) && g.allow_private())
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(de::<BashNetworkConfig>(serde_json::json!("none")).unwrap(), BashNetwork::None);
        assert_eq!(de::<BashUserConfig>(serde_json::json!("nobody")).unwrap().0.uid, 65534);
        assert_eq!(de::<EnvName>(serde_json::json!("GIT_AUTHOR_NAME")).unwrap().0, "GIT_AUTHOR_NAME");
        assert_eq!(de::<BashConfinement>(serde_json::json!("off")).unwrap(), ConfineMode::Off);
        assert_eq!(de::<FileSizeMb>(serde_json::json!(0)).unwrap().bytes(), None);
        assert_eq!(FileSizeMb::default().bytes(), Some(DEFAULT_MAX_FILE_BYTES));
    }

    #[test]
    fn bad_values_are_refused() {
        for (v, needle) in [
            (serde_json::json!("allowlist"), "allowlist needs its hosts"),
            (serde_json::json!("everything"), "unknown bash_network 'everything'"),
            (serde_json::json!({"allow": ["http://x.example"]}), "only HTTPS"),
            (serde_json::json!({"allow": []}), "allow is empty"),
            (serde_json::json!({"allow": ["x.example"], "alow_private": true}), "unknown field `alow_private`"),
        ] {
            let e = de::<BashNetworkConfig>(v).unwrap_err();
            assert!(e.contains(needle), "{e}");
        }
        assert!(de::<BashUserConfig>(serde_json::json!("root")).unwrap_err().contains("must not be 0"));
        assert!(de::<EnvName>(serde_json::json!("BAD NAME")).unwrap_err().contains("not an environment variable name"));
        assert!(de::<BashConfinement>(serde_json::json!("maybe")).unwrap_err().contains("unknown variant `maybe`"));
        assert!(de::<FileSizeMb>(serde_json::json!(9u64 << 20)).unwrap_err().contains("more than 8 TiB"));
    }
}
