// Module hooks for loopx scripts run by Node (SPEC §3.3, §6.3). Installed by
// register.mjs: in-thread with module.registerHooks (Node >= 22.15) using
// resolveSync/loadSync, else on Node's hooks thread with module.register
// (Node >= 20.6) using resolve/load, the names Node looks for there.
//
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
//
// With tsx on Node's hooks thread (Node < 22.15), these hooks are
// registered *before* tsx's (register.mjs does both): hooks registered
// later run first, so tsx then transforms the source these hooks return.
//
// On Node >= 22.15 (in-thread hooks) tsx itself is never loaded; when
// register.mjs hands these hooks ts.mjs (useTypeScript):
// 4. TypeScript and JSX files (.ts .mts .cts .tsx .jsx, the entry and every
//    file it imports or requires) are served transpiled by ts.mjs, from its
//    cache, under their own URL: import.meta.url, relative imports and
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

// 3. Speed, on Node's hooks thread (module.register, Node < 22.15): once
//    these hooks are in the chain, every module the thread loads goes
//    through them, the require() calls inside CommonJS modules included.
//    tsx registers after us and loads its graph (esbuild included) on that
//    thread. A hooks module's own imports load before it joins the chain,
//    so when register.mjs passes tsx's loader URL (?tsx=), tsx's graph
//    (its public `tsx/esm/api` entry: the modules tsx's hooks load anyway)
//    is imported here first and is cached when tsx registers; register.mjs
//    does the same on the main thread. If the file is missing nothing
//    changes but the speed.
const TSX_LOADER = new URL(import.meta.url).searchParams.get("tsx");
if (TSX_LOADER) {
  try {
    await import(new URL("esm/api/index.mjs", TSX_LOADER).href);
  } catch {
    // Another tsx layout: scripts run all the same, only slower.
  }
}

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

let ts; // ts.mjs, once register.mjs hands it over
let tsxRules = false;

/** In-thread only (register.mjs): serve TypeScript through ts.mjs. */
export function useTypeScript(tsModule, { tsx }) {
  ts = tsModule;
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
  const code = ts.transpiled(url, builtin("node:url").fileURLToPath(url));
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

export function resolveSync(specifier, context, nextResolve) {
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

export function loadSync(url, context, nextLoad) {
  if (ts && TS_URL.test(url)) {
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
