//! The HTTPS proxy of a confined process's network grant (host bash's `sandbox.bash_network`
//! allow-list, an MCP server's or ACP agent's `network:`): the process reaches the network only
//! through it, and it applies the rules of a component's `capabilities.network` (from
//! `toolhost-net`): `CONNECT` to an allowed host and port, the name resolved once and refused
//! when private unless allowed, the tunnel connected to that checked address, and the TLS
//! ClientHello's server name equal to the `CONNECT` host. Plain-HTTP requests are refused.
//!
//! When toolhost can (it holds CAP_SYS_ADMIN), the proxy's listening socket lives in a network
//! namespace of its own that commands join: there is nothing else to connect to but the proxy.
//! Elsewhere the listener is on the host's 127.0.0.1 and Landlock limits commands to its port.

use std::collections::HashMap;
use std::io;
use std::net::IpAddr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use toolhost_net::{
    normalize_host, not_granted_refusal, private_address_refusal, split_host_port, NetGrant, ResolveError,
};

use crate::sni::{self, Hello};

/// How long a client has to send its request head, and its ClientHello.
const CLIENT_TIMEOUT: Duration = Duration::from_secs(10);
/// DNS and connect to the checked address.
const UPSTREAM_TIMEOUT: Duration = Duration::from_secs(15);
/// The largest request head the proxy reads.
const MAX_HEAD: usize = 8 * 1024;
/// Tunnels open at once; more wait (a command cannot exhaust the host's descriptors).
const MAX_TUNNELS: usize = 256;
/// Where refusals say the grant lives, e.g. `sandbox.bash_network.allow` and
/// `sandbox.bash_network has`.
#[derive(Debug, Clone)]
pub struct GrantNames {
    /// The allow-list, in "not in WHOSE [..]".
    pub whose: String,
    /// The setting, in "refused unless SETTING allow_private_addresses: true".
    pub setting: String,
}

impl GrantNames {
    /// Host bash's names.
    pub fn bash() -> Self {
        Self { whose: "sandbox.bash_network.allow".into(), setting: "sandbox.bash_network has".into() }
    }
}
/// Refusals kept per call.
const MAX_REFUSALS: usize = 16;

/// The proxy's listening socket, bound before any command runs (the start-up self-test connects
/// to it), and the network namespace it lives in when commands get one.
pub struct Endpoint {
    listener: Mutex<Option<std::net::TcpListener>>,
    port: u16,
    netns: Option<OwnedFd>,
}

impl Endpoint {
    /// Bind 127.0.0.1:0, in a fresh network namespace with only loopback when `isolate`.
    pub fn bind(isolate: bool) -> io::Result<Self> {
        let (listener, netns) = if isolate {
            let (listener, ns) = new_netns(|| std::net::TcpListener::bind("127.0.0.1:0"))?;
            (listener, Some(ns))
        } else {
            (std::net::TcpListener::bind("127.0.0.1:0")?, None)
        };
        let port = listener.local_addr()?.port();
        Ok(Self { listener: Mutex::new(Some(listener)), port, netns })
    }

    /// Bind in a namespace of its own where this process may make one (CAP_SYS_ADMIN), else on
    /// the host's loopback.
    pub fn bind_best() -> Result<Self, String> {
        let isolated = crate::CapSets::current()
            .is_some_and(|c| c.has(crate::CAP_SYS_ADMIN))
            .then(|| Self::bind(true))
            .and_then(|r| r.map_err(|e| tracing::warn!("network proxy: no network namespace: {e}")).ok());
        match isolated {
            Some(endpoint) => Ok(endpoint),
            None => Self::bind(false).map_err(|e| format!("cannot bind the network proxy: {e}")),
        }
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// The namespace commands join, if they get one.
    pub fn netns(&self) -> Option<&OwnedFd> {
        self.netns.as_ref()
    }

    /// Run `f` on a thread inside this endpoint's namespace (the self-test binds a second port
    /// there). `None` when the endpoint has no namespace.
    pub fn in_netns<T: Send + 'static>(
        &self,
        f: impl FnOnce() -> io::Result<T> + Send + 'static,
    ) -> Option<io::Result<T>> {
        let ns = self.netns.as_ref()?.try_clone().ok()?;
        Some(run_in_thread(move || {
            // SAFETY: setns on an owned namespace descriptor, on this thread only.
            if unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
                return Err(io::Error::last_os_error());
            }
            f()
        }))
    }
}

/// Run `f` on a short-lived thread: namespace changes stay on it, never on a runtime worker.
fn run_in_thread<T: Send + 'static>(f: impl FnOnce() -> io::Result<T> + Send + 'static) -> io::Result<T> {
    std::thread::spawn(f).join().unwrap_or_else(|_| Err(io::Error::other("the namespace thread panicked")))
}

