#!/bin/sh
# loopx installer.
#
#   curl -fsSL https://github.com/loopx-dev/loopx/releases/latest/download/install.sh | sh
#   curl -fsSL .../install.sh | sh -s -- --version 1.2.3 --dir /usr/local/bin
#
# Downloads the static loopx binary for this machine from a GitHub release (or
# a mirror laid out like one), checks it against the release's SHA256SUMS and
# installs it atomically; no root needed. Tools used: uname, mktemp, mkdir,
# cp, chmod, mv, rm, tar, gzip, curl or wget, sha256sum or shasum.
#
# Every statement sits in a function and the only call is on the last line,
# so a download cut short runs nothing.

usage() {
  cat <<'EOF'
Install loopx, the static binary, for the current user.

Usage: install.sh [options]        (curl -fsSL <url>/install.sh | sh -s -- [options])

Options:
  --version <v>  install version <v> (1.2.3 or v1.2.3) instead of the latest
  --dir <dir>    install into <dir> instead of ~/.local/bin
  -q, --quiet    print errors only
  -h, --help     show this help

Environment (the options above win over these):
  LOOPX_VERSION        version to install (default: latest)
  LOOPX_INSTALL_DIR    directory to install into (default: ~/.local/bin)
  LOOPX_DOWNLOAD_URL   releases base URL (default:
                       https://github.com/loopx-dev/loopx/releases); a
                       directory served over HTTP that holds a copy of
                       dist/release/ works as a mirror
EOF
}

say() {
  [ "$lx_quiet" = 1 ] || printf '%s\n' "$*"
}

warn() {
  printf 'install.sh: warning: %s\n' "$*" >&2
}

die() {
  printf 'install.sh: error: %s\n' "$*" >&2
  exit 1
}

usage_error() {
  printf 'install.sh: error: %s (see --help)\n' "$*" >&2
  exit 2
}

cleanup() {
  if [ -n "$lx_partial" ]; then rm -f "$lx_partial"; fi
  if [ -n "$lx_tmp" ]; then rm -rf "$lx_tmp"; fi
}

parse_args() {
  while [ $# -gt 0 ]; do
    case $1 in
      -h | --help)
        usage
        exit 0
        ;;
      -q | --quiet) lx_quiet=1 ;;
      --version | --dir)
        [ $# -ge 2 ] || usage_error "$1 needs a value"
        if [ "$1" = --version ]; then lx_version=$2; else lx_dir=$2; fi
        shift
        ;;
      --version=*) lx_version=${1#*=} ;;
      --dir=*) lx_dir=${1#*=} ;;
      *) usage_error "unknown option '$1'" ;;
    esac
    shift
  done
}

# Sets lx_target to the release target for this machine. Linux gets the musl
# build whatever its libc: it is fully static.
detect_target() {
  lx_os=$(uname -s 2>/dev/null) || lx_os=""
  lx_arch=$(uname -m 2>/dev/null) || lx_arch=""
  case $lx_os in
    Linux) lx_suffix=unknown-linux-musl ;;
    Darwin) lx_suffix=apple-darwin ;;
    MINGW* | MSYS* | CYGWIN* | Windows*)
      die "unsupported operating system '$lx_os' (uname -s): loopx runs on Linux and macOS; on Windows use WSL"
      ;;
    *) die "unsupported operating system '$lx_os' (uname -s): loopx has builds for Linux and macOS" ;;
  esac
  case $lx_arch in
    x86_64 | amd64) lx_cpu=x86_64 ;;
    aarch64 | arm64) lx_cpu=aarch64 ;;
    *) die "unsupported architecture '$lx_arch' (uname -m) on $lx_os: loopx has builds for x86_64 and arm64 (aarch64)" ;;
  esac
  # A shell under Rosetta 2 reports x86_64 on an arm64 Mac; take the native build.
  if [ "$lx_os" = Darwin ] && [ "$lx_cpu" = x86_64 ] &&
    [ "$(sysctl -n sysctl.proc_translated 2>/dev/null)" = 1 ]; then
    lx_cpu=aarch64
  fi
  lx_target=$lx_cpu-$lx_suffix
}

