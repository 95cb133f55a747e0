# shellcheck shell=bash disable=SC2034 # the steps that source it use them
# Sourced by every step of issue-runner (files in lib/ are not scripts to
# loopx): configuration, the forge and agent commands, and the state kept
# between runs. Written for bash 3.2 and later.
#
# State (STATE_DIR, by default state/ in the workflow's directory), kept
# across runs, so it must live on a disk that survives them:
#   claimed        the issue this runner took and has not finished:
#                  key=value lines number, run, pid, and once the outcome is
#                  known, label (and claimed.note, the comment to post).
#                  The next run finishes it (index.sh) if this run could not.
#   starts/<n>     one line per start on issue <n> (seconds since 1970)
# Each run that takes an issue also gets runs/<LOOPX_RUN_ID>/: the clean
# clone (removed when the issue is finished) and the agent's files (`loopx
# agent`): agent[.wait-<w>][.attempt-<m>].events.jsonl (its raw output),
# .final.txt (its final message), .stderr.log, .summary.json (how it
# ended), and the prompt; agent.log is the final message of the attempt
# that finished, for finish.sh.

root=$LOOPX_PROJECT_ROOT
forge_cmd=${FORGE_CMD:-gh}
repo=${REPO:-}
allowed_authors=${ALLOWED_AUTHORS:-}
input_label=${INPUT_LABEL:-agent:todo}
in_progress_label=${IN_PROGRESS_LABEL:-agent:working}
done_label=${DONE_LABEL:-agent:done}
needs_human_label=${NEEDS_HUMAN_LABEL:-agent:needs-human}
routes=${ROUTES:-}
max_starts=${MAX_STARTS_PER_HOUR:-2}
state_dir=${STATE_DIR:-$PWD/state}
case $state_dir in /*) ;; *) state_dir=$root/$state_dir ;; esac
claimed=$state_dir/claimed
runs_dir=$PWD/runs
run_dir=$runs_dir/$LOOPX_RUN_ID

say() { printf 'issue-runner: %s\n' "$*" >&2; }
die() {
  say "$*"
  exit 1
}
# $LOOPX_BIN is the loopx of this run.
output() { "$LOOPX_BIN" output "$@"; }

# FORGE_CMD is a command line (flags and quotes allowed); the arguments are
# appended to it.
forge() { bash -c "$forge_cmd \"\$@\"" forge "$@"; }

[ -n "$repo" ] || die "set REPO to the repository to work on (owner/name)"
[ -n "$allowed_authors" ] ||
  die "set ALLOWED_AUTHORS (comma-separated logins): only their issues are given to the agent"
case $max_starts in
  '' | *[!0-9]* | 0) die "MAX_STARTS_PER_HOUR must be a positive integer, not '$max_starts'" ;;
esac
mkdir -p "$state_dir/starts" || die "cannot create $state_dir"

# ---------------------------------------------------------------- labels

# label_for <route>: the label a route token moves the issue to; nothing
# for an unknown route. ROUTES adds tokens: "review=agent:review,wontfix=x".
label_for() {
  case $1 in
    done) echo "$done_label" ;;
    needs-human) echo "$needs_human_label" ;;
    *)
      printf '%s\n' "$routes" | tr ',' '\n' |
        sed 's/^[[:space:]]*//; s/[[:space:]]*$//; s/[[:space:]]*=[[:space:]]*/=/' |
        awk -v token="$1" 'index($0, "=") { t = substr($0, 1, index($0, "=") - 1); l = substr($0, index($0, "=") + 1); if (t == token && l != "") { print l; exit } }'
      ;;
  esac
}

# The route tokens ROUTES adds, comma-separated ("review, wontfix").
extra_routes() {
  printf '%s\n' "$routes" | tr ',' '\n' |
    sed -n 's/^[[:space:]]*\([A-Za-z0-9_-]*\)[[:space:]]*=.*/\1/p' |
    sed '/^$/d' | paste -sd, - | sed 's/,/, /g'
}

# is_allowed <login>: ALLOWED_AUTHORS holds it (commas and blanks separate).
is_allowed() {
  [ -n "$1" ] || return 1
  case ",$(printf '%s' "$allowed_authors" | tr ' \t' ',,')," in
    *",$1,"*) return 0 ;;
  esac
  return 1
}

# ---------------------------------------------------------------- starts

# starts_last_hour <n>: how many times issue <n> was started in the last hour.
starts_last_hour() {
  local file=$state_dir/starts/$1 since=$(($(date +%s) - 3600))
  [ -f "$file" ] || {
    echo 0
    return
  }
  awk -v since="$since" '$1 > since { n++ } END { print n + 0 }' "$file"
}

# record_start <n>: notes a start now, forgetting starts older than an hour.
record_start() {
  local file=$state_dir/starts/$1 now
  now=$(date +%s)
  {
    [ -f "$file" ] && awk -v since="$((now - 3600))" '$1 > since' "$file"
    echo "$now"
  } >"$file.tmp" && mv "$file.tmp" "$file"
}

# ----------------------------------------------------------------- claim

claim_get() {
  [ -f "$claimed" ] || return 0
  sed -n "s/^$1=//p" "$claimed" | tail -n 1
}

claim_set() {
  {
    [ -f "$claimed" ] && grep -v "^$1=" "$claimed"
    printf '%s=%s\n' "$1" "$2"
  } >"$claimed.tmp" && mv "$claimed.tmp" "$claimed"
}

# finish_issue <n> <label> <note>: moves issue <n> from the in-progress
# label to <label>, with <note> as a comment when there is one, then drops
# the claim and the clone. Fails (the claim stays) if the forge does.
finish_issue() {
  local run
  run=$(claim_get run)
  # Once only, even when the label move fails and the next run retries it.
  if [ -n "$3" ] && [ "$(claim_get commented)" != 1 ]; then
    forge issue comment "$1" -R "$repo" --body "issue-runner: $3" >&2 ||
      die "could not comment on #$1 (the next run tries again)"
    claim_set commented 1
  fi
  forge issue edit "$1" -R "$repo" --add-label "$2" --remove-label "$in_progress_label" >&2 ||
    die "could not move #$1 to $2 (the next run tries again)"
  rm -f "$claimed" "$claimed.note"
  [ -n "$run" ] && rm -rf "$runs_dir/$run/clone"
  say "#$1 moved to $2"
}
