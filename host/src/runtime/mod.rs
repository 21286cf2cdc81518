//! The component runtime: one wasmtime engine, the component store (digest pins, the on-disk
//! precompile cache, one `InstancePre` per component), and per-call execution in a fresh store
//! and instance with the tool's capabilities and limits.

mod admission;
mod cache;
mod call_error;
pub mod capabilities;
mod client;
pub(crate) mod content;
mod exec;
mod net;
pub(crate) mod progress;
#[cfg(unix)]
mod readdir;
mod store;
mod watchdog;
pub(crate) mod wit;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sha2::{Digest, Sha256};
use toolhost_engine::{config as engine_config, Allocation};
use wasmtime::component::{Component, Linker};
use wasmtime::Engine;

pub use admission::{CallPermit, ConcurrencyLimits, ToolhostConfig};
pub use call_error::ComponentCallError;
pub use capabilities::limits::{MAX_CONCURRENT_CALLS, MAX_MEMORY_BYTES};
pub use capabilities::{
    CallLimits, CapabilitiesConfig, CapabilitySet, FilesGrant, Preopen, PreopenDir, DEFAULT_HANDLES,
};
pub use exec::{CallRequest, RawResult};
pub use toolhost_net::{forbidden_address, HostRule, NetGrant};
pub use wit::{InterfaceVersion, SandboxMount, SandboxSettings};

/// How often the epoch ticks. Deadlines are whole ticks, so a call overruns its timeout by at
/// most one tick.
pub const EPOCH_TICK: Duration = Duration::from_millis(5);

/// Which component file a tool comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ComponentRef {
    /// Shipped with toolhost (`sandbox-fs`, `community`, `hello`).
    Bundled(String),
    /// A file, optionally pinned to a sha256 digest (lower-case hex).
    File {
        /// The file.
        path: PathBuf,
        /// A sha256 to pin (lower-case hex); loading fails on any other.
        sha256: Option<String>,
    },
    /// A component in an OCI registry (`oci://REGISTRY/REPO:TAG[@sha256:DIGEST]`). Its bytes
    /// are pulled and checked by [`crate::provenance::Fetcher`], then given to
    /// [`Runtime::load_bytes`].
    Oci(toolhost_oci::Reference),
}

impl std::fmt::Display for ComponentRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ComponentRef::Bundled(n) => write!(f, "{n}"),
            ComponentRef::File { path, sha256: Some(h) } => write!(f, "{}@sha256:{h}", path.display()),
            ComponentRef::File { path, sha256: None } => write!(f, "{}", path.display()),
            ComponentRef::Oci(r) => write!(f, "{r}"),
        }
    }
}

/// Why a runtime could not be built: the extra CA certificates cannot be used, or the engine
/// cannot be set up on this machine. The text says which.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct RuntimeError(String);

