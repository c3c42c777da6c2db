#!/usr/bin/env bash
# Installs what relgrad needs on Debian 12 (as root), then configures and builds it in ./build.
# Used by both commands of the README's quick start and by .ci/run.
set -euo pipefail
cd "$(dirname "$0")/.."
packages="cmake g++ make libeigen3-dev doctest-dev"
missing=""
for p in $packages; do dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"; done
if [ -n "$missing" ]; then
  echo "relgrad setup: installing$missing"
  apt-get update
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $missing
fi
# CUDA is compiled when nvcc is present (RELGRAD_CUDA=AUTO); override with RELGRAD_CUDA=OFF|ON.
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DRELGRAD_CUDA="${RELGRAD_CUDA:-AUTO}"
cmake --build build -j "$(nproc)"
