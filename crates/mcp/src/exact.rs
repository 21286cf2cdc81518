//! Integers beyond 64 bits in MCP tool schemas. rmcp decodes every message with serde_json,
//! which turns such an integer into a float; DeerFlow (Python) keeps all its digits, and they
//! reach its deferred catalog and `catalog_hash`. So the stdio transport here (and the legacy
//! SSE one) hands each message to [`ExactSchemas`] before rmcp decodes it; for a `tools/list`
//! result holding a long number it keeps the tools' schemas as Python's `json.loads` decodes
//! them. rmcp's streamable HTTP client decodes its responses itself: there the schema stays as
//! serde_json has it.

use std::collections::HashMap;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use process_wrap::tokio::ChildWrapper;
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::async_rw::AsyncRwTransport;
use rmcp::transport::Transport;
use rmcp::RoleClient;
use serde_json::{Map, Value};
use tokio::io::{AsyncRead, ReadBuf};
use tokio::process::{ChildStdin, ChildStdout};
use toolhost_py::json::PyValue;

/// A line longer than this is not looked at (rmcp still decodes it).
const MAX_OBSERVED_LINE: usize = 64 << 20;
/// How long a stdio server gets to exit after its stdin closes, then after SIGTERM (rmcp's
/// `TokioChildProcess` waits the same).
const EXIT_WAIT: Duration = Duration::from_secs(3);

/// The exact input schemas of the tools one session listed, by tool name, for the tools whose
/// schema holds a number serde_json cannot keep exactly.
#[derive(Debug, Default)]
pub(crate) struct ExactSchemas(Mutex<HashMap<String, PyValue>>);

impl ExactSchemas {
    /// Look at one message as the server sent it.
    pub(crate) fn observe(&self, line: &[u8]) {
        // Only an integer of 19 digits or more can be beyond i64/u64; most lines have none.
        if !has_digit_run(line, 19) {
            return;
        }
        let Ok(text) = std::str::from_utf8(line) else { return };
        let Ok(PyValue::Dict(message)) = PyValue::parse(text.trim_end()) else { return };
        let Some(PyValue::Dict(result)) = message.get("result") else { return };
        let Some(PyValue::List(tools)) = result.get("tools") else { return };
        let Ok(mut map) = self.0.lock() else { return };
        for tool in tools {
            let Some(tool) = tool.as_dict() else { continue };
            if let (Some(PyValue::Str(name)), Some(schema @ PyValue::Dict(_))) =
                (tool.get("name"), tool.get("inputSchema"))
            {
                map.insert(name.clone(), schema.clone());
            }
        }
    }

    /// The exact schema of tool `name`, when one was seen and it is the schema rmcp decoded
    /// (numbers aside): a later listing may have changed the tool.
    pub(crate) fn get(&self, name: &str, decoded: &Map<String, Value>) -> Option<PyValue> {
        let map = self.0.lock().ok()?;
        let exact = map.get(name)?;
        same_but_numbers(exact, &Value::Object(decoded.clone())).then(|| exact.clone())
    }
}

/// Whether `b` holds a run of at least `n` ASCII digits.
fn has_digit_run(b: &[u8], n: usize) -> bool {
    let mut run = 0;
    for &c in b {
        if c.is_ascii_digit() {
            run += 1;
            if run >= n {
                return true;
            }
        } else {
            run = 0;
        }
    }
    false
}

