#!/usr/bin/env bash
# Installs the official MCP conformance suite (npm @modelcontextprotocol/conformance) and the
# Node 22 it needs (fs.globSync; Debian's node 20 dies at import) into <repo>/.peers/conformance
# (gitignored), at pinned versions. `tests/mcp_conformance.rs` runs it against `toolhost serve
# --http`. A stamp file makes a second run a no-op.
# Usage: scripts/install-conformance.sh   (needs npm on PATH)
set -euo pipefail

# 0.2.0-alpha.12: the newest release, with the 2026-07-28 scenarios (0.1.16, `latest`, stops at
# 2025-11-25). Changing it may change the scenario list: re-check tests/mcp-expected-failures.yaml.
NPM_CONFORMANCE="@modelcontextprotocol/conformance@0.2.0-alpha.12"
NPM_NODE="node@22.23.3"

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dir="$root/.peers/conformance"
stamp="$dir/.installed"
want="$NPM_CONFORMANCE $NPM_NODE"

if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" \
      && -x "$dir/node_modules/.bin/node" \
      && -f "$dir/node_modules/@modelcontextprotocol/conformance/dist/index.js" ]]; then
  exit 0
fi

command -v npm >/dev/null || { echo "install-conformance: npm not found on PATH" >&2; exit 1; }

mkdir -p "$dir"
rm -f "$stamp"
if [[ ! -f "$dir/package.json" ]]; then
  printf '{"name":"toolhost-conformance","private":true}\n' > "$dir/package.json"
fi
echo "install-conformance: npm $NPM_CONFORMANCE $NPM_NODE" >&2
(cd "$dir" && npm install --silent --no-audit --no-fund --save-exact "$NPM_CONFORMANCE" "$NPM_NODE" >/dev/null)
"$dir/node_modules/.bin/node" --version >/dev/null

printf '%s' "$want" > "$stamp"
echo "install-conformance: done ($dir)" >&2
