//! The skills directory: where skills live (`public/`, `integrations/<provider>/`, `custom/`,
//! legacy), discovery of SKILL.md packages, enabled state (extensions_config for public skills,
//! `_skill_states.json` for the rest), and the disabled-skill gate of the file tools (spec §2.1).

use std::collections::{BTreeMap, HashMap};
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::frontmatter::{parse_skill_md, SkillMeta};
pub use crate::states::{read_skill_states, PublicSkillStates};

pub const SKILL_MD_FILE: &str = "SKILL.md";
pub const DEFAULT_SKILLS_CONTAINER_PATH: &str = "/mnt/skills";

/// Where a skill comes from; the name is also its directory under the container path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SkillCategory {
    Public,
    Custom,
    Legacy,
    Integrations,
}

impl SkillCategory {
    pub fn as_str(self) -> &'static str {
        match self {
            SkillCategory::Public => "public",
            SkillCategory::Custom => "custom",
            SkillCategory::Legacy => "legacy",
            SkillCategory::Integrations => "integrations",
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum SkillsError {
    #[error("cannot read skill states file {path}: {source}")]
    StatesIo { path: PathBuf, source: io::Error },
    #[error("invalid skill states file {path}: {reason}")]
    StatesInvalid { path: PathBuf, reason: String },
    #[error("public skill states are unavailable: {0}")]
    PublicStatesUnavailable(String),
}

/// Host directories of the skills tree. DeerFlow's per-user layout collapses to one user here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkillsLayout {
    /// `<root>/public`, `<root>/integrations` live here.
    pub root: PathBuf,
    /// Where the model sees the tree (`skills.container_path`, default `/mnt/skills`).
    pub container_path: String,
    /// Editable custom skills (`/mnt/skills/custom`).
    pub custom_root: PathBuf,
    /// Read-only shared custom skills shown as `legacy` while `custom_root` holds no skill.
    pub legacy_root: Option<PathBuf>,
    pub integrations_root: PathBuf,
    /// Enabled state of custom, legacy and integration skills.
    pub states_file: PathBuf,
}

impl SkillsLayout {
    /// The single-tree layout: `<root>/{public,custom,integrations}` and
    /// `<root>/_skill_states.json`.
    pub fn new(root: impl Into<PathBuf>) -> Self {
        let root = root.into();
        Self {
            container_path: DEFAULT_SKILLS_CONTAINER_PATH.to_string(),
            custom_root: root.join("custom"),
            legacy_root: None,
            integrations_root: root.join("integrations"),
            states_file: root.join("_skill_states.json"),
            root,
        }
    }

    /// DeerFlow's per-user layout: custom skills in `user_skills_dir/custom`, states in
    /// `user_skills_dir/_skill_states.json`, and the global `<root>/custom` shown as legacy.
    pub fn with_user_dir(mut self, user_skills_dir: impl Into<PathBuf>) -> Self {
        let dir = user_skills_dir.into();
        self.legacy_root = Some(self.root.join("custom"));
        self.custom_root = dir.join("custom");
        self.states_file = dir.join("_skill_states.json");
        self
    }

    pub fn with_container_path(mut self, container_path: impl Into<String>) -> Self {
        self.container_path = container_path.into().trim_end_matches('/').to_string();
        self
    }

    pub fn public_root(&self) -> PathBuf {
        self.root.join("public")
    }

    /// `custom/.history/<name>.jsonl`
    pub fn history_file(&self, name: &str) -> PathBuf {
        self.custom_root.join(".history").join(format!("{name}.jsonl"))
    }
}

/// One discovered skill.
#[derive(Debug, Clone, PartialEq)]
pub struct Skill {
    pub meta: SkillMeta,
    pub category: SkillCategory,
    /// From the category root to the skill directory, `/`-separated (`""` for the root itself).
    pub relative_path: String,
    pub skill_dir: PathBuf,
    pub enabled: bool,
}

impl Skill {
    pub fn name(&self) -> &str {
        &self.meta.name
    }

    pub fn allowed_tools(&self) -> Option<&[String]> {
        self.meta.allowed_tools.as_deref()
    }

