#!/usr/bin/env bash
# Every `relgrad` subcommand that writes a file, with its output set to each of its inputs (ctest:
# output_over_input): by the same path, ./ and absolute spellings, a hard link and a symbolic link.
# Each must exit 2 naming both paths before it reads or writes anything, and leave the input byte for
# byte as it was.
#   usage: output_over_input.sh path/to/relgrad
set -euo pipefail

relgrad=${1:?usage: output_over_input.sh path/to/relgrad}
[[ -x $relgrad ]] || { echo "output_over_input: $relgrad is not an executable" >&2; exit 1; }
relgrad=$(cd "$(dirname "$relgrad")" && pwd)/$(basename "$relgrad")
work=$(mktemp -d "${TMPDIR:-/tmp}/relgrad_output_over_input.XXXXXX")
trap 'rm -rf "$work"' EXIT
cd "$work"

fail() { echo "output_over_input: FAIL: $*" >&2; exit 1; }

# A tiny checkpoint and log (a second or so), and one file of each other kind a command reads.
"$relgrad" train --train.out_dir=run --model.d_model=16 --model.n_heads=2 --model.d_ff=32 \
  --model.n_encoder_layers=1 --model.n_decoder_layers=1 --model.cross.max_length=8 --data.num_symbols=6 \
  --data.min_len=3 --data.max_len=6 --data.batch_size=4 --optim.warmup_steps=2 --train.steps=2 \
  --train.eval_batches=1 --train.samples=0 >train.out 2>&1 || { cat train.out >&2; fail "the tiny run failed"; }
cp run/checkpoint.safetensors other.safetensors  # probe --compare's second checkpoint
# A text model, whose held-out data (data.text_path) eval reads too.
printf 'And God said, Let there be light: and there was light.\n%.0s' {1..40} >corpus.txt
"$relgrad" train --train.out_dir=textmodel --data.source=text --data.text_path=corpus.txt --data.context=8 \
  --data.batch_size=2 --model.type=decoder-only --model.d_model=16 --model.n_heads=2 --model.d_ff=32 \
  --model.n_decoder_layers=1 --optim.warmup_steps=1 --train.steps=1 --train.eval_batches=1 --train.samples=0 \
  >train.out 2>&1 || { cat train.out >&2; fail "the tiny text run failed"; }
printf 'MThd not really a MIDI file: refused before it is read\n' >song.mid
printf 'not a SoundFont\n' >font.sf2
printf 'In the beginning God created the heaven and the earth.\n' >text.txt
printf '[train]\nsteps = 2\n' >config.toml
mkdir -p textrun
printf 'And the earth was without form, and void; and darkness was upon the face of the deep.\n%.0s' {1..40} \
  >textrun/log.jsonl

cases=0
# refused INPUT ARGS...: relgrad ARGS, with @OUT@ replaced by INPUT spelled five ways, must exit 2 saying
# that path "is the same file as" another, and leave INPUT's bytes as they were.
refused() {
  local input=$1
  shift
  cp "$input" "$work/before"
  ln -f "$input" "$work/hard_link"
  ln -sf "$work/$input" "$work/soft_link"
  local out
  for out in "$input" "./$input" "$work/./$input" "$work/hard_link" "$work/soft_link"; do
    local args=() a got=0
    for a in "$@"; do args+=("${a//@OUT@/$out}"); done
    "$relgrad" "${args[@]}" >"$work/out" 2>"$work/err" || got=$?
    [[ $got == 2 ]] || { cat "$work/out" "$work/err" >&2; fail "'relgrad ${args[*]}' exited $got, expected 2"; }
    grep -q "is the same file as" "$work/err" && grep -qF -- "$out" "$work/err" ||
      fail "'relgrad ${args[*]}' does not say that $out is an input: $(cat "$work/err")"
    cmp -s "$input" "$work/before" || fail "'relgrad ${args[*]}' changed $input"
    cases=$((cases + 1))
  done
  rm -f "$work/hard_link" "$work/soft_link"
}

ck=run/checkpoint.safetensors
refused "$ck" eval "$ck" --dump-logits @OUT@
refused "$ck" eval "$ck" --dump-logits @OUT@ --input "1 2 3"
refused corpus.txt eval textmodel/checkpoint.safetensors --dump-logits @OUT@
refused "$ck" probe "$ck" --csv @OUT@
refused "$ck" probe "$ck" --json @OUT@
refused "$ck" probe "$ck" --out @OUT@
refused "$ck" probe "$ck" --compare other.safetensors --compare-csv @OUT@
refused other.safetensors probe "$ck" --compare other.safetensors --compare-csv @OUT@
refused "$ck" sample "$ck" --format midi -o @OUT@
refused song.mid sample "$ck" --format midi --prompt-midi song.mid -o @OUT@
refused song.mid sample "$ck" --format midi --melody song.mid -n 1 -o @OUT@
refused song.mid render song.mid -o @OUT@
refused font.sf2 render song.mid --soundfont font.sf2 -o @OUT@
refused text.txt tokenize text.txt @OUT@
refused run/log.jsonl plot run/log.jsonl -o @OUT@
refused "$ck" train --resume "$ck" --train.steps=4 --train.out_dir=@OUT@
refused config.toml train --config config.toml --train.out_dir=@OUT@
refused textrun/log.jsonl train --data.source=text --data.text_path=@OUT@ --data.context=8 --data.batch_size=2 \
  --model.type=decoder-only --model.d_model=16 --model.n_heads=2 --model.d_ff=32 --model.n_decoder_layers=1 \
  --optim.warmup_steps=1 --train.steps=2 --train.samples=0 --train.out_dir=textrun
refused text.txt context-bench --text text.txt --out @OUT@
refused text.txt music-bench --chorales text.txt --out @OUT@

echo "output_over_input: ok ($cases refusals)"
