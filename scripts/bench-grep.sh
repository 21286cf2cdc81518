#!/usr/bin/env bash
# grep over a ~100 MB tree: toolhost's `grep` tool through the host (host/benches/file_tools.rs,
# GREP_ONLY mode) against `rg -j1` on the same tree, run after run in the same process, for a
# literal (`TODO`), an alternation (`TODO|FIXME`) and a pattern with classes (`fn\s+\w+_test`);
# medians and their ratios (BENCHMARKS.md, "File tools").
# Usage: scripts/bench-grep.sh [data-dir]   (default: a fresh temp dir, removed afterwards)
# Env: RUNS (default 5), KEEP=1 keeps the tree, GREP_PATTERNS (newline-separated) overrides the
# three patterns.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
RUNS="${RUNS:-5}"
DATA="${1:-$(mktemp -d /tmp/toolhost-grep-XXXXXX)}"
WS="$DATA/threads/grep/user-data/workspace"

if ! command -v rg >/dev/null; then
    apt-get install -y ripgrep >/dev/null 2>&1 || { apt-get update >/dev/null && apt-get install -y ripgrep >/dev/null; }
fi

# v2 of the tree adds FIXME lines and `fn …_test` definitions, so that every pattern has matches.
if [ ! -f "$WS/.complete-v2" ]; then
    rm -rf "$WS"
    echo "generating the tree in $WS ..."
    python3 - "$WS" <<'PY'
import os, random, sys
ws = sys.argv[1]
rnd = random.Random(42)
words = [w for w in "alpha beta gamma delta epsilon zeta theta kappa lambda sigma omega function return value " \
         "struct impl match error config thread buffer reader writer stream token parser lexer node tree".split()]
def line():
    return " ".join(rnd.choice(words) for _ in range(rnd.randint(6, 14)))
def text(nbytes, todo_lines=(), extra=None):
    out, size, n = [], 0, 0
    while size < nbytes:
        l = line()
        if n in todo_lines:
            l += "  # TODO: revisit"
        if extra and n == extra[0]:
            l += extra[1]
        out.append(l)
        size += len(l) + 1
        n += 1
    return "\n".join(out) + "\n"
todo_files = set(rnd.sample(range(3000), 40))
fixme_files = set(rnd.sample(range(3000), 40))
test_files = set(rnd.sample(range(3000), 30))
under_files = set(rnd.sample(range(3000), 300))
# 3000 source-like files of ~20 KB (60 MB), 40 of them with one TODO line, 40 with a FIXME, 30
# with a `fn …_test` definition and 300 with a `_test` that is not one (prefilter hits to reject).
for i in range(3000):
    d = os.path.join(ws, "src", f"mod{i // 100:02d}")
    os.makedirs(d, exist_ok=True)
    extra = None
    if i in fixme_files:
        extra = (70, "  // FIXME: later")
    elif i in test_files:
        extra = (90, f"  fn parse{i}_test() {{}}")
    elif i in under_files:
        extra = (110, "  self_test")
    with open(os.path.join(d, f"file{i:04d}.txt"), "w") as f:
        f.write(text(20_000, {50} if i in todo_files else (), extra))
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
open(os.path.join(ws, ".complete-v2"), "w").close()
PY
fi
# .complete-v2 is hidden: rg skips it and toolhost's grep finds nothing in it.
echo "tree: $(du -sh "$WS" | cut -f1), $(find "$WS" -type f | wc -l) files; $(nproc) cores; load: $(cut -d' ' -f1-3 /proc/loadavg)"

cd "$ROOT"
rg -j1 -i -n --max-filesize 1000000 TODO "$WS" >/dev/null || true # warm the page cache
out=$(GREP_ONLY=1 GREP_TREE_DATA="$DATA" GREP_RUNS="$RUNS" cargo bench -q -p toolhost --bench file_tools 2>/dev/null)
echo "$out" | grep -v '^GREP_RESULT'
echo
echo "| pattern | toolhost median (through the host) | rg -j1 median | ratio | target |"
echo "|---|---|---|---|---|"
echo "$out" | sed -n 's/^GREP_RESULT //p' | python3 -c '
import re, sys
targets = {"TODO": 2.0}
for line in sys.stdin:
    f = dict(re.findall(r"(\w+)=(\"(?:[^\"\\]|\\.)*\"|\S+)", line))
    p = f["pattern"][1:-1].replace("\\\\", "\\")
    t, r, x = float(f["toolhost_ms"]), float(f["rg_ms"]), float(f["ratio"])
    target = targets.get(p, 3.0)
    verdict = "met" if x <= target else "missed"
    cell = p.replace("|", "\\|")
    print(f"| `{cell}` | {t:.0f} ms | {r:.0f} ms | {x:.2f}x | <= {target:g}x: {verdict} |")
'

if [ -z "${1:-}" ] && [ -z "${KEEP:-}" ]; then
    rm -rf "$DATA"
fi
