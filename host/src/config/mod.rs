//! `config.yaml` in DeerFlow's format (spec §11): the types toolhost reads, `$VAR` expansion,
//! the mapping from DeerFlow's Python `use:` paths to what toolhost bundles, and errors that
//! name the file, line and column.

mod env;
mod processes;
mod uses;

use std::path::PathBuf;

use indexmap::IndexMap;
use serde::Deserialize;
use serde_json::Value;

pub use env::expand_env;
pub use processes::{GrantPath, ProcessGrantConfig, ProcessNetwork};

use crate::options::{ConfigSource, Environment};
pub use uses::{deerflow_use, resolve_use, ResolvedUse, BASH_TOOL_USE};

// Each section's type lives in the crate (or module) that uses it; this module reads the file
// and hands the typed sections out.
pub use crate::middleware::ReadBeforeWriteConfig;
pub use crate::provenance::TrustConfig;
pub use crate::runtime::capabilities::CapabilitiesConfig;
pub use crate::runtime::ToolhostConfig;
pub use crate::state_store::StateStoreConfig;
/// One `acp_agents.<name>` entry: the ACP crate's type, read straight from config.yaml.
pub use toolhost_acp::AcpAgentConfig;
/// `tool_search:` (deferred MCP tools): the deferred crate's type.
pub use toolhost_deferred::ToolSearchConfig;
/// toolhost's own `sandbox:` keys for host bash's confinement: the hostbash crate's types.
pub use toolhost_hostbash::config::{BashConfinement, BashNetworkConfig, BashUserConfig, EnvName, FileSizeMb};
/// `skills:` and `skill_evolution:`: the skills crate's types.
pub use toolhost_skills::{SkillEvolutionConfig, SkillsConfig};
/// The `subagents:` section: the subagents crate's type, read straight from config.yaml.
pub use toolhost_subagents::SubagentsAppConfig as SubagentsConfig;

/// A config problem, with where it is.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{file}:{line}:{column}: {message}")]
pub struct ConfigError {
    /// The config file (or the name given to config text).
    pub file: String,
    /// 1-based line.
    pub line: usize,
    /// 1-based column.
    pub column: usize,
    /// What is wrong, naming the key.
    pub message: String,
}

/// What can go wrong loading a config file.
#[derive(Debug, thiserror::Error)]
pub enum ConfigLoadError {
    #[error("cannot read {path}: {source}")]
    /// The file cannot be read.
    Read {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    #[error("{0}")]
    /// The file is not a valid config.
    Invalid(ConfigError),
}

/// DeerFlow's `config.yaml`, the parts toolhost uses. Unknown top-level keys (models' API
/// settings, memory, title, …) are accepted and ignored, as DeerFlow's own loader would keep
/// them for other subsystems.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct AppConfig {
    /// DeerFlow's `config_version`.
    pub config_version: Option<u32>,
    #[serde(deserialize_with = "null_as_default")]
    /// `tool_groups:`.
    pub tool_groups: Vec<ToolGroupConfig>,
    #[serde(deserialize_with = "null_as_default")]
    /// `tools:`, in order.
    pub tools: Vec<ToolConfig>,
    /// `sandbox:`.
    pub sandbox: Option<SandboxConfig>,
    #[serde(deserialize_with = "null_as_default")]
    /// `models:` (the first is the default model).
    pub models: Vec<ModelConfig>,
    #[serde(deserialize_with = "null_as_default")]
    /// `skill_evolution:`.
    pub skill_evolution: SkillEvolutionConfig,
    #[serde(deserialize_with = "null_as_default")]
    /// `subagents:`.
    pub subagents: SubagentsConfig,
    #[serde(deserialize_with = "null_as_default")]
    /// `tool_search:` (deferred MCP tools).
    pub tool_search: ToolSearchConfig,
    #[serde(deserialize_with = "null_as_default")]
    /// `acp_agents:`.
    pub acp_agents: IndexMap<String, AcpAgentConfig>,
    #[serde(deserialize_with = "null_as_default")]
    /// `skills:`.
    pub skills: SkillsConfig,
    #[serde(deserialize_with = "null_as_default")]
    /// `read_before_write:`.
    pub read_before_write: ReadBeforeWriteConfig,
    /// toolhost's own settings (concurrency limits); DeerFlow ignores the section.
    #[serde(deserialize_with = "null_as_default")]
    pub toolhost: ToolhostConfig,
    /// `trust:` (toolhost's own): trusted signing keys and whether signatures are required.
    #[serde(deserialize_with = "null_as_default")]
    pub trust: TrustConfig,
    /// `state_store:` (toolhost's own): where thread state lives; absent: the embedded store.
    pub state_store: Option<StateStoreConfig>,
}

