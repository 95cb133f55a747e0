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
// With tsx, these hooks are registered *before* tsx's (register.mjs does
// both): hooks registered later run first, so tsx then transforms the
// source these hooks return.

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

export function resolveSync(specifier, context, nextResolve) {
  if (specifier === "loopx") {
    try {
      return nextResolve(specifier, context);
    } catch (error) {
      return loopxFallback(error);
    }
  }
  return afterResolve(context, nextResolve(specifier, context));
}

export function loadSync(url, context, nextLoad) {
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
