// run() and runPromise() (SPEC §9) against the real binary built by cargo
// (LOOPX_BINARY_PATH), with bash workflows in temp projects.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, realpathSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { run, runPromise } from "../index.js";
import { BUN, PKG, run as runProcess, tempDir, waitFor, writeTree } from "./util.js";

const BINARY =
  process.env.LOOPX_TEST_BINARY ?? join(process.env.CARGO_TARGET_DIR ?? join(PKG, "..", "..", "target"), "debug", "loopx");
if (!existsSync(BINARY)) {
  throw new Error(`${BINARY} does not exist: build it with \`cargo build\` first (or set LOOPX_TEST_BINARY)`);
}
// run() reads the environment at call time, so this holds for every run
// below. A private HOME keeps the user's global env file out.
const HOME = realpathSync(mkdtempSync(join(tmpdir(), "loopx-api-home-")));
process.on("exit", () => rmSync(HOME, { recursive: true, force: true }));
Object.assign(process.env, { LOOPX_BINARY_PATH: BINARY, HOME, XDG_CONFIG_HOME: join(HOME, ".config") });
for (const name of Object.keys(process.env)) {
  if (name.startsWith("LOOPX_") && name !== "LOOPX_BINARY_PATH") delete process.env[name];
}

// A hung run fails its test instead of the whole suite.
const T = { timeout: 60_000 };

/** A project root with bash scripts: { "w/index.sh": body, ... } under .loopx/. */
function project(t, scripts, files = {}) {
  const root = tempDir(t);
  const tree = { ...files };
  for (const [path, body] of Object.entries(scripts)) tree[join(".loopx", path)] = [body, 0o755];
  writeTree(root, tree);
  return root;
}

/** A script that logs `name` to $LOOPX_PROJECT_ROOT/log and prints `json`. */
function logged(name, json) {
  return `echo ${name} >> "$LOOPX_PROJECT_ROOT/log"\nprintf '%s' '${JSON.stringify(json)}'\n`;
}

function log(root) {
  const file = join(root, "log");
  return existsSync(file) ? readFileSync(file, "utf8").split("\n").filter(Boolean) : [];
}

// A script that starts a background grandchild writing its pid, then
// signals readiness and blocks: the group to be terminated.
const BLOCKING = `echo blocking >> "$LOOPX_PROJECT_ROOT/log"
sleep 300 &
echo $! > "$LOOPX_PROJECT_ROOT/grandchild"
: > "$LOOPX_PROJECT_ROOT/ready"
wait
`;

function isAlive(pid) {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return error.code !== "ESRCH";
  }
}

function grandchild(root) {
  return Number(readFileSync(join(root, "grandchild"), "utf8").trim());
}

/** What `loopx run <args>` prints as its error, without the "loopx: error: " prefix. */
function cliError(cwd, args) {
  const r = spawnSync(BINARY, ["run", ...args], { cwd, encoding: "utf8" });
  assert.equal(r.status, 1, r.stderr);
  // Anything before the error is the scripts' own stderr.
  const at = r.stderr.indexOf("loopx: error: ");
  assert.ok(at >= 0, r.stderr);
  return r.stderr.slice(at + "loopx: error: ".length).replace(/\n$/, "");
}

async function collect(loop) {
  const outputs = [];
  for await (const out of loop) outputs.push(out);
  return outputs;
}

async function rejection(promise, what = "") {
  let value;
  try {
    value = await promise;
  } catch (error) {
    return error;
  }
  assert.fail(`expected a rejection ${what}, got ${JSON.stringify(value)}`);
}

test("yields one Output per iteration, goto hops included, in order", T, async (t) => {
  const root = project(t, {
    "a/index.sh": logged("a:index", { result: "start", goto: "check" }),
    "a/check.sh": logged("a:check", { result: "checked", goto: "b:index" }),
    "b/index.sh": logged("b:index", { result: "end", stop: true }),
  });
  const expected = [
    { result: "start", goto: "check" },
    { result: "checked", goto: "b:index" },
    { result: "end", stop: true },
  ];
  assert.deepEqual(await collect(run("a", { cwd: root })), expected);
  assert.deepEqual(log(root), ["a:index", "a:check", "b:index"]);
  assert.deepEqual(await runPromise("a", { cwd: root }), expected);
});

test("the final output is yielded before the generator completes", T, async (t) => {
  const root = project(t, {
    "w/index.sh": logged("w", { result: "one", goto: "last" }),
    "w/last.sh": logged("last", { result: "two", stop: true }),
  });
  const loop = run("w", { cwd: root });
  assert.deepEqual(await loop.next(), { value: { result: "one", goto: "last" }, done: false });
  assert.deepEqual(await loop.next(), { value: { result: "two", stop: true }, done: false });
  assert.deepEqual(await loop.next(), { value: undefined, done: true });
  assert.deepEqual(await loop.next(), { value: undefined, done: true });
  // The same with the -n limit: the Nth output, then completion.
  const limited = run("w:last", { cwd: root, maxIterations: 1 });
  assert.deepEqual(await limited.next(), { value: { result: "two", stop: true }, done: false });
  assert.deepEqual(await limited.next(), { value: undefined, done: true });
});

