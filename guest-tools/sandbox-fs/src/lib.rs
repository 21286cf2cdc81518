//! `sandbox-fs`: DeerFlow's six file tools — `ls`, `read_file`, `write_file`, `str_replace`,
//! `glob`, `grep` — as one tool component, with DeerFlow's schemas, outputs and error strings.
//!
//! The sandbox is the WASI preopen, not a regex: the host preopens the thread's directories at
//! their virtual paths (`/mnt/user-data/{workspace,uploads,outputs}`), skills read-only at the
//! skills container path, the ACP workspace at `/mnt/acp-workspace` and each configured mount at
//! its container path. Virtual paths are therefore the filesystem paths; DeerFlow's path policy is
//! still applied first so every refusal reads as DeerFlow's, symlinks are resolved by reading
//! their text (a link that leaves the sandbox is never followed and its target never printed),
//! and no host path can appear in any output.
//!
//! # Call context
//!
//! `ctx.sandbox` (JSON object, every key optional):
//! - `read_file_output_max_chars` (int, default 50000; 0 disables truncation)
//! - `ls_output_max_chars` (int, default 20000; 0 disables truncation)
//! - `mounts`: `[{ "container_path": "/mnt/x", "read_only": bool }]` — configured mounts
//! - `skills_container_path` (string, default `/mnt/skills`)
//! - `write_file_max_bytes` (string or number): DeerFlow's `DEERFLOW_WRITE_FILE_MAX_BYTES`, as the
//!   host was given it (`HostOptions::write_file_max_bytes`); absent → 81920; parsed like Python
//!   `int()`, non-integer → 81920, `<= 0` disables the guard
//! - `disabled_skills`: `["/mnt/skills/public/<name>", …]` — virtual dirs of disabled skills
//!
//! `ctx.config` (this tool's keys from config.yaml): `max_results` (int) for `glob` and `grep`;
//! the effective limit is `min(clamp(requested), clamp(config))` as in DeerFlow.
//!
//! An empty `ctx.thread_id` stands for DeerFlow's missing `thread_data` ("Thread data not
//! available for local sandbox").
//!
//! # Deliberate deviations (tests/conformance/README.md)
//! 1. No host path is ever printed or written: content is written as given; symlinks leaving the
//!    sandbox are dropped from `ls`/`glob`/`grep` results instead of being reported by target.
//! 2. `str_replace` matches on the universal-newline view (as DeerFlow) but keeps every other byte
//!    of the file, CRLF included.
//! 3. `ls` lists each entry once.
//! 4. `ls` of a missing path or a file is an error, not `(empty)` — except DeerFlow's skill
//!    category roots (`custom`, `integrations`, `legacy`, `public`), which DeerFlow always has:
//!    `ls` of the skills root lists all four and a missing one lists as `(empty)`, as in DeerFlow.
//! 5. `glob`/`grep` report truncation only when a result was actually left out.

pub mod fsutil;
pub mod glob;
pub mod paths;
pub mod prefilter;
pub mod ranged;
pub mod search;
pub mod settings;
pub mod text;
pub mod tools;
pub mod wasifs;

use std::sync::OnceLock;

use serde_json::Value;
use thiserror::Error;

pub use paths::HostMap;
pub use settings::{SandboxSettings, SandboxSettingsExt};
pub use tools::{Outcome, Sandbox};

/// One tool as the model sees it.
#[derive(Debug, Clone)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    /// DeerFlow's JSON Schema of the arguments (`description` first and required).
    pub parameters: Value,
}

/// The six tools, in DeerFlow's order, with DeerFlow's descriptions and schemas.
/// The tool names, in the order of `schemas.json` (a test keeps the two in step).
pub const TOOL_NAMES: [&str; 6] = ["ls", "read_file", "write_file", "str_replace", "glob", "grep"];

