//! `serve --http` under a flood of connections and sessions: half-open connections are timed out
//! and shed before they exhaust descriptors, one client address cannot take every connection or
//! every session, and the token can be passed without putting it on the command line. All
//! traffic is loopback; other clients are other addresses of 127/8.

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::os::unix::process::CommandExt as _;
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

#[path = "support/serve_harness.rs"]
mod harness;
#[path = "support/paths.rs"]
mod paths;
use harness::*;

const TOKEN: &str = "limits-token";

/// [`Setup::new`] with these `toolhost: serve:` keys (a YAML flow mapping's inside).
fn setup(serve_keys: &str) -> Setup {
    let s = Setup::new(false, false);
    let mut config = std::fs::read_to_string(s.config()).unwrap();
    if !serve_keys.is_empty() {
        config.push_str(&format!("toolhost:\n  serve: {{{serve_keys}}}\n"));
    }
    std::fs::write(s.config(), config).unwrap();
    s
}

/// `serve --http 127.0.0.1:0` with the token in its environment.
fn start(s: &Setup) -> HttpServer {
    let mut cmd = s.command(&["--http", "127.0.0.1:0"]);
    cmd.env("TOOLHOST_SERVE_TOKEN", TOKEN);
    HttpServer::spawn(cmd)
}

/// A connection to `addr` from loopback address `src` (any of 127/8 is this machine).
fn connect_from(src: &str, addr: &str) -> TcpStream {
    let rt = tokio::runtime::Builder::new_current_thread().enable_io().enable_time().build().unwrap();
    let stream = rt
        .block_on(async {
            let socket = tokio::net::TcpSocket::new_v4()?;
            socket.bind(format!("{src}:0").parse().unwrap())?;
            // A server that stopped accepting leaves the connection in a full backlog: fail in
            // seconds, not after the kernel's minutes of retries.
            match tokio::time::timeout(Duration::from_secs(10), socket.connect(addr.parse().unwrap())).await {
                Ok(connected) => connected,
                Err(_) => Err(std::io::Error::new(ErrorKind::TimedOut, "not accepted within 10 s")),
            }
        })
        .unwrap_or_else(|e| panic!("connect from {src}: {e}"));
    let stream = stream.into_std().unwrap();
    stream.set_nonblocking(false).unwrap();
    stream
}

/// A request head up to (not including) the blank line that ends it: a connection that sends
/// only this is half-open.
fn partial_head(addr: &str) -> String {
    format!("POST /mcp HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n")
}

/// The rest of a request after [`partial_head`]: the token, the body, the blank line.
fn rest_of_request(body: &str, close: bool) -> String {
    format!(
        "Accept: application/json, text/event-stream\r\nAuthorization: Bearer {TOKEN}\r\nContent-Length: {}\r\n{}\r\n{body}",
        body.len(),
        if close { "Connection: close\r\n" } else { "" }
    )
}

fn initialize() -> String {
    json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}})
    .to_string()
}

/// An authenticated request the door answers itself with a small body and keeps the connection
/// for (a body that is no JSON-RPC message: 400).
fn proving_request(addr: &str) -> String {
    partial_head(addr) + &rest_of_request("{}", false)
}

/// Read one response with a Content-Length body (the connection stays open): (status, text).
fn read_response(stream: &mut TcpStream) -> (u16, String) {
    stream.set_read_timeout(Some(Duration::from_secs(15))).unwrap();
    let mut raw = Vec::new();
    let mut byte = [0u8; 1];
    while !raw.ends_with(b"\r\n\r\n") {
        match stream.read(&mut byte) {
            Ok(1) => raw.push(byte[0]),
            other => panic!("no complete response head ({other:?}): {}", String::from_utf8_lossy(&raw)),
        }
    }
    let head = String::from_utf8_lossy(&raw).into_owned();
    let len: usize = header(&head, "content-length").and_then(|n| n.parse().ok()).unwrap_or(0);
    let mut body = vec![0u8; len];
    stream.read_exact(&mut body).unwrap();
    (head[9..12].parse().unwrap(), head + &String::from_utf8_lossy(&body))
}

/// A whole request on a new connection from `src`, read to the end: (status, head, body).
fn exchange_from(src: &str, addr: &str, req: &str) -> (u16, String, String) {
    let mut stream = connect_from(src, addr);
    // A call waits for the host, which may still be compiling its components.
    stream.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    stream.write_all(req.as_bytes()).unwrap();
    let mut raw = Vec::new();
    if let Err(e) = stream.read_to_end(&mut raw) {
        assert!(!raw.is_empty(), "from {src}: no answer: {e}");
    }
    let raw = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = raw.split_once("\r\n\r\n").unwrap_or((raw.as_str(), ""));
    let status = head.get(9..12).and_then(|s| s.parse().ok()).unwrap_or_else(|| panic!("bad response: {raw}"));
    (status, head.to_string(), body.to_string())
}

