//! The WIT contract, every version the host loads: `toolhost:tool@0.4.0` (`wit/`),
//! `toolhost:tool@0.3.0` (`wit/v0.3.0/`), `toolhost:tool@0.2.0` (`wit/v0.2.0/`) and
//! `toolhost:tool@0.1.0` (`wit/v0.1.0/`). Which one a component exports is read from its exports
//! at load; a call then goes through that version's bindings, and what an older component
//! returns is upgraded to 0.4.0's types, so the rest of the runtime handles one shape.

use serde::Serialize;
use wasmtime::component::{HasSelf, InstancePre, Linker};
use wasmtime::Store;

use super::store::HostState;

/// Bindings of `toolhost:tool@0.1.0`: the sandbox settings as a JSON string, one text result.
#[allow(missing_docs)]
pub mod v0_1 {
    wasmtime::component::bindgen!({
        world: "tool-component",
        path: "../wit/v0.1.0",
        // Exports run as futures, so a call's deadline also bounds time the guest spends blocked
        // in the host (a sleep, a slow HTTP response), where the epoch cannot interrupt it.
        exports: { default: async },
    });
}

/// Bindings of `toolhost:tool@0.2.0`: typed sandbox settings, content blocks, progress.
#[allow(missing_docs)]
pub mod v0_2 {
    wasmtime::component::bindgen!({
        world: "tool-component",
        path: "../wit/v0.2.0",
        exports: { default: async },
    });
}

/// Bindings of `toolhost:tool@0.3.0`: embedded resources, and the `client` interface (whose
/// calls wait for the MCP client's answer, so they are async on the host).
#[allow(missing_docs)]
pub mod v0_3 {
    wasmtime::component::bindgen!({
        world: "tool-component",
        path: "../wit/v0.3.0",
        imports: { "toolhost:tool/client": async },
        exports: { default: async },
    });
}

/// Bindings of `toolhost:tool@0.4.0`: questions under the component's own key, and roots.
#[allow(missing_docs)]
pub mod v0_4 {
    wasmtime::component::bindgen!({
        world: "tool-component",
        path: "../wit",
        imports: { "toolhost:tool/client": async },
        exports: { default: async },
    });
}

use v0_4::toolhost::tool::types;

/// The version of `toolhost:tool` a component was built against.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum InterfaceVersion {
    /// `toolhost:tool@0.1.0`.
    V0_1,
    /// `toolhost:tool@0.2.0`.
    V0_2,
    /// `toolhost:tool@0.3.0`.
    V0_3,
    /// `toolhost:tool@0.4.0`, the current one.
    V0_4,
}

impl InterfaceVersion {
    /// The WIT package, `toolhost:tool@0.4.0`.
    pub fn package(self) -> &'static str {
        match self {
            Self::V0_1 => "toolhost:tool@0.1.0",
            Self::V0_2 => "toolhost:tool@0.2.0",
            Self::V0_3 => "toolhost:tool@0.3.0",
            Self::V0_4 => "toolhost:tool@0.4.0",
        }
    }
}

impl std::fmt::Display for InterfaceVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.package())
    }
}

/// The `tool` interface a component exports, from its export names: the newest version wins
/// when a component has several. The error says what it exports instead.
pub fn detect<'a>(export_names: impl IntoIterator<Item = &'a str>) -> Result<InterfaceVersion, String> {
    const PREFIX: &str = "toolhost:tool/tool@";
    let mut found = None;
    let mut others = Vec::new();
    for name in export_names {
        let Some(version) = name.strip_prefix(PREFIX) else {
            others.push(name.to_string());
            continue;
        };
        // Semver: within 0.x the minor version is the breaking one; patch releases only add.
        let mut parts = version.splitn(3, '.');
        let known = match (parts.next(), parts.next()) {
            (Some("0"), Some("1")) => Some(InterfaceVersion::V0_1),
            (Some("0"), Some("2")) => Some(InterfaceVersion::V0_2),
            (Some("0"), Some("3")) => Some(InterfaceVersion::V0_3),
            (Some("0"), Some("4")) => Some(InterfaceVersion::V0_4),
            _ => None,
        };
        match known {
            Some(v) => found = found.max(Some(v)),
            None => others.push(name.to_string()),
        }
    }
    if let Some(v) = found {
        return Ok(v);
    }
    let unknown: Vec<&String> = others.iter().filter(|n| n.starts_with(PREFIX)).collect();
    if let Some(name) = unknown.first() {
        return Err(format!(
            "it exports {name}, a version this host does not load (it loads toolhost:tool@0.1, @0.2, @0.3 and @0.4)"
        ));
    }
    Err(format!(
        "it exports no toolhost:tool/tool interface (its exports: {}); build it against wit/ (toolhost:tool@0.4.0)",
        if others.is_empty() { "none".to_string() } else { others.join(", ") }
    ))
}

