// TypeScript and JSX for loopx scripts on Node's in-thread hooks (Node >=
// 22.15; register.mjs loads this file only there, and only when the entry
// script is TypeScript/JSX or the binary named a tsx). A file's transpiled
// form is computed once and reused while its source is unchanged
// (DESIGN.md "JS/TS runtime"):
//
// - Transformers, first that applies:
//     1. Node's module.stripTypeScriptTypes (strip mode, so line and column
//        numbers stay), for .ts/.mts/.cts, when the file needs no more than
//        stripping: it strips without error (no enum, namespace, parameter
//        property, `import x = require()`) and, when tsx is there to do
//        better, every name it imports is used as a value after stripping
//        (an import of a type not marked `type` would otherwise fail at
//        link time, where tsx/esbuild drops it);
//     2. esbuild, the one the package's tsx depends on, resolved from tsx's
//        directory: enums, namespaces, .tsx/.jsx (classic transform:
//        React.createElement/React.Fragment, as loader/tsconfig.json tells
//        tsx), with an inline source map;
//     3. neither: null, and Node loads the file its own way (its own type
//        stripping or its own error), as without this file.
// - The cache: ${XDG_CACHE_HOME:-~/.cache}/loopx/ts/<key>.js, the key
//   being a 128-bit hash of this format's tag, the transformer and its
//   version (Node's version for stripping, esbuild's for esbuild), the
//   file's extension and its source. An entry is the transpiled text
//   followed by a last line holding the hash of that text: a damaged entry
//   fails the check and is transpiled and written again. The hash is
//   computed here, in JavaScript: loading node:crypto costs 2-5 ms a
//   script start, more than the rest of a cache hit; a non-cryptographic
//   hash is enough against accidental collisions and damage, which is all
//   a cache of one's own files needs. Entries are written to a
//   temp file and renamed (concurrent loops never see a partial entry);
//   a hit older than a day gets its mtime refreshed, and entries unused
//   for 30 days are removed (looked for at most once a day, on a write).
//   An unwritable or missing cache directory is not an error: the text is
//   used from memory and nothing is said.
// - Trust (DESIGN.md "Beyond the spec": state files): an entry is code that
//   runs, and XDG_CACHE_HOME may be on shared storage. So the cache is used
//   only while `loopx/` and `loopx/ts/` are directories of the user's own
//   that no one else can write (one of ours opened to a group, as
//   Kubernetes' fsGroup does, is closed again); an entry is read only when it is a regular file
//   of the user's (opened without following a link or waiting on a fifo,
//   at most MAX_ENTRY bytes). Anything else is ignored: the file is
//   transpiled again, and not written where others could change it.
// Builtins come from process.getBuiltinModule (Node >= 22.3): an `import`
// of one builds its ESM wrapper, ~0.5 ms a script start.
const fs = process.getBuiltinModule("node:fs");
const module = process.getBuiltinModule("node:module");
const { dirname, join } = process.getBuiltinModule("node:path");
const { fileURLToPath } = process.getBuiltinModule("node:url");

const FORMAT = "loopx-ts-1";
const DAY_MS = 24 * 60 * 60 * 1000;
const MAX_AGE_MS = 30 * DAY_MS;
const TRAILER = "\n//loopx-ts-cache:";
const MAX_ENTRY = 64 * 1024 * 1024;

let tsxLoader; // file: URL of tsx's loader, when the binary named one
let esbuild; // { transformSync, version } | null, once looked up
let cacheRoot; // string | null, once computed
let cacheTrusted; // boolean, once checked

/** Tells this module which tsx is there (register.mjs, from ?tsx=). */
export function configure({ tsx }) {
  tsxLoader = tsx || undefined;
}

/**
 * The JavaScript text for the TypeScript/JSX file at `url`, from the cache
 * or transpiled now; null when neither transformer applies (Node then
 * loads it itself). Throws the transformer's error for a broken source.
 */
export function transpiled(url, filename) {
  const source = fs.readFileSync(filename, "utf8");
  const ext = /\.[^./]*$/.exec(filename)?.[0] ?? "";
  const strips = STRIPPABLE.has(ext) && typeof module.stripTypeScriptTypes === "function";
  // Stripping is checked for unused imports only when tsx can do better.
  const stripTag = `${FORMAT}\0strip${tsxLoader ? "+checked" : ""}@${process.version}\0${ext}\0`;
  const stripKey = strips ? hash(stripTag + source) : null;
  if (stripKey) {
    const hit = read(stripKey);
    if (hit !== null) return hit;
  }
  const esb = tsxLoader ? findEsbuild() : null;
  const esbKey = esb ? hash(`${FORMAT}\0esbuild@${esb.version}\0${ext}\0${source}`) : null;
  if (esbKey) {
    const hit = read(esbKey);
    if (hit !== null) return hit;
  }
  if (stripKey) {
    const stripped = strip(source);
    if (stripped !== null && (!esb || importsAllUsed(stripped))) return write(stripKey, stripped);
  }
  if (esb) return write(esbKey, transform(esb, source, filename, ext));
  return null;
}

