//! DeerFlow's community tools (`deerflow.community.<module>.tools:<tool>_tool`), all served by the
//! bundled `community` component: which `use:` paths map to which of its tools, what each
//! provider may touch by default (its API host, its key's env name), and the config DeerFlow
//! reads from another entry. One table, so a provider is added or changed in one place.

use serde_json::{Map, Value};

use crate::runtime::capabilities::{CapabilitiesConfig, FilesGrant, NetworkEntry};
use crate::runtime::{ComponentRef, HostRule};

/// The bundled component that holds every community tool, each listed as `module.tool`.
pub const COMPONENT: &str = "community";

/// One DeerFlow community module.
pub struct Provider {
    /// DeerFlow's module name (`deerflow.community.<module>`).
    pub module: &'static str,
    /// Its tools, by DeerFlow name.
    pub tools: &'static [&'static str],
    /// The hosts it may reach without a `capabilities:` block: the provider's own API, nothing
    /// else. Empty for self-hosted services, whose host only the config can name.
    pub network: &'static [&'static str],
    /// The env vars DeerFlow's code reads (the key, a base URL).
    pub env: &'static [&'static str],
    /// A self-hosted service: DeerFlow's `allow_private_addresses` on the entry also lets the
    /// component reach a private address (its own server on the local network).
    pub self_hosted: bool,
    /// Its tools that check their target URL first as DeerFlow's `url_safety` does, resolving
    /// the URL's host (any name, not the provider's): these get `resolve_any_host`.
    pub checks_urls: &'static [&'static str],
}

/// Every community module toolhost serves.
pub const PROVIDERS: &[Provider] = &[
    Provider {
        module: "serper",
        tools: &["web_search", "image_search"],
        network: &["google.serper.dev"],
        env: &["SERPER_API_KEY"],
        self_hosted: false,
        checks_urls: &[],
    },
    Provider {
        module: "brave",
        tools: &["web_search", "image_search"],
        network: &["api.search.brave.com"],
        env: &["BRAVE_SEARCH_API_KEY"],
        self_hosted: false,
        checks_urls: &[],
    },
    Provider {
        module: "exa",
        tools: &["web_search", "web_fetch"],
        network: &["api.exa.ai"],
        env: &["EXA_API_KEY"],
        self_hosted: false,
        checks_urls: &[],
    },
    Provider {
        module: "firecrawl",
        tools: &["web_search", "web_fetch"],
        network: &["api.firecrawl.dev"],
        env: &["FIRECRAWL_API_KEY"],
        self_hosted: false,
        checks_urls: &[],
    },
    Provider {
        module: "fastcrw",
        tools: &["web_search", "web_fetch"],
        network: &["fastcrw.com"],
        env: &["CRW_API_KEY", "CRW_API_URL"],
        self_hosted: true,
        checks_urls: &["web_fetch"],
    },
    Provider {
        module: "groundroute",
        tools: &["web_search", "web_fetch"],
        network: &["api.groundroute.ai"],
        env: &["GROUNDROUTE_API_KEY"],
        self_hosted: false,
        checks_urls: &[],
    },
    Provider { module: "searxng", tools: &["web_search"], network: &[], env: &[], self_hosted: true, checks_urls: &[] },
    Provider {
        module: "jina_ai",
        tools: &["web_fetch"],
        network: &["r.jina.ai"],
        env: &["JINA_API_KEY"],
        self_hosted: false,
        checks_urls: &[],
    },
    Provider {
        module: "tavily",
        tools: &["web_search", "web_fetch"],
        network: &["api.tavily.com"],
        env: &["TAVILY_API_KEY"],
        self_hosted: false,
        checks_urls: &[],
    },
    Provider {
        module: "infoquest",
        tools: &["web_search", "web_fetch", "image_search"],
        network: &["search.infoquest.bytepluses.com", "reader.infoquest.bytepluses.com"],
        env: &["INFOQUEST_API_KEY"],
        self_hosted: false,
        checks_urls: &[],
    },
    Provider {
        module: "crawl4ai",
        tools: &["web_fetch"],
        network: &[],
        env: &[],
        self_hosted: true,
        checks_urls: &["web_fetch"],
    },
    Provider {
        module: "browserless",
        tools: &["web_fetch", "web_capture"],
        network: &[],
        env: &["BROWSERLESS_TOKEN"],
        self_hosted: true,
        checks_urls: &["web_fetch", "web_capture"],
    },
    Provider {
        module: "ddg_search",
        tools: &["web_search"],
        network: &["html.duckduckgo.com"],
        env: &[],
        self_hosted: false,
        checks_urls: &[],
    },
    Provider {
        module: "image_search",
        tools: &["image_search"],
        network: &["duckduckgo.com"],
        env: &[],
        self_hosted: false,
        checks_urls: &[],
    },
];

