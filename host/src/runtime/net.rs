//! Outbound HTTPS for components, over `wasi:http`: the hooks that apply `toolhost-net`'s policy
//! (shared with host bash's proxy) to each request. Raw sockets are never granted; this is the
//! only way out of the sandbox, and every request passes three checks before a byte is sent:
//!
//! 1. the scheme is `https` — or `http` to a host the grant lists with an `http://` entry (a
//!    self-hosted service without TLS);
//! 2. the host (and port) is in the tool's `network:` grant;
//! 3. every address the name resolves to is public — loopback, private, link-local, CGNAT,
//!    multicast and reserved ranges (also inside an IPv6 address that carries them) are refused
//!    unless the tool has `allow_private_addresses: true`; cloud metadata needs that and an entry
//!    naming the metadata address or host name exactly. The connection goes to a vetted address,
//!    never to a second lookup, so DNS rebinding cannot slip past the check.
//!
//! `resolve-host` answers only names the grant covers: a lookup is itself a message to whoever
//! serves the name's zone, so a name outside the grant is never asked of DNS.
//!
//! A call's remaining time budget bounds DNS, connect, TLS, the response head and every body
//! read: a host future cannot be stopped by the epoch deadline, so it carries the deadline itself.
//! Refusals are recorded so the error the model sees can say which rule refused what.

use std::future::Future;
use std::net::IpAddr;
use std::path::Path;
use std::pin::Pin;
use std::sync::{Arc, Mutex, OnceLock};
use std::task::{Context, Poll};
use std::time::Instant;

use http::uri::Scheme;
use rustls::pki_types::{CertificateDer, ServerName};
use toolhost_net::{
    metadata_refusal, normalize_host, not_granted_refusal, private_address_refusal, NetGrant, ResolveError, HTTPS_PORT,
    HTTP_PORT,
};
use wasmtime_wasi_http::{Error as HttpError, RequestOptions, WasiBody, WasiHttpHooks};

/// TLS set-up shared by every call of a runtime: the web PKI roots plus any extra CA
/// certificates the operator configured (`TOOLHOST_EXTRA_CA_CERTS`).
pub struct NetShared {
    extra_roots: Vec<CertificateDer<'static>>,
    tls: OnceLock<Arc<rustls::ClientConfig>>,
    /// Names answered from this table instead of DNS (like `/etc/hosts`): set by an embedder or
    /// a test that must point a provider's name at its own server. The address rules still apply.
    static_hosts: std::sync::RwLock<std::collections::HashMap<String, Vec<IpAddr>>>,
}

impl NetShared {
    pub fn new(extra_ca_pem: Option<&Path>) -> anyhow::Result<Self> {
        use rustls::pki_types::pem::PemObject;
        let mut extra_roots = Vec::new();
        if let Some(path) = extra_ca_pem {
            let certs = CertificateDer::pem_file_iter(path)
                .map_err(|e| anyhow::anyhow!("extra CA certificates {}: {e}", path.display()))?;
            for c in certs {
                extra_roots.push(c.map_err(|e| anyhow::anyhow!("extra CA certificates {}: {e}", path.display()))?);
            }
            if extra_roots.is_empty() {
                anyhow::bail!("extra CA certificates {}: no PEM certificate in the file", path.display());
            }
            // Fail now, not at the first request, when a certificate is not usable as a root.
            let mut store = rustls::RootCertStore::empty();
            for c in &extra_roots {
                store.add(c.clone()).map_err(|e| anyhow::anyhow!("extra CA certificates {}: {e}", path.display()))?;
            }
        }
        Ok(Self { extra_roots, tls: OnceLock::new(), static_hosts: Default::default() })
    }

    /// Answer these names from the table instead of DNS (see `static_hosts`).
    pub fn set_static_hosts(&self, hosts: std::collections::HashMap<String, Vec<IpAddr>>) {
        if let Ok(mut h) = self.static_hosts.write() {
            *h = hosts.into_iter().map(|(k, v)| (k.to_ascii_lowercase(), v)).collect();
        }
    }

