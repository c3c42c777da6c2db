#!/usr/bin/env bash
# Installs what relgrad needs on Debian 12 (as root), then configures and builds it in ./build.
# Used by both commands of the README's quick start and by .ci/run:
#   bash tools/setup.sh          the relgrad command alone (what the main job needs), built first so
#                                that the first training step comes minutes sooner
#   bash tools/setup.sh tests    then everything ctest runs: the tests, the examples (and, with
#                                RELGRAD_BENCH=ON as CI sets it, the benchmarks)
# Each stage prints its time (docs/reliability.md, "Build and test time").
set -euo pipefail
cd "$(dirname "$0")/.."
what=${1:-command}
case "$what" in
  command | tests) ;;
  *) echo "usage: bash tools/setup.sh [tests]   (got '$what')" >&2; exit 2 ;;
esac
started=$SECONDS
stamp() { echo "relgrad setup [$((SECONDS - started)) s]: $*"; }
# bible-kjv: the default text corpus (data/kjv.txt, made below), no download from outside Debian.
# ninja-build: the build tool (below).
# libopenmpi-dev openmpi-bin: `mpirun -np N relgrad train` (docs/distributed.md) and its tests.
# libopenblas0-pthread libblis4-serial: the GEMM libraries relgrad measures against Eigen's on its first
# product and uses when faster here (core/cpu/gemm_library.h); loaded at run time, nothing to build against.
# libtcmalloc-minimal4: the malloc the programs built here link (CMakeLists.txt, RELGRAD_TCMALLOC).
packages="cmake g++ make ninja-build pkg-config libeigen3-dev doctest-dev nlohmann-json3-dev libpng-dev libtomlplusplus-dev libcli11-dev bible-kjv libopenmpi-dev openmpi-bin libopenblas0-pthread libblis4-serial libtcmalloc-minimal4"
missing=""
for p in $packages; do dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"; done
if [ -n "$missing" ]; then
  stamp "installing$missing"
  apt-get update
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $missing
fi
# The default corpus for the char-level LM: the King James Bible as plain text (4.3 MB), written
# atomically so an interrupted set-up never leaves a truncated corpus behind.
if [ ! -s data/kjv.txt ] && command -v bible >/dev/null 2>&1; then
  mkdir -p data
  bible gen1:1-rev22:21 </dev/null >data/kjv.txt.tmp && mv data/kjv.txt.tmp data/kjv.txt
fi
# CUDA is compiled when a GPU answers (nvidia-smi -L) and nvcc is present (RELGRAD_CUDA=AUTO): on a
# machine without one, its 16 .cu files would add a minute or two to the build for tests that skip.
# RELGRAD_CUDA=ON compiles it anyway (.ci/run does, so the CUDA code is compiled on every submission);
# RELGRAD_CUDA=OFF never.
if [ -z "${RELGRAD_CUDA:-}" ]; then
  if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then RELGRAD_CUDA=AUTO; else RELGRAD_CUDA=OFF; fi
fi
# RELGRAD_WERROR=ON (.ci/run) makes the library's -Wall -Wextra warnings errors; RELGRAD_BENCH=ON
# (.ci/run) builds the benchmark programs of bench/ with the tests.
# Ninja for a new build tree: unlike make's per-target steps, it starts a library's files while the
# library under it is still compiling, so neither core idles at the end of each floor (an existing
# tree keeps the generator it was made with).
generator=()
[ -f build/CMakeCache.txt ] || generator=(-G Ninja)
stamp "configure"
cmake -S . -B build "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -DRELGRAD_CUDA="$RELGRAD_CUDA" \
  -DRELGRAD_WERROR="${RELGRAD_WERROR:-OFF}" -DRELGRAD_BENCH="${RELGRAD_BENCH:-OFF}" >/dev/null
stamp "build the relgrad command"
cmake --build build -j "$(nproc)" --target relgrad_cli
stamp "the relgrad command is built: ./build/relgrad"
if [ "$what" = tests ]; then
  stamp "build the tests and examples"
  cmake --build build -j "$(nproc)"
  stamp "the tests and examples are built: ctest --test-dir build -L quick (README), -L long (CI)"
fi
