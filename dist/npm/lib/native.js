// Finding the native loopx binary for the npm shim (DESIGN.md "Getting the
// binary through npm"). In order:
//   1. LOOPX_BINARY_PATH: must name an executable file, else an error;
//   2. <package>/native/loopx (shipped in the package, or downloaded here);
//   3. ${XDG_CACHE_HOME:-~/.cache}/loopx/<version>/loopx (downloaded there
//      when the package directory was not writable);
//   4. a download of the release archive for this platform, checked against
//      the package's SHA256SUMS, into 2 or else 3.
// The shim runs this on every start, so the common path (1 or 2) costs one
// stat; package.json is read, and crypto, zlib and the tar reader are
// loaded, only past it.
import {
  accessSync,
  chmodSync,
  constants,
  mkdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { homedir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

/** Absolute path of the package root (the directory of package.json). */
export const PACKAGE_DIR = fileURLToPath(new URL("..", import.meta.url)).replace(/\/+$/, "");

export const DEFAULT_DOWNLOAD_BASE = "https://github.com/loopx-dev/loopx/releases";

// Release targets (DESIGN.md "Release artifacts"), by Node's platform/arch.
// The Linux builds are static musl binaries, so they run on glibc systems too.
const TARGETS = {
  "linux x64": "x86_64-unknown-linux-musl",
  "linux arm64": "aarch64-unknown-linux-musl",
  "darwin x64": "x86_64-apple-darwin",
  "darwin arm64": "aarch64-apple-darwin",
};

/**
 * The environment the binary runs with, on top of `base` (the contract in
 * bin/loopx.js): LOOPX_PACKAGE_DIR always, LOOPX_JS_RUNTIME=bun under Bun,
 * LOOPX_TSX when tsx resolves from this package. Used by the shim and by
 * run() (api.js), so both start the binary the same way.
 */
export function binaryEnv(base = process.env) {
  const env = { ...base, LOOPX_PACKAGE_DIR: PACKAGE_DIR };
  if (process.versions.bun) {
    env.LOOPX_JS_RUNTIME = "bun";
    env.LOOPX_BUN = process.execPath;
  }
  const tsx = tsxDir();
  if (tsx) env.LOOPX_TSX = tsx;
  return env;
}

function tsxDir() {
  try {
    return dirname(fileURLToPath(import.meta.resolve("tsx/package.json")));
  } catch {
    return undefined;
  }
}

/** An error whose message is meant for the user as it stands. */
export class NativeError extends Error {}

/** The release target triple for a platform/arch, or null when there is none. */
export function targetFor(platform, arch) {
  return TARGETS[`${platform} ${arch}`] ?? null;
}

/**
 * Returns the absolute path of the binary to run, downloading it when no
 * local copy exists. Throws NativeError when there is none to be had.
 * Every input is injectable for tests.
 */
export async function findBinary({
  env = process.env,
  pkgDir = PACKAGE_DIR,
  platform = process.platform,
  arch = process.arch,
  log = (line) => process.stderr.write(`${line}\n`),
} = {}) {
  const override = env.LOOPX_BINARY_PATH;
  if (override) {
    const path = resolve(override);
    if (!isExecutableFile(path)) {
      throw new NativeError(`LOOPX_BINARY_PATH is set to ${override}, which is not an executable file`);
    }
    return path;
  }
  const bundled = join(pkgDir, "native", "loopx");
  if (isExecutableFile(bundled)) return bundled;
  const version = packageVersion(pkgDir);
  const cached = join(cacheDir(env, version), "loopx");
  if (isExecutableFile(cached)) return cached;
  return download({ env, pkgDir, version, platform, arch, log });
}

/** `${XDG_CACHE_HOME:-~/.cache}/loopx/<version>`. */
export function cacheDir(env, version) {
  // The XDG spec says a relative XDG_CACHE_HOME is invalid and to be ignored.
  const xdg = env.XDG_CACHE_HOME;
  const base = xdg && xdg.startsWith("/") ? xdg : join(env.HOME || homedir(), ".cache");
  return join(base, "loopx", version);
}

function isExecutableFile(path) {
  try {
    if (!statSync(path).isFile()) return false;
    accessSync(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

function packageVersion(pkgDir) {
  return JSON.parse(readFileSync(join(pkgDir, "package.json"), "utf8")).version;
}

async function download({ env, pkgDir, version, platform, arch, log }) {
  const target = targetFor(platform, arch);
  if (!target) {
    throw new NativeError(
      `there is no prebuilt loopx binary for ${platform}/${arch} ` +
        "(there are for Linux and macOS on x64 and arm64); " +
        "build loopx from source and set LOOPX_BINARY_PATH to the binary",
    );
  }
  const asset = `loopx-${target}.tar.gz`;
  const base = (env.LOOPX_DOWNLOAD_URL || DEFAULT_DOWNLOAD_BASE).replace(/\/+$/, "");
  const url = `${base}/download/v${version}/${asset}`;
  // The expected checksum is known before anything is fetched: a package
  // without one never downloads, so it can never run an unverified file.
  const expected = expectedChecksum(pkgDir, asset);

  log(`loopx: downloading ${url} ...`);
  const archive = await fetchBytes(url);
  const { createHash } = await import("node:crypto");
  const actual = createHash("sha256").update(archive).digest("hex");
  if (actual !== expected) {
    throw new NativeError(
      `checksum mismatch for ${url}: SHA256SUMS says ${expected}, the download is ${actual}; nothing was installed or run`,
    );
  }
  const { gunzipSync } = await import("node:zlib");
  const { readTarEntry } = await import("./ustar.js");
  let binary;
  try {
    binary = readTarEntry(gunzipSync(archive), "loopx");
  } catch (error) {
    throw new NativeError(`cannot read ${asset} from ${url}: ${error.message}`);
  }
  if (!binary) throw new NativeError(`${asset} from ${url} has no loopx binary in it`);
  return install(binary, [join(pkgDir, "native"), cacheDir(env, version)]);
}

function expectedChecksum(pkgDir, asset) {
  const file = join(pkgDir, "SHA256SUMS");
  const refuse = (why) =>
    new NativeError(
      `cannot verify a download of ${asset}: ${why}; ` +
        "reinstall the loopx package, or set LOOPX_BINARY_PATH to a loopx binary",
    );
  let text;
  try {
    text = readFileSync(file, "utf8");
  } catch {
    throw refuse(`${file} is missing`);
  }
  // sha256sum format: "<hex>  <name>", or "<hex> *<name>" in binary mode.
  for (const line of text.split("\n")) {
    const match = /^([0-9a-fA-F]{64}) [ *](.+)$/.exec(line.trimEnd());
    if (match && match[2] === asset) return match[1].toLowerCase();
  }
  throw refuse(`${file} has no line for it`);
}

async function fetchBytes(url) {
  const advice = "check the network or LOOPX_DOWNLOAD_URL, or set LOOPX_BINARY_PATH to a loopx binary";
  let response;
  try {
    response = await fetch(url, { redirect: "follow" });
  } catch (error) {
    const reason = error.cause?.code ?? error.cause?.message ?? error.message;
    throw new NativeError(`could not download ${url} (${reason}); ${advice}`);
  }
  if (!response.ok) {
    throw new NativeError(`could not download ${url} (HTTP ${response.status}); ${advice}`);
  }
  try {
    return Buffer.from(await response.arrayBuffer());
  } catch (error) {
    throw new NativeError(`could not download ${url} (${error.message}); ${advice}`);
  }
}

// Writes the binary into the first directory that takes it, atomically: a
// temp file beside the final name, chmod 755, rename. Concurrent first runs
// each rename a complete file, and no reader ever sees a partial one.
function install(binary, dirs) {
  const failures = [];
  for (const dir of dirs) {
    const temp = join(dir, `.loopx-${process.pid}-${Date.now()}.tmp`);
    try {
      mkdirSync(dir, { recursive: true });
      writeFileSync(temp, binary, { mode: 0o755 });
      chmodSync(temp, 0o755); // the umask may have narrowed the mode
      const path = join(dir, "loopx");
      renameSync(temp, path);
      return path;
    } catch (error) {
      try {
        rmSync(temp, { force: true });
      } catch {
        // The directory itself is unusable; there is no temp file to remove.
      }
      failures.push(`${dir}: ${error.code ?? error.message}`);
    }
  }
  throw new NativeError(`cannot save the downloaded binary (${failures.join("; ")}); set LOOPX_BINARY_PATH to a loopx binary`);
}
