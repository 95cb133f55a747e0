// run() and runPromise(): the programmatic API (SPEC §9). The loop itself is
// the native binary's (one engine, in Rust): each run spawns it in its
// internal machine mode and relays what it reports (DESIGN.md "API protocol"):
//
//   <binary> __api <PROTOCOL> [-n <count>] [-e <absolute path>]
//            [--timeout <ms>ms] [--max-time <ms>ms] [--retry <n>]
//            [--retry-delay <ms>ms] [--max-wait <ms>ms] [--max-cost <usd>]
//            [--log <absolute path>] -- <target>
//
// with cwd = the project root and the environment of bin/loopx.js. Its stdout
// is a channel of JSON lines (src/api.rs documents them): an `output` per
// iteration, then `done`, or an `error` carrying the CLI's message, or
// `protocol` when the binary speaks another version. Its stderr is inherited
// (script stderr passes through, §9.3). The binary starts the first
// iteration at once, then waits for a line `next` on its stdin before each
// further one, so an iteration starts only when the consumer asks for it.
//
// Cancellation: SIGTERM to the binary while an iteration runs (it forwards it
// to the script's process group, SIGKILL after 5 s, then exits); between
// iterations, closing its stdin (it ends quietly). Either way the generator
// settles only once the binary has exited, so nothing outlives it.
//
// index.js captures the call (the options, cwd and environment at call
// time) and imports this module on first use, so scripts, which import the
// package entry for output()/input() only, never load it.
import { isAbsolute, resolve } from "node:path";

/** The machine-mode protocol this package speaks (src/api.rs PROTOCOL). */
export const PROTOCOL = "1";

const DONE = Object.freeze({ value: undefined, done: true });

/**
 * The generator for a call captured by index.js's run(): validates it now
 * (a problem is thrown by the first next()), spawns the binary on the first
 * next().
 */
export function start(call) {
  return new Run(settle(call));
}

// Turns the captured call into the run's settings, or a settings object
// whose `error` the first next() throws (§9.1 "Error timing").
function settle({ target, options, base, baseError, env, error: captureError }) {
  const call = { target, signal: undefined, error: undefined, env };
  try {
    if (captureError) throw captureError;
    if (options !== undefined && options !== null && typeof options !== "object") {
      throw usage(`invalid options ${describe(options)}: expected an object like { maxIterations, envFile, signal, cwd }`);
    }
    const { maxIterations, envFile, signal, cwd, timeout, maxTime, retry, retryDelay, maxWait, maxCost, log } =
      options ?? {};
    // The signal first: an aborted one wins over any other error (§9.1).
    if (signal !== undefined) {
      if (!isAbortSignal(signal)) throw usage(`invalid value ${describe(signal)} for signal: expected an AbortSignal`);
      call.signal = signal;
    }
    // -n's rule and wording (§4.2, §9.5), checked before the target as the
    // CLI parses -n before it looks at the target.
    if (maxIterations !== undefined) {
      if (typeof maxIterations !== "number" || !Number.isInteger(maxIterations) || maxIterations < 0) {
        throw usage(`invalid value ${describe(maxIterations)} for maxIterations: expected a non-negative integer`);
      }
      // BigInt: String(1e21) would be "1e+21". The binary saturates
      // counts beyond u64, like the CLI.
      call.count = BigInt(maxIterations).toString();
    }
    // The unattended-run options, as the CLI's --timeout, --max-time,
    // --retry-delay (milliseconds here) and --retry: same rules, same order.
    call.flags = [];
    for (const [name, value, flag, min] of [
      ["timeout", timeout, "--timeout", 1],
      ["maxTime", maxTime, "--max-time", 1],
      ["retry", retry, "--retry", 0],
      ["retryDelay", retryDelay, "--retry-delay", 0],
      ["maxWait", maxWait, "--max-wait", 0],
    ]) {
      if (value === undefined) continue;
      if (typeof value !== "number" || !Number.isInteger(value) || value < min) {
        const what = name === "retry" ? "a non-negative integer" : `${min ? "a positive" : "a non-negative"} integer number of milliseconds`;
        throw usage(`invalid value ${describe(value)} for ${name}: expected ${what}`);
      }
      const text = BigInt(value).toString();
      call.flags.push(flag, name === "retry" ? text : `${text}ms`);
    }
    // --max-cost: US dollars, a number of at least 0.
    if (maxCost !== undefined) {
      if (typeof maxCost !== "number" || !Number.isFinite(maxCost) || maxCost < 0) {
        throw usage(`invalid value ${describe(maxCost)} for maxCost: expected US dollars (a number of at least 0)`);
      }
      call.flags.push("--max-cost", maxCostText(maxCost));
    }
    if (cwd !== undefined && typeof cwd !== "string") {
      throw usage(`invalid value ${describe(cwd)} for cwd: expected a directory path`);
    }
    if (envFile !== undefined && typeof envFile !== "string") {
      throw usage(`invalid value ${describe(envFile)} for envFile: expected a file path`);
    }
    if (log !== undefined && typeof log !== "string") {
      throw usage(`invalid value ${describe(log)} for log: expected a file path`);
    }
    // §9.5: cwd is the project root, process.cwd() at call time by default;
    // a relative envFile is relative to it.
    if ((cwd === undefined || !isAbsolute(cwd)) && baseError) {
      throw new Error(`cannot determine the current directory (${baseError.message}); pass an absolute cwd`);
    }
    call.cwd = cwd === undefined ? base : resolve(base, cwd);
    if (envFile !== undefined) call.envFile = resolve(call.cwd, envFile);
    // Like --log; a relative path is relative to cwd, as for envFile.
    if (log !== undefined) call.flags.push("--log", resolve(call.cwd, log));
    if (target === undefined || target === null) {
      throw usage(`missing target: run(<workflow>[:<script>]) needs a target string such as 'ralph' or 'ralph:check'`);
    }
    if (typeof target !== "string") {
      throw usage(`invalid target ${describe(target)}: expected a string <workflow>[:<script>]`);
    }
    // argv cannot carry a NUL byte; no valid name contains one (§4.1).
    for (const [what, value] of [["target", target], ["cwd", call.cwd], ["envFile", call.envFile], ["log", log]]) {
      if (value?.includes("\0")) throw usage(`invalid ${what} ${describe(value)}: it contains a NUL byte`);
    }
  } catch (error) {
    call.error = error;
  }
  return call;
}

