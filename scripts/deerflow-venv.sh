#!/usr/bin/env bash
# A Python venv that can import DeerFlow's harness, for timing DeerFlow in the same run as
# toolhost (scripts/bench-deerflow.py, scripts/bench.sh). deerflow-harness 2.1.0 is not on PyPI
# (only a 0.0.1 placeholder is), so the harness and its extension API come from DeerFlow's own
# git history at the commit the conformance vectors were generated from (f1f4af99, version
# 2.1.0), and only the dependencies the timed modules import come from PyPI, pinned to the
# versions in conformance/sandbox_fs.json's provenance.
#
# Usage: scripts/deerflow-venv.sh [venv-dir]   (default .venv-bench; not committed)
# Env: DEERFLOW_GIT (default /work/.mirror/bytedance+deer-flow/repo), PYTHON (a python3.12).
# Prints the PYTHONPATH to use on its last line: `PYTHONPATH=...`.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
VENV="${1:-$ROOT/.venv-bench}"
GIT_DIR="${DEERFLOW_GIT:-/work/.mirror/bytedance+deer-flow/repo}"
COMMIT=f1f4af99bbf1cffb83a80744bf6e4a44ee8f24be
SRC="$VENV/deerflow-src"

if [ ! -x "$VENV/bin/python" ]; then
    # A pyenv shim named python3.12 may exist without that version selected: check it runs.
    PY="${PYTHON:-$(python3.12 -c 'import sys; print(sys.executable)' 2>/dev/null || echo "$HOME/.pyenv/versions/3.12.1/bin/python")}"
    "$PY" -m venv "$VENV" >&2
fi
if [ ! -f "$VENV/.deps-ok" ]; then
    "$VENV/bin/pip" install -q "langchain-core==1.8.3" "langchain==1.5.2" "langgraph==1.2.24" "pydantic==2.14.4" \
        pyyaml python-dotenv "sqlalchemy[asyncio]" aiosqlite langchain-openai mcp >&2
    touch "$VENV/.deps-ok"
fi
if [ ! -d "$SRC/backend/packages/harness/deerflow" ]; then
    mkdir -p "$SRC"
    git -C "$GIT_DIR" archive "$COMMIT" backend/packages/harness/deerflow backend/packages/extension-api | tar -x -C "$SRC"
fi
echo "PYTHONPATH=$SRC/backend/packages/harness:$SRC/backend/packages/extension-api"
