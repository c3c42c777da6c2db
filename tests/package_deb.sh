#!/usr/bin/env bash
# The Debian package (ctest: "package: deb", label package; cmake/install.cmake): `cpack -G DEB` on the
# already-built tree makes relgrad_<version>_<arch>.deb; the test checks its control fields and
# contents, extracts it into a scratch root (dpkg -x: no root or dpkg database needed), runs its
# `relgrad --version` and builds and runs examples/downstream/ against <root>/usr.
#   usage: package_deb.sh BUILD_DIR SOURCE_DIR VERSION CXX [COMPILER_LAUNCHER]
set -euo pipefail
build=${1:?usage: package_deb.sh BUILD_DIR SOURCE_DIR VERSION CXX [LAUNCHER]}
src=$2 version=$3 cxx=$4 launcher=${5:-}
work=$(mktemp -d "${TMPDIR:-/tmp}/relgrad_deb.XXXXXX")
trap 'rm -rf "$work"' EXIT
fail() { echo "package_deb: FAIL: $*" >&2; exit 1; }
source "$src/tests/downstream_testing.sh"

(cd "$work" && cpack -G DEB --config "$build/CPackConfig.cmake" -B "$work/pkg") >"$work/cpack.log" 2>&1 \
  || { cat "$work/cpack.log" >&2; fail "cpack -G DEB failed"; }
deb=$work/pkg/relgrad_${version}_$(dpkg --print-architecture).deb
[[ -f $deb ]] || { cat "$work/cpack.log" >&2; ls -R "$work/pkg" >&2; fail "no $deb"; }
echo "== $(basename "$deb"): $(stat -c %s "$deb") bytes"
dpkg-deb --field "$deb" Package Version Architecture Depends | tee "$work/control"
grep -qx "Package: relgrad" "$work/control" || fail "Package is not relgrad"
grep -qx "Version: $version" "$work/control" || fail "Version is not $version"
# Every declared dependency must be a real Debian package: this machine, which built relgrad, has them all.
depends=$(sed -n 's/^Depends: //p' "$work/control")
[[ -n $depends ]] || fail "no Depends field"
# What the engine's CMake package asks for (cmake/relgradConfig.cmake.in); the lab's libpng-dev and
# libcli11-dev are not (it is in /usr/bin/relgrad alone, which needs only libpng16-16).
for dep in libeigen3-dev nlohmann-json3-dev libtomlplusplus-dev libpng16-16; do
  grep -q "$dep" <<<"$depends" || fail "Depends lacks $dep"
done
for dep in libpng-dev libcli11-dev; do
  ! grep -q "$dep" <<<"$depends" || fail "Depends names $dep, which only the lab, inside /usr/bin/relgrad, builds with"
done
for dep in $(tr ',' '\n' <<<"$depends" | sed 's/(.*)//; s/ //g'); do
  dpkg -s "$dep" >/dev/null 2>&1 || fail "Depends names $dep, which is not an installed Debian package here"
done
dpkg-deb --contents "$deb" >"$work/contents"
for f in ./usr/bin/relgrad ./usr/include/relgrad/relgrad.h ./usr/lib/librelgrad_core.a \
         ./usr/lib/cmake/relgrad/relgradConfig.cmake ./usr/lib/pkgconfig/relgrad.pc ./usr/share/doc/relgrad/cli.md; do
  grep -q " $f\$" "$work/contents" || fail "the package lacks $f"
done

root=$work/root
dpkg -x "$deb" "$root"
"$root/usr/bin/relgrad" --version >"$work/version.out"
grep -qx "relgrad $version" "$work/version.out" || { cat "$work/version.out" >&2; fail "packaged relgrad --version is not $version"; }
echo "== find_package(relgrad) from the extracted package ($root/usr)"
build_downstream deb "$root/usr"
echo "package_deb: ok"
