#!/usr/bin/env bash
# Prepares, on a Debian 12 machine (as root), what bench/run_gpu.sh needs on a bare GPU machine that
# has a compiler, CMake, nvcc and PyTorch but no Debian development packages and no internet. Only
# the repository's working tree travels there, plus up to 8 ignored paths named as "carry" (64 MiB
# in all with the tree). This script makes those paths:
#   .gpu-deps/    relgrad's build dependencies (CMakeLists.txt's find_package list, MPI off): the
#                 Debian 12 packages below, fetched with `apt-get download` and unpacked with
#                 `dpkg -x`, trimmed (no docs, man pages, static libraries) and made relocatable
#                 (absolute symlinks made relative; doctest's CMake file computes its prefix instead
#                 of naming /usr). run_gpu.sh points CMAKE_PREFIX_PATH at .gpu-deps/usr and
#                 LD_LIBRARY_PATH at .gpu-deps/runtime (libtomlplusplus.so.3, libpng16.so.16 only).
#   .gpu-ref/     PyTorch's reference scripts (torch_ref.py, benchutil.py and their README), copied
#                 from the shared bench folder (the argument, else $TORCH_REF_DIR, else the shared
#                 folder beside the checkout).
#   data/kjv.txt  the default corpus (tests and the CLI read it), made as tools/setup.sh makes it.
# It adds .gpu-deps/ and .gpu-ref/ to .gitignore, prints the carry list and the total size, and with
# CHECK=1 configures (Ninja) and builds relgrad_cli and one test file's object against .gpu-deps alone,
# in a mount namespace that hides the system's copies of the same packages (proof that nothing
# resolves outside), and runs `relgrad --version` there.
#
# Usage:   bash bench/gpu_prepare.sh [DIR holding torch_ref.py]          (here, once per change of deps)
#          CHECK=1 bash bench/gpu_prepare.sh                              (plus the isolation check)
# then on the GPU machine, with carry ".gpu-deps .gpu-ref data/kjv.txt":
#          bash bench/run_gpu.sh            (SHORT=1 for a rerun; see its header)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
deps=.gpu-deps
arch=x86_64-linux-gnu
# libpng-dev's headers and libpng16.so need libpng16-16 (the library itself) and zlib (FindPNG asks
# for ZLIB; zlib1g-dev's libz.so points into zlib1g); libtomlplusplus-dev's library is in
# libtomlplusplus3. Eigen, doctest, nlohmann-json and CLI11 are headers and CMake files only.
packages="libeigen3-dev doctest-dev nlohmann-json3-dev libtomlplusplus-dev libtomlplusplus3 libcli11-dev
libpng-dev libpng16-16 zlib1g-dev zlib1g"

echo "== .gpu-deps: Debian packages"
debs=$(mktemp -d)
trap 'rm -rf "$debs"' EXIT
# shellcheck disable=SC2086  # the package list is meant to split
if ! (cd "$debs" && apt-get download $packages >/dev/null 2>&1); then
  apt-get update >/dev/null
  (cd "$debs" && apt-get download $packages >/dev/null)
