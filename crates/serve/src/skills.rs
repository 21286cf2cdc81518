//! The MCP skills extension (SEP-2640, `io.modelcontextprotocol/skills`): the enabled skills as
//! `skills/list` and `skills/get` entries, their files as `skill://` resources
//! (`resources/read`, `resources/directory/read`), each SKILL.md also in `resources/list`.
//!
//! A skill is `skill://<category>/<name>/SKILL.md` (DeerFlow's category — public, custom, … —
//! then the skill's name, so the last segment before `SKILL.md` is the frontmatter's `name` as
//! the extension requires); its other files follow its directory's layout below that. The tree
//! is walked and read through [`DirHandle`]: below the skill's directory no symlink is followed
//! and special files are skipped, so a skill installed from a package cannot point a client at a
//! host file. An entry's `resources` lists every regular file with its sha256 and size; a skill
//! over the extension's limits (512 files, 16 MiB) is listed with `"resources": "dynamic"`.
//! Reading a SKILL.md this way activates the skill in the session's thread, as reading it with
//! `read_file` (or through its prompt) does.

use base64::Engine as _;
use percent_encoding::{percent_decode_str, utf8_percent_encode, AsciiSet, CONTROLS};
use rmcp::model::{
    CacheScope, GetSkillResult, ListSkillsResult, ReadResourceDirectoryResult, Resource, ResourceContents,
};
use serde_json::{json, Map, Value};
use toolhost_core::threadfs::{DirHandle, EntryKind};
use toolhost_skills::{Skill, SkillRegistry};

/// The URI scheme of skill files.
pub const SCHEME: &str = "skill://";
/// A skill with more files than this is served as `"resources": "dynamic"` (the extension's
/// SHOULD NOT).
pub const MAX_FILES: usize = 512;
/// Nor one whose files add up to more than this.
pub const MAX_TOTAL_BYTES: u64 = 16 << 20;
/// Directories deeper than this are not walked.
const DEPTH_MAX: usize = 16;
/// The largest SKILL.md read for its frontmatter.
const SKILL_MD_MAX_BYTES: u64 = 1 << 20;
/// How long a client may keep a listing (SEP-2549): skills change only when installed or
/// toggled, but a client should see that within a minute.
const TTL_MS: u64 = 60_000;

/// What a file name cannot hold literally in a URI path segment: RFC 3986's excluded ASCII, the
/// delimiters that would end the segment or the path (`/`, `?`, `#`), and `%` itself.
const SEGMENT: &AsciiSet = &CONTROLS
    .add(b' ')
    .add(b'"')
    .add(b'<')
    .add(b'>')
    .add(b'\\')
    .add(b'^')
    .add(b'`')
    .add(b'{')
    .add(b'|')
    .add(b'}')
    .add(b'/')
    .add(b'?')
    .add(b'#')
    .add(b'%');

/// A skill-relative path (`a/b c.md`) as URI path segments (`a/b%20c.md`).
fn encode_path(path: &str) -> String {
    path.split('/').map(|seg| utf8_percent_encode(seg, SEGMENT).to_string()).collect::<Vec<_>>().join("/")
}

/// Why a skill request failed: `-32602` for what the client named wrong, the rest internal.
#[derive(Debug)]
pub enum SkillError {
    /// Not a skill URI this server serves (`-32602`).
    Unknown(String),
    /// A file that exists but cannot be served (too large, unreadable).
    Unreadable(String),
}

impl std::fmt::Display for SkillError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Unknown(m) | Self::Unreadable(m) => f.write_str(m),
        }
    }
}

/// Whether `name` follows the Agent Skills naming rules: 1–64 lowercase letters, digits and
/// single hyphens, neither first nor last.
pub fn valid_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !name.starts_with('-')
        && !name.ends_with('-')
        && !name.contains("--")
}

/// The skills served: enabled ones whose name is valid (others are left out with a log line).
fn served(registry: &SkillRegistry) -> impl Iterator<Item = &Skill> {
    registry.skills.iter().filter(|s| {
        let ok = s.enabled && valid_name(s.name());
        if s.enabled && !ok {
            tracing::debug!(skill = %s.name(), "skill name breaks the Agent Skills naming rules: not in skills/list");
        }
        ok
    })
}

