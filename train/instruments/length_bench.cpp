#include "train/instruments/length_bench.h"

#include <ostream>

#include "core/base/error.h"

namespace relgrad {

int run_length_bench(const LengthBenchOptions& options, std::ostream& out) {
  (void)options;
  (void)out;
  RG_CHECK(false, "length-bench", "not built yet");
  return 1;
}

}  // namespace relgrad