fn null_as_default<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

#[derive(Debug, Clone, Deserialize)]
pub struct ToolGroupConfig {
    pub name: String,
}

/// One `tools:` entry: `name`, `group`, `use` plus free extra keys (DeerFlow's `model_extra`),
/// and toolhost's `capabilities:` block, which DeerFlow's loader ignores.
#[derive(Debug, Clone, Deserialize)]
pub struct ToolConfig {
    pub name: String,
    pub group: String,
    #[serde(rename = "use")]
    pub use_: String,
    /// toolhost's `capabilities:` block (DeerFlow's loader ignores it); merged over a bundled
    /// component's defaults.
    #[serde(default)]
    pub capabilities: Option<CapabilitiesConfig>,
    /// toolhost's `task_support:` key: whether `toolhost serve` runs this tool as an MCP task
    /// (the tasks extension) for a client that supports tasks. Unset: `optional`.
    #[serde(default)]
    pub task_support: Option<TaskSupport>,
    /// Every other key: this tool's own config, handed to it at call time.
    #[serde(flatten)]
    pub extra: IndexMap<String, Value>,
}

/// How `toolhost serve` may run a tool for a client that supports MCP tasks
/// (`io.modelcontextprotocol/tasks`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskSupport {
    /// Always answered at once, never as a task.
    Forbidden,
    /// Run as a task when the client supports tasks, at once otherwise.
    Optional,
    /// Only as a task: a client without tasks support gets `-32021` (missing client capability).
    Required,
}

impl TaskSupport {
    /// The name on the wire (`forbidden`, `optional`, `required`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Forbidden => "forbidden",
            Self::Optional => "optional",
            Self::Required => "required",
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(default)]
pub struct SandboxConfig {
    #[serde(rename = "use")]
    pub use_: String,
    pub allow_host_bash: bool,
    #[serde(deserialize_with = "null_as_default")]
    pub mounts: Vec<MountConfig>,
    pub bash_output_max_chars: usize,
    pub read_file_output_max_chars: usize,
    pub ls_output_max_chars: usize,
    pub bash_command_timeout: u64,
    /// toolhost's own key: the most a thread's user data may occupy on disk for `write_file` and
    /// `str_replace` to go on writing (none: no quota). DeerFlow's loader ignores it.
    #[serde(deserialize_with = "positive_mb")]
    pub thread_disk_quota_mb: Option<u64>,
    /// toolhost's keys for host bash's confinement (see `toolhost_hostbash::config`).
    pub bash_confinement: BashConfinement,
    #[serde(deserialize_with = "null_as_default")]
    pub bash_network: BashNetworkConfig,
    pub bash_user: Option<BashUserConfig>,
    #[serde(deserialize_with = "null_as_default")]
    pub bash_env: Vec<EnvName>,
    pub bash_shell: Option<String>,
    pub bash_max_file_size_mb: FileSizeMb,
    /// Processes one command's tree may run at once (a fork bomb stops there).
    #[serde(deserialize_with = "positive_count")]
    pub bash_max_processes: Option<u64>,
    /// Memory of one command's tree, in MB.
    #[serde(deserialize_with = "positive_count")]
    pub bash_memory_mb: Option<u64>,
}

fn positive_count<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    match Option::<u64>::deserialize(d)? {
        Some(0) => Err(serde::de::Error::custom("must be at least 1; leave it out for the default")),
        Some(n) if n > 1 << 30 => Err(serde::de::Error::custom("must be at most 1073741824")),
        other => Ok(other),
    }
}

fn positive_mb<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    match Option::<u64>::deserialize(d)? {
        Some(0) => Err(serde::de::Error::custom("must be at least 1 (MB); leave it out for no quota")),
        Some(mb) if mb > 1 << 30 => Err(serde::de::Error::custom("must be at most 1073741824 (MB)")),
        other => Ok(other),
    }
}

