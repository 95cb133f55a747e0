// Preloaded by the loopx binary for every JS/TS script it runs on Node:
//   node --import file://<pkg>/loader/register.mjs[?tsx=<tsx loader URL>] <script>
// It registers the loopx hooks (hooks.mjs says what they do; SPEC §3.3,
// §6.3) and then, when the binary names one (?tsx=), tsx's. The order
// matters: hooks registered later run first, so tsx transforms the source
// the loopx hooks return. Loading tsx from here, rather than from a second
// `--import <tsx>`, is only about speed; what runs is the same.
import * as module from "node:module";
import { isMainThread } from "node:worker_threads";

const hooksURL = new URL("./hooks.mjs", import.meta.url);
const tsx = new URL(import.meta.url).searchParams.get("tsx");

if (typeof module.registerHooks === "function") {
  // In-thread hooks (Node >= 22.15): nothing crosses threads, so tsx loads
  // as `--import <tsx>` would load it.
  const { resolveSync, loadSync } = await import(hooksURL);
  module.registerHooks({ resolve: resolveSync, load: loadSync });
  if (tsx) await import(tsx);
} else if (!tsx) {
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
