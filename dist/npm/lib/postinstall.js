// npm's postinstall: fetch the native binary now, so the first `loopx` run
// does not wait for it. Only an optimisation (many installs skip install
// scripts; the shim downloads on first run anyway), so it never fails the
// install: any problem is one line on stderr and exit code 0.
import { findBinary } from "./native.js";

try {
  await findBinary();
} catch (error) {
  process.stderr.write(`loopx: the native binary was not fetched now (${error.message}); the first run will try again\n`);
}
process.exit(0);