impl Default for SandboxConfig {
    fn default() -> Self {
        Self {
            use_: LOCAL_SANDBOX_PROVIDER.to_string(),
            allow_host_bash: false,
            mounts: Vec::new(),
            bash_output_max_chars: 20000,
            read_file_output_max_chars: 50000,
            ls_output_max_chars: 20000,
            bash_command_timeout: 600,
            thread_disk_quota_mb: None,
            bash_confinement: BashConfinement::Full,
            bash_network: BashNetworkConfig::None,
            bash_user: None,
            bash_env: Vec::new(),
            bash_shell: None,
            bash_max_file_size_mb: FileSizeMb::default(),
            bash_max_processes: None,
            bash_memory_mb: None,
        }
    }
}

pub const LOCAL_SANDBOX_PROVIDER: &str = "deerflow.sandbox.local:LocalSandboxProvider";

impl SandboxConfig {
    /// DeerFlow's "local provider" test (spec §1 step 2).
    pub fn is_local(&self) -> bool {
        self.use_ == LOCAL_SANDBOX_PROVIDER
            || self.use_ == "deerflow.sandbox.local.local_sandbox_provider:LocalSandboxProvider"
            || (self.use_.ends_with(":LocalSandboxProvider") && self.use_.contains("deerflow.sandbox.local"))
    }
}

#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct MountConfig {
    pub host_path: String,
    pub container_path: String,
    #[serde(default)]
    pub read_only: bool,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct ModelConfig {
    pub name: String,
    #[serde(default)]
    pub supports_vision: bool,
    /// The rest of the entry (`use`, `model`, `base_url`, `api_key`, …), which the subagent loop
    /// reads as DeerFlow's ChatOpenAI does.
    #[serde(flatten)]
    pub extra: IndexMap<String, Value>,
}

impl ModelConfig {
    /// The entry as written (after `$VAR` expansion), `name` included.
    pub fn entry(&self) -> serde_json::Map<String, Value> {
        let mut m: serde_json::Map<String, Value> = self.extra.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        m.insert("name".into(), Value::String(self.name.clone()));
        m.insert("supports_vision".into(), Value::Bool(self.supports_vision));
        m
    }
}

/// A loaded config: its text, how errors name it, and the typed sections.
#[derive(Debug, Clone)]
pub struct LoadedConfig {
    /// How errors name the config (its path, or `<config>` for text).
    pub name: String,
    /// The text as read (errors found after parsing are located in it).
    pub text: String,
    /// The directory relative paths in the config are taken from.
    pub base_dir: PathBuf,
    /// The sections.
    pub config: AppConfig,
    /// Problems that do not stop loading (unset `$VAR`s, …).
    pub warnings: Vec<String>,
}

impl LoadedConfig {
    /// `name:line:col: message` for a problem at config path `at` (`tools[3].use`).
    pub fn locate(&self, at: &str, message: &str) -> String {
        let (line, col) = locate_path(&self.text, at);
        format!("{}:{line}:{col}: {message}", self.name)
    }
}

/// Read and parse a config, with `$VAR`s taken from `env`.
pub fn load(source: &ConfigSource, env: &Environment) -> Result<LoadedConfig, ConfigLoadError> {
    let (text, name) = match source {
        ConfigSource::File(path) => (
            std::fs::read_to_string(path)
                .map_err(|source| ConfigLoadError::Read { path: path.to_path_buf(), source })?,
            path.display().to_string(),
        ),
        ConfigSource::Text { text, name, .. } => (text.clone(), name.clone()),
    };
    let (config, warnings) = parse(&text, &name, env).map_err(ConfigLoadError::Invalid)?;
    Ok(LoadedConfig { name, text, base_dir: source.base_dir(), config, warnings })
}

/// Parse config text. `file` names it in errors. Strings starting with `$` are replaced by the
/// variable of that name in `env` (DeerFlow's rule); an unset one becomes `""` with a warning.
pub fn parse(text: &str, file: &str, env: &Environment) -> Result<(AppConfig, Vec<String>), ConfigError> {
    let mut value: serde_yaml::Value = serde_yaml::from_str(text).map_err(|e| yaml_error(file, text, &e, None))?;
    if value.is_null() {
        value = serde_yaml::Value::Mapping(Default::default());
    }
    let mut warnings = Vec::new();
    expand_env(&mut value, env, &mut |name| {
        warnings.push(format!("{file}: environment variable ${name} is not set; using \"\""))
    });
    match serde_path_to_error::deserialize::<_, AppConfig>(value) {
        Ok(config) => Ok((config, warnings)),
        Err(expanded_err) => {
            // Deserialize from the text too: its errors carry line and column.
            let de = serde_yaml::Deserializer::from_str(text);
            match serde_path_to_error::deserialize::<_, AppConfig>(de) {
                Err(e) => {
                    let path = e.path().to_string();
                    Err(yaml_error(file, text, e.inner(), Some(&path)))
                }
                Ok(_) => {
                    let path = expanded_err.path().to_string();
                    let (line, column) = locate_path(text, &path);
                    let message = format!("{path}: {} (after $VAR expansion)", expanded_err.inner());
                    Err(ConfigError { file: file.to_string(), line, column, message })
                }
            }
        }
    }
}

