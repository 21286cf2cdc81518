//! MCP tasks (the `io.modelcontextprotocol/tasks` extension) in `toolhost serve` over stdio, with
//! raw JSON-RPC and the capability declared per request (`_meta`): a spinning component run as a
//! task is cancelled and stops computing; a normal call as a task completes with its result;
//! unknown task ids are named; a flood of task creations hits the running cap with a clear error,
//! and a normal call still works afterwards.

#[path = "support/paths.rs"]
mod paths;
#[path = "support/serve_harness.rs"]
mod serve_harness;

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use serve_harness::{cpu_seconds, settled_cpu, wait_for_cpu, RawStdio, Setup};

const CAPS: &str = "io.modelcontextprotocol/clientCapabilities";

fn with_tasks(id: u64, method: &str, mut params: Value) -> Vec<u8> {
    params["_meta"] = json!({CAPS: {"extensions": {"io.modelcontextprotocol/tasks": {}}}});
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string().into_bytes()
}

fn setup() -> Setup {
    Setup::with_spin()
}

/// The reply to request `id` (skipping notifications).
fn reply(raw: &mut RawStdio, id: u64) -> Value {
    loop {
        let m = raw.next();
        if m["id"] == id {
            return m;
        }
    }
}

fn request(raw: &mut RawStdio, id: u64, method: &str, params: Value) -> Value {
    raw.send(&with_tasks(id, method, params));
    reply(raw, id)
}

/// Poll `tasks/get` until `task` is in a terminal state (or `want`), within `limit`.
fn poll(raw: &mut RawStdio, next_id: &mut u64, task: &str, limit: Duration) -> Value {
    let start = Instant::now();
    loop {
        *next_id += 1;
        let r = request(raw, *next_id, "tasks/get", json!({"taskId": task}));
        let status = r["result"]["status"].as_str().unwrap_or_else(|| panic!("{r}")).to_string();
        if ["completed", "failed", "cancelled"].contains(&status.as_str()) {
            return r["result"].clone();
        }
        assert!(start.elapsed() < limit, "task {task} still {status} after {limit:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn a_task_is_polled_cancelled_and_stops_and_a_normal_task_completes() {
    let s = setup();
    let mut raw = RawStdio::start(&s, &[]);
    let pid = raw.child.id();
    let mut id = 100;
    // tools/list says which tools may run as tasks.
    let list = request(&mut raw, 1, "tools/list", json!({}));
    let tools = list["result"]["tools"].as_array().unwrap();
    let support = |n: &str| tools.iter().find(|t| t["name"] == n).unwrap()["_meta"]["toolhost/taskSupport"].clone();
    assert_eq!(support("spin"), "optional", "{list}");
    // Compiled before measuring; a client without the capability gets the result at once.
    raw.send(
        &serde_json::to_vec(
            &json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "ok", "arguments": {}}}),
        )
        .unwrap(),
    );
    assert_eq!(reply(&mut raw, 2)["result"]["content"][0]["text"], "ok");

    let created = request(&mut raw, 3, "tools/call", json!({"name": "spin", "arguments": {}}));
    assert_eq!(created["result"]["resultType"], "task", "{created}");
    let task = created["result"]["taskId"].as_str().unwrap().to_string();
    assert!(created["result"]["ttlMs"].as_u64().unwrap() > 0, "{created}");
    // Computing, however slowly a loaded machine lets it.
    wait_for_cpu(pid, cpu_seconds(pid), 0.3, Duration::from_secs(60));
    let got = request(&mut raw, 4, "tasks/get", json!({"taskId": task}));
    assert_eq!(got["result"]["status"], "working", "{got}");

    let ack = request(&mut raw, 5, "tasks/cancel", json!({"taskId": task}));
    assert_eq!(ack["result"], json!({"resultType": "complete"}), "{ack}");
    let done = poll(&mut raw, &mut id, &task, Duration::from_secs(10));
    assert_eq!(done["status"], "cancelled", "{done}");
    assert!(done.get("result").is_none(), "{done}");
    let idle = settled_cpu(pid, Duration::from_secs(10));
    assert!(idle < 0.1, "a cancelled task must stop computing: {idle:.2} s of CPU in 2 s");

    // A normal call as a task: completed, with the tool's result inlined.
    let created = request(&mut raw, 6, "tools/call", json!({"name": "hello", "arguments": {"name": "task"}}));
    let task = created["result"]["taskId"].as_str().unwrap_or_else(|| panic!("{created}")).to_string();
    let done = poll(&mut raw, &mut id, &task, Duration::from_secs(30));
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(done["result"]["isError"], false, "{done}");
    assert!(done["result"]["content"][0]["text"].as_str().unwrap().contains("task"), "{done}");
}

