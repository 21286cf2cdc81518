//! `extensions_config.json` as DeerFlow reads it: where the file is found, `$VAR` expansion, and
//! the typed `mcpServers` / `skills` sections. Loading never contacts a server; per-server
//! problems a server can be skipped for (unknown transport, missing command) are left to discovery
//! so that one bad entry never hides the others.

use std::path::{Path, PathBuf};

use indexmap::IndexMap;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};
use toolhost_core::Environment;

/// Environment variable naming the config file explicitly (DeerFlow's).
pub const CONFIG_PATH_ENV: &str = "DEER_FLOW_EXTENSIONS_CONFIG_PATH";
/// File names searched, in order, in the project directory.
pub const DEFAULT_FILE_NAMES: [&str; 2] = ["extensions_config.json", "mcp_config.json"];

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("extensions config {path} does not exist ({origin})")]
    NotFound { path: PathBuf, origin: &'static str },
    #[error("cannot read extensions config {path}: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    #[error("invalid extensions config {path}: {message}")]
    Invalid { path: PathBuf, message: String },
}

/// The whole file. Unknown top-level keys are accepted and ignored, as DeerFlow does.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExtensionsConfig {
    /// Python `module:Class` paths; toolhost cannot run them (reported as warnings by the manager).
    #[serde(default)]
    pub middlewares: Vec<String>,
    /// Python `module:builder` paths; likewise not runnable here.
    #[serde(default)]
    pub mcp_interceptors: Vec<String>,
    #[serde(default)]
    pub mcp_servers: IndexMap<String, McpServerConfig>,
    /// The `skills` section (`{name: {enabled}}`), as written: its meaning (DeerFlow's lax
    /// booleans, a malformed entry disabling every public skill) belongs to `toolhost-skills`
    /// (`PublicSkillStates::from_extensions_skills`), so this crate does not interpret it.
    #[serde(default)]
    pub skills: serde_json::Map<String, serde_json::Value>,
}

fn yes() -> bool {
    true
}

fn default_init_timeout() -> f64 {
    60.0
}

/// One `mcpServers` entry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct McpServerConfig {
    #[serde(default = "yes")]
    pub enabled: bool,
    /// `stdio`, `http` or `sse`; `transport` is DeerFlow's alias. Kept as a string so that an
    /// unknown value skips only this server (see [`McpServerConfig::transport`]).
    #[serde(default, rename = "type", alias = "transport")]
    pub transport_type: Option<String>,
    #[serde(default)]
    pub command: Option<String>,
    #[serde(default)]
    pub args: Vec<String>,
    #[serde(default)]
    pub env: IndexMap<String, String>,
    #[serde(default)]
    pub url: Option<String>,
    #[serde(default)]
    pub headers: IndexMap<String, String>,
    #[serde(default)]
    pub oauth: Option<OAuthConfig>,
    #[serde(default)]
    pub description: String,
    #[serde(default = "yes")]
    pub tool_name_prefix: bool,
    /// Seconds; `None` = no deadline (DeerFlow's default).
    #[serde(default)]
    pub tool_call_timeout: Option<f64>,
    /// Seconds allowed for connect + initialize + listing tools.
    #[serde(default = "default_init_timeout")]
    pub session_init_timeout: f64,
    #[serde(default)]
    pub routing: Option<RoutingConfig>,
    #[serde(default)]
    pub tools: IndexMap<String, ToolOverride>,
    /// Parsed so that DeerFlow files load; the durable task runtime is not part of toolhost.
    #[serde(default)]
    pub task_toolsets: Vec<TaskToolset>,
}

/// The transport a server entry asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    Stdio,
    Http,
    Sse,
}

impl McpServerConfig {
    /// The transport, or a message saying why the entry cannot be used.
    pub fn transport(&self) -> Result<Transport, String> {
        match self.transport_type.as_deref().unwrap_or("stdio") {
            "stdio" => Ok(Transport::Stdio),
            "http" => Ok(Transport::Http),
            "sse" => Ok(Transport::Sse),
            other => Err(format!("unsupported transport type {other:?} (expected stdio, http or sse)")),
        }
    }

