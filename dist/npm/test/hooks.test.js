// The module hooks (loader/register.mjs, loader/hooks.mjs) and the Bun
// preload (loader/bun-preload.js), run the way the binary runs scripts:
//   node --import register.mjs <script>                              (.js)
//   TSX_TSCONFIG_PATH=loader/tsconfig.json \
//     node --import register.mjs?tsx=<tsx loader> <script>           (.ts/.tsx/.jsx)
//   bun --no-install --preload bun-preload.js --jsx-runtime=classic ... <script>
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { test } from "node:test";
import { fileURLToPath, pathToFileURL } from "node:url";
import { BUN, BUN_PRELOAD, REGISTER, TSCONFIG, TSX_LOADER, run, tempDir, writeTree } from "./util.js";

const tsxRuntime = (loader, script) => [
  process.execPath,
  ["--import", `${pathToFileURL(REGISTER).href}?tsx=${encodeURIComponent(loader)}`, script],
  { TSX_TSCONFIG_PATH: TSCONFIG },
];

const RUNTIMES = {
  node: (script) => [process.execPath, ["--import", REGISTER, script], {}],
  // As the binary passes it: register.mjs registers the loopx hooks, then
  // the tsx whose loader it names (?tsx=).
  tsx: (script) => tsxRuntime(TSX_LOADER, script),
  bun: (script) => [
    BUN,
    ["--no-install", "--preload", BUN_PRELOAD, "--jsx-runtime=classic", "--jsx-factory=React.createElement",
      "--jsx-fragment=React.Fragment", script],
    {},
  ],
};

/** Runs <dir>/<file> as a loopx script on `runtime`, with the workflow dir as cwd. */
function runScript(runtime, dir, file, input = "") {
  const [command, args, env] = RUNTIMES[runtime](join(dir, file));
  return run(command, args, { cwd: dir, env, input });
}

// A workflow inside a project, laid out as loopx has it; no node_modules
// anywhere up the tree (temp dirs), so "loopx" can only come from the hook.
function workflow(t, files) {
  const root = tempDir(t);
  const dir = join(root, ".loopx", "wf");
  writeTree(dir, files);
  return dir;
}

const LOCAL_LOOPX = {
  "node_modules/loopx/package.json": '{ "name": "loopx", "type": "module", "exports": "./main.js" }',
  "node_modules/loopx/main.js": 'export function output(v) { process.stdout.write("local:" + JSON.stringify(v)); process.exit(0); }\n',
};

const CJS_DEP = {
  "node_modules/cjs-dep/package.json": '{ "name": "cjs-dep", "main": "main.js" }',
  "node_modules/cjs-dep/main.js": 'const path = require("path");\nmodule.exports = { join: (...p) => path.posix.join(...p) };\n',
};

