#!/bin/bash
# issue-runner:serve: several issues at once. It starts worker runs, each
# its own `loopx run issue-runner` (its own run id, clone and claim), in
# the background, up to MAX_CONCURRENT live claims, and starts another as
# each one ends, while there are issues to take:
#
#   serve -> worker 1: loopx run issue-runner   (index -> work -> finish)
#         -> worker 2: loopx run issue-runner
#         -> ...
#   nothing left to take, no worker running:
#         SERVE_ONCE=1 -> stop (exit 0), a summary as the result
#         otherwise    -> a loopx wait of SERVE_POLL, then serve again
#
# A worker that ends with "no issue" or "busy", or fails before it took an
# issue, means: start no more in this round. A worker that fails after it
# took its issue does not stop the service: the issue stays claimed, and
# the next worker restarts it (MAX_RESTARTS) as any run would.
#
# Each worker's output (stderr) goes to runs/serve-<serve run>/worker-<k>.log
# and its run log (--log) to worker-<k>.jsonl, which tells serve what the
# worker did (its run id, the issue it took, how it ended). The workers
# are children of this script, inside the serve run's process group: a
# SIGTERM or SIGINT to the serve loopx reaches this script and every
# worker loopx (they end their agents), and this script waits for them.
set -uo pipefail
# shellcheck source-path=SCRIPTDIR source=lib/common.sh
. "$(dirname "$0")/lib/common.sh"

serve_once=${SERVE_ONCE:-0}
serve_poll=${SERVE_POLL:-5m}
worker_args_text=${WORKER_ARGS:-}

problems=()
case $serve_once in
  0 | 1) ;;
  *) problems+=("SERVE_ONCE must be 0 or 1, not '$serve_once'") ;;
esac
seconds_of "$serve_poll" >/dev/null ||
  problems+=("SERVE_POLL must be a duration (30s, 5m; a bare number is seconds), not '$serve_poll'")
# WORKER_ARGS: options for each worker's `loopx run`, split on blanks.
worker_args=()
read -r -a worker_args <<<"$worker_args_text"
for a in ${worker_args[@]+"${worker_args[@]}"}; do
  case $a in
    --log | --log=* | --resume)
      problems+=("WORKER_ARGS may not hold $a: serve gives each worker its own run log, and a worker is a new run")
      ;;
  esac
