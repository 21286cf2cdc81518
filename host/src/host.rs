//! The host: a loaded config, the runtime with its components, the assembled layers, the
//! pipeline and thread state. What the CLI and embedders call.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use serde_json::{Map, Value};
use toolhost_core::{
    CallContext, SharedDir, SharedRoots, ThreadFs, ThreadPaths, Threads, Tool, ToolOutcome, ToolSource, ToolSpec,
    VIRTUAL_SKILLS,
};

use crate::assembly::{
    get_available_tools, Assembly, AssemblyFacts, AssemblyRequest, Builtin, ConfigEntry, ConfigEntryState, ToolLayer,
};
use crate::config::{self, AppConfig, CapabilitiesConfig, LoadedConfig, ResolvedUse, ToolConfig};
use crate::middleware::{Pipeline, ToolRequest};
use crate::runtime::{CapabilitySet, ComponentRef, ConcurrencyLimits, FilesGrant, Runtime, RuntimeOptions};
use crate::state_store::{StateError, ThreadStore};
use crate::tools::component::ComponentTool;

/// How to open a host.
#[derive(Debug, Clone)]
pub struct HostOptions {
    pub config_path: PathBuf,
    /// `$TOOLHOST_HOME`, else `./.toolhost`.
    pub data_dir: PathBuf,
    /// Keep thread state on disk between processes (the CLI does).
    pub persist_state: bool,
    /// Precompiled artifacts; `None`: `<data_dir>/cache`.
    pub cache_dir: Option<PathBuf>,
    /// `extensions_config.json`; `None`: DeerFlow's search (`DEER_FLOW_EXTENSIONS_CONFIG_PATH`,
    /// then `extensions_config.json` / `mcp_config.json` beside config.yaml).
    pub extensions_path: Option<PathBuf>,
    /// A PEM file of CA certificates that components' outbound HTTPS trusts besides the web PKI
    /// roots (a private CA, a TLS-inspecting proxy). `new` reads `TOOLHOST_EXTRA_CA_CERTS`.
    pub extra_ca_certs: Option<PathBuf>,
    /// `write_file`'s cap on a single non-append write: DeerFlow's `DEERFLOW_WRITE_FILE_MAX_BYTES`,
    /// as its text (`"100000"`, `" 2000 "`, `"0"`). The file tool reads it as DeerFlow does —
    /// Python's `int()`; `<= 0` disables the guard; text that is not an integer, or `None`, gives
    /// DeerFlow's default of 80 KiB. Kept as text so a value reaches the tool exactly as DeerFlow
    /// would see it in its environment. The library reads no environment for it; the CLI fills
    /// it from `DEERFLOW_WRITE_FILE_MAX_BYTES`.
    pub write_file_max_bytes: Option<String>,
}

impl HostOptions {
    pub fn new(config_path: impl Into<PathBuf>) -> Self {
        Self {
            config_path: config_path.into(),
            data_dir: default_data_dir(),
            persist_state: false,
            cache_dir: None,
            extensions_path: None,
            extra_ca_certs: extra_ca_certs_from_env(),
            write_file_max_bytes: None,
        }
    }
}

/// `TOOLHOST_EXTRA_CA_CERTS`, when set and not empty.
pub fn extra_ca_certs_from_env() -> Option<PathBuf> {
    std::env::var_os("TOOLHOST_EXTRA_CA_CERTS").filter(|v| !v.is_empty()).map(PathBuf::from)
}

/// `$TOOLHOST_HOME`, else `./.toolhost`.
pub fn default_data_dir() -> PathBuf {
    std::env::var_os("TOOLHOST_HOME").map(PathBuf::from).unwrap_or_else(|| PathBuf::from(".toolhost"))
}

