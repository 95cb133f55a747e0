#!/usr/bin/env bash
# Step 2 of the loopx action (action.yml): runs `loopx run --resume` in the
# workspace with the state directory (XDG_STATE_HOME) there too, the run log
# in $RUNNER_TEMP, then reads how the run ended from the log's run_end line
# (after exit 75, the resume time from the run's checkpoint), writes the
# step's outputs and the job summary, and maps loopx's exit code
# to the step's: 0 succeeds; 75 (a wait outlasted the budget) succeeds with
# a warning naming the resume time, unless fail-on-wait is true; anything
# else fails with loopx's code.
#
# Inputs (environment; empty means not given):
#   INPUT_TARGET (required), INPUT_AGENT, INPUT_MAX_TIME, INPUT_TIMEOUT,
#   INPUT_RETRY, INPUT_MAX_COST, INPUT_ARGS (split on whitespace),
#   INPUT_FAIL_ON_WAIT (true or false), INPUT_LOG_NAME, INPUT_STATE_DIR
#   ACTION_LOOPX  the loopx binary (default: loopx on PATH)
# Also read: GITHUB_WORKSPACE, RUNNER_TEMP, GITHUB_OUTPUT,
# GITHUB_STEP_SUMMARY, GITHUB_JOB.
# Outputs: exit-code, reason, iterations, cost-usd, resume-at, log-path,
# log-name.
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck disable=SC1091 # lib.sh is checked on its own
. "$here/lib.sh"

sha256() {
  if command -v sha256sum >/dev/null 2>&1; then sha256sum; else shasum -a 256; fi
}

# FIELD LINE: the value of FIELD in the JSON object LINE (one line of the
# run log, which loopx writes flat and compact), strings unquoted, null as
# empty. Inside a JSON string every quote is escaped, so `,"name":` only
# matches a real field.
field() {
  local v
  v=$(printf '%s\n' "$2" | sed -nE "s/.*[{,]\"$1\":(\"[^\"]*\"|[^,}]*).*/\1/p" | head -n 1)
  v=${v#\"}
  v=${v%\"}
  [ "$v" = null ] && v=""
  printf '%s' "$v"
}

# MS (milliseconds since the epoch) as the run log writes times, RFC 3339
# in UTC with milliseconds: 2026-11-25T14:00:00.000Z. GNU date, else BSD's
# (macOS runners).
rfc3339_ms() {
  local s=$(($1 / 1000)) d
  d=$(date -u -d "@$s" +%Y-%m-%dT%H:%M:%S 2>/dev/null || date -u -r "$s" +%Y-%m-%dT%H:%M:%S) || return
  printf '%s.%03dZ' "$d" $(($1 % 1000))
}

# END (the run_end line of a run that ended with reason wait, exit 75):
# when the run asks to be resumed. The run log does not record the wait
# that ends a run (its `wait` event is for a wait that happens, and an
# earlier wait of the run may have logged one), nor does run_end carry a
# time; the run's checkpoint does: `wait_until_ms`, the time the resumed
# run waits until, in $XDG_STATE_HOME/loopx/runs/<run_id>.ckpt. A
# `resume_at` on run_end wins, should a loopx write one.
resume_time() {
  local at id ckpt ms
  at=$(field resume_at "$1")
  if [ -n "$at" ]; then
    printf '%s' "$at"
    return
  fi
  id=$(field run_id "$1")
  case $id in
    "" | *[!0-9a-f]*) return ;;
  esac
  ckpt=$state/loopx/runs/$id.ckpt
  # A header line (format 1, the body's length and checksum), then the body.
  [ "$(head -c 19 "$ckpt" 2>/dev/null)" = "loopx-checkpoint 1 " ] || return
  ms=$(field wait_until_ms "$(sed -n 2p "$ckpt")")
  case $ms in
    "" | *[!0-9]*) return ;;
  esac
  rfc3339_ms "$ms"
}

# Milliseconds as loopx shows durations: 850ms, 12s, 1m5s, 2h3m.
human_ms() {
  local ms=$1 s m h
  if [ "$ms" -lt 1000 ]; then
    printf '%sms' "$ms"
    return
  fi
  s=$((ms / 1000))
  h=$((s / 3600))
  m=$((s % 3600 / 60))
  s=$((s % 60))
  if [ "$h" -gt 0 ]; then
    printf '%sh%sm' "$h" "$m"
  elif [ "$m" -gt 0 ]; then
    printf '%sm%ss' "$m" "$s"
  else
    printf '%ss' "$s"
  fi
}

# ---------------------------------------------------------------- the inputs

check_inputs
target=${INPUT_TARGET:-}
[ -n "$target" ] || fail "the input target is required (the workflow to run)"
fail_on_wait=${INPUT_FAIL_ON_WAIT:-false}
case $fail_on_wait in
  true | false) ;;
  *) fail "fail-on-wait: expected true or false, not '$fail_on_wait'" ;;
esac
loopx=${ACTION_LOOPX:-loopx}
workspace=${GITHUB_WORKSPACE:?GITHUB_WORKSPACE is not set}
cd "$workspace" || fail "cannot enter the workspace $workspace"

