//! The guest SDK: write a toolhost tool as a plain Rust function over serde-typed arguments.
//! The JSON Schema the model sees is derived from the argument type (schemars), and argument
//! errors come back to the model as a clear message naming what was wrong.
//!
//! ```ignore
//! use toolhost_sdk::{tool, Context, Output};
//!
//! #[derive(serde::Deserialize, schemars::JsonSchema)]
//! struct HelloArgs {
//!     /// Who to greet.
//!     name: String,
//! }
//!
//! fn hello(_ctx: &Context, args: HelloArgs) -> Output {
//!     Output::text(format!("Hello, {}!", args.name))
//! }
//!
//! toolhost_sdk::export_tools!(tool("hello", "Greet someone by name.", hello));
//! ```
//!
//! A result is a list of blocks (`toolhost:tool@0.4.0`): text, images, audio, resource links and
//! embedded resources (`Output::text("chart:").with_block(Block::image(png, "image/png"))`). A
//! long call may report its progress with [`progress`]; the sandbox settings arrive typed as
//! [`Context::sandbox`]. A tool granted `capabilities.client` may ask the MCP client's user
//! ([`elicit`]) or model ([`create_message`]) during a call.

#[cfg(feature = "http")]
pub mod http;

pub use schemars;
pub use serde;
pub use serde_json;

use serde::de::DeserializeOwned;
use serde_json::Value;

#[doc(hidden)]
pub mod bindings {
    wit_bindgen::generate!({
        world: "tool-component",
        path: "../../wit",
        pub_export_macro: true,
        default_bindings_module: "toolhost_sdk::bindings",
    });
}

use bindings::exports::toolhost::tool::tool as wit;
use bindings::toolhost::tool::host;
use bindings::toolhost::tool::types;

/// What the host tells a tool about the call.
#[derive(Debug, Clone)]
pub struct Context {
    pub thread_id: String,
    pub tool_call_id: String,
    /// The tool's own config keys (config.yaml), `$VAR`s expanded.
    pub config: Value,
    sandbox: SandboxSettings,
}

impl Context {
    /// A context as the host would send it (for testing a tool function natively).
    pub fn new(
        thread_id: impl Into<String>,
        tool_call_id: impl Into<String>,
        config: Value,
        sandbox: SandboxSettings,
    ) -> Self {
        Self { thread_id: thread_id.into(), tool_call_id: tool_call_id.into(), config, sandbox }
    }

    /// A config key as `T`, or `None` when absent or of another type.
    pub fn config_value<T: DeserializeOwned>(&self, key: &str) -> Option<T> {
        self.config.get(key).and_then(|v| serde_json::from_value(v.clone()).ok())
    }

    /// The sandbox settings of the config: output limits, mounts, the skills path, disabled
    /// skills and the `write_file` size guard.
    pub fn sandbox(&self) -> &SandboxSettings {
        &self.sandbox
    }
}

/// The sandbox settings every tool of a config receives (`sandbox-settings` in the WIT).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxSettings {
    /// `read_file` output is cut to this many characters; 0 disables the cut.
    pub read_file_output_max_chars: u64,
    /// `ls` output is cut to this many characters; 0 disables the cut.
    pub ls_output_max_chars: u64,
    /// The configured mounts whose host directory exists.
    pub mounts: Vec<Mount>,
    /// Where the skills directory is seen (`/mnt/skills`).
    pub skills_container_path: String,
    /// `DEERFLOW_WRITE_FILE_MAX_BYTES` as the host read it, unparsed (DeerFlow parses it with
    /// Python's `int()`); `None` when it is not set.
    pub write_file_max_bytes: Option<String>,
    /// Sandbox directories of disabled skills (`/mnt/skills/public/some-skill`).
    pub disabled_skills: Vec<String>,
}

impl Default for SandboxSettings {
    /// DeerFlow's defaults.
    fn default() -> Self {
        Self {
            read_file_output_max_chars: 50_000,
            ls_output_max_chars: 20_000,
            mounts: Vec::new(),
            skills_container_path: "/mnt/skills".to_string(),
            write_file_max_bytes: None,
            disabled_skills: Vec::new(),
        }
    }
}

