# shellcheck shell=bash disable=SC2034 # the steps that source it use them
# Sourced by every step of issue-runner (files in lib/ are not scripts to
# loopx): configuration, the forge and agent commands, and the state kept
# between runs. Written for bash 3.2 and later.
#
# State (STATE_DIR, by default state/ in the workflow's directory), kept
# across runs, so it must live on a disk that survives them:
#   claims/<n>     the lock of issue <n>, taken and not finished: key=value
#                  lines number, run, pid (the loopx of the run that holds
#                  it), restarts, clone (the agent's clone), and once the
#                  outcome is known, label (and claims/<n>.note, the
#                  comment to post). With CI_GATE=1, the gate's state too:
#                  ci_branch (the pull request's), ci_since (when the wait
#                  for its checks began), ci_fixes (fix rounds started),
#                  ci_fixing (a round not finished), ci_failing. A claim
#                  whose loopx is gone is picked up by the next run:
#                  restarted (at most MAX_RESTARTS times; in the gate when
#                  it got there), or finished.
#   sessions/<n>/  the agent's files for issue <n> (`loopx agent --dir`):
#                  its session survives a crashed run, and a restart
#                  carries it on.
#   starts/<n>     one line per start on issue <n> (seconds since 1970)
#   pick.lock/     held while a run picks an issue (pid inside)
# Each run that takes an issue also gets runs/<LOOPX_RUN_ID>/: the clean
# clone (removed when the issue is finished) and the agent's files
# (`loopx agent`): agent[.wait-<w>][.attempt-<m>].events.jsonl (its raw
# output), .final.txt (its final message), .stderr.log, .summary.json, and
# the prompt. A serve run (serve.sh) gets runs/serve-<LOOPX_RUN_ID>/, with
# each worker's output (worker-<k>.log) and run log (worker-<k>.jsonl).

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
max_concurrent=${MAX_CONCURRENT:-1}
max_restarts=${MAX_RESTARTS:-1}
ci_gate=${CI_GATE:-0}
max_ci_fixes=${MAX_CI_FIXES:-2}
ci_poll=${CI_POLL:-1m}
ci_timeout_text=${CI_TIMEOUT:-2h}
state_dir=${STATE_DIR:-$PWD/state}
case $state_dir in /*) ;; *) state_dir=$root/$state_dir ;; esac
claims_dir=$state_dir/claims
sessions_dir=$state_dir/sessions
# The claim a step works on: claims/<n>, set once the step knows <n>.
claimed=""
runs_dir=$PWD/runs
run_dir=$runs_dir/$LOOPX_RUN_ID

say() { printf 'issue-runner: %s\n' "$*" >&2; }
die() {
  say "$*"
  exit 1
}
# $LOOPX_BIN is the loopx of this run.
output() { "$LOOPX_BIN" output "$@"; }
json() { "$LOOPX_BIN" json "$@"; }

# FORGE_CMD is a command line (flags and quotes allowed); the arguments are
# appended to it.
forge() { bash -c "$forge_cmd \"\$@\"" forge "$@"; }

# seconds_of <duration>: 90, 90s, 15m, 2h, 1h30m in whole seconds (the
# durations loopx reads, without ms); fails on anything else.
seconds_of() {
  local rest=$1 total=0 n unit
  case $rest in '' | *[!0-9]*) ;; *)
    echo "$rest"
    return 0
    ;;
  esac
  while [ -n "$rest" ]; do
    n=${rest%%[!0-9]*}
    [ -n "$n" ] || return 1
    rest=${rest#"$n"}
    unit=${rest:0:1}
    rest=${rest:1}
    case $unit in
      s) total=$((total + 10#$n)) ;;
      m) total=$((total + 10#$n * 60)) ;;
      h) total=$((total + 10#$n * 3600)) ;;
      *) return 1 ;;
    esac
  done
  echo "$total"
}

# Every setting that is missing or wrong, and a missing forge CLI, reported
# at once: one run to find them all, not one per fix.
problems=()
[ -n "$repo" ] || problems+=("set REPO to the repository to work on (owner/name)")
[ -n "$allowed_authors" ] ||
  problems+=("set ALLOWED_AUTHORS (comma-separated logins): only their issues are given to the agent")
case $max_starts in
  '' | *[!0-9]* | 0) problems+=("MAX_STARTS_PER_HOUR must be a positive integer, not '$max_starts'") ;;
esac
case $max_concurrent in
  '' | *[!0-9]* | 0) problems+=("MAX_CONCURRENT must be a positive integer, not '$max_concurrent'") ;;
esac
case $max_restarts in
  '' | *[!0-9]*) problems+=("MAX_RESTARTS must be a number, not '$max_restarts'") ;;
esac
case $ci_gate in
  0 | 1) ;;
  *) problems+=("CI_GATE must be 0 or 1, not '$ci_gate'") ;;
esac
case $max_ci_fixes in
  '' | *[!0-9]*) problems+=("MAX_CI_FIXES must be a number, not '$max_ci_fixes'") ;;
esac
ci_timeout=$(seconds_of "$ci_timeout_text") ||
  problems+=("CI_TIMEOUT must be a duration (90s, 15m, 2h, 1h30m; a bare number is seconds), not '$ci_timeout_text'")
seconds_of "$ci_poll" >/dev/null ||
  problems+=("CI_POLL must be a duration (30s, 1m; a bare number is seconds), not '$ci_poll'")
forge_program=${forge_cmd%% *}
if ! command -v "$forge_program" >/dev/null 2>&1; then
  if [ "$forge_program" = gh ]; then
    problems+=("the GitHub CLI, gh, is not installed (or not on PATH): install it (https://cli.github.com) and log in with 'gh auth login', or set FORGE_CMD to a gh-compatible command")
  else
    problems+=("FORGE_CMD's command '$forge_program' is not installed (or not on PATH)")
  fi
fi
if [ ${#problems[@]} -eq 1 ]; then
  die "${problems[0]}"
elif [ ${#problems[@]} -gt 1 ]; then
  say "cannot start; ${#problems[@]} thing(s) to fix (in a project env file: loopx run -e .env issue-runner):"
  for problem in "${problems[@]}"; do say "  - $problem"; done
  exit 1
fi
mkdir -p "$state_dir/starts" "$claims_dir" "$sessions_dir" || die "cannot create $state_dir"

# holder_alive <pid>: the loopx that holds a claim still runs. (In a
# container, this run's loopx may have the pid an earlier one had.)
holder_alive() {
  [ -n "$1" ] && [ "$1" != "$PPID" ] && ps -p "$1" -o command= 2>/dev/null | grep -q loopx
}

# claims_in_flight: the numbers of the claims, one a line.
claims_in_flight() {
  local f
  for f in "$claims_dir"/*; do
    case ${f##*/} in '' | *[!0-9]*) continue ;; esac
    [ -f "$f" ] && printf '%s\n' "${f##*/}"
  done
}

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