/// What can go wrong loading a component.
#[derive(Debug, thiserror::Error)]
pub enum ComponentLoadError {
    #[error("cannot read component {path}: {source}")]
    /// The file cannot be read.
    Read {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    #[error("component {component}: sha256 is {actual}, but the config pins {expected}; refusing to load it")]
    /// The file's sha256 is not the one the config pins.
    DigestMismatch {
        /// The component.
        component: String,
        /// The sha256 the config pins.
        expected: String,
        /// The file's sha256.
        actual: String,
    },
    #[error("component {0} comes from a registry: pull it with provenance::Fetcher and load its bytes with Runtime::load_bytes")]
    /// `load` was given an OCI reference, whose bytes it does not fetch.
    NotPulled(String),
    #[error("no bundled component named '{0}' (bundled: {1})")]
    /// No bundled component has that name (the second field lists those that exist).
    UnknownBundled(String, String),
    #[error("component {component} is not a valid toolhost tool component: {message}")]
    /// The bytes are not a component of the `tool-component` world.
    Invalid {
        /// The component.
        component: String,
        /// What is wrong.
        message: String,
    },
}

/// Why `bytes` cannot be a component, said plainly, when their header already shows it (the
/// parser's own message prints the header as a byte array): not WebAssembly at all, or a core
/// module.
fn not_a_component(bytes: &[u8]) -> Option<String> {
    const MAGIC: &[u8] = b"\0asm";
    const COMPONENT: [u8; 4] = [0x0d, 0x00, 0x01, 0x00];
    const CORE_MODULE: [u8; 4] = [0x01, 0x00, 0x00, 0x00];
    if !bytes.starts_with(MAGIC) {
        let start: String = String::from_utf8_lossy(&bytes[..bytes.len().min(8)]).escape_debug().collect();
        return Some(if bytes.is_empty() {
            "the file is empty; expected a WebAssembly component (wasm32-wasip2, as `toolhost build` writes)".into()
        } else {
            format!(
                "not WebAssembly: a component starts with the bytes \\0asm, this file with \"{start}\"; expected \
                 a WebAssembly component (wasm32-wasip2, as `toolhost build` writes)"
            )
        });
    }
    match bytes.get(4..8) {
        Some(v) if v == CORE_MODULE => Some(
            "a core WebAssembly module, not a component: build for wasm32-wasip2 (`toolhost build`), or wrap a \
             wasip1 module with `wasm-tools component new`"
                .into(),
        ),
        Some(v) if v == COMPONENT => None,
        // Another version or layer: the parser says which.
        _ => None,
    }
}

/// A compiled component ready to instantiate, with the tools it lists.
pub struct LoadedComponent {
    /// How errors name it (a bundled name or a path).
    pub label: String,
    /// The sha256 of its bytes (lower-case hex).
    pub sha256: String,
    /// The version of `toolhost:tool` it exports.
    pub interface: InterfaceVersion,
    /// Linked and ready to instantiate, once compiled.
    pre: Prepared,
    /// The tools it lists.
    pub tools: Vec<ListedTool>,
    /// Whether this load compiled (false: it came from the precompile cache).
    pub compiled: bool,
}

/// A component's linked code: ready at load, or being compiled in the background while its
/// tools are listed from the specs kept by digest (see [`Runtime::load_bytes`]).
enum Prepared {
    Ready(wit::ToolPre),
    Compiling(Arc<std::sync::OnceLock<Result<wit::ToolPre, String>>>),
}

impl LoadedComponent {
    /// The linked component, waiting for its compilation if it is still running.
    pub fn pre(&self) -> Result<&wit::ToolPre, ComponentCallError> {
        match &self.pre {
            Prepared::Ready(pre) => Ok(pre),
            Prepared::Compiling(cell) => {
                // The background thread sets the cell whatever happens; a compile takes tens or
                // hundreds of milliseconds, so polling costs nothing that shows.
                let done = loop {
                    if let Some(done) = cell.get() {
                        break done;
                    }
                    std::thread::sleep(Duration::from_millis(2));
                };
                done.as_ref().map_err(|e| ComponentCallError::Instantiate(e.clone()))
            }
        }
    }
}

/// What is kept by digest so that listing a component's tools never waits for its compilation.
#[derive(serde::Serialize, serde::Deserialize)]
struct Specs {
    /// `InterfaceVersion::package()`.
    interface: String,
    tools: Vec<ListedTool>,
}

/// One tool as a component lists it.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct ListedTool {
    /// The tool's name.
    pub name: String,
    /// What the model reads about it.
    pub description: String,
    /// JSON Schema of the arguments.
    pub parameters: serde_json::Value,
}

/// The runtime: engine, linker, precompile cache, loaded components, and the queues and
/// watchdog that bound running calls.
pub struct Runtime {
    engine: Engine,
    linker: Linker<store::HostState>,
    cache: Option<cache::Cache>,
    components: Mutex<HashMap<String, Arc<LoadedComponent>>>,
    pooling: bool,
    net: Arc<net::NetShared>,
    admission: admission::Admission,
    watchdog: Arc<watchdog::Watchdog>,
    /// Warnings for the host to report (a refused cache, a rejected artifact), until taken.
    warnings: Mutex<Vec<String>>,
    /// The engine's compatibility hash: which precompiled artifacts it may load.
    engine_hash: u64,
    /// How many components this runtime has compiled (rather than loaded precompiled).
    compiles: std::sync::atomic::AtomicU64,
    /// This runtime, for the background compiles it starts.
    this: std::sync::Weak<Runtime>,
}

