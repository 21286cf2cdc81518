//! Tool authoring: `toolhost new` writes a ready-to-build tool project (Rust, Python or
//! JavaScript) against the WIT contract embedded in this binary; `toolhost build` runs the
//! project's toolchain, loads the result with the host's own inspection and prints its sha256
//! and the `tools:` entry to paste into config.yaml.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context as _};

/// The languages a project can be written in.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lang {
    Rust,
    Python,
    Js,
}

impl Lang {
    fn name(self) -> &'static str {
        match self {
            Lang::Rust => "Rust",
            Lang::Python => "Python",
            Lang::Js => "JavaScript",
        }
    }
}

/// The WIT contract (`wit/tool.wit`).
const TOOL_WIT: &str = include_str!("../../wit/tool.wit");

/// The pinned toolchain versions `scripts/install-authoring-toolchains.sh` installs.
const COMPONENTIZE_PY: &str = "componentize-py==0.25.1";
const JCO: &str = "@bytecodealliance/jco@1.35.0 @bytecodealliance/componentize-js@0.22.0";

/// `(path in the project, contents)`; `__NAME__` is replaced by the project name, `__TOOL__` by
/// the tool's name (the project name with `-` as `_`).
type Files = &'static [(&'static str, &'static str)];

const COMMON: Files = &[("wit/tool.wit", TOOL_WIT)];

const RUST: Files = &[
    ("Cargo.toml", include_str!("templates/rust/Cargo.toml.tmpl")),
    ("Cargo.lock", include_str!("../../guest-tools/Cargo.lock")),
    ("src/lib.rs", include_str!("templates/rust/lib.rs")),
    ("tests/toolhost.rs", include_str!("templates/rust/toolhost_test.rs")),
    ("vendor/toolhost-sdk/Cargo.toml", include_str!("templates/rust/sdk-Cargo.toml.tmpl")),
    ("vendor/toolhost-sdk/src/lib.rs", include_str!("../../guest-tools/sdk/src/lib.rs")),
    ("vendor/toolhost-sdk/src/http.rs", include_str!("../../guest-tools/sdk/src/http.rs")),
    ("README.md", include_str!("templates/rust/README.md")),
    ("config.yaml", include_str!("templates/config.yaml")),
    (".gitignore", "/target\n/build\n/.toolhost\n"),
];

const PYTHON: Files = &[
    ("app.py", include_str!("templates/python/app.py")),
    ("toolhost_sdk.py", include_str!("../../guest-tools/sdk-python/toolhost_sdk.py")),
    ("test_tool.py", include_str!("templates/python/test_tool.py")),
    ("README.md", include_str!("templates/python/README.md")),
    ("config.yaml", include_str!("templates/config.yaml")),
    (".gitignore", "/build\n/.toolhost\n__pycache__/\n"),
];

const JS: Files = &[
    ("app.js", include_str!("templates/js/app.js")),
    ("toolhost-sdk.js", include_str!("../../guest-tools/sdk-js/toolhost-sdk.js")),
    ("test.mjs", include_str!("templates/js/test.mjs")),
    ("package.json", include_str!("templates/js/package.json")),
    ("README.md", include_str!("templates/js/README.md")),
    ("config.yaml", include_str!("templates/config.yaml")),
    (".gitignore", "/build\n/.toolhost\nnode_modules/\n"),
];

/// The WIT a Python or JavaScript project builds against (`guest-tools/sdk-wit`): the SDK worlds
/// (`tool-component-py`, `tool-component-js`), toolhost's contract and the WASI packages they use.
const SDK_WIT: Files = &[
    ("wit/world.wit", include_str!("../../guest-tools/sdk-wit/world.wit")),
    ("wit/deps/toolhost-tool/tool.wit", TOOL_WIT),
    ("wit/deps/wasi-cli/cli.wit", include_str!("../../guest-tools/sdk-wit/deps/wasi-cli/cli.wit")),
    ("wit/deps/wasi-clocks/clocks.wit", include_str!("../../guest-tools/sdk-wit/deps/wasi-clocks/clocks.wit")),
    (
        "wit/deps/wasi-filesystem/filesystem.wit",
        include_str!("../../guest-tools/sdk-wit/deps/wasi-filesystem/filesystem.wit"),
    ),
    ("wit/deps/wasi-http/http.wit", include_str!("../../guest-tools/sdk-wit/deps/wasi-http/http.wit")),
    ("wit/deps/wasi-io/io.wit", include_str!("../../guest-tools/sdk-wit/deps/wasi-io/io.wit")),
    ("wit/deps/wasi-random/random.wit", include_str!("../../guest-tools/sdk-wit/deps/wasi-random/random.wit")),
    ("wit/deps/wasi-sockets/sockets.wit", include_str!("../../guest-tools/sdk-wit/deps/wasi-sockets/sockets.wit")),
];

