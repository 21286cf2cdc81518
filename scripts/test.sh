#!/usr/bin/env bash
# Run every test: installs what the tests need (the wasm32-wasip2 target, MCP peers at pinned
# versions), then the host workspace's tests and the guest components' native tests.
set -euo pipefail
cd "$(dirname "$0")/.."
rustup target add wasm32-wasip2 >/dev/null 2>&1 || rustup target add wasm32-wasip2
bash scripts/install-peers.sh
bash scripts/install-acp-peers.sh
cargo test --workspace --all-targets
cargo test --manifest-path guest-tools/Cargo.toml --workspace --exclude hostile --target-dir target/guest-native
