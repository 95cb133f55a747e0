#!/usr/bin/env bash
# Shared by the loopx action's step scripts (install.sh, run.sh); sourced.
# Inputs are user text: checked for control characters before anything
# runs, never written raw where Actions reads commands or outputs.

# A workflow command's message: %, CR and LF escaped.
escape() {
  local s=${1//'%'/'%25'}
  s=${s//$'\r'/'%0D'}
  printf '%s' "${s//$'\n'/'%0A'}"
}

# Fails the step before anything ran.
fail() {
  printf '::error title=loopx::%s\n' "$(escape "$*")"
  exit 1
}

# TEXT with % and every control character as %XX: how a refused input is
# shown.
shown() {
  local s=$1 out='' c i
  for (( i = 0; i < ${#s}; i++ )); do
    c=${s:i:1}
    if [[ $c == '%' || $c == [[:cntrl:]] ]]; then
      out+=$(printf '%%%02X' "'$c")
    else
      out+=$c
    fi
  done
  printf '%s' "$out"
}

# Refuses any INPUT_* variable that holds a control character (a newline
# would start a new output, a summary line, or a workflow command), naming
# the input as action.yml does.
check_inputs() {
  local var name
  for var in "${!INPUT_@}"; do
    if [[ ${!var} == *[[:cntrl:]]* ]]; then
      name=${var#INPUT_}
      name=${name//_/-}
      fail "the input ${name,,} holds a control character: '$(shown "${!var}")'"
    fi
  done
}

# NAME VALUE: one step output, in the multiline form with a random
# delimiter, so that no value can end it early or add an output.
set_output() {
  local delim
  delim=loopx_$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
  [[ $2 != *"$delim"* ]] || fail "output $1: cannot be written safely"
  printf '%s<<%s\n%s\n%s\n' "$1" "$delim" "$2" "$delim" >>"${GITHUB_OUTPUT:?GITHUB_OUTPUT is not set}"
}

# TEXT for the job summary (Markdown, mid-line): HTML's &, < and > as
# entities, and the characters that start emphasis, code, links, table
# cells or strikethrough backslash-escaped.
md() {
  local s=${1//'&'/'&amp;'}
  s=${s//'<'/'&lt;'}
  s=${s//'>'/'&gt;'}
  printf '%s' "$s" | sed -E 's/([][\\`*_|~])/\\\1/g'
}
