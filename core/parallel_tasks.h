// parallel_tasks(n, threads, task): task(i, thread) for every i in [0, n), on up to `threads` OpenMP
// threads (thread in [0, threads)), each task on one thread with the ops it calls running on that
// thread alone. For work made of pieces each too small to share out inside: a step's batch shards
// and the held-out batches of an evaluation (train/trainer/batch_shards.cpp).
//
// Which thread runs which task depends on timing, so a task's result must not depend on its thread
// (each op's result does not: core/strided.h, core/cpu/matmul.cpp). A task's exception is rethrown
// once every task has run (the lowest task's). Thread-local state (grad mode, autocast, the default
// generator) is each thread's own: a task sets what it needs.
#pragma once
#include <algorithm>
#include <cstdint>
#include <exception>
#include <vector>
#ifdef _OPENMP
#include <omp.h>
#endif

namespace relgrad {

template <class Task>
void parallel_tasks(int64_t n, int threads, const Task& task) {
  std::vector<std::exception_ptr> errors(static_cast<size_t>(std::max<int64_t>(n, 0)));
  const int team = static_cast<int>(std::clamp<int64_t>(threads, 1, std::max<int64_t>(n, 1)));
  auto run = [&](int64_t i, int thread) {
    try {
      task(i, thread);
    } catch (...) {
      errors[static_cast<size_t>(i)] = std::current_exception();
    }
  };
#ifdef _OPENMP
  if (team > 1) {
    const int outer = omp_get_max_threads();
#pragma omp parallel num_threads(team)
    {
      omp_set_num_threads(1);  // a team inside each task would put two threads on a core
      const int thread = omp_get_thread_num();
#pragma omp for schedule(dynamic, 1)
      for (int64_t i = 0; i < n; ++i) run(i, thread);
    }
    omp_set_num_threads(outer);
  } else {
    for (int64_t i = 0; i < n; ++i) run(i, 0);
  }
#else
  for (int64_t i = 0; i < n; ++i) run(i, 0);
#endif
  for (const std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(e);
}

}  // namespace relgrad
