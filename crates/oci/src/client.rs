//! The distribution API client: manifests and blobs by digest or tag, uploads, and the two
//! ways registries authenticate (a `WWW-Authenticate: Bearer` challenge answered with a token
//! from the realm, or `Basic`). Plain HTTP only for loopback registries and those the caller
//! lists; HTTPS otherwise.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use reqwest::{Method, RequestBuilder, Response, StatusCode};

use crate::manifest::{ArtifactLayers, ComponentInfo, Descriptor, Manifest, WasmConfig};
use crate::{
    sha256_digest, BlobCache, CredentialStore, OciError, Reference, CONFIG_MEDIA_TYPE, MANIFEST_MEDIA_TYPE,
    MAX_COMPONENT_BYTES, MAX_MANIFEST_BYTES, MAX_SIGNATURE_BYTES, SIGNATURE_MEDIA_TYPE, WASM_LAYER_MEDIA_TYPE,
};

/// How to build a [`Client`].
#[derive(Debug, Clone, Default)]
pub struct ClientOptions {
    /// Where credentials come from.
    pub credentials: CredentialStore,
    /// Registries (`host[:port]`) spoken to over plain HTTP besides loopback ones.
    pub insecure_registries: Vec<String>,
}

/// A registry client. One per process is enough; it keeps the tokens it was given.
pub struct Client {
    http: reqwest::Client,
    opts: ClientOptions,
    /// `Authorization` values by (registry, scope), learnt from challenges.
    auth: Mutex<HashMap<(String, String), String>>,
}

/// A component pulled (or found in the cache), with what was learnt on the way.
#[derive(Debug, Clone)]
pub struct Pulled {
    /// The reference pinned to the manifest digest that was loaded.
    pub reference: Reference,
    /// The manifest's digest.
    pub manifest_digest: String,
    /// The component's bytes (their digest is `wasm_digest`, checked).
    pub wasm: Vec<u8>,
    /// The component layer's digest.
    pub wasm_digest: String,
    /// The signature layer's bytes (a `.minisig` text), if the artifact has one.
    pub signature: Option<Vec<u8>>,
    /// Things to tell the user: the tag moved since last time, the registry was unreachable and
    /// the last resolution was used.
    pub notes: Vec<String>,
    /// Whether nothing was downloaded.
    pub from_cache: bool,
    /// The manifest's bytes.
    pub manifest_bytes: Vec<u8>,
    /// Whether the tag's resolution is to be remembered (an unpinned reference).
    pub record_tag: bool,
}

/// What `push` sends.
#[derive(Debug, Clone)]
pub struct PushRequest<'a> {
    /// The component.
    pub wasm: &'a [u8],
    /// Its minisign signature (`.minisig` text), if signed.
    pub signature: Option<&'a [u8]>,
    /// What it imports and exports, for the config blob.
    pub component: ComponentInfo,
    /// The RFC 3339 time to record as `created`.
    pub created: String,
}

impl Client {
    /// A client; fails only if the TLS backend cannot start.
    pub fn new(opts: ClientOptions) -> Result<Self, String> {
        let http = reqwest::Client::builder()
            .user_agent(concat!("toolhost/", env!("CARGO_PKG_VERSION")))
            .connect_timeout(Duration::from_secs(10))
            .read_timeout(Duration::from_secs(60))
            .build()
            .map_err(|e| format!("cannot build the registry HTTP client: {e}"))?;
        Ok(Client { http, opts, auth: Mutex::new(HashMap::new()) })
    }

