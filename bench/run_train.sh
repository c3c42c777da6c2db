#!/usr/bin/env bash
# Training throughput, relgrad next to PyTorch (docs/benchmarks.md), on the CPU. Three workloads:
#   w0       the small-model regime: the quick start's default run (configs/default.toml, 0.24 M
#            parameters, batches of 32 reversal examples of 4-16 digits): `relgrad train` end to end
#            (bench/w0_relgrad.py, tokens/s as relgrad prints them, from its log.jsonl) against a
#            PyTorch twin of the same model, data shapes and optimizer (bench/w0_torch.py; same
#            kind of batches, not the same tokens). "default" is another name for it.
#   charlm   W1 and
#   seq2seq  W2 of PyTorch's reference script torch_ref.py (kept outside this repository, in the folder
#            given as the argument, with relattn_micro.py, benchutil.py and peak_fma.cpp): relgrad's
#            bench/bench_train against torch_ref.py's models.
#   charlm-train, seq2seq-train  W1 and W2 on the user's path: `relgrad train` with bench/configs/
#            w1_train.toml / w2_train.toml (the same shapes; the KJV text through the data pipeline,
#            and the reversal task; logging and a checkpoint), run by bench/w0_relgrad.py --config,
#            against the same PyTorch runs as charlm / seq2seq (no data pipeline on that side).
# Each is run, interleaved round by round so that load from elsewhere hits all alike, as:
#   relgrad               bench/bench_train, or relgrad train for w0
#   PyTorch 1.13 default  Debian's python3-torch as shipped (the environment's OPENBLAS_CORETYPE=Haswell)
#   PyTorch 1.13 expert   OpenBLAS's AVX-512 kernels (OPENBLAS_CORETYPE unset), OMP_WAIT_POLICY=PASSIVE at
#                         2+ threads
#   PyTorch 2.x eager     torch from pip in a virtual environment (below), with the expert settings; its
#                         GEMMs are MKL's, bundled in the wheel, so OPENBLAS_CORETYPE does not reach them
#                         (on the AMD machine of docs/benchmarks.md MKL_VERBOSE=1 names its generic
#                         "Intel(R) Architecture processors" path, not AVX-512), and PASSIVE's reason, OpenMP
#                         and OpenBLAS pools fighting, is gone: TORCH2_PASSIVE=0 runs it without
#   PyTorch 2.x compiled  the same with torch.compile (default backend: inductor), compilation not timed
#                         (bench/torch2_train.py for W1/W2, which imports torch_ref.py's models unchanged)
# and the table gives tokens/s (median over rounds of each run's median step), GFLOP/s and share of the
# FMA peak (W1/W2: torch_ref's FLOP count; peak_fma.cpp from that folder, same thread count; not
# defined for w0, whose batches change shape), peak RSS, and relgrad ÷ each. Before the rounds (CHECK=1)
# it checks the twins: w0's twin loaded with a relgrad checkpoint gives relgrad's logits (relgrad eval
# --dump-logits), and for every workload torch.compile's losses follow eager's over 3 steps to 1e-4.
# Then, unless RELATTN=0, runs bench/run_relattn.sh (the relative-attention micro benchmark, both sides).
#
# Usage (from anywhere; builds what it needs in $BUILD):
#   bench/run_train.sh [DIR holding torch_ref.py, relattn_micro.py, peak_fma.cpp]
#     (default: the `shared=` line below)
#   THREADS=1 ROUNDS=1 STEPS=3 WARMUP=1 W0_STEPS=20 W0_WARMUP=5 WORKLOADS="w0 charlm" RELATTN=0 \
#     bench/run_train.sh                                                     # a short trial
# Settings from the environment [defaults]: THREADS ["1 2"]  ROUNDS [2]  STEPS [12]  WARMUP [3] (W1/W2)
#   W0_STEPS [200]  W0_WARMUP [20] (w0's steps take milliseconds)
#   WORKLOADS ["w0 charlm seq2seq charlm-train seq2seq-train"]
#   TORCH1 [1; 0 = no PyTorch 1.13 rows (default and expert): a round in half the time]
#   TORCH2 [1; 0 = no PyTorch 2.x rows, no virtual environment]  TORCH2_SPEC [torch] (pip's requirement,
#   e.g. torch==2.5.1; read when the environment is made: delete $BUILD/torch2-venv to change it)
#   TORCH2_PASSIVE [1; 0 = PyTorch 2.x without OMP_WAIT_POLICY=PASSIVE]  TORCH2_INDEX [PyTorch's CPU wheels]
#   CHECK [1]
#   BUILD [build-bench; relative to the repository root, or absolute]  JOBS [nproc]  RELATTN [1]
#   GEMM [auto; eigen | openblas | blis: relgrad's runs with RELGRAD_GEMM set so (core/cpu/gemm_library.h;
#   auto = the library relgrad measured fastest here, which the machine block names)]
#   LENGTHS [256,512,1024] (relattn)
# Installs what is missing, as root (apt-get update first): Debian's python3-torch, python3-numpy and
# libopenblas0-pthread (PyTorch 1.13's BLAS; without it Debian's torch falls back to the reference BLAS,
# ~20x slower); with TORCH2=1 also python3-venv and python3-dev (torch.compile builds C++ kernels
# against Python's headers), then once, reused afterwards, the virtual environment $BUILD/torch2-venv
# with pip's torch and numpy: the CPU-only wheel from PyTorch's own index when it can be reached
# (TORCH2_INDEX), else PyPI's (which brings CUDA's libraries, ~5 GiB, unused here). None of this is a
# dependency of relgrad. torch.compile's cache is $BUILD/inductor-cache. Each run's record (JSON) and
# printed lines are kept in $BUILD/train_results (runs.log; PyTorch 2.x's warnings in torch2.log).
# Before the rounds it prints the machine block: the CPU model, relgrad's GEMM and the kernels it runs
# (`relgrad --version`), and each PyTorch's BLAS with its kernels (bench/blas_info.py: OpenBLAS's core,
# MKL's code path, oneDNN's ISA), in the environment each side runs with.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
shared=$(cd "${1:-$root/../shared/bench}" && pwd)
THREADS=${THREADS:-"1 2"}
ROUNDS=${ROUNDS:-2}
STEPS=${STEPS:-12}
WARMUP=${WARMUP:-3}
W0_STEPS=${W0_STEPS:-200}
W0_WARMUP=${W0_WARMUP:-20}
WORKLOADS=${WORKLOADS:-"w0 charlm seq2seq charlm-train seq2seq-train"}
WORKLOADS=$(echo " $WORKLOADS " | sed 's/ default / w0 /g; s/^ *//; s/ *$//')
TORCH1=${TORCH1:-1}
TORCH2=${TORCH2:-1}
TORCH2_SPEC=${TORCH2_SPEC:-torch}
TORCH2_INDEX=${TORCH2_INDEX:-https://download.pytorch.org/whl/cpu}
TORCH2_PASSIVE=${TORCH2_PASSIVE:-1}
CHECK=${CHECK:-1}
BUILD=${BUILD:-build-bench}
JOBS=${JOBS:-$(nproc)}
RELATTN=${RELATTN:-1}
GEMM=${GEMM:-auto}
case $BUILD in /*) build=$BUILD ;; *) build=$root/$BUILD ;; esac
has_w0=0
case " $WORKLOADS " in *" w0 "*) has_w0=1 ;; esac
has_cli=$has_w0  # a workload through `relgrad train` (w0 or *-train): the relgrad command is built
case " $WORKLOADS " in *-train" "*) has_cli=1 ;; esac
# W1 on the user's path reads the KJV text that tools/setup.sh writes: stop before the rounds, not in them.
case " $WORKLOADS " in *" charlm-train "*)
  [ -s "$root/data/kjv.txt" ] || { echo "run_train.sh: charlm-train needs data/kjv.txt (bash tools/setup.sh writes it)" >&2; exit 1; } ;;
esac

need=""
pkgs="python3-torch python3-numpy libopenblas0-pthread"
[ "$TORCH2" != 0 ] && pkgs="$pkgs python3-venv python3-dev"
for p in $pkgs; do dpkg -s "$p" >/dev/null 2>&1 || need="$need $p"; done
if [ -n "$need" ]; then
  if [ "$(id -u)" = 0 ]; then
    apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $need
  else
    echo "run_train.sh: missing Debian packages:$need (apt-get install them as root)" >&2
    exit 1
  fi
fi

# PyTorch 2.x: a virtual environment of its own (never a dependency of relgrad), made once.
venv=$build/torch2-venv
py2=$venv/bin/python
export TORCHINDUCTOR_CACHE_DIR=$build/inductor-cache
if [ "$TORCH2" != 0 ] && ! "$py2" -c 'import torch, numpy' >/dev/null 2>&1; then
  echo "== making $venv (PyTorch 2.x from pip)" >&2
  mkdir -p "$build"
  /usr/bin/python3 -m venv "$venv"
  "$venv/bin/pip" install --retries 1 --timeout 30 --index-url "$TORCH2_INDEX" "$TORCH2_SPEC" numpy ||
    "$venv/bin/pip" install "$TORCH2_SPEC" numpy
fi
torch2_version=""
[ "$TORCH2" != 0 ] && torch2_version=$("$py2" -c 'import torch; print(torch.__version__)' 2>/dev/null)

targets="bench_train bench_relattn"
[ "$has_cli" = 1 ] && targets="$targets relgrad_cli"
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DRELGRAD_CUDA=OFF -DRELGRAD_BENCH=ON >/dev/null
# relgrad's own runs: the GEMM library asked for (relgrad loads OpenBLAS with its own kernels whatever
# OPENBLAS_CORETYPE says). PyTorch does not read RELGRAD_GEMM.
export RELGRAD_GEMM=$GEMM
relgrad_env="env"
cmake --build "$build" -j "$JOBS" --target $targets >/dev/null
out=$build/train_results
mkdir -p "$out"
rm -f "$out"/*.json "$out"/*.log
# The FMA peak: AVX-512's where the processor has it, else AVX2's (peak_fma.cpp times both, and its
# zmm loop would stop an AVX2-only processor with an illegal instruction, so there it runs ymm twice).
peak_key=zmm_gflops
peak_src=$shared/peak_fma.cpp
if ! grep -qw avx512f /proc/cpuinfo; then
  peak_key=ymm_gflops
  peak_src=$out/peak_fma_avx2.cpp
  sed 's/FMA12("zmm")/FMA12("ymm")/' "$shared/peak_fma.cpp" >"$peak_src"
fi
g++ -O2 -march=native -fopenmp "$peak_src" -o "$out/peak_fma"
torch1_version=$(/usr/bin/python3 -c 'import torch; print(torch.__version__)')
echo "PyTorch: Debian $torch1_version (/usr/bin/python3)${torch2_version:+, pip $torch2_version ($py2)}" >&2

# The machine block: what each side's GEMMs run on, in the environment each side's runs use.
{
  echo "== machine"
  echo "CPU: $(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc) cores online"
  if [ "$has_cli" = 1 ]; then
    echo "relgrad: $($relgrad_env "$build/relgrad" --version | sed -n 's/^GEMM: //p')"
  else
    echo "relgrad: RELGRAD_GEMM=$GEMM (relgrad --version names the kernels; not built in this selection)"
  fi
  echo "PyTorch $torch1_version default: $(/usr/bin/python3 "$root/bench/blas_info.py")"
  echo "PyTorch $torch1_version expert: $(env -u OPENBLAS_CORETYPE /usr/bin/python3 "$root/bench/blas_info.py")"
  if [ "$TORCH2" != 0 ]; then
    echo "PyTorch $torch2_version: $(env -u OPENBLAS_CORETYPE "$py2" "$root/bench/blas_info.py" 2>/dev/null)"
  fi
} | tee -a "$out/runs.log" >&2

# The expert settings (the README beside torch_ref.py: OpenBLAS's AVX-512 kernels; PASSIVE at 2+
# threads), used for PyTorch 1.13 expert and for PyTorch 2.x.
expert_env() {  # $1 threads, $2 1 = PASSIVE at 2+ threads
  local e="env -u OPENBLAS_CORETYPE"
  if [ "$1" -gt 1 ] && [ "$2" != 0 ]; then e="$e OMP_WAIT_POLICY=PASSIVE"; else e="$e -u OMP_WAIT_POLICY"; fi
  echo "$e"
}

if [ "$CHECK" != 0 ]; then
  t=${THREADS%% *}
  echo "== checks ($t thread(s))" >&2
  if [ "$has_w0" = 1 ]; then
    # The twin is relgrad's model: a relgrad checkpoint loaded into it gives relgrad's logits.
    /usr/bin/python3 "$root/bench/w0_relgrad.py" "$build/relgrad" --threads "$t" --steps 3 --warmup 1 \
      --out "$out/w0_check" >>"$out/runs.log"
    OMP_NUM_THREADS=$t "$build/relgrad" eval "$out/w0_check/checkpoint.safetensors" \
      --dump-logits "$out/w0_check/dump.safetensors" >/dev/null
    /usr/bin/python3 "$root/bench/w0_torch.py" --threads "$t" \
      --against-relgrad "$out/w0_check/dump.safetensors" "$out/w0_check/checkpoint.safetensors" >&2
    if [ "$TORCH2" != 0 ]; then
      "$py2" "$root/bench/w0_torch.py" --threads "$t" --check 3 >&2 2>"$out/check_w0.log" ||
        { echo "run_train.sh: the W0 check failed (stderr in $out/check_w0.log)" >&2; exit 1; }
    fi
  fi
  if [ "$TORCH2" != 0 ]; then
    for w in $(echo "$WORKLOADS" | tr ' ' '\n' | sed 's/-train$//' | sort -u); do
      [ "$w" = w0 ] && continue
      "$py2" "$root/bench/torch2_train.py" "$shared" --workload "$w" --threads "$t" --check 3 \
        >&2 2>"$out/check_$w.log" ||
        { echo "run_train.sh: the $w check failed (stderr in $out/check_$w.log)" >&2; exit 1; }
    done
  fi
fi

for t in $THREADS; do
  # The FMA peak for t threads (peak_fma's JSON record; AVX-512 or AVX2 rate, $peak_key).
  # peak_fma takes its thread count as argv[1]
  OMP_NUM_THREADS=$t "$out/peak_fma" "$t" >"$out/peak_$t.txt" 2>&1 || true
  passive=""
  [ "$t" -gt 1 ] && passive="OMP_WAIT_POLICY=PASSIVE"
  for r in $(seq 1 "$ROUNDS"); do
    for w in $WORKLOADS; do
      sides="relgrad"
      [ "$TORCH1" != 0 ] && sides="$sides, torch $torch1_version default, expert"
      sides="$sides${torch2_version:+, torch $torch2_version eager, compiled}"
      echo "round $r, $w, $t thread(s): $sides" | tee -a "$out/runs.log" >&2
      j="${w}_${t}_$r"
      if [ "$w" = w0 ]; then
        $relgrad_env -u OMP_WAIT_POLICY /usr/bin/python3 "$root/bench/w0_relgrad.py" "$build/relgrad" --threads "$t" \
          --steps "$W0_STEPS" --warmup "$W0_WARMUP" --out "$out/w0_run" --json "$out/relgrad_$j.json" \
          >>"$out/runs.log"
        if [ "$TORCH1" != 0 ]; then
          env -u OMP_WAIT_POLICY /usr/bin/python3 "$root/bench/w0_torch.py" --threads "$t" --steps "$W0_STEPS" \
            --warmup "$W0_WARMUP" --json "$out/default_$j.json" >>"$out/runs.log"
          $(expert_env "$t" 1) /usr/bin/python3 "$root/bench/w0_torch.py" --threads "$t" --steps "$W0_STEPS" \
            --warmup "$W0_WARMUP" --json "$out/expert_$j.json" >>"$out/runs.log"
        fi
        if [ "$TORCH2" != 0 ]; then
          for m in eager compiled; do
            $(expert_env "$t" "$TORCH2_PASSIVE") "$py2" "$root/bench/w0_torch.py" --mode $m --threads "$t" \
              --steps "$W0_STEPS" --warmup "$W0_WARMUP" --json "$out/torch2${m}_$j.json" \
              >>"$out/runs.log" 2>>"$out/torch2.log"
          done
        fi
        continue
      fi
      base=${w%-train}  # PyTorch's side of charlm-train is torch_ref's charlm
      if [ "$base" != "$w" ]; then
        cfg=$root/bench/configs/w1_train.toml
        [ "$base" = seq2seq ] && cfg=$root/bench/configs/w2_train.toml
        (cd "$root" && $relgrad_env -u OMP_WAIT_POLICY /usr/bin/python3 "$root/bench/w0_relgrad.py" "$build/relgrad" \
          --config "$cfg" --workload "$w" --threads "$t" --steps "$STEPS" --warmup "$WARMUP" \
          --out "$out/${w}_run" --json "$out/relgrad_$j.json" >>"$out/runs.log")
      else
        $relgrad_env -u OMP_WAIT_POLICY OMP_NUM_THREADS=$t "$build/bench/bench_train" --workload "$w" --steps "$STEPS" \
          --warmup "$WARMUP" --json "$out/relgrad_$j.json" >>"$out/runs.log"
      fi
      if [ "$TORCH1" != 0 ]; then
        env -u OMP_WAIT_POLICY /usr/bin/python3 "$shared/torch_ref.py" --workload "$base" --threads "$t" \
          --steps "$STEPS" --warmup "$WARMUP" --json "$out/default_$j.json" >>"$out/runs.log"
        env -u OPENBLAS_CORETYPE $passive /usr/bin/python3 "$shared/torch_ref.py" --workload "$base" \
          --threads "$t" --steps "$STEPS" --warmup "$WARMUP" --json "$out/expert_$j.json" >>"$out/runs.log"
      fi
      if [ "$TORCH2" != 0 ]; then
        for m in eager compiled; do
          $(expert_env "$t" "$TORCH2_PASSIVE") "$py2" "$root/bench/torch2_train.py" "$shared" \
            --workload "$base" --mode $m --threads "$t" --steps "$STEPS" --warmup "$WARMUP" \
            --json "$out/torch2${m}_$j.json" \
            >>"$out/runs.log" 2>>"$out/torch2.log"
        done
      fi
    done
  done
done

/usr/bin/python3 - "$out" "$THREADS" "$WORKLOADS" "$GEMM" "$peak_key" <<'EOF'
import glob, json, os, statistics, sys
out, threads, workloads, gemm = sys.argv[1], sys.argv[2].split(), sys.argv[3].split(), sys.argv[4]
peak_key = sys.argv[5]  # zmm_gflops (AVX-512) or ymm_gflops (AVX2-only processors)
def peak(t):  # peak_fma's last line is a JSON record; the widest FMA's rate is the peak
    try:
        last = open(os.path.join(out, "peak_%s.txt" % t)).read().strip().splitlines()[-1]
        return statistics.median(json.loads(last)[peak_key])
    except (IndexError, ValueError, KeyError, OSError):
        return float("nan")
def runs(impl, w, t):
    files = sorted(glob.glob(os.path.join(out, "%s_%s_%s_*.json" % (impl, w, t))))
    recs = [json.load(open(f)) for f in files]
    if not recs:
        return None
    tok = statistics.median(r["tokens_per_s"] if "tokens_per_s" in r else r["tokens_per_s_median"]
                            for r in recs)
    gfl = [r["gflops"] if "gflops" in r else r["gflops_median"] for r in recs]
    gfl = None if None in gfl else statistics.median(gfl)
    rss = max(r["peak_rss_mib"] for r in recs)
    return tok, gfl, rss, recs
impls = (("relgrad", "relgrad" if gemm == "auto" else "relgrad (%s)" % gemm), ("default", "PyTorch %s default"), ("expert", "PyTorch %s expert"),
         ("torch2eager", "PyTorch %s eager"), ("torch2compiled", "PyTorch %s compiled"))
label = {"w0": "W0 default", "charlm": "W1 charlm", "seq2seq": "W2 seq2seq",
         "charlm-train": "W1 charlm, relgrad train", "seq2seq-train": "W2 seq2seq, relgrad train"}
print("| workload | threads | impl | tokens/s | GFLOP/s | share of FMA peak | peak RSS MiB "
      "| relgrad ÷ this |")
print("|---|---|---|---:|---:|---:|---:|---:|")
notes = []
for w in workloads:
    for t in threads:
        p = peak(t)
        rg = runs("relgrad", w, t)
        for impl, fmt in impls:
            r = runs(impl, w, t)
            if r is None:
                continue
            name = fmt % r[3][0]["torch"].split("+")[0] if "%" in fmt else fmt
            ratio = ("" if impl == "relgrad" or rg is None else
                     "%.2f× speed, %.2f× memory" % (rg[0] / r[0], rg[2] / r[2]))
            flops = r[1]
            if flops is None and impl == "relgrad" and w.endswith("-train"):
                # relgrad train reports no FLOPs: its rate by torch_ref's count per token, taken from
                # PyTorch's runs of the same workload (relgrad skips the causal half, so it does fewer)
                for other in ("torch2eager", "torch2compiled", "expert", "default"):
                    o = runs(other, w, t)
                    if o is not None and o[1] is not None:
                        flops = r[0] * o[1] / o[0]
                        notes.append("%s, %s thread(s): relgrad's GFLOP/s by torch_ref's FLOPs per token" % (
                            label.get(w, w), t))
                        break
            gfl = "—" if flops is None else "%.1f" % flops
            share = "—" if flops is None else "%.0f%%" % (100 * flops / p)
            print("| %s | %s | %s | %.0f | %s | %s | %.0f | %s |" % (
                label.get(w, w), t, name, r[0], gfl, share, r[2], ratio))
            cs = [x.get("compile_s", 0) for x in r[3]]
            if impl == "torch2compiled":
                notes.append("%s, %s thread(s): compilation %.0f s per process (median, not timed)" % (
                    label.get(w, w), t, statistics.median(cs)))
print("\nFMA peak (peak_fma, %s): " % ("AVX-512" if peak_key == "zmm_gflops" else "AVX2") + ", ".join("%s thread(s) %.0f GFLOP/s" % (t, peak(t)) for t in threads))
for n in notes:
    print(n)
EOF

if [ "$RELATTN" != 0 ]; then
  rel=$(realpath --relative-to="$root" "$build")  # run_relattn.sh takes BUILD relative to the root
  LENGTHS=${LENGTHS:-256,512,1024} THREADS="$THREADS" BUILD=$rel \
    "$root/bench/run_relattn.sh" "$shared/relattn_micro.py"
fi
