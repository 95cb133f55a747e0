// bin/loopx.js against a fake binary (LOOPX_BINARY_PATH): argv, stdio, exit
// codes, signal forwarding and re-raising, and the environment contract; the
// spawn path (Node < 22.15, Bun) and the execve path (Node >= 22.15).
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { existsSync, readFileSync, realpathSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { BUN, PKG, TSX_DIR, packageCopy, run, tempDir, waitFor, writeTree } from "./util.js";

const SHIM = join(PKG, "bin", "loopx.js");

// Records its argv (NUL-separated), environment and the signals it gets in
// $FAKE_OUT; echoes stdin to stdout when FAKE_ECHO is set; waits for
// $FAKE_SIGNALS signals; then kills itself with $FAKE_KILL or exits $FAKE_EXIT.
const FAKE_BINARY = `#!/bin/bash
out=\${FAKE_OUT:?}
trap 'echo SIGINT >> "$out/signals"' INT
trap 'echo SIGTERM >> "$out/signals"' TERM
trap 'echo SIGHUP >> "$out/signals"' HUP
printf '%s\\0' "$@" > "$out/args"
echo "$$ $PPID" > "$out/pids"
env > "$out/env"
: > "$out/signals"
: > "$out/ready"
if [ -n "\${FAKE_ECHO:-}" ]; then cat; echo "to stderr" >&2; fi
while [ "$(wc -l < "$out/signals")" -lt "\${FAKE_SIGNALS:-0}" ]; do sleep 0.02; done
if [ -n "\${FAKE_KILL:-}" ]; then trap - INT TERM HUP; kill -s "$FAKE_KILL" $$; sleep 5; fi
exit "\${FAKE_EXIT:-0}"
`;

// Whether `node` replaces the shim with the binary (process.execve, Node
// >= 22.15).
function hasExecve(node) {
  return execFileSync(node, ["-p", "typeof process.execve"], { encoding: "utf8" }).trim() === "function";
}

// A Node that has process.execve: this one, or LOOPX_TEST_NODE22 (which
// scripts/test.sh installs).
const EXECVE_NODE = [process.execPath, process.env.LOOPX_TEST_NODE22].find((n) => n && existsSync(n) && hasExecve(n));

// Preloads for the shim (node --import): one that takes process.execve
// away, forcing the spawn path; one that also sends this process a SIGTERM
// the instant spawn() returns, as when the shim is preempted right there
// and the signal lands before any code after spawn() runs.
const SPAWN_PATH = `delete process.execve;\n`;
const TERM_AFTER_SPAWN = `${SPAWN_PATH}import cp from "node:child_process";
import { writeFileSync } from "node:fs";
import { syncBuiltinESMExports } from "node:module";
const spawn = cp.spawn;
cp.spawn = function (...args) {
  const child = spawn.apply(this, args);
  writeFileSync(process.env.SPAWNED_PID_FILE, String(child.pid));
  process.kill(process.pid, "SIGTERM");
  return child;
};
syncBuiltinESMExports();
`;

// Whether `pid` is a live process (not a zombie).
function alive(pid) {
  try {
    return !/^\S+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, "utf8"));
  } catch {
    return false;
  }
}

function preload(t, source) {
  const dir = tempDir(t);
  writeTree(dir, { "preload.mjs": source });
  return join(dir, "preload.mjs");
}

// The pid in $out/pids (the fake binary's own, then its parent's).
function pidsOf(out) {
  return readFileSync(join(out, "pids"), "utf8").trim().split(" ").map(Number);
}

function fake(t) {
  const dir = tempDir(t);
  writeTree(dir, { "bin/fake-loopx": [FAKE_BINARY, 0o755] });
  const out = join(dir, "out");
  writeTree(out, { ".keep": "" });
  return { binary: join(dir, "bin/fake-loopx"), out };
}

function runShim(fakeBin, env = {}, options = {}, shim = SHIM, runtime = process.execPath) {
  return run(runtime, [shim, ...(options.args ?? [])], {
    ...options,
    env: { LOOPX_BINARY_PATH: fakeBin.binary, FAKE_OUT: fakeBin.out, ...env },
  });
}

function envOf(out) {
  const env = {};
  for (const line of readFileSync(join(out, "env"), "utf8").split("\n")) {
    const eq = line.indexOf("=");
    if (eq > 0) env[line.slice(0, eq)] = line.slice(eq + 1);
  }
  return env;
}

test("argv, stdin, stdout and stderr reach the binary unchanged", async (t) => {
  const f = fake(t);
  const args = ["run", "-n", "2", "a b", "", "--weird=\"q\""];
  const r = await runShim(f, { FAKE_ECHO: "1" }, { args, input: "piped in\n" });
  assert.equal(r.code, 0);
  assert.deepEqual(readFileSync(join(f.out, "args"), "utf8").split("\0").slice(0, -1), args);
  assert.equal(r.stdout, "piped in\n");
  assert.equal(r.stderr, "to stderr\n");
});