/** Whether esbuild was found beside the tsx that configure() named. */
export function hasEsbuild() {
  return Boolean(tsxLoader && findEsbuild());
}

const STRIPPABLE = new Set([".ts", ".mts", ".cts"]);

/**
 * A 128-bit hash of `text`, as 32 hex digits: two 64-bit lanes, each a
 * pair of 32-bit multiply-xorshift hashes over its UTF-16 code units
 * (cyrb53's mixing), each lane seeded differently.
 */
export function hash(text) {
  let out = "";
  for (let lane = 0; lane < 2; lane++) {
    let h1 = 0xdeadbeef ^ (lane * 0x9e3779b9);
    let h2 = 0x41c6ce57 ^ (lane * 0x85ebca6b);
    for (let i = 0; i < text.length; i++) {
      const c = text.charCodeAt(i);
      h1 = Math.imul(h1 ^ c, 2654435761);
      h2 = Math.imul(h2 ^ c, 1597334677);
    }
    h1 = Math.imul(h1 ^ (h1 >>> 16), 2246822507) ^ Math.imul(h2 ^ (h2 >>> 13), 3266489909);
    h2 = Math.imul(h2 ^ (h2 >>> 16), 2246822507) ^ Math.imul(h1 ^ (h1 >>> 13), 3266489909);
    out += (h1 >>> 0).toString(16).padStart(8, "0") + (h2 >>> 0).toString(16).padStart(8, "0");
  }
  return out;
}

function root() {
  if (cacheRoot !== undefined) return cacheRoot;
  const xdg = process.env.XDG_CACHE_HOME;
  const home = process.env.HOME;
  const base = xdg && xdg.startsWith("/") ? xdg : home ? join(home, ".cache") : null;
  cacheRoot = base ? join(base, "loopx", "ts") : null;
  return cacheRoot;
}

/**
 * Whether `dir` is a directory of the user's that no one else can write
 * (made so when it is ours but writable by a group or everyone; a
 * read-only one stays read-only).
 */
export function ownDirectory(dir, uid = process.getuid?.()) {
  try {
    const st = fs.lstatSync(dir);
    if (!st.isDirectory() || st.uid !== uid) return false;
    if ((st.mode & 0o022) !== 0) fs.chmodSync(dir, st.mode & 0o755);
    return true;
  } catch {
    return false;
  }
}

// The cache directory when it may be used (see "Trust" above), else null.
function trustedRoot() {
  const dir = root();
  if (!dir) return null;
  if (cacheTrusted === undefined || !cacheTrusted) {
    try {
      fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
    } catch {
      // Checked below: a directory that is not there is not used.
    }
    cacheTrusted = ownDirectory(dirname(dir)) && ownDirectory(dir);
  }
  return cacheTrusted ? dir : null;
}

// The entry's text when it is there, the user's, and intact; null otherwise.
function read(key) {
  const dir = trustedRoot();
  if (!dir) return null;
  const path = join(dir, `${key}.js`);
  let text;
  let fd;
  try {
    const { O_RDONLY, O_NOFOLLOW, O_NONBLOCK } = fs.constants;
    fd = fs.openSync(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK);
    const st = fs.fstatSync(fd);
    if (!st.isFile() || st.uid !== process.getuid?.() || st.size > MAX_ENTRY) return null;
    text = fs.readFileSync(fd, "utf8");
    const { mtimeMs } = st;
    if (Date.now() - mtimeMs > DAY_MS) {
      try {
        fs.futimesSync(fd, new Date(), new Date());
      } catch {
        // A read-only cache: the entry stays as old as it is.
      }
    }
  } catch {
    return null;
  } finally {
    if (fd !== undefined) fs.closeSync(fd);
  }
  const at = text.lastIndexOf(TRAILER);
  if (at < 0) return null;
  const body = text.slice(0, at);
  return text.slice(at + TRAILER.length).trim() === hash(body) ? body : null;
}

// Stores `body` under `key` (best effort) and returns it.
function write(key, body) {
  const dir = trustedRoot();
  if (!dir) return body;
  const temp = join(dir, `.${key}.${process.pid}.${Math.random().toString(36).slice(2)}.tmp`);
  try {
    fs.writeFileSync(temp, `${body}${TRAILER}${hash(body)}\n`, { flag: "wx", mode: 0o600 });
    fs.renameSync(temp, join(dir, `${key}.js`));
  } catch {
    try {
      fs.rmSync(temp, { force: true });
    } catch {
      // Nothing was written.
    }
    return body;
  }
  prune(dir);
  return body;
}

