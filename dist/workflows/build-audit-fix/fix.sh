#!/bin/bash
# build-audit-fix, step 4 of 5: the fix. The agent gets the task, the
# auditor's review and the check results (this step's stdin), fixes what
# they point out, and the next round starts at the checks.
set -uo pipefail
# shellcheck source-path=SCRIPTDIR source=lib/common.sh
. "$(dirname "$0")/lib/common.sh"

# Cut to 100 KB, to keep the prompt small.
feedback=$(head -c 100000)
load_state
begin_step fix
progress_start

prompt="You are the fixer in a build, audit and fix loop (round $round of at most
$max_rounds). An auditor reviewed the work done in this directory for the task
below and requested changes. Make every change the review asks for, and make
the failing checks pass. The checks and a new audit follow your work.

# Task

$(cat "$run_dir/task.md")

$feedback"

run_agent "$run_dir/fix-$round" "$prompt"
commit_step "fix (round $round)" || fail_step 1 "git commit failed"
check_progress "" ""
record_step fix "$round" "$step_start" ok
# The round ends here; the next one starts with the checks.
round=$((round + 1))
state_set round "$round"
write_report "in progress (fixed; round $round checks next)"
agent_output --result "fixed" --goto checks
