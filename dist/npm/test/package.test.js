// The package as published: one version with the Rust crate, the files it
// ships, and its entry points.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { test } from "node:test";
import { PKG } from "./util.js";

const pkg = JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8"));

test("package.json's version equals Cargo.toml's", () => {
  const cargo = readFileSync(new URL("../../../Cargo.toml", import.meta.url), "utf8");
  // The version line of the [package] table: the first table in the file.
  const section = cargo.split(/^\[/m).find((part) => part.startsWith("package]"));
  const version = /^version\s*=\s*"([^"]+)"/m.exec(section ?? "")?.[1];
  assert.ok(version, "Cargo.toml has a [package] version");
  assert.equal(pkg.version, version);
});

test("the package depends on tsx alone and declares its entry points", () => {
  assert.deepEqual(Object.keys(pkg.dependencies), ["tsx"]);
  assert.equal(pkg.type, "module");
  assert.deepEqual(pkg.bin, { loopx: "bin/loopx.js" });
  assert.deepEqual(pkg.exports["."], { types: "./index.d.ts", default: "./index.js" });
  assert.match(pkg.engines.node, />=\s*20\.6/);
});

test("npm pack ships every runtime file", () => {
  const [report] = JSON.parse(execFileSync("npm", ["pack", "--dry-run", "--json", "--ignore-scripts"], { cwd: PKG, encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] }));
  const files = report.files.map((f) => f.path);
  for (const file of [
    "package.json", "README.md", "bin/loopx.js", "lib/native.js", "lib/ustar.js", "lib/postinstall.js",
    "api.js", "helpers.d.ts", "index.js", "index.d.ts",
    "loader/register.mjs", "loader/hooks.mjs", "loader/bun-preload.js", "loader/tsconfig.json",
  ]) {
    assert.ok(files.includes(file), `${file} is in the package`);
  }
  assert.ok(!files.some((f) => f.startsWith("test/") || f.startsWith("node_modules/")), files.join(" "));
});

test("the package entry exports output, input, run and runPromise", async () => {
  const loopx = await import("../index.js");
  assert.deepEqual(Object.keys(loopx).sort(), ["input", "output", "run", "runPromise"]);
});
