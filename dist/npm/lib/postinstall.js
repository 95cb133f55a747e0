// npm's postinstall: fetch the native binary now, so the first `loopx` run
// does not wait for it. Only an optimisation (many installs skip install
// scripts; the shim downloads on first run anyway), so it never fails the
// install: any problem is reported on stderr and the exit code is 0.
import { findBinary } from "./native.js";

try {
  await findBinary();
} catch (error) {
  process.stderr.write(
    `loopx: ${error.message}\nloopx: the binary was not fetched at install time; the first run of loopx will try again\n`,
  );
}
process.exit(0);
