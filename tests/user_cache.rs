//! First use and the per-user precompile cache, through the binary: a fresh install lists and
//! runs its bundled tools without compiling anything (their native code is built into the
//! binary), and a component compiled by one command is ready for any other command of the same
//! user, whatever its working directory or data dir.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::{json, Value};

/// A user's home: `XDG_CACHE_HOME` and `XDG_DATA_HOME` inside it, nothing else shared.
struct Home {
    dir: tempfile::TempDir,
}

impl Home {
    fn new() -> Self {
        Self { dir: tempfile::tempdir().unwrap() }
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    fn cache(&self) -> PathBuf {
        self.path("xdg-cache/toolhost")
    }

    fn command(&self, cwd: &Path) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_toolhost"));
        c.env("HOME", self.dir.path())
            .env("XDG_CACHE_HOME", self.path("xdg-cache"))
            .env("XDG_DATA_HOME", self.path("xdg-data"))
            .env_remove("TOOLHOST_HOME")
            .env_remove("TOOLHOST_CONFIG")
            .current_dir(cwd);
        c
    }

    fn run(&self, cwd: &Path, args: &[&str]) -> Output {
        let o = self.command(cwd).args(args).output().unwrap();
        assert!(o.status.success(), "{args:?}: {}{}", text(&o.stdout), text(&o.stderr));
        o
    }

