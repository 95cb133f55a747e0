#!/bin/bash
# ralph: the classic agent loop. Every iteration runs the agent CLI once, in
# a fresh process, on the same prompt file, in the project root (`loopx
# agent`). The loop stops when the agent marks the task done: it creates the
# done file, or it prints the done line on a line of its own. Otherwise this
# script prints no goto and loopx starts it again (after --retry, --timeout
# and --max-time had their say). See README.md.
#
# Variables: RALPH_PROMPT, RALPH_DONE_FILE, RALPH_DONE_LINE, and the AGENT*
# variables `loopx agent` reads (AGENT, AGENT_CMD, AGENT_ARGS, ...).
# Needs nothing but loopx, bash and the agent CLI. Written for bash 3.2
# (macOS's /bin/bash) and later.
set -uo pipefail

root=$LOOPX_PROJECT_ROOT
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

say "iteration $LOOPX_ITERATION (attempt $LOOPX_ATTEMPT): ${AGENT_CMD:-${AGENT:-claude}} <${prompt_file#"$root"/}>"
# The agent in the project root, the prompt file on its stdin, its steps on
# stderr; its files in runs/<run>/iteration-<n>[.wait-<w>][.attempt-<m>].*
# (the workflow's directory is the working directory). Its stdout is loopx
# output: the final message as the result, "stop" when the done line is
# there, a wait (retry_after) after a usage or rate limit, the cost.
out=$("$LOOPX_BIN" agent --output --done-line "$done_line" --prompt "$prompt_file")
status=$?
if [ "$status" -ne 0 ]; then
  # A failed iteration fails the script: loopx retries it with --retry,
  # unless the output says the failure is permanent (auth, billing, a
  # refused permission, ...).
  printf '%s\n' "$out"
  exit "$status"
fi
field() { printf '%s' "$out" | "$LOOPX_BIN" json "$1"; }
if [ -n "$(field .retry_after)" ]; then
  # A usage or rate limit: loopx runs this iteration again after the wait.
  printf '%s\n' "$out"
  exit 0
fi
cost=$(field .cost_usd)
# The done line counts only on a line of its own (blanks and a trailing CR
# around it are fine), so a prompt quoted back by the agent does not stop it.
if [ "$(field .stop)" = true ] || [ -e "$done_file" ]; then
  say "the agent marked the task done after $LOOPX_ITERATION iteration(s)"
  output --result "done" --stop ${cost:+--cost-usd "$cost"}
  exit 0
fi
# No goto: loopx starts this script again, with a fresh agent.
output --result "iteration $LOOPX_ITERATION: not done yet" ${cost:+--cost-usd "$cost"}
