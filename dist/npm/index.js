// The package entry of `loopx` (SPEC §3.3, §9.4). Scripts reach it through
// `import ... from "loopx"`, so it must stay as cheap to load as helpers.js.
export { output, input } from "./helpers.js";

// run() and runPromise() (§9.1, §9.2) come with the programmatic API, in a
// later change. They will spawn the binary; keep their heavier imports out
// of this file's static import graph (load them lazily inside run()).
