//! toolhost's own `sandbox:` keys for host bash's confinement: `bash_confinement`,
//! `bash_network`, `bash_user`, `bash_env`, `bash_shell`, `bash_max_file_size_mb`. DeerFlow's
//! `SandboxConfig` allows extra keys (`extra="allow"`), so a file that sets them still loads
//! there. Each value is checked as it is read, so a bad one is a config error with its line.

use std::fmt;
use std::sync::Arc;

use serde::de::{self, MapAccess, Visitor};
use serde::{Deserialize, Deserializer};

use crate::runtime::capabilities::NetworkEntry;

/// `sandbox.bash_confinement`: `full` (the default) or `off`.
#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum BashConfinement {
    #[default]
    Full,
    /// Run host-bash commands unconfined, as DeerFlow does. Warned about at start.
    Off,
}

/// `sandbox.bash_network`: `none` (the default), or `{allow: [hosts…], allow_private_addresses:
/// false}` — HTTPS through the host's proxy to the hosts listed, with the entry syntax and
/// address rules of a component's `capabilities.network`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum BashNetworkConfig {
    #[default]
    None,
    Allowlist(Arc<toolhost_net::NetGrant>),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AllowlistConfig {
    allow: Vec<NetworkEntry>,
    #[serde(default)]
    allow_private_addresses: bool,
}

impl<'de> Deserialize<'de> for BashNetworkConfig {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = BashNetworkConfig;

            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("`none` or `{allow: [host, …], allow_private_addresses: false}`")
            }

            fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
                Ok(BashNetworkConfig::None)
            }

            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                match v {
                    "none" => Ok(BashNetworkConfig::None),
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
                Ok(BashNetworkConfig::Allowlist(Arc::new(toolhost_net::NetGrant::new(
                    rules,
                    c.allow_private_addresses,
                ))))
            }
        }
        d.deserialize_any(V)
    }
}

/// `sandbox.bash_user`: a user name, a uid, or `uid:gid` — never root.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BashUserConfig(pub toolhost_hostbash::BashUser);

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
                toolhost_hostbash::BashUser::parse(v).map(BashUserConfig).map_err(E::custom)
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
pub const DEFAULT_MAX_FILE_SIZE_MB: u64 = toolhost_hostbash::DEFAULT_MAX_FILE_BYTES >> 20;

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
    use crate::config::{parse, validate};

    fn sandbox(keys: &str) -> String {
        format!("sandbox:\n  use: deerflow.sandbox.local:LocalSandboxProvider\n  allow_host_bash: true\n{keys}")
    }

    #[test]
    fn keys_parse() {
        let (c, _) = parse(
            &sandbox("  bash_network:\n    allow: [pypi.org, 'localhost:8443']\n    allow_private_addresses: true\n  bash_env: [GIT_AUTHOR_NAME]\n  bash_user: nobody\n  bash_confinement: full\n  bash_max_file_size_mb: 0\n"),
            "c.yaml",
            &Default::default(),
        )
        .unwrap();
        let s = c.sandbox.unwrap();
        match &s.bash_network {
            super::BashNetworkConfig::Allowlist(g) => {
                assert!(g.allows("pypi.org", 443) && g.allows("localhost", 8443) && g.allow_private());
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(s.bash_env[0].0, "GIT_AUTHOR_NAME");
        assert_eq!(s.bash_user.unwrap().0.uid, 65534);
        assert_eq!(s.bash_max_file_size_mb.bytes(), None);
        let (c, _) =
            parse(&sandbox("  bash_network: none\n  bash_user: 1000:1000\n"), "c.yaml", &Default::default()).unwrap();
        let s = c.sandbox.unwrap();
        assert_eq!(s.bash_network, super::BashNetworkConfig::None);
        assert_eq!(s.bash_max_file_size_mb.bytes(), Some(1 << 30));
    }

    #[test]
    fn bad_values_name_line_and_column() {
        for (keys, line, needle) in [
            ("  bash_network: allowlist\n", 4, "allowlist needs its hosts"),
            ("  bash_network: everything\n", 4, "unknown bash_network 'everything'"),
            ("  bash_network:\n    allow: ['http://x.example']\n", 5, "only HTTPS"),
            ("  bash_network:\n    allow: []\n", 5, "allow is empty"),
            ("  bash_network:\n    allow: [x.example]\n    alow_private: true\n", 6, "unknown field `alow_private`"),
            ("  bash_user: root\n", 4, "must not be 0"),
            ("  bash_env: ['BAD NAME']\n", 4, "not an environment variable name"),
            ("  bash_confinement: maybe\n", 4, "unknown variant `maybe`"),
            ("  bash_max_file_size_mb: -1\n", 4, "bash_max_file_size_mb"),
        ] {
            let text = sandbox(keys);
            let err = parse(&text, "c.yaml", &Default::default()).unwrap_err();
            assert!(err.message.contains(needle), "{keys}: {err}");
            assert_eq!(err.line, line, "{keys}: {err}");
            assert!(err.column > 0, "{keys}: {err}");
            let all = validate(&text, "c.yaml", &Default::default());
            assert_eq!(all.len(), 1, "{keys}: {all:?}");
            assert!(all[0].message.contains(needle), "{keys}: {}", all[0]);
        }
    }
}
