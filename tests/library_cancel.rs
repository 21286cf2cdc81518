//! `Thread::call_with` with a `CancelSignal`, alone in its test binary: the test checks that a
//! cancelled guest stops burning CPU by reading this process's CPU time, which other tests of the
//! same binary would add to (CI runs a binary's tests side by side).

use serde_json::json;
use toolhost::{CallOptions, CancelSignal, ErrorKind, HostOptions, ToolCall, Toolhost};

#[path = "support/hostile.rs"]
#[allow(dead_code)]
mod hostile;

/// A caller's `CancelSignal` stops a component call at once, long before its 60 s timeout,
/// whether the guest computes (`spin`, alone in its turn: it runs on the caller's own thread) or
/// waits in the host (`sleep`); a signal raised before the call runs nothing. The stopped guest
/// burns no CPU afterwards, and the next call works.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_component_call_stops_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let w = hostile::hostile_wasm();
    let hostile = format!(
        "  - {{name: spin, group: hostile, use: '{w}:spin', capabilities: {{timeout_s: 60}}}}\n  - {{name: sleep, group: hostile, use: '{w}:sleep', capabilities: {{timeout_s: 60}}}}\n  - {{name: ok, group: hostile, use: '{w}:ok'}}\n",
        w = w.display()
    );
    let opts = HostOptions::from_yaml(format!("tools:\n{hostile}"), dir.path())
        .data_dir(dir.path().join("data"))
        .cache_dir(Some(dir.path().join("cache")));
    let host = Toolhost::open(opts).await.unwrap();
    let t = host.thread("cancel");
    for (tool, args) in [("spin", json!({})), ("sleep", json!({"ms": 60_000}))] {
        let cancel = CancelSignal::new();
        let raise = cancel.clone();
        tokio::spawn(async move {
            tokio::time::sleep(std::time::Duration::from_millis(300)).await;
            raise.cancel();
        });
        let start = std::time::Instant::now();
        let opts = CallOptions { cancel: Some(cancel), ..CallOptions::default() };
        let r = t.call_with(ToolCall::new(tool, args), opts).await.unwrap();
        let took = start.elapsed();
        assert!(took < std::time::Duration::from_secs(5), "{tool}: stopped after {took:?}");
        assert!(took >= std::time::Duration::from_millis(300), "{tool}: not before the signal: {took:?}");
        assert_eq!(r.error_kind(), Some(ErrorKind::Cancelled), "{tool}: {}", r.text());
        assert!(r.text().contains("CancelledError") && r.text().contains("cancelled"), "{}", r.text());
    }
    // Nothing keeps computing once the call returned: this process's CPU time stays put.
    let cpu = || {
        let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
        let fields: Vec<u64> =
            stat.rsplit(')').next().unwrap().split_whitespace().skip(11).take(2).map(|f| f.parse().unwrap()).collect();
        fields[0] + fields[1]
    };
    // A quiet half second (under 5 ticks) within 10 s, then under 10 ticks in the next 2 s: an
    // idle process spends next to nothing however loaded the machine, and a guest still spinning
    // on a loaded 2-core machine still gets a share of a core, well above that.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let before = cpu();
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
        if cpu() - before < 5 {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "still computing 10 s after the calls returned");
    }
    let before = cpu();
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    let spent = cpu() - before;
    assert!(spent < 10, "{spent} clock ticks spent in 200 while idle: a cancelled guest still runs");
    // Raised before the call: the guest never starts.
    let cancel = CancelSignal::new();
    cancel.cancel();
    let opts = CallOptions { cancel: Some(cancel), ..CallOptions::default() };
    let r = t.call_with(ToolCall::new("spin", json!({})), opts).await.unwrap();
    assert_eq!(r.error_kind(), Some(ErrorKind::Cancelled), "{}", r.text());
    let ok = t.call(ToolCall::new("ok", json!({}))).await.unwrap();
    assert_eq!((ok.error_kind(), ok.text().as_str()), (None, "ok"));
}
