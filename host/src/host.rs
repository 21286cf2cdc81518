//! [`Toolhost`]: a loaded config, the wasm runtime with its components, what assembly draws from,
//! the middleware pipeline and the threads' state — and [`Thread`], the handle calls go through.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::Value;
use toolhost_core::{
    CallContext, CancelSignal, ErrorKind, LogSink, ProgressSink, ThreadFs, ThreadPaths, ThreadState, Threads,
    ToolOutcome, ToolSpec,
};

pub use toolhost_subagents::agents::{AgentConfig, AgentError};

use crate::assembly::{self, Assembly, AssemblyFacts, AssemblyRequest, Builtin, Sources, ToolLayer};
use crate::config::{self, AppConfig, LoadedConfig, TaskSupport};
use crate::error::{HostError, Problem};
use crate::middleware::turn::{BeforeModel, TurnCall, TurnStage};
use crate::middleware::{Pipeline, ToolRequest};
use crate::options::HostOptions;
use crate::runtime::{ConcurrencyLimits, Runtime, RuntimeOptions};
use crate::state_store::StateStore;

/// A tool host: open it once from a config, then call tools in threads.
///
/// Every call goes through DeerFlow's middleware pipeline (result sanitization, audit,
/// read-before-write, error handling, skill policy, deferred-tool filter, clarification) and its
/// state update is merged into the thread's state with DeerFlow's reducers. Component tools run
/// in a fresh wasm instance per call with only the capabilities their config grants.
///
/// ```no_run
/// # async fn demo() -> Result<(), toolhost::HostError> {
/// use serde_json::json;
/// use toolhost::{HostOptions, ToolCall, Toolhost};
///
/// let host = Toolhost::open(HostOptions::new("config.yaml").data_dir("/tmp/toolhost")).await?;
/// let thread = host.thread("t1");
/// let result = thread.call(ToolCall::new("ls", json!({"description": "look", "path": "/mnt/user-data"}))).await?;
/// println!("{}", result.text());
/// # Ok(()) }
/// ```
pub struct Toolhost {
    config: LoadedConfig,
    runtime: Arc<Runtime>,
    data_dir: PathBuf,
    sources: Sources,
    pipeline: Pipeline,
    /// DeerFlow's turn-level middlewares (McpRouting, SubagentLimit, Clarification's sibling drop).
    turn_stage: TurnStage,
    /// Every thread's files, through the thread filesystem layer.
    threads: Threads,
    /// Thread state: embedded (memory and files) or shared (PostgreSQL), per `state_store:`.
    states: Arc<dyn StateStore>,
    problems: Vec<Problem>,
    call_seq: AtomicU64,
    /// The `task` tool's settings and the slot through which it reaches this host.
    subagents: crate::subagents::Subagents,
    /// Assemblies by request, with the layer generation they were built at.
    assemblies: Mutex<HashMap<String, (u64, Arc<Assembly>)>>,
}

impl std::fmt::Debug for Toolhost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Toolhost").field("config", &self.config.name).field("data_dir", &self.data_dir).finish()
    }
}

/// One tool call of a model turn: DeerFlow's `ToolCall` (`id`, `name`, `args`).
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCall {
    /// The call id the model gave (`tool_call_id`); `None`: the host makes one up.
    pub id: Option<String>,
    /// The tool's name.
    pub name: String,
    /// The arguments, a JSON object.
    pub args: Value,
}

impl ToolCall {
    /// A call of `name` with `args`.
    pub fn new(name: impl Into<String>, args: Value) -> Self {
        Self { id: None, name: name.into(), args }
    }

    /// The same call with the model's call id.
    pub fn with_id(mut self, id: impl Into<String>) -> Self {
        self.id = Some(id.into());
        self
    }
}

/// How [`Toolhost::call_with`] runs a call besides its arguments.
#[derive(Debug, Clone, Default)]
pub struct CallOptions {
    /// Where the tool's progress reports go (see [`Toolhost::call_with_progress`]).
    pub progress: Option<ProgressSink>,
    /// Where the tool's log lines go besides the host's log (a component's `host.log`; an MCP
    /// client's `notifications/message`). The sink runs on the thread that runs the tool.
    pub log: Option<LogSink>,
    /// Raise it to stop the call (an MCP client's `notifications/cancelled`).
    pub cancel: Option<CancelSignal>,
    /// Whoever a tool may ask during the call (a component's `client` import: elicitation,
    /// sampling); `toolhost serve` passes the MCP client.
    pub client: Option<toolhost_core::Client>,
}

