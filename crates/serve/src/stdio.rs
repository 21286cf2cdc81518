//! MCP over stdio as an rmcp transport: one JSON-RPC message per line, each screened by
//! [`super::jsonrpc`] first. rmcp's own line transport drops a line that is not JSON without a
//! word (the client then waits forever); here it gets a -32700 reply and the session goes on. A
//! method the 2026-07-28 revision removed, asked for under that protocol, is refused here as the
//! HTTP door refuses it.

use std::sync::Arc;

use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use rmcp::RoleServer;
use tokio::io::{AsyncBufReadExt as _, AsyncRead, AsyncWrite, AsyncWriteExt as _, BufReader};
use tokio::sync::Mutex;

use super::jsonrpc::{removed_method, screen, ErrorReply, Screened, INVALID_REQUEST, MAX_MESSAGE_BYTES};

/// Newline-delimited JSON-RPC over a reader and a writer, with malformed lines answered.
pub struct ScreenedLines<R, W> {
    read: BufReader<R>,
    /// The line read so far. It lives here, not in `receive`, because rmcp polls `receive` in a
    /// `select!` and may drop it mid-line; the next call goes on with the same line.
    line: Vec<u8>,
    /// Skipping the rest of a line longer than [`MAX_MESSAGE_BYTES`].
    oversized: bool,
    write: Arc<Mutex<Option<W>>>,
}

enum Line {
    Whole,
    Oversized,
    Eof,
}

impl<R: AsyncRead + Unpin + Send, W: AsyncWrite + Unpin + Send + 'static> ScreenedLines<R, W> {
    /// Lines read from `read`; error replies written to `write`.
    pub fn new(read: R, write: W) -> Self {
        Self {
            read: BufReader::new(read),
            line: Vec::new(),
            oversized: false,
            write: Arc::new(Mutex::new(Some(write))),
        }
    }

    /// Read up to the next newline into `self.line`, never holding more than the cap.
    async fn read_line(&mut self) -> std::io::Result<Line> {
        loop {
            let buf = self.read.fill_buf().await?;
            if buf.is_empty() {
                return Ok(Line::Eof);
            }
            let (take, done) = match buf.iter().position(|&b| b == b'\n') {
                Some(i) => (i + 1, true),
                None => (buf.len(), false),
            };
            if !self.oversized && self.line.len() + take > MAX_MESSAGE_BYTES + 1 {
                self.oversized = true;
                self.line = Vec::new();
            }
            if !self.oversized {
                self.line.extend_from_slice(&buf[..take]);
            }
            self.read.consume(take);
            if done {
                return Ok(if std::mem::take(&mut self.oversized) { Line::Oversized } else { Line::Whole });
            }
        }
    }

    /// Write a reply from a task of its own, so that rmcp dropping `receive` cannot cut it short.
    fn reply(&self, reply: ErrorReply) {
        let write = self.write.clone();
        tokio::spawn(async move {
            let mut bytes = reply.to_bytes();
            bytes.push(b'\n');
            if let Some(w) = write.lock().await.as_mut() {
                if let Err(e) = async {
                    w.write_all(&bytes).await?;
                    w.flush().await
                }
                .await
                {
                    tracing::debug!("cannot write an error reply: {e}");
                }
            }
        });
    }
}

impl<R, W> Transport<RoleServer> for ScreenedLines<R, W>
where
    R: AsyncRead + Unpin + Send,
    W: AsyncWrite + Unpin + Send + 'static,
{
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl std::future::Future<Output = Result<(), Self::Error>> + Send + 'static {
        let write = self.write.clone();
        async move {
            let mut bytes = serde_json::to_vec(&item).map_err(std::io::Error::other)?;
            bytes.push(b'\n');
            let mut guard = write.lock().await;
            let w = guard.as_mut().ok_or_else(|| std::io::Error::from(std::io::ErrorKind::NotConnected))?;
            w.write_all(&bytes).await?;
            w.flush().await
        }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        loop {
            match self.read_line().await {
                Ok(Line::Whole) => {}
                Ok(Line::Oversized) => {
                    let message = format!("Invalid Request: the message is larger than {MAX_MESSAGE_BYTES} bytes");
                    self.reply(ErrorReply { id: serde_json::Value::Null, code: INVALID_REQUEST, message });
                    continue;
                }
                Ok(Line::Eof) => return None,
                Err(e) => {
                    tracing::warn!("reading stdin: {e}");
                    return None;
                }
            }
            let line = std::mem::take(&mut self.line);
            let text = line.strip_suffix(b"\n").unwrap_or(&line);
            let text = text.strip_suffix(b"\r").unwrap_or(text);
            if text.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            // A method 2026-07-28 removed, asked for under that protocol: refused as over HTTP.
            if let Some(reply) = removed_method(None, text) {
                tracing::debug!("refused a removed method: {}", reply.message);
                self.reply(reply);
                continue;
            }
            match screen(text) {
                Screened::Pass(msg) => return Some(*msg),
                Screened::Reply(reply) => {
                    tracing::debug!(code = reply.code, "answered a malformed message: {}", reply.message);
                    self.reply(reply);
                }
                Screened::Drop(reply) => tracing::debug!("dropped a malformed notification: {}", reply.message),
            }
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        if let Some(mut w) = self.write.lock().await.take() {
            w.shutdown().await?;
        }
        Ok(())
    }
}
