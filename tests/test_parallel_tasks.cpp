// core/parallel_tasks.h: every task runs once, on a thread of the team, with the ops inside on that
// thread alone; the lowest failing task's error comes back after all have run.
#include <omp.h>

#include <atomic>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/parallel_tasks.h"
#include "testing.h"

using namespace relgrad;

TEST_CASE("parallel_tasks: each task once, on a thread of the team, the ops inside on one thread") {
  for (int threads : {1, 2, 3}) {
    CAPTURE(threads);
    std::vector<int> runs(50, 0), thread_of(50, -1), inner(50, 0);
    parallel_tasks(50, threads, [&](int64_t i, int thread) {
      ++runs[i];
      thread_of[i] = thread;
      inner[i] = omp_get_max_threads();
    });
    for (int i = 0; i < 50; ++i) {
      CHECK(runs[i] == 1);
      CHECK(thread_of[i] >= 0);
      CHECK(thread_of[i] < threads);
      if (threads > 1) CHECK(inner[i] == 1);  // a team inside a task would oversubscribe the cores
    }
  }
  // The caller's thread count is as it was.
  const int before = omp_get_max_threads();
  parallel_tasks(4, 2, [](int64_t, int) {});
  CHECK(omp_get_max_threads() == before);
  // One thread: in order, on the caller's thread.
  std::vector<int64_t> order;
  parallel_tasks(5, 1, [&](int64_t i, int thread) {
    CHECK(thread == 0);
    order.push_back(i);
  });
  CHECK(order == std::vector<int64_t>{0, 1, 2, 3, 4});
  parallel_tasks(0, 2, [](int64_t, int) { FAIL("no task to run"); });
}

TEST_CASE("parallel_tasks: every task runs, then the lowest failing task's error is thrown") {
  for (int threads : {1, 2}) {
    CAPTURE(threads);
    std::atomic<int> ran{0};
    auto failing = [&] {
      parallel_tasks(20, threads, [&](int64_t i, int) {
        ++ran;
        if (i == 7 || i == 13) throw std::runtime_error("task " + std::to_string(i) + " failed");
      });
    };
    CHECK_THROWS_WITH_AS(failing(), "task 7 failed", std::runtime_error);
    CHECK(ran == 20);
  }
}
