//! A tool of a wasm component, seen as a `Tool`: each call runs in a fresh instance on a
//! blocking thread, with the tool's capabilities, its thread's preopens and its limits.

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{Map, Value};
use toolhost_core::{
    CallContext, ContentPart, StateUpdate, Status, ThreadDir, Tool, ToolOutcome, ToolSpec, VIRTUAL_ACP,
};

use crate::runtime::{
    CallRequest, CapabilitySet, ComponentCallError, FilesGrant, LoadedComponent, Preopen, PreopenDir, Runtime,
    SandboxSettings,
};

/// A component tool.
pub struct ComponentTool {
    spec: ToolSpec,
    /// The tool's name inside the component (the bound name may differ only for DeerFlow paths).
    inner_name: String,
    runtime: Arc<Runtime>,
    component: Arc<LoadedComponent>,
    caps: CapabilitySet,
    config: String,
    sandbox: Arc<SandboxSettings>,
}

impl ComponentTool {
    /// `spec` is what the component says about its tool; its description and schema texts are
    /// neutralized here, as an MCP server's are, since both reach the model and MCP clients.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        mut spec: ToolSpec,
        inner_name: String,
        runtime: Arc<Runtime>,
        component: Arc<LoadedComponent>,
        caps: CapabilitySet,
        config: Map<String, Value>,
        sandbox: Arc<SandboxSettings>,
    ) -> Self {
        toolhost_core::untrusted::sanitize_tool_spec(&mut spec);
        Self { spec, inner_name, runtime, component, caps, config: Value::Object(config).to_string(), sandbox }
    }

    /// The preopens of a call in `ctx`'s thread: the thread filesystem layer's open directory
    /// handles (a thread directory swapped for a link is refused there, never followed), then the
    /// shared skills directory and mounts. Directories are created on first use.
    fn preopens(&self, ctx: &CallContext) -> Result<Vec<Preopen>, String> {
        if self.caps.fs == FilesGrant::None {
            return Ok(Vec::new());
        }
        let open = |dir: ThreadDir, guest: &str, read_only: bool| -> Result<Preopen, String> {
            let fd = ctx.fs.dir(dir).map_err(|e| e.to_string())?;
            Ok(Preopen { host: PreopenDir::Open(fd), guest: guest.into(), read_only })
        };
        if self.caps.fs == FilesGrant::Outputs {
            return Ok(vec![open(ThreadDir::Outputs, "/mnt/user-data/outputs", false)?]);
        }
        let mut out = vec![
            open(ThreadDir::Workspace, "/mnt/user-data/workspace", false)?,
            open(ThreadDir::Uploads, "/mnt/user-data/uploads", false)?,
            open(ThreadDir::Outputs, "/mnt/user-data/outputs", false)?,
            open(ThreadDir::Acp, VIRTUAL_ACP, true)?,
        ];
        let shared = ctx.fs.shared();
        for dir in shared.skills().into_iter().chain(shared.mounts()) {
            out.push(Preopen {
                host: PreopenDir::Open(dir.handle()),
                guest: dir.vpath.clone(),
                read_only: dir.read_only,
            });
        }
        Ok(out)
    }
}

/// `("SomeError", "detail")` when a component's `failed` message names an exception the way
/// the WIT documents: a class name ending in `Error` or `Exception`, then `: `.
fn exception_of(message: &str) -> Option<(&str, &str)> {
    let (class, detail) = message.split_once(": ")?;
    let valid = class.len() <= 64
        && class.starts_with(|c: char| c.is_ascii_uppercase())
        && class.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        && (class.ends_with("Error") || class.ends_with("Exception"));
    valid.then_some((class, detail))
}

/// The state update a component returned, in host terms. A component's update is input like
/// its content: artifacts must name paths under `/mnt/user-data/outputs`, and a viewed image must
/// resolve to a file inside the thread (its `actual_path` is the host's resolution, never the
/// component's claim).
fn convert_update(
    ctx: &CallContext,
    u: crate::runtime::wit::v0_4::toolhost::tool::types::StateUpdate,
) -> Result<StateUpdate, String> {
    let mut out = StateUpdate::default();
    if let Some(artifacts) = u.artifacts {
        for a in &artifacts {
            let normalized = toolhost_vpath::normalize(a);
            let inside = !toolhost_vpath::has_traversal(a)
                && toolhost_vpath::under(&normalized, "/mnt/user-data/outputs")
                && normalized != "/mnt/user-data/outputs";
            if !inside || normalized != *a {
                return Err(format!(
                    "returned an artifact that is not a file path under /mnt/user-data/outputs: {a:?}"
                ));
            }
        }
        out.artifacts = Some(artifacts);
    }
    if let Some(images) = u.viewed_images {
        let mut map = Map::new();
        for i in images {
            let resolved = ctx
                .fs
                .resolve(&i.path)
                .ok()
                .filter(|r| matches!(r.base, toolhost_core::threadfs::Base::Thread(d) if d != ThreadDir::Acp));
            let Some(resolved) = resolved else {
                return Err(format!("returned a viewed image outside the thread's user data: {:?}", i.path));
            };
            let actual = ctx.fs.host_path(&resolved);
            map.insert(
                i.path.clone(),
                serde_json::json!({"mime_type": i.mime_type, "size": i.size, "actual_path": actual.to_string_lossy()}),
            );
        }
        out.viewed_images = Some(map);
    }
    if let Some(todos) = u.todos {
        let v: Value = serde_json::from_str(&todos).map_err(|e| format!("returned todos that are not JSON: {e}"))?;
        if !v.is_array() {
            return Err("returned todos that are not a JSON array".into());
        }
        out.todos = Some(v);
    }
    Ok(out)
}

