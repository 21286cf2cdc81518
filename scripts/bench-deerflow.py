"""DeerFlow's own code, timed on the inputs toolhost's benchmarks use, so that every ratio in
BENCHMARKS.md can be taken against a DeerFlow figure measured in the same run.

Runs DeerFlow's tools in-process the way conformance/sandbox_fs.json was generated
(`tool.func(runtime=..., description=..., **args)`, local sandbox, no middleware) on the
conformance fixture, DeerFlow's `DeferredToolCatalog.hash` over the 10 000-tool catalog of
crates/deferred/benches/deferred.rs, and `glob` over generated trees of 1k/10k/100k files.

Usage: python bench-deerflow.py VECTORS_JSON [--runs N] [--only file,catalog,glob] [--glob-sizes 1000,10000]
Needs DeerFlow's harness importable (scripts/deerflow-venv.sh sets that up). Prints one line per
figure, `DEERFLOW <name> median_ms=<x> runs=<n>`, which scripts/bench.sh collects.
"""

import argparse
import base64
import json
import os
import statistics
import sys
import tempfile
import time
from types import SimpleNamespace

WS = "/mnt/user-data/workspace"


def median_ms(fn, runs, warmup=3):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t) * 1000)
    return statistics.median(times)


def build_fixture(vectors, thread_dir):
    for e in vectors["fixture"]["entries"]:
        p = os.path.join(thread_dir, e["path"])
        if e["type"] == "dir":
            os.makedirs(p, exist_ok=True)
        elif e["type"] == "file":
            os.makedirs(os.path.dirname(p), exist_ok=True)
            data = base64.b64decode(e["base64"]) if "base64" in e else e["content"].encode()
            with open(p, "wb") as f:
                f.write(data)
        elif e["type"] == "symlink":
            os.makedirs(os.path.dirname(p), exist_ok=True)
            os.symlink(e["target"], p)
    for d in ["user-data/workspace", "user-data/uploads", "user-data/outputs", "acp-workspace"]:
        os.makedirs(os.path.join(thread_dir, d), exist_ok=True)


def setup_deerflow(vectors, scratch):
    """Config, skills and DEER_FLOW_HOME as the vector generator had them; returns the thread dir."""
    skills = os.path.join(scratch, "skills")
    for rel, content in vectors["environment"]["skills_dir_files"].items():
        p = os.path.join(skills, rel)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "w") as f:
            f.write(content)
    config = os.path.join(scratch, "config.yaml")
    with open(config, "w") as f:
        f.write(vectors["environment"]["config_yaml"].replace("{SKILLS_DIR}", skills))
    extensions = os.path.join(scratch, "extensions_config.json")
    with open(extensions, "w") as f:
        json.dump(vectors["environment"]["extensions_config"], f)
    home = os.path.join(scratch, "home")
    os.environ["DEER_FLOW_HOME"] = home
    os.environ["DEER_FLOW_CONFIG_PATH"] = config
    os.environ["DEER_FLOW_EXTENSIONS_CONFIG_PATH"] = extensions
    env = vectors["environment"]
    return os.path.join(home, "users", env["user_id"], "threads", env["thread_id"])


def runtime_for(thread_dir, thread_id):
    thread_data = {
        "workspace_path": os.path.join(thread_dir, "user-data", "workspace"),
        "uploads_path": os.path.join(thread_dir, "user-data", "uploads"),
        "outputs_path": os.path.join(thread_dir, "user-data", "outputs"),
    }
    return SimpleNamespace(
        state={"thread_data": thread_data},
        context={"thread_id": thread_id},
        config={"configurable": {"thread_id": thread_id}},
    )


def bench_file_tools(vectors, runs):
    from deerflow.sandbox import tools as t

    scratch = tempfile.mkdtemp(prefix="deerflow-bench-")
    thread_dir = setup_deerflow(vectors, scratch)
    build_fixture(vectors, thread_dir)
    runtime = runtime_for(thread_dir, vectors["environment"]["thread_id"])
    ops = [
        ("read_file small", t.read_file_tool, {"path": f"{WS}/README.md"}),
        ("read_file 100-200 of 1.2 MB", t.read_file_tool, {"path": f"{WS}/data/big.txt", "start_line": 100, "end_line": 200}),
        ("write_file small", t.write_file_tool, {"path": f"{WS}/bench_out.txt", "content": "hello from the benchmark\n"}),
        ("ls workspace", t.ls_tool, {"path": WS}),
        ("glob **/*.py", t.glob_tool, {"pattern": "**/*.py", "path": WS}),
        ("grep TODO", t.grep_tool, {"pattern": "TODO", "path": WS}),
    ]
    for name, tool, args in ops:
        out = tool.func(runtime=runtime, description="bench", **args)
        if out.startswith("Error"):
            raise SystemExit(f"DeerFlow {name}: {out[:200]}")
        ms = median_ms(lambda: tool.func(runtime=runtime, description="bench", **args), runs)
        print(f"DEERFLOW file:{name} median_ms={ms:.4f} runs={runs}", flush=True)


