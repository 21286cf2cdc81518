//! A stand-in for a provider's API: a TLS server on 127.0.0.1 (certificate from a throwaway CA)
//! that answers every request with the response it is set to, and records what it received.
//! Besides plain answers it can cut a body short, trickle one slowly, or redirect.

#![allow(dead_code)]

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// What the server answers.
#[derive(Debug, Clone)]
pub enum Answer {
    /// A complete response: status, extra headers, body.
    Full { status: u16, headers: Vec<(String, String)>, body: Vec<u8> },
    /// Headers promising `declared` bytes, then `body` (shorter) and the connection closed.
    Truncated { declared: usize, body: Vec<u8> },
    /// A 200 whose body arrives one byte every `every`.
    Slow { every: Duration, body: Vec<u8> },
}

impl Answer {
    pub fn json(status: u16, body: &str) -> Self {
        Answer::Full {
            status,
            headers: vec![("content-type".into(), "application/json".into())],
            body: body.as_bytes().to_vec(),
        }
    }

    pub fn redirect(location: &str) -> Self {
        Answer::Full { status: 302, headers: vec![("location".into(), location.into())], body: Vec::new() }
    }
}

/// One request as received.
#[derive(Debug, Clone)]
pub struct Received {
    pub method: String,
    /// Path and query.
    pub target: String,
    /// Lower-case names.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Received {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }
}

pub struct ProviderServer {
    pub port: u16,
    pub ca_pem: PathBuf,
    pub answer: Arc<Mutex<Answer>>,
    pub received: Arc<Mutex<Vec<Received>>>,
    pub connections: Arc<AtomicUsize>,
    _dir: tempfile::TempDir,
}

impl ProviderServer {
    pub fn base_url(&self) -> String {
        format!("https://127.0.0.1:{}", self.port)
    }

    pub fn set(&self, answer: Answer) {
        *self.answer.lock().unwrap() = answer;
        self.received.lock().unwrap().clear();
        self.connections.store(0, Ordering::SeqCst);
    }

    pub fn received(&self) -> Vec<Received> {
        self.received.lock().unwrap().clone()
    }

    pub fn connection_count(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }
}

fn reason(status: u16) -> &'static str {
    http::StatusCode::from_u16(status).ok().and_then(|s| s.canonical_reason()).unwrap_or("")
}

/// Start the server on the current tokio runtime.
pub async fn start() -> ProviderServer {
    let dir = tempfile::tempdir().unwrap();
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca_params.distinguished_name.push(rcgen::DnType::CommonName, "toolhost provider test CA");
    let ca = rcgen::CertifiedIssuer::self_signed(ca_params, rcgen::KeyPair::generate().unwrap()).unwrap();
    let leaf_key = rcgen::KeyPair::generate().unwrap();
    let leaf = rcgen::CertificateParams::new(vec!["127.0.0.1".to_string(), "localhost".to_string()])
        .unwrap()
        .signed_by(&leaf_key, &ca)
        .unwrap();
    let ca_pem = dir.path().join("ca.pem");
    std::fs::write(&ca_pem, ca.pem()).unwrap();
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
    let answer = Arc::new(Mutex::new(Answer::json(200, "{}")));
    let received: Arc<Mutex<Vec<Received>>> = Arc::default();
    let connections = Arc::new(AtomicUsize::new(0));
    let (a, r, c) = (answer.clone(), received.clone(), connections.clone());
    tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else { return };
            c.fetch_add(1, Ordering::SeqCst);
            let (acceptor, a, r) = (acceptor.clone(), a.clone(), r.clone());
            tokio::spawn(async move {
                let Ok(mut tls) = acceptor.accept(tcp).await else { return };
                let Some(req) = read_request(&mut tls).await else { return };
                r.lock().unwrap().push(req);
                let answer = a.lock().unwrap().clone();
                let _ = write_answer(&mut tls, answer).await;
            });
        }
    });
    ProviderServer { port, ca_pem, answer, received, connections, _dir: dir }
}

/// Read one HTTP/1.1 request (content-length or chunked body).
async fn read_request<S: tokio::io::AsyncRead + Unpin>(s: &mut S) -> Option<Received> {
    let mut buf = Vec::new();
    let head_end = loop {
        let mut chunk = [0u8; 4096];
        let n = s.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let mut first = lines.next()?.split(' ');
    let method = first.next()?.to_string();
    let target = first.next()?.to_string();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let mut rest = buf[head_end..].to_vec();
    let get = |k: &str| headers.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
    let body = if get("transfer-encoding").is_some_and(|v| v.eq_ignore_ascii_case("chunked")) {
        loop {
            if let Some(b) = dechunk(&rest) {
                break b;
            }
            let mut chunk = [0u8; 4096];
            let n = s.read(&mut chunk).await.ok()?;
            if n == 0 {
                break dechunk(&rest).unwrap_or_default();
            }
            rest.extend_from_slice(&chunk[..n]);
        }
    } else {
        let len: usize = get("content-length").and_then(|v| v.parse().ok()).unwrap_or(0);
        while rest.len() < len {
            let mut chunk = [0u8; 4096];
            let n = s.read(&mut chunk).await.ok()?;
            if n == 0 {
                break;
            }
            rest.extend_from_slice(&chunk[..n]);
        }
        rest.truncate(len);
        rest
    };
    Some(Received { method, target, headers, body })
}

/// A complete chunked body, or `None` while it is still arriving.
fn dechunk(mut data: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    loop {
        let line_end = data.windows(2).position(|w| w == b"\r\n")?;
        let size =
            usize::from_str_radix(std::str::from_utf8(&data[..line_end]).ok()?.split(';').next()?.trim(), 16).ok()?;
        data = &data[line_end + 2..];
        if size == 0 {
            return Some(out);
        }
        if data.len() < size + 2 {
            return None;
        }
        out.extend_from_slice(&data[..size]);
        data = &data[size + 2..];
    }
}

async fn write_answer<S: tokio::io::AsyncWrite + Unpin>(s: &mut S, answer: Answer) -> std::io::Result<()> {
    match answer {
        Answer::Full { status, headers, body } => {
            let mut head = format!("HTTP/1.1 {status} {}\r\n", reason(status));
            for (k, v) in &headers {
                head.push_str(&format!("{k}: {v}\r\n"));
            }
            head.push_str(&format!("content-length: {}\r\nconnection: close\r\n\r\n", body.len()));
            s.write_all(head.as_bytes()).await?;
            s.write_all(&body).await?;
        }
        Answer::Truncated { declared, body } => {
            let head =
                format!("HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {declared}\r\n\r\n");
            s.write_all(head.as_bytes()).await?;
            s.write_all(&body).await?;
        }
        Answer::Slow { every, body } => {
            let head =
                format!("HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n", body.len());
            s.write_all(head.as_bytes()).await?;
            for b in body {
                s.write_all(&[b]).await?;
                s.flush().await?;
                tokio::time::sleep(every).await;
            }
        }
    }
    s.flush().await?;
    s.shutdown().await
}