/// DeerFlow community modules toolhost does not serve, and what to use instead.
pub const NOT_PROVIDED: &[(&str, &str)] = &[(
    "browser_automation",
    "DeerFlow's browser_automation drives a stateful Playwright browser per thread, which toolhost does not \
     provide; use browserless's web_fetch (the rendered page as Markdown) and web_capture (a screenshot as an \
     artifact) — deerflow.community.browserless.tools:web_fetch_tool / web_capture_tool — or a browser MCP server \
     (e.g. @playwright/mcp) in extensions_config.json",
)];

/// What a `deerflow.community.*` path names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Community {
    /// A tool of the bundled component: its name there (`module.tool`).
    Tool(String),
    /// A module toolhost does not serve, with what to use instead.
    NotProvided { module: String, hint: &'static str },
    /// Not a community tool DeerFlow has.
    Unknown { module: String },
}

/// Map `deerflow.community.<module>.tools:<tool>_tool`; `None` when the path is not a community one.
pub fn resolve(use_: &str) -> Option<Community> {
    let rest = use_.strip_prefix("deerflow.community.")?;
    let (module_path, attr) = rest.split_once(':').unwrap_or((rest, ""));
    let module = module_path.split('.').next().unwrap_or(module_path).to_string();
    if let Some((_, hint)) = NOT_PROVIDED.iter().find(|(m, _)| *m == module) {
        return Some(Community::NotProvided { module, hint });
    }
    let tool = attr.strip_suffix("_tool").unwrap_or("");
    match PROVIDERS.iter().find(|p| p.module == module) {
        Some(p) if module_path == format!("{module}.tools") && p.tools.contains(&tool) => {
            Some(Community::Tool(format!("{module}.{tool}")))
        }
        _ => Some(Community::Unknown { module }),
    }
}

/// Every mapped `use:` path, for messages that list what is known.
pub fn known_uses() -> Vec<String> {
    PROVIDERS
        .iter()
        .flat_map(|p| p.tools.iter().map(move |t| format!("deerflow.community.{}.tools:{t}_tool", p.module)))
        .collect()
}

/// The provider and DeerFlow tool name of a tool of the bundled component.
fn provider_of(component: &ComponentRef, inner: &str) -> Option<(&'static Provider, String)> {
    if !matches!(component, ComponentRef::Bundled(n) if n == COMPONENT) {
        return None;
    }
    let (module, tool) = inner.split_once('.')?;
    PROVIDERS.iter().find(|p| p.module == module).map(|p| (p, tool.to_string()))
}

/// The name a tool of a component is bound under: DeerFlow's tool name for a community tool
/// (`web_search` for `serper.web_search`), the listed name for any other.
pub fn bound_name<'a>(component: &ComponentRef, inner: &'a str) -> &'a str {
    match provider_of(component, inner) {
        Some(_) => inner.split_once('.').map(|(_, t)| t).unwrap_or(inner),
        None => inner,
    }
}

/// DeerFlow's `_coerce_bool` of `allow_private_addresses` in the entry.
fn allow_private(extra: &Map<String, Value>) -> bool {
    match extra.get("allow_private_addresses") {
        Some(Value::Bool(b)) => *b,
        Some(Value::String(s)) => matches!(s.trim().to_lowercase().as_str(), "1" | "true" | "yes" | "on"),
        _ => false,
    }
}