    /// `/mnt/skills/{category}/{relative_path}`
    pub fn container_path(&self, container_root: &str) -> String {
        let base = format!("{container_root}/{}", self.category.as_str());
        if self.relative_path.is_empty() {
            base
        } else {
            format!("{base}/{}", self.relative_path)
        }
    }

    /// `/mnt/skills/{category}/{relative_path}/SKILL.md`
    pub fn container_file_path(&self, container_root: &str) -> String {
        format!("{}/{SKILL_MD_FILE}", self.container_path(container_root))
    }
}

/// The skills known at one moment, sorted by name; a later category shadows an earlier skill of
/// the same name (public, integrations, custom, legacy), as in DeerFlow.
#[derive(Debug, Clone, PartialEq)]
pub struct SkillRegistry {
    pub container_path: String,
    pub skills: Vec<Skill>,
}

impl SkillRegistry {
    pub fn get(&self, name: &str) -> Option<&Skill> {
        self.skills.iter().find(|s| s.meta.name == name)
    }

    /// The skill whose SKILL.md is at `container_file` (compared after `posixpath.normpath`).
    pub fn by_container_file(&self, container_file: &str) -> Option<&Skill> {
        let wanted = normpath(container_file);
        self.skills.iter().find(|s| normpath(&s.container_file_path(&self.container_path)) == wanted)
    }
}

impl SkillRegistry {
    /// The `skill_context` entry to record when a read tool (`read_file`, `read`, `view`,
    /// `cat`) successfully read a skill's SKILL.md, so the skill becomes policy-active; `None`
    /// for any other path. `loaded_at` is the host's integer stamp (the reducer keeps ints).
    pub fn skill_context_entry(&self, read_path: &str, loaded_at: i64) -> Option<Value> {
        let skill = self.by_container_file(read_path)?;
        Some(serde_json::json!({
            "name": skill.meta.name,
            "path": read_path,
            "description": skill.meta.description,
            "loaded_at": loaded_at,
        }))
    }
}

/// Reads the skills tree. Cheap to clone; holds only the layout, so every call sees the
/// current files (DeerFlow re-reads on every check so a toggle applies at once).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkillStore {
    layout: SkillsLayout,
}

impl SkillStore {
    pub fn new(layout: SkillsLayout) -> Self {
        Self { layout }
    }

    pub fn layout(&self) -> &SkillsLayout {
        &self.layout
    }

    /// Every SKILL.md package of every category, in discovery order.
    fn discover(&self) -> Vec<(SkillCategory, PathBuf, PathBuf)> {
        let mut out = Vec::new();
        let l = &self.layout;
        walk_packages(&l.public_root(), SkillCategory::Public, &mut out);
        walk_packages(&l.integrations_root, SkillCategory::Integrations, &mut out);
        let before = out.len();
        walk_packages(&l.custom_root, SkillCategory::Custom, &mut out);
        let has_custom = out.len() > before;
        if let Some(legacy) = &l.legacy_root {
            // The user's own directory shadows the shared one once it holds a skill.
            if !has_custom && legacy != &l.custom_root {
                walk_packages(legacy, SkillCategory::Legacy, &mut out);
            }
        }
        out
    }

    /// Discover, parse (unparsable skills are skipped with a log) and merge enabled state.
    /// Fails when an enabled state cannot be determined, so policy callers fail closed.
    pub fn load_registry(&self, public: &PublicSkillStates) -> Result<SkillRegistry, SkillsError> {
        let states = read_skill_states(&self.layout.states_file)?;
        let mut by_name: BTreeMap<String, Skill> = BTreeMap::new();
        for (category, category_root, skill_md) in self.discover() {
            let text = match fs::read_to_string(&skill_md) {
                Ok(t) => t,
                Err(e) => {
                    tracing::warn!(path = %skill_md.display(), "cannot read SKILL.md: {e}");
                    continue;
                }
            };
            let meta = match parse_skill_md(&text) {
                Ok(m) => m,
                Err(e) => {
                    tracing::warn!(path = %skill_md.display(), "skipping skill: {e}");
                    continue;
                }
            };
            let skill_dir = skill_md.parent().map(Path::to_path_buf).unwrap_or_default();
            let relative_path = relative_posix(&category_root, &skill_dir);
            let enabled = match category {
                SkillCategory::Public => public.is_enabled(&meta.name)?,
                // Per-user state ANDed with the global config, so a global disable survives an
                // absent per-user entry.
                _ => {
                    states.get(&meta.name).copied().unwrap_or(true)
                        && match public {
                            PublicSkillStates::Loaded(m) => m.get(&meta.name).copied().unwrap_or(true),
                            PublicSkillStates::Unavailable(r) => {
                                return Err(SkillsError::PublicStatesUnavailable(r.clone()))
                            }
                        }
                }
            };
            by_name.insert(meta.name.clone(), Skill { meta, category, relative_path, skill_dir, enabled });
        }
        Ok(SkillRegistry {
            container_path: self.layout.container_path.clone(),
            skills: by_name.into_values().collect(),
        })
    }

