# Shared by tests/install_downstream.sh and tests/package_deb.sh (sourced): build examples/downstream/
# against an installed relgrad and check what it prints. Expects $work, $src, $version, $cxx, $launcher
# and a fail() function.

# build_downstream NAME PREFIX: configures and builds a copy of examples/downstream/ (outside the
# source tree, so nothing but PREFIX can supply relgrad's headers) with find_package, runs it.
build_downstream() {
  local name=$1 prefix=$2
  rm -rf "$work/$name"
  cp -r "$src/examples/downstream" "$work/$name"
  cmake -S "$work/$name" -B "$work/$name/build" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_CXX_COMPILER="$cxx" \
    ${launcher:+-DCMAKE_CXX_COMPILER_LAUNCHER="$launcher"} >"$work/$name.configure.log" 2>&1 \
    || { cat "$work/$name.configure.log" >&2; fail "$name: cmake could not configure examples/downstream"; }
  cmake --build "$work/$name/build" >"$work/$name.build.log" 2>&1 \
    || { cat "$work/$name.build.log" >&2; fail "$name: examples/downstream did not build"; }
  run_downstream "$name" "$work/$name/build/downstream"
}

# run_downstream NAME PROGRAM: runs it, checks its output.
run_downstream() {
  local name=$1 program=$2
  "$program" "$work/$name.safetensors" >"$work/$name.out" 2>&1 \
    || { cat "$work/$name.out" >&2; fail "$name: the downstream program exited non-zero"; }
  cat "$work/$name.out"
  grep -qx "relgrad $version" "$work/$name.out" || fail "$name: no 'relgrad $version' line"
  grep -q '^loss fell from [0-9.]* to [0-9.]*$' "$work/$name.out" || fail "$name: no 'loss fell' line"
  grep -qx "checkpoint writer: relgrad $version" "$work/$name.out" || fail "$name: wrong checkpoint writer"
  grep -qx 'downstream: ok' "$work/$name.out" || fail "$name: no 'downstream: ok'"
}
