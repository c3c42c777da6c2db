// core/parallel_tasks.h: every task runs once, on a thread of the team, with the ops inside on that
// thread alone; the lowest failing task's error comes back after all have run.
#include <omp.h>

#include <atomic>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/parallel_for.h"
#include "core/parallel_tasks.h"
#include "core/strided.h"
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

// core/parallel_for.h: a region is entered only where a team of more than one thread would run it;
// elsewhere (not wanted, one thread, inside a task) a plain loop in order, so no team of one is
// started (omp_get_level counts every region entered, a team of one included).
TEST_CASE("parallel_for: each i once, and a parallel region only where more than one thread runs it") {
  const int before = omp_get_max_threads();
  for (bool dynamic : {false, true}) {
    CAPTURE(dynamic);
    auto run = [&](int64_t n, bool wanted, std::vector<int>& runs, std::vector<int>& level,
                   std::vector<int64_t>& order) {
      runs.assign(static_cast<size_t>(n), 0);
      level.assign(static_cast<size_t>(n), -1);
      order.clear();
      auto body = [&](int64_t i) {
        ++runs[static_cast<size_t>(i)];
        level[static_cast<size_t>(i)] = omp_get_level();
#pragma omp critical
        order.push_back(i);
      };
      if (dynamic) parallel_for_dynamic(n, wanted, body);
      else parallel_for(n, wanted, body);
    };
    std::vector<int> runs, level;
    std::vector<int64_t> order, in_order(64);
    for (int64_t i = 0; i < 64; ++i) in_order[static_cast<size_t>(i)] = i;
    omp_set_num_threads(2);
    run(64, true, runs, level, order);  // shared: inside a region of two threads
    CHECK(runs == std::vector<int>(64, 1));
    CHECK(level == std::vector<int>(64, 1));
    run(64, false, runs, level, order);  // not wanted: on the caller's thread, in order, no region
    CHECK(runs == std::vector<int>(64, 1));
    CHECK(level == std::vector<int>(64, 0));
    CHECK(order == in_order);
    omp_set_num_threads(1);  // one thread: no team of one
    run(64, true, runs, level, order);
    CHECK(level == std::vector<int>(64, 0));
    CHECK(order == in_order);
    omp_set_num_threads(2);
    // Inside a batch shard's task (one thread each): the task's own region, none of its own.
    std::vector<std::vector<int>> task_levels(2);
    std::vector<std::vector<int64_t>> task_orders(2);
    parallel_tasks(2, 2, [&](int64_t t, int) {
      std::vector<int> l;
      std::vector<int64_t> o;
      auto body = [&](int64_t i) {
        l.push_back(omp_get_level());
        o.push_back(i);
      };
      if (dynamic) parallel_for_dynamic(64, true, body);
      else parallel_for(64, true, body);
      task_levels[static_cast<size_t>(t)] = l;
      task_orders[static_cast<size_t>(t)] = o;
    });
    for (int t = 0; t < 2; ++t) {
      CHECK(task_levels[static_cast<size_t>(t)] == std::vector<int>(64, 1));
      CHECK(task_orders[static_cast<size_t>(t)] == in_order);
    }
    run(0, true, runs, level, order);
    CHECK(order.empty());
  }
  omp_set_num_threads(before);
}

TEST_CASE("strided_for_each: a team only where more than one thread shares the rows") {
  const int before = omp_get_max_threads();
  const Shape shape{64, 1024};  // 65,536 elements: above kParallelGrain
  const Shape strides{2048, 1};  // rows apart, so they are not merged into one
  auto levels = [&] {
    std::vector<int> level(64, -1);  // per row
    cpu::strided_for_each<1>(shape, {&strides},
                             [&](const std::array<int64_t, 1>& off, int64_t, const std::array<int64_t, 1>&) {
                               level[static_cast<size_t>(off[0] / 2048)] = omp_get_level();
                             });
    return level;
  };
  omp_set_num_threads(2);
  CHECK(levels() == std::vector<int>(64, 1));
  omp_set_num_threads(1);
  CHECK(levels() == std::vector<int>(64, 0));
  omp_set_num_threads(2);
  std::vector<std::vector<int>> in_task(2);
  parallel_tasks(2, 2, [&](int64_t t, int) { in_task[static_cast<size_t>(t)] = levels(); });
  CHECK(in_task[0] == std::vector<int>(64, 1));
  CHECK(in_task[1] == std::vector<int>(64, 1));
  omp_set_num_threads(before);
}
