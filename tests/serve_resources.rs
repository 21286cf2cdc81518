//! `toolhost serve`'s resources, prompts and log messages, through the rmcp client over stdio:
//! a thread's outputs and artifacts as resources (text and blobs, subscriptions told when a tool
//! rewrites a file), links, FIFOs, traversal and oversized files refused with nothing read from
//! outside the outputs; the enabled skills as prompts, whose reading activates the skill's
//! `allowed-tools` policy as reading SKILL.md does; the skills extension (SEP-2640: skills/list,
//! skills/get, skill:// resources, directory reads) with no link in a skill followed;
//! `logging/setLevel` and the messages a failed call sends. Every hostile step ends with a
//! normal call that still works.

#![allow(deprecated)] // resources/subscribe and logging: legacy in 2026-07-28, current in 2025-11-25.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use base64::Engine as _;
use rmcp::model::{
    ClientCapabilities, ClientConfig, GetPromptRequestParams, Implementation, LoggingLevel,
    LoggingMessageNotificationParam, ProtocolVersion, ReadResourceRequestParams, ResourceContents,
    ResourceUpdatedNotificationParam, SetLevelRequestParams, SubscribeRequestParams,
};
use rmcp::service::{NotificationContext, RunningService};
use rmcp::transport::{ConfigureCommandExt, TokioChildProcess};
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use serde_json::{json, Value};

#[path = "support/serve_harness.rs"]
mod harness;
#[path = "support/paths.rs"]
mod paths;
use harness::{text, Setup};

/// A client that records resource updates and log messages.
#[derive(Clone, Default)]
struct Recorder {
    updated: Arc<Mutex<Vec<String>>>,
    logs: Arc<Mutex<Vec<Value>>>,
}

impl ClientHandler for Recorder {
    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(ClientCapabilities::default(), Implementation::new("resources-test", "0.1.0"))
            .with_protocol_version(ProtocolVersion::LATEST_WITH_INITIALIZE)
    }

    async fn on_resource_updated(&self, p: ResourceUpdatedNotificationParam, _cx: NotificationContext<RoleClient>) {
        self.updated.lock().unwrap().push(p.uri);
    }

    async fn on_logging_message(&self, p: LoggingMessageNotificationParam, _cx: NotificationContext<RoleClient>) {
        self.logs.lock().unwrap().push(json!({"level": p.level, "data": p.data}));
    }
}

type Session = RunningService<RoleClient, Recorder>;

async fn session(s: &Setup, client: Recorder) -> Session {
    let cmd = tokio::process::Command::from(s.command(&["--thread", "t1"])).configure(|c| {
        c.stderr(std::process::Stdio::null());
    });
    client.serve(TokioChildProcess::new(cmd).unwrap()).await.expect("initialize over stdio")
}

async fn call(c: &Session, name: &str, args: Value) -> rmcp::model::CallToolResult {
    let params =
        rmcp::model::CallToolRequestParams::new(name.to_string()).with_arguments(args.as_object().unwrap().clone());
    c.call_tool(params).await.unwrap_or_else(|e| panic!("{name}: {e}"))
}

async fn read(c: &Session, uri: &str) -> Result<ResourceContents, String> {
    c.read_resource(ReadResourceRequestParams::new(uri))
        .await
        .map(|mut r| r.contents.remove(0))
        .map_err(|e| e.to_string())
}

async fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn setup() -> Setup {
    let s = Setup::new(false, false);
    let mut config = std::fs::read_to_string(s.config()).unwrap();
    config += "skills:\n  path: skills\n  container_path: /mnt/skills\n";
    std::fs::write(s.config(), config).unwrap();
    let skill = s.dir.path().join("skills/public/demo-skill");
    std::fs::create_dir_all(&skill).unwrap();
    std::fs::write(
        skill.join("SKILL.md"),
        "---\nname: demo-skill\ndescription: A demo skill.\nallowed-tools: [write_file]\n---\n# Demo\nOnly write files.\n",
    )
    .unwrap();
    s
}