pub fn specs() -> &'static [ToolSpec] {
    static SPECS: OnceLock<Vec<ToolSpec>> = OnceLock::new();
    SPECS.get_or_init(|| {
        let raw: Value = serde_json::from_str(include_str!("schemas.json")).unwrap_or(Value::Null);
        raw.as_array()
            .map(|list| {
                list.iter()
                    .map(|t| ToolSpec {
                        name: t["name"].as_str().unwrap_or_default().to_string(),
                        description: t["description"].as_str().unwrap_or_default().to_string(),
                        parameters: t["parameters"].clone(),
                    })
                    .collect()
            })
            .unwrap_or_default()
    })
}

/// Arguments the schema does not allow.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("invalid arguments for tool '{tool}': {problem}")]
pub struct ArgsError {
    pub tool: String,
    pub problem: String,
}

struct Args<'a> {
    tool: &'a str,
    v: &'a Value,
}

impl Args<'_> {
    fn err(&self, problem: String) -> ArgsError {
        ArgsError { tool: self.tool.to_string(), problem }
    }

    fn string(&self, key: &str) -> Result<String, ArgsError> {
        match self.v.get(key) {
            Some(Value::String(s)) => Ok(s.clone()),
            None | Some(Value::Null) => Err(self.err(format!("missing field `{key}`"))),
            Some(other) => Err(self.err(format!("`{key}` must be a string, got {other}"))),
        }
    }

    fn opt_string(&self, key: &str) -> Result<Option<String>, ArgsError> {
        match self.v.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(other) => Err(self.err(format!("`{key}` must be a string or null, got {other}"))),
        }
    }

    /// An integer, accepting what pydantic's lax mode accepts: integral floats and numeric strings.
    fn opt_int(&self, key: &str) -> Result<Option<i64>, ArgsError> {
        let bad = |v: &Value| self.err(format!("`{key}` must be an integer, got {v}"));
        match self.v.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Number(n)) => {
                if let Some(i) = n.as_i64() {
                    Ok(Some(i))
                } else if let Some(f) = n.as_f64().filter(|f| f.fract() == 0.0 && f.abs() < 9.0e18) {
                    Ok(Some(f as i64))
                } else if n.as_u64().is_some() {
                    Ok(Some(i64::MAX))
                } else {
                    Err(bad(&Value::Number(n.clone())))
                }
            }
            Some(Value::String(s)) => settings::python_int(s)
                .map(|i| Some(i.clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64))
                .ok_or_else(|| bad(&Value::String(s.clone()))),
            Some(other) => Err(bad(other)),
        }
    }

    /// A boolean, accepting pydantic's lax spellings (`"true"`, `"no"`, `1`, …).
    fn bool_or(&self, key: &str, default: bool) -> Result<bool, ArgsError> {
        match self.v.get(key) {
            None | Some(Value::Null) => Ok(default),
            Some(Value::Bool(b)) => Ok(*b),
            Some(Value::Number(n)) if n.as_i64() == Some(0) => Ok(false),
            Some(Value::Number(n)) if n.as_i64() == Some(1) => Ok(true),
            Some(Value::String(s)) => match s.to_ascii_lowercase().as_str() {
                "true" | "t" | "yes" | "y" | "on" | "1" => Ok(true),
                "false" | "f" | "no" | "n" | "off" | "0" => Ok(false),
                _ => Err(self.err(format!("`{key}` must be a boolean, got \"{s}\""))),
            },
            Some(other) => Err(self.err(format!("`{key}` must be a boolean, got {other}"))),
        }
    }
}

