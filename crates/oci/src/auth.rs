//! Registry credentials: `TOOLHOST_OCI_USERNAME` / `TOOLHOST_OCI_PASSWORD` from the environment
//! (for the registry `TOOLHOST_OCI_REGISTRY` names, or every registry when it is unset), else the
//! docker config (`$DOCKER_CONFIG/config.json` or `~/.docker/config.json`, `auths.<host>.auth`).
//! Credentials are sent only when a registry asks for them (a 401 challenge).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use base64::Engine as _;

/// A user name and password (or token) for one registry.
#[derive(Clone, PartialEq, Eq)]
pub struct Credentials {
    /// The user name.
    pub username: String,
    /// The password or access token.
    pub password: String,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials").field("username", &self.username).field("password", &"…").finish()
    }
}

impl Credentials {
    /// The `Authorization: Basic …` value.
    pub fn basic_header(&self) -> String {
        let raw = format!("{}:{}", self.username, self.password);
        format!("Basic {}", base64::engine::general_purpose::STANDARD.encode(raw))
    }
}

/// The credentials toolhost knows, by registry.
#[derive(Debug, Clone, Default)]
pub struct CredentialStore {
    /// From the environment: (registry it is for, or None for all; credentials).
    env: Option<(Option<String>, Credentials)>,
    /// From the docker config, by normalised registry (`host[:port]`).
    docker: HashMap<String, Credentials>,
    /// The docker config read, for messages.
    docker_file: Option<PathBuf>,
    /// Entries of the docker config that could not be used, for messages.
    problems: Vec<String>,
}

/// The environment variable with the registry user name.
pub const USERNAME_ENV: &str = "TOOLHOST_OCI_USERNAME";
/// The environment variable with the registry password or token.
pub const PASSWORD_ENV: &str = "TOOLHOST_OCI_PASSWORD";
/// The environment variable limiting the two above to one registry (`host[:port]`).
pub const REGISTRY_ENV: &str = "TOOLHOST_OCI_REGISTRY";

impl CredentialStore {
    /// Read the environment through `env` (`TOOLHOST_OCI_*`, `DOCKER_CONFIG`, `HOME`) and the
    /// docker config it points at. A missing docker config is no error; an unreadable one is
    /// noted in [`CredentialStore::problems`].
    pub fn from_env(env: &dyn Fn(&str) -> Option<String>) -> Self {
        let mut store = CredentialStore::default();
        let nonempty = |k: &str| env(k).filter(|v| !v.is_empty());
        if let (Some(username), Some(password)) = (nonempty(USERNAME_ENV), nonempty(PASSWORD_ENV)) {
            store.env = Some((nonempty(REGISTRY_ENV).map(|r| normalise(&r)), Credentials { username, password }));
        }
        let file = match (nonempty("DOCKER_CONFIG"), nonempty("HOME")) {
            (Some(dir), _) => Some(Path::new(&dir).join("config.json")),
            (None, Some(home)) => Some(Path::new(&home).join(".docker").join("config.json")),
            (None, None) => None,
        };
        if let Some(file) = file {
            match std::fs::read(&file) {
                Ok(bytes) => store.read_docker_config(&file, &bytes),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => store.problems.push(format!("cannot read {}: {e}", file.display())),
            }
        }
        store
    }

    fn read_docker_config(&mut self, file: &Path, bytes: &[u8]) {
        #[derive(serde::Deserialize)]
        struct DockerConfig {
            #[serde(default)]
            auths: HashMap<String, AuthEntry>,
        }
        #[derive(serde::Deserialize)]
        struct AuthEntry {
            auth: Option<String>,
            username: Option<String>,
            password: Option<String>,
        }
        let parsed: DockerConfig = match serde_json::from_slice(bytes) {
            Ok(c) => c,
            Err(e) => {
                self.problems.push(format!("{} is not a docker config: {e}", file.display()));
                return;
            }
        };
        self.docker_file = Some(file.to_path_buf());
        for (key, entry) in parsed.auths {
            let creds = match (entry.auth, entry.username, entry.password) {
                (Some(auth), _, _) if !auth.is_empty() => {
                    let decoded = base64::engine::general_purpose::STANDARD
                        .decode(auth.trim())
                        .ok()
                        .and_then(|b| String::from_utf8(b).ok());
                    match decoded.as_deref().and_then(|s| s.split_once(':')) {
                        Some((u, p)) => Credentials { username: u.to_string(), password: p.to_string() },
                        None => {
                            self.problems.push(format!(
                                "{}: auths.{key}.auth is not base64 of USER:PASSWORD; ignored",
                                file.display()
                            ));
                            continue;
                        }
                    }
                }
                (_, Some(username), Some(password)) => Credentials { username, password },
                _ => continue,
            };
            self.docker.insert(normalise(&key), creds);
        }
    }