/// `toolhost new NAME --lang L [--dir DIR]`: write the project; returns what to print.
pub fn new_project(name: &str, lang: Lang, dir: Option<&Path>) -> anyhow::Result<String> {
    check_name(name)?;
    let dir = dir.map(Path::to_path_buf).unwrap_or_else(|| PathBuf::from(name));
    if dir.exists() {
        let empty = std::fs::read_dir(&dir).with_context(|| format!("cannot read {}", dir.display()))?.next().is_none();
        if !empty {
            bail!("{} already exists and is not empty; choose another --dir", dir.display());
        }
    }
    let tool = name.replace('-', "_");
    let files: Vec<(&str, &str)> = match lang {
        Lang::Rust => COMMON.iter().chain(RUST).copied().collect(),
        // The SDK worlds (wit/world.wit) include tool.wit from wit/deps.
        Lang::Python => PYTHON.iter().chain(SDK_WIT).copied().collect(),
        Lang::Js => JS.iter().chain(SDK_WIT).copied().collect(),
    };
    for (rel, text) in files {
        let path = dir.join(rel);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).with_context(|| format!("cannot create {}", parent.display()))?;
        }
        let text = text.replace("__NAME__", name).replace("__TOOL__", &tool);
        std::fs::write(&path, text).with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(format!(
        "created {} tool project '{name}' in {} (tool `{tool}`)\nnext: toolhost build {}\n",
        lang.name(),
        dir.display(),
        dir.display()
    ))
}

/// A project name: lower-case ASCII letters, digits, `-` and `_`, starting with a letter (it
/// names the crate, the component file and, with `_` for `-`, the tool).
fn check_name(name: &str) -> anyhow::Result<()> {
    let ok = name.len() <= 64
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_');
    if !ok {
        bail!(
            "invalid project name '{name}': use 1-64 lower-case letters, digits, '-' or '_', starting with a letter \
             (it names the tool, with '_' for '-')"
        );
    }
    Ok(())
}

/// Which language `dir` is written in, from the files `toolhost new` writes.
fn detect(dir: &Path) -> anyhow::Result<Lang> {
    if dir.join("Cargo.toml").is_file() {
        Ok(Lang::Rust)
    } else if dir.join("app.py").is_file() {
        Ok(Lang::Python)
    } else if dir.join("app.js").is_file() {
        Ok(Lang::Js)
    } else if !dir.is_dir() {
        bail!("{} is not a directory", dir.display())
    } else {
        bail!(
            "{} is not a tool project: expected Cargo.toml (Rust), app.py (Python) or app.js (JavaScript); \
             `toolhost new NAME --lang rust|python|js` writes one",
            dir.display()
        )
    }
}

/// The project's name: the directory's `build`-independent name from its manifest or folder.
fn project_name(dir: &Path, lang: Lang) -> anyhow::Result<String> {
    if lang == Lang::Rust {
        let manifest = std::fs::read_to_string(dir.join("Cargo.toml"))
            .with_context(|| format!("cannot read {}", dir.join("Cargo.toml").display()))?;
        let name = manifest
            .lines()
            .skip_while(|l| l.trim() != "[package]")
            .find_map(|l| l.trim().strip_prefix("name").map(str::trim).and_then(|r| r.strip_prefix('=')))
            .map(|v| v.trim().trim_matches('"').to_string());
        return name.with_context(|| format!("{}: no [package] name", dir.join("Cargo.toml").display()));
    }
    let abs = std::fs::canonicalize(dir).with_context(|| format!("cannot resolve {}", dir.display()))?;
    let base = abs.file_name().and_then(|n| n.to_str()).unwrap_or("tool");
    let name: String = base
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c.to_ascii_lowercase() } else { '-' })
        .collect();
    Ok(if name.is_empty() { "tool".to_string() } else { name })
}

