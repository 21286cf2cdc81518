//! One call of a component tool: a fresh store and instance from the component's
//! `InstancePre`, the WASI context of its capabilities, an epoch deadline, a memory limiter and an
//! output cap. Whatever the guest does — loop, allocate, trap, panic, return garbage — comes back
//! as a `ComponentCallError` naming what happened; the host keeps serving.

use std::time::{Duration, Instant};

use wasmtime::component::ResourceTable;
use wasmtime::{ResourceLimiter, Store};
use wasmtime_wasi::p2::pipe::MemoryOutputPipe;
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use toolhost_core::{ContentPart, ProgressSink};

use super::capabilities::{CapabilitySet, Preopen};
use super::net::NetHooks;
use super::progress::ProgressRelay;
use super::wit::v0_2::toolhost::tool::types;
use super::wit::{CallInput, Failure, SandboxSettings, ToolPre};
use super::{ListedTool, Runtime, EPOCH_TICK};

/// Per-call limits.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CallLimits {
    /// CPU and wall time of the call, enforced by epoch interruption.
    pub timeout: Duration,
    /// Linear memory of the instance.
    pub memory_bytes: u64,
    /// Bytes of content the call may return.
    pub output_bytes: u64,
    /// WASI handles (files, directories, streams, HTTP objects) the instance may hold at once;
    /// each open file or directory is a file descriptor of the host process.
    pub handles: usize,
}

/// The data of one store: WASI state, the limiter, the tool's label for logs, and where its
/// progress reports go.
pub struct HostState {
    ctx: WasiCtx,
    table: ResourceTable,
    limiter: Limiter,
    label: String,
    http: wasmtime_wasi_http::WasiHttpCtx,
    net: NetHooks,
    progress: ProgressRelay,
}

impl WasiView for HostState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView { ctx: &mut self.ctx, table: &mut self.table }
    }
}

impl wasmtime_wasi_http::WasiHttpView for HostState {
    fn http(&mut self) -> wasmtime_wasi_http::WasiHttpCtxView<'_> {
        wasmtime_wasi_http::WasiHttpCtxView { ctx: &mut self.http, table: &mut self.table, hooks: &mut self.net }
    }
}

// The `host` interface of the WIT, shared by every version (`wit` binds each to these).
impl HostState {
    pub(super) fn resolve_for_guest(&mut self, name: &str) -> Result<Vec<String>, String> {
        self.net.resolve_for_guest(name)
    }

    pub(super) fn write_log(&mut self, level: tracing::Level, message: &str) {
        let message: String = message.chars().take(4096).collect();
        let label = &self.label;
        match level {
            tracing::Level::TRACE => tracing::trace!(component = %label, "{message}"),
            tracing::Level::DEBUG => tracing::debug!(component = %label, "{message}"),
            tracing::Level::INFO => tracing::info!(component = %label, "{message}"),
            tracing::Level::WARN => tracing::warn!(component = %label, "{message}"),
            tracing::Level::ERROR => tracing::error!(component = %label, "{message}"),
        }
    }

    pub(super) fn report_progress(&mut self, progress: f64, total: Option<f64>, message: Option<String>) {
        self.progress.report(progress, total, message);
    }
}

/// Refuses memory growth past the limit and remembers that it did, so the error can say so.
struct Limiter {
    memory_bytes: usize,
    hit: bool,
}

impl ResourceLimiter for Limiter {
    fn memory_growing(&mut self, _current: usize, desired: usize, _maximum: Option<usize>) -> wasmtime::Result<bool> {
        if desired > self.memory_bytes {
            self.hit = true;
            return Err(wasmtime::Error::msg("memory limit exceeded"));
        }
        Ok(true)
    }

    fn table_growing(&mut self, _current: usize, desired: usize, _maximum: Option<usize>) -> wasmtime::Result<bool> {
        Ok(desired <= 1_000_000)
    }
}

