"""Which GEMM a PyTorch process runs on this CPU, for bench/run_train.sh's machine block.

Prints one line: the torch version, its BLAS (torch.__config__.show()), and the kernels in use:
  - OpenBLAS (Debian's PyTorch 1.13): openblas_get_config() and openblas_get_corename() of the library
    the process loaded, after a product, so OPENBLAS_CORETYPE in the environment shows (Haswell
    forced, or the CPU's own); another BLAS is named by its file (the reference BLAS: ~20x slower);
  - MKL (pip's PyTorch 2.x): the code path MKL_VERBOSE=1 names for an sgemm ("Intel(R) Advanced Vector
    Extensions 512 ..." or the generic "Intel(R) Architecture processors" path it takes on AMD);
  - oneDNN: the ISA ONEDNN_VERBOSE=1 names for a convolution (torch.compile's packed linears use it).
The verbose lines are read from a child process started with those variables, so the caller's
environment is otherwise what the benchmark runs use. Python's standard library and torch only.

    env -u OPENBLAS_CORETYPE /usr/bin/python3 bench/blas_info.py
"""
import os
import re
import subprocess
import sys

PROBE = r"""
import torch
torch.set_num_threads(1)
a = torch.randn(256, 256)
(a @ a).sum().item()
x = torch.randn(1, 8, 16, 16)
torch.nn.functional.conv2d(x, torch.randn(8, 8, 3, 3)).sum().item()
"""


def blas_library():
    """The BLAS library this process has mapped: OpenBLAS's configuration and the core it picked
    (openblas_get_corename), or the file of another BLAS (Debian's reference libblas when
    libopenblas0-pthread is missing), or None."""
    import ctypes
    import torch
    a = torch.randn(64, 64)
    (a @ a).sum().item()  # loads and initialises the BLAS
    try:
        maps = open("/proc/self/maps").read()
    except OSError:
        return None
    paths = sorted(set(re.findall(r"(/\S*blas\S*\.so\S*)", maps)))
    for path in paths:
        try:
            lib = ctypes.CDLL(path)
            for fn in ("openblas_get_corename", "openblas_get_config"):
                getattr(lib, fn).restype = ctypes.c_char_p
            return "%s, core: %s" % (lib.openblas_get_config().decode(), lib.openblas_get_corename().decode())
        except (OSError, AttributeError):
            continue
    return "library " + ", ".join(paths) if paths else None


def verbose_lines():
    env = dict(os.environ, MKL_VERBOSE="1", ONEDNN_VERBOSE="1", DNNL_VERBOSE="1")
    proc = subprocess.run([sys.executable, "-c", PROBE], env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, universal_newlines=True)
    mkl = onednn = None
    for line in proc.stdout.splitlines():
        if mkl is None and line.startswith("MKL_VERBOSE") and "Intel(R)" in line:
            mkl = line[len("MKL_VERBOSE"):].strip()
        m = re.search(r"(?:onednn|dnnl)_verbose,.*info,cpu,isa:(.*)", line)
        if onednn is None and m:
            onednn = m.group(1).strip()
    return mkl, onednn


def main():
    import torch
    config = torch.__config__.show()
    blas = re.search(r"BLAS_INFO=([^,\s]+)", config)
    parts = ["torch %s" % torch.__version__, "BLAS %s" % (blas.group(1) if blas else "unknown")]
    library = blas_library()
    if library:
        parts.append(library)
    mkl, onednn = verbose_lines()
    if mkl:
        parts.append("MKL: " + mkl)
    if onednn:
        parts.append("oneDNN ISA: " + onednn)
    print("; ".join(parts))


if __name__ == "__main__":
    main()
