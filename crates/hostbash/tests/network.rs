//! Host bash's network, with real curl, python3 and bash sockets against real listeners on
//! loopback: none at all by default; in allow-list mode HTTPS through toolhost's proxy to a
//! granted host only — every other way (another host, plain HTTP, a mismatched TLS server name,
//! a private address without the grant's consent, a direct connect past the proxy, UDP) is
//! refused, and the server counts what reached it.

mod common;

use std::net::TcpListener;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::{ctx, run, tool};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use toolhost_core::Status;
use toolhost_hostbash::{confinement_status, BashNetwork, ConfinementStatus};
use toolhost_net::{HostRule, NetGrant};

/// A TLS server on 127.0.0.1 with a certificate for `localhost` and 127.0.0.1 from a test CA.
/// Counts TCP connections, completed handshakes and answered requests.
struct TlsServer {
    port: u16,
    ca_pem: String,
    tcp: Arc<AtomicUsize>,
    handshakes: Arc<AtomicUsize>,
    requests: Arc<AtomicUsize>,
}

impl TlsServer {
    fn counts(&self) -> (usize, usize, usize) {
        (self.tcp.load(Ordering::SeqCst), self.handshakes.load(Ordering::SeqCst), self.requests.load(Ordering::SeqCst))
    }
}

async fn tls_server() -> TlsServer {
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca_params.distinguished_name.push(rcgen::DnType::CommonName, "toolhost bash test CA");
    let ca = rcgen::CertifiedIssuer::self_signed(ca_params, rcgen::KeyPair::generate().unwrap()).unwrap();
    let leaf_key = rcgen::KeyPair::generate().unwrap();
    let leaf = rcgen::CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()])
        .unwrap()
        .signed_by(&leaf_key, &ca)
        .unwrap();
    let key = rustls::pki_types::PrivateKeyDer::Pkcs8(leaf_key.serialize_der().into());
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![leaf.der().clone(), ca.der().clone()], key)
        .unwrap();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let (tcp, handshakes, requests) =
        (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let counters = (tcp.clone(), handshakes.clone(), requests.clone());
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else { return };
            counters.0.fetch_add(1, Ordering::SeqCst);
            let (acceptor, handshakes, requests) = (acceptor.clone(), counters.1.clone(), counters.2.clone());
            tokio::spawn(async move {
                let Ok(mut tls) = acceptor.accept(stream).await else { return };
                handshakes.fetch_add(1, Ordering::SeqCst);
                let mut head = Vec::new();
                let mut buf = [0u8; 1024];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match tls.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                requests.fetch_add(1, Ordering::SeqCst);
                let body = "hello-through-the-proxy\n";
                let reply =
                    format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}", body.len());
                let _ = tls.write_all(reply.as_bytes()).await;
                let _ = tls.shutdown().await;
            });
        }
    });
    TlsServer { port, ca_pem: ca.pem(), tcp, handshakes, requests }
}

fn grant(entries: &[String], allow_private: bool) -> BashNetwork {
    BashNetwork::Allowlist(Arc::new(NetGrant::new(
        entries.iter().map(|e| HostRule::parse(e).unwrap()).collect(),
        allow_private,
    )))
}

/// Python that speaks to the proxy in `$HTTPS_PROXY` by hand: `CONNECT localhost:PORT`, then a
/// TLS handshake that names `evil.example` instead.
const SNI_MISMATCH: &str = r#"
import base64, os, socket, ssl, sys, urllib.parse
proxy = urllib.parse.urlsplit(os.environ["HTTPS_PROXY"])
s = socket.create_connection((proxy.hostname, proxy.port), timeout=10)
auth = base64.b64encode(f"{proxy.username}:{proxy.password}".encode()).decode()
port = sys.argv[1]
s.sendall(f"CONNECT localhost:{port} HTTP/1.1\r\nHost: localhost:{port}\r\nProxy-Authorization: Basic {auth}\r\n\r\n".encode())
print(s.recv(1024).split(b"\r\n")[0].decode())
ctx = ssl.create_default_context()
ctx.check_hostname = False
ctx.verify_mode = ssl.CERT_NONE
try:
    ctx.wrap_socket(s, server_hostname="evil.example").sendall(b"GET / HTTP/1.1\r\nHost: evil.example\r\n\r\n")
    print("TLS: handshake completed")
except Exception as e:
    print("TLS: refused", type(e).__name__)
"#;

