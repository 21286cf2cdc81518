//! MCP tools through the host, against real servers installed by scripts/install-peers.sh:
//! the MCP layer assembles after the builtins, calls reach the server, one broken server hides
//! nothing else, and deferred tools stay hidden until `tool_search` promotes them.

use std::process::{Command, Output};

use serde_json::Value;

#[path = "support/paths.rs"]
mod paths;
use paths::peer;

struct Setup {
    dir: tempfile::TempDir,
}

impl Setup {
    fn new(tool_search: bool) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let everything = peer("npm/node_modules/.bin/mcp-server-everything");
        let time = peer("venv/bin/mcp-server-time");
        let ext = serde_json::json!({
            "mcpServers": {
                "everything": {"type": "stdio", "command": everything, "args": ["stdio"], "session_init_timeout": 60},
                "time": {"type": "stdio", "command": time, "args": ["--local-timezone", "UTC"], "session_init_timeout": 60,
                         "routing": {"mode": "prefer", "priority": 10, "keywords": ["clock", "timezone"]}},
                "broken": {"type": "stdio", "command": "/nonexistent/mcp-server", "args": []},
                "off": {"enabled": false, "type": "stdio", "command": "/nonexistent/other"}
            }
        });
        std::fs::write(dir.path().join("extensions_config.json"), serde_json::to_vec_pretty(&ext).unwrap()).unwrap();
        std::fs::write(
            dir.path().join("config.yaml"),
            format!(
                "tools:\n  - {{name: hello, group: demo, use: hello}}\ntool_search:\n  enabled: {tool_search}\n  auto_promote_top_k: 3\n"
            ),
        )
        .unwrap();
        Setup { dir }
    }

    fn run(&self, args: &[&str]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_toolhost"))
            .args(args)
            .arg("--config")
            .arg(self.dir.path().join("config.yaml"))
            .env("TOOLHOST_HOME", self.dir.path().join("data"))
            .env_remove("DEER_FLOW_EXTENSIONS_CONFIG_PATH")
            .output()
            .unwrap()
    }

    /// Run and check the exit status: 0 for a command that did its job, 2 for a `call` whose
    /// tool answered with an error (the CLI's contract, `cli/src`), 1 for a failed command.
    fn run_expect(&self, args: &[&str], code: i32) -> Output {
        let o = self.run(args);
        assert_eq!(
            o.status.code(),
            Some(code),
            "{args:?}: stdout {} stderr {}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        o
    }

    /// The JSON a command printed, after checking its exit status (see [`Setup::run_expect`]).
    fn json(&self, args: &[&str], code: i32) -> Value {
        let o = self.run_expect(args, code);
        serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&o.stdout)))
    }
}

/// Exit statuses of the CLI.
const OK: i32 = 0;
const TOOL_ERROR: i32 = 2;

fn tool_names(v: &Value) -> Vec<String> {
    v.as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap().to_string()).collect()
}

#[test]
fn mcp_tools_assemble_after_builtins_and_answer_calls() {
    let s = Setup::new(false);
    let tools = s.json(&["tools", "--json"], OK);
    let names = tool_names(&tools);
    let pos = |n: &str| names.iter().position(|x| x == n).unwrap_or_else(|| panic!("{n} missing from {names:?}"));
    assert!(pos("hello") < pos("present_files"));
    assert!(pos("present_files") < pos("everything_echo"));
    assert!(pos("time_get_current_time") > pos("present_files"));
    assert!(!names.iter().any(|n| n.starts_with("broken_") || n.starts_with("off_")), "{names:?}");
    let echo = tools.as_array().unwrap().iter().find(|t| t["name"] == "everything_echo").unwrap();
    assert_eq!(echo["source"]["kind"], "mcp");
    assert_eq!(echo["parameters"]["properties"]["message"]["type"], "string");

    let out = s.json(&["call", "everything_echo", r#"{"message": "hi there"}"#, "--json"], OK);
    assert_eq!(out["status"], "success", "{out}");
    assert!(out["content"].as_str().unwrap().contains("hi there"), "{out}");

    let out = s.json(&["call", "time_get_current_time", r#"{"timezone": "UTC"}"#, "--json"], OK);
    assert_eq!(out["status"], "success", "{out}");
    assert!(out["content"].as_str().unwrap().contains("UTC"), "{out}");

    let o = s.run_expect(&["tools", "--no-mcp"], OK);
    assert!(!String::from_utf8_lossy(&o.stdout).contains("everything_echo"));
}

#[test]
fn deferred_tools_are_hidden_until_tool_search_promotes_them() {
    let s = Setup::new(true);
    let view = tool_names(&s.json(&["tools", "--json", "--thread", "t1"], OK));
    assert!(view.contains(&"tool_search".to_string()) && view.contains(&"hello".to_string()), "{view:?}");
    assert!(!view.iter().any(|n| n.starts_with("everything_") || n.starts_with("time_")), "{view:?}");

    let o = s.run_expect(&["tools", "--explain"], OK);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("<available-deferred-tools>\n") && out.contains("everything_echo\n"), "{out}");
    assert!(out.contains("deferred: hidden until tool_search promotes it"), "{out}");

    let refused = s.json(&["call", "everything_echo", r#"{"message": "x"}"#, "--thread", "t1", "--json"], TOOL_ERROR);
    assert_eq!(refused["status"], "error", "{refused}");
    assert!(refused["content"].as_str().unwrap().contains("tool_search"), "{refused}");

    let found =
        s.json(&["call", "tool_search", r#"{"query": "select:everything_echo"}"#, "--thread", "t1", "--json"], OK);
    assert_eq!(found["status"], "success", "{found}");
    assert_eq!(found["update"]["promoted"]["names"], serde_json::json!(["everything_echo"]), "{found}");
    let hash = found["update"]["promoted"]["catalog_hash"].as_str().unwrap().to_string();
    assert_eq!(hash.len(), 16);
    let schemas: Value = serde_json::from_str(found["content"].as_str().unwrap()).unwrap();
    assert_eq!(schemas[0]["name"], "everything_echo", "{schemas}");

    let view = tool_names(&s.json(&["tools", "--json", "--thread", "t1"], OK));
    assert!(view.contains(&"everything_echo".to_string()), "{view:?}");
    let echoed = s.json(&["call", "everything_echo", r#"{"message": "now allowed"}"#, "--thread", "t1", "--json"], OK);
    assert_eq!(echoed["status"], "success", "{echoed}");

    // Promotions belong to their thread.
    let other = tool_names(&s.json(&["tools", "--json", "--thread", "t2"], OK));
    assert!(!other.contains(&"everything_echo".to_string()));

    // McpRouting: a user message with a routing keyword promotes the preferred server's tools.
    let o = s.run_expect(&["route", "what does the clock say in my timezone?", "--thread", "t3"], OK);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success() && out.starts_with("promoted: ") && out.contains("time_"), "{out}");
    let routed = tool_names(&s.json(&["tools", "--json", "--thread", "t3"], OK));
    assert!(routed.iter().any(|n| n.starts_with("time_")), "{routed:?}");
    assert!(!routed.iter().any(|n| n.starts_with("everything_")), "{routed:?}");
}