// A plain decimal, as --max-cost reads it (no exponent: 1e-7 is 0.0000001).
function maxCostText(n) {
  const text = String(n);
  return /e/i.test(text) ? n.toFixed(20).replace(/\.?0+$/, "") : text;
}

function usage(message) {
  return new TypeError(message);
}

function isAbortSignal(value) {
  return typeof value === "object" && value !== null && typeof value.aborted === "boolean" && typeof value.addEventListener === "function";
}

// A value as an error message shows it: strings quoted like the CLI's.
function describe(value) {
  if (typeof value === "string") return `'${value}'`;
  if (typeof value === "bigint") return `${value}n`;
  if (typeof value === "function") return "a function";
  if (typeof value === "object" && value !== null) return Array.isArray(value) ? "an array" : "an object";
  return String(value); // numbers, booleans, symbols, null, undefined
}

/**
 * The error an aborted run throws (§9.1): the signal's reason when it is
 * itself an AbortError (as for `controller.abort()`), so callers can match
 * it by identity; otherwise a DOMException named AbortError whose `cause`
 * is the reason (e.g. a TimeoutError, or a custom value).
 */
function abortError(signal) {
  const reason = signal.reason;
  if (typeof reason === "object" && reason !== null && reason.name === "AbortError") return reason;
  const error = new DOMException("the loopx run was aborted", "AbortError");
  if (reason !== undefined) {
    Object.defineProperty(error, "cause", { value: reason, writable: true, configurable: true });
  }
  return error;
}

/**
 * An error the binary reported: its message is the CLI's, word for word;
 * `exitCode` the CLI's (124 for a timeout); `reason` why the run ended
 * (`script_failed`, `timed_out`, `invalid_goto`, `signal` or `error`).
 */
function loopxError(message, exitCode, reason) {
  const error = new Error(message);
  error.exitCode = exitCode;
  error.reason = reason ?? "error";
  return error;
}

