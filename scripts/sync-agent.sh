#!/usr/bin/env bash
# Copies the agent adapter, dist/agent/agent.sh, into every ready-made
# workflow as lib/agent.sh: each workflow stays self-contained (one
# `loopx install -w <name>` brings all it needs), and the adapter is edited
# in one place. With --check, changes nothing and fails when a copy differs
# (scripts/build-release.sh and tests/it/agents.rs check this).
set -euo pipefail
cd "$(dirname "$0")/.."

check=0
case ${1:-} in
  --check) check=1 ;;
  '') ;;
  *)
    echo "usage: scripts/sync-agent.sh [--check]" >&2
    exit 2
    ;;
esac

src=dist/agent/agent.sh
stale=()
for dir in dist/workflows/*/; do
  [ -f "$dir/package.json" ] || continue
  copy=${dir}lib/agent.sh
  if ! cmp -s "$src" "$copy"; then
    if [ "$check" = 1 ]; then
      stale+=("$copy")
    else
      mkdir -p "${dir}lib"
      cp "$src" "$copy"
      echo "updated $copy"
    fi
  fi
done
if [ ${#stale[@]} -gt 0 ]; then
  echo "scripts/sync-agent.sh: not a copy of $src: ${stale[*]} (run scripts/sync-agent.sh)" >&2
  exit 1
fi
