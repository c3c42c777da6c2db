#!/usr/bin/env bash
# The reading path's promise (docs/learn.md): a reader who follows it from the top reaches example 07
# having read every line of autograd/ and layers/ that example 07 runs. This checks it with gcov:
# builds example 07 with coverage (in its own build folder, CUDA off, tests off), runs it as ctest
# does (from the repository root, with its "// ctest-args:" line), and lists every executed line of
# autograd/ and layers/ (sources and headers) that no range of docs/learn.md above the link to
# examples/07_ covers. Exit 0 when there is none, 1 otherwise.
#
#   bash tools/check_learn_path.sh [example, default 07] [build folder, default /tmp/relgrad-learn-coverage]
#
# The same question for another example: bash tools/check_learn_path.sh 05 (ranges above its link).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
number=${1:-07}
build=${2:-/tmp/relgrad-learn-coverage}
source_file=$(ls "$root"/examples/"${number}"_*.cpp)
name=$(basename "$source_file" .cpp)

launcher=()
command -v ccache > /dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE="-O1 -DNDEBUG" \
  -DCMAKE_CXX_FLAGS=--coverage -DCMAKE_EXE_LINKER_FLAGS=--coverage -DRELGRAD_CUDA=OFF -DRELGRAD_TESTS=OFF \
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

# Lines the path covers above the example's link: its "| `file` | A–B | ... |" rows.
awk -v link="examples/${name}.cpp" 'index($0, link) { exit } { print }' "$root/docs/learn.md" |
  sed -nE 's/^\| *`([^`]+)` *\| *([0-9]+) *(–|-) *([0-9]+) *\|.*/\1 \2 \4/p' |
  while read -r file first last; do
    for ((l = first; l <= last; ++l)); do echo "$file:$l"; done
  done | sort -u > "$work/covered"

comm -23 "$work/executed" "$work/covered" > "$work/missing"
executed=$(wc -l < "$work/executed")
if [ ! -s "$work/missing" ]; then
  echo "ok: all $executed lines of autograd/ and layers/ that $name runs lie in docs/learn.md's ranges above its link"
  exit 0
fi
echo "$(wc -l < "$work/missing") of $executed executed lines of autograd/ and layers/ are outside docs/learn.md's ranges above $name:"
sort -t: -k1,1 -k2,2n "$work/missing" | while IFS=: read -r file line; do
  printf '%s:%s: %s\n' "$file" "$line" "$(sed -n "${line}p" "$root/$file")"
done
exit 1
