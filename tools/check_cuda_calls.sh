#!/usr/bin/env bash
# Checks that no CUDA runtime/driver, cuBLAS or NCCL status is dropped (a dropped error surfaces
# later as wrong numbers or a crash elsewhere; docs/reliability.md):
#   - every call to cuda*/cu*/cublas*/nccl* (a name with an upper-case letter after the prefix) is
#     inside RG_CUDA_CHECK / RG_CUBLAS_CHECK / RG_NCCL_CHECK (cuda/common.cuh), or its result is used:
#     stored (`cudaError_t err = cudaMalloc(...)`, the allocator's out-of-memory retry), returned, or
#     tested in a condition. A call whose result is discarded (an expression statement, `(void)` too)
#     is an error, unless it is in a destructor (which must not throw) or its line says "best effort";
#   - every kernel launch (<<<...>>>) is followed, in the same block and before the next launch, by
#     RG_CUDA_CHECK_LAUNCH(...) or RG_CUDA_CHECK(cudaGetLastError(), ...).
# cudaGetLastError / cudaPeekAtLastError (clearing an error), ncclCommAbort (called while a failure is
# already being reported) and the error-string functions are exempt. Comments and string literals
# are ignored.
#
#   usage: tools/check_cuda_calls.sh [FILE|DIR ...]   (default: cuda/ core/ autograd/ layers/ train/)
#          tools/check_cuda_calls.sh --self-test      (proves it catches an unchecked call and launch)
# Exit 0 when clean; 1 with "file:line: ..." for each problem.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)

