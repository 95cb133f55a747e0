import type { Output } from "./helpers.js";

export type { Output } from "./helpers.js";
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