#[derive(Debug, thiserror::Error)]
pub enum HostError {
    #[error(transparent)]
    Config(#[from] config::ConfigLoadError),
    #[error("cannot start the wasm runtime: {0}")]
    Runtime(String),
    #[error(transparent)]
    Paths(#[from] toolhost_core::paths::PathsError),
    #[error(transparent)]
    ThreadFs(#[from] toolhost_core::ThreadFsError),
    #[error(transparent)]
    State(#[from] StateError),
}

/// A problem found while building the host from config: the entry and what is wrong.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Problem {
    pub severity: Severity,
    pub message: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Error,
    Warning,
}

/// The result of one call through the pipeline.
#[derive(Debug, Clone, serde::Serialize)]
pub struct CallResult {
    pub outcome: ToolOutcome,
    /// Reducer errors for this call's update (DeerFlow raises them; the update is not applied).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub state_errors: Vec<String>,
}

pub struct Toolhost {
    config: LoadedConfig,
    runtime: Arc<Runtime>,
    data_dir: PathBuf,
    entries: Vec<ConfigEntry>,
    builtins: Vec<Builtin>,
    layers: Vec<Arc<dyn ToolLayer>>,
    pipeline: Pipeline,
    /// Every thread's files, through the thread filesystem layer.
    threads: Threads,
    states: ThreadStore,
    problems: Vec<Problem>,
    /// What host bash's commands get, line by line (when a config entry offers host bash).
    host_bash: Option<Vec<String>>,
    call_seq: AtomicU64,
    /// Assemblies by request, with the layer generation they were built at.
    assemblies: std::sync::Mutex<std::collections::HashMap<String, (u64, Arc<Assembly>)>>,
}

impl Toolhost {
    /// Load the config, start the runtime, load every component the config names.
    pub fn open(opts: HostOptions) -> Result<Self, HostError> {
        let config = config::load(&opts.config_path)?;
        let cache_dir = opts.cache_dir.clone().unwrap_or_else(|| opts.data_dir.join("cache"));
        let t = &config.config.toolhost;
        let runtime = Runtime::with_options(RuntimeOptions {
            cache_dir: Some(cache_dir),
            extra_ca_certs: opts.extra_ca_certs.clone(),
            concurrency: ConcurrencyLimits { global: t.concurrent_calls, per_thread: t.concurrent_calls_per_thread },
        })
        .map_err(|e| HostError::Runtime(format!("{e:#}")))?;
        Self::with_runtime(config, runtime, opts)
    }

    /// Build from an already loaded config and runtime (tests, embedders sharing one engine).
    pub fn with_runtime(config: LoadedConfig, runtime: Arc<Runtime>, opts: HostOptions) -> Result<Self, HostError> {
        let mut problems: Vec<Problem> =
            config.warnings.iter().map(|w| Problem { severity: Severity::Warning, message: w.clone() }).collect();
        let shared = Arc::new(shared_roots(&config.config, &config.base_dir(), &mut problems));
        let base = config.base_dir();
        let extensions = crate::wiring::extensions(&opts, &base, &mut problems);
        let skills = crate::wiring::skill_store(&config.config, &shared);
        let public_skills = crate::wiring::public_skill_states(extensions.as_ref());
        let disabled_skills = crate::wiring::disabled_skill_dirs(&skills, &public_skills, &mut problems);
        let sandbox_json =
            sandbox_json(&config.config, &shared, &disabled_skills, opts.write_file_max_bytes.as_deref());
        let mut entries = Vec::new();
        let mut host_bash = None;
        for (i, tc) in config.config.tools.iter().enumerate() {
            let mut grants = None;
            let mut bash = None;
            let state =
                build_entry(tc, &config, &runtime, &shared, &sandbox_json, extensions.as_ref(), &mut grants, &mut bash);
            if let Some(bash) = bash {
                if let Some(w) = &bash.warning {
                    problems.push(Problem {
                        severity: Severity::Warning,
                        message: format!("tools[{i}] '{}': {w}", tc.name),
                    });
                }
                host_bash.get_or_insert(bash.report);
            }
            match &state {
                ConfigEntryState::Failed(why) => {
                    let (line, col) = config::locate_path(&std::fs::read_to_string(&config.path).unwrap_or_default(), &format!("tools[{i}].use"));
                    problems.push(Problem {
                        severity: Severity::Error,
                        message: format!("{}:{line}:{col}: tools[{i}] '{}': {why}", config.path.display(), tc.name),
                    });
                }
                ConfigEntryState::NotBundled { module, hint } => problems.push(Problem {
                    severity: Severity::Warning,
                    message: match hint {
                        Some(h) => format!("tools[{i}] '{}': DeerFlow community tool '{module}' is not provided by toolhost; it is left out: {h}", tc.name),
                        None => format!(
                            "tools[{i}] '{}': DeerFlow community tool '{module}' is not bundled with toolhost yet; it is left out",
                            tc.name
                        ),
                    },
                }),
                ConfigEntryState::Unavailable(why) => problems.push(Problem {
                    severity: Severity::Warning,
                    message: format!("tools[{i}] '{}': left out: {why}", tc.name),
                }),
                ConfigEntryState::Ready(_) => {}
            }
            entries.push(ConfigEntry {
                name: tc.name.clone(),
                group: tc.group.clone(),
                use_: tc.use_.clone(),
                state,
                grants,
            });
        }
        problems.extend(runtime_problems(&config.config, &runtime));
        let builtins = crate::wiring::builtins(&config.config, &opts, skills.clone());
        let mut layers: Vec<Arc<dyn ToolLayer>> = Vec::new();
        if let Some(mcp) = crate::wiring::mcp_layer(&opts, &base) {
            layers.push(mcp);
        }
        if let Some(acp) = crate::wiring::acp_layer(&config.config, extensions.as_ref()) {
            layers.push(acp);
        }
        let pipeline = crate::wiring::pipeline(&config.config, skills, public_skills);
        Ok(Self {
            config,
            runtime,
            data_dir: opts.data_dir.clone(),
            entries,
            builtins,
            layers,
            pipeline,
            threads: Threads::new(opts.data_dir.clone(), shared),
            states: ThreadStore::new(opts.persist_state),
            problems,
            host_bash: host_bash.flatten(),
            call_seq: AtomicU64::new(0),
            assemblies: Default::default(),
        })
    }

    pub fn config(&self) -> &AppConfig {
        &self.config.config
    }

    pub fn runtime(&self) -> &Arc<Runtime> {
        &self.runtime
    }

    pub fn data_dir(&self) -> &Path {
        &self.data_dir
    }

    /// Problems found building the host (errors refuse a tool; warnings leave it out or note).
    pub fn problems(&self) -> &[Problem] {
        &self.problems
    }

    /// What a host-bash command gets — filesystem, identity, network, seccomp, process tree —
    /// and what the start-up self-test proved, for `toolhost tools --explain`. `None` when no
    /// config entry offers host bash or host bash is not allowed.
    pub fn host_bash_report(&self) -> Option<&[String]> {
        self.host_bash.as_deref()
    }

    /// The pipeline layer names, outermost first.
    pub fn pipeline_layers(&self) -> Vec<&'static str> {
        self.pipeline.layer_names()
    }

    /// Add a tool layer (MCP, ACP, or an embedder's own).
    pub fn add_layer(&mut self, layer: Arc<dyn ToolLayer>) {
        self.layers.push(layer);
    }

    /// Add a builtin, in DeerFlow's order.
    pub fn add_builtin(&mut self, builtin: Builtin) {
        self.builtins.push(builtin);
    }

    fn facts(&self, req: &AssemblyRequest) -> AssemblyFacts {
        let c = &self.config.config;
        AssemblyFacts {
            host_bash_allowed: c.is_host_bash_allowed(),
            skill_evolution: c.skill_evolution.enabled,
            vision: c.model_supports_vision(req.model_name.as_deref()),
        }
    }

    /// DeerFlow's `get_available_tools`, then the lead agent's own tools (spec §1.1):
    /// `update_agent` for a named custom agent, `setup_agent` when bootstrapping, `write_todos`
    /// in plan mode.
    ///
    /// The result is reused for the same request until a layer reports a change (an edited
    /// `extensions_config.json`, a server's `tools/list_changed`).
    pub async fn get_available_tools(&self, req: &AssemblyRequest) -> Arc<Assembly> {
        let key = format!("{req:?}");
        let mut generation = 0u64;
        for layer in &self.layers {
            generation = generation.wrapping_mul(31).wrapping_add(layer.generation().await);
        }
        if let Some((g, a)) = self.assemblies.lock().unwrap_or_else(|p| p.into_inner()).get(&key) {
            if *g == generation {
                return a.clone();
            }
        }
        let mut a = get_available_tools(req, &self.facts(req), &self.entries, &self.builtins, &self.layers).await;
        crate::wiring::agent_tools(&self.config.config, &self.data_dir, req, &mut a);
        crate::wiring::defer(&self.config.config, &mut a);
        let a = Arc::new(a);
        let mut cache = self.assemblies.lock().unwrap_or_else(|p| p.into_inner());
        if cache.len() > 64 {
            cache.clear();
        }
        cache.insert(key, (generation, a.clone()));
        a
    }

    /// The directory layout of a thread (host paths; for reading results, not for access).
    pub fn thread_paths(&self, thread_id: &str) -> Result<ThreadPaths, HostError> {
        Ok(ThreadPaths::new(&self.data_dir, thread_id)?)
    }

    /// A thread's files: the thread filesystem layer every native access goes through. Opens
    /// (and creates, 0700) the thread's directory on first use.
    pub fn thread_fs(&self, thread_id: &str) -> Result<Arc<ThreadFs>, HostError> {
        Ok(self.threads.get(thread_id)?)
    }

    /// Drop what the host keeps in memory for a thread (directory handles, state); its next
    /// use reads them from disk again.
    pub fn forget_thread(&self, thread_id: &str) {
        self.threads.forget(thread_id);
        self.states.forget(thread_id);
    }

    fn new_call_id(&self, given: Option<String>) -> String {
        given.unwrap_or_else(|| {
            let n = self.call_seq.fetch_add(1, Ordering::Relaxed);
            format!("call_{}_{n}", std::process::id())
        })
    }

    async fn context(&self, thread_id: &str, tool_call_id: Option<String>) -> Result<CallContext, HostError> {
        let fs = self.thread_fs(thread_id)?;
        let state = self.states.get(&fs).await?;
        Ok(CallContext::new(fs, self.new_call_id(tool_call_id), Arc::new(state)))
    }

    /// The tools the model sees in `thread_id`: the assembly filtered by the pipeline.
    pub async fn model_tools(&self, req: &AssemblyRequest, thread_id: &str) -> Result<Vec<Arc<dyn Tool>>, HostError> {
        let assembly = self.get_available_tools(req).await;
        let ctx = self.context(thread_id, None).await?;
        let view = crate::middleware::ModelView { ctx: &ctx, deferred: assembly.deferred.as_deref() };
        Ok(self.pipeline.filter_tools(assembly.tools.clone(), &view))
    }

    /// The thread's current state.
    pub async fn thread_state(&self, thread_id: &str) -> Result<toolhost_core::ThreadState, HostError> {
        Ok(self.states.get(&*self.thread_fs(thread_id)?).await?)
    }

    /// Run one tool call through the pipeline and merge its update into the thread's state.
    pub async fn call(
        &self,
        req: &AssemblyRequest,
        thread_id: &str,
        name: &str,
        args: Value,
        tool_call_id: Option<String>,
    ) -> Result<CallResult, HostError> {
        let results = self.call_turn(req, thread_id, vec![(name.to_string(), args, tool_call_id)]).await?;
        Ok(results
            .into_iter()
            .next()
            .unwrap_or_else(|| CallResult { outcome: ToolOutcome::error("Error: no result"), state_errors: vec![] }))
    }

    /// Run the tool calls of one model turn concurrently, then merge their updates in call order
    /// into the host-owned thread state (DeerFlow's reducers decide how concurrent updates
    /// combine).
    pub async fn call_turn(
        &self,
        req: &AssemblyRequest,
        thread_id: &str,
        calls: Vec<(String, Value, Option<String>)>,
    ) -> Result<Vec<CallResult>, HostError> {
        let fs = self.thread_fs(thread_id)?;
        let state = self.states.get(&fs).await?;
        let outcomes = self.run_turn(req, &fs, state, &calls).await;
        let updates: Vec<&toolhost_core::StateUpdate> = outcomes.iter().map(|o| &o.update).collect();
        let merged = self.states.apply(&fs, &updates).await?;
        Ok(results(outcomes, merged))
    }

    /// [`call_turn`](Self::call_turn) with thread state owned by the caller: the calls see
    /// `state`, and their updates are merged into it.
    pub async fn call_turn_with_state(
        &self,
        req: &AssemblyRequest,
        thread_id: &str,
        state: &mut toolhost_core::ThreadState,
        calls: Vec<(String, Value, Option<String>)>,
    ) -> Result<Vec<CallResult>, HostError> {
        let fs = self.thread_fs(thread_id)?;
        let outcomes = self.run_turn(req, &fs, state.clone(), &calls).await;
        let merged = state.apply_turn(outcomes.iter().map(|o| &o.update));
        Ok(results(outcomes, merged))
    }

    /// DeerFlow's McpRoutingMiddleware: promote the deferred MCP tools whose routing keywords
    /// match the user's latest message (at most `tool_search.auto_promote_top_k`, by priority),
    /// as if `tool_search` had selected them. Returns the names promoted.
    pub async fn auto_promote(
        &self,
        req: &AssemblyRequest,
        thread_id: &str,
        user_message: &str,
    ) -> Result<Vec<String>, HostError> {
        let assembly = self.get_available_tools(req).await;
        let Some(d) = assembly.deferred.as_deref() else { return Ok(Vec::new()) };
        let Some(hash) = d.setup.catalog_hash.as_deref() else { return Ok(Vec::new()) };
        let mut metas = Vec::new();
        for layer in &self.layers {
            metas.extend(layer.routing().await);
        }
        let index =
            toolhost_deferred::build_routing_index(metas.iter().map(|(n, m)| (n.as_str(), m)), &d.setup.deferred_names);
        let routing =
            toolhost_deferred::McpRouting::new(&index, hash, self.config.config.tool_search.auto_promote_top_k);
        let message = toolhost_deferred::ChatMessage::Human(toolhost_deferred::HumanMessage {
            text: user_message.to_string(),
            ..Default::default()
        });
        let Some(update) = routing.before_model(&[message]) else { return Ok(Vec::new()) };
        let names: Vec<String> = update
            .promoted
            .as_ref()
            .and_then(|p| p.get("names"))
            .and_then(|n| n.as_array())
            .map(|a| a.iter().filter_map(|v| v.as_str().map(str::to_string)).collect())
            .unwrap_or_default();
        let fs = self.thread_fs(thread_id)?;
        self.states.apply(&fs, &[&update]).await?;
        Ok(names)
    }

    async fn run_turn(
        &self,
        req: &AssemblyRequest,
        fs: &Arc<ThreadFs>,
        state: toolhost_core::ThreadState,
        calls: &[(String, Value, Option<String>)],
    ) -> Vec<ToolOutcome> {
        let assembly = self.get_available_tools(req).await;
        let state = Arc::new(state);
        let contexts: Vec<CallContext> = calls
            .iter()
            .map(|(_, _, id)| CallContext::new(fs.clone(), self.new_call_id(id.clone()), state.clone()))
            .collect();
        let futures = calls.iter().zip(&contexts).map(|((name, args, _), ctx)| {
            let tool = assembly.tools.iter().find(|t| t.spec().name == *name);
            let deferred = assembly.deferred.as_deref();
            async move {
                let req = ToolRequest { name, args, ctx, tool, deferred };
                self.pipeline.call(&req).await
            }
        });
        if calls.len() == 1 {
            // A lone call has nothing to run beside it: a component may run on this thread
            // instead of being handed to a blocking thread and back (see `ComponentTool`).
            let futures: Vec<_> = futures.collect();
            return crate::tools::component::RUN_INLINE.scope(true, join_all(futures)).await;
        }
        join_all(futures).await
    }
}

fn results(outcomes: Vec<ToolOutcome>, merged: Vec<Result<(), toolhost_core::state::ReducerError>>) -> Vec<CallResult> {
    outcomes
        .into_iter()
        .zip(merged)
        .map(|(outcome, r)| CallResult { outcome, state_errors: r.err().map(|e| e.to_string()).into_iter().collect() })
        .collect()
}

/// Run futures concurrently on the current task and collect their outputs in order.
async fn join_all<F: std::future::Future>(futures: impl IntoIterator<Item = F>) -> Vec<F::Output> {
    let mut set = Vec::new();
    for f in futures {
        set.push(Box::pin(f));
    }
    let mut outputs: Vec<Option<F::Output>> = (0..set.len()).map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut pending = false;
        for (i, f) in set.iter_mut().enumerate() {
            if outputs[i].is_none() {
                match f.as_mut().poll(cx) {
                    std::task::Poll::Ready(v) => outputs[i] = Some(v),
                    std::task::Poll::Pending => pending = true,
                }
            }
        }
        if pending {
            std::task::Poll::Pending
        } else {
            std::task::Poll::Ready(())
        }
    })
    .await;
    outputs.into_iter().flatten().collect()
}

