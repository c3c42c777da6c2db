#!/usr/bin/env bash
# The GPU measurements of docs/benchmarks.md in one call, for a bare GPU machine (NVIDIA GPU, nvcc,
# CMake, g++, python3 with torch + triton; no internet, no Debian development packages), budgeted
# to fit 8 minutes on an H100 (TOTAL_BUDGET below; not yet timed there). Everything it does is
# printed; with OUT set (the device tool's output folder) the full log goes to $OUT/gpu-log.txt and
# the compact tables to $OUT/gpu-summary.md as each phase ends, so both come back even when the
# call is cut off.
#
# Usage. Here (Debian 12, as root), once: `bash bench/gpu_prepare.sh` (makes .gpu-deps, .gpu-ref and
# data/kjv.txt and prints their size). Then on the GPU machine, from the repository root, with carry
# ".gpu-deps .gpu-ref data/kjv.txt":
#     bash bench/run_gpu.sh                 the whole run (timeout_s 540 leaves a minute of margin)
#     SHORT=1 bash bench/run_gpu.sh         a rerun after a fix (cuda tests, one round, two lengths)
#     TF32=1 PHASES="build train flash" bash bench/run_gpu.sh     TF32 on, both sides
#     PHASES="build flash" FLASH_LENGTHS=4096 bash bench/run_gpu.sh
#     PHASES="build train" WORKLOADS="charlm seq2seq" PRECISION="fp32 bf16" bash bench/run_gpu.sh
#                                           W1/W2 in float32 and in bf16 mixed precision, interleaved
#
# Phases (PHASES, in this order; env always runs):
#   env      device, driver, CUDA, compiler, torch and triton versions, the dependencies' origin
#            (.gpu-deps: CMAKE_PREFIX_PATH and LD_LIBRARY_PATH; else the system's packages).
#   build    Release, RELGRAD_CUDA=ON, MPI off, tests and examples on, -j nproc, Ninja if present.
#   test     the whole suite with the GPU (ctest -j; TESTS = a ctest -R regex), capped at TEST_BUDGET s;
#            the full output in $RES/ctest.log, its summary and failures printed; failures do not stop
#            the run. Meanwhile (PRECOMPILE=1) torch.compile's work for the train and flash phases runs
#            in the background into the inductor cache, so those phases time runs, not compilers.
#   train    W1 charlm and W2 seq2seq: bench/bench_train --device cuda (composite and fused attention
#            cores) against torch_ref.py's models on the GPU, PyTorch eager and torch.compile
#            (bench/gpu_train.py); W0, the default run: `relgrad train --device cuda`
#            (bench/w0_relgrad.py) against its PyTorch twin (bench/w0_torch.py's model, through
#            bench/gpu_train.py w0). Interleaved round by round; tokens/s, peak GPU tensors, ratios.
#   flash    relative attention, forward + backward, B=1 H=4 D=64 causal float32: bench/bench_flash
#            (fused_rel, fused_t5, fused_shaw, fused_plain; composite_rel/plain up to
#            FLASH_COMPOSITE_MAX) and bench/flash_torch.py (SDPA, SDPA + T5 bias, FlexAttention with
#            T5 and Shaw score_mods, first checked against float64 at the first length): ms, peak
#            memory, bitwise determinism of the table gradients.
#   profile  `relgrad train --device cuda --train.profile=N` on the default config (when the build
#            has train.profile), its table.
# PRECISION ["fp32"]: the products' precisions of W1/W2, each run in turn within a round (W0 stays
#   float32): fp32, and bf16 = relgrad's bench_train --precision bf16 (train.precision = bf16: cuBLAS's
#   bf16 tensor-core GEMMs, float32 accumulation and master weights) against PyTorch under
#   torch.autocast(dtype=torch.bfloat16), eager and compiled (gpu_train.py --precision bf16). A bf16
#   record's file is IMPL-bf16_WORKLOAD_ROUND.json; the summary's ratios compare one precision.
# TF32 [0]: 1 = TF32 on both sides (bench_train --tf32, relgrad train --train.tf32=true, torch's
#   matmul/cuDNN flags); when relgrad's binaries lack the flag, a note says so and relgrad runs without.
# Settings [defaults; SHORT=1's in braces]: PHASES ["build test train flash profile"]  BUILD [build-gpu]
#   JOBS [nproc]  TESTS ["" = all {cuda}]  ROUNDS [2 {1}]  STEPS [20]  WARMUP [5]
#   WORKLOADS ["w0 charlm seq2seq"]  CORES ["composite fused"] (relgrad's attention core in W1/W2)
#   TORCH_MODES ["eager compiled"]  W0_STEPS [200 {100}]  W0_WARMUP [20]  W0_MODES ["eager"]
#   FLASH_LENGTHS [2048,4096,8192,16384 {4096,16384}]  FLASH_REPS [3 {2}]  FLASH_COMPOSITE_MAX [4096]
#   FLASH_VARIANTS [bench_flash's default]  FLASH_TORCH_VARIANTS [sdpa,sdpa_t5,flex_t5,flex_shaw;
#   add flex_t5_dist should flex_t5 fail to compile]
#   FLASH_CHECK [first length; 0 = none]  PROFILE_STEPS [20]  PRECOMPILE [1]
#   TOTAL_BUDGET [470]: seconds from the start; each phase is stopped at the smaller of its own
#   budget and what the total leaves after keeping a minimum for the phases still to come (train 90,
#   flash 70, profile 15), so the measurements run even when the build or the suite is slow:
#   TEST_BUDGET [160 {90}]  PRECOMPILE_WAIT [30] (after the suite)  TRAIN_BUDGET [150]
#   FLASH_BUDGET [120]  PROFILE_BUDGET [40]
#   PYTHON [the first of python3, /usr/bin/python3 whose torch sees a GPU]
#   DEVICE [cuda; cpu = a dry run of this script's logic on a machine without a GPU, every program on
#   the CPU, with tiny settings, e.g. DEVICE=cpu BUILD=build-x PHASES="train flash" STEPS=2 ...]
#   REF [.gpu-ref, else the argument, $TORCH_REF_DIR, the shared bench folder beside the checkout:
#   the folder of torch_ref.py]
#   RES [$OUT/gpu-results, else $BUILD/gpu_results: JSON records, ctest.log, precompile.log]
set -uo pipefail  # no -e: a failing phase is reported and the next one runs
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root" || exit 1
t_start=$(date +%s)
SHORT=${SHORT:-0}
short() { if [ "$SHORT" != 0 ]; then echo "$2"; else echo "$1"; fi; }
PHASES=${PHASES:-"build test train flash profile"}
BUILD=${BUILD:-build-gpu}
JOBS=${JOBS:-$(nproc)}
TESTS=${TESTS-$(short "" cuda)}
ROUNDS=${ROUNDS:-$(short 2 1)}
STEPS=${STEPS:-20}
WARMUP=${WARMUP:-5}
WORKLOADS=${WORKLOADS:-"w0 charlm seq2seq"}
CORES=${CORES:-"composite fused"}
TORCH_MODES=${TORCH_MODES:-"eager compiled"}
W0_STEPS=${W0_STEPS:-$(short 200 100)}
W0_WARMUP=${W0_WARMUP:-20}
W0_MODES=${W0_MODES:-"eager"}
FLASH_LENGTHS=${FLASH_LENGTHS:-$(short 2048,4096,8192,16384 4096,16384)}
FLASH_REPS=${FLASH_REPS:-$(short 3 2)}
FLASH_COMPOSITE_MAX=${FLASH_COMPOSITE_MAX:-4096}
FLASH_VARIANTS=${FLASH_VARIANTS:-}
FLASH_TORCH_VARIANTS=${FLASH_TORCH_VARIANTS:-sdpa,sdpa_t5,flex_t5,flex_shaw}
FLASH_CHECK=${FLASH_CHECK:-${FLASH_LENGTHS%%,*}}
PROFILE_STEPS=${PROFILE_STEPS:-20}
PRECOMPILE=${PRECOMPILE:-1}
TF32=${TF32:-0}
PRECISION=${PRECISION:-fp32}
DEVICE=${DEVICE:-cuda}
TOTAL_BUDGET=${TOTAL_BUDGET:-470}
TEST_BUDGET=${TEST_BUDGET:-$(short 160 90)}
PRECOMPILE_WAIT=${PRECOMPILE_WAIT:-30}
TRAIN_BUDGET=${TRAIN_BUDGET:-150}
FLASH_BUDGET=${FLASH_BUDGET:-120}
PROFILE_BUDGET=${PROFILE_BUDGET:-40}
case $BUILD in /*) build=$BUILD ;; *) build=$root/$BUILD ;; esac
if [ -n "${RES:-}" ]; then res=$RES; elif [ -n "${OUT:-}" ]; then res=$OUT/gpu-results; else res=$build/gpu_results; fi
mkdir -p "$res"
summary=${OUT:+$OUT/gpu-summary.md}
summary=${summary:-$res/gpu-summary.md}
: >"$summary"
if [ -n "${OUT:-}" ]; then
  exec > >(tee "$OUT/gpu-log.txt") 2>&1
fi
export PYTHONUNBUFFERED=1
export TORCHINDUCTOR_CACHE_DIR=$build/inductor-cache TRITON_CACHE_DIR=$build/triton-cache
has() { case " $PHASES " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }
elapsed() { echo $(($(date +%s) - t_start)); }
# budget PHASE CAP: CAP, or less when TOTAL_BUDGET must keep the minimum of the later phases (10 at least).
budget() {
  local keep=0 later=0 p
  for p in test train flash profile; do
    if [ "$later" = 1 ] && has "$p"; then
      case $p in train) keep=$((keep + 90)) ;; flash) keep=$((keep + 70)) ;; profile) keep=$((keep + 15)) ;; esac
    fi
    [ "$p" = "$1" ] && later=1
  done
  local left=$((TOTAL_BUDGET - $(elapsed) - keep))
  [ "$left" -lt "$2" ] && { [ "$left" -gt 10 ] && echo "$left" || echo 10; } || echo "$2"
}
say() { echo "$@" | tee -a "$summary"; }       # to the log and the summary
note() { echo "note: $*" | tee -a "$summary"; }
phase_times=""
phase_begin() {
  phase=$1
  phase_t0=$(date +%s)
  echo
  echo "===== $phase (at $(elapsed) s${2:+; budget $2 s})"
  printf '\n## %s\n\n' "$phase" >>"$summary"
}
phase_end() {
  local s=$(($(date +%s) - phase_t0))
  echo "===== $phase done in $s s (total $(elapsed) s)"
  phase_times="$phase_times $phase $s s,"
}
# prints PATTERN COMMAND...: whether the command's output (stdout and stderr) has a line matching
# PATTERN. The output is read whole first: under pipefail, `cmd | grep -q` fails when grep's early
# exit kills cmd with SIGPIPE.
prints() {
  local pattern=$1 text
  shift
  text=$("$@" 2>&1)
  grep -q -- "$pattern" <<<"$text"
}
# Markdown table rows (and the lines just above them) of a log, for the summary.
tables() { grep -E '^\||^(device|torch) |^check |^Flex ' "$1"; }
# measured NAME FILE LIMIT CMD...: runs CMD for at most LIMIT seconds into $res/FILE, prints it, adds
# its tables to the summary, and notes a failure (exit 124: stopped at its budget).
measured() {
  local name=$1 file=$2 limit=$3 rc
  shift 3
  timeout -k 5 "$limit" "$@" >"$res/$file" 2>&1
  rc=$?
  cat "$res/$file"
  tables "$res/$file" >>"$summary"
  [ "$rc" = 0 ] || note "$name: exit $rc$( [ "$rc" = 124 ] && echo ' (stopped at its budget)')"
}

# ---- env ----------------------------------------------------------------------------------------
phase_begin env
say "- $(date -u +%Y-%m-%dT%H:%MZ) on $(hostname), $(nproc) cores; SHORT=$SHORT TF32=$TF32 PRECISION=\"$PRECISION\"" \
  "PHASES=\"$PHASES\""
say "- GPU: $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null || echo 'nvidia-smi unavailable')"
nvcc_bin=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
say "- nvcc: $("$nvcc_bin" --version 2>/dev/null | grep -o 'release [^,]*, V[0-9.]*' || echo none);" \
  "$(g++ --version | head -n 1); $(cmake --version | head -n 1); ninja $(ninja --version 2>/dev/null || echo absent)"
say "- source: $(git -C "$root" log -1 --format='%h %cI %s' 2>/dev/null | cut -c1-100 || echo 'no git history here')"
if [ -z "${PYTHON:-}" ]; then
  PYTHON=python3
  for p in python3 /usr/bin/python3; do
    if "$p" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then PYTHON=$p; break; fi
  done
fi
torch_info=$("$PYTHON" -c 'import torch, triton; print("torch %s (CUDA %s), triton %s, GPU seen: %s" % (
  torch.__version__, torch.version.cuda, triton.__version__, torch.cuda.is_available()))' 2>&1 | tail -n 1)
say "- python: $PYTHON: $torch_info"
torch_ok=0
"$PYTHON" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null && torch_ok=1
if [ "$DEVICE" = cpu ]; then  # the dry run: PyTorch on the CPU
  "$PYTHON" -c 'import torch' 2>/dev/null && torch_ok=1
  py_dev=(--device cpu)
else
  py_dev=()
fi
[ "$torch_ok" = 1 ] || note "no torch with a GPU: the PyTorch rows are skipped"
cmake_deps=()
if [ -d "$root/.gpu-deps/usr" ]; then
  cmake_deps=(-DCMAKE_PREFIX_PATH="$root/.gpu-deps/usr")
  export LD_LIBRARY_PATH=$root/.gpu-deps/runtime${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  say "- dependencies: .gpu-deps (CMAKE_PREFIX_PATH=.gpu-deps/usr, LD_LIBRARY_PATH=.gpu-deps/runtime):" \
    "$(awk '{printf "%s %s, ", $1, $2}' "$root/.gpu-deps/PACKAGES" 2>/dev/null)"
else
  say "- dependencies: the system's (no .gpu-deps here: bash bench/gpu_prepare.sh makes it)"
fi
REF=${REF:-}
for d in "$root/.gpu-ref" "${1:-}" "${TORCH_REF_DIR:-}" "$root/../shared/bench"; do
  [ -z "$REF" ] && [ -n "$d" ] && [ -f "$d/torch_ref.py" ] && REF=$(cd "$d" && pwd)
done
say "- torch_ref.py: ${REF:-not found (W1/W2 PyTorch rows skipped)}"
[ -s "$root/data/kjv.txt" ] || note "data/kjv.txt is missing (carry it): the tests that train on the corpus fail"
phase_end

# ---- build --------------------------------------------------------------------------------------
if has build; then
  phase_begin build
  gen=()
  if [ ! -f "$build/CMakeCache.txt" ] && command -v ninja >/dev/null 2>&1; then gen=(-G Ninja); fi
  if cmake -S "$root" -B "$build" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DRELGRAD_CUDA=ON -DRELGRAD_MPI=OFF \
    -DRELGRAD_TESTS=ON -DRELGRAD_EXAMPLES=ON -DRELGRAD_BENCH=ON "${cmake_deps[@]}" >"$res/cmake.log" 2>&1; then
    grep -E '^(Eigen3|nlohmann_json|tomlplusplus|CLI11|doctest)_DIR|^PNG_LIBRARY_RELEASE|^CMAKE_CUDA_ARCHITECTURES' \
      "$build/CMakeCache.txt" | sed 's/^/  /'
    b0=$(date +%s)
    if cmake --build "$build" -j "$JOBS" >"$res/build.log" 2>&1; then
      say "- built in $(($(date +%s) - b0)) s ($(grep -c . "$res/build.log") lines of output in build.log)"
    else
      tail -n 60 "$res/build.log"
      say "- BUILD FAILED after $(($(date +%s) - b0)) s (the last lines above; build.log in $res); what was built still runs"
    fi
  else
    cat "$res/cmake.log"
    say "- CONFIGURE FAILED (above)"
  fi
  phase_end
fi
bench_train=$build/bench/bench_train
bench_flash=$build/bench/bench_flash
relgrad=$build/relgrad
# TF32 flags, where relgrad's binaries have them.
bt_tf32=() rg_tf32=() py_tf32=()
if [ "$TF32" != 0 ]; then
  py_tf32=(--tf32)
  if [ -x "$bench_train" ] && prints '--tf32' "$bench_train" --help; then bt_tf32=(--tf32)
  else note "TF32=1 but bench_train has no --tf32: relgrad's W1/W2 rows run without TF32"; fi
  if [ -x "$relgrad" ] && prints '^train\.tf32' "$relgrad" train --help-config; then rg_tf32=(--train.tf32=true)
  else note "TF32=1 but relgrad train has no train.tf32: relgrad's W0 and profile run without TF32"; fi
fi
# --precision bf16 where bench_train has it; without, relgrad's bf16 rows are left out (PyTorch's still run).
bt_precision=1
case " $PRECISION " in *" bf16 "*)
  if ! { [ -x "$bench_train" ] && prints '--precision' "$bench_train" --help; }; then
    bt_precision=0
    note "PRECISION has bf16 but bench_train has no --precision: relgrad's bf16 rows are skipped"
  fi ;;
esac

# ---- test (+ torch.compile's work in the background) -----------------------------------------------
precompile_pid=""
if has test && [ "$PRECOMPILE" != 0 ] && [ "$torch_ok" = 1 ] && { has train || has flash; }; then
  # The same commands as the measurements, shortened, so their compiled graphs and kernels land in
  # TORCHINDUCTOR_CACHE_DIR / TRITON_CACHE_DIR (same TF32 setting: it is part of the cache key).
  set -m  # the background job gets its own process group, so that it can be stopped whole
  (
    if has train && [ -n "$REF" ]; then
      for w in $WORKLOADS; do
        case " $TORCH_MODES " in *" compiled "*) ;; *) continue ;; esac
        [ "$w" = w0 ] && continue
        for p in $PRECISION; do
          "$PYTHON" bench/gpu_train.py torch "$REF" --workload "$w" --mode compiled --steps 1 --warmup 0 \
            --precision "$p" "${py_tf32[@]}" "${py_dev[@]}"
        done
      done
    fi
    if has flash; then
      fv=$(echo "$FLASH_TORCH_VARIANTS" | tr ',' '\n' | grep '^flex' | paste -sd, -)
      [ -n "$fv" ] && "$PYTHON" bench/flash_torch.py --variants "$fv" --lengths "$FLASH_LENGTHS" --reps 1 \
        "${py_tf32[@]}" "${py_dev[@]}"
    fi
  ) >"$res/precompile.log" 2>&1 &
  precompile_pid=$!
  set +m
fi
if has test; then
  TEST_BUDGET=$(budget test "$TEST_BUDGET")
  phase_begin test "$TEST_BUDGET"
  # One OpenMP thread per test process (ctest runs JOBS of them at once).
  OMP_NUM_THREADS=1 timeout -k 10 "$TEST_BUDGET" ctest --test-dir "$build" ${TESTS:+-R "$TESTS"} -j "$JOBS" \
    --timeout 300 --output-on-failure >"$res/ctest.log" 2>&1
  rc=$?
  ran=$(grep -cE '^ *[0-9]+/[0-9]+ Test +#' "$res/ctest.log")
  if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
    say "- STOPPED at the budget ($TEST_BUDGET s) after $ran tests: rerun with TESTS=regex or a larger TEST_BUDGET"
  fi
  grep -E 'tests passed|Total Test time|No tests were found' "$res/ctest.log" | tee -a "$summary"
  # The failures: ctest's list, and each failed test's output (--output-on-failure) in the log only.
  sed -n '/The following tests FAILED:/,$p' "$res/ctest.log" |
    grep -E 'FAILED|\(Failed\)|\(Timeout\)|\(SEGFAULT\)|\(Subprocess|Exception|Not Run' | tee -a "$summary"
  skipped=$(grep '(Skipped)' "$res/ctest.log" | sed 's/^[[:space:]]*[0-9]* - //; s/ (Skipped)//')
  say "- skipped: $(grep -c . <<<"$skipped") ($(head -n 12 <<<"$skipped" | paste -sd';' - | cut -c1-300))"
  if grep -q '\*\*\*Failed\|\*\*\*Timeout\|\*\*\*Exception\|Not Run' "$res/ctest.log"; then
    # Each failed test's progress line and the output ctest prints under it (600 lines at most).
    echo "-- output of the failed tests (ctest.log):"
    awk '/^ *[0-9]+\/[0-9]+ Test +#/ { p = /\*\*\*|Not Run/ && !/Skipped/ } /^(The following|Errors while)|tests passed, / { p = 0 }
         p && n < 600 { print; n++ }' "$res/ctest.log"
  fi
  phase_end
fi
if [ -n "$precompile_pid" ]; then
  # What the background compilation has not finished PRECOMPILE_WAIT s after the suite is left to
  # the phases (it must not run beside a measurement).
  for _ in $(seq "$PRECOMPILE_WAIT"); do kill -0 "$precompile_pid" 2>/dev/null || break; sleep 1; done
  if kill -0 "$precompile_pid" 2>/dev/null; then
    kill -- -"$precompile_pid" 2>/dev/null
    note "the background compilation did not finish (precompile.log): the next phases compile what is left"
  fi
  wait "$precompile_pid" 2>/dev/null
  echo "-- background compilation (precompile.log), last lines:"
  tail -n 5 "$res/precompile.log"
fi

# ---- train --------------------------------------------------------------------------------------
if has train; then
  TRAIN_BUDGET=$(budget train "$TRAIN_BUDGET")
  phase_begin train "$TRAIN_BUDGET"
  deadline=$(($(date +%s) + TRAIN_BUDGET))
  tr=$res/train
  mkdir -p "$tr"
  rm -f "$tr"/*.json
  # w0_relgrad.py runs the executable it is given; this one adds the device and TF32 flags.
  wrapper=$res/relgrad-$DEVICE
  printf '#!/bin/sh\nexec "%s" "$@" --device %s %s\n' "$relgrad" "$DEVICE" "${rg_tf32[*]:-}" >"$wrapper"
  chmod +x "$wrapper"
  # run LIMIT_S LABEL COMMAND...: within the phase's deadline, output indented; a note on failure.
  run() {
    local limit=$1 label=$2 left=$((deadline - $(date +%s)))
    shift 2
    if [ "$left" -lt 5 ]; then note "$label: skipped (train budget spent)"; return; fi
    [ "$limit" -gt "$left" ] && limit=$left
    timeout -k 5 "$limit" "$@" 2>&1 | sed 's/^/  /'
    local rc=${PIPESTATUS[0]}
    [ "$rc" = 0 ] || note "$label: exit $rc$( [ "$rc" = 124 ] && echo " (stopped after $limit s)")"
  }
  echo "W1/W2: $STEPS steps after $WARMUP warm-up, precision(s) $PRECISION; W0: $W0_STEPS after $W0_WARMUP;" \
    "$ROUNDS round(s), interleaved"
  for r in $(seq 1 "$ROUNDS"); do
    for w in $WORKLOADS; do
      echo "-- round $r, $w"
      if [ "$w" = w0 ]; then
        run 60 "relgrad w0" "$PYTHON" bench/w0_relgrad.py "$wrapper" --threads 1 --steps "$W0_STEPS" \
          --warmup "$W0_WARMUP" --out "$res/w0_run" --json "$tr/relgrad_w0_$r.json"
        if [ "$torch_ok" = 1 ]; then
          for m in $W0_MODES; do
            run 120 "torch $m w0" "$PYTHON" bench/gpu_train.py w0 --mode "$m" --steps "$W0_STEPS" \
              --warmup "$W0_WARMUP" "${py_tf32[@]}" "${py_dev[@]}" --json "$tr/torch-${m}_w0_$r.json"
          done
        fi
        continue
      fi
      for p in $PRECISION; do
        # fp32 keeps bench_train's and gpu_train.py's flags and file names as they were.
        sfx="" bt_p=() py_p=()
        [ "$p" != fp32 ] && sfx=-$p bt_p=(--precision "$p") py_p=(--precision "$p")
        for c in $CORES; do
          [ "$p" != fp32 ] && [ "$bt_precision" = 0 ] && break
          fused=()
          [ "$c" = fused ] && fused=(--fused)
          run 60 "relgrad $c $w $p" "$bench_train" --workload "$w" --device "$DEVICE" --steps "$STEPS" \
            --warmup "$WARMUP" "${fused[@]}" "${bt_tf32[@]}" "${bt_p[@]}" --json "$tr/relgrad-${c}${sfx}_${w}_$r.json"
        done
        if [ "$torch_ok" = 1 ] && [ -n "$REF" ]; then
          for m in $TORCH_MODES; do
            run 150 "torch $m $w $p" "$PYTHON" bench/gpu_train.py torch "$REF" --workload "$w" --mode "$m" \
              --steps "$STEPS" --warmup "$WARMUP" "${py_tf32[@]}" "${py_p[@]}" "${py_dev[@]}" \
              --json "$tr/torch-${m}${sfx}_${w}_$r.json"
          done
        fi
      done
    done
  done
  echo
  say "TF32 $([ "$TF32" != 0 ] && echo on || echo off); relgrad's W0 row has no GPU tensor peak (relgrad train does not report one)"
  "$PYTHON" bench/gpu_train.py summary "$tr" 2>&1 | tee -a "$summary"
  phase_end
fi

# ---- flash --------------------------------------------------------------------------------------
if has flash; then
  FLASH_BUDGET=$(budget flash "$FLASH_BUDGET")
  phase_begin flash "$FLASH_BUDGET"
  deadline=$(($(date +%s) + FLASH_BUDGET))
  if [ -x "$bench_flash" ]; then
    # relgrad first, with at most 55 % of the phase; PyTorch gets the rest.
    measured bench_flash flash_relgrad.txt $((FLASH_BUDGET * 55 / 100)) "$bench_flash" --device "$DEVICE" \
      --lengths "$FLASH_LENGTHS" --reps "$FLASH_REPS" --max-composite-length "$FLASH_COMPOSITE_MAX" \
      ${FLASH_VARIANTS:+--variants "$FLASH_VARIANTS"}
  else
    note "no $bench_flash: relgrad's flash rows skipped"
  fi
  if [ "$torch_ok" = 1 ]; then
    left=$((deadline - $(date +%s)))
    if [ "$left" -gt 10 ]; then
      echo >>"$summary"
      measured flash_torch.py flash_torch.txt "$left" "$PYTHON" bench/flash_torch.py --lengths "$FLASH_LENGTHS" \
        --reps "$FLASH_REPS" --variants "$FLASH_TORCH_VARIANTS" --check "$FLASH_CHECK" "${py_tf32[@]}" "${py_dev[@]}"
    else
      note "flash_torch.py: skipped (flash budget spent)"
    fi
  fi
  phase_end
fi

# ---- profile ------------------------------------------------------------------------------------
if has profile; then
  PROFILE_BUDGET=$(budget profile "$PROFILE_BUDGET")
  phase_begin profile "$PROFILE_BUDGET"
  if [ ! -x "$relgrad" ]; then
    note "no $relgrad: profile skipped"
  elif ! prints '^train\.profile' "$relgrad" train --help-config; then
    note "this build's relgrad train has no train.profile: profile skipped"
  else
    timeout -k 5 "$PROFILE_BUDGET" "$relgrad" train --device "$DEVICE" --train.profile="$PROFILE_STEPS" \
      --train.steps=$((PROFILE_STEPS + 10)) --train.eval_every=0 --train.save_every=0 --train.samples=0 \
      --train.target_accuracy=0 --train.out_dir="$res/profile_run" "${rg_tf32[@]}" >"$res/profile.txt" 2>&1
    rc=$?
    cat "$res/profile.txt"
    # The profile's table (and its heading lines) for the summary; the step lines stay in the log.
    grep -vE '^step [0-9]+/|^(checkpoint|log|plot) ' "$res/profile.txt" | tail -n 60 >>"$summary"
    [ "$rc" = 0 ] || note "relgrad train --train.profile: exit $rc"
  fi
  phase_end
fi

printf '\n## phase times\n\n%s total %s s\n' "${phase_times# }" "$(elapsed)" >>"$summary"
echo
echo "=================== SUMMARY ($summary) ==================="
cat "$summary"
