#!/usr/bin/env bash
# Before/after speed of two relgrad builds on the same machine, interleaved round by round so that
# load from elsewhere hits both alike: W1 charlm and W2 seq2seq (bench/bench_train), the relative-
# attention micro benchmark (bench/bench_relattn: seed, huang, t5 at L = 512) and the README's main
# job (`relgrad train`, default config, 300 steps; its tokens/s). Prints each figure's median over
# rounds, the ratio (above 1: the new build is faster) and each side's range over rounds. Used to
# show that a restructuring changed no speed (docs/benchmarks.md).
#   usage: bench/compare_builds.sh OLD_BUILD_DIR NEW_BUILD_DIR      (each holding bench/bench_train,
#          bench/bench_relattn and relgrad, Release builds)
# Settings [defaults]: THREADS [2]  ROUNDS [3]  STEPS [8]  WARMUP [2]
set -euo pipefail
old=$(cd "$1" && pwd)
new=$(cd "$2" && pwd)
THREADS=${THREADS:-2}
ROUNDS=${ROUNDS:-3}
STEPS=${STEPS:-8}
WARMUP=${WARMUP:-2}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export OMP_NUM_THREADS=$THREADS

for r in $(seq 1 "$ROUNDS"); do
  for side in old new; do
    dir=${!side}
    echo "round $r: $side ($dir)" >&2
    for w in charlm seq2seq; do
      "$dir/bench/bench_train" --workload "$w" --steps "$STEPS" --warmup "$WARMUP" --json "$work/$side.$w.$r.json" >/dev/null
      grep -o '"tokens_per_s": [0-9.e+]*' "$work/$side.$w.$r.json" | awk -v k="$w tok/s" '{print k "\t" $2}' >>"$work/$side.tsv"
    done
    "$dir/bench/bench_relattn" --tsv --variants seed,huang,t5 --lengths 512 --reps 5 --warmup 1 --min-time 1 |
      awk -F'\t' '!/^#/ && $5 != "-" {print "relattn " $2 " L=" $3 " s\t" $5}' >>"$work/$side.tsv"
    rm -rf "$work/run"
    "$dir/relgrad" train --train.steps=300 --train.out_dir="$work/run" >"$work/$side.train.$r.log" 2>&1
    # The last progress line's tokens/s (the trainer prints "... tok/s ...").
    grep -o '[0-9.]*k\? tok/s' "$work/$side.train.$r.log" | tail -1 | awk '{v=$1; if (v ~ /k$/) {sub(/k$/, "", v); v*=1000} print "relgrad train tok/s\t" v}' >>"$work/$side.tsv"
  done
done

median() { sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
spread() { sort -n | awk '{a[NR]=$1} END {printf "%s-%s", a[1], a[NR]}'; }
printf "%-28s %12s %12s %8s   %s\n" figure old new "new/old" "old range | new range"
cut -f1 "$work/old.tsv" | awk '!seen[$0]++' | while IFS= read -r key; do
  o=$(awk -F'\t' -v k="$key" '$1 == k {print $2}' "$work/old.tsv" | median)
  n=$(awk -F'\t' -v k="$key" '$1 == k {print $2}' "$work/new.tsv" | median)
  # Times (s) are better lower: report the speed ratio old/new for them, new/old for rates.
  case $key in *" s") ratio=$(awk -v o="$o" -v n="$n" 'BEGIN {printf "%.3f", o / n}') ;;
               *) ratio=$(awk -v o="$o" -v n="$n" 'BEGIN {printf "%.3f", n / o}') ;; esac
  ro=$(awk -F'\t' -v k="$key" '$1 == k {print $2}' "$work/old.tsv" | spread)
  rn=$(awk -F'\t' -v k="$key" '$1 == k {print $2}' "$work/new.tsv" | spread)
  printf "%-28s %12s %12s %8s   %s | %s\n" "$key" "$o" "$n" "$ratio" "$ro" "$rn"
done
