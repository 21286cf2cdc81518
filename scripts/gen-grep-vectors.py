"""Generate guest-tools/sandbox-fs/tests/grep_vectors.json: DeerFlow's own `grep` tool (2.1.0, the
conformance commit) run on files that stress the paths toolhost's grep takes — line breaks of every
kind, undecodable bytes, long lines, binary sniffing and the size cap at their edges, matches across
read and vector boundaries, case-insensitive non-ASCII — so that toolhost's answers are checked
against DeerFlow's, natively and through the component.

Usage: python gen-grep-vectors.py OUT.json   (with DeerFlow importable: scripts/deerflow-venv.sh)
"""

import base64
import importlib.util
import json
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("bench_deerflow", os.path.join(HERE, "bench-deerflow.py"))
bench = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench)

WS = "/mnt/user-data/workspace"


PHRASE = "alpha beta gamma delta token node stream reader "


def build(spec):
    """A file from its recipe: `fill` repeated to `len` bytes, then each patch written at its offset
    (the Rust tests build the files from the same recipes)."""
    fill = spec["fill"].encode()
    data = bytearray((fill * (spec["len"] // max(len(fill), 1) + 1))[: spec["len"]]) if fill else bytearray(spec["len"])
    for at, b64 in spec["patches"]:
        chunk = base64.b64decode(b64)
        data[at : at + len(chunk)] = chunk
    return bytes(data)


def whole(data):
    return {"fill": "", "len": len(data), "patches": [[0, base64.b64encode(data).decode()]]}


def patched(fill, length, patches):
    return {"fill": fill, "len": length, "patches": [[at, base64.b64encode(b).decode()] for at, b in patches]}


def files():
    f = {}
    f["breaks.txt"] = whole(b"first TODO\r\nsecond\rthird todo\r\rfifth ToDo\n\nseventh TODO\r\n" + b"no break TODO")
    f["cr_only.txt"] = whole(b"a TODO\rb\rc todo\rTODO at start\r")
    f["invalid.txt"] = whole(
        b"ok TODO\n"
        b"bad \xff TODO \xfe\n"
        b"a\xffb a\xc3b\n"
        b"split \xe2\x82 TODO\n"
        b"caf\xc3\xa9 TODO \xc3\xa9\n"
        b"lone \x80\x80 cont\n"
        b"end \xf0\x9f\x98"
    )
    # A line over 2000 characters is skipped whole; one of exactly 2000 (newline included) is not.
    lines = (
        b"x" * 1999 + b"TODO\n"
        + b"y" * 1995 + b"TODO\n"
        + b"z" * 1994 + b"TODO\n"
        + ("é" * 1996).encode() + b"TODO\n"
    )
    tail = b" TODO far along one long line\nshort TODO after it\n"
    n = len(lines) + 900_000 + len(tail)
    f["long_lines.txt"] = patched("w", n, [(0, lines), (len(lines) + 900_000, tail)])
    # Matches straddling the host's 64 KiB read, the 8 KiB binary sniff, and the 16/32-byte vector
    # scan steps; a CRLF across 64 KiB.
    patches = []
    for at in [8190, 8191, 16381, 32766, 65534, 65535, 65536, 131_070]:
        patches += [(at - 20, b"\n"), (at + 30, b"\n"), (at, b"TODO")]
    patches += [(65535, b"\r\n"), (100_000, b"FIXME")]
    f["boundaries.txt"] = patched(PHRASE, 140_000, patches)
    aligned = bytearray(b"." * 200)
    for k in range(40):
        aligned += b"." * k + b"tOdO" + b"\n"
    f["alignments.txt"] = whole(bytes(aligned))
    # Binary sniffing looks at the first 8192 bytes only.
    f["nul_in_sample.bin"] = patched(PHRASE, 40_000, [(8191, b"\x00"), (39_990, b"\nTODO\n")])
    f["nul_after_sample.txt"] = patched(PHRASE, 40_000, [(8192, b"\x00"), (39_990, b"\nTODO\n")])
    f["nul_small.bin"] = whole(b"TODO\x00")
    # The 1 MB cap: exactly 1 000 000 bytes is searched, one more byte is not.
    f["cap_exact.txt"] = patched("a", 1_000_000, [(0, b"TODO at the top\n"), (999_999, b"\n")])
    f["cap_over.txt"] = patched("a", 1_000_001, [(0, b"TODO at the top\n"), (1_000_000, b"\n")])
    f["nonascii.txt"] = whole(
        (
            "Straße und STRASSE\n"
            "café CAFÉ Café\n"
            "long s: ſ and S and s\n"
            "kelvin: \u212a and K and k\n"
            "σας ΣΑΣ σάς\n"
            "İstanbul istanbul ISTANBUL\n"
            "ǅ ǆ Ǆ dž\n"
            "fn parse_test() {}\n"
            "fn  other_teſt()\n"
            "FN X_TEST\n"
            "$5.00 (approx)\n"
        ).encode()
    )
    return f


PATTERNS = [
    {"pattern": "TODO"},
    {"pattern": "todo", "case_sensitive": True},
    {"pattern": "TODO", "case_sensitive": True},
    {"pattern": "TODO|FIXME"},
    {"pattern": "FIXME|todo", "case_sensitive": True},
    {"pattern": r"fn\s+\w+_test"},
    {"pattern": r"fn\s+\w+_test", "case_sensitive": True},
    {"pattern": "^TODO"},
    {"pattern": "TODO$"},
    {"pattern": r"\bTODO\b"},
    {"pattern": "a.b"},
    {"pattern": "caf."},
    {"pattern": "CAFÉ"},
    {"pattern": "straße"},
    {"pattern": "strasse"},
    {"pattern": "long s: S"},
    {"pattern": "kelvin: k"},
    {"pattern": "σας"},
    {"pattern": "ΣΑΣ", "case_sensitive": True},
    {"pattern": "istanbul"},
    {"pattern": "ǆ"},
    {"pattern": "$5.00 (approx)", "literal": True},
    {"pattern": "$5.00 (approx)"},
    {"pattern": "TODO far"},
    {"pattern": "(?<=d )TODO"},
    {"pattern": "[invalid"},
    {"pattern": "a{,2}b"},
    {"pattern": "x**"},
    {"pattern": r"\q"},
    {"pattern": "(?i)todo", "case_sensitive": True},
    {"pattern": "o\\r"},
    {"pattern": "TODO\\n"},
]


def main():
    out_path = sys.argv[1]
    vectors = json.load(open(os.path.join(HERE, "..", "..", "shared", "conformance", "sandbox_fs.json")))
    scratch = tempfile.mkdtemp(prefix="grep-vectors-")
    thread_dir = bench.setup_deerflow(vectors, scratch)
    ws = os.path.join(thread_dir, "user-data", "workspace", "edge")
    os.makedirs(ws, exist_ok=True)
    fs = files()
    for name, spec in fs.items():
        with open(os.path.join(ws, name), "wb") as fh:
            fh.write(build(spec))
    for d in ["user-data/uploads", "user-data/outputs", "acp-workspace"]:
        os.makedirs(os.path.join(thread_dir, d), exist_ok=True)
    runtime = bench.runtime_for(thread_dir, vectors["environment"]["thread_id"])
    from deerflow.sandbox import tools as t

    cases = []
    for name in fs:
        for p in PATTERNS:
            args = {"path": f"{WS}/edge/{name}", "max_results": 500, **p}
            cases.append({"args": args, "expected": t.grep_tool.func(runtime=runtime, description="vectors", **args)})
    # The whole directory: binary and over-cap files are skipped; sorted, as the walk order is the
    # filesystem's.
    for p in PATTERNS[:4]:
        args = {"path": f"{WS}/edge", "max_results": 500, **p}
        text = t.grep_tool.func(runtime=runtime, description="vectors", **args)
        lines = text.split("\n")
        cases.append({"args": args, "expected_header": lines[0], "expected_sorted": sorted(lines[1:])})
    doc = {
        "description": "DeerFlow's grep tool (deerflow-harness 2.1.0 at f1f4af99) on files under "
        "/mnt/user-data/workspace/edge; `files` are base64. `expected` is the tool's exact text; for "
        "directory cases, the header line and the sorted result lines (DeerFlow walks in filesystem order).",
        "generator": "scripts/gen-grep-vectors.py",
        "file_recipe": "fill repeated to len bytes, then each [offset, base64] patch written at its offset",
        "files": fs,
        "cases": cases,
    }
    with open(out_path, "w") as fh:
        json.dump(doc, fh, ensure_ascii=False, indent=1)
    print(f"{len(cases)} cases, {sum(s['len'] for s in fs.values())} bytes of files -> {out_path}")


if __name__ == "__main__":
    main()
