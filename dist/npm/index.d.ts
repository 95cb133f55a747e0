import type { Output } from "./helpers.js";

export type { Output, ScriptOutput } from "./helpers.js";
export { output, input } from "./helpers.js";

/** Options of {@link run} and {@link runPromise} (SPEC §9.5). */
export interface RunOptions {
  /**
   * Maximum number of iterations, goto hops included; a non-negative
   * integer. `0` validates the target and runs nothing.
   */
  maxIterations?: number;
  /** An env file to load (`loopx run -e`); relative to `cwd`. */
  envFile?: string;
  /**
   * Aborting terminates the running script's process group (SIGTERM, then
   * SIGKILL after 5 s) and the run throws an error named `"AbortError"`.
   */
  signal?: AbortSignal;
  /**
   * The project root, where `.loopx/` is; `process.cwd()` at call time by
   * default. Scripts still run in their workflow's directory.
   */
  cwd?: string;
  /**
   * The longest one script run may take, in milliseconds (a positive
   * integer), like `loopx run --timeout`: then its process group gets
   * SIGTERM, SIGKILL 5 s later, and the run fails with `exitCode` 124 and
   * `reason` `"timed_out"` (unless a retry is left).
   */
  timeout?: number;
  /**
   * A budget for the whole run, in milliseconds (a positive integer), like
   * `--max-time`: no script run starts once it has passed (a running one
   * may finish), and the generator then completes normally.
   */
  maxTime?: number;
  /**
   * How many more times a failed or timed-out script run is tried, with the
   * same input (a non-negative integer), like `--retry`. A retry is not an
   * iteration for `maxIterations`.
   */
  retry?: number;
  /**
   * The wait before the first retry in milliseconds (a non-negative
   * integer; default 10000), doubled for each further one, at most 30
   * minutes, like `--retry-delay`.
   */
  retryDelay?: number;
  /**
   * The longest wait a script may ask for with `retryAfter`, in
   * milliseconds (a non-negative integer; default a day), like
   * `--max-wait`. A longer wait, or one past `maxTime`, ends the run with
   * `exitCode` 75 and `reason` `"wait"`. Waits happen inside the run: an
   * output that asks for one is not yielded, and `signal` ends a wait at
   * once.
   */
  maxWait?: number;
  /**
   * A money budget in US dollars, like `--max-cost`: no script run starts
   * once the scripts' reported `costUsd` adds up to it, and the generator
   * then completes normally.
   */
  maxCost?: number;
  /**
   * A file to append the run's JSONL record to, like `loopx run --log`
   * (README "Run log"); relative to `cwd`. Without it, `LOOPX_LOG` from the
   * environment applies, as for the CLI.
   */
  log?: string;
}

/** The error a run throws when the loop fails (SPEC §9.3). */
export interface LoopxError extends Error {
  /**
   * What `loopx run` would exit with: 1, 75 (a wait outlasted the budget),
   * 124 (timed out) or 128+N.
   */
  exitCode: number;
  /** Why the run ended. */
  reason:
    | "script_failed"
    | "timed_out"
    | "invalid_goto"
    | "invalid_output"
    | "wait"
    | "signal"
    | "consumer"
    | "error";
}

/**
 * Runs the loop at `target` (`"workflow"` or `"workflow:script"`) and yields
 * the Output of each iteration; the last one is yielded before it completes.
 * Never throws synchronously: errors (with the CLI's message) surface on the
 * first `next()`. `break` / `return()` ends the loop silently, terminating a
 * running script.
 */
export declare function run(target: string, options?: RunOptions): AsyncGenerator<Output, void, unknown>;

/** Runs the loop at `target` to its end and resolves to every Output. */
export declare function runPromise(target: string, options?: RunOptions): Promise<Output[]>;