/// A configured mount as the tool sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mount {
    /// The absolute path inside the sandbox.
    pub container_path: String,
    /// Writes under it are refused.
    pub read_only: bool,
}

impl From<types::SandboxSettings> for SandboxSettings {
    fn from(s: types::SandboxSettings) -> Self {
        Self {
            read_file_output_max_chars: s.read_file_output_max_chars,
            ls_output_max_chars: s.ls_output_max_chars,
            mounts: s
                .mounts
                .into_iter()
                .map(|m| Mount { container_path: m.container_path, read_only: m.read_only })
                .collect(),
            skills_container_path: s.skills_container_path,
            write_file_max_bytes: s.write_file_max_bytes,
            disabled_skills: s.disabled_skills,
        }
    }
}

/// An image the model was shown, for `viewed_images`.
#[derive(Debug, Clone)]
pub struct ViewedImage {
    pub path: String,
    pub mime_type: String,
    pub size: u64,
    pub actual_path: String,
}

/// One piece of a result (`content-block` in the WIT). The host refuses an image whose MIME type
/// is not `image/*`, audio that is not `audio/*`, and a link that is not `https://` or `http://`.
#[derive(Debug, Clone, PartialEq)]
pub enum Block {
    /// Text the model reads.
    Text(String),
    /// An encoded image (PNG, JPEG, …) and its MIME type.
    Image { bytes: Vec<u8>, mime_type: String },
    /// An encoded audio clip (WAV, MP3, …) and its MIME type.
    Audio { bytes: Vec<u8>, mime_type: String },
    /// A link to a resource.
    ResourceLink(ResourceLink),
    /// A resource's contents, embedded (MCP's `resource` block): any absolute URI but `file:`,
    /// `toolhost:` and script schemes.
    Resource { uri: String, mime_type: Option<String>, contents: ResourceContents },
}

/// What an embedded resource holds.
#[derive(Debug, Clone, PartialEq)]
pub enum ResourceContents {
    Text(String),
    Blob(Vec<u8>),
}

impl Block {
    pub fn text(text: impl Into<String>) -> Self {
        Self::Text(text.into())
    }
    pub fn image(bytes: impl Into<Vec<u8>>, mime_type: impl Into<String>) -> Self {
        Self::Image { bytes: bytes.into(), mime_type: mime_type.into() }
    }
    pub fn audio(bytes: impl Into<Vec<u8>>, mime_type: impl Into<String>) -> Self {
        Self::Audio { bytes: bytes.into(), mime_type: mime_type.into() }
    }
    /// An embedded text resource.
    pub fn resource_text(uri: impl Into<String>, mime_type: Option<&str>, text: impl Into<String>) -> Self {
        Self::Resource {
            uri: uri.into(),
            mime_type: mime_type.map(str::to_string),
            contents: ResourceContents::Text(text.into()),
        }
    }
    /// An embedded binary resource.
    pub fn resource_blob(uri: impl Into<String>, mime_type: Option<&str>, bytes: impl Into<Vec<u8>>) -> Self {
        Self::Resource {
            uri: uri.into(),
            mime_type: mime_type.map(str::to_string),
            contents: ResourceContents::Blob(bytes.into()),
        }
    }
}

/// A link to a resource (MCP's `resource_link`): `https://` or `http://`, with a host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceLink {
    pub uri: String,
    pub name: String,
    pub mime_type: Option<String>,
    pub description: Option<String>,
}

impl ResourceLink {
    pub fn new(uri: impl Into<String>, name: impl Into<String>) -> Self {
        Self { uri: uri.into(), name: name.into(), mime_type: None, description: None }
    }
    pub fn with_mime_type(mut self, mime_type: impl Into<String>) -> Self {
        self.mime_type = Some(mime_type.into());
        self
    }
    pub fn with_description(mut self, description: impl Into<String>) -> Self {
        self.description = Some(description.into());
        self
    }
}

