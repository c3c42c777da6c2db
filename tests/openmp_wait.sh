#!/usr/bin/env bash
# Every program linking relgrad waits passively in OpenMP unless its caller chose (core/openmp_start.cpp).
# Runs PROGRAM (with ARGS) three times with libgomp's OMP_DISPLAY_ENV=verbose, which prints the spin
# count libgomp took from the environment at start-up:
#   - none of OMP_WAIT_POLICY, GOMP_SPINCOUNT, KMP_BLOCKTIME set    -> GOMP_SPINCOUNT = '0' (passive)
#   - OMP_WAIT_POLICY=active                                         -> not 0: the caller's choice kept
#   - GOMP_SPINCOUNT=12345                                           -> 12345: kept as well
# and checks the program's own output is the same with and without the start-up's variable.
# Without libgomp (no GOMP_SPINCOUNT line: LLVM's libomp) it prints "skipped: ..." (ctest: skipped).
#   usage: tests/openmp_wait.sh PROGRAM [ARGS...]
set -uo pipefail
program=("$@")
clean=(env -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT -u KMP_BLOCKTIME OMP_DISPLAY_ENV=verbose)
spin() { sed -n "s/^ *GOMP_SPINCOUNT = '\([0-9]*\)'.*/\1/p" | head -1; }

out=$("${clean[@]}" "${program[@]}" 2>&1)
unset_spin=$(printf '%s\n' "$out" | spin)
if [ -z "$unset_spin" ]; then
  echo "skipped: ${program[0]} prints no GOMP_SPINCOUNT under OMP_DISPLAY_ENV=verbose (not libgomp)"
  exit 0
fi
active_spin=$("${clean[@]}" OMP_WAIT_POLICY=active "${program[@]}" 2>&1 | spin)
count_spin=$("${clean[@]}" GOMP_SPINCOUNT=12345 "${program[@]}" 2>&1 | spin)
echo "GOMP_SPINCOUNT: nothing set -> $unset_spin, OMP_WAIT_POLICY=active -> $active_spin, GOMP_SPINCOUNT=12345 -> $count_spin"
fail=0
[ "$unset_spin" = 0 ] || { echo "FAIL: with no variable set libgomp spins $unset_spin turns: the start-up did not make it passive"; fail=1; }
[ "$active_spin" != 0 ] || { echo "FAIL: OMP_WAIT_POLICY=active was overridden"; fail=1; }
[ "$count_spin" = 12345 ] || { echo "FAIL: GOMP_SPINCOUNT=12345 was overridden ($count_spin)"; fail=1; }
# The program's own output (libgomp's block removed) is the same whichever way its threads wait.
strip() { sed '/^OPENMP DISPLAY ENVIRONMENT BEGIN/,/^OPENMP DISPLAY ENVIRONMENT END/d'; }
passive_out=$(printf '%s\n' "$out" | strip)
active_out=$("${clean[@]}" OMP_WAIT_POLICY=active "${program[@]}" 2>&1 | strip)
[ "$passive_out" = "$active_out" ] || { echo "FAIL: the program's output differs between passive and active waiting"; fail=1; }
[ $fail = 0 ] && echo "ok: ${program[0]##*/} waits passively unless told otherwise"
exit $fail
