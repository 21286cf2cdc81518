//! `McpManager`: the process-wide MCP tool cache (DeerFlow's `H/mcp/cache.py` + `tools.py`).
//! Discovers every enabled server in parallel, each bounded by its own `session_init_timeout`;
//! caches the result keyed by the config file's content hash; re-lists a server after it sends
//! `tools/list_changed`; keeps the last good tools when the file becomes unreadable.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use indexmap::IndexMap;
use tokio::sync::{watch, Mutex};

use crate::config::{self, ConfigError, ExtensionsConfig, LoadedConfig, McpServerConfig, Transport};
use crate::pool::ServerRuntime;
use crate::session::{ChangeSignal, ServerHandle};
use crate::tool::{exposed_name, invalid_name_warning, is_valid_tool_name, McpTool};
use toolhost_confine::process::{Launch, LaunchPolicy, LaunchRequest, ProcessKind};
use toolhost_core::Environment;

/// Where the manager gets its config.
#[derive(Clone)]
pub enum ConfigSource {
    /// One `extensions_config.json`, re-read on every [`McpManager::tools`] call; only a content
    /// change triggers rediscovery. (Finding the file the way DeerFlow does is
    /// [`config::deerflow_config_path`]'s job, done once by the caller.)
    File(PathBuf),
    /// A config built in code (tests, embedders).
    Fixed(ExtensionsConfig),
}

impl std::fmt::Debug for ConfigSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ConfigSource::File(path) => f.debug_tuple("File").field(path).finish(),
            ConfigSource::Fixed(c) => f.debug_tuple("Fixed").field(c).finish(),
        }
    }
}

/// What discovery found for one enabled server.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerReport {
    pub name: String,
    pub transport: Option<Transport>,
    /// Tools kept (after name validation).
    pub tools: usize,
    /// Why the server contributed no tools.
    pub error: Option<String>,
    /// Time from start of discovery until this server's tools were listed (or it failed).
    pub elapsed: Duration,
}

/// The MCP tool set at one moment.
#[derive(Debug, Clone, Default)]
pub struct McpTools {
    /// In config order of servers, then the server's own order.
    pub tools: Vec<Arc<McpTool>>,
    /// Human-readable warnings (dropped names, failed servers, ignored Python hooks).
    pub warnings: Vec<String>,
    pub servers: Vec<ServerReport>,
    pub config_path: Option<PathBuf>,
    /// sha256 of the config file's bytes (of `""` when there is no file).
    pub content_hash: String,
    /// The `skills` section (`{name: {enabled}}`), as written.
    pub skills: serde_json::Map<String, serde_json::Value>,
}

struct ServerState {
    /// `None` when the entry itself is unusable (no command, unknown transport, bad oauth).
    runtime: Option<Arc<ServerRuntime>>,
    tools: Vec<Arc<McpTool>>,
    warnings: Vec<String>,
    report: ServerReport,
}

struct Cache {
    key: (Option<PathBuf>, String),
    loaded: LoadedConfig,
    /// Enabled servers in config order.
    servers: IndexMap<String, ServerState>,
    config_warnings: Vec<String>,
}

/// The MCP layer's entry point. Cheap to share (`Arc<McpManager>`); all methods take `&self`.
pub struct McpManager {
    source: ConfigSource,
    signal: Arc<ChangeSignal>,
    cache: Mutex<Option<Cache>>,
    /// How stdio servers are started; `None`: as plain subprocesses (the crate on its own —
    /// the host always sets one).
    launch: Option<LaunchPolicy>,
    /// The environment: the config's `$VAR`s, the variables stdio servers inherit, a grant's
    /// pass-through names and the `PATH` a command is looked up in (default: empty).
    env: Environment,
}

impl McpManager {
    pub fn new(source: ConfigSource) -> Self {
        Self {
            source,
            signal: Arc::new(ChangeSignal::new()),
            cache: Mutex::new(None),
            launch: None,
            env: Environment::default(),
        }
    }

    /// Take variables from `env` (the host's [`Environment`]); the manager reads no process
    /// environment.
    pub fn with_env(mut self, env: Environment) -> Self {
        self.env = env;
        self
    }

