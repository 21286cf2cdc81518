//! Resources per call and per thread, against real components: the precompile cache only runs
//! artifacts this install wrote under that name; one thread cannot take the instance pool (its
//! calls queue); a call cannot hold every file descriptor; a guest blocked in a host system call
//! (a FIFO with no writer) still ends at its `timeout_s`. Each hostile case ends with a normal
//! call that still works.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use toolhost::assembly::AssemblyRequest;
use toolhost::runtime::ComponentRef;
use toolhost::runtime::{exec_call, CallRequest, CapabilitySet, Runtime};
use toolhost::{HostOptions, Severity, Toolhost};

#[path = "support/hostile.rs"]
mod hostile;
use hostile::{assert_ok_still_works, call, hostile_wasm};

/// Tests that count process-wide things (threads, file descriptors, instance slots) run one at
/// a time, so the others in this binary do not blur the counts. (Each async test has its own
/// runtime; a failed test does not poison this lock.)
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn hello_wasm() -> PathBuf {
    Path::new(toolhost::bundled::GUEST_DIR).join("hello.wasm")
}

fn file_ref(path: PathBuf) -> ComponentRef {
    ComponentRef::File { path, sha256: None }
}

fn request(tool: &str, args: Value) -> CallRequest {
    CallRequest { tool_call_id: "c1".into(), ..CallRequest::new(tool, args.to_string()) }
}

/// Load hello from `rt` and greet: (compiled, the tools it lists, the greeting).
fn load_and_greet(rt: &Runtime) -> (bool, Vec<String>, String) {
    let loaded = rt.load(&file_ref(hello_wasm()), &|_| None).unwrap();
    let tools = loaded.tools.iter().map(|t| t.name.clone()).collect();
    let greeting = exec_call(rt, &loaded, &CapabilitySet::default(), &[], &request("hello", json!({"name": "A"})))
        .map(|r| r.text())
        .unwrap_or_else(|e| format!("call failed: {e}"));
    (loaded.compiled, tools, greeting)
}

fn artifacts(cache: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(cache)
        .map(|d| d.map(|e| e.unwrap().path()).filter(|p| p.extension().is_some_and(|x| x == "cwasm")).collect())
        .unwrap_or_default();
    v.sort();
    v
}

/// The artifact of the component at `wasm` in `cache` (its name starts with the sha256).
fn artifact_of(cache: &Path, wasm: &Path) -> PathBuf {
    use sha2::Digest;
    let sha = hex::encode(sha2::Sha256::digest(std::fs::read(wasm).unwrap()));
    artifacts(cache)
        .into_iter()
        .find(|p| p.file_name().unwrap().to_string_lossy().starts_with(&sha))
        .unwrap_or_else(|| panic!("no artifact for {} in {}", wasm.display(), cache.display()))
}

/// Replace `path` by a file with `bytes`, the way the cache writes (a rename; artifacts are
/// never rewritten in place).
fn replace_file(path: &Path, bytes: &[u8]) {
    let tmp = path.with_extension("planted");
    std::fs::write(&tmp, bytes).unwrap();
    std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o600)).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

fn mode(p: &Path) -> u32 {
    std::fs::symlink_metadata(p).unwrap().mode() & 0o7777
}

