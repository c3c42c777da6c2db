#!/usr/bin/env bash
# The reading path's promise (docs/learn.md): a reader who follows it from the top reaches example 07
# having read every line of autograd/ and layers/ that example 07 runs. This checks it with gcov:
# builds example 07 with coverage (in its own build folder, CUDA off, tests off), runs it as ctest
# does (from the repository root, with its "// ctest-args:" line), and lists every executed line of
# autograd/ and layers/ (sources and headers) that no range of docs/learn.md above the link to
# examples/07_ covers. Exit 0 when there is none, 1 otherwise. ctest runs it (tests/CMakeLists.txt,
# label learn), in a folder of the build tree, so a later run rebuilds only what changed.
#
#   bash tools/check_learn_path.sh [example, default 07] [build folder, default /tmp/relgrad-learn-coverage]
#   bash tools/check_learn_path.sh --self-test [example] [build folder]
#
# The same question for another example: bash tools/check_learn_path.sh 05 (ranges above its link).
# --self-test proves the check can fail, on the same coverage data: a copy of docs/learn.md in which
# the range citing run_backward (autograd/engine.cpp) is moved 300 lines down, as if the function had
# moved away from the lines the path cites, and one in which that row is gone, must each be refused
# with engine.cpp's lines named.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
self_test=0
if [ "${1:-}" = --self-test ]; then self_test=1; shift; fi
number=${1:-07}
build=${2:-/tmp/relgrad-learn-coverage}
source_file=$(ls "$root"/examples/"${number}"_*.cpp)
name=$(basename "$source_file" .cpp)

launcher=()
command -v ccache > /dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
# A build type of its own ("Coverage": no per-type flags), so that CMakeLists.txt's Release flags
# (-O3 -march=native) do not replace the -O1 asked for here.
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Coverage \
  -DCMAKE_CXX_FLAGS="--coverage -O1 -DNDEBUG" -DCMAKE_EXE_LINKER_FLAGS=--coverage -DRELGRAD_CUDA=OFF -DRELGRAD_TESTS=OFF \
  "${launcher[@]}" > "$build.configure.log"
cmake --build "$build" -j "$(nproc)" --target "$name" > "$build.build.log"

find "$build" -name '*.gcda' -delete
args=$(sed -n 's|^// ctest-args: ||p' "$source_file")
echo "running $name $args (coverage build)"
(cd "$root" && "$build/examples/$name" $args > "$build.run.log")

# Executed lines (file:line) of autograd/ and layers/, from every object file's counts.
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for dir in "$build/autograd" "$build/layers"; do
  find "$dir" -name '*.gcda' | while read -r gcda; do
    (cd "$work" && gcov -l -p -o "$(dirname "$gcda")" "$gcda" > /dev/null 2>&1)
  done
done
for gcov_file in "$work"/*.gcov; do
  awk -v root="$root/" '
    NR == 1 { sub(/^ *-: *0:Source:/, ""); src = $0
              # gcov names the source relative to its working folder ("../../work/main/layers/x.cpp")
              while (substr(src, 1, 3) == "../") src = substr(src, 4)
              sub(/^\//, "", src); r = root; sub(/^\//, "", r)
              if (index(src, r) != 1) exit; src = substr(src, length(r) + 1)
              if (src !~ /^(autograd|layers)\//) exit; next }
    { split($0, f, ":"); count = f[1]; gsub(/ /, "", count); line = f[2]; gsub(/ /, "", line)
      if (count ~ /^[0-9]+\*?$/ && count !~ /^0/) print src ":" line }' "$gcov_file"
done | sort -u > "$work/executed"

# Lines a copy of the path ($1) covers above the example's link: its "| `file` | A–B | ... |" rows.
covered_by() {
  awk -v link="examples/${name}.cpp" 'index($0, link) { exit } { print }' "$1" |
    sed -nE 's/^\| *`([^`]+)` *\| *([0-9]+) *(–|-) *([0-9]+) *\|.*/\1 \2 \4/p' |
    while read -r file first last; do
      for ((l = first; l <= last; ++l)); do echo "$file:$l"; done
    done | sort -u
}

# Checks the path in $1; prints the verdict and the missing lines; exit status 0 when none is missing.
check_path() {
  covered_by "$1" > "$work/covered"
  comm -23 "$work/executed" "$work/covered" > "$work/missing"
  local executed
  executed=$(wc -l < "$work/executed")
  if [ ! -s "$work/missing" ]; then
    echo "ok: all $executed lines of autograd/ and layers/ that $name runs lie in docs/learn.md's ranges above its link"
    return 0
  fi
  echo "$(wc -l < "$work/missing") of $executed executed lines of autograd/ and layers/ are outside docs/learn.md's ranges above $name:"
  sort -t: -k1,1 -k2,2n "$work/missing" | while IFS=: read -r file line; do
    printf '%s:%s: %s\n' "$file" "$line" "$(sed -n "${line}p" "$root/$file")"
  done
  return 1
}

if [ "$self_test" = 0 ]; then
  check_path "$root/docs/learn.md"
  exit $?
fi

# ---- self-test: the same coverage data against altered copies of the path ----
row_pattern='^\| `autograd/engine\.cpp` \| ([0-9]+)–([0-9]+) \| `// ---- backward'
row=$(grep -E "$row_pattern" "$root/docs/learn.md" || true)
[ -n "$row" ] || { echo "self-test: docs/learn.md has no row citing autograd/engine.cpp's backward"; exit 1; }
[[ "$row" =~ \|\ ([0-9]+)–([0-9]+)\ \| ]] || { echo "self-test: cannot read the range of: $row"; exit 1; }
first=${BASH_REMATCH[1]}
last=${BASH_REMATCH[2]}
moved_row=${row/"| ${first}–${last} |"/"| $((first + 300))–$((last + 300)) |"}
failures=0
expect_refused() {  # what, doc copy
  local out
  if out=$(check_path "$2"); then
    echo "self-test FAILED: $1 was accepted"; failures=$((failures + 1)); return
  fi
  if ! grep -q '^autograd/engine.cpp:' <<< "$out"; then
    echo "self-test FAILED: $1 was refused without naming autograd/engine.cpp"; failures=$((failures + 1)); return
  fi
  echo "self-test ok: $1 refused ($(head -1 <<< "$out"))"
}
awk -v row="$row" -v moved="$moved_row" '$0 == row { print moved; next } { print }' "$root/docs/learn.md" > "$work/moved.md"
expect_refused "run_backward moved 300 lines down from its cited range" "$work/moved.md"
awk -v row="$row" '$0 == row { next } { print }' "$root/docs/learn.md" > "$work/dropped.md"
expect_refused "the row citing run_backward dropped" "$work/dropped.md"
[ "$failures" = 0 ] && echo "self-test: the check refuses a moved function and a dropped range"
exit $((failures > 0))
