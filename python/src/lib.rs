//! `toolhost._native`: the Python package's binding to the toolhost library. It only forwards to
//! the library's public API (`Toolhost`, `HostOptions`, `AssemblyRequest`, `Toolhost::call_with`,
//! …) and carries results across as JSON text, which `toolhost/__init__.py` turns into Python
//! values. Every call that can wait (opening a host, a tool call) releases the GIL.
//!
//! All hosts share one multi-threaded tokio runtime, started on first use: tool calls run on it
//! (components on its blocking pool), for the blocking calls as for the asyncio ones.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyValueError};
use pyo3::prelude::*;
use serde_json::{json, Value};
use toolhost::{AssemblyRequest, CallOptions, CallResult, CancelSignal, Environment, HostError, HostOptions, Toolhost};

create_exception!(
    toolhost,
    ToolhostError,
    PyException,
    "Base class of toolhost's errors (the Rust library's `HostError`)."
);
create_exception!(
    toolhost,
    ConfigError,
    ToolhostError,
    "The config cannot be read or is not valid (`HostError::Config`; the message has file, line and column)."
);
create_exception!(
    toolhost,
    WasmRuntimeError,
    ToolhostError,
    "The wasm engine or its precompile cache could not be set up (`HostError::Runtime`)."
);
create_exception!(
    toolhost,
    ThreadIdError,
    ToolhostError,
    "A thread id that cannot name a directory (`HostError::Paths`): 1-128 characters of [A-Za-z0-9_-]."
);
create_exception!(
    toolhost,
    ThreadFilesError,
    ToolhostError,
    "A thread's directory cannot be opened, or one was replaced by a link (`HostError::ThreadFs`)."
);
create_exception!(
    toolhost,
    StateError,
    ToolhostError,
    "The thread's state cannot be read or written (`HostError::State`)."
);
create_exception!(
    toolhost,
    AgentError,
    ToolhostError,
    "A custom agent's config is missing or malformed (`HostError::Agent`; the message names the file)."
);

/// The runtime every host's calls run on.
fn runtime() -> PyResult<&'static tokio::runtime::Runtime> {
    static RT: OnceLock<Result<tokio::runtime::Runtime, String>> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .thread_name("toolhost")
            .build()
            .map_err(|e| format!("cannot start the tokio runtime: {e}"))
    })
    .as_ref()
    .map_err(|e| WasmRuntimeError::new_err(e.clone()))
}

fn host_err(e: HostError) -> PyErr {
    let msg = e.to_string();
    match e {
        HostError::Config(_) => ConfigError::new_err(msg),
        HostError::Runtime(_) | HostError::NoTokioRuntime => WasmRuntimeError::new_err(msg),
        HostError::Paths(_) => ThreadIdError::new_err(msg),
        HostError::ThreadFs(_) => ThreadFilesError::new_err(msg),
        HostError::State(_) => StateError::new_err(msg),
        HostError::Agent(_) => AgentError::new_err(msg),
        _ => ToolhostError::new_err(msg),
    }
}

fn to_json(v: &impl serde::Serialize) -> PyResult<String> {
    serde_json::to_string(v).map_err(|e| ToolhostError::new_err(format!("cannot encode a result as JSON: {e}")))
}

/// A call's result as the Python layer reads it: DeerFlow's text, whether it is an error and
/// its kind (what nearly every caller reads, as Python values), and the rest as JSON that
/// `CallResult` parses only if asked (the content parts, the state update, `end_run`, reducer
/// errors).
type PyCallResult = (String, bool, Option<String>, Detail);

fn py_result(r: CallResult) -> PyCallResult {
    let kind = r.error_kind().and_then(|k| serde_json::to_value(k).ok()).and_then(|v| v.as_str().map(str::to_string));
    (r.text(), r.is_error(), kind, Detail(r))
}

/// The library's whole `CallResult`, turned into JSON only when Python asks for it.
#[pyclass(frozen, module = "toolhost._native")]
struct Detail(CallResult);

#[pymethods]
impl Detail {
    fn json(&self) -> PyResult<String> {
        to_json(&self.0)
    }
}

