#!/usr/bin/env bash
# Ctrl-C, a hundred times (README "Reliability notes"): runs a workflow N
# times and ends each run with SIGINT or SIGTERM at a random moment, then
# checks the exit code (128 + the first signal), that no process the run
# started is left alive, and that a second signal ended the run at once.
#
# The workflow's script alternates at random between a quick iteration and a
# busy one that starts a grandchild ignoring SIGINT and SIGTERM plus a plain
# background job, works for up to 0.3 s, then cleans both up itself. A
# signal during a busy iteration finds the grandchild, which only the SIGKILL
# at the end of the 5-second grace period (§7.3) ends; a third of the runs
# get a second signal at a random moment of that grace period, which must
# kill at once. In a third of the runs every iteration is quick, so the loop
# spends much of its time between scripts and many signals land there.
#
# Each run reports where its first signal landed, from the marks the script
# writes as its first and last lines: in-script (between them),
# between-scripts (after one script's last line, before the next one's
# first: loopx's own work between iterations, plus the edges of bash's
# start and exit), or before the first script.
#
# Processes are tracked by pid, never by name: every process of a run
# inherits a marker variable, and /proc/<pid>/environ of every live process
# is checked for it after loopx exits (the scripts also record the pids they
# start, to say which ones were left). Leftovers are killed and reported.
#
# --shim: the npm shim instead (dist/npm/bin/loopx.js, README "Reliability
# notes"). Each run starts `node bin/loopx.js run -n 1 stress` (the shim runs
# the binary through LOOPX_BINARY_PATH), waits for the script's first line on
# stderr, and sends the shim SIGTERM at once, while CPU-bound processes
# (--burn, default 4) compete for the cores: a shim preempted at the wrong
# moment must still forward the signal, never die of it and orphan the run.
# Each run must end with exit code 143 (not death by the signal) and leave
# no process alive. Under Node >= 22.15 the shim replaces itself with the
# binary; --node picks the Node to run it with (default: node on PATH).
#
# --sigkill: SIGKILL of loopx itself (DESIGN.md "Beyond the spec": nothing
# outlives loopx). Each run's script starts a background job and a setsid
# escapee (in a quarter of the runs also a grandchild that ignores SIGTERM,
# which only the SIGKILL after the grace period ends), or in a third of the
# runs loops through quick iterations; loopx gets SIGKILL at a random moment
# after the script's first line, under CPU load (--burn). The run's watcher
# must then end every process of the run within the grace period plus 3 s,
# and exit itself; what is still alive then is a leftover.
#
# Not part of the quick test command (a run takes up to ~6 s); CI runs it
# with a small count, and the --shim mode with 100 runs.
set -euo pipefail

usage() {
  cat <<EOF
Usage: scripts/stress.sh [options]

Options:
  -n <runs>      how many runs (default 100)
  -j <jobs>      runs at the same time (default 4)
  --loopx <bin>  the loopx binary (default: cargo build, then target/debug/loopx)
  --shim         SIGTERM through the npm shim right after the script's first
                 line, under CPU load (see the top of this file)
  --sigkill      SIGKILL of loopx at a random moment, under CPU load: its
                 watcher must leave no process of the run alive
  --node <node>  with --shim: the Node that runs the shim (default: node)
  --burn <n>     with --shim or --sigkill: CPU-bound processes meanwhile
                 (default 4)
  -h, --help     show this help

Exit status: 0 when every run exited with 128 + its first signal (143 with
--shim), left no process alive, and ended within 1 s of a second signal; 1
otherwise.
EOF
}

