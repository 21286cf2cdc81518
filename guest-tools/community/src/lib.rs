//! DeerFlow's community web tools (`deerflow.community.*.tools`) as one component: every search,
//! fetch and capture provider, with DeerFlow's tool names, descriptions, schemas, config keys,
//! outputs and error strings. A tool is listed as `provider.tool` (`serper.web_search`); the host
//! maps DeerFlow's `use:` paths onto these names and binds each under DeerFlow's tool name.
//!
//! The providers are plain functions over a [`providers::Ctx`] (config, granted env, an HTTP
//! transport, a resolver, the outputs directory), tested natively against the conformance
//! vectors; the component glue only wires those to wasi:http, wasi:filesystem and the host.

pub mod article;
pub mod markdownify;
pub mod net;
pub mod providers;
pub mod py;
pub mod url;

use serde_json::{json, Value};

use providers::{firecrawl::Flavor, Ctx, Out};

/// `web_fetch`'s docstring, shared by the fetch providers that use it verbatim.
pub const WEB_FETCH: &str = "Fetch the contents of a web page at a given URL.\nOnly fetch EXACT URLs that have been provided directly by the user or have been returned in results from the web_search and web_fetch tools.\nThis tool can NOT access content that requires authentication, such as private Google Docs or pages behind login walls.\nDo NOT add www. to URLs that do NOT have them.\nURLs must include the schema: https://example.com is a valid URL while example.com is an invalid URL.";

const IMAGE_HINT: &str =
    "The returned image URLs can be used as reference images in image generation to significantly improve quality.";
const BEFORE_GENERATION: &str = "Use this tool BEFORE image generation to find reference images for characters, portraits, objects, scenes, or any content requiring visual accuracy.";
const QUERY_KEYWORDS: &str = "Search keywords describing what you want to find. Be specific for better results.";

type Handler = fn(&Ctx, &Value) -> Out;

/// One tool of the component.
pub struct ToolEntry {
    /// `provider.tool`.
    pub name: &'static str,
    pub description: fn() -> String,
    pub parameters: fn() -> Value,
    pub handler: Handler,
}

fn prop(ty: &str, description: &str) -> Value {
    json!({"description": description, "type": ty})
}

fn prop_default(ty: &str, default: Value, description: &str) -> Value {
    json!({"default": default, "description": description, "type": ty})
}

fn prop_optional(ty: &str, description: &str) -> Value {
    json!({"anyOf": [{"type": ty}, {"type": "null"}], "default": null, "description": description})
}

fn schema(props: Vec<(&str, Value)>, required: &[&str]) -> Value {
    let mut p = serde_json::Map::new();
    for (k, v) in props {
        p.insert(k.to_string(), v);
    }
    json!({"properties": p, "required": required, "type": "object"})
}

fn query_only() -> Value {
    schema(vec![("query", prop("string", "The query to search for."))], &["query"])
}

fn url_only() -> Value {
    schema(vec![("url", prop("string", "The URL to fetch the contents of."))], &["url"])
}

fn search_web() -> String {
    "Search the web.".into()
}

fn fetch_web() -> String {
    WEB_FETCH.into()
}

fn serper_search() -> Value {
    schema(
        vec![
            ("query", prop("string", QUERY_KEYWORDS)),
            (
                "max_results",
                prop_default(
                    "integer",
                    json!(5),
                    "Maximum number of search results to return. Default is 5, capped at 10.",
                ),
            ),
        ],
        &["query"],
    )
}

fn serper_images() -> Value {
    schema(
        vec![
            ("query", prop("string", "Search keywords describing the images you want to find. Be specific for better results (e.g., \"Japanese woman street photography 1990s\" instead of just \"woman\").")),
            ("max_results", prop_default("integer", json!(5), "Maximum number of images to return. Default is 5, capped at 10.")),
        ],
        &["query"],
    )
}

fn brave_search() -> Value {
    schema(
        vec![
            ("query", prop("string", QUERY_KEYWORDS)),
            (
                "max_results",
                prop_default("integer", json!(5), "Maximum number of search results to return. Default is 5."),
            ),
        ],
        &["query"],
    )
}