    /// Start stdio servers as `policy` decides (confined, or refused with the reason).
    pub fn with_launch_policy(mut self, policy: LaunchPolicy) -> Self {
        self.launch = Some(policy);
        self
    }

    fn launch_for(&self, name: &str, entry: &McpServerConfig) -> Launch {
        match (&self.launch, entry.transport()) {
            (Some(policy), Ok(Transport::Stdio)) => policy(&LaunchRequest {
                kind: ProcessKind::McpServer,
                name,
                command: entry.command.as_deref().unwrap_or(""),
                args: &entry.args,
            }),
            _ => Launch::Unconfined,
        }
    }

    /// Shorthand for [`ConfigSource::File`] with `env`.
    pub fn from_file(path: PathBuf, env: Environment) -> Self {
        Self::new(ConfigSource::File(path)).with_env(env)
    }

    /// A counter that increases whenever a server reports `tools/list_changed` or the cache is
    /// rebuilt; the host can watch it to re-read [`McpManager::tools`] and tell its own clients.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.signal.subscribe()
    }

    /// The current MCP tools. The first call discovers every enabled server; later calls are
    /// served from the cache unless the config's content changed (full rediscovery, reusing the
    /// sessions of servers whose entry is unchanged) or a server sent `tools/list_changed`
    /// (that server is re-listed). A config that cannot be read or parsed is an error on the
    /// first call and a warning afterwards (the last good tools stay).
    pub async fn tools(&self) -> Result<McpTools, ConfigError> {
        let mut guard = self.cache.lock().await;
        let loaded = match self.read_config() {
            Ok(l) => l,
            Err(e) => match guard.as_ref() {
                Some(cache) => {
                    tracing::warn!("{e}; keeping the MCP tools loaded from the last good config");
                    let mut out = snapshot(cache);
                    out.warnings.push(format!("{e}; keeping the MCP tools loaded from the last good config"));
                    return Ok(out);
                }
                None => return Err(e),
            },
        };
        let key = (loaded.path.clone(), loaded.content_hash.clone());
        let stale = guard.as_ref().is_none_or(|c| c.key != key);
        if stale {
            let previous = guard.take();
            *guard = Some(self.rebuild(loaded, previous).await);
            self.signal.bump();
        } else if let Some(cache) = guard.as_mut() {
            let dirty = self.signal.take_dirty();
            let todo: Vec<Arc<ServerRuntime>> = cache
                .servers
                .iter()
                .filter(|(name, s)| dirty.contains(*name) && s.report.error.is_none())
                .filter_map(|(_, s)| s.runtime.clone())
                .collect();
            let started = Instant::now();
            let results = futures::future::join_all(todo.into_iter().map(|rt| discover(rt, started))).await;
            for state in results {
                cache.servers.insert(state.report.name.clone(), state);
            }
        }
        Ok(guard.as_ref().map(snapshot).unwrap_or_default())
    }

    /// Drop the cache and every session (DeerFlow's `POST /api/mcp/cache/reset`).
    pub async fn reset(&self) {
        if let Some(cache) = self.cache.lock().await.take() {
            for rt in cache.servers.values().filter_map(|s| s.runtime.as_ref()) {
                rt.close_all().await;
            }
        }
    }

    /// Close the stdio sessions a thread opened (its server processes exit).
    pub async fn close_thread(&self, thread_id: &str) {
        if let Some(cache) = self.cache.lock().await.as_ref() {
            for rt in cache.servers.values().filter_map(|s| s.runtime.as_ref()) {
                rt.close_thread(thread_id).await;
            }
        }
    }

    fn read_config(&self) -> Result<LoadedConfig, ConfigError> {
        match &self.source {
            ConfigSource::File(path) => config::load_file_with_env(path, &self.env),
            ConfigSource::Fixed(c) => {
                let bytes = serde_json::to_vec(c).unwrap_or_default();
                Ok(LoadedConfig {
                    path: None,
                    content_hash: config::hash_bytes(&bytes),
                    config: c.clone(),
                    warnings: Vec::new(),
                })
            }
        }
    }

    async fn rebuild(&self, loaded: LoadedConfig, previous: Option<Cache>) -> Cache {
        let mut config_warnings = Vec::new();
        for hook in &loaded.config.mcp_interceptors {
            config_warnings.push(format!("mcpInterceptors entry '{hook}' is a Python hook; toolhost does not run it"));
        }
        for hook in &loaded.config.middlewares {
            config_warnings.push(format!("middlewares entry '{hook}' is a Python hook; toolhost does not run it"));
        }
        for (name, _) in loaded.config.mcp_servers.iter().filter(|(_, e)| e.enabled && !e.task_toolsets.is_empty()) {
            config_warnings.push(format!(
                "MCP server '{name}': task_toolsets need DeerFlow's durable task runtime, which toolhost does not \
                 have; the tools are exposed as ordinary tools"
            ));
        }
        let mut old: HashMap<String, Arc<ServerRuntime>> = previous
            .map(|c| c.servers.into_iter().filter_map(|(name, s)| Some((name, s.runtime?))).collect())
            .unwrap_or_default();
        let started = Instant::now();
        let mut pending = Vec::new();
        let mut failed: IndexMap<String, ServerState> = IndexMap::new();
        for (name, entry) in loaded.config.mcp_servers.iter().filter(|(_, e)| e.enabled) {
            if let Some(me) = runs_this_binary(entry, self.env.get("PATH").as_deref()) {
                let reason = format!(
                    "its command is this toolhost ({}); serving it would start toolhost inside itself, again and \
                     again. Remove it from extensions_config.json (or point toolhost at another one with --extensions)",
                    me.display()
                );
                failed.insert(name.clone(), unusable(name, entry, reason));
                continue;
            }
            let runtime = match old.remove(name).filter(|rt| rt.config() == entry) {
                Some(rt) => rt,
                None => match ServerHandle::new(
                    name,
                    entry.clone(),
                    self.signal.clone(),
                    self.launch_for(name, entry),
                    self.env.clone(),
                ) {
                    Ok(handle) => Arc::new(ServerRuntime::new(handle)),
                    Err(e) => {
                        failed.insert(name.clone(), unusable(name, entry, e.to_string()));
                        continue;
                    }
                },
            };
            pending.push(discover(runtime, started));
        }
        // Sessions of removed or changed servers close here (their processes exit).
        for rt in old.values() {
            rt.close_all().await;
        }
        let mut found: HashMap<String, ServerState> =
            futures::future::join_all(pending).await.into_iter().map(|s| (s.report.name.clone(), s)).collect();
        let mut servers = IndexMap::new();
        for name in loaded.config.mcp_servers.iter().filter(|(_, e)| e.enabled).map(|(n, _)| n) {
            if let Some(s) = found.remove(name).or_else(|| failed.shift_remove(name)) {
                servers.insert(name.clone(), s);
            }
        }
        for w in &config_warnings {
            tracing::warn!("{w}");
        }
        Cache { key: (loaded.path.clone(), loaded.content_hash.clone()), loaded, servers, config_warnings }
    }
}

