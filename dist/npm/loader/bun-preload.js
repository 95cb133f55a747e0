// Preloaded by the loopx binary for every JS/TS script run on Bun:
//   bun --no-install --preload <pkg>/loader/bun-preload.js \
//       --jsx-runtime=classic --jsx-factory=React.createElement \
//       --jsx-fragment=React.Fragment <script>
//
// 1. `import ... from "loopx"` (SPEC §3.3): Bun's runtime plugins are not
//    asked about bare package names, so this cannot be a resolve hook as on
//    Node. Instead, when no node_modules/loopx exists in the entry script's
//    directory or above it (a workflow's or project's own install, which
//    then wins as usual), a virtual `loopx` module is registered that
//    re-exports this package's index.js. The lookup is done by hand:
//    Bun.resolveSync would ask the npm registry when Bun is in auto-install
//    mode. (The binary passes --no-install anyway: loopx never installs.)
// 2. The entry script runs as ESM (§6.3): a file that only uses
//    `module.exports` / `exports` would be CommonJS to Bun, so `export {}`
//    is appended to the entry's source (at the end, so line numbers stay).
//    `module` and `exports` are then undefined and fail when used. Bun
//    provides `require()` in ESM too, so that one keeps working here.
import { plugin } from "bun";
import { existsSync } from "node:fs";
import { dirname, extname, join } from "node:path";
import { fileURLToPath } from "node:url";

const INDEX_PATH = fileURLToPath(new URL("../index.js", import.meta.url));
const ENTRY = Bun.main;
const LOADERS = { ".js": "js", ".jsx": "jsx", ".ts": "ts", ".tsx": "tsx" };

function hasOwnLoopx() {
  for (let dir = dirname(ENTRY); ; dir = dirname(dir)) {
    if (existsSync(join(dir, "node_modules", "loopx"))) return true;
    if (dir === dirname(dir)) return false;
  }
}

plugin({
  name: "loopx",
  setup(build) {
    if (!hasOwnLoopx()) {
      build.module("loopx", () => ({
        contents: `export * from ${JSON.stringify(INDEX_PATH)};`,
        loader: "js",
      }));
    }
    const loader = LOADERS[extname(ENTRY)];
    if (loader) {
      const exact = new RegExp(`^${ENTRY.replace(/[.*+?^${}()|[\]\\/]/g, "\\$&")}$`);
      build.onLoad({ filter: exact }, async ({ path }) => ({
        contents: `${await Bun.file(path).text()}\nexport {};\n`,
        loader,
      }));
    }
  },
});