/// A new network namespace with loopback up: `f` runs inside it (its sockets stay there), and
/// the namespace is returned as a descriptor children can `setns` into.
fn new_netns<T: Send + 'static>(f: impl FnOnce() -> io::Result<T> + Send + 'static) -> io::Result<(T, OwnedFd)> {
    run_in_thread(move || {
        // SAFETY: unshare affects only this (short-lived) thread.
        if unsafe { libc::unshare(libc::CLONE_NEWNET) } != 0 {
            return Err(io::Error::last_os_error());
        }
        loopback_up()?;
        let value = f()?;
        let path = c"/proc/thread-self/ns/net";
        // SAFETY: NUL-terminated path; the fd is owned on success.
        let fd = unsafe { libc::open(path.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: just opened.
        Ok((value, unsafe { OwnedFd::from_raw_fd(fd) }))
    })
}

fn loopback_up() -> io::Result<()> {
    // SAFETY: a plain socket for the interface ioctls, closed by OwnedFd.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: just created.
    let sock = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: a zeroed ifreq is valid; the name fits IFNAMSIZ.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (dst, src) in req.ifr_name.iter_mut().zip(b"lo\0") {
        *dst = *src as libc::c_char;
    }
    // SAFETY: ioctls on a valid socket with a valid ifreq.
    unsafe {
        if libc::ioctl(sock.as_raw_fd(), libc::SIOCGIFFLAGS, &mut req) != 0 {
            return Err(io::Error::last_os_error());
        }
        req.ifr_ifru.ifru_flags |= libc::IFF_UP as libc::c_short;
        if libc::ioctl(sock.as_raw_fd(), libc::SIOCSIFFLAGS, &req) != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// The running proxy: its port, the credential commands present, and what it refused for each
/// call.
pub struct Proxy {
    port: u16,
    secret: String,
    grant: Arc<NetGrant>,
    names: GrantNames,
    refusals: Mutex<HashMap<String, Vec<String>>>,
    task: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

impl Drop for Proxy {
    fn drop(&mut self) {
        if let Ok(mut task) = self.task.lock() {
            if let Some(t) = task.take() {
                t.abort();
            }
        }
    }
}

impl Proxy {
    /// Serve `endpoint` on the current runtime. `lifetime` bounds each tunnel (a command's
    /// timeout: a backgrounded download cannot hold a tunnel forever).
    pub fn start(
        endpoint: &Endpoint,
        grant: Arc<NetGrant>,
        names: GrantNames,
        lifetime: Duration,
    ) -> io::Result<Arc<Self>> {
        let listener = endpoint
            .listener
            .lock()
            .map_err(|_| io::Error::other("the proxy listener lock is poisoned"))?
            .take()
            .ok_or_else(|| io::Error::other("the proxy is already serving"))?;
        listener.set_nonblocking(true)?;
        let listener = TcpListener::from_std(listener)?;
        let proxy = Arc::new(Self {
            port: endpoint.port,
            secret: random_secret()?,
            grant,
            names,
            refusals: Mutex::new(HashMap::new()),
            task: Mutex::new(None),
        });
        let weak = Arc::downgrade(&proxy);
        let task = tokio::spawn(async move {
            let slots = Arc::new(tokio::sync::Semaphore::new(MAX_TUNNELS));
            loop {
                let Ok(permit) = slots.clone().acquire_owned().await else { return };
                let Ok((stream, _)) = listener.accept().await else { continue };
                let Some(proxy) = weak.upgrade() else { return };
                tokio::spawn(async move {
                    let _permit = permit;
                    proxy.serve(stream, lifetime).await;
                });
            }
        });
        if let Ok(mut t) = proxy.task.lock() {
            *t = Some(task);
        }
        Ok(proxy)
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// The environment that points a command's HTTP clients at the proxy. `call` names the
    /// call in the credential, so refusals can be reported with its output.
    pub fn env(&self, call: &str) -> Vec<(String, String)> {
        if let Ok(mut r) = self.refusals.lock() {
            r.insert(call.to_string(), Vec::new());
        }
        let url = format!("http://{call}:{}@127.0.0.1:{}", self.secret, self.port);
        ["HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"]
            .into_iter()
            .map(|k| (k.to_string(), url.clone()))
            .collect()
    }

    /// What the proxy refused for `call`, and forget the call.
    pub fn take_refusals(&self, call: &str) -> Vec<String> {
        self.refusals.lock().ok().and_then(|mut r| r.remove(call)).unwrap_or_default()
    }

    fn refuse(&self, call: Option<&str>, why: String) {
        tracing::warn!("network proxy refused: {why}");
        if let (Some(call), Ok(mut r)) = (call, self.refusals.lock()) {
            if let Some(list) = r.get_mut(call) {
                if list.len() < MAX_REFUSALS {
                    list.push(why);
                }
            }
        }
    }

    async fn serve(&self, mut client: TcpStream, lifetime: Duration) {
        let (head, early) = match tokio::time::timeout(CLIENT_TIMEOUT, read_head(&mut client)).await {
            Ok(Ok(parts)) => parts,
            _ => return,
        };
        let request = match Request::parse(&head) {
            Ok(r) => r,
            Err(why) => return respond(&mut client, 400, why).await,
        };
        let Some(call) = request.call(&self.secret) else {
            return respond(&mut client, 407, "proxy credentials are missing or wrong".into()).await;
        };
        match self.open_tunnel(&request).await {
            Ok((upstream, host)) => self.relay(client, upstream, early, &host, &call, &request.target, lifetime).await,
            Err((status, why)) => {
                self.refuse(Some(&call), why.clone());
                respond(&mut client, status, why).await
            }
        }
    }

    /// Check a request and connect to the checked address: `(upstream, host)`, or the status
    /// and refusal to send back.
    async fn open_tunnel(&self, request: &Request) -> Result<(TcpStream, String), (u16, String)> {
        if request.method != "CONNECT" {
            return Err((
                403,
                format!(
                    "{} {}: plain HTTP is refused; only HTTPS (CONNECT) is allowed",
                    request.method, request.target
                ),
            ));
        }
        let (host, port) = split_host_port(&request.target)
            .and_then(|(h, p)| Some((normalize_host(h), p?.parse::<u16>().ok()?)))
            .ok_or_else(|| (400, format!("CONNECT {}: expected host:port", request.target)))?;
        let target = format!("https://{}", request.target);
        if !self.grant.allows(&host, port) {
            return Err((403, not_granted_refusal(&target, &self.names.whose, &self.grant)));
        }
        let deadline = tokio::time::Instant::now() + UPSTREAM_TIMEOUT;
        let vetted = self.grant.resolve(&host, port, deadline).await.map_err(|e| match e {
            ResolveError::Prohibited(refused) => (403, private_address_refusal(&target, &refused, &self.names.setting)),
            e @ ResolveError::Metadata(_) => (403, format!("{target}: {e}")),
            other => (502, format!("{target}: {other}")),
        })?;
        let mut last = None;
        for addr in vetted {
            match tokio::time::timeout_at(deadline, TcpStream::connect(addr)).await {
                Ok(Ok(stream)) => return Ok((stream, host)),
                Ok(Err(e)) => last = Some(format!("{target}: cannot connect to {addr}: {e}")),
                Err(_) => {
                    last = Some(format!("{target}: connecting to {addr} timed out"));
                    break;
                }
            }
        }
        Err((502, last.unwrap_or_else(|| format!("{target}: no address to connect to"))))
    }

    /// Answer 200, check the ClientHello's server name against the `CONNECT` host, then relay
    /// bytes both ways until either side closes or the tunnel's lifetime ends.
    #[allow(clippy::too_many_arguments)]
    async fn relay(
        &self,
        mut client: TcpStream,
        mut upstream: TcpStream,
        mut hello: Vec<u8>,
        host: &str,
        call: &str,
        target: &str,
        lifetime: Duration,
    ) {
        if client.write_all(b"HTTP/1.1 200 Connection established\r\n\r\n").await.is_err() {
            return;
        }
        let read_hello = async {
            let mut buf = [0u8; 4096];
            loop {
                match sni::parse(&hello) {
                    Hello::Incomplete => {}
                    done => return done,
                }
                if hello.len() > sni::MAX_HELLO + 5 * 8 {
                    return Hello::Invalid("a ClientHello larger than the proxy accepts");
                }
                match client.read(&mut buf).await {
                    Ok(0) | Err(_) => return Hello::Invalid("the client closed before its ClientHello"),
                    Ok(n) => hello.extend_from_slice(&buf[..n]),
                }
            }
        };
        let verdict =
            tokio::time::timeout(CLIENT_TIMEOUT, read_hello).await.unwrap_or(Hello::Invalid("no ClientHello in time"));
        let refusal = match verdict {
            Hello::Complete(Some(name)) if normalize_host(&name) == host => None,
            Hello::Complete(Some(name)) => {
                Some(format!("CONNECT {target}: the TLS server name '{name}' is not the CONNECT host"))
            }
            // Clients send no server name for an IP literal.
            Hello::Complete(None) if host.parse::<IpAddr>().is_ok() => None,
            Hello::Complete(None) => Some(format!("CONNECT {target}: the TLS ClientHello names no server (SNI)")),
            Hello::Invalid(why) => Some(format!("CONNECT {target}: {why}; only HTTPS is allowed")),
            Hello::Incomplete => Some(format!("CONNECT {target}: an incomplete ClientHello")),
        };
        if let Some(why) = refusal {
            return self.refuse(Some(call), why);
        }
        if upstream.write_all(&hello).await.is_err() {
            return;
        }
        let _ = tokio::time::timeout(lifetime, tokio::io::copy_bidirectional(&mut client, &mut upstream)).await;
    }
}

/// Read up to the end of the request head; returns the head and any bytes after it.
async fn read_head(stream: &mut TcpStream) -> io::Result<(String, Vec<u8>)> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let rest = buf.split_off(end + 4);
            return Ok((String::from_utf8_lossy(&buf).into_owned(), rest));
        }
        if buf.len() > MAX_HEAD {
            return Err(io::Error::new(io::ErrorKind::InvalidData, "request head too large"));
        }
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

struct Request {
    method: String,
    target: String,
    auth: Option<String>,
}

impl Request {
    fn parse(head: &str) -> Result<Self, String> {
        let mut lines = head.split("\r\n");
        let line = lines.next().unwrap_or("");
        let mut parts = line.split(' ');
        let (Some(method), Some(target), Some(version)) = (parts.next(), parts.next(), parts.next()) else {
            return Err("a malformed request line".into());
        };
        if !version.starts_with("HTTP/1.") {
            return Err(format!("unsupported protocol {version}"));
        }
        let auth = lines.find_map(|l| {
            let (name, value) = l.split_once(':')?;
            name.trim().eq_ignore_ascii_case("proxy-authorization").then(|| value.trim().to_string())
        });
        Ok(Self { method: method.to_string(), target: target.to_string(), auth })
    }

    /// The call id of valid `Basic` credentials (`<call>:<secret>`).
    fn call(&self, secret: &str) -> Option<String> {
        let encoded = self.auth.as_deref()?.strip_prefix("Basic ")?;
        let decoded = String::from_utf8(base64_decode(encoded.trim())?).ok()?;
        let (call, password) = decoded.split_once(':')?;
        constant_time_eq(password.as_bytes(), secret.as_bytes()).then(|| call.to_string())
    }
}

async fn respond(stream: &mut TcpStream, status: u16, why: String) {
    let reason = match status {
        400 => "Bad Request",
        403 => "Forbidden",
        407 => "Proxy Authentication Required",
        _ => "Bad Gateway",
    };
    let body = format!("toolhost: {why}\n");
    let auth = if status == 407 { "Proxy-Authenticate: Basic realm=\"toolhost\"\r\n" } else { "" };
    let response = format!(
        "HTTP/1.1 {status} {reason}\r\n{auth}Content-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = stream.write_all(response.as_bytes()).await;
    let _ = stream.shutdown().await;
}

fn random_secret() -> io::Result<String> {
    let mut bytes = [0u8; 16];
    // SAFETY: fills a stack buffer of the given length.
    let n = unsafe { libc::getrandom(bytes.as_mut_ptr().cast(), bytes.len(), 0) };
    if n != bytes.len() as isize {
        return Err(io::Error::last_os_error());
    }
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn base64_decode(s: &str) -> Option<Vec<u8>> {
    let value = |c: u8| -> Option<u32> {
        Some(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        } as u32)
    };
    let s = s.trim_end_matches('=').as_bytes();
    let mut out = Vec::with_capacity(s.len() * 3 / 4);
    for chunk in s.chunks(4) {
        let mut n = 0u32;
        for (i, c) in chunk.iter().enumerate() {
            n |= value(*c)? << (18 - 6 * i);
        }
        let bytes = n.to_be_bytes();
        match chunk.len() {
            4 => out.extend_from_slice(&bytes[1..4]),
            3 => out.extend_from_slice(&bytes[1..3]),
            2 => out.push(bytes[1]),
            _ => return None,
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_decode_and_name_the_call() {
        assert_eq!(base64_decode("dG9vbGhvc3Q6c2VjcmV0").unwrap(), b"toolhost:secret");
        assert_eq!(base64_decode("YQ==").unwrap(), b"a");
        assert_eq!(base64_decode("YWI=").unwrap(), b"ab");
        assert!(base64_decode("!!").is_none());
        let req =
            Request::parse("CONNECT x:443 HTTP/1.1\r\nHost: x:443\r\nProxy-Authorization: Basic YzE6czNjcjN0\r\n\r\n")
                .unwrap();
        assert_eq!((req.method.as_str(), req.target.as_str()), ("CONNECT", "x:443"));
        assert_eq!(req.call("s3cr3t").as_deref(), Some("c1"));
        assert_eq!(req.call("other"), None);
        assert!(Request::parse("garbage\r\n\r\n").is_err());
    }
}
