#!/bin/bash
# build-audit-fix, step 5 of 5: the report. Writes the final markdown report
# (REPORT, by default report.md in the workflow's directory, which its
# .gitignore keeps out of `git status`), removes the worktree of a
# WORKTREE=1 run (its branch keeps every step), and ends the loop: stop
# (exit 0) when a round passed (checks pass, auditor approves), exit 1 when
# the last round ended without that.
set -uo pipefail
# shellcheck source-path=SCRIPTDIR source=lib/common.sh
. "$(dirname "$0")/lib/common.sh"

outcome=$(cat)
load_state
[ -n "$outcome" ] || outcome=$(state_get outcome)

if [ "$(state_get worktree)" = 1 ]; then
  wt=$(state_get worktree_path)
  branch=$(state_get branch)
  # Every step was committed, so the worktree holds nothing the branch does
  # not; git refuses to remove it if it does, and then it stays.
  if [ -e "$wt/.git" ] && git -C "$root" worktree remove "$wt" >&2; then
    say "removed the worktree $wt; the work is on branch $branch"
  fi
fi

case $outcome in
  approved)
    write_report "**approved** in round $round (MAX_ROUNDS=$max_rounds)"
    say "approved in round $round; report: $report"
    output --result "approved in round $round" --stop
    ;;
  rejected)
    why=$(state_get why)
    [ -n "$why" ] || why="the auditor still requests changes"
    write_report "**not approved** after $round rounds (MAX_ROUNDS=$max_rounds): $why"
    say "not approved after $round rounds (MAX_ROUNDS=$max_rounds): $why"
    # Exit 1, so that cron and CI see it; said plainly first, since loopx's
    # own line after it ("exited with code 1") reads like a crash.
    say "this is the workflow's verdict, not a crash: it ends with exit 1 so that cron and CI see it; what is left is in the report, $report"
    # The run ends here, unapproved; a retry would not change that.
    output --permanent --class not_approved
    exit 1
    ;;
  *)
    die "report: unknown outcome '$outcome' (expected approved or rejected)"
    ;;
esac
