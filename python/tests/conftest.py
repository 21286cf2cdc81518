import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CONFORMANCE = ROOT / "tests" / "conformance"
sys.path.insert(0, str(Path(__file__).resolve().parent))

FILE_TOOLS = """tools:
  - {name: ls, group: "file:read", use: "deerflow.sandbox.tools:ls_tool"}
  - {name: read_file, group: "file:read", use: "deerflow.sandbox.tools:read_file_tool"}
  - {name: glob, group: "file:read", use: "deerflow.sandbox.tools:glob_tool"}
  - {name: grep, group: "file:read", use: "deerflow.sandbox.tools:grep_tool"}
  - {name: write_file, group: "file:write", use: "deerflow.sandbox.tools:write_file_tool"}
  - {name: str_replace, group: "file:write", use: "deerflow.sandbox.tools:str_replace_tool"}
"""


@pytest.fixture
def cache_dir(tmp_path_factory) -> Path:
    # One precompile cache for the whole run, as a real deployment keeps one.
    d = os.environ.get("TOOLHOST_TEST_CACHE")
    return Path(d) if d else tmp_path_factory.getbasetemp() / "cache"
