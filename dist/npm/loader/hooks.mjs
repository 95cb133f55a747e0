// The loopx module hooks on Node's hooks thread (module.register, Node <
// 22.15): register.mjs registers this file there, and the hooks are its own
// (register.mjs?hooks-thread: loaded as a hooks module, it registers
// nothing). On Node >= 22.15 nothing loads this file.
//
// 3. Speed: once the hooks are in the chain, every module the thread loads
//    goes through them, the require() calls inside CommonJS modules
//    included. tsx registers after the loopx hooks and loads its graph
//    (esbuild included) on that thread. A hooks module's own imports load
//    before it joins the chain, so when register.mjs passes tsx's loader
//    URL (?tsx=), tsx's graph (its public `tsx/esm/api` entry: the modules
//    tsx's hooks load anyway) is imported here first and is cached when tsx
//    registers; register.mjs does the same on the main thread. If the file
//    is missing nothing changes but the speed.
export { resolve, load } from "./register.mjs?hooks-thread";

const TSX_LOADER = new URL(import.meta.url).searchParams.get("tsx");
if (TSX_LOADER) {
  try {
    await import(new URL("esm/api/index.mjs", TSX_LOADER).href);
  } catch {
    // Another tsx layout: scripts run all the same, only slower.
  }
}