#[async_trait]
impl Tool for ComponentTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn call(&self, ctx: &CallContext, args: Value) -> ToolOutcome {
        let name = self.spec.name.clone();
        let preopens = match self.preopens(ctx) {
            Ok(p) => p,
            Err(e) => return ToolOutcome::raised("OSError", e),
        };
        let req = CallRequest {
            tool: self.inner_name.clone(),
            args: if args.is_null() { "{}".to_string() } else { args.to_string() },
            thread_id: ctx.thread_id.clone(),
            tool_call_id: ctx.tool_call_id.clone(),
            config: self.config.clone(),
            sandbox: self.sandbox.clone(),
            progress: ctx.progress.clone(),
            log: ctx.log.clone(),
            cancel: ctx.cancel.clone(),
            client: ctx.client.clone(),
        };
        // Wait in line (this thread's calls, then the host's) within the call's own timeout.
        let permit = match self.runtime.admit(&ctx.thread_id, self.caps.limits.timeout).await {
            Ok(p) => p,
            Err(e) => return ToolOutcome::raised(e.exception_class(), format!("component tool '{name}' {e}")),
        };
        let runtime = self.runtime.clone();
        let component = self.component.clone();
        let caps = self.caps.clone();
        let run = move || crate::runtime::exec_call_admitted(&runtime, &component, &caps, &preopens, &req, permit);
        // A lone call on a multi-threaded runtime runs right here (`block_in_place` hands this
        // worker's other tasks to another thread): no hand-off to a blocking thread and back,
        // about 40 µs on a 2-core VM. Concurrent calls of a turn each go to a blocking thread,
        // so they run in parallel.
        let inline = ctx.alone_in_turn
            && tokio::runtime::Handle::try_current()
                .is_ok_and(|h| h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread);
        let result = if inline {
            tokio::task::block_in_place(run)
        } else {
            match tokio::task::spawn_blocking(run).await {
                Ok(r) => r,
                Err(e) => return ToolOutcome::raised("RuntimeError", format!("tool '{name}' worker failed: {e}")),
            }
        };
        match result {
            Ok(raw) => {
                let update = match raw.update.map(|u| convert_update(ctx, u)).transpose() {
                    Ok(u) => u.unwrap_or_default(),
                    Err(e) => return ToolOutcome::raised("ValueError", format!("component tool '{name}' {e}")),
                };
                let paths = ctx.paths();
                let mut content: Vec<ContentPart> = raw
                    .content
                    .into_iter()
                    .map(|p| match p {
                        ContentPart::Text { text } => ContentPart::Text { text: paths.mask(&text) },
                        other => other,
                    })
                    .collect();
                if content.is_empty() {
                    // A ToolMessage always has content: no blocks read as DeerFlow's empty string.
                    content.push(ContentPart::Text { text: String::new() });
                }
                let status = if raw.is_error { Status::Error } else { Status::Success };
                ToolOutcome { content, status, ..ToolOutcome::default() }.with_update(update)
            }
            Err(ComponentCallError::InvalidArguments(m)) => {
                ToolOutcome::error_of(toolhost_core::ErrorKind::InvalidArguments, format!("Error: {m}"))
            }
            Err(e) => {
                if let ComponentCallError::Failed(m) = &e {
                    if let Some((class, detail)) = exception_of(m) {
                        return ToolOutcome::raised(class, ctx.paths().mask(detail));
                    }
                }
                let crashed = matches!(e, ComponentCallError::Trap(_));
                let mut outcome = ToolOutcome::raised(e.exception_class(), format!("component tool '{name}' {e}"));
                if crashed {
                    outcome.kind = Some(toolhost_core::ErrorKind::Crashed);
                }
                outcome
            }
        }
    }
}
