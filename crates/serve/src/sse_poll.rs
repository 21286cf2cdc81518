//! SSE polling (SEP-1699) for `serve --http`: after `sse_poll_after_s` the server ends a
//! `tools/call`'s SSE stream with an event that carries an id and a `retry` delay, keeps what the
//! call sends afterwards, and serves it to the client's `GET` with that id as `Last-Event-ID`.
//! Calls longer than a proxy's idle or response timeout then arrive in pieces instead of being cut.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{combinators::BoxBody, BodyExt as _, StreamBody};
use hyper::body::Frame;

type Body = BoxBody<Bytes, Infallible>;

/// Event ids this module hands out start with this; rmcp's own are `<index>/<stream>`.
const ID_PREFIX: &str = "toolhost-poll-";
/// Events of one call kept for its client (the oldest go first past this).
const MAX_KEPT_EVENTS: usize = 4096;
/// How long the rest of a call stays readable after the call ended.
const KEEP_AFTER_END: Duration = Duration::from_secs(60);
/// How long a client is asked to wait before it reconnects (the event's `retry`).
const RETRY: Duration = Duration::from_secs(1);

/// What a call sent after its stream was ended: SSE events (whole, as rmcp framed them), the
/// index of the first one kept, and whether the call's stream has ended.
#[derive(Default)]
struct Rest {
    events: Vec<Bytes>,
    first: usize,
    done: bool,
}

struct Held {
    /// Only a GET in the call's own session reads it.
    session: String,
    rest: tokio::sync::watch::Sender<Rest>,
}

/// The calls whose streams were ended, by poll id. Shared by every connection of one `serve`.
pub struct SsePolls {
    after: Duration,
    max_held: usize,
    held: Mutex<HashMap<String, Arc<Held>>>,
}

impl SsePolls {
    /// End a call's stream after `after`; keep at most `max_held` calls' rests at once (past
    /// that, a stream is not ended).
    pub fn new(after: Duration, max_held: usize) -> Arc<Self> {
        Arc::new(Self { after, max_held, held: Mutex::default() })
    }

    /// Whether `last_event_id` is one of ours (else it is rmcp's to resume).
    pub fn owns(last_event_id: &str) -> bool {
        last_event_id.starts_with(ID_PREFIX)
    }

    /// `body`, a `tools/call`'s SSE stream in `session`, as the client gets it: whole while it
    /// lasts less than `after`, else ended then with a polling event, the rest kept.
    pub fn wrap(self: &Arc<Self>, session: String, body: Body) -> Body {
        let (tx, rx) = tokio::sync::mpsc::channel::<Bytes>(16);
        let polls = self.clone();
        tokio::spawn(async move {
            let mut body = body;
            let deadline = tokio::time::sleep(polls.after);
            tokio::pin!(deadline);
            loop {
                tokio::select! {
                    frame = body.frame() => match frame.and_then(|f| f.ok()).map(Frame::into_data) {
                        Some(Ok(data)) => {
                            // The client went away: drop the stream, as without polling (rmcp
                            // keeps what follows for its own Last-Event-ID resumption).
                            if tx.send(data).await.is_err() {
                                return;
                            }
                        }
                        Some(Err(_)) => {}
                        None => return,
                    },
                    _ = &mut deadline => break,
                }
            }
            let Some((id, held)) = polls.hold(&session) else {
                // Too many held already: the stream goes on as it is.
                while let Some(Ok(frame)) = body.frame().await {
                    if let Ok(data) = frame.into_data() {
                        if tx.send(data).await.is_err() {
                            return;
                        }
                    }
                }
                return;
            };
            let _ = tx.send(polling_event(&id, 0)).await;
            drop(tx);
            tracing::debug!(poll = %id, "ended a tools/call's SSE stream after {:?}; the client polls for the rest", polls.after);
            while let Some(Ok(frame)) = body.frame().await {
                if let Ok(data) = frame.into_data() {
                    held.rest.send_modify(|r| {
                        r.events.push(data);
                        if r.events.len() > MAX_KEPT_EVENTS {
                            r.events.remove(0);
                            r.first += 1;
                        }
                    });
                }
            }
            held.rest.send_modify(|r| r.done = true);
            tokio::time::sleep(KEEP_AFTER_END).await;
            polls.held.lock().unwrap_or_else(|p| p.into_inner()).remove(&id);
        });
        channel_body(rx)
    }

    /// A fresh poll id for a call of `session`, unless `max_held` are held.
    fn hold(&self, session: &str) -> Option<(String, Arc<Held>)> {
        let mut held = self.held.lock().unwrap_or_else(|p| p.into_inner());
        if held.len() >= self.max_held {
            tracing::warn!("not ending a tools/call's SSE stream: {} calls are waiting for their clients", held.len());
            return None;
        }
        let id = super::threads::fresh_thread_id(ID_PREFIX).ok()?;
        let h = Arc::new(Held { session: session.to_string(), rest: tokio::sync::watch::Sender::new(Rest::default()) });
        held.insert(id.clone(), h.clone());
        Some((id, h))
    }

