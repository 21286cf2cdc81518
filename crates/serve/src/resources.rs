//! MCP resources and prompts of `toolhost serve`.
//!
//! Resources: a thread's `/mnt/user-data/outputs` files and its `artifacts`, named
//! `toolhost:///mnt/user-data/outputs/…` (the URI's path is the file's virtual path). Listing
//! walks the outputs tree through the thread filesystem layer (no link is entered); reading opens
//! the file beneath the thread's directory with no link followed, refuses special files and caps
//! the size; text comes back as text, anything else as a base64 blob with its MIME type.
//!
//! Prompts: every enabled skill, named after it, described by its SKILL.md frontmatter. Getting
//! one reads its SKILL.md with `read_file` through the pipeline — so the skill becomes active in
//! the thread exactly as when the model reads it, and its `allowed-tools` policy applies.

use std::collections::BTreeSet;

use base64::Engine as _;
use rmcp::model::{
    GetPromptResult, Prompt, PromptMessage, ReadResourceResult, Resource, ResourceContents, ResourceTemplate,
};
use serde_json::json;
use toolhost_core::threadfs::EntryKind;
use toolhost_core::{FsError, ThreadFs};

use toolhost::AssemblyRequest;
use toolhost::Toolhost;

/// The URI scheme of thread files.
pub const SCHEME: &str = "toolhost://";
/// The outputs directory, whose files are listed.
pub const OUTPUTS: &str = "/mnt/user-data/outputs";
/// The largest file `resources/read` returns.
pub const READ_MAX_BYTES: u64 = 16 << 20;
/// At most this many resources are listed, and directories this deep are walked.
const LIST_MAX: usize = 1000;
const DEPTH_MAX: usize = 16;

/// The URI of a virtual path.
pub fn uri_of(vpath: &str) -> String {
    format!("{SCHEME}{vpath}")
}

/// The virtual path a URI names, if it is one of ours.
pub fn vpath_of(uri: &str) -> Option<&str> {
    uri.strip_prefix(SCHEME).filter(|p| p.starts_with("/mnt/user-data/"))
}

/// A MIME type from the file name; `None` when it says nothing.
pub fn mime_of(name: &str) -> Option<&'static str> {
    let ext = name.rsplit_once('.').map(|(_, e)| e.to_ascii_lowercase())?;
    Some(match ext.as_str() {
        "md" | "markdown" => "text/markdown",
        "txt" | "log" => "text/plain",
        "csv" => "text/csv",
        "html" | "htm" => "text/html",
        "json" => "application/json",
        "yaml" | "yml" => "application/yaml",
        "xml" => "application/xml",
        "py" => "text/x-python",
        "js" | "mjs" => "text/javascript",
        "ts" => "text/x-typescript",
        "rs" => "text/x-rust",
        "svg" => "image/svg+xml",
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "gif" => "image/gif",
        "webp" => "image/webp",
        "pdf" => "application/pdf",
        "zip" => "application/zip",
        "mp3" => "audio/mpeg",
        "wav" => "audio/wav",
        _ => return None,
    })
}

fn resource(vpath: &str, size: Option<u64>) -> Resource {
    let name = vpath.strip_prefix(&format!("{OUTPUTS}/")).unwrap_or(vpath).to_string();
    let mut r = Resource::new(uri_of(vpath), name).with_title(vpath.rsplit('/').next().unwrap_or(vpath));
    if let Some(m) = mime_of(vpath) {
        r = r.with_mime_type(m);
    }
    if let Some(s) = size {
        r = r.with_size(s);
    }
    r
}

/// The thread's outputs files (walked with no link entered) and its artifacts, in that order.
pub async fn list(host: &Toolhost, thread: &str) -> Result<Vec<Resource>, String> {
    let fs = host.thread_fs(thread).map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    let mut seen = BTreeSet::new();
    walk_outputs(&fs, &mut out, &mut seen);
    let state = host.thread_state(thread).await.map_err(|e| e.to_string())?;
    for a in &state.artifacts {
        if out.len() >= LIST_MAX {
            break;
        }
        if seen.contains(a) {
            continue;
        }
        // An artifact that is gone (or not a regular file any more) is not listed.
        if let Ok(file) = fs.resolve(a).and_then(|r| fs.open_resolved(&r, a)) {
            seen.insert(a.clone());
            out.push(resource(a, Some(file.len)));
        }
    }
    Ok(out)
}