// Each case: runtimes it applies to, files, the script, and what must happen.
const cases = [
  {
    name: 'import { output } from "loopx" resolves without any node_modules',
    runtimes: ["node", "tsx", "bun"],
    files: { "index.js": 'import { output, input } from "loopx";\noutput({ result: typeof input });\n' },
    stdout: '{"result":"function"}',
  },
  {
    name: "a closer node_modules/loopx wins",
    runtimes: ["node", "tsx", "bun"],
    files: { ...LOCAL_LOOPX, "index.js": 'import { output } from "loopx";\noutput({ result: "x" });\n' },
    stdout: 'local:{"result":"x"}',
  },
  {
    name: "a .js entry without a package.json type runs as ESM",
    runtimes: ["node", "tsx", "bun"],
    files: {
      "index.js": 'import { output } from "loopx";\nconst top = await Promise.resolve(typeof module + " " + typeof exports);\noutput({ result: top });\n',
    },
    stdout: '{"result":"undefined undefined"}',
  },
  {
    name: 'a .js entry runs as ESM under "type": "commonjs" too',
    runtimes: ["node", "tsx", "bun"],
    files: {
      "package.json": '{ "type": "commonjs" }',
      "index.js": 'import { output } from "loopx";\noutput({ result: String(import.meta.url.startsWith("file:")) });\n',
    },
    stdout: '{"result":"true"}',
  },
  {
    name: "require() in the entry fails",
    runtimes: ["node", "tsx"],
    files: { "index.js": 'const fs = require("fs");\nprocess.stdout.write("ran");\n' },
    fails: /require is not defined/,
  },
  {
    name: "module.exports in the entry fails",
    runtimes: ["node", "tsx", "bun"],
    files: { "index.js": 'module.exports = { a: 1 };\nprocess.stdout.write("ran");\n' },
    fails: /module is not defined/,
  },
  {
    name: "exports.x in a .ts entry fails",
    runtimes: ["tsx", "bun"],
    files: { "index.ts": 'exports.x = 1;\nprocess.stdout.write("ran");\n' },
    fails: /exports is not defined/,
  },
  {
    name: "require() in a .ts entry fails",
    runtimes: ["tsx"],
    files: { "index.ts": 'const fs: unknown = require("fs");\nprocess.stdout.write("ran");\n' },
    fails: /require is not defined/,
  },
  {
    name: "a CommonJS dependency in node_modules still loads",
    runtimes: ["node", "tsx", "bun"],
    files: {
      ...CJS_DEP,
      "index.js": 'import { output } from "loopx";\nimport dep from "cjs-dep";\noutput({ result: dep.join("a", "b") });\n',
    },
    stdout: '{"result":"a/b"}',
  },
  {
    name: "other files keep the package.json type's meaning (CommonJS helper in lib/)",
    runtimes: ["node", "tsx", "bun"],
    files: {
      "lib/helper.js": 'module.exports = { twice: (s) => s + s };\n',
      "index.js": 'import { output } from "loopx";\nimport helper from "./lib/helper.js";\noutput({ result: helper.twice("ab") });\n',
    },
    stdout: '{"result":"abab"}',
  },
  {
    name: "a CommonJS .ts helper loads through tsx's require() hooks",
    runtimes: ["tsx", "bun"],
    files: {
      "lib/helper.cts": 'const twice = (s: string): string => s + s;\nmodule.exports = { twice };\n',
      "index.ts": 'import { createRequire } from "node:module";\nimport { output } from "loopx";\nconst load = createRequire(import.meta.url);\noutput({ result: load("./lib/helper.cts").twice("ab") });\n',
    },
    stdout: '{"result":"abab"}',
  },
  {
    name: ".ts runs with types stripped and imports loopx",
    runtimes: ["tsx", "bun"],
    files: {
      "index.ts": 'import { output, input, type Output } from "loopx";\nconst data: string = await input();\nconst o: Output = { result: `got:${data}`, goto: "next" };\noutput(o);\n',
    },
    input: "piped",
    stdout: '{"result":"got:piped","goto":"next"}',
  },
  {
    name: ".tsx uses the classic JSX transform, even under a project tsconfig asking for react-jsx",
    runtimes: ["tsx", "bun"],
    project: { "tsconfig.json": '{ "compilerOptions": { "jsx": "react-jsx", "jsxFactory": "h" } }' },
    files: {
      "index.tsx": `import { output } from "loopx";
const React = {
  createElement: (type: string, props: object | null, ...children: unknown[]) => ({ type, props, children }),
  Fragment: "frag",
};
const n: number = 2;
output({ result: JSON.stringify(<><b id="x">hi {n}</b></>) });
`,
    },
    stdout: JSON.stringify({ result: '{"type":"frag","props":null,"children":[{"type":"b","props":{"id":"x"},"children":["hi ",2]}]}' }),
  },
  {
    name: ".jsx uses the classic JSX transform",
    runtimes: ["tsx", "bun"],
    files: {
      "index.jsx": `import { output } from "loopx";
const React = { createElement: (type, props, ...children) => [type, props, children] };
output({ result: JSON.stringify(<i>{1 + 1}</i>) });
`,
    },
    stdout: JSON.stringify({ result: '["i",null,[2]]' }),
  },
];

