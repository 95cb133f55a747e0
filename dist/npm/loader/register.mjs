// Preloaded by the loopx binary for every JS/TS script it runs on Node:
//   node --import file://<pkg>/loader/register.mjs [--import <tsx loader>] <script>
// with this file before tsx's loader (see hooks.mjs for what the hooks do and
// why the order matters; SPEC §3.3, §6.3).
import * as module from "node:module";

const hooksURL = new URL("./hooks.mjs", import.meta.url);

if (typeof module.registerHooks === "function") {
  // In-thread hooks (Node >= 22.15): no hooks thread to start.
  const { resolveSync, loadSync } = await import(hooksURL);
  module.registerHooks({ resolve: resolveSync, load: loadSync });
} else {
  module.register(hooksURL);
}
