// The package entry of `loopx` (SPEC §3.3, §9). Every JS/TS script of a
// workflow imports it for output()/input(), so it is one small module that
// imports nothing: each module a script loads costs 0.4-0.7 ms of its
// start on Node 22 and 24 (measured), which is why the script helpers live
// here rather than in a file of their own. run() and runPromise() here only
// capture the call; the code that runs the loop (api.js, which loads
// child_process and lib/native.js) is imported on the first next().
// Measured with process.cpuUsage() over 60 cold imports each: importing
// api.js eagerly costs ~1.3 ms of CPU per script start, these wrappers
// nothing measurable.

/**
 * Runs the loop at `target` and yields each iteration's Output (§9.1).
 * Never throws: the options, cwd and environment are captured now, and every
 * error surfaces on the first next().
 */
export function run(target, options) {
  const call = capture(target, options);
  let loop;
  // One promise for every request, so the calls reach api.js in order.
  const started = () => (loop ??= import("./api.js").then((api) => api.start(call)));
  const generator = {
    next: (value) => started().then((l) => l.next(value)),
    return: (value) => started().then((l) => l.return(value)),
    throw: (error) => started().then((l) => l.throw(error)),
    [Symbol.asyncIterator]() {
      return this;
    },
    [Symbol.toStringTag]: "AsyncGenerator",
  };
  if (Symbol.asyncDispose) {
    generator[Symbol.asyncDispose] = () => generator.return().then(() => undefined);
  }
  return generator;
}

/** Runs the loop to its end and resolves to every Output (§9.2). */
export async function runPromise(target, options) {
  const outputs = [];
  for await (const out of run(target, options)) outputs.push(out);
  return outputs;
}

// §9.1: the options and cwd as they are now; later changes have no effect.
// Each option is read exactly once; api.js validates what was read.
function capture(target, options) {
  const call = { target, options };
  try {
    call.base = process.cwd();
  } catch (error) {
    call.baseError = error; // fatal only when no absolute cwd is given
  }
  try {
    call.env = { ...process.env };
    if (options !== null && typeof options === "object") {
      const { maxIterations, envFile, signal, cwd, timeout, maxTime, retry, retryDelay, maxWait, maxCost, log } =
        options;
      call.options = { maxIterations, envFile, signal, cwd, timeout, maxTime, retry, retryDelay, maxWait, maxCost, log };
    }
  } catch (error) {
    call.error = error; // e.g. a throwing getter
  }
  return call;
}

// The script helpers `output()` and `input()` (SPEC §6.4, §6.5). node:tty,
// which input() alone needs, is loaded when it runs.
//
// node:fs, for output(), comes from process.getBuiltinModule (Node >=
// 20.16 and 22.3, Bun), which hands over the module Node loaded at start-up.
// `import { writeSync } from "node:fs"` would build node:fs's ESM facade,
// which reads every export, fs.promises included, and so loads
// fs/promises, readline and file streams: 3-5 ms of CPU at each script
// start on Node 22 and 24, about a tenth of a bare `node` run (measured).
// Where Node lacks getBuiltinModule (20.6-20.15, 22.0-22.2), loopx's
// preload (loader/register.mjs, in every script loopx runs) has imported
// node:fs and left it under FS_KEY; anywhere else it is imported now and
// is there for an output() called once this module's caller has awaited
// anything. No top-level await: that would stop a CommonJS file from
// require()-ing "loopx" on a Node that can require ES modules.
const FS_KEY = Symbol.for("loopx.node:fs");
let fs = process.getBuiltinModule?.("node:fs") ?? globalThis[FS_KEY] ?? import.meta.require?.("node:fs");
if (!fs) import("node:fs").then((m) => (fs ??= m));

// The fields output() writes: §6.4's three, and the extensions a script may
// use to ask for a wait or report what it spent (DESIGN.md "Beyond the spec").
const FIELDS = [
  ["result", "result"],
  ["goto", "goto"],
  ["stop", "stop"],
  ["retryAfter", "retry_after"],
  ["costUsd", "cost_usd"],
];

/**
 * Writes `value` to stdout as the script's structured output and exits 0.
 * Never returns: the code after a call does not run (§6.4).
 */
export function output(value) {
  writeAll(JSON.stringify(payloadOf(value)));
  process.exit(0);
}

// The argument rules of §6.4. Only the known fields are written: the parser
// ignores every other field (§2.3), and leaving them out means an unrelated
// property (a cycle, a BigInt) cannot make serialization fail.
function payloadOf(value) {
  if (value === null || value === undefined) {
    throw new TypeError(`output() needs a value, got ${value}`);
  }
  if (typeof value !== "object") return { result: String(value) };
  const payload = {};
  for (const [name, key] of FIELDS) {
    // Undefined-valued properties count as absent (§6.4).
    if (value[name] !== undefined) payload[key] = value[name];
  }
  if (Object.keys(payload).length === 0) {
    throw new TypeError(
      "output() needs an object with at least one of result, goto, stop, retryAfter or costUsd set",
    );
  }
  if ("retry_after" in payload) payload.retry_after = retryAfterOf(payload.retry_after);
  if ("cost_usd" in payload) payload.cost_usd = costOf(payload.cost_usd);
  return payload;
}

// retryAfter: seconds (a number of at least 0), an RFC 3339 time (a string,
// checked by loopx), or a Date.
function retryAfterOf(value) {
  if (value instanceof Date) {
    if (Number.isNaN(value.getTime())) throw new TypeError("output() retryAfter is an invalid Date");
    return value.toISOString();
  }
  if (typeof value === "string") return value;
  if (typeof value === "number" && Number.isFinite(value) && value >= 0) return value;
  throw new TypeError(
    `output() retryAfter needs seconds (a number of at least 0), an RFC 3339 time or a Date, got ${String(value)}`,
  );
}

function costOf(value) {
  if (typeof value === "number" && Number.isFinite(value) && value >= 0) return value;
  throw new TypeError(`output() costUsd needs US dollars (a number of at least 0), got ${String(value)}`);
}

// Writes synchronously to fd 1 so that the whole payload is in the pipe
// before process.exit() (§6.4: flush, then exit), however slowly the reader
// drains it. process.stdout is not used: on a pipe its writes are queued
// and process.exit() would drop what is still queued. If something made
// fd 1 non-blocking (touching process.stdout does), a full pipe answers
// EAGAIN: wait a millisecond and go on.
function writeAll(text) {
  if (!fs) throw new Error("output() was called before node:fs could load: this Node has no process.getBuiltinModule (use Node 20.16, 22.3 or later)");
  const bytes = Buffer.from(text, "utf8");
  let offset = 0;
  let pause;
  while (offset < bytes.length) {
    try {
      offset += fs.writeSync(1, bytes, offset);
    } catch (error) {
      if (error?.code !== "EAGAIN") throw error;
      pause ??= new Int32Array(new SharedArrayBuffer(4));
      Atomics.wait(pause, 0, 0, 1);
    }
  }
}

let cachedInput;

/**
 * Resolves to everything piped to the script on stdin ("" when nothing
 * was). Reads stdin once; every call returns the same promise (§6.5).
 */
export function input() {
  cachedInput ??= readStdin();
  return cachedInput;
}

async function readStdin() {
  // loopx always gives scripts a pipe; a terminal means the script was run
  // by hand, where waiting for Ctrl-D would only look like a hang.
  const { isatty } = await import("node:tty");
  if (isatty(0)) return "";
  const chunks = [];
  for await (const chunk of process.stdin) chunks.push(chunk);
  return Buffer.concat(chunks).toString("utf8");
}
