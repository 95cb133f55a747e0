#!/usr/bin/env bash
# Builds the release tree of DESIGN.md "Release artifacts":
#
#   <out>/download/v<version>/loopx-<target>.tar.gz   loopx, README.md, LICENSE
#   <out>/download/v<version>/install.sh
#   <out>/download/v<version>/loopx-<version>.tgz     the npm package
#   <out>/download/v<version>/workflows.tar.gz         dist/workflows
#   <out>/download/v<version>/SHA256SUMS              one line per file above
#   <out>/latest/download/...                         an identical copy
#   <out>/install.sh
#
# That is the layout of a GitHub release, so serving <out> over HTTP is a
# complete mirror for install.sh and the npm package (LOOPX_DOWNLOAD_URL).
# The npm package is dist/npm with the archives' SHA256SUMS inside (the only
# archives it will accept) and the LICENSE; the release workflow publishes
# that very file. workflows.tar.gz holds the ready-made workflows under one
# workflows/ directory, for `loopx install <url>/workflows.tar.gz -w <name>`.
# Archives and package are reproducible: same commit, same bytes.
set -euo pipefail

ALL_TARGETS=(
  x86_64-unknown-linux-musl
  aarch64-unknown-linux-musl
  x86_64-apple-darwin
  aarch64-apple-darwin
)
# Budget for the stripped x86_64 musl binary, in bytes (1.5 MB).
SIZE_LIMIT=1500000

usage() {
  cat <<EOF
Usage: scripts/build-release.sh [options]

Builds static loopx release archives, the npm package, workflows.tar.gz
(dist/workflows), SHA256SUMS and install.sh into a tree laid out like a
GitHub release (default: dist/release/).
Cargo.toml, dist/npm/package.json and the binaries must all carry the same
version, or the build fails. Needs cargo, GNU tar, node and npm.

Options:
  --target <triple>  build only this target (repeatable); one of
                     ${ALL_TARGETS[*]}
                     Its archive is added to (or replaced in) the version
                     directory and the others there are kept, so per-target
                     builds can be gathered into one tree. Without --target,
                     every target with a working toolchain is built into an
                     emptied version directory and the others are skipped.
  --out <dir>        write the tree here instead of dist/release
  --print-version    print the version the release gets (from Cargo.toml)
                     and exit
  --assemble         build no binary: write the npm package,
                     workflows.tar.gz, SHA256SUMS, install.sh and the
                     latest/ mirror for the archives
                     already in <out>/download/v<version>/ (the release
                     workflow gathers archives built on several machines
                     this way)
  -h, --help         show this help

Environment:
  SOURCE_DATE_EPOCH  mtime of archive entries (default: the commit time)
  CARGO_TARGET_<TRIPLE>_LINKER  linker for a cross target (default: found
                     automatically where possible)
EOF
}

note() { printf 'build-release: %s\n' "$*" >&2; }
die() {
  printf 'build-release: error: %s\n' "$*" >&2
  exit 1
}

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out=""
assemble=0
print_version=0
targets=()

while (($#)); do
  case $1 in
    --target) (($# >= 2)) || die "--target needs a value"; targets+=("$2"); shift 2 ;;
    --target=*) targets+=("${1#*=}"); shift ;;
    --out) (($# >= 2)) || die "--out needs a value"; out=$2; shift 2 ;;
    --out=*) out=${1#*=}; shift ;;
    --assemble) assemble=1; shift ;;
    --print-version) print_version=1; shift ;;
    -h | --help) usage; exit 0 ;;
    *) die "unknown argument: $1 (see --help)" ;;
  esac
done

for t in "${targets[@]+"${targets[@]}"}"; do
  case " ${ALL_TARGETS[*]} " in
    *" $t "*) ;;
    *) die "unknown target '$t' (known: ${ALL_TARGETS[*]})" ;;
  esac
