#!/usr/bin/env bash
# Benchmarks loopx against the physical floor of this machine (scripts/bench.py
# explains the method). Builds the static release binary, installs the npm
# package's dependencies when missing, and writes the table to
# target/bench/bench.md.
#
#   scripts/bench.sh            full run (a few minutes)
#   scripts/bench.sh --quick    fewer rounds and iterations (smoke test)
set -euo pipefail
cd "$(dirname "$0")/.."

target=x86_64-unknown-linux-musl
rustup target list --installed 2>/dev/null | grep -qx "$target" || rustup target add "$target"
cargo build --release --locked --target "$target"
bin="target/$target/release/loopx"

if command -v node >/dev/null 2>&1 && [ ! -d dist/npm/node_modules ]; then
  (cd dist/npm && npm ci --ignore-scripts --no-audit --no-fund)
fi

mkdir -p target/bench
python3 scripts/bench.py --loopx "$bin" --size-binary "$bin" --npm-dir dist/npm \
  --out target/bench/bench.md "$@"