# Sets lx_url (the directory holding the assets) and lx_label from
# LOOPX_DOWNLOAD_URL and the requested version (DESIGN.md "Release artifacts").
resolve_url() {
  case $lx_version in
    "" | latest) lx_version=latest ;;
    v*) lx_version=${lx_version#v} ;;
  esac
  case $lx_version in
    latest) ;;
    [0-9]*.*[0-9A-Za-z])
      case $lx_version in
        *[!0-9A-Za-z.+-]*) usage_error "invalid version '$lx_version' (expected e.g. 1.2.3)" ;;
      esac
      ;;
    *) usage_error "invalid version '$lx_version' (expected e.g. 1.2.3)" ;;
  esac
  lx_base=${LOOPX_DOWNLOAD_URL:-https://github.com/loopx-dev/loopx/releases}
  while :; do
    case $lx_base in
      */) lx_base=${lx_base%/} ;;
      *) break ;;
    esac
  done
  case $lx_base in
    http://?* | https://?* | file://?*) ;;
    *) die "LOOPX_DOWNLOAD_URL must be an http(s):// or file:// URL, not '$lx_base'" ;;
  esac
  if [ "$lx_version" = latest ]; then
    lx_url=$lx_base/latest/download
    lx_label="the latest release"
  else
    lx_url=$lx_base/download/v$lx_version
    lx_label="release v$lx_version"
  fi
}

pick_tools() {
  if command -v curl >/dev/null 2>&1; then
    lx_fetch=curl
  elif command -v wget >/dev/null 2>&1; then
    lx_fetch=wget
  else
    die "need curl or wget to download loopx, and neither is on PATH"
  fi
  if command -v sha256sum >/dev/null 2>&1; then
    lx_hasher=sha256sum
  elif command -v shasum >/dev/null 2>&1; then
    lx_hasher=shasum
  else
    die "need sha256sum or shasum to verify the download, and neither is on PATH"
  fi
}

# download URL FILE
download() {
  case $lx_fetch in
    curl)
      case $1 in
        # Never let a redirect downgrade an https download.
        https://*) curl --proto '=https' -fsSL -o "$2" "$1" ;;
        *) curl -fsSL -o "$2" "$1" ;;
      esac
      ;;
    wget) wget -q -O "$2" "$1" ;;
  esac
}

# Prints the SHA-256 of FILE in lowercase hex.
file_sha256() {
  case $lx_hasher in
    sha256sum) lx_line=$(sha256sum "$1") ;;
    shasum) lx_line=$(shasum -a 256 "$1") ;;
  esac || return 1
  printf '%s\n' "${lx_line%% *}"
}

# Prints the checksum SUMS_FILE lists for ASSET; fails when there is none.
listed_sha256() {
  while read -r lx_sum lx_name; do
    # sha256sum marks binary-mode lines with '*' before the name.
    if [ "${lx_name#\*}" = "$2" ]; then
      printf '%s\n' "$lx_sum"
      return 0
    fi
  done <"$1"
  return 1
}

# Runs `BINARY version` away from any project (no delegation, §3.2).
binary_version() {
  (cd / && LOOPX_DELEGATED=1 "$1" version </dev/null)
}

path_hint() {
  case ":${PATH:-}:" in
    *":$lx_dir:"* | *":$lx_dir/:"*)
      lx_first=$(command -v loopx 2>/dev/null) || lx_first=""
      if [ -n "$lx_first" ] && [ "$lx_first" != "$lx_dir/loopx" ]; then
        warn "another loopx, $lx_first, comes before $lx_dir on PATH"
      fi
      return 0
      ;;
  esac
  case ${SHELL:-} in
    */zsh) lx_rc=$HOME/.zshrc ;;
    */bash) lx_rc=$HOME/.bashrc ;;
    */fish) lx_rc="" ;;
    *) lx_rc=$HOME/.profile ;;
  esac
  say ""
  say "$lx_dir is not on your PATH. To run loopx by name, add it:"
  if [ -n "$lx_rc" ]; then
    say "  echo 'export PATH=\"$lx_dir:\$PATH\"' >> $lx_rc   # then open a new shell"
  else
    say "  fish_add_path $lx_dir"
  fi
}