runs=100
jobs=4
loopx=
shim=
sigkill=
node=node
burn=4
while [[ $# -gt 0 ]]; do
  case $1 in
    -n) runs=${2:?-n needs a number}; shift 2 ;;
    -j) jobs=${2:?-j needs a number}; shift 2 ;;
    --loopx) loopx=${2:?--loopx needs a path}; shift 2 ;;
    --shim) shim=1; shift ;;
    --sigkill) sigkill=1; shift ;;
    --node) node=${2:?--node needs a path}; shift 2 ;;
    --burn) burn=${2:?--burn needs a number}; shift 2 ;;
    -h | --help) usage; exit 0 ;;
    *) printf 'stress: unknown argument %s\n' "$1" >&2; usage >&2; exit 1 ;;
  esac
done
[[ $runs =~ ^[1-9][0-9]*$ && $jobs =~ ^[1-9][0-9]*$ && $burn =~ ^[0-9]+$ ]] || {
  printf 'stress: -n and -j take positive whole numbers, --burn a whole number\n' >&2
  exit 1
}
[[ -d /proc/self ]] || { printf 'stress: needs /proc (Linux)\n' >&2; exit 1; }
[[ -n ${EPOCHREALTIME:-} ]] || { printf 'stress: needs bash 5 or later\n' >&2; exit 1; }

root=$(cd "$(dirname "$0")/.." && pwd)
if [[ -z $loopx ]]; then
  cargo build --quiet --manifest-path "$root/Cargo.toml"
  loopx=${CARGO_TARGET_DIR:-$root/target}/debug/loopx
fi
loopx=$(realpath "$loopx")
[[ -x $loopx ]] || { printf 'stress: %s is not executable\n' "$loopx" >&2; exit 1; }

work=$(mktemp -d "${TMPDIR:-/tmp}/loopx-stress.XXXXXX")
trap 'rm -rf "$work"' EXIT