/// How to build a [`Runtime`].
#[derive(Debug, Clone, Default)]
pub struct RuntimeOptions {
    /// Precompiled artifacts (`None`: compile every time).
    pub cache_dir: Option<PathBuf>,
    /// Where the key that authenticates them is kept, outside the cache (`None`: `keys/` beside
    /// `cache_dir`).
    pub cache_keys_dir: Option<PathBuf>,
    /// A PEM file of CA certificates that components' outbound HTTPS trusts besides the web PKI
    /// roots (a private CA, a TLS-inspecting proxy, a test server).
    pub extra_ca_certs: Option<PathBuf>,
    /// How many calls run at once, overall and per thread.
    pub concurrency: ConcurrencyLimits,
}

impl Runtime {
    /// Build the engine. `cache_dir` holds precompiled artifacts (`None`: compile every time).
    pub fn new(cache_dir: Option<PathBuf>) -> Result<Arc<Self>, RuntimeError> {
        Self::with_options(RuntimeOptions { cache_dir, ..Default::default() })
    }

    /// Build the engine; outbound HTTPS of components also trusts the CA certificates in the
    /// PEM file `extra_ca_certs` (a private CA, a TLS-inspecting proxy, a test server).
    pub fn with_extra_ca_certs(
        cache_dir: Option<PathBuf>,
        extra_ca_certs: Option<&Path>,
    ) -> Result<Arc<Self>, RuntimeError> {
        Self::with_options(RuntimeOptions {
            cache_dir,
            extra_ca_certs: extra_ca_certs.map(Path::to_path_buf),
            ..Default::default()
        })
    }

    /// A runtime built as `opts` says.
    pub fn with_options(opts: RuntimeOptions) -> Result<Arc<Self>, RuntimeError> {
        Self::build(opts).map_err(|e| RuntimeError(format!("{e:#}")))
    }

    fn build(opts: RuntimeOptions) -> anyhow::Result<Arc<Self>> {
        // Prefer pooling with resident slots reset via PAGEMAP_SCAN; without that ioctl, plain
        // pooling (resident slots would be reset by memset of their whole low region, slower
        // than madvise); without pooling (address space limits), on-demand allocation.
        let (engine, pooling) = match Engine::new(&engine_config(Allocation::PoolingResident)) {
            Ok(e) => (e, true),
            Err(e) => {
                tracing::debug!("PAGEMAP_SCAN unavailable ({e:#}); pooling slots are reset with madvise");
                match Engine::new(&engine_config(Allocation::Pooling)) {
                    Ok(e) => (e, true),
                    Err(e) => {
                        tracing::warn!("pooling allocator unavailable ({e:#}); using on-demand allocation");
                        (Engine::new(&engine_config(Allocation::OnDemand))?, false)
                    }
                }
            }
        };
        Self::with_engine(opts, engine, pooling)
    }

    fn with_engine(opts: RuntimeOptions, engine: Engine, pooling: bool) -> anyhow::Result<Arc<Self>> {
        let net = Arc::new(net::NetShared::new(opts.extra_ca_certs.as_deref())?);
        let mut linker: Linker<store::HostState> = Linker::new(&engine);
        wasmtime_wasi::p2::add_to_linker_async(&mut linker)?;
        // Listings take each entry's type from `getdents` instead of a `statx` per entry.
        #[cfg(unix)]
        readdir::add_to_linker(&mut linker)?;
        // Always linked, so a component that imports wasi:http loads; whether a request may leave
        // is decided per call by the tool's network grant (see `net`).
        wasmtime_wasi_http::p2::add_only_http_to_linker_async(&mut linker)?;
        wit::add_to_linker(&mut linker)?;
        let mut warnings = Vec::new();
        let cache =
            opts.cache_dir.as_deref().and_then(|dir| match cache::Cache::open(dir, opts.cache_keys_dir.as_deref()) {
                Ok(c) => Some(c),
                Err(why) => {
                    let w = format!(
                        "precompile cache {} not used: {why}; components are compiled in memory",
                        dir.display()
                    );
                    tracing::warn!("{w}");
                    warnings.push(w);
                    None
                }
            });
        let rt = Arc::new_cyclic(|this| Self {
            engine: engine.clone(),
            linker,
            cache,
            components: Mutex::new(HashMap::new()),
            pooling,
            net,
            admission: admission::Admission::new(opts.concurrency),
            watchdog: Arc::new(watchdog::Watchdog::new()),
            warnings: Mutex::new(warnings),
            engine_hash: toolhost_engine::compatibility_hash(&engine),
            compiles: Default::default(),
            this: this.clone(),
        });
        rt.start_ticker();
        Ok(rt)
    }

