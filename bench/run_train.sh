#!/usr/bin/env bash
# Training throughput, relgrad next to PyTorch (docs/benchmarks.md): the W1 charlm and W2 seq2seq
# workloads of PyTorch's reference script torch_ref.py (kept outside this repository, in the folder
# given as the argument, with relattn_micro.py and peak_fma.cpp), run in turn on the same machine —
# relgrad (bench/bench_train), PyTorch with its default settings, and PyTorch with its fastest
# ("expert") settings (OpenBLAS's AVX-512 kernels: OPENBLAS_CORETYPE unset; OMP_WAIT_POLICY=PASSIVE
# at 2 threads) — interleaved round by round so that load from elsewhere hits all three alike. Prints
# tokens/s (median over rounds of each run's median step), GFLOP/s, share of the FMA peak (measured
# by peak_fma.cpp from that folder for the same thread count), peak RSS, and the ratios. Then, unless
# RELATTN=0, runs bench/run_relattn.sh (the relative-attention micro benchmark, both sides).
#
# Usage (from anywhere; builds what it needs in $BUILD):
#   bench/run_train.sh [DIR holding torch_ref.py, relattn_micro.py, peak_fma.cpp]   default: the `shared=` line below
# Settings from the environment [defaults]: THREADS ["1 2"]  ROUNDS [2]  STEPS [12]  WARMUP [3]
#   WORKLOADS ["charlm seq2seq"]  BUILD [build-bench]  RELATTN [1]  LENGTHS [256,512,1024] (relattn)
# Needs Debian's python3-torch and libopenblas0-pthread (PyTorch's BLAS; without it Debian's torch
# falls back to the reference BLAS, ~20x slower). As root, missing packages are installed.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
shared=$(cd "${1:-$root/../shared/bench}" && pwd)
THREADS=${THREADS:-"1 2"}
ROUNDS=${ROUNDS:-2}
STEPS=${STEPS:-12}
WARMUP=${WARMUP:-3}
WORKLOADS=${WORKLOADS:-"charlm seq2seq"}
BUILD=${BUILD:-build-bench}
RELATTN=${RELATTN:-1}

need=""
for p in python3-torch python3-numpy libopenblas0-pthread; do dpkg -s "$p" >/dev/null 2>&1 || need="$need $p"; done
if [ -n "$need" ]; then
  if [ "$(id -u)" = 0 ]; then
    apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $need
  else
    echo "run_train.sh: missing Debian packages:$need (apt-get install them as root)" >&2
    exit 1
  fi
fi

cmake -S "$root" -B "$root/$BUILD" -DCMAKE_BUILD_TYPE=Release -DRELGRAD_CUDA=OFF >/dev/null
cmake --build "$root/$BUILD" -j "$(nproc)" --target bench_train bench_relattn >/dev/null
out=$root/$BUILD/train_results
mkdir -p "$out"
rm -f "$out"/*.json
g++ -O2 -march=native -fopenmp "$shared/peak_fma.cpp" -o "$out/peak_fma"

for t in $THREADS; do
  # The FMA peak for t threads (peak_fma's JSON record, AVX-512 rate).
  OMP_NUM_THREADS=$t "$out/peak_fma" "$t" >"$out/peak_$t.txt" 2>&1 || true  # peak_fma takes its thread count as argv[1]
  for r in $(seq 1 "$ROUNDS"); do
    for w in $WORKLOADS; do
      echo "round $r, $w, $t thread(s): relgrad, torch default, torch expert" >&2
      env -u OMP_WAIT_POLICY OMP_NUM_THREADS=$t "$root/$BUILD/bench/bench_train" --workload "$w" --steps "$STEPS" \
        --warmup "$WARMUP" --json "$out/relgrad_${w}_${t}_$r.json" >/dev/null
      env -u OMP_WAIT_POLICY /usr/bin/python3 "$shared/torch_ref.py" --workload "$w" --threads "$t" --steps "$STEPS" \
        --warmup "$WARMUP" --json "$out/default_${w}_${t}_$r.json" >/dev/null
      passive=""
      [ "$t" -gt 1 ] && passive="OMP_WAIT_POLICY=PASSIVE"
      env -u OPENBLAS_CORETYPE $passive /usr/bin/python3 "$shared/torch_ref.py" --workload "$w" --threads "$t" \
        --steps "$STEPS" --warmup "$WARMUP" --json "$out/expert_${w}_${t}_$r.json" >/dev/null
    done
  done
done

/usr/bin/python3 - "$out" "$THREADS" "$WORKLOADS" <<'EOF'
import glob, json, os, statistics, sys
out, threads, workloads = sys.argv[1], sys.argv[2].split(), sys.argv[3].split()
def peak(t):  # peak_fma's last line is a JSON record; the AVX-512 FMA rate is the peak
    try:
        last = open(os.path.join(out, "peak_%s.txt" % t)).read().strip().splitlines()[-1]
        return statistics.median(json.loads(last)["zmm_gflops"])
    except (IndexError, ValueError, KeyError):
        return float("nan")
def runs(impl, w, t):
    recs = [json.load(open(f)) for f in sorted(glob.glob(os.path.join(out, "%s_%s_%s_*.json" % (impl, w, t))))]
    if not recs:
        return None
    tok = statistics.median(r["tokens_per_s"] if "tokens_per_s" in r else r["tokens_per_s_median"] for r in recs)
    gfl = statistics.median(r["gflops"] if "gflops" in r else r["gflops_median"] for r in recs)
    rss = max(r["peak_rss_mib"] for r in recs)
    return tok, gfl, rss
print("| workload | threads | impl | tokens/s | GFLOP/s | share of FMA peak | peak RSS MiB | relgrad ÷ this |")
print("|---|---|---|---:|---:|---:|---:|---:|")
for w in workloads:
    for t in threads:
        p = peak(t)
        rg = runs("relgrad", w, t)
        for impl in ("relgrad", "default", "expert"):
            r = runs(impl, w, t)
            if r is None:
                continue
            ratio = "" if impl == "relgrad" else "%.2f× speed, %.2f× memory" % (rg[0] / r[0], rg[2] / r[2])
            name = {"relgrad": "relgrad", "default": "PyTorch default", "expert": "PyTorch expert"}[impl]
            print("| %s | %s | %s | %.0f | %.1f | %.0f%% | %.0f | %s |" % (w, t, name, r[0], r[1], 100 * r[1] / p, r[2], ratio))
print("\nFMA peak (peak_fma): " + ", ".join("%s thread(s) %.0f GFLOP/s" % (t, peak(t)) for t in threads))
EOF

if [ "$RELATTN" != 0 ]; then
  LENGTHS=${LENGTHS:-256,512,1024} THREADS="$THREADS" BUILD=$BUILD "$root/bench/run_relattn.sh" "$shared/relattn_micro.py"
fi
