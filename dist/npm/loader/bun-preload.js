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
//    also provides `require()` inside ES modules, which Node does not; a
//    function declaration appended after it (hoisted to the whole module)
//    makes `require(...)` fail as on Node. A script that declares its own
//    `require` (`const require = createRequire(import.meta.url)`, valid
//    ESM) keeps it: the declaration would clash, so none is appended.
import { plugin } from "bun";
import { existsSync } from "node:fs";
import { dirname, extname, join } from "node:path";
import { fileURLToPath } from "node:url";

const INDEX_PATH = fileURLToPath(new URL("../index.js", import.meta.url));
const ENTRY = Bun.main;
const LOADERS = { ".js": "js", ".jsx": "jsx", ".ts": "ts", ".tsx": "tsx" };
// A binding named `require` the script makes itself (see 2.).
const OWN_REQUIRE = /\b(?:const|let|var|function|class)\s+require\b|\bas\s+require\b/;
// Node's own words for `require` in an ES module.
const REQUIRE_FAILS =
  ' function require() { throw new ReferenceError("require is not defined in ES module scope, you can use import instead"); }';

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
      build.onLoad({ filter: exact }, async ({ path }) => {
        const source = await Bun.file(path).text();
        const noRequire = OWN_REQUIRE.test(source) ? "" : REQUIRE_FAILS;
        return { contents: `${source}\nexport {};${noRequire}\n`, loader };
      });
    }
  },
});