/// Tool arguments straight from Python values (a dict of str, int, float, bool, None, lists
/// and dicts), without a JSON round trip.
fn py_to_value(obj: &Bound<'_, PyAny>) -> PyResult<Value> {
    use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};
    if obj.is_none() {
        Ok(Value::Null)
    } else if let Ok(s) = obj.cast::<PyString>() {
        Ok(Value::String(s.to_str()?.to_string()))
    } else if let Ok(b) = obj.cast::<PyBool>() {
        Ok(Value::Bool(b.is_true()))
    } else if obj.is_instance_of::<PyInt>() {
        if let Ok(i) = obj.extract::<i64>() {
            Ok(Value::from(i))
        } else if let Ok(u) = obj.extract::<u64>() {
            Ok(Value::from(u))
        } else {
            Err(PyValueError::new_err(format!("integer argument {obj} does not fit in 64 bits")))
        }
    } else if let Ok(f) = obj.cast::<PyFloat>() {
        serde_json::Number::from_f64(f.value())
            .map(Value::Number)
            .ok_or_else(|| PyValueError::new_err(format!("{obj} is not a JSON number")))
    } else if let Ok(d) = obj.cast::<PyDict>() {
        let mut map = serde_json::Map::with_capacity(d.len());
        for (k, v) in d.iter() {
            let key = k.cast::<PyString>().map_err(|_| {
                pyo3::exceptions::PyTypeError::new_err(format!("argument keys must be strings, got {k:?}"))
            })?;
            map.insert(key.to_str()?.to_string(), py_to_value(&v)?);
        }
        Ok(Value::Object(map))
    } else if let Ok(l) = obj.cast::<PyList>() {
        l.iter().map(|v| py_to_value(&v)).collect::<PyResult<Vec<_>>>().map(Value::Array)
    } else if let Ok(t) = obj.cast::<PyTuple>() {
        t.iter().map(|v| py_to_value(&v)).collect::<PyResult<Vec<_>>>().map(Value::Array)
    } else {
        let ty = obj.get_type().name().map(|n| n.to_string()).unwrap_or_else(|_| "?".into());
        Err(pyo3::exceptions::PyTypeError::new_err(format!(
            "a tool argument cannot be a {ty}: use str, int, float, bool, None, list or dict"
        )))
    }
}

fn py_args(args: &Bound<'_, PyAny>) -> PyResult<Value> {
    match py_to_value(args)? {
        v @ Value::Object(_) => Ok(v),
        other => Err(PyValueError::new_err(format!("tool arguments must be a dict, got {other}"))),
    }
}

/// An open host (`toolhost::Toolhost`, shared so `task` can reach it).
#[pyclass(frozen, module = "toolhost._native")]
struct Host {
    inner: Arc<Toolhost>,
}