    fn scheme(&self, r: &Reference) -> &'static str {
        if r.is_loopback() || self.opts.insecure_registries.iter().any(|i| i.eq_ignore_ascii_case(&r.registry)) {
            "http"
        } else {
            "https"
        }
    }

    fn repo_url(&self, r: &Reference) -> String {
        format!("{}://{}/v2/{}", self.scheme(r), r.registry, r.repository)
    }

    /// Send a request (rebuilt by `build` for a retry); on a 401, answer the challenge once and
    /// send again. `what` names the object in errors.
    async fn send(
        &self,
        r: &Reference,
        what: &str,
        push: bool,
        build: &(dyn Fn(&reqwest::Client) -> RequestBuilder + Sync),
    ) -> Result<Response, OciError> {
        let scope = format!("repository:{}:{}", r.repository, if push { "pull,push" } else { "pull" });
        let key = (r.registry.clone(), scope.clone());
        let cached = self.auth.lock().unwrap_or_else(|p| p.into_inner()).get(&key).cloned();
        let attempt = |auth: Option<String>| {
            let mut req = build(&self.http);
            if let Some(a) = auth {
                req = req.header(reqwest::header::AUTHORIZATION, a);
            }
            req.send()
        };
        let unreachable = |e: reqwest::Error| OciError::Unreachable { reference: r.to_string(), why: error_chain(&e) };
        let resp = attempt(cached.clone()).await.map_err(unreachable)?;
        if resp.status() != StatusCode::UNAUTHORIZED {
            return check_status(r, what, resp).await;
        }
        let challenge = resp
            .headers()
            .get(reqwest::header::WWW_AUTHENTICATE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string();
        let header = self.answer_challenge(r, &challenge, &scope).await?;
        self.auth.lock().unwrap_or_else(|p| p.into_inner()).insert(key, header.clone());
        let resp = attempt(Some(header)).await.map_err(unreachable)?;
        if matches!(resp.status(), StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN) {
            return Err(OciError::Auth {
                reference: r.to_string(),
                why: format!(
                    "the registry answered {} for {what}; {}",
                    resp.status().as_u16(),
                    self.opts.credentials.describe_sources(&r.registry)
                ),
            });
        }
        check_status(r, what, resp).await
    }

    /// The `Authorization` value that answers `challenge`.
    async fn answer_challenge(&self, r: &Reference, challenge: &str, scope: &str) -> Result<String, OciError> {
        let auth_err = |why: String| OciError::Auth { reference: r.to_string(), why };
        let creds = self.opts.credentials.get(&r.registry);
        let (scheme, params) = parse_challenge(challenge);
        match scheme.to_ascii_lowercase().as_str() {
            "basic" => match creds {
                Some(c) => Ok(c.basic_header()),
                None => Err(auth_err(format!(
                    "the registry asks for a user name and password; {}",
                    self.opts.credentials.describe_sources(&r.registry)
                ))),
            },
            "bearer" => {
                let realm = params.get("realm").ok_or_else(|| auth_err("a Bearer challenge without a realm".into()))?;
                let mut url =
                    reqwest::Url::parse(realm).map_err(|e| auth_err(format!("token realm '{realm}': {e}")))?;
                let realm_loopback = url.host_str().is_some_and(|h| {
                    let h = h.trim_start_matches('[').trim_end_matches(']');
                    h == "localhost" || h.parse::<std::net::IpAddr>().is_ok_and(|a| a.is_loopback())
                });
                match url.scheme() {
                    "https" => {}
                    "http" if realm_loopback || self.scheme(r) == "http" => {}
                    s => {
                        return Err(auth_err(format!("token realm '{realm}' is {s}, not https; credentials not sent")))
                    }
                }
                {
                    let mut q = url.query_pairs_mut();
                    if let Some(s) = params.get("service") {
                        q.append_pair("service", s);
                    }
                    q.append_pair("scope", scope);
                }
                let mut req = self.http.get(url);
                if let Some(c) = creds {
                    req = req.header(reqwest::header::AUTHORIZATION, c.basic_header());
                }
                let resp = req.send().await.map_err(|e| OciError::Unreachable {
                    reference: r.to_string(),
                    why: format!("token service {realm}: {}", error_chain(&e)),
                })?;
                if !resp.status().is_success() {
                    return Err(auth_err(format!(
                        "token service {realm} answered {}; {}",
                        resp.status().as_u16(),
                        self.opts.credentials.describe_sources(&r.registry)
                    )));
                }
                let body = read_capped(r, "the token response", resp, 1 << 20).await?;
                #[derive(serde::Deserialize)]
                struct Token {
                    token: Option<String>,
                    access_token: Option<String>,
                }
                let t: Token = serde_json::from_slice(&body)
                    .map_err(|e| auth_err(format!("token service {realm} sent no JSON token: {e}")))?;
                let token = t.token.or(t.access_token).filter(|t| !t.is_empty());
                let token = token.ok_or_else(|| auth_err(format!("token service {realm} sent no token")))?;
                Ok(format!("Bearer {token}"))
            }
            _ => Err(auth_err(format!("unsupported authentication challenge '{challenge}'"))),
        }
    }

    /// The manifest `r` names (by digest when pinned, else by tag) and its digest. A pinned
    /// manifest must hash to the pin.
    pub async fn fetch_manifest(&self, r: &Reference) -> Result<(Vec<u8>, String), OciError> {
        let url = format!("{}/manifests/{}", self.repo_url(r), r.manifest_key());
        let what = format!("manifest {}", r.manifest_key());
        let resp =
            self.send(r, &what, false, &|h| h.get(&url).header(reqwest::header::ACCEPT, MANIFEST_MEDIA_TYPE)).await?;
        let ctype = resp
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(|s| s.split(';').next().unwrap_or("").trim().to_string())
            .unwrap_or_default();
        if !ctype.is_empty() && ctype != MANIFEST_MEDIA_TYPE {
            return Err(OciError::NotWasm {
                reference: r.to_string(),
                why: format!("the registry serves a {ctype}, not an OCI image manifest ({MANIFEST_MEDIA_TYPE})"),
            });
        }
        let bytes = read_capped(r, &what, resp, MAX_MANIFEST_BYTES).await?;
        let digest = sha256_digest(&bytes);
        if let Some(pin) = &r.digest {
            if *pin != digest {
                return Err(OciError::DigestMismatch {
                    reference: r.to_string(),
                    what: "the manifest".into(),
                    expected: pin.clone(),
                    actual: digest,
                });
            }
        }
        Ok((bytes, digest))
    }

    /// The blob `d` describes, checked against its size and digest while it downloads, at most
    /// `max` bytes.
    pub async fn fetch_blob(&self, r: &Reference, d: &Descriptor, max: u64, what: &str) -> Result<Vec<u8>, OciError> {
        if d.size > max {
            return Err(OciError::TooBig {
                reference: r.to_string(),
                what: format!("{what} ({} bytes)", d.size),
                limit: max,
            });
        }
        let url = format!("{}/blobs/{}", self.repo_url(r), d.digest);
        let what = format!("{what} {}", d.digest);
        let resp = self.send(r, &what, false, &|h| h.get(&url)).await?;
        let mut resp = resp;
        let mut out = Vec::with_capacity(d.size.min(64 << 20) as usize);
        while let Some(chunk) =
            resp.chunk().await.map_err(|e| OciError::Unreachable { reference: r.to_string(), why: error_chain(&e) })?
        {
            if out.len() as u64 + chunk.len() as u64 > d.size {
                return Err(OciError::SizeMismatch {
                    reference: r.to_string(),
                    what,
                    expected: d.size,
                    actual: out.len() as u64 + chunk.len() as u64,
                });
            }
            out.extend_from_slice(&chunk);
        }
        if out.len() as u64 != d.size {
            return Err(OciError::SizeMismatch {
                reference: r.to_string(),
                what,
                expected: d.size,
                actual: out.len() as u64,
            });
        }
        let actual = sha256_digest(&out);
        if actual != d.digest {
            return Err(OciError::DigestMismatch {
                reference: r.to_string(),
                what,
                expected: d.digest.clone(),
                actual,
            });
        }
        Ok(out)
    }

    /// Pull the component `r` names through `cache`. A pinned reference whose blobs are cached
    /// never touches the network. An unpinned one is resolved now; when its tag points elsewhere
    /// than last time, a note names both digests; when the registry cannot be reached, the last
    /// resolution is used (with a note) if its blobs are cached. Nothing is written to the
    /// cache: once the caller has accepted the component (its signature), [`BlobCache::commit`]
    /// stores it.
    pub async fn pull(&self, cache: &BlobCache, r: &Reference) -> Result<Pulled, OciError> {
        let mut notes = Vec::new();
        let (manifest_bytes, manifest_digest, fresh_manifest) = match &r.digest {
            Some(pin) => match cache.get(pin, MAX_MANIFEST_BYTES) {
                Some(b) => (b, pin.clone(), false),
                None => {
                    let (b, d) = self.fetch_manifest(r).await?;
                    (b, d, true)
                }
            },
            None => {
                let last = cache.tag_record(r);
                match self.fetch_manifest(r).await {
                    Ok((b, d)) => {
                        if let Some(last) = &last {
                            if last.digest != d {
                                notes.push(format!("{r} moved: it was {} last time and is now {d}", last.digest));
                            }
                        }
                        (b, d, true)
                    }
                    Err(e @ OciError::Unreachable { .. }) => {
                        let cached =
                            last.as_ref().and_then(|l| cache.get(&l.digest, MAX_MANIFEST_BYTES).map(|b| (b, l)));
                        match cached {
                            Some((b, l)) => {
                                notes.push(format!("{e}; using {} (its last resolution, cached)", r.pinned(&l.digest)));
                                (b, l.digest.clone(), false)
                            }
                            None => return Err(e),
                        }
                    }
                    Err(e) => return Err(e),
                }
            }
        };
        let pinned = r.pinned(&manifest_digest);
        let (_, layers) = Manifest::parse_wasm(&manifest_bytes)
            .map_err(|why| OciError::NotWasm { reference: pinned.to_string(), why })?;
        let ArtifactLayers { wasm: wasm_desc, signature: sig_desc } = layers;
        let mut downloaded = fresh_manifest;
        let wasm = match cache.get(&wasm_desc.digest, MAX_COMPONENT_BYTES) {
            Some(b) if b.len() as u64 == wasm_desc.size => b,
            _ => {
                downloaded = true;
                self.fetch_blob(&pinned, &wasm_desc, MAX_COMPONENT_BYTES, "the component layer").await?
            }
        };
        let signature = match &sig_desc {
            None => None,
            Some(d) => Some(match cache.get(&d.digest, MAX_SIGNATURE_BYTES) {
                Some(b) if b.len() as u64 == d.size => b,
                _ => {
                    downloaded = true;
                    self.fetch_blob(&pinned, d, MAX_SIGNATURE_BYTES, "the signature layer").await?
                }
            }),
        };
        Ok(Pulled {
            reference: pinned,
            manifest_digest,
            wasm,
            wasm_digest: wasm_desc.digest,
            signature,
            manifest_bytes,
            notes,
            from_cache: !downloaded,
            record_tag: r.digest.is_none(),
        })
    }

    /// Push a component (and its signature) as a wasm artifact to `r`'s tag; returns the
    /// manifest's digest. A digest in `r` is refused: a push names a tag.
    pub async fn push(&self, r: &Reference, req: &PushRequest<'_>) -> Result<String, OciError> {
        let tag = match (&r.tag, &r.digest) {
            (Some(t), None) => t.clone(),
            _ => {
                return Err(OciError::BadReference {
                    reference: r.to_string(),
                    why: "push to a tag (oci://REGISTRY/REPO:TAG), without a digest".into(),
                })
            }
        };
        let mut layers = vec![Descriptor::of(WASM_LAYER_MEDIA_TYPE, req.wasm)];
        if let Some(s) = req.signature {
            layers.push(Descriptor::of(SIGNATURE_MEDIA_TYPE, s));
        }
        let config = WasmConfig {
            created: req.created.clone(),
            author: None,
            architecture: "wasm".into(),
            os: "wasip2".into(),
            layer_digests: layers.iter().map(|l| l.digest.clone()).collect(),
            component: Some(req.component.clone()),
        };
        let config_bytes = serde_json::to_vec(&config)
            .map_err(|e| OciError::Cache { reference: r.to_string(), why: format!("cannot encode the config: {e}") })?;
        let manifest = Manifest {
            schema_version: 2,
            media_type: Some(MANIFEST_MEDIA_TYPE.into()),
            artifact_type: Some("application/vnd.wasm.component.v1+wasm".into()),
            config: Descriptor::of(CONFIG_MEDIA_TYPE, &config_bytes),
            layers,
            annotations: None,
        };
        self.upload_blob(r, &config_bytes).await?;
        self.upload_blob(r, req.wasm).await?;
        if let Some(s) = req.signature {
            self.upload_blob(r, s).await?;
        }
        let manifest_bytes = serde_json::to_vec(&manifest).map_err(|e| OciError::Cache {
            reference: r.to_string(),
            why: format!("cannot encode the manifest: {e}"),
        })?;
        let url = format!("{}/manifests/{tag}", self.repo_url(r));
        self.send(r, "the manifest upload", true, &|h| {
            h.put(&url).header(reqwest::header::CONTENT_TYPE, MANIFEST_MEDIA_TYPE).body(manifest_bytes.clone())
        })
        .await?;
        Ok(sha256_digest(&manifest_bytes))
    }

    /// Upload one blob unless the registry has it (monolithic upload: POST, then PUT ?digest=).
    async fn upload_blob(&self, r: &Reference, bytes: &[u8]) -> Result<(), OciError> {
        let digest = sha256_digest(bytes);
        let head_url = format!("{}/blobs/{digest}", self.repo_url(r));
        match self.send(r, &format!("blob {digest}"), true, &|h| h.request(Method::HEAD, &head_url)).await {
            Ok(_) => return Ok(()),
            Err(OciError::NotFound { .. }) => {}
            Err(e) => return Err(e),
        }
        let start = format!("{}/blobs/uploads/", self.repo_url(r));
        let resp = self.send(r, "an upload session", true, &|h| h.post(&start)).await?;
        let location =
            resp.headers().get(reqwest::header::LOCATION).and_then(|v| v.to_str().ok()).ok_or_else(|| {
                OciError::Status {
                    reference: r.to_string(),
                    what: "an upload session".into(),
                    status: resp.status().as_u16(),
                    body: "no Location header".into(),
                }
            })?;
        let base = reqwest::Url::parse(&start)
            .map_err(|e| OciError::BadReference { reference: r.to_string(), why: e.to_string() })?;
        let mut url = base.join(location).map_err(|e| OciError::Status {
            reference: r.to_string(),
            what: "an upload session".into(),
            status: resp.status().as_u16(),
            body: format!("bad Location '{location}': {e}"),
        })?;
        url.query_pairs_mut().append_pair("digest", &digest);
        let body = bytes.to_vec();
        self.send(r, &format!("the upload of blob {digest}"), true, &|h| {
            h.put(url.clone()).header(reqwest::header::CONTENT_TYPE, "application/octet-stream").body(body.clone())
        })
        .await?;
        Ok(())
    }
}

