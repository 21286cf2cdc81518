//! Shared helpers for the toolhost-mcp integration tests: where the real peers live, fault-server
//! configs, thread contexts, loopback ports and child servers (started without port races).

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

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
/// tests must not mutate while other tests spawn processes). Servers inherit this process's
/// `PATH`, `HOME` and the like, as under the CLI.
pub fn manager_with_env(servers: Value, vars: &[(&str, &str)]) -> McpManager {
    let doc = json!({ "mcpServers": servers });
    let env = vars.iter().fold(toolhost_mcp::Environment::from_process(), |env, (k, v)| env.with(*k, *v));
    let cfg = config::parse_with_env(doc.to_string().as_bytes(), &env, &mut |_| {}).expect("test config parses");
    McpManager::new(ConfigSource::Fixed(cfg)).with_env(env)
}

pub fn ctx(data: &Path, thread: &str) -> CallContext {
    let fs = ThreadFs::open(data, thread).expect("thread fs");
    fs.ensure_tool_dirs().expect("thread dirs");
    CallContext::new(Arc::new(fs), "tc1", Arc::new(ThreadState::default()))
}

/// A loopback port on which nothing listens, held for as long as the value lives: the socket is
/// bound but never listens, so a connection is refused at once, and no other process — another
/// test's server — can bind the port meanwhile (the socket does not set `SO_REUSEADDR`).
pub struct ClosedPort {
    _socket: tokio::net::TcpSocket,
    pub port: u16,
}

pub fn closed_port() -> ClosedPort {
    let socket = tokio::net::TcpSocket::new_v4().expect("socket");
    socket.bind(([127, 0, 0, 1], 0).into()).expect("bind");
    let port = socket.local_addr().expect("addr").port();
    ClosedPort { _socket: socket, port }
}

/// How long a server may take to start (node or Python start-up on a loaded 2-core machine).
const STARTUP: Duration = Duration::from_secs(60);

/// `mcp-server-everything MODE` on a port the OS picks (`PORT=0`), found by looking up the TCP
/// socket the server process itself listens on (`/proc`). Choosing a free port for it instead
/// would race any other process for that port, and the server's "listening on port N" line is no
/// proof either: it prints that line even when the port was taken (express 5 calls the listen
/// callback with the error).
pub async fn everything(mode: &str) -> (Child, u16) {
    let mut cmd = tokio::process::Command::new(bin("mcp-server-everything"));
    cmd.arg(mode).env("PORT", "0").kill_on_drop(true);
    cmd.stdout(std::process::Stdio::null()).stderr(std::process::Stdio::null());
    let mut child = cmd.spawn().expect("start mcp-server-everything");
    let pid = child.id().expect("pid");
    let started = std::time::Instant::now();
    while started.elapsed() < STARTUP {
        if let Some(port) = listening_port(pid) {
            return (Child(child), port);
        }
        if let Ok(Some(status)) = child.try_wait() {
            panic!("mcp-server-everything {mode} exited before listening: {status}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("mcp-server-everything {mode} did not listen within {STARTUP:?}");
}

/// The port of a TCP socket that process `pid` listens on: its socket inodes (`/proc/PID/fd`)
/// matched against the listening entries of `/proc/net/tcp` and `tcp6`.
fn listening_port(pid: u32) -> Option<u16> {
    let inodes: Vec<String> = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .ok()?
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .filter_map(|target| {
            let t = target.to_string_lossy();
            Some(t.strip_prefix("socket:[")?.strip_suffix(']')?.to_string())
        })
        .collect();
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let text = std::fs::read_to_string(table).unwrap_or_default();
        for line in text.lines().skip(1) {
            // sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid timeout inode
            let f: Vec<&str> = line.split_whitespace().collect();
            let (Some(local), Some(state), Some(inode)) = (f.get(1), f.get(3), f.get(9)) else { continue };
            if *state == "0A" && inodes.iter().any(|i| i == inode) {
                let port = local.rsplit(':').next()?;
                return u16::from_str_radix(port, 16).ok();
            }
        }
    }
    None
}

/// A server that binds port 0 itself and prints the port it got as its first line on stdout
/// (`fixtures/auth_http_server.py`): no window in which another process could take the port.
pub async fn spawn_reporting_port(program: &str, args: &[&str]) -> (Child, u16) {
    let mut cmd = tokio::process::Command::new(program);
    cmd.args(args).kill_on_drop(true).stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::null());
    let mut child = cmd.spawn().unwrap_or_else(|e| panic!("cannot start {program}: {e}"));
    let stdout = child.stdout.take().expect("stdout");
    let line = wait_for_line(stdout, |l| l.parse::<u16>().is_ok())
        .await
        .unwrap_or_else(|| panic!("{program} {args:?} exited without reporting its port"));
    (Child(child), line.parse().expect("port"))
}

/// Read `pipe` line by line until `found` accepts one (returned) or the pipe closes (`None`);
/// whatever follows is drained in the background so the child never blocks on a full pipe.
async fn wait_for_line(
    pipe: impl tokio::io::AsyncRead + Unpin + Send + 'static,
    found: impl Fn(&str) -> bool,
) -> Option<String> {
    use tokio::io::AsyncBufReadExt;
    let mut lines = tokio::io::BufReader::new(pipe).lines();
    let read = async {
        while let Ok(Some(line)) = lines.next_line().await {
            if found(line.trim()) {
                return Some(line.trim().to_string());
            }
        }
        None
    };
    let line = tokio::time::timeout(STARTUP, read).await.unwrap_or_else(|_| panic!("no start-up line in {STARTUP:?}"));
    if line.is_some() {
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    }
    line
}

/// A child server process killed when dropped.
pub struct Child(pub tokio::process::Child);

pub fn init_tracing() {
    let _ = tracing_subscriber::fmt().with_env_filter("toolhost_mcp=debug").with_test_writer().try_init();
}