fn brave_images() -> Value {
    schema(
        vec![
            (
                "query",
                prop(
                    "string",
                    "Search keywords describing the images you want to find. Be specific for better results.",
                ),
            ),
            (
                "max_results",
                prop_default("integer", json!(5), "Maximum number of images to return. Default is 5, capped at 200."),
            ),
        ],
        &["query"],
    )
}

fn groundroute_search() -> Value {
    schema(
        vec![
            ("query", prop("string", QUERY_KEYWORDS)),
            (
                "max_results",
                prop_optional(
                    "integer",
                    "Maximum number of search results to return. If omitted, uses the configured value (default 5). Clamped to 1-50.",
                ),
            ),
        ],
        &["query"],
    )
}

fn ddg_search() -> Value {
    schema(
        vec![
            ("query", prop("string", QUERY_KEYWORDS)),
            ("max_results", prop_default("integer", json!(5), "Maximum number of results to return. Default is 5.")),
        ],
        &["query"],
    )
}

fn ddg_images() -> Value {
    schema(
        vec![
            ("query", prop("string", "Search keywords describing the images you want to find. Be specific for better results (e.g., \"Japanese woman street photography 1990s\" instead of just \"woman\").")),
            ("max_results", prop_default("integer", json!(5), "Maximum number of images to return. Default is 5.")),
            ("size", prop_optional("string", "Image size filter. Options: \"Small\", \"Medium\", \"Large\", \"Wallpaper\". Use \"Large\" for reference images.")),
            ("type_image", prop_optional("string", "Image type filter. Options: \"photo\", \"clipart\", \"gif\", \"transparent\", \"line\". Use \"photo\" for realistic references.")),
            ("layout", prop_optional("string", "Layout filter. Options: \"Square\", \"Tall\", \"Wide\". Choose based on your generation needs.")),
        ],
        &["query"],
    )
}

fn capture_schema() -> Value {
    schema(
        vec![
            ("url", prop("string", "The http(s) URL to capture.")),
            ("filename", prop_optional("string", "Optional output filename. Directories are ignored and the extension is determined by output_format.")),
            ("full_page", prop_optional("boolean", "Optional override for full-page capture.")),
            ("output_format", prop_optional("string", "Optional image format: png, jpeg, or webp.")),
            ("viewport_width", prop_optional("integer", "Optional viewport width in pixels.")),
            ("viewport_height", prop_optional("integer", "Optional viewport height in pixels.")),
        ],
        &["url"],
    )
}

fn infoquest_images() -> Value {
    schema(vec![("query", prop("string", "The query to search for images."))], &["query"])
}

const INFOQUEST_IMAGES: &str = "Search for images online. Use this tool BEFORE image generation to find reference images for characters, portraits, objects, scenes, or any content requiring visual accuracy. **When to use:**\n- Before generating character/portrait images: search for similar poses, expressions, styles\n- Before generating specific objects/products: search for accurate visual references\n- Before generating scenes/locations: search for architectural or environmental references\n- Before generating fashion/clothing: search for style and detail references The returned image URLs can be used as reference images in image generation to significantly improve quality.";

