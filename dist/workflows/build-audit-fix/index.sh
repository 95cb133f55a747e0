#!/bin/bash
# build-audit-fix, step 1 of 5: set the run up, then build.
#
#   index (build) -> checks -> audit -> report          (approved, or the last round)
#                              audit -> fix -> checks   (changes requested)
#
# Setting up is done once per run (a retry of this step finds the state and
# reuses it): the run directory, the task, and with WORKTREE=1 a new git
# worktree on a new branch, so the checkout the user is in is never touched.
# Then the agent builds the task, and the step's work is committed (in the
# worktree). See README.md for the variables.
set -uo pipefail
# shellcheck source-path=SCRIPTDIR source=lib/common.sh
. "$(dirname "$0")/lib/common.sh"

setup() {
  local base="" branch="" wt="" prefix="" top
  [ -f "$task_file" ] && [ -r "$task_file" ] ||
    die "no task file at $task_file: write the task there, or set TASK_FILE"
  mkdir -p "$run_dir" || die "cannot create $run_dir"
  cp "$task_file" "$run_dir/task.md" || die "cannot copy $task_file"
  if [ "${WORKTREE:-0}" = 1 ]; then
    top=$(git -C "$root" rev-parse --show-toplevel 2>/dev/null) ||
      die "WORKTREE=1 needs the project to be in a git repository"
    base=$(git -C "$root" rev-parse --verify -q HEAD) ||
      die "WORKTREE=1 needs a commit to start from, and the repository has none"
    # The project may be a subdirectory of the repository.
    prefix=$(git -C "$root" rev-parse --show-prefix)
    branch=${BRANCH:-loopx/build-audit-fix-$LOOPX_RUN_ID}
    # Outside the project, so that the project's own tools (test runners,
    # linters, watchers) never find a second copy of it. Every step is
    # committed, so nothing is lost if a temp cleaner removes it.
    wt=${WORKTREE_DIR:-${TMPDIR:-/tmp}/loopx-build-audit-fix-$LOOPX_RUN_ID}
    if [ ! -e "$wt/.git" ]; then
      # Leftovers of an earlier attempt at this very run: a directory
      # without its checkout, a worktree git still lists.
      rm -rf "$wt"
      git -C "$top" worktree prune >&2
      if git -C "$top" rev-parse --verify -q "refs/heads/$branch" >/dev/null; then
        git -C "$top" worktree add -q "$wt" "$branch" >&2
      else
        git -C "$top" worktree add -q -b "$branch" "$wt" "$base" >&2
      fi || die "git worktree add failed for branch $branch at $wt"
    fi
    state_set worktree 1
    state_set worktree_path "$wt"
    state_set branch "$branch"
    state_set work "${wt%/}${prefix:+/${prefix%/}}"
  else
    base=$(git -C "$root" rev-parse --verify -q HEAD 2>/dev/null) || base=""
    state_set worktree 0
    state_set work "$root"
  fi
  state_set base "$base"
  state_set round 1
  state_set started "$(now)"
  state_set started_at "$(date -u '+%Y-%m-%d %H:%M:%S UTC')"
  say "run directory: $run_dir"
}

[ -f "$state" ] || setup
load_state

begin_step build
prompt="You are the builder in a build, audit and fix loop. Do the task below in
this directory: write the code, and keep the project building. An auditor
will review your work afterwards, with the results of the project's checks.

# Task

$(cat "$run_dir/task.md")"

run_agent "$run_dir/build" "$prompt"
commit_step build || fail_step 1 "git commit failed"
record_step build "$round" "$step_start" ok
write_report "in progress (built; checks next)"
agent_output --result "built" --goto checks
