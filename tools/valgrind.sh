#!/usr/bin/env bash
# Valgrind memcheck over a small CPU-only subset of the tests (docs/reliability.md): the file
# parsers (safetensors, MIDI, config, token files) and a few kernels. A second opinion on ASan: it
# needs no recompilation of the code it checks for uninitialised reads (which ASan does not see) and
# runs the code as the compiler optimised it. 10-50x slower than native, so only a subset.
#   usage: bash tools/valgrind.sh [extra doctest args]     (exit 1 on any memcheck error or test failure)
#   RELGRAD_VALGRIND_BUILD=dir  build directory (default build-valgrind, configured from the
#                                "valgrind" preset: -O1 -g, no -march=native, since valgrind 3.19
#                                cannot decode AVX-512 instructions)
# Helgrind/DRD are not used: they do not understand OpenMP runtimes (use the tsan preset instead).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${RELGRAD_VALGRIND_BUILD:-build-valgrind}
command -v valgrind >/dev/null || { echo "valgrind.sh: valgrind is not installed (apt-get install valgrind)" >&2; exit 1; }
cmake --preset valgrind -B "$build" >/dev/null
cmake --build "$build" -j "$(nproc)" --target relgrad_tests
tests="safetensors*,midi*,config*,token file*,op matmul 2d,op matmul batched,op softmax,op log_softmax,op cross_entropy,op layer_norm affine,op sum,op embedding,tensor factories,views share storage and see writes"
# The midi fuzz case runs 20,000 mutations by default: 300 are plenty under valgrind.
export RELGRAD_MIDI_FUZZ=${RELGRAD_MIDI_FUZZ:-300}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
# Set, so that the program does not run itself again at start-up to set it (core/openmp_start.cpp):
# valgrind would not follow that exec without --trace-children.
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
exec valgrind --tool=memcheck --error-exitcode=1 --leak-check=full --show-leak-kinds=definite --errors-for-leak-kinds=definite \
  --track-origins=yes --num-callers=30 --quiet \
  "$build/tests/relgrad_tests" -tc="$tests" "$@"
