// parallel_for(n, wanted, body): body(i) for every i in [0, n), shared out between the OpenMP threads
// (schedule static, or dynamic with parallel_for_dynamic) where `wanted` (the caller's test that the
// work pays for threads) and a team would have more than one thread; else a plain loop, in order, on
// the calling thread.
//
// Why not `#pragma omp parallel for if (wanted)`: libgomp starts a team even of one thread (the if
// false, or inside a batch shard's task, where each thread is held to one: core/parallel_tasks.h) and
// ends it with a futex system call, about a microsecond, more than a small op's whole forward; the
// main job's step entered some 600 such regions (docs/benchmarks.md, "Teams of one"). Either way
// each i runs body(i) once with the same arithmetic, so no result depends on which way it went.
// body must not throw (an exception cannot leave an OpenMP region).
#pragma once
#include <cstdint>
#ifdef _OPENMP
#include <omp.h>
#endif

namespace relgrad {

// Whether a parallel region entered here would run on more than one thread.
inline bool team_would_share(bool wanted = true) {
#ifdef _OPENMP
  return wanted && omp_get_max_threads() > 1 && omp_get_active_level() < omp_get_max_active_levels();
#else
  (void)wanted;
  return false;
#endif
}

template <class Body>
void parallel_for(int64_t n, bool wanted, const Body& body) {
  if (!team_would_share(wanted && n > 1)) {
    for (int64_t i = 0; i < n; ++i) body(i);
    return;
  }
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) body(i);
}

// The same, each thread taking the next i as it finishes one (pieces of uneven cost).
template <class Body>
void parallel_for_dynamic(int64_t n, bool wanted, const Body& body) {
  if (!team_would_share(wanted && n > 1)) {
    for (int64_t i = 0; i < n; ++i) body(i);
    return;
  }
#pragma omp parallel for schedule(dynamic, 1)
  for (int64_t i = 0; i < n; ++i) body(i);
}

}  // namespace relgrad
