//! Helpers of the host-bash tests: a thread in a temporary data dir, a call, and process checks.

#![allow(dead_code)]

use std::path::Path;
use std::sync::Arc;

use serde_json::json;
use toolhost_core::{CallContext, Status, ThreadFs, ThreadState, Tool};
use toolhost_hostbash::{confinement_status, BashConfig, BashTool, ConfinementStatus, Environment};

/// Whether Landlock confines commands here. Only where the kernel itself lacks it is that a
/// visible skip; any other reason fails the test.
pub fn landlock() -> bool {
    match confinement_status() {
        ConfinementStatus::Active { .. } => true,
        ConfinementStatus::Unavailable { reason } => {
            assert!(
                reason.contains("does not implement") || reason.contains("disabled"),
                "Landlock should be available here: {reason}"
            );
            eprintln!("SKIPPED: the kernel offers no Landlock: {reason}");
            false
        }
    }
}

/// A thread `id` under `data`, its directories created.
pub fn ctx(data: &Path, id: &str) -> CallContext {
    let fs = ThreadFs::open(data, id).expect("thread fs");
    fs.ensure_tool_dirs().expect("thread dirs");
    CallContext::new(Arc::new(fs), "call-1", Arc::new(ThreadState::default()))
}

/// The host environment a test's tool sees: this process's (as under the CLI) plus `vars`.
/// Tests hand variables over here, never with `set_var` (tests run in parallel and spawn).
pub fn host_env<V: AsRef<std::ffi::OsStr>>(vars: &[(&str, V)]) -> Environment {
    vars.iter().fold(Environment::from_process(), |env, (k, v)| env.with(*k, v.as_ref().to_string_lossy()))
}

/// A host-bash tool that is allowed to run, with `config` applied over the defaults (the host
/// environment: this process's).
pub fn tool(config: impl FnOnce(&mut BashConfig)) -> BashTool {
    let mut c = BashConfig { allow_host_bash: true, host_env: Environment::from_process(), ..BashConfig::default() };
    config(&mut c);
    BashTool::new(c)
}

/// Call `bash` with `command`; the text and status of the result.
pub async fn run(tool: &BashTool, ctx: &CallContext, command: &str) -> (String, Status) {
    let out = tool.call(ctx, json!({"description": "test", "command": command})).await;
    (out.text_content(), out.status)
}

/// Whether `pid` runs (a zombie waiting for a reaper does not).
pub fn running(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| s.rsplit_once(") ").map(|(_, rest)| !rest.starts_with('Z') && !rest.starts_with('X')))
        .unwrap_or(false)
}

/// Pids of running processes whose command line contains `marker`.
pub fn processes_with(marker: &str) -> Vec<i32> {
    let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .map(|c| String::from_utf8_lossy(&c).replace('\0', " ").contains(marker))
                .unwrap_or(false)
        })
        .filter(|pid| running(*pid))
        .collect()
}