/// An MCP session opened from `src`; returns its id.
fn session_from(src: &str, addr: &str) -> Result<String, (u16, String, String)> {
    let req = partial_head(addr) + &rest_of_request(&initialize(), true);
    let (status, head, body) = exchange_from(src, addr, &req);
    if status != 200 {
        return Err((status, head, body));
    }
    let id = header(&head, "mcp-session-id").unwrap_or_else(|| panic!("no session id in {head}"));
    let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"}).to_string();
    let req = partial_head(addr) + &format!("Mcp-Session-Id: {id}\r\n") + &rest_of_request(&note, true);
    let (status, ..) = exchange_from(src, addr, &req);
    assert!(status == 202 || status == 200, "{status}");
    Ok(id)
}

/// `hello` called in session `id` from `src`: the text it answered.
fn hello_from(src: &str, addr: &str, id: &str, name: &str) -> String {
    let call = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
        "params": {"name": "hello", "arguments": {"name": name}}})
    .to_string();
    let req = partial_head(addr) + &format!("Mcp-Session-Id: {id}\r\n") + &rest_of_request(&call, true);
    let (status, _, body) = exchange_from(src, addr, &req);
    assert_eq!(status, 200, "{body}");
    messages(&body).pop().unwrap_or_default()["result"]["content"][0]["text"].as_str().unwrap_or_default().to_string()
}

/// Whether the server still holds the connection open: nothing to read and no end of stream.
fn is_open(stream: &TcpStream) -> bool {
    stream.set_nonblocking(true).unwrap();
    let mut buf = [0u8; 256];
    let open = match (&*stream).read(&mut buf) {
        Err(e) if e.kind() == ErrorKind::WouldBlock => true,
        Ok(0) | Err(_) => false,
        Ok(_) => panic!("a half-open connection was answered: {}", String::from_utf8_lossy(&buf)),
    };
    stream.set_nonblocking(false).unwrap();
    open
}

/// Wait up to `limit` for `done`.
fn wait_until(limit: Duration, mut done: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < limit {
        if done() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    done()
}

/// Open `n` half-open connections from 127.0.0.1 (the loopback address `TcpStream::connect`
/// uses). A connection the kernel no longer takes (its backlog full) is left out.
fn flood(addr: &str, n: usize) -> Vec<TcpStream> {
    let target = addr.parse().unwrap();
    (0..n)
        .filter_map(|_| {
            let mut s = TcpStream::connect_timeout(&target, Duration::from_secs(2)).ok()?;
            s.write_all(partial_head(addr).as_bytes()).ok()?;
            Some(s)
        })
        .collect()
}

fn open_fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map(|d| d.count()).unwrap_or(0)
}

#[test]
fn half_open_connections_cannot_exhaust_descriptors_and_authenticated_clients_still_get_in() {
    // The finding at a small scale: with 128 descriptors, 400 half-open connections used to take
    // every one, so the server could accept nothing and a valid request timed out.
    const FILES: u64 = 128;
    let s = setup("");
    let mut cmd = s.command(&["--http", "127.0.0.1:0"]);
    cmd.env("TOOLHOST_SERVE_TOKEN", TOKEN);
    // SAFETY: setrlimit is async-signal-safe, and nothing else runs between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            let lim = libc::rlimit { rlim_cur: FILES, rlim_max: FILES };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &lim) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut server = HttpServer::spawn(cmd);
    let pid = server.child.id();
    let addr = server.addr.clone();

    let held = flood(&addr, 400);
    // More than the server has descriptors (the kernel may stop taking some on its own).
    assert!(held.len() > FILES as usize, "the flood itself failed: {} connections", held.len());
    // Another client, and the flooding address itself, still get sessions and calls through.
    let other = session_from("127.0.0.2", &addr).expect("a session from another address during the flood");
    let same = session_from("127.0.0.1", &addr).expect("a session from the flooding address during the flood");
    assert_eq!(hello_from("127.0.0.2", &addr, &other, "other"), "Hello, other.");

    // What must not have happened: the server died, ran out of descriptors, or kept the flood.
    assert!(server.child.try_wait().unwrap().is_none(), "the server exited");
    let fds = open_fds(pid);
    assert!(fds < FILES as usize - 16, "{fds} descriptors open of {FILES}");
    // 128 files keep 64 for the rest of the host; one address gets a quarter of the other 64.
    let kept = held.iter().filter(|c| is_open(c)).count();
    assert!(kept <= 16, "{kept} half-open connections still held");

    assert_eq!(hello_from("127.0.0.1", &addr, &same, "same"), "Hello, same.");
}