test("stop: true ends the loop; without goto the loop restarts at the target", T, async (t) => {
  const root = project(t, {
    "w/index.sh": `n=$(cat "$LOOPX_PROJECT_ROOT/count" 2>/dev/null || echo 0); n=$((n+1)); echo $n > "$LOOPX_PROJECT_ROOT/count"
if [ $n -ge 3 ]; then printf '{"result":"%s","stop":true}' $n; else printf '{"result":"%s"}' $n; fi
`,
  });
  assert.deepEqual(await runPromise("w", { cwd: root }), [{ result: "1" }, { result: "2" }, { result: "3", stop: true }]);
});

test("the next iteration starts only when the consumer asks for it", T, async (t) => {
  const root = project(t, { "w/index.sh": logged("first", { result: "first" }) });
  const loop = run("w", { cwd: root });
  assert.deepEqual((await loop.next()).value, { result: "first" });
  // Had the second iteration started already, it would run the old script.
  writeFileSync(join(root, ".loopx/w/index.sh"), logged("second", { result: "second", stop: true }));
  assert.deepEqual((await loop.next()).value, { result: "second", stop: true });
  assert.deepEqual(await loop.next(), { value: undefined, done: true });
  assert.deepEqual(log(root), ["first", "second"]);
});

test("maxIterations: N counts every execution, 0 validates and runs nothing", T, async (t) => {
  const root = project(t, {
    "w/index.sh": logged("index", { goto: "hop" }),
    "w/hop.sh": logged("hop", { result: "hopped" }),
  });
  assert.deepEqual(await runPromise("w", { cwd: root, maxIterations: 3 }), [{ goto: "hop" }, { result: "hopped" }, { goto: "hop" }]);
  assert.deepEqual(log(root), ["index", "hop", "index"]);

  assert.deepEqual(await runPromise("w", { cwd: root, maxIterations: 0 }), []);
  assert.deepEqual(await collect(run("w", { cwd: root, maxIterations: 0 })), []);
  assert.equal(log(root).length, 3, "maxIterations 0 ran nothing");
  // 0 still validates the target.
  const error = await rejection(runPromise("nope", { cwd: root, maxIterations: 0 }));
  assert.equal(error.message, cliError(root, ["-n", "0", "nope"]));
});

test("maxIterations: 0 skips the workflow version check; a run warns once on first entry", T, async (t) => {
  const root = project(
    t,
    { "w/index.sh": logged("index", { result: "x" }) },
    { ".loopx/w/package.json": JSON.stringify({ dependencies: { loopx: ">=999.0.0" } }) },
  );
  const script = (n) => driver(t, `
const outputs = await runPromise("w", { cwd: ${JSON.stringify(root)}, maxIterations: ${n} });
process.stdout.write(JSON.stringify(outputs));
`);
  const none = await runProcess(process.execPath, [script(0)]);
  assert.equal(none.code, 0, none.stderr);
  assert.equal(none.stdout, "[]");
  assert.equal(none.stderr, "", "no version check with maxIterations: 0 (§3.2)");

  const two = await runProcess(process.execPath, [script(2)]);
  assert.equal(two.code, 0, two.stderr);
  assert.equal(two.stdout, JSON.stringify([{ result: "x" }, { result: "x" }]));
  const warnings = two.stderr.split("\n").filter((line) => line.includes(">=999.0.0"));
  assert.equal(warnings.length, 1, `one warning on first entry only:\n${two.stderr}`);
  assert.match(warnings[0], /^loopx: warning: workflow 'w' requires loopx version >=999\.0\.0/);
});

test("an invalid maxIterations is rejected on first use, never synchronously", T, async (t) => {
  const root = project(t, { "w/index.sh": logged("ran", { stop: true }) });
  for (const [value, shown] of [[-1, "-1"], [1.5, "1.5"], [NaN, "NaN"], ["3", "'3'"], [Infinity, "Infinity"], [null, "null"]]) {
    const message = `invalid value ${shown} for maxIterations: expected a non-negative integer`;
    let loop;
    assert.doesNotThrow(() => (loop = run("w", { cwd: root, maxIterations: value })));
    await assert.rejects(loop.next(), { name: "TypeError", message });
    assert.deepEqual(await loop.next(), { value: undefined, done: true });
    let promise;
    assert.doesNotThrow(() => (promise = runPromise("w", { cwd: root, maxIterations: value })));
    await assert.rejects(promise, { message });
  }
  assert.deepEqual(log(root), []);
});

test("invalid timeout, maxTime, retry and retryDelay are rejected on first use, like maxIterations", T, async (t) => {
  const root = project(t, { "w/index.sh": logged("ran", { stop: true }) });
  const cases = [
    ["timeout", 0, "0", "a positive integer number of milliseconds"],
    ["timeout", 1.5, "1.5", "a positive integer number of milliseconds"],
    ["maxTime", -1, "-1", "a positive integer number of milliseconds"],
    ["maxTime", "1h", "'1h'", "a positive integer number of milliseconds"],
    ["retry", -1, "-1", "a non-negative integer"],
    ["retry", NaN, "NaN", "a non-negative integer"],
    ["retryDelay", -5, "-5", "a non-negative integer number of milliseconds"],
    ["retryDelay", Infinity, "Infinity", "a non-negative integer number of milliseconds"],
    ["maxWait", 1.5, "1.5", "a non-negative integer number of milliseconds"],
    ["maxCost", -1, "-1", "US dollars (a number of at least 0)"],
    ["maxCost", "5", "'5'", "US dollars (a number of at least 0)"],
  ];
  for (const [name, value, shown, what] of cases) {
    const message = `invalid value ${shown} for ${name}: expected ${what}`;
    let loop;
    assert.doesNotThrow(() => (loop = run("w", { cwd: root, [name]: value })));
    await assert.rejects(loop.next(), { name: "TypeError", message });
    await assert.rejects(runPromise("w", { cwd: root, [name]: value }), { message });
  }
  assert.deepEqual(log(root), []);
});