// Heavy modules, loaded on the first run only (see the header).
let loaded;
function load() {
  loaded ??= Promise.all([import("node:child_process"), import("./lib/native.js")]);
  return loaded;
}

/**
 * The generator run() returns. Not an `async function*`: a native async
 * generator queues return() behind a pending next(), so a `return()` while a
 * script runs would wait for that script to finish, where §9.1 wants it
 * terminated. Here next() calls are queued among themselves, while return()
 * and throw() act at once.
 */
class Run {
  #call;
  /** Set once the generator has completed (or is completing). */
  #done = false;
  /** return()/throw() was called: end silently. */
  #cancelled = false;
  /** A next() is in progress: the binary may be running a script. */
  #busy = false;
  #queue = Promise.resolve();
  #child = null;
  #channel = null;
  /** Settles once the binary has exited and its stdout is drained. */
  #closed = Promise.resolve();
  #binary = "";
  #onAbort = () => this.#terminate();

  constructor(call) {
    this.#call = call;
  }

  next() {
    const step = this.#queue.then(() => this.#step());
    this.#queue = step.catch(() => {});
    return step;
  }

  async return(value) {
    await this.#cancel();
    return { value, done: true };
  }

  async throw(error) {
    await this.#cancel();
    throw error;
  }

  async #cancel() {
    this.#cancelled = true;
    this.#done = true;
    this.#terminate();
    await this.#closed;
  }

  // Ends the binary: SIGTERM while it may be running a script (it kills the
  // script's group, allowing the 5 s grace), EOF on its stdin while it waits
  // for `next` (it ends without starting anything).
  #terminate() {
    const child = this.#child;
    if (!child || this.#channel.ended) return;
    this.#hold(true); // whoever ends it waits for #closed
    if (this.#busy) child.kill("SIGTERM");
    else child.stdin.end();
  }

  async #step() {
    if (this.#done) return DONE;
    const { signal, error } = this.#call;
    if (signal?.aborted) return this.#fail(abortError(signal));
    if (error) return this.#fail(error);
    this.#busy = true;
    this.#hold(true);
    try {
      if (this.#child) {
        this.#child.stdin.write("next\n");
      } else {
        await this.#spawn();
        if (this.#done) return DONE;
        if (signal?.aborted) return this.#fail(abortError(signal));
      }
      const message = await this.#channel.receive();
      // return()/throw() or an abort while we waited: whatever the binary
      // said (often "interrupted by SIGTERM") is not the consumer's concern.
      if (this.#cancelled) return DONE;
      if (signal?.aborted) return this.#fail(abortError(signal));
      return await this.#handle(message);
    } catch (error) {
      // Whatever failed (finding or spawning the binary, too), the
      // generator is complete: later next() calls resolve done.
      this.#done = true;
      throw error;
    } finally {
      this.#busy = false;
    }
  }

  async #handle(message) {
    switch (message?.type) {
      case "output":
        this.#hold(false);
        return { value: message.output, done: false };
      case "done":
        this.#done = true;
        await this.#closed;
        return DONE;
      case "error":
        return this.#fail(loopxError(message.message, message.exitCode, message.reason));
      case "protocol":
        return this.#fail(
          new Error(
            `the loopx binary ${this.#binary} (version ${message.version}) speaks API protocol ${message.supported}, ` +
              `but this loopx package (version ${await packageVersion()}) needs protocol ${PROTOCOL}; ` +
              "reinstall loopx so the package and its binary match, or point LOOPX_BINARY_PATH at a matching binary",
          ),
        );
      case "eof": {
        this.#done = true;
        const { code, signal, spawnError } = await this.#closed;
        if (spawnError) throw spawnError;
        const how = signal ? `was killed by ${signal}` : `exited with code ${code}`;
        throw new Error(
          `the loopx binary ${this.#binary} ${how} without answering on the API channel (protocol ${PROTOCOL}); ` +
            "if it printed an error above it may be too old for this package: reinstall loopx, or point LOOPX_BINARY_PATH at a matching binary",
        );
      }
      default:
        return this.#fail(new Error(`unexpected message from the loopx binary ${this.#binary} on the API channel: ${message.line}`));
    }
  }

  // Completes the generator with `error` once the binary (if any) is gone.
  async #fail(error) {
    this.#done = true;
    this.#terminate();
    await this.#closed;
    throw error;
  }

  async #spawn() {
    const [{ spawn }, native] = await load();
    const binary = await native.findBinary({ env: this.#call.env }).catch((error) => {
      throw error instanceof native.NativeError ? new Error(error.message) : error;
    });
    if (this.#done || this.#call.signal?.aborted) return;
    this.#binary = binary;
    const { target, count, envFile, cwd, env, signal } = this.#call;
    const args = ["__api", PROTOCOL];
    if (count !== undefined) args.push("-n", count);
    if (envFile !== undefined) args.push("-e", envFile);
    args.push(...this.#call.flags);
    args.push("--", target);
    const child = spawn(binary, args, { cwd, env: native.binaryEnv(env), stdio: ["pipe", "pipe", "inherit"] });
    this.#child = child;
    this.#channel = new Channel(child.stdout);
    // The binary may be gone before it reads a request.
    child.stdin.on("error", () => {});
    this.#closed = new Promise((settle) => {
      child.on("close", (code, signal) => settle({ code, signal }));
      child.on("error", (error) => {
        this.#channel.end();
        settle({ spawnError: spawnFailure(error, binary, cwd) });
      });
    });
    if (signal) {
      signal.addEventListener("abort", this.#onAbort, { once: true });
      this.#closed.then(() => signal.removeEventListener("abort", this.#onAbort));
    }
  }

  // While the consumer holds a yielded value and has not asked for more, the
  // binary must not keep Node alive: an abandoned generator lets the process
  // exit, and the binary, seeing EOF on stdin, ends too.
  #hold(on) {
    const child = this.#child;
    if (!child) return;
    for (const handle of [child, child.stdin, child.stdout]) {
      if (on) handle.ref?.();
      else handle.unref?.();
    }
  }
}