/// A program on PATH (or the override in `env_var`), else an error naming the toolchain and how
/// to install it.
fn find_tool(program: &str, env_var: &str, missing: &str) -> anyhow::Result<OsString> {
    if let Some(p) = std::env::var_os(env_var).filter(|v| !v.is_empty()) {
        return Ok(p);
    }
    let found = std::env::var_os("PATH")
        .map(|paths| std::env::split_paths(&paths).any(|d| is_executable(&d.join(program))))
        .unwrap_or(false);
    if found {
        Ok(OsString::from(program))
    } else {
        bail!("{program} not found on PATH (nor ${env_var}): {missing}")
    }
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::metadata(p).map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0).unwrap_or(false)
}

fn run(mut cmd: Command, what: &str) -> anyhow::Result<()> {
    eprintln!("toolhost build: {what}");
    let status = cmd.status().with_context(|| format!("cannot run {what}"))?;
    if !status.success() {
        bail!("{what} failed ({status}); its output is above");
    }
    Ok(())
}

/// The Rolldown config `toolhost build` hands `jco componentize --bundle-config`.
const JS_BUNDLE_CONFIG: &str = concat!(
    "// Written by `toolhost build`: toolhost:tool/* are the component's WIT imports, not npm modules.\n",
    "export default { external: [/^toolhost:/] };\n",
);

/// Build the project in `dir` with its language's toolchain; returns the component file.
fn compile(dir: &Path, lang: Lang, name: &str) -> anyhow::Result<PathBuf> {
    let out_dir = dir.join("build");
    std::fs::create_dir_all(&out_dir).with_context(|| format!("cannot create {}", out_dir.display()))?;
    let out = out_dir.join(format!("{name}.wasm"));
    match lang {
        Lang::Rust => {
            let cargo = find_tool("cargo", "CARGO", "install Rust with rustup (https://rustup.rs)")?;
            if let Ok(o) = Command::new("rustup").args(["target", "list", "--installed"]).output() {
                let installed = String::from_utf8_lossy(&o.stdout);
                if o.status.success() && !installed.lines().any(|l| l.trim() == "wasm32-wasip2") {
                    bail!("the Rust target wasm32-wasip2 is not installed: run `rustup target add wasm32-wasip2`");
                }
            }
            let target_dir = match std::env::var_os("CARGO_TARGET_DIR").filter(|v| !v.is_empty()) {
                Some(t) => PathBuf::from(t),
                None => dir.join("target"),
            };
            let mut cmd = Command::new(cargo);
            cmd.args(["build", "--release", "--target", "wasm32-wasip2", "--manifest-path"])
                .arg(dir.join("Cargo.toml"))
                .arg("--target-dir")
                .arg(&target_dir);
            run(cmd, "cargo build --release --target wasm32-wasip2")?;
            let built = target_dir.join("wasm32-wasip2/release").join(format!("{}.wasm", name.replace('-', "_")));
            std::fs::copy(&built, &out)
                .with_context(|| format!("cannot copy {} to {}", built.display(), out.display()))?;
        }
        Lang::Python => {
            let py = find_tool(
                "componentize-py",
                "TOOLHOST_COMPONENTIZE_PY",
                &format!(
                    "the Python toolchain is componentize-py from PyPI: `pip install '{COMPONENTIZE_PY}'` \
                     (in a toolhost checkout, scripts/install-authoring-toolchains.sh installs it in \
                     .peers/componentize-py/bin)"
                ),
            )?;
            // A project from `toolhost new` builds against the SDK world (wasi:http for `fetch`);
            // one with only wit/tool.wit (written before the SDK world existed) against the
            // contract's own world.
            let world = if dir.join("wit/world.wit").is_file() { "tool-component-py" } else { "tool-component" };
            let mut cmd = Command::new(py);
            cmd.current_dir(dir).args(["-d", "wit", "-w", world, "componentize", "app", "-o"]).arg(&out);
            run(cmd, "componentize-py componentize app")?;
        }
        Lang::Js => {
            let jco = find_tool(
                "jco",
                "TOOLHOST_JCO",
                &format!(
                    "the JavaScript toolchain is jco with componentize-js from npm (Node 22+): \
                     `npm install {JCO}` and put node_modules/.bin on PATH (in a toolhost checkout, \
                     scripts/install-authoring-toolchains.sh installs them in .peers/componentize-js)"
                ),
            )?;
            // The bundler would look for `toolhost:tool/...` as npm modules and print a warning
            // box for each; they are the component's WIT imports, so tell it they are external
            // (jco already does so for `wasi:`).
            let bundle_config = out_dir.join("bundle.config.mjs");
            std::fs::write(&bundle_config, JS_BUNDLE_CONFIG)
                .with_context(|| format!("cannot write {}", bundle_config.display()))?;
            let mut cmd = Command::new(jco);
            cmd.current_dir(dir)
                .args(["componentize", "app.js", "--bundle", "--bundle-config"])
                .arg(&bundle_config)
                .args(["--wit", "wit", "--world-name", "tool-component-js", "-o"])
                .arg(&out);
            run(cmd, "jco componentize app.js")?;
        }
    }
    Ok(out)
}

