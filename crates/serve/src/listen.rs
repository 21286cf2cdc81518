//! `subscriptions/listen` (protocol 2026-07-28, SEP-2575): how a client without a session hears
//! what changed. A listen stream belongs to one thread (the one the request names, like any
//! request's), and gets what a session in that thread would: `tools/list_changed` when
//! `tool_search` promotes tools there, `resources/list_changed` when a call there adds outputs
//! or artifacts, and `resources/updated` for the thread's files it listed, each only if its
//! filter asked for it (rmcp applies the filter and tags each one with the subscription's id).
//! Streams of other threads hear nothing of it.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use rmcp::model::SubscriptionFilter;
use rmcp::service::SubscriptionSink;
use rmcp::ErrorData as McpError;

use super::resources::{changed, stamp, vpath_of, Stamp};
use toolhost::Toolhost;

/// Listen streams one `serve` keeps open at once.
pub const MAX_LISTENERS: usize = 1000;
/// Resources one listen stream may watch.
pub const MAX_WATCHED: usize = 1000;

struct Listener {
    thread: String,
    sink: SubscriptionSink,
    /// Watched resource URIs and how each file looked when last seen.
    watched: HashMap<String, Option<Stamp>>,
}

/// The open listen streams of one `serve`.
#[derive(Default)]
pub struct Listeners {
    open: Mutex<HashMap<u64, Listener>>,
    next: AtomicU64,
}

/// What a call changed, as listeners care.
pub struct Changes {
    /// The thread's tool list (a promotion).
    pub tools: bool,
    /// The thread's resource list (new outputs or artifacts).
    pub resources: bool,
}

/// The filter a listen stream gets: what it asked for, with only the `toolhost:` resources of a
/// thread's user data watched (no other URI ever changes here), at most [`MAX_WATCHED`].
pub fn accepted_filter(requested: &SubscriptionFilter) -> SubscriptionFilter {
    let mut accepted = requested.clone();
    if let Some(uris) = accepted.resource_subscriptions.as_mut() {
        uris.retain(|u| vpath_of(u).is_some());
        uris.truncate(MAX_WATCHED);
    }
    accepted
}

/// Keeps a listen stream registered; dropping it ends the registration.
pub struct Registration {
    listeners: Arc<Listeners>,
    id: u64,
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.listeners.open.lock().unwrap_or_else(|p| p.into_inner()).remove(&self.id);
    }
}

impl Listeners {
    /// Register a stream on `thread` with its accepted filter.
    pub fn add(
        self: &Arc<Self>,
        host: &Toolhost,
        thread: &str,
        sink: SubscriptionSink,
        accepted: &SubscriptionFilter,
    ) -> Result<Registration, McpError> {
        let watched = accepted
            .resource_subscriptions
            .iter()
            .flatten()
            .map(|uri| (uri.clone(), stamp(host, thread, uri)))
            .collect();
        let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        if open.len() >= MAX_LISTENERS {
            return Err(McpError::internal_error(
                format!("too many listen streams are open (at most {MAX_LISTENERS}); try again later"),
                None,
            ));
        }
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        open.insert(id, Listener { thread: thread.to_string(), sink, watched });
        Ok(Registration { listeners: self.clone(), id })
    }

    /// Tell the streams of `thread` what a call there changed.
    pub async fn after_call(&self, host: &Toolhost, thread: &str, changes: &Changes) {
        // Decided under the lock, sent after it.
        let mut sends = Vec::new();
        {
            let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
            for l in open.values_mut().filter(|l| l.thread == thread) {
                let filter = l.sink.accepted();
                let tools = changes.tools && filter.tools_list_changed == Some(true);
                let resources = changes.resources && filter.resources_list_changed == Some(true);
                let updated: Vec<String> = l
                    .watched
                    .iter_mut()
                    .filter_map(|(uri, seen)| changed(host, thread, uri, seen).then(|| uri.clone()))
                    .collect();
                if tools || resources || !updated.is_empty() {
                    sends.push((l.sink.clone(), tools, resources, updated));
                }
            }
        }
        for (sink, tools, resources, updated) in sends {
            let mut results = Vec::new();
            if tools {
                results.push(sink.notify_tool_list_changed().await);
            }
            if resources {
                results.push(sink.notify_resource_list_changed().await);
            }
            for uri in updated {
                results.push(sink.notify_resource_updated(uri).await);
            }
            for e in results.into_iter().filter_map(Result::err) {
                tracing::debug!("cannot send on a listen stream: {e}");
            }
        }
    }

    /// Streams open now.
    pub fn len(&self) -> usize {
        self.open.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    /// Whether no stream is open.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_thread_files_are_watched_and_at_most_the_cap() {
        let mut requested = SubscriptionFilter::builder().tools_list_changed().build();
        let mut uris = vec![
            "toolhost:///mnt/user-data/outputs/a.txt".to_string(),
            "test://watched-resource".to_string(),
            "toolhost:///etc/passwd".to_string(),
        ];
        uris.extend((0..2 * MAX_WATCHED).map(|i| format!("toolhost:///mnt/user-data/outputs/{i}")));
        requested.resource_subscriptions = Some(uris);
        let accepted = accepted_filter(&requested);
        let watched = accepted.resource_subscriptions.unwrap();
        assert_eq!(watched.len(), MAX_WATCHED);
        assert_eq!(watched[0], "toolhost:///mnt/user-data/outputs/a.txt");
        assert!(watched.iter().all(|u| u.starts_with("toolhost:///mnt/user-data/")));
        assert_eq!(accepted.tools_list_changed, Some(true));
    }
}
