//! The data of one call's store — WASI state, the memory limiter, the tool's label for logs, the
//! outbound-network hooks and where progress reports go — and the fresh store each call (and
//! each tool listing) runs in, with its epoch deadline set.

use std::time::Instant;

use wasmtime::component::ResourceTable;
use wasmtime::{ResourceLimiter, Store};
use wasmtime_wasi::p2::pipe::MemoryOutputPipe;
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use toolhost_core::{CancelSignal, LogLevel, LogLine, LogSink};

use super::call_error::ComponentCallError;
use super::capabilities::{CapabilitySet, Preopen};
use super::client::ClientRelay;
use super::net::NetHooks;
use super::progress::ProgressRelay;
use super::{Runtime, EPOCH_TICK};

/// The data of one store: WASI state, the limiter, the tool's label for logs, and where its
/// progress reports go.
pub struct HostState {
    ctx: WasiCtx,
    table: ResourceTable,
    pub(super) limiter: Limiter,
    label: String,
    http: wasmtime_wasi_http::WasiHttpCtx,
    pub(super) net: NetHooks,
    pub(super) progress: ProgressRelay,
    log: LogRelay,
    pub(super) client: ClientRelay,
}

/// Where a call's log lines go besides the host's log (`CallRequest::log`), at most
/// [`LogRelay::MAX_LINES`] per call: a guest in a loop cannot flood the caller.
pub(super) struct LogRelay {
    sink: Option<LogSink>,
    tool_call_id: String,
    tool: String,
    sent: u32,
}

impl LogRelay {
    const MAX_LINES: u32 = 1000;

    pub fn new(sink: Option<LogSink>, tool_call_id: &str, tool: &str) -> Self {
        Self { sink, tool_call_id: tool_call_id.to_string(), tool: tool.to_string(), sent: 0 }
    }

    fn write(&mut self, level: LogLevel, message: String) {
        let Some(sink) = &self.sink else { return };
        self.sent = self.sent.saturating_add(1);
        let message = match self.sent {
            n if n < Self::MAX_LINES => message,
            n if n == Self::MAX_LINES => {
                format!("[toolhost] {} log lines in this call: the rest go to the host's log only", Self::MAX_LINES)
            }
            _ => return,
        };
        sink.write(LogLine { tool_call_id: self.tool_call_id.clone(), tool: self.tool.clone(), level, message });
    }
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

    pub(super) fn write_log(&mut self, level: LogLevel, message: &str) {
        let message: String = message.chars().take(4096).collect();
        let label = &self.label;
        match level {
            LogLevel::Trace => tracing::trace!(component = %label, "{message}"),
            LogLevel::Debug => tracing::debug!(component = %label, "{message}"),
            LogLevel::Info => tracing::info!(component = %label, "{message}"),
            LogLevel::Warn => tracing::warn!(component = %label, "{message}"),
            LogLevel::Error => tracing::error!(component = %label, "{message}"),
        }
        self.log.write(level, message);
    }

    pub(super) fn report_progress(&mut self, progress: f64, total: Option<f64>, message: Option<String>) {
        self.progress.report(progress, total, message);
    }
}

/// Refuses memory growth past the limit and remembers that it did, so the error can say so.
pub(super) struct Limiter {
    memory_bytes: usize,
    pub(super) hit: bool,
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

/// How a call's caller follows it: where its progress and log lines go, and the signal that
/// stops it.
pub(super) struct Caller {
    pub progress: ProgressRelay,
    pub log: LogRelay,
    pub cancel: Option<CancelSignal>,
    pub client: ClientRelay,
}

/// A fresh store for one call of a tool with `caps`, ending at `deadline`.
pub(super) fn new_store(
    rt: &Runtime,
    caps: &CapabilitySet,
    preopens: &[Preopen],
    label: &str,
    stderr: MemoryOutputPipe,
    deadline: Instant,
    caller: Caller,
) -> Result<Store<HostState>, ComponentCallError> {
    let Caller { progress, log, cancel, client } = caller;
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
        log,
        client,
    };
    let mut store = Store::new(rt.engine(), state);
    store.limiter(|s| &mut s.limiter);
    let left = deadline.saturating_duration_since(Instant::now());
    let ticks = left.as_nanos().div_ceil(EPOCH_TICK.as_nanos()) as u64 + 1;
    match cancel {
        None => {
            store.set_epoch_deadline(ticks);
            store.epoch_deadline_trap();
        }
        // A call its caller may give up: looked at every tick, stopped once the caller raises
        // the signal, or at its deadline like any other.
        Some(cancel) => {
            let mut left_ticks = ticks;
            store.set_epoch_deadline(1);
            store.epoch_deadline_callback(move |_| {
                left_ticks = left_ticks.saturating_sub(1);
                if cancel.is_cancelled() {
                    return Err(wasmtime::Error::new(Cancelled));
                }
                if left_ticks == 0 {
                    return Err(wasmtime::Trap::Interrupt.into());
                }
                Ok(wasmtime::UpdateDeadline::Continue(1))
            });
        }
    }
    Ok(store)
}

/// The error a call's guest code stops with when its caller cancelled it.
#[derive(Debug)]
pub(super) struct Cancelled;

impl std::fmt::Display for Cancelled {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the call was cancelled")
    }
}

impl std::error::Error for Cancelled {}
