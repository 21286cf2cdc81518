// Calls the built component through toolhost (`toolhost build` first; `toolhost` on PATH or in
// $TOOLHOST_BIN). Run: node --test
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));

function call(args) {
  assert.ok(existsSync(join(here, "build", "__NAME__.wasm")), "build/__NAME__.wasm is missing: run `toolhost build` first");
  const bin = process.env.TOOLHOST_BIN || "toolhost";
  const p = spawnSync(bin, ["call", "__TOOL__", JSON.stringify(args), "--json"], { cwd: here, encoding: "utf8" });
  assert.ok(p.stdout, `toolhost printed no JSON: ${p.stderr ?? p.error}`);
  return [JSON.parse(p.stdout), p.status];
}

test("greets", () => {
  const [r, code] = call({ name: "Ada", excited: true });
  assert.equal(r.content, "Hello, Ada!");
  assert.equal(code, 0);
});

test("an empty name is an error", () => {
  const [r, code] = call({ name: " " });
  assert.equal(r.status, "error");
  assert.match(r.content, /RangeError: name must not be empty/);
  assert.equal(code, 2);
});
