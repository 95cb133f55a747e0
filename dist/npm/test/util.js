// Shared test helpers: temp dirs, child processes, a copy of the package.
import { spawn } from "node:child_process";
import { accessSync, chmodSync, constants, cpSync, mkdirSync, mkdtempSync, realpathSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { delimiter, dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

export const PKG = realpathSync(fileURLToPath(new URL("..", import.meta.url)));
export const REGISTER = join(PKG, "loader", "register.mjs");
export const BUN_PRELOAD = join(PKG, "loader", "bun-preload.js");
export const TSCONFIG = join(PKG, "loader", "tsconfig.json");
export const TSX_DIR = dirname(fileURLToPath(import.meta.resolve("tsx/package.json")));
export const TSX_LOADER = import.meta.resolve("tsx");

/** A fresh temp dir, removed when the test ends. */
export function tempDir(t) {
  const dir = realpathSync(mkdtempSync(join(tmpdir(), "loopx-npm-test-")));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** Writes files (relative path → contents) under root; a mode may follow. */
export function writeTree(root, files) {
  for (const [path, contents] of Object.entries(files)) {
    const full = join(root, path);
    mkdirSync(dirname(full), { recursive: true });
    if (Array.isArray(contents)) {
      writeFileSync(full, contents[0]);
      chmodSync(full, contents[1]);
    } else {
      writeFileSync(full, contents);
    }
  }
}

/**
 * A copy of the package's runtime files in a temp dir (so downloads can
 * write native/ there), with node_modules linked to the real one unless
 * `nodeModules` is false.
 */
export function packageCopy(t, { nodeModules = true } = {}) {
  const dir = join(tempDir(t), "loopx");
  mkdirSync(dir);
  for (const entry of ["bin", "lib", "loader", "api.js", "index.js", "package.json"]) {
    cpSync(join(PKG, entry), join(dir, entry), { recursive: true });
  }
  if (nodeModules) symlinkSync(join(PKG, "node_modules"), join(dir, "node_modules"));
  return dir;
}

/**
 * Runs a command; resolves to { code, signal, stdout, stderr }. `input` is
 * written to stdin (then closed). `onSpawn(child)` can drive the process;
 * the result waits for the promise it returns, and its failure fails the run.
 */
export function run(command, args, { env = {}, cwd, input = "", onSpawn, timeout = 30000 } = {}) {
  const child = spawn(command, args, {
    cwd,
    env: { ...process.env, ...env },
    stdio: ["pipe", "pipe", "pipe"],
  });
  const finished = new Promise((resolve, reject) => {
    let stdout = "";
    let stderr = "";
    child.stdout.setEncoding("utf8").on("data", (chunk) => (stdout += chunk));
    child.stderr.setEncoding("utf8").on("data", (chunk) => (stderr += chunk));
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`timed out: ${command} ${args.join(" ")}\n${stderr}`));
    }, timeout);
    child.on("error", reject);
    child.on("close", (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout, stderr });
    });
  });
  child.stdin.on("error", () => {}); // a script that never reads stdin
  child.stdin.end(input);
  const driving = onSpawn?.(child);
  return Promise.all([finished, driving]).then(([result]) => result);
}

/** Resolves once `predicate()` holds, polling; rejects after `ms`. */
export async function waitFor(predicate, ms = 10000) {
  const deadline = Date.now() + ms;
  while (!predicate()) {
    if (Date.now() > deadline) throw new Error("condition not met in time");
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** Path of `name` on PATH, or null. */
export function which(name) {
  for (const dir of (process.env.PATH ?? "").split(delimiter)) {
    const path = join(dir, name);
    try {
      accessSync(path, constants.X_OK);
      return path;
    } catch {
      // not in this directory
    }
  }
  return null;
}

/** The Bun binary for the Bun tests: $LOOPX_TEST_BUN, else `bun` on PATH. */
export const BUN = process.env.LOOPX_TEST_BUN || which("bun");