test("the binary's exit code is the shim's", async (t) => {
  const f = fake(t);
  for (const code of [0, 1, 3, 130]) {
    const r = await runShim(f, { FAKE_EXIT: String(code) });
    assert.equal(r.code, code, r.stderr);
    assert.equal(r.signal, null);
  }
});

test("SIGINT, SIGTERM and SIGHUP are forwarded, each time, and the shim waits", async (t) => {
  const f = fake(t);
  const signalsSeen = () => readFileSync(join(f.out, "signals"), "utf8").split("\n").filter(Boolean);
  const r = await runShim(f, { FAKE_SIGNALS: "4", FAKE_EXIT: "42" }, {
    onSpawn: async (child) => {
      await waitFor(() => existsSync(join(f.out, "ready")));
      for (const [i, signal] of ["SIGINT", "SIGTERM", "SIGHUP", "SIGINT"].entries()) {
        child.kill(signal);
        await waitFor(() => signalsSeen().length === i + 1);
      }
    },
  });
  assert.deepEqual(signalsSeen(), ["SIGINT", "SIGTERM", "SIGHUP", "SIGINT"]);
  assert.equal(r.code, 42, r.stderr);
  assert.equal(r.signal, null);
});

test("a binary that dies of a signal makes the shim die of the same signal", async (t) => {
  const f = fake(t);
  for (const signal of ["SIGTERM", "SIGHUP", "SIGINT", "SIGKILL"]) {
    const r = await runShim(f, { FAKE_KILL: signal.slice(3) });
    assert.equal(r.signal, signal, `${signal}: ${r.stderr}`);
    assert.equal(r.code, null);
  }
});

test("a signal the shim cannot die of becomes exit code 128+n", async (t) => {
  // Node ignores SIGPIPE, so re-raising it does nothing. The spawn path
  // only: through execve the binary would inherit Node's ignored SIGPIPE.
  const f = fake(t);
  const r = await runShim(f, { FAKE_KILL: "PIPE", NODE_OPTIONS: `--import=${preload(t, SPAWN_PATH)}` });
  assert.equal(r.signal, null);
  assert.equal(r.code, 141);
});

test("environment contract: LOOPX_PACKAGE_DIR, LOOPX_TSX, LOOPX_JS_RUNTIME", async (t) => {
  const f = fake(t);
  let r = await runShim(f, { LOOPX_JS_RUNTIME: "", LOOPX_TSX: "", LOOPX_PACKAGE_DIR: "/elsewhere" });
  assert.equal(r.code, 0, r.stderr);
  let env = envOf(f.out);
  assert.equal(env.LOOPX_PACKAGE_DIR, PKG);
  assert.equal(env.LOOPX_TSX, TSX_DIR);
  assert.ok(existsSync(join(env.LOOPX_TSX, "package.json")));
  assert.equal(env.LOOPX_JS_RUNTIME, "", "an unset runtime stays unset under Node");
  assert.equal(env.FAKE_OUT, f.out, "the rest of the environment is inherited");

  r = await runShim(f, { LOOPX_JS_RUNTIME: "node" });
  assert.equal(r.code, 0, r.stderr);
  assert.equal(envOf(f.out).LOOPX_JS_RUNTIME, "node", "a user's choice is left alone under Node");
});

test("LOOPX_TSX is left as the user set it when tsx cannot be resolved", async (t) => {
  const f = fake(t);
  const pkg = packageCopy(t, { nodeModules: false });
  const r = await runShim(f, { LOOPX_TSX: "/user/tsx" }, {}, join(pkg, "bin", "loopx.js"));
  assert.equal(r.code, 0, r.stderr);
  const env = envOf(f.out);
  assert.equal(env.LOOPX_TSX, "/user/tsx");
  assert.equal(env.LOOPX_PACKAGE_DIR, pkg);
});

test("under Bun the shim sets LOOPX_JS_RUNTIME=bun and forwards signals", { skip: !BUN && "bun not found" }, async (t) => {
  const f = fake(t);
  let r = await runShim(f, { LOOPX_JS_RUNTIME: "node", FAKE_EXIT: "5" }, {}, SHIM, BUN);
  assert.equal(r.code, 5, r.stderr);
  const env = envOf(f.out);
  assert.equal(env.LOOPX_JS_RUNTIME, "bun");
  assert.equal(realpathSync(env.LOOPX_BUN), realpathSync(BUN), "the Bun running the shim");
  assert.equal(env.LOOPX_PACKAGE_DIR, PKG);
  assert.equal(env.LOOPX_TSX, TSX_DIR);

  const g = fake(t);
  r = await runShim(g, { FAKE_SIGNALS: "1", FAKE_EXIT: "9" }, {
    onSpawn: async (child) => {
      await waitFor(() => existsSync(join(g.out, "ready")));
      child.kill("SIGTERM");
    },
  }, SHIM, BUN);
  assert.equal(readFileSync(join(g.out, "signals"), "utf8"), "SIGTERM\n");
  assert.equal(r.code, 9, r.stderr);

  r = await runShim(f, { FAKE_KILL: "TERM" }, {}, SHIM, BUN);
  assert.equal(r.signal, "SIGTERM", r.stderr);
});

