//! MCP tasks (the `io.modelcontextprotocol/tasks` extension, SEP-2663) of one `serve` process:
//! the calls it runs in the background, their status and results. One store serves every
//! session, because a stateless (2026-07-28) client has no session and reads a task with a
//! later, separate request; a task id is 128 random bits, so only the client it was given to
//! can name it. Bounded: at most [`MAX_RUNNING`] running at once (one more is refused with an
//! error saying so) and at most [`MAX_KEPT`] kept in all (the oldest finished one is dropped
//! first); a finished task's result is kept [`TTL`] from its creation and at least [`GRACE`]
//! after it finished, then dropped.
//!
//! A task whose call asks the client (a component's `client.elicit`) waits in `input_required`
//! with the questions ([`TaskStore::park`]); `tasks/update` delivers answers, and once every
//! question has one the call runs again with all the answers ([`super::mrtr`]).

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rmcp::model::{
    CallToolResult, DetailedTask, InputRequests, InputResponses, JsonObject, Task, TaskPayload, TaskStatus,
};
use rmcp::ErrorData as McpError;
use serde_json::Value;
use toolhost_core::CancelSignal;

use super::jsonrpc::{cap_text, ECHO_MAX_BYTES};

/// Tasks running at once.
pub const MAX_RUNNING: usize = 64;
/// Tasks kept (running and finished).
pub const MAX_KEPT: usize = 1000;
/// How long a task is kept from its creation (`ttlMs`).
pub const TTL: Duration = Duration::from_secs(15 * 60);
/// How long a finished task is kept at least, even past [`TTL`].
pub const GRACE: Duration = Duration::from_secs(60);
/// The polling interval suggested to clients (`pollIntervalMs`).
pub const POLL_INTERVAL: Duration = Duration::from_millis(500);

struct Entry {
    task: Task,
    /// `None` while running.
    terminal: Option<TaskPayload>,
    finished: Option<Instant>,
    created: Instant,
    cancel: CancelSignal,
    /// Tells the task's future to drop the call (host bash's process tree and a subagent stop
    /// when their call is dropped; a component stops on `cancel`).
    stop: tokio::sync::watch::Sender<bool>,
    cancel_requested: bool,
    /// The answers the client gave, by key.
    answers: BTreeMap<String, Value>,
    /// While the call waits for answers: the questions still open, and what wakes it.
    waiting: Option<(InputRequests, Arc<tokio::sync::Notify>)>,
}

#[derive(Default)]
struct Inner {
    tasks: HashMap<String, Entry>,
    /// Ids in creation order.
    order: VecDeque<String>,
}

/// The tasks of one `serve`. Dropping it stops every task still running.
#[derive(Default)]
pub struct TaskStore {
    inner: Mutex<Inner>,
}

impl Drop for TaskStore {
    fn drop(&mut self) {
        let inner = self.inner.get_mut().unwrap_or_else(|p| p.into_inner());
        for e in inner.tasks.values().filter(|e| e.terminal.is_none()) {
            e.cancel.cancel();
            e.stop.send_replace(true);
        }
    }
}

fn now() -> String {
    rmcp::task_manager::current_timestamp()
}

fn unknown(task_id: &str) -> McpError {
    let id = cap_text(task_id, ECHO_MAX_BYTES);
    McpError::invalid_params(
        format!("unknown task id '{id}': no such task (a finished task is kept 15 minutes)"),
        Some(serde_json::json!({"taskId": id})),
    )
}

impl TaskStore {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Drop finished tasks past their time.
    fn sweep(inner: &mut Inner) {
        let expired = |e: &Entry| e.finished.is_some_and(|f| e.created.elapsed() >= TTL && f.elapsed() >= GRACE);
        let Inner { tasks, order } = inner;
        tasks.retain(|_, e| !expired(e));
        order.retain(|id| tasks.contains_key(id));
    }

    /// Record a new running task whose call stops when `cancel` is raised and is dropped when
    /// the returned receiver turns `true`. Refused when [`MAX_RUNNING`] tasks run already.
    pub fn create(&self, cancel: CancelSignal) -> Result<(Task, tokio::sync::watch::Receiver<bool>), McpError> {
        let mut inner = self.lock();
        Self::sweep(&mut inner);
        let running = inner.tasks.values().filter(|e| e.terminal.is_none()).count();
        if running >= MAX_RUNNING {
            return Err(McpError::invalid_request(
                format!(
                    "too many tasks: {running} are running (at most {MAX_RUNNING} at once); wait for one to \
                     finish or cancel one with tasks/cancel"
                ),
                None,
            ));
        }
        while inner.tasks.len() >= MAX_KEPT {
            let oldest_done =
                inner.order.iter().position(|id| inner.tasks.get(id).is_some_and(|e| e.terminal.is_some()));
            match oldest_done {
                Some(i) => {
                    if let Some(id) = inner.order.remove(i) {
                        inner.tasks.remove(&id);
                    }
                }
                None => break,
            }
        }
        let id = super::threads::fresh_thread_id("task-")
            .map_err(|e| McpError::internal_error(format!("cannot make a task id: {e}"), None))?;
        let stamp = now();
        let task = Task::new(id.clone(), TaskStatus::Working, stamp.clone(), stamp)
            .with_ttl_ms(TTL.as_millis() as u64)
            .with_poll_interval_ms(POLL_INTERVAL.as_millis() as u64);
        let (stop, stopped) = tokio::sync::watch::channel(false);
        inner.order.push_back(id.clone());
        inner.tasks.insert(
            id,
            Entry {
                task: task.clone(),
                terminal: None,
                finished: None,
                created: Instant::now(),
                cancel,
                stop,
                cancel_requested: false,
                answers: BTreeMap::new(),
                waiting: None,
            },
        );
        Ok((task, stopped))
    }