/// Whether `exact` and `decoded` are the same JSON value, numbers compared as serde_json may
/// have rounded them.
fn same_but_numbers(exact: &PyValue, decoded: &Value) -> bool {
    let close = |a: f64, b: Option<f64>| b.is_some_and(|b| a == b || (a - b).abs() <= a.abs().max(b.abs()) * 1e-12);
    match (exact, decoded) {
        (PyValue::Null, Value::Null) => true,
        (PyValue::Bool(a), Value::Bool(b)) => a == b,
        (PyValue::Str(a), Value::String(b)) => a == b,
        (PyValue::Int(digits), Value::Number(n)) => match (n.as_i64(), n.as_u64()) {
            (Some(i), _) => *digits == i.to_string(),
            (_, Some(u)) => *digits == u.to_string(),
            _ => digits.parse::<f64>().is_ok_and(|f| close(f, n.as_f64())),
        },
        (PyValue::Float(f), Value::Number(n)) => close(*f, n.as_f64()),
        (PyValue::List(a), Value::Array(b)) => {
            a.len() == b.len() && a.iter().zip(b).all(|(x, y)| same_but_numbers(x, y))
        }
        (PyValue::Dict(a), Value::Object(b)) => {
            a.len() == b.len() && a.iter().zip(b).all(|((ka, va), (kb, vb))| ka == kb && same_but_numbers(va, vb))
        }
        _ => false,
    }
}

/// A stdio server's stdout, handing each complete line to [`ExactSchemas::observe`] as rmcp
/// reads through it.
pub(crate) struct ObservedReader<R> {
    inner: R,
    line: Vec<u8>,
    /// The current line grew past [`MAX_OBSERVED_LINE`]: skip to its end.
    skipping: bool,
    schemas: Arc<ExactSchemas>,
}

impl<R> ObservedReader<R> {
    pub(crate) fn new(inner: R, schemas: Arc<ExactSchemas>) -> Self {
        Self { inner, line: Vec::new(), skipping: false, schemas }
    }

    fn take(&mut self, mut bytes: &[u8]) {
        while let Some(end) = memchr_newline(bytes) {
            if !self.skipping {
                self.line.extend_from_slice(&bytes[..end]);
                self.schemas.observe(&self.line);
            }
            self.line.clear();
            self.skipping = false;
            bytes = &bytes[end + 1..];
        }
        if !self.skipping {
            if self.line.len() + bytes.len() > MAX_OBSERVED_LINE {
                self.line.clear();
                self.skipping = true;
            } else {
                self.line.extend_from_slice(bytes);
            }
        }
    }
}

fn memchr_newline(b: &[u8]) -> Option<usize> {
    b.iter().position(|&c| c == b'\n')
}

impl<R: AsyncRead + Unpin> AsyncRead for ObservedReader<R> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let polled = Pin::new(&mut this.inner).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = polled {
            this.take(&buf.filled()[before..]);
        }
        polled
    }
}

/// rmcp's `TokioChildProcess`, with the server's stdout read through an [`ObservedReader`]:
/// the same framing (rmcp's codec), the same shutdown (close stdin, wait, SIGTERM, wait, kill)
/// and the child killed when the transport is dropped.
pub(crate) struct StdioTransport {
    child: ChildGuard,
    transport: AsyncRwTransport<RoleClient, ObservedReader<ChildStdout>, ChildStdin>,
}

impl StdioTransport {
    pub(crate) fn new(
        child: Box<dyn ChildWrapper>,
        stdout: ChildStdout,
        stdin: ChildStdin,
        schemas: Arc<ExactSchemas>,
    ) -> Self {
        let transport = AsyncRwTransport::new_client(ObservedReader::new(stdout, schemas), stdin);
        Self { child: ChildGuard(Some(child)), transport }
    }

    async fn graceful_shutdown(&mut self) -> io::Result<()> {
        let Some(child) = self.child.0.as_mut() else { return Ok(()) };
        self.transport.close().await?;
        if wait_for_exit(child).await {
            self.child.0 = None;
            return Ok(());
        }
        #[cfg(unix)]
        if child.signal(SIGTERM).is_ok() && wait_for_exit(child).await {
            self.child.0 = None;
            return Ok(());
        }
        let killed = Box::into_pin(child.kill()).await;
        self.child.0 = None;
        killed
    }
}

/// `SIGTERM`, the same number on every Unix.
#[cfg(unix)]
const SIGTERM: i32 = 15;