test("spawn path: a signal landing the instant the binary is spawned still reaches it", {
  skip: process.platform !== "linux" && "reads /proc",
}, async (t) => {
  // The handlers are in place before spawn(): the shim must not die of the
  // default action and leave the binary running with no one to stop it.
  // The signal may reach the fake binary before its traps are set (it then
  // dies of it, and the shim re-raises it); either way it must not outlive
  // the shim.
  const dir = tempDir(t);
  // Exits 7 on SIGTERM, else runs until killed; its output goes nowhere,
  // so the shim's pipes close when the shim ends, whatever the fake does.
  writeTree(dir, {
    "bin/fake-loopx": ["#!/bin/bash\nexec >/dev/null 2>&1\ntrap 'exit 7' TERM\nwhile :; do sleep 0.05; done\n", 0o755],
  });
  const pidFile = join(dir, "spawned");
  let binary = 0;
  t.after(() => {
    // Only when the test failed: the fake outlived the shim.
    if (binary && alive(binary)) process.kill(binary, "SIGKILL");
  });
  let r;
  try {
    r = await run(process.execPath, [SHIM], {
      env: {
        LOOPX_BINARY_PATH: join(dir, "bin/fake-loopx"),
        SPAWNED_PID_FILE: pidFile,
        NODE_OPTIONS: `--import=${preload(t, TERM_AFTER_SPAWN)}`,
      },
      timeout: 10000,
    });
  } finally {
    binary = Number(readFileSync(pidFile, "utf8"));
  }
  try {
    await waitFor(() => !alive(binary), 5000);
  } catch {
    assert.fail(`the binary outlived the shim (${r.code ?? r.signal}): the SIGTERM was not forwarded`);
  }
  if (r.signal === null) {
    assert.equal(r.code, 7, r.stderr);
  } else {
    assert.equal(r.signal, "SIGTERM", "re-raised from the binary");
  }
});

test("spawn path: LOOPX_SHIM_PID is the shim's pid; a stale one is replaced", async (t) => {
  const f = fake(t);
  let shimPid;
  const r = await runShim(f, { LOOPX_SHIM_PID: "12345", NODE_OPTIONS: `--import=${preload(t, SPAWN_PATH)}` }, {
    onSpawn: (child) => {
      shimPid = child.pid;
    },
  });
  assert.equal(r.code, 0, r.stderr);
  const [, parent] = pidsOf(f.out);
  assert.equal(parent, shimPid, "the binary is the shim's child");
  assert.equal(envOf(f.out).LOOPX_SHIM_PID, String(shimPid));
});

test("execve path: the shim becomes the binary, quietly, with the same environment contract", {
  skip: !EXECVE_NODE && "no Node with process.execve (>= 22.15); set LOOPX_TEST_NODE22",
}, async (t) => {
  const f = fake(t);
  let shimPid;
  const r = await runShim(f, { LOOPX_SHIM_PID: "12345", FAKE_ECHO: "1", FAKE_EXIT: "3" }, {
    args: ["run", "x"],
    input: "in\n",
    onSpawn: (child) => {
      shimPid = child.pid;
    },
  }, SHIM, EXECVE_NODE);
  assert.equal(r.code, 3);
  // Node's ExperimentalWarning for process.execve is not shown.
  assert.equal(r.stderr, "to stderr\n");
  assert.equal(r.stdout, "in\n");
  const [pid] = pidsOf(f.out);
  assert.equal(pid, shimPid, "the binary runs in the shim's process");
  const env = envOf(f.out);
  assert.equal(env.LOOPX_SHIM_PID, undefined, "no shim is left to watch");
  assert.equal(env.LOOPX_PACKAGE_DIR, PKG);
  assert.equal(env.LOOPX_TSX, TSX_DIR);
  assert.deepEqual(readFileSync(join(f.out, "args"), "utf8").split("\0").slice(0, -1), ["run", "x"]);
});

test("execve path: a binary that is not executable is an error, not an abort", {
  skip: !EXECVE_NODE && "no Node with process.execve (>= 22.15); set LOOPX_TEST_NODE22",
}, async (t) => {
  const f = fake(t);
  const { chmodSync } = await import("node:fs");
  chmodSync(f.binary, 0o644);
  const r = await runShim(f, {}, {}, SHIM, EXECVE_NODE);
  assert.equal(r.code, 1);
  assert.match(r.stderr, /LOOPX_BINARY_PATH is set to .*, which is not an executable file/);
});
