// The script helpers `output()` and `input()` (SPEC §6.4, §6.5). Every loopx
// JS/TS script loads this file, so it stays small and imports only builtins
// that Node has already loaded at startup (node:tty, which input() alone
// needs, is loaded when it runs).
import { writeSync } from "node:fs";

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
  const bytes = Buffer.from(text, "utf8");
  let offset = 0;
  let pause;
  while (offset < bytes.length) {
    try {
      offset += writeSync(1, bytes, offset);
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
