//! What a `tools:` entry's `use:` names: a bundled component (by toolhost name or by DeerFlow's
//! Python path), a component file (`path/to/tool.wasm[@sha256:HEX]`), a component in an OCI
//! registry (`oci://REGISTRY/REPO:TAG[@sha256:DIGEST]`), host bash, or a DeerFlow
//! community tool that toolhost does not provide. The community paths live in
//! [`crate::community`].

use std::path::Path;

use crate::community::Community;
pub use crate::runtime::ComponentRef;

/// DeerFlow's host bash tool.
pub const BASH_TOOL_USE: &str = "deerflow.sandbox.tools:bash_tool";

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResolvedUse {
    /// A tool of a component; `tool` is `None` when the `use:` did not say which.
    Component {
        component: ComponentRef,
        tool: Option<String>,
    },
    HostBash,
    /// A DeerFlow community tool toolhost does not provide: reported and left out, with what to
    /// use instead when there is something.
    NotBundled {
        module: String,
        hint: Option<&'static str>,
    },
}

/// DeerFlow `use:` paths toolhost maps to bundled components.
const DEERFLOW_SANDBOX_TOOLS: [(&str, &str); 6] = [
    ("deerflow.sandbox.tools:ls_tool", "ls"),
    ("deerflow.sandbox.tools:read_file_tool", "read_file"),
    ("deerflow.sandbox.tools:write_file_tool", "write_file"),
    ("deerflow.sandbox.tools:str_replace_tool", "str_replace"),
    ("deerflow.sandbox.tools:glob_tool", "glob"),
    ("deerflow.sandbox.tools:grep_tool", "grep"),
];

/// The DeerFlow path a `use:` value names. toolhost's Python package is DeerFlow's door to
/// toolhost: a DeerFlow config that loads a tool through it says `toolhost.deerflow:<tool>` (the
/// sandbox tools and bash) or `toolhost.deerflow.<DeerFlow's own path>`
/// (`toolhost.deerflow.community.tavily.tools:web_search_tool`), and means DeerFlow's tool, run
/// here. Any other value is returned as it is.
pub fn deerflow_use(use_: &str) -> std::borrow::Cow<'_, str> {
    let use_ = use_.trim();
    if let Some(attr) = use_.strip_prefix("toolhost.deerflow:") {
        return format!("deerflow.sandbox.tools:{attr}").into();
    }
    match use_.strip_prefix("toolhost.deerflow.") {
        Some(rest) => format!("deerflow.{rest}").into(),
        None => use_.into(),
    }
}

/// Resolve a `use:` value. `bundled` lists the bundled component names; relative file paths are
/// taken from `base_dir`. The error text says what is known.
pub fn resolve_use(use_: &str, bundled: &[&str], base_dir: &Path) -> Result<ResolvedUse, String> {
    let use_ = &*deerflow_use(use_);
    if use_ == BASH_TOOL_USE {
        return Ok(ResolvedUse::HostBash);
    }
    if let Some((_, tool)) = DEERFLOW_SANDBOX_TOOLS.iter().find(|(u, _)| *u == use_) {
        return Ok(ResolvedUse::Component {
            component: ComponentRef::Bundled("sandbox-fs".into()),
            tool: Some((*tool).to_string()),
        });
    }
    match crate::community::resolve(use_) {
        Some(Community::Tool(tool)) => {
            return Ok(ResolvedUse::Component {
                component: ComponentRef::Bundled(crate::community::COMPONENT.into()),
                tool: Some(tool),
            })
        }
        Some(Community::NotProvided { module, hint }) => {
            return Ok(ResolvedUse::NotBundled { module, hint: Some(hint) })
        }
        Some(Community::Unknown { module }) => return Ok(ResolvedUse::NotBundled { module, hint: None }),
        None => {}
    }
    if use_.starts_with("deerflow.") {
        return Err(format!(
            "unknown DeerFlow tool '{use_}'; toolhost maps {} and deerflow.community.* tools",
            known_deerflow()
        ));
    }
    if use_.starts_with("oci://") {
        let (reference, tool) = toolhost_oci::split_use(use_).map_err(|e| e.to_string())?;
        return Ok(ResolvedUse::Component { component: ComponentRef::Oci(reference), tool });
    }
    // `component[:tool]`, where component is a bundled name or a .wasm path (with optional pin).
    let (component_part, tool) = split_tool(use_);
    if let Some(name) = bundled.iter().find(|b| **b == component_part) {
        return Ok(ResolvedUse::Component { component: ComponentRef::Bundled((*name).to_string()), tool });
    }
    let (path_part, pin) = match component_part.split_once("@sha256:") {
        Some((p, h)) => (p, Some(h)),
        None => (component_part, None),
    };
    if path_part.ends_with(".wasm") {
        if let Some(h) = pin {
            if h.len() != 64 || !h.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Err(format!("'{use_}': a sha256 pin is 64 hex digits, got '{h}'"));
            }
        }
        let p = Path::new(path_part);
        let path = if p.is_absolute() { p.to_path_buf() } else { base_dir.join(p) };
        return Ok(ResolvedUse::Component {
            component: ComponentRef::File { path, sha256: pin.map(str::to_ascii_lowercase) },
            tool,
        });
    }
    Err(format!(
        "unknown tool source '{use_}': expected a bundled component ({}), a path to a .wasm component (optionally path.wasm@sha256:HEX), oci://REGISTRY/REPO:TAG[@sha256:DIGEST], or {}",
        bundled.join(", "),
        known_deerflow()
    ))
}

