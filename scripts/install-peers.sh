#!/usr/bin/env bash
# Installs the third-party MCP servers the toolhost-mcp tests run against into <repo>/.peers
# (gitignored): npm server-everything + server-filesystem, and a Python venv with the `mcp` SDK
# and mcp-server-time. Versions are pinned; a stamp file makes a second run a no-op.
# Usage: scripts/install-peers.sh   (needs node/npm and python3 >= 3.10 on PATH)
set -euo pipefail

NPM_EVERYTHING="@modelcontextprotocol/server-everything@2026.8.31"
NPM_FILESYSTEM="@modelcontextprotocol/server-filesystem@2026.8.31"
# mcp 1.x: the conformance fixture (fake_mcp_server.py) imports FastMCP, which mcp 2.x renamed;
# mcp-server-time 2026.10.10 is the newest release that still runs on mcp 1.x.
PY_MCP="mcp==1.30.0"
PY_TIME="mcp-server-time==2026.10.10"

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
peers="$root/.peers"
stamp="$peers/.installed"
want="$NPM_EVERYTHING $NPM_FILESYSTEM $PY_MCP $PY_TIME"

if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" \
      && -x "$peers/npm/node_modules/.bin/mcp-server-everything" \
      && -x "$peers/npm/node_modules/.bin/mcp-server-filesystem" \
      && -x "$peers/venv/bin/mcp-server-time" ]]; then
  exit 0
fi

command -v npm >/dev/null || { echo "install-peers: npm not found on PATH" >&2; exit 1; }
command -v python3 >/dev/null || { echo "install-peers: python3 not found on PATH" >&2; exit 1; }

mkdir -p "$peers/npm"
rm -f "$stamp"
if [[ ! -f "$peers/npm/package.json" ]]; then
  printf '{"name":"toolhost-peers","private":true}\n' > "$peers/npm/package.json"
fi
echo "install-peers: npm $NPM_EVERYTHING $NPM_FILESYSTEM" >&2
(cd "$peers/npm" && npm install --silent --no-audit --no-fund --save-exact "$NPM_EVERYTHING" "$NPM_FILESYSTEM" >/dev/null)

if [[ ! -x "$peers/venv/bin/python" ]]; then
  python3 -m venv "$peers/venv"
fi
echo "install-peers: pip $PY_MCP $PY_TIME" >&2
"$peers/venv/bin/python" -m pip install --quiet --disable-pip-version-check "$PY_MCP" "$PY_TIME"

printf '%s' "$want" > "$stamp"
echo "install-peers: done ($peers)" >&2
