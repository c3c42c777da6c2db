#!/usr/bin/env bash
# The run directory with the real `relgrad` binary (ctest: run_dir_smoke), as two users would meet it:
# while one `relgrad train` runs into a directory, a second one into it is refused (exit 1, one line
# naming the directory and the first one's pid) and writes nothing; once the first is killed with
# SIGKILL (no clean-up runs) the directory is free again.   usage: run_dir_smoke.sh path/to/relgrad
set -euo pipefail

relgrad=${1:?usage: run_dir_smoke.sh path/to/relgrad}
[[ -x $relgrad ]] || { echo "run_dir_smoke: $relgrad is not an executable" >&2; exit 1; }
work=$(mktemp -d "${TMPDIR:-/tmp}/relgrad_run_dir_smoke.XXXXXX")
holder=
cleanup() {
  [[ -n $holder ]] && kill -9 "$holder" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

fail() { echo "run_dir_smoke: FAIL: $*" >&2; exit 1; }

tiny=(--model.d_model=16 --model.n_heads=2 --model.d_ff=32 --model.n_encoder_layers=1
      --model.n_decoder_layers=1 --model.cross.max_length=8 --data.num_symbols=6 --data.min_len=3
      --data.max_len=6 --data.batch_size=4
      --optim.warmup_steps=2 --train.log_every=1000 --train.eval_every=0 --train.eval_batches=1
      --train.samples=0 --train.target_accuracy=0 --train.threads=1)
run=$work/run

# The first run: far more steps than it will live for, and no checkpoint before its end.
"$relgrad" train "${tiny[@]}" --train.steps=100000000 --train.save_every=0 --train.out_dir="$run" \
  >"$work/holder.out" 2>&1 &
holder=$!
for _ in $(seq 300); do  # until it holds the lock (its pid is in run/.lock), at most 30 s
  grep -qs "^pid $holder " "$run/.lock" && break
  kill -0 "$holder" 2>/dev/null || { cat "$work/holder.out" >&2; fail "the first run ended early"; }
  sleep 0.1
done
grep -qs "^pid $holder " "$run/.lock" || fail "the first run never took the lock on $run"

# The second run into the same directory: refused, one line, nothing written.
got=0
"$relgrad" train "${tiny[@]}" --train.steps=4 --train.seed=2 --train.out_dir="$run" \
  >"$work/out" 2>"$work/err" || got=$?
[[ $got == 1 ]] || { cat "$work/out" "$work/err" >&2; fail "the second run exited $got, expected 1"; }
want="^relgrad train: error: \[train\] train.out_dir '$run' is in use by process $holder on host "
grep -q "$want" "$work/err" ||
  fail "the refusal does not name the directory and the holder: $(cat "$work/err")"
[[ $(wc -l <"$work/err") == 1 ]] || fail "the refusal is not one line"
[[ ! -e $run/checkpoint.safetensors && ! -e $run/log.new.jsonl ]] || fail "the refused run wrote into $run"

# Under mpirun rank 0 takes the lock, and every rank stops at once when it cannot (not after the
# collective timeout). Skipped where mpirun is missing or relgrad was built without MPI.
if command -v mpirun >/dev/null; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  export OMPI_MCA_btl_vader_single_copy_mechanism=${OMPI_MCA_btl_vader_single_copy_mechanism:-none}
  got=0
  timeout 120 mpirun --oversubscribe -np 2 "$relgrad" train "${tiny[@]}" --train.steps=4 \
    --train.out_dir="$run" >"$work/out" 2>"$work/err" || got=$?
  if grep -q "(rank 1 of 2)" "$work/err"; then
    [[ $got != 0 && $got != 124 ]] ||
      { cat "$work/err" >&2; fail "mpirun into a locked directory exited $got"; }
    want="(rank 0 of 2): error: \[train\] train.out_dir '$run' is in use by process $holder "
    grep -q "$want" "$work/err" ||
      fail "rank 0 does not name the holder: $(cat "$work/err")"
    grep -q "(rank 1 of 2): error: \[train\] rank 0 could not lock train.out_dir" "$work/err" ||
      fail "rank 1 does not say why it stopped: $(cat "$work/err")"
  else
    echo "run_dir_smoke: the mpirun case is skipped: relgrad was built without MPI"
  fi
  [[ ! -e $run/checkpoint.safetensors ]] || fail "the refused mpirun job wrote into $run"
else
  echo "run_dir_smoke: the mpirun case is skipped: mpirun is not installed"
fi

# SIGKILL: the lock dies with the process.
kill -9 "$holder"
wait "$holder" 2>/dev/null || true
holder=
got=0
"$relgrad" train "${tiny[@]}" --train.steps=4 --train.out_dir="$run" >"$work/out" 2>"$work/err" || got=$?
[[ $got == 0 ]] || { cat "$work/out" "$work/err" >&2; fail "after the holder's kill the run exited $got"; }
grep -q '^done: 4 steps' "$work/out" || fail "the run after the kill did not finish"

echo "run_dir_smoke: ok"
