//! How every program toolhost starts besides host bash — the stdio MCP servers of
//! `extensions_config.json` and the `acp_agents` (custom subagents with `acp:` included) — is
//! started: confined under `toolhost_confine` with the grants of `toolhost.mcp_servers.<name>`
//! or `toolhost.acp_agents.<name>` (defaults when there is none), as a plain subprocess only when
//! that entry says `confine: false`, and not at all when confinement is unavailable and nobody
//! chose to go without it. Each program's home is `<data>/processes/<kind>/<name>`, apart from
//! threads, keys and the cache.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use indexmap::IndexMap;
use toolhost_confine::process::{
    Confiner, Grants, Launch, LaunchPolicy, LaunchRequest, Network, ProcessKind, ProcessSpec, DEFAULT_MAX_FILE_BYTES,
};
use toolhost_confine::{BashUser, TreeLimits};

use crate::config::{AppConfig, ProcessGrantConfig, ProcessNetwork};
use crate::options::Environment;

/// The launch policy of one host: a [`Launch`] per program, decided once and kept (one proxy
/// and one self-test per program).
pub struct ChildPolicy {
    data_dir: PathBuf,
    mcp: IndexMap<String, ProcessGrantConfig>,
    acp: IndexMap<String, ProcessGrantConfig>,
    user: Option<BashUser>,
    path_env: Option<String>,
    decided: Mutex<HashMap<(Kind, String), Decided>>,
}

/// A program's launch and what it gets, line by line.
type Decided = (Launch, Vec<String>);

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Kind {
    Mcp,
    Acp,
}

impl Kind {
    fn of(kind: ProcessKind) -> Self {
        match kind {
            ProcessKind::McpServer => Kind::Mcp,
            ProcessKind::AcpAgent => Kind::Acp,
        }
    }

    fn section(self) -> &'static str {
        match self {
            Kind::Mcp => "mcp_servers",
            Kind::Acp => "acp_agents",
        }
    }

    fn label(self, name: &str) -> String {
        match self {
            Kind::Mcp => format!("MCP server '{name}'"),
            Kind::Acp => format!("ACP agent '{name}'"),
        }
    }
}

/// How one program will be started, for `toolhost tools --explain` and `check`.
#[derive(Debug, Clone)]
pub struct ChildReport {
    /// `MCP server 'github'`.
    pub label: String,
    /// `confined`, `UNCONFINED (confine: false)` or `refused: …`.
    pub verdict: String,
    /// What it gets, line by line (confined only).
    pub lines: Vec<String>,
    /// Whether it will not be started.
    pub refused: bool,
    /// Whether it runs without confinement by choice.
    pub unconfined: bool,
}

impl ChildPolicy {
    /// The policy of a host opened on `config` with its data in `data_dir`.
    pub fn new(config: &AppConfig, data_dir: &Path, env: &Environment) -> Arc<Self> {
        let data_dir = std::path::absolute(data_dir).unwrap_or_else(|_| data_dir.to_path_buf());
        Arc::new(Self {
            data_dir,
            mcp: config.toolhost.mcp_servers.clone(),
            acp: config.toolhost.acp_agents.clone(),
            user: config.sandbox.as_ref().and_then(|s| s.bash_user).map(|u| u.0),
            path_env: env.get("PATH"),
            decided: Mutex::new(HashMap::new()),
        })
    }

