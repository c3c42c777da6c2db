#!/usr/bin/env bash
# Every program linking relgrad waits passively in OpenMP unless its caller chose (core/openmp_start.cpp).
# Runs PROGRAM (with ARGS) with libgomp's OMP_DISPLAY_ENV=verbose, which prints the spin count libgomp
# took from the environment at start-up:
#   - none of OMP_WAIT_POLICY, GOMP_SPINCOUNT, KMP_BLOCKTIME set    -> GOMP_SPINCOUNT = '0' (passive)
#   - GOMP_SPINCOUNT=1000 (a short spin, set by hand)               -> 1000: the caller's choice kept
#   - with --active first: OMP_WAIT_POLICY=active                    -> not 0: kept as well (a program
#     that spins without end on a busy machine: only for a quick one, `relgrad --version`)
# and checks the program's own output is the same waiting passively and spinning.
# Without libgomp (no GOMP_SPINCOUNT line: LLVM's libomp) it prints "skipped: ..." (ctest: skipped).
#   usage: tests/openmp_wait.sh [--active] PROGRAM [ARGS...]
set -uo pipefail
active=0
if [ "${1:-}" = --active ]; then active=1; shift; fi
program=("$@")
clean=(env -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT -u KMP_BLOCKTIME OMP_DISPLAY_ENV=verbose)
spin() { sed -n "s/^ *GOMP_SPINCOUNT = '\([0-9]*\)'.*/\1/p" | head -1; }
strip() { sed '/^OPENMP DISPLAY ENVIRONMENT BEGIN/,/^OPENMP DISPLAY ENVIRONMENT END/d'; }

passive_out=$("${clean[@]}" "${program[@]}" 2>&1)
unset_spin=$(printf '%s\n' "$passive_out" | spin)
if [ -z "$unset_spin" ]; then
  echo "skipped: ${program[0]} prints no GOMP_SPINCOUNT under OMP_DISPLAY_ENV=verbose (not libgomp)"
  exit 0
fi
spin_out=$("${clean[@]}" GOMP_SPINCOUNT=1000 "${program[@]}" 2>&1)
count_spin=$(printf '%s\n' "$spin_out" | spin)
echo "GOMP_SPINCOUNT: nothing set -> $unset_spin, GOMP_SPINCOUNT=1000 -> $count_spin"
fail=0
[ "$unset_spin" = 0 ] || { echo "FAIL: with no variable set libgomp spins $unset_spin turns: the start-up did not make it passive"; fail=1; }
[ "$count_spin" = 1000 ] || { echo "FAIL: GOMP_SPINCOUNT=1000 was overridden ($count_spin)"; fail=1; }
if [ "$active" = 1 ]; then
  active_spin=$("${clean[@]}" OMP_WAIT_POLICY=active "${program[@]}" 2>&1 | spin)
  echo "GOMP_SPINCOUNT: OMP_WAIT_POLICY=active -> $active_spin"
  [ "$active_spin" != 0 ] || { echo "FAIL: OMP_WAIT_POLICY=active was overridden"; fail=1; }
fi
# The program's own output (libgomp's block removed) is the same whichever way its threads wait.
[ "$(printf '%s\n' "$passive_out" | strip)" = "$(printf '%s\n' "$spin_out" | strip)" ] ||
  { echo "FAIL: the program's output differs between passive waiting and a short spin"; fail=1; }
[ $fail = 0 ] && echo "ok: ${program[0]##*/} waits passively unless told otherwise"
exit $fail
