#!/usr/bin/env bash
# Cost growth with the sequence length (docs/benchmarks.md, "Cost growth with L"): the W1 shape
# (bench/bench_train.cpp, charlm: 4 layers, d_model 256, 4 heads, the seed's learned relative term per
# head, causal) at L = 128 … 2048, composite and fused attention core, the same 4,096 tokens per step
# (batch = 4096 / L), so the score part of a step grows ∝ B·L² = 4096·L and everything else stays.
# One process per row (peak RSS is per process); rounds interleave the two cores.
#
# CORE=1: the attention core of that shape alone instead (bench/bench_flash, B = TOKENS / L, 4 heads of
# 64, causal, the per-head table): the fused core with the CPU backward in two passes and in one
# (--backward, core/cpu/flash_attention.h), and the composite core, interleaved; fwd and bwd ms on
# RELGRAD_BENCH_CLOCK [cpu] (processor time, fair on a shared machine), median of REPS [7].
# FLASH_BEFORE: another bench_flash (one built on older kernels), run first in each row group as
# "fused_rel before", so a change is measured against what it replaced, interleaved.
# CLOCK=cpu (the step table): a row's step is processor time, (user + sys of a run of 2·STEPS steps −
# that of a run of STEPS) / STEPS, so start-up and warm-up cancel; tokens/s follows from it, GFLOP/s
# stays the bench's wall-clock figure. TRAIN_BEFORE: another bench_train (one built on older kernels),
# whose fused core runs as "fused-before" beside the two.
#
# Usage: bench/run_growth.sh [build dir, default ./build]
#   LENGTHS ["128 256 512 1024 2048"]  TOKENS [4096]  STEPS [3]  WARMUP [1]  ROUNDS [1]  THREADS [1]
#   CORE [0]  REPS [7]  FLASH_BEFORE []  CLOCK [wall]  TRAIN_BEFORE []
set -euo pipefail
build=${1:-./build}
LENGTHS=${LENGTHS:-"128 256 512 1024 2048"}
TOKENS=${TOKENS:-4096}
STEPS=${STEPS:-3}
WARMUP=${WARMUP:-1}
ROUNDS=${ROUNDS:-1}
export OMP_NUM_THREADS=${THREADS:-1}

if [ "${CORE:-0}" = 1 ]; then
  flash="$build/bench/bench_flash"
  [ -x "$flash" ] || { echo "no $flash: configure with -DRELGRAD_BENCH=ON and build the bench_flash target first" >&2; exit 1; }
  export RELGRAD_BENCH_CLOCK=${RELGRAD_BENCH_CLOCK:-cpu}
  REPS=${REPS:-7}
  echo "== $(date -u +%Y-%m-%dT%H:%MZ), $(getconf _NPROCESSORS_ONLN) cores, $(lscpu | sed -n 's/^Model name: *//p'), OMP_NUM_THREADS=$OMP_NUM_THREADS"
  echo "== the W1 attention core, $TOKENS tokens per call, median of $REPS after 1, $RELGRAD_BENCH_CLOCK clock"
  printf "%-6s %-6s %-24s %10s %10s %12s %10s\n" L batch core "fwd ms" "bwd ms" "fwd+bwd ms" "peak MiB"
  for _ in $(seq "$ROUNDS"); do
    for L in $LENGTHS; do
      B=$(( TOKENS / L )); [ "$B" -ge 1 ] || B=1
      for backward in ${FLASH_BEFORE:+before} two-pass one-pass composite; do
        variant=fused_rel label="fused_rel $backward" exe=$flash
        [ "$backward" = composite ] && variant=composite_rel label=composite_rel backward=auto
        [ "$backward" = before ] && exe=$FLASH_BEFORE backward=auto
        row=$("$exe" --tokens "$TOKENS" --lengths "$L" --variants "$variant" --backward "$backward" --reps "$REPS" \
          | grep "^| $variant |")
        # | variant | L | fwd ms | bwd ms | fwd+bwd ms | peak MiB | det table | det dq/dk/dv |
        echo "$row" | awk -F'|' -v L="$L" -v B="$B" -v core="$label" \
          '{ gsub(/ /, "", $4); gsub(/ /, "", $5); gsub(/ /, "", $6); gsub(/ /, "", $7);
             printf "%-6s %-6s %-24s %10s %10s %12s %10s\n", L, B, core, $4, $5, $6, $7 }'
      done
    done
  done
  exit 0
fi
bench="$build/bench/bench_train"
[ -x "$bench" ] || { echo "no $bench: build the bench target first" >&2; exit 1; }

echo "== $(date -u +%Y-%m-%dT%H:%MZ), $(getconf _NPROCESSORS_ONLN) cores, $(lscpu | sed -n 's/^Model name: *//p'), OMP_NUM_THREADS=$OMP_NUM_THREADS"
CLOCK=${CLOCK:-wall}
echo "== W1 shape, $TOKENS tokens per step, $STEPS timed steps after $WARMUP, $([ "$CLOCK" = cpu ] && echo "processor time per step" || echo "median step")"
cpu_times=$(mktemp)
trap 'rm -f "$cpu_times"' EXIT
printf "%-6s %-6s %-12s %10s %10s %12s %12s %14s\n" L batch core "step s" "tokens/s" "GFLOP/s" "peak RSS MiB" "live peak MiB"
for round in $(seq "$ROUNDS"); do
  for L in $LENGTHS; do
    B=$(( TOKENS / L )); [ "$B" -ge 1 ] || B=1
    for core in composite ${TRAIN_BEFORE:+fused-before} fused; do
      exe=$bench flag=""
      [ "$core" = composite ] || flag="--fused"
      [ "$core" = fused-before ] && exe=$TRAIN_BEFORE
      if [ "$CLOCK" = cpu ]; then
        /usr/bin/time -o "$cpu_times" -f "%U %S" "$exe" --workload charlm --context "$L" --batch "$B" --steps "$STEPS" \
          --warmup "$WARMUP" $flag >/dev/null 2>&1
        short=$(awk '{ print $1 + $2 }' "$cpu_times")
        out=$(/usr/bin/time -o "$cpu_times" -f "%U %S" "$exe" --workload charlm --context "$L" --batch "$B" \
          --steps $(( 2 * STEPS )) --warmup "$WARMUP" $flag 2>&1)
        step=$(awk -v s="$short" -v n="$STEPS" '{ printf "%.3f", ($1 + $2 - s) / n }' "$cpu_times")
        toks=$(awk -v s="$step" -v t="$TOKENS" 'BEGIN { printf "%.0f", t / s }')
      else
        out=$("$exe" --workload charlm --context "$L" --batch "$B" --steps "$STEPS" --warmup "$WARMUP" $flag 2>&1)
        step=$(echo "$out" | sed -n 's/.*step \([0-9.]*\) s (.*/\1/p' | head -1)
        toks=$(echo "$out" | sed -n 's/.*-> *\([0-9]*\) tokens\/s.*/\1/p' | head -1)
      fi
      gf=$(echo "$out" | sed -n 's/.*tokens\/s, *\([0-9.]*\) GFLOP\/s.*/\1/p' | head -1)
      rss=$(echo "$out" | sed -n 's/.*peak RSS \([0-9]*\) MiB.*/\1/p' | head -1)
      live=$(echo "$out" | sed -n 's/.*live tensor peak \([0-9]*\) MiB.*/\1/p' | head -1)
      printf "%-6s %-6s %-12s %10s %10s %12s %12s %14s\n" "$L" "$B" "$core" "$step" "$toks" "$gf" "$rss" "$live"
    done
  done
done