#[test]
fn half_open_idle_and_slow_body_connections_are_closed_after_their_timeouts() {
    let s = setup("header_timeout_s: 2, body_timeout_s: 2");
    let server = start(&s);
    let addr = server.addr.clone();
    let opened = Instant::now();
    let partial = flood(&addr, 20);
    let silent = TcpStream::connect(&addr).unwrap();
    let mut idle = TcpStream::connect(&addr).unwrap();
    idle.write_all(proving_request(&addr).as_bytes()).unwrap();
    assert_eq!(read_response(&mut idle).0, 400);
    let mut slow_body = TcpStream::connect(&addr).unwrap();
    let body = initialize();
    let head_only = partial_head(&addr) + &rest_of_request(&body, false);
    slow_body.write_all(&head_only.as_bytes()[..head_only.len() - body.len() + 10]).unwrap();

    // Before the timeout every one is still open (nothing was shed), and a new client gets in.
    std::thread::sleep(Duration::from_millis(700));
    assert!(partial.iter().all(is_open) && is_open(&silent) && is_open(&idle));
    assert_eq!(server.raw_initialize(&[("Authorization", &format!("Bearer {TOKEN}"))]), 200);
    assert!(opened.elapsed() < Duration::from_millis(1900), "too slow to check before the timeout");

    let closed =
        wait_until(Duration::from_secs(8), || !partial.iter().any(is_open) && !is_open(&silent) && !is_open(&idle));
    assert!(closed, "connections without a complete head are still open {:?} after opening", opened.elapsed());
    let (status, text) = read_response(&mut slow_body);
    assert_eq!(status, 408, "{text}");
    assert!(text.contains("body_timeout_s") && text.contains("-32600"), "{text}");

    assert_eq!(server.raw_initialize(&[("Authorization", &format!("Bearer {TOKEN}"))]), 200);
}

#[test]
fn one_address_cannot_take_every_connection_or_shed_another_s() {
    let s = setup("max_connections: 40, max_connections_per_client: 8, reserved_connections: 8, header_timeout_s: 60");
    let server = start(&s);
    let addr = server.addr.clone();
    // Another client's connections, still sending their heads.
    let mut others: Vec<TcpStream> = (0..4)
        .map(|_| {
            let mut c = connect_from("127.0.0.2", &addr);
            c.write_all(partial_head(&addr).as_bytes()).unwrap();
            c
        })
        .collect();
    // A connection of the flooding address that has passed the token check.
    let mut proven = connect_from("127.0.0.1", &addr);
    proven.write_all(proving_request(&addr).as_bytes()).unwrap();
    assert_eq!(read_response(&mut proven).0, 400);

    let held = flood(&addr, 100);
    assert_eq!(held.len(), 100);
    // The address's share is 8, one of them the proven connection: the flood keeps at most 7.
    assert!(wait_until(Duration::from_secs(5), || held.iter().filter(|c| is_open(c)).count() <= 7));
    assert!(held.iter().rev().take(7).all(is_open), "the newest connections should be the ones kept");

    // What must not have happened: the other address's connections or the proven one shed.
    for c in &mut others {
        assert!(is_open(c), "another address's connection was shed");
        c.write_all(rest_of_request(&initialize(), true).as_bytes()).unwrap();
        let mut raw = String::new();
        c.set_read_timeout(Some(Duration::from_secs(15))).unwrap();
        let _ = c.read_to_string(&mut raw);
        assert!(raw.starts_with("HTTP/1.1 200"), "{raw}");
    }
    proven.write_all(proving_request(&addr).as_bytes()).unwrap();
    assert_eq!(read_response(&mut proven).0, 400, "the proven connection was shed");

    // An address whose share is all proven connections is refused with the limit named.
    let mut full: Vec<TcpStream> = (0..8)
        .map(|_| {
            let mut c = connect_from("127.0.0.3", &addr);
            c.write_all(proving_request(&addr).as_bytes()).unwrap();
            assert_eq!(read_response(&mut c).0, 400);
            c
        })
        .collect();
    let (status, head, body) = exchange_from("127.0.0.3", &addr, &proving_request(&addr));
    assert_eq!(status, 503, "{head}{body}");
    assert!(header(&head, "retry-after").is_some(), "{head}");
    let reply: Value = serde_json::from_str(&body).unwrap_or_else(|e| panic!("{e}: {body}"));
    assert_eq!(reply["error"]["code"], -32000, "{body}");
    let message = reply["error"]["message"].as_str().unwrap();
    assert!(message.contains("127.0.0.3") && message.contains("max_connections_per_client"), "{message}");
    for c in &mut full {
        c.write_all(proving_request(&addr).as_bytes()).unwrap();
        assert_eq!(read_response(c).0, 400, "a proven connection was dropped for the refused one");
    }

    let id = session_from("127.0.0.4", &addr).expect("a session from a fresh address");
    assert_eq!(hello_from("127.0.0.4", &addr, &id, "fresh"), "Hello, fresh.");
}

