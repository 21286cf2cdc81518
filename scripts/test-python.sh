#!/usr/bin/env bash
# The Python package's tests (python/tests): a venv with pinned tools, the extension built by
# maturin in the dev profile against the workspace's target dir (a release build would compile
# wasmtime again), then pytest. scripts/test.sh calls it after the Rust tests.
#
# Usage: scripts/test-python.sh [--deerflow] [pytest args...]
#   --deerflow  also run python/tests/test_deerflow_live.py in a DeerFlow venv
#               (scripts/deerflow-venv.sh; needs DeerFlow's git history, see that script).
# Env: PYTHON (a CPython >= 3.10; default python3), CARGO_TARGET_DIR.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$PWD"
TARGET="${CARGO_TARGET_DIR:-$ROOT/target}"
VENV="$TARGET/py-venv"
WHEELS="$TARGET/py-wheels"
DEERFLOW=0
if [ "${1:-}" = "--deerflow" ]; then DEERFLOW=1; shift; fi

PY="${PYTHON:-python3}"
"$PY" -c 'import sys; assert sys.version_info >= (3, 10), sys.version' || {
    echo "test-python: $PY is older than 3.10; set PYTHON to a CPython >= 3.10" >&2
    exit 1
}
PINS=(maturin==1.9.4 pytest==8.4.2 langchain-core==1.8.3 langgraph==1.2.24 langgraph-prebuilt==1.1.3
    langgraph-checkpoint==4.3.2 pydantic==2.14.4 pyyaml==6.0.4 langchain-mcp-adapters==0.3.2 mcp==1.30.0)
if [ ! -x "$VENV/bin/python" ]; then
    "$PY" -m venv "$VENV"
fi
if [ "$(cat "$VENV/.pins" 2>/dev/null)" != "${PINS[*]}" ]; then
    "$VENV/bin/pip" install -q "${PINS[@]}"
    echo "${PINS[*]}" >"$VENV/.pins"
fi

rm -rf "$WHEELS"
# --profile dev: the workspace's dev profile (dependencies at opt-level 2), sharing the target
# dir with `cargo test`, so only the extension crate itself is compiled here.
"$VENV/bin/maturin" build -q --profile dev --auditwheel skip -m python/Cargo.toml -i "$VENV/bin/python" --out "$WHEELS"
"$VENV/bin/pip" install -q --force-reinstall --no-deps "$WHEELS"/toolhost-*.whl

# The MCP interceptor's tests serve with the toolhost binary (built already by `cargo test`).
cargo build -q -p toolhost-cli
export TOOLHOST_BIN="$TARGET/debug/toolhost"

# Run from python/tests, not python/: the installed package is the one under test.
(cd python/tests && "$VENV/bin/python" -m pytest -q -rs -p no:cacheprovider "$@" .)

if [ "$DEERFLOW" = 1 ]; then
    DF_VENV="$TARGET/py-deerflow-venv"
    line=$(bash scripts/deerflow-venv.sh "$DF_VENV" | tail -1)
    "$DF_VENV/bin/pip" install -q pytest==8.4.2
    "$DF_VENV/bin/pip" install -q --force-reinstall --no-deps "$WHEELS"/toolhost-*.whl
    (cd python/tests && env "$line" TOOLHOST_REQUIRE_DEERFLOW=1 "$DF_VENV/bin/python" -m pytest -q -rs -p no:cacheprovider test_deerflow_live.py "$@")
fi