test("timeout: a script that runs too long fails the run with exitCode 124 and reason timed_out", T, async (t) => {
  const root = project(t, { "w/index.sh": `echo $$ > "$LOOPX_PROJECT_ROOT/pid"\nsleep 30\n` });
  const error = await rejection(runPromise("w", { cwd: root, timeout: 300 }));
  assert.equal(error.message, "w:index timed out after 300ms; its process group was terminated");
  assert.equal(error.exitCode, 124);
  assert.equal(error.reason, "timed_out");
  const pid = Number(readFileSync(join(root, "pid"), "utf8"));
  assert.throws(() => process.kill(pid, 0), { code: "ESRCH" });
});

test("a wait a script asks for happens inside the run: its output is not yielded", T, async (t) => {
  const root = project(t, {
    "w/index.sh": `echo "ran $LOOPX_WAITS" >> "$LOOPX_PROJECT_ROOT/log"
if [ "$LOOPX_WAITS" = 0 ]; then printf '{"result":"not yet","retry_after":0.1}'; else printf '{"result":"done","stop":true}'; fi
`,
  });
  assert.deepEqual(await runPromise("w", { cwd: root }), [{ result: "done", stop: true }]);
  assert.deepEqual(log(root), ["ran 0", "ran 1"]);
});

test("maxWait: a longer wait fails the run with exitCode 75 and reason wait", T, async (t) => {
  const root = project(t, { "w/index.sh": `printf '{"retry_after":3600}'
` });
  const error = await rejection(runPromise("w", { cwd: root, maxWait: 1000 }));
  assert.equal(error.exitCode, 75);
  assert.equal(error.reason, "wait");
  assert.match(error.message, /^w:index asked to run again at .* \(in 1h\), longer than --max-wait 1s/);
});

test("abort during a wait ends the run at once with an AbortError", T, async (t) => {
  const root = project(t, { "w/index.sh": `touch "$LOOPX_PROJECT_ROOT/ready"
printf '{"retry_after":3600}'
` });
  const controller = new AbortController();
  const promise = runPromise("w", { cwd: root, signal: controller.signal });
  await waitFor(() => existsSync(join(root, "ready")));
  // The script has ended; give loopx a moment to begin its wait.
  await new Promise((resolve) => setTimeout(resolve, 200));
  const started = Date.now();
  controller.abort();
  await assert.rejects(promise, { name: "AbortError" });
  assert.ok(Date.now() - started < 3000, "the wait ended at once");
});

test("maxCost: the run completes once the scripts' reported cost reaches it", T, async (t) => {
  const root = project(t, { "w/index.sh": logged("ran", { result: "r", cost_usd: 0.5 }) });
  const outputs = await runPromise("w", { cwd: root, maxCost: 1 });
  assert.equal(outputs.length, 2);
  assert.deepEqual(log(root), ["ran", "ran"]);
});

test("retry and retryDelay: a failed script runs again with the same input", T, async (t) => {
  const root = project(t, {
    "w/index.sh": logged("index", { result: "payload", goto: "check" }),
    "w/check.sh": `echo "$LOOPX_ATTEMPT $(cat)" >> "$LOOPX_PROJECT_ROOT/log"
[ "$LOOPX_ATTEMPT" = 2 ] || exit 3
printf '{"result":"checked","stop":true}'
`,
  });
  const outputs = await runPromise("w", { cwd: root, retry: 2, retryDelay: 0, maxIterations: 5 });
  assert.deepEqual(outputs, [{ result: "payload", goto: "check" }, { result: "checked", stop: true }]);
  assert.deepEqual(log(root), ["index", "1 payload", "2 payload"]);
  const error = await rejection(runPromise("w:check", { cwd: root, retry: 0 }));
  assert.equal(error.exitCode, 1);
  assert.equal(error.reason, "script_failed");
});

test("maxTime: no script starts after the budget, and the run completes normally", T, async (t) => {
  const root = project(t, { "w/index.sh": `echo x >> "$LOOPX_PROJECT_ROOT/log"\nsleep 0.4\nprintf '{"result":"r"}'\n` });
  const outputs = await runPromise("w", { cwd: root, maxTime: 600 });
  assert.ok(outputs.length >= 1 && outputs.length <= 3, `${outputs.length} outputs`);
  assert.deepEqual(outputs, outputs.map(() => ({ result: "r" })));
  assert.equal(log(root).length, outputs.length);
});

test("log: the run's JSONL record, relative to cwd, like --log", T, async (t) => {
  const root = project(t, { "w/index.sh": logged("w", { result: "r", stop: true }) });
  assert.deepEqual(await runPromise("w", { cwd: root, log: "run.jsonl" }), [{ result: "r", stop: true }]);
  const events = readFileSync(join(root, "run.jsonl"), "utf8").trim().split("\n").map((l) => JSON.parse(l));
  assert.deepEqual(events.map((e) => e.event), ["run_start", "script_start", "script_end", "run_end"]);
  assert.equal(events[3].reason, "stop");
  await assert.rejects(runPromise("w", { cwd: root, log: 5 }), { name: "TypeError", message: "invalid value 5 for log: expected a file path" });
});