impl From<ResourceLink> for Block {
    fn from(link: ResourceLink) -> Self {
        Block::ResourceLink(link)
    }
}

/// A tool's answer: content blocks for the model (usually one text), an error flag and optional
/// state writes.
#[derive(Debug, Clone, Default)]
pub struct Output {
    pub content: Vec<Block>,
    pub is_error: bool,
    pub artifacts: Option<Vec<String>>,
    pub viewed_images: Option<Vec<ViewedImage>>,
    pub todos: Option<Value>,
    /// An exception the tool raises instead of answering: `(class, detail)`. The host reports
    /// it as DeerFlow's error middleware does: `Error: Tool '…' failed with {class}: {detail}. …`
    pub raised: Option<(String, String)>,
}

impl Output {
    /// One text block.
    pub fn text(content: impl Into<String>) -> Self {
        Self { content: vec![Block::Text(content.into())], ..Self::default() }
    }
    /// A failed call: one text block saying why (DeerFlow's strings start `Error:`).
    pub fn error(content: impl Into<String>) -> Self {
        Self { is_error: true, ..Self::text(content) }
    }
    /// Raise `class` (an exception name ending in `Error` or `Exception`) with `detail`.
    pub fn raised(class: impl Into<String>, detail: impl Into<String>) -> Self {
        Self { raised: Some((class.into(), detail.into())), is_error: true, ..Self::default() }
    }
    /// One image block.
    pub fn image(bytes: impl Into<Vec<u8>>, mime_type: impl Into<String>) -> Self {
        Self { content: vec![Block::image(bytes, mime_type)], ..Self::default() }
    }
    /// One audio block.
    pub fn audio(bytes: impl Into<Vec<u8>>, mime_type: impl Into<String>) -> Self {
        Self { content: vec![Block::audio(bytes, mime_type)], ..Self::default() }
    }
    /// One resource-link block.
    pub fn resource_link(link: ResourceLink) -> Self {
        Self { content: vec![Block::ResourceLink(link)], ..Self::default() }
    }
    /// Append a block: `Output::text("Here it is:").with_block(Block::image(png, "image/png"))`.
    pub fn with_block(mut self, block: impl Into<Block>) -> Self {
        self.content.push(block.into());
        self
    }
    pub fn with_artifacts(mut self, artifacts: Vec<String>) -> Self {
        self.artifacts = Some(artifacts);
        self
    }
    pub fn with_viewed_images(mut self, images: Vec<ViewedImage>) -> Self {
        self.viewed_images = Some(images);
        self
    }
    pub fn with_todos(mut self, todos: Value) -> Self {
        self.todos = Some(todos);
        self
    }
    /// The text blocks joined, as a model reading only text sees the result.
    pub fn text_content(&self) -> String {
        self.content
            .iter()
            .filter_map(|b| match b {
                Block::Text(t) => Some(t.as_str()),
                _ => None,
            })
            .collect()
    }
}

impl From<String> for Output {
    fn from(s: String) -> Self {
        Output::text(s)
    }
}
impl From<&str> for Output {
    fn from(s: &str) -> Self {
        Output::text(s)
    }
}
impl<T: Into<Output>, E: std::fmt::Display> From<Result<T, E>> for Output {
    fn from(r: Result<T, E>) -> Self {
        match r {
            Ok(v) => v.into(),
            Err(e) => Output::error(e.to_string()),
        }
    }
}

type Handler = Box<dyn Fn(&Context, &str) -> Result<Output, String>>;
type Meta = Box<dyn Fn() -> (String, Value)>;

/// One tool of a component: its name, how to describe it, and its handler. Every call runs in a
/// fresh instance, so the description and schema are only built when the host lists the tools,
/// never on a call.
pub struct ToolDef {
    name: &'static str,
    meta: Meta,
    handler: Handler,
}