/// The directories every thread sees besides its own: the skills directory (read-only at
/// `skills.container_path`) and the `sandbox.mounts` whose host path exists (DeerFlow ignores the
/// others), each opened once.
pub(crate) fn shared_roots(c: &AppConfig, base: &Path, problems: &mut Vec<Problem>) -> SharedRoots {
    let skills = c.skills.path.as_ref().map(|p| resolve(base, p)).or_else(|| {
        let d = base.join("skills");
        d.is_dir().then_some(d)
    });
    let container = if c.skills.container_path.is_empty() { VIRTUAL_SKILLS } else { c.skills.container_path.as_str() };
    let skills = skills.and_then(|p| match SharedDir::open(container, &p, true) {
        Ok(d) => Some(d),
        Err(e) => {
            problems.push(Problem {
                severity: Severity::Warning,
                message: format!(
                    "skills directory {} cannot be opened ({e}); {} is empty",
                    p.display(),
                    c.skills.container_path
                ),
            });
            None
        }
    });
    let mut mounts = Vec::new();
    for m in c.sandbox_or_default().mounts {
        let cp = toolhost_vpath::normalize(&m.container_path);
        if !m.container_path.starts_with('/') || cp == "/" || toolhost_vpath::has_traversal(&m.container_path) {
            problems.push(Problem {
                severity: Severity::Warning,
                message: format!(
                    "sandbox mount {} → {}: the container path must be an absolute path below /; ignored",
                    m.host_path, m.container_path
                ),
            });
            continue;
        }
        let host = resolve(base, &m.host_path);
        match SharedDir::open(&m.container_path, &host, m.read_only) {
            Ok(d) => mounts.push(d),
            // DeerFlow ignores mounts whose host path is missing.
            Err(e) => problems.push(Problem {
                severity: Severity::Warning,
                message: format!(
                    "sandbox mount {} → {}: host path cannot be opened ({e}); ignored",
                    m.host_path, m.container_path
                ),
            }),
        }
    }
    SharedRoots::new(skills, mounts)
}

