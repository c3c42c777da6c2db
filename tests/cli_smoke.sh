#!/usr/bin/env bash
# Smoke test of the real `relgrad` binary (ctest: cli_smoke): a tiny training run in a temporary
# directory, then inspect / eval / sample / plot on its output, and the exit codes of a usage error (2),
# of a missing file (1) and of a diverging run (3).   usage: cli_smoke.sh path/to/relgrad
set -euo pipefail

relgrad=${1:?usage: cli_smoke.sh path/to/relgrad}
[[ -x $relgrad ]] || { echo "cli_smoke: $relgrad is not an executable" >&2; exit 1; }
work=$(mktemp -d "${TMPDIR:-/tmp}/relgrad_cli_smoke.XXXXXX")
trap 'rm -rf "$work"' EXIT

fail() { echo "cli_smoke: FAIL: $*" >&2; exit 1; }

# expect CODE COMMAND...: runs the command, which must exit with CODE; its stderr goes to $work/err.
expect() {
  local want=$1 got=0
  shift
  "$@" >"$work/out" 2>"$work/err" || got=$?
  [[ $got == "$want" ]] || { cat "$work/out" "$work/err" >&2; fail "'$*' exited $got, expected $want"; }
}

run=$work/run
expect 0 "$relgrad" train --train.out_dir="$run" --model.d_model=16 --model.n_heads=2 --model.d_ff=32 \
  --model.n_encoder_layers=1 --model.n_decoder_layers=1 --model.cross.max_length=8 --data.num_symbols=6 \
  --data.min_len=3 --data.max_len=6 --data.batch_size=4 --optim.warmup_steps=2 --train.steps=4 \
  --train.log_every=2 --train.eval_every=2 --train.eval_batches=2 --train.samples=1 --train.target_accuracy=0
grep -q '^done: 4 steps' "$work/out" || fail "train printed no 'done: 4 steps' line"
for f in checkpoint.safetensors log.jsonl loss.svg; do
  [[ -s $run/$f ]] || fail "train wrote no $run/$f"
done

expect 0 "$relgrad" inspect "$run/checkpoint.safetensors"
grep -q '^step  *4$' "$work/out" || fail "inspect shows no step 4"
grep -q '^writer  *relgrad [0-9][0-9.]*$' "$work/out" || fail "inspect shows no writer (the relgrad version that saved it)"
grep -q '(ok: matches the data section)' "$work/out" || fail "inspect did not verify the checksum"

expect 0 "$relgrad" eval "$run/checkpoint.safetensors" --batches 2
grep -q '^step 4: held-out loss [0-9.]*, token accuracy' "$work/out" || fail "eval printed no loss / accuracy"
expect 0 "$relgrad" sample "$run/checkpoint.safetensors" --input "1 2 3"
grep -q '^model  ' "$work/out" || fail "sample printed no output"
# Output that cannot reach stdout (a full disk, /dev/full): exit 1 naming why, not a silent success.
if [[ -w /dev/full ]]; then
  got=0
  "$relgrad" sample "$run/checkpoint.safetensors" --input "1 2 3" >/dev/full 2>"$work/err" || got=$?
  [[ $got == 1 ]] || fail "sample > /dev/full exited $got, expected 1"
  grep -q 'could not write to standard output: No space left' "$work/err" || fail "$(cat "$work/err")"
fi
expect 0 "$relgrad" --version
grep -q '^relgrad [0-9][0-9.]*$' "$work/out" || fail "--version printed no 'relgrad <version>' line"
expect 0 "$relgrad" plot "$run/log.jsonl" -o "$work/curves.png"
[[ $(head -c 4 "$work/curves.png" | od -An -tx1 | tr -d ' \n') == 89504e47 ]] || fail "plot wrote no PNG"

# A usage error: exit 2, naming the key.
expect 2 "$relgrad" train --dry-run --model.dmodel=16
grep -q "model.dmodel" "$work/err" || fail "the usage error does not name the key"
# A missing file: exit 1, naming it.
expect 1 "$relgrad" inspect "$work/no_such.safetensors"
grep -q "no_such.safetensors" "$work/err" || fail "the error does not name the missing file"
# A corrupt checkpoint: exit 1.
cp "$run/checkpoint.safetensors" "$work/cut.safetensors"
truncate -s -16 "$work/cut.safetensors"
expect 1 "$relgrad" sample "$work/cut.safetensors"
# A diverging run (absurd lr, no clipping): exit 3, one stderr line naming step, lr and tensor; the
# checkpoint it resumed from stays byte for byte.
cp "$run/checkpoint.safetensors" "$work/before.safetensors"
expect 3 "$relgrad" train --resume "$run/checkpoint.safetensors" --train.steps=40 --optim.lr=1e6 --optim.clip=0
grep -q '^relgrad train: error: \[train\] step [0-9]*: .* at lr .*; first non-finite tensor: ' "$work/err" ||
  fail "the diverged run's error does not name step, lr and tensor: $(cat "$work/err")"
[[ $(wc -l <"$work/err") == 1 ]] || fail "the diverged run's error is not one line"
cmp -s "$run/checkpoint.safetensors" "$work/before.safetensors" || fail "the diverged run changed the checkpoint"

echo "cli_smoke: ok"
