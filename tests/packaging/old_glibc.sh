#!/usr/bin/env bash
# The packages on an older system than the one that built them: a Debian 11 (bullseye, glibc
# 2.31, Python 3.9, pip 20.3) root made by debootstrap, as plant PCs run. The build host is
# Debian 12 (glibc 2.36), where a binary needing a newer glibc than the plant PC has would pass
# every other test.
#   bash tests/packaging/old_glibc.sh x86_64 WHEEL DEB
#       in a chroot of bullseye (amd64): pip installs the wheel into a venv with bullseye's own
#       python3 and pip, dpkg -i installs the .deb; each installed closedloop runs --version,
#       `check` of the example plant and `demo`.
#   bash tests/packaging/old_glibc.sh aarch64 WHEEL
#       the wheel's arm64 binary run by qemu-aarch64-static (user-mode emulation, no chroot:
#       binfmt_misc is not needed) against the loader and libc of a bullseye arm64 root (debootstrap
#       --foreign: unpacked, not configured, which is all a dynamically linked binary needs):
#       --version and `check` of the example plant.
# The roots live outside the clone (${CLOSEDLOOP_BULLSEYE:-/var/tmp/closedloop-bullseye} and
# ...-arm64) and are reused when complete (a marker written last records how each was made);
# debootstrap takes about a minute on a fast mirror (CLOSEDLOOP_DEBIAN_MIRROR). Needs root
# (debootstrap, chroot, mount). Fails loudly, naming what is missing; never skips.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
fail() { echo "FAIL: old_glibc: $*" >&2; exit 1; }
usage() { echo "usage: bash tests/packaging/old_glibc.sh x86_64 WHEEL DEB | aarch64 WHEEL" >&2; exit 2; }
[[ $# -ge 1 ]] || usage
arch="$1"
case "$arch" in
  x86_64) [[ $# -eq 3 ]] || usage; wheel="$2" deb="$3" ;;
  aarch64) [[ $# -eq 2 ]] || usage; wheel="$2" ;;
  *) usage ;;
esac
wheel="$(realpath "$wheel")"; [[ -f "$wheel" ]] || fail "no wheel $2"
if [[ -n "${deb:-}" ]]; then deb="$(realpath "$deb")"; [[ -f "$deb" ]] || fail "no .deb $3"; fi
[[ "$(id -u)" == 0 ]] || fail "debootstrap, chroot and mount need root"

mirror="${CLOSEDLOOP_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
suite=bullseye
base="${CLOSEDLOOP_BULLSEYE:-/var/tmp/closedloop-bullseye}"
plant="$root/packaging/example.toml"

# Installs what this test needs from the host's apt when missing, then insists on it.
need_tool() { # need_tool COMMAND PACKAGE
  if ! command -v "$1" >/dev/null 2>&1; then
    echo "old_glibc: installing $2 (for $1)" >&2
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$2"; } >&2 \
      || fail "$1 is missing and apt-get install $2 failed"
  fi
  command -v "$1" >/dev/null 2>&1 || fail "$1 is missing (apt-get install $2)"
}

# make_root DIR ARGS...: a bullseye root made by `debootstrap ARGS... bullseye DIR MIRROR`, reused
# when its marker says it was made with the same ARGS; otherwise made again from nothing.
make_root() {
  local dir="$1"; shift
  local recipe="debootstrap $* $suite $mirror"
  case "$(realpath -m "$dir")/" in
    "$root"/*) fail "the bullseye root $dir lies inside the clone; put it outside" ;;
  esac
  if [[ -f "$dir/.closedloop-root" && "$(cat "$dir/.closedloop-root")" == "$recipe" ]]; then
    echo "old_glibc: reusing $dir ($recipe)" >&2
    return
  fi
  # An interrupted run may have left /proc mounted in it: never rm -rf through a mount.
  if mountpoint -q "$dir/proc" 2>/dev/null; then umount "$dir/proc"; fi
  if findmnt -rno TARGET | grep -q "^$(realpath -m "$dir")/"; then
    fail "something is mounted under $dir; unmount it before the root is made again"
  fi
  rm -rf "$dir"
  echo "old_glibc: $recipe $dir" >&2
  local started=$SECONDS
  debootstrap "$@" "$suite" "$dir" "$mirror" > "$dir.log" 2>&1 || {
    tail -n 20 "$dir.log" >&2
    fail "debootstrap could not make a $suite root in $dir from $mirror (log: $dir.log)"
  }
  echo "$recipe" > "$dir/.closedloop-root"
  echo "old_glibc: made $dir in $((SECONDS - started)) s" >&2
}

# said FILE TEXT WHAT: FILE (a command's output) contains TEXT, or the test fails showing it.
said() { grep -qF -- "$2" "$1" || { cat "$1" >&2; fail "$3 did not say: $2"; }; }

x86_64() {
  need_tool debootstrap debootstrap
  # bullseye's own python3 (3.9) and python3-venv (pip 20.3): the oldest pip this test holds
  # the wheel's manylinux_2_17 tag to.
  make_root "$base" --variant=minbase --include=python3,python3-venv
  local libc
  libc="$(chroot "$base" /usr/bin/ldd --version | sed -n 1p)"   # sed reads it all: no SIGPIPE under pipefail
  echo "old_glibc: $base has $libc" >&2

  local inside=/tmp/closedloop-test
  local here="$base$inside"
  mount -t proc proc "$base/proc"
  # shellcheck disable=SC2064 # $base and $here are fixed here, on purpose
  trap "chroot '$base' dpkg --purge closedloop >/dev/null 2>&1 || true; umount '$base/proc' || true; rm -rf '$here'" EXIT
  rm -rf "$here"
  mkdir -p "$here/state" "$here/xdg"
  cp "$wheel" "$deb" "$here/"
  cp "$plant" "$here/example.toml"
  # The chroot's commands with a clean environment, as a user's shell there has it.
  in_root() {
    chroot "$base" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 \
      STATE_DIRECTORY="$inside/state" XDG_STATE_HOME="$inside/xdg" "$@"
  }
  # run_installed WHAT CLOSEDLOOP PLANT: --version, check and demo through one installed command.
  run_installed() {
    local what="$1" cmd="$2" plant_in="$3" out="$here/out"
    in_root "$cmd" --version > "$out" 2>&1 || { cat "$out" >&2; fail "$what: closedloop --version failed on $libc"; }
    grep -q '^closedloop [0-9]' "$out" || { cat "$out" >&2; fail "$what: --version says $(cat "$out")"; }
    in_root "$cmd" check "$plant_in" > "$out" 2>&1 || { cat "$out" >&2; fail "$what: closedloop check $plant_in failed"; }
    said "$out" "$plant_in: OK" "$what: closedloop check"
    in_root "$cmd" demo > "$out" 2>&1 || { cat "$out" >&2; fail "$what: closedloop demo failed"; }
    said "$out" "MOTOR_STALL" "$what: closedloop demo"
    echo "old_glibc: $what on $suite ($libc): --version, check and demo pass"
  }

  # The wheel, with the root's own pip, without an index.
  in_root python3 -m venv "$inside/venv" || fail "python3 -m venv failed in $base"
  in_root "$inside/venv/bin/python" -m pip install --disable-pip-version-check -q --no-index \
    "$inside/$(basename "$wheel")" || fail "bullseye's pip did not install $(basename "$wheel")"
  run_installed "pip install (wheel)" "$inside/venv/bin/closedloop" "$inside/example.toml"

  # The .deb, with the root's dpkg: its Depends (libc6 version) must hold on bullseye's libc6.
  in_root dpkg -i "$inside/$(basename "$deb")" > "$here/out" 2>&1 \
    || { cat "$here/out" >&2; fail "dpkg -i $(basename "$deb") failed on $suite"; }
  run_installed "dpkg -i (.deb)" /usr/bin/closedloop /usr/share/closedloop/example.toml
  in_root dpkg --purge closedloop >/dev/null || fail "dpkg --purge closedloop failed on $suite"
}

aarch64() {
  need_tool debootstrap debootstrap
  need_tool qemu-aarch64-static qemu-user-static
  local dir="${CLOSEDLOOP_BULLSEYE_ARM64:-$base-arm64}"
  make_root "$dir" --variant=minbase --foreign --arch=arm64
  local work
  work="$(mktemp -d)"
  # shellcheck disable=SC2064 # $work is fixed here, on purpose
  trap "rm -rf '$work'" EXIT
  python3 - "$wheel" "$work/closedloop" <<'EOF' || fail "$wheel carries no closedloop binary"
import os, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z:
    [name] = [n for n in z.namelist() if n.endswith(".data/scripts/closedloop")]
    with open(sys.argv[2], "wb") as f:
        f.write(z.read(name))
os.chmod(sys.argv[2], 0o755)
EOF
  # -L: the binary's loader and libraries come from the arm64 root (its glibc 2.31).
  run() { STATE_DIRECTORY="$work" XDG_STATE_HOME="$work" qemu-aarch64-static -L "$dir" "$work/closedloop" "$@"; }
  run --version > "$work/out" 2>&1 || { cat "$work/out" >&2; fail "the aarch64 closedloop --version failed under qemu with bullseye arm64's glibc"; }
  grep -q '^closedloop [0-9]' "$work/out" || { cat "$work/out" >&2; fail "aarch64: --version says $(cat "$work/out")"; }
  run check "$plant" > "$work/out" 2>&1 || { cat "$work/out" >&2; fail "the aarch64 closedloop check $plant failed under qemu"; }
  said "$work/out" "$plant: OK" "aarch64: closedloop check"
  echo "old_glibc: the aarch64 wheel's binary on $suite arm64 (qemu-aarch64-static): --version and check pass"
}

"$arch"