/// Link the `host` interface of every version (a component imports the one it was built with).
pub fn add_to_linker(linker: &mut Linker<HostState>) -> wasmtime::Result<()> {
    v0_1::ToolComponent::add_to_linker::<_, HasSelf<_>>(linker, |s| s)?;
    v0_2::ToolComponent::add_to_linker::<_, HasSelf<_>>(linker, |s| s)?;
    v0_3::ToolComponent::add_to_linker::<_, HasSelf<_>>(linker, |s| s)?;
    v0_4::ToolComponent::add_to_linker::<_, HasSelf<_>>(linker, |s| s)?;
    Ok(())
}

/// A component pre-linked with the bindings of its version.
pub enum ToolPre {
    /// A `toolhost:tool@0.1.0` component.
    V0_1(v0_1::ToolComponentPre<HostState>),
    /// A `toolhost:tool@0.2.0` component.
    V0_2(v0_2::ToolComponentPre<HostState>),
    /// A `toolhost:tool@0.3.0` component.
    V0_3(v0_3::ToolComponentPre<HostState>),
    /// A `toolhost:tool@0.4.0` component.
    V0_4(v0_4::ToolComponentPre<HostState>),
}

/// Why a call into a component did not return.
pub enum Failure {
    /// The instance could not be made (a start function trapped, a limit hit).
    Instantiate(wasmtime::Error),
    /// The export trapped or was stopped.
    Trap(wasmtime::Error),
}

/// A tool spec as any version lists it.
pub struct Spec {
    /// The tool's name.
    pub name: String,
    /// What the model reads about it.
    pub description: String,
    /// JSON Schema of its arguments, as JSON text.
    pub parameters: String,
}

impl ToolPre {
    /// Bind `pre` with the bindings of `version`.
    pub fn new(version: InterfaceVersion, pre: InstancePre<HostState>) -> wasmtime::Result<Self> {
        Ok(match version {
            InterfaceVersion::V0_1 => Self::V0_1(v0_1::ToolComponentPre::new(pre)?),
            InterfaceVersion::V0_2 => Self::V0_2(v0_2::ToolComponentPre::new(pre)?),
            InterfaceVersion::V0_3 => Self::V0_3(v0_3::ToolComponentPre::new(pre)?),
            InterfaceVersion::V0_4 => Self::V0_4(v0_4::ToolComponentPre::new(pre)?),
        })
    }

    /// The version whose bindings it uses.
    pub fn version(&self) -> InterfaceVersion {
        match self {
            Self::V0_1(_) => InterfaceVersion::V0_1,
            Self::V0_2(_) => InterfaceVersion::V0_2,
            Self::V0_3(_) => InterfaceVersion::V0_3,
            Self::V0_4(_) => InterfaceVersion::V0_4,
        }
    }

    /// Instantiate and list the tools.
    pub async fn list_tools(&self, store: &mut Store<HostState>) -> Result<Vec<Spec>, Failure> {
        // The same code for every version: only the bindings' types differ.
        macro_rules! list {
            ($pre:expr) => {{
                let instance = $pre.instantiate_async(&mut *store).await.map_err(Failure::Instantiate)?;
                let specs = instance.toolhost_tool_tool().call_list_tools(&mut *store).await.map_err(Failure::Trap)?;
                Ok(specs
                    .into_iter()
                    .map(|s| Spec { name: s.name, description: s.description, parameters: s.parameters })
                    .collect())
            }};
        }
        match self {
            Self::V0_1(pre) => list!(pre),
            Self::V0_2(pre) => list!(pre),
            Self::V0_3(pre) => list!(pre),
            Self::V0_4(pre) => list!(pre),
        }
    }

