#!/bin/bash
# issue-runner, step 1 of 3: pick an issue and take it.
#
#   index (pick, claim) -> work (clone, agent) -> finish (label) -> stop
#   index -> work -> ci (checks; fix rounds) -> finish     (CI_GATE=1)
#   index -> stop                                 (nothing to do, or busy)
#
# One issue per run; several runs at once (serve.sh's workers, or cron
# without flock) work on up to MAX_CONCURRENT issues, each in its own
# clone and loopx run, each holding the lock of its issue
# (state/claims/<n>). See README.md.
#  1. A claim whose run is gone (it failed, timed out or was killed) is
#     picked up: restarted, its agent's session carried on, at most
#     MAX_RESTARTS times; else moved to its outcome's label if the agent got
#     that far, or to the needs-human label.
#  2. With fewer than MAX_CONCURRENT claims alive, the oldest open issue
#     with INPUT_LABEL, by an author in ALLOWED_AUTHORS, started fewer than
#     MAX_STARTS_PER_HOUR times in the last hour, is moved to
#     IN_PROGRESS_LABEL and handed to `work`.
set -uo pipefail
# shellcheck source-path=SCRIPTDIR source=lib/common.sh
. "$(dirname "$0")/lib/common.sh"

# One run picks at a time: a lock directory, whose holder is checked when
# it is old news (a run killed while picking).
lock=$state_dir/pick.lock
take_pick_lock() {
  local i=0 pid
  while ! mkdir "$lock" 2>/dev/null; do
    pid=$(cat "$lock/pid" 2>/dev/null)
    if [ -n "$pid" ] && ! holder_alive "$pid"; then
      rm -rf "$lock"
      continue
    fi
    i=$((i + 1))
    [ "$i" -le 60 ] || die "another run has been picking an issue for a minute ($lock): is it stuck?"
    sleep 1
  done
  echo "$PPID" >"$lock/pid"
  trap 'rm -rf "$lock"' EXIT
}
take_pick_lock

# The claims of earlier runs: alive ones count against MAX_CONCURRENT;
# dead ones are restarted (one per run) or finished.
in_flight=0
restart=""
for number in $(claims_in_flight); do
  claimed=$claims_dir/$number
  if holder_alive "$(claim_get pid)"; then
    in_flight=$((in_flight + 1))
    continue
  fi
  label=$(claim_get label)
  restarts=$(claim_get restarts)
  case $restarts in '' | *[!0-9]*) restarts=0 ;; esac
  if [ -z "$label" ] && [ -z "$restart" ] && [ "$restarts" -lt "$max_restarts" ]; then
    restart=$number
    continue
  fi
  note=$(cat "$claimed.note" 2>/dev/null)
  if [ -z "$label" ]; then
    label=$needs_human_label
    note="the run that took this issue (loopx run $(claim_get run)) ended before the agent finished: it failed, timed out or was stopped"
    [ "$max_restarts" -gt 0 ] && note="$note, and it was restarted $restarts time(s) (MAX_RESTARTS=$max_restarts)"
    note="$note."
  fi
  say "finishing #$number, left by run $(claim_get run)"
  finish_issue "$number" "$label" "$note"
done

if [ -n "$restart" ]; then
  claimed=$claims_dir/$restart
  restarts=$(($(claim_get restarts | tr -cd 0-9) + 1))
  say "restarting #$restart, left by run $(claim_get run) (restart $restarts of MAX_RESTARTS=$max_restarts): its agent's session carries on"
  claim_set restarts "$restarts"
  claim_set run "$LOOPX_RUN_ID"
  claim_set pid "$PPID"
  # A run that died in the CI gate carries on there: the pull request is
  # open, and the gate's state is in the claim.
  if [ -n "$(claim_get ci_branch)" ]; then
    output --result "$restart" --goto ci
  else
    output --result "$restart" --goto work
  fi
  exit 0
fi

if [ "$in_flight" -ge "$max_concurrent" ]; then
  say "$in_flight issue(s) in flight (MAX_CONCURRENT=$max_concurrent): nothing taken"
  output --result "busy" --stop
  exit 0
fi

list=$(forge issue list -R "$repo" --state open --label "$input_label" --limit 1000 \
  --json number,author,createdAt \
  --jq '.[] | "\(.createdAt) \(.number) \(.author.login)"') ||
  die "listing the open issues labeled $input_label failed ($forge_cmd issue list)"

picked=""
# ISO 8601 times sort as text: oldest first.
while read -r _ number author; do
  case $number in '' | *[!0-9]*) continue ;; esac
  [ -f "$claims_dir/$number" ] && continue
  if ! is_allowed "$author"; then
    say "#$number: its author $author is not in ALLOWED_AUTHORS; skipped"
    continue
  fi
  starts=$(starts_last_hour "$number")
  if [ "$starts" -ge "$max_starts" ]; then
    say "#$number: started $starts time(s) in the last hour (MAX_STARTS_PER_HOUR=$max_starts); skipped for now"
    continue
  fi
  picked=$number
  break
done <<EOF
$(printf '%s\n' "$list" | LC_ALL=C sort)
EOF

if [ -z "$picked" ]; then
  say "no open issue labeled $input_label to take"
  output --result "no issue" --stop
  exit 0
fi

# The claim first: if this run dies from here on, the next one picks the
# issue up instead of leaving it in progress for ever.
claimed=$claims_dir/$picked
rm -f "$claimed.note"
{ : >"$claimed.tmp" && mv "$claimed.tmp" "$claimed"; } || die "cannot write $claimed"
claim_set number "$picked"
claim_set run "$LOOPX_RUN_ID"
claim_set pid "$PPID"
claim_set restarts 0
rm -rf "${sessions_dir:?}/$picked"
if ! forge issue edit "$picked" -R "$repo" --add-label "$in_progress_label" --remove-label "$input_label" >&2; then
  rm -f "$claimed"
  die "could not move #$picked to $in_progress_label; it was not taken"
fi
record_start "$picked"
say "took #$picked ($input_label -> $in_progress_label)"
output --result "$picked" --goto work