fn yaml_error(file: &str, text: &str, e: &serde_yaml::Error, path: Option<&str>) -> ConfigError {
    let (line, column) = e
        .location()
        .map(|l| (l.line(), l.column()))
        .unwrap_or_else(|| path.map(|p| locate_path(text, p)).unwrap_or((0, 0)));
    let message = match path {
        Some(p) if !p.is_empty() && p != "." => format!("{p}: {}", without_yaml_path(&e.to_string(), p)),
        _ => e.to_string(),
    };
    // serde_yaml appends " at line L column C"; the prefix already says where.
    let message = match message.rfind(" at line ") {
        Some(i) => message[..i].to_string(),
        None => message,
    };
    ConfigError { file: file.to_string(), line, column, message }
}

/// serde_yaml starts a message with its own (shorter) path of the value, e.g.
/// `tools[0].capabilities: …` for an error at `tools[0].capabilities.timeout_s`; the full path
/// is already in front of it.
fn without_yaml_path<'a>(message: &'a str, path: &str) -> &'a str {
    match message.split_once(": ") {
        Some((head, rest))
            if !head.is_empty()
                && path.starts_with(head)
                && matches!(path.as_bytes().get(head.len()), None | Some(b'.') | Some(b'[')) =>
        {
            rest
        }
        _ => message,
    }
}

/// Best-effort line and column of a config path such as `tools[3].use`: the line of the n-th
/// list item under the key, then the key below it. Used for errors found after parsing.
pub fn locate_path(text: &str, path: &str) -> (usize, usize) {
    let mut line_no = 0usize;
    let lines: Vec<&str> = text.lines().collect();
    let mut start = 0usize;
    for seg in path.split('.') {
        let (key, index) = match seg.find('[') {
            Some(i) => (&seg[..i], seg[i + 1..].trim_end_matches(']').parse::<usize>().ok()),
            None => (seg, None),
        };
        let found = lines.iter().enumerate().skip(start).find(|(_, l)| {
            let t = l.trim_start().trim_start_matches("- ");
            t.starts_with(&format!("{key}:"))
        });
        let Some((i, _)) = found else { break };
        line_no = i;
        start = i + 1;
        if let Some(n) = index {
            let indent_of = |l: &str| l.len() - l.trim_start().len();
            let items: Vec<usize> = lines
                .iter()
                .enumerate()
                .skip(start)
                .take_while(|(_, l)| {
                    l.trim().is_empty()
                        || l.trim_start().starts_with('#')
                        || indent_of(l) > indent_of(lines[i])
                        || l.trim_start().starts_with("- ")
                })
                .filter(|(_, l)| l.trim_start().starts_with("- "))
                .map(|(j, _)| j)
                .collect();
            if let Some(&j) = items.get(n) {
                line_no = j;
                start = j;
            }
        }
    }
    let col = lines.get(line_no).map(|l| l.len() - l.trim_start().trim_start_matches("- ").len() + 1).unwrap_or(1);
    (line_no + 1, col)
}

impl AppConfig {
    /// `is_host_bash_allowed` (spec §1 step 2): no sandbox section → false; non-local provider →
    /// true; local → `allow_host_bash`.
    pub fn is_host_bash_allowed(&self) -> bool {
        match &self.sandbox {
            None => false,
            Some(s) if !s.is_local() => true,
            Some(s) => s.allow_host_bash,
        }
    }

    /// The sandbox section, or DeerFlow's defaults.
    pub fn sandbox_or_default(&self) -> SandboxConfig {
        self.sandbox.clone().unwrap_or_default()
    }

