#!/usr/bin/env bash
# The Python package's tests (python/tests): a venv with pinned tools, the extension as the
# workspace's dev build made it (see below), then pytest. scripts/test.sh calls it after the Rust tests.
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
DEERFLOW=0
if [ "${1:-}" = "--deerflow" ]; then DEERFLOW=1; shift; fi

PY="${PYTHON:-python3}"
"$PY" -c 'import sys; assert sys.version_info >= (3, 10), sys.version' || {
    echo "test-python: $PY is older than 3.10; set PYTHON to a CPython >= 3.10" >&2
    exit 1
}
PINS=(pytest==8.4.2 langchain-core==1.8.3 langgraph==1.2.24 langgraph-prebuilt==1.1.3
    langgraph-checkpoint==4.3.2 pydantic==2.14.4 pyyaml==6.0.4 langchain-mcp-adapters==0.3.2 mcp==1.30.0)
if [ ! -x "$VENV/bin/python" ]; then
    "$PY" -m venv "$VENV"
fi
if [ "$(cat "$VENV/.pins" 2>/dev/null)" != "${PINS[*]}" ]; then
    "$VENV/bin/pip" install -q "${PINS[@]}"
    echo "${PINS[*]}" >"$VENV/.pins"
fi

# The extension as the workspace's build made it (`cargo build --workspace` builds python/ with
# everything else). maturin builds the one package on its own, so cargo unifies its
# dependencies' features differently and compiles most of them, wasmtime included, a second
# time (10 minutes here); a user's `pip install ./python` does that once, CI need not. The venv
# imports the package from a staging directory: the Python sources and the built module, named
# as maturin names it.
cargo build -q --workspace --all-targets
STAGE="$TARGET/py-stage"
rm -rf "$STAGE"
mkdir -p "$STAGE"
cp -r python/python/toolhost "$STAGE/"
cp "$TARGET/debug/lib_native.so" "$STAGE/toolhost/_native.abi3.so"
stage_into() {
    "$1/bin/pip" uninstall -q -y toolhost >/dev/null 2>&1 || true
    echo "$STAGE" >"$("$1/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/toolhost-stage.pth"
}
stage_into "$VENV"

# The MCP interceptor's tests serve with the toolhost binary (built by the workspace build).
export TOOLHOST_BIN="$TARGET/debug/toolhost"

# Run from python/tests, not python/: the installed package is the one under test.
(cd python/tests && "$VENV/bin/python" -m pytest -q -rs -p no:cacheprovider "$@" .)

if [ "$DEERFLOW" = 1 ]; then
    DF_VENV="$TARGET/py-deerflow-venv"
    line=$(bash scripts/deerflow-venv.sh "$DF_VENV" | tail -1)
    "$DF_VENV/bin/pip" install -q pytest==8.4.2
    stage_into "$DF_VENV"
    (cd python/tests && env "$line" TOOLHOST_REQUIRE_DEERFLOW=1 "$DF_VENV/bin/python" -m pytest -q -rs -p no:cacheprovider test_deerflow_live.py "$@")
fi