function spawnFailure(error, binary, cwd) {
  if (error.code === "ENOENT" || error.code === "ENOTDIR") {
    // Either the binary or the cwd; the binary was checked just before.
    return new Error(`cannot run loopx in ${cwd}: no such directory (cwd is the project root, where .loopx/ is)`);
  }
  return new Error(`cannot run the loopx binary ${binary}: ${error.message}`);
}

async function packageVersion() {
  const { readFileSync } = await import("node:fs");
  try {
    return JSON.parse(readFileSync(new URL("./package.json", import.meta.url), "utf8")).version;
  } catch {
    return "unknown";
  }
}

/** The binary's stdout as a queue of parsed JSON lines, then `eof`. */
class Channel {
  #inbox = [];
  #wake = null;
  #partial = [];
  ended = false;

  constructor(stream) {
    stream.setEncoding("utf8");
    stream.on("data", (chunk) => this.#data(chunk));
    stream.on("end", () => this.end());
    stream.on("error", () => this.end());
  }

  // A result can be megabytes long: keep chunks apart until a newline comes,
  // instead of rescanning one growing string.
  #data(chunk) {
    let start = 0;
    let newline;
    while ((newline = chunk.indexOf("\n", start)) !== -1) {
      this.#partial.push(chunk.slice(start, newline));
      this.#push(parse(this.#partial.join("")));
      this.#partial = [];
      start = newline + 1;
    }
    if (start < chunk.length) this.#partial.push(chunk.slice(start));
  }

  end() {
    if (this.ended) return;
    this.ended = true;
    if (this.#partial.length) this.#push(parse(this.#partial.join("")));
    this.#partial = [];
    this.#push({ type: "eof" });
  }

  #push(message) {
    if (this.#wake) {
      const wake = this.#wake;
      this.#wake = null;
      wake(message);
    } else {
      this.#inbox.push(message);
    }
  }

  receive() {
    if (this.#inbox.length) return Promise.resolve(this.#inbox.shift());
    return new Promise((wake) => (this.#wake = wake));
  }
}

function parse(line) {
  try {
    const message = JSON.parse(line);
    if (typeof message === "object" && message !== null && typeof message.type === "string") return message;
  } catch {
    // reported below
  }
  return { type: "invalid", line };
}