    fn static_host(&self, host: &str) -> Option<Vec<IpAddr>> {
        self.static_hosts.read().ok()?.get(&host.trim_end_matches('.').to_ascii_lowercase()).cloned()
    }

    /// The addresses of `host`: an IP literal as is, a static entry, else DNS, bounded by
    /// `deadline`.
    async fn lookup(&self, host: &str, deadline: tokio::time::Instant) -> Result<Vec<IpAddr>, HttpError> {
        if let Ok(ip) = host.parse::<IpAddr>() {
            return Ok(vec![ip]);
        }
        if let Some(found) = self.static_host(host) {
            return Ok(found);
        }
        let addrs = tokio::time::timeout_at(deadline, tokio::net::lookup_host((host, 0)))
            .await
            .map_err(|_| HttpError::DnsTimeout)?
            .map_err(|e| HttpError::DnsError { rcode: Some(e.to_string()), info_code: None })?;
        Ok(addrs.map(|a| a.ip()).collect())
    }

    fn tls(&self) -> Arc<rustls::ClientConfig> {
        self.tls
            .get_or_init(|| {
                let mut roots = rustls::RootCertStore { roots: webpki_roots::TLS_SERVER_ROOTS.to_vec() };
                for c in &self.extra_roots {
                    // Checked in `new`.
                    let _ = roots.add(c.clone());
                }
                let provider = Arc::new(rustls::crypto::ring::default_provider());
                let mut config = rustls::ClientConfig::builder_with_provider(provider)
                    .with_safe_default_protocol_versions()
                    .expect("ring supports the default TLS versions")
                    .with_root_certificates(roots)
                    .with_no_client_auth();
                config.alpn_protocols = vec![b"http/1.1".to_vec()];
                Arc::new(config)
            })
            .clone()
    }
}

/// The `wasi:http` hooks of one call: its grant, deadline and refusal log.
pub struct NetHooks {
    grant: Arc<NetGrant>,
    shared: Arc<NetShared>,
    deadline: Instant,
    refusals: Arc<Mutex<Vec<String>>>,
    lookups: usize,
}

/// Name lookups one call may ask of the host (`resolve-host`): enough for the target URL of a
/// fetch, too few to carry data out through DNS in bulk.
pub const MAX_GUEST_LOOKUPS: usize = 4;

/// How long one `resolve-host` may take, at most.
const GUEST_LOOKUP_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

impl NetHooks {
    pub fn new(grant: Arc<NetGrant>, shared: Arc<NetShared>, deadline: Instant) -> Self {
        Self { grant, shared, deadline, refusals: Arc::default(), lookups: 0 }
    }

    /// `resolve-host` for the guest: only a tool with a network grant may ask, only for names
    /// that grant covers (unless it allows any name), a few times per call, and the answer comes
    /// from the same table and resolver its own requests use. A refused name is never looked up.
    pub fn resolve_for_guest(&mut self, name: &str) -> Result<Vec<String>, String> {
        if self.grant.is_empty() {
            return Err("this tool has no network grant, so it may not resolve names".into());
        }
        self.lookups += 1;
        if self.lookups > MAX_GUEST_LOOKUPS {
            return Err(format!("at most {MAX_GUEST_LOOKUPS} name lookups per call"));
        }
        let name = normalize_host(name.trim());
        if name.is_empty() || name.len() > 253 {
            return Err("not a host name".into());
        }
        // An address literal asks nothing of DNS.
        if let Ok(ip) = name.parse::<IpAddr>() {
            return Ok(vec![ip.to_string()]);
        }
        if !self.grant.may_look_up(&name) {
            let why = format!(
                "resolve-host {name}: not in this tool's network grant {}; only names the grant covers are resolved",
                self.grant.describe()
            );
            refuse(&self.refusals, why.clone());
            return Err(why);
        }
        if let Some(found) = self.shared.static_host(&name) {
            return Ok(found.iter().map(IpAddr::to_string).collect());
        }
        let limit = self.deadline.saturating_duration_since(Instant::now()).min(GUEST_LOOKUP_TIMEOUT);
        // A sync host call, inside the call's future: the system resolver blocks, so it runs on
        // a thread of its own and is waited for no longer than the limit.
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::Builder::new()
            .name("toolhost-resolve".into())
            .spawn(move || {
                use std::net::ToSocketAddrs;
                let found = (name.as_str(), 0).to_socket_addrs().map(|a| a.map(|s| s.ip().to_string()).collect());
                let _ = tx.send(found);
            })
            .map_err(|e| e.to_string())?;
        match rx.recv_timeout(limit) {
            Ok(Ok(found)) => Ok(found),
            Ok(Err(e)) => Err(e.to_string()),
            Err(_) => Err("the lookup timed out".into()),
        }
    }

