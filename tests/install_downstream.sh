#!/usr/bin/env bash
# relgrad as a library (ctest: "install: find_package and pkg-config"; cmake/install.cmake): installs
# the already-built tree into a scratch prefix (no rebuild), checks the installed files, then builds
# examples/downstream/ against that prefix twice, with find_package(relgrad) and with a plain compiler
# command from `pkg-config --cflags --libs relgrad`, and runs both.
#   usage: install_downstream.sh BUILD_DIR SOURCE_DIR VERSION CXX [COMPILER_LAUNCHER]
set -euo pipefail
build=${1:?usage: install_downstream.sh BUILD_DIR SOURCE_DIR VERSION CXX [LAUNCHER]}
src=$2 version=$3 cxx=$4 launcher=${5:-}
work=$(mktemp -d "${TMPDIR:-/tmp}/relgrad_install.XXXXXX")
trap 'rm -rf "$work"' EXIT
fail() { echo "install_downstream: FAIL: $*" >&2; exit 1; }
source "$src/tests/downstream_testing.sh"

prefix=$work/prefix
cmake --install "$build" --prefix "$prefix" >"$work/install.log" 2>&1 \
  || { cat "$work/install.log" >&2; fail "cmake --install failed"; }
for f in bin/relgrad include/relgrad/relgrad.h include/relgrad/core/tensor.h include/relgrad/core/version.h \
         include/relgrad/train/trainer/checkpoint.h lib/librelgrad_core.a lib/librelgrad_config.a \
         lib/cmake/relgrad/relgradConfig.cmake lib/cmake/relgrad/relgradConfigVersion.cmake \
         lib/cmake/relgrad/relgradTargets.cmake lib/pkgconfig/relgrad.pc share/doc/relgrad/README.md; do
  [[ -e $prefix/$f ]] || fail "cmake --install wrote no $f"
done
# The engine without the lab (cmake/install.cmake): no lab library, header or link flag is handed to a
# downstream program; the lab lives in bin/relgrad alone.
for f in lib/librelgrad_plot.a lib/librelgrad_instruments.a lib/librelgrad_command.a \
         include/relgrad/train/plot include/relgrad/train/instruments include/relgrad/train/command; do
  [[ ! -e $prefix/$f ]] || fail "cmake --install wrote $f, a part of the lab, into the engine's install"
done
if grep -rlE 'relgrad_(plot|instruments|command)|relgrad::(plot|instruments|command)|PNG|CLI11' \
     "$prefix/lib/cmake" "$prefix/lib/pkgconfig"; then
  fail "the installed CMake/pkg-config files above hand the lab (or its libpng / CLI11) to a downstream program"
fi
# Nothing installed may point back into the source or build tree: the install must stand alone.
if grep -rlF -e "$src" -e "$(cd "$build" && pwd)" "$prefix/lib/cmake" "$prefix/lib/pkgconfig"; then
  fail "the installed CMake/pkg-config files above name the source or build tree"
fi
"$prefix/bin/relgrad" --version >"$work/version.out"
grep -qx "relgrad $version" "$work/version.out" || { cat "$work/version.out" >&2; fail "relgrad --version is not $version"; }

echo "== find_package(relgrad) from $prefix"
build_downstream cmake "$prefix"

echo "== pkg-config relgrad from $prefix"
export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
[[ $(pkg-config --modversion relgrad) == "$version" ]] || fail "pkg-config --modversion relgrad is not $version"
flags=$(pkg-config --cflags --libs relgrad) || fail "pkg-config --cflags --libs relgrad failed"
echo "$cxx main.cpp $flags"
# shellcheck disable=SC2086  # the flags are words
$launcher "$cxx" "$work/cmake/main.cpp" -o "$work/downstream-pc" $flags >"$work/pc.build.log" 2>&1 \
  || { cat "$work/pc.build.log" >&2; fail "the plain compiler command with pkg-config's flags failed"; }
run_downstream pkg-config "$work/downstream-pc"

# Every installed header compiles on its own from the install tree (no include it relies on a
# neighbour for, no file left out of the install), two at a time.
echo "== each installed header alone"
cflags=$(pkg-config --cflags relgrad)
export cxx cflags
(cd "$prefix/include/relgrad" && find . -name '*.h' | sort) >"$work/headers"
# shellcheck disable=SC2016  # expanded by the inner shell
xargs -a "$work/headers" -P 2 -I{} sh -c 'cd "$0" && printf "#include \"%s\"\n" "{}" \
  | "$cxx" -x c++ -fsyntax-only $cflags - 2>&1 || echo "FAILED: {}"' "$prefix/include/relgrad" >"$work/headers.log"
if grep -q '^FAILED: ' "$work/headers.log"; then
  cat "$work/headers.log" >&2
  fail "installed headers that do not compile on their own: $(grep -c '^FAILED: ' "$work/headers.log")"
fi
echo "$(wc -l <"$work/headers") headers compile alone"
echo "install_downstream: ok"
