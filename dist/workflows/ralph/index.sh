#!/bin/bash
# ralph: the classic agent loop. Every iteration runs the agent CLI once, in
# a fresh process, on the same prompt file, in the project root, through
# `loopx agent`. The loop stops when the agent marks the task done: it
# creates the done file, or it prints the done line on a line of its own.
# It fails for good when NO_PROGRESS_LIMIT iterations in a row changed
# nothing. Otherwise this script prints no goto and loopx starts it again
# (after --retry, --timeout and --max-time had their say). See README.md.
#
# Variables: AGENT (claude, codex or gemini, or a comma list), AGENT_CMD and
# the other AGENT_* that `loopx agent` reads, RALPH_PROMPT, RALPH_DONE_FILE,
# RALPH_DONE_LINE, NO_PROGRESS_LIMIT.
# Written for bash 3.2 (macOS's /bin/bash) and later.
set -uo pipefail

root=$LOOPX_PROJECT_ROOT
prompt_file=${RALPH_PROMPT:-PROMPT.md}
done_file=${RALPH_DONE_FILE:-.ralph-done}
done_line=${RALPH_DONE_LINE:-LOOP_DONE}
no_progress_limit=${NO_PROGRESS_LIMIT:-3}

# Relative paths are relative to the project root, not to this directory.
case $prompt_file in /*) ;; *) prompt_file=$root/$prompt_file ;; esac
case $done_file in /*) ;; *) done_file=$root/$done_file ;; esac

say() { printf 'ralph: %s\n' "$*" >&2; }
# $LOOPX_BIN is the loopx of this run.
output() { "$LOOPX_BIN" output "$@"; }
json() { "$LOOPX_BIN" json "$@"; }

case $no_progress_limit in
  '' | *[!0-9]*)
    say "NO_PROGRESS_LIMIT must be a number (0: off), not '$no_progress_limit'"
    exit 1
    ;;
esac

# A done file from an earlier run means the task is finished: starting the
# agent again would only spend money (and a cron job would do it forever).
if [ -e "$done_file" ]; then
  say "$done_file exists: the task is done (remove it to run again)"
  output --result "already done" --stop
  exit 0
fi
if [ ! -f "$prompt_file" ] || [ ! -r "$prompt_file" ]; then
  say "no prompt file at $prompt_file: write one, or set RALPH_PROMPT"
  exit 1
fi

# Each run keeps the agent's files of every iteration, for the
# post-mortem: runs/<run>/iteration-<n>[.wait-<w>][.attempt-<m>].*
run_dir=$PWD/runs/$LOOPX_RUN_ID
mkdir -p "$run_dir" || exit 1
step=iteration-$LOOPX_ITERATION

# ------------------------------------------------------------ progress
#
# The fingerprint of the project after an iteration: its commit, the diff
# of its tracked files, the names of its new files, and how the agent
# ended (class and message, for a failure). NO_PROGRESS_LIMIT iterations
# in a row with the fingerprint they started with end the loop for good:
# an agent that changes nothing will not change anything next time either,
# and every try costs money. Waits (limits, outages) are not iterations.
in_git=0
git -C "$root" rev-parse --is-inside-work-tree >/dev/null 2>&1 && in_git=1
fingerprint() {
  {
    if [ "$in_git" = 1 ]; then
      git -C "$root" rev-parse -q --verify HEAD
      git -C "$root" diff HEAD
      git -C "$root" ls-files --others --exclude-standard
    fi
    printf '%s\n%s\n' "$1" "$2"
  } 2>/dev/null | cksum | tr -d ' \t'
}
progress=$run_dir/progress
[ -f "$progress" ] || printf '0 %s\n' "$(fingerprint "" "")" >"$progress"

# check_progress <class> <message>: counts this iteration; fails the run
# for good when it is the NO_PROGRESS_LIMIT-th in a row without change.
check_progress() {
  local count last now what
  [ "$no_progress_limit" -gt 0 ] || return 0
  read -r count last <"$progress"
  now=$(fingerprint "$1" "$2")
  # Outside git the work cannot be seen: only failures that repeat count.
  if [ "$now" != "$last" ] || { [ "$in_git" = 0 ] && [ -z "$1" ]; }; then
    count=0
  else
    count=$((count + 1))
  fi
  printf '%s %s\n' "$count" "$now" >"$progress.tmp" && mv "$progress.tmp" "$progress"
  [ "$count" -ge "$no_progress_limit" ] || return 0
  what="the same commit ($(git -C "$root" rev-parse -q --short HEAD 2>/dev/null || echo none)) and the same files"
  [ "$in_git" = 1 ] || what="not a git repository, so only the failure"
  if [ -n "$1" ]; then
    what="$what, and the agent failed the same way each time: $1 ($2)"
  else
    what="$what: the agent finished without changing anything"
  fi
  say "no progress in $count iterations in a row (NO_PROGRESS_LIMIT=$no_progress_limit): $what; stopping for good"
  output --permanent --class no_progress
  exit 1
}

say "iteration $LOOPX_ITERATION (attempt $LOOPX_ATTEMPT): ${AGENT_CMD:-${AGENT:-claude}} <${prompt_file#"$root"/}>"
# The prompt goes to the agent on its stdin; its steps show on stderr.
out=$("$LOOPX_BIN" agent --output --dir "$run_dir" --step "$step" --workdir "$root" --prompt "$prompt_file")
status=$?
if [ "$status" -ne 0 ]; then
  # A failed iteration fails the script: loopx retries it with --retry,
  # unless loopx agent said no retry can fix it.
  case $out in *'"class":"permission_denied"'*) say "the agent was denied a permission it needs: allow the command with AGENT_ALLOW, or set AGENT_UNSAFE=1 inside a sandbox (a container, a VM)" ;; esac
  case $out in *'"permanent":true'*) printf '%s\n' "$out"; exit "$status" ;; esac
  suffix=""
  [ "${LOOPX_WAITS:-0}" -gt 0 ] 2>/dev/null && suffix=.wait-$LOOPX_WAITS
  [ "${LOOPX_ATTEMPT:-1}" -gt 1 ] 2>/dev/null && suffix=$suffix.attempt-$LOOPX_ATTEMPT
  summary=$run_dir/$step$suffix.summary.json
  class=$(json .class <"$summary" 2>/dev/null)
  reason=$(json .reason <"$summary" 2>/dev/null)
  check_progress "${class:-failed}" "$reason"
  printf '%s\n' "$out"
  exit "$status"
fi
if [ -n "$(printf '%s' "$out" | json .retry_after)" ]; then
  # A usage or rate limit: loopx runs this iteration again after the wait.
  printf '%s\n' "$out"
  exit 0
fi
final=$(printf '%s' "$out" | json .result)
cost=$(printf '%s' "$out" | json .cost_usd)

# The done line counts only on a line of its own (blanks and a trailing CR
# around it are fine), so a prompt quoted back by the agent does not stop it.
if [ -e "$done_file" ] ||
  printf '%s\n' "$final" | sed 's/^[[:space:]]*//; s/[[:space:]]*$//' | grep -qxF -- "$done_line"; then
  say "the agent marked the task done after $LOOPX_ITERATION iteration(s)"
  output --result "done" --stop ${cost:+--cost-usd "$cost"}
  exit 0
fi
check_progress "" ""
# No goto: loopx starts this script again, with a fresh agent.
output --result "iteration $LOOPX_ITERATION: not done yet" ${cost:+--cost-usd "$cost"}