impl ToolDef {
    /// Replace the derived schema, for tools that must match an existing schema byte for byte.
    pub fn with_parameters(mut self, parameters: Value) -> Self {
        let old = std::mem::replace(&mut self.meta, Box::new(|| (String::new(), Value::Null)));
        self.meta = Box::new(move || (old().0, parameters.clone()));
        self
    }

    /// Describe the tool lazily: `meta` returns (description, parameters schema) and runs only
    /// when the host lists the tools.
    pub fn with_meta(mut self, meta: impl Fn() -> (String, Value) + 'static) -> Self {
        self.meta = Box::new(meta);
        self
    }
}

/// Make a tool from a function over typed arguments. The schema comes from `A`.
pub fn tool<A, O, F>(name: &'static str, description: &'static str, f: F) -> ToolDef
where
    A: DeserializeOwned + schemars::JsonSchema,
    O: Into<Output>,
    F: Fn(&Context, A) -> O + 'static,
{
    ToolDef {
        name,
        meta: Box::new(move || (description.to_string(), schema_of::<A>())),
        handler: Box::new(move |ctx, raw| {
            let args: A = serde_json::from_str(raw).map_err(|e| format!("invalid arguments for tool '{name}': {e}"))?;
            Ok(f(ctx, args).into())
        }),
    }
}

/// The JSON Schema of `A` as the model sees it: an object schema without `$schema`/`title`.
pub fn schema_of<A: schemars::JsonSchema>() -> Value {
    let mut v = serde_json::to_value(schemars::schema_for!(A)).unwrap_or(Value::Null);
    if let Some(obj) = v.as_object_mut() {
        obj.remove("$schema");
        obj.remove("title");
        if !obj.contains_key("type") {
            obj.insert("type".into(), Value::String("object".into()));
        }
    }
    v
}

/// The addresses `name` resolves to, asked of the host (see `resolve-host` in the WIT); empty
/// when it does not resolve or the host refuses the lookup.
pub fn resolve_host(name: &str) -> Vec<std::net::IpAddr> {
    match host::resolve_host(name) {
        Ok(addrs) => addrs.iter().filter_map(|a| a.parse().ok()).collect(),
        Err(_) => Vec::new(),
    }
}

/// Report how far the current call has come (see `progress` in the WIT): `progress` must grow
/// from one report to the next, `total` is the value at completion when known. The host passes a
/// few reports per second to whoever listens (an MCP client's progress notifications) and drops
/// the rest, so report as often as is convenient.
///
/// ```ignore
/// for (i, chunk) in chunks.iter().enumerate() {
///     toolhost_sdk::progress(i as f64, Some(chunks.len() as f64), Some("indexing"));
///     index(chunk);
/// }
/// ```
pub fn progress(progress: f64, total: Option<f64>, message: Option<&str>) {
    host::progress(progress, total, message);
}

/// How severe a log line is.
pub use bindings::toolhost::tool::host::Level as LogLevel;

/// Write a log line: to the host's log with the tool's name, and to whoever follows the call (an
/// MCP client that set a log level gets it as `notifications/message`; at most 1000 lines per
/// call reach a client, each cut to 4096 characters).
pub fn log(level: LogLevel, message: &str) {
    host::log(level, message);
}
/// [`log`] at info level.
pub fn log_info(message: &str) {
    host::log(host::Level::Info, message);
}
/// [`log`] at warn level.
pub fn log_warn(message: &str) {
    host::log(host::Level::Warn, message);
}

/// What the user did with an elicitation.
pub use bindings::toolhost::tool::client::ElicitAction;
/// Who said a message of a sampling conversation.
pub use bindings::toolhost::tool::client::Role;

/// The user's answer to [`elicit`].
#[derive(Debug, Clone, PartialEq)]
pub struct Elicited {
    pub action: ElicitAction,
    /// On `Accept`: the answer, an object matching the requested schema.
    pub content: Option<Value>,
}