    /// The call behind `task_id` ended: with a result, or with a protocol-level error. A task
    /// whose cancellation was asked for ends `cancelled` whatever its call returned.
    pub fn finish(&self, task_id: &str, result: Result<CallToolResult, McpError>) {
        let mut inner = self.lock();
        let Some(e) = inner.tasks.get_mut(task_id) else { return };
        if e.terminal.is_some() {
            return;
        }
        let payload = if e.cancel_requested {
            TaskPayload::Cancelled
        } else {
            match result {
                Ok(r) => TaskPayload::Completed { result: to_object(serde_json::to_value(&r)) },
                Err(err) => TaskPayload::Failed { error: to_object(serde_json::to_value(&err)) },
            }
        };
        e.task.status = payload.status();
        e.task.last_updated_at = now();
        e.terminal = Some(payload);
        e.waiting = None;
        e.finished = Some(Instant::now());
    }

    /// `tasks/get`.
    pub fn get(&self, task_id: &str) -> Result<DetailedTask, McpError> {
        let mut inner = self.lock();
        Self::sweep(&mut inner);
        let e = inner.tasks.get(task_id).ok_or_else(|| unknown(task_id))?;
        let payload = match (&e.terminal, &e.waiting) {
            (Some(t), _) => t.clone(),
            (None, Some((open, _))) => TaskPayload::InputRequired { input_requests: open.clone() },
            (None, None) => TaskPayload::Working,
        };
        let mut task = e.task.clone();
        if e.cancel_requested && e.terminal.is_none() {
            task.status_message = Some("cancelling: the call is being stopped".into());
        }
        Ok(DetailedTask::new(task, payload))
    }

    /// `tasks/cancel`: raise the call's cancel signal (a component stops within an epoch tick,
    /// host bash and `task` stop too); the task ends `cancelled` once the call has stopped. A
    /// finished task is left as it is.
    pub fn cancel(&self, task_id: &str) -> Result<(), McpError> {
        let mut inner = self.lock();
        Self::sweep(&mut inner);
        let e = inner.tasks.get_mut(task_id).ok_or_else(|| unknown(task_id))?;
        if e.terminal.is_none() && !e.cancel_requested {
            e.cancel_requested = true;
            e.task.last_updated_at = now();
            e.cancel.cancel();
            e.stop.send_replace(true);
        }
        Ok(())
    }

    /// `tasks/update`: answers to the questions the task waits on. An answer to a question that
    /// is not open is ignored; once none is open, the call runs again with all the answers. Each
    /// answer must be a JSON object (`-32602` otherwise).
    pub fn update(&self, task_id: &str, responses: InputResponses) -> Result<(), McpError> {
        let responses = super::mrtr::checked_responses(responses)?;
        let mut inner = self.lock();
        Self::sweep(&mut inner);
        let e = inner.tasks.get_mut(task_id).ok_or_else(|| unknown(task_id))?;
        let Some((open, wake)) = e.waiting.as_mut() else { return Ok(()) };
        for (key, answer) in responses {
            if open.remove(&key).is_some() {
                e.answers.insert(key, answer);
            }
        }
        if open.is_empty() {
            // A permit is kept if the call is not waiting yet.
            wake.notify_one();
            e.waiting = None;
            e.task.status = TaskStatus::Working;
            e.task.last_updated_at = now();
        }
        Ok(())
    }

    /// The call of `task_id` left questions open: the task waits in `input_required` until
    /// `tasks/update` has answered them all; the returned handle wakes the call then. `None`
    /// when the task is gone or ended.
    pub fn park(&self, task_id: &str, open: InputRequests) -> Option<Arc<tokio::sync::Notify>> {
        let mut inner = self.lock();
        let e = inner.tasks.get_mut(task_id).filter(|e| e.terminal.is_none())?;
        let wake = Arc::new(tokio::sync::Notify::new());
        e.waiting = Some((open, wake.clone()));
        e.task.status = TaskStatus::InputRequired;
        e.task.last_updated_at = now();
        Some(wake)
    }