/// The default capabilities of a community tool, which the entry's own `capabilities:` block
/// is merged over key by key: its provider's API host, its key's env name (only when set in
/// `env`: a key may as well come from the entry, so an unset one is no reason to warn), and for a
/// self-hosted provider DeerFlow's `allow_private_addresses: true` as the address rule.
pub fn capabilities(
    component: &ComponentRef,
    inner: &str,
    extra: &Map<String, Value>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Option<CapabilitiesConfig> {
    let (provider, tool) = provider_of(component, inner)?;
    Some(CapabilitiesConfig {
        network: Some(provider.network.iter().filter_map(|h| HostRule::parse(h).ok().map(NetworkEntry)).collect()),
        env: Some(provider.env.iter().filter(|e| env(e).is_some()).map(|e| e.to_string()).collect()),
        // The screenshot lands in the thread's outputs; nothing else needs files.
        filesystem: Some(if tool == "web_capture" { FilesGrant::Outputs } else { FilesGrant::None }),
        // HTML pages are parsed into a DOM; providers answer within their own 30 s timeouts.
        memory_mb: Some(256),
        timeout_s: Some(90.0),
        allow_private_addresses: (provider.self_hosted && allow_private(extra)).then_some(true),
        resolve_any_host: provider.checks_urls.contains(&tool.as_str()).then_some(true),
        ..Default::default()
    })
}

/// The config a community tool receives: its entry's keys, except where DeerFlow reads another
/// entry. Tavily's `web_fetch` takes `api_key` from the `web_search` entry (its own is ignored) —
/// but only when that entry is Tavily too, so no other provider's key reaches this component.
pub fn tool_config(
    inner: &str,
    extra: &Map<String, Value>,
    entries: &[(String, String, Map<String, Value>)],
) -> Map<String, Value> {
    let mut config = extra.clone();
    if inner == "tavily.web_fetch" {
        config.remove("api_key");
        let search = entries.iter().find(|(name, use_, _)| {
            name == "web_search" && matches!(resolve(use_), Some(Community::Tool(t)) if t == "tavily.web_search")
        });
        if let Some(key) = search.and_then(|(_, _, e)| e.get("api_key")) {
            config.insert("api_key".into(), key.clone());
        }
    }
    config
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_every_deerflow_path() {
        assert_eq!(
            resolve("deerflow.community.serper.tools:image_search_tool"),
            Some(Community::Tool("serper.image_search".into()))
        );
        assert_eq!(
            resolve("deerflow.community.browserless.tools:web_capture_tool"),
            Some(Community::Tool("browserless.web_capture".into()))
        );
        assert!(matches!(
            resolve("deerflow.community.browser_automation.tools:browser_navigate_tool"),
            Some(Community::NotProvided { .. })
        ));
        assert!(matches!(resolve("deerflow.community.serper.tools:web_fetch_tool"), Some(Community::Unknown { .. })));
        assert_eq!(resolve("deerflow.sandbox.tools:ls_tool"), None);
        assert_eq!(known_uses().len(), 24);
    }

    #[test]
    fn defaults_reach_only_the_provider() {
        let c = ComponentRef::Bundled(COMPONENT.into());
        let with_key = |k: &str| (k == "SERPER_API_KEY").then(|| "k".to_string());
        let none = |_: &str| None;
        let caps = capabilities(&c, "serper.web_search", &Map::new(), &with_key).unwrap();
        assert_eq!(caps.network.as_ref().map(Vec::len), Some(1));
        assert_eq!(caps.env, Some(vec!["SERPER_API_KEY".to_string()]));
        assert_eq!(capabilities(&c, "serper.web_search", &Map::new(), &none).unwrap().env, Some(vec![]));
        assert!(caps.allow_private_addresses.is_none() && caps.filesystem == Some(FilesGrant::None));
        let caps = capabilities(&c, "crawl4ai.web_fetch", &Map::new(), &none).unwrap();
        assert_eq!(caps.network, Some(vec![]), "a self-hosted service needs an explicit grant");
        let mut extra = Map::new();
        extra.insert("allow_private_addresses".into(), Value::Bool(true));
        assert_eq!(capabilities(&c, "crawl4ai.web_fetch", &extra, &none).unwrap().allow_private_addresses, Some(true));
        assert_eq!(capabilities(&c, "serper.web_search", &extra, &none).unwrap().allow_private_addresses, None);
        let cap = capabilities(&c, "browserless.web_capture", &Map::new(), &none).unwrap();
        assert_eq!(cap.filesystem, Some(FilesGrant::Outputs));
        assert!(capabilities(&ComponentRef::Bundled("hello".into()), "serper.web_search", &extra, &none).is_none());
    }

    /// Only the fetchers that check their target URL as DeerFlow does (which resolves the URL's
    /// host, any name) may have names outside their grant resolved.
    #[test]
    fn only_url_checkers_resolve_any_host() {
        let c = ComponentRef::Bundled(COMPONENT.into());
        let none = |_: &str| None;
        for tool in ["browserless.web_fetch", "browserless.web_capture", "crawl4ai.web_fetch", "fastcrw.web_fetch"] {
            assert_eq!(capabilities(&c, tool, &Map::new(), &none).unwrap().resolve_any_host, Some(true), "{tool}");
        }
        for tool in ["fastcrw.web_search", "serper.web_search", "jina_ai.web_fetch", "firecrawl.web_fetch"] {
            assert_eq!(capabilities(&c, tool, &Map::new(), &none).unwrap().resolve_any_host, None, "{tool}");
        }
    }

    #[test]
    fn tavily_fetch_reads_the_search_entry_key() {
        let entry = |k: &str| {
            let mut m = Map::new();
            m.insert("api_key".into(), Value::String(k.into()));
            m
        };
        let entries = vec![
            ("web_search".to_string(), "deerflow.community.tavily.tools:web_search_tool".to_string(), entry("s")),
            ("web_fetch".to_string(), "deerflow.community.tavily.tools:web_fetch_tool".to_string(), entry("f")),
        ];
        assert_eq!(tool_config("tavily.web_fetch", &entry("f"), &entries)["api_key"], "s");
        let other =
            vec![("web_search".to_string(), "deerflow.community.exa.tools:web_search_tool".to_string(), entry("e"))];
        assert!(tool_config("tavily.web_fetch", &entry("f"), &other).get("api_key").is_none());
        assert_eq!(tool_config("serper.web_search", &entry("k"), &entries)["api_key"], "k");
    }
}