/// Every tool of the component, by `provider.tool`.
pub const TOOLS: &[ToolEntry] = &[
    ToolEntry {
        name: "serper.web_search",
        description: || "Search the web for information using Google Search via Serper.".into(),
        parameters: serper_search,
        handler: providers::serper::web_search,
    },
    ToolEntry {
        name: "serper.image_search",
        description: || {
            format!("Search for images online using Google Images via Serper. {BEFORE_GENERATION} {IMAGE_HINT}")
        },
        parameters: serper_images,
        handler: providers::serper::image_search,
    },
    ToolEntry {
        name: "brave.web_search",
        description: || "Search the web for information using Brave Search.".into(),
        parameters: brave_search,
        handler: providers::brave::web_search,
    },
    ToolEntry {
        name: "brave.image_search",
        description: || format!("Search for images online using Brave Image Search. {BEFORE_GENERATION} {IMAGE_HINT}"),
        parameters: brave_images,
        handler: providers::brave::image_search,
    },
    ToolEntry {
        name: "exa.web_search",
        description: search_web,
        parameters: query_only,
        handler: providers::exa::web_search,
    },
    ToolEntry {
        name: "exa.web_fetch",
        description: fetch_web,
        parameters: url_only,
        handler: providers::exa::web_fetch,
    },
    ToolEntry {
        name: "firecrawl.web_search",
        description: search_web,
        parameters: query_only,
        handler: |c, a| providers::firecrawl::web_search(c, a, Flavor::Firecrawl),
    },
    ToolEntry {
        name: "firecrawl.web_fetch",
        description: fetch_web,
        parameters: url_only,
        handler: |c, a| providers::firecrawl::web_fetch(c, a, Flavor::Firecrawl),
    },
    ToolEntry {
        name: "fastcrw.web_search",
        description: search_web,
        parameters: query_only,
        handler: |c, a| providers::firecrawl::web_search(c, a, Flavor::Fastcrw),
    },
    ToolEntry {
        name: "fastcrw.web_fetch",
        description: fetch_web,
        parameters: url_only,
        handler: |c, a| providers::firecrawl::web_fetch(c, a, Flavor::Fastcrw),
    },
    ToolEntry {
        name: "groundroute.web_search",
        description: || {
            "Search the web for information using GroundRoute. GroundRoute routes the query across six search engines and returns the result\nset from the engine it selected, with failover if one engine is unavailable.".into()
        },
        parameters: groundroute_search,
        handler: providers::groundroute::web_search,
    },
    ToolEntry {
        name: "groundroute.web_fetch",
        description: || WEB_FETCH.replacen("given URL.", "given URL via GroundRoute.", 1),
        parameters: url_only,
        handler: providers::groundroute::web_fetch,
    },
    ToolEntry {
        name: "searxng.web_search",
        description: || "Search the web using SearXNG.".into(),
        parameters: query_only,
        handler: providers::searxng::web_search,
    },
    ToolEntry {
        name: "jina_ai.web_fetch",
        description: fetch_web,
        parameters: url_only,
        handler: providers::jina_ai::web_fetch,
    },
    ToolEntry {
        name: "tavily.web_search",
        description: search_web,
        parameters: query_only,
        handler: providers::tavily::web_search,
    },
    ToolEntry {
        name: "tavily.web_fetch",
        description: fetch_web,
        parameters: url_only,
        handler: providers::tavily::web_fetch,
    },
    ToolEntry {
        name: "infoquest.web_search",
        description: search_web,
        parameters: query_only,
        handler: providers::infoquest::web_search,
    },
    ToolEntry {
        name: "infoquest.web_fetch",
        description: fetch_web,
        parameters: url_only,
        handler: providers::infoquest::web_fetch,
    },
    ToolEntry {
        name: "infoquest.image_search",
        description: || INFOQUEST_IMAGES.into(),
        parameters: infoquest_images,
        handler: providers::infoquest::image_search,
    },
    ToolEntry {
        name: "crawl4ai.web_fetch",
        description: fetch_web,
        parameters: url_only,
        handler: providers::crawl4ai::web_fetch,
    },
    ToolEntry {
        name: "browserless.web_fetch",
        description: || WEB_FETCH.replacen("given URL.", "given URL using Browserless (headless Chrome).", 1),
        parameters: url_only,
        handler: providers::browserless::web_fetch,
    },
    ToolEntry {
        name: "browserless.web_capture",
        description: || {
            "Capture a rendered webpage screenshot and present it as an artifact. Use this tool when you need a visual capture of a public webpage, especially JavaScript-heavy pages, UI states, dashboards, or visual evidence for a report.\nOnly capture exact URLs provided by the user or discovered through other tools. Do not use this for private pages behind login unless the user has explicitly configured Browserless outside DeerFlow.\nURLs must include the schema: https://example.com is valid while example.com is invalid.".into()
        },
        parameters: capture_schema,
        handler: providers::browserless::web_capture,
    },
    ToolEntry {
        name: "ddg_search.web_search",
        description: || {
            "Search the web for information. Use this tool to find current information, news, articles, and facts from the internet.".into()
        },
        parameters: ddg_search,
        handler: providers::ddg::web_search,
    },
    ToolEntry {
        name: "image_search.image_search",
        description: || INFOQUEST_IMAGES.into(),
        parameters: ddg_images,
        handler: providers::ddg::image_search,
    },
];

/// The tool of `name`.
pub fn tool(name: &str) -> Option<&'static ToolEntry> {
    TOOLS.iter().find(|t| t.name == name)
}

#[cfg(target_arch = "wasm32")]
mod component;

#[cfg(test)]
mod conformance;