/// Turn a non-success status into the error that names it.
async fn check_status(r: &Reference, what: &str, resp: Response) -> Result<Response, OciError> {
    let status = resp.status();
    if status.is_success() {
        return Ok(resp);
    }
    if status == StatusCode::NOT_FOUND {
        return Err(OciError::NotFound { reference: r.to_string(), what: what.to_string() });
    }
    let body = read_capped(r, what, resp, 4096).await.unwrap_or_default();
    let body: String = String::from_utf8_lossy(&body).chars().take(300).collect();
    if matches!(status, StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN) {
        return Err(OciError::Auth {
            reference: r.to_string(),
            why: format!("{} for {what}: {body}", status.as_u16()),
        });
    }
    Err(OciError::Status { reference: r.to_string(), what: what.to_string(), status: status.as_u16(), body })
}

/// A response body, refused past `max` bytes.
async fn read_capped(r: &Reference, what: &str, mut resp: Response, max: u64) -> Result<Vec<u8>, OciError> {
    if resp.content_length().is_some_and(|n| n > max) {
        return Err(OciError::TooBig { reference: r.to_string(), what: what.to_string(), limit: max });
    }
    let mut out = Vec::new();
    while let Some(chunk) =
        resp.chunk().await.map_err(|e| OciError::Unreachable { reference: r.to_string(), why: error_chain(&e) })?
    {
        if out.len() as u64 + chunk.len() as u64 > max {
            return Err(OciError::TooBig { reference: r.to_string(), what: what.to_string(), limit: max });
        }
        out.extend_from_slice(&chunk);
    }
    Ok(out)
}

