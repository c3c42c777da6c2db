#!/usr/bin/env bash
# Every room of the library (the floors and wings of docs/design.md, as tests/CMakeLists.txt links
# them alone) has tests in the quick tier, the README's test command: for each room, the quick doctest
# cases whose test file includes one of that room's headers. Prints the count per room and fails
# naming any room with none, so moving a room's last quick test into the long tier fails here.
#   usage: check_tiers.sh RELGRAD_TESTS_BINARY SOURCE_DIR LONG_REGEX   (ctest: "tiers: every room has quick tests")
#   LONG_REGEX: the extended regular expression on case names that makes the long tier (tests/CMakeLists.txt).
set -euo pipefail
bin=${1:?usage: check_tiers.sh RELGRAD_TESTS SOURCE_DIR LONG_REGEX} src=${2:?} long=${3:?}
# room  include-prefix regex (a header directly in that folder, or in a folder below it where the room
# owns it: the subcommands, the data sources, the ops)
rooms="cuda:cuda/
core:core/[^/]+\.h
cpu:core/cpu/
backend:core/backend/
autograd:autograd/
layers:layers/
optim:train/optim/
data:train/data/
music:train/music/
trainer:train/trainer/
plot:train/plot/
config:train/config/
instruments:train/instruments/
command:train/command/"
# file -> number of quick cases in it
# One line per case, "NAME<TAB>FILE", from doctest's XML listing; the long tier's cases dropped.
cases=$("$bin" --list-test-cases --reporters=xml \
  | sed -n 's/.*<TestCase name="\([^"]*\)".* filename="\([^"]*\)".*/\1\t\2/p' \
  | awk -F '\t' -v long="$long" '$1 !~ long { print $2 }' | sort | uniq -c)
[ -n "$cases" ] || { echo "check_tiers: no quick test case listed by $bin"; exit 1; }
fail=0
while IFS=: read -r room prefix; do
  total=0 files=0
  while read -r count file; do
    [ -f "$file" ] || file="$src/tests/$(basename "$file")"
    if grep -qE "^#include \"$prefix" "$file"; then total=$((total + count)); files=$((files + 1)); fi
  done <<<"$cases"
  printf '%-12s %4d quick cases in %3d files\n' "$room" "$total" "$files"
  [ "$total" -gt 0 ] || { echo "check_tiers: the room $room ($prefix) has no test in the quick tier"; fail=1; }
done <<<"$rooms"
[ $fail -eq 0 ] && echo "every room has quick tests"
exit $fail