#[test]
fn unknown_ids_are_named_and_a_flood_of_tasks_hits_the_cap_and_serving_goes_on() {
    let s = setup();
    let mut raw = RawStdio::start(&s, &[]);
    let bogus = "task-does-not-exist-42";
    for (i, method) in ["tasks/get", "tasks/cancel"].into_iter().enumerate() {
        let r = request(&mut raw, 10 + i as u64, method, json!({"taskId": bogus}));
        assert_eq!(r["error"]["code"], -32602, "{r}");
        assert!(r["error"]["message"].as_str().unwrap().contains(bogus), "{r}");
    }
    // Without the capability, tasks/* are refused as the extension says.
    raw.send(
        &serde_json::to_vec(&json!({"jsonrpc": "2.0", "id": 20, "method": "tasks/get", "params": {"taskId": bogus}}))
            .unwrap(),
    );
    assert_eq!(reply(&mut raw, 20)["error"]["code"], -32021);

    // A flood: spinning tasks up to the cap, then one more is refused naming the limit.
    let cap = toolhost_serve::tasks::MAX_RUNNING;
    let mut ids = Vec::new();
    for i in 0..cap as u64 {
        let r = request(&mut raw, 1000 + i, "tools/call", json!({"name": "spin", "arguments": {}}));
        ids.push(r["result"]["taskId"].as_str().unwrap_or_else(|| panic!("{r}")).to_string());
    }
    let refused = request(&mut raw, 5000, "tools/call", json!({"name": "spin", "arguments": {}}));
    let msg = refused["error"]["message"].as_str().unwrap_or_else(|| panic!("{refused}"));
    assert!(msg.contains("too many tasks") && msg.contains(&cap.to_string()), "{refused}");
    for (i, t) in ids.iter().enumerate() {
        let r = request(&mut raw, 6000 + i as u64, "tasks/cancel", json!({"taskId": t}));
        assert_eq!(r["result"]["resultType"], "complete", "{r}");
    }
    let mut id = 9000;
    for t in &ids {
        assert_eq!(poll(&mut raw, &mut id, t, Duration::from_secs(60))["status"], "cancelled");
    }
    // Serving goes on: a normal call, and a new task.
    raw.send(&serde_json::to_vec(&json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "hello", "arguments": {"name": "after"}}})).unwrap());
    assert_eq!(reply(&mut raw, 7)["result"]["isError"], false);
    let r = request(&mut raw, 8, "tools/call", json!({"name": "ok", "arguments": {}}));
    let t = r["result"]["taskId"].as_str().unwrap_or_else(|| panic!("{r}")).to_string();
    let done = poll(&mut raw, &mut id, &t, Duration::from_secs(30));
    assert_eq!(done["result"]["content"][0]["text"], "ok", "{done}");
}

