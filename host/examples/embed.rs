//! The shortest embedding: open a host from config text, call tools in a thread, read its state.
use serde_json::json;
use toolhost::{HostOptions, ToolCall, Toolhost};

const CONFIG: &str = "tools:
  - {name: write_file, group: file:write, use: 'deerflow.sandbox.tools:write_file_tool'}
  - {name: read_file, group: file:read, use: 'deerflow.sandbox.tools:read_file_tool'}
";

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let data = std::env::temp_dir().join(format!("toolhost-embed-{}", std::process::id()));
    let host = Toolhost::open(HostOptions::from_yaml(CONFIG, ".").data_dir(&data)).await?;
    let thread = host.thread("demo");
    let path = "/mnt/user-data/outputs/hello.md";
    let args = json!({"description": "greet", "path": path, "content": "# Hello\n"});
    println!("write_file: {}", thread.call(ToolCall::new("write_file", args)).await?.text());
    let read = thread.call(ToolCall::new("read_file", json!({"description": "check", "path": path}))).await?;
    println!("read_file: {}", read.text());
    let shown = thread.call(ToolCall::new("present_files", json!({"filepaths": [path]})).with_id("c3")).await?;
    println!("present_files: {}", shown.text());
    println!("artifacts: {:?}", thread.state().await?.artifacts);
    let wrong = thread.call(ToolCall::new("no_such_tool", json!({}))).await?;
    println!("{:?}: {}", wrong.error_kind(), wrong.text());
    std::fs::remove_dir_all(&data)?;
    Ok(())
}
