# shellcheck shell=bash disable=SC2034 # agent_* results are read by the caller
# agent.sh: how loopx's ready-made workflows run an agent CLI. The one copy
# lives in dist/agent/; each workflow ships its own copy as lib/agent.sh
# (scripts/sync-agent.sh keeps them identical; a test checks it). Sourced,
# not run. Needs bash 3.2+, the loopx of the run ($LOOPX_BIN, for
# `loopx json`) and common tools: no jq, no node.
#
# Configuration (environment):
#   AGENT               claude (default), codex or gemini: the preset
#   AGENT_CMD           a command line to run instead of the preset's
#                       (flags and quotes allowed), prompt on its stdin.
#                       With AGENT set too, that preset reads its output;
#                       alone, its stdout is the agent's answer as it is
#                       (JSON results of the three CLIs are understood).
#   AGENT_ARGS          extra arguments for the preset's command (split on
#                       blanks), e.g. "--model sonnet"
#   AGENT_ALLOW         commands the agent may run besides git, comma-
#                       separated ("npm test,make lint"); the workflow adds
#                       its own check commands
#   AGENT_UNSAFE=1      no permission checks at all (claude
#                       --dangerously-skip-permissions, with IS_SANDBOX=1 as
#                       root; codex --dangerously-bypass-approvals-and-sandbox;
#                       gemini --approval-mode yolo): only in a sandbox
#   AGENT_LIMIT_WAIT    the wait after a usage or rate limit that names no
#                       reset time (default 5m), doubled for each limit in
#                       a row (LOOPX_WAITS), at most 1h
#   AGENT_PRICE_IN_PER_MTOK, AGENT_PRICE_OUT_PER_MTOK
#                       dollars per million input/output tokens, to turn
#                       codex's and gemini's token counts into cost_usd
#
# agent_run <base> <workdir> <prompt-file> [<allowed command>...]
#   Runs the agent in <workdir> with the prompt file on its stdin, one line
#   of progress per step on stderr, and keeps, per script run:
#     <base>[.wait-<W>][.attempt-<M>].events.jsonl   its stdout, as is
#     <base>[...].final.txt                          its final message
#     <base>[...].stderr.log                         its stderr
#   Returns 0 when the agent did its turn; sets agent_final (the final
#   message's file) and agent_cost (dollars, or empty). Returns 2 when it
#   hit a usage or rate limit: agent_wait holds the seconds to wait, and
#   agent_emit_wait prints the retry_after output. Returns 1 when it failed
#   (a message on stderr names the files); a run with denied permissions
#   fails the same way, and so does every retry of it, without starting
#   the agent again.
#
# agent_output <loopx output options>: `loopx output`, plus the run's
#   cost_usd when there is one.

agent_say() { printf '%s: %s\n' "${agent_label:-agent}" "$*" >&2; }

agent_json() { "$LOOPX_BIN" json "$@"; }

# agent_seconds <duration>: 90, 90s, 15m, 2h, 1h30m, 500ms -> whole seconds
# (at least 1); fails on anything else.
agent_seconds() {
  local d=$1 total=0 n unit
  case $d in '' | *[!0-9hms]*) return 1 ;; esac
  case $d in *[0-9]) d=${d}s ;; esac
  while [ -n "$d" ]; do
    n=${d%%[!0-9]*}
    [ -n "$n" ] || return 1
    d=${d#"$n"}
    case $d in
      ms*) unit=ms d=${d#ms} ;;
      h*) unit=h d=${d#h} ;;
      m*) unit=m d=${d#m} ;;
      s*) unit=s d=${d#s} ;;
      *) return 1 ;;
    esac
    n=$((10#$n))
    case $unit in
      ms) total=$((total + (n + 999) / 1000)) ;;
      h) total=$((total + n * 3600)) ;;
      m) total=$((total + n * 60)) ;;
      s) total=$((total + n)) ;;
    esac
  done
  [ "$total" -ge 1 ] || total=1
  echo "$total"
}

