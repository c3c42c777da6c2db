#!/usr/bin/env bash
# Relative attention, relgrad next to PyTorch (docs/benchmarks.md): one causal attention op,
# forward + backward, B=4 H=8 D=64, float32. For each L and each thread count, runs relgrad's
# bench_relattn (every variant, each in a fresh process) and then PyTorch's relattn_micro.py (a
# reference script kept outside this repository; variants none, skew_gather, naive), so load from
# elsewhere lands on both alike; prints one table.
# Builds nothing: build first (Release):
#   cmake -S . -B build-bench -DRELGRAD_CUDA=OFF -DCMAKE_BUILD_TYPE=Release -DRELGRAD_BENCH=ON && make -C build-bench -j2 bench_relattn
# Usage: bench/run_relattn.sh [path/to/relattn_micro.py]   (default: the `micro=` line below).
#        Settings from the environment (defaults in brackets):
#   LENGTHS [128,256,512,1024,2048]  THREADS ["1 2"]  REPS [3]  WARMUP [1]  MIN_TIME [1.0] (seconds of
#   timed work per configuration)  MAX_GIB [16]  MAX_SECONDS [20] (per rep, predicted ∝ L² from the
#   previous L)  RELGRAD_VARIANTS [none,seed,huang,shaw,shaw_v,t5,naive,naive_shared]
#   TORCH_VARIANTS [none,skew_gather,naive]  BUILD [build-bench]  RESULTS [$BUILD/relattn_results.tsv]
# PyTorch runs with its fastest settings on this machine ("expert"): OPENBLAS_CORETYPE unset (AVX-512
# kernels) and, at 2 threads, OMP_WAIT_POLICY=PASSIVE. relgrad gets only OMP_NUM_THREADS (PASSIVE
# slows Eigen's GEMM).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
micro=${1:-$root/../shared/bench/relattn_micro.py}
LENGTHS=${LENGTHS:-128,256,512,1024,2048}
THREADS=${THREADS:-"1 2"}
REPS=${REPS:-3}
WARMUP=${WARMUP:-1}
MIN_TIME=${MIN_TIME:-1.0}
MAX_GIB=${MAX_GIB:-16}
MAX_SECONDS=${MAX_SECONDS:-20}
RELGRAD_VARIANTS=${RELGRAD_VARIANTS:-none,seed,huang,shaw,shaw_v,t5,naive,naive_shared}
TORCH_VARIANTS=${TORCH_VARIANTS:-none,skew_gather,naive}
BUILD=${BUILD:-build-bench}
bench=$root/$BUILD/bench/bench_relattn
RESULTS=${RESULTS:-$root/$BUILD/relattn_results.tsv}
[ -x "$bench" ] || { echo "run_relattn.sh: $bench not found; build it first (see the top of this script)" >&2; exit 1; }
[ -f "$micro" ] || { echo "run_relattn.sh: $micro not found (pass the path of relattn_micro.py)" >&2; exit 1; }
[ -x /usr/bin/python3 ] || { echo "run_relattn.sh: /usr/bin/python3 (with torch) not found" >&2; exit 1; }
# Debian's python3-torch links the BLAS that libblas.so.3 points to: netlib unless OpenBLAS is installed.
if ! readlink -f /etc/alternatives/libblas.so.3-x86_64-linux-gnu 2>/dev/null | grep -q openblas; then
  echo "run_relattn.sh: warning: PyTorch will use the reference (netlib) BLAS; for the comparison of" >&2
  echo "  docs/benchmarks.md install OpenBLAS first: apt-get install libopenblas0-pthread" >&2
fi

# Variants of `impl` at `threads` whose previous L took long enough that this L (time ∝ L²) is
# predicted above MAX_SECONDS per rep, or that were skipped at a shorter L: "variant seconds" lines.
too_slow() {  # impl threads L
  awk -F'\t' -v impl="$1" -v th="$2" -v L="$3" -v max="$MAX_SECONDS" '
    $1 == impl && $4 == th && $3 < L { last[$2] = $5; lastL[$2] = $3 }
    END { for (v in last) {
            if (last[v] == "-") print v, "-"
            else { p = last[v] * (L / lastL[v])^2; if (p > max) printf "%s %.0f\n", v, p } } }' "$RESULTS"
}

# relattn_micro.py's --json output as rows of the same TSV.
torch_to_tsv() {  # json threads
  /usr/bin/python3 - "$1" "$2" <<'EOF'
import json, statistics, sys
for d in json.load(open(sys.argv[1])):
    if "skipped" in d:
        print("torch\t%s\t%d\t%s\t-\t-\t-\t-\t-\t-\t-\t-\tskipped (%s)" % (d["variant"], d["L"], sys.argv[2], d["skipped"]))
        continue
    t = sorted(d["fwd_bwd_s"])
    print("torch\t%s\t%d\t%d\t%.4f\t%.4f\t%.4f\t%.4f\t%.4f\t%.0f\t%.0f\t-\tn=%d" % (
        d["variant"], d["L"], d["threads"], statistics.median(t), t[0], t[-1], d["fwd_s_median"],
        d["bwd_s_median"], d["peak_rss_mib"], d["peak_rss_mib"] - d["rss_inputs_mib"], len(t)))
EOF
}

