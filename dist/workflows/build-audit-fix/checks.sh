#!/bin/bash
# build-audit-fix, step 2 of 5: the checks. LINT_CMD and TEST_CMD start
# together in the working directory and are both awaited; their exit codes
# and output go to round-<n>/ and, as a summary (the end of a failing
# check's output), to the audit step on its stdin. A failing check does not
# fail this step: judging it is the auditor's job.
set -uo pipefail
# shellcheck source-path=SCRIPTDIR source=lib/common.sh
. "$(dirname "$0")/lib/common.sh"

lint_cmd=${LINT_CMD:-}
test_cmd=${TEST_CMD:-}
load_state
begin_step checks
dir=$run_dir/round-$round
mkdir -p "$dir" || fail_step 1 "cannot create $dir"

# run_check <name> <command>: writes <name>.log and <name>.status.
run_check() {
  local status=0
  if [ -z "$2" ]; then
    echo skipped >"$dir/$1.status"
    return
  fi
  (cd "$work" && bash -c "$2") </dev/null >"$dir/$1.log" 2>&1 || status=$?
  echo "$status" >"$dir/$1.status"
}

[ -n "$lint_cmd$test_cmd" ] || say "neither LINT_CMD nor TEST_CMD is set: no checks to run"
run_check lint "$lint_cmd" &
lint_pid=$!
run_check test "$test_cmd" &
test_pid=$!
wait "$lint_pid"
wait "$test_pid"

# summary <name> <title> <command>: a markdown section for the auditor and
# the fixer. Long lines are cut: the agents' prompts have a size limit.
# shellcheck disable=SC2016 # the backticks are markdown
summary() {
  local status
  status=$(cat "$dir/$1.status")
  case $status in
    skipped) printf '## %s: not configured\n\n' "$2" ;;
    0) printf '## %s: passed (`%s`)\n\n' "$2" "$3" ;;
    *)
      printf '## %s: FAILED with exit code %s (`%s`)\n\nThe end of its output:\n\n```\n' "$2" "$status" "$3"
      tail -n "$tail_lines" "$dir/$1.log" | cut -c 1-400
      printf '```\n\n'
      ;;
  esac
}
result=$(
  summary lint Lint "$lint_cmd"
  summary test Tests "$test_cmd"
)

outcome="lint $(check_cell "$round" lint), tests $(check_cell "$round" test)"
commit_step "checks (round $round)" || fail_step 1 "git commit failed"
record_step checks "$round" "$step_start" "$outcome"
write_report "in progress (round $round checked: $outcome; audit next)"
output --result "$result" --goto audit
