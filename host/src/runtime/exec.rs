//! One call of a component tool: a fresh store and instance from the component's
//! `InstancePre`, the WASI context of its capabilities, an epoch deadline, a memory limiter and an
//! output cap. Whatever the guest does — loop, allocate, trap, panic, return garbage — comes back
//! as a `ComponentCallError` naming what happened; the host keeps serving.

use std::time::{Duration, Instant};

use wasmtime::Store;
use wasmtime_wasi::p2::pipe::MemoryOutputPipe;

use toolhost_core::{CancelSignal, ContentPart, LogSink, ProgressSink};

use super::call_error::ComponentCallError;
use super::capabilities::{CapabilitySet, Preopen};
use super::client::ClientRelay;
use super::progress::ProgressRelay;
use super::store::{new_store, Caller, Cancelled, HostState, LogRelay};
use super::wit::v0_4::toolhost::tool::types;
use super::wit::{CallInput, Failure, SandboxSettings, ToolPre};
use super::{ListedTool, Runtime, EPOCH_TICK};

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
    /// Where the guest's log lines go besides the host's log (at most 1000 per call); `None`:
    /// the host's log only.
    pub log: Option<LogSink>,
    /// Raised when the caller gives the call up: the guest is stopped within one epoch tick
    /// (a system call it is blocked in is interrupted). `None`: the call runs to its end.
    pub cancel: Option<CancelSignal>,
    /// Whoever the guest may ask during the call (WIT `client`, when its grant allows);
    /// `None`: nobody, and the guest's requests fail saying so.
    pub client: Option<toolhost_core::Client>,
}

impl CallRequest {
    /// A call of `tool` with `args` (JSON text) in thread `t1` (call id `call_1`), with no config
    /// keys, the default sandbox settings, and nobody listening; set the fields that differ.
    pub fn new(tool: impl Into<String>, args: impl Into<String>) -> Self {
        Self {
            tool: tool.into(),
            args: args.into(),
            thread_id: "t1".into(),
            tool_call_id: "call_1".into(),
            config: "{}".into(),
            sandbox: Default::default(),
            progress: None,
            log: None,
            cancel: None,
            client: None,
        }
    }
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
    if err.downcast_ref::<Cancelled>().is_some() {
        return ComponentCallError::Cancelled;
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

/// Why [`run_bounded`] gave a call up.
enum GaveUp {
    Timeout,
    Cancelled,
}

/// Run a call's future on this (blocking) thread, bounded by `timeout` plus one epoch tick and
/// by `cancel`: the epoch traps a guest that computes past its deadline (or once cancelled),
/// this bounds one that waits in the host.
fn run_bounded<F: std::future::Future>(
    timeout: Duration,
    cancel: Option<&CancelSignal>,
    fut: F,
) -> Result<F::Output, GaveUp> {
    let cancelled = async move {
        match cancel {
            Some(c) => {
                while !c.is_cancelled() {
                    tokio::time::sleep(EPOCH_TICK).await;
                }
            }
            None => std::future::pending().await,
        }
    };
    wasmtime_wasi::runtime::in_tokio(async move {
        tokio::select! {
            r = tokio::time::timeout(timeout + EPOCH_TICK, fut) => r.map_err(|_| GaveUp::Timeout),
            () = cancelled => Err(GaveUp::Cancelled),
        }
    })
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
    if req.cancel.as_ref().is_some_and(CancelSignal::is_cancelled) {
        return Err(ComponentCallError::Cancelled);
    }
    let stderr = MemoryOutputPipe::new(16 * 1024);
    let relay = ProgressRelay::new(req.progress.clone(), &req.tool_call_id);
    let log = LogRelay::new(req.log.clone(), &req.tool_call_id, &req.tool);
    let client = ClientRelay::new(req.client.clone(), caps.client);
    let caller = Caller { progress: relay, log, cancel: req.cancel.clone(), client };
    let mut store = new_store(rt, caps, preopens, label, stderr.clone(), deadline, caller)?;
    // This thread runs the guest's file I/O: past the deadline (or once cancelled), a blocked
    // system call is interrupted so the epoch can end the call (see `watchdog`).
    let _watch = rt.watchdog().watch(deadline, req.cancel.clone());
    let input = CallInput {
        thread_id: &req.thread_id,
        tool_call_id: &req.tool_call_id,
        config: &req.config,
        sandbox: &req.sandbox,
        tool: &req.tool,
        args: &req.args,
    };
    let outcome = run_bounded(left, req.cancel.as_ref(), pre.call(&mut store, &input));
    // Whatever the call's end, the report the rate held back is the component's last word.
    store.data_mut().progress.finish(label);
    let result = match outcome {
        Err(GaveUp::Timeout) => return Err(ComponentCallError::Timeout(caps.limits.timeout)),
        Err(GaveUp::Cancelled) => return Err(ComponentCallError::Cancelled),
        Ok(Err(Failure::Instantiate(e))) => {
            return Err(match classify(e, &store, caps, &stderr) {
                ComponentCallError::Trap(t) => ComponentCallError::Instantiate(t),
                other => other,
            })
        }
        Ok(Err(Failure::Trap(e))) => Err(e),
        Ok(Ok(result)) => Ok(result),
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
    let mut store = new_store(
        rt,
        &caps,
        &[],
        "list-tools",
        stderr.clone(),
        deadline,
        Caller {
            progress: ProgressRelay::new(None, ""),
            log: LogRelay::new(None, "", ""),
            cancel: None,
            client: ClientRelay::new(None, Default::default()),
        },
    )?;
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
                let _watch = rt.watchdog().watch(deadline, None);
                run_bounded(caps.limits.timeout, None, run).ok()
            })
            .join()
            .ok()
            .flatten(),
        Err(_) => {
            let _watch = rt.watchdog().watch(deadline, None);
            run_bounded(caps.limits.timeout, None, run).ok()
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
