// Preloaded by the loopx binary for every JS/TS script it runs on Node:
//   node --import file://<pkg>/loader/register.mjs[?tsx=<tsx loader URL>] <script>
// It registers the loopx hooks (hooks.mjs says what they do; SPEC §3.3,
// §6.3).
//
// Node >= 22.15 (module.registerHooks, in-thread): the hooks alone. For a
// TypeScript/JSX entry, or when the binary names a tsx (?tsx=, which it
// does for .ts/.tsx/.jsx scripts when there is one), they also serve
// TypeScript and JSX through ts.mjs (its cache, Node's type stripping,
// tsx's esbuild) and keep tsx's resolution rules; tsx itself is not loaded.
// Nothing else is imported here: every module costs each script start.
//
// Older Node (module.register, a hooks thread): the loopx hooks, then,
// when the binary names one, tsx's. The order matters: hooks registered
// later run first, so tsx transforms the source the loopx hooks return.
// Loading tsx from here, rather than from a second `--import <tsx>`, is
// only about speed; what runs is the same.
// node:module by process.getBuiltinModule where Node has it (>= 20.16,
// 22.3): an `import` of a builtin builds its ESM wrapper, ~0.5 ms.
const module = process.getBuiltinModule?.("node:module") ?? (await import("node:module"));
const hooksURL = new URL("./hooks.mjs", import.meta.url);
const tsx = new URL(import.meta.url).searchParams.get("tsx");

if (typeof module.registerHooks === "function") {
  const hooks = await import(hooksURL);
  let ts;
  if (tsx || /\.(?:[cm]?ts|tsx|jsx)$/.test(process.argv[1] ?? "")) {
    ts = await import(new URL("./ts.mjs", import.meta.url));
    ts.configure({ tsx });
    // A tsx laid out otherwise (no esbuild found beside its loader): tsx
    // itself, loaded after the loopx hooks as on the hooks thread.
    if (tsx && !ts.hasEsbuild()) ts = undefined;
    if (ts) hooks.useTypeScript(ts, { tsx });
  }
  module.registerHooks({ resolve: hooks.resolveSync, load: hooks.loadSync });
  if (tsx && !ts) await import(tsx);
} else {
  // Node 20.6-20.15: helpers.js finds no process.getBuiltinModule and takes
  // node:fs from here (helpers.js says why it imports none).
  if (!process.getBuiltinModule) globalThis[Symbol.for("loopx.node:fs")] = await import("node:fs");
  if (!tsx) {
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
      await import(new URL("cjs/index.cjs", tsx).href);
      ({ register: tsxRegister } = await import(new URL("esm/api/index.mjs", tsx).href));
    } catch {
      // Another tsx layout: its loader, below, loads what it needs.
    }
    hooksURL.searchParams.set("tsx", tsx);
    module.register(hooksURL);
    // tsx's loader registers its ESM hooks from the main thread only (on
    // Node < 22.15); in a worker, it decides for itself.
    if (typeof tsxRegister === "function" && isMainThread) tsxRegister();
    else await import(tsx);
  }
}