// A tsx whose files are laid out otherwise than register.mjs expects: its
// loader is all register.mjs can use, and it loads that after the loopx
// hooks as a second `--import` would.
RUNTIMES["tsx, another layout"] = (script) => {
  const loader = join(dirname(dirname(script)), "other-tsx", "dist", "loader.mjs");
  writeTree(dirname(loader), { "loader.mjs": `import ${JSON.stringify(TSX_LOADER)};\n` });
  return tsxRuntime(pathToFileURL(loader).href, script);
};
for (const c of cases) {
  if (c.runtimes.includes("tsx")) c.runtimes.push("tsx, another layout");
}

for (const c of cases) {
  for (const runtime of c.runtimes) {
    const skip = runtime === "bun" && !BUN && "bun not found";
    test(`${runtime}: ${c.name}`, { skip }, async (t) => {
      const dir = workflow(t, c.files);
      if (c.project) writeTree(join(dir, "..", ".."), c.project);
      const entry = Object.keys(c.files).find((f) => f.startsWith("index."));
      const r = await runScript(runtime, dir, entry, c.input);
      if (c.fails) {
        assert.notEqual(r.code, 0);
        assert.equal(r.stdout, "", "the script body did not run");
        assert.match(r.stderr, c.fails);
      } else {
        assert.equal(r.stdout, c.stdout, r.stderr);
        assert.equal(r.code, 0, r.stderr);
      }
    });
  }
}

for (const runtime of ["node", "tsx", "bun"]) {
  const skip = runtime === "bun" && !BUN && "bun not found";
  test(`${runtime}: a workflow path with a space, % and # in it`, { skip }, async (t) => {
    const root = join(tempDir(t), "my project %20 #1");
    const dir = join(root, ".loopx", "wf");
    const entry = runtime === "node" ? "index.js" : "index.ts";
    const annotation = runtime === "node" ? "" : ": string";
    writeTree(dir, { [entry]: `import { output } from "loopx";\nconst ok${annotation} = "ok";\noutput({ result: ok });\n` });
    const r = await runScript(runtime, dir, entry);
    assert.equal(r.stdout, '{"result":"ok"}', r.stderr);
  });
}

test("node: the fallback is this package's index.js", async (t) => {
  const dir = workflow(t, {
    "index.js": 'import * as loopx from "loopx";\nimport * as own from ' +
      JSON.stringify(new URL("../index.js", import.meta.url).href) +
      ';\nloopx.output({ result: String(loopx.output === own.output && loopx.input === own.input) });\n',
  });
  const r = await runScript("node", dir, "index.js");
  assert.equal(r.stdout, '{"result":"true"}', r.stderr);
});

test("node: a missing package other than loopx still fails as usual", async (t) => {
  const dir = workflow(t, { "index.js": 'import "not-installed-anywhere";\n' });
  const r = await runScript("node", dir, "index.js");
  assert.notEqual(r.code, 0);
  assert.match(r.stderr, /Cannot find package 'not-installed-anywhere'/);
});

test("tsx: what register.mjs and hooks.mjs load in place of tsx's loader is there in the tsx this package ships", async () => {
  // With another layout they fall back to tsx's loader (the "another layout"
  // cases above): scripts still run, only slower, so a tsx upgrade that
  // moves these files would fail nothing else. This test notices.
  const pkg = JSON.parse(readFileSync(new URL("../package.json", TSX_LOADER), "utf8"));
  assert.equal(fileURLToPath(TSX_LOADER), fileURLToPath(new URL("loader.mjs", TSX_LOADER)));
  // What tsx's loader does on the main thread: import its CommonJS loader
  // (as "#cjs-loader", the very file register.mjs imports) and register its
  // ESM hooks, with the register() its public esm/api entry exports.
  assert.equal(new URL(pkg.imports["#cjs-loader"], new URL("../", TSX_LOADER)).href, new URL("cjs/index.cjs", TSX_LOADER).href);
  const loader = readFileSync(new URL("loader.mjs", TSX_LOADER), "utf8");
  assert.match(loader, /import\s*"#cjs-loader"/);
  assert.equal(new URL(pkg.exports["./esm/api"].import.default, new URL("../", TSX_LOADER)).href, new URL("esm/api/index.mjs", TSX_LOADER).href);
  const api = await import(new URL("esm/api/index.mjs", TSX_LOADER).href);
  assert.equal(typeof api.register, "function");
});
