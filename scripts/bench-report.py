"""The tables of scripts/bench.sh, from its raw logs and criterion's estimates: toolhost next to
DeerFlow measured in the same run (or, when DeerFlow could not run, next to the figures of
spec/performance.md, said so), grep next to rg -j1, criterion benchmarks as medians with their
means beside.

Usage: python3 bench-report.py OUT_DIR CRITERION_DIR START_STAMP
"""

import glob
import json
import os
import re
import sys

out, crit_dir, stamp = sys.argv[1], sys.argv[2], sys.argv[3]
since = os.path.getmtime(stamp)


def read(name):
    p = os.path.join(out, name)
    return open(p, encoding="utf-8", errors="replace").read() if os.path.exists(p) else ""


# DeerFlow 2.1 medians of spec/performance.md, for when DeerFlow cannot run here.
SPEC = {
    "read_file small": 0.30,
    "read_file 100-200 of 1.2 MB": 0.33,
    "write_file small": 0.40,
    "ls workspace": 12.0,
    "glob **/*.py": 22.0,
    "grep TODO": 64.0,
    "catalog_hash_10k": 162.0,
}
TARGET_X = {
    "read_file small": 3,
    "read_file 100-200 of 1.2 MB": 3,
    "write_file small": 3,
    "ls workspace": 10,
    "glob **/*.py": 15,
    "grep TODO": 10,
}

print(read("machine.txt").strip())

deerflow = {}
for m in re.finditer(r"^DEERFLOW (\S.*?) median_ms=([\d.]+) runs=(\d+)", read("deerflow.log"), re.M):
    deerflow[m.group(1)] = float(m.group(2))
same_run = bool(deerflow)
if not same_run:
    print("\nDeerFlow did not run here: its figures below are spec/performance.md's (another run, another load).")

ft = read("file_tools.log")
rows = re.findall(r"^(\S.*?)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)x$", ft, re.M)
if rows:
    print("\n### File tools through Toolhost::call (median and p99 of 300 calls)\n")
    print("| operation | toolhost median | p99 | DeerFlow median | source | speed-up | target |")
    print("|---|---|---|---|---|---|---|")
    for name, med, p99, _spec_df, _x in rows:
        med, p99 = float(med), float(p99)
        df = deerflow.get(f"file:{name}")
        src = "same run"
        if df is None:
            df, src = SPEC.get(name), "performance.md"
        x = df / med if df else float("nan")
        t = TARGET_X.get(name)
        verdict = f">= {t}x: {'met' if x >= t else 'missed'}" if t else ""
        print(f"| {name} | {med:.3f} ms | {p99:.3f} ms | {df:.3f} ms | {src} | {x:.1f}x | {verdict} |")
    rss = re.search(r"peak RSS \(VmHWM\): (\d+) KiB", ft)
    if rss:
        print(f"\npeak RSS of the bench process: {int(rss.group(1)) / 1024:.0f} MiB")

bd = re.findall(r"^  (\S.*?)\s{2,}([\d.]+)$", ft, re.M)
if bd:
    print("\n### read_file layer by layer (medians of 2000 calls, µs)\n")
    print("| layer | µs |")
    print("|---|---|")
    for name, us in bd:
        print(f"| {name} | {us} |")

gs = re.findall(r"^GLOB_SCALE files=(\d+) median_ms=([\d.]+) runs=(\d+) us_per_file=([\d.]+)", ft, re.M)
if gs:
    print("\n### glob **/*.py by tree size (directories of 100 files, 1 in 1 000 a .py)\n")
    print("| files | toolhost median | µs per file | DeerFlow median (same run) | speed-up |")
    print("|---|---|---|---|---|")
    for n, ms, _runs, per in gs:
        df = deerflow.get(f"glob_tree:{n}")
        dfs = f"{df:.1f} ms" if df else "—"
        x = f"{df / float(ms):.1f}x" if df else "—"
        print(f"| {int(n):,} | {float(ms):.2f} ms | {float(per):.2f} | {dfs} | {x} |")

dl = read("deferred.log")
dm = re.findall(r"^DEFERRED_MEDIAN (\S.*?)\s{2,}([\d.]+) ms \(min ([\d.]+)\)", dl, re.M)
if dm:
    h = re.search(r"catalog_hash ([0-9a-f]{16})", dl)
    print(f"\n### catalog_hash, 10 000 MCP tools (medians; catalog_hash {h.group(1) if h else '?'})\n")
    df = deerflow.get("catalog_hash_10k")
    src = "same run" if df else "performance.md"
    df = df or SPEC["catalog_hash_10k"]
    print(f"DeerFlow `DeferredToolCatalog.hash` (conversion + json.dumps + sha256): {df:.1f} ms ({src})\n")
    print("| path | toolhost median | min | vs DeerFlow | target |")
    print("|---|---|---|---|---|")
    for name, med, mn in dm:
        med = float(med)
        target = "<= 20 ms: " + ("met" if med <= 20 else "missed") if "catalog_hash" in name else ""
        print(f"| {name} | {med:.2f} ms | {float(mn):.2f} ms | {df / med:.1f}x | {target} |")

gl = read("grep.log")
table = [l for l in gl.splitlines() if l.startswith("|")]
if table:
    tree = next((l for l in gl.splitlines() if l.startswith("tree:")), "")
    print(f"\n### grep over the ~100 MB tree next to rg -j1 (same process, run after run; {tree})\n")
    print("\n".join(table))

# Criterion: the estimates of benchmarks run since the start, median first.
est = []
for p in glob.glob(os.path.join(crit_dir, "**", "new", "estimates.json"), recursive=True):
    if os.path.getmtime(p) < since:
        continue
    try:
        e = json.load(open(p))
        b = json.load(open(os.path.join(os.path.dirname(p), "benchmark.json")))
    except (OSError, ValueError):
        continue
    est.append((b.get("full_id", p), e["median"]["point_estimate"], e["mean"]["point_estimate"]))
if est:
    print("\n### criterion benchmarks of this run (median; criterion's mean beside)\n")
    print("| benchmark | median | mean |")
    print("|---|---|---|")

    def fmt(ns):
        return f"{ns / 1e6:.2f} ms" if ns >= 1e6 else f"{ns / 1e3:.2f} µs" if ns >= 1e3 else f"{ns:.0f} ns"

    for name, med, mean in sorted(est):
        print(f"| {name} | {fmt(med)} | {fmt(mean)} |")

rt = read("runtime.log")
extra = [l for l in rt.splitlines() if l.startswith(("  first start", "  second start", "  ratio", "  Runtime::new", "memory", "  after"))]
if extra:
    print("\n### runtime: host start and memory\n")
    print("\n".join(extra))
