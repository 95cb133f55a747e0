// Preloaded by the loopx binary for every JS/TS script it runs on Node:
//   node --import file://<pkg>/loader/register.mjs[?tsx=<tsx loader URL>] <script>
// It registers the loopx module hooks (SPEC §3.3, §6.3), which are in this
// file too, and on Node >= 22.15 the TypeScript transpile cache: all in
// one module because each module a script loads costs 0.4-0.7 ms of its
// start on Node 22 and 24 (measured; a bare `node` run is ~30 ms).
//
// Node >= 22.15 (module.registerHooks, in-thread: resolveSync/loadSync):
// the hooks alone. For a TypeScript/JSX entry, or when the binary names a
// tsx (?tsx=, which it does for .ts/.tsx/.jsx scripts when there is one),
// they also serve TypeScript and JSX (4. below: the cache, Node's type
// stripping, tsx's esbuild) and keep tsx's resolution rules (5.); tsx
// itself is not loaded. Nothing is imported here.
//
// Older Node (module.register, a hooks thread: resolve/load, the names
// Node looks for there): hooks.mjs, which loads this file as
// register.mjs?hooks-thread for its hooks, then, when the binary names
// one, tsx's. The order matters: hooks registered later run first, so tsx
// transforms the source the loopx hooks return. Loading tsx from here,
// rather than from a second `--import <tsx>`, is only about speed; what
// runs is the same.
//
// The hooks:
// 1. `import ... from "loopx"`: normal resolution first, so a closer
//    node_modules/loopx (the workflow's own) wins (§3.3); only when that
//    finds nothing does it resolve to this package's index.js, the helpers
//    of the running CLI version.
// 2. The entry script always runs as ESM (§6.3), so `require`, `module` and
//    `exports` are undefined in it and fail when used, even in a `.js` file
//    whose nearest package.json says nothing or "commonjs". The entry is the
//    one module Node resolves with no parent (`parentURL === undefined`):
//    `--import` modules have the cwd as parent, every other import or
//    require has its importer. It is loaded with an ESM format, and
//    `export {};` is appended to its source (at the end, so line numbers
//    stay): tsx, which runs after these hooks, would otherwise wrap a
//    TypeScript file that assigns `module.exports` in a CommonJS shim.
//    Every other file keeps its Node meaning: CommonJS dependencies load as
//    CommonJS and a workflow package.json's "type" applies as usual.
// 3. (hooks.mjs: speed on Node's hooks thread.)
// On Node >= 22.15, with TypeScript served (useTypeScript):
// 4. TypeScript and JSX files (.ts .mts .cts .tsx .jsx, the entry and every
//    file it imports or requires) are served transpiled, from the cache
//    below, under their own URL: import.meta.url, relative imports and
//    node_modules lookup are as for the file itself. The format is the
//    entry's ESM (2.), else the one Node gave (".mts"/".cts", the nearest
//    package.json "type"), else ESM when the code has import/export
//    statements and CommonJS otherwise.
// 5. When the binary named a tsx (?tsx=), tsx's resolution rules stay: a
//    relative import that Node cannot find is tried again as TypeScript
//    (`./a.js` as `./a.ts`/`./a.tsx`, `.mjs` as `.mts`, `.cjs` as `.cts`),
//    an extensionless one with .ts .tsx .js .jsx .mts .cts .mjs .cjs .json
//    appended, then as a directory's index; and a JSON file imported
//    without `with { type: "json" }` loads, as tsx allows.
//
// The TypeScript and JSX of 4. (in-thread only): a file's transpiled form
// is computed once and reused while its source is unchanged (DESIGN.md
// "JS/TS runtime"):
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
//        stripping or its own error), as without these hooks.
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

const PARAMS = new URL(import.meta.url).searchParams;
// tsx's loader URL, when the binary named one (?tsx=).
const TSX = PARAMS.get("tsx");
// hooks.mjs imports this file as register.mjs?hooks-thread: there it only
// provides the hooks.
const ON_HOOKS_THREAD = PARAMS.has("hooks-thread");
// node:module by process.getBuiltinModule where Node has it (>= 20.16,
// 22.3): an `import` of a builtin builds its ESM wrapper, ~0.5 ms.
const nodeModule = process.getBuiltinModule?.("node:module");

const FALLBACK_URL = new URL("../index.js", import.meta.url).href;
const ESM_MARKER = "\nexport {};\n";

let entryURL;

// Whether this Node strips TypeScript types itself (the binary runs `.ts`
// entries that way when there is no tsx).
const STRIPS_TYPES = Boolean(process.features?.typescript);
const TS_FILE = /\.[cm]?ts$/;

