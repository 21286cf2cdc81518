#!/usr/bin/env bash
# Installs the Python ACP SDK (PyPI `agent-client-protocol`, imported as `acp`) into
# <repo>/.peers/acp-venv (gitignored); the toolhost-acp tests run their Python ACP agents with it.
# The version is pinned; a stamp file makes a second run a no-op.
# Usage: scripts/install-acp-peers.sh   (needs python3 >= 3.10 on PATH)
set -euo pipefail

PY_ACP="agent-client-protocol==0.12.1"

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$root/.peers/acp-venv"
stamp="$venv/.installed"

if [[ -f "$stamp" && "$(cat "$stamp")" == "$PY_ACP" && -x "$venv/bin/python" ]] \
   && "$venv/bin/python" -c 'import acp' 2>/dev/null; then
  exit 0
fi

command -v python3 >/dev/null || { echo "install-acp-peers: python3 not found on PATH" >&2; exit 1; }

mkdir -p "$root/.peers"
rm -f "$stamp"
if [[ ! -x "$venv/bin/python" ]]; then
  python3 -m venv "$venv"
fi
echo "install-acp-peers: pip $PY_ACP" >&2
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check "$PY_ACP"
"$venv/bin/python" -c 'import acp' || { echo "install-acp-peers: 'import acp' failed after install" >&2; exit 1; }

printf '%s' "$PY_ACP" > "$stamp"
echo "install-acp-peers: done ($venv)" >&2