#[pymethods]
impl Host {
    /// Open a host: `config_path` (a DeerFlow `config.yaml`, loaded as it is) or `config_text`
    /// (with `base_dir` for its relative paths); the rest are `HostOptions`' setters.
    #[staticmethod]
    #[pyo3(signature = (*, config_path=None, config_text=None, base_dir=None, data_dir=None, persist_state=false,
        cache_dir=None, cache_keys_dir=None, extensions=None, extra_ca_certs=None, env=None, write_file_max_bytes=None))]
    #[allow(clippy::too_many_arguments)]
    fn open(
        py: Python<'_>,
        config_path: Option<PathBuf>,
        config_text: Option<String>,
        base_dir: Option<PathBuf>,
        data_dir: Option<PathBuf>,
        persist_state: bool,
        cache_dir: Option<PathBuf>,
        cache_keys_dir: Option<PathBuf>,
        extensions: Option<PathBuf>,
        extra_ca_certs: Option<PathBuf>,
        env: Option<BTreeMap<String, String>>,
        write_file_max_bytes: Option<String>,
    ) -> PyResult<Self> {
        let mut opts = match (config_path, config_text) {
            (Some(path), None) => HostOptions::new(path),
            (None, Some(text)) => HostOptions::from_yaml(text, base_dir.unwrap_or_else(|| PathBuf::from("."))),
            _ => return Err(PyValueError::new_err("give exactly one of config_path and config_text")),
        };
        if let Some(d) = data_dir {
            opts = opts.data_dir(d);
        }
        opts = opts
            .persist_state(persist_state)
            .cache_dir(cache_dir)
            .cache_keys_dir(cache_keys_dir)
            .extensions(extensions)
            .extra_ca_certs(extra_ca_certs)
            .env(Environment::new(env.unwrap_or_default()))
            .write_file_max_bytes(write_file_max_bytes);
        let rt = runtime()?;
        let host = py.detach(|| rt.block_on(Toolhost::open(opts))).map_err(host_err)?;
        Ok(Self { inner: host.into_shared() })
    }

    /// What opening found: `(severity, message)` pairs.
    fn problems(&self) -> PyResult<String> {
        to_json(&self.inner.problems())
    }

    /// Where thread files and state live.
    fn data_dir(&self) -> PathBuf {
        self.inner.data_dir().to_path_buf()
    }

    /// DeerFlow's `get_available_tools` for a request: the specs in DeerFlow's order, the
    /// deferred names, and assembly's warnings (JSON).
    #[pyo3(signature = (groups=None, include_mcp=true, model_name=None, subagent_enabled=false, agent=None, include_upload_tool=true))]
    #[allow(clippy::too_many_arguments)]
    fn available_tools(
        &self,
        py: Python<'_>,
        groups: Option<Vec<String>>,
        include_mcp: bool,
        model_name: Option<String>,
        subagent_enabled: bool,
        agent: Option<String>,
        include_upload_tool: bool,
    ) -> PyResult<String> {
        let req = self.request(groups, include_mcp, model_name, subagent_enabled, agent, include_upload_tool)?;
        let host = self.inner.clone();
        let rt = runtime()?;
        let assembly = py.detach(|| rt.block_on(async move { host.get_available_tools(&req).await }));
        let deferred: Vec<String> = assembly
            .deferred
            .as_ref()
            .map(|d| {
                let mut names: Vec<String> = d.setup.deferred_names.iter().cloned().collect();
                names.sort();
                names
            })
            .unwrap_or_default();
        to_json(&json!({"tools": assembly.specs(), "deferred": deferred, "warnings": assembly.warnings}))
    }

    /// A handle on thread `id` for a request (DeerFlow's `get_available_tools` arguments, and a
    /// custom agent's name).
    #[pyo3(signature = (id, groups=None, include_mcp=true, model_name=None, subagent_enabled=false, agent=None, include_upload_tool=true))]
    #[allow(clippy::too_many_arguments)]
    fn thread(
        &self,
        id: String,
        groups: Option<Vec<String>>,
        include_mcp: bool,
        model_name: Option<String>,
        subagent_enabled: bool,
        agent: Option<String>,
        include_upload_tool: bool,
    ) -> PyResult<Thread> {
        self.inner.thread_paths(&id).map_err(host_err)?;
        let request = self.request(groups, include_mcp, model_name, subagent_enabled, agent, include_upload_tool)?;
        Ok(Thread { host: self.inner.clone(), id, request })
    }
}

impl Host {
    #[allow(clippy::too_many_arguments)]
    fn request(
        &self,
        groups: Option<Vec<String>>,
        include_mcp: bool,
        model_name: Option<String>,
        subagent_enabled: bool,
        agent: Option<String>,
        include_upload_tool: bool,
    ) -> PyResult<AssemblyRequest> {
        let req = AssemblyRequest {
            groups,
            include_mcp,
            model_name,
            subagent_enabled,
            include_upload_tool,
            ..AssemblyRequest::default()
        };
        match agent {
            Some(name) => self.inner.agent_request(&name, req).map_err(host_err),
            None => Ok(req),
        }
    }
}

/// A thread of a host, with the request its tools are assembled for (`toolhost::Thread`,
/// without the borrow).
#[pyclass(frozen, module = "toolhost._native")]
struct Thread {
    host: Arc<Toolhost>,
    id: String,
    request: AssemblyRequest,
}

/// Raise it to give up an asyncio call (`CancelSignal`).
#[pyclass(frozen, module = "toolhost._native")]
struct Cancel(CancelSignal);

#[pymethods]
impl Cancel {
    fn cancel(&self) {
        self.0.cancel();
    }
}

#[pymethods]
impl Thread {
    #[getter]
    fn id(&self) -> &str {
        &self.id
    }

    /// The thread's `user-data` directory on the host (`<data>/threads/<id>/user-data`, which is
    /// `/mnt/user-data` inside the sandbox).
    fn user_data_dir(&self) -> PyResult<PathBuf> {
        Ok(self.host.thread_paths(&self.id).map_err(host_err)?.user_data())
    }

