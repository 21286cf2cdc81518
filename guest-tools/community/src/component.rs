//! The component glue: wasi:http as the transport, the granted env, the host's resolver, the
//! thread's outputs directory, and the SDK's export of every tool in [`crate::TOOLS`].

use std::net::IpAddr;

use serde_json::Value;
use toolhost_sdk::bindings::exports::toolhost::tool::tool::Guest;
use toolhost_sdk::bindings::toolhost::tool::types::{CallContext, CallError, ToolResult, ToolSpec};
use toolhost_sdk::{http, Context, Output, ToolDef};

use crate::net::{Failure, Http, Request, Response, MAX_RESPONSE_BYTES};
use crate::providers::{Ctx, Out, Outputs};
use crate::ToolEntry;

struct WasiHttp;

impl Http for WasiHttp {
    fn send(&self, req: &Request) -> Result<Response, Failure> {
        let mut r = http::Request::new(req.method.as_str(), req.url.as_str()).max_body_bytes(MAX_RESPONSE_BYTES);
        r.headers = req.headers.clone();
        r.body = req.body.clone();
        r.timeout = req.timeout;
        match r.send() {
            Ok(resp) => {
                Ok(Response { status: resp.status, headers: resp.headers, body: resp.body, url: req.url.clone() })
            }
            Err(e) => Err(match e {
                http::HttpError::Refused(m) => Failure::Refused(format!("request refused by the host: {m}")),
                http::HttpError::InvalidUrl(m) => Failure::InvalidUrl(m),
                http::HttpError::Failed(m) => Failure::Connect(m),
                http::HttpError::TooLarge(n) => Failure::TooLarge(n),
                http::HttpError::Timeout { connecting } => Failure::Timeout { connecting },
                http::HttpError::Incomplete { received, expected } => Failure::Incomplete { received, expected },
            }),
        }
    }
}

const OUTPUTS_DIR: &str = "/mnt/user-data/outputs";

/// The thread's outputs directory, when the tool's grant preopens it.
struct OutputsDir;

impl Outputs for OutputsDir {
    fn exists(&self, name: &str) -> bool {
        let path = if name.is_empty() { OUTPUTS_DIR.to_string() } else { format!("{OUTPUTS_DIR}/{name}") };
        std::fs::symlink_metadata(path).is_ok()
    }

    fn write(&self, name: &str, bytes: &[u8]) -> Result<(), String> {
        use std::io::Write;
        // create_new: an existing name (a file the thread made meanwhile, a planted link) is
        // never overwritten or followed.
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(format!("{OUTPUTS_DIR}/{name}"))
            .map_err(|e| format!("[Errno {}] {e}: '{OUTPUTS_DIR}/{name}'", e.raw_os_error().unwrap_or(0)))?;
        f.write_all(bytes).map_err(|e| e.to_string())
    }
}

/// UTC now as `%Y%m%d-%H%M%S`.
fn now() -> String {
    toolhost_py::datetime::utc_compact_stamp(std::time::SystemTime::now())
}

fn resolve(name: &str) -> Vec<IpAddr> {
    toolhost_sdk::resolve_host(name)
}

fn run(entry: &ToolEntry, ctx: &Context, args: Value) -> Output {
    let env = |k: &str| std::env::var(k).ok();
    let sleep = |secs: f64| std::thread::sleep(std::time::Duration::from_secs_f64(secs.clamp(0.0, 5.0)));
    let c = Ctx {
        config: &ctx.config,
        env: &env,
        http: &WasiHttp,
        resolve: &resolve,
        outputs: &OutputsDir,
        now: &now,
        sleep: &sleep,
    };
    match (entry.handler)(&c, &args) {
        Out::Text(t) => Output::text(t),
        Out::Raised(e) => Output::raised(e.class, e.message),
        Out::Artifact { text, artifact } => Output::text(text).with_artifacts(vec![artifact]),
    }
}

fn defs() -> Vec<ToolDef> {
    crate::TOOLS
        .iter()
        .map(|t| {
            toolhost_sdk::tool(t.name, "", move |ctx: &Context, args: Value| run(t, ctx, args))
                .with_meta(move || ((t.description)(), (t.parameters)()))
        })
        .collect()
}

struct Component;

impl Guest for Component {
    fn list_tools() -> Vec<ToolSpec> {
        toolhost_sdk::__list(&defs())
    }

    fn call(ctx: CallContext, name: String, args: String) -> Result<ToolResult, CallError> {
        toolhost_sdk::__call(&defs(), ctx, name, args)
    }
}

toolhost_sdk::bindings::export!(Component with_types_in toolhost_sdk::bindings);