#[tokio::test(flavor = "multi_thread")]
async fn network_none_refuses_every_socket() {
    assert!(matches!(confinement_status(), ConfinementStatus::Active { .. }), "{}", confinement_status());
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let dir = tempfile::tempdir().unwrap();
    let c = ctx(dir.path(), "t1");
    let t = tool(|_| {});
    let (text, _) = run(&t, &c, &format!("(exec 3<>/dev/tcp/127.0.0.1/{port}) && echo CONNECTED")).await;
    assert!(!text.contains("CONNECTED") && text.contains("socket: Operation not permitted"), "{text}");
    let (text, _) = run(
        &t,
        &c,
        &format!(
            "/usr/bin/python3 -c 'import socket\nfor f, k in [(socket.AF_INET, socket.SOCK_STREAM), (socket.AF_INET6, socket.SOCK_STREAM), (socket.AF_INET, socket.SOCK_DGRAM), (socket.AF_NETLINK, socket.SOCK_RAW), (socket.AF_PACKET, socket.SOCK_RAW), (socket.AF_UNIX, socket.SOCK_STREAM)]:\n  try:\n    socket.socket(f, k); print(\"OPENED\", f, k)\n  except OSError as e: print(\"refused\", e.errno)'; (echo x > /dev/udp/127.0.0.1/{port}) 2>&1"
        ),
    )
    .await;
    assert!(!text.contains("OPENED"), "{text}");
    assert_eq!(text.matches("refused 1").count(), 6, "every family refused with EPERM: {text}");
    assert!(text.contains("socket: Operation not permitted"), "{text}");
    // Nothing reached the listener, which is live: the test itself can connect.
    assert!(listener.accept().is_err(), "the command reached the listener");
    std::net::TcpStream::connect(("127.0.0.1", port)).expect("positive control: the listener accepts");
    assert!(listener.accept().is_ok());
    let (text, status) = run(&t, &c, "echo still-works").await;
    assert_eq!((text.as_str(), status), ("still-works\n", Status::Success));
}

#[tokio::test(flavor = "multi_thread")]
async fn allowlist_reaches_only_granted_hosts_through_the_proxy() {
    let server = tls_server().await;
    let port = server.port;
    let dir = tempfile::tempdir().unwrap();
    let c = ctx(dir.path(), "t1");
    std::fs::write(c.paths().workspace().join("ca.pem"), &server.ca_pem).unwrap();
    let t = tool(|c| c.network = grant(&[format!("localhost:{port}")], true));
    t.self_test().expect("allow-list mode engages on this kernel");

    // The granted host, through the proxy the environment names.
    let (text, status) =
        run(&t, &c, &format!("curl -sS --max-time 20 --cacert ca.pem https://localhost:{port}/")).await;
    assert_eq!((text.as_str(), status), ("hello-through-the-proxy\n", Status::Success), "{text}");
    assert_eq!(server.counts(), (1, 1, 1));

    // The same server under a name the grant does not list.
    let (text, _) = run(&t, &c, &format!("curl -sS --max-time 20 --cacert ca.pem https://127.0.0.1:{port}/")).await;
    assert!(text.contains("403"), "{text}");
    assert!(
        text.contains(&format!("- https://127.0.0.1:{port}: not in sandbox.bash_network.allow [localhost:{port}]")),
        "{text}"
    );
    // Plain HTTP, even to the granted host.
    let (text, _) = run(&t, &c, &format!("curl -sS --max-time 20 http://localhost:{port}/")).await;
    assert!(text.contains(&format!("GET http://localhost:{port}/: plain HTTP is refused")), "{text}");
    // A TLS server name that is not the CONNECT host.
    let script = c.paths().workspace().join("sni.py");
    std::fs::write(&script, SNI_MISMATCH).unwrap();
    let (text, _) = run(&t, &c, &format!("/usr/bin/python3 sni.py {port}")).await;
    assert!(text.contains("HTTP/1.1 200 Connection established") && text.contains("TLS: refused"), "{text}");
    assert!(
        text.contains(&format!("CONNECT localhost:{port}: the TLS server name 'evil.example' is not the CONNECT host")),
        "{text}"
    );
    // Past the proxy: curl without it, and bash's own socket.
    let (text, _) = run(
        &t,
        &c,
        &format!(
            "curl -sS --max-time 5 --noproxy '*' --cacert ca.pem https://localhost:{port}/; (exec 3<>/dev/tcp/127.0.0.1/{port}) && echo DIRECT"
        ),
    )
    .await;
    assert!(!text.contains("hello-through-the-proxy") && !text.contains("DIRECT"), "{text}");
    // UDP, and with it DNS, stays off.
    let (text, _) = run(&t, &c, &format!("(echo x > /dev/udp/127.0.0.1/{port}) 2>&1")).await;
    assert!(text.contains("socket: Operation not permitted"), "{text}");

    // Only the granted request was answered; the mismatched hello's tunnel opened a TCP
    // connection upstream but no handshake reached the server, and nothing went past the proxy.
    assert_eq!(server.counts(), (2, 1, 1), "(tcp, handshakes, requests)");
    let (text, _) = run(&t, &c, &format!("curl -sS --max-time 20 --cacert ca.pem https://localhost:{port}/")).await;
    assert_eq!(text, "hello-through-the-proxy\n", "a normal call still works");
}

