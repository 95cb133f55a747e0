// Preloaded by the loopx binary for every JS/TS script it runs on Node:
//   node --import file://<pkg>/loader/register.mjs[?tsx=<tsx loader URL>]
//        [--import <tsx loader>] <script>
// with this file before tsx's loader (see hooks.mjs for what the hooks do and
// why the order matters; SPEC §3.3, §6.3).
import * as module from "node:module";

const hooksURL = new URL("./hooks.mjs", import.meta.url);

if (typeof module.registerHooks === "function") {
  // In-thread hooks (Node >= 22.15): no hooks thread to start.
  const { resolveSync, loadSync } = await import(hooksURL);
  module.registerHooks({ resolve: resolveSync, load: loadSync });
} else {
  // With tsx after us, the binary names its loader (?tsx=). Once our hooks
  // are registered, every module either thread loads goes through them;
  // tsx's own modules need not, so they are loaded first: here on the main
  // thread (what tsx's loader imports: its CommonJS loader and the ESM
  // chunks), and by hooks.mjs on the hooks thread. tsx's loader then finds
  // its graph cached. Measured on Node 20: ~20 ms less per TS script. Only
  // a head start, so a tsx with another layout just starts slower.
  const tsx = new URL(import.meta.url).searchParams.get("tsx");
  if (tsx) {
    try {
      await import(new URL("cjs/index.cjs", tsx).href);
      await import(new URL("esm/api/index.mjs", tsx).href);
    } catch {
      // Another tsx layout: its loader (imported next) loads what it needs.
    }
    hooksURL.searchParams.set("tsx", tsx);
  }
  module.register(hooksURL);
}
