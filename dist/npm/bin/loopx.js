#!/usr/bin/env node
// The `loopx` command of the npm package: finds the native binary
// (lib/native.js) and runs it. The binary does all the work.
//
// Contract with the binary:
// - argv: the binary gets this process's arguments unchanged, and inherits
//   stdin, stdout and stderr.
// - environment, on top of this process's own (binaryEnv() in lib/native.js,
//   shared with run() in api.js):
//     LOOPX_PACKAGE_DIR  absolute path of this package's root: helpers.js,
//                        index.js, loader/register.mjs, loader/hooks.mjs,
//                        loader/bun-preload.js and loader/tsconfig.json are
//                        found relative to it.
//     LOOPX_JS_RUNTIME   "bun" when this shim runs under Bun; otherwise a
//                        value the user set is passed on untouched.
//     LOOPX_BUN          absolute path of the Bun executable running this
//                        shim, under Bun only (the binary runs scripts with
//                        it, so Bun need not be on PATH).
//     LOOPX_TSX          absolute path of the tsx package directory as
//                        resolved from this package; absent when it cannot
//                        be resolved (a value the user set then stays).
// - signals: SIGINT, SIGTERM and SIGHUP are forwarded to the binary every
//   time. A terminal's Ctrl-C reaches both processes, so the binary ignores
//   a signal whose sender is its parent when it has just received the same
//   one (it tells them apart by the sender pid).
// - exit: this process exits with the binary's exit code; if the binary
//   died of a signal, this process re-raises that signal on itself so the
//   caller sees the same status (exit code 128+n where that cannot work).
import { spawn } from "node:child_process";
import { constants } from "node:os";
import { binaryEnv, findBinary, NativeError } from "../lib/native.js";

const FORWARDED = ["SIGINT", "SIGTERM", "SIGHUP"];

let binary;
try {
  binary = await findBinary();
} catch (error) {
  if (!(error instanceof NativeError)) throw error;
  process.stderr.write(`loopx: ${error.message}\n`);
  process.exit(1);
}

const child = spawn(binary, process.argv.slice(2), { stdio: "inherit", env: binaryEnv() });

function forward(signal) {
  child.kill(signal);
}
for (const signal of FORWARDED) process.on(signal, forward);

child.on("error", (error) => {
  process.stderr.write(`loopx: cannot run ${binary}: ${error.message}\n`);
  process.exit(1);
});

child.on("exit", (code, signal) => {
  if (signal === null) process.exit(code ?? 1);
  for (const name of FORWARDED) process.off(name, forward);
  const status = 128 + (constants.signals[signal] ?? 0);
  // SIGUSR1 would start Node's inspector rather than end this process.
  if (signal !== "SIGUSR1") {
    try {
      process.kill(process.pid, signal);
    } catch {
      process.exit(status);
    }
  }
  // Still here: the signal is ignored (Node ignores SIGPIPE) or caught.
  setTimeout(() => process.exit(status), 100);
});