    /// The tools the model sees in this thread now (JSON list of specs).
    fn tools(&self, py: Python<'_>) -> PyResult<String> {
        let rt = runtime()?;
        let specs = py.detach(|| rt.block_on(self.host.model_tools(&self.request, &self.id))).map_err(host_err)?;
        to_json(&specs)
    }

    /// The thread's merged state (JSON).
    fn state(&self, py: Python<'_>) -> PyResult<String> {
        let rt = runtime()?;
        let state = py.detach(|| rt.block_on(self.host.thread_state(&self.id))).map_err(host_err)?;
        to_json(&state)
    }

    /// Run one call through the pipeline and merge its update; the GIL is released meanwhile.
    #[pyo3(signature = (name, args, call_id=None))]
    fn call(
        &self,
        py: Python<'_>,
        name: &str,
        args: &Bound<'_, PyAny>,
        call_id: Option<String>,
    ) -> PyResult<PyCallResult> {
        let args = py_args(args)?;
        let rt = runtime()?;
        let r = py
            .detach(|| rt.block_on(self.host.call(&self.request, &self.id, name, args, call_id)))
            .map_err(host_err)?;
        Ok(py_result(r))
    }

    /// Run a model turn's calls concurrently (`[[name, args, call_id], …]` as JSON); results in
    /// call order, updates merged in call order with DeerFlow's reducers.
    fn call_turn(&self, py: Python<'_>, calls: &str) -> PyResult<Vec<PyCallResult>> {
        let parsed: Vec<(String, Value, Option<String>)> =
            serde_json::from_str(calls).map_err(|e| PyValueError::new_err(format!("calls are not valid: {e}")))?;
        let rt = runtime()?;
        let results =
            py.detach(|| rt.block_on(self.host.call_turn(&self.request, &self.id, parsed))).map_err(host_err)?;
        Ok(results.into_iter().map(py_result).collect())
    }

    /// Start one call on the runtime and return at once; `done(ok, value)` is called from a
    /// runtime thread with the result's JSON (`ok` true) or the exception (`ok` false). The
    /// returned [`Cancel`] stops the call.
    #[pyo3(signature = (name, args, call_id, done))]
    fn call_async(
        &self,
        name: String,
        args: &Bound<'_, PyAny>,
        call_id: Option<String>,
        done: Py<PyAny>,
    ) -> PyResult<Cancel> {
        let args = py_args(args)?;
        let rt = runtime()?;
        let cancel = CancelSignal::new();
        let opts = CallOptions { cancel: Some(cancel.clone()), ..CallOptions::default() };
        let (host, id, request) = (self.host.clone(), self.id.clone(), self.request.clone());
        rt.spawn(async move {
            let r = host.call_with(&request, &id, &name, args, call_id, opts).await;
            deliver(done, r.map_err(host_err).map(py_result));
        });
        Ok(Cancel(cancel))
    }

    /// For the benchmark of the Python layer's cost (BENCHMARKS.md): `n` calls made from Rust
    /// with `Toolhost::call`, as an embedder would, each timed in seconds.
    #[pyo3(signature = (name, args, n))]
    fn _time_rust_calls(&self, py: Python<'_>, name: &str, args: &Bound<'_, PyAny>, n: usize) -> PyResult<Vec<f64>> {
        let args = py_args(args)?;
        let rt = runtime()?;
        py.detach(|| {
            rt.block_on(async {
                let mut times = Vec::with_capacity(n);
                for _ in 0..n {
                    let started = std::time::Instant::now();
                    let r =
                        self.host.call(&self.request, &self.id, name, args.clone(), None).await.map_err(host_err)?;
                    times.push(started.elapsed().as_secs_f64());
                    std::hint::black_box(r);
                }
                Ok(times)
            })
        })
    }

    /// [`state`](Self::state) without blocking: `done(ok, value)` as for `call_async`.
    fn state_async(&self, done: Py<PyAny>) -> PyResult<()> {
        let rt = runtime()?;
        let (host, id) = (self.host.clone(), self.id.clone());
        rt.spawn(async move {
            let r = host.thread_state(&id).await;
            deliver(done, r.map_err(host_err).and_then(|s| to_json(&s)));
        });
        Ok(())
    }
}

/// Callbacks being delivered now, and whether the interpreter is shutting down (no more are).
static DELIVERING: AtomicUsize = AtomicUsize::new(0);
static CLOSED: AtomicBool = AtomicBool::new(false);

