#!/usr/bin/env bash
# Runs every test of the project: formatting and lints, the Rust unit and
# integration tests (which spawn the built binary), and the npm package's
# tests when its dependencies are installed.
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== cargo fmt --check"
cargo fmt --all -- --check
echo "== cargo clippy"
cargo clippy --all-targets --locked -- -D warnings
echo "== cargo test"
cargo test --locked --all-targets

echo "== npm package tests (dist/npm)"
if [ ! -d dist/npm/node_modules ]; then
  (cd dist/npm && npm ci --ignore-scripts --no-audit --no-fund)
fi
(cd dist/npm && npm test)