/// What to call.
#[derive(Debug, Clone)]
pub struct CallRequest {
    /// The tool to call (a name the component lists).
    pub tool: String,
    /// The arguments, as JSON text.
    pub args: String,
    /// The thread the call belongs to.
    pub thread_id: String,
    /// The model's id for this call.
    pub tool_call_id: String,
    /// The tool's own config keys, JSON.
    pub config: String,
    /// The config's sandbox settings.
    pub sandbox: std::sync::Arc<SandboxSettings>,
    /// Where the call's progress reports go (thinned, see `progress`); `None`: nobody listens.
    pub progress: Option<ProgressSink>,
}

/// A call's result as the component returned it, its content blocks checked and converted
/// (`content`).
#[derive(Debug, Clone)]
pub struct RawResult {
    /// The content blocks, checked and converted.
    pub content: Vec<ContentPart>,
    /// The tool reports an error (`content` says why).
    pub is_error: bool,
    /// The state update the tool asks for, unchecked.
    pub update: Option<types::StateUpdate>,
    /// Wall time of the call, instantiation included.
    pub elapsed: Duration,
}

impl RawResult {
    /// The text blocks joined, as the model reads the result.
    pub fn text(&self) -> String {
        self.content
            .iter()
            .filter_map(|p| match p {
                ContentPart::Text { text } => Some(text.as_str()),
                _ => None,
            })
            .collect()
    }
}

/// Why a component call produced no result.
#[derive(Debug, thiserror::Error)]
pub enum ComponentCallError {
    #[error("timed out after {0:?} and was stopped")]
    /// The call ran past its `timeout_s`.
    Timeout(Duration),
    #[error("timed out after {timeout:?} waiting for a free slot ({queue}); it did not run")]
    /// No slot freed up within the call's timeout; `queue` names the queue it waited in.
    QueueTimeout {
        /// The call's timeout.
        timeout: Duration,
        /// The queue it waited in.
        queue: String,
    },
    #[error("held more than {0} open handles (files, directories, streams) at once and was stopped; capabilities.handles sets the limit")]
    /// The call held more open handles than `capabilities.handles` allows.
    TooManyHandles(usize),
    #[error("exceeded its memory limit of {0} MiB and was stopped")]
    /// The instance grew past its `memory_mb` (MiB).
    Memory(u64),
    #[error("returned {size} bytes of output, over its limit of {limit} bytes")]
    /// The result was larger than `output_bytes`.
    OutputTooLarge {
        /// The size returned, in bytes.
        size: u64,
        /// The limit, in bytes.
        limit: u64,
    },
    /// A result whose content blocks break the contract (see `content`).
    #[error("returned {0}")]
    InvalidContent(String),
    #[error("crashed: {0}")]
    /// The component trapped (a panic, an unreachable, a bad memory access).
    Trap(String),
    #[error("could not start: {0}")]
    /// The component could not be instantiated (an import not granted, a start trap).
    Instantiate(String),
    #[error("has no tool named '{0}'")]
    /// The component has no tool of that name.
    UnknownTool(String),
    #[error("rejected the arguments: {0}")]
    /// The component refused the arguments; the text names what is wrong.
    InvalidArguments(String),
    #[error("failed: {0}")]
    /// The tool failed; the text says why (`SomeError: detail` reads as a raised exception).
    Failed(String),
}

impl ComponentCallError {
    /// The Python exception DeerFlow would report for this failure.
    pub fn exception_class(&self) -> &'static str {
        match self {
            Self::Timeout(_) | Self::QueueTimeout { .. } => "TimeoutError",
            Self::Memory(_) => "MemoryError",
            Self::TooManyHandles(_) => "OSError",
            Self::InvalidContent(_) => "ValueError",
            _ => "RuntimeError",
        }
    }
}