    /// Warnings about the runtime the host should show (a precompile cache that is not used, an
    /// artifact that failed its integrity check), each returned once.
    pub fn take_warnings(&self) -> Vec<String> {
        std::mem::take(&mut *self.warnings.lock().unwrap_or_else(|p| p.into_inner()))
    }

    fn warn(&self, w: String) {
        tracing::warn!("{w}");
        self.warnings.lock().unwrap_or_else(|p| p.into_inner()).push(w);
    }

    /// The concurrency limits calls are admitted under.
    pub fn concurrency(&self) -> ConcurrencyLimits {
        self.admission.limits()
    }

    /// Wait for a slot to run a call in `thread_id` (fair queues: the thread's, then the
    /// process's), for at most `timeout`. The permit carries the call's deadline; pass it to
    /// [`exec_call_admitted`].
    pub async fn admit(&self, thread_id: &str, timeout: Duration) -> Result<CallPermit, ComponentCallError> {
        self.admission.admit(thread_id, timeout).await
    }

    /// Answer these host names from the table instead of DNS, for components' requests and
    /// lookups alike (an embedder's fixed service addresses, a test's loopback server). The
    /// address rules still apply to what the table says.
    pub fn set_static_hosts(&self, hosts: HashMap<String, Vec<std::net::IpAddr>>) {
        self.net.set_static_hosts(hosts);
    }

    /// Whether instances come from the pooling allocator.
    pub fn pooling(&self) -> bool {
        self.pooling
    }

    /// The wasmtime engine.
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    fn net(&self) -> &Arc<net::NetShared> {
        &self.net
    }

    /// One background thread advances the epoch of the engine (deadlines are counted in ticks)
    /// and interrupts calls blocked in a system call past their deadline.
    fn start_ticker(self: &Arc<Self>) {
        let engine = self.engine.clone();
        let watchdog = self.watchdog.clone();
        let weak = Arc::downgrade(self);
        std::thread::Builder::new()
            .name("toolhost-epoch".into())
            .spawn(move || {
                // Ticks follow the clock, not the count of sleeps: on a loaded machine a 5 ms
                // sleep can take several, and deadlines counted in ticks would drift late.
                let start = std::time::Instant::now();
                let mut ticks: u128 = 0;
                while weak.strong_count() > 0 {
                    std::thread::sleep(EPOCH_TICK);
                    let now = std::time::Instant::now();
                    let due = (now - start).as_nanos() / EPOCH_TICK.as_nanos();
                    while ticks < due {
                        engine.increment_epoch();
                        ticks += 1;
                    }
                    watchdog.tick(now);
                }
            })
            .ok();
    }

    fn watchdog(&self) -> &watchdog::Watchdog {
        &self.watchdog
    }

