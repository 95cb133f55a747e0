#!/usr/bin/env bash
# Step 1 of the loopx action (action.yml): installs loopx with the
# repository's install.sh, which checks the download against the release's
# SHA256SUMS, into $RUNNER_TEMP/loopx-<version>/bin, and puts that directory
# on PATH for the job's later steps.
#
# Input (environment):
#   INPUT_VERSION  the release to install, e.g. 0.1.0 or v0.1.0; empty: the
#                  version of the action itself (its Cargo.toml)
# Also read: RUNNER_TEMP, GITHUB_OUTPUT, GITHUB_PATH, and LOOPX_DOWNLOAD_URL
# (a mirror of the releases, as for install.sh).
# Outputs: loopx (the installed binary), version.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)

# shellcheck disable=SC1091 # lib.sh is checked on its own
. "$here/lib.sh"
check_inputs

version=${INPUT_VERSION:-}
if [ -z "$version" ]; then
  version=$(sed -n 's/^version = "\(.*\)"$/\1/p' "$root/Cargo.toml" | head -n 1)
  [ -n "$version" ] || fail "no version given, and none found in $root/Cargo.toml"
fi
version=${version#v}
case $version in
  latest) fail "version: pin a release (e.g. 0.1.0) rather than latest: a loop should not change under you" ;;
esac

dir=${RUNNER_TEMP:?RUNNER_TEMP is not set}/loopx-$version/bin
if ! sh "$root/install.sh" --quiet --version "$version" --dir "$dir"; then
  fail "could not install loopx $version (see install.sh's error above)"
fi

echo "$dir" >>"${GITHUB_PATH:?GITHUB_PATH is not set}"
set_output loopx "$dir/loopx"
set_output version "$version"