test("every error surfaces lazily with the CLI's wording", T, async (t) => {
  const root = project(t, {
    "w/index.sh": logged("w", { result: "ok" }),
    "w/fails.sh": "exit 3\n",
    "w/badgoto.sh": `printf '{"goto":"a:b:c"}'`,
    "w/lostgoto.sh": `printf '{"goto":"ghost:index"}'`,
    "noindex/other.sh": logged("other", {}),
  });
  const cases = [
    ["missing workflow", "ghost", []],
    ["missing script", "w:ghost", []],
    ["missing index", "noindex", []],
    ["invalid target: two colons", "w:a:b", []],
    ["invalid target: leading colon", ":w", []],
    ["invalid target: trailing colon", "w:", []],
    ["invalid target: empty", "", []],
    ["invalid target: bad name", "bad name", []],
    ["invalid target: looks like an option", "-n", []],
    ["missing env file", "w", ["-e", join(root, "missing.env")], { envFile: "missing.env" }],
    ["script exit != 0", "w:fails", []],
    // The output carrying a bad goto is yielded; the transition then fails.
    ["invalid goto", "w:badgoto", [], {}, { goto: "a:b:c" }],
    ["goto to a missing workflow", "w:lostgoto", [], {}, { goto: "ghost:index" }],
  ];
  for (const [what, target, cliArgs, options = {}, before] of cases) {
    const expected = cliError(root, [...cliArgs, "--", target]);
    let loop;
    assert.doesNotThrow(() => (loop = run(target, { cwd: root, ...options })), what);
    if (before) assert.deepEqual(await loop.next(), { value: before, done: false }, what);
    const error = await rejection(loop.next(), what);
    assert.equal(error.message, expected, what);
    assert.equal(error.exitCode, 1, what);
    assert.deepEqual(await loop.next(), { value: undefined, done: true }, what);
    let promise;
    assert.doesNotThrow(() => (promise = runPromise(target, { cwd: root, ...options })), what);
    assert.equal((await rejection(promise)).message, expected, what);
  }
  assert.deepEqual(log(root), [], "no iteration ran before a start-up error");
});

test("validation failures and a missing .loopx/ surface lazily with the CLI's wording", T, async (t) => {
  const invalid = project(t, { "w/index.sh": logged("w", {}), "w/index.ts": "", "w/bad name.sh": "" });
  const error = await rejection(runPromise("w", { cwd: invalid }));
  assert.equal(error.message, cliError(invalid, ["w"]));
  assert.match(error.message, /^invalid \.loopx\/ contents/);

  const empty = tempDir(t);
  const missing = await rejection(run("w", { cwd: empty }).next());
  assert.equal(missing.message, cliError(empty, ["w"]));
});

test("a target that is not a string is rejected lazily", T, async (t) => {
  const root = project(t, { "w/index.sh": logged("w", { stop: true }) });
  for (const [target, message] of [
    [undefined, /^missing target: run\(<workflow>\[:<script>\]\) needs a target string/],
    [null, /^missing target/],
    [42, /^invalid target 42: expected a string <workflow>\[:<script>\]$/],
    [{}, /^invalid target an object: expected a string/],
    [["w"], /^invalid target an array: expected a string/],
  ]) {
    let loop;
    assert.doesNotThrow(() => (loop = run(target, { cwd: root })));
    await assert.rejects(loop.next(), { name: "TypeError", message });
    let promise;
    assert.doesNotThrow(() => (promise = runPromise(target, { cwd: root })));
    await assert.rejects(promise, { name: "TypeError", message });
  }
  let promise;
  assert.doesNotThrow(() => (promise = runPromise()));
  await assert.rejects(promise, { message: /^missing target/ });
  assert.deepEqual(log(root), []);
});

test("bad options are rejected lazily", T, async (t) => {
  const root = project(t, { "w/index.sh": logged("w", { stop: true }) });
  for (const [options, message] of [
    [5, /^invalid options 5: expected an object/],
    [{ cwd: 5 }, /^invalid value 5 for cwd: expected a directory path$/],
    [{ envFile: true }, /^invalid value true for envFile: expected a file path$/],
    [{ signal: {} }, /^invalid value an object for signal: expected an AbortSignal$/],
    [{ get maxIterations() { throw new Error("getter failed"); } }, /^getter failed$/],
  ]) {
    let loop;
    assert.doesNotThrow(() => (loop = run("w", options)));
    await assert.rejects(loop.next(), { message });
  }
  assert.deepEqual(log(root), []);
});

test("outputs yielded before an error stay with the consumer", T, async (t) => {
  const root = project(t, {
    "w/index.sh": logged("index", { result: "first", goto: "second" }),
    "w/second.sh": logged("second", { result: "second", goto: "fails" }),
    "w/fails.sh": "exit 4\n",
  });
  const seen = [];
  const error = await rejection(
    (async () => {
      for await (const out of run("w", { cwd: root })) seen.push(out);
    })(),
  );
  assert.deepEqual(seen, [{ result: "first", goto: "second" }, { result: "second", goto: "fails" }]);
  assert.equal(error.message, "script w:fails exited with code 4; stopping the loop");
  assert.equal(error.exitCode, 1);
});

