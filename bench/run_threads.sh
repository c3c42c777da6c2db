#!/usr/bin/env bash
# Threads on a shared machine (docs/benchmarks.md, "Threads on a shared machine"): tokens/s of the
# default run (configs/default.toml, STEPS steps) by train.threads (0 = the adaptive default,
# train/trainer/thread_policy.h) and OpenMP wait policy, first on an idle machine, then beside one
# CPU-bound process (a shell busy loop). Run it on an otherwise idle machine; it prints one line per
# setting, and for the adaptive runs the thread count the run settled on.
#
# Usage: bench/run_threads.sh [RELGRAD binary, default ./build/relgrad]
#   THREADS_IDLE ["0 1 2 3"]  THREADS_BUSY ["0 1 2 3"]  STEPS [600]  CONFIG [default run]
set -euo pipefail
relgrad=${1:-./build/relgrad}
THREADS_IDLE=${THREADS_IDLE:-"0 1 2 3"}
THREADS_BUSY=${THREADS_BUSY:-"0 1 2 3"}
STEPS=${STEPS:-600}
CONFIG=${CONFIG:-}
out=$(mktemp -d)
trap 'rm -rf "$out"; [ -n "${busy:-}" ] && kill "$busy" 2>/dev/null || true' EXIT

run() {  # label threads policy
  local log="$out/train.log"
  rm -rf "$out/run"
  if [ "$3" = passive ]; then export OMP_WAIT_POLICY=PASSIVE; else unset OMP_WAIT_POLICY; fi
  local t0 t1
  t0=$(date +%s.%N)
  "$relgrad" train ${CONFIG:+--config "$CONFIG"} --train.steps="$STEPS" --train.threads="$2" \
    --train.target_accuracy=0 --train.out_dir="$out/run" >"$log" 2>&1
  t1=$(date +%s.%N)
  # The command's own rate is per log window; the whole run's is tokens / training seconds.
  local tokens secs
  tokens=$(grep -o '"tokens":[0-9]*' "$out/run/log.jsonl" | tail -1 | cut -d: -f2)
  secs=$(grep '"event":"train"' "$out/run/log.jsonl" | tail -1 | grep -o '"elapsed_s":[0-9.e+-]*' | cut -d: -f2)
  printf "%-7s threads %s  %-8s %8.0f tokens/s  wall %6.1f s  %s\n" "$1" "$2" "$3" \
    "$(echo "$tokens / $secs" | bc -l)" "$(echo "$t1 - $t0" | bc)" \
    "$(grep -o 'threads: .* of up to [0-9]*' "$log" | sed 's/ of up to.*//' | tr '\n' ' ')"
}

unset OMP_NUM_THREADS
echo "== $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores, $(lscpu | sed -n 's/^Model name: *//p')"
for t in $THREADS_IDLE; do for p in default passive; do
  { [ "$t" = 1 ] || [ "$t" = 0 ]; } && [ "$p" = passive ] && continue  # one thread never waits; 0 adapts
  run idle "$t" "$p"
done; done
( while :; do :; done ) &
busy=$!
for t in $THREADS_BUSY; do for p in default passive; do
  { [ "$t" = 1 ] || [ "$t" = 0 ]; } && [ "$p" = passive ] && continue
  run "1 busy" "$t" "$p"
done; done
