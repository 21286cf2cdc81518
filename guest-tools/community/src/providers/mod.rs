//! One module per DeerFlow community module (`deerflow.community.<name>.tools`). Each tool is a
//! function of a [`Ctx`] (its config, its granted env, the transport) and its arguments, and
//! returns what DeerFlow's tool returns: a string, a raised exception, or a capture.

pub mod brave;
pub mod browserless;
pub mod crawl4ai;
pub mod ddg;
pub mod exa;
pub mod firecrawl;
pub mod groundroute;
pub mod infoquest;
pub mod jina_ai;
pub mod searxng;
pub mod serper;
pub mod tavily;

use std::net::IpAddr;

use serde_json::Value;

use crate::net::{Http, PyError};

/// What a tool call may use.
pub struct Ctx<'a> {
    /// The tool's `tools:` entry, less name/group/use (DeerFlow's `model_extra`).
    pub config: &'a Value,
    /// Environment variables the host granted.
    pub env: &'a dyn Fn(&str) -> Option<String>,
    pub http: &'a dyn Http,
    /// Addresses of a host name (empty when it does not resolve), for the SSRF checks.
    pub resolve: &'a dyn Fn(&str) -> Vec<IpAddr>,
    /// Where `web_capture` writes (the thread's outputs directory).
    pub outputs: &'a dyn Outputs,
    /// `datetime.now(UTC)` as `%Y%m%d-%H%M%S`.
    pub now: &'a dyn Fn() -> String,
    /// Sleep between retries (firecrawl-py backs off).
    pub sleep: &'a dyn Fn(f64),
}

impl Ctx<'_> {
    /// A config key, `None` when absent.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.config.get(key)
    }

    pub fn has(&self, key: &str) -> bool {
        self.config.get(key).is_some()
    }

    /// `base_url` from the entry (DeerFlow's key for the self-hosted providers; for the others
    /// how a proxy or a test server stands in), else DeerFlow's endpoint base.
    pub fn base_url(&self, default: &str) -> String {
        match self.get("base_url") {
            Some(Value::String(s)) if !s.trim().is_empty() => s.trim_end_matches('/').to_string(),
            _ => default.to_string(),
        }
    }

    /// An env var the host passed, `None` when unset or empty.
    pub fn env_nonempty(&self, name: &str) -> Option<String> {
        (self.env)(name).filter(|v| !v.is_empty())
    }
}

/// The thread's outputs directory, as `web_capture` sees it.
pub trait Outputs {
    fn exists(&self, name: &str) -> bool;
    fn write(&self, name: &str, bytes: &[u8]) -> Result<(), String>;
}

/// What a tool returns.
#[derive(Debug, Clone, PartialEq)]
pub enum Out {
    Text(String),
    Raised(PyError),
    /// A `Command` that adds `artifact` to the thread's artifacts, with `text` as the message.
    Artifact {
        text: String,
        artifact: String,
    },
}

impl From<String> for Out {
    fn from(s: String) -> Self {
        Out::Text(s)
    }
}

/// A string argument the model must pass.
pub fn arg_str<'a>(args: &'a Value, tool: &str, name: &str) -> Result<&'a str, Out> {
    match args.get(name) {
        Some(Value::String(s)) => Ok(s),
        Some(other) => {
            Err(invalid(tool, &format!("{name}: Input should be a valid string (got {})", crate::py::repr(other))))
        }
        None => Err(invalid(tool, &format!("{name}: Field required"))),
    }
}

/// An optional integer argument (pydantic's lax int: ints, integral floats, numeric strings).
pub fn arg_int(args: &Value, tool: &str, name: &str) -> Result<Option<i64>, Out> {
    match args.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) if !crate::py::is_float(n) => Ok(n.as_i64()),
        Some(Value::Number(n)) if n.as_f64().is_some_and(|f| f.fract() == 0.0 && f.abs() < 9e15) => {
            Ok(n.as_f64().map(|f| f as i64))
        }
        Some(Value::String(s)) if crate::py::int_str(s).is_some() => Ok(crate::py::int_str(s)),
        Some(other) => {
            Err(invalid(tool, &format!("{name}: Input should be a valid integer (got {})", crate::py::repr(other))))
        }
    }
}

/// An optional string argument.
pub fn arg_opt_str<'a>(args: &'a Value, tool: &str, name: &str) -> Result<Option<&'a str>, Out> {
    match args.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(other) => {
            Err(invalid(tool, &format!("{name}: Input should be a valid string (got {})", crate::py::repr(other))))
        }
    }
}

/// An optional boolean argument.
pub fn arg_opt_bool(args: &Value, tool: &str, name: &str) -> Result<Option<bool>, Out> {
    match args.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(other) => {
            Err(invalid(tool, &format!("{name}: Input should be a valid boolean (got {})", crate::py::repr(other))))
        }
    }
}

/// LangChain refuses arguments that do not match the schema before the tool runs.
fn invalid(tool: &str, detail: &str) -> Out {
    Out::Raised(PyError::new("ValidationError", format!("1 validation error for {tool}\n{detail}")))
}

/// `{"error": …, "query": …}` as the search tools print it.
pub fn error_json(error: &str, key: &str, value: &str) -> String {
    crate::py::dumps(&crate::py::object(vec![
        ("error", Value::String(error.into())),
        (key, Value::String(value.into())),
    ]))
}

/// Python's type name of a JSON value, for `AttributeError`/`TypeError` texts.
pub fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "NoneType",
        Value::Bool(_) => "bool",
        Value::Number(n) if crate::py::is_float(n) => "float",
        Value::Number(_) => "int",
        Value::String(_) => "str",
        Value::Array(_) => "list",
        Value::Object(_) => "dict",
    }
}

/// `AttributeError: '<type>' object has no attribute '<attr>'`.
pub fn no_attr(v: &Value, attr: &str) -> PyError {
    PyError::new("AttributeError", format!("'{}' object has no attribute '{attr}'", type_name(v)))
}

/// `KeyError: '<key>'` as `str(e)` prints it.
pub fn key_error(key: &str) -> PyError {
    PyError::new("KeyError", format!("'{key}'"))
}

/// `dict.get(key, default)` on a value Python expects to be a dict.
pub fn dict_get<'a>(v: &'a Value, key: &str) -> Result<Option<&'a Value>, PyError> {
    match v {
        Value::Object(o) => Ok(o.get(key)),
        other => Err(no_attr(other, "get")),
    }
}

/// `d[key]`.
pub fn index<'a>(v: &'a Value, key: &str) -> Result<&'a Value, PyError> {
    match v {
        Value::Object(o) => o.get(key).ok_or_else(|| key_error(key)),
        Value::Array(_) => Err(PyError::new("TypeError", "list indices must be integers or slices, not str")),
        Value::String(_) => Err(PyError::new("TypeError", "string indices must be integers, not 'str'")),
        other => Err(PyError::new("TypeError", format!("'{}' object is not subscriptable", type_name(other)))),
    }
}

/// `for x in v` over a value Python iterates.
pub fn iterate(v: &Value) -> Result<Vec<Value>, PyError> {
    match v {
        Value::Array(a) => Ok(a.clone()),
        Value::Object(o) => Ok(o.keys().map(|k| Value::String(k.clone())).collect()),
        Value::String(s) => Ok(s.chars().map(|c| Value::String(c.to_string())).collect()),
        other => Err(PyError::new("TypeError", format!("'{}' object is not iterable", type_name(other)))),
    }
}

/// `r.get(k, default)` for a result item that is a dict.
pub fn get_or(item: &Value, key: &str, default: Value) -> Value {
    item.get(key).cloned().unwrap_or(default)
}