/// `skill://<category>/<name>` (no trailing slash).
fn base_uri(skill: &Skill) -> String {
    format!("{SCHEME}{}/{}", skill.category.as_str(), skill.name())
}

/// The URI of a skill's SKILL.md.
pub fn skill_md_uri(skill: &Skill) -> String {
    format!("{}/SKILL.md", base_uri(skill))
}

fn open_root(skill: &Skill, registry: &SkillRegistry) -> Result<DirHandle, SkillError> {
    DirHandle::open_config_path(&skill.skill_dir, &skill.container_path(&registry.container_path))
        .map_err(|e| SkillError::Unreadable(format!("cannot open skill {}: {e}", skill.name())))
}

/// The frontmatter of a SKILL.md text as JSON (`None` without a valid YAML block): the block
/// between the leading `---` lines, BOM ignored, read as YAML.
pub fn frontmatter(text: &str) -> Option<Map<String, Value>> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let rest = text.strip_prefix("---\n").or_else(|| text.strip_prefix("---\r\n"))?;
    let mut offset = 0;
    for line in rest.split_inclusive('\n') {
        let bare = line.trim_end_matches(['\n', '\r']);
        if bare.starts_with("---") && bare[3..].chars().all(|c| c == ' ' || c == '\t') {
            let yaml = &rest[..offset];
            return serde_yaml::from_str::<Value>(yaml).ok()?.as_object().cloned();
        }
        offset += line.len();
    }
    None
}

/// Every regular file below `dir` (`prefix` is its path from the skill's root), as `(path,
/// sha256, size)`; `None` once past [`MAX_FILES`] or [`MAX_TOTAL_BYTES`].
fn walk(
    dir: &DirHandle,
    prefix: &str,
    depth: usize,
    out: &mut Vec<(String, String, u64)>,
    total: &mut u64,
) -> Option<()> {
    let entries = match dir.entries() {
        Ok(e) => e,
        Err(e) => {
            tracing::warn!("skills: cannot list {}: {e}", dir.vpath);
            return Some(());
        }
    };
    for e in entries {
        let path = if prefix.is_empty() { e.name.clone() } else { format!("{prefix}/{}", e.name) };
        match e.kind {
            EntryKind::File => {
                if out.len() >= MAX_FILES || *total + e.len > MAX_TOTAL_BYTES {
                    return None;
                }
                let file = match dir.open_file(&e.name) {
                    Ok(f) => f,
                    Err(err) => {
                        tracing::warn!("skills: cannot open {path}: {err}");
                        continue;
                    }
                };
                let len = file.len;
                match file.digest_capped(MAX_TOTAL_BYTES - *total) {
                    Ok(d) => {
                        *total += len;
                        out.push((path, d.sha256, len));
                    }
                    Err(_) => return None,
                }
            }
            EntryKind::Dir if depth < DEPTH_MAX => {
                if let Ok(sub) = dir.subdir(&e.name) {
                    walk(&sub, &path, depth + 1, out, total)?;
                }
            }
            // Links are never entered nor listed; FIFOs, sockets and devices are not files.
            _ => {}
        }
    }
    Some(())
}

/// A skill's entry: `uri`, `frontmatter` (its SKILL.md's, as JSON) and `resources`.
fn entry(skill: &Skill, registry: &SkillRegistry) -> Result<rmcp::model::Skill, SkillError> {
    let root = open_root(skill, registry)?;
    let md = root
        .open_file("SKILL.md")
        .and_then(|f| f.read_capped(SKILL_MD_MAX_BYTES))
        .map_err(|e| SkillError::Unreadable(format!("cannot read SKILL.md of {}: {e}", skill.name())))?;
    let text = String::from_utf8_lossy(&md);
    let fm = frontmatter(&text)
        .ok_or_else(|| SkillError::Unreadable(format!("SKILL.md of {} has no YAML frontmatter", skill.name())))?;
    let base = base_uri(skill);
    let mut files = Vec::new();
    let resources = match walk(&root, "", 0, &mut files, &mut 0) {
        Some(()) => Value::Array(
            files
                .into_iter()
                .map(|(path, sha, size)| {
                    json!({"uri": format!("{base}/{}", encode_path(&path)), "digest": format!("sha256:{sha}"), "size": size})
                })
                .collect(),
        ),
        None => Value::String("dynamic".into()),
    };
    let entry = json!({"uri": skill_md_uri(skill), "frontmatter": fm, "resources": resources});
    serde_json::from_value(entry)
        .map_err(|e| SkillError::Unreadable(format!("SKILL.md of {} is not a valid skill entry: {e}", skill.name())))
}

