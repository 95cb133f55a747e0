#!/bin/bash
# Reads the number piped from the previous script and counts down by going
# to itself, until it hands over to `finish`.
n=$(cat)
echo "[demo:countdown] got $n on stdin" >&2
if [ "$n" -gt 1 ]; then
  "$LOOPX_BIN" output --result "$((n - 1))" --goto countdown
else
  "$LOOPX_BIN" output --result "liftoff" --goto finish
fi