    /// The rest of a call after `last_event_id` (`<poll id>.<index>`) for a GET in `session`:
    /// what was kept, then what comes, until the call's stream ends, or until `after` passes
    /// again (then ended with another polling event). `None`: no such call in this session
    /// (never, or ended over a minute ago).
    pub fn resume(self: &Arc<Self>, session: &str, last_event_id: &str) -> Option<Body> {
        let (id, from) = last_event_id.rsplit_once('.')?;
        let from: usize = from.parse().ok()?;
        let held = self.held.lock().unwrap_or_else(|p| p.into_inner()).get(id).cloned()?;
        if held.session != session {
            return None;
        }
        let (id, after) = (id.to_string(), self.after);
        let deadline = tokio::time::Instant::now() + after;
        // State: (receiver, next index, ended).
        let events = futures::stream::unfold((held.rest.subscribe(), from, false), move |(mut rx, next, ended)| {
            let id = id.clone();
            async move {
                if ended {
                    return None;
                }
                loop {
                    let (chunk, done, first) = {
                        let r = rx.borrow_and_update();
                        let i = next.max(r.first);
                        (r.events.get(i - r.first).cloned().map(|c| (c, i)), r.done, r.first)
                    };
                    if let Some((chunk, i)) = chunk {
                        return Some((Ok::<_, Infallible>(Frame::data(chunk)), (rx, i + 1, false)));
                    }
                    if done {
                        return None;
                    }
                    let next = next.max(first);
                    tokio::select! {
                        changed = rx.changed() => if changed.is_err() { return None },
                        _ = tokio::time::sleep_until(deadline) => {
                            return Some((Ok(Frame::data(polling_event(&id, next))), (rx, next, true)));
                        }
                    }
                }
            }
        });
        Some(StreamBody::new(events).boxed())
    }
}

/// A response body that streams what arrives on `rx`, until its senders are gone.
pub(super) fn channel_body(rx: tokio::sync::mpsc::Receiver<Bytes>) -> Body {
    let events = futures::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|b| (Ok::<_, Infallible>(Frame::data(b)), rx))
    });
    StreamBody::new(events).boxed()
}

/// An event with no data that tells the client where to resume (`id`) and when (`retry`).
fn polling_event(id: &str, next: usize) -> Bytes {
    Bytes::from(format!("id: {id}.{next}\nretry: {}\ndata: \n\n", RETRY.as_millis()))
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn text(body: Body) -> String {
        String::from_utf8(body.collect().await.unwrap().to_bytes().to_vec()).unwrap()
    }

    /// A stream of `events` sent `gap` apart.
    fn slow(events: &[&'static str], gap: Duration) -> Body {
        let events: Vec<&'static str> = events.to_vec();
        let s = futures::stream::unfold(events.into_iter(), move |mut it| async move {
            let e = it.next()?;
            tokio::time::sleep(gap).await;
            Some((Ok::<_, Infallible>(Frame::data(Bytes::from(e))), it))
        });
        StreamBody::new(s).boxed()
    }

    #[tokio::test]
    async fn a_short_stream_is_untouched_and_a_long_one_is_resumed_in_its_session() {
        let polls = SsePolls::new(Duration::from_millis(300), 10);
        let short = polls.wrap("s".into(), slow(&["a\n\n", "b\n\n"], Duration::from_millis(10)));
        assert_eq!(text(short).await, "a\n\nb\n\n");

        let events = ["a\n\n", "b\n\n", "c\n\n", "d\n\n"];
        let long = polls.wrap("s".into(), slow(&events, Duration::from_millis(250)));
        let first = text(long).await;
        assert!(first.starts_with("a\n\nid: toolhost-poll-"), "{first}");
        assert!(first.ends_with(".0\nretry: 1000\ndata: \n\n"), "{first}");
        let id = first.lines().find_map(|l| l.strip_prefix("id: ")).unwrap().to_string();
        assert!(SsePolls::owns(&id));
        assert!(polls.resume("other", &id).is_none(), "another session's call");
        assert!(polls.resume("s", "toolhost-poll-unknown.0").is_none());
        // A resumed stream is ended after 300 ms too; following the ids gets the whole rest.
        let (mut rest, mut next, mut polled) = (String::new(), Some(id.clone()), 0);
        while let Some(at) = next.take() {
            let part = text(polls.resume("s", &at).unwrap()).await;
            let (events, end) = match part.find("id: toolhost-poll-") {
                Some(i) => (&part[..i], part[i..].lines().next().and_then(|l| l.strip_prefix("id: "))),
                None => (part.as_str(), None),
            };
            rest.push_str(events);
            next = end.map(str::to_string);
            polled += 1;
        }
        assert_eq!(rest, "b\n\nc\n\nd\n\n");
        assert!(polled >= 2, "the 750 ms rest fits in no 300 ms poll");
        // Read again from the middle, after the call ended.
        let again = text(polls.resume("s", &id.replace(".0", ".2")).unwrap()).await;
        assert_eq!(again, "d\n\n");
    }
}
