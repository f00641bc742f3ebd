#!/usr/bin/env bash
# Holds a built package to the systems it is for: the closedloop binary inside it must be an ELF
# for the package's machine and must need no glibc symbol version above 2.17 (manylinux2014, the
# oldest glibc the plant PCs we support have: CentOS 7, Debian 8/9, Ubuntu 14.04+). A binary
# linked against the build host's glibc (2.36 on Debian 12) installs there fine and fails on an
# older system only when run ("version `GLIBC_2.34' not found"), so it is caught here instead.
#   bash tests/packaging/check_elf.sh PACKAGE x86_64|aarch64
# PACKAGE is a wheel (.whl) or a Debian package (.deb). readelf reads every architecture's ELF,
# so an aarch64 package is checked on an x86_64 host without emulation. Fails naming the
# offending symbols; prints one line with the highest glibc version needed on success.
set -euo pipefail
MAX_GLIBC=2.17

fail() { echo "FAIL: check_elf: $*" >&2; exit 1; }
[[ $# -eq 2 ]] || { echo "usage: bash tests/packaging/check_elf.sh PACKAGE x86_64|aarch64" >&2; exit 2; }
package="$1" arch="$2"
case "$arch" in
  x86_64) machine="Advanced Micro Devices X86-64" ;;
  aarch64) machine="AArch64" ;;
  *) fail "unknown architecture '$arch' (x86_64 or aarch64)" ;;
esac
[[ -f "$package" ]] || fail "no package $package"
command -v readelf >/dev/null || fail "readelf is missing (apt-get install binutils)"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
case "$package" in
  *.whl)
    # maturin's bindings = "bin" puts the binary among the wheel's scripts.
    python3 - "$package" "$work/closedloop" <<'EOF' || fail "$package carries no closedloop binary in *.data/scripts/"
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z:
    names = [n for n in z.namelist() if n.endswith(".data/scripts/closedloop")]
    if len(names) != 1:
        sys.exit(1)
    with open(sys.argv[2], "wb") as f:
        f.write(z.read(names[0]))
EOF
    ;;
  *.deb)
    command -v dpkg-deb >/dev/null || fail "dpkg-deb is missing"
    dpkg-deb -x "$package" "$work/deb"
    [[ -f "$work/deb/usr/bin/closedloop" ]] || fail "$package carries no usr/bin/closedloop"
    mv "$work/deb/usr/bin/closedloop" "$work/closedloop"
    ;;
  *) fail "$package is neither a .whl nor a .deb" ;;
esac
bin="$work/closedloop"

shown="$(readelf -h "$bin" 2>/dev/null | sed -n 's/^ *Machine: *//p')" || true
[[ "$shown" == "$machine" ]] || fail "$package: the binary's machine is '${shown:-not an ELF}', not $machine ($arch)"

# The libraries it needs: glibc's own only (libc6 is the .deb's one dependency, and a
# manylinux2014 wheel may need nothing else).
readelf -d "$bin" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' > "$work/libs"
others="$(grep -vxE 'libc\.so\.6|libm\.so\.6|libpthread\.so\.0|libdl\.so\.2|librt\.so\.1|ld-linux-x86-64\.so\.2|ld-linux-aarch64\.so\.1' "$work/libs" || true)"
[[ -z "$others" ]] || fail "$package: the binary needs libraries beyond glibc's: ${others//$'\n'/ }; add them to the .deb's depends (crates/cli/Cargo.toml) and check manylinux2014 allows them"

# Every versioned glibc symbol the binary imports, as "VERSION SYMBOL" (readelf --dyn-syms
# names them SYMBOL@GLIBC_X.Y, or SYMBOL@GLIBC_X.Y (N) with the version index).
readelf --dyn-syms -W "$bin" \
  | awk '$7 == "UND" { n = split($8, p, "@"); if (n >= 2 && p[n] ~ /^GLIBC_[0-9.]+$/) { sub(/^GLIBC_/, "", p[n]); print p[n], p[1] } }' \
  | sort -u > "$work/needs"
[[ -s "$work/needs" ]] || fail "$package: the binary imports no versioned glibc symbol (static, or not read right?)"
# sort -V orders versions as numbers (2.17 < 2.2.5 would be wrong as text; 2.2.5 < 2.17 here).
above="$(awk -v max="$MAX_GLIBC" '{ print max; print $1 }' "$work/needs" | sort -V -u | sed -n "/^${MAX_GLIBC//./\\.}\$/,\$p" | tail -n +2)"
if [[ -n "$above" ]]; then
  while read -r v; do
    echo "  GLIBC_$v: $(awk -v v="$v" '$1 == v { printf "%s ", $2 }' "$work/needs")" >&2
  done <<<"$above"
  fail "$package: the binary needs glibc above $MAX_GLIBC (symbols above); link it against glibc $MAX_GLIBC (maturin --zig --compatibility manylinux2014)"
fi
highest="$(cut -d' ' -f1 "$work/needs" | sort -V | tail -n 1)"
echo "check_elf: $(basename "$package"): $machine, needs glibc $highest at most (limit $MAX_GLIBC)"