main() {
  lx_quiet=0
  lx_tmp=""
  lx_partial=""
  lx_version=${LOOPX_VERSION:-latest}
  lx_dir=${LOOPX_INSTALL_DIR:-}
  parse_args "$@"

  trap cleanup EXIT
  trap 'exit 129' HUP
  trap 'exit 130' INT
  trap 'exit 143' TERM

  detect_target
  resolve_url
  pick_tools

  if [ -z "$lx_dir" ]; then
    [ -n "${HOME:-}" ] || die "HOME is not set; choose a directory with LOOPX_INSTALL_DIR"
    lx_dir=$HOME/.local/bin
  fi
  case $lx_dir in
    /*) ;;
    *) lx_dir=$PWD/$lx_dir ;;
  esac
  while :; do
    case $lx_dir in
      ?*/) lx_dir=${lx_dir%/} ;;
      *) break ;;
    esac
  done

  lx_tmp=$(mktemp -d "${TMPDIR:-/tmp}/loopx-install.XXXXXX") ||
    die "could not create a temporary directory"
  lx_asset=loopx-$lx_target.tar.gz

  say "Installing loopx ($lx_target) from $lx_label"
  if ! download "$lx_url/SHA256SUMS" "$lx_tmp/SHA256SUMS"; then
    if [ "$lx_version" = latest ]; then
      die "could not download $lx_url/SHA256SUMS"
    fi
    die "could not download $lx_url/SHA256SUMS (is $lx_version a released version?)"
  fi
  lx_want=$(listed_sha256 "$lx_tmp/SHA256SUMS" "$lx_asset") ||
    die "$lx_label has no loopx build for $lx_target ($lx_url/SHA256SUMS does not list $lx_asset)"
  case $lx_want in
    *[!0-9a-f]*) lx_bad=1 ;;
    *) lx_bad=0 ;;
  esac
  if [ "$lx_bad" = 1 ] || [ ${#lx_want} -ne 64 ]; then
    die "malformed SHA256SUMS entry for $lx_asset: '$lx_want'"
  fi

  download "$lx_url/$lx_asset" "$lx_tmp/$lx_asset" ||
    die "could not download $lx_url/$lx_asset"
  lx_got=$(file_sha256 "$lx_tmp/$lx_asset") || lx_got=""
  [ "$lx_got" = "$lx_want" ] ||
    die "checksum mismatch for $lx_asset: SHA256SUMS says $lx_want, the download is ${lx_got:-unreadable}; nothing was installed"

  mkdir "$lx_tmp/unpacked" || die "could not create a temporary directory"
  if ! (cd "$lx_tmp/unpacked" && tar -xzf "../$lx_asset" loopx); then
    die "could not unpack loopx from $lx_asset"
  fi
  if [ ! -f "$lx_tmp/unpacked/loopx" ] || [ -L "$lx_tmp/unpacked/loopx" ]; then
    die "$lx_asset holds no loopx binary"
  fi

  # Stage next to the destination so the final step is a rename: an existing
  # loopx stays whole until the new one has been checked.
  mkdir -p "$lx_dir" || die "could not create $lx_dir; choose a writable directory with LOOPX_INSTALL_DIR"
  [ ! -d "$lx_dir/loopx" ] || die "$lx_dir/loopx is a directory"
  lx_partial=$lx_dir/.loopx.partial.$$
  if ! cp "$lx_tmp/unpacked/loopx" "$lx_partial" || ! chmod 755 "$lx_partial"; then
    die "could not write to $lx_dir; choose a writable directory with LOOPX_INSTALL_DIR (no root needed)"
  fi
  lx_runs=$(binary_version "$lx_partial") ||
    die "the downloaded loopx does not run here ($lx_target, from $lx_dir); nothing was installed"
  if [ "$lx_version" != latest ] && [ "$lx_runs" != "$lx_version" ]; then
    die "the download for v$lx_version reports version '$lx_runs'; nothing was installed"
  fi
  mv -f "$lx_partial" "$lx_dir/loopx" || die "could not move loopx into $lx_dir"
  lx_partial=""

  lx_installed=$(binary_version "$lx_dir/loopx") || die "installed $lx_dir/loopx, but it does not run"
  say "Installed loopx $lx_installed to $lx_dir/loopx"
  path_hint
}

main "$@"