# route_of <file>: the route token of the agent's final message in <file>
# (its last `ROUTE: <token>` line, markdown emphasis ignored); done when
# it names none.
# agent_finished <status> <output>: what `loopx agent --output` ended with,
# as this step's outcome. A failure (its exit code; its output says whether
# it is permanent) or a wait (a usage limit or an outage: loopx runs the
# step again after it) is passed on, and the step ends here. Otherwise the
# agent finished: its final message goes to $run_dir/agent.log and its
# cost to $cost.
agent_finished() {
  if [ "$1" -ne 0 ]; then
    printf '%s\n' "$2"
    exit "$1"
  fi
  if [ -n "$(printf '%s' "$2" | json .retry_after)" ]; then
    printf '%s\n' "$2"
    exit 0
  fi
  cost=$(printf '%s' "$2" | json .cost_usd)
  printf '%s' "$2" | json .result >"$run_dir/agent.log"
}

route_of() {
  local route
  route=$(sed 's/[*`]//g' "$1" | sed -n 's/^[[:space:]]*ROUTE:[[:space:]]*\([^[:space:]]*\).*/\1/p' | tail -n 1)
  echo "${route:-done}"
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
  local run clone
  run=$(claim_get run)
  clone=$(claim_get clone)
  # Once only, even when the label move fails and the next run retries it.
  if [ -n "$3" ] && [ "$(claim_get commented)" != 1 ]; then
    forge issue comment "$1" -R "$repo" --body "issue-runner: $3" >&2 ||
      die "could not comment on #$1 (the next run tries again)"
    claim_set commented 1
  fi
  forge issue edit "$1" -R "$repo" --add-label "$2" --remove-label "$in_progress_label" >&2 ||
    die "could not move #$1 to $2 (the next run tries again)"
  rm -f "$claimed" "$claimed.note"
  rm -rf "${sessions_dir:?}/$1"
  [ -n "$run" ] && rm -rf "$runs_dir/$run/clone"
  case $clone in "$runs_dir"/*/clone) rm -rf "$clone" ;; esac
  say "#$1 moved to $2"
}