    /// Instantiate and call; a 0.1.0 component gets its sandbox settings as JSON, and what an
    /// older component returns comes back as 0.4.0's types.
    pub async fn call(
        &self,
        store: &mut Store<HostState>,
        ctx: &CallInput<'_>,
    ) -> Result<Result<types::ToolResult, types::CallError>, Failure> {
        // The same steps for every version: only the bindings' types, how the sandbox settings
        // travel, and how the result is upgraded differ.
        macro_rules! call {
            ($v:ident, $pre:expr, $sandbox:expr, $upgrade:expr) => {{
                let wit_ctx = $v::toolhost::tool::types::CallContext {
                    thread_id: ctx.thread_id.to_string(),
                    tool_call_id: ctx.tool_call_id.to_string(),
                    config: ctx.config.to_string(),
                    sandbox: $sandbox,
                };
                let instance = $pre.instantiate_async(&mut *store).await.map_err(Failure::Instantiate)?;
                let r = instance
                    .toolhost_tool_tool()
                    .call_call(&mut *store, &wit_ctx, ctx.tool, ctx.args)
                    .await
                    .map_err(Failure::Trap)?;
                Ok($upgrade(r))
            }};
        }
        match self {
            Self::V0_1(pre) => call!(v0_1, pre, ctx.sandbox.to_json(), upgrade_result),
            Self::V0_2(pre) => call!(v0_2, pre, sandbox_settings!(v0_2, ctx.sandbox), upgrade_v0_2_result),
            Self::V0_3(pre) => call!(v0_3, pre, sandbox_settings!(v0_3, ctx.sandbox), upgrade_v0_3_result),
            Self::V0_4(pre) => call!(v0_4, pre, ctx.sandbox.to_wit(), std::convert::identity),
        }
    }
}

/// What a call sends, whatever the version.
pub struct CallInput<'a> {
    /// The thread the call runs in.
    pub thread_id: &'a str,
    /// The model's id for the call.
    pub tool_call_id: &'a str,
    /// The tool's own config keys, as a JSON object.
    pub config: &'a str,
    /// The config's sandbox settings.
    pub sandbox: &'a SandboxSettings,
    /// The tool's name inside the component.
    pub tool: &'a str,
    /// The model's arguments, as a JSON object.
    pub args: &'a str,
}

/// The sandbox settings every component of a config receives (`sandbox-settings` in the WIT; a
/// JSON object with these field names for a 0.1.0 component).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SandboxSettings {
    /// `sandbox.read_file_output_max_chars`; 0 disables the cut.
    pub read_file_output_max_chars: usize,
    /// `sandbox.ls_output_max_chars`; 0 disables the cut.
    pub ls_output_max_chars: usize,
    /// The configured mounts whose host directory could be opened.
    pub mounts: Vec<SandboxMount>,
    /// `skills.container_path`.
    pub skills_container_path: String,
    /// `DEERFLOW_WRITE_FILE_MAX_BYTES`, unparsed (the tool parses it as DeerFlow does).
    pub write_file_max_bytes: Option<String>,
    /// Sandbox directories of disabled skills.
    pub disabled_skills: Vec<String>,
}

impl Default for SandboxSettings {
    /// DeerFlow's defaults.
    fn default() -> Self {
        Self {
            read_file_output_max_chars: 50_000,
            ls_output_max_chars: 20_000,
            mounts: Vec::new(),
            skills_container_path: toolhost_core::VIRTUAL_SKILLS.to_string(),
            write_file_max_bytes: None,
            disabled_skills: Vec::new(),
        }
    }
}

/// A mount as a component sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SandboxMount {
    /// The absolute path inside the sandbox (`/mnt/data`).
    pub container_path: String,
    /// Writes under it are refused.
    pub read_only: bool,
}

impl SandboxSettings {
    /// The JSON object `toolhost:tool@0.1.0` sends: these field names, in this order.
    pub fn to_json(&self) -> String {
        // Plain strings, numbers and lists: serializing cannot fail.
        serde_json::to_string(self).unwrap_or_else(|_| "{}".to_string())
    }

    fn to_wit(&self) -> types::SandboxSettings {
        sandbox_settings!(v0_4, self)
    }
}

/// `settings` (a [`SandboxSettings`]) as the `sandbox-settings` record of WIT version `$v`
/// (0.2.0 to 0.4.0 share the record; each has its own Rust type).
macro_rules! sandbox_settings {
    ($v:ident, $settings:expr) => {{
        use $v::toolhost::tool::types as t;
        let s: &SandboxSettings = $settings;
        t::SandboxSettings {
            read_file_output_max_chars: s.read_file_output_max_chars as u64,
            ls_output_max_chars: s.ls_output_max_chars as u64,
            mounts: s
                .mounts
                .iter()
                .map(|m| t::Mount { container_path: m.container_path.clone(), read_only: m.read_only })
                .collect(),
            skills_container_path: s.skills_container_path.clone(),
            write_file_max_bytes: s.write_file_max_bytes.clone(),
            disabled_skills: s.disabled_skills.clone(),
        }
    }};
}
use sandbox_settings;