    /// What the host refused during the call, in order.
    pub fn refusals(&self) -> Vec<String> {
        self.refusals.lock().map(|r| r.clone()).unwrap_or_default()
    }

    /// Check what can be checked before any I/O; `Ok((host, port, plain))` when the request may
    /// go on to the address check (`plain`: plain HTTP, granted by an `http://` entry).
    fn admit(&self, uri: &http::Uri) -> Result<(String, u16, bool), String> {
        let target =
            format!("{}://{}", uri.scheme_str().unwrap_or("?"), uri.authority().map(|a| a.as_str()).unwrap_or(""));
        if self.grant.is_empty() {
            return Err(format!("{target}: this tool has no network grant (capabilities.network is empty)"));
        }
        let authority = uri.authority().ok_or_else(|| format!("{target}: the request has no host"))?;
        let host = normalize_host(authority.host());
        if uri.scheme() == Some(&Scheme::HTTP) {
            let port = authority.port_u16().unwrap_or(HTTP_PORT);
            if !self.grant.allows_plain(&host, port) {
                return Err(format!(
                    "{target}: only https is allowed, unless the grant lists the host with an http:// entry (capabilities.network: [\"http://{host}:{port}\"], for a self-hosted service without TLS)"
                ));
            }
            return Ok((host, port, true));
        }
        if uri.scheme() != Some(&Scheme::HTTPS) {
            return Err(format!("{target}: only https is allowed"));
        }
        let port = authority.port_u16().unwrap_or(HTTPS_PORT);
        if !self.grant.allows(&host, port) {
            return Err(not_granted_refusal(&target, "this tool's network grant", &self.grant));
        }
        Ok((host, port, false))
    }
}

type SendFuture = Box<
    dyn Future<
            Output = Result<
                (http::Response<WasiBody>, Box<dyn Future<Output = Result<(), HttpError>> + Send>),
                HttpError,
            >,
        > + Send,
>;

fn refuse(refusals: &Mutex<Vec<String>>, why: String) {
    tracing::warn!("outbound request refused: {why}");
    if let Ok(mut r) = refusals.lock() {
        if r.len() < 32 {
            r.push(why);
        }
    }
}

impl WasiHttpHooks for NetHooks {
    // Plain http is refused in `send_request`, where the refusal can be explained.
    fn send_request(
        &mut self,
        request: http::Request<WasiBody>,
        options: Option<RequestOptions>,
        _fut: Box<dyn Future<Output = Result<(), HttpError>> + Send>,
    ) -> SendFuture {
        let (host, port, plain) = match self.admit(request.uri()) {
            Ok(target) => target,
            Err(why) => {
                refuse(&self.refusals, why);
                return Box::new(async { Err(HttpError::HttpRequestDenied) });
            }
        };
        let tls = self.shared.tls();
        let grant = self.grant.clone();
        let deadline = tokio::time::Instant::from_std(self.deadline);
        let refusals = self.refusals.clone();
        let shared = self.shared.clone();
        Box::new(async move {
            let tls = if plain { None } else { Some(tls) };
            let (response, io) = send(request, host, port, &grant, tls, deadline, options, &refusals, &shared).await?;
            Ok((response, io))
        })
    }
}