# The wait for a limit without a reset time: AGENT_LIMIT_WAIT, doubled per
# wait already made in this iteration, at most an hour.
agent_default_wait() {
  local base waits=${LOOPX_WAITS:-0} w
  base=$(agent_seconds "${AGENT_LIMIT_WAIT:-5m}") || {
    agent_say "AGENT_LIMIT_WAIT must be a duration like 300, 90s, 5m or 1h, not '${AGENT_LIMIT_WAIT:-}'; waiting 5m"
    base=300
  }
  case $waits in '' | *[!0-9]*) waits=0 ;; esac
  w=$base
  while [ "$waits" -gt 0 ] && [ "$w" -lt 3600 ]; do
    w=$((w * 2))
    waits=$((waits - 1))
  done
  [ "$w" -le 3600 ] || w=3600
  [ "$base" -le 3600 ] || w=$base
  echo "$w"
}

# agent_until <time text>: seconds from now until a reset time the agent
# printed ("1pm", "Jan 25th, 2030 7:33 PM", an epoch in s or ms); fails
# when it cannot tell (date -d is GNU's: elsewhere the default wait).
agent_until() {
  local t=$1 at now
  now=$(date +%s)
  case $t in
    *[!0-9]*)
      t=$(printf '%s' "$t" | sed -E 's/\(.*\)//; s/([0-9])(st|nd|rd|th)/\1/g; s/,//g; s/[.[:space:]]*$//')
      at=$(date -d "$t" +%s 2>/dev/null) || return 1
      # A time of day already past today means tomorrow.
      [ "$at" -gt "$now" ] || at=$((at + 86400))
      ;;
    '') return 1 ;;
    *)
      at=$t
      [ "${#at}" -le 11 ] || at=$((at / 1000))
      ;;
  esac
  [ "$at" -gt "$now" ] || return 1
  echo $((at - now))
}

# ------------------------------------------------------------- presets

# agent_preset <workdir> <allowed command>...: sets agent_cmd (an array),
# the preset's command line.
agent_preset() {
  local workdir=$1 allow=() a more=() git_dir
  shift
  agent_cmd=()
  for a in "$@"; do [ -n "$a" ] && allow+=("$a"); done
  if [ -n "${AGENT_ALLOW:-}" ]; then
    while IFS= read -r a; do
      a=$(printf '%s' "$a" | sed 's/^[[:space:]]*//; s/[[:space:]]*$//')
      [ -n "$a" ] && allow+=("$a")
    done <<EOF
$(printf '%s\n' "$AGENT_ALLOW" | tr ',' '\n')
EOF
  fi
  # shellcheck disable=SC2206 # AGENT_ARGS is split on blanks, as documented
  [ -n "${AGENT_ARGS:-}" ] && more=(${AGENT_ARGS})
  case $agent_kind in
    claude)
      agent_cmd=(claude -p --output-format stream-json --verbose)
      if [ "${AGENT_UNSAFE:-0}" = 1 ]; then
        agent_cmd+=(--dangerously-skip-permissions)
      else
        agent_cmd+=(--permission-mode acceptEdits --allowedTools "Bash(git:*)")
        for a in ${allow[@]+"${allow[@]}"}; do
          agent_cmd+=(--allowedTools "Bash($a)" --allowedTools "Bash($a:*)")
        done
      fi
      ;;
    codex)
      agent_cmd=(codex exec --json)
      if [ "${AGENT_UNSAFE:-0}" = 1 ]; then
        agent_cmd+=(--dangerously-bypass-approvals-and-sandbox)
      else
        agent_cmd+=(--sandbox workspace-write)
        # The sandbox keeps .git read-only: the agent may commit.
        if git_dir=$(cd "$workdir" 2>/dev/null && git rev-parse --path-format=absolute --git-common-dir 2>/dev/null); then
          git_dir=$(printf '%s' "$git_dir" | sed 's/[\\"]/\\&/g')
          agent_cmd+=(-c "sandbox_workspace_write.writable_roots=[\"$git_dir\"]")
        fi
      fi
      (cd "$workdir" && git rev-parse --git-dir >/dev/null 2>&1) || agent_cmd+=(--skip-git-repo-check)
      ;;
    gemini)
      agent_cmd=(gemini --output-format stream-json --skip-trust)
      if [ "${AGENT_UNSAFE:-0}" = 1 ]; then
        agent_cmd+=(--approval-mode yolo)
      else
        agent_cmd+=(--approval-mode auto_edit --allowed-tools "run_shell_command(git)")
        for a in ${allow[@]+"${allow[@]}"}; do
          agent_cmd+=(--allowed-tools "run_shell_command($a)")
        done
      fi
      ;;
  esac
  agent_cmd+=(${more[@]+"${more[@]}"})
}

# ------------------------------------------------------------ progress