    /// Load (or fetch from memory) a component: check its pin, compile or load from the cache,
    /// pre-link it and list its tools.
    pub fn load(
        &self,
        component: &ComponentRef,
        bytes_of_bundled: &dyn Fn(&str) -> Option<&'static [u8]>,
    ) -> Result<Arc<LoadedComponent>, ComponentLoadError> {
        let bytes: std::borrow::Cow<'static, [u8]> = match component {
            ComponentRef::Bundled(name) => match bytes_of_bundled(name) {
                Some(b) => std::borrow::Cow::Borrowed(b),
                None => {
                    return Err(ComponentLoadError::UnknownBundled(name.clone(), crate::bundled::names().join(", ")))
                }
            },
            ComponentRef::File { path, .. } => std::fs::read(path)
                .map(std::borrow::Cow::Owned)
                .map_err(|source| ComponentLoadError::Read { path: path.clone(), source })?,
            ComponentRef::Oci(_) => return Err(ComponentLoadError::NotPulled(component.to_string())),
        };
        self.load_bytes(component, bytes)
    }

    /// Load a component from bytes already read (and, for a file or an OCI artifact, already
    /// checked against the trust policy): check a file's pin, compile or load from the cache,
    /// pre-link it and list its tools.
    pub fn load_bytes(
        &self,
        component: &ComponentRef,
        bytes: std::borrow::Cow<'_, [u8]>,
    ) -> Result<Arc<LoadedComponent>, ComponentLoadError> {
        let label = component.to_string();
        let sha256 = hex::encode(Sha256::digest(&bytes));
        if let ComponentRef::File { sha256: Some(expected), .. } = component {
            if *expected != sha256 {
                return Err(ComponentLoadError::DigestMismatch {
                    component: label,
                    expected: expected.clone(),
                    actual: sha256,
                });
            }
        }
        if let Some(found) = self.components.lock().unwrap_or_else(|p| p.into_inner()).get(&sha256) {
            return Ok(found.clone());
        }
        let bundled = matches!(component, ComponentRef::Bundled(_));
        let loaded = match self.precompiled(&sha256, &label, bundled) {
            Some(c) => self.prepare(c, label, &sha256, false)?,
            // Not compiled for this engine yet: when its specs are kept, list them now and compile
            // in the background; calls wait for it.
            None => match (self.stored_specs(&sha256), self.this.upgrade()) {
                (Some((interface, tools)), Some(rt)) => {
                    let cell = Arc::new(std::sync::OnceLock::new());
                    let (job, owned, digest, name) = (cell.clone(), bytes.to_vec(), sha256.clone(), label.clone());
                    let spawned = std::thread::Builder::new().name("toolhost-compile".into()).spawn(move || {
                        job.get_or_init(|| {
                            // Set even if compiling panics: callers wait for the cell.
                            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                                let c = rt.compile_into_cache(&owned, &digest, &name).map_err(|e| e.to_string())?;
                                rt.link(&c, interface, &name).map_err(|e| e.to_string())
                            }))
                            .unwrap_or_else(|_| Err(format!("compiling {name} failed")))
                        });
                    });
                    if spawned.is_err() {
                        let c = self.compile_into_cache(&bytes, &sha256, &label)?;
                        self.prepare(c, label, &sha256, true)?
                    } else {
                        LoadedComponent {
                            label,
                            sha256: sha256.clone(),
                            interface,
                            pre: Prepared::Compiling(cell),
                            tools,
                            compiled: true,
                        }
                    }
                }
                _ => {
                    let c = self.compile_into_cache(&bytes, &sha256, &label)?;
                    self.prepare(c, label, &sha256, true)?
                }
            },
        };
        let loaded = Arc::new(loaded);
        self.components.lock().unwrap_or_else(|p| p.into_inner()).insert(sha256, loaded.clone());
        Ok(loaded)
    }

    /// Link a compiled component and list its tools (running it), keeping the specs by digest.
    fn prepare(
        &self,
        c: Component,
        label: String,
        sha256: &str,
        compiled: bool,
    ) -> Result<LoadedComponent, ComponentLoadError> {
        let invalid = |message: String| ComponentLoadError::Invalid { component: label.clone(), message };
        let interface = wit::detect(c.component_type().exports(&self.engine).map(|(name, _)| name)).map_err(invalid)?;
        let pre = self.link(&c, interface, &label)?;
        let tools = exec::list_tools(self, &pre).map_err(|e| invalid(e.to_string()))?;
        if let Some(cache) = &self.cache {
            let name = cache::specs_name(sha256);
            if !matches!(cache.load_bytes(&name), Ok(Some(_))) {
                let specs = Specs { interface: interface.package().to_string(), tools: tools.clone() };
                if let Err(e) =
                    serde_json::to_vec(&specs).map_err(|e| e.to_string()).and_then(|b| cache.store_bytes(&name, &b))
                {
                    tracing::warn!("{e}; {label}'s tools will be listed by running it next time");
                }
            }
        }
        Ok(LoadedComponent { label, sha256: sha256.to_string(), interface, pre: Prepared::Ready(pre), tools, compiled })
    }

    fn link(
        &self,
        c: &Component,
        interface: InterfaceVersion,
        label: &str,
    ) -> Result<wit::ToolPre, ComponentLoadError> {
        let invalid = |e: wasmtime::Error| ComponentLoadError::Invalid {
            component: label.to_string(),
            message: format!("{e:#}"),
        };
        let instance_pre = self.linker.instantiate_pre(c).map_err(invalid)?;
        wit::ToolPre::new(interface, instance_pre).map_err(invalid)
    }

    /// The specs kept for `sha256`, if genuine (a file that is not is removed and reported).
    fn stored_specs(&self, sha256: &str) -> Option<(InterfaceVersion, Vec<ListedTool>)> {
        let cache = self.cache.as_ref()?;
        let name = cache::specs_name(sha256);
        let bytes = match cache.load_bytes(&name) {
            Ok(b) => b?,
            Err(why) => {
                self.warn(format!("tool specs {} rejected: {why}", cache.dir().join(&name).display()));
                return None;
            }
        };
        let specs: Specs = serde_json::from_slice(&bytes).ok()?;
        let interface =
            [InterfaceVersion::V0_1, InterfaceVersion::V0_2, InterfaceVersion::V0_3, InterfaceVersion::V0_4]
                .into_iter()
                .find(|v| v.package() == specs.interface)?;
        Some((interface, specs.tools))
    }

    /// How many components this runtime has compiled so far; loads of precompiled code (built
    /// into the binary or from the cache) do not count.
    pub fn compile_count(&self) -> u64 {
        self.compiles.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The native code built into the binary for a bundled component with these bytes, when
    /// this engine can run it.
    fn precompiled_bundled(&self, sha256: &str) -> Option<Component> {
        let artifact = crate::bundled::precompiled(sha256, self.engine_hash)?;
        // SAFETY: the artifact is part of this binary, made by its build script from the
        // component whose digest is `sha256` for an engine of this compatibility hash; it is as
        // trusted as the binary itself. wasmtime checks its header and engine settings again.
        match unsafe { Component::deserialize(&self.engine, artifact) } {
            Ok(c) => Some(c),
            Err(e) => {
                tracing::debug!("built-in precompiled code of {sha256} not used: {e:#}");
                None
            }
        }
    }

    /// The component's native code without compiling: built into the binary (`bundled`) or a
    /// genuine artifact of the cache. A rejected artifact is removed and reported.
    fn precompiled(&self, sha256: &str, label: &str, bundled: bool) -> Option<Component> {
        if let Some(c) = bundled.then(|| self.precompiled_bundled(sha256)).flatten() {
            return Some(c);
        }
        let cache = self.cache.as_ref()?;
        let name = cache::artifact_name(&self.engine, sha256);
        match cache.load(&self.engine, &name) {
            cache::Lookup::Hit(c) => Some(c),
            cache::Lookup::Miss => None,
            cache::Lookup::Rejected(why) => {
                self.warn(format!(
                    "precompiled artifact {} rejected: {why}; {label} was compiled again",
                    cache.dir().join(&name).display()
                ));
                None
            }
        }
    }

    /// Compile the component and keep its artifact in the cache.
    fn compile_into_cache(&self, bytes: &[u8], sha256: &str, label: &str) -> Result<Component, ComponentLoadError> {
        if let Some(why) = not_a_component(bytes) {
            return Err(ComponentLoadError::Invalid { component: label.to_string(), message: why });
        }
        self.compiles.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let component = Component::new(&self.engine, bytes)
            .map_err(|e| ComponentLoadError::Invalid { component: label.to_string(), message: format!("{e:#}") })?;
        if let Some(cache) = &self.cache {
            if let Err(e) = cache.store(&component, &cache::artifact_name(&self.engine, sha256)) {
                tracing::warn!("{e}; {label} will be compiled again next time");
            }
        }
        Ok(component)
    }

    /// Inspect a component file: its tools, imports and sha256.
    pub fn inspect(&self, path: &Path) -> Result<Inspection, ComponentLoadError> {
        let bytes =
            std::fs::read(path).map_err(|source| ComponentLoadError::Read { path: path.to_path_buf(), source })?;
        self.inspect_bytes(&ComponentRef::File { path: path.to_path_buf(), sha256: None }, &bytes)
    }

    /// Inspect a component's bytes (already checked against the trust policy): its tools,
    /// imports and sha256.
    pub fn inspect_bytes(&self, component: &ComponentRef, bytes: &[u8]) -> Result<Inspection, ComponentLoadError> {
        let sha256 = hex::encode(Sha256::digest(bytes));
        let label = component.to_string();
        let bundled = matches!(component, ComponentRef::Bundled(_));
        let compiled = match self.precompiled(&sha256, &label, bundled) {
            Some(c) => c,
            None => self.compile_into_cache(bytes, &sha256, &label)?,
        };
        let ty = compiled.component_type();
        let imports = ty.imports(&self.engine).map(|(name, _)| name.to_string()).collect();
        let exports = ty.exports(&self.engine).map(|(name, _)| name.to_string()).collect();
        let loaded = self.load_bytes(component, std::borrow::Cow::Borrowed(bytes))?;
        Ok(Inspection {
            sha256,
            imports,
            exports,
            interface: loaded.interface,
            tools: loaded.tools.clone(),
            size: bytes.len(),
        })
    }
}