/// The result of one call through the pipeline.
#[derive(Debug, Clone, serde::Serialize)]
pub struct CallResult {
    /// What the tool answered, after the pipeline (the text the model reads, the state update).
    pub outcome: ToolOutcome,
    /// Reducer errors for this call's update (DeerFlow raises them; the update is not applied).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub state_errors: Vec<String>,
}

impl CallResult {
    /// The text the model reads.
    pub fn text(&self) -> String {
        self.outcome.text_content()
    }

    /// Whether the call ended in an error.
    pub fn is_error(&self) -> bool {
        self.outcome.is_error()
    }

    /// What kind of error, `None` for a success. The text stays DeerFlow's; the kind is for code.
    pub fn error_kind(&self) -> Option<ErrorKind> {
        self.outcome.error_kind()
    }
}

impl Toolhost {
    /// Load the config, start the runtime and load every component the config names. Compiling
    /// components takes seconds on a cold cache: this runs on tokio's blocking pool.
    /// With a shared state store (`state_store:`), it is connected and checked before this
    /// returns, so a wrong URL or an unreachable server is an error here.
    pub async fn open(opts: HostOptions) -> Result<Self, HostError> {
        let host = match tokio::runtime::Handle::try_current() {
            Ok(h) => h
                .spawn_blocking(move || Self::open_blocking(opts))
                .await
                .map_err(|e| HostError::Runtime(e.to_string()))??,
            Err(_) => return Err(HostError::NoTokioRuntime),
        };
        host.check_state_store().await?;
        Ok(host)
    }

    /// Connect to the state store and make sure it can be used (a no-op for the embedded
    /// store). [`open`](Self::open) does this; a host opened with
    /// [`open_blocking`](Self::open_blocking) connects on its first call unless this is called.
    pub async fn check_state_store(&self) -> Result<(), HostError> {
        Ok(self.states.check().await?)
    }

    /// Where thread state is kept (never a password).
    pub fn state_store(&self) -> String {
        self.states.describe()
    }

    /// A thread expired: forget it and remove its stored state (the embedded store's file went
    /// with the thread's directory; a shared store's row is deleted).
    pub async fn remove_thread_state(&self, thread_id: &str) -> Result<(), HostError> {
        self.forget_thread(thread_id);
        Ok(self.states.remove(thread_id).await?)
    }

    /// [`open`](Self::open) on the calling thread (a `main` before any runtime, a test).
    pub fn open_blocking(opts: HostOptions) -> Result<Self, HostError> {
        let config = config::load(&opts.config, &opts.env)?;
        let cache_dir = opts.cache_dir.clone().unwrap_or_else(|| opts.data_dir.join("cache"));
        let t = &config.config.toolhost;
        let runtime = Runtime::with_options(RuntimeOptions {
            cache_dir: Some(cache_dir),
            cache_keys_dir: opts.cache_keys_dir.clone(),
            extra_ca_certs: opts.extra_ca_certs.clone(),
            concurrency: ConcurrencyLimits { global: t.concurrent_calls, per_thread: t.concurrent_calls_per_thread },
        })
        .map_err(|e| HostError::Runtime(format!("{e:#}")))?;
        Self::with_runtime(opts, runtime)
    }

    /// Open with an existing runtime (several hosts sharing one engine and its instance pool).
    pub fn with_runtime(opts: HostOptions, runtime: Arc<Runtime>) -> Result<Self, HostError> {
        let config = config::load(&opts.config, &opts.env)?;
        // Before anything is built: a `state_store:` that cannot be used stops here.
        let states = crate::state_store::open_store(config.config.state_store.as_ref(), opts.persist_state)?;
        let mut problems: Vec<Problem> = config.warnings.iter().map(Problem::warning).collect();
        let subagents = crate::subagents::Subagents::new(&config.config, &opts.env);
        let sources = Sources::build(&config, &runtime, &opts, subagents.builtin(), &mut problems);
        let pipeline = crate::middleware::lead_agent_pipeline(
            &config.config.read_before_write,
            config.config.sandbox.as_ref().and_then(|s| s.thread_disk_quota_mb),
            sources.read_only_tools.clone(),
            sources.skills.clone(),
            sources.public_skills.clone(),
        );
        let turn_stage = crate::middleware::turn::lead_agent_turn_stage(&config.config);
        Ok(Self {
            threads: Threads::new(opts.data_dir.clone(), sources.shared.clone()),
            turn_stage,
            config,
            runtime,
            data_dir: opts.data_dir.clone(),
            sources,
            pipeline,
            states,
            problems,
            call_seq: AtomicU64::new(0),
            subagents,
            assemblies: Default::default(),
        })
    }

