// Getting the binary (lib/native.js through bin/loopx.js): lookup order,
// download from a local release mirror, checksum refusal, offline errors,
// unsupported platforms, the per-user cache, and postinstall.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { createServer } from "node:http";
import { join } from "node:path";
import { test } from "node:test";
import { gunzipSync } from "node:zlib";
import { cacheDir, findBinary, NativeError, targetFor } from "../lib/native.js";
import { readTarEntry } from "../lib/ustar.js";
import { packageCopy, run, tempDir, writeTree } from "./util.js";

const VERSION = JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8")).version;
const TARGET = targetFor(process.platform, process.arch);
const ASSET = `loopx-${TARGET}.tar.gz`;
const ASSET_PATH = `/download/v${VERSION}/${ASSET}`;
const noTarget = !TARGET && `no release target for ${process.platform}/${process.arch}`;

// A "binary" that says who it is and leaves a mark that it ran.
function fakeBinary(name) {
  return `#!/bin/sh\necho "${name} $*"\n: > "$RAN_MARK"\n`;
}

/** A release archive built with the system tar, as the release script does. */
function releaseArchive(t, files, format = "ustar") {
  const dir = tempDir(t);
  writeTree(dir, files);
  const archive = join(dir, "out.tar.gz");
  execFileSync("tar", ["-czf", archive, `--format=${format}`, "-C", dir, ...Object.keys(files)]);
  return readFileSync(archive);
}

const sha256 = (bytes) => createHash("sha256").update(bytes).digest("hex");