# agent_short <text>: its first line, cut to 160 characters.
agent_short() {
  local s
  s=$(printf '%b' "$1" | sed -n '/[^[:space:]]/{p;q;}')
  [ "${#s}" -le 160 ] || s="${s:0:157}..."
  printf '%s' "$s"
}

# The fields read from each event, in order (claude, codex, gemini).
agent_fields=(.type .subtype
  .message.content.0.type .message.content.0.text .message.content.0.name
  .message.content.0.input.command .message.content.0.input.file_path
  .message.content.0.input.pattern .message.content.0.input.description
  .item.type .item.text .item.command .item.exit_code .item.message
  .role .content .tool_name .parameters.command .parameters.file_path
  .parameters.dir_path .parameters.pattern .status .error.message)

# Reads an agent's event stream on stdin, prints a line per step on stderr.
agent_progress() {
  local line f=() i pending="" what
  agent_json --lines "${agent_fields[@]}" | while IFS= read -r line; do
    f=()
    i=0
    while [ "$i" -lt ${#agent_fields[@]} ]; do
      f[i]=${line%%$'\t'*}
      case $line in *$'\t'*) line=${line#*$'\t'} ;; *) line="" ;; esac
      i=$((i + 1))
    done
    what=""
    case ${f[0]} in
      assistant)
        case ${f[2]} in
          text) what=$(agent_short "${f[3]}") ;;
          tool_use) what="${f[4]} $(agent_short "${f[5]:-${f[6]:-${f[7]:-${f[8]}}}}")" ;;
        esac
        ;;
      item.started)
        [ "${f[9]}" = command_execution ] && what="run $(agent_short "${f[11]}")"
        ;;
      item.completed)
        case ${f[9]} in
          agent_message) what=$(agent_short "${f[10]}") ;;
          command_execution) [ "${f[12]}" = 0 ] || what="command failed (exit ${f[12]})" ;;
          file_change) what="edited files" ;;
          error) what="error: $(agent_short "${f[13]}")" ;;
        esac
        ;;
      turn.failed) what="failed: $(agent_short "${f[22]}")" ;;
      message)
        # gemini streams its text in pieces: shown once it is complete.
        if [ "${f[14]}" = assistant ]; then
          pending="$pending${f[15]}"
          continue
        fi
        ;;
      tool_use) what="${f[16]} $(agent_short "${f[17]:-${f[18]:-${f[19]:-${f[20]}}}}")" ;;
      tool_result) [ "${f[21]}" = error ] && what="tool failed: $(agent_short "${f[22]}")" ;;
      result)
        [ "${f[21]}" = error ] && what="failed: $(agent_short "${f[22]}")"
        ;;
    esac
    if [ -n "$pending" ]; then
      agent_say "$(agent_short "$pending")"
      pending=""
    fi
    [ -n "$what" ] && agent_say "$what"
  done
}

# ------------------------------------------------------- reading the run

# agent_last <type> <path>...: the fields of the last event of that type.
agent_last() {
  local type=$1
  shift
  agent_json --lines .type "$@" <"$agent_events" | sed -n "s/^$type"$'\t'"//p" | tail -n 1
}

# agent_field <record> <n>: field n (1-based) of a tab-separated record,
# unescaped.
agent_field() {
  printf '%s\n' "$1" | cut -f "$2" | {
    IFS= read -r v
    printf '%b' "$v"
  }
}

# Which CLI wrote the events: claude, codex, gemini, or plain text.
agent_format() {
  local first
  first=$(agent_json --lines .type .subtype .session_id <"$agent_events" | sed -n '1p')
  case $first in
    system$'\t'init*) echo claude ;;
    thread.started* | turn.* | item.*) echo codex ;;
    init$'\t'$'\t'?*) echo gemini ;;
    result$'\t'*$'\t'?*) echo claude-json ;;
    *)
      if [ -n "$first" ] && [ -n "$(agent_json .response <"$agent_events" 2>/dev/null)" ]; then
        echo gemini-json
      else
        echo plain
      fi
      ;;
  esac
}

# agent_price <input tokens> <output tokens>: dollars, or nothing without
# both prices.
agent_price() {
  local in_tokens=$1 out_tokens=$2
  [ -n "${AGENT_PRICE_IN_PER_MTOK:-}" ] && [ -n "${AGENT_PRICE_OUT_PER_MTOK:-}" ] || return 0
  awk -v i="$in_tokens" -v o="$out_tokens" -v pi="$AGENT_PRICE_IN_PER_MTOK" -v po="$AGENT_PRICE_OUT_PER_MTOK" \
    'BEGIN { printf "%.6f\n", (i * pi + o * po) / 1000000 }'
}