fn walk_outputs(fs: &ThreadFs, out: &mut Vec<Resource>, seen: &mut BTreeSet<String>) {
    let Ok(root) = fs.resolve(OUTPUTS).and_then(|r| fs.open_dir_resolved(&r, OUTPUTS)) else { return };
    let mut stack = vec![(root, 0usize)];
    while let Some((dir, depth)) = stack.pop() {
        let Ok(entries) = dir.entries() else { continue };
        for e in entries {
            if out.len() >= LIST_MAX {
                return;
            }
            let vpath = format!("{}/{}", dir.vpath.trim_end_matches('/'), e.name);
            match e.kind {
                EntryKind::File => {
                    seen.insert(vpath.clone());
                    out.push(resource(&vpath, Some(e.len)));
                }
                EntryKind::Dir if depth + 1 < DEPTH_MAX => {
                    if let Ok(sub) = dir.subdir(&e.name) {
                        stack.push((sub, depth + 1));
                    }
                }
                // Links and special files are not resources.
                _ => {}
            }
        }
    }
    out.sort_by(|a, b| a.uri.cmp(&b.uri));
}

/// The resource templates: any file under the thread's outputs.
pub fn templates() -> Vec<ResourceTemplate> {
    vec![ResourceTemplate::new(format!("{SCHEME}{OUTPUTS}/{{path}}"), "outputs")
        .with_title("A file in the thread's outputs")
        .with_description("A file under /mnt/user-data/outputs of the session's thread, by its path there.")]
}

/// `completion/complete` for the outputs template's `path` argument: the paths of the thread's
/// outputs files (relative to the outputs directory) that start with `prefix`, sorted, at most
/// 100 (MCP's cap), and how many matched in all.
pub async fn complete_output_path(host: &Toolhost, thread: &str, prefix: &str) -> Result<(Vec<String>, usize), String> {
    let fs = host.thread_fs(thread).map_err(|e| e.to_string())?;
    let mut files = Vec::new();
    walk_outputs(&fs, &mut files, &mut BTreeSet::new());
    let base = format!("{OUTPUTS}/");
    let matching: Vec<String> = files
        .iter()
        .filter_map(|r| vpath_of(&r.uri)?.strip_prefix(&base))
        .filter(|rel| rel.starts_with(prefix))
        .map(str::to_string)
        .collect();
    let total = matching.len();
    Ok((matching.into_iter().take(100).collect(), total))
}

/// Why a read is refused: the message for the client.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("Resource not found: {0}")]
    NotFound(String),
    #[error("{0}")]
    Refused(String),
}