    /// The effective routing of one tool: the server's routing with the fields the tool entry
    /// sets explicitly laid over it. `None` when routing is off.
    pub fn effective_routing(&self, original_tool_name: &str) -> Option<Routing> {
        let tool = self.tools.get(original_tool_name).and_then(|t| t.routing.as_ref());
        let base = self.routing.as_ref();
        if base.is_none() && tool.is_none() {
            return None;
        }
        let mode = tool.and_then(|r| r.mode).or_else(|| base.and_then(|r| r.mode)).unwrap_or(RoutingMode::Off);
        if mode == RoutingMode::Off {
            return None;
        }
        let priority = tool.and_then(|r| r.priority).or_else(|| base.and_then(|r| r.priority)).unwrap_or(0);
        let keywords =
            tool.and_then(|r| r.keywords.clone()).or_else(|| base.and_then(|r| r.keywords.clone())).unwrap_or_default();
        Some(Routing { mode, priority: priority.clamp(0, 100), keywords })
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OAuthConfig {
    #[serde(default = "yes")]
    pub enabled: bool,
    pub token_url: String,
    #[serde(default = "default_grant")]
    pub grant_type: String,
    #[serde(default)]
    pub client_id: Option<String>,
    #[serde(default)]
    pub client_secret: Option<String>,
    #[serde(default)]
    pub refresh_token: Option<String>,
    #[serde(default)]
    pub scope: Option<String>,
    #[serde(default)]
    pub audience: Option<String>,
    #[serde(default = "default_token_field")]
    pub token_field: String,
    #[serde(default = "default_token_type_field")]
    pub token_type_field: String,
    #[serde(default = "default_expires_in_field")]
    pub expires_in_field: String,
    #[serde(default = "default_token_type")]
    pub default_token_type: String,
    #[serde(default = "default_skew")]
    pub refresh_skew_seconds: u64,
    #[serde(default)]
    pub extra_token_params: IndexMap<String, String>,
}

fn default_grant() -> String {
    "client_credentials".into()
}
fn default_token_field() -> String {
    "access_token".into()
}
fn default_token_type_field() -> String {
    "token_type".into()
}
fn default_expires_in_field() -> String {
    "expires_in".into()
}
fn default_token_type() -> String {
    "Bearer".into()
}
fn default_skew() -> u64 {
    60
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RoutingMode {
    Off,
    Prefer,
}

/// `routing` as written; unset fields inherit (tool over server). Extra keys are an error, as in
/// DeerFlow's pydantic model (`extra="forbid"`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RoutingConfig {
    #[serde(default)]
    pub mode: Option<RoutingMode>,
    #[serde(default)]
    pub priority: Option<i64>,
    #[serde(default)]
    pub keywords: Option<Vec<String>>,
}

/// Effective routing attached to a tool (DeerFlow's `metadata["deerflow_mcp_routing"]`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Routing {
    pub mode: RoutingMode,
    pub priority: i64,
    pub keywords: Vec<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ToolOverride {
    #[serde(default)]
    pub routing: Option<RoutingConfig>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskToolset {
    pub name: String,
    pub submit_tool: String,
    pub status_tool: String,
    pub cancel_tool: String,
}

/// A config file as read: its path, the sha256 of its bytes (the cache key) and the parsed value.
#[derive(Debug, Clone)]
pub struct LoadedConfig {
    pub path: Option<PathBuf>,
    pub content_hash: String,
    pub config: ExtensionsConfig,
    /// One warning per `$VAR` the environment does not set (it became `""`), as the config's.
    pub warnings: Vec<String>,
}

/// Find the config file: `explicit`, else `$DEER_FLOW_EXTENSIONS_CONFIG_PATH`, else the default
/// names in `project_dir`. An explicit path (argument or env var) that does not exist is an
/// error; nothing found by the search is `Ok(None)` (an empty config).
///
/// `env_path` is the value of `$DEER_FLOW_EXTENSIONS_CONFIG_PATH` ([`CONFIG_PATH_ENV`]), which
/// the caller reads (the library reads no environment of its own accord).
pub fn deerflow_config_path(
    explicit: Option<&Path>,
    env_path: Option<PathBuf>,
    project_dir: &Path,
) -> Result<Option<PathBuf>, ConfigError> {
    if let Some(path) = explicit {
        return if path.is_file() {
            Ok(Some(path.to_path_buf()))
        } else {
            Err(ConfigError::NotFound { path: path.to_path_buf(), origin: "given explicitly" })
        };
    }
    if let Some(path) = env_path.filter(|p| !p.as_os_str().is_empty()) {
        return if path.is_file() {
            Ok(Some(path))
        } else {
            Err(ConfigError::NotFound { path, origin: "from DEER_FLOW_EXTENSIONS_CONFIG_PATH" })
        };
    }
    Ok(DEFAULT_FILE_NAMES.iter().map(|name| project_dir.join(name)).find(|p| p.is_file()))
}

/// Locate and load the config. `Ok` with an empty config and no path when no file was found.
/// Read and parse one file, with `$VAR` values looked up in `env`.
pub fn load_file_with_env(path: &Path, env: &Environment) -> Result<LoadedConfig, ConfigError> {
    if !path.exists() {
        return Err(ConfigError::NotFound { path: path.to_path_buf(), origin: "given explicitly" });
    }
    let bytes = std::fs::read(path).map_err(|source| ConfigError::Read { path: path.to_path_buf(), source })?;
    let mut warnings = Vec::new();
    let config = parse_with_env(&bytes, env, &mut |name| {
        warnings.push(format!("{}: environment variable ${name} is not set; using \"\"", path.display()))
    })
    .map_err(|message| ConfigError::Invalid { path: path.to_path_buf(), message })?;
    Ok(LoadedConfig { path: Some(path.to_path_buf()), content_hash: hash_bytes(&bytes), config, warnings })
}

/// Parse file bytes: JSON, then `$VAR` expansion over `env` ([`Environment::expand`]; `unset`
/// hears each variable not set), then the typed model. The error is a message naming the
/// offending field (`mcpServers.x.routing: unknown field ...`).
pub fn parse_with_env(
    bytes: &[u8],
    env: &Environment,
    unset: &mut dyn FnMut(&str),
) -> Result<ExtensionsConfig, String> {
    let mut value: Value = serde_json::from_slice(bytes).map_err(|e| format!("not valid JSON: {e}"))?;
    if !value.is_object() {
        return Err("the top level must be a JSON object".into());
    }
    env.expand_json(&mut value, unset);
    from_value(value)
}

fn from_value(value: Value) -> Result<ExtensionsConfig, String> {
    // Parse server by server so the error names the server and the field.
    let mut root = match value {
        Value::Object(map) => map,
        _ => return Err("the top level must be a JSON object".into()),
    };
    let servers = root.remove("mcpServers");
    let mut config: ExtensionsConfig = serde_json::from_value(Value::Object(root)).map_err(|e| e.to_string())?;
    match servers {
        None | Some(Value::Null) => {}
        Some(Value::Object(servers)) => {
            for (name, entry) in servers {
                let server: McpServerConfig =
                    serde_json::from_value(entry).map_err(|e| format!("mcpServers.{name}: {e}"))?;
                if !(server.session_init_timeout > 0.0 && server.session_init_timeout.is_finite()) {
                    return Err(format!("mcpServers.{name}.session_init_timeout: must be a positive number"));
                }
                if let Some(t) = server.tool_call_timeout {
                    if !(t > 0.0 && t.is_finite()) {
                        return Err(format!("mcpServers.{name}.tool_call_timeout: must be a positive number"));
                    }
                }
                config.mcp_servers.insert(name, server);
            }
        }
        Some(_) => return Err("mcpServers: must be an object mapping server names to entries".into()),
    }
    Ok(config)
}

pub(crate) fn hash_bytes(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const EXAMPLE: &str =
        concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/conformance/deerflow-configs/extensions_config.example.json");

    #[test]
    fn loads_deerflow_example_unchanged() {
        let loaded = load_file_with_env(Path::new(EXAMPLE), &Environment::default()).expect("example loads");
        let c = &loaded.config;
        assert_eq!(c.mcp_interceptors, vec!["my_package.mcp.auth:build_auth_interceptor".to_string()]);
        let names: Vec<_> = c.mcp_servers.keys().cloned().collect();
        assert_eq!(names, ["github", "openviking", "postgres", "long-running-reports"]);
        let gh = &c.mcp_servers["github"];
        assert!(!gh.enabled);
        assert_eq!(gh.transport(), Ok(Transport::Stdio));
        assert_eq!(gh.command.as_deref(), Some("npx"));
        assert_eq!(gh.tool_call_timeout, Some(60.0));
        assert_eq!(c.mcp_servers["openviking"].transport(), Ok(Transport::Http));
        let pg = &c.mcp_servers["postgres"];
        let r = pg.effective_routing("query").expect("routing on");
        assert_eq!((r.mode, r.priority), (RoutingMode::Prefer, 100));
        assert_eq!(r.keywords, ["查库", "订单表", "指标"]);
        let r = pg.effective_routing("other").expect("server routing");
        assert_eq!(r.priority, 50);
        assert_eq!(c.mcp_servers["long-running-reports"].task_toolsets[0].submit_tool, "submit_report");
        assert_eq!(loaded.content_hash.len(), 64);
    }

    #[test]
    fn dollar_strings_expand_from_env_and_unset_is_empty_with_a_warning() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("extensions_config.json");
        let doc =
            json!({"mcpServers": {"s": {"command": "$CMD_X", "args": ["$MISSING", "a$B"], "env": {"$KEY": "$CMD_X"}}}});
        std::fs::write(&path, doc.to_string()).unwrap();
        let loaded = load_file_with_env(&path, &Environment::new([("CMD_X", "/h")])).unwrap();
        let s = &loaded.config.mcp_servers["s"];
        assert_eq!(
            (s.command.as_deref(), s.args.as_slice()),
            (Some("/h"), ["".to_string(), "a$B".to_string()].as_slice())
        );
        assert_eq!(s.env.get("$KEY").map(String::as_str), Some("/h"));
        assert_eq!(loaded.warnings.len(), 1, "{:?}", loaded.warnings);
        assert!(loaded.warnings[0].contains("$MISSING is not set"), "{:?}", loaded.warnings);
    }

    #[test]
    fn routing_rejects_extra_keys_and_names_the_server() {
        let err = parse(br#"{"mcpServers": {"s": {"command": "x", "routing": {"mode": "prefer", "weight": 1}}}}"#)
            .unwrap_err();
        assert!(err.starts_with("mcpServers.s:"), "{err}");
        assert!(err.contains("weight"), "{err}");
    }

    #[test]
    fn tool_routing_overrides_only_fields_it_sets_and_priority_is_clamped() {
        let c = parse(
            br#"{"mcpServers": {"s": {"command": "x",
                "routing": {"mode": "prefer", "priority": 500, "keywords": ["a"]},
                "tools": {"t": {"routing": {"keywords": ["b"]}}, "off": {"routing": {"mode": "off"}}}}}}"#,
        )
        .unwrap();
        let s = &c.mcp_servers["s"];
        assert_eq!(
            s.effective_routing("t"),
            Some(Routing { mode: RoutingMode::Prefer, priority: 100, keywords: vec!["b".into()] })
        );
        assert_eq!(s.effective_routing("off"), None);
        assert_eq!(s.effective_routing("u").map(|r| r.keywords), Some(vec!["a".to_string()]));
    }