/// `skills/list`: every served skill's entry, on one page.
pub fn list(registry: Option<&SkillRegistry>) -> ListSkillsResult {
    let skills = match registry {
        None => Vec::new(),
        // One skill the extension's rules reject is left out, never the whole listing.
        Some(r) => served(r)
            .filter_map(|s| {
                match entry(s, r).and_then(|e| match e.validate() {
                    Ok(()) => Ok(e),
                    Err(v) => Err(SkillError::Unreadable(v.to_string())),
                }) {
                    Ok(e) => Some(e),
                    Err(e) => {
                        tracing::warn!("skills/list leaves out {}: {e}", s.name());
                        None
                    }
                }
            })
            .collect(),
    };
    let mut r = ListSkillsResult::with_all_items(skills);
    r.ttl_ms = Some(TTL_MS);
    r.cache_scope = Some(CacheScope::Private);
    r
}

/// The served skill and the path below its directory that `uri` names (`""` for the skill's
/// directory itself).
fn resolve<'r>(registry: &'r SkillRegistry, uri: &str) -> Option<(&'r Skill, Vec<String>)> {
    let rest = uri.strip_prefix(SCHEME)?;
    let mut parts = rest.split('/');
    let (category, name) = (parts.next()?, parts.next()?);
    let skill = served(registry).find(|s| s.category.as_str() == category && s.name() == name)?;
    // Each segment percent-decoded (a name may carry a space, `%2F` never becomes a `/`).
    let path: Vec<String> =
        parts.map(|p| percent_decode_str(p).decode_utf8().map(|s| s.into_owned())).collect::<Result<_, _>>().ok()?;
    // `skill://c/n/` is the directory; anything else must be plain components.
    let path = if path == [""] { Vec::new() } else { path };
    if path.iter().any(|p| p.is_empty() || p == "." || p == ".." || p.contains('/') || p.contains('\0')) {
        return None;
    }
    Some((skill, path))
}

/// `skills/get {uri}`: the entry of the skill whose SKILL.md `uri` names.
pub fn get(registry: Option<&SkillRegistry>, uri: &str) -> Result<GetSkillResult, SkillError> {
    let unknown = || SkillError::Unknown(format!("unknown skill: {uri} (skills/list names the served skills)"));
    let registry = registry.ok_or_else(unknown)?;
    let (skill, path) = resolve(registry, uri).ok_or_else(unknown)?;
    if path != ["SKILL.md"] {
        return Err(unknown());
    }
    Ok(GetSkillResult::new(entry(skill, registry)?).with_ttl_ms(TTL_MS).with_cache_scope(CacheScope::Private))
}

/// The directory `path` below the skill's root, no link followed.
fn open_dir(skill: &Skill, registry: &SkillRegistry, path: &[String], uri: &str) -> Result<DirHandle, SkillError> {
    let mut dir = open_root(skill, registry)?;
    for p in path {
        dir = dir.subdir(p).map_err(|_| SkillError::Unknown(format!("not a skill directory: {uri}")))?;
    }
    Ok(dir)
}

/// `resources/read` of a skill file: text as text, anything else base64, capped at 16 MiB.
/// Returns whether it is a SKILL.md (the caller activates the skill in the thread) and the
/// container path `read_file` knows it by.
pub fn read(registry: Option<&SkillRegistry>, uri: &str) -> Result<(ResourceContents, Option<String>), SkillError> {
    let unknown = || SkillError::Unknown(format!("not a served skill file: {uri}"));
    let registry = registry.ok_or_else(unknown)?;
    let (skill, path) = resolve(registry, uri).ok_or_else(unknown)?;
    let (file, dirs) = path.split_last().ok_or_else(unknown)?;
    let dir = open_dir(skill, registry, dirs, uri).map_err(|_| unknown())?;
    let bytes = dir
        .open_file(file)
        .map_err(|_| unknown())?
        .read_capped(MAX_TOTAL_BYTES)
        .map_err(|e| SkillError::Unreadable(format!("cannot read {uri}: {e}")))?;
    let is_skill_md = path == ["SKILL.md"];
    let mime = if is_skill_md { Some("text/markdown") } else { super::resources::mime_of(file) };
    let contents = match String::from_utf8(bytes) {
        Ok(text) => {
            let mut c = ResourceContents::text(text, uri.to_string());
            if let ResourceContents::TextResourceContents { mime_type, .. } = &mut c {
                *mime_type = Some(mime.unwrap_or("text/plain").to_string());
            }
            c
        }
        Err(e) => ResourceContents::BlobResourceContents {
            uri: uri.to_string(),
            mime_type: Some(mime.unwrap_or("application/octet-stream").to_string()),
            blob: base64::engine::general_purpose::STANDARD.encode(e.as_bytes()),
            meta: None,
        },
    };
    Ok((contents, is_skill_md.then(|| skill.container_file_path(&registry.container_path))))
}

