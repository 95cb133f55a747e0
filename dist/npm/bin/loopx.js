#!/usr/bin/env node
// The `loopx` command of the npm package: finds the native binary
// (lib/native.js) and runs it. The binary does all the work.
//
// Under npm with install scripts allowed, this file does not run at all:
// lib/postinstall.js replaces it with the binary itself, which then finds
// this package from its own location (no LOOPX_PACKAGE_DIR or LOOPX_TSX,
// and no Bun detection: npm runs on Node). This shim stays with pnpm,
// Yarn, Bun and `--ignore-scripts`.
//
// Contract with the binary:
// - argv: the binary gets this process's arguments unchanged, and inherits
//   stdin, stdout and stderr.
// - environment, on top of this process's own (binaryEnv() in lib/native.js,
//   shared with run() in api.js):
//     LOOPX_PACKAGE_DIR  absolute path of this package's root: index.js,
//                        loader/register.mjs, loader/hooks.mjs,
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
// - process: where Node has process.execve (>= 22.15), this process
//   replaces itself with the binary: same pid, nothing in between, so
//   signals and the exit status are the binary's own. Elsewhere (older
//   Node, Bun) the binary is a child:
// - signals (child only): SIGINT, SIGTERM, SIGHUP and the other signals
//   that end a run (QUIT, USR2, ALRM, VTALRM, XCPU, PWR; not USR1, Node's
//   inspector, nor PROF, V8's profiler) are forwarded to the binary every
//   time. The handlers are in place before the binary is started, so no
//   signal can kill this process by its default action once the binary
//   runs. A terminal's Ctrl-C reaches both processes, so the binary ignores
//   a signal whose sender is its parent when it has just received the same
//   one (it tells them apart by the sender pid).
// - LOOPX_SHIM_PID (child only): this process's pid. The binary asks the
//   kernel for a signal when this process dies (Linux) and ends the run as
//   for SIGTERM, so a shim killed by SIGKILL leaves no run behind; the
//   binary keeps the variable from scripts. Never set on the execve path
//   (there is no shim left to watch).
// - exit (child only): this process exits with the binary's exit code; if
//   the binary died of a signal, this process re-raises that signal on
//   itself so the caller sees the same status (exit code 128+n where that
//   cannot work).
import { spawn } from "node:child_process";
import { accessSync, constants as fsConstants } from "node:fs";
import { constants } from "node:os";
import { binaryEnv, findBinary, NativeError, SHIM_PID_VAR } from "../lib/native.js";

const FORWARDED = ["SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT", "SIGUSR2", "SIGALRM", "SIGVTALRM", "SIGXCPU", "SIGPWR"]
  .filter((name) => name in constants.signals);

let binary;
try {
  binary = await findBinary();
} catch (error) {
  if (!(error instanceof NativeError)) throw error;
  process.stderr.write(`loopx: ${error.message}\n`);
  process.exit(1);
}

const args = process.argv.slice(2);
if (canExecve(binary)) {
  quietExecveWarning();
  process.execve(binary, [binary, ...args], binaryEnv());
}

// The spawn path. Handlers first: a signal that comes before the child
// exists is forwarded as soon as it does.
let child = null;
const pending = [];
function forward(signal) {
  if (child) child.kill(signal);
  else pending.push(signal);
}
for (const signal of FORWARDED) process.on(signal, forward);

child = spawn(binary, args, {
  stdio: "inherit",
  env: { ...binaryEnv(), [SHIM_PID_VAR]: String(process.pid) },
});
for (const signal of pending.splice(0)) child.kill(signal);

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

// Whether to replace this process with the binary. Not under Bun (its
// process.execve, if any, is not Node's). A failed execve aborts Node
// rather than throwing, so the file must be executable first.
function canExecve(path) {
  if (process.versions.bun || typeof process.execve !== "function") return false;
  try {
    accessSync(path, fsConstants.X_OK);
    return true;
  } catch {
    return false;
  }
}

// process.execve is experimental: Node warns on stderr, which must stay the
// binary's. Only that one warning is dropped.
function quietExecveWarning() {
  const emitWarning = process.emitWarning;
  process.emitWarning = function (warning, ...rest) {
    const type = typeof rest[0] === "string" ? rest[0] : rest[0]?.type;
    const message = typeof warning === "string" ? warning : warning?.message;
    if (type === "ExperimentalWarning" && /\bexecve\b/.test(String(message))) return;
    return emitWarning.call(process, warning, ...rest);
  };
}