test("options, cwd and environment are snapshotted at call time", T, async (t) => {
  const a = project(t, { "w/index.sh": `printf '{"result":"a %s"}' "$SNAP"` });
  const b = project(t, { "w/index.sh": `printf '{"result":"b %s"}' "$SNAP"` });
  const options = { cwd: a, maxIterations: 2 };
  process.env.SNAP = "before";
  const loop = run("w", options);
  options.cwd = b;
  options.maxIterations = 5;
  process.env.SNAP = "after";
  assert.deepEqual(await collect(loop), [{ result: "a before" }, { result: "a before" }]);

  // The default cwd is process.cwd() at the call, not at the first next().
  const previous = process.cwd();
  process.chdir(a);
  let promise;
  try {
    promise = runPromise("w", { maxIterations: 1 });
  } finally {
    process.chdir(b);
  }
  try {
    assert.deepEqual(await promise, [{ result: "a after" }]);
  } finally {
    process.chdir(previous);
    delete process.env.SNAP;
  }
});

test("cwd is the project root; a relative envFile resolves against it", T, async (t) => {
  const root = project(
    t,
    { "w/index.sh": `printf '{"result":"%s|%s|%s"}' "$LOOPX_PROJECT_ROOT" "$FROM_FILE" "$PWD"` },
    { "conf/local.env": "FROM_FILE=project\n" },
  );
  const elsewhere = tempDir(t);
  writeTree(elsewhere, { "conf/local.env": "FROM_FILE=elsewhere\n" });
  const expected = [{ result: `${root}|project|${join(root, ".loopx", "w")}` }];
  const previous = process.cwd();
  process.chdir(elsewhere);
  try {
    assert.deepEqual(await runPromise("w", { cwd: root, envFile: "conf/local.env", maxIterations: 1 }), expected);
    // A relative cwd resolves against process.cwd() at call time.
    process.chdir(join(root, ".."));
    const relative = root.slice(root.lastIndexOf("/") + 1);
    assert.deepEqual(await runPromise("w", { cwd: relative, envFile: "conf/local.env", maxIterations: 1 }), expected);
  } finally {
    process.chdir(previous);
  }
  // An absolute envFile is used as it is.
  assert.deepEqual(
    await runPromise("w", { cwd: root, envFile: join(elsewhere, "conf/local.env"), maxIterations: 1 }),
    [{ result: `${root}|elsewhere|${join(root, ".loopx", "w")}` }],
  );
  // A cwd that does not exist is a clear error.
  await assert.rejects(runPromise("w", { cwd: join(root, "nowhere") }), {
    message: `cannot run loopx in ${join(root, "nowhere")}: no such directory (cwd is the project root, where .loopx/ is)`,
  });
});

test("return() while a script runs terminates its process group and completes silently", T, async (t) => {
  const root = project(t, { "w/index.sh": BLOCKING });
  const loop = run("w", { cwd: root });
  const pending = loop.next();
  await waitFor(() => existsSync(join(root, "ready")));
  const pid = grandchild(root);
  assert.ok(isAlive(pid));
  assert.deepEqual(await loop.return("bye"), { value: "bye", done: true });
  assert.deepEqual(await pending, { value: undefined, done: true });
  assert.ok(!isAlive(pid), "the script's background grandchild is gone");
  assert.deepEqual(await loop.next(), { value: undefined, done: true });
  assert.deepEqual(log(root), ["blocking"]);
});

test("break between iterations starts no further script", T, async (t) => {
  const root = project(t, { "w/index.sh": logged("ran", { result: "again" }) });
  let count = 0;
  for await (const out of run("w", { cwd: root })) {
    assert.deepEqual(out, { result: "again" });
    if (++count === 2) break;
  }
  // The loop has completed, so the binary is gone: nothing can start later.
  assert.deepEqual(log(root), ["ran", "ran"]);
});

test("return() and throw() before the first next() start nothing", T, async (t) => {
  const root = project(t, { "w/index.sh": logged("ran", {}) });
  const loop = run("w", { cwd: root });
  assert.deepEqual(await loop.return(), { value: undefined, done: true });
  assert.deepEqual(await loop.next(), { value: undefined, done: true });
  const thrown = run("w", { cwd: root });
  const reason = new Error("consumer gave up");
  assert.equal(await rejection(thrown.throw(reason)), reason);
  assert.deepEqual(await thrown.next(), { value: undefined, done: true });
  assert.deepEqual(log(root), []);
});

test("abort: an already-aborted signal fails on first use and starts nothing", T, async (t) => {
  const root = project(t, { "w/index.sh": logged("ran", {}) });
  const signal = AbortSignal.abort();
  let loop;
  assert.doesNotThrow(() => (loop = run("w", { cwd: root, signal })));
  const error = await rejection(loop.next());
  assert.equal(error.name, "AbortError");
  assert.equal(error, signal.reason, "the signal's own AbortError is thrown");
  assert.deepEqual(await loop.next(), { value: undefined, done: true });
  await assert.rejects(runPromise("w", { cwd: root, signal }), { name: "AbortError" });
  // Abort wins over other errors, as a fetch() with an aborted signal.
  await assert.rejects(runPromise(42, { cwd: root, signal }), { name: "AbortError" });
  assert.deepEqual(log(root), []);
});

test("abort before the first next() throws an AbortError and starts nothing", T, async (t) => {
  const root = project(t, { "w/index.sh": logged("ran", {}) });
  const controller = new AbortController();
  const loop = run("w", { cwd: root, signal: controller.signal });
  controller.abort();
  await assert.rejects(loop.next(), { name: "AbortError" });
  assert.deepEqual(log(root), []);
});