/// What `toolhost inspect` prints.
#[derive(Debug, Clone)]
pub struct Inspection {
    /// The sha256 of its bytes (lower-case hex).
    pub sha256: String,
    /// Its size in bytes.
    pub size: usize,
    /// The interfaces it imports.
    pub imports: Vec<String>,
    /// The interfaces it exports.
    pub exports: Vec<String>,
    /// The version of `toolhost:tool` it exports.
    pub interface: InterfaceVersion,
    /// The tools it lists.
    pub tools: Vec<ListedTool>,
}

/// Call a tool of a loaded component (blocking; run it off the async executor), with the
/// call's whole timeout from now. This bypasses the concurrency queues: the host admits its
/// calls first ([`Runtime::admit`], then [`exec_call_admitted`]).
pub fn exec_call(
    rt: &Runtime,
    component: &LoadedComponent,
    caps: &CapabilitySet,
    preopens: &[Preopen],
    req: &CallRequest,
) -> Result<RawResult, ComponentCallError> {
    let deadline = std::time::Instant::now() + caps.limits.timeout;
    exec::call(rt, component.pre()?, caps, preopens, &component.label, req, deadline)
}

/// [`exec_call`] for a call admitted by [`Runtime::admit`]: it ends by the permit's deadline
/// (time spent waiting in line counts), and its slot is freed when it returns.
pub fn exec_call_admitted(
    rt: &Runtime,
    component: &LoadedComponent,
    caps: &CapabilitySet,
    preopens: &[Preopen],
    req: &CallRequest,
    permit: CallPermit,
) -> Result<RawResult, ComponentCallError> {
    exec::call(rt, component.pre()?, caps, preopens, &component.label, req, permit.deadline)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bundled(rt: &Runtime, name: &str) -> Arc<LoadedComponent> {
        rt.load(&ComponentRef::Bundled(name.into()), &crate::bundled::bytes).unwrap()
    }

    #[test]
    fn bundled_components_load_without_compiling() {
        let rt = Runtime::new(None).unwrap();
        for name in crate::bundled::names() {
            let loaded = bundled(&rt, name);
            assert!(!loaded.compiled && !loaded.tools.is_empty(), "{name}");
        }
        assert_eq!(rt.compile_count(), 0);
    }

    #[test]
    fn an_engine_the_build_did_not_precompile_for_compiles_instead() {
        // Another engine configuration (as another CPU or wasmtime would be): the built-in code
        // is not offered to it, and the component is compiled and works.
        let mut config = engine_config(Allocation::OnDemand);
        config.cranelift_opt_level(wasmtime::OptLevel::None).epoch_interruption(false);
        let other = Engine::new(&config).unwrap();
        let hello = crate::bundled::bytes("hello").unwrap();
        let sha256 = hex::encode(Sha256::digest(hello));
        assert!(crate::bundled::precompiled(&sha256, toolhost_engine::compatibility_hash(&other)).is_none());
        let rt = Runtime::with_engine(RuntimeOptions::default(), other, false).unwrap();
        let loaded = bundled(&rt, "hello");
        assert!(loaded.compiled);
        assert_eq!(rt.compile_count(), 1);
        assert_eq!(loaded.tools[0].name, "hello");
        // wasmtime's own check refuses the built-in code too, had the hashes agreed.
        let (_, artifact) = crate::bundled::PRECOMPILED.iter().find(|(d, _)| *d == sha256).unwrap();
        // SAFETY: the artifact is part of this binary; the point is that wasmtime refuses it.
        assert!(unsafe { Component::deserialize(rt.engine(), artifact) }.is_err());
    }

    fn file(name: &str) -> ComponentRef {
        ComponentRef::File { path: Path::new(crate::bundled::GUEST_DIR).join(name), sha256: None }
    }

    #[test]
    fn listing_a_component_compiled_before_never_waits_for_its_compile() {
        let dir = tempfile::tempdir().unwrap();
        let cache = dir.path().join("cache");
        let first = Runtime::new(Some(cache.clone())).unwrap();
        let listed = first.load(&file("legacy_hello.wasm"), &|_| None).unwrap().tools.clone();
        assert!(first.load(&file("hostile.wasm"), &|_| None).unwrap().compiled);
        drop(first);
        // The artifacts go (another engine: a toolhost upgrade, another CPU); the specs stay.
        let artifacts = || {
            std::fs::read_dir(&cache)
                .unwrap()
                .map(|e| e.unwrap().path())
                .filter(|p| p.extension().is_some_and(|x| x == "cwasm"))
                .collect::<Vec<_>>()
        };
        artifacts().iter().for_each(|p| std::fs::remove_file(p).unwrap());

        let rt = Runtime::new(Some(cache.clone())).unwrap();
        let loaded = rt.load(&file("legacy_hello.wasm"), &|_| None).unwrap();
        assert!(matches!(loaded.pre, Prepared::Compiling(_)), "the tools were listed before the compile ended");
        let names = |t: &[ListedTool]| t.iter().map(|t| (t.name.clone(), t.parameters.clone())).collect::<Vec<_>>();
        assert_eq!(names(&loaded.tools), names(&listed));
        let req = CallRequest::new("legacy_hello", r#"{"name": "A"}"#.to_string());
        let out = exec_call(&rt, &loaded, &CapabilitySet::default(), &[], &req).unwrap();
        assert!(out.text().contains("Hello, A."), "{}", out.text());
        assert_eq!((rt.compile_count(), artifacts().len()), (1, 1), "compiled once, in the background, and kept");
        assert!(rt.take_warnings().is_empty());

        // Kept specs are input too: tampered, or another component's under this one's name,
        // they are refused (the tag covers name and bytes) and the component is compiled to list.
        let specs = |wasm: &str| {
            let bytes = std::fs::read(Path::new(crate::bundled::GUEST_DIR).join(wasm)).unwrap();
            cache.join(cache::specs_name(&hex::encode(Sha256::digest(bytes))))
        };
        let genuine = std::fs::read(specs("legacy_hello.wasm")).unwrap();
        let mut flipped = genuine.clone();
        flipped[10] ^= 1;
        for (what, planted) in [("tampered", flipped), ("swapped", std::fs::read(specs("hostile.wasm")).unwrap())] {
            artifacts().iter().for_each(|p| std::fs::remove_file(p).unwrap());
            std::fs::write(specs("legacy_hello.wasm"), planted).unwrap();
            let rt = Runtime::new(Some(cache.clone())).unwrap();
            let loaded = rt.load(&file("legacy_hello.wasm"), &|_| None).unwrap();
            assert!(matches!(loaded.pre, Prepared::Ready(_)), "{what}");
            assert_eq!(names(&loaded.tools), names(&listed), "{what}");
            let w = rt.take_warnings();
            assert!(w.len() == 1 && w[0].contains("integrity tag does not match"), "{what}: {w:?}");
            assert_eq!(std::fs::read(specs("legacy_hello.wasm")).unwrap(), genuine, "{what}: healed");
        }
    }
}