/// `toolhost build [DIR]`: build, load with the host's inspection, print the pin.
pub fn build(dir: &Path, cache: &super::UserCache) -> anyhow::Result<String> {
    let lang = detect(dir)?;
    // Absolute, so the toolchains (run in the project directory) write where we read.
    let dir = &std::fs::canonicalize(dir).with_context(|| format!("cannot resolve {}", dir.display()))?;
    let name = project_name(dir, lang)?;
    let started = std::time::Instant::now();
    let out = compile(dir, lang, &name)?;
    let built_in = started.elapsed();
    let out = std::fs::canonicalize(&out).with_context(|| format!("cannot resolve {}", out.display()))?;
    // Loading compiles the component into the user's precompile cache, so the first call after
    // a build, from any directory, does not pay for it.
    let runtime = cache.runtime()?;
    let i = runtime.inspect(&out).with_context(|| format!("the built component {} does not load", out.display()))?;
    let mut text = format!(
        "built {} ({} bytes, {} in {:.1}s)\nsha256: {}\ntools:\n",
        out.display(),
        i.size,
        lang.name(),
        built_in.as_secs_f64(),
        i.sha256
    );
    for t in &i.tools {
        text += &format!("  {} — {}\n", t.name, t.description);
    }
    let project_config = dir.join("config.yaml");
    let grants = match std::fs::read_to_string(&project_config) {
        Ok(yaml) => project_grants(&yaml, &name).unwrap_or_else(|e| {
            eprintln!("warning: {}: {e}; the entry below grants the defaults", project_config.display());
            Vec::new()
        }),
        Err(_) => Vec::new(),
    };
    text += "\npaste into config.yaml:\n\ntools:\n";
    for t in &i.tools {
        let pin = format!("{}@sha256:{}:{}", out.display(), i.sha256, t.name);
        let granted = grants.iter().find(|g| g.tool == t.name);
        text += &tools_entry(&t.name, &pin, granted);
    }
    Ok(text)
}

/// A project config entry's group and `capabilities:` block, for the tool it names (its `:tool`
/// suffix, else the entry's `name`).
#[derive(Debug, PartialEq)]
struct Granted {
    tool: String,
    group: String,
    /// The `capabilities:` block as YAML lines (no indentation), as the project grants it.
    capabilities: Vec<String>,
}

/// The grants the project's own config.yaml gives the component `build/NAME.wasm`: each
/// `tools:` entry whose `use:` is that file (pinned or not, with or without `:tool`).
fn project_grants(yaml: &str, name: &str) -> anyhow::Result<Vec<Granted>> {
    let doc: serde_yaml::Value = serde_yaml::from_str(yaml).context("not valid YAML")?;
    let file = format!("{name}.wasm");
    let mut out = Vec::new();
    let entries = doc.get("tools").and_then(serde_yaml::Value::as_sequence).map(Vec::as_slice).unwrap_or_default();
    for e in entries {
        let Some(use_) = e.get("use").and_then(serde_yaml::Value::as_str) else { continue };
        // `path[@sha256:HEX][:tool]`: the path is what comes before `@`, or before the first `:`
        // after the file name.
        let Some(at) = use_.find(&file) else { continue };
        let path_end = at + file.len();
        if !(at == 0 || use_[..at].ends_with('/')) {
            continue;
        }
        let rest = &use_[path_end..];
        let rest = match rest.strip_prefix("@sha256:") {
            Some(pinned) => pinned.find(':').map_or("", |i| &pinned[i..]),
            None => rest,
        };
        let tool = match rest.strip_prefix(':') {
            Some(t) => t.to_string(),
            None if rest.is_empty() => match e.get("name").and_then(serde_yaml::Value::as_str) {
                Some(n) => n.to_string(),
                None => continue,
            },
            None => continue,
        };
        let group = e.get("group").and_then(serde_yaml::Value::as_str).unwrap_or("tools").to_string();
        let capabilities = match e.get("capabilities") {
            None | Some(serde_yaml::Value::Null) => Vec::new(),
            Some(c @ serde_yaml::Value::Mapping(_)) => {
                serde_yaml::to_string(c).context("its capabilities block")?.lines().map(str::to_string).collect()
            }
            Some(_) => anyhow::bail!("the capabilities of the entry using {use_} are not a mapping"),
        };
        out.push(Granted { tool, group, capabilities });
    }
    Ok(out)
}

