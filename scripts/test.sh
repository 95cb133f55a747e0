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
# typescript (a devDependency, for the declarations' typecheck test) came
# after tsx: an older node_modules without it is brought up to date.
if [ ! -d dist/npm/node_modules ] || [ ! -d dist/npm/node_modules/typescript ]; then
  (cd dist/npm && npm ci --ignore-scripts --no-audit --no-fund)
fi
(cd dist/npm && npm test)

# ---- Ctrl-C stress (issue 18) ----------------------------------------------
# A small count of scripts/stress.sh (runs ended by SIGINT/SIGTERM at random
# moments: right exit code, no process left alive). By hand: -n 100.
echo "== scripts/stress.sh (small count)"
scripts/stress.sh -n "${LOOPX_STRESS_RUNS:-12}" -j 4
