//! Host bash as a config tool (`deerflow.sandbox.tools:bash_tool`): its settings from the
//! `sandbox:` section, and the start-up self-test that decides whether it is offered at all.

use std::path::PathBuf;
use std::sync::Arc;

use toolhost_core::SharedRoots;

use super::{ConfigEntryState, Extensions};
use crate::config::AppConfig;
use crate::options::Environment;

/// The host bash tool for a config entry (`deerflow.sandbox.tools:bash_tool`). Assembly's gate
/// decides whether it is offered; the tool itself refuses when host bash is not allowed.
pub fn host_bash(
    config: &AppConfig,
    shared: &SharedRoots,
    extensions: &Extensions,
    env: &Environment,
    group: &str,
) -> Arc<toolhost_hostbash::BashTool> {
    let s = config.sandbox_or_default();
    let mcp_server_args = extensions.enabled_servers().into_iter().map(|(_, srv)| srv.args.clone()).collect();
    let defaults = toolhost_hostbash::BashConfig::default();
    let cfg = toolhost_hostbash::BashConfig {
        allow_host_bash: config.is_host_bash_allowed(),
        command_timeout_secs: s.bash_command_timeout,
        output_max_chars: s.bash_output_max_chars,
        skills_host_path: shared.skills().map(|s| s.host.clone()),
        skills_container_path: config.skills.container_path.clone(),
        mounts: shared
            .mounts()
            .iter()
            .map(|m| toolhost_hostbash::HostMount {
                host_path: m.host.clone(),
                container_path: m.vpath.clone(),
                read_only: m.read_only,
            })
            .collect(),
        mcp_server_args,
        confine: s.bash_confinement,
        shell: s.bash_shell.map(PathBuf::from).unwrap_or(defaults.shell),
        user: s.bash_user.map(|u| u.0),
        env: s.bash_env.into_iter().map(|e| e.0).collect(),
        host_env: env.clone(),
        network: s.bash_network,
        max_file_bytes: s.bash_max_file_size_mb.bytes(),
        max_processes: s.bash_max_processes.or(defaults.max_processes),
        memory_bytes: s.bash_memory_mb.map(|mb| mb << 20).or(defaults.memory_bytes),
        ..defaults
    };
    Arc::new(toolhost_hostbash::BashTool::new(cfg).with_group(Some(group.to_string())))
}

/// What the host learns about a host-bash entry: what its commands get, and a warning when
/// they run unconfined.
pub struct HostBashEntry {
    pub report: Option<Vec<String>>,
    pub warning: Option<String>,
}

/// Decide whether host bash is offered: where host bash is allowed, its start-up self-test must
/// prove the confinement engages, or the tool is left out with the reason (never run
/// unconfined silently). Confinement turned off in the config is offered, with a warning.
pub fn host_bash_entry(
    config: &AppConfig,
    tool: Arc<toolhost_hostbash::BashTool>,
) -> (ConfigEntryState, HostBashEntry) {
    if !config.is_host_bash_allowed() {
        // Assembly's gate leaves it out; nothing to prove.
        return (ConfigEntryState::Ready(tool), HostBashEntry { report: None, warning: None });
    }
    let warning = (tool.config().confine == toolhost_hostbash::ConfineMode::Off).then(|| {
        "sandbox.bash_confinement is off: host bash commands run UNCONFINED, with toolhost's own privileges, every file it can reach and the open network".to_string()
    });
    if let Some(w) = &warning {
        tracing::warn!("{w}");
    }
    let state = match tool.self_test() {
        Ok(_) => ConfigEntryState::Ready(tool.clone()),
        Err(why) => ConfigEntryState::Unavailable(format!("host bash's confinement did not engage: {why}")),
    };
    (state, HostBashEntry { report: Some(tool.explain()), warning })
}