// The ESM counterpart of the format Node, tsx or Node's type stripping
// gave the entry. No format means "load() guesses", which can be CommonJS;
// for a `.ts` file under type stripping (no package.json "type") the
// guess must stay TypeScript, or the types would reach the parser.
function esmFormat(format, url) {
  if (format === undefined || format === null) {
    return STRIPS_TYPES && TS_FILE.test(new URL(url).pathname) ? "module-typescript" : "module";
  }
  if (format === "commonjs") return "module";
  if (format === "commonjs-typescript") return "module-typescript";
  return format;
}

function isNotFound(error) {
  return error?.code === "ERR_MODULE_NOT_FOUND" || error?.code === "MODULE_NOT_FOUND";
}

function loopxFallback(error) {
  if (!isNotFound(error)) throw error;
  return { url: FALLBACK_URL, format: "module", shortCircuit: true };
}

// Builtins of the in-thread code below (Node >= 22.15 has
// process.getBuiltinModule): an `import` of one would build its ESM
// wrapper at every script start, ~0.5 ms.
const builtin = (name) => process.getBuiltinModule(name);

let typeScript = false; // serve TypeScript and JSX (4.), in-thread only
let tsxRules = false;

function useTypeScript({ tsx }) {
  typeScript = true;
  tsxRules = Boolean(tsx);
}

const TS_URL = /^file:.*\.(?:[cm]?ts|tsx|jsx)$/;
const JS_TO_TS = { ".js": [".ts", ".tsx"], ".jsx": [".tsx"], ".mjs": [".mts"], ".cjs": [".cts"] };
const TRY_EXTENSIONS = [".ts", ".tsx", ".js", ".jsx", ".mts", ".cts", ".mjs", ".cjs", ".json"];

