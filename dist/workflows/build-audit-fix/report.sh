#!/bin/bash
# build-audit-fix, step 5 of 5: the report. Writes the final markdown report
# (REPORT, by default build-audit-fix-report.md in the project root), removes
# the worktree of a WORKTREE=1 run (its branch keeps every step), and ends
# the loop: stop (exit 0) when the audit approved, exit 1 when the last
# round ended without approval.
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
    write_report "**not approved** after $round rounds (MAX_ROUNDS=$max_rounds): the loop stopped without an approval"
    # Exit 1, so that cron and CI see it; said plainly first, since loopx's
    # own line after it ("exited with code 1") reads like a crash.
    say "not approved after $round rounds (MAX_ROUNDS=$max_rounds): the audit still asks for changes"
    say "this is the workflow's verdict, not a crash: it ends with exit 1 so that cron and CI see it; what is left is in the report, $report"
    exit 1
    ;;
  *)
    die "report: unknown outcome '$outcome' (expected approved or rejected)"
    ;;
esac