// Removes entries (and stray temp files) not used for MAX_AGE_MS, at most
// once a day: the mtime of `.pruned` says when it was last done.
function prune(dir) {
  const stamp = join(dir, ".pruned");
  const now = Date.now();
  try {
    if (now - fs.statSync(stamp).mtimeMs < DAY_MS) return;
  } catch {
    // Never pruned: do it now.
  }
  try {
    fs.writeFileSync(stamp, "");
    for (const name of fs.readdirSync(dir)) {
      if (!name.endsWith(".js") && !name.endsWith(".tmp")) continue;
      const path = join(dir, name);
      try {
        const age = now - fs.statSync(path).mtimeMs;
        if (age > (name.endsWith(".tmp") ? DAY_MS : MAX_AGE_MS)) fs.rmSync(path, { force: true });
      } catch {
        // Removed by another loop meanwhile.
      }
    }
  } catch {
    // Pruning is housekeeping; a failure changes nothing else.
  }
}

// module.stripTypeScriptTypes, without its ExperimentalWarning (a script's
// stderr is its own); null when the source needs more than stripping.
function strip(source) {
  const emitWarning = process.emitWarning;
  process.emitWarning = function (warning, ...rest) {
    const type = typeof rest[0] === "string" ? rest[0] : rest[0]?.type;
    if (type === "ExperimentalWarning") return;
    return emitWarning.call(process, warning, ...rest);
  };
  try {
    return module.stripTypeScriptTypes(source, { mode: "strip" });
  } catch {
    return null;
  } finally {
    process.emitWarning = emitWarning;
  }
}

const IMPORT_STATEMENT = /\bimport\s*([\w$]+\s*(?:,\s*)?)?(\*\s*as\s+[\w$]+|\{[^}]*\})?\s*from\s*(["'])[^"'\n]*\3/g;

/**
 * Whether every binding the stripped code imports is used in it. esbuild
 * drops an import whose names are only used as types; stripping keeps it,
 * and a type not marked `type` then fails at link time. Errs on the side
 * of "not used" (esbuild then does it): comments and string literals are
 * not uses.
 */
export function importsAllUsed(code) {
  const names = [];
  for (const [, def, rest] of code.matchAll(IMPORT_STATEMENT)) {
    if (def) names.push(def.replace(/[\s,]/g, ""));
    if (!rest) continue;
    if (rest.startsWith("*")) {
      names.push(rest.split(/\s+as\s+/)[1].trim());
      continue;
    }
    for (const part of rest.slice(1, -1).split(",")) {
      const words = part.trim().split(/\s+as\s+/);
      const local = words[words.length - 1].trim();
      if (local) names.push(local);
    }
  }
  if (names.length === 0) return true;
  const rest = code
    .replace(IMPORT_STATEMENT, "")
    .replace(/\/\*[\s\S]*?\*\//g, "")
    .replace(/\/\/[^\n]*/g, "")
    .replace(/"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*'/g, "");
  return names.every((name) => new RegExp(`(?<![\\w$.])${name.replace(/\$/g, "\\$")}(?![\\w$])`).test(rest));
}

// The esbuild that tsx uses: the first node_modules/esbuild up from tsx's
// loader, as Node would resolve it from there (a few stats; its version is
// read, and the module loaded, only when needed).
function findEsbuild() {
  if (esbuild !== undefined) return esbuild;
  esbuild = null;
  try {
    let dir = dirname(fileURLToPath(tsxLoader));
    for (;;) {
      const candidate = join(dir, "node_modules", "esbuild");
      if (!dir.endsWith("/node_modules") && fs.existsSync(join(candidate, "package.json"))) {
        esbuild = lazyEsbuild(candidate);
        break;
      }
      const up = dirname(dir);
      if (up === dir) break;
      dir = up;
    }
  } catch {
    // No esbuild beside this tsx: stripping only.
  }
  return esbuild;
}

function lazyEsbuild(dir) {
  let version;
  return {
    get version() {
      version ??= JSON.parse(fs.readFileSync(join(dir, "package.json"), "utf8")).version;
      return version;
    },
    transformSync: (...args) => module.createRequire(join(dir, "package.json"))(dir).transformSync(...args),
  };
}

const LOADERS = { ".ts": "ts", ".mts": "ts", ".cts": "ts", ".tsx": "tsx", ".jsx": "jsx" };

function transform(esb, source, filename, ext) {
  const { code } = esb.transformSync(source, {
    loader: LOADERS[ext] ?? "ts",
    sourcefile: filename,
    sourcemap: "inline",
    target: `node${process.versions.node}`,
    jsx: "transform",
    jsxFactory: "React.createElement",
    jsxFragment: "React.Fragment",
    // The module syntax stays as written: the hooks decide the format.
    supported: { "dynamic-import": true, "import-meta": true },
    tsconfigRaw: { compilerOptions: {} },
  });
  return code;
}
