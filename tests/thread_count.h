// ThreadCount: the tests' way to run a scope with a given number of OpenMP threads (the thread-count
// tests of tests/test_fused_ops.cpp, tests/test_ops_norm.cpp and the flash tests).
#pragma once
#ifdef _OPENMP
#include <omp.h>
#endif

namespace relgrad::testing {

// Runs with `n` OpenMP threads until the end of the scope.
struct ThreadCount {
#ifdef _OPENMP
  int saved = omp_get_max_threads();
  explicit ThreadCount(int n) { omp_set_num_threads(n); }
  ~ThreadCount() { omp_set_num_threads(saved); }
#else
  explicit ThreadCount(int) {}
#endif
};

}  // namespace relgrad::testing