fn resolve(base: &Path, p: &str) -> PathBuf {
    let p = Path::new(p);
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        base.join(p)
    }
}

/// The sandbox settings component tools receive (see `wit/tool.wit`, `call-context.sandbox`).
fn sandbox_json(
    c: &AppConfig,
    shared: &SharedRoots,
    disabled_skills: &[String],
    write_file_max_bytes: Option<&str>,
) -> Value {
    let s = c.sandbox_or_default();
    serde_json::json!({
        "read_file_output_max_chars": s.read_file_output_max_chars,
        "ls_output_max_chars": s.ls_output_max_chars,
        "mounts": shared.mounts().iter().map(|m| serde_json::json!({"container_path": m.vpath, "read_only": m.read_only})).collect::<Vec<_>>(),
        "skills_container_path": c.skills.container_path,
        "write_file_max_bytes": write_file_max_bytes,
        "disabled_skills": disabled_skills,
    })
}

/// Default capabilities of bundled components (what DeerFlow's equivalents touch).
fn bundled_defaults(component: &ComponentRef) -> Option<CapabilitiesConfig> {
    match component {
        ComponentRef::Bundled(n) if n == "sandbox-fs" => Some(CapabilitiesConfig {
            filesystem: Some(FilesGrant::UserData),
            memory_mb: Some(256),
            timeout_s: Some(60.0),
            output_bytes: Some(16 << 20),
            ..Default::default()
        }),
        _ => None,
    }
}

