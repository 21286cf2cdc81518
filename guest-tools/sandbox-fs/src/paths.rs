//! Virtual paths: DeerFlow's path policy (`validate_local_tool_path`), the disabled-skill gate, and
//! symlink resolution done by hand in virtual space, so a link that leaves the sandbox is detected
//! from its text and never followed. Inside the component a virtual path IS the filesystem path
//! (the host preopens the roots there); native tests map the roots to a temp dir via [`HostMap`].

use std::path::PathBuf;

use thiserror::Error;

use crate::settings::SandboxSettings;

pub use toolhost_vpath::{has_traversal, under, RootKind, ACP_WORKSPACE, USER_DATA};
use toolhost_vpath::{ResolveError, Root};

/// DeerFlow's skill category roots under the skills container path (`SkillProjectionPaths` in
/// `deerflow/skills/projection.py`). DeerFlow's skill projection creates every one of them and
/// mounts each at `{skills}/{category}`, so to a DeerFlow tool they always exist.
pub const SKILL_CATEGORIES: [&str; 4] = ["custom", "integrations", "legacy", "public"];

/// Why a path was refused. The Display strings are DeerFlow's `PermissionError` messages; the
/// tools turn every one of them into their own generic "Permission denied …" line, as DeerFlow does.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum PathError {
    #[error("Access denied: path traversal detected")]
    Traversal,
    #[error("Write access to skills path is not allowed: {0}")]
    SkillsWrite(String),
    #[error("Write access to ACP workspace is not allowed: {0}")]
    AcpWrite(String),
    #[error("Write access to read-only mount is not allowed: {0}")]
    ReadOnlyMount(String),
    #[error("Only paths under /mnt/user-data/, {0}/, /mnt/acp-workspace/, or configured mount paths are allowed")]
    NotAllowed(String),
    /// The path (after following links) leaves the area it started in.
    #[error("Access denied: path traversal detected")]
    Escapes,
    /// A symlink loop.
    #[error("Too many levels of symbolic links")]
    Loop,
}

/// Where virtual paths live on the filesystem this code sees. In the component the mapping is the
/// identity. Native tests replace each root prefix with a directory of a temp tree.
#[derive(Debug, Clone, Default)]
pub struct HostMap {
    prefixes: Vec<(String, PathBuf)>,
}

impl HostMap {
    /// The identity: virtual paths are the real paths (the WASI preopens).
    pub fn identity() -> Self {
        Self::default()
    }

    /// Map each virtual root prefix to a host directory (native tests only).
    pub fn with_prefixes(mut prefixes: Vec<(String, PathBuf)>) -> Self {
        prefixes.sort_by_key(|(v, _)| std::cmp::Reverse(v.len()));
        Self { prefixes }
    }

    /// The filesystem path of a virtual path.
    pub fn real(&self, vpath: &str) -> PathBuf {
        for (v, host) in &self.prefixes {
            if vpath == v {
                return host.clone();
            }
            if let Some(rest) = vpath.strip_prefix(v.as_str()).and_then(|r| r.strip_prefix('/')) {
                return host.join(rest);
            }
        }
        PathBuf::from(vpath)
    }
}

/// The sandbox's virtual layout for one call.
#[derive(Debug, Clone)]
pub struct Layout {
    roots: Vec<Root>,
    skills: String,
    mounts: Vec<(String, bool)>,
    disabled_skills: Vec<String>,
    pub host: HostMap,
}

impl Layout {
    pub fn new(settings: &SandboxSettings, host: HostMap) -> Self {
        let skills = settings.skills_container_path.clone();
        let mut roots = toolhost_vpath::user_data_roots().to_vec();
        roots.push(Root::new(&skills, RootKind::Skills));
        roots.push(Root::new(ACP_WORKSPACE, RootKind::Acp));
        // DeerFlow's `_RESERVED_CONTAINER_PREFIXES`: no mount may shadow these.
        let reserved: Vec<String> = SKILL_CATEGORIES
            .iter()
            .map(|c| format!("{skills}/{c}"))
            .chain([ACP_WORKSPACE.to_string(), USER_DATA.to_string()])
            .collect();
        let mut mounts = Vec::new();
        for m in &settings.mounts {
            let cp = m.container_path.trim_end_matches('/');
            // A root mount would swallow every path; DeerFlow's provider rejects relative ones.
            if cp.is_empty() || !cp.starts_with('/') || has_traversal(cp) {
                continue;
            }
            if reserved.iter().any(|r| under(cp, r)) {
                continue;
            }
            mounts.push((cp.to_string(), m.read_only));
            roots.push(Root::new(cp, RootKind::Mount));
        }
        Self { roots, skills, mounts, disabled_skills: settings.disabled_skills.clone(), host }
    }