/// Ask the MCP client's user (MCP `elicitation/create`, form mode): show `message` and ask for
/// an object matching `requested_schema` (an object schema of flat string, number, integer,
/// boolean and enum properties). The tool's config must grant `capabilities.client:
/// [elicitation]`, the call must come through a client that offers elicitation, and a call may
/// ask at most 16 times (elicitation and sampling together); otherwise the error says which.
/// The call's deadline keeps running while the user answers.
pub fn elicit(message: &str, requested_schema: &Value) -> Result<Elicited, String> {
    elicited(bindings::toolhost::tool::client::elicit(message, &requested_schema.to_string())?)
}

/// [`elicit`] under your own key for the question (1-64 characters of `A-Z a-z 0-9 _ - .`). A
/// client of MCP 2026-07-28 answers in rounds, and sees this key; without one the host makes
/// one from the question.
pub fn elicit_as(key: &str, message: &str, requested_schema: &Value) -> Result<Elicited, String> {
    elicited(bindings::toolhost::tool::client::elicit_as(key, message, &requested_schema.to_string())?)
}

fn elicited(a: bindings::toolhost::tool::client::ElicitAnswer) -> Result<Elicited, String> {
    let content = match a.content {
        Some(text) => Some(serde_json::from_str(&text).map_err(|e| format!("the answer is not JSON: {e}"))?),
        None => None,
    };
    Ok(Elicited { action: a.action, content })
}

/// The answer of [`create_message`].
pub use bindings::toolhost::tool::client::SamplingAnswer;

/// Ask the MCP client's model for a completion (MCP `sampling/createMessage`, text only):
/// `messages` as (role, text), at most `max_tokens` tokens. Needs `capabilities.client:
/// [sampling]` and a client that offers sampling, like [`elicit`].
pub fn create_message(
    messages: &[(Role, &str)],
    system_prompt: Option<&str>,
    max_tokens: u32,
) -> Result<SamplingAnswer, String> {
    bindings::toolhost::tool::client::create_message(&sampling_request(messages, system_prompt, max_tokens))
}

/// [`create_message`] under your own key (see [`elicit_as`]).
pub fn create_message_as(
    key: &str,
    messages: &[(Role, &str)],
    system_prompt: Option<&str>,
    max_tokens: u32,
) -> Result<SamplingAnswer, String> {
    bindings::toolhost::tool::client::create_message_as(key, &sampling_request(messages, system_prompt, max_tokens))
}

fn sampling_request(
    messages: &[(Role, &str)],
    system_prompt: Option<&str>,
    max_tokens: u32,
) -> bindings::toolhost::tool::client::SamplingRequest {
    use bindings::toolhost::tool::client as c;
    c::SamplingRequest {
        messages: messages
            .iter()
            .map(|(role, text)| c::SamplingMessage { role: *role, text: text.to_string() })
            .collect(),
        system_prompt: system_prompt.map(str::to_string),
        max_tokens,
        temperature: None,
    }
}

/// A root the client exposes: a `file://` URI on its side (a component cannot open it).
pub use bindings::toolhost::tool::client::Root;

/// The MCP client's roots (`roots/list`), under your key if given. Needs `capabilities.client:
/// [roots]` and a client that offers roots.
pub fn list_roots(key: Option<&str>) -> Result<Vec<Root>, String> {
    bindings::toolhost::tool::client::list_roots(key)
}

#[doc(hidden)]
pub fn __list(defs: &[ToolDef]) -> Vec<types::ToolSpec> {
    defs.iter()
        .map(|d| {
            let (description, parameters) = (d.meta)();
            types::ToolSpec { name: d.name.to_string(), description, parameters: parameters.to_string() }
        })
        .collect()
}