/// Set when this process's binary is not toolhost but a program that embeds the library (the
/// Python package: the binary is the Python interpreter, which stdio MCP servers very often
/// are). Then a server whose command is this binary is not toolhost starting itself.
static EMBEDDED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Say that this process's binary is a program embedding toolhost, not toolhost itself (see
/// [`runs_this_binary`]). Called once by such a program (the Python extension, on import).
pub fn embedded_in_another_program() {
    EMBEDDED.store(true, std::sync::atomic::Ordering::Relaxed);
}

/// The path of this process's binary when a stdio server's command is that same file (by
/// path, through links, or as a hard link): toolhost must never serve itself. Never, when the
/// binary is a program that embeds toolhost ([`embedded_in_another_program`]). A bare command is
/// looked up in the entry's own `PATH`, else `path` (the host environment's).
pub fn runs_this_binary(entry: &McpServerConfig, path: Option<&str>) -> Option<std::path::PathBuf> {
    use std::os::unix::fs::MetadataExt as _;
    if EMBEDDED.load(std::sync::atomic::Ordering::Relaxed) || !matches!(entry.transport(), Ok(Transport::Stdio)) {
        return None;
    }
    let command = entry.command.as_deref().filter(|c| !c.is_empty())?;
    let resolved = if command.contains('/') {
        std::path::PathBuf::from(command)
    } else {
        // Looked up the way the child's spawn will: its own PATH when the entry sets one.
        let path = entry.env.get("PATH").map(String::as_str).or(path)?;
        std::env::split_paths(&path).map(|dir| dir.join(command)).find(|p| p.is_file())?
    };
    let me = std::env::current_exe().ok()?;
    let (a, b) = (std::fs::metadata(&resolved).ok()?, std::fs::metadata(&me).ok()?);
    (a.dev() == b.dev() && a.ino() == b.ino()).then_some(me)
}