# Whether a process is alive (a zombie is not).
alive() {
  local stat
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  stat=${stat##*) }
  [[ ${stat%% *} != Z ]]
}

# Every live process whose environment holds the variable `$1` (one grep
# over all of /proc; processes that vanish meanwhile are skipped).
marked() {
  local file pid
  while IFS= read -r file; do
    pid=${file#/proc/}
    pid=${pid%/environ}
    if alive "$pid"; then printf '%s\n' "$pid"; fi
  done < <(grep -lzxF -- "$1" /proc/[0-9]*/environ 2>/dev/null || true)
}

# CPU-bound processes, stopped when the script exits.
burners=()
start_burners() {
  local i
  for (( i = 0; i < burn; i++ )); do
    bash -c 'while :; do :; done' &
    burners+=("$!")
  done
  # shellcheck disable=SC2329 # run by the EXIT trap
  stop_burners() {
    if (( ${#burners[@]} )); then kill "${burners[@]}" 2>/dev/null || true; fi
    rm -rf "$work"
  }
  trap stop_burners EXIT
}

# Runs the function `$2` (which prints one result line per run) `runs`
# times, `jobs` at a time, into the file `$1`.
run_all() {
  local results=$1 fn=$2 started p live pids=()
  : >"$results"
  for (( started = 1; started <= runs; started++ )); do
    while (( ${#pids[@]} >= jobs )); do
      wait -n "${pids[@]}" || true
      live=()
      for p in "${pids[@]}"; do
        if kill -0 "$p" 2>/dev/null; then live+=("$p"); fi
      done
      pids=("${live[@]}")
    done
    "$fn" "$started" >>"$results" &
    pids+=("$!")
  done
  for p in "${pids[@]}"; do wait "$p" || true; done
}

if [[ -n $sigkill ]]; then
  mkdir -p "$work/project/.loopx/stress"
  cat >"$work/project/.loopx/stress/index.sh" <<'EOF'
#!/bin/bash
echo started >&2
if [[ -n ${STRESS_QUICK:-} ]]; then
  sleep "0.0$(( RANDOM % 5 ))"
  printf '{}'
  exit 0
fi
sleep 1000 &
setsid sleep 1000 </dev/null >/dev/null 2>&1 &
if (( RANDOM % 4 == 0 )); then ( trap '' TERM; exec sleep 1000 ) & fi
while :; do sleep 0.05; done
EOF
  start_burners

  # The watcher of loopx `$1`: its child whose argv[0] is loopx-watcher
  # (set by the exec; the comm name follows a moment later).
  # shellcheck disable=SC2329 # run by kill_run
  watcher_of() {
    local k kids=()
    # 2>/dev/null first: a redirection that fails reports on the stderr in
    # force when it is made (a process gone meanwhile is no news).
    read -ra kids 2>/dev/null <"/proc/$1/task/$1/children" || true
    for k in "${kids[@]}"; do
      if [[ $(tr '\0' '\n' 2>/dev/null <"/proc/$k/cmdline" | head -n 1) == loopx-watcher ]]; then
        printf '%s' "$k"
      fi
    done
  }

  # One run: prints "<run> <exit status> <seconds until gone> <leftovers...>".
  # shellcheck disable=SC2329 # run by run_all
  kill_run() {
    local n=$1
    local dir=$work/run-$n mark quick='' pid w code=0 t0 took left=() p i
    mark="LOOPX_STRESS_RUN=$$-$n-$RANDOM"
    mkdir -p "$dir"
    cp -R "$work/project/.loopx" "$dir/"
    if (( RANDOM % 3 == 0 )); then quick=1; fi
    (cd "$dir" && exec env "$mark" STRESS_QUICK="$quick" "$loopx" run stress \
      >/dev/null 2>"$dir/stderr") &
    pid=$!
    for (( i = 0; i < 3000; i++ )); do
      [[ -s $dir/stderr ]] && break
      sleep 0.01
    done
    sleep "0.$(( RANDOM % 3 ))$(( RANDOM % 10 ))"
    w=$(watcher_of "$pid")
    kill -KILL "$pid" 2>/dev/null || true
    # (without bash's "Killed" notice)
    { wait "$pid"; } 2>/dev/null || code=$?
    t0=${EPOCHREALTIME/./}
    # The grace period (5 s) plus 3 s for the watcher to finish.
    while (( ${EPOCHREALTIME/./} - t0 < 8000000 )); do
      mapfile -t left < <(marked "$mark")
      if [[ -n $w ]] && alive "$w"; then left+=("$w:watcher"); fi
      (( ${#left[@]} )) || break
      sleep 0.02
    done
    took=$(( (${EPOCHREALTIME/./} - t0) / 1000 ))
    took=$(printf '%d.%03d' $(( took / 1000 )) $(( took % 1000 )))
    for p in "${left[@]}"; do kill -KILL "${p%%:*}" 2>/dev/null || true; done
    [[ -n $w ]] || left+=("no-watcher")
    printf '%s %s %s %s\n' "$n" "$code" "$took" "${left[*]:-}"
    rm -rf "$dir"
  }

  printf 'stress: %d runs of %s killed with SIGKILL, %d at a time, %d CPU-bound processes\n' \
    "$runs" "$loopx" "$jobs" "$burn"
  t_start=${EPOCHREALTIME/./}
  run_all "$work/results" kill_run
  t_all=$(( (${EPOCHREALTIME/./} - t_start) / 1000000 ))
  killed=0
  leftover=0
  slowest=0
  while read -r n code took rest; do
    extra=
    if [[ $code == 137 ]]; then killed=$(( killed + 1 )); else extra=" WRONG: exit $code"; fi
    ms=$(( 10#${took/./} ))
    (( ms <= slowest )) || slowest=$ms
    if [[ -n $rest ]]; then
      leftover=$(( leftover + $(wc -w <<<"$rest") ))
      extra+=" LEFT ALIVE: $rest"
    fi
    if [[ -n $extra ]]; then printf 'run %3d  gone after %6ss%s\n' "$n" "$took" "$extra"; fi
  done < <(sort -n "$work/results")
  printf 'stress: %d of %d runs died of SIGKILL; %d processes left alive; the slowest run was gone %d ms after the kill; %d s\n' \
    "$killed" "$runs" "$leftover" "$slowest" "$t_all"
  [[ $killed -eq $runs && $leftover -eq 0 ]]
  exit
fi

if [[ -n $shim ]]; then
  shim_js=$root/dist/npm/bin/loopx.js
  node=$(command -v "$node") || { printf 'stress: node not found\n' >&2; exit 1; }
  mkdir -p "$work/project/.loopx/stress"
  # The first line on stderr, then work that ends on SIGTERM (bash runs the
  # trap once its foreground `sleep` returns, so it sleeps in short steps).
  printf '%s\n' '#!/bin/bash' 'echo started >&2' "trap 'exit 0' TERM" \
    'while :; do sleep 0.05; done' >"$work/project/.loopx/stress/index.sh"
  # Starts the shim, sends it SIGTERM as soon as its stderr has a line, and
  # prints how it ended: a number for an exit code, "signal N" for death by
  # a signal (which the shell's $? cannot tell from 128+N). A run that does
  # not end within 30 s is killed and reported as "hung".
  launcher='
import os, signal, subprocess, sys, time
err_path, argv = sys.argv[1], sys.argv[2:]
with open(err_path, "wb") as err:
    p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err)
started = time.monotonic()
while os.path.getsize(err_path) == 0 and p.poll() is None and time.monotonic() - started < 30:
    time.sleep(0.001)
try:
    p.send_signal(signal.SIGTERM)
except ProcessLookupError:
    pass
try:
    code = p.wait(timeout=30)
except subprocess.TimeoutExpired:
    p.kill()
    p.wait()
    print("hung")
    sys.exit(0)
print(code if code >= 0 else "signal %d" % -code)
'
  start_burners

  # One run: prints "<run> <how it ended> <seconds> <leftovers...>".
  # shellcheck disable=SC2329 # run by run_all
  shim_run() {
    local n=$1
    local dir=$work/run-$n mark how t0 t1 took
    mark="LOOPX_STRESS_RUN=$$-$n-$RANDOM"
    mkdir -p "$dir"
    cp -R "$work/project/.loopx" "$dir/"
    t0=${EPOCHREALTIME/./}
    how=$(cd "$dir" && env "$mark" LOOPX_BINARY_PATH="$loopx" \
      python3 -c "$launcher" "$dir/stderr" "$node" "$shim_js" run -n 1 stress)
    t1=${EPOCHREALTIME/./}
    took=$(( (t1 - t0) / 1000 ))
    took=$(printf '%d.%03d' $(( took / 1000 )) $(( took % 1000 )))
    # The shim has exited: loopx has too (it exits after the group), or was
    # orphaned. Whatever is still marked is a leftover: counted, then killed.
    local left=() p
    mapfile -t left < <(marked "$mark")
    for p in "${left[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
    printf '%s %s %s %s\n' "$n" "${how// /_}" "$took" "${left[*]:-}"
    rm -rf "$dir"
  }

  printf 'stress: %d runs of %s through %s (%s %s), %d at a time, %d CPU-bound processes\n' \
    "$runs" "$loopx" "$shim_js" "$node" "$("$node" --version)" "$jobs" "$burn"
  results=$work/results
  t_start=${EPOCHREALTIME/./}
  run_all "$results" shim_run
  t_all=$(( (${EPOCHREALTIME/./} - t_start) / 1000000 ))
  right=0
  leftover=0
  while read -r n how took rest; do
    extra=
    if [[ $how == 143 ]]; then right=$(( right + 1 )); else extra=" WRONG: ${how//_/ }"; fi
    if [[ -n $rest ]]; then
      leftover=$(( leftover + $(wc -w <<<"$rest") ))
      extra+=" LEFT ALIVE: $rest"
    fi
    if [[ -n $extra ]]; then
      printf 'run %3d  ended %-10s after %6ss%s\n' "$n" "${how//_/ }" "$took" "$extra"
    fi
  done < <(sort -n "$results")
  printf 'stress: %d of %d shim runs exited with 143, %d did not; %d processes left alive; %d s\n' \
    "$right" "$runs" "$(( runs - right ))" "$leftover" "$t_all"
  [[ $right -eq $runs && $leftover -eq 0 ]]
  exit
fi

# The workflow, shared by every run (each run has its own project root).
mkdir -p "$work/project/.loopx/stress"
cat >"$work/project/.loopx/stress/index.sh" <<'EOF'
#!/bin/bash
pids=$LOOPX_PROJECT_ROOT/pids
phases=$LOOPX_PROJECT_ROOT/phases
echo "start ${EPOCHREALTIME/./}" >>"$phases"
if [[ -n ${STRESS_QUICK:-} ]] || (( RANDOM % 2 )); then
  echo "end ${EPOCHREALTIME/./}" >>"$phases"
  printf '{}'
  exit 0
fi
# A grandchild that ignores SIGINT and SIGTERM (ignored signals stay ignored
# across exec), and a plain background job.
( trap '' INT TERM; exec sleep 1000 ) &
gc=$!
echo "$gc ignoring-grandchild" >>"$pids"
sleep 1000 &
bg=$!
echo "$bg background-job" >>"$pids"
echo "$$ script" >>"$pids"
sleep "0.$(( RANDOM % 3 ))$(( RANDOM % 10 ))"
kill -KILL "$gc" "$bg" 2>/dev/null
wait 2>/dev/null
echo "end ${EPOCHREALTIME/./}" >>"$phases"
printf '{}'
EOF

# Where the loop was at time `$2` (microseconds) by the scripts' log `$1`:
# in a script, between scripts, or before the first.
phase_at() {
  local kind t phase=before-first-script
  while read -r kind t; do
    (( t <= $2 )) || break
    if [[ $kind == start ]]; then phase=in-script; else phase=between-scripts; fi
  done <"$1" 2>/dev/null
  printf '%s' "$phase"
}

# One run: prints "<run> <signals> <mode> <phase> <seconds to exit>
# <expected> <got> <leftovers...>".
one_run() {
  local n=$1
  local dir=$work/run-$n mark quick='' sig1 sig2 ms delay grace pid code=0 expected
  local sig2_sent=
  mark="LOOPX_STRESS_RUN=$$-$n-$RANDOM"
  mkdir -p "$dir"
  cp -R "$work/project/.loopx" "$dir/"
  if (( RANDOM % 3 == 0 )); then quick=1; fi
  if (( RANDOM % 2 )); then sig1=INT; else sig1=TERM; fi
  sig2=
  if (( RANDOM % 3 == 0 )); then
    if (( RANDOM % 2 )); then sig2=INT; else sig2=TERM; fi
  fi
  # Between 50 ms (loopx has set up) and 1.55 s (several iterations in).
  ms=$(( 50 + RANDOM % 1500 ))
  delay=$(printf '%d.%03d' $(( ms / 1000 )) $(( ms % 1000 )))
  grace=$(printf '%d.%03d' $(( RANDOM % 5 )) $(( RANDOM % 1000 )))
  # A `&` job of a non-interactive shell starts with SIGINT ignored, and
  # loopx keeps a signal ignored on entry: give it the default back.
  (cd "$dir" && exec env --default-signal=INT "$mark" STRESS_QUICK="$quick" "$loopx" run stress \
    >/dev/null 2>"$dir/stderr") &
  pid=$!
  sleep "$delay"
  kill -s "$sig1" "$pid" 2>/dev/null || true
  local t_sig=${EPOCHREALTIME/./} t_now
  local t_second=$(( t_sig + 10#${grace/./} * 1000 ))
  # Both signals come from this process, loopx's parent, as from one
  # supervisor. Until it is waited for, an exited loopx stays a zombie and
  # keeps its pid, so a signal can never reach another process.
  while alive "$pid"; do
    t_now=${EPOCHREALTIME/./}
    if [[ -n $sig2 ]] && (( t_now >= t_second )); then
      kill -s "$sig2" "$pid" 2>/dev/null || true
      sig2_sent=1
      t_second=$(( 1 << 62 ))
    fi
    sleep 0.01
  done
  local t_end=${EPOCHREALTIME/./} phase took
  wait "$pid" || code=$?
  phase=$(phase_at "$dir/phases" "$t_sig")
  took=$(( (t_end - t_sig) / 1000 ))
  took=$(printf '%d.%03d' $(( took / 1000 )) $(( took % 1000 )))
  expected=$(( 128 + $(kill -l "$sig1") ))
  local left=() p role
  mapfile -t left < <(marked "$mark")
  local described=()
  for p in "${left[@]}"; do
    role=$(awk -v p="$p" '$1 == p { print $2 }' "$dir/pids" 2>/dev/null | head -n 1)
    described+=("$p:${role:-unrecorded}")
    kill -KILL "$p" 2>/dev/null || true
  done
  local mode=mixed
  [[ -z $quick ]] || mode=quick
  # A second signal that was due after loopx had exited was never sent.
  [[ -n $sig2_sent ]] || sig2=''
  printf '%s %s%s %s %s %s %s %s %s\n' "$n" "$sig1" "${sig2:++$sig2@${grace}s}" \
    "$mode" "$phase" "$took" "$expected" "$code" "${described[*]:-}"
  rm -rf "$dir"
}

printf 'stress: %d runs of %s, %d at a time\n' "$runs" "$loopx" "$jobs"
results=$work/results
: >"$results"
started=0
while (( started < runs )); do
  while (( $(jobs -rp | wc -l) >= jobs )); do
    wait -n || true
  done
  started=$(( started + 1 ))
  one_run "$started" >>"$results" &
done
wait

right=0
leftover=0
declare -A phases=()
graced=0
second=0
slow=0
while read -r n signals mode phase took expected got rest; do
  phases[$phase]=$(( ${phases[$phase]:-0} + 1 ))
  ms=$(( 10#${took/./} ))
  # Ended by SIGKILL after the 5-second grace period, or cut short in it by
  # the second signal.
  extra=
  if (( ms >= 5000 )); then
    graced=$(( graced + 1 ))
  elif [[ $signals == *+* ]]; then
    second=$(( second + 1 ))
    # §7.3 (README): a second signal in the grace period kills at once.
    at=${signals#*@}
    at=${at%s}
    if (( ms - 10#${at/./} > 1000 )); then
      slow=$(( slow + 1 ))
      extra+=" SLOW AFTER THE SECOND SIGNAL"
    fi
  fi
  if [[ $got == "$expected" ]]; then
    right=$(( right + 1 ))
  else
    extra=" WRONG EXIT CODE"
  fi
  if [[ -n $rest ]]; then
    count=$(wc -w <<<"$rest")
    leftover=$(( leftover + count ))
    extra+=" LEFT ALIVE: $rest"
  fi
  printf 'run %3d  %-20s %-5s %-20s exit %3d (expected %d) after %6ss%s\n' \
    "$n" "$signals" "$mode" "$phase" "$got" "$expected" "$took" "$extra"
done < <(sort -n "$results")

printf 'stress: the first signal landed %s\n' \
  "$(for p in "${!phases[@]}"; do printf '%s: %d, ' "$p" "${phases[$p]}"; done | sed 's/, $//')"
printf 'stress: %d runs waited out the grace period (SIGKILL after 5 s), %d were cut short in it by a second signal\n' \
  "$graced" "$second"
printf 'stress: %d of %d runs exited with the right code; %d processes left alive\n' \
  "$right" "$runs" "$leftover"
if (( slow > 0 )); then
  printf 'stress: %d runs took over 1 s to end after their second signal\n' "$slow"
fi
[[ $right -eq $runs && $leftover -eq 0 && $slow -eq 0 ]]