    fn is_skills_path(&self, path: &str) -> bool {
        let prefix = &self.layout.container_path;
        path == prefix || path.strip_prefix(prefix.as_str()).is_some_and(|rest| rest.starts_with('/'))
    }

    fn relative<'a>(&self, path: &'a str) -> &'a str {
        path.get(self.layout.container_path.len()..).unwrap_or_default().trim_start_matches('/')
    }

    /// `_extract_skill_name_from_skills_path`: the skill a virtual path belongs to, if any.
    pub fn skill_name_of_path(&self, path: &str) -> Option<String> {
        if !self.is_skills_path(path) {
            return None;
        }
        let parts: Vec<&str> = self.relative(path).split('/').filter(|p| !p.is_empty()).collect();
        let is_cat = |p: &str| matches!(p, "public" | "custom" | "legacy");
        match parts.as_slice() {
            [] => None,
            [cat, name, ..] if is_cat(cat) => Some((*name).to_string()),
            ["integrations", _, name, ..] => Some((*name).to_string()),
            [cat] if is_cat(cat) || *cat == "integrations" => None,
            ["integrations", _] => None,
            [name, ..] => Some((*name).to_string()),
        }
    }

    /// `_is_disabled_skill_path`: public skills by extensions config, the others by
    /// `_skill_states.json`; a path outside any skill is never disabled; an undeterminable
    /// state is disabled (fail closed).
    pub fn is_disabled_path(&self, public: &PublicSkillStates, path: &str) -> bool {
        let Some(name) = self.skill_name_of_path(path) else { return false };
        match self.disabled_state(public, path, &name) {
            Ok(disabled) => disabled,
            Err(e) => {
                tracing::warn!("failed to determine enabled state of skill {name:?}, denying access: {e}");
                true
            }
        }
    }

    fn disabled_state(&self, public: &PublicSkillStates, path: &str, name: &str) -> Result<bool, SkillsError> {
        let category = match self.relative(path).split('/').next().unwrap_or_default() {
            "public" => SkillCategory::Public,
            "custom" => SkillCategory::Custom,
            "legacy" => SkillCategory::Legacy,
            "integrations" => SkillCategory::Integrations,
            // Direct `/mnt/skills/<name>/…`: the registry says which skill that is.
            _ => match self.load_registry(public)?.get(name) {
                None => return Ok(false),
                Some(skill) => skill.category,
            },
        };
        if category == SkillCategory::Public {
            return Ok(!public.is_enabled(name)?);
        }
        Ok(!read_skill_states(&self.layout.states_file)?.get(name).copied().unwrap_or(true))
    }

    /// DeerFlow's refusal for a path inside a disabled skill, or `None` when access is allowed.
    pub fn disabled_path_error(&self, public: &PublicSkillStates, path: &str) -> Option<String> {
        if !self.is_disabled_path(public, path) {
            return None;
        }
        let name = self.skill_name_of_path(path).unwrap_or_else(|| "unknown".to_string());
        Some(disabled_skill_message(&name))
    }

    /// `_drop_disabled_skill_paths`: keep the paths that are not inside a disabled skill
    /// (`ls`/`glob`/`grep` results). One verdict per (category, skill).
    pub fn drop_disabled_paths(&self, public: &PublicSkillStates, paths: Vec<String>) -> Vec<String> {
        let mut verdicts: HashMap<(String, String), bool> = HashMap::new();
        paths
            .into_iter()
            .filter(|path| {
                let Some(name) = self.skill_name_of_path(path) else { return true };
                let lead = self.relative(path).split('/').next().unwrap_or_default().to_string();
                !*verdicts.entry((lead, name)).or_insert_with(|| self.is_disabled_path(public, path))
            })
            .collect()
    }
}

