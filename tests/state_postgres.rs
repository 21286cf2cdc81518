//! Thread state past one machine: two `toolhost serve --http` replicas on one PostgreSQL
//! (`state_store: {url: $VAR}`) and one shared data dir, a client alternating between them on
//! one thread (promotions, artifacts, todos and read-before-write marks survive the switch),
//! concurrent turns of one thread from both replicas (nothing lost), a corrupt row and a
//! server stopped mid-run (clear errors, and normal calls afterwards), start-up errors for a bad
//! or unreachable URL, and the store's overhead per turn against the embedded store.
//!
//! PostgreSQL is Debian's (scripts/install-postgres.sh); each test starts its own server in a
//! temp dir on a free loopback port (about a second).

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

#[path = "support/serve_harness.rs"]
mod harness;
#[path = "support/paths.rs"]
mod paths;
#[path = "support/postgres.rs"]
mod pg;

use harness::{messages, HttpServer};
use paths::peer;
use pg::Postgres;

/// The variable the config's `state_store.url` names (`$VAR` expansion, as for a password).
const URL_VAR: &str = "TOOLHOST_TEST_STATE_URL";

/// A temp dir with config.yaml (file tools, tool_search over server-everything, the PostgreSQL
/// store) and the data dir both replicas share.
struct Shared {
    dir: tempfile::TempDir,
}

impl Shared {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let everything = peer("npm/node_modules/.bin/mcp-server-everything");
        let servers = json!({"everything": {"type": "stdio", "command": everything, "args": ["stdio"], "session_init_timeout": 60}});
        std::fs::write(dir.path().join("extensions_config.json"), json!({"mcpServers": servers}).to_string()).unwrap();
        std::fs::write(
            dir.path().join("config.yaml"),
            format!(
                "tools:\n  - {{name: hello, group: demo, use: hello}}\n  - {{name: read_file, group: file:read, use: 'deerflow.sandbox.tools:read_file_tool'}}\n  - {{name: write_file, group: file:write, use: 'deerflow.sandbox.tools:write_file_tool'}}\ntool_search:\n  enabled: true\nstate_store:\n  url: ${URL_VAR}\n"
            ),
        )
        .unwrap();
        Shared { dir }
    }

    fn data(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    fn command(&self, url: &str) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_toolhost"));
        c.arg("serve").arg("--config").arg(self.dir.path().join("config.yaml"));
        c.args(["--http", "127.0.0.1:0", "--plan-mode"]);
        c.env("TOOLHOST_HOME", self.data())
            .env(URL_VAR, url)
            .env_remove("DEER_FLOW_EXTENSIONS_CONFIG_PATH")
            .env_remove("TOOLHOST_SERVE_TOKEN");
        c
    }

    /// A replica: `serve --http` on this config and data dir, state in `url`.
    fn replica(&self, url: &str) -> HttpServer {
        HttpServer::spawn(self.command(url))
    }

    /// A file in the thread's outputs, written straight to the shared directory.
    fn put_output(&self, thread: &str, name: &str, text: &str) {
        let dir = self.data().join("threads").join(thread).join("user-data/outputs");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(name), text).unwrap();
    }
}

static NEXT_ID: AtomicU64 = AtomicU64::new(100);

/// One MCP session on one replica whose requests name `thread` (the `Toolhost-Thread` header,
/// as a stateless client such as DeerFlow does).
struct Client<'a> {
    server: &'a HttpServer,
    session: String,
    thread: String,
}

impl<'a> Client<'a> {
    fn new(server: &'a HttpServer, thread: &str) -> Self {
        Client { server, session: server.raw_session(&[]), thread: thread.to_string() }
    }

    /// One JSON-RPC request; the response message (`result` or `error`).
    fn request(&self, method: &str, params: Value) -> Value {
        let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
        let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string();
        let headers = [("Mcp-Session-Id", self.session.as_str()), ("Toolhost-Thread", self.thread.as_str())];
        let (status, head, body) = self.server.raw("POST", body.as_bytes(), &headers);
        assert_eq!(status, 200, "{method}: {head}\n{body}");
        messages(&body)
            .into_iter()
            .find(|m| m["id"] == id)
            .unwrap_or_else(|| panic!("{method}: no response with id {id} in {body}"))
    }