    /// The artifacts in the user's cache: (name, inode).
    fn artifacts(&self) -> Vec<(String, u64)> {
        let mut v: Vec<_> = std::fs::read_dir(self.cache())
            .map(|rd| {
                rd.flatten()
                    .map(|e| (e.file_name().to_string_lossy().into_owned(), e.metadata().unwrap().ino()))
                    .filter(|(n, _)| n.ends_with(".cwasm"))
                    .collect()
            })
            .unwrap_or_default();
        v.sort();
        v
    }
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

const BUNDLED_CONFIG: &str = "tools:
  - {name: read_file, group: file:read, use: \"deerflow.sandbox.tools:read_file_tool\"}
  - {name: write_file, group: file:write, use: \"deerflow.sandbox.tools:write_file_tool\"}
  - {name: web_search, group: web, use: \"deerflow.community.ddg_search.tools:web_search_tool\"}
  - {name: hello, group: demo, use: hello}
";

#[test]
fn a_fresh_install_lists_and_reads_without_compiling() {
    let home = Home::new();
    let project = home.path("project");
    std::fs::create_dir_all(&project).unwrap();
    std::fs::write(project.join("config.yaml"), BUNDLED_CONFIG).unwrap();

    let o = home.run(&project, &["tools", "--json"]);
    let listed: Value = serde_json::from_slice(&o.stdout).unwrap();
    let names: Vec<&str> = listed.as_array().unwrap().iter().filter_map(|t| t["name"].as_str()).collect();
    for n in ["read_file", "write_file", "web_search", "hello"] {
        assert!(names.contains(&n), "{n}: {names:?}");
    }

    // Over MCP, as an agent meets it: tools/list, then a read_file.
    let mut child = home
        .command(&project)
        .arg("serve")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut ask = |id: u64, method: &str, params: Value| -> Value {
        let msg = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        writeln!(stdin, "{msg}").unwrap();
        if method == "initialize" {
            writeln!(stdin, "{}", json!({"jsonrpc": "2.0", "method": "notifications/initialized"})).unwrap();
        }
        loop {
            let line = lines.next().expect("the server answers").unwrap();
            let v: Value = serde_json::from_str(&line).unwrap();
            if v["id"] == id {
                return v;
            }
        }
    };
    let client =
        json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}});
    ask(1, "initialize", client);
    let tools = ask(2, "tools/list", json!({}));
    assert!(tools["result"]["tools"].as_array().unwrap().iter().any(|t| t["name"] == "read_file"), "{tools}");
    let args = json!({"description": "d", "path": "/mnt/user-data/workspace/a.md", "content": "alpha\n"});
    ask(3, "tools/call", json!({"name": "write_file", "arguments": args}));
    let read = ask(
        4,
        "tools/call",
        json!({"name": "read_file", "arguments": {"description": "d", "path": "/mnt/user-data/workspace/a.md"}}),
    );
    assert_eq!(read["result"]["content"][0]["text"], "alpha\n", "{read}");
    drop(stdin);
    child.wait().unwrap();

    // Nothing was compiled: a compile would have left its artifact in the user's cache, which
    // was in use (created, with its key).
    assert!(home.cache().is_dir() && home.path("xdg-data/toolhost/keys/precompile-cache.key").is_file());
    assert_eq!(home.artifacts(), vec![], "a bundled component was compiled");
    assert!(!project.join(".toolhost/cache").exists());
}

#[test]
fn a_component_compiled_in_one_directory_is_ready_in_another() {
    let home = Home::new();
    let hello = Path::new(toolhost::bundled::GUEST_DIR).join("legacy_hello.wasm");
    let (a, b) = (home.path("a"), home.path("b"));
    for d in [&a, &b] {
        std::fs::create_dir_all(d).unwrap();
        std::fs::write(
            d.join("config.yaml"),
            format!("tools:\n  - {{name: legacy_hello, group: demo, use: {}}}\n", hello.display()),
        )
        .unwrap();
    }
    // Compiled once, by `inspect` in a…
    home.run(&a, &["inspect", hello.to_str().unwrap()]);
    let compiled = home.artifacts();
    assert_eq!(compiled.len(), 1, "{compiled:?}");
    // …then loaded, not compiled again, by `tools` and `call` in b with another data dir.
    let o = home.run(&b, &["tools"]);
    assert!(text(&o.stdout).contains("legacy_hello"), "{}", text(&o.stdout));
    let o = home.run(&b, &["--data-dir", "elsewhere", "call", "legacy_hello", "{\"name\": \"B\"}"]);
    assert!(text(&o.stdout).contains("Hello, B."), "{}", text(&o.stdout));
    assert_eq!(home.artifacts(), compiled, "the artifact was written again");
    // Thread data stays in each data dir; no cache next to it.
    for d in [a.join(".toolhost"), b.join(".toolhost"), b.join("elsewhere")] {
        assert!(!d.join("cache").exists(), "{}", d.display());
    }
    // The key is outside the cache, private.
    let key = home.path("xdg-data/toolhost/keys/precompile-cache.key");
    assert_eq!(std::fs::metadata(&key).unwrap().permissions().mode() & 0o777, 0o600);
    assert_eq!(std::fs::metadata(home.cache()).unwrap().permissions().mode() & 0o777, 0o700);
}

#[test]
fn a_cache_directory_that_is_a_link_or_open_to_others_is_not_used() {
    let home = Home::new();
    let hello = Path::new(toolhost::bundled::GUEST_DIR).join("legacy_hello.wasm");
    let project = home.path("p");
    std::fs::create_dir_all(&project).unwrap();
    let elsewhere = home.path("someone-elses");
    std::fs::create_dir_all(&elsewhere).unwrap();
    std::fs::set_permissions(&elsewhere, std::fs::Permissions::from_mode(0o700)).unwrap();
    std::fs::create_dir_all(home.path("xdg-cache")).unwrap();
    std::os::unix::fs::symlink(&elsewhere, home.cache()).unwrap();
    let o = home.run(&project, &["inspect", hello.to_str().unwrap()]);
    let err = text(&o.stderr);
    assert!(err.contains("not used") && err.contains("a link is not followed"), "{err}");
    assert_eq!(std::fs::read_dir(&elsewhere).unwrap().count(), 0, "something was written through the link");

    std::fs::remove_file(home.cache()).unwrap();
    std::fs::create_dir(home.cache()).unwrap();
    std::fs::set_permissions(home.cache(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let o = home.run(&project, &["inspect", hello.to_str().unwrap()]);
    let err = text(&o.stderr);
    assert!(err.contains("not used") && err.contains("writable by everyone"), "{err}");
    assert_eq!(home.artifacts(), vec![]);
}