#[test]
fn cache_runs_only_artifacts_this_install_wrote_under_that_name() {
    let _serial = SERIAL.blocking_lock();
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    let rt = Runtime::new(Some(cache.clone())).unwrap();
    assert!(load_and_greet(&rt).0, "first load compiles");
    assert!(rt.load(&file_ref(hostile_wasm()), &|_| None).unwrap().compiled);
    assert!(rt.take_warnings().is_empty());
    drop(rt);
    // Created private: the cache and the key beside it, and each artifact.
    assert_eq!(mode(&cache), 0o700);
    assert_eq!(mode(&dir.path().join("keys")), 0o700);
    let key = dir.path().join("keys/precompile-cache.key");
    assert_eq!((mode(&key), std::fs::metadata(&key).unwrap().len()), (0o600, 32));
    assert_eq!(artifacts(&cache).len(), 2);
    for a in artifacts(&cache) {
        assert_eq!(mode(&a), 0o600, "{}", a.display());
    }

    // Positive control: a genuine artifact under its own name loads without compiling.
    let rt = Runtime::new(Some(cache.clone())).unwrap();
    assert_eq!(load_and_greet(&rt), (false, vec!["hello".to_string()], "Hello, A.".to_string()));
    assert!(!rt.load(&file_ref(hostile_wasm()), &|_| None).unwrap().compiled, "hostile's artifact is genuine too");
    assert!(rt.take_warnings().is_empty());
    drop(rt);

    let hello_artifact = artifact_of(&cache, &hello_wasm());
    let hostile_artifact = artifact_of(&cache, &hostile_wasm());
    let genuine_hello = std::fs::read(&hello_artifact).unwrap();
    let genuine_hostile = std::fs::read(&hostile_artifact).unwrap();
    // Another install's genuine artifact of hello itself: same name, another key.
    let other_install = tempfile::tempdir().unwrap();
    let other_cache = other_install.path().join("cache");
    load_and_greet(&Runtime::new(Some(other_cache.clone())).unwrap());
    let foreign_hello = std::fs::read(artifact_of(&other_cache, &hello_wasm())).unwrap();
    assert_eq!(artifact_of(&other_cache, &hello_wasm()).file_name(), hello_artifact.file_name());

    let mut flipped = genuine_hello.clone();
    let middle = flipped.len() / 2;
    flipped[middle] ^= 0x40;
    let plants: [(&str, Vec<u8>, &str); 5] = [
        ("B's genuine artifact under A's name", genuine_hostile, "integrity tag does not match"),
        ("A's artifact from another install", foreign_hello, "integrity tag does not match"),
        ("A's artifact with one byte changed", flipped, "integrity tag does not match"),
        ("A's artifact without its tag", genuine_hello[..genuine_hello.len() - 40].to_vec(), "no integrity tag"),
        ("garbage", b"\x7fELF not an artifact at all".to_vec(), "no integrity tag"),
    ];
    for (what, bytes, why) in plants {
        replace_file(&hello_artifact, &bytes);
        let rt = Runtime::new(Some(cache.clone())).unwrap();
        let (compiled, tools, greeting) = load_and_greet(&rt);
        assert!(compiled, "{what}: recompiled, not loaded");
        assert_eq!(tools, ["hello"], "{what}: A lists A's tools");
        assert_eq!(greeting, "Hello, A.", "{what}: A runs A's code");
        let warnings = rt.take_warnings();
        assert_eq!(warnings.len(), 1, "{what}: {warnings:?}");
        assert!(
            warnings[0].contains(&hello_artifact.display().to_string()) && warnings[0].contains(why),
            "{what}: {}",
            warnings[0]
        );
        drop(rt);
        // The recompiled artifact replaced the planted one: the next start loads it.
        let rt = Runtime::new(Some(cache.clone())).unwrap();
        assert!(!load_and_greet(&rt).0, "{what}: healed");
        assert!(rt.take_warnings().is_empty());
    }

    // A link in the cache is not followed, even to a genuine artifact.
    let outside = dir.path().join("elsewhere.cwasm");
    std::fs::write(&outside, &genuine_hello).unwrap();
    std::fs::remove_file(&hello_artifact).unwrap();
    std::os::unix::fs::symlink(&outside, &hello_artifact).unwrap();
    let rt = Runtime::new(Some(cache.clone())).unwrap();
    assert!(load_and_greet(&rt).0);
    assert!(rt.take_warnings()[0].contains("is a symbolic link"));
}