#[allow(clippy::too_many_arguments)]
async fn send(
    mut request: http::Request<WasiBody>,
    host: String,
    port: u16,
    grant: &NetGrant,
    tls: Option<Arc<rustls::ClientConfig>>,
    deadline: tokio::time::Instant,
    options: Option<RequestOptions>,
    refusals: &Mutex<Vec<String>>,
    shared: &NetShared,
) -> Result<(http::Response<WasiBody>, Box<dyn Future<Output = Result<(), HttpError>> + Send>), HttpError> {
    use http_body_util::BodyExt;
    use tokio::time::timeout_at;

    let step_deadline = |limit: Option<std::time::Duration>| match limit {
        Some(d) => deadline.min(tokio::time::Instant::now() + d),
        None => deadline,
    };

    let scheme = if tls.is_some() { "https" } else { "http" };
    let vetted = vetted_addresses(shared, grant, scheme, &host, port, deadline, refusals).await?;

    let connect_deadline = step_deadline(options.and_then(|o| o.connect_timeout));
    let mut last_err = None;
    let mut stream = None;
    for addr in vetted {
        match timeout_at(connect_deadline, tokio::net::TcpStream::connect(addr)).await {
            Ok(Ok(s)) => {
                // A request's head and its streamed body leave in separate writes; with Nagle's
                // algorithm the body waits for the peer's delayed ACK (~40 ms a request).
                let _ = s.set_nodelay(true);
                stream = Some(s);
                break;
            }
            Ok(Err(e)) => last_err = Some(HttpError::Connect(e)),
            Err(_) => {
                last_err = Some(HttpError::ConnectionTimeout);
                break;
            }
        }
    }
    let stream = match stream {
        Some(s) => s,
        None => return Err(last_err.unwrap_or(HttpError::ConnectionRefused)),
    };
    let (mut sender, conn) = match tls {
        Some(tls) => {
            let server_name = match host.parse::<IpAddr>() {
                Ok(ip) => ServerName::from(ip),
                Err(_) => ServerName::try_from(host.clone()).map_err(|_| HttpError::HttpRequestUriInvalid)?,
            };
            let stream =
                timeout_at(connect_deadline, tokio_rustls::TlsConnector::from(tls).connect(server_name, stream))
                    .await
                    .map_err(|_| HttpError::ConnectionTimeout)?
                    .map_err(HttpError::Tls)?;
            handshake(stream, connect_deadline).await?
        }
        // Plain HTTP, granted by an `http://` entry.
        None => handshake(stream, connect_deadline).await?,
    };

    // The request line carries only the path; the authority is in the Host header.
    let path = request.uri().path_and_query().map(|p| p.as_str().to_string()).unwrap_or_else(|| "/".into());
    *request.uri_mut() =
        http::Uri::builder().path_and_query(path).build().map_err(|_| HttpError::HttpRequestUriInvalid)?;

    let head_deadline = step_deadline(options.and_then(|o| o.first_byte_timeout));
    let response =
        timeout_at(head_deadline, sender.send_request(request)).await.map_err(|_| HttpError::HttpResponseTimeout)??;
    let response = response.map(|incoming| {
        DeadlineBody { incoming, deadline: Box::pin(tokio::time::sleep_until(deadline)), _conn: conn }.boxed_unsync()
    });
    Ok((response, Box::new(async { Ok(()) })))
}

/// Resolve `host` once (names a test pinned resolve from its table) and keep the addresses
/// `grant` may reach; the caller connects only to these. A refusal is recorded with its rule.
async fn vetted_addresses(
    shared: &NetShared,
    grant: &NetGrant,
    scheme: &str,
    host: &str,
    port: u16,
    deadline: tokio::time::Instant,
    refusals: &Mutex<Vec<String>>,
) -> Result<Vec<std::net::SocketAddr>, HttpError> {
    let candidates: Vec<std::net::SocketAddr> =
        shared.lookup(host, deadline).await?.into_iter().map(|ip| std::net::SocketAddr::new(ip, port)).collect();
    let target = format!("{scheme}://{host}:{port}");
    match grant.check_addresses(host, candidates) {
        Ok(vetted) => Ok(vetted),
        Err(ResolveError::Prohibited(refused)) => {
            refuse(refusals, private_address_refusal(&target, &refused, "the tool has"));
            Err(HttpError::DestinationIpProhibited)
        }
        Err(ResolveError::Metadata(refused)) => {
            refuse(refusals, metadata_refusal(&target, &refused, "the tool has"));
            Err(HttpError::DestinationIpProhibited)
        }
        Err(_) => Err(HttpError::DestinationNotFound),
    }
}

