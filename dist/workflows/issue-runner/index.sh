#!/bin/bash
# issue-runner, step 1 of 3: pick an issue and take it.
#
#   index (pick, claim) -> work (clone, agent) -> finish (label) -> stop
#   index -> stop                                 (nothing to do)
#
# One issue per run, made for cron under flock (see README.md):
#  1. An issue an earlier run took but did not finish (it failed, timed out
#     or was killed) is finished first: moved to its outcome's label if the
#     agent got that far, else to the needs-human label.
#  2. The oldest open issue with INPUT_LABEL, by an author in
#     ALLOWED_AUTHORS, started fewer than MAX_STARTS_PER_HOUR times in the
#     last hour, is moved to IN_PROGRESS_LABEL and handed to `work`.
set -uo pipefail
# shellcheck source-path=SCRIPTDIR source=lib/common.sh
. "$(dirname "$0")/lib/common.sh"

# The claim of an earlier run. With flock around every run there is no
# other run alive; without it, a claim whose loopx still runs is left alone.
sweep_claim() {
  local number pid label note
  [ -f "$claimed" ] || return 0
  number=$(claim_get number)
  pid=$(claim_get pid)
  case $number in
    '' | *[!0-9]*)
      say "ignoring a damaged claim file $claimed"
      rm -f "$claimed"
      return 0
      ;;
  esac
  # (In a container, this run's loopx may have the pid the last one had.)
  if [ -n "$pid" ] && [ "$pid" != "$PPID" ] && ps -p "$pid" -o command= 2>/dev/null | grep -q loopx; then
    say "another run (loopx pid $pid) is working on #$number: nothing to do (run issue-runner under flock)"
    output --result "busy" --stop
    exit 0
  fi
  label=$(claim_get label)
  note=$(cat "$claimed.note" 2>/dev/null)
  if [ -z "$label" ]; then
    label=$needs_human_label
    note="the run that took this issue (loopx run $(claim_get run)) ended before the agent finished: it failed, timed out or was stopped."
  fi
  say "finishing #$number, left by run $(claim_get run)"
  finish_issue "$number" "$label" "$note"
}

sweep_claim

list=$(forge issue list -R "$repo" --state open --label "$input_label" --limit 1000 \
  --json number,author,createdAt \
  --jq '.[] | "\(.createdAt) \(.number) \(.author.login)"') ||
  die "listing the open issues labeled $input_label failed ($forge_cmd issue list)"

picked=""
# ISO 8601 times sort as text: oldest first.
while read -r _ number author; do
  case $number in '' | *[!0-9]*) continue ;; esac
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

# The claim first: if this run dies from here on, the next one finishes the
# issue instead of leaving it in progress for ever.
rm -f "$claimed.note"
{ : >"$claimed.tmp" && mv "$claimed.tmp" "$claimed"; } || die "cannot write $claimed"
claim_set number "$picked"
claim_set run "$LOOPX_RUN_ID"
claim_set pid "$PPID"
if ! forge issue edit "$picked" -R "$repo" --add-label "$in_progress_label" --remove-label "$input_label" >&2; then
  rm -f "$claimed"
  die "could not move #$picked to $in_progress_label; it was not taken"
fi
record_start "$picked"
say "took #$picked ($input_label -> $in_progress_label)"
output --result "$picked" --goto work
