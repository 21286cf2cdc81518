//! The layers assembled after the builtins: the MCP tools of `extensions_config.json` (discovered
//! in parallel, cached, refreshed on `tools/list_changed` or a config edit) and the ACP tool
//! `invoke_acp_agent`. A broken server or config never breaks assembly.

use std::path::PathBuf;
use std::sync::Arc;

use async_trait::async_trait;
use toolhost_core::Tool;

use super::{Extensions, LayerKind, ToolLayer};
use crate::config::AppConfig;
use crate::options::Environment;

/// The MCP layer: the servers of `extensions_config.json` at `path`, discovered in parallel and
/// cached; `$VAR`s in the file are looked up in `env`.
pub fn mcp_layer(
    path: PathBuf,
    env: Environment,
    launch: toolhost_confine::process::LaunchPolicy,
) -> Arc<dyn ToolLayer> {
    let manager = toolhost_mcp::McpManager::from_file(path.clone(), env).with_launch_policy(launch);
    Arc::new(McpLayer { manager: Arc::new(manager), path })
}

/// The MCP tools as an assembly layer. A broken config or server never breaks assembly.
pub struct McpLayer {
    manager: Arc<toolhost_mcp::McpManager>,
    path: PathBuf,
}

#[async_trait]
impl ToolLayer for McpLayer {
    fn kind(&self) -> LayerKind {
        LayerKind::Mcp
    }

    async fn generation(&self) -> u64 {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        // The manager's counter moves on list_changed and rebuilds; the file's identity tells a
        // config edit apart without reading it (the manager re-reads and hashes it on change).
        self.manager.subscribe().borrow().hash(&mut h);
        if let Ok(meta) = std::fs::metadata(&self.path) {
            meta.len().hash(&mut h);
            meta.modified().ok().hash(&mut h);
        }
        h.finish()
    }

    async fn warnings(&self) -> Vec<String> {
        match self.manager.tools().await {
            Ok(set) => set.warnings,
            Err(e) => vec![format!("MCP tools unavailable: {e}")],
        }
    }

    async fn routing(&self) -> Vec<(String, toolhost_deferred::RoutingMeta)> {
        let Ok(set) = self.manager.tools().await else { return Vec::new() };
        set.tools
            .iter()
            .filter_map(|t| {
                let r = t.routing()?;
                let mode = match r.mode {
                    toolhost_mcp::RoutingMode::Prefer => "prefer",
                    toolhost_mcp::RoutingMode::Off => "off",
                };
                let meta = toolhost_deferred::RoutingMeta {
                    mode: mode.into(),
                    priority: r.priority,
                    keywords: r.keywords.clone(),
                };
                Some((t.spec().name.clone(), meta))
            })
            .collect()
    }

    async fn tools(&self) -> Vec<Arc<dyn Tool>> {
        match self.manager.tools().await {
            Ok(set) => {
                for w in &set.warnings {
                    tracing::warn!("mcp: {w}");
                }
                set.tools.into_iter().map(|t| t as Arc<dyn Tool>).collect()
            }
            Err(e) => {
                tracing::warn!("mcp: no MCP tools: {e}");
                Vec::new()
            }
        }
    }
}

/// The ACP layer: `invoke_acp_agent`, appended last when `acp_agents` is non-empty (spec §1
/// step 6). The enabled MCP servers of `extensions_config.json` are forwarded to the agent.
pub fn acp_layer(
    config: &AppConfig,
    extensions: &Extensions,
    env: &Environment,
    launch: toolhost_confine::process::LaunchPolicy,
) -> Option<Arc<dyn ToolLayer>> {
    if config.acp_agents.is_empty() {
        return None;
    }
    let servers = extensions
        .enabled_servers()
        .into_iter()
        .map(|(name, s)| toolhost_acp::AcpMcpServerConfig {
            name: name.clone(),
            transport: s.transport_type.clone(),
            command: s.command.clone(),
            args: s.args.clone(),
            env: s.env.clone(),
            url: s.url.clone(),
            headers: s.headers.clone(),
        })
        .collect();
    let tool = toolhost_acp::InvokeAcpAgentTool::new(config.acp_agents.clone())
        .with_mcp_servers(servers)
        .with_env(env.clone())
        .with_launch_policy(launch);
    let warnings = tool.unset_variables();
    Some(Arc::new(AcpLayer { tool: Arc::new(tool), warnings }))
}

/// The ACP tool as an assembly layer.
pub struct AcpLayer {
    tool: Arc<dyn Tool>,
    /// Agents' `$VAR`s the environment does not set.
    warnings: Vec<String>,
}

#[async_trait]
impl ToolLayer for AcpLayer {
    fn kind(&self) -> LayerKind {
        LayerKind::Acp
    }

    async fn warnings(&self) -> Vec<String> {
        self.warnings.clone()
    }

    async fn tools(&self) -> Vec<Arc<dyn Tool>> {
        vec![self.tool.clone()]
    }
}