/// An HTTP/1 client connection over `stream`, its driver running as a task that ends with the
/// returned guard.
async fn handshake<S>(
    stream: S,
    deadline: tokio::time::Instant,
) -> Result<(hyper::client::conn::http1::SendRequest<WasiBody>, AbortOnDrop), HttpError>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (sender, conn) = tokio::time::timeout_at(
        deadline,
        hyper::client::conn::http1::Builder::new().handshake(hyper_util::rt::TokioIo::new(stream)),
    )
    .await
    .map_err(|_| HttpError::ConnectionTimeout)??;
    let conn = AbortOnDrop(tokio::spawn(async move {
        if let Err(e) = conn.await {
            tracing::debug!("outbound connection ended: {e}");
        }
    }));
    Ok((sender, conn))
}

/// Aborts the connection task when the response (or the call) is dropped.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// A response body that fails once the call's deadline has passed.
struct DeadlineBody {
    incoming: hyper::body::Incoming,
    deadline: Pin<Box<tokio::time::Sleep>>,
    _conn: AbortOnDrop,
}

impl http_body::Body for DeadlineBody {
    type Data = bytes::Bytes;
    type Error = HttpError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        match Pin::new(&mut self.incoming).poll_frame(cx) {
            Poll::Ready(Some(Err(e))) => Poll::Ready(Some(Err(HttpError::from(e)))),
            Poll::Ready(other) => Poll::Ready(other.map(|f| f.map_err(HttpError::from))),
            Poll::Pending => match self.deadline.as_mut().poll(cx) {
                Poll::Ready(()) => Poll::Ready(Some(Err(HttpError::HttpResponseTimeout))),
                Poll::Pending => Poll::Pending,
            },
        }
    }

    fn is_end_stream(&self) -> bool {
        self.incoming.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.incoming.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grant(entries: &[&str]) -> NetGrant {
        NetGrant::new(entries.iter().map(|e| toolhost_net::HostRule::parse(e).unwrap()).collect(), false)
    }

    fn grant_private(entries: &[&str], allow_private: bool) -> Arc<NetGrant> {
        Arc::new(NetGrant::new(
            entries.iter().map(|e| toolhost_net::HostRule::parse(e).unwrap()).collect(),
            allow_private,
        ))
    }

    /// A table that answers every name a test asks about, so nothing here goes to DNS: a name
    /// for each address that must stay refused, and a public one.
    fn pinned() -> Arc<NetShared> {
        let shared = Arc::new(NetShared::new(None).unwrap());
        let table = [
            ("meta.example.com", "169.254.169.254"),
            ("meta6.example.com", "fd00:ec2::254"),
            ("mapped.example.com", "::ffff:169.254.169.254"),
            ("nat64meta.example.com", "64:ff9b:1::a9fe:a9fe"),
            ("mapped10.example.com", "::ffff:10.0.0.1"),
            ("nat64lo.example.com", "64:ff9b::7f00:1"),
            ("metadata.google.internal", "169.254.169.254"),
            ("public.example.com", "8.8.8.8"),
            ("secret-data.attacker.test", "8.8.4.4"),
        ];
        shared.set_static_hosts(table.iter().map(|(n, a)| (n.to_string(), vec![a.parse().unwrap()])).collect());
        shared
    }

    async fn vet(shared: &NetShared, grant: &NetGrant, host: &str) -> (Result<usize, HttpError>, Vec<String>) {
        let refusals = Mutex::new(Vec::new());
        let far = tokio::time::Instant::now() + std::time::Duration::from_secs(5);
        let verdict = vetted_addresses(shared, grant, "https", host, 443, far, &refusals).await.map(|v| v.len());
        (verdict, refusals.into_inner().unwrap())
    }

    /// The decision before any connection, for names that resolve to addresses carrying
    /// metadata or private IPv4, with `allow_private_addresses` off and on. Nothing connects.
    #[tokio::test]
    async fn names_resolving_to_metadata_or_embedded_private_addresses_are_refused() {
        let shared = pinned();
        let metadata = ["meta.example.com", "meta6.example.com", "mapped.example.com", "nat64meta.example.com"];
        let private = ["mapped10.example.com", "nat64lo.example.com"];
        for allow_private in [false, true] {
            let g = grant_private(&["*.example.com", "169.254.169.254"], allow_private);
            for host in metadata {
                let (verdict, refusals) = vet(&shared, &g, host).await;
                assert!(matches!(verdict, Err(HttpError::DestinationIpProhibited)), "{host}: {verdict:?}");
                assert!(
                    refusals[0].contains("(cloud metadata), which is refused unless the tool has allow_private_addresses: true and a grant entry naming"),
                    "{host}: {refusals:?}"
                );
            }
            for host in private {
                let (verdict, refusals) = vet(&shared, &g, host).await;
                if allow_private {
                    assert_eq!(verdict.unwrap(), 1, "{host}");
                } else {
                    assert!(matches!(verdict, Err(HttpError::DestinationIpProhibited)), "{host}");
                    assert!(refusals[0].contains("refused unless the tool has allow_private_addresses: true"));
                }
            }
            // The literal the grant names: reached only with allow_private_addresses.
            let (verdict, _) = vet(&shared, &g, "169.254.169.254").await;
            assert_eq!(verdict.is_ok(), allow_private, "{verdict:?}");
            // Control: a public answer is kept either way.
            assert_eq!(vet(&shared, &g, "public.example.com").await.0.unwrap(), 1);
        }
        // GCP's metadata name, named exactly, with allow_private_addresses.
        let named = grant_private(&["http://metadata.google.internal"], true);
        assert_eq!(vet(&shared, &named, "metadata.google.internal").await.0.unwrap(), 1);
    }

    /// `resolve-host` answers names the grant covers and refuses the rest before any lookup: the
    /// pinned table would answer `secret-data.attacker.test`, and it is not asked.
    #[test]
    fn guest_lookups_stay_inside_the_grant() {
        let far = Instant::now() + std::time::Duration::from_secs(5);
        let mut hooks = NetHooks::new(grant_private(&["*.example.com"], false), pinned(), far);
        let err = hooks.resolve_for_guest("secret-data.attacker.test").unwrap_err();
        assert_eq!(
            err,
            "resolve-host secret-data.attacker.test: not in this tool's network grant [*.example.com]; only names the grant covers are resolved"
        );
        assert_eq!(hooks.refusals(), [err]);
        assert_eq!(hooks.resolve_for_guest("Public.Example.com.").unwrap(), ["8.8.8.8"]);
        // An address literal asks nothing of DNS and is answered as it is.
        assert_eq!(hooks.resolve_for_guest("10.0.0.1").unwrap(), ["10.0.0.1"]);
        // A grant that allows any name (a URL checker) answers it.
        let any = Arc::new(NetGrant::clone(&grant_private(&["*.example.com"], false)).with_any_name_lookups(true));
        let mut hooks = NetHooks::new(any, pinned(), far);
        assert_eq!(hooks.resolve_for_guest("secret-data.attacker.test").unwrap(), ["8.8.4.4"]);
    }

    #[test]
    fn admit_explains_refusals() {
        let shared = Arc::new(NetShared::new(None).unwrap());
        let far = Instant::now() + std::time::Duration::from_secs(5);
        let none = NetHooks::new(Arc::new(NetGrant::default()), shared.clone(), far);
        let err = none.admit(&"https://api.tavily.com/search".parse().unwrap()).unwrap_err();
        assert!(err.contains("no network grant"), "{err}");
        let some = NetHooks::new(Arc::new(grant(&["api.tavily.com"])), shared, far);
        assert_eq!(
            some.admit(&"https://API.Tavily.com./x".parse().unwrap()).unwrap(),
            ("api.tavily.com".into(), 443, false)
        );
        let err = some.admit(&"http://api.tavily.com/x".parse().unwrap()).unwrap_err();
        assert!(err.contains("only https"), "{err}");
        let err = some.admit(&"https://evil.test/x".parse().unwrap()).unwrap_err();
        assert!(err.contains("not in this tool's network grant [api.tavily.com]"), "{err}");
    }
}
