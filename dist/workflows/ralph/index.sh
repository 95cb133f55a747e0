#!/bin/bash
# ralph: the classic agent loop. Every iteration runs the agent CLI once, in
# a fresh process, on the same prompt file, in the project root. The loop
# stops when the agent marks the task done: it creates the done file, or it
# prints the done line on a line of its own. Otherwise this script prints no
# goto and loopx starts it again (after --retry, --timeout and --max-time
# had their say). See README.md.
#
# Variables: AGENT (claude, codex or gemini), AGENT_CMD and the other
# AGENT_* of lib/agent.sh, RALPH_PROMPT, RALPH_DONE_FILE, RALPH_DONE_LINE.
# Written for bash 3.2 (macOS's /bin/bash) and later.
set -uo pipefail
# shellcheck source-path=SCRIPTDIR source=lib/agent.sh
. "$(dirname "$0")/lib/agent.sh"

root=$LOOPX_PROJECT_ROOT
agent_label=ralph
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

# Each run keeps the agent's output of every iteration, for the
# post-mortem: runs/<run>/iteration-<n>[.wait-<w>][.attempt-<m>].*
run_dir=$PWD/runs/$LOOPX_RUN_ID
mkdir -p "$run_dir" || exit 1

say "iteration $LOOPX_ITERATION (attempt $LOOPX_ATTEMPT): ${AGENT_CMD:-${AGENT:-claude}} <${prompt_file#"$root"/}>"
# The prompt goes to the agent on its stdin; its steps show on stderr.
agent_run "$run_dir/iteration-$LOOPX_ITERATION" "$root" "$prompt_file"
case $? in
  0) ;;
  2)
    # A usage or rate limit: loopx runs this iteration again after the wait.
    agent_emit_wait
    exit 0
    ;;
  *)
    # A failed iteration fails the script: loopx retries it with --retry.
    exit 1
    ;;
esac

# The done line counts only on a line of its own (blanks and a trailing CR
# around it are fine), so a prompt quoted back by the agent does not stop it.
if [ -e "$done_file" ] ||
  sed 's/^[[:space:]]*//; s/[[:space:]]*$//' "$agent_final" | grep -qxF -- "$done_line"; then
  say "the agent marked the task done after $LOOPX_ITERATION iteration(s)"
  agent_output --result "done" --stop
  exit 0
fi
# No goto: loopx starts this script again, with a fresh agent.
agent_output --result "iteration $LOOPX_ITERATION: not done yet"