    /// The skills container path (`/mnt/skills`).
    pub fn skills_root(&self) -> &str {
        &self.skills
    }

    /// The virtual roots of DeerFlow's skill categories (`/mnt/skills/custom`, …).
    pub fn skill_category_roots(&self) -> impl Iterator<Item = String> + '_ {
        SKILL_CATEGORIES.iter().map(|c| format!("{}/{c}", self.skills))
    }

    fn is_skills_path(&self, path: &str) -> bool {
        path == self.skills || path.starts_with(&format!("{}/", self.skills))
    }

    fn mount_for(&self, path: &str) -> Option<&(String, bool)> {
        self.mounts
            .iter()
            .filter(|(cp, _)| path == cp || path.starts_with(&format!("{cp}/")))
            .max_by_key(|(cp, _)| cp.len())
    }

    /// DeerFlow's `validate_local_tool_path` on the raw requested path.
    pub fn validate(&self, path: &str, read_only: bool) -> Result<(), PathError> {
        if has_traversal(path) {
            return Err(PathError::Traversal);
        }
        if self.is_skills_path(path) {
            return if read_only { Ok(()) } else { Err(PathError::SkillsWrite(path.to_string())) };
        }
        if path == ACP_WORKSPACE || path.starts_with(&format!("{ACP_WORKSPACE}/")) {
            return if read_only { Ok(()) } else { Err(PathError::AcpWrite(path.to_string())) };
        }
        if path.starts_with(&format!("{USER_DATA}/")) {
            return Ok(());
        }
        if let Some((_, ro)) = self.mount_for(path) {
            if *ro && !read_only {
                return Err(PathError::ReadOnlyMount(path.to_string()));
            }
            return Ok(());
        }
        Err(PathError::NotAllowed(self.skills.clone()))
    }

    /// Resolve symlinks of a validated virtual path with the shared resolver
    /// ([`toolhost_vpath::resolve`]): links are read, never followed by the OS, and a path that
    /// leaves its area is refused before anything outside is touched.
    pub fn resolve(&self, path: &str) -> Result<String, PathError> {
        toolhost_vpath::resolve(&self.roots, path, |vpath| {
            let real = self.host.real(vpath);
            match std::fs::symlink_metadata(&real) {
                Ok(meta) if meta.file_type().is_symlink() => {
                    std::fs::read_link(&real).map(|t| Some(t.to_string_lossy().into_owned())).map_err(|_| ())
                }
                _ => Ok(None),
            }
        })
        .map_err(|e| match e {
            ResolveError::Escapes => PathError::Escapes,
            ResolveError::Loop => PathError::Loop,
        })
    }

    /// Whether a resolved virtual path lies within `root` (a resolved directory).
    pub fn within(path: &str, root: &str) -> bool {
        under(path, root)
    }

    /// The disabled skill a path belongs to, by DeerFlow's name extraction; `None` if enabled or
    /// not a skill path.
    pub fn disabled_skill(&self, path: &str) -> Option<String> {
        let hit =
            self.disabled_skills.iter().any(|d| under(path, d) || path.strip_suffix('/').is_some_and(|p| under(p, d)));
        if !hit {
            return None;
        }
        Some(self.skill_name(path).unwrap_or_else(|| "unknown".to_string()))
    }

    /// DeerFlow's `_extract_skill_name_from_skills_path`.
    pub fn skill_name(&self, path: &str) -> Option<String> {
        if !self.is_skills_path(path) {
            return None;
        }
        let rel = path[self.skills.len()..].trim_start_matches('/');
        let parts: Vec<&str> = rel.split('/').filter(|p| !p.is_empty()).collect();
        let categories = ["public", "custom", "legacy"];
        match parts.as_slice() {
            [] => None,
            [c, name, ..] if categories.contains(c) => Some((*name).to_string()),
            ["integrations", _, name, ..] => Some((*name).to_string()),
            [c] if categories.contains(c) || *c == "integrations" => None,
            ["integrations", _] => None,
            [first, ..] => Some((*first).to_string()),
        }
    }

    /// The error DeerFlow's tools print for a disabled skill.
    pub fn disabled_message(name: &str) -> String {
        format!("Error: Skill '{name}' is disabled. Access to its files is blocked. Enable the skill in settings before using it.")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout() -> Layout {
        let mut s = SandboxSettings::default();
        s.mounts.push(crate::settings::Mount { container_path: "/mnt/data".into(), read_only: true });
        s.disabled_skills.push("/mnt/skills/public/off".into());
        Layout::new(&s, HostMap::identity())
    }

    #[test]
    fn policy_messages() {
        let l = layout();
        assert_eq!(l.validate("/mnt/user-data/workspace/../x", true), Err(PathError::Traversal));
        assert_eq!(
            l.validate("/mnt/skills/public/a", false).map_err(|e| e.to_string()),
            Err("Write access to skills path is not allowed: /mnt/skills/public/a".into())
        );
        assert_eq!(
            l.validate("/mnt/acp-workspace/x", false).map_err(|e| e.to_string()),
            Err("Write access to ACP workspace is not allowed: /mnt/acp-workspace/x".into())
        );
        assert_eq!(
            l.validate("/mnt/data/x", false).map_err(|e| e.to_string()),
            Err("Write access to read-only mount is not allowed: /mnt/data/x".into())
        );
        assert!(l.validate("/mnt/data/x", true).is_ok());
        assert_eq!(
            l.validate("/etc/passwd", true).map_err(|e| e.to_string()),
            Err("Only paths under /mnt/user-data/, /mnt/skills/, /mnt/acp-workspace/, or configured mount paths are allowed"
                .into())
        );
        assert!(l.validate("/mnt/user-data", true).is_err());
        assert!(l.validate("/mnt/user-data/", true).is_ok());
    }

    #[test]
    fn bare_user_data_and_siblings_escape() {
        let l = layout();
        assert_eq!(l.resolve("/mnt/user-data/"), Err(PathError::Escapes));
        assert_eq!(l.resolve("/mnt/user-data/workspaceX"), Err(PathError::Escapes));
        assert_eq!(l.resolve("/mnt/user-data/workspace//a/./b/"), Ok("/mnt/user-data/workspace/a/b".into()));
    }

    #[test]
    fn mounts_never_shadow_a_skill_category_root() {
        let mut s = SandboxSettings::default();
        for cp in ["/mnt/skills/integrations", "/mnt/skills/legacy/x", "/mnt/tools"] {
            s.mounts.push(crate::settings::Mount { container_path: cp.into(), read_only: false });
        }
        let l = Layout::new(&s, HostMap::identity());
        assert_eq!(l.mounts, vec![("/mnt/tools".to_string(), false)]);
        assert_eq!(
            l.skill_category_roots().collect::<Vec<_>>(),
            ["/mnt/skills/custom", "/mnt/skills/integrations", "/mnt/skills/legacy", "/mnt/skills/public"]
        );
    }

    #[test]
    fn skill_names() {
        let l = layout();
        assert_eq!(l.skill_name("/mnt/skills/public/demo/SKILL.md"), Some("demo".into()));
        assert_eq!(l.skill_name("/mnt/skills/integrations/lark/doc/x"), Some("doc".into()));
        assert_eq!(l.skill_name("/mnt/skills/public"), None);
        assert_eq!(l.skill_name("/mnt/skills/mine/x"), Some("mine".into()));
        assert_eq!(l.disabled_skill("/mnt/skills/public/off/"), Some("off".into()));
        assert_eq!(l.disabled_skill("/mnt/skills/public/offline"), None);
    }
}