#[test]
fn one_address_cannot_hold_every_session() {
    let s = setup("max_sessions: 6, max_sessions_per_client: 2");
    let server = start(&s);
    let addr = server.addr.clone();
    let a = session_from("127.0.0.1", &addr).expect("first session");
    let _b = session_from("127.0.0.1", &addr).expect("second session");
    let (status, head, body) = session_from("127.0.0.1", &addr).expect_err("a third session from one address");
    assert_eq!(status, 429, "{head}{body}");
    assert!(header(&head, "retry-after").is_some(), "{head}");
    let reply: Value = serde_json::from_str(&body).unwrap_or_else(|e| panic!("{e}: {body}"));
    assert_eq!(reply["error"]["code"], -32000, "{body}");
    assert_eq!(reply["id"], 1, "the refused initialize was read: its id is answered {body}");
    let message = reply["error"]["message"].as_str().unwrap();
    assert!(message.contains("127.0.0.1") && message.contains("max_sessions_per_client"), "{message}");

    // Another address is not affected, and works.
    let c = session_from("127.0.0.2", &addr).expect("a session from another address");
    let _d = session_from("127.0.0.2", &addr).expect("a second session from another address");
    assert_eq!(hello_from("127.0.0.2", &addr, &c, "two"), "Hello, two.");
    // Ending a session gives its address the slot back.
    let del = format!(
        "DELETE /mcp HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {TOKEN}\r\nMcp-Session-Id: {a}\r\nConnection: close\r\n\r\n"
    );
    assert_eq!(exchange_from("127.0.0.1", &addr, &del).0, 200);
    let e = session_from("127.0.0.1", &addr).expect("a session after DELETE");
    assert_eq!(hello_from("127.0.0.1", &addr, &e, "one"), "Hello, one.");
}

/// `serve --http 127.0.0.1:0 ARGS`: the server and what it printed on stderr before listening.
fn start_with_stderr(s: &Setup, args: &[&str]) -> (std::process::Child, String, String) {
    use std::io::BufRead as _;
    let mut cmd = s.command(&["--http", "127.0.0.1:0"]);
    cmd.args(args);
    let mut child = cmd.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
    let mut lines = std::io::BufReader::new(child.stderr.take().unwrap()).lines();
    let mut before = String::new();
    let addr = loop {
        let line = lines.next().unwrap_or_else(|| panic!("server exited before listening: {before}")).unwrap();
        if let Some(rest) = line.strip_prefix("toolhost: serving MCP (streamable HTTP) at http://") {
            break rest.trim_end_matches("/mcp").to_string();
        }
        before.push_str(&line);
        before.push('\n');
    };
    std::thread::spawn(move || for _ in lines {});
    (child, addr, before)
}

#[test]
fn the_token_comes_from_a_file_off_the_command_line_and_token_on_it_is_warned_about() {
    let s = setup("");
    let file = s.dir.path().join("serve-token");
    std::fs::write(&file, "from-a-file\n").unwrap();
    let (child, addr, stderr) = start_with_stderr(&s, &["--token-file", file.to_str().unwrap()]);
    let server = HttpServer { child, addr };
    let cmdline = std::fs::read(format!("/proc/{}/cmdline", server.child.id())).unwrap();
    assert!(!String::from_utf8_lossy(&cmdline).contains("from-a-file"), "the secret is on the command line");
    assert!(!stderr.contains("warning"), "{stderr}");
    assert_eq!(server.raw_initialize(&[]), 401);
    assert_eq!(server.raw_initialize(&[("Authorization", "Bearer from-a-file")]), 200);
    drop(server);

    // An empty file is an empty token: refused, never "no authentication"; a missing one is named.
    std::fs::write(&file, "\n").unwrap();
    let out = s.command(&["--http", "127.0.0.1:0", "--token-file", file.to_str().unwrap()]).output().unwrap();
    assert!(!out.status.success() && String::from_utf8_lossy(&out.stderr).contains("the serve token is empty"));
    let missing = s.dir.path().join("no-such-token");
    let out = s.command(&["--http", "127.0.0.1:0", "--token-file", missing.to_str().unwrap()]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("--token-file") && err.contains("no-such-token"), "{err}");

    // --token still works, with a warning that it is visible to other processes.
    let (child, addr, stderr) = start_with_stderr(&s, &["--token", "on-the-line"]);
    let server = HttpServer { child, addr };
    assert!(stderr.contains("--token puts the secret on the command line") && stderr.contains("--token-file"));
    assert_eq!(server.raw_initialize(&[("Authorization", "Bearer on-the-line")]), 200);
}
