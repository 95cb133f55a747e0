#!/bin/bash
# The demo's entry point. It starts a countdown by handing the number 3 to
# the `countdown` script: `--goto` names the next script and `--result` is
# piped to that script's stdin.
echo "[demo:index] starting a countdown from 3" >&2
"$LOOPX_BIN" output --result 3 --goto countdown
