//! Shared helpers for the toolhost-mcp integration tests: where the real peers live, fault-server
//! configs, thread contexts, loopback ports and child servers.

#![allow(dead_code)]

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use toolhost_core::{CallContext, ThreadFs, ThreadState};
use toolhost_mcp::{config, ConfigSource, McpManager};

pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// `<workspace>/.peers`, failing the test with instructions when the peers are not installed.
pub fn peers() -> PathBuf {
    let p = root().join(".peers");
    let needed = [
        p.join("npm/node_modules/.bin/mcp-server-everything"),
        p.join("npm/node_modules/.bin/mcp-server-filesystem"),
        p.join("venv/bin/mcp-server-time"),
        p.join("venv/bin/python"),
    ];
    for n in &needed {
        assert!(n.exists(), "MCP test peer {} is missing: run scripts/install-peers.sh first", n.display());
    }
    p
}

pub fn python() -> String {
    peers().join("venv/bin/python").to_string_lossy().into_owned()
}

pub fn fixture(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(name).to_string_lossy().into_owned()
}

pub fn bin(name: &str) -> String {
    peers().join("npm/node_modules/.bin").join(name).to_string_lossy().into_owned()
}

/// A stdio entry running `fault_server.py MODE [ARG]`.
pub fn fault(mode: &str, arg: Option<&str>, init_timeout: f64) -> Value {
    let mut args = vec![fixture("fault_server.py"), mode.to_string()];
    args.extend(arg.map(str::to_string));
    json!({"type": "stdio", "command": python(), "args": args, "session_init_timeout": init_timeout})
}

pub fn manager(servers: Value) -> McpManager {
    manager_with_env(servers, &[])
}

/// Like [`manager`], with `$VAR` values taken from `vars` (not the process environment, which
/// tests must not mutate while other tests spawn processes).
pub fn manager_with_env(servers: Value, vars: &[(&str, &str)]) -> McpManager {
    let doc = json!({ "mcpServers": servers });
    let lookup = |name: &str| vars.iter().find(|(k, _)| *k == name).map(|(_, v)| v.to_string());
    let cfg = config::parse_with_env(doc.to_string().as_bytes(), &lookup).expect("test config parses");
    McpManager::new(ConfigSource::Fixed(cfg))
}

pub fn ctx(data: &Path, thread: &str) -> CallContext {
    let fs = ThreadFs::open(data, thread).expect("thread fs");
    fs.ensure_tool_dirs().expect("thread dirs");
    CallContext::new(Arc::new(fs), "tc1", Arc::new(ThreadState::default()))
}

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port()
}

/// Wait until something accepts connections on the port.
pub async fn wait_port(port: u16, within: Duration) {
    let start = Instant::now();
    while start.elapsed() < within {
        if tokio::net::TcpStream::connect(("127.0.0.1", port)).await.is_ok() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("nothing listens on 127.0.0.1:{port} after {within:?}");
}

/// A child server process killed when dropped.
pub struct Child(pub tokio::process::Child);

pub fn spawn(program: &str, args: &[&str], env: &[(&str, String)]) -> Child {
    let mut cmd = tokio::process::Command::new(program);
    cmd.args(args).kill_on_drop(true).stdout(std::process::Stdio::null()).stderr(std::process::Stdio::null());
    for (k, v) in env {
        cmd.env(k, v);
    }
    Child(cmd.spawn().unwrap_or_else(|e| panic!("cannot start {program}: {e}")))
}

pub fn init_tracing() {
    let _ = tracing_subscriber::fmt().with_env_filter("toolhost_mcp=debug").with_test_writer().try_init();
}