    /// A store holding exactly these credentials for `registry` (for embedders and tests).
    pub fn single(registry: &str, creds: Credentials) -> Self {
        CredentialStore { env: Some((Some(normalise(registry)), creds)), ..Default::default() }
    }

    /// The credentials for `registry` (`host[:port]`), if any.
    pub fn get(&self, registry: &str) -> Option<&Credentials> {
        let want = normalise(registry);
        if let Some((scope, creds)) = &self.env {
            if scope.as_deref().is_none_or(|s| s == want) {
                return Some(creds);
            }
        }
        self.docker.get(&want)
    }

    /// Where credentials for `registry` would come from, for an authentication error.
    pub fn describe_sources(&self, registry: &str) -> String {
        match (&self.env, &self.docker_file) {
            _ if self.get(registry).is_some() => "credentials were sent and refused".to_string(),
            (_, Some(f)) => format!(
                "no credentials for {registry} in {} or ${USERNAME_ENV}/${PASSWORD_ENV}",
                f.display()
            ),
            (_, None) => format!(
                "no credentials for {registry}: set ${USERNAME_ENV}/${PASSWORD_ENV} or add it to the docker config ($DOCKER_CONFIG/config.json or ~/.docker/config.json)"
            ),
        }
    }

    /// Entries of the docker config that could not be used.
    pub fn problems(&self) -> &[String] {
        &self.problems
    }
}

/// `https://host:port/v1/` and `host:port` name the same registry.
fn normalise(key: &str) -> String {
    let k = key.trim();
    let k = k.strip_prefix("https://").or_else(|| k.strip_prefix("http://")).unwrap_or(k);
    k.split('/').next().unwrap_or(k).to_ascii_lowercase()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn docker_config_and_env() {
        let dir = tempfile::tempdir().unwrap();
        let auth = base64::engine::general_purpose::STANDARD.encode("alice:s3cret:with:colons");
        let cfg = format!(
            r#"{{"auths": {{"https://127.0.0.1:5000/v1/": {{"auth": "{auth}"}}, "bad.example": {{"auth": "!!"}}, "u.example": {{"username": "u", "password": "p"}}}}, "credsStore": "desktop"}}"#
        );
        std::fs::write(dir.path().join("config.json"), cfg).unwrap();
        let d = dir.path().to_str().unwrap().to_string();
        let env = move |k: &str| (k == "DOCKER_CONFIG").then(|| d.clone());
        let s = CredentialStore::from_env(&env);
        let c = s.get("127.0.0.1:5000").unwrap();
        assert_eq!((c.username.as_str(), c.password.as_str()), ("alice", "s3cret:with:colons"));
        assert_eq!(s.get("u.example").unwrap().password, "p");
        assert!(s.get("127.0.0.1:5001").is_none());
        assert!(s.problems().iter().any(|p| p.contains("bad.example")));
        assert!(!format!("{c:?}").contains("s3cret"));

        let env = |k: &str| match k {
            USERNAME_ENV => Some("bob".to_string()),
            PASSWORD_ENV => Some("pw".to_string()),
            REGISTRY_ENV => Some("reg.example:443".to_string()),
            _ => None,
        };
        let s = CredentialStore::from_env(&env);
        assert_eq!(s.get("reg.example:443").unwrap().username, "bob");
        assert!(s.get("other.example").is_none(), "env credentials leak to another registry");
    }
}