// tsx's resolution rules (5.), for a relative or absolute specifier that
// Node could not resolve; `error` is Node's, thrown again when no
// alternative exists either.
function resolveLikeTsx(specifier, context, nextResolve, error) {
  if (
    !tsxRules ||
    !(isNotFound(error) || error?.code === "ERR_UNSUPPORTED_DIR_IMPORT") ||
    !/^(?:\.{1,2}(?:\/|$)|\/|file:)/.test(specifier) ||
    /[?#]/.test(specifier)
  ) {
    throw error;
  }
  const ext = /\.[cm]?jsx?$/.exec(specifier)?.[0];
  const base = ext ? specifier.slice(0, -ext.length) : specifier;
  const candidates = ext
    ? JS_TO_TS[ext].map((e) => base + e)
    : [
        ...(/\/$/.test(specifier) ? [] : TRY_EXTENSIONS.map((e) => specifier + e)),
        ...TRY_EXTENSIONS.map((e) => `${specifier.replace(/\/$/, "")}/index${e}`),
      ];
  for (const candidate of candidates) {
    try {
      return nextResolve(candidate, context);
    } catch (e) {
      if (!isNotFound(e) && e?.code !== "ERR_UNSUPPORTED_DIR_IMPORT") throw e;
    }
  }
  throw error;
}

// The format of a transpiled file that is not the entry (4.).
function tsFormat(url, context, code) {
  const given = context.format;
  if (typeof given === "string" && given.startsWith("module")) return "module";
  if (given === "commonjs-typescript" || given === "commonjs") {
    // Node says "commonjs" for a file whose package.json has no "type" too:
    // only .cts and an explicit "type" decide it, else the syntax does.
    if (url.endsWith(".cts") || packageType(url) === "commonjs") return "commonjs";
  }
  if (url.endsWith(".mts")) return "module";
  if (url.endsWith(".cts")) return "commonjs";
  const type = packageType(url);
  if (type === "module" || type === "commonjs") return type;
  return /(?:^|[\n;])\s*(?:import\s*[\w$*{"'(.]|export\s*[\w${*])/.test(code) ? "module" : "commonjs";
}

// The nearest package.json's "type" ("module", "commonjs" or undefined).
function packageType(url) {
  try {
    const path = builtin("node:module").findPackageJSON(url);
    return path ? JSON.parse(builtin("node:fs").readFileSync(path, "utf8")).type : undefined;
  } catch {
    return undefined;
  }
}

function loadTypeScript(url, context) {
  const code = transpiled(url, builtin("node:url").fileURLToPath(url));
  if (code === null) return null;
  if (code.includes("\n//# sourceMappingURL=data:")) process.setSourceMapsEnabled?.(true);
  if (url === entryURL) return { format: "module", source: code + ESM_MARKER, shortCircuit: true };
  return { format: tsFormat(url, context, code), source: code, shortCircuit: true };
}

// A JSON file imported without `with { type: "json" }`, as tsx loads it.
function jsonWithoutAttributes(url, context) {
  return (
    tsxRules &&
    url.startsWith("file:") &&
    url.endsWith(".json") &&
    context.importAttributes?.type !== "json" &&
    context.conditions?.includes("import") &&
    !context.conditions.includes("require")
  );
}

function afterResolve(context, resolved) {
  if (context.parentURL !== undefined) return resolved;
  entryURL = resolved.url;
  return { ...resolved, format: esmFormat(resolved.format, resolved.url) };
}

function entryContext(url, context) {
  return { ...context, format: esmFormat(context.format, url) };
}

function asEsm(url, loaded) {
  const { source } = loaded;
  if (source === null || source === undefined) return { ...loaded, format: esmFormat(loaded.format, url) };
  const text = typeof source === "string" ? source : new TextDecoder().decode(source);
  return { ...loaded, format: esmFormat(loaded.format, url), source: text + ESM_MARKER };
}

// Whether a node_modules/loopx directory is anywhere above the importer:
// only then can Node's resolution find a closer loopx (1.). Looking costs
// a few stats; letting Node fail costs an exception with its stack, and
// the usual case (no such directory) is the fallback.
function mayHaveOwnLoopx(parentURL) {
  if (!parentURL?.startsWith("file:")) return true;
  const { existsSync } = builtin("node:fs");
  let dir = new URL(".", parentURL);
  for (;;) {
    if (!dir.pathname.endsWith("/node_modules/") && existsSync(new URL("node_modules/loopx", dir))) return true;
    const up = new URL("..", dir);
    if (up.href === dir.href) return false;
    dir = up;
  }
}

function resolveSync(specifier, context, nextResolve) {
  if (specifier === "loopx") {
    if (!mayHaveOwnLoopx(context.parentURL)) return { url: FALLBACK_URL, format: "module", shortCircuit: true };
    try {
      return nextResolve(specifier, context);
    } catch (error) {
      return loopxFallback(error);
    }
  }
  let resolved;
  try {
    resolved = nextResolve(specifier, context);
  } catch (error) {
    resolved = resolveLikeTsx(specifier, context, nextResolve, error);
  }
  return afterResolve(context, resolved);
}

function loadSync(url, context, nextLoad) {
  if (typeScript && TS_URL.test(url)) {
    const served = loadTypeScript(url, context);
    if (served) return served;
  }
  if (jsonWithoutAttributes(url, context)) {
    const text = builtin("node:fs").readFileSync(builtin("node:url").fileURLToPath(url), "utf8");
    JSON.parse(text); // a broken file fails here, naming the problem
    return { format: "module", source: `export default ${text};\n`, shortCircuit: true };
  }
  if (url !== entryURL) return nextLoad(url, context);
  return asEsm(url, nextLoad(url, entryContext(url, context)));
}

export async function resolve(specifier, context, nextResolve) {
  if (specifier === "loopx") {
    try {
      return await nextResolve(specifier, context);
    } catch (error) {
      return loopxFallback(error);
    }
  }
  return afterResolve(context, await nextResolve(specifier, context));
}

export async function load(url, context, nextLoad) {
  if (url !== entryURL) return nextLoad(url, context);
  return asEsm(url, await nextLoad(url, entryContext(url, context)));
}

// The transpile cache of 4. (the header says how it works).
// Builtins come from process.getBuiltinModule (Node >= 22.3): an `import`
// of one builds its ESM wrapper, ~0.5 ms a script start. The code below
// runs in-thread only; on Node's hooks thread, where an older Node may lack
// getBuiltinModule, these stay unset and unused.
const fs = process.getBuiltinModule?.("node:fs");
const { dirname, join } = process.getBuiltinModule?.("node:path") ?? {};
const { fileURLToPath } = process.getBuiltinModule?.("node:url") ?? {};

const FORMAT = "loopx-ts-1";
const DAY_MS = 24 * 60 * 60 * 1000;
const MAX_AGE_MS = 30 * DAY_MS;
const TRAILER = "\n//loopx-ts-cache:";
const MAX_ENTRY = 64 * 1024 * 1024;

let tsxLoader; // file: URL of tsx's loader, when the binary named one
let esbuild; // { transformSync, version } | null, once looked up
let cacheRoot; // string | null, once computed
let cacheTrusted; // boolean, once checked

// Which tsx is there (from ?tsx=).
function configure({ tsx }) {
  tsxLoader = tsx || undefined;
}

/**
 * The JavaScript text for the TypeScript/JSX file at `url`, from the cache
 * or transpiled now; null when neither transformer applies (Node then
 * loads it itself). Throws the transformer's error for a broken source.
 */
function transpiled(url, filename) {
  const source = fs.readFileSync(filename, "utf8");
  const ext = /\.[^./]*$/.exec(filename)?.[0] ?? "";
  const strips = STRIPPABLE.has(ext) && typeof nodeModule.stripTypeScriptTypes === "function";
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

// Whether esbuild was found beside the tsx that configure() named.
function hasEsbuild() {
  return Boolean(tsxLoader && findEsbuild());
}

const STRIPPABLE = new Set([".ts", ".mts", ".cts"]);

/**
 * A 128-bit hash of `text`, as 32 hex digits: two 64-bit lanes, each a
 * pair of 32-bit multiply-xorshift hashes over its UTF-16 code units
 * (cyrb53's mixing), each lane seeded differently.
 */
function hash(text) {
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
function ownDirectory(dir, uid = process.getuid?.()) {
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

// nodeModule.stripTypeScriptTypes, without its ExperimentalWarning (a script's
// stderr is its own); null when the source needs more than stripping.
function strip(source) {
  const emitWarning = process.emitWarning;
  process.emitWarning = function (warning, ...rest) {
    const type = typeof rest[0] === "string" ? rest[0] : rest[0]?.type;
    if (type === "ExperimentalWarning") return;
    return emitWarning.call(process, warning, ...rest);
  };
  try {
    return nodeModule.stripTypeScriptTypes(source, { mode: "strip" });
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
function importsAllUsed(code) {
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
    transformSync: (...args) => nodeModule.createRequire(join(dir, "package.json"))(dir).transformSync(...args),
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

// The preload's work, last in this file: hooks run from the moment they are
// registered, and a hook that ran while the module body was still at an
// `await` above the constants it uses would find them uninitialized.
const module = ON_HOOKS_THREAD ? undefined : (nodeModule ?? (await import("node:module")));
const hooksURL = new URL("./hooks.mjs", import.meta.url);

if (ON_HOOKS_THREAD) {
  // Loaded by hooks.mjs on Node's hooks thread: only the hooks above.
} else if (typeof module.registerHooks === "function") {
  let served = false;
  if (TSX || /\.(?:[cm]?ts|tsx|jsx)$/.test(process.argv[1] ?? "")) {
    configure({ tsx: TSX });
    // A tsx laid out otherwise (no esbuild found beside its loader): tsx
    // itself, loaded after the loopx hooks as on the hooks thread.
    served = !TSX || hasEsbuild();
    if (served) useTypeScript({ tsx: TSX });
  }
  module.registerHooks({ resolve: resolveSync, load: loadSync });
  if (TSX && !served) await import(TSX);
} else {
  // Node 20.6-20.15: index.js finds no process.getBuiltinModule and takes
  // node:fs from here (index.js says why it imports none).
  if (!process.getBuiltinModule) globalThis[Symbol.for("loopx.node:fs")] = await import("node:fs");
  if (!TSX) {
    module.register(hooksURL);
  } else {
    // Node's hooks thread (module.register, Node < 22.15). Once the loopx
    // hooks are registered, every module this thread imports is resolved and
    // loaded by a round trip to that thread: importing tsx's loader then would
    // cost ~45 round trips (~25 ms per script on Node 20, measured). So tsx's
    // modules are imported first, natively: its CommonJS loader (which
    // installs tsx's require() hooks as it loads) and its API, whose
    // register() is what tsx's loader calls on the main thread. With those in
    // hand, the loopx hooks are registered, then tsx's, and nothing more loads
    // through the hooks before the script. hooks.mjs does the same for tsx's
    // graph on the hooks thread.
    const { isMainThread } = await import("node:worker_threads");
    let tsxRegister;
    try {
      await import(new URL("cjs/index.cjs", TSX).href);
      ({ register: tsxRegister } = await import(new URL("esm/api/index.mjs", TSX).href));
    } catch {
      // Another tsx layout: its loader, below, loads what it needs.
    }
    hooksURL.searchParams.set("tsx", TSX);
    module.register(hooksURL);
    // tsx's loader registers its ESM hooks from the main thread only (on
    // Node < 22.15); in a worker, it decides for itself.
    if (typeof tsxRegister === "function" && isMainThread) tsxRegister();
    else await import(TSX);
  }
}