done
if [ ${#problems[@]} -gt 0 ]; then
  for problem in "${problems[@]}"; do say "serve: $problem"; done
  exit 1
fi

serve_dir=$runs_dir/serve-$LOOPX_RUN_ID
mkdir -p "$serve_dir" || die "cannot create $serve_dir"

# The workers, by number k (1, 2, ... across the serve run's rounds):
# their loopx's pid, and the numbers of those still running.
w_pid=()
live=""
k=$(find "$serve_dir" -name 'worker-*.log' 2>/dev/null | wc -l | tr -cd 0-9)
k=${k:-0}
started=0
took=0
failed=0
# Set when a worker found nothing to take (or could not look): no more
# workers in this round.
enough=""

live_count() {
  # shellcheck disable=SC2086 # the numbers, one word each
  set -- $live
  echo $#
}

# in_use: the slots taken: this serve's running workers, and the live
# claims of runs that are not ours (cron runs, another serve), counted as
# index.sh counts them.
in_use() {
  local n number pid ours w
  n=$(live_count)
  for number in $(claims_in_flight); do
    claimed=$claims_dir/$number
    pid=$(claim_get pid)
    ours=""
    for w in $live; do [ "${w_pid[w]}" = "$pid" ] && ours=1; done
    [ -z "$ours" ] && holder_alive "$pid" && n=$((n + 1))
  done
  echo "$n"
}

start_worker() {
  local log
  k=$((k + 1))
  log=$serve_dir/worker-$k
  # The worker's loopx is this script's own child (exec), so the SIGTERM
  # this script passes on is its parent's, and it runs in the project
  # root, where `-e` paths and .loopx/ are found.
  (cd "$root" && exec "$LOOPX_BIN" run --log "$log.jsonl" ${worker_args[@]+"${worker_args[@]}"} issue-runner \
    >"$log.log" 2>&1) &
  w_pid[k]=$!
  live="$live $k"
  started=$((started + 1))
  say "serve: worker $k started (loopx pid ${w_pid[k]}); its output: $log.log"
}

# field <worker> <what>: from the worker's run log: its run id (run), what
# its index step chose (pick: an issue number, "busy", "no issue"; empty
# when it failed first), the result it stopped with (stop), the exit code
# it logged (exit).
field() {
  "$LOOPX_BIN" json --lines .event .run_id .target .exit_code .output.result_head .output.stop \
    <"$serve_dir/worker-$1.jsonl" 2>/dev/null |
    awk -F'\t' -v what="$2" '
      $1 == "run_start" && run == "" { run = $2 }
      $1 == "script_end" && $3 == "issue-runner:index" && $4 == "0" { pick = $5 }
      $1 == "script_end" && $6 == "true" { stop = $5 }
      $1 == "run_end" { code = $4 }
      END {
        if (what == "run") print run
        else if (what == "pick") print pick
        else if (what == "stop") print stop
        else print code
      }'
}

# reap <worker>: the worker has ended: its outcome, one line on stderr.
reap() {
  local w=$1 status pick run stop what
  wait "${w_pid[w]}"
  status=$?
  if [ "$status" -eq 127 ]; then
    # Already collected by bash: the exit code the worker logged.
    status=$(field "$w" exit)
    status=${status:-127}
  fi
  # shellcheck disable=SC2086 # the numbers, one word each
  live=$(printf '%s\n' $live | awk -v w="$w" '$1 != w' | paste -sd' ' -)
  run=$(field "$w" run)
  pick=$(field "$w" pick)
  stop=$(field "$w" stop)
  case $pick in
    '' | *[!0-9]*)
      case $pick in
        busy) what="busy: MAX_CONCURRENT issues in flight" ;;
        'no issue') what="no issue to take" ;;
        *) what="took no issue" ;;
      esac
      enough=1
      stop=""
      [ "$status" -ne 0 ] && failed=$((failed + 1))
      ;;
    *)
      took=$((took + 1))
      what="#$pick"
      if [ "$status" -ne 0 ]; then
        failed=$((failed + 1))
        stop="claimed still: the next worker or run picks it up"
      fi
      ;;
  esac
  say "serve: worker $w ended: $what, run ${run:-?}, exit $status${stop:+ ($stop)}"
}

# wait_any: until one of the workers ends (or a signal comes).
wait_any() {
  case $BASH_VERSION in
    [123].* | 4.[012].*) sleep 1 ;;
    *) wait -n 2>/dev/null ;;
  esac
}

# reap_ended: every worker that has ended, reaped.
reap_ended() {
  local w
  for w in $live; do
    kill -0 "${w_pid[w]}" 2>/dev/null || reap "$w"
  done
}

# A signal to the serve loopx reaches this script, and each worker loopx
# too (the same process group): this script passes the same signal on to
# every worker (as their parent: to loopx that is one signal, not a second
# one that would skip the grace period), and waits for them. Each ends its
# agent, with loopx's grace period. Their issues stay claimed: the next
# pick-up restarts them.
on_signal() {
  local w pid
  trap '' HUP INT QUIT TERM
  [ -n "$live" ] && say "serve: stopping $(live_count) worker(s)"
  # Every background job: a worker started just before the signal too.
  for pid in $(jobs -p); do kill -s "$1" "$pid" 2>/dev/null; done
  for w in $live; do reap "$w"; done
  wait
  exit "$2"
}
trap 'on_signal HUP 129' HUP
trap 'on_signal INT 130' INT
trap 'on_signal QUIT 131' QUIT
trap 'on_signal TERM 143' TERM

while :; do
  reap_ended
  if [ -z "$enough" ] && [ "$(in_use)" -lt "$max_concurrent" ]; then
    start_worker
    continue
  fi
  [ -n "$live" ] || break
  wait_any
done

if [ "$started" -eq 0 ]; then
  summary="$(in_use) issue(s) in flight (MAX_CONCURRENT=$max_concurrent): no worker started"
else
  summary="$took issue(s) taken by $started worker(s), $failed failed"
fi
say "serve: $summary"
if [ "$serve_once" = 1 ]; then
  output --result "$summary" --stop
  exit 0
fi
say "serve: looking again in $serve_poll"
output --retry-after "$serve_poll"