/// One pinned `tools:` entry. Without a project grant: no files, 128 MiB, 10 s.
fn tools_entry(tool: &str, pin: &str, granted: Option<&Granted>) -> String {
    let group = granted.map_or("tools", |g| g.group.as_str());
    let mut text = format!("  - name: {tool}\n    group: {group}\n    use: {pin}\n    capabilities:");
    match granted.filter(|g| !g.capabilities.is_empty()) {
        Some(g) => {
            for l in &g.capabilities {
                text += &format!("\n      {l}");
            }
        }
        None => text += "\n      filesystem: none\n      memory_mb: 128\n      timeout_s: 10",
    }
    text + "\n"
}

#[cfg(test)]
mod tests {
    use super::*;

    const PROJECT: &str = "tools:\n  - name: summarize_data\n    group: data\n    use: build/csv-summary.wasm\n    capabilities:\n      filesystem: user-data   # a comment\n      network: [api.example.com]\n      env: [KEY]\n      memory_mb: 256\n      timeout_s: 20\n  - name: other\n    use: build/other-csv-summary.wasm\n    capabilities: {filesystem: outputs}\n";

    #[test]
    fn the_printed_entry_carries_the_project_grants() {
        let grants = project_grants(PROJECT, "csv-summary").unwrap();
        assert_eq!(grants.len(), 1, "{grants:?}");
        let entry = tools_entry("summarize_data", "/p/build/csv-summary.wasm@sha256:ab:summarize_data", grants.first());
        assert_eq!(
            entry,
            "  - name: summarize_data\n    group: data\n    use: /p/build/csv-summary.wasm@sha256:ab:summarize_data\n    capabilities:\n      filesystem: user-data\n      network:\n      - api.example.com\n      env:\n      - KEY\n      memory_mb: 256\n      timeout_s: 20\n"
        );
        // What is printed is a config toolhost reads back with the same grants.
        let caps: toolhost::runtime::capabilities::CapabilitiesConfig = serde_yaml::from_value(
            serde_yaml::from_str::<serde_yaml::Value>(&format!("tools:\n{entry}")).unwrap()["tools"][0]["capabilities"]
                .clone(),
        )
        .unwrap();
        assert_eq!(caps.filesystem, Some(toolhost::runtime::capabilities::FilesGrant::UserData));
        assert_eq!(caps.env, Some(vec!["KEY".to_string()]));
        assert_eq!(caps.memory_mb, Some(256));
    }

    #[test]
    fn entries_are_matched_by_file_pin_and_tool() {
        let yaml = "tools:\n  - {name: a, use: 'build/t.wasm@sha256:0123:a', capabilities: {filesystem: read-only}}\n  - {name: b, use: './build/t.wasm:b', group: g}\n  - {name: c, use: build/t.wasm.bak}\n  - {name: d, use: build/t.wasm}\n";
        let grants = project_grants(yaml, "t").unwrap();
        assert_eq!(
            grants,
            vec![
                Granted { tool: "a".into(), group: "tools".into(), capabilities: vec!["filesystem: read-only".into()] },
                Granted { tool: "b".into(), group: "g".into(), capabilities: vec![] },
                Granted { tool: "d".into(), group: "tools".into(), capabilities: vec![] },
            ]
        );
        // No grant in the project: the defaults, no files.
        assert!(tools_entry("b", "x", grants.get(1)).contains("filesystem: none"));
        assert!(project_grants("tools: [", "t").unwrap_err().to_string().contains("not valid YAML"));
        assert!(project_grants("tools:\n  - {name: t, use: build/t.wasm, capabilities: 3}\n", "t").is_err());
    }
}