test("abort while a script runs terminates its process group and throws an AbortError", T, async (t) => {
  const root = project(t, { "w/index.sh": BLOCKING });
  const controller = new AbortController();
  const loop = run("w", { cwd: root, signal: controller.signal });
  const pending = loop.next();
  await waitFor(() => existsSync(join(root, "ready")));
  const pid = grandchild(root);
  controller.abort();
  const error = await rejection(pending);
  assert.equal(error.name, "AbortError");
  assert.ok(!isAlive(pid), "the script's background grandchild is gone");
  assert.deepEqual(await loop.next(), { value: undefined, done: true });

  // The same through runPromise().
  const again = project(t, { "w/index.sh": BLOCKING });
  const second = new AbortController();
  const promise = runPromise("w", { cwd: again, signal: second.signal });
  await waitFor(() => existsSync(join(again, "ready")));
  second.abort();
  await assert.rejects(promise, { name: "AbortError" });
  assert.ok(!isAlive(grandchild(again)));
});

test("abort between iterations throws an AbortError and starts no further script", T, async (t) => {
  const root = project(t, { "w/index.sh": logged("ran", { result: "x" }) });
  const controller = new AbortController();
  const loop = run("w", { cwd: root, signal: controller.signal });
  assert.deepEqual(await loop.next(), { value: { result: "x" }, done: false });
  controller.abort();
  await assert.rejects(loop.next(), { name: "AbortError" });
  assert.deepEqual(await loop.next(), { value: undefined, done: true });
  assert.deepEqual(log(root), ["ran"]);
});

test("abort with a reason that is not an AbortError still throws an AbortError, with the reason as cause", T, async (t) => {
  const root = project(t, { "w/index.sh": logged("ran", {}) });
  const controller = new AbortController();
  const reason = new Error("shutting down");
  controller.abort(reason);
  const error = await rejection(runPromise("w", { cwd: root, signal: controller.signal }));
  assert.equal(error.name, "AbortError");
  assert.equal(error.cause, reason);
  const timeout = await rejection(runPromise("w", { cwd: root, signal: AbortSignal.abort(new DOMException("late", "TimeoutError")) }));
  assert.equal(timeout.name, "AbortError");
  assert.equal(timeout.cause.name, "TimeoutError");
});

test("concurrent runs do not interfere", T, async (t) => {
  const counter = (name, stopAt) =>
    `n=$(cat "$LOOPX_PROJECT_ROOT/count" 2>/dev/null || echo 0); n=$((n+1)); echo $n > "$LOOPX_PROJECT_ROOT/count"
if [ $n -ge ${stopAt} ]; then printf '{"result":"${name}%s","stop":true}' $n; else printf '{"result":"${name}%s"}' $n; fi
`;
  const a = project(t, { "w/index.sh": counter("a", 4) });
  const b = project(t, { "w/index.sh": counter("b", 3) });
  const blocked = project(t, { "w/index.sh": BLOCKING });
  const controller = new AbortController();
  const aborted = runPromise("w", { cwd: blocked, signal: controller.signal }).then(
    () => assert.fail("the aborted run resolved"),
    (error) => error,
  );
  // Interleave two generators step by step while a third run is aborted.
  const la = run("w", { cwd: a });
  const lb = run("w", { cwd: b });
  const seen = [];
  for (;;) {
    const [na, nb] = await Promise.all([la.next(), lb.next()]);
    if (na.done && nb.done) break;
    if (!na.done) seen.push(na.value.result);
    if (!nb.done) seen.push(nb.value.result);
    if (seen.length === 2) {
      await waitFor(() => existsSync(join(blocked, "ready")));
      controller.abort();
    }
  }
  assert.equal((await aborted).name, "AbortError");
  assert.deepEqual(seen, ["a1", "b1", "a2", "b2", "a3", "b3", "a4"]);
  const many = await Promise.all(Array.from({ length: 6 }, (_, i) => runPromise(`w${i}`, { cwd: project(t, { [`w${i}/index.sh`]: logged("x", { result: `r${i}`, stop: true }) }) })));
  assert.deepEqual(many, Array.from({ length: 6 }, (_, i) => [{ result: `r${i}`, stop: true }]));
});

// A program that uses the API as application code would, in its own process.
function driver(t, body) {
  const dir = tempDir(t);
  const file = join(dir, "driver.mjs");
  writeFileSync(file, `import { run, runPromise } from ${JSON.stringify(join(PKG, "index.js"))};\n${body}\n`);
  return file;
}

test("script stderr reaches the parent's stderr; nothing is printed to stdout", T, async (t) => {
  const root = project(t, {
    "w/index.sh": `echo "script says hello" >&2\nprintf '{"result":"secret result","goto":"end"}'`,
    "w/end.sh": `echo "end says bye" >&2\nprintf '{"result":"done","stop":true}'`,
  });
  const out = join(tempDir(t), "outputs.json");
  const file = driver(t, `
import { writeFileSync } from "node:fs";
writeFileSync(${JSON.stringify(out)}, JSON.stringify(await runPromise("w", { cwd: ${JSON.stringify(root)} })));
`);
  const r = await runProcess(process.execPath, [file]);
  assert.equal(r.code, 0, r.stderr);
  assert.equal(r.stdout, "");
  assert.equal(r.stderr, "script says hello\nend says bye\n");
  assert.deepEqual(JSON.parse(readFileSync(out, "utf8")), [
    { result: "secret result", goto: "end" },
    { result: "done", stop: true },
  ]);
});