# Drops the variants listed by too_slow from a comma list, and records them as skipped.
runnable() {  # impl threads L list
  local slow keep=() v
  slow=$(too_slow "$1" "$2" "$3")
  for v in ${4//,/ }; do
    local p
    p=$(awk -v v="$v" '$1 == v { print $2 }' <<<"$slow")
    if [ -n "$p" ]; then
      local why="skipped (predicted $p s per rep)"
      [ "$p" = "-" ] && why="skipped (skipped at a shorter L)"
      printf '%s\t%s\t%s\t%s\t-\t-\t-\t-\t-\t-\t-\t-\t%s\n' "$1" "$v" "$3" "$2" "$why" >>"$RESULTS"
    else
      keep+=("$v")
    fi
  done
  (IFS=,; echo "${keep[*]:-}")
}

: >"$RESULTS"
start=$(date +%s)
for L in ${LENGTHS//,/ }; do
  for th in $THREADS; do
    echo "L=$L threads=$th ($(( $(date +%s) - start )) s so far)" >&2
    vs=$(runnable relgrad "$th" "$L" "$RELGRAD_VARIANTS")
    [ -n "$vs" ] && OMP_NUM_THREADS=$th "$bench" --tsv --lengths "$L" --variants "$vs" --reps "$REPS" \
      --warmup "$WARMUP" --min-time "$MIN_TIME" --max-gib "$MAX_GIB" --max-seconds "$MAX_SECONDS" | grep -v '^#' >>"$RESULTS"
    vs=$(runnable torch "$th" "$L" "$TORCH_VARIANTS")
    if [ -n "$vs" ]; then
      json=$(mktemp)
      passive=()
      [ "$th" -gt 1 ] && passive=(OMP_WAIT_POLICY=PASSIVE)
      env -u OPENBLAS_CORETYPE "${passive[@]}" OMP_NUM_THREADS="$th" /usr/bin/python3 "$micro" --threads "$th" \
        --lengths "$L" --variants "$vs" --reps "$REPS" --warmup "$WARMUP" --min-time "$MIN_TIME" \
        --max-gib "$MAX_GIB" --max-seconds "$MAX_SECONDS" --json "$json" >/dev/null
      torch_to_tsv "$json" "$th" >>"$RESULTS"
      rm -f "$json"
    fi
  done
done
echo "total $(( $(date +%s) - start )) s; raw rows in $RESULTS" >&2

# One table: each relgrad row next to its PyTorch twin (none↔none, seed↔skew_gather,
# huang↔skew_pad, naive↔naive, naive_shared↔naive_shared) where one was run.
echo "| L | threads | variant | relgrad s | × none | peak RSS MiB | over inputs | live peak MiB | torch variant | torch s | torch × none | torch peak RSS MiB | time relgrad/torch | note |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
awk -F'\t' '
  BEGIN { twin["none"] = "none"; twin["seed"] = "skew_gather"; twin["huang"] = "skew_pad"; twin["naive"] = "naive";
          twin["naive_shared"] = "naive_shared" }
  { key = $1 SUBSEP $2 SUBSEP $3 SUBSEP $4; med[key] = $5; peak[key] = $10; over[key] = $11; live[key] = $12;
    note[key] = $13; if ($1 == "relgrad") order[++n] = $2 SUBSEP $3 SUBSEP $4 }
  function ratio(a, b) { return (a == "-" || b == "-" || a == "" || b == "" || b == 0) ? "-" : sprintf("%.2f", a / b) }
  END {
    for (r = 1; r <= n; ++r) {
      split(order[r], f, SUBSEP); v = f[1]; L = f[2]; th = f[3]
      k = "relgrad" SUBSEP v SUBSEP L SUBSEP th; k0 = "relgrad" SUBSEP "none" SUBSEP L SUBSEP th
      tv = (v in twin) ? twin[v] : ""; tk = "torch" SUBSEP tv SUBSEP L SUBSEP th; t0 = "torch" SUBSEP "none" SUBSEP L SUBSEP th
      has = (tv != "" && (tk in med))
      nt = (note[k] ~ /^n=/ ? "" : note[k]); tn = (has && note[tk] !~ /^n=/) ? "torch " note[tk] : ""
      nt = nt (nt != "" && tn != "" ? "; " : "") tn
      printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", L, th, v, med[k],
        ratio(med[k], med[k0]), peak[k], over[k], live[k], has ? tv : "-", has ? med[tk] : "-",
        has ? ratio(med[tk], med[t0]) : "-", has ? peak[tk] : "-", has ? ratio(med[k], med[tk]) : "-", nt
    }
  }' "$RESULTS"