/// `Bearer realm="…",service="…"` → ("Bearer", {realm, service}); commas inside quotes kept.
fn parse_challenge(h: &str) -> (String, HashMap<String, String>) {
    let h = h.trim();
    let (scheme, rest) = h.split_once(' ').unwrap_or((h, ""));
    let mut params = HashMap::new();
    let mut chars = rest.chars().peekable();
    loop {
        while chars.peek().is_some_and(|c| *c == ',' || c.is_whitespace()) {
            chars.next();
        }
        let key: String = std::iter::from_fn(|| chars.next_if(|c| *c != '=')).collect();
        if key.is_empty() || chars.next() != Some('=') {
            break;
        }
        let mut value = String::new();
        if chars.peek() == Some(&'"') {
            chars.next();
            while let Some(c) = chars.next() {
                match c {
                    '\\' => value.extend(chars.next()),
                    '"' => break,
                    c => value.push(c),
                }
            }
        } else {
            value = std::iter::from_fn(|| chars.next_if(|c| *c != ',')).collect();
        }
        params.insert(key.trim().to_ascii_lowercase(), value.trim().to_string());
    }
    (scheme.to_string(), params)
}

/// An error with its causes (reqwest hides the interesting part in `source`).
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cur = c.source();
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn challenges() {
        let (s, p) = parse_challenge(
            r#"Bearer realm="https://auth.example/token",service="registry.example",scope="repository:a/b:pull,push""#,
        );
        assert_eq!(s, "Bearer");
        assert_eq!(p["realm"], "https://auth.example/token");
        assert_eq!(p["scope"], "repository:a/b:pull,push");
        assert_eq!(p["service"], "registry.example");
        let (s, p) = parse_challenge(r#"Basic realm="Registry Realm""#);
        assert_eq!((s.as_str(), p["realm"].as_str()), ("Basic", "Registry Realm"));
    }
}