test("the API works under Bun too: outputs, break during a script, abort", { ...T, skip: !BUN && "bun not found" }, async (t) => {
  const root = project(t, { "w/index.sh": logged("ran", { result: "r" }) });
  const blocked = project(t, { "w/index.sh": BLOCKING });
  const out = join(tempDir(t), "report.json");
  const file = driver(t, `
import { existsSync, writeFileSync } from "node:fs";
const report = {};
report.outputs = await runPromise("w", { cwd: ${JSON.stringify(root)}, maxIterations: 2 });
const loop = run("w", { cwd: ${JSON.stringify(blocked)} });
const pending = loop.next();
while (!existsSync(${JSON.stringify(join(blocked, "ready"))})) await new Promise((r) => setTimeout(r, 10));
report.returned = await loop.return();
report.pending = await pending;
const controller = new AbortController();
const aborted = run("w", { cwd: ${JSON.stringify(root)}, signal: controller.signal });
await aborted.next();
controller.abort();
report.abort = await aborted.next().then(() => "resolved", (error) => error.name);
writeFileSync(${JSON.stringify(out)}, JSON.stringify(report));
`);
  const r = await runProcess(BUN, [file]);
  assert.equal(r.code, 0, r.stderr);
  assert.equal(r.stdout, "");
  assert.deepEqual(JSON.parse(readFileSync(out, "utf8")), {
    outputs: [{ result: "r" }, { result: "r" }],
    returned: { done: true },
    pending: { done: true },
    abort: "AbortError",
  });
  assert.ok(!isAlive(grandchild(blocked)));
  assert.deepEqual(log(root), ["ran", "ran", "ran"]);
});

test("an abandoned generator does not keep the process alive, and nothing more starts", T, async (t) => {
  const root = project(t, { "w/index.sh": `echo $PPID > "$LOOPX_PROJECT_ROOT/binary-pid"\n${logged("ran", { result: "x" })}` });
  const file = driver(t, `
const loop = run("w", { cwd: ${JSON.stringify(root)} });
await loop.next();
`);
  const r = await runProcess(process.execPath, [file], { timeout: 20000 });
  assert.equal(r.code, 0, r.stderr);
  assert.equal(r.stderr, "");
  // The binary (the script's parent) saw its consumer go and ended
  // without another iteration.
  const binaryPid = Number(readFileSync(join(root, "binary-pid"), "utf8"));
  await waitFor(() => !isAlive(binaryPid));
  assert.deepEqual(log(root), ["ran"]);
});

test("the application exiting while a script runs terminates the script's process group", T, async (t) => {
  // No return(), no abort: the consumer's process is simply gone (it exited
  // or crashed). The running script must not go on for nobody (§9.1).
  const root = project(t, { "w/index.sh": BLOCKING, "w/next.sh": logged("next", { result: "x" }) });
  const file = driver(t, `
import { existsSync } from "node:fs";
const loop = run("w", { cwd: ${JSON.stringify(root)} });
loop.next();
while (!existsSync(${JSON.stringify(join(root, "ready"))})) await new Promise((r) => setTimeout(r, 10));
process.exit(0);
`);
  const r = await runProcess(process.execPath, [file], { timeout: 20000 });
  assert.equal(r.code, 0, r.stderr);
  const pid = grandchild(root);
  // SIGTERM at once, well inside the 5 s grace period.
  await waitFor(() => !isAlive(pid), 4000);
  assert.deepEqual(log(root), ["blocking"]);
});

test("importing the package entry loads neither child_process nor the API code", T, async () => {
  const r = await runProcess(process.execPath, [
    "--input-type=module",
    "-e",
    `await import(${JSON.stringify(join(PKG, "index.js"))});
     console.log(JSON.stringify(process.moduleLoadList.filter((m) => m.includes("child_process"))));`,
  ]);
  assert.equal(r.code, 0, r.stderr);
  assert.equal(r.stdout, "[]\n");
});

// A stand-in binary for protocol mismatches.
function fakeBinary(t, script) {
  const dir = tempDir(t);
  writeTree(dir, { loopx: [`#!/bin/bash\n${script}\n`, 0o755] });
  return join(dir, "loopx");
}

test("a binary speaking another protocol is detected with a clear error", T, async (t) => {
  const root = project(t, { "w/index.sh": logged("ran", {}) });
  const version = JSON.parse(readFileSync(join(PKG, "package.json"), "utf8")).version;
  const fake = fakeBinary(t, `echo "$*" > "$(dirname "$0")/args"\necho '{"type":"protocol","supported":"7","version":"9.9.9"}'\nexit 1`);
  process.env.LOOPX_BINARY_PATH = fake;
  let promise;
  try {
    promise = runPromise("w", { cwd: root });
  } finally {
    process.env.LOOPX_BINARY_PATH = BINARY;
  }
  const error = await rejection(promise);
  assert.equal(
    error.message,
    `the loopx binary ${fake} (version 9.9.9) speaks API protocol 7, but this loopx package (version ${version}) needs protocol 1; ` +
      "reinstall loopx so the package and its binary match, or point LOOPX_BINARY_PATH at a matching binary",
  );
  assert.equal(readFileSync(join(fake, "..", "args"), "utf8"), "__api 1 -- w\n");

  // A binary too old to know the API mode at all answers nothing.
  const old = fakeBinary(t, `echo "loopx: error: unknown command '$1'" >&2\nexit 2`);
  process.env.LOOPX_BINARY_PATH = old;
  try {
    promise = runPromise("w", { cwd: root });
  } finally {
    process.env.LOOPX_BINARY_PATH = BINARY;
  }
  assert.match(
    (await rejection(promise)).message,
    /^the loopx binary .+ exited with code 2 without answering on the API channel \(protocol 1\); .*too old/,
  );
  assert.deepEqual(log(root), []);
});