/// `resources/read`: a file of the outputs, or an artifact, of the thread.
pub async fn read(host: &Toolhost, thread: &str, uri: &str) -> Result<ReadResourceResult, ReadError> {
    let vpath = vpath_of(uri).ok_or_else(|| ReadError::NotFound(uri.to_string()))?;
    let fs = host.thread_fs(thread).map_err(|e| ReadError::Refused(e.to_string()))?;
    let in_outputs = vpath.starts_with(&format!("{OUTPUTS}/"));
    if !in_outputs {
        let state = host.thread_state(thread).await.map_err(|e| ReadError::Refused(e.to_string()))?;
        if !state.artifacts.iter().any(|a| a == vpath) {
            return Err(ReadError::NotFound(uri.to_string()));
        }
    }
    let fail = |e: FsError| {
        if e.is_not_found() {
            ReadError::NotFound(uri.to_string())
        } else {
            ReadError::Refused(e.to_string())
        }
    };
    let resolved = fs.resolve(vpath).map_err(fail)?;
    // A link inside outputs must not lead the read to another area of the thread.
    if in_outputs && !resolved.vpath.starts_with(&format!("{OUTPUTS}/")) {
        return Err(ReadError::Refused(format!("{vpath}: the path leaves the thread's outputs")));
    }
    let data = fs.open_resolved(&resolved, vpath).and_then(|f| f.read_capped(READ_MAX_BYTES)).map_err(fail)?;
    let mime = mime_of(vpath);
    let textual =
        mime.is_none_or(|m| m.starts_with("text/") || m.ends_with("json") || m.ends_with("yaml") || m.ends_with("xml"));
    let contents = match (textual, String::from_utf8(data)) {
        (true, Ok(text)) => ResourceContents::TextResourceContents {
            uri: uri.to_string(),
            mime_type: Some(mime.unwrap_or("text/plain").to_string()),
            text,
            meta: None,
        },
        (_, Ok(text)) => blob(uri, mime, text.into_bytes()),
        (_, Err(e)) => blob(uri, mime, e.into_bytes()),
    };
    Ok(ReadResourceResult::new(vec![contents]))
}

fn blob(uri: &str, mime: Option<&str>, data: Vec<u8>) -> ResourceContents {
    ResourceContents::BlobResourceContents {
        uri: uri.to_string(),
        mime_type: Some(mime.unwrap_or("application/octet-stream").to_string()),
        blob: base64::engine::general_purpose::STANDARD.encode(data),
        meta: None,
    }
}

/// A file's size and modification time, as a subscription last saw it.
pub type Stamp = (u64, std::time::SystemTime);

/// Whether `uri` in `thread` changed since `seen`; `seen` is brought up to date.
pub fn changed(host: &Toolhost, thread: &str, uri: &str, seen: &mut Option<Stamp>) -> bool {
    let now = stamp(host, thread, uri);
    let changed = now != *seen;
    *seen = now;
    changed
}

/// What a resource looks like now, to tell a subscriber when it changed.
pub fn stamp(host: &Toolhost, thread: &str, uri: &str) -> Option<Stamp> {
    let vpath = vpath_of(uri)?;
    let fs = host.thread_fs(thread).ok()?;
    let f = fs.resolve(vpath).and_then(|r| fs.open_resolved(&r, vpath)).ok()?;
    Some((f.len, f.modified().ok()?))
}

/// Every enabled skill as a prompt.
pub fn prompts(host: &Toolhost) -> Vec<Prompt> {
    let Some(registry) = host.skill_registry() else { return Vec::new() };
    registry
        .skills
        .iter()
        .filter(|s| s.enabled)
        .map(|s| {
            let mut p = Prompt::new(s.name(), Some(s.meta.description.clone()), None);
            p.title = Some(format!("Skill: {}", s.name()));
            p
        })
        .collect()
}

/// `prompts/get NAME`: the skill's SKILL.md as the user's message, read with `read_file` through
/// the pipeline in `thread` (which activates the skill there, as DeerFlow's skill policy does).
pub async fn get_prompt(
    host: &Toolhost,
    request: &AssemblyRequest,
    thread: &str,
    name: &str,
) -> Result<GetPromptResult, String> {
    let registry = host.skill_registry().ok_or_else(|| "no skills are configured".to_string())?;
    let skill = registry
        .skills
        .iter()
        .find(|s| s.enabled && s.name() == name)
        .ok_or_else(|| format!("Prompt not found: {name} (prompts are the enabled skills)"))?;
    let path = skill.container_file_path(&registry.container_path);
    let args = json!({"description": format!("Load the {name} skill"), "path": path});
    let r = host.call(request, thread, "read_file", args, None).await.map_err(|e| e.to_string())?;
    let text = r.outcome.text_content();
    if r.outcome.is_error() {
        return Err(format!("cannot read skill {name}: {text}"));
    }
    Ok(GetPromptResult::new(vec![PromptMessage::new_text(rmcp::model::Role::User, text)])
        .with_description(skill.meta.description.clone()))
}