fn new_store(
    rt: &Runtime,
    caps: &CapabilitySet,
    preopens: &[Preopen],
    label: &str,
    stderr: MemoryOutputPipe,
    deadline: Instant,
    progress: ProgressRelay,
) -> Result<Store<HostState>, ComponentCallError> {
    let ctx = caps.wasi_ctx(preopens, stderr).map_err(|e| ComponentCallError::Instantiate(format!("{e:#}")))?;
    let mut table = ResourceTable::new();
    table.set_max_capacity(caps.limits.handles);
    let state = HostState {
        ctx,
        table,
        limiter: Limiter { memory_bytes: usize::try_from(caps.limits.memory_bytes).unwrap_or(usize::MAX), hit: false },
        label: label.to_string(),
        http: wasmtime_wasi_http::WasiHttpCtx::new(),
        net: NetHooks::new(caps.network.clone(), rt.net().clone(), deadline),
        progress,
    };
    let mut store = Store::new(rt.engine(), state);
    store.limiter(|s| &mut s.limiter);
    let left = deadline.saturating_duration_since(Instant::now());
    let ticks = left.as_nanos().div_ceil(EPOCH_TICK.as_nanos()) as u64 + 1;
    store.set_epoch_deadline(ticks);
    store.epoch_deadline_trap();
    Ok(store)
}

/// Classify a failed call: the limiter and the epoch say more than the trap text.
fn classify(
    err: wasmtime::Error,
    store: &Store<HostState>,
    caps: &CapabilitySet,
    stderr: &MemoryOutputPipe,
) -> ComponentCallError {
    if store.data().limiter.hit {
        return ComponentCallError::Memory(caps.limits.memory_bytes >> 20);
    }
    if let Some(wasmtime::Trap::Interrupt) = err.downcast_ref::<wasmtime::Trap>() {
        return ComponentCallError::Timeout(caps.limits.timeout);
    }
    // wasmtime-wasi traps when the resource table is full (it cannot hand out a handle).
    if err.chain().any(|e| matches!(e.downcast_ref(), Some(wasmtime::component::ResourceTableError::Full))) {
        return ComponentCallError::TooManyHandles(caps.limits.handles);
    }
    let trap = err.downcast_ref::<wasmtime::Trap>().map(|t| t.to_string()).unwrap_or_else(|| format!("{err:#}"));
    let stderr = String::from_utf8_lossy(&stderr.contents()).into_owned();
    // A Rust guest's panic message is on its stderr; it says more than "unreachable".
    match stderr.lines().find(|l| l.contains("panicked at")) {
        Some(line) => {
            let tail: Vec<&str> = stderr.lines().skip_while(|l| !l.contains("panicked at")).take(3).collect();
            let _ = line;
            ComponentCallError::Trap(format!("{} ({trap})", tail.join(" ").trim()))
        }
        None => ComponentCallError::Trap(trap),
    }
}

/// Run a call's future on this (blocking) thread, bounded by `timeout` plus one epoch tick: the
/// epoch traps a guest that computes past its deadline, this bounds one that waits in the host.
fn run_bounded<F: std::future::Future>(timeout: Duration, fut: F) -> Option<F::Output> {
    wasmtime_wasi::runtime::in_tokio(async move { tokio::time::timeout(timeout + EPOCH_TICK, fut).await.ok() })
}