/// `Error: Skill '{name}' is disabled. …` — what `read_file`, `ls`, `glob`, `grep` answer.
pub fn disabled_skill_message(name: &str) -> String {
    format!(
        "Error: Skill '{name}' is disabled. Access to its files is blocked. Enable the skill in settings before using it."
    )
}

/// Directories never searched for packages: hidden ones, `.history`, eval support data.
fn skip_dir(name: &str) -> bool {
    name.starts_with('.') || name == "evals" || name == "fixtures"
}

/// `os.walk(followlinks=True)` over a category root in sorted order: a directory holding
/// SKILL.md is a package boundary (nested SKILL.md files are its resources), and a link back to
/// a directory on the current branch is not followed again.
fn walk_packages(root: &Path, category: SkillCategory, out: &mut Vec<(SkillCategory, PathBuf, PathBuf)>) {
    if !root.is_dir() {
        return;
    }
    let mut ancestors: Vec<PathBuf> = Vec::new();
    walk_dir(root, root, category, &mut ancestors, out);
}

fn walk_dir(
    root: &Path,
    dir: &Path,
    category: SkillCategory,
    ancestors: &mut Vec<PathBuf>,
    out: &mut Vec<(SkillCategory, PathBuf, PathBuf)>,
) {
    let Ok(real) = dir.canonicalize() else { return };
    if ancestors.contains(&real) {
        return;
    }
    let skill_md = dir.join(SKILL_MD_FILE);
    if skill_md.is_file() {
        out.push((category, root.to_path_buf(), skill_md));
        return;
    }
    let Ok(entries) = fs::read_dir(dir) else { return };
    let mut subdirs: Vec<(String, PathBuf)> = entries
        .filter_map(Result::ok)
        .filter(|e| e.path().is_dir())
        .filter_map(|e| e.file_name().into_string().ok().map(|n| (n, e.path())))
        .filter(|(n, _)| !skip_dir(n))
        .collect();
    subdirs.sort();
    ancestors.push(real);
    for (_, sub) in subdirs {
        walk_dir(root, &sub, category, ancestors, out);
    }
    ancestors.pop();
}

fn relative_posix(base: &Path, path: &Path) -> String {
    let rel = path.strip_prefix(base).unwrap_or(path);
    rel.components().map(|c| c.as_os_str().to_string_lossy().into_owned()).collect::<Vec<_>>().join("/")
}