def catalog_tools(n):
    """The catalog of crates/deferred/benches/deferred.rs, as langchain tools (MCP tools arrive
    as StructuredTools whose args_schema is the JSON-schema dict)."""
    from langchain_core.tools import StructuredTool

    services = ["slack", "github", "calendar", "gmail", "notion", "jira", "gdrive", "postgres", "maps", "weather"]
    verbs = ["send", "list", "search", "create", "export", "delete", "update", "get"]
    out = []
    for i in range(n):
        service = services[i % len(services)]
        verb = verbs[(i // len(services)) % len(verbs)]
        schema = {
            "type": "object",
            "title": f"Args{i}",
            "properties": {
                "id": {"type": "string", "title": "Id", "description": f"Identifier of item {i}"},
                "limit": {"type": "integer", "minimum": 1, "maximum": 100, "default": 10},
                "ratio": {"type": "number", "default": 0.5},
                "tags": {"type": "array", "items": {"type": "string"}},
                "mode": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None},
            },
            "required": ["id"],
        }
        out.append(
            StructuredTool(
                name=f"{service}_{verb}_{i}",
                description=f"{verb} {service} data for item {i}; works with the {service} API.",
                args_schema=schema,
                func=lambda **kw: "",
            )
        )
    return out


def bench_catalog(runs):
    from deerflow.tools.builtins.tool_search import DeferredToolCatalog

    tools = tuple(catalog_tools(10_000))
    # `hash` is a cached_property: a fresh catalog per run, as a fresh tool set would have.
    first = DeferredToolCatalog(tools=tools).hash
    ms = median_ms(lambda: DeferredToolCatalog(tools=tools).hash, runs, warmup=1)
    print(f"DEERFLOW catalog_hash_10k median_ms={ms:.3f} runs={runs} hash={first}", flush=True)


def glob_tree(root, files):
    """`files` files in directories of 100 (`pkgNNN/modN/fNNNNNN.txt`), one in every 1 000 a `.py`:
    `**/*.py` walks the whole tree and finds `files / 1000` (host/benches/file_tools.rs, GLOB_SCALE)."""
    for i in range(files):
        d = os.path.join(root, f"pkg{i // 1000:03d}", f"mod{(i // 100) % 10}")
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, f"f{i:06d}.py" if i % 1000 == 0 else f"f{i:06d}.txt"), "w") as f:
            f.write("x\n")


def bench_glob(vectors, sizes, runs):
    from deerflow.sandbox import tools as t

    scratch = tempfile.mkdtemp(prefix="deerflow-glob-")
    thread_dir = setup_deerflow(vectors, scratch)
    build_fixture(vectors, thread_dir)
    runtime = runtime_for(thread_dir, vectors["environment"]["thread_id"])
    for n in sizes:
        root = os.path.join(thread_dir, "user-data", "workspace", f"tree{n}")
        glob_tree(root, n)
        args = {"pattern": "**/*.py", "path": f"{WS}/tree{n}", "max_results": 1000}
        r = max(3, runs // max(1, n // 1000))
        ms = median_ms(lambda: t.glob_tool.func(runtime=runtime, description="bench", **args), r, warmup=1)
        print(f"DEERFLOW glob_tree:{n} median_ms={ms:.3f} runs={r}", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("vectors")
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--only", default="file,catalog,glob")
    ap.add_argument("--glob-sizes", default="1000,10000,100000")
    a = ap.parse_args()
    with open(a.vectors) as f:
        vectors = json.load(f)
    only = set(a.only.split(","))
    if "file" in only:
        bench_file_tools(vectors, a.runs)
    if "catalog" in only:
        bench_catalog(max(5, a.runs // 6))
    if "glob" in only:
        bench_glob(vectors, [int(s) for s in a.glob_sizes.split(",") if s], a.runs)


if __name__ == "__main__":
    sys.exit(main())
