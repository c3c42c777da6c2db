#include "core/rng.h"

namespace relgrad {

namespace {
thread_local Generator* this_thread_generator = nullptr;  // DefaultGeneratorGuard's, or none
}  // namespace

Generator& default_generator() {
  static Generator generator(0);
  return this_thread_generator ? *this_thread_generator : generator;
}

DefaultGeneratorGuard::DefaultGeneratorGuard(Generator& generator) : previous_(this_thread_generator) {
  this_thread_generator = &generator;
}
DefaultGeneratorGuard::~DefaultGeneratorGuard() { this_thread_generator = previous_; }

void manual_seed(uint64_t seed) { default_generator().manual_seed(seed); }

}  // namespace relgrad