/// Call `req.tool` in a fresh instance; it must end by `deadline`.
pub fn call(
    rt: &Runtime,
    pre: &ToolPre,
    caps: &CapabilitySet,
    preopens: &[Preopen],
    label: &str,
    req: &CallRequest,
    deadline: Instant,
) -> Result<RawResult, ComponentCallError> {
    let start = Instant::now();
    let left = deadline.saturating_duration_since(start);
    if left.is_zero() {
        return Err(ComponentCallError::Timeout(caps.limits.timeout));
    }
    let stderr = MemoryOutputPipe::new(16 * 1024);
    let relay = ProgressRelay::new(req.progress.clone(), &req.tool_call_id);
    let mut store = new_store(rt, caps, preopens, label, stderr.clone(), deadline, relay)?;
    // This thread runs the guest's file I/O: past the deadline, a blocked system call is
    // interrupted so the epoch can end the call (see `watchdog`).
    let _watch = rt.watchdog().watch(deadline);
    let input = CallInput {
        thread_id: &req.thread_id,
        tool_call_id: &req.tool_call_id,
        config: &req.config,
        sandbox: &req.sandbox,
        tool: &req.tool,
        args: &req.args,
    };
    let outcome = run_bounded(left, pre.call(&mut store, &input));
    // Whatever the call's end, the report the rate held back is the component's last word.
    store.data_mut().progress.finish(label);
    let result = match outcome {
        None => return Err(ComponentCallError::Timeout(caps.limits.timeout)),
        Some(Err(Failure::Instantiate(e))) => {
            return Err(match classify(e, &store, caps, &stderr) {
                ComponentCallError::Trap(t) => ComponentCallError::Instantiate(t),
                other => other,
            })
        }
        Some(Err(Failure::Trap(e))) => Err(e),
        Some(Ok(result)) => Ok(result),
    };
    // When the call failed and the host refused an outbound request on the way, say so: the
    // guest only saw an error code, the model should see which rule refused what.
    let refused = || refusal_note(&store.data().net.refusals());
    match result {
        Err(e) => Err(match classify(e, &store, caps, &stderr) {
            ComponentCallError::Trap(t) => ComponentCallError::Trap(t + &refused()),
            other => other,
        }),
        Ok(Err(types::CallError::UnknownTool(t))) => Err(ComponentCallError::UnknownTool(t)),
        Ok(Err(types::CallError::InvalidArguments(m))) => Err(ComponentCallError::InvalidArguments(m)),
        Ok(Err(types::CallError::Failed(m))) => Err(ComponentCallError::Failed(m + &refused())),
        Ok(Ok(r)) => {
            let mut r = super::content::accept(r, caps.limits.output_bytes)?;
            if r.is_error {
                let note = refused();
                if !note.is_empty() {
                    match r.content.iter_mut().rev().find_map(|p| match p {
                        ContentPart::Text { text } => Some(text),
                        _ => None,
                    }) {
                        Some(text) => text.push_str(&note),
                        None => r.content.push(ContentPart::Text { text: note }),
                    }
                }
            }
            Ok(RawResult { content: r.content, is_error: r.is_error, update: r.update, elapsed: start.elapsed() })
        }
    }
}

/// `" (the host refused: …)"`, or nothing when nothing was refused.
fn refusal_note(refusals: &[String]) -> String {
    if refusals.is_empty() {
        return String::new();
    }
    format!("\n[toolhost] outbound request refused: {}", refusals.join("; "))
}

/// Instantiate once with no capabilities and ask for the tool list.
pub fn list_tools(rt: &Runtime, pre: &ToolPre) -> Result<Vec<ListedTool>, ComponentCallError> {
    let caps = CapabilitySet::default();
    let stderr = MemoryOutputPipe::new(16 * 1024);
    let deadline = Instant::now() + caps.limits.timeout;
    let mut store = new_store(rt, &caps, &[], "list-tools", stderr.clone(), deadline, ProgressRelay::new(None, ""))?;
    let run = async {
        match pre.list_tools(&mut store).await {
            Ok(specs) => Ok(Ok(specs)),
            Err(Failure::Instantiate(e)) => Err(ComponentCallError::Instantiate(format!("{e:#}"))),
            Err(Failure::Trap(e)) => Ok(Err(e)),
        }
    };
    // Loading may happen on an async worker (a host opened inside a runtime), which must not
    // block: list on a thread of its own.
    let listed = std::thread::scope(|scope| match tokio::runtime::Handle::try_current() {
        Ok(_) => scope
            .spawn(|| {
                let _watch = rt.watchdog().watch(deadline);
                run_bounded(caps.limits.timeout, run)
            })
            .join()
            .ok()
            .flatten(),
        Err(_) => {
            let _watch = rt.watchdog().watch(deadline);
            run_bounded(caps.limits.timeout, run)
        }
    });
    let specs = match listed {
        None => return Err(ComponentCallError::Timeout(caps.limits.timeout)),
        Some(r) => r?.map_err(|e| classify(e, &store, &caps, &stderr))?,
    };
    let mut tools = Vec::with_capacity(specs.len());
    for s in specs {
        let parameters: serde_json::Value = serde_json::from_str(&s.parameters).map_err(|e| {
            ComponentCallError::Failed(format!("tool '{}' lists a parameters schema that is not JSON: {e}", s.name))
        })?;
        if !parameters.is_object() {
            return Err(ComponentCallError::Failed(format!(
                "tool '{}' lists a parameters schema that is not a JSON object",
                s.name
            )));
        }
        tools.push(ListedTool { name: s.name, description: s.description, parameters });
    }
    Ok(tools)
}