/// A state update of WIT version `$v` (every version has the same record) as 0.4.0's.
macro_rules! upgrade_update {
    ($update:expr) => {
        $update.map(|u| types::StateUpdate {
            artifacts: u.artifacts,
            viewed_images: u.viewed_images.map(|images| {
                images
                    .into_iter()
                    .map(|i| types::ViewedImage {
                        path: i.path,
                        mime_type: i.mime_type,
                        size: i.size,
                        actual_path: i.actual_path,
                    })
                    .collect()
            }),
            todos: u.todos,
        })
    };
}

/// A call error of an older version as 0.4.0's (the variant has not changed).
macro_rules! upgrade_error {
    ($old:ident, $e:expr) => {
        match $e {
            $old::CallError::UnknownTool(t) => types::CallError::UnknownTool(t),
            $old::CallError::InvalidArguments(m) => types::CallError::InvalidArguments(m),
            $old::CallError::Failed(m) => types::CallError::Failed(m),
        }
    };
}

/// A result of WIT version `$old` (0.2.0 or 0.3.0) as 0.4.0's: the blocks every version since
/// 0.2.0 has, plus the arms `$extra` for what `$old` adds.
macro_rules! upgrade_blocks {
    ($old:ident, $r:expr, { $($extra:tt)* }) => {{
        use $old::toolhost::tool::types as old;
        let media = |m: old::Media| types::Media { bytes: m.bytes, mime_type: m.mime_type };
        match $r {
            Ok(r) => Ok(types::ToolResult {
                content: r
                    .content
                    .into_iter()
                    .map(|b| match b {
                        old::ContentBlock::Text(t) => types::ContentBlock::Text(t),
                        old::ContentBlock::Image(m) => types::ContentBlock::Image(media(m)),
                        old::ContentBlock::Audio(m) => types::ContentBlock::Audio(media(m)),
                        old::ContentBlock::ResourceLink(l) => types::ContentBlock::ResourceLink(types::ResourceLink {
                            uri: l.uri,
                            name: l.name,
                            mime_type: l.mime_type,
                            description: l.description,
                        }),
                        $($extra)*
                    })
                    .collect(),
                is_error: r.is_error,
                update: upgrade_update!(r.update),
            }),
            Err(e) => Err(upgrade_error!(old, e)),
        }
    }};
}

/// A 0.3.0 result as 0.4.0's: the same blocks (0.4.0 changed only the `client` interface).
fn upgrade_v0_3_result(
    r: Result<v0_3::toolhost::tool::types::ToolResult, v0_3::toolhost::tool::types::CallError>,
) -> Result<types::ToolResult, types::CallError> {
    upgrade_blocks!(v0_3, r, {
        old::ContentBlock::EmbeddedResource(e) => types::ContentBlock::EmbeddedResource(types::EmbeddedResource {
            uri: e.uri,
            mime_type: e.mime_type,
            contents: match e.contents {
                old::ResourceContents::Text(t) => types::ResourceContents::Text(t),
                old::ResourceContents::Blob(b) => types::ResourceContents::Blob(b),
            },
        }),
    })
}

/// A 0.2.0 result as 0.4.0's: the same blocks (0.3.0 only added embedded resources).
fn upgrade_v0_2_result(
    r: Result<v0_2::toolhost::tool::types::ToolResult, v0_2::toolhost::tool::types::CallError>,
) -> Result<types::ToolResult, types::CallError> {
    upgrade_blocks!(v0_2, r, {})
}

/// A 0.1.0 result as 0.4.0's: its one string becomes one text block.
fn upgrade_result(
    r: Result<v0_1::toolhost::tool::types::ToolResult, v0_1::toolhost::tool::types::CallError>,
) -> Result<types::ToolResult, types::CallError> {
    use v0_1::toolhost::tool::types as old;
    match r {
        Ok(r) => Ok(types::ToolResult {
            content: vec![types::ContentBlock::Text(r.content)],
            is_error: r.is_error,
            update: upgrade_update!(r.update),
        }),
        Err(e) => Err(upgrade_error!(old, e)),
    }
}