fn known_deerflow() -> String {
    let mut names: Vec<String> = DEERFLOW_SANDBOX_TOOLS.iter().map(|(u, _)| u.to_string()).collect();
    names.extend(crate::community::known_uses());
    names.push(BASH_TOOL_USE.to_string());
    names.join(", ")
}

/// Split `component:tool`; a `:` inside a Windows drive or after `@sha256` is not a separator.
fn split_tool(use_: &str) -> (&str, Option<String>) {
    let search_from = use_.find("@sha256:").map(|i| i + "@sha256:".len()).unwrap_or(0);
    match use_[search_from..].rfind(':') {
        Some(i) => {
            let i = search_from + i;
            let tool = &use_[i + 1..];
            if tool.is_empty() || tool.contains('/') {
                (use_, None)
            } else {
                (&use_[..i], Some(tool.to_string()))
            }
        }
        None => (use_, None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    const B: &[&str] = &["sandbox-fs", "hello"];

    #[test]
    fn maps_deerflow_paths() {
        let base = Path::new("/cfg");
        assert_eq!(resolve_use(BASH_TOOL_USE, B, base).unwrap(), ResolvedUse::HostBash);
        assert_eq!(
            resolve_use("deerflow.sandbox.tools:grep_tool", B, base).unwrap(),
            ResolvedUse::Component { component: ComponentRef::Bundled("sandbox-fs".into()), tool: Some("grep".into()) }
        );
        assert_eq!(
            resolve_use("deerflow.community.tavily.tools:web_search_tool", B, base).unwrap(),
            ResolvedUse::Component {
                component: ComponentRef::Bundled("community".into()),
                tool: Some("tavily.web_search".into())
            }
        );
        assert_eq!(
            resolve_use("deerflow.community.jina_ai.tools:web_fetch_tool", B, base).unwrap(),
            ResolvedUse::Component {
                component: ComponentRef::Bundled("community".into()),
                tool: Some("jina_ai.web_fetch".into())
            }
        );
        assert!(matches!(
            resolve_use("deerflow.community.browser_automation.tools:browser_click_tool", B, base).unwrap(),
            ResolvedUse::NotBundled { module, hint: Some(_) } if module == "browser_automation"
        ));
        assert!(resolve_use("deerflow.sandbox.tools:nope_tool", B, base).unwrap_err().contains("ls_tool"));
    }

    #[test]
    fn the_python_door_names_deerflow_tools() {
        let base = Path::new("/cfg");
        assert_eq!(resolve_use("toolhost.deerflow:bash_tool", B, base).unwrap(), ResolvedUse::HostBash);
        assert_eq!(
            resolve_use("toolhost.deerflow:read_file_tool", B, base).unwrap(),
            resolve_use("deerflow.sandbox.tools:read_file_tool", B, base).unwrap()
        );
        assert_eq!(
            resolve_use("toolhost.deerflow.sandbox.tools:grep_tool", B, base).unwrap(),
            resolve_use("deerflow.sandbox.tools:grep_tool", B, base).unwrap()
        );
        assert_eq!(
            resolve_use("toolhost.deerflow.community.tavily.tools:web_search_tool", B, base).unwrap(),
            resolve_use("deerflow.community.tavily.tools:web_search_tool", B, base).unwrap()
        );
        assert!(resolve_use("toolhost.deerflow:nope_tool", B, base).unwrap_err().contains("nope_tool"));
        assert_eq!(deerflow_use("hello"), "hello");
    }

    #[test]
    fn bundled_and_files() {
        let base = Path::new("/cfg");
        assert_eq!(
            resolve_use("hello", B, base).unwrap(),
            ResolvedUse::Component { component: ComponentRef::Bundled("hello".into()), tool: None }
        );
        assert_eq!(
            resolve_use("hello:hello", B, base).unwrap(),
            ResolvedUse::Component { component: ComponentRef::Bundled("hello".into()), tool: Some("hello".into()) }
        );
        let h = "ab".repeat(32);
        assert_eq!(
            resolve_use(&format!("tools/x.wasm@sha256:{h}:greet"), B, base).unwrap(),
            ResolvedUse::Component {
                component: ComponentRef::File { path: PathBuf::from("/cfg/tools/x.wasm"), sha256: Some(h.clone()) },
                tool: Some("greet".into())
            }
        );
        assert!(resolve_use("x.wasm@sha256:abc", B, base).unwrap_err().contains("64 hex"));
        let d = format!("sha256:{h}");
        match resolve_use(&format!("oci://127.0.0.1:5000/tools/hello:v1@{d}:hello"), B, base).unwrap() {
            ResolvedUse::Component { component: ComponentRef::Oci(r), tool } => {
                assert_eq!(
                    (r.repository.as_str(), r.tag.as_deref(), r.digest.as_deref()),
                    ("tools/hello", Some("v1"), Some(d.as_str()))
                );
                assert_eq!(tool.as_deref(), Some("hello"));
            }
            other => panic!("{other:?}"),
        }
        assert!(resolve_use("oci://127.0.0.1:5000/Tools:v1", B, base).unwrap_err().contains("repository"));
        let err = resolve_use("nonsense", B, base).unwrap_err();
        assert!(err.contains("sandbox-fs") && err.contains("nonsense"), "{err}");
    }
}