/// Run one tool. `args` is the model's argument object, `config` the tool's config keys.
pub fn call(sb: &Sandbox, tool: &str, args: &Value, config: &Value) -> Result<Outcome, ArgsError> {
    let a = Args { tool, v: args };
    if !args.is_object() {
        return Err(a.err("arguments must be a JSON object".to_string()));
    }
    // DeerFlow requires `description` (first parameter) on every file tool.
    a.string("description")?;
    let max = |d: i64| a.opt_int("max_results").map(|v| v.unwrap_or(d));
    Ok(match tool {
        "ls" => sb.ls(&a.string("path")?),
        "read_file" => sb.read_file(&a.string("path")?, a.opt_int("start_line")?, a.opt_int("end_line")?),
        "write_file" => sb.write_file(&a.string("path")?, &a.string("content")?, a.bool_or("append", false)?),
        "str_replace" => sb.str_replace(
            &a.string("path")?,
            &a.string("old_str")?,
            &a.string("new_str")?,
            a.bool_or("replace_all", false)?,
        ),
        "glob" => sb.glob(
            &a.string("pattern")?,
            &a.string("path")?,
            a.bool_or("include_dirs", false)?,
            max(200)?,
            settings::config_max_results(config),
        ),
        "grep" => sb.grep(
            &a.string("pattern")?,
            &a.string("path")?,
            a.opt_string("glob")?.as_deref(),
            a.bool_or("literal", false)?,
            a.bool_or("case_sensitive", false)?,
            max(100)?,
            settings::config_max_results(config),
        ),
        other => return Err(a.err(format!("unknown tool '{other}'"))),
    })
}

#[cfg(target_arch = "wasm32")]
mod component {
    //! The component glue: each tool builds its sandbox from the call context and runs [`call`].

    use toolhost_sdk::{Context, Output, ToolDef};

    use super::{call, specs, HostMap, Sandbox, SandboxSettings, SandboxSettingsExt};

    /// The typed settings of `toolhost:tool@0.2.0`, normalized as the JSON ones are.
    fn settings(ctx: &Context) -> SandboxSettings {
        ctx.sandbox().clone().normalized()
    }

    /// The tools in `schemas.json` order; only listing the tools reads their specs (each call is
    /// a fresh instance, so nothing parsed on a call is ever reused).
    fn def(index: usize) -> ToolDef {
        let name: &'static str = super::TOOL_NAMES[index];
        toolhost_sdk::tool(name, "", move |ctx: &Context, args: serde_json::Value| {
            let sb = Sandbox::new(settings(ctx), HostMap::identity(), !ctx.thread_id.is_empty());
            match call(&sb, name, &args, &ctx.config) {
                Ok(o) if o.is_error => Output::error(o.content),
                Ok(o) => Output::text(o.content),
                Err(e) => Output::error(e.to_string()),
            }
        })
        .with_meta(move || {
            let spec = &specs()[index];
            (spec.description.clone(), spec.parameters.clone())
        })
    }

    toolhost_sdk::export_tools!(def(0), def(1), def(2), def(3), def(4), def(5));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_names_follow_the_schema_order() {
        let names: Vec<&str> = specs().iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, TOOL_NAMES);
    }

    #[test]
    fn specs_have_description_first_and_required() {
        let names: Vec<_> = specs().iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["ls", "read_file", "write_file", "str_replace", "glob", "grep"]);
        for s in specs() {
            let props = s.parameters["properties"].as_object().unwrap();
            assert_eq!(props.keys().next().map(String::as_str), Some("description"), "{}", s.name);
            assert_eq!(s.parameters["required"][0], "description");
        }
        let rf = &specs()[1].parameters["properties"]["start_line"];
        assert_eq!(rf["anyOf"][1]["type"], "null");
    }

    #[test]
    fn argument_errors_name_the_field() {
        let sb = Sandbox::new(SandboxSettings::default(), HostMap::identity(), true);
        let e = call(&sb, "ls", &serde_json::json!({"path": "/x"}), &Value::Null).unwrap_err();
        assert_eq!(e.to_string(), "invalid arguments for tool 'ls': missing field `description`");
        let e = call(
            &sb,
            "read_file",
            &serde_json::json!({"description": "d", "path": "/x", "start_line": "a"}),
            &Value::Null,
        )
        .unwrap_err();
        assert!(e.to_string().contains("start_line"));
    }
}