    /// The config's sections.
    pub fn config(&self) -> &AppConfig {
        &self.config.config
    }

    /// The wasm runtime (engine, precompile cache, call queues).
    pub fn runtime(&self) -> &Arc<Runtime> {
        &self.runtime
    }

    /// Where thread files and state live.
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
        self.sources.host_bash.as_deref()
    }

    /// How each stdio MCP server and ACP agent is started (confined, unconfined by choice, or
    /// not at all) and what it gets, for `toolhost tools --explain` and `check`.
    pub fn process_reports(&self) -> &[crate::assembly::children::ChildReport] {
        &self.sources.children
    }

    /// The pipeline layer names, outermost first.
    pub fn pipeline_layers(&self) -> Vec<&'static str> {
        self.pipeline.layer_names()
    }

    /// The turn stage's layer names, in DeerFlow's list order.
    pub fn turn_layers(&self) -> Vec<&'static str> {
        self.turn_stage.layer_names()
    }

    /// Add a tool layer (an embedder's own source of tools), assembled after MCP and ACP ones of
    /// the same [`kind`](ToolLayer::kind).
    pub fn add_layer(&mut self, layer: Arc<dyn ToolLayer>) {
        self.sources.layers.push(layer);
        self.assemblies.lock().unwrap_or_else(|p| p.into_inner()).clear();
    }

    /// Add a native tool after DeerFlow's builtins; its calls go through the pipeline like any
    /// other.
    pub fn add_builtin(&mut self, builtin: Builtin) {
        self.sources.builtins.push(builtin);
        self.assemblies.lock().unwrap_or_else(|p| p.into_inner()).clear();
    }

    /// A handle on thread `id` with the default request (DeerFlow's lead agent, every group).
    pub fn thread(&self, id: impl Into<String>) -> Thread<'_> {
        Thread { host: self, id: id.into(), request: AssemblyRequest::default() }
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
    /// in plan mode. With the reasons each candidate is in or out.
    ///
    /// The result is reused for the same request until a layer reports a change (an edited
    /// `extensions_config.json`, a server's `tools/list_changed`).
    pub async fn get_available_tools(&self, req: &AssemblyRequest) -> Arc<Assembly> {
        // The run id decides nothing in assembly: runs share their assembly.
        let key = match req.agent.run_id {
            Some(_) => {
                let mut r = req.clone();
                r.agent.run_id = None;
                format!("{r:?}")
            }
            None => format!("{req:?}"),
        };
        let mut generation = 0u64;
        for layer in &self.sources.layers {
            generation = generation.wrapping_mul(31).wrapping_add(layer.generation().await);
        }
        if let Some((g, a)) = self.assemblies.lock().unwrap_or_else(|p| p.into_inner()).get(&key) {
            if *g == generation {
                return a.clone();
            }
        }
        let s = &self.sources;
        let mut a = assembly::get_available_tools(req, &self.facts(req), &s.entries, &s.builtins, &s.layers).await;
        assembly::add_lead_agent_tools(&self.config.config, &self.data_dir, req, &mut a);
        self.subagents.bind_task(req, &mut a);
        assembly::defer(&self.config.config, &mut a);
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

    /// The tools the model sees in `thread_id` (the assembly filtered by the pipeline: deferred
    /// tools hidden until promoted, skill policy applied), as specs. Calls go through
    /// [`call`](Self::call), never around the pipeline.
    pub async fn model_tools(&self, req: &AssemblyRequest, thread_id: &str) -> Result<Vec<ToolSpec>, HostError> {
        let state = self.thread_state(thread_id).await?;
        self.model_tools_with_state(req, thread_id, state).await
    }

    /// [`model_tools`](Self::model_tools) for thread state the caller owns (see
    /// [`call_turn_with_state`](Self::call_turn_with_state)).
    pub async fn model_tools_with_state(
        &self,
        req: &AssemblyRequest,
        thread_id: &str,
        state: ThreadState,
    ) -> Result<Vec<ToolSpec>, HostError> {
        let assembly = self.get_available_tools(req).await;
        let ctx = CallContext::new(self.thread_fs(thread_id)?, self.new_call_id(None), Arc::new(state));
        let skills = crate::subagents::skill_allowlist(req);
        let view = crate::middleware::ModelView {
            ctx: &ctx,
            deferred: assembly.deferred.as_deref(),
            available_skills: skills.as_ref(),
        };
        Ok(self.pipeline.filter_tools(assembly.tools.clone(), &view).iter().map(|t| t.spec().clone()).collect())
    }

    /// Share the host. `task` runs its subagents' tools through the host it belongs to, so a
    /// host whose runs enable subagents must be shared this way (the CLI and `serve` do); an
    /// unshared host's `task` answers that it cannot run a subagent.
    pub fn into_shared(self) -> Arc<Self> {
        Arc::new_cyclic(|weak: &std::sync::Weak<Self>| {
            self.subagents.bind_host(weak.clone());
            self
        })
    }

    /// `req` for custom agent `name` of the run's user (`req.agent.user_id`, `default` when
    /// unset): `<data>/users/<user_id>/agents/NAME/config.yaml`, where DeerFlow's `setup_agent`
    /// and agents API write it, else DeerFlow's legacy `<data>/agents/NAME/config.yaml`. The agent's `tool_groups` replace `req.groups`, its `model` is used unless `req`
    /// names one (a model the config lacks falls back to the default, with a warning in the
    /// log), its `skills` decide which skills' `allowed-tools` count, and the run gets
    /// `update_agent`. A missing or malformed agent config is an error naming the file.
    pub fn agent_request(&self, name: &str, mut req: AssemblyRequest) -> Result<AssemblyRequest, HostError> {
        for w in crate::subagents::apply_agent(&self.config.config, &self.data_dir, name, &mut req)? {
            tracing::warn!("{w}");
        }
        Ok(req)
    }

    /// The custom agents of user `user_id` (`None`: `default`) — theirs under
    /// `<data>/users/<user_id>/agents`, then the legacy shared ones under `<data>/agents` — by
    /// name; one whose config cannot be read comes with its error.
    pub fn agents(&self, user_id: Option<&str>) -> Vec<(String, Result<AgentConfig, AgentError>)> {
        list_agents(&self.data_dir, user_id)
    }

    /// The skills as the skill policy sees them (`None` when no skills directory is configured
    /// or it cannot be read).
    pub fn skill_registry(&self) -> Option<toolhost_skills::SkillRegistry> {
        if !self.sources.skills.layout().root.is_dir() {
            return None;
        }
        self.sources.skills.load_registry(&self.sources.public_skills).ok()
    }

    /// How a front end may run `name` as an MCP task (the tasks extension): its `tools:`
    /// entry's `task_support:`, else — given the tool's `spec` — `optional` for the tools that
    /// may run long (components, host bash, MCP and ACP tools, `task`) and `forbidden` for the
    /// other builtins (they answer at once; `ask_clarification` needs the call's own request to
    /// ask). Without a spec, a tool with no `task_support:` is `forbidden`.
    pub fn task_support(&self, name: &str, spec: Option<&ToolSpec>) -> TaskSupport {
        if let Some(s) = self.config().tool_config(name).and_then(|t| t.task_support) {
            return s;
        }
        match spec.map(|s| &s.source) {
            Some(toolhost_core::ToolSource::Builtin) if name != "task" => TaskSupport::Forbidden,
            Some(toolhost_core::ToolSource::Other { .. }) | None => TaskSupport::Forbidden,
            Some(_) => TaskSupport::Optional,
        }
    }

    /// The thread's current state.
    pub async fn thread_state(&self, thread_id: &str) -> Result<ThreadState, HostError> {
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
        self.call_with(req, thread_id, name, args, tool_call_id, CallOptions::default()).await
    }

    /// [`call`](Self::call), with the tool's progress reports going to `progress` as it runs
    /// (component tools report through the WIT's `host.progress`; the runtime thins them, see
    /// `runtime::progress`). The sink runs on the thread that runs the tool: it must not block.
    pub async fn call_with_progress(
        &self,
        req: &AssemblyRequest,
        thread_id: &str,
        name: &str,
        args: Value,
        tool_call_id: Option<String>,
        progress: ProgressSink,
    ) -> Result<CallResult, HostError> {
        let opts = CallOptions { progress: Some(progress), ..CallOptions::default() };
        self.call_with(req, thread_id, name, args, tool_call_id, opts).await
    }

    /// [`call`](Self::call) with [`CallOptions`]: where progress reports go, and a signal that
    /// stops the call when its caller gives it up (a component is stopped within one epoch tick,
    /// even while it computes or waits in a system call; a native tool's future is dropped by
    /// whoever gave it up).
    pub async fn call_with(
        &self,
        req: &AssemblyRequest,
        thread_id: &str,
        name: &str,
        args: Value,
        tool_call_id: Option<String>,
        opts: CallOptions,
    ) -> Result<CallResult, HostError> {
        require_tokio()?;
        let calls = vec![(name.to_string(), args, tool_call_id)];
        let fs = self.thread_fs(thread_id)?;
        let state = self.states.get(&fs).await?;
        let outcomes = self.run_turn(req, &fs, state, &calls, &opts).await;
        let updates: Vec<&toolhost_core::StateUpdate> = outcomes.iter().map(|o| &o.update).collect();
        let merged = self.states.apply(&fs, &updates).await?;
        let mut results = results(outcomes, merged);
        Ok(results.pop().expect("one result per call"))
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
        require_tokio()?;
        let fs = self.thread_fs(thread_id)?;
        let state = self.states.get(&fs).await?;
        let outcomes = self.run_turn(req, &fs, state, &calls, &CallOptions::default()).await;
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
        state: &mut ThreadState,
        calls: Vec<(String, Value, Option<String>)>,
    ) -> Result<Vec<CallResult>, HostError> {
        require_tokio()?;
        let fs = self.thread_fs(thread_id)?;
        let outcomes = self.run_turn(req, &fs, state.clone(), &calls, &CallOptions::default()).await;
        let merged = state.apply_turn(outcomes.iter().map(|o| &o.update));
        Ok(results(outcomes, merged))
    }

    /// The turn stage's `before_model` hooks for the user's latest message — DeerFlow's
    /// McpRoutingMiddleware: promote the deferred MCP tools whose routing keywords match it (at
    /// most `tool_search.auto_promote_top_k`, by priority), as if `tool_search` had selected
    /// them. Returns the names promoted.
    pub async fn auto_promote(
        &self,
        req: &AssemblyRequest,
        thread_id: &str,
        user_message: &str,
    ) -> Result<Vec<String>, HostError> {
        let assembly = self.get_available_tools(req).await;
        let view = BeforeModel { user_message, deferred: assembly.deferred.as_deref(), layers: &self.sources.layers };
        let updates = self.turn_stage.before_model(&view).await;
        if updates.is_empty() {
            return Ok(Vec::new());
        }
        let names: Vec<String> = updates
            .iter()
            .filter_map(|u| u.promoted.as_ref())
            .filter_map(|p| p.get("names"))
            .filter_map(|n| n.as_array())
            .flatten()
            .filter_map(|v| v.as_str().map(str::to_string))
            .collect();
        let fs = self.thread_fs(thread_id)?;
        self.states.apply(&fs, &updates.iter().collect::<Vec<_>>()).await?;
        Ok(names)
    }

    async fn run_turn(
        &self,
        req: &AssemblyRequest,
        fs: &Arc<ThreadFs>,
        state: ThreadState,
        calls: &[(String, Value, Option<String>)],
        opts: &CallOptions,
    ) -> Vec<ToolOutcome> {
        let assembly = self.get_available_tools(req).await;
        // The turn stage's `after_model` hooks: which calls of the turn never run.
        let turn: Vec<TurnCall> = calls.iter().map(|(name, _, _)| TurnCall { name }).collect();
        let dropped = self.turn_stage.after_model(&turn, &state, req);
        let run_id: Option<Arc<str>> = req.agent.run_id.as_deref().map(Arc::from);
        let skills = crate::subagents::skill_allowlist(req);
        let state = Arc::new(state);
        // A lone call has nothing to run beside it: a component may run on this thread instead
        // of being handed to a blocking thread and back (see `ComponentTool`).
        let alone = calls.len() == 1;
        let contexts: Vec<CallContext> = calls
            .iter()
            .map(|(_, _, id)| {
                let mut ctx =
                    CallContext::new(fs.clone(), self.new_call_id(id.clone()), state.clone()).alone_in_turn(alone);
                ctx.progress = opts.progress.clone();
                ctx.log = opts.log.clone();
                ctx.cancel = opts.cancel.clone();
                ctx.client = opts.client.clone();
                ctx.run_id = run_id.clone();
                ctx
            })
            .collect();
        let futures = calls.iter().zip(&contexts).zip(dropped).map(|(((name, args, _), ctx), dropped)| {
            let tool = assembly.tools.iter().find(|t| t.spec().name == *name);
            let deferred = assembly.deferred.as_deref();
            let available_skills = skills.as_ref();
            let tools = &assembly.tools;
            async move {
                // A turn-level middleware removed this call from the turn.
                if let Some(outcome) = dropped {
                    return outcome;
                }
                let req = ToolRequest { name, args, ctx, tool, tools, deferred, available_skills };
                self.pipeline.call(&req).await
            }
        });
        join_all(futures).await
    }
}