fi
rm -rf "$deps"
mkdir -p "$deps"
for d in "$debs"/*.deb; do
  dpkg -x "$d" "$deps"
  printf '  %-24s %s\n' "$(dpkg-deb -f "$d" Package)" "$(dpkg-deb -f "$d" Version)"
done | tee "$deps/PACKAGES"
rm -rf "${deps:?}/usr/share/doc" "${deps:?}/usr/share/man" "${deps:?}/usr/bin" "${deps:?}/usr/share/lintian"
find "$deps" -name '*.a' -delete
# Absolute symlinks (zlib1g-dev's libz.so -> /lib/...) would point into the GPU machine's own tree.
find "$deps" -type l | while read -r link; do
  target=$(readlink "$link")
  case $target in /*) ln -sfn "$(realpath -m --relative-to="$(dirname "$link")" "$deps$target")" "$link" ;; esac
done
# doctest's exported targets name /usr; make the prefix the folder three levels above the file.
# shellcheck disable=SC2016  # ${CMAKE_CURRENT_LIST_DIR} is CMake's, written as is
sed -i 's|^set(_IMPORT_PREFIX "/usr")$|get_filename_component(_IMPORT_PREFIX "${CMAKE_CURRENT_LIST_DIR}/../../.." ABSOLUTE)|' \
  "$deps/usr/lib/cmake/doctest/doctestTargets.cmake"
grep -q 'CMAKE_CURRENT_LIST_DIR}/../../..' "$deps/usr/lib/cmake/doctest/doctestTargets.cmake" ||
  { echo "gpu_prepare.sh: doctestTargets.cmake has changed: its prefix was not patched" >&2; exit 1; }
# The shared libraries relgrad's programs load at run time, alone in one folder (LD_LIBRARY_PATH
# there reaches nothing else, e.g. not zlib, which the GPU machine has in a newer version).
mkdir -p "$deps/runtime"
for lib in libtomlplusplus.so.3 libpng16.so.16; do
  real=$(realpath "$deps/usr/lib/$arch/$lib")
  cp "$real" "$deps/runtime/$lib"
done
broken=$(find "$deps" -xtype l)
[ -z "$broken" ] || { echo "gpu_prepare.sh: dangling symlinks: $broken" >&2; exit 1; }

echo "== .gpu-ref: PyTorch's reference scripts"
ref=""
for d in "${1:-}" "${TORCH_REF_DIR:-}" "$root/../shared/bench" "$root/shared/bench"; do
  if [ -n "$d" ] && [ -f "$d/torch_ref.py" ]; then ref=$(cd "$d" && pwd); break; fi
done
[ -n "$ref" ] || { echo "gpu_prepare.sh: no torch_ref.py found (pass its folder)" >&2; exit 1; }
rm -rf .gpu-ref
mkdir .gpu-ref
cp "$ref/torch_ref.py" "$ref/benchutil.py" "$ref/README.md" .gpu-ref/
chmod u+w .gpu-ref/*
echo "  from $ref: $(cd .gpu-ref && echo *)"

echo "== data/kjv.txt"
if [ ! -s data/kjv.txt ]; then
  command -v bible >/dev/null 2>&1 || DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends bible-kjv
  mkdir -p data
  bible gen1:1-rev22:21 </dev/null >data/kjv.txt.tmp && mv data/kjv.txt.tmp data/kjv.txt
fi
echo "  $(wc -c <data/kjv.txt) bytes"

for line in ".gpu-deps/" ".gpu-ref/"; do
  grep -qxF "$line" .gitignore || echo "$line" >>.gitignore
done

echo "== sizes"
tree_bytes=$(git ls-files -z -co --exclude-standard | du -cb --files0-from=- 2>/dev/null | tail -n 1 | cut -f1)
carry_bytes=$(du -cb .gpu-deps .gpu-ref data/kjv.txt | tail -n 1 | cut -f1)
total=$((tree_bytes + carry_bytes))
echo "  working tree (tracked + untracked, not ignored): $((tree_bytes / 1024)) KiB"
du -sk .gpu-deps .gpu-ref data/kjv.txt | sed 's/^/  carry: /; s/\t/ KiB  /'
echo "  total: $((total / 1024 / 1024)) MiB of 64 MiB"
[ "$total" -lt $((56 * 1024 * 1024)) ] || echo "gpu_prepare.sh: WARNING: above 56 MiB, too close to the 64 MiB limit" >&2
echo "carry: .gpu-deps .gpu-ref data/kjv.txt"

if [ "${CHECK:-0}" != 0 ]; then
  # Hide the system's copies (empty folders over header and CMake folders, /dev/null over libraries),
  # so a configure or build that reached any of them fails. Private mount namespace: nothing leaks.
  echo "== CHECK: configure + build relgrad_cli and tests/test_config.cpp against .gpu-deps only"
  build=${CHECK_BUILD:-$root/build-gpu-deps-check}
  # The cache entries that say where each dependency was found.
  found='^((Eigen3|nlohmann_json|tomlplusplus|CLI11|doctest)_DIR|PNG_(LIBRARY_RELEASE|PNG_INCLUDE_DIR)|ZLIB_(INCLUDE_DIR|LIBRARY_RELEASE)):' 
  hide=""
  # Files first, each resolved to the file its symlinks name (hiding that hides every link to it).
  # Not zlib's library: the tools themselves load it (CMakeCache.txt's ZLIB_LIBRARY is checked below).
  for f in /usr/include/png.h /usr/include/zlib.h /usr/lib/$arch/libtomlplusplus.so /usr/lib/$arch/libpng16.so; do
    [ -e "$f" ] && hide="$hide mount --bind /dev/null $(realpath "$f");"
  done
  for p in /usr/include/eigen3 /usr/share/eigen3 /usr/include/doctest /usr/lib/cmake/doctest /usr/include/nlohmann \
    /usr/share/cmake/nlohmann_json /usr/include/toml++ /usr/lib/$arch/cmake/tomlplusplus /usr/include/CLI \
    /usr/share/cmake/CLI11 /usr/include/libpng16; do
    [ -d "$p" ] && hide="$hide mount --bind $(mktemp -d) $p;"
  done
  unshare -m bash -euo pipefail -c "$hide
    export LD_LIBRARY_PATH=$root/.gpu-deps/runtime
    cmake -S '$root' -B '$build' -G Ninja -DCMAKE_BUILD_TYPE=Release -DRELGRAD_CUDA=OFF -DRELGRAD_MPI=OFF \
      -DCMAKE_PREFIX_PATH='$root/.gpu-deps/usr' -DCMAKE_CXX_COMPILER_LAUNCHER=\$(command -v ccache || true) >/dev/null
    grep -E '$found' '$build/CMakeCache.txt' | sed 's/^/  /'
    cmake --build '$build' -j \"\$(nproc)\" --target relgrad_cli tests/CMakeFiles/relgrad_tests.dir/test_config.cpp.o >/dev/null
    echo \"  \$('$build/relgrad' --version)\"
    ldd '$build/relgrad' | grep -E 'toml|png|libz' | sed 's/^/  /'
    grep -o -- '-isystem [^ ]*' '$build/compile_commands.json' | sort -u | sed 's/^/  /'"
  # Every location found, and every -isystem folder of the compile commands, inside .gpu-deps.
  outside=$({ grep -E "$found" "$build/CMakeCache.txt"; grep -o -- '-isystem [^ ]*' "$build/compile_commands.json"; } |
    grep -v "$root/.gpu-deps" || true)
  if [ "$(grep -cE "$found" "$build/CMakeCache.txt")" != 9 ] || [ -n "$outside" ]; then
    echo "gpu_prepare.sh: CHECK FAILED: a dependency resolved outside .gpu-deps (or was not found): $outside" >&2
    exit 1
  fi
  echo "  CHECK passed: every dependency resolved into .gpu-deps"
fi