#[doc(hidden)]
pub fn __call(
    defs: &[ToolDef],
    ctx: types::CallContext,
    name: String,
    args: String,
) -> Result<types::ToolResult, types::CallError> {
    let Some(def) = defs.iter().find(|d| d.name == name) else {
        return Err(types::CallError::UnknownTool(name));
    };
    let parse = |s: &str, what: &str| -> Result<Value, types::CallError> {
        if s.trim().is_empty() {
            return Ok(Value::Object(Default::default()));
        }
        serde_json::from_str(s).map_err(|e| types::CallError::Failed(format!("invalid {what} from host: {e}")))
    };
    let context = Context {
        thread_id: ctx.thread_id,
        tool_call_id: ctx.tool_call_id,
        config: parse(&ctx.config, "config")?,
        sandbox: ctx.sandbox.into(),
    };
    let out = (def.handler)(&context, &args).map_err(types::CallError::InvalidArguments)?;
    if let Some((class, detail)) = out.raised {
        // The host reads `failed("Class: detail")` as that exception.
        return Err(types::CallError::Failed(format!("{class}: {detail}")));
    }
    let update = if out.artifacts.is_some() || out.viewed_images.is_some() || out.todos.is_some() {
        Some(types::StateUpdate {
            artifacts: out.artifacts,
            viewed_images: out.viewed_images.map(|imgs| {
                imgs.into_iter()
                    .map(|i| types::ViewedImage {
                        path: i.path,
                        mime_type: i.mime_type,
                        size: i.size,
                        actual_path: i.actual_path,
                    })
                    .collect()
            }),
            todos: out.todos.map(|t| t.to_string()),
        })
    } else {
        None
    };
    let content = out.content.into_iter().map(block_to_wit).collect();
    Ok(types::ToolResult { content, is_error: out.is_error, update })
}

fn block_to_wit(b: Block) -> types::ContentBlock {
    match b {
        Block::Text(t) => types::ContentBlock::Text(t),
        Block::Image { bytes, mime_type } => types::ContentBlock::Image(types::Media { bytes, mime_type }),
        Block::Audio { bytes, mime_type } => types::ContentBlock::Audio(types::Media { bytes, mime_type }),
        Block::ResourceLink(l) => types::ContentBlock::ResourceLink(types::ResourceLink {
            uri: l.uri,
            name: l.name,
            mime_type: l.mime_type,
            description: l.description,
        }),
        Block::Resource { uri, mime_type, contents } => {
            types::ContentBlock::EmbeddedResource(types::EmbeddedResource {
                uri,
                mime_type,
                contents: match contents {
                    ResourceContents::Text(t) => types::ResourceContents::Text(t),
                    ResourceContents::Blob(b) => types::ResourceContents::Blob(b),
                },
            })
        }
    }
}

/// Export the listed tools as this component's `tool` interface.
///
/// `toolhost_sdk::export_tools!(tool("a", "…", a), tool("b", "…", b));`
#[macro_export]
macro_rules! export_tools {
    ($($def:expr),* $(,)?) => {
        struct __ToolhostComponent;
        impl $crate::bindings::exports::toolhost::tool::tool::Guest for __ToolhostComponent {
            fn list_tools() -> ::std::vec::Vec<$crate::bindings::toolhost::tool::types::ToolSpec> {
                $crate::__list(&[$($def),*])
            }
            fn call(
                ctx: $crate::bindings::toolhost::tool::types::CallContext,
                name: ::std::string::String,
                args: ::std::string::String,
            ) -> ::std::result::Result<$crate::bindings::toolhost::tool::types::ToolResult, $crate::bindings::toolhost::tool::types::CallError> {
                $crate::__call(&[$($def),*], ctx, name, args)
            }
        }
        $crate::bindings::export!(__ToolhostComponent with_types_in $crate::bindings);
    };
}

#[allow(unused_imports)]
use wit::Guest as _;

#[cfg(test)]
mod tests {
    /// DeerFlow's `sandbox:` defaults (`read_file_output_max_chars: 50000`,
    /// `ls_output_max_chars: 20000`, `skills.container_path: /mnt/skills`); the host checks its
    /// own copy against the same values.
    #[test]
    fn the_defaults_are_deerflows() {
        let d = super::SandboxSettings::default();
        assert_eq!(
            (d.read_file_output_max_chars, d.ls_output_max_chars, d.skills_container_path.as_str()),
            (50_000, 20_000, "/mnt/skills")
        );
        assert_eq!((d.write_file_max_bytes, d.mounts.len(), d.disabled_skills.len()), (None, 0, 0));
    }
}
