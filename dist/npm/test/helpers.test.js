// output() and input() (SPEC §6.4, §6.5), run as real scripts the way the
// binary runs them: node --import loader/register.mjs <script>.
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import { join } from "node:path";
import { test } from "node:test";
import { BUN, BUN_PRELOAD, REGISTER, run, tempDir, writeTree } from "./util.js";

// How the binary starts a .js script, on Node and on Bun.
const RUNTIMES = {
  node: (script) => [process.execPath, ["--import", REGISTER, script]],
  bun: (script) => [BUN, ["--no-install", "--preload", BUN_PRELOAD, script]],
};
const skipBun = !BUN && "bun not found";

/** Runs `source` as index.js of a fresh workflow dir; `input` goes to stdin. */
async function script(t, source, options = {}, runtime = "node") {
  const dir = tempDir(t);
  writeTree(dir, { "index.js": source });
  const [command, args] = RUNTIMES[runtime](join(dir, "index.js"));
  return run(command, args, { cwd: dir, ...options });
}

const accepted = [
  ['{ result: "done", goto: undefined }', '{"result":"done"}'],
  ['{ result: "r", goto: "next", stop: false }', '{"result":"r","goto":"next","stop":false}'],
  ["{ stop: true }", '{"stop":true}'],
  ['{ goto: "review:apply" }', '{"goto":"review:apply"}'],
  ["{ result: null }", '{"result":null}'],
  ['{ result: "x", extra: 1n, cyclic: globalThis }', '{"result":"x"}'],
  ['"plain string"', '{"result":"plain string"}'],
  ["42", '{"result":"42"}'],
  ["false", '{"result":"false"}'],
  ["12345678901234567890n", '{"result":"12345678901234567890"}'],
  ['Object.assign([1, 2], { goto: "g" })', '{"goto":"g"}'],
  ["{ retryAfter: 90 }", '{"retry_after":90}'],
  ['{ retryAfter: "2026-11-25T14:00:00Z", costUsd: 0.25 }', '{"retry_after":"2026-11-25T14:00:00Z","cost_usd":0.25}'],
  ['{ retryAfter: new Date(Date.UTC(2026, 10, 25, 14)) }', '{"retry_after":"2026-11-25T14:00:00.000Z"}'],
  ['{ result: "r", costUsd: 0 }', '{"result":"r","cost_usd":0}'],
];

for (const [argument, expected] of accepted) {
  test(`output(${argument}) writes ${expected} and exits 0 at once`, async (t) => {
    const r = await script(t, `import { output } from "loopx";
output(${argument});
process.stderr.write("after output()");
process.exitCode = 3;
`);
    assert.equal(r.stderr, "");
    assert.equal(r.code, 0);
    assert.equal(r.stdout, expected);
  });
}

const rejected = [
  ["null", /output\(\) needs a value, got null/],
  ["undefined", /output\(\) needs a value, got undefined/],
  ["", /output\(\) needs a value, got undefined/],
  ["{}", /at least one of result, goto, stop, retryAfter or costUsd/],
  ['{ result: undefined, goto: undefined, stop: undefined, other: "x" }', /at least one of result, goto, stop, retryAfter or costUsd/],
  ["[1, 2, 3]", /at least one of result, goto, stop, retryAfter or costUsd/],
  ["{ retryAfter: -1 }", /retryAfter needs seconds/],
  ["{ retryAfter: new Date(NaN) }", /invalid Date/],
  ['{ costUsd: "1" }', /costUsd needs US dollars/],
  ["{ costUsd: -0.5 }", /costUsd needs US dollars/],
];

for (const [argument, message] of rejected) {
  test(`output(${argument}) throws and writes nothing`, async (t) => {
    const r = await script(t, `import { output } from "loopx";
try {
  output(${argument});
} catch (error) {
  process.stderr.write(error.name + ": " + error.message);
  process.exit(7);
}
`);
    assert.equal(r.code, 7);
    assert.equal(r.stdout, "");
    assert.match(r.stderr, /^TypeError: /);
    assert.match(r.stderr, message);
  });
}

test("output() calls from an async script: the first call ends the process", async (t) => {
  const r = await script(t, `import { output, input } from "loopx";
await input();
setTimeout(() => output({ result: "late" }), 10);
output({ result: "first" });
`);
  assert.equal(r.code, 0);
  assert.equal(r.stdout, '{"result":"first"}');
});

// A slow reader: nothing is read for a while (the pipe fills up), then small
// reads with pauses. output() must still deliver every byte before exiting.
function slowRead(child) {
  return new Promise((resolve) => {
    const chunks = [];
    child.stdout.pause();
    setTimeout(() => {
      child.stdout.on("data", (chunk) => {
        chunks.push(chunk);
        child.stdout.pause();
        setTimeout(() => child.stdout.resume(), 2);
      });
      child.stdout.resume();
    }, 300);
    child.on("close", (code) => resolve({ code, stdout: Buffer.concat(chunks).toString("utf8") }));
  });
}

