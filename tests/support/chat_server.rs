//! A model for the tests: a loopback HTTP server speaking OpenAI chat completions
//! (`POST /v1/chat/completions`), answering each request with the next reply of its script —
//! assistant messages with `tool_calls`, `finish_reason` and `usage`, plain or streamed (SSE),
//! or hostile ones (a reply that never comes, a huge body). Records every request body.

#![allow(dead_code)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// One scripted reply.
#[derive(Debug, Clone)]
pub enum Reply {
    /// A `chat.completion` JSON body.
    Json(Value),
    /// The same completion as SSE chunks.
    Stream(Value),
    /// Headers never come.
    Hang,
    /// A 200 whose body is `n` bytes of JSON-looking text.
    Huge(usize),
    /// Any status and body.
    Raw(u16, String),
}

/// An assistant turn with tool calls `(name, arguments JSON text)`.
pub fn tool_calls(calls: &[(&str, &str)]) -> Reply {
    let calls: Vec<Value> = calls
        .iter()
        .enumerate()
        .map(|(i, (n, a))| json!({"id": format!("call_{i}_{n}"), "type": "function", "function": {"name": n, "arguments": a}}))
        .collect();
    Reply::Json(json!({
        "id": "chatcmpl-1", "object": "chat.completion", "model": "scripted",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": null, "tool_calls": calls}, "finish_reason": "tool_calls"}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
    }))
}

/// A final answer.
pub fn answer(text: &str) -> Reply {
    Reply::Json(json!({
        "id": "chatcmpl-2", "object": "chat.completion", "model": "scripted",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 20, "completion_tokens": 7, "total_tokens": 27}
    }))
}

/// What the script does when it runs out: repeat a reply, or a function of the request number.
pub type Script = Arc<dyn Fn(usize, &Value) -> Reply + Send + Sync>;

pub struct ChatServer {
    pub base_url: String,
    pub requests: Arc<Mutex<Vec<Value>>>,
    /// Requests answered with [`Reply::Hang`] whose client went away (closed the connection).
    pub hung_up: Arc<std::sync::atomic::AtomicUsize>,
    /// Nanoseconds spent answering (from the first byte read to the last written), summed: the
    /// server's share of a subagent's time, for the benchmark.
    pub busy_ns: Arc<std::sync::atomic::AtomicU64>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for ChatServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl ChatServer {
    /// Replies in order; past the end, the last one again.
    pub async fn scripted(replies: Vec<Reply>) -> Self {
        let replies = Arc::new(replies);
        Self::start(Arc::new(move |i, _| replies[i.min(replies.len() - 1)].clone())).await
    }

    pub async fn start(script: Script) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let requests: Arc<Mutex<Vec<Value>>> = Arc::default();
        let recorded = requests.clone();
        let hung_up: Arc<std::sync::atomic::AtomicUsize> = Arc::default();
        let gone = hung_up.clone();
        let busy_ns: Arc<std::sync::atomic::AtomicU64> = Arc::default();
        let busy = busy_ns.clone();
        let task = tokio::spawn(async move {
            loop {
                let Ok((mut sock, _)) = listener.accept().await else { return };
                let script = script.clone();
                let recorded = recorded.clone();
                let gone = gone.clone();
                let busy = busy.clone();
                tokio::spawn(async move {
                    let Some((body, started)) = read_request(&mut sock).await else { return };
                    let v: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                    let n = {
                        let mut r = recorded.lock().unwrap();
                        r.push(v.clone());
                        r.len() - 1
                    };
                    let reply = script(n, &v);
                    let (status, ctype, body) = match reply {
                        Reply::Json(j) => (200, "application/json", j.to_string().into_bytes()),
                        Reply::Stream(j) => (200, "text/event-stream", sse(&j).into_bytes()),
                        Reply::Raw(s, b) => (s, "application/json", b.into_bytes()),
                        Reply::Huge(n) => {
                            let mut b = b"{\"choices\": [{\"message\": {\"content\": \"".to_vec();
                            b.resize(n, b'A');
                            (200, "application/json", b)
                        }
                        Reply::Hang => {
                            let mut b = [0u8; 1];
                            tokio::select! {
                                _ = tokio::time::sleep(Duration::from_secs(600)) => {}
                                r = tokio::io::AsyncReadExt::read(&mut sock, &mut b) => {
                                    if matches!(r, Ok(0) | Err(_)) {
                                        gone.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                                    }
                                }
                            }
                            return;
                        }
                    };
                    let head = format!(
                        "HTTP/1.1 {status} X\r\ncontent-type: {ctype}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                        body.len()
                    );
                    // One write, no Nagle: the reply leaves at once (two small writes would wait
                    // for the client's delayed ACK and count as the client's time).
                    let _ = sock.set_nodelay(true);
                    let mut reply = head.into_bytes();
                    reply.extend_from_slice(&body);
                    let _ = sock.write_all(&reply).await;
                    busy.fetch_add(started.elapsed().as_nanos() as u64, std::sync::atomic::Ordering::Relaxed);
                    let _ = sock.shutdown().await;
                });
            }
        });
        Self { base_url: format!("http://{addr}/v1"), requests, hung_up, busy_ns, task }
    }

    pub fn requests(&self) -> Vec<Value> {
        self.requests.lock().unwrap().clone()
    }
}

/// A completion as SSE: one chunk with the content, one per tool call, one with the usage.
fn sse(completion: &Value) -> String {
    let msg = &completion["choices"][0]["message"];
    let mut out = String::new();
    let mut push = |v: Value| out.push_str(&format!("data: {v}\n\n"));
    if let Some(c) = msg["content"].as_str() {
        push(json!({"choices": [{"index": 0, "delta": {"role": "assistant", "content": c}}]}));
    }
    for (i, tc) in msg["tool_calls"].as_array().into_iter().flatten().enumerate() {
        push(
            json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": i, "id": tc["id"], "type": "function", "function": {"name": tc["function"]["name"], "arguments": tc["function"]["arguments"]}}]}}]}),
        );
    }
    push(json!({"choices": [{"index": 0, "delta": {}, "finish_reason": completion["choices"][0]["finish_reason"]}]}));
    push(json!({"choices": [], "usage": completion["usage"]}));
    out.push_str("data: [DONE]\n\n");
    out
}

/// The request body, and when its first byte arrived.
async fn read_request(sock: &mut tokio::net::TcpStream) -> Option<(Vec<u8>, std::time::Instant)> {
    let mut buf = Vec::new();
    let mut started = None;
    let mut chunk = [0u8; 8192];
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
            let len: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:").map(|v| v.trim().parse().unwrap_or(0)))
                .unwrap_or(0);
            while buf.len() < end + 4 + len {
                let n = sock.read(&mut chunk).await.ok()?;
                if n == 0 {
                    return None;
                }
                buf.extend_from_slice(&chunk[..n]);
            }
            return Some((buf[end + 4..end + 4 + len].to_vec(), started.unwrap_or_else(std::time::Instant::now)));
        }
        let n = sock.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        started.get_or_insert_with(std::time::Instant::now);
        buf.extend_from_slice(&chunk[..n]);
    }
}
