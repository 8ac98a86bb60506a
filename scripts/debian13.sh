#!/usr/bin/env bash
# Runs a command of this tree inside a Debian 13 (trixie) root: LibTorch and
# PyTorch 2.6, Catch2 3, LLVM 19. The root is made once with debootstrap in a
# cache directory outside the tree and reused; the project's own setup script
# installs what it needs inside it, as on any fresh machine.
#
#   scripts/debian13.sh scripts/test.sh      # the README's test command on 2.6
#   scripts/debian13.sh scripts/main.sh      # the main job on 2.6
#   scripts/debian13.sh bash                 # a shell in the root
#
# The tree is bound at /nnsc/src (../shared beside it at /nnsc/shared when it
# exists) and its build/ and out/ are the root's own (kept in the root, one pair
# per source tree), so the Debian 12 and Debian 13 builds never mix. Every mount lives in a private
# mount namespace (unshare), so none outlives the command on any exit path.
#   NNSC_DEBIAN13_ROOT   where the root lives (default /var/cache/nnsc/trixie)
#   NNSC_DEBIAN_MIRROR   the mirror debootstrap uses (default deb.debian.org)
set -euo pipefail
SRC=$(cd "$(dirname "$0")/.." && pwd)
ROOT=${NNSC_DEBIAN13_ROOT:-/var/cache/nnsc/trixie}
MIRROR=${NNSC_DEBIAN_MIRROR:-http://deb.debian.org/debian}
die() { echo "debian13.sh: error: $*" >&2; exit 1; }
(($#)) || die "no command given (e.g. scripts/debian13.sh scripts/test.sh)"
[ "$(id -u)" -eq 0 ] || exec sudo -E "$0" "$@"

ensure_debootstrap() {
  command -v debootstrap >/dev/null && return
  echo "debian13.sh: installing debootstrap"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap
}

# Makes the root under a temporary name and renames it when complete, so an
# interrupted debootstrap is never mistaken for a usable root.
create_root() {
  ensure_debootstrap
  local tmp="$ROOT.partial"
  rm -rf "$tmp"
  mkdir -p "$(dirname "$ROOT")"
  echo "debian13.sh: creating a Debian 13 root in $ROOT (debootstrap, about a minute)"
  debootstrap --variant=minbase trixie "$tmp" "$MIRROR" >"$tmp.log" 2>&1 \
    || { tail -20 "$tmp.log" >&2; die "debootstrap failed (whole log: $tmp.log)"; }
  mkdir -p "$tmp/nnsc/src" "$tmp/nnsc/shared"
  mv "$tmp" "$ROOT"
  rm -f "$tmp.log"
}

# One root-maker at a time; a second caller waits and then reuses the root.
mkdir -p "$(dirname "$ROOT")"
exec 9>"$ROOT.lock"
flock 9
[ -d "$ROOT/nnsc/src" ] || create_root
flock -u 9
cp -L /etc/resolv.conf "$ROOT/etc/resolv.conf" 2>/dev/null || true

# This tree's own build/ and out/ in the root, named after its path.
STATE="$ROOT/nnsc/trees/$(printf '%s' "$SRC" | md5sum | cut -c1-12)"
mkdir -p "$STATE/build" "$STATE/out"
SHARED="$SRC/../shared"
[ -d "$SHARED" ] || SHARED=""
# Everything below runs in a private mount namespace: its mounts vanish with it.
exec unshare --mount --propagation private -- bash -euo pipefail -c '
  root=$1 src=$2 shared=$3 state=$4; shift 4
  mount -t proc proc "$root/proc"
  mount --rbind /dev "$root/dev"
  mount --rbind /sys "$root/sys"
  mount --bind "$src" "$root/nnsc/src"
  mkdir -p "$src/build" "$src/out"
  mount --bind "$state/build" "$root/nnsc/src/build"
  mount --bind "$state/out" "$root/nnsc/src/out"
  [ -n "$shared" ] && mount --bind -o ro "$shared" "$root/nnsc/shared"
  # A clean environment, less the NNSC_* settings the caller gave.
  mapfile -t keep < <(env | grep -E "^NNSC_[A-Z0-9_]*=" || true)
  exec chroot "$root" /usr/bin/env -i "${keep[@]}" HOME=/root LANG=C.UTF-8 TERM="${TERM:-dumb}" \
    PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin CI="${CI:-}" \
    NNSC_DEBIAN13=1 bash -c "cd /nnsc/src && exec \"\$@\"" nnsc-debian13 "$@"
 ' nnsc-debian13 "$ROOT" "$SRC" "$SHARED" "$STATE" "$@"
