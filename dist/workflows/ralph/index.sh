#!/bin/bash
# ralph: the classic agent loop. Every iteration runs the agent CLI once, in
# a fresh process, on the same prompt file, in the project root. The loop
# stops when the agent marks the task done: it creates the done file, or it
# prints the done line on a line of its own. Otherwise this script prints no
# goto and loopx starts it again (after --retry, --timeout and --max-time
# had their say). See README.md.
#
# Variables: AGENT_CMD, RALPH_PROMPT, RALPH_DONE_FILE, RALPH_DONE_LINE.
# Written for bash 3.2 (macOS's /bin/bash) and later.
set -uo pipefail

root=$LOOPX_PROJECT_ROOT
agent_cmd=${AGENT_CMD:-claude -p}
prompt_file=${RALPH_PROMPT:-PROMPT.md}
done_file=${RALPH_DONE_FILE:-.ralph-done}
done_line=${RALPH_DONE_LINE:-LOOP_DONE}

# Relative paths are relative to the project root, not to this directory.
case $prompt_file in /*) ;; *) prompt_file=$root/$prompt_file ;; esac
case $done_file in /*) ;; *) done_file=$root/$done_file ;; esac

say() { printf 'ralph: %s\n' "$*" >&2; }
# $LOOPX_BIN is the loopx of this run.
output() { "$LOOPX_BIN" output "$@"; }

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

# Each run keeps the agent's output of every iteration, for the post-mortem.
run_dir=$PWD/runs/$LOOPX_RUN_ID
mkdir -p "$run_dir" || exit 1
log=$run_dir/iteration-$LOOPX_ITERATION.log
[ "$LOOPX_ATTEMPT" -gt 1 ] && log=$run_dir/iteration-$LOOPX_ITERATION.attempt-$LOOPX_ATTEMPT.log

say "iteration $LOOPX_ITERATION (attempt $LOOPX_ATTEMPT): $agent_cmd <${prompt_file#"$root"/}>"
prompt=$(cat "$prompt_file") || exit 1

# AGENT_CMD is a command line (it may carry flags and quotes); the prompt is
# appended as one more argument. The agent's stdout is kept in the log and
# shown on stderr, since stdout belongs to loopx's structured output.
(cd "$root" && bash -c "$agent_cmd \"\$@\"" agent "$prompt" </dev/null) | tee "$log" >&2
status=${PIPESTATUS[0]}
if [ "$status" -ne 0 ]; then
  # A failed iteration fails the script: loopx retries it with --retry.
  say "the agent failed (exit $status); its output is in $log"
  exit "$status"
fi

# The done line counts only on a line of its own (blanks and a trailing CR
# around it are fine), so a prompt quoted back by the agent does not stop it.
if [ -e "$done_file" ] ||
  sed 's/^[[:space:]]*//; s/[[:space:]]*$//' "$log" | grep -qxF -- "$done_line"; then
  say "the agent marked the task done after $LOOPX_ITERATION iteration(s)"
  output --result "done" --stop
  exit 0
fi
# No goto: loopx starts this script again, with a fresh agent.
output --result "iteration $LOOPX_ITERATION: not done yet"
