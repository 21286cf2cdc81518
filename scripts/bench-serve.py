#!/usr/bin/env python3
"""Figures for BENCHMARKS.md's serve section, with nothing but the standard library:

  cold   time from starting `toolhost serve` (stdio) on an empty data dir to the `initialize`
         answer, and the same with the precompile cache filled (warm);
  rtt    round trip of `tools/call hello` over stdio and over HTTP (one session);
  idle   resident memory of `serve --http` per idle session (N sessions opened, none closed).

usage: scripts/bench-serve.py TOOLHOST_BIN [--runs 5] [--sessions 1000]
"""
import argparse
import http.client
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

CONFIG = """tools:
  - {name: hello, group: demo, use: hello}
  - {name: read_file, group: file:read, use: 'deerflow.sandbox.tools:read_file_tool'}
  - {name: write_file, group: file:write, use: 'deerflow.sandbox.tools:write_file_tool'}
"""
INIT = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "bench", "version": "0"}}}


def setup():
    d = tempfile.mkdtemp(prefix="bench-serve-")
    with open(os.path.join(d, "config.yaml"), "w") as f:
        f.write(CONFIG)
    with open(os.path.join(d, "extensions_config.json"), "w") as f:
        f.write('{"mcpServers": {}}')
    return d


def env_for(d):
    e = dict(os.environ, TOOLHOST_HOME=os.path.join(d, "data"))
    e.pop("TOOLHOST_SERVE_TOKEN", None)
    e.pop("DEER_FLOW_EXTENSIONS_CONFIG_PATH", None)
    return e


def stdio(bin_, d, extra=()):
    return subprocess.Popen([bin_, "serve", "--config", os.path.join(d, "config.yaml"), *extra],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            env=env_for(d))


def rpc(p, msg):
    p.stdin.write((json.dumps(msg) + "\n").encode())
    p.stdin.flush()
    if "id" not in msg:
        return None
    return json.loads(p.stdout.readline())


def cold_start(bin_, runs):
    cold, warm, listed = [], [], []
    for _ in range(runs):
        d = setup()
        for bucket in (cold, warm):  # the first start fills the cache, the second finds it
            t0 = time.perf_counter()
            p = stdio(bin_, d)
            r = rpc(p, INIT)
            bucket.append((time.perf_counter() - t0) * 1000)
            assert r["result"]["serverInfo"]["name"] == "toolhost", r
            rpc(p, {"jsonrpc": "2.0", "method": "notifications/initialized"})
            t = rpc(p, {"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
            if bucket is cold:
                listed.append((time.perf_counter() - t0) * 1000)
            assert any(x["name"] == "hello" for x in t["result"]["tools"]), t
            p.stdin.close()
            p.wait()
        shutil.rmtree(d)
    return cold, warm, listed


def rtt_stdio(bin_, n):
    d = setup()
    p = stdio(bin_, d)
    rpc(p, INIT)
    rpc(p, {"jsonrpc": "2.0", "method": "notifications/initialized"})
    times = []
    for i in range(n):
        t0 = time.perf_counter()
        r = rpc(p, {"jsonrpc": "2.0", "id": i + 1, "method": "tools/call",
                    "params": {"name": "hello", "arguments": {"name": "b"}}})
        times.append((time.perf_counter() - t0) * 1000)
        assert r["result"]["content"][0]["text"] == "Hello, b.", r
    p.stdin.close()
    p.wait()
    shutil.rmtree(d)
    return times


class Http:
    def __init__(self, bin_, d, extra=()):
        self.p = subprocess.Popen([bin_, "serve", "--config", os.path.join(d, "config.yaml"),
                                   "--http", "127.0.0.1:0", *extra],
                                  stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                  env=env_for(d))
        for line in self.p.stderr:
            m = re.search(rb"at http://([0-9.]+):(\d+)/mcp", line)
            if m:
                self.host, self.port = m.group(1).decode(), int(m.group(2))
                break
        self.conn = http.client.HTTPConnection(self.host, self.port)

    def post(self, msg, session=None):
        h = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
        if session:
            h["Mcp-Session-Id"] = session
        self.conn.request("POST", "/mcp", json.dumps(msg), h)
        r = self.conn.getresponse()
        body = r.read().decode()
        sid = r.getheader("mcp-session-id")
        data = [json.loads(l[5:]) for l in body.splitlines() if l.startswith("data:") and l[5:].strip()]
        if not data and body.strip():
            data = [json.loads(body)]
        return r.status, sid, data

    def session(self):
        status, sid, _ = self.post(INIT)
        assert status == 200 and sid, status
        self.post({"jsonrpc": "2.0", "method": "notifications/initialized"}, sid)
        return sid

    def rss_kib(self):
        with open(f"/proc/{self.p.pid}/status") as f:
            return int(re.search(r"VmRSS:\s+(\d+)", f.read()).group(1))

    def stop(self):
        self.p.kill()
        self.p.wait()


def rtt_http(bin_, n):
    d = setup()
    s = Http(bin_, d)
    sid = s.session()
    times = []
    for i in range(n):
        t0 = time.perf_counter()
        status, _, data = s.post({"jsonrpc": "2.0", "id": i + 1, "method": "tools/call",
                                  "params": {"name": "hello", "arguments": {"name": "b"}}}, sid)
        times.append((time.perf_counter() - t0) * 1000)
        assert data[-1]["result"]["content"][0]["text"] == "Hello, b.", data
    s.stop()
    shutil.rmtree(d)
    return times


def idle_sessions(bin_, n, cap_flag=True):
    d = setup()
    s = Http(bin_, d, ["--max-sessions", str(n + 10)] if cap_flag else [])
    sid = s.session()
    s.post({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "hello", "arguments": {"name": "w"}}}, sid)
    time.sleep(0.5)
    before = s.rss_kib()
    for _ in range(n):
        s.session()
    time.sleep(1.0)
    after = s.rss_kib()
    s.stop()
    shutil.rmtree(d)
    return before, after


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("bin")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--sessions", type=int, default=1000)
    ap.add_argument("--calls", type=int, default=500)
    ap.add_argument("--no-cap-flag", action="store_true", help="for a toolhost without --max-sessions")
    a = ap.parse_args()
    med = statistics.median
    cold, warm, listed = cold_start(a.bin, a.runs)
    print(f"cold start to initialize (empty data dir): median {med(cold):.0f} ms  (runs: {', '.join(f'{x:.0f}' for x in cold)})")
    print(f"cold start to the first tools/list answer: median {med(listed):.0f} ms")
    print(f"warm start to initialize (cache filled):   median {med(warm):.0f} ms  (runs: {', '.join(f'{x:.0f}' for x in warm)})")
    t = rtt_stdio(a.bin, a.calls)
    print(f"tools/call hello over stdio: median {med(t):.3f} ms over {len(t)} calls")
    t = rtt_http(a.bin, a.calls)
    print(f"tools/call hello over HTTP:  median {med(t):.3f} ms over {len(t)} calls")
    per = []
    for _ in range(3):
        before, after = idle_sessions(a.bin, a.sessions, not a.no_cap_flag)
        per.append((after - before) / a.sessions)
        print(f"{a.sessions} idle sessions: RSS {before / 1024:.1f} MiB -> {after / 1024:.1f} MiB "
              f"(+{(after - before) / 1024:.1f} MiB, {(after - before) / a.sessions:.1f} KiB per session)")
    print(f"resident memory per idle session: median {med(per):.1f} KiB")


if __name__ == "__main__":
    sys.exit(main())
