#!/bin/bash
# issue-runner, the CI gate (CI_GATE=1), between work and finish: the
# agent opened its pull request (its issue number is on stdin); this step
# waits for the pull request's checks and decides:
#
#   all pass (or skipped)    -> finish, DONE_LABEL
#   some fail                -> a fix round: the agent, in the same clone and
#                               the same session, is told which checks failed;
#                               then wait again. Past MAX_CI_FIXES rounds:
#                               NEEDS_HUMAN_LABEL, naming the failing checks
#   pending, or none yet     -> wait CI_POLL (a loopx wait, `retry_after`:
#                               this step runs again), at most CI_TIMEOUT
#
# Everything the gate knows lives in the claim (ci_branch, ci_since,
# ci_fixes, ci_fixing, ci_failing, clone), so a run that dies while
# waiting or fixing is restarted here by the next run (MAX_RESTARTS), and
# carries on: a fix round that was cut short is run again, its agent's
# session carried on.
set -uo pipefail
# shellcheck source-path=SCRIPTDIR source=lib/common.sh
. "$(dirname "$0")/lib/common.sh"

number=$(cat)
case $number in '' | *[!0-9]*) die "ci: expected an issue number on stdin, got '$number'" ;; esac
claimed=$claims_dir/$number
[ "$(claim_get run)" = "$LOOPX_RUN_ID" ] || die "ci: #$number is not an issue this run took"
branch=$(claim_get ci_branch)
[ -n "$branch" ] || die "ci: #$number has no pull request branch in its claim ($claimed)"
mkdir -p "$run_dir" || die "cannot create $run_dir"

fixes=$(claim_get ci_fixes | tr -cd 0-9)
fixes=${fixes:-0}

# to_human <note>: the gate gives up; the issue goes to NEEDS_HUMAN_LABEL
# with <note> as its comment (kept in the claim first, like finish.sh).
to_human() {
  claim_set label "$needs_human_label"
  printf '%s' "$1" >"$claimed.note"
  finish_issue "$number" "$needs_human_label" "$1"
  output --result "#$number: $needs_human_label" --stop
  exit 0
}

# wait_for_checks: this step again after CI_POLL, the same input.
wait_for_checks() {
  output --retry-after "$ci_poll" ${1:+--cost-usd "$1"}
  exit 0
}

# ensure_clone: the clone the agent worked in, or, when it is gone (a
# restart on another machine, a cleaned disk), a new one on the branch.
ensure_clone() {
  clone=$(claim_get clone)
  if [ -n "$clone" ] && [ -d "$clone/.git" ]; then
    return 0
  fi
  clone=$run_dir/clone
  rm -rf "$clone"
  forge repo clone "$repo" "$clone" -- --depth 1 >&2 || die "cloning $repo failed"
  if ! git -C "$clone" fetch -q --depth 1 origin "+refs/heads/$branch:refs/remotes/origin/$branch" >&2; then
    die "fetching the branch $branch of $repo failed"
  fi
  git -C "$clone" checkout -q -B "$branch" --track "origin/$branch" >&2 || die "checking out $branch failed"
  claim_set clone "$clone"
}

