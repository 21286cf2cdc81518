//! Per-call cost of a community web tool: `web_search` (Serper) through `Toolhost::call` — a
//! fresh component instance, a new TLS connection over wasi:http, the JSON answer formatted —
//! next to the same request from a native client (hyper + rustls, also a new connection each
//! time), both against one loopback TLS server. Prints median and mean of each.
//!
//! `cargo bench -p toolhost --bench community` (`COMMUNITY_BENCH_CALLS`, default 300).

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use toolhost::assembly::AssemblyRequest;
use toolhost::{HostOptions, Toolhost};

#[path = "../../tests/support/provider_server.rs"]
mod provider_server;

const ANSWER: &str = r#"{"organic": [{"title": "Rust", "link": "https://www.rust-lang.org/", "snippet": "A language empowering everyone."}, {"title": "Book", "link": "https://doc.rust-lang.org/book/", "snippet": "The book."}]}"#;

fn stats(mut v: Vec<Duration>) -> (f64, f64) {
    v.sort();
    let median = v[v.len() / 2].as_secs_f64() * 1e3;
    let mean = v.iter().map(Duration::as_secs_f64).sum::<f64>() / v.len() as f64 * 1e3;
    (median, mean)
}

async fn native_request(tls: Arc<rustls::ClientConfig>, port: u16, body: String) {
    use http_body_util::{BodyExt, Full};
    let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    let name = rustls::pki_types::ServerName::from(std::net::IpAddr::from([127, 0, 0, 1]));
    let stream = tokio_rustls::TlsConnector::from(tls).connect(name, tcp).await.unwrap();
    let (mut send, conn) = hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream)).await.unwrap();
    tokio::spawn(conn);
    let req = hyper::Request::post("/search")
        .header("host", format!("127.0.0.1:{port}"))
        .header("x-api-key", "k")
        .header("content-type", "application/json")
        .body(Full::new(bytes::Bytes::from(body)))
        .unwrap();
    let resp = send.send_request(req).await.unwrap();
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    let v: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
    assert!(v["organic"].is_array());
}

fn main() {
    // `cargo test --all-targets` runs this too (without `--bench`): then a quick smoke run.
    let full = std::env::args().any(|a| a == "--bench");
    let calls: usize =
        std::env::var("COMMUNITY_BENCH_CALLS").ok().and_then(|v| v.parse().ok()).unwrap_or(if full { 300 } else { 10 });
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    rt.block_on(async {
        let server = provider_server::start().await;
        server.set(provider_server::Answer::json(200, ANSWER));
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("config.yaml");
        std::fs::write(
            &config,
            format!(
                "tools:\n  - name: web_search\n    group: web\n    use: deerflow.community.serper.tools:web_search_tool\n    api_key: k\n    base_url: {}\n    capabilities: {{network: [\"127.0.0.1:*\"], allow_private_addresses: true}}\n",
                server.base_url()
            ),
        )
        .unwrap();
        let mut opts = HostOptions::new(&config);
        opts.data_dir = dir.path().join("data");
        opts.extra_ca_certs = Some(server.ca_pem.clone());
        let host = Toolhost::open_blocking(opts).unwrap();
        let req = AssemblyRequest::default();
        let args = json!({"query": "rust language"});
        for _ in 0..calls.min(20) {
            host.call(&req, "b", "web_search", args.clone(), None).await.unwrap();
        }
        let mut tool = Vec::with_capacity(calls);
        for _ in 0..calls {
            let t = Instant::now();
            let r = host.call(&req, "b", "web_search", args.clone(), None).await.unwrap();
            tool.push(t.elapsed());
            assert!(r.outcome.text_content().contains("\"total_results\": 2"));
        }

        let mut roots = rustls::RootCertStore::empty();
        use rustls::pki_types::pem::PemObject;
        for c in rustls::pki_types::CertificateDer::pem_file_iter(&server.ca_pem).unwrap() {
            roots.add(c.unwrap()).unwrap();
        }
        let tls = Arc::new(
            rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
                .with_safe_default_protocol_versions()
                .unwrap()
                .with_root_certificates(roots)
                .with_no_client_auth(),
        );
        let body = r#"{"q": "rust language", "num": 5}"#.to_string();
        for _ in 0..calls.min(20) {
            native_request(tls.clone(), server.port, body.clone()).await;
        }
        let mut native = Vec::with_capacity(calls);
        for _ in 0..calls {
            let t = Instant::now();
            native_request(tls.clone(), server.port, body.clone()).await;
            native.push(t.elapsed());
        }
        let (tm, ta) = stats(tool);
        let (nm, na) = stats(native);
        println!("{calls} calls each, loopback TLS server");
        println!("Toolhost::call web_search (serper component): median {tm:.3} ms, mean {ta:.3} ms");
        println!("native hyper+rustls, same request:          median {nm:.3} ms, mean {na:.3} ms");
        println!("component overhead: median {:.3} ms ({:.1}x)", tm - nm, tm / nm);
    });
}