#[test]
fn a_cache_or_key_others_could_write_is_not_used() {
    let _serial = SERIAL.blocking_lock();
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    drop(Runtime::new(Some(cache.clone())).unwrap());
    let keys = dir.path().join("keys");
    let key = keys.join("precompile-cache.key");
    let set_mode = |p: &Path, m: u32| std::fs::set_permissions(p, std::fs::Permissions::from_mode(m)).unwrap();

    let refused = |why: &str| {
        let rt = Runtime::new(Some(cache.clone())).unwrap();
        let warnings = rt.take_warnings();
        assert!(
            warnings.len() == 1 && warnings[0].contains("not used") && warnings[0].contains(why),
            "{why}: {warnings:?}"
        );
        // Compiled in memory, and nothing was written to the refused cache.
        let before = artifacts(&cache);
        assert!(load_and_greet(&rt).0 && load_and_greet(&Runtime::new(Some(cache.clone())).unwrap()).0, "{why}");
        assert_eq!(artifacts(&cache), before, "{why}: nothing written");
    };
    set_mode(&cache, 0o770);
    refused("is writable by its group (mode 0770)");
    set_mode(&cache, 0o707);
    refused("is writable by everyone (mode 0707)");
    set_mode(&cache, 0o700);
    set_mode(&keys, 0o777);
    refused("keys is writable by everyone (mode 0777)");
    set_mode(&keys, 0o700);
    set_mode(&key, 0o640);
    refused("precompile-cache.key is readable by its group (mode 0640)");
    set_mode(&key, 0o600);

    // Owned by another user (we may run as root, so ownership is checked, not access).
    match std::os::unix::fs::chown(&cache, Some(65534), None) {
        Ok(()) => {
            refused("is owned by uid 65534");
            // SAFETY: geteuid has no preconditions.
            std::os::unix::fs::chown(&cache, Some(unsafe { libc::geteuid() }), None).unwrap();
        }
        Err(e) => eprintln!("skipped the foreign-owner case: cannot chown as this user ({e})"),
    }
    // A cache dir that is a link to a directory is not followed.
    let real = dir.path().join("real-cache");
    std::fs::create_dir(&real).unwrap();
    set_mode(&real, 0o700);
    let linked = dir.path().join("linked-cache");
    std::os::unix::fs::symlink(&real, &linked).unwrap();
    let rt = Runtime::new(Some(linked)).unwrap();
    assert!(rt.take_warnings()[0].contains("is not a directory (a link is not followed)"));

    // Positive control: the same cache, private again, is used.
    let rt = Runtime::new(Some(cache.clone())).unwrap();
    assert!(rt.take_warnings().is_empty());
    assert!(load_and_greet(&rt).0);
    assert!(!load_and_greet(&Runtime::new(Some(cache.clone())).unwrap()).0);

    // Through the host, the warning is one of its problems (what `toolhost check` prints).
    set_mode(&cache, 0o775);
    let config = dir.path().join("config.yaml");
    std::fs::write(
        &config,
        format!("tools:\n  - {{name: hello, group: g, use: \"{}:hello\"}}\n", hello_wasm().display()),
    )
    .unwrap();
    let host = Toolhost::open_blocking(
        HostOptions::new(config).data_dir(dir.path().join("data")).cache_dir(Some(cache.clone())),
    )
    .unwrap();
    let problems: Vec<&str> = host.problems().iter().map(|p| p.message.as_str()).collect();
    assert!(
        host.problems().iter().any(|p| p.severity == Severity::Warning
            && p.message.contains(&cache.display().to_string())
            && p.message.contains("writable by its group")),
        "{problems:?}"
    );
}

struct Env {
    dir: tempfile::TempDir,
    host: Arc<Toolhost>,
}

fn host_with(tools: &[(&str, &str)], extra_yaml: &str) -> Env {
    let dir = tempfile::tempdir().unwrap();
    let mut yaml = String::from("tools:\n");
    for (name, caps) in tools {
        yaml += &format!(
            "  - name: {name}\n    group: hostile\n    use: {}:{name}\n    capabilities: {caps}\n",
            hostile_wasm().display()
        );
    }
    yaml += extra_yaml;
    let config = dir.path().join("config.yaml");
    std::fs::write(&config, yaml).unwrap();
    let host = Toolhost::open_blocking(
        HostOptions::new(config).data_dir(dir.path().join("data")).cache_dir(Some(dir.path().join("cache"))),
    )
    .unwrap();
    let errors: Vec<_> = host.problems().iter().filter(|p| p.severity == Severity::Error).collect();
    assert!(errors.is_empty(), "{errors:?}");
    Env { dir, host: Arc::new(host) }
}

async fn call_in(host: &Toolhost, thread: &str, tool: &str, args: Value) -> (String, bool) {
    let r = host.call(&AssemblyRequest::default(), thread, tool, args, None).await.unwrap();
    (r.outcome.text_content(), r.outcome.is_error())
}

