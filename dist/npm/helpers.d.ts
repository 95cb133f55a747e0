/** One iteration's structured output (SPEC §2.3). */
export interface Output {
  result?: string;
  goto?: string;
  stop?: boolean;
}

/**
 * Writes `value` to stdout as the script's structured output, flushes it and
 * exits the process with code 0; code after the call does not run (§6.4).
 *
 * An object must have at least one of `result`, `goto`, `stop` set to a value
 * other than `undefined`, else this throws; `undefined`-valued fields are
 * left out. A string, number, boolean or bigint is written as
 * `{ result: String(value) }`. `null` and `undefined` throw.
 */
export declare function output(value: Output | string | number | boolean | bigint): never;

/**
 * Resolves to the input piped from the previous script on stdin, or `""`
 * when there is none. stdin is read once; later calls return the same
 * result (§6.5).
 */
export declare function input(): Promise<string>;