# fix_round <k> <failing checks>: the agent fixes them, carrying on its
# session; then the gate waits for the new checks.
fix_round() {
  local k=$1 failing=$2 step=ci-fix-$1 prev out status cost route
  ensure_clone
  # The fix round is a new step for `loopx agent`, so it is handed the
  # session the agent's last step left (<step>.session); with no summary of
  # its own yet, loopx agent carries that session on.
  prev=agent
  [ "$k" -gt 1 ] && [ -f "$sessions_dir/$number/ci-fix-$((k - 1)).session" ] && prev=ci-fix-$((k - 1))
  if [ ! -f "$sessions_dir/$number/$step.session" ] && [ -f "$sessions_dir/$number/$prev.session" ]; then
    cp "$sessions_dir/$number/$prev.session" "$sessions_dir/$number/$step.session"
  fi
  cat >"$run_dir/$step.prompt.md" <<EOF || die "cannot write $run_dir/$step.prompt.md"
The checks of your pull request for issue #$number of $repo (branch $branch)
failed: $failing.

Find out why ($forge_cmd pr checks $branch -R $repo lists them with their
links), fix it in this clone, commit on $branch and push it. This is fix
round $k of at most $max_ci_fixes.

End your output with a line that routes the issue:
ROUTE: done          when the fix is pushed
ROUTE: needs-human   when a person must decide or do something first (say what)
EOF
  say "#$number: fix round $k of MAX_CI_FIXES=$max_ci_fixes, for the failing checks: $failing"
  out=$("$LOOPX_BIN" agent --output --dir "$sessions_dir/$number" --step "$step" --workdir "$clone" \
    --prompt "$run_dir/$step.prompt.md" --allow "$forge_cmd")
  status=$?
  # A failure or a wait leaves the round open (ci_fixing): a retry, the
  # step after the wait, or a restart runs it again.
  [ "$status" -ne 0 ] && say "#$number: the agent failed in fix round $k (exit $status)"
  agent_finished "$status" "$out"
  route=$(route_of "$run_dir/agent.log")
  claim_set ci_fixing ""
  if [ "$route" != "done" ]; then
    say "#$number: the agent routed it to '$route' in fix round $k"
    output --result "$number $route" --goto finish ${cost:+--cost-usd "$cost"}
    exit 0
  fi
  claim_set ci_since "$(date +%s)"
  say "#$number: fix round $k pushed; waiting for the checks of $branch"
  wait_for_checks "$cost"
}

open=$(claim_get ci_fixing | tr -cd 0-9)
[ -n "$open" ] && fix_round "$open" "$(claim_get ci_failing)"

checks=$(forge pr checks "$branch" -R "$repo" 2>"$run_dir/ci.stderr")
status=$?
cat "$run_dir/ci.stderr" >&2
# gh prints a row per check, tab-separated: name, state (pass, fail,
# pending, skipping, cancel), elapsed time, link. Its exit code tells less
# (gh 2.23 exits 1 for failing and for pending checks, newer ones 8 for
# pending), so the rows decide.
rows=$(printf '%s\n' "$checks" | awk -F'\t' 'NF >= 2 && $1 != "" { print $2 "\t" $1 }')
names_in() { printf '%s\n' "$rows" | awk -F'\t' -v want="$1" 'index(want, " " $1 " ") { print $2 }' | paste -sd, - | sed 's/,/, /g'; }
failing=$(names_in " fail cancel ")
pending=$(names_in " pending ")
if [ -z "$rows" ]; then
  if grep -qi 'no checks reported' "$run_dir/ci.stderr"; then
    pending="(none reported yet)"
  else
    die "reading the checks of $branch failed ($forge_cmd pr checks, exit $status)"
  fi
fi

if [ -n "$failing" ]; then
  if [ "$fixes" -ge "$max_ci_fixes" ]; then
    say "#$number: checks of $branch failed after $fixes fix round(s): $failing"
    to_human "the checks of the pull request (branch $branch) fail after $fixes fix round(s) (MAX_CI_FIXES=$max_ci_fixes): $failing."
  fi
  k=$((fixes + 1))
  # The round is counted before it starts: a round that crashes is not
  # free, and ci_fixing lets a retry or restart finish it.
  claim_set ci_failing "$failing"
  claim_set ci_fixes "$k"
  claim_set ci_fixing "$k"
  fix_round "$k" "$failing"
fi

if [ -n "$pending" ]; then
  since=$(claim_get ci_since | tr -cd 0-9)
  since=${since:-$(date +%s)}
  waited=$(($(date +%s) - since))
  if [ "$waited" -ge "$ci_timeout" ]; then
    say "#$number: checks of $branch still pending after ${waited}s: $pending"
    to_human "the checks of the pull request (branch $branch) were still pending after CI_TIMEOUT=$ci_timeout_text: $pending."
  fi
  say "#$number: checks of $branch pending ($pending); checking again in $ci_poll"
  wait_for_checks ""
fi

say "#$number: the checks of $branch passed"
output --result "$number done" --goto finish