    /// `tools/call`: Ok(text) for a result that is not an error, Err(text) otherwise (a tool
    /// error or a JSON-RPC error).
    fn call(&self, name: &str, args: Value) -> Result<String, String> {
        let m = self.request("tools/call", json!({"name": name, "arguments": args}));
        if let Some(e) = m.get("error") {
            return Err(e["message"].as_str().unwrap_or_default().to_string());
        }
        let text: String =
            m["result"]["content"].as_array().into_iter().flatten().filter_map(|c| c["text"].as_str()).collect();
        if m["result"]["isError"] == true {
            Err(text)
        } else {
            Ok(text)
        }
    }

    fn ok(&self, name: &str, args: Value) -> String {
        self.call(name, args).unwrap_or_else(|e| panic!("{name} in {}: {e}", self.thread))
    }

    fn tools(&self) -> Vec<String> {
        let m = self.request("tools/list", json!({}));
        m["result"]["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap().to_string()).collect()
    }
}

/// The thread's state as stored (the row's JSON).
fn stored_state(pg: &Postgres, thread: &str) -> Value {
    let text = pg.psql(&format!("SELECT state FROM toolhost_thread_state WHERE thread_id = '{thread}'"));
    serde_json::from_str(text.trim()).unwrap_or_else(|e| panic!("row of {thread}: {e}: {text}"))
}

fn outputs(name: &str) -> String {
    format!("/mnt/user-data/outputs/{name}")
}

#[test]
fn a_client_alternating_between_two_replicas_keeps_its_thread() {
    let pg = Postgres::start();
    let shared = Shared::new();
    let (a, b) = (shared.replica(&pg.url()), shared.replica(&pg.url()));
    let (on_a, on_b) = (Client::new(&a, "t-alternate"), Client::new(&b, "t-alternate"));
    // Another thread on B, to show that what follows stays in its own thread.
    let other = Client::new(&b, "t-other");

    // Promotion through A is visible on B: in its tools/list, and the promoted tool answers.
    assert!(!on_b.tools().contains(&"everything_echo".to_string()));
    on_a.ok("tool_search", json!({"query": "select:everything_echo"}));
    assert!(on_b.tools().contains(&"everything_echo".to_string()), "promotion made on A not seen on B");
    assert!(on_b.ok("everything_echo", json!({"message": "via B"})).contains("via B"));
    assert!(!other.tools().contains(&"everything_echo".to_string()), "the promotion leaked into another thread");

    // Artifacts: a file written through B, presented through A, then another through B.
    on_b.ok("write_file", json!({"description": "d", "path": outputs("one.md"), "content": "one\n"}));
    on_a.ok("present_files", json!({"filepaths": [outputs("one.md")]}));
    on_a.ok("write_file", json!({"description": "d", "path": outputs("two.md"), "content": "two\n"}));
    on_b.ok("present_files", json!({"filepaths": [outputs("two.md")]}));
    // Todos: written through A, replaced through B.
    on_a.ok("write_todos", json!({"todos": [{"content": "first", "status": "in_progress"}]}));
    let state = stored_state(&pg, "t-alternate");
    assert_eq!(state["todos"], json!([{"content": "first", "status": "in_progress"}]), "{state}");
    on_b.ok(
        "write_todos",
        json!({"todos": [{"content": "first", "status": "completed"}, {"content": "second", "status": "pending"}]}),
    );

    // Read-before-write: one.md exists and this thread has not read its current version, so a
    // write through A is refused; a read through B lets a write through A through.
    let refused = on_a.call("write_file", json!({"description": "d", "path": outputs("one.md"), "content": "x\n"}));
    assert!(refused.as_ref().is_err_and(|e| e.contains("have not read its current version")), "{refused:?}");
    on_b.ok("read_file", json!({"description": "d", "path": outputs("one.md")}));
    on_a.ok("write_file", json!({"description": "d", "path": outputs("one.md"), "content": "one, again\n"}));
    // Any write invalidates earlier reads: B must read again.
    let refused = on_b.call("write_file", json!({"description": "d", "path": outputs("one.md"), "content": "y\n"}));
    assert!(refused.is_err(), "{refused:?}");
    let read = on_b.ok("read_file", json!({"description": "d", "path": outputs("one.md")}));
    assert!(read.contains("one, again"), "B reads what A wrote (one threads directory): {read}");

    let state = stored_state(&pg, "t-alternate");
    assert_eq!(state["artifacts"], json!([outputs("one.md"), outputs("two.md")]), "{state}");
    assert_eq!(state["todos"][1]["content"], "second", "{state}");
    assert_eq!(state["promoted"]["names"], json!(["everything_echo"]), "{state}");
    assert!(state["read_marks"].as_object().unwrap().contains_key(&outputs("one.md")), "{state}");
    // The other thread has no state of its own beyond what it did (nothing).
    assert_eq!(pg.psql("SELECT count(*) FROM toolhost_thread_state WHERE thread_id = 't-other'").trim(), "0");
    // The embedded store's file is not written: the row is the only copy.
    assert!(!shared.data().join("threads/t-alternate/host/state.json").exists());
}

#[test]
fn concurrent_turns_of_one_thread_on_two_replicas_lose_nothing() {
    let pg = Postgres::start();
    let shared = Shared::new();
    let (a, b) = (shared.replica(&pg.url()), shared.replica(&pg.url()));
    const EACH: usize = 20;
    for i in 0..2 * EACH {
        shared.put_output("t-busy", &format!("f{i:02}.md"), &format!("file {i}\n"));
    }
    let clients = [Client::new(&a, "t-busy"), Client::new(&b, "t-busy")];
    let started = Instant::now();
    std::thread::scope(|s| {
        for (r, client) in clients.iter().enumerate() {
            for k in 0..EACH {
                let i = r * EACH + k;
                s.spawn(move || {
                    // Every call adds to the thread's state: an artifact, or a read mark.
                    if i.is_multiple_of(2) {
                        client.ok("present_files", json!({"filepaths": [outputs(&format!("f{i:02}.md"))]}));
                    } else {
                        client.ok("read_file", json!({"description": "d", "path": outputs(&format!("f{i:02}.md"))}));
                    }
                });
            }
        }
    });
    eprintln!("{} concurrent calls on one thread over two replicas: {:?}", 2 * EACH, started.elapsed());
    let state = stored_state(&pg, "t-busy");
    let artifacts: BTreeSet<String> =
        state["artifacts"].as_array().unwrap().iter().map(|v| v.as_str().unwrap().to_string()).collect();
    let marks: BTreeSet<String> = state["read_marks"].as_object().unwrap().keys().cloned().collect();
    let want_artifacts: BTreeSet<String> =
        (0..2 * EACH).filter(|i| i.is_multiple_of(2)).map(|i| outputs(&format!("f{i:02}.md"))).collect();
    let want_marks: BTreeSet<String> =
        (0..2 * EACH).filter(|i| !i.is_multiple_of(2)).map(|i| outputs(&format!("f{i:02}.md"))).collect();
    assert_eq!(artifacts, want_artifacts, "artifacts lost");
    assert_eq!(marks, want_marks, "read marks lost");
    assert_eq!(state["artifacts"].as_array().unwrap().len(), EACH, "an artifact recorded twice: {state}");
}

#[test]
fn a_corrupt_row_and_a_stopped_server_are_clear_errors_and_calls_work_again() {
    let mut pg = Postgres::start();
    let shared = Shared::new();
    let a = shared.replica(&pg.url());
    let fine = Client::new(&a, "t-fine");
    fine.ok("write_todos", json!({"todos": [{"content": "before", "status": "pending"}]}));

    // A row damaged behind toolhost's back: the thread's calls fail naming it, its row is left
    // as it was, and other threads go on.
    pg.psql("INSERT INTO toolhost_thread_state (thread_id, state) VALUES ('t-broken', '{\"artifacts\": [1, oops')");
    let broken = Client::new(&a, "t-broken");
    for (name, args) in [
        ("hello", json!({"name": "x"})),
        ("write_todos", json!({"todos": [{"content": "lost?", "status": "pending"}]})),
    ] {
        let e = broken.call(name, args).unwrap_err();
        assert!(e.contains("thread state of 't-broken' is not valid") && e.contains("toolhost_thread_state"), "{e}");
    }
    assert_eq!(
        pg.psql("SELECT state FROM toolhost_thread_state WHERE thread_id = 't-broken'").trim(),
        "{\"artifacts\": [1, oops"
    );
    let e = broken.request("tools/list", json!({}));
    assert!(e["error"]["message"].as_str().is_some_and(|m| m.contains("t-broken")), "{e}");
    assert!(fine.ok("hello", json!({"name": "still"})).contains("still"));

    // The server goes away mid-run: a clear error for the call, the replica stays up.
    pg.stop();
    let e = fine.call("write_todos", json!({"todos": [{"content": "during", "status": "pending"}]})).unwrap_err();
    // "cannot connect" once the pool has seen the connection close; the server's own words
    // ("terminating connection due to administrator command") if the call got there first.
    assert!(e.contains(&format!("thread state of 't-fine' in PostgreSQL (127.0.0.1:{}/postgres)", pg.port)), "{e}");
    assert!(a.raw_initialize(&[]) == 200, "the replica stopped serving");
    // Back again: the next call works on a new connection, and nothing from the failed call
    // was stored.
    pg.resume();
    fine.ok("write_todos", json!({"todos": [{"content": "after", "status": "pending"}]}));
    assert_eq!(stored_state(&pg, "t-fine")["todos"], json!([{"content": "after", "status": "pending"}]));
    let b = shared.replica(&pg.url());
    let from_b = Client::new(&b, "t-fine");
    assert!(from_b.tools().contains(&"write_todos".to_string()));
    assert_eq!(stored_state(&pg, "t-fine")["todos"][0]["content"], "after");
}

#[test]
fn an_expired_thread_loses_its_row_with_its_directory() {
    let pg = Postgres::start();
    let shared = Shared::new();
    let mut cmd = shared.command(&pg.url());
    cmd.args(["--thread-ttl", "1"]);
    let a = HttpServer::spawn(cmd);
    let (old, kept) = (Client::new(&a, "t-expiring"), Client::new(&a, "t-kept"));
    old.ok("write_todos", json!({"todos": [{"content": "soon gone", "status": "pending"}]}));
    assert_eq!(stored_state(&pg, "t-expiring")["todos"][0]["content"], "soon gone");
    let dir = shared.data().join("threads/t-expiring");
    assert!(dir.is_dir());
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        // Another thread stays in use meanwhile (and keeps its row).
        kept.ok("write_todos", json!({"todos": [{"content": "kept", "status": "pending"}]}));
        let rows = pg.psql("SELECT count(*) FROM toolhost_thread_state WHERE thread_id = 't-expiring'");
        if rows.trim() == "0" && !dir.exists() {
            break;
        }
        assert!(Instant::now() < deadline, "the expired thread's row or directory is still there");
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(stored_state(&pg, "t-kept")["todos"][0]["content"], "kept");
    // The thread's name can be used again, from scratch.
    assert!(old.tools().contains(&"write_todos".to_string()));
    old.ok("hello", json!({"name": "again"}));
}

/// `serve` with `url`: it must stop on its own with an error naming the setting.
fn start_up_error(shared: &Shared, url: &str) -> String {
    let out = shared.command(url).stdin(std::process::Stdio::null()).output().unwrap();
    assert!(!out.status.success(), "serve started with state_store.url = {url}");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn a_bad_or_unreachable_url_stops_serve_at_start_naming_the_setting() {
    let shared = Shared::new();
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    for (url, expected) in [
        (format!("postgres://toolhost:s3cret@127.0.0.1:{closed}/db"), "state_store.url: cannot connect"),
        (
            "postgres://toolhost:s3cret@127.0.0.1:notaport/db".to_string(),
            "state_store.url: not a PostgreSQL connection URL",
        ),
        (String::new(), "state_store.url: is empty"),
    ] {
        let err = start_up_error(&shared, &url);
        assert!(err.contains(expected), "{url}: {err}");
        assert!(!err.contains("s3cret"), "the password was echoed: {err}");
    }
}

/// Median of `runs` timings of `f`.
async fn median<F, Fut>(runs: usize, mut f: F) -> Duration
where
    F: FnMut(usize) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let mut times = Vec::with_capacity(runs);
    for i in 0..runs {
        let t = Instant::now();
        f(i).await;
        times.push(t.elapsed());
    }
    times.sort();
    times[runs / 2]
}

/// The store's cost per turn (what a call that changes state adds: one `get` before the tool
/// runs, one `apply` of the turn's update after), embedded (memory and `state.json`) against
/// PostgreSQL on loopback: a small state (each turn replaces the todo list) and a growing one
/// (each turn adds an artifact, up to 300). Prints the medians (BENCHMARKS.md); asserts only that
/// both stores end with every update.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn store_overhead_per_turn() {
    use toolhost::core::StateUpdate;
    use toolhost::state_store::{PostgresStateStore, StateStore, ThreadStore};
    use toolhost::StateStoreConfig;
    const RUNS: usize = 300;
    let pg = tokio::task::spawn_blocking(Postgres::start).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let embedded = ThreadStore::new(true);
    let postgres = PostgresStateStore::new(&StateStoreConfig { url: pg.url(), pool_size: 4 }).unwrap();
    postgres.check().await.unwrap();
    let stores: [(&str, &dyn StateStore); 2] = [("embedded", &embedded), ("postgres", &postgres)];
    let mut lines = Vec::new();
    for (name, store) in stores {
        let small = toolhost::core::ThreadFs::open(dir.path(), &format!("{name}-small")).unwrap();
        let growing = toolhost::core::ThreadFs::open(dir.path(), &format!("{name}-growing")).unwrap();
        let todos = |i: usize| StateUpdate {
            todos: Some(json!([{"content": i.to_string(), "status": "pending"}])),
            ..Default::default()
        };
        let artifact = |i: usize| StateUpdate {
            artifacts: Some(vec![format!("/mnt/user-data/outputs/{i}.md")]),
            ..Default::default()
        };
        // Warm up (connections, prepared statements, the files).
        store.apply(&small, &[&todos(usize::MAX)]).await.unwrap();
        store.apply(&growing, &[&artifact(usize::MAX)]).await.unwrap();
        let (small, growing) = (&small, &growing);
        let get_small = median(RUNS, |_| async move {
            store.get(small).await.unwrap();
        })
        .await;
        let apply_small = median(RUNS, |i| async move {
            store.apply(small, &[&todos(i)]).await.unwrap();
        })
        .await;
        let apply_growing = median(RUNS, |i| async move {
            store.apply(growing, &[&artifact(i)]).await.unwrap();
        })
        .await;
        let get_growing = median(RUNS, |_| async move {
            store.get(growing).await.unwrap();
        })
        .await;
        assert_eq!(store.get(small).await.unwrap().todos.unwrap()[0]["content"], (RUNS - 1).to_string(), "{name}");
        assert_eq!(store.get(growing).await.unwrap().artifacts.len(), RUNS + 1, "{name}: updates lost");
        lines.push(format!(
            "{name}: small state get {get_small:?} + apply {apply_small:?}; 300 artifacts get {get_growing:?} + apply {apply_growing:?}"
        ));
    }
    eprintln!("state store per turn, medians of {RUNS}:\n  {}", lines.join("\n  "));
}
