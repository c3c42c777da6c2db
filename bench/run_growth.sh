#!/usr/bin/env bash
# Cost growth with the sequence length (docs/benchmarks.md, "Cost growth with L"): the W1 shape
# (bench/bench_train.cpp, charlm: 4 layers, d_model 256, 4 heads, the seed's learned relative term per
# head, causal) at L = 128 … 2048, composite and fused attention core, the same 4,096 tokens per step
# (batch = 4096 / L), so the score part of a step grows ∝ B·L² = 4096·L and everything else stays.
# One process per row (peak RSS is per process); rounds interleave the two cores.
#
# Usage: bench/run_growth.sh [build dir, default ./build]
#   LENGTHS ["128 256 512 1024 2048"]  TOKENS [4096]  STEPS [3]  WARMUP [1]  ROUNDS [1]  THREADS [1]
set -euo pipefail
build=${1:-./build}
LENGTHS=${LENGTHS:-"128 256 512 1024 2048"}
TOKENS=${TOKENS:-4096}
STEPS=${STEPS:-3}
WARMUP=${WARMUP:-1}
ROUNDS=${ROUNDS:-1}
export OMP_NUM_THREADS=${THREADS:-1}
bench="$build/bench/bench_train"
[ -x "$bench" ] || { echo "no $bench: build the bench target first" >&2; exit 1; }

echo "== $(date -u +%Y-%m-%dT%H:%MZ), $(getconf _NPROCESSORS_ONLN) cores, $(lscpu | sed -n 's/^Model name: *//p'), OMP_NUM_THREADS=$OMP_NUM_THREADS"
echo "== W1 shape, $TOKENS tokens per step, $STEPS timed steps after $WARMUP, median step"
printf "%-6s %-6s %-9s %10s %10s %12s %12s %14s\n" L batch core "step s" "tokens/s" "GFLOP/s" "peak RSS MiB" "live peak MiB"
for round in $(seq "$ROUNDS"); do
  for L in $LENGTHS; do
    B=$(( TOKENS / L )); [ "$B" -ge 1 ] || B=1
    for core in composite fused; do
      flag=""; [ "$core" = fused ] && flag="--fused"
      out=$("$bench" --workload charlm --context "$L" --batch "$B" --steps "$STEPS" --warmup "$WARMUP" $flag 2>&1)
      step=$(echo "$out" | sed -n 's/.*step \([0-9.]*\) s (.*/\1/p' | head -1)
      toks=$(echo "$out" | sed -n 's/.*-> *\([0-9]*\) tokens\/s.*/\1/p' | head -1)
      gf=$(echo "$out" | sed -n 's/.*tokens\/s, *\([0-9.]*\) GFLOP\/s.*/\1/p' | head -1)
      rss=$(echo "$out" | sed -n 's/.*peak RSS \([0-9]*\) MiB.*/\1/p' | head -1)
      live=$(echo "$out" | sed -n 's/.*live tensor peak \([0-9]*\) MiB.*/\1/p' | head -1)
      printf "%-6s %-6s %-9s %10s %10s %12s %12s %14s\n" "$L" "$B" "$core" "$step" "$toks" "$gf" "$rss" "$live"
    done
  done
done
