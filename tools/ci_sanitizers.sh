#!/usr/bin/env bash
# CI sanitizer job (run by .ci/run after the README's test command; docs/reliability.md), in one build
# tree: the cmake preset "asan" (clang, with -Werror: the library, tests, examples, benchmarks and the
# libFuzzer targets of fuzz/ warning-free with the second compiler; all of them with ASan+UBSan,
# -fno-sanitize-recover=all, and RELGRAD_FUZZ's libFuzzer coverage in the parsers' floors):
#   1. every CPU test under ASan+UBSan and a replay of the fuzzers' seed corpora: ctest presets asan
#      and asan-mpi;
#   2. each libFuzzer target fuzzes for RELGRAD_FUZZ_SECONDS (default 25) seconds, two at a time.
# Any sanitizer report, test failure or fuzzer finding fails the job; a fuzzer's crashing input is
# printed as hex and kept under build-asan/findings/. As root on Debian 12, it installs what is missing.
#   usage: bash tools/ci_sanitizers.sh            RELGRAD_FUZZ_SECONDS=600 bash tools/ci_sanitizers.sh
set -euo pipefail
cd "$(dirname "$0")/.."
fuzz_seconds=${RELGRAD_FUZZ_SECONDS:-25}
jobs=$(nproc)
started=$SECONDS
stamp() { echo "== ci_sanitizers [$((SECONDS - started)) s] $*"; }

# clang + its runtimes (libFuzzer, ASan/UBSan: libclang-rt-14-dev; OpenMP: libomp-14-dev) on top of
# what tools/setup.sh installs. clang's OpenMP runtime is libomp, not gcc's libgomp.
packages="cmake g++ make ninja-build libeigen3-dev doctest-dev nlohmann-json3-dev libpng-dev libtomlplusplus-dev libcli11-dev clang libclang-rt-14-dev libomp-14-dev"
missing=""
for p in $packages; do dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"; done
if [ -n "$missing" ]; then
  stamp "installing$missing"
  apt-get update
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $missing
fi

# ---- 1. ASan + UBSan on the CPU test suite and the seed corpora -----------------------------------
stamp "asan: configure + build (tests and fuzz targets)"
generator=()
[ -f build-asan/CMakeCache.txt ] || generator=(-G Ninja)  # as tools/setup.sh, for a new tree
cmake --preset asan "${generator[@]}" -DRELGRAD_WERROR=ON >/dev/null
cmake --build --preset asan -j "$jobs"
stamp "asan: ctest (the tests and the fuzz_corpus_* replays)"
ctest --preset asan -j "$jobs"
ctest --preset asan-mpi -j "$jobs"  # the MPI tests, with the slow unwinder for tools/lsan.supp
stamp "asan: done"

# ---- 2. fuzzing -----------------------------------------------------------------------------------
declare -A dict=([safetensors]=safetensors [checkpoint]=safetensors [midi]=midi [config_toml]=config_toml
                 [config_json]=config_json [tokens]=tokens
                 [chorales]=chorales)
work=build-asan/fuzz-ci
findings=build-asan/findings
rm -rf "$work" "$findings"
mkdir -p "$work" "$findings"

# fuzz TARGET: mutates a scratch copy of the corpus (new inputs go to $work, never into fuzz/corpus).
fuzz() {
  local t=$1
  mkdir -p "$work/$t"
  build-asan/fuzz/fuzz_$t -max_total_time="$fuzz_seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    -print_funcs=0 -dict="fuzz/dict/${dict[$t]}.dict" -artifact_prefix="$findings/$t-" \
    "$work/$t" "fuzz/corpus/$t" >"$work/$t.log" 2>&1
}
stamp "fuzz: ${fuzz_seconds} s per target, $jobs at a time"
failed=""
running=0
declare -a pids
for t in "${!dict[@]}"; do
  fuzz "$t" &
  pids[$!]=$t
  running=$((running + 1))
  if [ "$running" -ge "$jobs" ]; then
    wait -n -p done_pid || failed="$failed ${pids[$done_pid]}"
    running=$((running - 1))
  fi
done
while [ "$running" -gt 0 ]; do
  wait -n -p done_pid || failed="$failed ${pids[$done_pid]}"
  running=$((running - 1))
done

printf '%-12s %12s %8s %8s\n' target executions exec/s corpus
for t in $(printf '%s\n' "${!dict[@]}" | sort); do
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/$t.log")
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$work/$t.log")
  printf '%-12s %12s %8s %8s\n' "$t" "${execs:-?}" "${rate:-?}" "$(ls "$work/$t" | wc -l)"
done
if [ -n "$failed" ]; then
  for t in $failed; do
    echo "== fuzz_$t found a problem; its log ends with:"
    tail -n 60 "$work/$t.log"
    for f in "$findings"/"$t"-*; do
      [ -f "$f" ] || continue
      echo "== input $f ($(stat -c %s "$f") bytes; replay: build-asan/fuzz/fuzz_$t $f):"
      od -A x -t x1z -v "$f" | head -n 64
    done
  done
  stamp "FAILED:$failed"
  exit 1
fi
stamp "all sanitizer and fuzz checks passed"