/// A thread: its files, its state, and the agent settings its tools are assembled for. Calls
/// made through it go through the whole pipeline.
#[derive(Debug, Clone)]
pub struct Thread<'h> {
    host: &'h Toolhost,
    id: String,
    request: AssemblyRequest,
}

impl<'h> Thread<'h> {
    /// The thread's id (its directory name under `<data>/threads`).
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The same thread with other agent settings (groups, model, subagents, a custom agent's
    /// run): tools are listed and called for this request.
    pub fn with_request(mut self, request: AssemblyRequest) -> Self {
        self.request = request;
        self
    }

    /// The same thread run as custom agent `name` (see [`Toolhost::agent_request`]).
    pub fn with_agent(mut self, name: &str) -> Result<Self, HostError> {
        self.request = self.host.agent_request(name, self.request)?;
        Ok(self)
    }

    /// The agent settings tools are assembled for.
    pub fn request(&self) -> &AssemblyRequest {
        &self.request
    }

    /// The tools the model sees in this thread now.
    pub async fn tools(&self) -> Result<Vec<ToolSpec>, HostError> {
        self.host.model_tools(&self.request, &self.id).await
    }

    /// Run one call and merge its state update.
    pub async fn call(&self, call: ToolCall) -> Result<CallResult, HostError> {
        let mut results = self.call_turn(vec![call]).await?;
        Ok(results.pop().expect("one result per call"))
    }

    /// [`call`](Self::call) with [`CallOptions`] (progress reports, a cancel signal).
    pub async fn call_with(&self, call: ToolCall, opts: CallOptions) -> Result<CallResult, HostError> {
        self.host.call_with(&self.request, &self.id, &call.name, call.args, call.id, opts).await
    }

    /// Run the calls of one model turn concurrently; results in call order.
    pub async fn call_turn(&self, calls: Vec<ToolCall>) -> Result<Vec<CallResult>, HostError> {
        let calls = calls.into_iter().map(|c| (c.name, c.args, c.id)).collect();
        self.host.call_turn(&self.request, &self.id, calls).await
    }

    /// The thread's state (artifacts, todos, promoted tools, …).
    pub async fn state(&self) -> Result<ThreadState, HostError> {
        self.host.thread_state(&self.id).await
    }

    /// The thread's files, through the thread filesystem layer.
    pub fn files(&self) -> Result<Arc<ThreadFs>, HostError> {
        self.host.thread_fs(&self.id)
    }
}

/// The custom agents of user `user_id` (`None`: `default`) under `data_dir` (directories holding
/// a `config.yaml`: `<data_dir>/users/<user_id>/agents/*`, then the legacy `<data_dir>/agents/*`
/// of other names), by name; one whose config cannot be read comes with its error. Needs no open
/// host.
pub fn list_agents(data_dir: &Path, user_id: Option<&str>) -> Vec<(String, Result<AgentConfig, AgentError>)> {
    let run = crate::AgentRun { user_id: user_id.map(str::to_string), ..Default::default() };
    toolhost_subagents::agents::list_agents(&run.agent_store(data_dir))
}

/// Calls run on tokio (components on its blocking pool): say so instead of panicking elsewhere.
fn require_tokio() -> Result<(), HostError> {
    tokio::runtime::Handle::try_current().map(|_| ()).map_err(|_| HostError::NoTokioRuntime)
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