// The `host` interface, once per version; both share the same implementation on `HostState`.

impl v0_1::toolhost::tool::types::Host for HostState {}
impl v0_2::toolhost::tool::types::Host for HostState {}
impl v0_3::toolhost::tool::types::Host for HostState {}
impl types::Host for HostState {}

/// The `host` interface of one version, bound to `HostState`'s shared implementation: `log`
/// (the version's `level` enum mapped to tracing's) and `resolve-host`, plus what that version
/// adds.
macro_rules! host_interface {
    ($version:ident { $($extra:item)* }) => {
        impl $version::toolhost::tool::host::Host for HostState {
            fn log(&mut self, level: $version::toolhost::tool::host::Level, message: String) {
                use $version::toolhost::tool::host::Level as L;
                use toolhost_core::LogLevel;
                let level = match level {
                    L::Trace => LogLevel::Trace,
                    L::Debug => LogLevel::Debug,
                    L::Info => LogLevel::Info,
                    L::Warn => LogLevel::Warn,
                    L::Error => LogLevel::Error,
                };
                self.write_log(level, &message);
            }

            fn resolve_host(&mut self, name: String) -> Result<Vec<String>, String> {
                self.resolve_for_guest(&name)
            }

            $($extra)*
        }
    };
}

host_interface!(v0_1 {});
host_interface!(v0_2 {
    fn progress(&mut self, progress: f64, total: Option<f64>, message: Option<String>) {
        self.report_progress(progress, total, message);
    }
});
host_interface!(v0_3 {
    fn progress(&mut self, progress: f64, total: Option<f64>, message: Option<String>) {
        self.report_progress(progress, total, message);
    }
});
host_interface!(v0_4 {
    fn progress(&mut self, progress: f64, total: Option<f64>, message: Option<String>) {
        self.report_progress(progress, total, message);
    }
});

// The `client` interface (0.3.0, 0.4.0): the guest waits while the host asks the caller's
// client. Both versions share the conversions; 0.4.0 adds keys and roots.

/// An elicitation's answer as version `$v`'s record.
macro_rules! elicit_answer {
    ($v:ident, $answer:expr) => {{
        use $v::toolhost::tool::client as c;
        let answer: toolhost_core::Elicited = $answer;
        c::ElicitAnswer {
            action: match answer.action {
                toolhost_core::ElicitAction::Accept => c::ElicitAction::Accept,
                toolhost_core::ElicitAction::Decline => c::ElicitAction::Decline,
                toolhost_core::ElicitAction::Cancel => c::ElicitAction::Cancel,
            },
            content: answer.content.map(|v| v.to_string()),
        }
    }};
}

/// Version `$v`'s sampling request as the core's.
macro_rules! sampling_request {
    ($v:ident, $request:expr) => {{
        use toolhost_core::Role;
        use $v::toolhost::tool::client as c;
        let request: c::SamplingRequest = $request;
        toolhost_core::SamplingRequest {
            messages: request
                .messages
                .into_iter()
                .map(|m| toolhost_core::SamplingMessage {
                    role: match m.role {
                        c::Role::User => Role::User,
                        c::Role::Assistant => Role::Assistant,
                    },
                    text: m.text,
                })
                .collect(),
            system_prompt: request.system_prompt,
            max_tokens: request.max_tokens,
            temperature: request.temperature,
        }
    }};
}

/// A sampling answer as version `$v`'s record.
macro_rules! sampling_answer {
    ($v:ident, $answer:expr) => {{
        use toolhost_core::Role;
        use $v::toolhost::tool::client as c;
        let answer: toolhost_core::SamplingAnswer = $answer;
        c::SamplingAnswer {
            role: match answer.role {
                Role::User => c::Role::User,
                Role::Assistant => c::Role::Assistant,
            },
            text: answer.text,
            model: answer.model,
            stop_reason: answer.stop_reason,
        }
    }};
}

impl v0_3::toolhost::tool::client::Host for HostState {
    async fn elicit(
        &mut self,
        message: String,
        requested_schema: String,
    ) -> Result<v0_3::toolhost::tool::client::ElicitAnswer, String> {
        let answer = self.client.elicit(None, message, &requested_schema).await?;
        Ok(elicit_answer!(v0_3, answer))
    }

