#!/bin/bash
# issue-runner:status: the issues in flight, one line each on stderr:
#
#   #3  running   run 0123456789abcdef (loopx pid 4242), restarts 0, started 12:00:00 UTC
#   #8  gone      run fedcba9876543210, restarts 1: the next run restarts it
#
# A run that a serve run started (serve.sh) has its output in
# runs/serve-<id>/worker-<k>.log, named at the end of its line.
#
# `loopx run issue-runner:status` changes nothing (it takes no issue and
# calls no forge); it stops at once.
set -uo pipefail
# shellcheck source-path=SCRIPTDIR source=lib/common.sh
. "$(dirname "$0")/lib/common.sh"

n=0
for number in $(claims_in_flight); do
  claimed=$claims_dir/$number
  n=$((n + 1))
  pid=$(claim_get pid)
  restarts=$(claim_get restarts)
  label=$(claim_get label)
  started=$(date -u -r "$claimed" '+%H:%M:%S UTC' 2>/dev/null || echo '?')
  gate=""
  branch=$(claim_get ci_branch)
  [ -n "$branch" ] && gate=", CI gate on $branch: fix rounds $(claim_get ci_fixes) of $max_ci_fixes"
  if holder_alive "$pid"; then
    line="#$number  running   run $(claim_get run) (loopx pid $pid), restarts ${restarts:-0}, since $started$gate"
  elif [ -n "$label" ]; then
    line="#$number  gone      run $(claim_get run), finished: the next run moves it to $label"
  elif [ "${restarts:-0}" -lt "$max_restarts" ]; then
    line="#$number  gone      run $(claim_get run), restarts ${restarts:-0}$gate: the next run restarts it"
  else
    line="#$number  gone      run $(claim_get run), restarts ${restarts:-0}: the next run hands it to $needs_human_label"
  fi
  # A worker of serve: where its output is (its run log names its run).
  run=$(claim_get run)
  worker=""
  [ -n "$run" ] && worker=$(grep -l -F "\"run_id\":\"$run\"" "$runs_dir"/serve-*/worker-*.jsonl 2>/dev/null | head -n 1)
  [ -n "$worker" ] && line="$line; its output: ${worker%.jsonl}.log"
  printf '%s\n' "$line" >&2
done
say "$n issue(s) in flight (MAX_CONCURRENT=$max_concurrent)"
output --result "$n in flight" --stop
