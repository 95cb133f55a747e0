/** One iteration's structured output (SPEC §2.3), as `run()` yields it. */
export interface Output {
  result?: string;
  goto?: string;
  stop?: boolean;
}

/** What a script may write with `output()`: §2.3's fields and loopx's extensions. */
export interface ScriptOutput extends Output {
  /**
   * Run this script again later, with the same input: after this many
   * seconds, or at this time (an RFC 3339 string or a Date). Written as
   * `retry_after`. Neither an iteration nor a retry; `stop` still wins.
   */
  retryAfter?: number | string | Date;
  /** What this script run spent, in US dollars; written as `cost_usd`. */
  costUsd?: number;
}

/**
 * Writes `value` to stdout as the script's structured output, flushes it and
 * exits the process with code 0; code after the call does not run (§6.4).
 *
 * An object must have at least one of `result`, `goto`, `stop`,
 * `retryAfter`, `costUsd` set to a value other than `undefined`, else this
 * throws (as it does for a negative or non-numeric `retryAfter` or
 * `costUsd`); `undefined`-valued fields are
 * left out. A string, number, boolean or bigint is written as
 * `{ result: String(value) }`. `null` and `undefined` throw.
 */
export declare function output(value: ScriptOutput | string | number | boolean | bigint): never;

/**
 * Resolves to the input piped from the previous script on stdin, or `""`
 * when there is none. stdin is read once; later calls return the same
 * result (§6.5).
 */
export declare function input(): Promise<string>;