test("a binary that cannot be found is reported lazily with the shim's message", T, async (t) => {
  const root = project(t, { "w/index.sh": logged("ran", {}) });
  const missing = join(root, "no-such-loopx");
  process.env.LOOPX_BINARY_PATH = missing;
  let promise;
  try {
    assert.doesNotThrow(() => (promise = runPromise("w", { cwd: root })));
  } finally {
    process.env.LOOPX_BINARY_PATH = BINARY;
  }
  await assert.rejects(promise, { message: `LOOPX_BINARY_PATH is set to ${missing}, which is not an executable file` });
  process.env.LOOPX_BINARY_PATH = missing;
  const loop = run("w", { cwd: root });
  process.env.LOOPX_BINARY_PATH = BINARY;
  await assert.rejects(loop.next(), { message: /^LOOPX_BINARY_PATH is set to/ });
  assert.deepEqual(await loop.next(), { value: undefined, done: true }, "the generator is complete");
  assert.deepEqual(log(root), []);
});

test("the binary gets the shim's environment contract (LOOPX_PACKAGE_DIR, LOOPX_TSX)", T, async (t) => {
  const root = project(t, { "w/index.sh": `printf '{"result":"%s|%s"}' "$LOOPX_PACKAGE_DIR" "$LOOPX_TSX"` });
  const tsx = realpathSync(join(PKG, "node_modules", "tsx"));
  assert.deepEqual(await runPromise("w", { cwd: root, maxIterations: 1 }), [{ result: `${PKG}|${tsx}` }]);
});

test("the real binary and this package speak the same protocol", T, async (t) => {
  const root = project(t, { "w/index.sh": logged("ran", { stop: true }) });
  assert.deepEqual(await runPromise("w", { cwd: root }), [{ stop: true }]);
});

test("the declarations type-check a consumer, and reject a call without target", T, async (t) => {
  const dir = tempDir(t);
  const tsc = join(PKG, "node_modules", "typescript", "bin", "tsc");
  assert.ok(existsSync(tsc), `${tsc} is missing: run \`npm ci\` in dist/npm (typescript is a devDependency)`);
  writeTree(dir, {
    "node_modules/loopx": "", // replaced by a link below
    "tsconfig.json": JSON.stringify({
      compilerOptions: {
        target: "es2022",
        module: "nodenext",
        moduleResolution: "nodenext",
        lib: ["es2022", "dom"],
        types: [],
        strict: true,
        noEmit: true,
        skipLibCheck: false,
      },
      files: ["consumer.ts"],
    }),
    "package.json": JSON.stringify({ type: "module" }),
    "consumer.ts": `import { run, runPromise, output, input, type Output, type RunOptions, type ScriptOutput } from "loopx";

const options: RunOptions = { maxIterations: 10, envFile: ".env", signal: new AbortController().signal, cwd: "/tmp" };
const loop: AsyncGenerator<Output> = run("ralph", options);
for await (const out of loop) {
  const result: string | undefined = out.result;
  const goto: string | undefined = out.goto;
  const stop: boolean | undefined = out.stop;
  void [result, goto, stop];
}
const all: Output[] = await runPromise("ralph:check", { maxIterations: 1 });
void all;
const text: Promise<string> = input();
void text;
if (all.length > 99) output({ result: "x" });
if (all.length > 98) output({ retryAfter: new Date(), costUsd: 0.5 });
if (all.length > 97) output({ retryAfter: "2026-11-25T14:00:00Z" });
const wait: ScriptOutput = { retryAfter: 90 };
void wait;

// @ts-expect-error target is required
run();
// @ts-expect-error target is required
runPromise();
// @ts-expect-error target must be a string
run(42);
// @ts-expect-error maxIterations is a number
run("ralph", { maxIterations: "3" });
// @ts-expect-error no such option
run("ralph", { maxIteration: 3 });
// @ts-expect-error costUsd is a number
output({ costUsd: "1" });
`,
  });
  rmSync(join(dir, "node_modules/loopx"));
  symlinkSync(PKG, join(dir, "node_modules/loopx"));
  const ok = await runProcess(process.execPath, [tsc, "-p", dir], { timeout: 120000 });
  assert.equal(ok.code, 0, ok.stdout + ok.stderr);

  // And it can fail: the same call without @ts-expect-error is an error.
  writeFileSync(join(dir, "consumer.ts"), `import { run } from "loopx";\nrun();\n`);
  const bad = await runProcess(process.execPath, [tsc, "-p", dir], { timeout: 120000 });
  assert.notEqual(bad.code, 0);
  assert.match(bad.stdout, /consumer\.ts\(2,1\): error TS2554: Expected 1-2 arguments, but got 0\./);
});
