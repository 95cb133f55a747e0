// The package entry of `loopx` (SPEC §3.3, §9). Every JS/TS script of a
// workflow imports it for output()/input(), so it stays as cheap to load as
// helpers.js: run() and runPromise() here only capture the call; the code
// that runs the loop (api.js, which loads child_process and lib/native.js)
// is imported on the first next(). Measured with process.cpuUsage() over
// 60 cold imports each: importing api.js eagerly costs ~1.3 ms of CPU per
// script start, these wrappers nothing measurable.
export { output, input } from "./helpers.js";

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
