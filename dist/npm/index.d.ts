export type { Output } from "./helpers.js";
export { output, input } from "./helpers.js";
