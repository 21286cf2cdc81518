#!/usr/bin/env bash
# Run every test: installs what the tests need (the wasm32-wasip2 target, MCP peers at pinned
# versions, the Python and JS component toolchains), then the host workspace's tests and the guest components' native tests.
set -euo pipefail
cd "$(dirname "$0")/.."
rustup target add wasm32-wasip2 >/dev/null 2>&1 || rustup target add wasm32-wasip2
bash scripts/install-peers.sh
bash scripts/install-acp-peers.sh
bash scripts/install-conformance.sh
# componentize-py and jco + componentize-js for the authoring tests (tests/authoring*.rs).
bash scripts/install-authoring-toolchains.sh
bash scripts/install-oci-peers.sh
# PostgreSQL server binaries for the state-store tests (tests/state_postgres.rs).
bash scripts/install-postgres.sh
cargo test --workspace --all-targets --no-fail-fast
# The embedding examples (docs/embedding.md) run and print what the docs say they print.
out=$(cargo run -q -p toolhost --example embed)
echo "$out"
grep -qx 'artifacts: \["/mnt/user-data/outputs/hello.md"\]' <<<"$out"
out=$(cargo run -q -p toolhost --example custom_tool)
echo "$out"
grep -qx 'word_count: 7 words' <<<"$out"
# The Python package (python/): the extension the workspace build made, staged beside its sources,
# tested with pytest in a venv of pinned versions (scripts/test-python.sh).
bash scripts/test-python.sh
cargo test --manifest-path guest-tools/Cargo.toml --workspace --exclude hostile --target-dir target/guest-native
