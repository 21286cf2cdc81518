#!/usr/bin/env bash
# Every benchmark of BENCHMARKS.md in one run, with short measurement times, then the tables:
# toolhost's figures next to DeerFlow's measured in the same run (DeerFlow's own code in a venv,
# scripts/deerflow-venv.sh; without it, the figures of spec/performance.md, named as such) and
# grep next to `rg -j1`. Medians throughout (criterion's means are printed beside its medians).
#
# Usage: scripts/bench.sh [out-dir]   (raw logs land there; default a temp dir)
# Env: GREP_DATA (the ~100 MB grep tree, default target/bench-grep, generated once and kept),
#      SKIP=grep,runtime,audit,deferred,file,deerflow (comma list), RUNS (grep runs, default 5),
#      GLOB_SCALE (default 1000,10000,100000).
set -uo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
OUT="${1:-$(mktemp -d /tmp/toolhost-bench-XXXXXX)}"
mkdir -p "$OUT"
SKIP=",${SKIP:-},"
QUICK=(--warm-up-time 0.5 --measurement-time 1.5)
export GLOB_SCALE="${GLOB_SCALE:-1000,10000,100000}"
cd "$ROOT"

skip() { [[ "$SKIP" == *",$1,"* ]]; }
step() { echo "== $1 ($(date -u +%H:%M:%S) UTC, load $(cut -d' ' -f1-3 /proc/loadavg))" >&2; }

{
    echo "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
    echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'), $(free -g | awk '/Mem:/ {print $2}') GB RAM"
    echo "rustc: $(rustc --version)"
    echo "load at start: $(cut -d' ' -f1-3 /proc/loadavg)"
} > "$OUT/machine.txt"
START_STAMP="$OUT/.start"
touch "$START_STAMP"

if ! skip file; then
    step "file tools through the host (and glob by tree size)"
    FILE_TOOLS_BREAKDOWN=1 cargo bench -q -p toolhost --bench file_tools -- "${QUICK[@]}" > "$OUT/file_tools.log" 2>&1
fi

if ! skip deerflow; then
    step "DeerFlow, same inputs"
    if VENV_LINE=$(scripts/deerflow-venv.sh 2> "$OUT/deerflow-venv.log" | tail -1) && [[ "$VENV_LINE" == PYTHONPATH=* ]]; then
        (cd /tmp && env "$VENV_LINE" "$ROOT/.venv-bench/bin/python" "$ROOT/scripts/bench-deerflow.py" \
            "$ROOT/tests/conformance/sandbox_fs.json" --runs 30 --glob-sizes "$GLOB_SCALE" \
            > "$OUT/deerflow.log" 2> "$OUT/deerflow.err") || echo "DeerFlow bench failed (see $OUT/deerflow.err)" >&2
    else
        echo "DeerFlow could not be set up (see $OUT/deerflow-venv.log): its figures come from spec/performance.md" >&2
    fi
fi

if ! skip deferred; then
    step "deferred tools: catalog_hash and tool_search, 10 000 tools"
    cargo bench -q -p toolhost-deferred --bench deferred -- "${QUICK[@]}" > "$OUT/deferred.log" 2>&1
fi

if ! skip grep; then
    step "grep over ~100 MB next to rg -j1"
    GLOB_SCALE= RUNS="${RUNS:-5}" bash scripts/bench-grep.sh "${GREP_DATA:-$ROOT/target/bench-grep}" > "$OUT/grep.log" 2>&1
fi

if ! skip runtime; then
    step "runtime: per-call overhead, host start"
    cargo bench -q -p toolhost --bench runtime -- "${QUICK[@]}" > "$OUT/runtime.log" 2>&1
fi

if ! skip audit; then
    step "bash audit"
    cargo bench -q -p toolhost-audit --bench audit -- "${QUICK[@]}" > "$OUT/audit.log" 2>&1
fi

echo "load at end: $(cut -d' ' -f1-3 /proc/loadavg)" >> "$OUT/machine.txt"
python3 scripts/bench-report.py "$OUT" "${CARGO_TARGET_DIR:-$ROOT/target}/criterion" "$START_STAMP"
echo
echo "raw logs: $OUT"
