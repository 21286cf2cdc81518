//! The legacy HTTP+SSE client transport (MCP 2024-11-05), which rmcp 3.x no longer ships:
//! GET the event stream, wait for the `endpoint` event, POST every outgoing JSON-RPC message to
//! that URL, and read incoming messages from `message` events.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;

use futures::StreamExt;
use http::{HeaderName, HeaderValue};
use reqwest::Url;
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use rmcp::RoleClient;
use sse_stream::SseStream;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::exact::ExactSchemas;

#[derive(Debug, thiserror::Error)]
pub enum SseError {
    #[error("invalid sse url {0:?}")]
    Url(String),
    #[error("GET {url} failed: {message}")]
    Connect { url: String, message: String },
    #[error("event stream of {url} ended before the endpoint event")]
    NoEndpoint { url: String },
    #[error("endpoint event {endpoint:?} is not a valid URL on the server's origin")]
    BadEndpoint { endpoint: String },
    #[error("POST {url} failed: {message}")]
    Post { url: String, message: String },
    #[error("cannot encode message: {0}")]
    Encode(#[from] serde_json::Error),
}

/// A connected legacy SSE session. Dropping it stops the reader task, which closes the stream.
pub struct SseClientTransport {
    client: reqwest::Client,
    endpoint: Url,
    headers: reqwest::header::HeaderMap,
    incoming: mpsc::Receiver<RxJsonRpcMessage<RoleClient>>,
    reader: JoinHandle<()>,
    /// Listed schemas with numbers serde_json cannot keep (see `exact`).
    exact: Arc<ExactSchemas>,
}

impl Drop for SseClientTransport {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

impl SseClientTransport {
    /// Open the event stream at `url` and wait for the server to name its POST endpoint.
    pub async fn connect(url: &str, headers: &HashMap<HeaderName, HeaderValue>) -> Result<Self, SseError> {
        let base = Url::parse(url).map_err(|_| SseError::Url(url.to_string()))?;
        let mut header_map = reqwest::header::HeaderMap::new();
        for (k, v) in headers {
            header_map.insert(k.clone(), v.clone());
        }
        let client = reqwest::Client::new();
        let resp = client
            .get(base.clone())
            .headers(header_map.clone())
            .header(reqwest::header::ACCEPT, "text/event-stream")
            .send()
            .await
            .map_err(|e| SseError::Connect { url: url.to_string(), message: e.to_string() })?;
        if !resp.status().is_success() {
            return Err(SseError::Connect { url: url.to_string(), message: format!("HTTP {}", resp.status()) });
        }
        let mut events = SseStream::from_bytes_stream(resp.bytes_stream());
        let endpoint = loop {
            match events.next().await {
                Some(Ok(ev)) if ev.event.as_deref() == Some("endpoint") => {
                    let data = ev.data.unwrap_or_default();
                    let joined =
                        base.join(data.trim()).map_err(|_| SseError::BadEndpoint { endpoint: data.clone() })?;
                    // The endpoint must stay on the server's origin: a hostile stream must not be
                    // able to redirect our POSTs (and their auth headers) elsewhere.
                    if joined.origin() != base.origin() {
                        return Err(SseError::BadEndpoint { endpoint: data });
                    }
                    break joined;
                }
                Some(Ok(_)) => continue,
                Some(Err(e)) => return Err(SseError::Connect { url: url.to_string(), message: e.to_string() }),
                None => return Err(SseError::NoEndpoint { url: url.to_string() }),
            }
        };
        let (tx, incoming) = mpsc::channel(64);
        let server = url.to_string();
        let exact = Arc::new(ExactSchemas::default());
        let observer = exact.clone();
        let reader = tokio::spawn(async move {
            while let Some(ev) = events.next().await {
                let ev = match ev {
                    Ok(ev) => ev,
                    Err(e) => {
                        tracing::warn!(url = %server, "sse stream error: {e}");
                        break;
                    }
                };
                if !matches!(ev.event.as_deref(), None | Some("message")) {
                    continue;
                }
                let Some(data) = ev.data else { continue };
                observer.observe(data.as_bytes());
                match serde_json::from_str::<RxJsonRpcMessage<RoleClient>>(&data) {
                    Ok(msg) => {
                        if tx.send(msg).await.is_err() {
                            break;
                        }
                    }
                    Err(e) => tracing::warn!(url = %server, "ignoring undecodable sse message: {e}"),
                }
            }
        });
        Ok(Self { client, endpoint, headers: header_map, incoming, reader, exact })
    }

    /// The exact schemas of the tools this session listed (see `exact`).
    pub(crate) fn exact_schemas(&self) -> Arc<ExactSchemas> {
        self.exact.clone()
    }
}

impl Transport<RoleClient> for SseClientTransport {
    type Error = SseError;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let request = self.client.post(self.endpoint.clone()).headers(self.headers.clone());
        let url = self.endpoint.to_string();
        async move {
            let body = serde_json::to_vec(&item)?;
            let resp = request
                .header(reqwest::header::CONTENT_TYPE, "application/json")
                .body(body)
                .send()
                .await
                .map_err(|e| SseError::Post { url: url.clone(), message: e.to_string() })?;
            if !resp.status().is_success() {
                return Err(SseError::Post { url, message: format!("HTTP {}", resp.status()) });
            }
            Ok(())
        }
    }

    fn receive(&mut self) -> impl Future<Output = Option<RxJsonRpcMessage<RoleClient>>> + Send {
        self.incoming.recv()
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.reader.abort();
        self.incoming.close();
        Ok(())
    }
}