    /// Whether `model_name` (or the first model when `None`) supports vision.
    pub fn model_supports_vision(&self, model_name: Option<&str>) -> bool {
        match model_name {
            Some(name) => self.models.iter().find(|m| m.name == name).is_some_and(|m| m.supports_vision),
            None => self.models.first().is_some_and(|m| m.supports_vision),
        }
    }

    /// The `tools:` entry named `name`.
    pub fn tool_config(&self, name: &str) -> Option<&ToolConfig> {
        self.tools.iter().find(|t| t.name == name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_minimal_and_defaults() {
        let (c, w) = parse("tools: []\n", "c.yaml", &Environment::default()).unwrap();
        assert!(w.is_empty());
        assert!(c.read_before_write.enabled);
        assert_eq!(c.tool_search.auto_promote_top_k, 3);
        assert!(!c.is_host_bash_allowed(), "no sandbox section → no host bash");
    }

    #[test]
    fn bad_yaml_names_line_and_column() {
        let err = parse("tools:\n  - name: a\n    group: [\n", "c.yaml", &Environment::default()).unwrap_err();
        assert_eq!(err.file, "c.yaml");
        assert!(err.line >= 3, "{err}");
    }

    #[test]
    fn wrong_type_names_path_and_line() {
        let text = "tools:\n  - name: a\n    group: g\n    use: hello\n  - name: b\n    group: g\n    use: hello\n    capabilities:\n      memory_mb: lots\n";
        let err = parse(text, "c.yaml", &Environment::default()).unwrap_err();
        assert_eq!(err.line, 9, "{err}");
        assert!(err.message.contains("tools[1].capabilities.memory_mb"), "{err}");
        assert!(err.message.contains("expected an integer between 1 and 4096"), "{err}");
    }

    #[test]
    fn missing_required_key_is_named() {
        let err = parse("tools:\n  - name: a\n    use: hello\n", "c.yaml", &Environment::default()).unwrap_err();
        assert!(err.message.contains("group"), "{err}");
        assert!(err.line >= 2, "{err}");
    }

    #[test]
    fn out_of_range_limits_are_errors_with_line_and_column_the_same_in_check_and_load() {
        let cases = [
            ("timeout_s: 1e300", "timeout_s must be"),
            ("timeout_s: .nan", "timeout_s must be"),
            ("timeout_s: .inf", "timeout_s must be"),
            ("timeout_s: 0", "timeout_s must be"),
            ("timeout_s: -3", "timeout_s must be"),
            ("memory_mb: 0", "memory_mb must be between 1 and 4096"),
            ("memory_mb: 5000", "memory_mb must be between 1 and 4096"),
            ("output_bytes: 0", "output_bytes must be"),
            ("output_bytes: 99999999999999", "output_bytes must be"),
            ("handles: 3", "handles must be between 16 and 65536"),
            ("handles: 10000000", "handles must be between 16 and 65536"),
        ];
        for (value, expected) in cases {
            // Not the first key of its mapping: the error points at the value, not the mapping.
            let text = format!("tools:\n  - name: a\n    group: g\n    use: hello\n    capabilities:\n      filesystem: none\n      {value}\n");
            let load = parse(&text, "c.yaml", &Environment::default()).unwrap_err();
            let key = value.split(':').next().unwrap();
            assert_eq!((load.line, load.column), (7, 7 + key.len() + 2), "{value}: {load}");
            assert!(load.message.starts_with(&format!("tools[0].capabilities.{key}: {expected}")), "{value}: {load}");
            let check = validate(&text, "c.yaml", &Environment::default());
            assert_eq!(check.len(), 1, "{value}: {check:?}");
            assert_eq!(check[0].to_string(), load.to_string(), "{value}");
        }
        // In range, and in a flow mapping on one line: the column points at the value.
        let (c, _) = parse("tools:\n  - {name: a, group: g, use: hello, capabilities: {timeout_s: 0.5, memory_mb: 4096, handles: 16}}\n", "c", &Environment::default()).unwrap();
        assert_eq!(c.tools[0].capabilities.as_ref().unwrap().timeout_s, Some(0.5));
        let text = "tools:\n  - {name: a, group: g, use: hello, capabilities: {timeout_s: 1e300}}\n";
        let load = parse(text, "c.yaml", &Environment::default()).unwrap_err();
        assert_eq!((load.line, load.column), (2, 63), "{load}");
        assert_eq!(validate(text, "c.yaml", &Environment::default())[0].to_string(), load.to_string());
    }

    #[test]
    fn state_store_url_comes_from_the_environment_and_unknown_keys_are_errors() {
        let env = Environment::new([("PG_URL".to_string(), "postgres://t:pw@db:5432/threads".to_string())]);
        let (c, w) = parse("state_store:\n  url: $PG_URL\n", "c.yaml", &env).unwrap();
        assert!(w.is_empty(), "{w:?}");
        assert_eq!(
            c.state_store,
            Some(StateStoreConfig { url: "postgres://t:pw@db:5432/threads".into(), pool_size: 4 })
        );
        assert_eq!(parse("tools: []\n", "c.yaml", &env).unwrap().0.state_store, None);
        // An unset variable is "" with a warning; the store then refuses the empty URL by name.
        let (c, w) = parse("state_store: {url: $NOT_SET}\n", "c.yaml", &Environment::default()).unwrap();
        assert_eq!(c.state_store.as_ref().map(|s| s.url.as_str()), Some(""));
        assert!(w[0].contains("$NOT_SET"), "{w:?}");
        let e = crate::state_store::open_store(c.state_store.as_ref(), false).err().unwrap();
        assert!(e.to_string().starts_with("state_store.url: is empty"), "{e}");
        let e = parse("state_store:\n  uri: postgres://db/x\n", "c.yaml", &env).unwrap_err();
        assert!(e.message.contains("unknown field `uri`") && e.line == 2, "{e}");
        let e = parse("state_store:\n  pool_size: 2\n", "c.yaml", &env).unwrap_err();
        assert!(e.message.contains("missing field `url`"), "{e}");
    }

    #[test]
    fn toolhost_section_limits_are_checked() {
        let (c, _) =
            parse("toolhost:\n  concurrent_calls: 8\n  concurrent_calls_per_thread: 2\n", "c", &Environment::default())
                .unwrap();
        assert_eq!(
            c.toolhost,
            ToolhostConfig { concurrent_calls: 8, concurrent_calls_per_thread: 2, ..Default::default() }
        );
        let (c, _) = parse(
            "toolhost:\n  serve: {max_sessions: 5, session_idle_timeout_s: 9, thread_ttl_s: 0, sse_poll_after_s: 30}\n",
            "c",
            &Environment::default(),
        )
        .unwrap();
        assert_eq!((c.toolhost.serve.max_sessions, c.toolhost.serve.session_idle_timeout_s), (5, 9));
        assert_eq!(c.toolhost.serve.thread_ttl(), None);
        assert_eq!(c.toolhost.serve.sse_poll_after(), Some(std::time::Duration::from_secs(30)));
        assert_eq!(ToolhostConfig::default().serve.sse_poll_after(), None);
        let (c, _) = parse(
            "toolhost:\n  serve: {max_sessions: 8, max_sessions_per_client: 3, header_timeout_s: 4, body_timeout_s: 5, \
             max_connections: 64, max_connections_per_client: 9, reserved_connections: 10}\n",
            "c",
            &Environment::default(),
        )
        .unwrap();
        let serve = c.toolhost.serve;
        assert_eq!((serve.sessions_per_client(), serve.header_timeout_s, serve.body_timeout_s), (3, 4, 5));
        assert_eq!(
            (serve.max_connections, serve.max_connections_per_client, serve.reserved_connections),
            (64, Some(9), Some(10))
        );
        // Unset, the per-client session share is a quarter of max_sessions (at least 1).
        let quarter = |max_sessions| crate::ServeConfig { max_sessions, ..Default::default() }.sessions_per_client();
        assert_eq!((quarter(1000), quarter(10), quarter(1)), (250, 3, 1));
        assert_eq!(parse("tools: []\n", "c", &Environment::default()).unwrap().0.toolhost, ToolhostConfig::default());
        for (text, needle) in [
            (
                "toolhost:\n  concurrent_calls: 0\n",
                "toolhost.concurrent_calls: concurrent_calls must be between 1 and 128",
            ),
            (
                "toolhost:\n  concurrent_calls_per_thread: 100000\n",
                "toolhost.concurrent_calls_per_thread: concurrent_calls_per_thread must be",
            ),
            ("toolhost:\n  concurent_calls: 4\n", "unknown field `concurent_calls`"),
            ("toolhost:\n  serve: {max_sessions: 0}\n", "max_sessions must be between 1 and 1000000"),
            ("toolhost:\n  serve: {idle: 3}\n", "unknown field `idle`"),
            ("toolhost:\n  serve: {sse_poll_after_s: 90000}\n", "sse_poll_after_s must be between 0 and 86400"),
            ("toolhost:\n  serve: {header_timeout_s: 0}\n", "header_timeout_s must be between 1 and 600"),
            ("toolhost:\n  serve: {max_connections: 1}\n", "max_connections must be between 2 and 1000000"),
            (
                "toolhost:\n  serve: {max_sessions: 10, max_sessions_per_client: 11}\n",
                "max_sessions_per_client (11) must be at most max_sessions (10)",
            ),
            (
                "toolhost:\n  serve: {max_connections_per_client: 2000}\n",
                "max_connections_per_client (2000) must be at most max_connections (1024)",
            ),
            (
                "toolhost:\n  serve: {max_connections: 8, reserved_connections: 8}\n",
                "reserved_connections (8) must be at most max_connections (7) minus 1",
            ),
        ] {
            let load = parse(text, "c.yaml", &Environment::default()).unwrap_err();
            assert_eq!(load.line, 2, "{load}");
            assert!(load.message.contains(needle), "{load}");
            let check = validate(text, "c.yaml", &Environment::default());
            assert_eq!(check.len(), 1, "{check:?}");
            assert_eq!(check[0].to_string(), load.to_string());
        }
    }

    #[test]
    fn unknown_capability_key_is_an_error() {
        let err = parse(
            "tools:\n  - {name: a, group: g, use: hello, capabilities: {netwrok: [x]}}\n",
            "c.yaml",
            &Environment::default(),
        )
        .unwrap_err();
        assert!(err.message.contains("netwrok"), "{err}");
    }

    #[test]
    fn env_vars_expand_in_extra_keys() {
        let env = Environment::new([("TOOLHOST_TEST_KEY_1".to_string(), "s3cret".to_string())]);
        let (c, w) = parse("tools:\n  - {name: a, group: g, use: hello, api_key: $TOOLHOST_TEST_KEY_1, other: $TOOLHOST_UNSET_VAR_X}\n", "c.yaml", &env).unwrap();
        assert_eq!(c.tools[0].extra["api_key"], Value::String("s3cret".into()));
        assert_eq!(c.tools[0].extra["other"], Value::String(String::new()));
        assert_eq!(w.len(), 1);
        assert!(w[0].contains("TOOLHOST_UNSET_VAR_X"));
    }

    #[test]
    fn host_bash_gate() {
        let (c, _) =
            parse("sandbox: {use: deerflow.sandbox.local:LocalSandboxProvider}\n", "c", &Environment::default())
                .unwrap();
        assert!(!c.is_host_bash_allowed());
        let (c, _) = parse(
            "sandbox: {use: deerflow.sandbox.local:LocalSandboxProvider, allow_host_bash: true}\n",
            "c",
            &Environment::default(),
        )
        .unwrap();
        assert!(c.is_host_bash_allowed());
        let (c, _) =
            parse("sandbox: {use: deerflow.community.aio_sandbox:AioSandboxProvider}\n", "c", &Environment::default())
                .unwrap();
        assert!(c.is_host_bash_allowed());
        let (c, _) =
            parse("sandbox: {use: my.deerflow.sandbox.local.x:LocalSandboxProvider}\n", "c", &Environment::default())
                .unwrap();
        assert!(!c.is_host_bash_allowed());
    }

    #[test]
    fn loads_deerflow_example_config_unchanged() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/conformance/deerflow-configs/config.example.yaml");
        let loaded = load(&ConfigSource::File(std::path::PathBuf::from(path)), &Environment::default()).unwrap();
        assert_eq!(loaded.config.config_version, Some(34));
        assert!(loaded.config.tools.iter().any(|t| t.name == "read_file"));
    }
}

/// Check config text and report every problem found, not just the first: a syntax error stops
/// the check (nothing after it can be read), otherwise each section and each list entry is
/// checked on its own.
pub fn validate(text: &str, file: &str, env: &Environment) -> Vec<ConfigError> {
    let value: serde_yaml::Value = match serde_yaml::from_str(text) {
        Ok(v) => v,
        Err(e) => return vec![yaml_error(file, text, &e, None)],
    };
    let serde_yaml::Value::Mapping(map) = value else {
        if value.is_null() {
            return Vec::new();
        }
        return vec![ConfigError {
            file: file.into(),
            line: 1,
            column: 1,
            message: "the config must be a mapping of sections".into(),
        }];
    };
    let mut errors = Vec::new();
    // Errors name the full path (`tools[2].capabilities.timeout_s`) and its line, as the loader
    // does, so `check` and a host open report a bad value the same way.
    let mut check = |path: String, v: &serde_yaml::Value, f: Check| {
        let mut v = v.clone();
        expand_env(&mut v, env, &mut |_| {});
        if let Err((inner, message)) = f(v) {
            let full = match inner.as_str() {
                "" | "." => path,
                i if path.is_empty() => i.to_string(),
                i if i.starts_with('[') => format!("{path}{i}"),
                i => format!("{path}.{i}"),
            };
            let (line, column) = locate_path(text, &full);
            errors.push(ConfigError { file: file.into(), line, column, message: format!("{full}: {message}") });
        }
    };
    type Check<'a> = &'a dyn Fn(serde_yaml::Value) -> Result<(), (String, String)>;
    fn de<T: serde::de::DeserializeOwned>(v: serde_yaml::Value) -> Result<(), (String, String)> {
        serde_path_to_error::deserialize::<_, T>(v)
            .map(|_| ())
            .map_err(|e| (e.path().to_string(), e.inner().to_string()))
    }
    let get = |k: &str| map.get(serde_yaml::Value::String(k.into()));
    let list_section = |key: &str| -> Vec<(String, serde_yaml::Value)> {
        match get(key) {
            Some(serde_yaml::Value::Sequence(items)) => {
                items.iter().enumerate().map(|(i, v)| (format!("{key}[{i}]"), v.clone())).collect()
            }
            _ => Vec::new(),
        }
    };
    for key in ["tools", "tool_groups", "models"] {
        match get(key) {
            None | Some(serde_yaml::Value::Null) | Some(serde_yaml::Value::Sequence(_)) => {}
            Some(other) => check(key.into(), other, &|_| Err((String::new(), "expected a list".into()))),
        }
    }
    for (path, v) in list_section("tools") {
        check(path, &v, &de::<ToolConfig>);
    }
    for (path, v) in list_section("tool_groups") {
        check(path, &v, &de::<ToolGroupConfig>);
    }
    for (path, v) in list_section("models") {
        check(path, &v, &de::<ModelConfig>);
    }
    // Every other section through `AppConfig` itself, one at a time: the struct is the one list of
    // sections, and one bad section never hides another's error.
    for (k, v) in &map {
        if matches!(k.as_str(), Some("tools" | "tool_groups" | "models")) {
            continue;
        }
        let mut one = serde_yaml::Mapping::new();
        one.insert(k.clone(), v.clone());
        check(String::new(), &serde_yaml::Value::Mapping(one), &de::<AppConfig>);
    }
    // The loader stops at the first error and places it from the YAML parser's own marks, which
    // are exact where a path search is not (flow mappings): take its place for that error.
    if let Err(first) = parse(text, file, env) {
        if let Some(e) = errors.iter_mut().find(|e| e.message == first.message) {
            (e.line, e.column) = (first.line, first.column);
        }
    }
    errors
}

#[cfg(test)]
mod validate_tests {
    use super::*;

    #[test]
    fn reports_every_problem() {
        let text = "tools:\n  - name: a\n    use: hello\n  - name: b\n    group: g\n    use: hello\n  - name: c\n    group: [x]\n    use: hello\nsandbox:\n  allow_host_bash: maybe\n";
        let errs = validate(text, "c.yaml", &Environment::default());
        assert_eq!(errs.len(), 3, "{errs:?}");
        assert!(errs[0].message.contains("tools[0]") && errs[0].message.contains("group"), "{}", errs[0]);
        assert_eq!(errs[0].line, 2);
        assert!(errs[1].message.starts_with("tools[2].group: "), "{}", errs[1]);
        assert_eq!(errs[1].line, 8);
        assert!(errs[2].message.starts_with("sandbox.allow_host_bash: "), "{}", errs[2]);
        assert_eq!(errs[2].line, 11);
        assert!(validate("tools: []\n", "c", &Environment::default()).is_empty());
    }
}

#[cfg(test)]
mod bash_tests {
    use super::{parse, validate, BashNetworkConfig};

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
            BashNetworkConfig::Allowlist(g) => {
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
        assert_eq!(s.bash_network, BashNetworkConfig::None);
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