/// Hand an asyncio call's outcome to its Python callback (which moves it onto the event loop).
/// Once the interpreter exits (see [`_shutdown`]) nobody waits for it: it is dropped unsent,
/// since attaching a runtime thread to a finalizing interpreter is not allowed.
fn deliver<T: for<'py> IntoPyObject<'py> + Send>(done: Py<PyAny>, r: PyResult<T>) {
    DELIVERING.fetch_add(1, Ordering::SeqCst);
    if CLOSED.load(Ordering::SeqCst) {
        DELIVERING.fetch_sub(1, Ordering::SeqCst);
        std::mem::forget((done, r));
        return;
    }
    Python::attach(|py| {
        let called = match r {
            Ok(value) => done.call1(py, (true, value)),
            Err(e) => done.call1(py, (false, e.into_value(py))),
        };
        if let Err(e) = called {
            // The callback only schedules onto the loop; a closed loop is the caller's business.
            e.print(py);
        }
    });
    DELIVERING.fetch_sub(1, Ordering::SeqCst);
}

/// Called at interpreter exit (`atexit`): stop delivering callbacks and wait (GIL released, at
/// most two seconds) for those under way, so that no runtime thread is attached to the
/// interpreter while it finalizes.
#[pyfunction]
fn _shutdown(py: Python<'_>) {
    CLOSED.store(true, Ordering::SeqCst);
    py.detach(|| {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
        while DELIVERING.load(Ordering::SeqCst) > 0 && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    });
}

/// One of DeerFlow's thread-state reducers (the one for `field`: `artifacts`, `viewed_images`,
/// `promoted`, `todos`, …) applied to `existing` and `new` (JSON), as the library merges a call's
/// update; raises what DeerFlow's reducer raises (`ValueError`, `KeyError`, `TypeError`).
#[pyfunction]
fn reduce(field: &str, existing: &str, new: &str) -> PyResult<String> {
    let parse = |what: &str, text: &str| {
        serde_json::from_str::<Value>(text).map_err(|e| PyValueError::new_err(format!("{what} is not valid JSON: {e}")))
    };
    let (existing, new) = (parse("existing", existing)?, parse("new", new)?);
    let update: toolhost::core::StateUpdate = serde_json::from_value(json!({ field: new }))
        .map_err(|e| PyValueError::new_err(format!("not a value for {field}: {e}")))?;
    let known = serde_json::to_value(&update).map_err(|e| ToolhostError::new_err(e.to_string()))?;
    if known.get(field).is_none() {
        return Err(PyValueError::new_err(format!("no DeerFlow reducer for '{field}' (or the new value is null)")));
    }
    let mut state: toolhost::ThreadState = if existing.is_null() {
        toolhost::ThreadState::default()
    } else {
        serde_json::from_value(json!({ field: existing }))
            .map_err(|e| PyValueError::new_err(format!("not a value for {field}: {e}")))?
    };
    if let Err(e) = state.apply(&update) {
        let msg = e.to_string();
        return Err(match e.py_type() {
            "KeyError" => pyo3::exceptions::PyKeyError::new_err(msg.trim_matches('\'').to_string()),
            "TypeError" | "AttributeError" => pyo3::exceptions::PyTypeError::new_err(msg),
            _ => PyValueError::new_err(msg),
        });
    }
    let merged = serde_json::to_value(&state).map_err(|e| ToolhostError::new_err(e.to_string()))?;
    to_json(merged.get(field).unwrap_or(&Value::Null))
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    // This process's binary is the Python interpreter, not toolhost.
    toolhost::embedded_in_another_program();
    m.add_class::<Host>()?;
    m.add_class::<Thread>()?;
    m.add_class::<Cancel>()?;
    m.add_class::<Detail>()?;
    m.add_function(wrap_pyfunction!(reduce, m)?)?;
    m.add_function(wrap_pyfunction!(_shutdown, m)?)?;
    m.add("ToolhostError", py.get_type::<ToolhostError>())?;
    m.add("ConfigError", py.get_type::<ConfigError>())?;
    m.add("WasmRuntimeError", py.get_type::<WasmRuntimeError>())?;
    m.add("ThreadIdError", py.get_type::<ThreadIdError>())?;
    m.add("ThreadFilesError", py.get_type::<ThreadFilesError>())?;
    m.add("StateError", py.get_type::<StateError>())?;
    m.add("AgentError", py.get_type::<AgentError>())?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
