// The package's install script: fetch the native binary now, so the first
// `loopx` run does not wait for it, and, under npm, put it where the
// package's bin entry points (bin/loopx.js), so that `loopx` is the binary
// itself with no Node process in front of it (as esbuild does for its
// shim). The binary then finds this package (its helpers, hooks and tsx)
// from its own location (src/runtime.rs, own_package()).
//
// Only an optimisation: many installs skip install scripts (pnpm and Bun by
// default, `--ignore-scripts`), and the shim, which stays everywhere else,
// downloads on first run anyway. So it never fails the install: any
// problem is reported on stderr and the exit code is 0.
import { execFileSync } from "node:child_process";
import { chmodSync, copyFileSync, linkSync, readFileSync, renameSync, rmSync } from "node:fs";
import { join, relative } from "node:path";
import { findBinary, PACKAGE_DIR } from "./native.js";

try {
  const binary = await findBinary();
  if (replacesShim(process.env)) placeBehindBin(binary);
} catch (error) {
  process.stderr.write(
    `loopx: ${error.message}\nloopx: the binary was not fetched at install time; the first run of loopx will try again\n`,
  );
}
process.exit(0);

/**
 * Whether this install may put the binary behind the bin entry: npm ran
 * this script (npm_config_user_agent "npm/..."; pnpm, Yarn and Bun link
 * bins their own ways, and keep the shim), and LOOPX_BINARY_PATH, which
 * only the shim reads, is not set.
 */
function replacesShim(env) {
  return /^npm\//.test(env.npm_config_user_agent ?? "") && !env.LOOPX_BINARY_PATH;
}

// Replaces bin/loopx.js with the binary, atomically (a hard link, else a
// copy, beside it, then a rename), once the binary has shown it runs here
// and is this package's version. The binary must be the package's own
// native/loopx: one in the user's cache means the package directory is
// not writable. Anything that fails leaves the shim in place.
function placeBehindBin(binary) {
  if (relative(PACKAGE_DIR, binary) !== join("native", "loopx")) return;
  const { version } = JSON.parse(readFileSync(join(PACKAGE_DIR, "package.json"), "utf8"));
  let said;
  try {
    said = execFileSync(binary, ["version"], { encoding: "utf8", stdio: ["ignore", "pipe", "ignore"], timeout: 10000 });
  } catch {
    return;
  }
  if (said.trim() !== version) return;
  const target = join(PACKAGE_DIR, "bin", "loopx.js");
  const temp = join(PACKAGE_DIR, "bin", `.loopx-${process.pid}.tmp`);
  try {
    try {
      linkSync(binary, temp);
    } catch {
      copyFileSync(binary, temp);
    }
    chmodSync(temp, 0o755);
    renameSync(temp, target);
  } catch {
    rmSync(temp, { force: true });
  }
}