done
((assemble == 0 || ${#targets[@]} == 0)) || die "--assemble builds nothing; drop --target"

# Resolve paths against the caller's directory before anything changes it.
[[ -n $out ]] || out=$root/dist/release
mkdir -p "$out"
out=$(cd "$out" && pwd)
target_dir=${CARGO_TARGET_DIR:-${CARGO_BUILD_TARGET_DIR:-$root/target}}
[[ $target_dir == /* ]] || target_dir=$PWD/$target_dir

# One version (DESIGN.md "One version"): the [package] version of Cargo.toml.
version=$(awk -F'"' '/^\[/ { p = ($0 == "[package]") } p && /^version[ \t]*=/ { print $2; exit }' "$root/Cargo.toml")
[[ $version =~ ^[0-9]+\.[0-9]+\.[0-9]+([-+][0-9A-Za-z.+-]+)?$ ]] ||
  die "could not read a version from $root/Cargo.toml (got '$version')"
if ((print_version)); then
  printf '%s\n' "$version"
  exit 0
fi
vdir=$out/download/v$version

# Node's npm packs the npm package; node also reads package.json's version.
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  die "node and npm are needed to pack the npm package (dist/npm); install Node.js"
fi
npm_version=$(node -e 'process.stdout.write(String(require(process.argv[1]).version))' \
  "$root/dist/npm/package.json") || die "cannot read the version of $root/dist/npm/package.json"
[[ $npm_version == "$version" ]] ||
  die "version mismatch: Cargo.toml says $version but dist/npm/package.json says $npm_version; set both to the version being released"

if command -v sha256sum >/dev/null 2>&1; then
  sha256() { sha256sum -- "$@"; }
elif command -v shasum >/dev/null 2>&1; then
  sha256() { shasum -a 256 -- "$@"; }
else
  die "need sha256sum or shasum"
fi

# Exit status 0 when the ELF file has a PT_INTERP program header (it needs a
# dynamic loader), 1 when it has none (static), 2 when it is not a
# little-endian ELF64 file. od reads in host byte order; every host we build
# on is little-endian.
elf_has_interp() {
  local f=$1 magic phoff phentsize phnum i
  magic=$(od -An -tx1 -N6 "$f" | tr -d ' \n')
  [[ $magic == 7f454c460201 ]] || return 2
  phoff=$(read_uint "$f" 32 8)
  phentsize=$(read_uint "$f" 54 2)
  phnum=$(read_uint "$f" 56 2)
  for ((i = 0; i < phnum; i++)); do
    [[ $(read_uint "$f" $((phoff + i * phentsize)) 4) == 3 ]] && return 0
  done
  return 1
}

# read_uint FILE OFFSET SIZE: the unsigned integer of SIZE bytes at OFFSET.
read_uint() { od -An -tu"$3" -j "$2" -N "$3" "$1" | tr -d ' \n'; }

host_os=$(uname -s)
host_arch=$(uname -m)
case $host_arch in
  amd64) host_arch=x86_64 ;;
  arm64) host_arch=aarch64 ;;
esac

# Sets $runner to the command prefix that runs binaries of target $1 here
# (empty: natively; qemu user emulation for another Linux architecture), or
# returns 1 when they cannot run here (then the smoke test is skipped).
find_runner() {
  local arch=${1%%-*} q
  runner=()
  case $1 in
    *-linux-musl) [[ $host_os == Linux ]] || return 1 ;;
    *-apple-darwin) [[ $host_os == Darwin ]] || return 1 ;;
  esac
  [[ $arch == "$host_arch" ]] && return 0
  [[ $host_os == Linux ]] || return 1
  for q in "qemu-$arch-static" "qemu-$arch"; do
    if command -v "$q" >/dev/null 2>&1; then
      runner=("$q")
      return 0
    fi
  done
  return 1
}

# Makes target $1 buildable: a linker and the Rust standard library for it.
# On failure returns 1 with the reason in $skip_reason.
prepare_target() {
  local t=$1 arch=${1%%-*} var lld
  var=CARGO_TARGET_$(tr 'a-z-' 'A-Z_' <<<"$t")_LINKER
  skip_reason=""
  if [[ -n ${!var:-} ]]; then
    : # the caller chose the linker
  else
    case $t in
      *-linux-musl)
        # Rust's musl targets bring their own crt objects and libc, so the
        # host's cc links a native build; a cross build needs a cross
        # linker, and rust-lld (shipped with rustc) is one.
        lld=$(rustc --print sysroot)/lib/rustlib/$(rustc -vV | sed -n 's/^host: //p')/bin/rust-lld
        if [[ $host_os == Linux && $arch == "$host_arch" ]]; then
          :
        elif command -v "$arch-linux-musl-gcc" >/dev/null 2>&1; then
          export "$var=$arch-linux-musl-gcc"
        elif command -v "$arch-linux-gnu-gcc" >/dev/null 2>&1; then
          export "$var=$arch-linux-gnu-gcc"
        elif [[ -x $lld ]]; then
          export "$var=rust-lld"
        else
          skip_reason="no linker for $t (install $arch-linux-musl-gcc or set $var)"
          return 1
        fi
        ;;
      *-apple-darwin)
        # Apple's toolchain links both architectures; elsewhere only an
        # osxcross-style linker named by the caller can.
        if [[ $host_os != Darwin ]]; then
          skip_reason="needs a macOS host (or a cross linker in $var)"
          return 1
        fi
        ;;
    esac
  fi
  local libdir
  libdir=$(rustc --print target-libdir --target "$t" 2>/dev/null || true)
  if [[ -z $libdir ]] || ! compgen -G "$libdir/libstd-*.rlib" >/dev/null; then
    if ! command -v rustup >/dev/null 2>&1; then
      skip_reason="the Rust standard library for $t is missing and rustup is not installed"
      return 1
    fi
    note "adding the Rust target $t"
    if ! rustup target add "$t" >&2; then
      skip_reason="'rustup target add $t' failed"
      return 1
    fi
  fi
}

# Reproducible builds: keep the checkout's and the cargo home's paths out of
# the binary (they end up in panic locations).
add_rustflags() {
  local sep=$'\x1f' flags=${CARGO_ENCODED_RUSTFLAGS:-} f words
  if [[ -z $flags && -n ${RUSTFLAGS:-} ]]; then
    read -ra words <<<"$RUSTFLAGS"
    flags=$(IFS=$sep && echo "${words[*]}")
  fi
  for f in "$@"; do flags=${flags:+$flags$sep}$f; done
  export CARGO_ENCODED_RUSTFLAGS=$flags
  unset RUSTFLAGS
}

# Finds GNU tar: bsdtar cannot pin owners and mtimes the way we need.
find_gnu_tar() {
  local t
  for t in gtar tar; do
    if "$t" --version 2>/dev/null | head -n 1 | grep -q 'GNU tar'; then
      gnu_tar=$t
      return 0
    fi
  done
  die "GNU tar is needed for reproducible archives (macOS: brew install gnu-tar)"
}

# Commit time of the checkout unless SOURCE_DATE_EPOCH says otherwise.
find_epoch() {
  if [[ -n ${SOURCE_DATE_EPOCH:-} ]]; then
    epoch=$SOURCE_DATE_EPOCH
    [[ $epoch =~ ^[0-9]+$ ]] || die "SOURCE_DATE_EPOCH must be seconds since 1970, not '$epoch'"
    return
  fi
  epoch=$(git -C "$root" log -1 --format=%ct 2>/dev/null || true)
  [[ $epoch =~ ^[0-9]+$ ]] ||
    die "no commit time to stamp archives with (not a git checkout?): set SOURCE_DATE_EPOCH"
}

# Builds target $1 and writes its archive into $vdir. Returns 1 with
# $skip_reason when cargo fails; dies when the result breaks a release rule.
build_one() {
  local t=$1 bin bytes stage archive got
  note "building $t"
  if ! cargo build --manifest-path "$root/Cargo.toml" --release --locked --target "$t" >&2; then
    skip_reason="cargo build --target $t failed (see above)"
    return 1
  fi
  bin=$target_dir/$t/release/loopx
  [[ -f $bin ]] || die "cargo succeeded but $bin is missing"

  if [[ $t == *-linux-musl ]]; then
    local rc=0
    elf_has_interp "$bin" || rc=$?
    case $rc in
      0) die "$t: $bin has an ELF interpreter (PT_INTERP): it is not static" ;;
      2) die "$t: $bin is not a little-endian ELF64 file" ;;
    esac
  fi
  local runner
  if find_runner "$t"; then
    got=$(cd / && LOOPX_DELEGATED=1 "${runner[@]+"${runner[@]}"}" "$bin" version </dev/null) ||
      die "$t: '${runner[*]+"${runner[*]} "}$bin version' failed"
    [[ $got == "$version" ]] || die "$t: '$bin version' printed '$got', expected '$version'"
  else
    note "$t: cannot run it here, so it was not smoke-tested"
  fi

  bytes=$(wc -c <"$bin" | tr -d ' ')
  if [[ $t == x86_64-unknown-linux-musl ]] && ((bytes > SIZE_LIMIT)); then
    die "$t: the stripped binary is $bytes bytes, over its budget of $SIZE_LIMIT bytes"
  fi

  stage=$(mktemp -d "${TMPDIR:-/tmp}/loopx-stage.XXXXXX")
  cp "$bin" "$stage/loopx"
  cp "$root/README.md" "$stage/README.md"
  cp "$root/dist/LICENSE" "$stage/LICENSE"
  chmod 0755 "$stage/loopx"
  chmod 0644 "$stage/README.md" "$stage/LICENSE"
  archive=$vdir/loopx-$t.tar.gz
  # Entries listed in byte order, one fixed mtime, owner 0/0 without names,
  # ustar (no atime/ctime records), gzip without name or timestamp.
  "$gnu_tar" --create --format=ustar --owner=0 --group=0 --numeric-owner \
    --mtime="@$epoch" -C "$stage" LICENSE README.md loopx |
    gzip -n -9 >"$archive.tmp"
  mv "$archive.tmp" "$archive"
  rm -rf "$stage"
  report+=("$(printf '%-28s binary %8d bytes  archive %8d bytes' "$t" "$bytes" "$(wc -c <"$archive" | tr -d ' ')")")
}

# Checks that the archive of target $1 in $vdir holds loopx $version, where
# its binary can run here (an archive gathered from another machine was
# checked by the build that made it).
check_archive_version() {
  local t=$1 archive=$vdir/loopx-$1.tar.gz scratch got runner
  if ! find_runner "$t"; then
    note "$t: cannot run it here, so its version was checked only where it was built"
    return 0
  fi
  scratch=$(mktemp -d "${TMPDIR:-/tmp}/loopx-check.XXXXXX")
  if ! tar -xzf "$archive" -C "$scratch" loopx; then
    rm -rf "$scratch"
    die "$archive has no loopx binary in it"
  fi
  got=$(cd / && LOOPX_DELEGATED=1 "${runner[@]+"${runner[@]}"}" "$scratch/loopx" version </dev/null) || got="(it failed to run)"
  rm -rf "$scratch"
  [[ $got == "$version" ]] ||
    die "version mismatch: ${archive#"$out/"} holds loopx $got but Cargo.toml says $version"
}

# Packs dist/npm into $vdir/loopx-$version.tgz with $vdir/SHA256SUMS (the
# archives' checksums) and the LICENSE inside, so the package pins the exact
# archives it will accept. No tests, no node_modules, no binary: the package
# downloads the binary for its platform (dist/npm/lib/native.js).
pack_npm() {
  local stage entry tgz=loopx-$version.tgz listing
  stage=$(mktemp -d "${TMPDIR:-/tmp}/loopx-npm.XXXXXX")
  mkdir "$stage/package" "$stage/out"
  for entry in "$root/dist/npm"/*; do
    case ${entry##*/} in
      node_modules | test | native | SHA256SUMS) continue ;;
    esac
    cp -R "$entry" "$stage/package/"
  done
  cp "$vdir/SHA256SUMS" "$stage/package/SHA256SUMS"
  cp "$root/dist/LICENSE" "$stage/package/LICENSE"
  # npm records modes as found; the checkout's umask must not change bytes.
  chmod -R u=rwX,go=rX "$stage/package"
  chmod 0755 "$stage/package/bin/loopx.js"
  if ! (cd "$stage/package" && npm pack --ignore-scripts --loglevel=error --pack-destination "$stage/out" >&2); then
    rm -rf "$stage"
    die "npm pack failed in a copy of dist/npm (see above)"
  fi
  if [[ ! -f $stage/out/$tgz ]]; then
    rm -rf "$stage"
    die "npm pack did not write $tgz"
  fi
  listing=$(tar -tzf "$stage/out/$tgz")
  for entry in package/package.json package/LICENSE package/SHA256SUMS package/bin/loopx.js; do
    grep -qx "$entry" <<<"$listing" || { rm -rf "$stage"; die "$tgz lacks $entry"; }
  done
  if grep -Eq '^package/(test|node_modules|native)/' <<<"$listing"; then
    rm -rf "$stage"
    die "$tgz holds files not needed at run time: $(grep -E '^package/(test|node_modules|native)/' <<<"$listing" | head -n 3 | tr '\n' ' ')"
  fi
  mv "$stage/out/$tgz" "$vdir/$tgz"
  rm -rf "$stage"
}

# Packs dist/workflows into $vdir/workflows.tar.gz, under one workflows/
# directory (loopx install unwraps a single top-level directory): each
# workflow's directory, and AUTHORING.md beside them, which install skips.
# Modes come from the file type rather than the checkout's umask, entries
# are sorted, and run state a local run may have left is not packed.
pack_workflows() {
  local stage archive=$vdir/workflows.tar.gz
  [[ -d $root/dist/workflows ]] || die "missing $root/dist/workflows"
  stage=$(mktemp -d "${TMPDIR:-/tmp}/loopx-workflows.XXXXXX")
  cp -R "$root/dist/workflows" "$stage/workflows"
  rm -rf "$stage"/workflows/*/runs "$stage"/workflows/*/state
  # The authoring guide goes into every workflow too: a multi-workflow
  # source's top-level files are not installed (§10.1), and a user who
  # installed one workflow should have the guide beside it.
  local w
  for w in "$stage"/workflows/*/; do
    cp "$root/dist/workflows/AUTHORING.md" "$w"
  done
  find "$stage/workflows" -type d -exec chmod 0755 {} +
  find "$stage/workflows" -type f -exec chmod 0644 {} +
  find "$stage/workflows" -type f -name '*.sh' -exec chmod 0755 {} +
  "$gnu_tar" --create --format=ustar --owner=0 --group=0 --numeric-owner \
    --mtime="@$epoch" --sort=name -C "$stage" workflows |
    gzip -n -9 >"$archive.tmp"
  mv "$archive.tmp" "$archive"
  rm -rf "$stage"
}

# The npm package, workflows.tar.gz, SHA256SUMS, the latest/ mirror and the
# install.sh copies, from whatever archives $vdir holds.
finish_tree() {
  local files=() f
  cp "$root/install.sh" "$vdir/install.sh"
  chmod 0644 "$vdir/install.sh"
  rm -f "$vdir"/loopx-*.tgz
  pack_workflows
  # Two passes: the package carries the checksums of install.sh and the
  # archives, then the tree's SHA256SUMS adds the package's own line.
  (
    cd "$vdir"
    export LC_ALL=C
    for f in install.sh loopx-*.tar.gz workflows.tar.gz; do
      [[ -f $f ]] && files+=("$f")
    done
    sha256 "${files[@]}" >SHA256SUMS.tmp
    mv SHA256SUMS.tmp SHA256SUMS
  )
  pack_npm
  (
    cd "$vdir"
    sha256 "loopx-$version.tgz" >>SHA256SUMS
  )
  rm -rf "$out/latest/download"
  mkdir -p "$out/latest"
  cp -Rp "$vdir" "$out/latest/download"
  cp "$root/install.sh" "$out/install.sh"
  chmod 0755 "$out/install.sh"
}

[[ -f $root/install.sh ]] || die "missing $root/install.sh"

if ((assemble)); then
  compgen -G "$vdir/loopx-*.tar.gz" >/dev/null || die "no archives in $vdir to assemble"
  for archive in "$vdir"/loopx-*.tar.gz; do
    t=${archive##*/loopx-}
    check_archive_version "${t%.tar.gz}"
  done
  # For workflows.tar.gz.
  find_gnu_tar
  find_epoch
  finish_tree
  note "assembled $vdir"
  (cd "$vdir" && cat SHA256SUMS)
  exit 0
fi

[[ -f $root/README.md ]] || die "missing $root/README.md (it goes into every archive)"
[[ -f $root/dist/LICENSE ]] || die "missing $root/dist/LICENSE (it goes into every archive)"
command -v cargo >/dev/null 2>&1 || die "cargo is not on PATH"
find_gnu_tar
find_epoch
cargo_home=${CARGO_HOME:-$HOME/.cargo}
add_rustflags "--remap-path-prefix=$root=/loopx" "--remap-path-prefix=$cargo_home=/cargo"

explicit=1
if ((${#targets[@]} == 0)); then
  explicit=0
  targets=("${ALL_TARGETS[@]}")
  rm -rf "$vdir"
fi
mkdir -p "$vdir"

report=()
skipped=()
for t in "${targets[@]}"; do
  # A target the caller named, or x86_64 musl on an x86_64 Linux host, must
  # build; the others are skipped (with the reason) when they cannot.
  required=$explicit
  [[ $t == x86_64-unknown-linux-musl && $host_os == Linux && $host_arch == x86_64 ]] && required=1
  if prepare_target "$t" && build_one "$t"; then
    continue
  fi
  ((required == 0)) || die "$t: $skip_reason"
  note "skipping $t: $skip_reason"
  skipped+=("$t: $skip_reason")
done
((${#report[@]} > 0)) || die "no target could be built"

finish_tree

printf 'loopx %s release tree in %s\n' "$version" "$out"
printf '  %s\n' "${report[@]}"
printf '  (stripped binaries; x86_64-unknown-linux-musl budget %d bytes)\n' "$SIZE_LIMIT"
printf '  %-28s %8d bytes\n' "npm package loopx-$version.tgz" "$(wc -c <"$vdir/loopx-$version.tgz" | tr -d ' ')"
printf '  %-28s %8d bytes\n' "workflows.tar.gz" "$(wc -c <"$vdir/workflows.tar.gz" | tr -d ' ')"
if ((${#skipped[@]})); then
  note "skipped targets:"
  for s in "${skipped[@]}"; do note "  $s"; done
fi