const PNG: &[u8] = &[0x89, b'P', b'N', b'G', 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 0x0d, 0xff, 0xfe];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outputs_and_artifacts_are_resources_and_subscribers_hear_of_changes() {
    let s = setup();
    let client = Recorder::default();
    let c = session(&s, client.clone()).await;
    // Only the skill's SKILL.md (the skills extension) before any output exists.
    let uris: Vec<String> = c.list_all_resources().await.unwrap().into_iter().map(|r| r.uri).collect();
    assert_eq!(uris, ["skill://public/demo-skill/SKILL.md"]);
    let templates = c.list_all_resource_templates().await.unwrap();
    assert_eq!(templates[0].uri_template, "toolhost:///mnt/user-data/outputs/{path}");

    let r = call(
        &c,
        "write_file",
        json!({"description": "w", "path": "/mnt/user-data/outputs/report.md", "content": "# Report\n"}),
    )
    .await;
    assert_eq!(text(&r), "OK");
    let outputs = s.data().join("threads/t1/user-data/outputs");
    std::fs::create_dir_all(outputs.join("img")).unwrap();
    std::fs::write(outputs.join("img/logo.png"), PNG).unwrap();

    // The thread's files (the skill's SKILL.md is listed after them).
    let mut listed = c.list_all_resources().await.unwrap();
    assert_eq!(listed.pop().map(|r| r.uri).as_deref(), Some("skill://public/demo-skill/SKILL.md"));
    let uris: Vec<&str> = listed.iter().map(|r| r.uri.as_str()).collect();
    assert_eq!(uris, ["toolhost:///mnt/user-data/outputs/img/logo.png", "toolhost:///mnt/user-data/outputs/report.md"]);
    assert_eq!(listed[1].mime_type.as_deref(), Some("text/markdown"));
    assert_eq!(listed[1].size, Some(9));

    match read(&c, "toolhost:///mnt/user-data/outputs/report.md").await.unwrap() {
        ResourceContents::TextResourceContents { text, mime_type, .. } => {
            assert_eq!(text, "# Report\n");
            assert_eq!(mime_type.as_deref(), Some("text/markdown"));
        }
        other => panic!("{other:?}"),
    }
    match read(&c, "toolhost:///mnt/user-data/outputs/img/logo.png").await.unwrap() {
        ResourceContents::BlobResourceContents { blob, mime_type, .. } => {
            assert_eq!(base64::engine::general_purpose::STANDARD.decode(blob).unwrap(), PNG);
            assert_eq!(mime_type.as_deref(), Some("image/png"));
        }
        other => panic!("{other:?}"),
    }

    // A subscriber hears when a tool rewrites the file, and not before.
    c.subscribe(SubscribeRequestParams::new("toolhost:///mnt/user-data/outputs/report.md")).await.unwrap();
    call(&c, "hello", json!({"name": "x"})).await;
    assert!(client.updated.lock().unwrap().is_empty(), "nothing changed yet");
    // (read-before-write: the file is read before it is rewritten)
    call(&c, "read_file", json!({"description": "r", "path": "/mnt/user-data/outputs/report.md"})).await;
    assert!(client.updated.lock().unwrap().is_empty(), "a read changes nothing");
    let r = call(
        &c,
        "write_file",
        json!({"description": "w", "path": "/mnt/user-data/outputs/report.md", "content": "# Report, longer\n"}),
    )
    .await;
    assert_eq!(text(&r), "OK");
    wait_for("resources/updated", || !client.updated.lock().unwrap().is_empty()).await;
    assert_eq!(*client.updated.lock().unwrap(), ["toolhost:///mnt/user-data/outputs/report.md"]);

    // present_files' artifacts are resources too.
    let r = call(&c, "present_files", json!({"filepaths": ["/mnt/user-data/outputs/report.md"]})).await;
    assert!(!r.is_error.unwrap_or(false), "{}", text(&r));
    let links: Vec<Value> =
        r.content.iter().map(|c| serde_json::to_value(c).unwrap()).filter(|c| c["type"] == "resource_link").collect();
    assert_eq!(links.len(), 1, "{:?}", r.content);
    assert_eq!(links[0]["uri"], "toolhost:///mnt/user-data/outputs/report.md");
    assert_eq!(links[0]["mimeType"], "text/markdown");
    // The link reads back through resources/read.
    let uri = links[0]["uri"].as_str().unwrap();
    match read(&c, uri).await.unwrap() {
        ResourceContents::TextResourceContents { text, .. } => assert_eq!(text, "# Report, longer\n"),
        other => panic!("{other:?}"),
    }
    c.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_never_leave_the_outputs() {
    let s = setup();
    let c = session(&s, Recorder::default()).await;
    call(
        &c,
        "write_file",
        json!({"description": "w", "path": "/mnt/user-data/workspace/secret.txt", "content": "WORKSPACE-SECRET"}),
    )
    .await;
    let sentinel = s.dir.path().join("sentinel.txt");
    std::fs::write(&sentinel, "HOST-SENTINEL").unwrap();
    let outputs = s.data().join("threads/t1/user-data/outputs");
    std::fs::create_dir_all(&outputs).unwrap();
    std::os::unix::fs::symlink(&sentinel, outputs.join("host.txt")).unwrap();
    std::os::unix::fs::symlink("../workspace/secret.txt", outputs.join("ws.txt")).unwrap();
    std::os::unix::fs::symlink("/etc", outputs.join("etc")).unwrap();
    rustix::fs::mknodat(
        rustix::fs::CWD,
        outputs.join("pipe"),
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o600),
        0,
    )
    .unwrap();
    let big = std::fs::File::create(outputs.join("big.txt")).unwrap();
    big.set_len(17 << 20).unwrap();

    let listed: Vec<String> = c.list_all_resources().await.unwrap().into_iter().map(|r| r.uri).collect();
    assert_eq!(
        listed,
        ["toolhost:///mnt/user-data/outputs/big.txt", "skill://public/demo-skill/SKILL.md"],
        "links and FIFOs are not resources"
    );

    for (uri, why) in [
        ("toolhost:///mnt/user-data/outputs/host.txt", ""),
        ("toolhost:///mnt/user-data/outputs/ws.txt", "leaves the thread's outputs"),
        ("toolhost:///mnt/user-data/outputs/etc/passwd", ""),
        ("toolhost:///mnt/user-data/outputs/pipe", "not a regular file"),
        ("toolhost:///mnt/user-data/outputs/big.txt", "over the 16777216-byte limit"),
        ("toolhost:///mnt/user-data/outputs/../workspace/secret.txt", ""),
        ("toolhost:///mnt/user-data/workspace/secret.txt", "Resource not found"),
        ("file:///etc/passwd", "Resource not found"),
    ] {
        let started = Instant::now();
        let r = read(&c, uri).await;
        assert!(started.elapsed() < Duration::from_secs(10), "{uri} blocked");
        let e = r.expect_err(uri);
        assert!(e.contains(why), "{uri}: {e}");
        assert!(!e.contains("HOST-SENTINEL") && !e.contains("WORKSPACE-SECRET") && !e.contains("root:"), "{e}");
    }
    assert_eq!(std::fs::read_to_string(&sentinel).unwrap(), "HOST-SENTINEL");
    // A normal read still works.
    call(&c, "write_file", json!({"description": "w", "path": "/mnt/user-data/outputs/ok.txt", "content": "fine"}))
        .await;
    match read(&c, "toolhost:///mnt/user-data/outputs/ok.txt").await.unwrap() {
        ResourceContents::TextResourceContents { text, .. } => assert_eq!(text, "fine"),
        other => panic!("{other:?}"),
    }
    c.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn skills_are_prompts_and_a_prompt_activates_its_skill() {
    let s = setup();
    let c = session(&s, Recorder::default()).await;
    let prompts = c.list_all_prompts().await.unwrap();
    assert_eq!(prompts.len(), 1);
    assert_eq!(prompts[0].name, "demo-skill");
    assert_eq!(prompts[0].description.as_deref(), Some("A demo skill."));
    let before = harness_names(&c).await;
    assert!(before.contains(&"hello".to_string()), "{before:?}");

    let p = c.get_prompt(GetPromptRequestParams::new("demo-skill")).await.unwrap();
    let body = serde_json::to_value(&p.messages[0]).unwrap();
    assert_eq!(body["role"], "user");
    assert!(body["content"]["text"].as_str().unwrap().contains("Only write files."), "{body}");
    // The skill is active now: its allowed-tools policy hides hello, as after reading SKILL.md.
    let after = harness_names(&c).await;
    assert!(!after.contains(&"hello".to_string()) && after.contains(&"write_file".to_string()), "{after:?}");

    let e = c.get_prompt(GetPromptRequestParams::new("../../etc/passwd")).await.unwrap_err().to_string();
    assert!(e.contains("Prompt not found"), "{e}");
    let r = call(&c, "write_file", json!({"description": "w", "path": "/mnt/user-data/outputs/a.txt", "content": "a"}))
        .await;
    assert_eq!(text(&r), "OK");
    c.cancel().await.unwrap();
}

/// A request of the skills extension: its result as JSON, or the error's text.
async fn skills_request(c: &Session, method: &str, params: Value) -> Result<Value, String> {
    use rmcp::model::{ClientRequest, GetSkillRequest, ListSkillsRequest, ReadResourceDirectoryRequest};
    let uri = || params["uri"].as_str().unwrap_or_default().to_string();
    let req = match method {
        "skills/list" => ClientRequest::ListSkillsRequest(ListSkillsRequest::default()),
        "skills/get" => {
            ClientRequest::GetSkillRequest(GetSkillRequest::new(rmcp::model::GetSkillRequestParams::new(uri())))
        }
        "resources/directory/read" => ClientRequest::ReadResourceDirectoryRequest(ReadResourceDirectoryRequest::new(
            rmcp::model::ReadResourceDirectoryRequestParams::new(uri()),
        )),
        other => ClientRequest::CustomRequest(rmcp::model::CustomRequest::new(other, Some(params.clone()))),
    };
    match c.send_request(req).await {
        Ok(r) => Ok(serde_json::to_value(r).unwrap()),
        Err(e) => Err(e.to_string()),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_skills_extension_serves_skill_files_and_never_follows_a_link() {
    use sha2::Digest as _;
    let s = setup();
    let skill = s.dir.path().join("skills/public/demo-skill");
    std::fs::create_dir_all(skill.join("references")).unwrap();
    std::fs::write(skill.join("references/notes.md"), "# Notes\n").unwrap();
    std::fs::write(skill.join("references/my notes.md"), "spaced").unwrap();
    std::fs::write(skill.join("logo.bin"), [0u8, 159, 146, 150]).unwrap();
    // A skill installed from a package may carry links: to a host secret, to a directory.
    let secret = s.dir.path().join("secret.txt");
    std::fs::write(&secret, "TOP-SECRET-SENTINEL").unwrap();
    std::os::unix::fs::symlink(&secret, skill.join("leak.md")).unwrap();
    std::os::unix::fs::symlink(s.dir.path(), skill.join("outside")).unwrap();
    let c = session(&s, Recorder::default()).await;
    let sha = |b: &[u8]| format!("sha256:{:x}", sha2::Sha256::digest(b));

    let listed = skills_request(&c, "skills/list", json!({})).await.unwrap();
    let entries = listed["skills"].as_array().unwrap();
    assert_eq!(entries.len(), 1, "{listed}");
    let e = &entries[0];
    assert_eq!(e["uri"], "skill://public/demo-skill/SKILL.md");
    assert_eq!(
        e["frontmatter"],
        json!({"name": "demo-skill", "description": "A demo skill.", "allowed-tools": ["write_file"]})
    );
    let md = std::fs::read(skill.join("SKILL.md")).unwrap();
    assert_eq!(
        e["resources"],
        json!([
            {"uri": "skill://public/demo-skill/SKILL.md", "digest": sha(&md), "size": md.len()},
            {"uri": "skill://public/demo-skill/logo.bin", "digest": sha(&[0, 159, 146, 150]), "size": 4},
            {"uri": "skill://public/demo-skill/references/my%20notes.md", "digest": sha(b"spaced"), "size": 6},
            {"uri": "skill://public/demo-skill/references/notes.md", "digest": sha(b"# Notes\n"), "size": 8},
        ])
    );
    assert!(listed["ttlMs"].is_u64() && listed["cacheScope"] == "private", "{listed}");
    let got = skills_request(&c, "skills/get", json!({"uri": "skill://public/demo-skill/SKILL.md"})).await.unwrap();
    assert_eq!(got["skill"], *e);
    assert!(got.get("nextCursor").is_none());

    // Files read back as listed; the binary one as a blob.
    let r = read(&c, "skill://public/demo-skill/references/notes.md").await.unwrap();
    assert!(
        matches!(&r, ResourceContents::TextResourceContents { text, mime_type, .. }
        if text == "# Notes\n" && mime_type.as_deref() == Some("text/markdown")),
        "{r:?}"
    );
    let r = read(&c, "skill://public/demo-skill/references/my%20notes.md").await.unwrap();
    assert!(matches!(&r, ResourceContents::TextResourceContents { text, .. } if text == "spaced"), "{r:?}");
    let r = read(&c, "skill://public/demo-skill/logo.bin").await.unwrap();
    assert!(matches!(&r, ResourceContents::BlobResourceContents { blob, .. } if blob == "AJ+Slg=="), "{r:?}");
    let dir =
        skills_request(&c, "resources/directory/read", json!({"uri": "skill://public/demo-skill"})).await.unwrap();
    let names: Vec<(&str, Option<&str>)> = dir["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["name"].as_str().unwrap(), r["mimeType"].as_str()))
        .collect();
    assert_eq!(
        names,
        [("SKILL.md", Some("text/markdown")), ("logo.bin", None), ("references", Some("inode/directory"))]
    );

    // Links, traversal, other skills' names and non-directories are refused, and nothing of the
    // secret comes back.
    for uri in [
        "skill://public/demo-skill/leak.md",
        "skill://public/demo-skill/outside/secret.txt",
        "skill://public/demo-skill/../../secret.txt",
        "skill://public/demo-skill/references/../../../secret.txt",
        "skill://public/demo-skill/%2E%2E/%2E%2E/secret.txt",
        "skill://public/demo-skill/references%2F..%2F..%2Fsecret.txt",
        "skill://custom/demo-skill/SKILL.md",
        "skill://public/nope/SKILL.md",
    ] {
        let e = read(&c, uri).await.unwrap_err();
        assert!(e.contains("not a served skill file") && !e.contains("TOP-SECRET"), "{uri}: {e}");
    }
    for (method, uri) in [
        ("skills/get", "skill://public/demo-skill/references/notes.md"),
        ("skills/get", "skill://public/unknown/SKILL.md"),
        ("resources/directory/read", "skill://public/demo-skill/SKILL.md"),
        ("resources/directory/read", "skill://public/demo-skill/outside"),
    ] {
        let e = skills_request(&c, method, json!({"uri": uri})).await.unwrap_err();
        assert!(e.contains("-32602") || e.contains("Invalid params") || e.contains("invalid"), "{method} {uri}: {e}");
    }
    let e = skills_request(&c, "skills/nope", json!({})).await.unwrap_err();
    assert!(e.contains("-32601"), "{e}");

    // Reading the SKILL.md activates the skill, as reading it with read_file does.
    let before = harness_names(&c).await;
    assert!(before.contains(&"hello".to_string()), "{before:?}");
    let r = read(&c, "skill://public/demo-skill/SKILL.md").await.unwrap();
    assert!(
        matches!(&r, ResourceContents::TextResourceContents { mime_type, .. } if mime_type.as_deref() == Some("text/markdown"))
    );
    let after = harness_names(&c).await;
    assert!(!after.contains(&"hello".to_string()) && after.contains(&"write_file".to_string()), "{after:?}");
    let r = call(&c, "write_file", json!({"description": "w", "path": "/mnt/user-data/outputs/a.txt", "content": "a"}))
        .await;
    assert_eq!(text(&r), "OK");
    c.cancel().await.unwrap();
}

async fn harness_names(c: &Session) -> Vec<String> {
    c.list_all_tools().await.unwrap().into_iter().map(|t| t.name.to_string()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_calls_send_log_messages_at_the_level_asked() {
    let s = setup();
    let client = Recorder::default();
    let c = session(&s, client.clone()).await;
    // No level set: no messages. The failed read's message would go out before its response,
    // so the first message that arrives after setting a level and failing again is the barrier:
    // it must be that later call's.
    call(&c, "read_file", json!({"description": "r", "path": "/mnt/user-data/workspace/none.txt"})).await;

    c.set_level(SetLevelRequestParams::new(LoggingLevel::Error)).await.unwrap();
    call(&c, "write_file", json!({"description": "w", "path": "/etc/passwd", "content": "x"})).await;
    wait_for("the write's error line", || {
        client.logs.lock().unwrap().iter().any(|l| l["data"]["tool"] == "write_file")
    })
    .await;
    let logs = client.logs.lock().unwrap().clone();
    assert_eq!(logs[0]["data"]["tool"], "write_file", "nothing logged before a level was set: {logs:?}");
    assert!(logs.iter().all(|l| l["level"] == "error"), "only errors at level error: {logs:?}");
    assert!(
        logs.iter().any(|l| l["level"] == "error" && l["data"]["tool"] == "write_file"),
        "the failed write is logged at level error: {logs:?}"
    );

    c.set_level(SetLevelRequestParams::new(LoggingLevel::Warning)).await.unwrap();
    let r = call(&c, "nope", json!({})).await;
    assert!(r.is_error.unwrap_or(false));
    wait_for("a log message", || client.logs.lock().unwrap().iter().any(|l| l["data"]["tool"] == "nope")).await;
    let logs = client.logs.lock().unwrap().clone();
    let l = logs.iter().find(|l| l["data"]["tool"] == "nope").unwrap();
    assert_eq!(l["level"], "warning");
    assert_eq!(l["data"]["kind"], "not_found");
    assert_eq!(l["data"]["thread"], "t1");
    let r = call(&c, "hello", json!({"name": "x"})).await;
    assert!(!r.is_error.unwrap_or(false));
    c.cancel().await.unwrap();
}

/// A client of each protocol revision toolhost negotiates (2025-06-18, 2025-11-25 with
/// `initialize`; 2026-07-28 as rmcp's client speaks it) lists and calls tools, reads a resource
/// and gets a prompt over stdio.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_protocol_revision_lists_calls_reads_and_prompts() {
    #[derive(Clone)]
    struct Versioned(ProtocolVersion);
    impl ClientHandler for Versioned {
        fn get_info(&self) -> ClientConfig {
            ClientConfig::new(ClientCapabilities::default(), Implementation::new("revision-test", "0.1.0"))
                .with_protocol_version(self.0.clone())
        }
    }
    for version in [ProtocolVersion::V_2025_06_18, ProtocolVersion::V_2025_11_25, ProtocolVersion::V_2026_07_28] {
        let s = setup();
        let cmd = tokio::process::Command::from(s.command(&["--thread", "t1"])).configure(|c| {
            c.stderr(std::process::Stdio::null());
        });
        let c = Versioned(version.clone())
            .serve(TokioChildProcess::new(cmd).unwrap())
            .await
            .unwrap_or_else(|e| panic!("{version}: {e}"));
        let tools: Vec<String> = c.list_all_tools().await.unwrap().into_iter().map(|t| t.name.to_string()).collect();
        assert!(tools.contains(&"hello".to_string()), "{version}: {tools:?}");
        let params = rmcp::model::CallToolRequestParams::new("write_file").with_arguments(
            json!({"description": "w", "path": "/mnt/user-data/outputs/v.txt", "content": version.to_string()})
                .as_object()
                .unwrap()
                .clone(),
        );
        let r = c.call_tool(params).await.unwrap();
        assert_eq!(text(&r), "OK", "{version}");
        let read = c.read_resource(ReadResourceRequestParams::new("toolhost:///mnt/user-data/outputs/v.txt")).await;
        match read.unwrap_or_else(|e| panic!("{version}: {e}")).contents.remove(0) {
            ResourceContents::TextResourceContents { text, .. } => assert_eq!(text, version.to_string()),
            other => panic!("{version}: {other:?}"),
        }
        let p = c.get_prompt(GetPromptRequestParams::new("demo-skill")).await.unwrap();
        assert!(serde_json::to_string(&p.messages).unwrap().contains("Only write files."), "{version}");
        c.cancel().await.unwrap();
    }
}

/// Without elicitation, ask_clarification answers DeerFlow's question text and marks the result
/// `_meta["toolhost/end_run"]` so the client pauses for its user.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clarification_without_elicitation_marks_the_result_to_pause() {
    let s = setup();
    let c = session(&s, Recorder::default()).await;
    let r =
        call(&c, "ask_clarification", json!({"question": "Which colour?", "clarification_type": "missing_info"})).await;
    assert!(text(&r).contains("Which colour?"), "{}", text(&r));
    let meta = serde_json::to_value(&r).unwrap()["_meta"].clone();
    assert_eq!(meta["toolhost/end_run"], true, "{meta}");
    let r = call(&c, "hello", json!({"name": "x"})).await;
    assert!(serde_json::to_value(&r).unwrap()["_meta"].get("toolhost/end_run").is_none());
    c.cancel().await.unwrap();
}
