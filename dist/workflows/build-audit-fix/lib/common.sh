# shellcheck shell=bash disable=SC2034 # agent_final, agent_cost: for the steps that source it
# Sourced by every step of build-audit-fix (a file in lib/ is not a script
# to loopx). It holds the configuration, the run's state, the agent runner,
# the per-step commit and the report. Written for bash 3.2 and later.
#
# The run directory, runs/<LOOPX_RUN_ID>/ under the workflow's directory,
# keeps the state of one `loopx run` across its steps (and their retries):
#   state        key=value lines: work, base, branch, worktree, round, ...
#   task.md      the task, copied once so every step sees the same one
#   steps.tsv    one line per step attempt: step, round, start, took, outcome
#   round-<n>/   lint.log, test.log (+ .status), audit.md, verdict
#   build.*, fix-<n>.*, round-<n>/audit.*
#                each agent run (`loopx agent`): .prompt.md, .events.jsonl
#                (its raw output), .final.txt (its final message),
#                .stderr.log, .summary.json; per wait and attempt
#                (.wait-<w>.attempt-<m>)
#   progress     the no-progress count and the last fix's fingerprint
#   report.md    a copy of the report

root=$LOOPX_PROJECT_ROOT
max_rounds=${MAX_ROUNDS:-3}
no_progress_limit=${NO_PROGRESS_LIMIT:-3}
task_file=${TASK_FILE:-TASK.md}
case $task_file in /*) ;; *) task_file=$root/$task_file ;; esac
# By default in the workflow's directory, which its .gitignore keeps out of
# the user's `git status`.
report=${REPORT:-$PWD/report.md}
case $report in /*) ;; *) report=$root/$report ;; esac
run_dir=$PWD/runs/$LOOPX_RUN_ID
state=$run_dir/state
steps=$run_dir/steps.tsv
# Check output handed to the agents is cut to its end, to keep the
# prompts small.
tail_lines=${CHECK_TAIL_LINES:-80}

say() { printf 'build-audit-fix: %s\n' "$*" >&2; }
# $LOOPX_BIN is the loopx of this run.
output() { "$LOOPX_BIN" output "$@"; }
json() { "$LOOPX_BIN" json "$@"; }
die() {
  say "$*"
  exit 1
}

case $max_rounds in
  '' | *[!0-9]* | 0) die "MAX_ROUNDS must be a positive integer, not '$max_rounds'" ;;
esac
case $no_progress_limit in
  '' | *[!0-9]*) die "NO_PROGRESS_LIMIT must be a number (0: off), not '$no_progress_limit'" ;;
esac
case $tail_lines in
  '' | *[!0-9]*) die "CHECK_TAIL_LINES must be a number, not '$tail_lines'" ;;
esac

# ------------------------------------------------------------------ state

state_get() {
  [ -f "$state" ] || return 0
  sed -n "s/^$1=//p" "$state" | tail -n 1
}

# Rewrites the state file by rename, so a step killed midway never leaves
# it half-written.
state_set() {
  {
    [ -f "$state" ] && grep -v "^$1=" "$state"
    printf '%s=%s\n' "$1" "$2"
  } >"$state.tmp" && mv "$state.tmp" "$state"
}

# Loads the state the first step wrote; every later step needs it. The
# worktree of a WORKTREE=1 run that failed or was stopped was removed
# (drop_worktree): it is checked out again from the run's branch.
load_state() {
  [ -f "$state" ] || die "no state in $run_dir: start the loop at build-audit-fix (its index step)"
  work=$(state_get work)
  round=$(state_get round)
  [ "$(state_get worktree)" = 1 ] && ensure_worktree
  [ -d "$work" ] || die "the working directory $work is gone"
}

# ensure_worktree: the run's worktree, checked out from its branch when it
# is missing (a resumed or rerun step). A directory left half-made by an
# earlier attempt is removed first.
ensure_worktree() {
  local wt branch top
  wt=$(state_get worktree_path)
  branch=$(state_get branch)
  [ -e "$wt/.git" ] && return 0
  top=$(git -C "$root" rev-parse --show-toplevel 2>/dev/null) || return 0
  rm -rf "$wt"
  git -C "$top" worktree prune >&2
  git -C "$top" worktree add -q "$wt" "$branch" >&2 ||
    die "cannot check out branch $branch at $wt again"
  say "checked out branch $branch at $wt again"
}

# drop_worktree: after a failed or stopped step, commits what the step left
# (nothing is lost) and removes the worktree, so failed runs leave none
# behind; the branch keeps the work, and a retry or `loopx run --resume`
# checks it out again.
drop_worktree() {
  local wt
  [ "$(state_get worktree)" = 1 ] || return 0
  wt=$(state_get worktree_path)
  [ -e "$wt/.git" ] || return 0
  commit_step "${current_step:-step} (round ${round:-1}, unfinished)" >/dev/null 2>&1
  git -C "$root" worktree remove --force "$wt" >/dev/null 2>&1 || return 0
  say "removed the worktree $wt; the work is on branch $(state_get branch)"
}

now() { date +%s; }

# "1h 2m 3s", "2m 0s", "7s"
duration() {
  local s=$1
  if [ "$s" -ge 3600 ]; then
    printf '%dh %dm %ds' $((s / 3600)) $((s % 3600 / 60)) $((s % 60))
  elif [ "$s" -ge 60 ]; then
    printf '%dm %ds' $((s / 60)) $((s % 60))
  else
    printf '%ds' "$s"
  fi
}

# record_step <step> <round> <start> <outcome>: one line of steps.tsv.
record_step() {
  local took=$(($(now) - $3))
  printf '%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$(date -u +%H:%M:%S)" "$(duration "$took")" "$4" >>"$steps"
}

# ------------------------------------------------------------- the agent

# run_agent <base> <prompt>: `loopx agent` in the working directory, the
# prompt on its stdin (kept as <base>.prompt.md), its files next to it. The
# check commands are allowed besides git. A usage or rate limit, or an
# outage, ends the step with a wait (loopx runs it again after it); a
# failure fails the step (for good when no retry can fix it). On success,
# $agent_final holds its final message and $agent_cost its cost (if known).
run_agent() {
  local out status allow="" cmd
  printf '%s\n' "$2" >"$1.prompt.md" || fail_step 1 "cannot write $1.prompt.md"
  for cmd in "${LINT_CMD:-}" "${TEST_CMD:-}"; do
    [ -n "$cmd" ] && allow=${allow:+$allow,}$cmd
  done
  out=$("$LOOPX_BIN" agent --output --dir "$(dirname "$1")" --step "$(basename "$1")" \
    --workdir "$work" --prompt "$1.prompt.md" ${allow:+--allow "$allow"})
  status=$?
  if [ "$status" -ne 0 ]; then
    agent_failure "$1"
    [ "$agent_class" = permission_denied ] && say "the agent was denied a permission it needs: allow the command with AGENT_ALLOW, or set AGENT_UNSAFE=1 inside a sandbox (a container, a VM)"
    [ "$current_step" = fix ] && check_progress "$agent_class" "$agent_reason"
    agent_out=$out
    fail_step "$status" "the agent ended: $agent_class (see $(dirname "$1"))"
  fi
  if [ -n "$(printf '%s' "$out" | json .retry_after)" ]; then
    record_step "$current_step" "${round:-1}" "$step_start" "waiting $(printf '%s' "$out" | json .retry_after)s (usage limit or outage)"
    printf '%s\n' "$out"
    exit 0
  fi
  agent_final=$(printf '%s' "$out" | json .result)
  agent_cost=$(printf '%s' "$out" | json .cost_usd)
}

# agent_failure <base>: $agent_class and $agent_reason from the summary
# loopx agent wrote for this attempt.
agent_failure() {
  local suffix="" summary
  [ "${LOOPX_WAITS:-0}" -gt 0 ] 2>/dev/null && suffix=.wait-$LOOPX_WAITS
  [ "${LOOPX_ATTEMPT:-1}" -gt 1 ] 2>/dev/null && suffix=$suffix.attempt-$LOOPX_ATTEMPT
  summary=$1$suffix.summary.json
  agent_class=$(json .class <"$summary" 2>/dev/null)
  agent_reason=$(json .reason <"$summary" 2>/dev/null)
  [ -n "$agent_class" ] || agent_class=failed
}

# agent_output <loopx output flags>: the step's output, with the agent's
# cost.
agent_output() {
  output "$@" ${agent_cost:+--cost-usd "$agent_cost"}
}

# ------------------------------------------------------------ progress
#
# A fix that changes nothing will not change anything next time either.
# After each fix attempt: the fingerprint of the working directory (its
# commit, the diff of its tracked files, the names of its new files) and
# how the agent failed, if it did. NO_PROGRESS_LIMIT fix attempts in a row
# that leave it as it was end the run for good. Waits never count.
fingerprint() {
  {
    git -C "$work" rev-parse -q --verify HEAD
    git -C "$work" diff HEAD
    git -C "$work" ls-files --others --exclude-standard
    printf '%s\n%s\n' "$1" "$2"
  } 2>/dev/null | cksum | tr -d ' \t'
}

# progress_start: the fingerprint the first fix starts from.
progress_start() {
  [ -f "$run_dir/progress" ] || printf '0 %s\n' "$(fingerprint "" "")" >"$run_dir/progress"
}

# check_progress <class> <message>: counts this fix attempt; fails the run
# for good when it is the NO_PROGRESS_LIMIT-th in a row without change.
check_progress() {
  local count last now what
  [ "$no_progress_limit" -gt 0 ] || return 0
  read -r count last <"$run_dir/progress"
  now=$(fingerprint "$1" "$2")
  if [ "$now" != "$last" ]; then
    count=0
  elif [ -z "$1" ] && ! git -C "$work" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    # Outside git the work cannot be seen: only failures that repeat count.
    count=0
  else
    count=$((count + 1))
  fi
  printf '%s %s\n' "$count" "$now" >"$run_dir/progress.tmp" && mv "$run_dir/progress.tmp" "$run_dir/progress"
  [ "$count" -ge "$no_progress_limit" ] || return 0
  what="the same commit ($(git -C "$work" rev-parse -q --short HEAD 2>/dev/null || echo none)) and the same files"
  if [ -n "$1" ]; then
    what="$what, and the fixer failed the same way each time: $1 ($2)"
  else
    what="$what: the fixer finished without changing anything"
  fi
  agent_out='{"permanent":true,"class":"no_progress"}'
  fail_step 1 "no progress in $count fix attempts in a row (NO_PROGRESS_LIMIT=$no_progress_limit): $what; stopping for good"
}

# A step that loopx stops (--timeout, Ctrl-C, SIGTERM, SIGHUP) gets the
# signal with its whole group; bash runs this once the agent is gone, so
# the report says where the run stopped. <status> is 128 + the signal.
on_signal() {
  trap - TERM INT HUP
  record_step "$current_step" "${round:-1}" "$step_start" "stopped (timed out or interrupted)"
  drop_worktree
  write_report "stopped: the $current_step step was stopped (timed out or interrupted)"
  exit "$1"
}

# begin_step <step>: notes the step and its start time for record_step.
begin_step() {
  current_step=$1
  step_start=$(now)
  trap 'on_signal 143' TERM
  trap 'on_signal 130' INT
  trap 'on_signal 129' HUP
  say "round ${round:-1}: $1"
}

# fail_step <status> <what>: records a failed step and exits with <status>,
# so that loopx retries it (--retry) or stops with exit 1.
fail_step() {
  record_step "$current_step" "${round:-1}" "$step_start" "failed: $2"
  drop_worktree
  write_report "stopped: the $current_step step failed ($2)"
  say "the $current_step step failed: $2"
  # loopx agent's output for a failure: a permanent one is not retried.
  [ -n "${agent_out:-}" ] && printf '%s\n' "$agent_out"
  exit "$1"
}

# ------------------------------------------------------------------- git

# commit_step <message>: with WORKTREE=1, commits everything the step left
# in the worktree on the run's branch (nothing to commit, no commit).
commit_step() {
  [ "$(state_get worktree)" = 1 ] || return 0
  local who=()
  # A machine without a git identity (a CI runner, a container) still
  # gets its commits.
  git -C "$work" config user.email >/dev/null 2>&1 || who=(-c user.email=loopx@localhost)
  git -C "$work" config user.name >/dev/null 2>&1 || who+=(-c user.name=loopx)
  git -C "$work" add -A >&2 || return 1
  git -C "$work" diff --cached --quiet && return 0
  git -C "$work" ${who[@]+"${who[@]}"} commit -q -m "build-audit-fix: $1" >&2
}

# What changed since the run started, for the auditor.
changes_summary() {
  local base
  base=$(state_get base)
  if [ -z "$base" ]; then
    echo "(The project is not a git repository: inspect the files directly.)"
    return
  fi
  echo "Changes since commit $base (inspect them with \`git diff $base\`):"
  echo
  git -C "$work" diff --stat "$base" 2>/dev/null | tail -n 50
  git -C "$work" status --short 2>/dev/null | grep '^??' | head -n 50
}

# ---------------------------------------------------------------- report

# checks_pass <round>: every configured check of the round passed.
checks_pass() {
  local c st
  for c in lint test; do
    st=$(cat "$run_dir/round-$1/$c.status" 2>/dev/null) || return 1
    case $st in skipped | 0) ;; *) return 1 ;; esac
  done
}

check_cell() {
  local status_file=$run_dir/round-$1/$2.status
  if [ ! -f "$status_file" ]; then
    printf -- '-'
    return
  fi
  case $(cat "$status_file") in
    skipped) printf 'skipped' ;;
    0) printf 'passed' ;;
    *) printf 'failed (exit %s)' "$(cat "$status_file")" ;;
  esac
}

# write_report <result>: the markdown report, from the state and the steps
# so far; written to a temporary file and renamed into place.
write_report() {
  local result=$1 started r verdict passed last_audit=""
  started=$(state_get started)
  {
    echo "# build-audit-fix report"
    echo
    echo "- Result: $result"
    echo "- Task: ${task_file#"$root"/}"
    echo "- Run: $LOOPX_RUN_ID, started $(state_get started_at), took $(duration $(($(now) - ${started:-$(now)})))"
    echo "- Rounds: ${round:-1} of at most $max_rounds (MAX_ROUNDS)"
    if [ "$(state_get worktree)" = 1 ]; then
      echo "- Branch: \`$(state_get branch)\`, from commit $(state_get base) (\`git log $(state_get base)..$(state_get branch)\`)"
      if [ -e "$(state_get worktree_path)/.git" ]; then
        echo "- Worktree: $(state_get worktree_path)"
      else
        echo "- Worktree: removed (the branch has every step; \`loopx run --resume\` checks it out again)"
      fi
    else
      echo "- Worked in $(state_get work)"
    fi
    echo
    echo "## Steps"
    echo
    echo "| # | Step | Round | Ended (UTC) | Took | Outcome |"
    echo "|---|---|---|---|---|---|"
    [ -f "$steps" ] && awk -F'\t' '{ printf "| %d | %s | %s | %s | %s | %s |\n", NR, $1, $2, $3, $4, $5 }' "$steps"
    echo
    echo "## Rounds"
    echo
    echo "A round passes when its checks pass and the auditor approves."
    echo
    echo "| Round | Lint | Tests | Verdict | Passed |"
    echo "|---|---|---|---|---|"
    r=1
    while [ "$r" -le "${round:-1}" ]; do
      verdict=-
      passed=-
      if [ -f "$run_dir/round-$r/verdict" ]; then
        verdict=$(cat "$run_dir/round-$r/verdict")
        passed=no
        [ "$verdict" = approved ] && checks_pass "$r" && passed=yes
      fi
      [ -s "$run_dir/round-$r/audit.md" ] && last_audit=$run_dir/round-$r/audit.md
      echo "| $r | $(check_cell "$r" lint) | $(check_cell "$r" test) | $verdict | $passed |"
      r=$((r + 1))
    done
    if [ -n "$last_audit" ]; then
      echo
      echo "## Last audit"
      echo
      cat "$last_audit"
    fi
  } >"$report.tmp.$$" && mv "$report.tmp.$$" "$report" && cp "$report" "$run_dir/report.md"
}