    /// The policy as the MCP and ACP crates take it.
    pub fn as_launch_policy(self: &Arc<Self>) -> LaunchPolicy {
        let me = self.clone();
        Arc::new(move |req: &LaunchRequest<'_>| me.launch(req))
    }

    /// The launch of one program (decided on first use, then kept).
    pub fn launch(&self, req: &LaunchRequest<'_>) -> Launch {
        self.decide(req).0
    }

    /// What each program will get, for the given requests.
    pub fn report(&self, req: &LaunchRequest<'_>) -> ChildReport {
        let kind = Kind::of(req.kind);
        let (launch, lines) = self.decide(req);
        let label = kind.label(req.name);
        match launch {
            Launch::Confined(_) => {
                ChildReport { label, verdict: "confined".into(), lines, refused: false, unconfined: false }
            }
            Launch::Unconfined => ChildReport {
                label,
                verdict: format!(
                    "UNCONFINED (toolhost.{}.{}.confine: false): runs with toolhost's own privileges, files and network",
                    kind.section(),
                    req.name
                ),
                lines,
                refused: false,
                unconfined: true,
            },
            Launch::Refused(why) => {
                ChildReport { label, verdict: format!("not started: {why}"), lines, refused: true, unconfined: false }
            }
        }
    }

    fn decide(&self, req: &LaunchRequest<'_>) -> (Launch, Vec<String>) {
        let kind = Kind::of(req.kind);
        let key = (kind, req.name.to_string());
        if let Some(d) = self.decided.lock().unwrap_or_else(|p| p.into_inner()).get(&key) {
            return d.clone();
        }
        let decided = self.build(kind, req);
        self.decided.lock().unwrap_or_else(|p| p.into_inner()).entry(key).or_insert(decided).clone()
    }

    fn build(&self, kind: Kind, req: &LaunchRequest<'_>) -> (Launch, Vec<String>) {
        let grants_of = match kind {
            Kind::Mcp => &self.mcp,
            Kind::Acp => &self.acp,
        };
        let config = grants_of.get(req.name).cloned().unwrap_or_default();
        let setting = format!("toolhost.{}.{}", kind.section(), req.name);
        if !config.confine {
            tracing::warn!("{}: {setting}.confine is false: it runs UNCONFINED", kind.label(req.name));
            return (Launch::Unconfined, Vec::new());
        }
        let refuse = |why: String| {
            (
                Launch::Refused(format!(
                    "{why}; it is not started (set {setting}.confine: false to run it unconfined, with toolhost's own \
                     rights)"
                )),
                Vec::new(),
            )
        };
        let grants = match self.grants(&config) {
            Ok(g) => g,
            Err(why) => return refuse(format!("{setting}: {why}")),
        };
        let spec = ProcessSpec {
            label: kind.label(req.name),
            setting: setting.clone(),
            command: req.command.to_string(),
            args: req.args.to_vec(),
            path_env: self.path_env.clone(),
            env: config.env.iter().map(|e| e.0.clone()).collect(),
            home: self.data_dir.join("processes").join(kind.section()).join(dir_name(req.name)),
            grants,
            user: self.user,
        };
        match Confiner::new(spec) {
            Ok(confiner) => {
                let lines = confiner.explain();
                (Launch::Confined(Arc::new(confiner)), lines)
            }
            Err(e) => refuse(e.to_string()),
        }
    }

    /// The grants of one entry, refusing a path that would open toolhost's own data (threads,
    /// keys, cache) to the program.
    fn grants(&self, config: &ProcessGrantConfig) -> Result<Grants, String> {
        let defaults = Grants::default();
        let paths = |list: &[crate::config::GrantPath]| -> Result<Vec<PathBuf>, String> {
            list.iter()
                .map(|p| {
                    let path = &p.0;
                    let real = std::fs::canonicalize(path).unwrap_or_else(|_| path.clone());
                    let data = std::fs::canonicalize(&self.data_dir).unwrap_or_else(|_| self.data_dir.clone());
                    if real.starts_with(&data) || data.starts_with(&real) {
                        return Err(format!(
                            "{} overlaps toolhost's data directory {} (threads, keys, cache); grant a directory outside it",
                            path.display(),
                            data.display()
                        ));
                    }
                    Ok(path.clone())
                })
                .collect()
        };
        Ok(Grants {
            read_only: paths(&config.filesystem.read_only)?,
            read_write: paths(&config.filesystem.read_write)?,
            network: match &config.network {
                None => defaults.network,
                Some(ProcessNetwork::None) => Network::None,
                Some(ProcessNetwork::Allow(grant)) => Network::Proxy(grant.clone()),
            },
            limits: TreeLimits {
                max_processes: config.processes.or(defaults.limits.max_processes),
                memory_bytes: config.memory_mb.map(|mb| mb << 20).or(defaults.limits.memory_bytes),
            },
            max_file_bytes: config.file_size_mb.map(|mb| mb << 20).or(Some(DEFAULT_MAX_FILE_BYTES)),
        })
    }
}

/// A directory name for a configured name: its safe characters and a digest, so two names
/// never share a home.
fn dir_name(name: &str) -> String {
    use sha2::Digest;
    let safe: String = name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c } else { '_' })
        .take(48)
        .collect();
    let digest = hex::encode(&sha2::Sha256::digest(name.as_bytes())[..4]);
    format!("{safe}-{digest}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn homes_are_apart_and_never_traverse() {
        assert_ne!(dir_name("a/b"), dir_name("a_b"));
        assert!(!dir_name("../../etc").contains('/'));
        assert!(dir_name("github").starts_with("github-"));
    }
}
