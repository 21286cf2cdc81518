#!/usr/bin/env bash
# Build everything (host, guest components) and run the main job on the bundled config.yaml:
# check it, show the assembled tools and why, and run a few tool calls in a demo thread.
set -euo pipefail
cd "$(dirname "$0")/.."
rustup target add wasm32-wasip2 >/dev/null 2>&1 || rustup target add wasm32-wasip2
cargo build --bin toolhost
bin=./target/debug/toolhost
export TOOLHOST_HOME="${TOOLHOST_HOME:-$PWD/.toolhost}"
thread="demo-$(date +%s)"
echo "== toolhost check"
$bin check --config config.yaml
echo "== toolhost tools --explain"
$bin tools --config config.yaml --explain
echo "== calls in thread $thread"
$bin call hello '{"name": "toolhost"}' --thread "$thread" --config config.yaml
$bin call write_file '{"description": "demo", "path": "/mnt/user-data/workspace/notes.md", "content": "# Notes\nTODO: try toolhost\n"}' --thread "$thread" --config config.yaml
$bin call grep '{"description": "demo", "pattern": "TODO", "path": "/mnt/user-data/workspace"}' --thread "$thread" --config config.yaml
$bin call read_file '{"description": "demo", "path": "/mnt/user-data/workspace/notes.md"}' --thread "$thread" --config config.yaml --json
echo "== toolhost serve: the same tools as an MCP server (stdio); initialize, then one tools/call"
{
  printf '%s\n' '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"quickstart","version":"0"}}}'
  printf '%s\n' '{"jsonrpc":"2.0","method":"notifications/initialized"}'
  printf '%s\n' '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"ls","arguments":{"description":"demo","path":"/mnt/user-data/workspace"}}}'
  sleep 3 # keep stdin open until the answers are out
} | $bin serve --config config.yaml --thread "$thread"