    #[test]
    fn transport_alias_defaults_and_unknown() {
        let c = parse(
            br#"{"mcpServers": {"a": {"transport": "sse", "url": "http://x"}, "b": {"command": "c"},
                "c": {"type": "websocket"}}}"#,
        )
        .unwrap();
        assert_eq!(c.mcp_servers["a"].transport(), Ok(Transport::Sse));
        assert_eq!(c.mcp_servers["b"].transport(), Ok(Transport::Stdio));
        assert!(c.mcp_servers["b"].enabled && c.mcp_servers["b"].tool_name_prefix);
        assert_eq!(c.mcp_servers["b"].session_init_timeout, 60.0);
        assert!(c.mcp_servers["c"].transport().unwrap_err().contains("websocket"));
    }

    fn parse(bytes: &[u8]) -> Result<ExtensionsConfig, String> {
        parse_with_env(bytes, &Environment::default(), &mut |_| {})
    }

    #[test]
    fn bad_values_name_the_field() {
        assert!(parse(b"[1]").unwrap_err().contains("object"));
        assert!(parse(b"{").unwrap_err().contains("not valid JSON"));
        let e = parse(br#"{"mcpServers": {"s": {"args": "x"}}}"#).unwrap_err();
        assert!(e.starts_with("mcpServers.s:"), "{e}");
        let e = parse(br#"{"mcpServers": {"s": {"session_init_timeout": 0}}}"#).unwrap_err();
        assert!(e.contains("mcpServers.s.session_init_timeout"), "{e}");
        // `skills` is kept as written; its meaning (and this entry's refusal) is toolhost-skills'
        // (`PublicSkillStates::from_extensions_skills`).
        let c = parse(br#"{"skills": {"x": {"enabled": "maybe"}}}"#).unwrap();
        assert_eq!(c.skills["x"]["enabled"], "maybe");
    }

    #[test]
    fn location_rules() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("nope.json");
        // Nothing found by search: empty config.
        assert_eq!(deerflow_config_path(None, None, dir.path()).unwrap(), None);
        // Explicit but missing: error naming the file.
        let err = deerflow_config_path(Some(&missing), None, dir.path()).unwrap_err();
        assert!(err.to_string().contains("nope.json"), "{err}");
        let err = deerflow_config_path(None, Some(missing.clone()), dir.path()).unwrap_err();
        assert!(err.to_string().contains("DEER_FLOW_EXTENSIONS_CONFIG_PATH"), "{err}");
        // mcp_config.json is found; extensions_config.json wins over it.
        std::fs::write(dir.path().join("mcp_config.json"), "{}").unwrap();
        assert_eq!(deerflow_config_path(None, None, dir.path()).unwrap(), Some(dir.path().join("mcp_config.json")));
        std::fs::write(dir.path().join("extensions_config.json"), "{}").unwrap();
        assert_eq!(
            deerflow_config_path(None, None, dir.path()).unwrap(),
            Some(dir.path().join("extensions_config.json"))
        );
        // The env var beats the search.
        let other = dir.path().join("other.json");
        std::fs::write(&other, "{}").unwrap();
        assert_eq!(deerflow_config_path(None, Some(other.clone()), dir.path()).unwrap(), Some(other));
        assert_eq!(deerflow_config_path(None, None, &dir.path().join("sub")).unwrap(), None);
    }

    #[test]
    fn invalid_file_error_names_path() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("extensions_config.json");
        std::fs::write(&p, r#"{"mcpServers": {"s": {"routing": {"bogus": 1}}}}"#).unwrap();
        let err = load_file_with_env(&p, &Environment::default()).unwrap_err().to_string();
        assert!(
            err.contains("extensions_config.json") && err.contains("mcpServers.s") && err.contains("bogus"),
            "{err}"
        );
    }
}