/** A release mirror on 127.0.0.1; `routes` maps paths to bodies or handlers. */
async function mirror(t, routes) {
  const requests = [];
  const server = createServer((req, res) => {
    requests.push(req.url);
    const route = routes[req.url];
    if (typeof route === "function") return route(req, res);
    if (route === undefined) {
      res.writeHead(404).end("not found");
      return;
    }
    res.writeHead(200, { "content-type": "application/gzip" }).end(route);
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  t.after(() => server.close());
  return { base: `http://127.0.0.1:${server.address().port}`, requests };
}

/** A port on 127.0.0.1 with nothing listening on it. */
async function closedPort() {
  const server = createServer();
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address();
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/** The package copy's shim, with a private cache and a mark file. */
function shimRunner(t, pkg) {
  const home = tempDir(t);
  const mark = join(home, "ran");
  const env = { XDG_CACHE_HOME: join(home, "cache"), RAN_MARK: mark, LOOPX_BINARY_PATH: "" };
  return {
    cache: join(home, "cache", "loopx", VERSION, "loopx"),
    mark,
    run: (extraEnv = {}, args = ["version"]) =>
      run(process.execPath, [join(pkg, "bin", "loopx.js"), ...args], { env: { ...env, ...extraEnv } }),
  };
}

function writeSums(pkg, lines) {
  writeFileSync(join(pkg, "SHA256SUMS"), lines.join("\n") + "\n");
}

test("LOOPX_BINARY_PATH wins over native/loopx, which wins over the cache", async (t) => {
  const pkg = packageCopy(t);
  const shim = shimRunner(t, pkg);
  const offline = { LOOPX_DOWNLOAD_URL: `http://127.0.0.1:${await closedPort()}` };
  const dir = tempDir(t);
  writeTree(dir, { "override": [fakeBinary("override"), 0o755] });
  writeTree(pkg, { "native/loopx": [fakeBinary("bundled"), 0o755] });
  writeTree(join(shim.cache, ".."), { loopx: [fakeBinary("cached"), 0o755] });

  let r = await shim.run({ ...offline, LOOPX_BINARY_PATH: join(dir, "override") }, ["a", "b"]);
  assert.equal(r.stdout, "override a b\n", r.stderr);
  r = await shim.run(offline);
  assert.equal(r.stdout, "bundled version\n", r.stderr);
  writeTree(pkg, { "native/loopx": ["not executable", 0o644] });
  r = await shim.run(offline);
  assert.equal(r.stdout, "cached version\n", r.stderr);
  assert.equal(r.stderr, "", "no download was attempted");
});

test("a LOOPX_BINARY_PATH that is not an executable file is an error", async (t) => {
  const pkg = packageCopy(t);
  const shim = shimRunner(t, pkg);
  writeTree(pkg, { "native/loopx": [fakeBinary("bundled"), 0o755] });
  const dir = tempDir(t);
  writeTree(dir, { "plain": "not executable" });
  for (const path of [join(dir, "missing"), join(dir, "plain"), dir]) {
    const r = await shim.run({ LOOPX_BINARY_PATH: path });
    assert.equal(r.code, 1);
    assert.equal(r.stdout, "", "nothing else was run");
    assert.match(r.stderr, /^loopx: LOOPX_BINARY_PATH is set to .+, which is not an executable file\n$/);
    assert.ok(r.stderr.includes(path));
  }
});

test("downloads, verifies, installs into native/ and runs the binary; later runs reuse it", { skip: noTarget }, async (t) => {
  const pkg = packageCopy(t);
  const shim = shimRunner(t, pkg);
  const archive = releaseArchive(t, { "LICENSE": "MIT", "README.md": "hi", "loopx": [fakeBinary("downloaded"), 0o755] });
  // The mirror redirects, as GitHub's release URLs do.
  const m = await mirror(t, {
    [ASSET_PATH]: (req, res) => res.writeHead(302, { location: "/objects/1" }).end(),
    "/objects/1": archive,
  });
  writeSums(pkg, [`${"0".repeat(64)}  install.sh`, `${sha256(archive)}  ${ASSET}`]);

  let r = await shim.run({ LOOPX_DOWNLOAD_URL: `${m.base}/` }, ["run", "x"]);
  assert.equal(r.code, 0, r.stderr);
  assert.equal(r.stdout, "downloaded run x\n");
  assert.equal(r.stderr, `loopx: downloading ${m.base}${ASSET_PATH} ...\n`);
  assert.deepEqual(m.requests, [ASSET_PATH, "/objects/1"]);
  const installed = join(pkg, "native", "loopx");
  assert.equal(statSync(installed).mode & 0o777, 0o755);
  assert.deepEqual(readdirSync(join(pkg, "native")), ["loopx"], "no temp file is left");

  r = await shim.run({ LOOPX_DOWNLOAD_URL: m.base });
  assert.equal(r.stdout, "downloaded version\n");
  assert.equal(r.stderr, "");
  assert.equal(m.requests.length, 2, "the second run downloads nothing");
});

test("when the package directory is not writable the binary goes to the per-user cache", { skip: noTarget }, async (t) => {
  const pkg = packageCopy(t);
  const shim = shimRunner(t, pkg);
  // A file where native/ should be: the package dir cannot take the binary
  // (tests run as root here, so permissions alone would not stop a write).
  writeTree(pkg, { native: "in the way" });
  const archive = releaseArchive(t, { "./loopx": [fakeBinary("cached"), 0o755] });
  const m = await mirror(t, { [ASSET_PATH]: archive });
  writeSums(pkg, [`${sha256(archive)} *${ASSET}`]);

  let r = await shim.run({ LOOPX_DOWNLOAD_URL: m.base });
  assert.equal(r.stdout, "cached version\n", r.stderr);
  assert.equal(statSync(shim.cache).mode & 0o777, 0o755);
  r = await shim.run({ LOOPX_DOWNLOAD_URL: m.base });
  assert.equal(r.stdout, "cached version\n", r.stderr);
  assert.equal(m.requests.length, 1);
});

/**
 * Checks a download failure report: the headline, the URL tried, the
 * archive and checksum expected, the two ways out; returns its lines.
 */
function assertDownloadFailure(stderr, { headline, url, expected, pkg }) {
  const lines = stderr.trimEnd().split("\n");
  assert.equal(lines[0], `loopx: downloading ${url} ...`, stderr);
  assert.ok(lines[1].startsWith(`loopx: ${headline}`), stderr);
  assert.equal(lines[2], `  tried:    ${url}`, stderr);
  assert.equal(lines[3], `  expected: ${ASSET} of loopx ${VERSION}, sha256 ${expected} (from ${join(pkg, "SHA256SUMS")})`, stderr);
  assert.equal(lines.at(-3), "  either set LOOPX_DOWNLOAD_URL to a mirror of the releases", stderr);
  assert.equal(lines.at(-2), `    (one that serves <mirror>/download/v${VERSION}/${ASSET}, as for install.sh),`, stderr);
  assert.equal(lines.at(-1), `  or set LOOPX_BINARY_PATH to a loopx ${VERSION} binary`, stderr);
  return lines;
}

/** Nothing of a failed download is left in the package or the cache. */
function assertNothingInstalled(pkg, shim) {
  assert.ok(!existsSync(join(pkg, "native")), "no native/ in the package");
  assert.ok(!existsSync(join(shim.cache, "..", "..")), "no loopx/ in the cache");
  assert.ok(!existsSync(shim.mark), "nothing was run");
}

test("a checksum mismatch is refused: nothing is installed or run", { skip: noTarget }, async (t) => {
  const pkg = packageCopy(t);
  const shim = shimRunner(t, pkg);
  const archive = releaseArchive(t, { loopx: [fakeBinary("evil"), 0o755] });
  const m = await mirror(t, { [ASSET_PATH]: archive });
  const wrong = sha256(Buffer.from("something else"));
  writeSums(pkg, [`${wrong}  ${ASSET}`]);

  const r = await shim.run({ LOOPX_DOWNLOAD_URL: m.base });
  assert.equal(r.code, 1);
  assert.equal(r.stdout, "");
  const lines = assertDownloadFailure(r.stderr, {
    headline: "checksum mismatch: the download is not the archive this package was released with; nothing was installed or run",
    url: `${m.base}${ASSET_PATH}`,
    expected: wrong,
    pkg,
  });
  assert.equal(lines[4], `  got:      sha256 ${sha256(archive)}`);
  assertNothingInstalled(pkg, shim);
});

test("without SHA256SUMS, or without a line for the asset, nothing is downloaded", { skip: noTarget }, async (t) => {
  const pkg = packageCopy(t);
  const shim = shimRunner(t, pkg);
  const m = await mirror(t, { [ASSET_PATH]: "unused" });

  let r = await shim.run({ LOOPX_DOWNLOAD_URL: m.base });
  assert.equal(r.code, 1);
  assert.match(r.stderr, /^loopx: cannot verify a download of loopx-.+\.tar\.gz: .+SHA256SUMS is missing; install a released loopx package .*LOOPX_BINARY_PATH/);
  writeSums(pkg, [`${"a".repeat(64)}  loopx-other-target.tar.gz`]);
  r = await shim.run({ LOOPX_DOWNLOAD_URL: m.base });
  assert.equal(r.code, 1);
  assert.match(r.stderr, /SHA256SUMS has no line for it/);
  assert.deepEqual(m.requests, []);
});

test("offline: the error names the URL tried, what was expected and the ways out", { skip: noTarget }, async (t) => {
  const pkg = packageCopy(t);
  const shim = shimRunner(t, pkg);
  const expected = "a".repeat(64);
  writeSums(pkg, [`${expected}  ${ASSET}`]);
  const base = `http://127.0.0.1:${await closedPort()}`;
  const r = await shim.run({ LOOPX_DOWNLOAD_URL: base });
  assert.equal(r.code, 1);
  assert.equal(r.stdout, "");
  const lines = assertDownloadFailure(r.stderr, {
    headline: "could not download the loopx binary (ECONNREFUSED); are you offline?",
    url: `${base}${ASSET_PATH}`,
    expected,
    pkg,
  });
  assert.equal(lines.length, 7, r.stderr);
  assertNothingInstalled(pkg, shim);
});

test("an HTTP error status is reported with the URL tried and the one redirected to", { skip: noTarget }, async (t) => {
  const pkg = packageCopy(t);
  const shim = shimRunner(t, pkg);
  const expected = "a".repeat(64);
  writeSums(pkg, [`${expected}  ${ASSET}`]);
  const m = await mirror(t, { [ASSET_PATH]: (req, res) => res.writeHead(302, { location: "/objects/gone" }).end() });
  const r = await shim.run({ LOOPX_DOWNLOAD_URL: m.base });
  assert.equal(r.code, 1);
  const lines = assertDownloadFailure(r.stderr, {
    headline: "could not download the loopx binary (HTTP 404)",
    url: `${m.base}${ASSET_PATH}`,
    expected,
    pkg,
  });
  assert.equal(lines[4], `  (redirected to ${m.base}/objects/gone)`);
  assertNothingInstalled(pkg, shim);
});

test("a download cut short is reported and leaves nothing behind", { skip: noTarget }, async (t) => {
  const pkg = packageCopy(t);
  const shim = shimRunner(t, pkg);
  const archive = releaseArchive(t, { loopx: [fakeBinary("whole"), 0o755] });
  writeSums(pkg, [`${sha256(archive)}  ${ASSET}`]);
  const m = await mirror(t, {
    [ASSET_PATH]: (req, res) => {
      res.writeHead(200, { "content-length": archive.length });
      res.write(archive.subarray(0, archive.length >> 1));
      setTimeout(() => res.destroy(), 50);
    },
  });
  const r = await shim.run({ LOOPX_DOWNLOAD_URL: m.base });
  assert.equal(r.code, 1);
  assertDownloadFailure(r.stderr, {
    headline: "could not download the loopx binary (",
    url: `${m.base}${ASSET_PATH}`,
    expected: sha256(archive),
    pkg,
  });
  assertNothingInstalled(pkg, shim);
});

test("LOOPX_DOWNLOAD_URL may be a file:// mirror, as for install.sh, and must be a URL", { skip: noTarget }, async (t) => {
  const pkg = packageCopy(t);
  const shim = shimRunner(t, pkg);
  const archive = releaseArchive(t, { loopx: [fakeBinary("from-disk"), 0o755] });
  const tree = tempDir(t);
  writeTree(tree, { [ASSET_PATH.slice(1)]: archive });
  writeSums(pkg, [`${sha256(archive)}  ${ASSET}`]);

  for (const bad of ["127.0.0.1:8080", "ftp://mirror/loopx"]) {
    const r = await shim.run({ LOOPX_DOWNLOAD_URL: bad });
    assert.equal(r.code, 1);
    assert.equal(r.stderr, `loopx: LOOPX_DOWNLOAD_URL must be an http(s):// or file:// URL, not '${bad}'\n`);
  }
  const missing = await shim.run({ LOOPX_DOWNLOAD_URL: `file://${tree}/nowhere` });
  assert.equal(missing.code, 1);
  assertDownloadFailure(missing.stderr, {
    headline: "could not download the loopx binary (ENOENT)",
    url: `file://${tree}/nowhere${ASSET_PATH}`,
    expected: sha256(archive),
    pkg,
  });
  assertNothingInstalled(pkg, shim);

  const r = await shim.run({ LOOPX_DOWNLOAD_URL: `file://${tree}//` });
  assert.equal(r.stdout, "from-disk version\n", r.stderr);
  assert.equal(r.stderr, `loopx: downloading file://${tree}${ASSET_PATH} ...\n`);
});

test("a binary that no directory can take is reported, and nothing is written", { skip: noTarget }, async (t) => {
  const pkg = packageCopy(t);
  const shim = shimRunner(t, pkg);
  writeTree(pkg, { native: "in the way" });
  // The cache: <XDG_CACHE_HOME>/loopx/<version> cannot be made under a file.
  writeTree(join(shim.cache, "..", "..", ".."), { loopx: "in the way too" });
  const archive = releaseArchive(t, { loopx: [fakeBinary("homeless"), 0o755] });
  const m = await mirror(t, { [ASSET_PATH]: archive });
  writeSums(pkg, [`${sha256(archive)}  ${ASSET}`]);
  const r = await shim.run({ LOOPX_DOWNLOAD_URL: m.base });
  assert.equal(r.code, 1);
  assert.match(r.stderr.split("\n")[1], /^loopx: cannot save the downloaded binary \(.*\/native: (EEXIST|ENOTDIR); .*\/loopx\/[^:]+: (ENOTDIR|EEXIST)\); nothing was installed; set LOOPX_BINARY_PATH to a loopx .+ binary$/);
  assert.equal(readFileSync(join(pkg, "native"), "utf8"), "in the way");
  assert.equal(readFileSync(join(shim.cache, "..", ".."), "utf8"), "in the way too");
  assert.ok(!existsSync(shim.mark));
});

test("an archive without a loopx entry is an error", { skip: noTarget }, async (t) => {
  const pkg = packageCopy(t);
  const shim = shimRunner(t, pkg);
  const archive = releaseArchive(t, { "README.md": "no binary here" });
  const m = await mirror(t, { [ASSET_PATH]: archive });
  writeSums(pkg, [`${sha256(archive)}  ${ASSET}`]);
  const r = await shim.run({ LOOPX_DOWNLOAD_URL: m.base });
  assert.equal(r.code, 1);
  assert.match(r.stderr, /has no loopx binary in it/);
  assert.ok(!existsSync(join(pkg, "native", "loopx")));
});

test("an unsupported platform gets a clear error naming it", async (t) => {
  const pkg = packageCopy(t);
  const env = { XDG_CACHE_HOME: join(tempDir(t), "cache") };
  await assert.rejects(findBinary({ env, pkgDir: pkg, platform: "win32", arch: "x64", log: () => {} }), (error) => {
    assert.ok(error instanceof NativeError);
    assert.match(error.message, /no prebuilt loopx binary for win32\/x64/);
    assert.match(error.message, /LOOPX_BINARY_PATH/);
    return true;
  });
  await assert.rejects(findBinary({ env, pkgDir: pkg, platform: "linux", arch: "ppc64", log: () => {} }), /linux\/ppc64/);
});

test("release targets and the cache directory", () => {
  assert.equal(targetFor("linux", "x64"), "x86_64-unknown-linux-musl");
  assert.equal(targetFor("linux", "arm64"), "aarch64-unknown-linux-musl");
  assert.equal(targetFor("darwin", "x64"), "x86_64-apple-darwin");
  assert.equal(targetFor("darwin", "arm64"), "aarch64-apple-darwin");
  assert.equal(targetFor("freebsd", "x64"), null);
  assert.equal(cacheDir({ XDG_CACHE_HOME: "/x/cache", HOME: "/h" }, "1.2.3"), "/x/cache/loopx/1.2.3");
  assert.equal(cacheDir({ HOME: "/h" }, "1.2.3"), "/h/.cache/loopx/1.2.3");
  assert.equal(cacheDir({ XDG_CACHE_HOME: "relative", HOME: "/h" }, "1"), "/h/.cache/loopx/1");
});

test("the tar reader finds entries in ustar, pax and GNU archives", (t) => {
  const long = `${"d".repeat(60)}/${"e".repeat(60)}`; // over ustar's 100-byte name field
  for (const format of ["ustar", "pax", "gnu"]) {
    const tar = gunzipSync(releaseArchive(t, {
      "README.md": "readme",
      [`${long}/loopx`]: "deep",
      "loopx": ["binary bytes\n".repeat(100), 0o755],
    }, format));
    assert.equal(readTarEntry(tar, "loopx").toString(), "binary bytes\n".repeat(100), format);
    assert.equal(readTarEntry(tar, `${long}/loopx`).toString(), "deep", format);
    assert.equal(readTarEntry(tar, "missing"), null, format);
  }
  assert.throws(() => readTarEntry(gunzipSync(releaseArchive(t, { loopx: "x".repeat(2000) })).subarray(0, 1024), "loopx"), /truncated/);
});

test("postinstall fetches the binary early", { skip: noTarget }, async (t) => {
  const pkg = packageCopy(t);
  const archive = releaseArchive(t, { loopx: [fakeBinary("early"), 0o755] });
  const m = await mirror(t, { [ASSET_PATH]: archive });
  writeSums(pkg, [`${sha256(archive)}  ${ASSET}`]);
  const r = await run(process.execPath, [join(pkg, "lib", "postinstall.js")], {
    env: { LOOPX_DOWNLOAD_URL: m.base, LOOPX_BINARY_PATH: "", XDG_CACHE_HOME: join(tempDir(t), "c") },
  });
  assert.equal(r.code, 0);
  assert.equal(r.stderr, `loopx: downloading ${m.base}${ASSET_PATH} ...\n`);
  assert.equal(readFileSync(join(pkg, "native", "loopx"), "utf8"), fakeBinary("early"));
});

test("postinstall never fails the install", { skip: noTarget }, async (t) => {
  const pkg = packageCopy(t);
  writeSums(pkg, [`${"a".repeat(64)}  ${ASSET}`]);
  const r = await run(process.execPath, [join(pkg, "lib", "postinstall.js")], {
    env: { LOOPX_BINARY_PATH: "", XDG_CACHE_HOME: join(tempDir(t), "c"), LOOPX_DOWNLOAD_URL: `http://127.0.0.1:${await closedPort()}` },
  });
  assert.equal(r.code, 0);
  assert.equal(r.stdout, "");
  assert.match(r.stderr, /^loopx: downloading .+\nloopx: could not download the loopx binary \(ECONNREFUSED\)/);
  assert.match(r.stderr, /LOOPX_BINARY_PATH/);
  assert.match(r.stderr, /\nloopx: the binary was not fetched at install time; the first run of loopx will try again\n$/);
  assert.ok(!existsSync(join(pkg, "native")));
});
