#!/usr/bin/env bash
# Installs the toolchains `toolhost build` runs for Python and JavaScript tool projects into
# <repo>/.peers (gitignored), at pinned versions:
#   .peers/componentize-py/   a venv with componentize-py (PyPI)
#   .peers/componentize-js/   an npm prefix with @bytecodealliance/jco + componentize-js
#                             (and Node 22 from the npm package `node` when the system node is older)
# A stamp file per toolchain makes a second run a no-op. The authoring tests find them there
# (or on PATH). Usage: scripts/install-authoring-toolchains.sh   (needs python3 >= 3.10 and npm)
set -euo pipefail

PY_COMPONENTIZE="componentize-py==0.25.1"
NPM_JCO="@bytecodealliance/jco@1.35.0"
# The componentize-js release jco 1.35.0 depends on (^0.22.0), so npm installs it once.
NPM_COMPONENTIZE_JS="@bytecodealliance/componentize-js@0.22.0"
NPM_NODE="node@22.23.3"
# preview2-shim 0.26.1 dropped its default "/" preopen, which jco-transpile 0.15 (under jco 1.35)
# needs to read a WIT directory ("failed to get path metadata"); 0.26.0 still has it.
SHIM_OVERRIDE="@bytecodealliance/preview2-shim@0.26.0"

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
peers="$root/.peers"
mkdir -p "$peers"

# --- Python: componentize-py in a venv ---
pyenv="$peers/componentize-py"
pystamp="$pyenv/.installed"
# A venv records its own path: one moved or copied from elsewhere no longer runs, so the check
# runs the tool rather than trusting the stamp alone.
if [[ -f "$pystamp" && "$(cat "$pystamp")" == "$PY_COMPONENTIZE" ]] \
  && "$pyenv/bin/componentize-py" --version >/dev/null 2>&1; then
  :
else
  command -v python3 >/dev/null || { echo "install-authoring-toolchains: python3 not found on PATH" >&2; exit 1; }
  rm -rf "$pyenv"
  python3 -m venv "$pyenv"
  echo "install-authoring-toolchains: pip $PY_COMPONENTIZE" >&2
  "$pyenv/bin/python" -m pip install --quiet --disable-pip-version-check "$PY_COMPONENTIZE"
  "$pyenv/bin/componentize-py" --version >/dev/null
  printf '%s' "$PY_COMPONENTIZE" > "$pystamp"
fi

# --- JavaScript: jco + componentize-js in an npm prefix ---
js="$peers/componentize-js"
jsstamp="$js/.installed"
node_major="$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0)"
want_js="$NPM_JCO $NPM_COMPONENTIZE_JS $SHIM_OVERRIDE"
if (( node_major < 22 )); then want_js="$want_js $NPM_NODE"; fi
if [[ -f "$jsstamp" && "$(cat "$jsstamp")" == "$want_js" ]] && "$js/node_modules/.bin/jco" --version >/dev/null 2>&1; then
  :
else
  command -v npm >/dev/null || { echo "install-authoring-toolchains: npm not found on PATH" >&2; exit 1; }
  rm -f "$jsstamp"
  mkdir -p "$js"
  printf '{"name":"toolhost-authoring","private":true,"overrides":{"@bytecodealliance/preview2-shim":"%s"}}\n' \
    "${SHIM_OVERRIDE##*@}" > "$js/package.json"
  echo "install-authoring-toolchains: npm $want_js" >&2
  # shellcheck disable=SC2086
  (cd "$js" && npm install --silent --no-audit --no-fund --save-exact $NPM_JCO $NPM_COMPONENTIZE_JS ${want_js#"$NPM_JCO $NPM_COMPONENTIZE_JS $SHIM_OVERRIDE"} >/dev/null)
  "$js/node_modules/.bin/jco" --version >/dev/null
  printf '%s' "$want_js" > "$jsstamp"
fi
echo "install-authoring-toolchains: done ($pyenv, $js)" >&2
