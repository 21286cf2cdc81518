//! Log messages of a `tools/call` on the call's own SSE stream (streamable HTTP, in a session).
//!
//! rmcp sends a `notifications/message` on the session's standalone `GET` stream: only progress
//! and cancellation are routed to the request they belong to. A client that reads only the
//! call's stream (the conformance suite's, most SDKs' `call_tool`) then never sees the lines a
//! tool logged while it ran. So the HTTP door gives each `tools/call` a channel, carried in the
//! request's extensions to the handler; the handler sends the call's log messages into it; the
//! door puts them on the call's stream, each one before anything rmcp sends after it, so every
//! line arrives before the result.

// MCP logging is deprecated by SEP-2577 (revision 2026-07-28) but part of the 2025 revisions,
// whose sessions this serves.
#![allow(deprecated)]

use std::convert::Infallible;

use bytes::Bytes;
use http_body_util::{combinators::BoxBody, BodyExt as _};
use hyper::body::Frame;
use rmcp::model::LoggingMessageNotificationParam;
use rmcp::service::RequestContext;
use rmcp::RoleServer;
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver, UnboundedSender};

type Body = BoxBody<Bytes, Infallible>;

/// Where a call's log messages go: its own stream.
#[derive(Clone)]
pub struct CallLog(UnboundedSender<Bytes>);

impl CallLog {
    /// A channel for one call: the sender goes into the request's extensions, the receiver to
    /// [`wrap`].
    pub fn channel() -> (Self, UnboundedReceiver<Bytes>) {
        let (tx, rx) = unbounded_channel();
        (Self(tx), rx)
    }

    /// The call's channel, when the door gave it one.
    pub fn of(cx: &RequestContext<RoleServer>) -> Option<Self> {
        cx.extensions.get::<http::request::Parts>().and_then(|p| p.extensions.get::<Self>()).cloned()
    }

    /// Send one log message on the call's stream; `false` when the stream is gone.
    pub fn send(&self, message: LoggingMessageNotificationParam) -> bool {
        let notification = serde_json::json!({
            "jsonrpc": "2.0",
            "method": "notifications/message",
            "params": message,
        });
        self.0.send(Bytes::from(format!("data: {notification}\n\n"))).is_ok()
    }
}

/// `body` (rmcp's SSE stream of one call) with the call's log messages from `logs` put in: each
/// as it comes, and all that came before each of rmcp's events ahead of it.
pub fn wrap(body: Body, mut logs: UnboundedReceiver<Bytes>) -> Body {
    let (tx, rx) = tokio::sync::mpsc::channel::<Bytes>(16);
    tokio::spawn(async move {
        let mut body = body;
        let mut logs_open = true;
        loop {
            tokio::select! {
                biased;
                line = logs.recv(), if logs_open => match line {
                    Some(line) => if tx.send(line).await.is_err() { return },
                    None => logs_open = false,
                },
                frame = body.frame() => match frame.and_then(|f| f.ok()).map(Frame::into_data) {
                    Some(Ok(data)) => {
                        while let Ok(line) = logs.try_recv() {
                            if tx.send(line).await.is_err() {
                                return;
                            }
                        }
                        if tx.send(data).await.is_err() {
                            return;
                        }
                    }
                    Some(Err(_)) => {}
                    None => return,
                },
            }
        }
    });
    super::sse_poll::channel_body(rx)
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::StreamBody;
    use rmcp::model::LoggingLevel;

    #[tokio::test]
    async fn lines_sent_before_an_event_come_before_it() {
        let (log, rx) = CallLog::channel();
        let (body_tx, body_rx) = unbounded_channel::<Bytes>();
        let body = StreamBody::new(futures::stream::unfold(body_rx, |mut rx| async move {
            rx.recv().await.map(|b| (Ok::<_, Infallible>(Frame::data(b)), rx))
        }))
        .boxed();
        let wrapped = wrap(body, rx);
        body_tx.send(Bytes::from("data: {\"first\":1}\n\n")).unwrap();
        assert!(log.send(LoggingMessageNotificationParam::new(LoggingLevel::Info, "one".into())));
        assert!(log.send(LoggingMessageNotificationParam::new(LoggingLevel::Info, "two".into())));
        body_tx.send(Bytes::from("data: {\"result\":{}}\n\n")).unwrap();
        drop((body_tx, log));
        let text = String::from_utf8(wrapped.collect().await.unwrap().to_bytes().to_vec()).unwrap();
        let (one, two, result) =
            (text.find("\"one\"").unwrap(), text.find("\"two\"").unwrap(), text.find("result").unwrap());
        assert!(one < two && two < result, "{text}");
        assert!(text.contains("notifications/message"), "{text}");
    }
}