/// What the runtime has to report (a refused precompile cache, a rejected artifact), and a
/// `toolhost:` section a shared runtime does not follow.
fn runtime_problems(c: &AppConfig, runtime: &Runtime) -> Vec<Problem> {
    let mut out: Vec<Problem> =
        runtime.take_warnings().into_iter().map(|message| Problem { severity: Severity::Warning, message }).collect();
    let (wanted, have) = (&c.toolhost, runtime.concurrency());
    if (wanted.concurrent_calls, wanted.concurrent_calls_per_thread) != (have.global, have.per_thread) {
        out.push(Problem {
            severity: Severity::Warning,
            message: format!(
                "toolhost.concurrent_calls {} / concurrent_calls_per_thread {} not applied: this host shares a runtime built with {} / {}",
                wanted.concurrent_calls, wanted.concurrent_calls_per_thread, have.global, have.per_thread
            ),
        });
    }
    out
}

#[allow(clippy::too_many_arguments)]
fn build_entry(
    tc: &ToolConfig,
    config: &LoadedConfig,
    runtime: &Arc<Runtime>,
    shared: &Arc<SharedRoots>,
    sandbox_json: &Value,
    extensions: Option<&Value>,
    grants: &mut Option<String>,
    bash: &mut Option<crate::wiring::HostBashEntry>,
) -> ConfigEntryState {
    let resolved = match config::resolve_use(&tc.use_, &crate::bundled::names(), &config.base_dir()) {
        Ok(r) => r,
        Err(e) => return ConfigEntryState::Failed(e),
    };
    match resolved {
        ResolvedUse::NotBundled { module, hint } => ConfigEntryState::NotBundled { module, hint },
        ResolvedUse::HostBash => {
            let tool = crate::wiring::host_bash(&config.config, shared, extensions, &tc.group);
            let (state, entry) = crate::wiring::host_bash_entry(&config.config, tool);
            *bash = Some(entry);
            state
        }
        ResolvedUse::Component { component, tool } => {
            let loaded = match runtime.load(&component, &crate::bundled::bytes) {
                Ok(l) => l,
                Err(e) => return ConfigEntryState::Failed(e.to_string()),
            };
            let wanted = tool.clone().unwrap_or_else(|| tc.name.clone());
            let listed = loaded.tools.iter().find(|t| t.name == wanted).or_else(|| {
                if tool.is_none() && loaded.tools.len() == 1 {
                    loaded.tools.first()
                } else {
                    None
                }
            });
            let Some(listed) = listed else {
                let names: Vec<&str> = loaded.tools.iter().map(|t| t.name.as_str()).collect();
                return ConfigEntryState::Failed(format!(
                    "component {component} has no tool '{wanted}' (it has: {})",
                    names.join(", ")
                ));
            };
            let mut warnings = Vec::new();
            let extra: Map<String, Value> = tc.extra.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
            // The entry's block over the bundled component's defaults, key by key.
            let env = |k: &str| std::env::var(k).ok();
            let defaults = crate::community::capabilities(&component, &listed.name, &extra, &env)
                .or_else(|| bundled_defaults(&component))
                .unwrap_or_default();
            let caps_cfg = tc.capabilities.clone().unwrap_or_default().merged_over(&defaults);
            let caps = match CapabilitySet::resolve(&caps_cfg, &env, &mut warnings) {
                Ok(c) => c,
                Err(e) => return ConfigEntryState::Failed(e),
            };
            for w in warnings {
                tracing::warn!("tool '{}': {w}", tc.name);
            }
            *grants = Some(caps.describe());
            let spec = ToolSpec {
                name: crate::community::bound_name(&component, &listed.name).to_string(),
                description: listed.description.clone(),
                parameters: listed.parameters.clone(),
                group: Some(tc.group.clone()),
                source: ToolSource::Component { component: component.to_string() },
            };
            let entries: Vec<(String, String, Map<String, Value>)> = config
                .config
                .tools
                .iter()
                .map(|t| {
                    (t.name.clone(), t.use_.clone(), t.extra.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
                })
                .collect();
            let extra = crate::community::tool_config(&listed.name, &extra, &entries);
            ConfigEntryState::Ready(Arc::new(ComponentTool::new(
                spec,
                listed.name.clone(),
                runtime.clone(),
                loaded,
                caps,
                extra,
                sandbox_json.clone(),
            )))
        }
    }
}