state=${INPUT_STATE_DIR:-.loopx-state}
case $state in
  /*) ;;
  *) state=$workspace/$state ;;
esac
mkdir -p "$state" || fail "cannot create the state directory $state"
# Loops commit in the workspace: keep the checkpoints out of their commits.
[ -e "$state/.gitignore" ] || printf '*\n' >"$state/.gitignore"

log_name=${INPUT_LOG_NAME:-}
if [ -z "$log_name" ]; then
  hash=$(printf '%s\0' "$target" "${INPUT_AGENT:-}" "${INPUT_ARGS:-}" "${INPUT_MAX_TIME:-}" \
    "${INPUT_TIMEOUT:-}" "${INPUT_RETRY:-}" "${INPUT_MAX_COST:-}" | sha256 | cut -c 1-8)
  safe=$(printf '%s' "${GITHUB_JOB:-job}-$target" | tr -c 'A-Za-z0-9._-' '-')
  log_name=loopx-log-$safe-$hash
fi
log_dir=${RUNNER_TEMP:?RUNNER_TEMP is not set}/loopx-logs
mkdir -p "$log_dir" || fail "cannot create $log_dir"
file=${log_name//\//-}
log=$log_dir/${file//\\/-}.jsonl
# The log is appended to: this run's lines are the ones after this offset.
before=0
[ -f "$log" ] && before=$(($(wc -c <"$log")))

argv=(run)
# `run --resume` continues the most recent resumable run of this project and
# target (after a wait, a timeout or a cancelled job), else starts anew.
# Releases from before it existed run afresh each time.
if (cd / && LOOPX_DELEGATED=1 "$loopx" run --help 2>/dev/null) | grep -q -- '--resume'; then
  argv+=(--resume)
else
  printf '::notice title=loopx::%s\n' "$(escape "this loopx has no 'run --resume': the run starts afresh")"
fi
argv+=(--log "$log")
[ -z "${INPUT_MAX_TIME:-}" ] || argv+=(--max-time "$INPUT_MAX_TIME")
[ -z "${INPUT_TIMEOUT:-}" ] || argv+=(--timeout "$INPUT_TIMEOUT")
[ -z "${INPUT_RETRY:-}" ] || argv+=(--retry "$INPUT_RETRY")
[ -z "${INPUT_MAX_COST:-}" ] || argv+=(--max-cost "$INPUT_MAX_COST")
extra=()
IFS=$' \t\n' read -r -d '' -a extra <<<"${INPUT_ARGS:-}" || true
argv+=(${extra[@]+"${extra[@]}"} "$target")
[ -z "${INPUT_AGENT:-}" ] || export AGENT="$INPUT_AGENT"

# ------------------------------------------------------------------ the run

# The loop's scripts see the workflow's environment, not this step's inputs.
unset "${!INPUT_@}" ACTION_LOOPX ACTION_PATH
printf 'loopx %s\n' "${argv[*]}"
XDG_STATE_HOME=$state "$loopx" "${argv[@]}"
code=$?

# ------------------------------------------------------- how the run ended

lines=$(tail -c +"$((before + 1))" "$log" 2>/dev/null)
end=$(printf '%s\n' "$lines" | grep '"event":"run_end"' | tail -n 1)
reason=$(field reason "$end")
iterations=$(field iterations "$end")
duration_ms=$(field duration_ms "$end")
cost=$(field cost_usd "$end")
resume_at=""
if [ "$code" = 75 ] || [ "$reason" = wait ]; then
  resume_at=$(resume_time "$end")
fi

set_output exit-code "$code"
set_output reason "$reason"
set_output iterations "$iterations"
set_output cost-usd "$cost"
set_output resume-at "$resume_at"
[ ! -f "$log" ] || set_output log-path "$log"
set_output log-name "$log_name"

r=$(md "${reason:-?}")
case $code in
  0) ended="$r, exit 0" ;;
  75) ended="$r, exit 75: a wait outlasted the budget" ;;
  124) ended="$r, exit 124: a script timed out with no retry left" ;;
  *) ended="$r, exit $code" ;;
esac
{
  echo "### loopx run $(md "$target")"
  echo
  if [ -z "$end" ]; then
    echo "loopx exited $code before its run log recorded how the run ended: see the step's output."
  else
    echo "| | |"
    echo "| --- | --- |"
    echo "| Ended | $ended |"
    echo "| Iterations | $(md "$iterations") |"
    echo "| Time | $(human_ms "${duration_ms:-0}") |"
    if [ -n "$cost" ]; then
      echo "| Cost | \$$(md "$cost") |"
    else
      echo "| Cost | not reported |"
    fi
    [ -z "$resume_at" ] || echo "| Resume at | $(md "$resume_at") |"
    echo "| Run log | artifact $(md "$log_name") |"
  fi
  echo
} >>"${GITHUB_STEP_SUMMARY:-/dev/null}"

case $code in
  0) exit 0 ;;
  75)
    msg="$target is waiting (exit 75: a wait outlasted the budget); resume at ${resume_at:-a later time}: the next run of this action resumes it"
    if [ "$fail_on_wait" = true ]; then
      printf '::error title=loopx::%s\n' "$(escape "$msg")"
      exit 75
    fi
    printf '::warning title=loopx::%s\n' "$(escape "$msg")"
    exit 0
    ;;
  124) why="a script timed out with no retry left" ;;
  *) why=${reason:-no run log} ;;
esac
printf '::error title=loopx::%s\n' "$(escape "loopx run $target failed with exit $code ($why)")"
exit "$code"
