#!/bin/bash
# build-audit-fix, step 3 of 5: the audit. The agent reviews the work with
# the check results (this step's stdin) and ends with a verdict line. A
# round passes only when the checks pass AND the auditor approves:
#
#   VERDICT: APPROVED, checks pass   -> report (the loop stops, exit 0)
#   anything else                    -> fix, with the audit and the check
#                                       results on its stdin; in the last
#                                       round (MAX_ROUNDS), report instead
#                                       (the run ends unapproved, exit 1)
#
# Anything but APPROVED on the last VERDICT line, or no verdict at all,
# counts as changes requested; an approval over failing checks is another
# fix round.
set -uo pipefail
# shellcheck source-path=SCRIPTDIR source=lib/common.sh
. "$(dirname "$0")/lib/common.sh"

checks=$(cat)
load_state
begin_step audit
dir=$run_dir/round-$round
mkdir -p "$dir" || fail_step 1 "cannot create $dir"

prompt="You are the auditor in a build, audit and fix loop (round $round of at most
$max_rounds). Review the work done in this directory for the task below: is
it complete and correct, and do the checks pass? Do not change any file.

Point out every problem a fixer must solve, most important first. End your
answer with exactly one of these lines:
VERDICT: APPROVED
VERDICT: CHANGES REQUESTED

# Task

$(cat "$run_dir/task.md")

# What changed

$(changes_summary)

# Checks

$checks"

run_agent "$dir/audit" "$prompt"
printf '%s\n' "$agent_final" >"$dir/audit.md" || fail_step 1 "cannot write $dir/audit.md"

# The last VERDICT line wins; markdown emphasis around it is ignored.
verdict=$(sed 's/[*`_]//g' "$dir/audit.md" |
  sed -n 's/^[[:space:]]*[Vv][Ee][Rr][Dd][Ii][Cc][Tt][[:space:]]*:[[:space:]]*//p' |
  tail -n 1 | tr '[:lower:]' '[:upper:]' | sed 's/[[:space:]]*$//')
case $verdict in
  APPROVED*) verdict=approved ;;
  '') verdict="no verdict (changes requested)" ;;
  *) verdict="changes requested" ;;
esac
echo "$verdict" >"$dir/verdict"

commit_step "audit (round $round)" || fail_step 1 "git commit failed"
checks_ok=0
checks_pass "$round" && checks_ok=1
outcome=$verdict
[ "$verdict" = approved ] && [ "$checks_ok" = 0 ] && outcome="approved, but the checks fail"
record_step audit "$round" "$step_start" "$outcome"

if [ "$verdict" = approved ] && [ "$checks_ok" = 1 ]; then
  state_set outcome approved
  agent_output --result approved --goto report
elif [ "$round" -ge "$max_rounds" ]; then
  if [ "$checks_ok" = 0 ] && [ "$verdict" = approved ]; then
    why="the auditor approved, but the checks still fail"
  elif [ "$checks_ok" = 0 ]; then
    why="the checks still fail and the auditor still requests changes"
  else
    why="the checks pass, but the auditor still requests changes"
  fi
  state_set outcome rejected
  state_set why "$why"
  agent_output --result rejected --goto report
else
  write_report "in progress (round $round: $outcome; fix next)"
  gate=""
  [ "$checks_ok" = 0 ] && gate="
A round passes only when the checks pass and the auditor approves: make
the failing checks pass, whatever the review says.
"
  feedback="# The auditor's review (round $round)
$gate
$(cat "$dir/audit.md")

# The checks

$checks"
  agent_output --result "$feedback" --goto fix
fi
