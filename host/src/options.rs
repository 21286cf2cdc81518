//! How to open a host: [`HostOptions`], built with setters. The library reads no environment
//! variable of its own accord: the environment a config's `$VAR`s and a tool's `capabilities.env`
//! see is the one given here (the CLI passes its own; an embedder passes what it chooses).

use std::path::{Path, PathBuf};

/// Where the config comes from.
#[derive(Debug, Clone)]
pub enum ConfigSource {
    /// A `config.yaml` file; relative paths in it are taken from its directory.
    File(PathBuf),
    /// Config text. `name` names it in errors; relative paths in it are taken from `base_dir`.
    Text {
        /// The YAML.
        text: String,
        /// How errors name it (`config.yaml`, `<embedded>`).
        name: String,
        /// The directory relative paths are taken from.
        base_dir: PathBuf,
    },
}

impl ConfigSource {
    /// The directory relative paths in the config are taken from.
    pub fn base_dir(&self) -> PathBuf {
        match self {
            ConfigSource::File(p) => p.parent().map(Path::to_path_buf).unwrap_or_else(|| PathBuf::from(".")),
            ConfigSource::Text { base_dir, .. } => base_dir.clone(),
        }
    }
}

pub use toolhost_core::Environment;

/// How to open a host. Start from [`HostOptions::new`] (a config file) or
/// [`HostOptions::from_yaml`] (config text) and set what differs from the defaults.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct HostOptions {
    /// The config.
    pub config: ConfigSource,
    /// Thread files, thread state, the precompile cache and its key (default `./.toolhost`).
    pub data_dir: PathBuf,
    /// Keep thread state on disk between processes (the CLI does; default off).
    pub persist_state: bool,
    /// Precompiled artifacts; `None`: `<data_dir>/cache`. (The CLI uses one per user.)
    pub cache_dir: Option<PathBuf>,
    /// The key that authenticates them, kept outside the cache; `None`: `keys/` beside the cache.
    pub cache_keys_dir: Option<PathBuf>,
    /// DeerFlow's `extensions_config.json` (MCP servers, skill states); `None`: none.
    pub extensions: Option<PathBuf>,
    /// A PEM file of CA certificates that components' outbound HTTPS trusts besides the web
    /// PKI roots (a private CA, a TLS-inspecting proxy).
    pub extra_ca_certs: Option<PathBuf>,
    /// What `$VAR` and `capabilities.env` see (default: nothing).
    pub env: Environment,
    /// `write_file`'s cap on a single non-append write: DeerFlow's `DEERFLOW_WRITE_FILE_MAX_BYTES`,
    /// as its text (`"100000"`, `" 2000 "`, `"0"`). The file tool reads it as DeerFlow does —
    /// Python's `int()`; `<= 0` disables the guard; text that is not an integer, or `None`, gives
    /// DeerFlow's default of 80 KiB. Kept as text so a value reaches the tool exactly as DeerFlow
    /// would see it in its environment (the CLI passes the variable's value).
    pub write_file_max_bytes: Option<String>,
}

impl HostOptions {
    /// Options for the config file at `config_path`, everything else at its default.
    pub fn new(config_path: impl Into<PathBuf>) -> Self {
        Self::with_config(ConfigSource::File(config_path.into()))
    }

    /// Options for config text; relative paths in it are taken from `base_dir`.
    pub fn from_yaml(text: impl Into<String>, base_dir: impl Into<PathBuf>) -> Self {
        Self::with_config(ConfigSource::Text { text: text.into(), name: "<config>".into(), base_dir: base_dir.into() })
    }

    fn with_config(config: ConfigSource) -> Self {
        Self {
            config,
            data_dir: PathBuf::from(".toolhost"),
            persist_state: false,
            cache_dir: None,
            cache_keys_dir: None,
            extensions: None,
            extra_ca_certs: None,
            env: Environment::default(),
            write_file_max_bytes: None,
        }
    }

    /// Where thread files, state and the precompile cache live.
    pub fn data_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.data_dir = dir.into();
        self
    }

    /// Keep thread state on disk between processes.
    pub fn persist_state(mut self, persist: bool) -> Self {
        self.persist_state = persist;
        self
    }

    /// Where precompiled artifacts live (`None`: `<data_dir>/cache`).
    pub fn cache_dir(mut self, dir: impl Into<Option<PathBuf>>) -> Self {
        self.cache_dir = dir.into();
        self
    }

    /// Where the precompile cache's key lives (`None`: `keys/` beside the cache). It must not be
    /// inside the cache: whoever can write the cache must not be able to read or replace it.
    pub fn cache_keys_dir(mut self, dir: impl Into<Option<PathBuf>>) -> Self {
        self.cache_keys_dir = dir.into();
        self
    }

    /// DeerFlow's `extensions_config.json` (MCP servers, skill states).
    pub fn extensions(mut self, path: impl Into<Option<PathBuf>>) -> Self {
        self.extensions = path.into();
        self
    }

    /// Extra CA certificates (PEM) for components' outbound HTTPS.
    pub fn extra_ca_certs(mut self, pem: impl Into<Option<PathBuf>>) -> Self {
        self.extra_ca_certs = pem.into();
        self
    }

    /// The environment `$VAR` and `capabilities.env` see.
    pub fn env(mut self, env: Environment) -> Self {
        self.env = env;
        self
    }

    /// DeerFlow's `DEERFLOW_WRITE_FILE_MAX_BYTES`, as its text (see the field).
    pub fn write_file_max_bytes(mut self, max: Option<impl Into<String>>) -> Self {
        self.write_file_max_bytes = max.map(Into::into);
        self
    }

    /// The config file's path, when the config is a file.
    pub fn config_path(&self) -> Option<&Path> {
        match &self.config {
            ConfigSource::File(p) => Some(p),
            ConfigSource::Text { .. } => None,
        }
    }
}