fn unusable(name: &str, entry: &McpServerConfig, reason: String) -> ServerState {
    let warning = format!("MCP server '{name}' skipped: {reason}");
    tracing::warn!("{warning}");
    ServerState {
        runtime: None,
        tools: Vec::new(),
        warnings: vec![warning],
        report: ServerReport {
            name: name.to_string(),
            transport: entry.transport().ok(),
            tools: 0,
            error: Some(reason),
            elapsed: Duration::ZERO,
        },
    }
}

/// Connect (or reuse the server-wide session) and list every page of tools, all within the
/// server's `session_init_timeout`. Never fails: a broken server yields no tools and a warning.
async fn discover(runtime: Arc<ServerRuntime>, started: Instant) -> ServerState {
    let name = runtime.name().to_string();
    let secs = runtime.config().session_init_timeout;
    let attempt = async {
        let session = runtime.session(None, None, false).await.map_err(|e| e.to_string())?;
        match session.service.peer().list_all_tools().await {
            Ok(tools) => Ok((tools, session.exact.clone())),
            Err(e) => {
                let note = session.stderr_note();
                runtime.forget(None, &session).await;
                Err(format!("tools/list failed: {e}{note}"))
            }
        }
    };
    let listed = match tokio::time::timeout(Duration::from_secs_f64(secs), attempt).await {
        Ok(r) => r,
        Err(_) => Err(format!("no tools within session_init_timeout ({secs} s)")),
    };
    let elapsed = started.elapsed();
    let transport = Some(runtime.transport());
    match listed {
        Ok((listed, exact)) => {
            let mut tools = Vec::new();
            let mut warnings = Vec::new();
            let prefix = runtime.config().tool_name_prefix;
            for tool in listed {
                let exposed = exposed_name(&name, &tool.name, prefix);
                if !is_valid_tool_name(&exposed) {
                    let w = invalid_name_warning(&name, &exposed);
                    tracing::warn!("{w}");
                    warnings.push(w);
                    continue;
                }
                let exact_schema = exact.as_ref().and_then(|e| e.get(&tool.name, &tool.input_schema));
                tools.push(Arc::new(McpTool::new(runtime.clone(), tool, exposed, exact_schema)));
            }
            tracing::info!(server = %name, tools = tools.len(), ?elapsed, "MCP server discovered");
            let report = ServerReport { name, transport, tools: tools.len(), error: None, elapsed };
            ServerState { runtime: Some(runtime), tools, warnings, report }
        }
        Err(reason) => {
            let warning = format!("MCP server '{name}' contributed no tools: {reason}");
            tracing::warn!("{warning}");
            let report = ServerReport { name, transport, tools: 0, error: Some(reason), elapsed };
            ServerState { runtime: Some(runtime), tools: Vec::new(), warnings: vec![warning], report }
        }
    }
}

fn snapshot(cache: &Cache) -> McpTools {
    let mut out = McpTools {
        config_path: cache.loaded.path.clone(),
        content_hash: cache.loaded.content_hash.clone(),
        skills: cache.loaded.config.skills.clone(),
        warnings: cache.config_warnings.clone(),
        ..McpTools::default()
    };
    for s in cache.servers.values() {
        out.tools.extend(s.tools.iter().cloned());
        out.warnings.extend(s.warnings.iter().cloned());
        out.servers.push(s.report.clone());
    }
    out
}
