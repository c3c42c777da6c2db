#!/bin/sh
# The one-way house: train -> layers -> autograd -> core/backend -> core/cpu -> core -> cuda -> core/base.
# A folder may include its own headers and those of the folders after it, never before it.
# cuda/ sees only core/base/ (error, dtype, functors, philox), which include nothing else of relgrad.
# core/backend/ is the one place above cuda/ that picks a device: it includes core/cpu/ and cuda/.
# autograd/ never sees a device: it calls core/backend/ and includes neither cuda/ nor core/cpu/.
root="${1:-.}"
fail=0
check() {  # check FOLDER FORBIDDEN_PATTERN...
  folder=$1; shift
  for pattern in "$@"; do
    hits=$(grep -rnE "#include \"($pattern)/" "$root/$folder" 2>/dev/null)
    if [ -n "$hits" ]; then echo "layering violation: $folder/ includes $pattern/:"; echo "$hits"; fail=1; fi
  done
}
check cuda 'autograd|layers|train'
if grep -rnE '#include "core/' "$root/cuda" | grep -v '"core/base/'; then echo "cuda/ includes core/ outside core/base/"; fail=1; fi
check core 'autograd|layers|train'
# core/*.cpp and core/cpu/ sit under the backend: they never include it.
if grep -nE '#include "core/backend/' "$root"/core/*.h "$root"/core/*.cpp "$root"/core/cpu/* 2>/dev/null; then
  echo "core/ or core/cpu/ includes core/backend/"; fail=1
fi
# core/*.h and core/*.cpp sit under core/cpu/ (relgrad_cpu links relgrad_core): they never include it.
if grep -nE '#include "core/cpu/' "$root"/core/*.h "$root"/core/*.cpp 2>/dev/null; then
  echo "core/ includes core/cpu/"; fail=1
fi
check autograd 'layers|train|cuda|core/cpu'
check layers 'train'
# train/ in wings (docs/design.md, "Training"): optim, data <- music; optim, data <- trainer <- plot
# (the training log's columns); trainer, music <- config <- instruments (with plot) <- command.
check train/plot 'train/(optim|data|music|config|instruments|command)'
check train/optim 'train/(plot|data|music|trainer|config|instruments|command)'
check train/data 'train/(plot|optim|music|trainer|config|instruments|command)'
check train/music 'train/(plot|optim|trainer|config|instruments|command)'
check train/trainer 'train/(plot|music|config|instruments|command)'
check train/config 'train/(plot|instruments|command)'
check train/instruments 'train/command'
# core/base headers may include only each other.
if grep -nE '#include "' "$root"/core/base/*.h | grep -v '"core/base/'; then echo "core/base includes outside core/base"; fail=1; fi
[ $fail -eq 0 ] && echo "layering ok"
exit $fail