# agent_limit_in <text>: the wait a limit message asks for, in seconds:
# its reset time when it names one, else the default wait. Fails when the
# text is no limit.
agent_limit_in() {
  local t=$1 reset=""
  case $t in
    *"hit your limit"* | *"usage limit"* | *"rate limit"* | *"Rate limit"* | *429* | \
      *"Too Many Requests"* | *RESOURCE_EXHAUSTED* | *"Quota exceeded"* | *"quota exceeded"*) ;;
    *) return 1 ;;
  esac
  reset=$(printf '%s' "$t" | sed -n 's/.*[Rr]etry after \([0-9][0-9]*\)\(\.[0-9]*\)\{0,1\}s.*/\1/p' | head -n 1)
  if [ -n "$reset" ]; then
    echo $((reset + 1))
    return 0
  fi
  reset=$(printf '%s' "$t" | sed -n 's/.*resets_in_seconds"\{0,1\}[: ]*\([0-9][0-9]*\).*/\1/p' | head -n 1)
  if [ -n "$reset" ] && [ "$reset" -gt 0 ]; then
    echo "$reset"
    return 0
  fi
  reset=$(printf '%s' "$t" | sed -nE 's/.*([Tt]ry again at|resets) ([^·]*).*/\2/p' | head -n 1)
  if [ -n "$reset" ] && agent_until "$reset"; then
    return 0
  fi
  agent_default_wait
}

# ---------------------------------------------------------------- run