#[tokio::test(flavor = "multi_thread")]
async fn allowlist_refuses_private_addresses_unless_the_grant_allows_them() {
    let server = tls_server().await;
    let port = server.port;
    let dir = tempfile::tempdir().unwrap();
    let c = ctx(dir.path(), "t1");
    std::fs::write(c.paths().workspace().join("ca.pem"), &server.ca_pem).unwrap();
    let t = tool(|c| c.network = grant(&[format!("localhost:{port}")], false));
    let (text, _) = run(&t, &c, &format!("curl -sS --max-time 20 --cacert ca.pem https://localhost:{port}/")).await;
    assert!(text.contains("403"), "{text}");
    assert!(text.contains("which is refused unless sandbox.bash_network has allow_private_addresses: true"), "{text}");
    assert_eq!(server.counts(), (0, 0, 0), "nothing reached the loopback server");
    // Positive control: the same grant with allow_private_addresses reaches it.
    let t = tool(|c| c.network = grant(&[format!("localhost:{port}")], true));
    let (text, _) = run(&t, &c, &format!("curl -sS --max-time 20 --cacert ca.pem https://localhost:{port}/")).await;
    assert_eq!(text, "hello-through-the-proxy\n");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_proxy_requires_the_commands_credentials() {
    let server = tls_server().await;
    let port = server.port;
    let dir = tempfile::tempdir().unwrap();
    let c = ctx(dir.path(), "t1");
    std::fs::write(c.paths().workspace().join("ca.pem"), &server.ca_pem).unwrap();
    let t = tool(|c| c.network = grant(&[format!("localhost:{port}")], true));
    // The proxy without the credential, and with a wrong one: both refused before any check.
    let (text, _) = run(
        &t,
        &c,
        &format!(
            "p=${{HTTPS_PROXY##*@}}; u=${{HTTPS_PROXY%%:*@*}}; curl -sS --max-time 20 --cacert ca.pem --proxy \"http://$p\" https://localhost:{port}/; echo; curl -sS --max-time 20 --cacert ca.pem --proxy \"http://c0:wrong@$p\" https://localhost:{port}/"
        ),
    )
    .await;
    assert_eq!(text.matches("407").count(), 2, "{text}");
    assert_eq!(server.counts(), (0, 0, 0));
    let (text, _) = run(&t, &c, &format!("curl -sS --max-time 20 --cacert ca.pem https://localhost:{port}/")).await;
    assert_eq!(text, "hello-through-the-proxy\n", "positive control: the command's own credential works");
    // Seen from the host, the proxy is not on its loopback when commands get a namespace of
    // their own; where it is, a caller without the credential is refused the same way.
    let (text, _) = run(&t, &c, "printf '%s' \"${HTTPS_PROXY##*:}\"").await;
    let proxy_port: u16 = text.trim().parse().unwrap();
    if let Ok(mut s) = tokio::net::TcpStream::connect(("127.0.0.1", proxy_port)).await {
        s.write_all(format!("CONNECT localhost:{port} HTTP/1.1\r\n\r\n").as_bytes()).await.unwrap();
        let mut reply = vec![0u8; 256];
        let n = tokio::time::timeout(Duration::from_secs(10), s.read(&mut reply)).await.unwrap().unwrap();
        let reply = String::from_utf8_lossy(&reply[..n]).into_owned();
        assert!(reply.starts_with("HTTP/1.1 407") || reply.is_empty(), "{reply}");
    }
    assert_eq!(server.counts(), (1, 1, 1));
}