async fn wait_for_exit(child: &mut Box<dyn ChildWrapper>) -> bool {
    matches!(tokio::time::timeout(EXIT_WAIT, child.wait()).await, Ok(Ok(_)))
}

/// Kills the child when dropped (rmcp's `ChildWithCleanup`).
struct ChildGuard(Option<Box<dyn ChildWrapper>>);

impl Drop for ChildGuard {
    fn drop(&mut self) {
        if let Some(mut child) = self.0.take() {
            // Synchronous first: a runtime that is shutting down never runs a spawned task.
            let _ = child.start_kill();
            if let Ok(handle) = tokio::runtime::Handle::try_current() {
                handle.spawn(async move {
                    let _ = Box::into_pin(child.kill()).await;
                });
            }
        }
    }
}

impl Transport<RoleClient> for StdioTransport {
    type Error = io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.transport.send(item)
    }

    fn receive(&mut self) -> impl Future<Output = Option<RxJsonRpcMessage<RoleClient>>> + Send {
        self.transport.receive()
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.graceful_shutdown()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LISTING: &str = r#"{"jsonrpc": "2.0", "id": 2, "result": {"tools": [{"name": "big", "inputSchema": {"type": "object", "properties": {"n": {"type": "integer", "maximum": 123456789012345678901234567890, "minimum": -1.5e300}}}}, {"name": "small", "inputSchema": {"type": "object"}}]}}"#;

    fn decoded(name: &str) -> Map<String, Value> {
        let v: Value = serde_json::from_str(LISTING).unwrap();
        let tools = v["result"]["tools"].as_array().unwrap();
        let t = tools.iter().find(|t| t["name"] == name).unwrap();
        t["inputSchema"].as_object().unwrap().clone()
    }

    #[test]
    fn a_listing_with_a_long_integer_keeps_its_digits() {
        let schemas = ExactSchemas::default();
        schemas.observe(LISTING.as_bytes());
        let exact = schemas.get("big", &decoded("big")).expect("kept");
        let mut text = String::new();
        exact.write_sorted(&mut text);
        assert!(text.contains("\"maximum\": 123456789012345678901234567890"), "{text}");
        assert!(text.contains("\"minimum\": -1.5e+300"), "{text}");
        // serde_json alone loses the digits: this is what the exact schema is for.
        assert_ne!(serde_json::to_string(&decoded("big")).unwrap(), text);
        // A changed listing (rmcp decoded something else) is not answered from a stale one.
        let mut other = decoded("big");
        other.insert("extra".into(), Value::Bool(true));
        assert!(schemas.get("big", &other).is_none());
    }

    #[test]
    fn lines_without_long_numbers_are_not_parsed() {
        let schemas = ExactSchemas::default();
        schemas.observe(br#"{"jsonrpc": "2.0", "id": 2, "result": {"tools": [{"name": "t", "inputSchema": {"maximum": 123456789012345678}}]}}"#);
        assert!(schemas.0.lock().unwrap().is_empty());
    }

    #[tokio::test]
    async fn the_reader_sees_lines_split_across_reads() {
        use tokio::io::AsyncReadExt;
        let schemas = Arc::new(ExactSchemas::default());
        let text = format!("{{\"jsonrpc\": \"2.0\", \"method\": \"x\"}}\n{LISTING}\n");
        // A reader that returns a few bytes at a time.
        let (client, mut server) = tokio::io::duplex(7);
        let writer = tokio::spawn(async move {
            use tokio::io::AsyncWriteExt;
            server.write_all(text.as_bytes()).await.unwrap();
        });
        let mut reader = ObservedReader::new(client, schemas.clone());
        let mut all = Vec::new();
        reader.read_to_end(&mut all).await.unwrap();
        writer.await.unwrap();
        assert!(schemas.get("big", &decoded("big")).is_some());
        assert!(schemas.get("small", &decoded("small")).is_some());
    }
}