/// `resources/directory/read {uri}`: the direct children of a skill directory, directories
/// marked `inode/directory`; links and special files are not shown.
pub fn read_directory(registry: Option<&SkillRegistry>, uri: &str) -> Result<ReadResourceDirectoryResult, SkillError> {
    let not_dir = || SkillError::Unknown(format!("not a skill directory: {uri}"));
    let registry = registry.ok_or_else(not_dir)?;
    let (skill, path) = resolve(registry, uri).ok_or_else(not_dir)?;
    let dir = open_dir(skill, registry, &path, uri)?;
    let base = uri.trim_end_matches('/');
    let entries = dir.entries().map_err(|e| SkillError::Unreadable(format!("cannot list {uri}: {e}")))?;
    let resources: Vec<Resource> = entries
        .into_iter()
        .filter_map(|e| {
            let mut r = Resource::new(format!("{base}/{}", encode_path(&e.name)), e.name.clone());
            match e.kind {
                EntryKind::Dir => r.mime_type = Some(rmcp::model::DIRECTORY_MIME_TYPE.into()),
                EntryKind::File => {
                    let mime =
                        if e.name == "SKILL.md" { Some("text/markdown") } else { super::resources::mime_of(&e.name) };
                    r.mime_type = mime.map(str::to_string);
                    r.size = Some(e.len);
                }
                // Links are not shown (nor entered); special files are not resources.
                _ => return None,
            }
            Some(r)
        })
        .collect();
    Ok(ReadResourceDirectoryResult::with_all_items(resources))
}

/// Each served skill's SKILL.md, for `resources/list`: named and described by its frontmatter.
pub fn resources(registry: Option<&SkillRegistry>) -> Vec<Resource> {
    let Some(registry) = registry else { return Vec::new() };
    served(registry)
        .map(|s| {
            let mut r = Resource::new(skill_md_uri(s), s.name().to_string());
            r.description = Some(s.meta.description.clone());
            r.mime_type = Some("text/markdown".into());
            r
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_the_agent_skills_rules() {
        for ok in ["a", "deep-research", "x1-y2", &"a".repeat(64)] {
            assert!(valid_name(ok), "{ok}");
        }
        for bad in ["", "-a", "a-", "a--b", "Deep", "a_b", "a.b", &"a".repeat(65)] {
            assert!(!valid_name(bad), "{bad}");
        }
    }

    #[test]
    fn file_names_are_percent_encoded_per_segment() {
        assert_eq!(encode_path("references/my notes.md"), "references/my%20notes.md");
        assert_eq!(encode_path("a?b#c%d.md"), "a%3Fb%23c%25d.md");
        assert_eq!(encode_path("ü.md"), "%C3%BC.md");
    }

    #[test]
    fn frontmatter_is_the_leading_yaml_block() {
        let fm =
            frontmatter("\u{feff}---\nname: demo\ndescription: A demo.\nmetadata:\n  n: 3\n---\n# Body\n").unwrap();
        assert_eq!(Value::Object(fm), json!({"name": "demo", "description": "A demo.", "metadata": {"n": 3}}));
        assert!(frontmatter("---\r\nname: x\r\n---   \r\nbody").is_some());
        assert!(frontmatter("# no frontmatter\n").is_none());
        assert!(frontmatter("---\nname: [unclosed\n---\n").is_none());
        assert!(frontmatter("---\n- a list\n---\n").is_none());
    }
}
