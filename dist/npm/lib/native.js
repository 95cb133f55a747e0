// Finding the native loopx binary for the npm shim (DESIGN.md "Getting the
// binary through npm"). In order:
//   1. LOOPX_BINARY_PATH: must name an executable file, else an error;
//   2. <package>/native/loopx (shipped in the package, or downloaded here);
//   3. ${XDG_CACHE_HOME:-~/.cache}/loopx/<version>/loopx (downloaded there
//      when the package directory was not writable);
//   4. a download of the release archive for this platform, checked against
//      the package's SHA256SUMS (which scripts/build-release.sh puts in the
//      package), into 2 or else 3. The archive comes from
//      $LOOPX_DOWNLOAD_URL/download/v<version>/loopx-<target>.tar.gz, the
//      tree install.sh reads (default: the project's GitHub releases).
// The shim runs this on every start (where it is not replaced by the
// binary: lib/postinstall.js), so the common path (1 or 2) costs one stat; package.json is read, and crypto, zlib and the tar reader are
// loaded, only past it.
import {
  accessSync,
  chmodSync,
  constants,
  mkdirSync,
  readFileSync,
  renameSync,
  rmdirSync,
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
 * The variable through which the shim's spawn path gives the binary its
 * pid (bin/loopx.js): the binary watches for its death. Never part of
 * binaryEnv(): run() (api.js) is not a shim.
 */
export const SHIM_PID_VAR = "LOOPX_SHIM_PID";

/**
 * The environment the binary runs with, on top of `base` (the contract in
 * bin/loopx.js): LOOPX_PACKAGE_DIR always, LOOPX_JS_RUNTIME=bun under Bun,
 * LOOPX_TSX when tsx resolves from this package; never LOOPX_SHIM_PID.
 * Used by the shim and by run() (api.js), so both start the binary the
 * same way.
 */
export function binaryEnv(base = process.env) {
  const env = { ...base, LOOPX_PACKAGE_DIR: PACKAGE_DIR };
  // A stale value would make the binary watch a process that is not its
  // parent; only the shim's spawn path sets it, after this.
  delete env[SHIM_PID_VAR];
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
  const url = `${downloadBase(env)}/download/v${version}/${asset}`;
  // The expected checksum is known before anything is fetched: a package
  // without one never downloads, so it can never run an unverified file.
  const sums = join(pkgDir, "SHA256SUMS");
  const expected = expectedChecksum(sums, asset);
  const fail = (headline, ...details) =>
    new NativeError(
      [
        headline,
        `  tried:    ${url}`,
        `  expected: ${asset} of loopx ${version}, sha256 ${expected} (from ${sums})`,
        ...details,
        ...waysOut(version, asset),
      ].join("\n"),
    );

  log(`loopx: downloading ${url} ...`);
  const archive = await fetchBytes(url, fail);
  const { createHash } = await import("node:crypto");
  const actual = createHash("sha256").update(archive).digest("hex");
  if (actual !== expected) {
    throw fail(
      "checksum mismatch: the download is not the archive this package was released with; nothing was installed or run",
      `  got:      sha256 ${actual}`,
    );
  }
  const { gunzipSync } = await import("node:zlib");
  const { readTarEntry } = await import("./ustar.js");
  let binary;
  try {
    binary = readTarEntry(gunzipSync(archive), "loopx");
  } catch (error) {
    throw fail(`cannot read the downloaded archive (${error.message}); nothing was installed`);
  }
  if (!binary) throw fail("the downloaded archive has no loopx binary in it; nothing was installed");
  return install(binary, [join(pkgDir, "native"), cacheDir(env, version)], version);
}

/**
 * The releases base URL: LOOPX_DOWNLOAD_URL as install.sh reads it (an
 * http(s):// or file:// URL, trailing slashes dropped), else GitHub's.
 */
export function downloadBase(env) {
  const base = (env.LOOPX_DOWNLOAD_URL || DEFAULT_DOWNLOAD_BASE).replace(/\/+$/, "");
  if (!/^(https?|file):\/\/./.test(base)) {
    throw new NativeError(`LOOPX_DOWNLOAD_URL must be an http(s):// or file:// URL, not '${env.LOOPX_DOWNLOAD_URL}'`);
  }
  return base;
}

// The two ways to get a binary when the download cannot be had.
function waysOut(version, asset) {
  return [
    "  either set LOOPX_DOWNLOAD_URL to a mirror of the releases",
    `    (one that serves <mirror>/download/v${version}/${asset}, as for install.sh),`,
    `  or set LOOPX_BINARY_PATH to a loopx ${version} binary`,
  ];
}

function expectedChecksum(file, asset) {
  const refuse = (why) =>
    new NativeError(
      `cannot verify a download of ${asset}: ${why}; ` +
        "install a released loopx package (scripts/build-release.sh packs one), " +
        "or set LOOPX_BINARY_PATH to a loopx binary",
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

// The bytes at `url`; a failure is thrown as `fail(headline)`.
async function fetchBytes(url, fail) {
  if (url.startsWith("file:")) {
    try {
      return readFileSync(fileURLToPath(url));
    } catch (error) {
      throw fail(`could not download the loopx binary (${error.code ?? error.message})`);
    }
  }
  let response;
  try {
    response = await fetch(url, { redirect: "follow" });
  } catch (error) {
    const reason = error.cause?.code ?? error.cause?.message ?? error.message;
    throw fail(`could not download the loopx binary (${reason}); are you offline?`);
  }
  const via = response.url && response.url !== url ? [`  (redirected to ${response.url})`] : [];
  if (!response.ok) {
    throw fail(`could not download the loopx binary (HTTP ${response.status})`, ...via);
  }
  try {
    return Buffer.from(await response.arrayBuffer());
  } catch (error) {
    throw fail(`could not download the loopx binary (${error.cause?.code ?? error.message})`, ...via);
  }
}

// Writes the binary into the first directory that takes it, atomically: a
// temp file beside the final name, chmod 755, rename. Concurrent first runs
// each rename a complete file, and no reader ever sees a partial one. A
// directory that cannot take it is left as it was: the temp file and any
// directory made for it are removed.
function install(binary, dirs, version) {
  const failures = [];
  for (const dir of dirs) {
    const temp = join(dir, `.loopx-${process.pid}-${Date.now()}.tmp`);
    let made;
    try {
      made = mkdirSync(dir, { recursive: true });
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
      if (made) removeEmptyDirs(dir, made);
      failures.push(`${dir}: ${error.code ?? error.message}`);
    }
  }
  throw new NativeError(
    `cannot save the downloaded binary (${failures.join("; ")}); nothing was installed; ` +
      `set LOOPX_BINARY_PATH to a loopx ${version} binary`,
  );
}

// Removes `dir` and its parents up to `top` (the first directory mkdir made),
// as long as they are empty: another process may be using them.
function removeEmptyDirs(dir, top) {
  for (let d = dir; d.length >= top.length; d = dirname(d)) {
    try {
      rmdirSync(d);
    } catch {
      return;
    }
    if (d === top) return;
  }
}
