"""Calls the built component through toolhost (`toolhost build` first; `toolhost` on PATH or in
$TOOLHOST_BIN). Run: python3 -m unittest test_tool"""

import json
import os
import subprocess
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))


def call(args: dict):
    if not os.path.isfile(os.path.join(HERE, "build", "__NAME__.wasm")):
        raise AssertionError("build/__NAME__.wasm is missing: run `toolhost build` first")
    bin = os.environ.get("TOOLHOST_BIN", "toolhost")
    p = subprocess.run([bin, "call", "__TOOL__", json.dumps(args), "--json"], cwd=HERE, capture_output=True, text=True)
    try:
        return json.loads(p.stdout), p.returncode
    except ValueError:
        raise AssertionError(f"toolhost printed no JSON: {p.stderr}")


class ToolTest(unittest.TestCase):
    def test_greets(self):
        r, code = call({"name": "Ada", "excited": True})
        self.assertEqual(r["content"], "Hello, Ada!")
        self.assertEqual(code, 0)

    def test_an_empty_name_is_an_error(self):
        r, code = call({"name": " "})
        self.assertEqual(r["status"], "error")
        self.assertIn("ValueError: name must not be empty", r["content"])
        self.assertEqual(code, 2)


if __name__ == "__main__":
    unittest.main()
