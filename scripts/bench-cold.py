"""Cold and first use of toolhost, whole processes (BENCHMARKS.md, "Cold and first use").

Each run starts from a fresh data dir *and* a fresh user cache (HOME, XDG_CACHE_HOME and
XDG_DATA_HOME point into a new temporary directory), as on a machine where toolhost was just
installed, and times:

  serve_initialize  spawn `toolhost serve` (stdio) -> the `initialize` answer
  serve_tools_list  spawn -> the `tools/list` answer (sent right after `initialized`)
  serve_read_file   spawn -> the first `read_file` answer (a file written by `write_file` first)
  check_example     `toolhost check --config DeerFlow's config.example.yaml`, whole process
  call_no_cache     `toolhost call legacy_hello` of a component file nothing compiled before
  call_after_other_dir  the same, after `toolhost inspect` of it in another directory (as
                    `toolhost build` leaves a component)

Usage: python3 scripts/bench-cold.py BINARY [BINARY ...] [--runs N]
Binaries are run in alternation, so each ratio compares runs made under the same load.
Prints `COLD <binary> <figure> median_ms=<x> min_ms=<y> runs=<n>`.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLE = os.path.join(ROOT, "tests/conformance/deerflow-configs/config.example.yaml")
CONFIG = os.path.join(ROOT, "config.yaml")


def fresh_env(tmp):
    env = dict(os.environ)
    for k in ("TOOLHOST_CONFIG", "TOOLHOST_LOG"):
        env.pop(k, None)
    env.update(HOME=tmp, XDG_CACHE_HOME=os.path.join(tmp, "cache"), XDG_DATA_HOME=os.path.join(tmp, "data"),
               TOOLHOST_HOME=os.path.join(tmp, "home"))
    return env


def serve_once(binary):
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        p = subprocess.Popen([binary, "serve", "--config", CONFIG], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, env=fresh_env(tmp), cwd=tmp)

        def send(msg):
            p.stdin.write((json.dumps(msg) + "\n").encode())
            p.stdin.flush()

        def answer(i):
            while True:
                line = p.stdout.readline()
                if not line:
                    raise RuntimeError("server exited")
                m = json.loads(line)
                if m.get("id") == i:
                    return m

        out = {}
        send({"jsonrpc": "2.0", "id": 1, "method": "initialize",
              "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "b", "version": "1"}}})
        answer(1)
        out["serve_initialize"] = time.perf_counter() - t0
        send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        send({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}})
        tools = answer(2)
        assert any(t["name"] == "read_file" for t in tools["result"]["tools"]), tools
        out["serve_tools_list"] = time.perf_counter() - t0
        path = "/mnt/user-data/workspace/a.md"
        send({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
              "params": {"name": "write_file", "arguments": {"description": "d", "path": path, "content": "x\n"}}})
        answer(3)
        send({"jsonrpc": "2.0", "id": 4, "method": "tools/call",
              "params": {"name": "read_file", "arguments": {"description": "d", "path": path}}})
        r = answer(4)
        assert r["result"]["content"][0]["text"] == "x\n", r
        out["serve_read_file"] = time.perf_counter() - t0
        p.stdin.close()
        p.wait()
        return out


def check_once(binary):
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        r = subprocess.run([binary, "check", "--config", EXAMPLE], env=fresh_env(tmp), cwd=tmp,
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        assert r.returncode == 0 and b"0 error(s)" in r.stdout, r.stdout
        return {"check_example": time.perf_counter() - t0}


def shared_once(binary):
    wasm = os.path.join(os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target")),
                        "guest/wasm32-wasip2/release/legacy_hello.wasm")
    out = {}
    for key, inspect_first in (("call_no_cache", False), ("call_after_other_dir", True)):
        with tempfile.TemporaryDirectory() as tmp:
            a, b = os.path.join(tmp, "a"), os.path.join(tmp, "b")
            os.makedirs(a)
            os.makedirs(b)
            with open(os.path.join(b, "config.yaml"), "w") as f:
                f.write("tools:\n  - {name: legacy_hello, group: demo, use: %s}\n" % wasm)
            env = fresh_env(tmp)
            env.pop("TOOLHOST_HOME")
            if inspect_first:
                subprocess.run([binary, "inspect", wasm], env=env, cwd=a, check=True, stdout=subprocess.DEVNULL)
            t0 = time.perf_counter()
            r = subprocess.run([binary, "call", "legacy_hello", '{"name": "x"}'], env=env, cwd=b,
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
            assert b"Hello, x." in r.stdout, r.stdout
            out[key] = time.perf_counter() - t0
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("binaries", nargs="+")
    ap.add_argument("--runs", type=int, default=5)
    a = ap.parse_args()
    times = {b: {} for b in a.binaries}
    for _ in range(a.runs):
        for b in a.binaries:
            for once in (serve_once, check_once, shared_once):
                for k, v in once(b).items():
                    times[b].setdefault(k, []).append(v * 1000)
    for b in a.binaries:
        for k, v in times[b].items():
            print(f"COLD {b} {k} median_ms={statistics.median(v):.0f} min_ms={min(v):.0f} runs={len(v)}")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