agent_run() {
  local base=$1 workdir=$2 prompt=$3 status rec text limit denied reason
  shift 3
  agent_final="" agent_cost="" agent_wait=""
  agent_label=${agent_label:-agent}
  if [ -f "$base.denied" ]; then
    agent_say "not starting the agent again: $(cat "$base.denied")"
    return 1
  fi
  local suffix=""
  case ${LOOPX_WAITS:-0} in '' | 0 | *[!0-9]*) ;; *) suffix=.wait-$LOOPX_WAITS ;; esac
  case ${LOOPX_ATTEMPT:-1} in '' | 1 | *[!0-9]*) ;; *) suffix=$suffix.attempt-$LOOPX_ATTEMPT ;; esac
  agent_events=$base$suffix.events.jsonl
  agent_final=$base$suffix.final.txt
  agent_stderr=$base$suffix.stderr.log
  : >"$agent_final" || return 1

  if [ -n "${AGENT_CMD:-}" ]; then
    agent_kind=${AGENT:-plain}
    agent_cmd=(bash -c "$AGENT_CMD")
  else
    agent_kind=${AGENT:-claude}
    case $agent_kind in
      claude | codex | gemini) ;;
      *)
        agent_say "AGENT must be claude, codex or gemini (or set AGENT_CMD), not '$agent_kind'"
        return 1
        ;;
    esac
    agent_preset "$workdir" "$@"
  fi
  case $agent_kind in
    claude | codex | gemini | plain) ;;
    *)
      agent_say "AGENT must be claude, codex or gemini, not '$agent_kind'"
      return 1
      ;;
  esac

  # As root, claude refuses to skip permissions outside a sandbox it is
  # told about.
  local env=()
  if [ "$agent_kind" = claude ] && [ "${AGENT_UNSAFE:-0}" = 1 ] && [ "$(id -u)" = 0 ]; then
    env=(IS_SANDBOX=1)
  fi
  # In a subshell whose own stderr is /dev/null (the agent's progress goes
  # to fd 3, the real one): when loopx stops the step, bash reports the
  # killed agent there ("Terminated"), not in the user's terminal.
  (
    trap 'exit 143' TERM
    trap 'exit 129' HUP
    exec 2>/dev/null
    if [ "$agent_kind" = plain ]; then
      # The command's stdout, shown as it comes.
      (cd "$workdir" && exec env ${env[@]+"${env[@]}"} "${agent_cmd[@]}") <"$prompt" 2>"$agent_stderr" |
        tee "$agent_events" >&3
    else
      (cd "$workdir" && exec env ${env[@]+"${env[@]}"} "${agent_cmd[@]}") <"$prompt" 2>"$agent_stderr" |
        tee "$agent_events" | agent_progress 2>&3
    fi
    exit "${PIPESTATUS[0]}"
  ) 3>&2
  status=$?

  local files="$agent_events, $agent_stderr"
  # The final message, whatever the format.
  text=""
  limit=""
  denied=""
  reason=""
  case $(agent_format) in
    claude)
      rec=$(agent_last result .result .is_error .api_error_status .total_cost_usd .permission_denials.0.tool_name .permission_denials.0.tool_input.file_path .permission_denials.0.tool_input.command)
      if [ -n "$rec" ]; then
        text=$(agent_field "$rec" 1)
        agent_cost=$(agent_field "$rec" 4)
        if [ -n "$(agent_field "$rec" 5)" ]; then
          denied="$(agent_field "$rec" 5) $(agent_field "$rec" 6)$(agent_field "$rec" 7)"
        fi
        if [ "$(agent_field "$rec" 2)" = true ]; then
          reason=$text
          if [ "$(agent_field "$rec" 3)" = 429 ]; then
            limit=$(agent_limit_in "429 $text")
          else
            limit=$(agent_limit_in "$text") || limit=""
          fi
        fi
      else
        reason="it ended without a result"
      fi
      # A subscription's usage limit, with its reset time.
      rec=$(agent_last rate_limit_event .rate_limit_info.status .rate_limit_info.resetsAt)
      if [ "$(agent_field "$rec" 1)" = rejected ] && [ -n "$reason" ]; then
        limit=$(agent_until "$(agent_field "$rec" 2)") || limit=$(agent_default_wait)
      fi
      ;;
    claude-json)
      rec=$(agent_json .result .is_error .total_cost_usd .permission_denials.0.tool_name <"$agent_events")
      text=$(agent_field "$rec" 1)
      agent_cost=$(agent_field "$rec" 3)
      [ -n "$(agent_field "$rec" 4)" ] && denied=$(agent_field "$rec" 4)
      if [ "$(agent_field "$rec" 2)" = true ]; then
        reason=$text
        limit=$(agent_limit_in "$text") || limit=""
      fi
      ;;
    codex)
      rec=$(agent_json --lines .type .item.type .item.text <"$agent_events" |
        sed -n 's/^item\.completed\tagent_message\t//p' | tail -n 1)
      text=$(printf '%b' "$rec")
      rec=$(agent_json --lines .type .usage.input_tokens .usage.output_tokens <"$agent_events" |
        awk -F'\t' '$1 == "turn.completed" { i += $2; o += $3; n++ } END { if (n) print i "\t" o }')
      [ -n "$rec" ] && agent_cost=$(agent_price "$(agent_field "$rec" 1)" "$(agent_field "$rec" 2)")
      reason=$(agent_last turn.failed .error.message)
      [ -n "$reason" ] || { [ -z "$rec" ] && reason=$(agent_last error .message); }
      [ -n "$reason" ] || [ -n "$rec" ] || reason="it ended without completing its turn"
      reason=$(printf '%b' "$reason")
      if [ -n "$reason" ]; then
        limit=$(agent_limit_in "$reason $(grep -o '"resets_in_seconds":[0-9]*' "$agent_events" "$agent_stderr" 2>/dev/null | head -n 1)") || limit=""
      fi
      # The sandbox's refusals: a command that could not write. `exec
      # --json` leaves out a command the sandbox refused outright; the
      # session's own record (its rollout, named after the thread) has it.
      rec=$(agent_json --lines .type .item.type .item.status .item.command .item.aggregated_output <"$agent_events" |
        awk -F'\t' '$1 == "item.completed" && $2 == "command_execution" && $5 ~ /Read-only file system/ { print $4; exit }')
      if [ -z "$rec" ]; then
        local thread rollout
        thread=$(agent_last thread.started .thread_id)
        rollout=""
        [ -n "$thread" ] && rollout=$(find "${CODEX_HOME:-$HOME/.codex}/sessions" -name "rollout-*-$thread.jsonl" 2>/dev/null | head -n 1)
        if [ -n "$rollout" ]; then
          rec=$(agent_json --lines .payload.type .payload.call_id .payload.arguments .payload.output <"$rollout" |
            awk -F'\t' '$1 == "function_call" { args[$2] = $3 } $1 == "function_call_output" && $4 ~ /Read-only file system/ { print args[$2]; exit }')
          [ -n "$rec" ] && rec=$(printf '%b' "$rec" | agent_json .cmd .command 2>/dev/null | tr '\t' ' ' | sed 's/ *$//')
        fi
      fi
      [ -n "$rec" ] && denied="a write by '$(agent_short "$rec")' (its sandbox made the target read-only)"
      ;;
    gemini)
      # The text of the last turn: the assistant's pieces after the last tool.
      text=$(agent_json --lines .type .role .content <"$agent_events" |
        awk -F'\t' '$1 == "tool_use" || $1 == "tool_result" { t = "" } $1 == "message" && $2 == "assistant" { t = t $3 } END { printf "%s", t }')
      text=$(printf '%b' "$text")
      rec=$(agent_last result .status .error.message .stats.input_tokens .stats.output_tokens)
      if [ -z "$rec" ]; then
        reason="it ended without a result"
      else
        agent_cost=$(agent_price "$(agent_field "$rec" 3)" "$(agent_field "$rec" 4)")
        if [ "$(agent_field "$rec" 1)" = error ]; then
          reason=$(agent_field "$rec" 2)
          if [ "$status" = 173 ]; then
            limit=$(agent_limit_in "429 $reason")
          else
            limit=$(agent_limit_in "$reason") || limit=""
          fi
        fi
      fi
      rec=$(agent_json --lines .type .status .error.type .tool_id <"$agent_events" |
        awk -F'\t' '$1 == "tool_result" && $2 == "error" && $3 == "policy_violation" { print $4; exit }')
      if [ -n "$rec" ]; then
        denied=$(agent_json --lines .type .tool_id .tool_name .parameters.command .parameters.file_path <"$agent_events" |
          awk -F'\t' -v id="$rec" '$1 == "tool_use" && $2 == id { print $3 " " $4 $5; exit }')
        denied=$(printf '%b' "$denied")
      fi
      ;;
    gemini-json)
      text=$(agent_json .response <"$agent_events")
      reason=$(agent_json .error.message <"$agent_events")
      [ -n "$reason" ] && { limit=$(agent_limit_in "$reason") || limit=""; }
      ;;
    plain)
      text=$(cat "$agent_events")
      if [ "$status" -ne 0 ]; then
        limit=$(agent_limit_in "$(tail -n 5 "$agent_events") $(tail -n 5 "$agent_stderr")") || limit=""
      fi
      ;;
  esac
  printf '%s\n' "$text" >"$agent_final"
  # A limit on the agent's side is a wait, failed exit status or not.
  if [ -n "$limit" ]; then
    agent_wait=$limit
    agent_say "the agent hit a usage or rate limit: waiting ${agent_wait}s, then running this step again ($(agent_short "${reason:-limit}"); see $files)"
    return 2
  fi
  if [ -n "$denied" ]; then
    printf '%s' "it was denied: $denied" >"$base.denied"
    agent_say "the agent was denied a permission it needs: $denied. Allow it (AGENT_ALLOW; for Codex, its sandbox settings in AGENT_ARGS), or in a sandbox turn the checks off with AGENT_UNSAFE=1 (see README.md). Its output: $files"
    return 1
  fi
  if [ "$status" -ne 0 ]; then
    # Why, in its words: the error it reported, else the end of its stderr.
    [ -n "$reason" ] || reason=$(sed -n '/[^[:space:]]/p' "$agent_stderr" 2>/dev/null | tail -n 1)
    agent_say "the agent failed (exit $status)${reason:+: $(agent_short "$reason")}; its output: $files"
    return 1
  fi
  if [ -n "$reason" ]; then
    agent_say "the agent failed: $(agent_short "$reason"); its output: $files"
    return 1
  fi
  return 0
}

# agent_emit_wait: the output that has loopx run this script again later.
agent_emit_wait() {
  if [ -n "$agent_cost" ]; then
    printf '{"retry_after":%s,"cost_usd":%s}\n' "$agent_wait" "$agent_cost"
  else
    printf '{"retry_after":%s}\n' "$agent_wait"
  fi
}

# agent_output <loopx output options>: with the run's cost when known.
agent_output() {
  local json
  json=$("$LOOPX_BIN" output "$@") || return 1
  case $agent_cost in
    '' | *[!0-9.eE+-]*) printf '%s\n' "$json" ;;
    *) printf '%s,"cost_usd":%s}\n' "${json%\}}" "$agent_cost" ;;
  esac
}