    /// The answers the client has given the call of `task_id` so far.
    pub fn answers(&self, task_id: &str) -> BTreeMap<String, Value> {
        self.lock().tasks.get(task_id).map(|e| e.answers.clone()).unwrap_or_default()
    }

    /// Tasks kept (running and finished).
    pub fn kept(&self) -> usize {
        self.lock().tasks.len()
    }
}

fn to_object(v: Result<Value, serde_json::Error>) -> JsonObject {
    match v {
        Ok(Value::Object(o)) => o,
        Ok(other) => JsonObject::from_iter([("value".to_string(), other)]),
        Err(e) => JsonObject::from_iter([("message".to_string(), Value::String(e.to_string()))]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn running_tasks_are_capped_and_finished_ones_make_room() {
        let tasks = TaskStore::default();
        let ids: Vec<String> = (0..MAX_RUNNING).map(|_| tasks.create(CancelSignal::new()).unwrap().0.task_id).collect();
        let e = tasks.create(CancelSignal::new()).unwrap_err();
        assert!(e.message.contains("too many tasks"), "{e:?}");
        tasks.finish(&ids[0], Ok(CallToolResult::success(vec![])));
        assert!(tasks.create(CancelSignal::new()).is_ok());
        assert_eq!(tasks.get(&ids[0]).unwrap().status(), TaskStatus::Completed);
    }

    #[test]
    fn the_oldest_finished_task_is_dropped_at_the_cap() {
        let tasks = TaskStore::default();
        let first = tasks.create(CancelSignal::new()).unwrap().0.task_id;
        tasks.finish(&first, Ok(CallToolResult::success(vec![])));
        for _ in 1..MAX_KEPT {
            let id = tasks.create(CancelSignal::new()).unwrap().0.task_id;
            tasks.finish(&id, Ok(CallToolResult::success(vec![])));
        }
        assert_eq!(tasks.kept(), MAX_KEPT);
        tasks.create(CancelSignal::new()).unwrap();
        assert_eq!(tasks.kept(), MAX_KEPT);
        assert!(tasks.get(&first).unwrap_err().message.contains(&first));
    }

    #[test]
    fn cancel_raises_the_signal_and_the_task_ends_cancelled() {
        let tasks = TaskStore::default();
        let signal = CancelSignal::new();
        let (task, stopped) = tasks.create(signal.clone()).unwrap();
        let id = task.task_id;
        tasks.cancel(&id).unwrap();
        assert!(signal.is_cancelled() && *stopped.borrow());
        assert_eq!(tasks.get(&id).unwrap().status(), TaskStatus::Working);
        tasks.finish(&id, Ok(CallToolResult::error(vec![])));
        assert_eq!(tasks.get(&id).unwrap().status(), TaskStatus::Cancelled);
        // Idempotent on a finished task; an unknown id is named.
        tasks.cancel(&id).unwrap();
        assert!(tasks.cancel("nope-123").unwrap_err().message.contains("nope-123"));
    }

    #[tokio::test]
    async fn a_parked_task_resumes_once_every_question_is_answered() {
        let tasks = TaskStore::default();
        let id = tasks.create(CancelSignal::new()).unwrap().0.task_id;
        let request = |m: &str| -> rmcp::model::InputRequest {
            serde_json::from_value(serde_json::json!({"method": "elicitation/create", "params": {
                "message": m, "requestedSchema": {"type": "object", "properties": {}}}}))
            .unwrap()
        };
        let open = InputRequests::from([("a".to_string(), request("A?")), ("b".to_string(), request("B?"))]);
        let wake = tasks.park(&id, open).unwrap();
        let shown = |tasks: &TaskStore| serde_json::to_value(tasks.get(&id).unwrap()).unwrap();
        assert_eq!(shown(&tasks)["status"], "input_required");
        let answer = serde_json::json!({"action": "accept", "content": {}});
        // A subset: still waiting, only the other question shown; a stray key is ignored.
        tasks.update(&id, InputResponses::from([("a".into(), answer.clone()), ("zz".into(), answer.clone())])).unwrap();
        let v = shown(&tasks);
        assert_eq!(v["status"], "input_required");
        assert_eq!(v["inputRequests"].as_object().unwrap().keys().collect::<Vec<_>>(), ["b"]);
        let e = tasks.update(&id, InputResponses::from([("b".into(), serde_json::json!(7))])).unwrap_err();
        assert!(e.message.contains("is a number"), "{e:?}");
        tasks.update(&id, InputResponses::from([("b".into(), answer)])).unwrap();
        assert_eq!(shown(&tasks)["status"], "working");
        tokio::time::timeout(Duration::from_secs(1), wake.notified()).await.unwrap();
        assert_eq!(tasks.answers(&id).keys().collect::<Vec<_>>(), ["a", "b"]);
        assert!(tasks.update("nope-1", InputResponses::new()).is_err());
    }
}
