#!/usr/bin/env bash
# grep over a ~100 MB tree: toolhost's `grep` tool through the host (host/benches/file_tools.rs,
# GREP_ONLY mode) against `rg -j1` on the same tree in the same run (BENCHMARKS.md, "File tools").
# Usage: scripts/bench-grep.sh [data-dir]   (default: a fresh temp dir, removed afterwards)
# Env: RUNS (default 5), KEEP=1 keeps the tree.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
RUNS="${RUNS:-5}"
DATA="${1:-$(mktemp -d /tmp/toolhost-grep-XXXXXX)}"
WS="$DATA/threads/grep/user-data/workspace"

if ! command -v rg >/dev/null; then
    apt-get install -y ripgrep >/dev/null
fi

if [ ! -f "$WS/.complete" ]; then
    echo "generating the tree in $WS ..."
    python3 - "$WS" <<'PY'
import os, random, sys
ws = sys.argv[1]
rnd = random.Random(42)
words = [w for w in "alpha beta gamma delta epsilon zeta theta kappa lambda sigma omega function return value " \
         "struct impl match error config thread buffer reader writer stream token parser lexer node tree".split()]
def line():
    return " ".join(rnd.choice(words) for _ in range(rnd.randint(6, 14)))
def text(nbytes, todo_lines=()):
    out, size, n = [], 0, 0
    while size < nbytes:
        l = line()
        if n in todo_lines:
            l += "  # TODO: revisit"
        out.append(l)
        size += len(l) + 1
        n += 1
    return "\n".join(out) + "\n"
todo_files = set(rnd.sample(range(3000), 40))
# 3000 source-like files of ~20 KB (60 MB), 40 of them with one TODO line.
for i in range(3000):
    d = os.path.join(ws, "src", f"mod{i // 100:02d}")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, f"file{i:04d}.txt"), "w") as f:
        f.write(text(20_000, {50} if i in todo_files else ()))
# 16 large files of ~900 KB (14 MB, under grep's 1 MB cap), 8 with a TODO near the end. (Not
# *.log: DeerFlow's IGNORE_PATTERNS skip those, rg would not.)
os.makedirs(os.path.join(ws, "large"), exist_ok=True)
for i in range(16):
    with open(os.path.join(ws, "large", f"large{i:02d}.txt"), "w") as f:
        f.write(text(900_000, {12_000} if i % 2 == 0 else ()))
# 5 files over the 1 MB cap (12.5 MB): DeerFlow's grep skips them; rg is told the same cap.
os.makedirs(os.path.join(ws, "huge"), exist_ok=True)
for i in range(5):
    with open(os.path.join(ws, "huge", f"huge{i}.txt"), "w") as f:
        f.write(text(2_500_000, {100}))
# 100 binary files of 100 KB (10 MB) with NULs and a TODO: skipped as binary by both.
os.makedirs(os.path.join(ws, "bin"), exist_ok=True)
for i in range(100):
    with open(os.path.join(ws, "bin", f"blob{i:03d}.bin"), "wb") as f:
        f.write(b"\x00\x01TODO" + rnd.randbytes(100_000))
open(os.path.join(ws, ".complete"), "w").close()
PY
fi
# .complete is hidden: rg skips it and toolhost's grep finds nothing in it.
echo "tree: $(du -sh "$WS" | cut -f1), $(find "$WS" -type f | wc -l) files; $(nproc) cores; load: $(cut -d' ' -f1-3 /proc/loadavg)"

RG=(rg -j1 -i -n --max-filesize 1000000 TODO "$WS")
"${RG[@]}" >/dev/null || true # warm the page cache
times=()
for _ in $(seq "$RUNS"); do
    t0=$(date +%s%N)
    "${RG[@]}" >/dev/null || true
    t1=$(date +%s%N)
    times+=($(( (t1 - t0) / 1000 )))
done
rg_median_us=$(printf '%s\n' "${times[@]}" | sort -n | sed -n "$(( (RUNS + 1) / 2 ))p")
echo "rg -j1 matches: $("${RG[@]}" | wc -l); runs (us): ${times[*]}; median $((rg_median_us / 1000)) ms"

cd "$ROOT"
out=$(GREP_ONLY=1 GREP_TREE_DATA="$DATA" GREP_RUNS="$RUNS" cargo bench -q -p toolhost --bench file_tools 2>/dev/null)
echo "$out"
th_median_ms=$(echo "$out" | sed -n 's/^GREP_MEDIAN_MS=//p')
python3 -c "import sys; t, r = float(sys.argv[1]), int(sys.argv[2]) / 1000; print(f'toolhost {t:.0f} ms / rg -j1 {r:.0f} ms = {t / r:.2f}x (target <= 3x)')" \
    "$th_median_ms" "$rg_median_us"

if [ -z "${1:-}" ] && [ -z "${KEEP:-}" ]; then
    rm -rf "$DATA"
fi