for (const [runtime, name, prelude] of [
  ["node", "stdout untouched", ""],
  // Creating process.stdout makes fd 1 non-blocking: writes then hit EAGAIN.
  ["node", "process.stdout created first", "if (process.stdout.writableLength !== 0) throw new Error();"],
  ["bun", "process.stdout created first", "if (process.stdout.writableLength !== 0) throw new Error();"],
]) {
  const skip = runtime === "bun" && skipBun;
  test(`${runtime}: a multi-megabyte result through a slow pipe arrives whole (${name})`, { skip }, async (t) => {
    const dir = tempDir(t);
    writeTree(dir, {
      "index.js": `import { output } from "loopx";
${prelude}
output({ result: "é".repeat(1 << 20) + "x".repeat(3 << 20) + "end", goto: "next" });
`,
    });
    const [command, args] = RUNTIMES[runtime](join(dir, "index.js"));
    const child = spawn(command, args, { cwd: dir, stdio: ["ignore", "pipe", "inherit"] });
    const { code, stdout } = await slowRead(child);
    assert.equal(code, 0);
    const parsed = JSON.parse(stdout);
    assert.equal(parsed.goto, "next");
    assert.equal(parsed.result.length, (1 << 20) + (3 << 20) + 3);
    assert.ok(parsed.result.endsWith("xend"));
  });
}

for (const runtime of ["node", "bun"]) {
  const skip = runtime === "bun" && skipBun;
  test(`${runtime}: input() resolves to all of stdin, reads it once and caches it`, { skip }, async (t) => {
    const piped = "line one\nline two — ünïcödé\n".repeat(5000);
    const r = await script(t, `import { input, output } from "loopx";
const first = input();
const a = await first;
const b = await input();
output({ result: JSON.stringify({ a, same: a === b, samePromise: first === input() }) });
`, { input: piped }, runtime);
    assert.equal(r.code, 0, r.stderr);
    const { a, same, samePromise } = JSON.parse(JSON.parse(r.stdout).result);
    assert.equal(a, piped);
    assert.equal(same, true);
    assert.equal(samePromise, true);
  });
}

test("input() resolves to an empty string for empty stdin", async (t) => {
  const source = `import { input, output } from "loopx";
const data = await input();
output({ result: "[" + data + "]" + typeof data });
`;
  let r = await script(t, source, { input: "" });
  assert.equal(r.stdout, '{"result":"[]string"}', r.stderr);
  // stdin closed outright (/dev/null), as loopx gives the first iteration.
  const dir = tempDir(t);
  writeTree(dir, { "index.js": source });
  const direct = spawnSync(process.execPath, ["--import", REGISTER, "index.js"], { cwd: dir, stdio: ["ignore", "pipe", "pipe"] });
  assert.equal(direct.stdout.toString(), '{"result":"[]string"}', direct.stderr.toString());
});

const python = spawnSync("python3", ["-c", "import pty"]).status === 0;

test("input() on a terminal resolves to an empty string instead of waiting", { skip: !python && "python3 not found" }, async (t) => {
  const dir = tempDir(t);
  writeTree(dir, {
    "index.js": `import { input, output } from "loopx";
output({ result: "[" + (await input()) + "]" });
`,
  });
  // python's pty module gives the script a terminal as stdin and stdout.
  const r = await run("python3", [
    "-c",
    "import pty, sys; sys.exit(pty.spawn(sys.argv[1:]) >> 8)",
    process.execPath,
    "--import",
    REGISTER,
    join(dir, "index.js"),
  ], { cwd: dir, timeout: 15000 });
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, /\{"result":"\[\]"\}/);
});

const hooksThread = typeof (await import("node:module")).registerHooks !== "function";

// Speed, checked by what loads rather than by a timing: importing "loopx"
// must not build node:fs's ESM facade, which loads fs/promises, readline
// and file streams (index.js says what that costs). On Node's hooks
// thread (Node < 22.15) module.register() loads them itself.
test("importing loopx and calling output() loads no node:fs facade", { skip: hooksThread && "hooks on Node's hooks thread" }, async (t) => {
  const r = await script(t, `import { output } from "loopx";
output({ result: String(process.moduleLoadList.includes("NativeModule internal/fs/promises")) });
`);
  assert.equal(r.stdout, '{"result":"false"}', r.stderr);
});

// A Node without process.getBuiltinModule (20.6-20.15), with the hooks on
// Node's hooks thread: the preload hands node:fs over (Node that has
// module.registerHooks has getBuiltinModule too).
test("output() on a Node without process.getBuiltinModule", { skip: !hooksThread && "this Node has in-thread hooks" }, async (t) => {
  const dir = tempDir(t);
  writeTree(dir, { "index.js": 'import { output } from "loopx";\noutput({ result: typeof process.getBuiltinModule });\n' });
  const r = await run(process.execPath, ["--import", "data:text/javascript,delete process.getBuiltinModule", "--import", REGISTER, "index.js"], { cwd: dir });
  assert.equal(r.stdout, '{"result":"undefined"}', r.stderr);
  assert.equal(r.code, 0);
});