check() {
  local files=()
  local arg
  for arg in "$@"; do
    if [ -d "$arg" ]; then
      while IFS= read -r f; do files+=("$f"); done < <(find "$arg" -type f \( -name '*.cu' -o -name '*.cuh' -o -name '*.cpp' -o -name '*.h' \) | sort)
    else
      files+=("$arg")
    fi
  done
  [ ${#files[@]} -gt 0 ] || { echo "check_cuda_calls: no files to check" >&2; return 1; }
  perl -e '
    use strict; use warnings;
    my $bad = 0; my $calls = 0; my $launches = 0;
    my %exempt = map { $_ => 1 } qw(cudaGetLastError cudaPeekAtLastError cudaGetErrorString cudaGetErrorName
      cublasGetStatusString cublasGetStatusName ncclGetErrorString ncclGetLastError cuGetErrorString cuGetErrorName
      ncclCommAbort);
    for my $file (@ARGV) {
      open(my $fh, "<", $file) or die "check_cuda_calls: cannot read $file: $!\n";
      local $/; my $src = <$fh>; close $fh;
      my @lines = split /\n/, $src, -1;
      # Blank out comments and string/char literals (keeping newlines, so offsets map to lines).
      my $code = $src;
      $code =~ s{(//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|\x27(?:\\.|[^\x27\\\n])*\x27)}{ my $m = $1; $m =~ s/[^\n]/ /g; $m }gse;
      my $line_of = sub { my $pos = shift; return 1 + (substr($code, 0, $pos) =~ tr/\n//); };
      # Is `pos` inside a destructor body? Walks out through the enclosing braces.
      my $in_destructor = sub {
        my ($pos) = @_;
        my $depth = 0;
        for (my $i = $pos - 1; $i >= 0; $i--) {
          my $c = substr($code, $i, 1);
          if ($c eq "}") { $depth++; next; }
          next unless $c eq "{";
          if ($depth > 0) { $depth--; next; }
          return 1 if substr($code, 0, $i) =~ /~\s*\w+\s*\([^()]*\)\s*(?:override|noexcept|final|\s)*$/;
        }
        return 0;
      };
      my $report = sub { my ($pos, $msg) = @_; my $l = $line_of->($pos); print "$file:$l: $msg\n"; $bad++; };
      # Calls.
      while ($code =~ /\b((?:cuda|cublas|cublasLt|nccl|cu)[A-Z]\w*)\s*\(/g) {
        my ($name, $pos) = ($1, $-[1]);
        next if $exempt{$name};
        $calls++;
        # Walk back to the innermost unmatched "(" or to the start of the statement.
        my ($depth, $i) = (0, $pos - 1);
        my $verdict;
        for (; $i >= 0; $i--) {
          my $c = substr($code, $i, 1);
          if ($c eq ")" || $c eq "]") { $depth++; next; }
          if ($c eq "(" || $c eq "[") {
            if ($depth > 0) { $depth--; next; }
            my $before = substr($code, 0, $i);
            $before =~ /(\w+)\s*$/;
            my $callee = defined $1 ? $1 : "";
            $verdict = $callee =~ /^RG_\w*CHECK\w*$/ ? "ok" : "used";  # a macro, a condition or an argument
            last;
          }
          last if $depth == 0 && ($c eq ";" || $c eq "{" || $c eq "}");
        }
        next if defined $verdict;
        my $prefix = substr($code, $i + 1, $pos - $i - 1);
        $prefix =~ s/^\s+|\s+$//g;
        # Strip statement heads: else, do, "if (...)", "for (...)", "while (...)" (balanced parens).
        1 while $prefix =~ s/^(?:else|do)\b\s*// || $prefix =~ s/^(?:if|for|while)\s*(\((?:[^()]++|(?1))*\))\s*//;
        $prefix =~ s/^::\s*//;
        next unless $prefix eq "" || $prefix =~ /^\(\s*void\s*\)\s*(?:::)?$/;
        next if $lines[$line_of->($pos) - 1] =~ /best effort/i;
        next if $in_destructor->($pos);
        $report->($pos, "the status of $name() is discarded: check it (RG_CUDA_CHECK / RG_CUBLAS_CHECK in cuda/common.cuh)");
      }
      # Kernel launches.
      while ($code =~ /<<</g) {
        my $pos = $-[0];
        $launches++;
        my $end = index($code, ";", $pos);
        if ($end < 0) { $report->($pos, "kernel launch without a terminating ;"); next; }
        # The rest of the enclosing block, up to its closing brace or the next launch.
        my ($depth, $j) = (0, $end + 1);
        for (; $j < length($code); $j++) {
          my $c = substr($code, $j, 1);
          if ($c eq "{") { $depth++; } elsif ($c eq "}") { last if $depth == 0; $depth--; }
          last if substr($code, $j, 3) eq "<<<";
        }
        my $after = substr($code, $end + 1, $j - $end - 1);
        next if $after =~ /\bRG_CUDA_CHECK_LAUNCH\s*\(|\bRG_CUDA_CHECK\s*\(\s*cuda(?:GetLastError|PeekAtLastError)\s*\(/;
        $report->($pos, "kernel launch not followed by RG_CUDA_CHECK_LAUNCH(op) (launch errors would go unnoticed)");
      }
    }
    if ($bad) { print "check_cuda_calls: $bad unchecked CUDA call(s) or launch(es)\n"; exit 1; }
    print "check_cuda_calls: ok (", scalar(@ARGV), " files, $calls calls, $launches launches)\n";
  ' "${files[@]}"
}

self_test() {
  local tmp
  tmp=$(mktemp -d "${TMPDIR:-/tmp}/check_cuda_calls.XXXXXX")
  trap 'rm -rf "$tmp"' RETURN
  cat >"$tmp/good.cu" <<'EOF'
#include "cuda/common.cuh"
// cudaFree(p);  a comment is not a call
void f(float* d, const float* h, size_t n, cublasHandle_t b, int prev) {
  RG_CUDA_CHECK(cudaMemcpy(d, h, n, cudaMemcpyHostToDevice), "to(cuda)");
  RG_CUBLAS_CHECK(cublasSetMathMode(b, CUBLAS_DEFAULT_MATH),
                  "cublas");
  RG_CUDA_CHECK(
      cudaDeviceSynchronize(), "sync");
  cudaError_t err = cudaMalloc(&d, n);
  if (err == cudaErrorMemoryAllocation) cudaGetLastError();
  if (cudaMemGetInfo(&n, &n) != cudaSuccess) throw 1;
  const char* s = "cudaFree(d);";
  kernel<<<1, 32>>>(d, n);
  RG_CUDA_CHECK_LAUNCH("kernel");
  if (prev >= 0) cudaSetDevice(prev);  // best effort: destructors never throw
}
struct Guard {
  cudaStream_t s;
  ~Guard() {
    if (s) { cudaStreamDestroy(s); }
  }
  void reset() { RG_CUDA_CHECK(cudaStreamDestroy(s), "reset"); }
};
EOF
  printf '%s\n' '#include "cuda/common.cuh"' 'void g(void* p) {' '  int x = 0;' '  cudaFree(p);' '}' >"$tmp/unchecked_call.cu"
  printf '%s\n' 'void h(void* p) {' '  if (p) (void)cudaFree(p);' '}' >"$tmp/void_call.cuh"
  printf '%s\n' 'void k(float* d) {' '  kernel<<<1, 32>>>(d);' '}' >"$tmp/unchecked_launch.cu"
  printf '%s\n' 'void n(ncclComm_t c) {' '  ncclCommDestroy(c);' '}' >"$tmp/nccl.cpp"
  printf '%s\n' 'struct S {' '  ~S() {}' '  void close() {' '    if (s) cudaStreamDestroy(s);' '  }' '};' >"$tmp/not_destructor.cpp"
  local out fail=0
  out=$(check "$tmp/good.cu" 2>&1) || { echo "self-test: the correct file was refused:"; echo "$out"; fail=1; }
  for expect in "unchecked_call.cu:4:" "void_call.cuh:2:" "unchecked_launch.cu:2:" "nccl.cpp:2:" "not_destructor.cpp:4:"; do
    local file=${expect%%:*}
    if out=$(check "$tmp/$file" 2>&1); then
      echo "self-test: $file was accepted, but it has an unchecked call"; fail=1
    elif ! grep -q "$expect" <<<"$out"; then
      echo "self-test: $file was refused without naming $expect:"; echo "$out"; fail=1
    fi
  done
  [ $fail -eq 0 ] && echo "check_cuda_calls self-test: ok (1 correct file accepted, 5 unchecked ones refused with file:line)"
  return $fail
}

if [ "${1:-}" = "--self-test" ]; then
  self_test
elif [ $# -eq 0 ]; then
  check "$root/cuda" "$root/core" "$root/autograd" "$root/layers" "$root/train"
else
  check "$@"
fi
