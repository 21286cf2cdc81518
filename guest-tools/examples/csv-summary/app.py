"""csv-summary: summarise a CSV or JSON data file from the thread's files, in Python.

Build with `toolhost build guest-tools/examples/csv-summary`; the tool needs
`capabilities.filesystem: user-data` (see config.yaml here).

componentize-py snapshots the interpreter after importing this module: a standard-library
module first imported inside a call (as `Counter.most_common` imports `heapq`) may be missing
from the component, so import such modules at the top."""

import csv
import heapq  # noqa: F401  Counter.most_common imports it at call time: import it here (see below)
import io
import json
import math
from collections import Counter
from typing import Annotated, Optional

from toolhost_sdk import Context, Output, tool

MAX_BYTES = 8 << 20


def _rows(path: str, text: str) -> tuple:
    """(columns, rows as lists of str-or-value) from CSV or JSON text."""
    if path.lower().endswith(".json"):
        data = json.loads(text)
        if isinstance(data, dict):
            # {"items": [...]} and other single-list wrappers.
            lists = [v for v in data.values() if isinstance(v, list)]
            if len(lists) != 1:
                raise ValueError("a JSON object must hold exactly one list of records")
            data = lists[0]
        if not isinstance(data, list) or not all(isinstance(r, dict) for r in data):
            raise ValueError("JSON data must be a list of objects")
        columns: list = []
        for r in data:
            for k in r:
                if k not in columns:
                    columns.append(k)
        return columns, [[r.get(c) for c in columns] for r in data]
    sample = text[:4096]
    try:
        dialect = csv.Sniffer().sniff(sample, delimiters=",;\t|")
    except csv.Error:
        dialect = csv.excel
    reader = csv.reader(io.StringIO(text), dialect)
    table = [row for row in reader if row]
    if not table:
        raise ValueError("the file has no rows")
    columns = [c.strip() or f"column_{i + 1}" for i, c in enumerate(table[0])]
    return columns, [row + [""] * (len(columns) - len(row)) for row in table[1:]]


def _number(v) -> Optional[float]:
    if isinstance(v, bool) or v is None:
        return None
    if isinstance(v, (int, float)):
        return float(v)
    try:
        f = float(str(v).strip().replace(",", ""))
    except ValueError:
        return None
    return f if math.isfinite(f) else None


def _fmt(x: float) -> str:
    return str(int(x)) if x == int(x) and abs(x) < 1e15 else f"{x:.4g}"


def _describe(name: str, values: list) -> str:
    present = [v for v in values if v is not None and str(v).strip() != ""]
    missing = len(values) - len(present)
    nums = [n for n in (_number(v) for v in present) if n is not None]
    head = f"- **{name}**: "
    if present and len(nums) == len(present):
        nums.sort()
        mid = len(nums) // 2
        median = nums[mid] if len(nums) % 2 else (nums[mid - 1] + nums[mid]) / 2
        mean = sum(nums) / len(nums)
        text = f"numeric, min {_fmt(nums[0])}, max {_fmt(nums[-1])}, mean {_fmt(mean)}, median {_fmt(median)}"
    else:
        counts = Counter(str(v).strip() for v in present)
        top = ", ".join(f"{v!r} ×{n}" for v, n in counts.most_common(3))
        text = f"text, {len(counts)} distinct" + (f"; most common: {top}" if top else "")
    if missing:
        text += f"; {missing} missing"
    return head + text


@tool
def summarize_data(
    ctx: Context,
    path: Annotated[str, "The CSV or JSON file, e.g. /mnt/user-data/uploads/sales.csv."],
    max_columns: Annotated[int, "Describe at most this many columns."] = 20,
    save_as: Annotated[Optional[str], "Also write the summary to /mnt/user-data/outputs/<save_as>.md."] = None,
) -> Output:
    """Summarise a CSV or JSON data file: row count, and per column its type, range, mean and
    median (numbers) or distinct and most common values (text)."""
    if max_columns < 1:
        raise ValueError("max_columns must be at least 1")
    with open(path, "rb") as f:
        raw = f.read(MAX_BYTES + 1)
    if len(raw) > MAX_BYTES:
        raise ValueError(f"{path} is larger than {MAX_BYTES} bytes")
    # (componentize-py's standard library has no utf-8-sig codec: drop a BOM by hand.)
    columns, rows = _rows(path, raw.decode("utf-8", errors="replace").lstrip("\ufeff"))
    lines = [f"{path}: {len(rows)} rows, {len(columns)} columns"]
    for i, name in enumerate(columns[:max_columns]):
        lines.append(_describe(name, [r[i] if i < len(r) else None for r in rows]))
    if len(columns) > max_columns:
        lines.append(f"… {len(columns) - max_columns} more columns")
    text = "\n".join(lines)
    out = Output.text(text)
    if save_as:
        if not save_as.replace("-", "").replace("_", "").isalnum():
            raise ValueError("save_as must be a plain name (letters, digits, - and _)")
        target = f"/mnt/user-data/outputs/{save_as}.md"
        with open(target, "w", encoding="utf-8") as f:
            f.write(text + "\n")
        out.with_artifacts(target)
    return out


# The component's export: keep this import after the tools.
from toolhost_sdk import Tool  # noqa: E402,F401