fn is_pool_error(text: &str) -> bool {
    text.contains("maximum concurrent")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_thread_cannot_take_the_instance_pool() {
    let _serial = SERIAL.lock().await;
    // Negative control: the same load without admission (the runtime called directly, one OS
    // thread per call) does exhaust the pool, so the host test below is not vacuous.
    let rt = Runtime::new(None).unwrap();
    let loaded = rt.load(&file_ref(hostile_wasm()), &|_| None).unwrap();
    let pool_errors = std::thread::scope(|s| {
        let handles: Vec<_> = (0..300)
            .map(|_| {
                s.spawn(|| {
                    match exec_call(
                        &rt,
                        &loaded,
                        &CapabilitySet::default(),
                        &[],
                        &request("sleep", json!({"ms": 1500})),
                    ) {
                        Ok(_) => false,
                        Err(e) => is_pool_error(&e.to_string()),
                    }
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).filter(|&pool| pool).count()
    });
    assert!(pool_errors > 0, "300 unqueued sleeping calls should exhaust the pool");
    drop((loaded, rt));

    // The default limits (64 in the host, 16 per thread).
    let env = host_with(&[("sleep", "{timeout_s: 6}"), ("ok", "{}")], "");
    let start = Instant::now();
    let sleepers: Vec<_> = (0..300)
        .map(|_| {
            let host = env.host.clone();
            tokio::spawn(async move {
                let r = call_in(&host, "busy", "sleep", json!({"ms": 4000})).await;
                (r, Instant::now())
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(500)).await;
    // Other threads are served while the busy one holds its share: each call here ends before
    // any sleeping call does.
    let mut others_done = Vec::new();
    for i in 0..5 {
        let (text, err) = call_in(&env.host, &format!("other{i}"), "ok", json!({})).await;
        assert!(!err && text == "ok", "other thread {i}: {text}");
        others_done.push(Instant::now());
    }
    let mut results = Vec::new();
    for s in sleepers {
        results.push(s.await.unwrap());
    }
    let first_sleeper_done = results.iter().map(|(_, t)| *t).min().unwrap();
    assert!(
        others_done.iter().all(|t| *t < first_sleeper_done),
        "other threads waited for the busy one ({:?} vs {:?} after start)",
        others_done.iter().map(|t| *t - start).collect::<Vec<_>>(),
        first_sleeper_done - start
    );
    let texts: Vec<&str> = results.iter().map(|((t, _), _)| t.as_str()).collect();
    assert!(
        !texts.iter().any(|t| is_pool_error(t)),
        "a call failed on the pool: {:?}",
        texts.iter().find(|t| is_pool_error(t))
    );
    let slept = texts.iter().filter(|t| **t == "slept").count();
    let queued =
        texts.iter().filter(|t| t.contains("waiting for a free slot (thread busy already runs 16 calls)")).count();
    assert!(slept >= 16, "the thread's first 16 calls ran: {slept}");
    assert_eq!(
        slept + queued + texts.iter().filter(|t| t.contains("timed out after 6s and was stopped")).count(),
        300,
        "{texts:?}"
    );
    // Unloaded, about 268 wait out their whole timeout in line (16 run, 16 more start with 2 s
    // left); on a loaded machine the spawns spread out and more batches fit, so the bound only
    // asserts that calls did queue rather than fail.
    assert!(queued >= 16, "the rest waited in line until their timeout: {queued}");
    for t in texts.iter().filter(|t| **t != "slept") {
        assert!(t.starts_with("Error: Tool 'sleep' failed with TimeoutError:"), "{t}");
    }
    assert_ok_still_works(&env.host).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_global_limit_queues_every_thread_within_its_timeout() {
    let _serial = SERIAL.lock().await;
    let env = host_with(
        &[("sleep", "{timeout_s: 20}"), ("ok", "{timeout_s: 1}"), ("counter", "{timeout_s: 20}")],
        "toolhost:\n  concurrent_calls: 2\n  concurrent_calls_per_thread: 2\n",
    );
    let sleepers_start = Instant::now();
    let sleepers: Vec<_> = ["a", "b"]
        .into_iter()
        .map(|t| {
            let host = env.host.clone();
            tokio::spawn(async move { (call_in(&host, t, "sleep", json!({"ms": 2500})).await, ()) })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(300)).await;
    // The host is full: a call with a short timeout gives up in line without running...
    let (text, err) = call_in(&env.host, "c", "ok", json!({})).await;
    assert!(err, "{text}");
    assert!(text.starts_with("Error: Tool 'ok' failed with TimeoutError:"), "{text}");
    assert!(text.contains("waiting for a free slot (the host already runs 2 calls); it did not run"), "{text}");
    // ...and a patient one runs when a slot frees, in its own fresh instance.
    let (text, err) = call_in(&env.host, "d", "counter", json!({})).await;
    let counter_done = Instant::now();
    assert!(!err && text == "call 1", "{text}");
    // No slot frees before a 2.5 s sleep ends.
    assert!(counter_done - sleepers_start >= Duration::from_millis(2500), "the patient call waited for a slot");
    for s in sleepers {
        let ((text, err), _) = s.await.unwrap();
        assert!(!err && text == "slept", "{text}");
    }
    assert_ok_still_works(&env.host).await;
}

fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

/// Runs `f` while sampling the process's open fds every millisecond; returns (f's result, the
/// highest count seen).
async fn with_fd_peak<T>(f: impl std::future::Future<Output = T>) -> (T, usize) {
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let sampler = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut peak = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                peak = peak.max(open_fds());
                std::thread::sleep(Duration::from_millis(1));
            }
            peak
        })
    };
    let out = f.await;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    (out, sampler.join().unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_cannot_hold_every_file_descriptor() {
    let _serial = SERIAL.lock().await;
    let env = host_with(&[("open_many", "{filesystem: user-data, handles: 64}"), ("ok", "{}")], "");
    let ws = env.host.thread_paths("t1").unwrap().workspace();
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::write(ws.join("f.txt"), "x").unwrap();
    // Warm up (thread dirs, state) so the baseline is what a call leaves behind.
    let (text, err) = call(&env.host, "open_many", json!({"path": "/mnt/user-data/workspace/f.txt", "count": 1})).await;
    assert!(!err && text == "held 1", "{text}");
    let baseline = open_fds();

    // Positive control: within the cap a tool opens what it needs, and the sampler sees it.
    let ((text, err), peak) = with_fd_peak(call(
        &env.host,
        "open_many",
        json!({"path": "/mnt/user-data/workspace", "count": 40, "hold_ms": 300}),
    ))
    .await;
    assert!(!err && text == "held 40", "{text}");
    assert!(peak >= baseline + 40, "the sampler sees held descriptors: peak {peak}, baseline {baseline}");

    // A tool hoarding directories or files is stopped at the cap with a clean error.
    for path in ["/mnt/user-data/workspace", "/mnt/user-data/workspace/f.txt"] {
        let ((text, err), peak) =
            with_fd_peak(call(&env.host, "open_many", json!({"path": path, "count": 100_000}))).await;
        assert!(err, "{path}: {text}");
        assert!(
            text.starts_with("Error: Tool 'open_many' failed with OSError:")
                && text.contains("held more than 64 open handles"),
            "{path}: {text}"
        );
        // Uncapped it would have opened up to the process limit (thousands); others' noise aside,
        // the peak stays near baseline + 64.
        assert!(peak < baseline + 64 + 200, "{path}: peak {peak}, baseline {baseline}");
    }
    // Everything it opened was closed with its instance.
    let after = open_fds();
    assert!(after <= baseline + 8, "fds after: {after}, baseline {baseline}");
    assert_ok_still_works(&env.host).await;
    let (text, err) = call(&env.host, "open_many", json!({"path": "/mnt/user-data/workspace/f.txt", "count": 3})).await;
    assert!(!err && text == "held 3", "{text}");
}

/// Threads of this process whose name is `name` (tokio names its workers and blocking threads
/// after the runtime).
fn threads_named(name: &str) -> usize {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .filter(|comm| comm.trim_end() == name)
        .count()
}

fn mkfifo(path: &Path) {
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo: {}", std::io::Error::last_os_error());
}

/// Whether some process holds `fifo` open for reading (or is blocked opening it): a
/// non-blocking open for writing succeeds only then (ENXIO otherwise).
fn fifo_has_reader(fifo: &Path) -> bool {
    use std::os::unix::fs::OpenOptionsExt;
    match std::fs::OpenOptions::new().write(true).custom_flags(libc::O_NONBLOCK).open(fifo) {
        Ok(_) => true,
        Err(e) if e.raw_os_error() == Some(libc::ENXIO) => false,
        Err(e) => panic!("probing {}: {e}", fifo.display()),
    }
}

#[test]
fn a_guest_blocked_opening_a_fifo_ends_at_its_timeout() {
    let _serial = SERIAL.blocking_lock();
    const RT_NAME: &str = "fifo-test-rt";
    // Not dropped if the test fails: dropping a runtime waits for its blocking threads, and a
    // failure here means one of them is blocked for good.
    let rt = std::mem::ManuallyDrop::new(
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name(RT_NAME)
            .thread_keep_alive(Duration::from_millis(200))
            .enable_all()
            .build()
            .unwrap(),
    );
    let env = host_with(&[("read", "{filesystem: user-data, timeout_s: 1}"), ("ok", "{}")], "");
    let ws = env.host.thread_paths("t1").unwrap().workspace();
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::write(ws.join("plain.txt"), "plain text").unwrap();
    let fifo = ws.join("pipe");
    mkfifo(&fifo);
    // Positive control of the probe: a reader is seen while one holds the FIFO open.
    {
        use std::os::unix::fs::OpenOptionsExt;
        let _reader = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK).open(&fifo).unwrap();
        assert!(fifo_has_reader(&fifo));
    }
    assert!(!fifo_has_reader(&fifo));

    // Run `calls` in one turn on the test runtime; the test thread waits at most `bound`.
    let run_turn = |calls: Vec<(String, Value, Option<String>)>, bound: Duration| {
        let host = env.host.clone();
        let (tx, rx) = std::sync::mpsc::channel();
        rt.spawn(async move {
            let start = Instant::now();
            let r = host.call_turn(&AssemblyRequest::default(), "t1", calls).await.unwrap();
            let _ = tx.send((r.into_iter().map(|c| c.outcome.text_content()).collect::<Vec<_>>(), start.elapsed()));
        });
        rx.recv_timeout(bound).unwrap_or_else(|_| panic!("the turn did not end within {bound:?}"))
    };
    let read_call = |path: &str| ("read".to_string(), json!({"path": path}), None);
    let settle = || {
        // Idle runtime threads leave after the keep-alive; give a loaded machine time.
        let deadline = Instant::now() + Duration::from_secs(20);
        let mut n = threads_named(RT_NAME);
        while n > 2 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
            n = threads_named(RT_NAME);
        }
        n
    };
    let (texts, _) = run_turn(vec![read_call("/mnt/user-data/workspace/plain.txt")], Duration::from_secs(60));
    assert!(texts[0].starts_with("READ 10 bytes"), "{texts:?}");
    assert_eq!(settle(), 2, "only the two workers are left when idle");

    // A lone call (runs on a worker) and a turn of two (each on a blocking thread).
    for n in [1, 2] {
        let calls = (0..n).map(|_| read_call("/mnt/user-data/workspace/pipe")).collect();
        let (texts, elapsed) = run_turn(calls, Duration::from_secs(60));
        for t in &texts {
            assert!(
                t.starts_with("Error: Tool 'read' failed with TimeoutError:") && t.contains("timed out after 1s"),
                "{t}"
            );
        }
        assert!(elapsed >= Duration::from_millis(990), "not before its timeout: {elapsed:?}");
        assert!(elapsed < Duration::from_secs(15), "ended near its 1 s timeout, not whenever: {elapsed:?}");
        assert!(!fifo_has_reader(&fifo), "no thread is left blocked opening the FIFO");
        assert_eq!(settle(), 2, "the threads that ran the calls were not leaked");
    }
    let (texts, _) = run_turn(
        vec![read_call("/mnt/user-data/workspace/plain.txt"), ("ok".into(), json!({}), None)],
        Duration::from_secs(60),
    );
    assert!(texts[0].starts_with("READ 10 bytes") && texts[1] == "ok", "{texts:?}");
    drop(env);
    std::mem::ManuallyDrop::into_inner(rt).shutdown_timeout(Duration::from_secs(5));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn config_values_out_of_range_refuse_the_tool_with_their_location() {
    let env = host_with(&[("ok", "{}")], "");
    let config = env.dir.path().join("bad.yaml");
    std::fs::write(
        &config,
        format!(
            "tools:\n  - name: ok\n    group: g\n    use: {}:ok\n    capabilities:\n      timeout_s: 1e300\n",
            hostile_wasm().display()
        ),
    )
    .unwrap();
    let mut opts = HostOptions::new(&config);
    opts.data_dir = env.dir.path().join("data");
    let err = match Toolhost::open_blocking(opts) {
        Ok(_) => panic!("a config with timeout_s: 1e300 opened"),
        Err(e) => e.to_string(),
    };
    assert!(
        err.contains("bad.yaml:6:18: tools[0].capabilities.timeout_s: timeout_s must be a number of seconds above 0"),
        "{err}"
    );
    // An embedder building capabilities in code gets an error for the tool, not a default.
    let caps = toolhost::runtime::CapabilitiesConfig { timeout_s: Some(f64::INFINITY), ..Default::default() };
    let err = CapabilitySet::resolve(&caps, &|_| None, &mut Vec::new()).unwrap_err();
    assert!(err.contains("timeout_s must be"), "{err}");
    assert_ok_still_works(&env.host).await;
}
