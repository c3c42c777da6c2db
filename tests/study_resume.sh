#!/bin/bash
# A bench's full form killed mid-way (SIGKILL, no chance to clean up) and run again: the models scored
# before the kill are read back from their records, not trained again, and only the rest train
# (train/instruments/study.h). Usage: study_resume.sh RELGRAD
set -euo pipefail
relgrad=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
args=(length-bench --full --tasks copy --treatments none,t5,alibi,rope --seeds 1 --steps 30 --out "$dir/bench")
records() { find "$dir/bench/runs" -name study-record.txt 2>/dev/null | sort; }

"$relgrad" "${args[@]}" > "$dir/first.log" 2>&1 &
pid=$!
for _ in $(seq 1 3000); do  # until the first model is scored (at most 5 minutes)
  [ -n "$(records)" ] && break
  kill -0 "$pid" 2>/dev/null || break
  sleep 0.1
done
kill -9 "$pid" 2>/dev/null || true
wait "$pid" 2>/dev/null || true
before=$(records | wc -l)
if [ "$before" -lt 1 ] || [ "$before" -ge 4 ]; then
  echo "FAIL: the kill should come after the first model and before the last ($before records)"
  cat "$dir/first.log"
  exit 1
fi
mkdir "$dir/kept"
for r in $(records); do cp "$r" "$dir/kept/$(basename "$(dirname "$r")")"; done

"$relgrad" "${args[@]}" > "$dir/second.log"
kept=$(grep -c "(kept from an earlier run)" "$dir/second.log" || true)
trained=$(grep -cE "^  \[[0-9]+/4\] .* \([0-9]+ s(; ETA [^)]*)?\)$" "$dir/second.log" || true)
if [ "$kept" != "$before" ] || [ $((kept + trained)) != 4 ]; then
  echo "FAIL: $before models were scored before the kill; the rerun kept $kept and trained $trained of 4"
  cat "$dir/second.log"
  exit 1
fi
for k in "$dir"/kept/*; do  # a kept record is read, not rewritten
  cmp -s "$k" "$dir/bench/runs/$(basename "$k")/study-record.txt" || { echo "FAIL: $(basename "$k")'s record changed"; exit 1; }
done
[ "$(wc -l < "$dir/bench/results.csv")" = 17 ] || { echo "FAIL: results.csv lacks rows"; exit 1; }  # header + 4 models x 4 buckets
echo "ok: killed after $before of 4 models; the rerun kept $kept and trained $trained"
