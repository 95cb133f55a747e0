#!/bin/bash
# issue-runner, step 3 of 3: moves the issue to the label of the agent's
# route ("<number> <route>" on stdin) and ends the run. An unknown route
# goes to NEEDS_HUMAN_LABEL, with a comment that says why. The outcome is
# written into the claim first: if the forge fails here, the next run
# applies it.
set -uo pipefail
# shellcheck source-path=SCRIPTDIR source=lib/common.sh
. "$(dirname "$0")/lib/common.sh"

read -r number route
case $number in '' | *[!0-9]*) die "finish: expected '<issue number> <route>' on stdin" ;; esac
claimed=$claims_dir/$number
[ "$(claim_get run)" = "$LOOPX_RUN_ID" ] || die "finish: #$number is not an issue this run took"

label=$(label_for "$route")
note=""
# The end of the agent's output, where it was asked to say why.
reasons=$(tail -n 30 "$run_dir/agent.log" 2>/dev/null | cut -c 1-300)
if [ -z "$label" ]; then
  label=$needs_human_label
  known="done, needs-human"
  extra=$(extra_routes)
  [ -n "$extra" ] && known="$known, $extra"
  note="the agent asked for the route '$route', which is not one of: $known. The end of its output:"
elif [ "$label" = "$needs_human_label" ]; then
  note="the agent asked for a person to take over. The end of its output:"
fi
[ -n "$note" ] && note="$note

\`\`\`
$reasons
\`\`\`"
claim_set label "$label"
printf '%s' "$note" >"$claimed.note"
finish_issue "$number" "$label" "$note"
output --result "#$number: $label" --stop