/// Host bash as a task: `tasks/cancel` kills the command (its process tree goes with the dropped
/// call), so what it would have done later never happens; the same command run to the end
/// does it (the positive control, which also proves the path checked is the right one).
#[test]
fn a_cancelled_host_bash_task_never_finishes_its_command() {
    let s = Setup::new(false, false);
    std::fs::write(
        s.config(),
        "tools:\n  - {name: bash, group: bash, use: 'deerflow.sandbox.tools:bash_tool'}\nsandbox:\n  use: deerflow.sandbox.local:LocalSandboxProvider\n  allow_host_bash: true\n  bash_command_timeout: 30\n",
    )
    .unwrap();
    let mut raw = RawStdio::start(&s, &["--thread", "bashtask"]);
    let outputs = s.data().join("threads/bashtask/user-data/outputs");
    let mut id = 100;
    // One `sh` runs the whole command; its argv[0] names it so the test can see it go away.
    let marker = format!("toolhost-task-test-{}", std::process::id());
    let cmd = |delay: u32, file: &str| {
        json!({"name": "bash", "arguments": {"description": "d", "command": format!(
            "sh -c 'echo started > /mnt/user-data/outputs/{file}.started; sleep {delay}; echo late > /mnt/user-data/outputs/{file}' {marker}"
        )}})
    };
    let created = request(&mut raw, 1, "tools/call", cmd(3, "late"));
    let task = created["result"]["taskId"].as_str().unwrap_or_else(|| panic!("{created}")).to_string();
    let started = Instant::now();
    while !(outputs.join("late.started").exists() && running_with(&marker)) {
        assert!(started.elapsed() < Duration::from_secs(30), "the command never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(request(&mut raw, 2, "tasks/get", json!({"taskId": task}))["result"]["status"], "working");
    request(&mut raw, 3, "tasks/cancel", json!({"taskId": task}));
    assert_eq!(poll(&mut raw, &mut id, &task, Duration::from_secs(10))["status"], "cancelled");
    // Once the shell is gone, nothing is left to write the file.
    while running_with(&marker) {
        assert!(started.elapsed() < Duration::from_secs(30), "the cancelled command still runs");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(!outputs.join("late").exists(), "the cancelled command went on and wrote its file");

    let created = request(&mut raw, 4, "tools/call", cmd(0, "early"));
    let task = created["result"]["taskId"].as_str().unwrap_or_else(|| panic!("{created}")).to_string();
    let done = poll(&mut raw, &mut id, &task, Duration::from_secs(30));
    assert_eq!(done["status"], "completed", "{done}");
    assert!(outputs.join("early").exists(), "{done}");
}

/// Whether a process whose command line holds `marker` runs (a zombie does not count).
fn running_with(marker: &str) -> bool {
    std::fs::read_dir("/proc").unwrap().filter_map(Result::ok).any(|e| {
        let path = e.path();
        let cmdline = std::fs::read(path.join("cmdline")).unwrap_or_default();
        let stat = std::fs::read_to_string(path.join("stat")).unwrap_or_default();
        let zombie = stat.rsplit_once(") ").is_some_and(|(_, rest)| rest.starts_with('Z'));
        !zombie && String::from_utf8_lossy(&cmdline).contains(marker)
    })
}

/// The `_meta` of a request from a client with the tasks extension and elicitation.
fn with_caps(id: u64, method: &str, mut params: Value, elicitation: bool) -> Vec<u8> {
    let mut caps = json!({"extensions": {"io.modelcontextprotocol/tasks": {}}});
    if elicitation {
        caps["elicitation"] = json!({});
    }
    params["_meta"] = json!({CAPS: caps});
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string().into_bytes()
}

/// Poll `tasks/get` until `task` reaches `status`, within ten seconds.
fn until(raw: &mut RawStdio, next_id: &mut u64, task: &str, status: &str) -> Value {
    let start = Instant::now();
    loop {
        *next_id += 1;
        let r = request(raw, *next_id, "tasks/get", json!({"taskId": task}));
        if r["result"]["status"] == status {
            return r["result"].clone();
        }
        assert!(start.elapsed() < Duration::from_secs(10), "task {task} never {status}: {r}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A task whose component asks the client waits in `input_required` with the questions;
/// `tasks/update` answers them (a subset keeps it waiting on the rest, a malformed answer is
/// `-32602` and changes nothing) and the call then runs again with the answers and completes. A
/// waiting task can be cancelled, and never acts; a client that cannot elicit is not asked.
#[test]
fn a_task_that_asks_waits_for_input_and_resumes_with_the_answers() {
    let s = Setup::with_fixture_keys(&[
        ("confirm_delete", ", capabilities: {client: [elicitation]}"),
        ("multi_input", ", capabilities: {client: [elicitation]}"),
    ]);
    let mut raw = RawStdio::start(&s, &[]);
    let mut id = 1000;
    let start = |raw: &mut RawStdio, id: u64, name: &str, args: Value, elicitation: bool| {
        raw.send(&with_caps(id, "tools/call", json!({"name": name, "arguments": args}), elicitation));
        let created = reply(raw, id);
        created["result"]["taskId"].as_str().unwrap_or_else(|| panic!("{created}")).to_string()
    };
    let accept = |content: Value| json!({"action": "accept", "content": content});

    let task = start(&mut raw, 1, "confirm_delete", json!({"filename": "a.txt"}), true);
    let waiting = until(&mut raw, &mut id, &task, "input_required");
    let requests = waiting["inputRequests"].as_object().unwrap_or_else(|| panic!("{waiting}"));
    assert_eq!(requests.len(), 1, "{waiting}");
    let (key, asked) = requests.iter().next().unwrap();
    assert_eq!(
        (asked["method"].as_str(), asked["params"]["message"].as_str()),
        (Some("elicitation/create"), Some("Delete a.txt?"))
    );
    let bad = request_raw(&mut raw, 2, "tasks/update", json!({"taskId": task, "inputResponses": {key: "yes"}}));
    assert_eq!(bad["error"]["code"], -32602, "{bad}");
    assert_eq!(until(&mut raw, &mut id, &task, "input_required")["inputRequests"][key]["method"], "elicitation/create");
    let ack = request_raw(
        &mut raw,
        3,
        "tasks/update",
        json!({"taskId": task, "inputResponses": {key: accept(json!({"confirm": true}))}}),
    );
    assert_eq!(ack["result"], json!({"resultType": "complete"}), "{ack}");
    let done = poll(&mut raw, &mut id, &task, Duration::from_secs(10));
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(done["result"]["content"][0]["text"], "Deleted a.txt.", "{done}");

    // Two questions open at once, answered one at a time.
    let task = start(&mut raw, 4, "multi_input", json!({}), true);
    let waiting = until(&mut raw, &mut id, &task, "input_required");
    let keys: Vec<String> = waiting["inputRequests"].as_object().unwrap().keys().cloned().collect();
    assert_eq!(keys.len(), 2, "{waiting}");
    let answers: Vec<Value> = keys
        .iter()
        .map(|k| {
            let message = waiting["inputRequests"][k]["params"]["message"].as_str().unwrap();
            accept(json!({"value": if message.starts_with("First") { "x" } else { "y" }}))
        })
        .collect();
    request_raw(&mut raw, 5, "tasks/update", json!({"taskId": task, "inputResponses": {&keys[0]: answers[0]}}));
    let still = until(&mut raw, &mut id, &task, "input_required");
    assert_eq!(still["inputRequests"].as_object().unwrap().keys().collect::<Vec<_>>(), [&keys[1]], "{still}");
    request_raw(&mut raw, 6, "tasks/update", json!({"taskId": task, "inputResponses": {&keys[1]: answers[1]}}));
    let done = poll(&mut raw, &mut id, &task, Duration::from_secs(10));
    assert_eq!(done["result"]["content"][0]["text"], "Got x and y.", "{done}");

    // A waiting task cancelled: it never deletes anything.
    let task = start(&mut raw, 7, "confirm_delete", json!({"filename": "b.txt"}), true);
    until(&mut raw, &mut id, &task, "input_required");
    request_raw(&mut raw, 8, "tasks/cancel", json!({"taskId": task}));
    let done = poll(&mut raw, &mut id, &task, Duration::from_secs(10));
    assert_eq!(done["status"], "cancelled", "{done}");
    assert!(!done.to_string().contains("Deleted"), "{done}");

    // A client without elicitation is not asked: the tool reads why and the task completes.
    let task = start(&mut raw, 9, "confirm_delete", json!({"filename": "c.txt"}), false);
    let done = poll(&mut raw, &mut id, &task, Duration::from_secs(10));
    let text = done["result"]["content"][0]["text"].as_str().unwrap_or_default();
    assert!(text.contains("does not offer elicitation") && !text.contains("Deleted"), "{done}");

    // And a normal call still works.
    let created = request(&mut raw, 10, "tools/call", json!({"name": "hello", "arguments": {"name": "after"}}));
    let task = created["result"]["taskId"].as_str().unwrap().to_string();
    assert_eq!(
        poll(&mut raw, &mut id, &task, Duration::from_secs(30))["result"]["content"][0]["text"],
        "Hello, after."
    );
}

/// A request with the tasks and elicitation capabilities, and its reply.
fn request_raw(raw: &mut RawStdio, id: u64, method: &str, params: Value) -> Value {
    raw.send(&with_caps(id, method, params, true));
    reply(raw, id)
}