/// `posixpath.normpath`: collapse `//`, `.` and `..` lexically.
pub fn normpath(path: &str) -> String {
    if path.is_empty() {
        return ".".to_string();
    }
    let absolute = path.starts_with('/');
    // POSIX keeps exactly two leading slashes; DeerFlow's paths never start that way.
    let double = path.starts_with("//") && !path.starts_with("///");
    let mut parts: Vec<&str> = Vec::new();
    for seg in path.split('/') {
        match seg {
            "" | "." => {}
            ".." => {
                if parts.last().is_some_and(|p| *p != "..") {
                    parts.pop();
                } else if !absolute {
                    parts.push("..");
                }
            }
            s => parts.push(s),
        }
    }
    let body = parts.join("/");
    match (absolute, double) {
        (true, true) => format!("//{body}"),
        (true, false) => format!("/{body}"),
        (false, _) if body.is_empty() => ".".to_string(),
        (false, _) => body,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(path: &Path, text: &str) {
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, text).unwrap();
    }

    fn skill(name: &str, extra: &str) -> String {
        format!("---\nname: {name}\ndescription: {name} skill\n{extra}---\nbody\n")
    }

    fn tree() -> (tempfile::TempDir, SkillStore) {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        write(&root.join("public/alpha/SKILL.md"), &skill("alpha", "allowed-tools: [bash]\n"));
        write(&root.join("public/team/beta/SKILL.md"), &skill("beta", ""));
        // Nested SKILL.md inside a package and eval fixtures are not skills.
        write(&root.join("public/alpha/evals/fixtures/x/SKILL.md"), &skill("fixture-x", ""));
        write(&root.join("public/evals/fixtures/y/SKILL.md"), &skill("fixture-y", ""));
        write(&root.join("public/.hidden/SKILL.md"), &skill("hidden", ""));
        write(&root.join("public/broken/SKILL.md"), "---\nname: broken\n---\n");
        write(&root.join("custom/mine/SKILL.md"), &skill("mine", "allowed-tools: []\n"));
        write(&root.join("integrations/lark/lark-doc/SKILL.md"), &skill("lark-doc", ""));
        let store = SkillStore::new(SkillsLayout::new(root));
        (dir, store)
    }

    #[test]
    fn discovers_packages_with_categories_and_container_paths() {
        let (_d, store) = tree();
        let reg = store.load_registry(&PublicSkillStates::default()).unwrap();
        let names: Vec<&str> = reg.skills.iter().map(|s| s.name()).collect();
        assert_eq!(names, ["alpha", "beta", "lark-doc", "mine"]);
        let paths: Vec<String> = reg.skills.iter().map(|s| s.container_file_path("/mnt/skills")).collect();
        assert_eq!(
            paths,
            [
                "/mnt/skills/public/alpha/SKILL.md",
                "/mnt/skills/public/team/beta/SKILL.md",
                "/mnt/skills/integrations/lark/lark-doc/SKILL.md",
                "/mnt/skills/custom/mine/SKILL.md",
            ]
        );
        assert_eq!(reg.by_container_file("/mnt/skills/public//alpha/./SKILL.md").map(Skill::name), Some("alpha"));
        assert!(reg.skills.iter().all(|s| s.enabled));
        assert_eq!(
            reg.skill_context_entry("/mnt/skills/custom/mine/SKILL.md", 7),
            Some(
                serde_json::json!({"name": "mine", "path": "/mnt/skills/custom/mine/SKILL.md", "description": "mine skill", "loaded_at": 7})
            )
        );
        assert_eq!(reg.skill_context_entry("/mnt/skills/custom/mine/other.md", 7), None);
    }

    #[test]
    fn enabled_state_sources() {
        let (d, store) = tree();
        let public = PublicSkillStates::from_extensions_skills(Some(&serde_json::json!({"alpha": {"enabled": false}})));
        write(&d.path().join("_skill_states.json"), r#"{"mine": {"enabled": false}}"#);
        let reg = store.load_registry(&public).unwrap();
        assert!(!reg.get("alpha").unwrap().enabled);
        assert!(!reg.get("mine").unwrap().enabled);
        assert!(reg.get("beta").unwrap().enabled);

        assert!(store.is_disabled_path(&public, "/mnt/skills/public/alpha/SKILL.md"));
        assert!(store.is_disabled_path(&public, "/mnt/skills/custom/mine/references/a.md"));
        assert!(store.is_disabled_path(&public, "/mnt/skills/alpha/SKILL.md"), "direct layout uses the registry");
        assert!(!store.is_disabled_path(&public, "/mnt/skills/public/beta/SKILL.md"));
        assert!(!store.is_disabled_path(&public, "/mnt/skills/public"));
        assert!(!store.is_disabled_path(&public, "/mnt/skills/nosuch/x"));
        assert!(!store.is_disabled_path(&public, "/mnt/user-data/workspace/alpha"));
        assert_eq!(
            store.disabled_path_error(&public, "/mnt/skills/public/alpha/").as_deref(),
            Some("Error: Skill 'alpha' is disabled. Access to its files is blocked. Enable the skill in settings before using it.")
        );
        let kept = store.drop_disabled_paths(
            &public,
            vec![
                "/mnt/skills/public/".into(),
                "/mnt/skills/public/alpha/".into(),
                "/mnt/skills/public/alpha/SKILL.md".into(),
                "/mnt/skills/public/beta/SKILL.md".into(),
                "/mnt/skills/custom/mine/SKILL.md".into(),
                "/mnt/user-data/workspace/x".into(),
            ],
        );
        assert_eq!(kept, ["/mnt/skills/public/", "/mnt/skills/public/beta/SKILL.md", "/mnt/user-data/workspace/x"]);
    }

    #[test]
    fn unreadable_state_fails_closed() {
        let (d, store) = tree();
        let public = PublicSkillStates::default();
        write(&d.path().join("_skill_states.json"), "{not json");
        assert!(store.is_disabled_path(&public, "/mnt/skills/custom/mine/SKILL.md"));
        assert!(store.is_disabled_path(&public, "/mnt/skills/integrations/lark/lark-doc/SKILL.md"));
        assert!(matches!(store.load_registry(&public), Err(SkillsError::StatesInvalid { .. })));
        // Public skills do not depend on the per-user file.
        assert!(!store.is_disabled_path(&public, "/mnt/skills/public/beta/SKILL.md"));
        write(&d.path().join("_skill_states.json"), r#"{"mine": {"enabled": "no"}}"#);
        assert!(store.is_disabled_path(&public, "/mnt/skills/custom/mine/SKILL.md"));
        write(&d.path().join("_skill_states.json"), "[]");
        assert!(store.is_disabled_path(&public, "/mnt/skills/custom/mine/SKILL.md"));

        let lax = PublicSkillStates::from_extensions_skills(Some(
            &serde_json::json!({"a": {"enabled": "No"}, "b": {"enabled": 1}, "c": {}}),
        ));
        assert_eq!(
            lax,
            PublicSkillStates::Loaded([("a".into(), false), ("b".into(), true), ("c".into(), true)].into())
        );
        let unavailable =
            PublicSkillStates::from_extensions_skills(Some(&serde_json::json!({"alpha": {"enabled": 2}})));
        // Not a boolean even to pydantic's lax reading (a test moved here from toolhost-mcp, which
        // keeps the section as written).
        assert!(matches!(
            PublicSkillStates::from_extensions_skills(Some(&serde_json::json!({"x": {"enabled": "maybe"}}))),
            PublicSkillStates::Unavailable(why) if why.contains("enabled")
        ));
        assert!(matches!(unavailable, PublicSkillStates::Unavailable(_)));
        assert!(store.is_disabled_path(&unavailable, "/mnt/skills/public/beta/SKILL.md"));
    }

    #[test]
    fn user_layout_shows_global_custom_as_legacy_until_user_has_skills() {
        let (d, _) = tree();
        let user = d.path().join("users/u1/skills");
        let store = SkillStore::new(SkillsLayout::new(d.path()).with_user_dir(&user));
        let reg = store.load_registry(&PublicSkillStates::default()).unwrap();
        assert_eq!(reg.get("mine").unwrap().category, SkillCategory::Legacy);
        write(&user.join("custom/own/SKILL.md"), &skill("own", ""));
        let reg = store.load_registry(&PublicSkillStates::default()).unwrap();
        assert!(reg.get("mine").is_none());
        assert_eq!(reg.get("own").unwrap().category, SkillCategory::Custom);
    }

    #[test]
    fn skill_names_from_paths() {
        let store = SkillStore::new(SkillsLayout::new("/x"));
        let cases = [
            ("/mnt/skills", None),
            ("/mnt/skills/", None),
            ("/mnt/skills/custom", None),
            ("/mnt/skills/public/", None),
            ("/mnt/skills/public/bootstrap/", Some("bootstrap")),
            ("/mnt/skills/legacy/a/references/x", Some("a")),
            ("/mnt/skills/integrations/lark-cli", None),
            ("/mnt/skills/integrations/lark-cli/lark-doc/SKILL.md", Some("lark-doc")),
            ("/mnt/skills/my-skill/SKILL.md", Some("my-skill")),
            ("/mnt/skillsx/a", None),
        ];
        for (path, want) in cases {
            assert_eq!(store.skill_name_of_path(path).as_deref(), want, "{path}");
        }
    }

    #[test]
    fn normpath_matches_posixpath() {
        for (input, want) in [("/a//b/./c/../d", "/a/b/d"), ("/..", "/"), ("a/../..", ".."), ("", "."), ("/a/", "/a")] {
            assert_eq!(normpath(input), want, "{input}");
        }
    }
}