    async fn create_message(
        &mut self,
        request: v0_3::toolhost::tool::client::SamplingRequest,
    ) -> Result<v0_3::toolhost::tool::client::SamplingAnswer, String> {
        let answer = self.client.create_message(None, sampling_request!(v0_3, request)).await?;
        Ok(sampling_answer!(v0_3, answer))
    }
}

impl v0_4::toolhost::tool::client::Host for HostState {
    async fn elicit(
        &mut self,
        message: String,
        requested_schema: String,
    ) -> Result<v0_4::toolhost::tool::client::ElicitAnswer, String> {
        let answer = self.client.elicit(None, message, &requested_schema).await?;
        Ok(elicit_answer!(v0_4, answer))
    }

    async fn create_message(
        &mut self,
        request: v0_4::toolhost::tool::client::SamplingRequest,
    ) -> Result<v0_4::toolhost::tool::client::SamplingAnswer, String> {
        let answer = self.client.create_message(None, sampling_request!(v0_4, request)).await?;
        Ok(sampling_answer!(v0_4, answer))
    }

    async fn elicit_as(
        &mut self,
        key: String,
        message: String,
        requested_schema: String,
    ) -> Result<v0_4::toolhost::tool::client::ElicitAnswer, String> {
        let answer = self.client.elicit(Some(key), message, &requested_schema).await?;
        Ok(elicit_answer!(v0_4, answer))
    }

    async fn create_message_as(
        &mut self,
        key: String,
        request: v0_4::toolhost::tool::client::SamplingRequest,
    ) -> Result<v0_4::toolhost::tool::client::SamplingAnswer, String> {
        let answer = self.client.create_message(Some(key), sampling_request!(v0_4, request)).await?;
        Ok(sampling_answer!(v0_4, answer))
    }

