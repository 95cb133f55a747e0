#!/bin/bash
# The last step: plain JSON on stdout works as well as `loopx output`.
# `stop: true` ends the loop with exit code 0.
msg=$(cat)
echo "[demo:finish] $msg! stopping the loop" >&2
printf '{"result":"%s","stop":true}\n' "$msg"