    async fn list_roots(&mut self, key: Option<String>) -> Result<Vec<v0_4::toolhost::tool::client::Root>, String> {
        let roots = self.client.list_roots(key).await?;
        Ok(roots.into_iter().map(|r| v0_4::toolhost::tool::client::Root { uri: r.uri, name: r.name }).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_are_read_from_export_names() {
        assert_eq!(detect(["toolhost:tool/tool@0.1.0"]), Ok(InterfaceVersion::V0_1));
        assert_eq!(detect(["toolhost:tool/tool@0.2.0"]), Ok(InterfaceVersion::V0_2));
        assert_eq!(detect(["toolhost:tool/tool@0.3.0"]), Ok(InterfaceVersion::V0_3));
        assert_eq!(detect(["toolhost:tool/tool@0.4.0"]), Ok(InterfaceVersion::V0_4));
        // A patch release of 0.2 is 0.2; a component exporting both versions is served as 0.2.
        assert_eq!(detect(["toolhost:tool/tool@0.2.3"]), Ok(InterfaceVersion::V0_2));
        assert_eq!(detect(["toolhost:tool/tool@0.1.0", "toolhost:tool/tool@0.2.0"]), Ok(InterfaceVersion::V0_2));
        let e = detect(["toolhost:tool/tool@0.5.0"]).unwrap_err();
        assert!(e.contains("toolhost:tool/tool@0.5.0") && e.contains("does not load"), "{e}");
        let e = detect(["wasi:http/incoming-handler@0.2.0"]).unwrap_err();
        assert!(e.contains("no toolhost:tool/tool") && e.contains("wasi:http/incoming-handler@0.2.0"), "{e}");
        assert!(detect([]).unwrap_err().contains("(its exports: none)"));
    }

    #[test]
    fn json_settings_keep_the_0_1_0_shape() {
        let s = SandboxSettings {
            read_file_output_max_chars: 7,
            ls_output_max_chars: 0,
            mounts: vec![SandboxMount { container_path: "/mnt/data".into(), read_only: true }],
            skills_container_path: "/mnt/skills".into(),
            write_file_max_bytes: None,
            disabled_skills: vec!["/mnt/skills/public/x".into()],
        };
        // The object 0.1.0 hosts built with `json!`, key for key and in the same order.
        assert_eq!(
            s.to_json(),
            r#"{"read_file_output_max_chars":7,"ls_output_max_chars":0,"mounts":[{"container_path":"/mnt/data","read_only":true}],"skills_container_path":"/mnt/skills","write_file_max_bytes":null,"disabled_skills":["/mnt/skills/public/x"]}"#
        );
        let w = s.to_wit();
        assert_eq!((w.read_file_output_max_chars, w.ls_output_max_chars), (7, 0));
        assert_eq!(w.mounts[0].container_path, "/mnt/data");
        assert!(w.mounts[0].read_only && w.write_file_max_bytes.is_none());
    }

    /// The fields of `pub struct NAME { … }` in Rust source, in order.
    fn struct_fields(src: &str, name: &str) -> Vec<String> {
        let start = src.find(&format!("pub struct {name} {{")).unwrap_or_else(|| panic!("no struct {name}"));
        let body = &src[start..][..src[start..].find("\n}").unwrap()];
        body.lines()
            .filter_map(|l| l.trim().strip_prefix("pub ")?.split_once(':').map(|(f, _)| f.to_string()))
            .collect()
    }

    /// The fields of `record NAME { … }` in a WIT file, in order, as Rust spells them.
    fn record_fields(wit: &str, name: &str) -> Vec<String> {
        let start = wit.find(&format!("record {name} {{")).unwrap_or_else(|| panic!("no record {name}"));
        let body = &wit[start..][..wit[start..].find('}').unwrap()];
        body.lines()
            .skip(1)
            .map(str::trim)
            .filter(|l| !l.starts_with("//") && l.contains(':'))
            .map(|l| l.split_once(':').unwrap().0.replace('-', "_"))
            .collect()
    }

    #[test]
    fn the_host_and_the_guest_sdk_carry_the_same_sandbox_settings() {
        // The guest workspace cannot depend on the host's crates (nor the host on wit-bindgen's
        // guest side), so each has its own `SandboxSettings`; both must be the WIT record, field
        // for field, with DeerFlow's defaults.
        let root = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
        let sdk = std::fs::read_to_string(format!("{root}/guest-tools/sdk/src/lib.rs")).unwrap();
        let wit = std::fs::read_to_string(format!("{root}/wit/tool.wit")).unwrap();
        let host = std::fs::read_to_string(format!("{root}/host/src/runtime/wit.rs")).unwrap();
        for (rust, record) in [("SandboxSettings", "sandbox-settings"), ("SandboxMount", "mount"), ("Mount", "mount")] {
            let src = if rust == "Mount" { &sdk } else { &host };
            assert_eq!(struct_fields(src, rust), record_fields(&wit, record), "{rust} vs the WIT's {record}");
        }
        assert_eq!(struct_fields(&sdk, "SandboxSettings"), struct_fields(&host, "SandboxSettings"));
        assert_eq!(record_fields(&wit, "sandbox-settings").len(), 6);
        assert_eq!(record_fields(&wit, "mount"), ["container_path", "read_only"]);
        let json = serde_json::to_value(SandboxSettings::default()).unwrap();
        let keys: Vec<&String> = json.as_object().unwrap().keys().collect();
        assert_eq!(keys, struct_fields(&sdk, "SandboxSettings").iter().collect::<Vec<_>>());
        // The defaults are DeerFlow's (spec §"sandbox:" defaults: `read_file_output_max_chars:
        // 50000`, `ls_output_max_chars: 20000`; `skills.container_path: /mnt/skills`), checked
        // against those values here and in the SDK's own `the_defaults_are_deerflows`.
        let d = SandboxSettings::default();
        assert_eq!(
            (d.read_file_output_max_chars, d.ls_output_max_chars, d.skills_container_path.as_str()),
            (50_000, 20_000, "/mnt/skills")
        );
        assert_eq!((d.write_file_max_bytes, d.mounts.len(), d.disabled_skills.len()), (None, 0, 0));
    }

    #[test]
    fn a_0_1_0_result_becomes_one_text_block() {
        use v0_1::toolhost::tool::types as old;
        let r = upgrade_result(Ok(old::ToolResult {
            content: "hi".into(),
            is_error: true,
            update: Some(old::StateUpdate { artifacts: Some(vec!["/a".into()]), viewed_images: None, todos: None }),
        }))
        .ok()
        .unwrap();
        assert!(matches!(r.content.as_slice(), [types::ContentBlock::Text(t)] if t == "hi"));
        assert!(r.is_error);
        assert_eq!(r.update.and_then(|u| u.artifacts), Some(vec!["/a".to_string()]));
        assert!(matches!(
            upgrade_result(Err(old::CallError::Failed("ValueError: x".into()))),
            Err(types::CallError::Failed(m)) if m == "ValueError: x"
        ));
    }
}
