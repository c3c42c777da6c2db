// The sliding window a decoder-only run samples under by default (SamplingOptions::window,
// train/trainer/sampler.h), for `relgrad sample` and the samples `relgrad train` prints at its end:
// the training context (the source's trained_input: data.context, or a synthetic task's data.max_len)
// unless the decoder's scheme is registered as extrapolating (SchemeEntry::extrapolates,
// layers/schemes.h) and the model has no absolute positions; then none (every token is fed).
#pragma once
#include <cstdint>
#include <string>

#include "train/config/config.h"

namespace relgrad {

struct DefaultWindow {
  int64_t tokens = 0;  // 0: none; always 0 for an encoder-decoder (its target is not windowed)
  std::string why;     // "data.context = 64; rope is not known to extrapolate" or "sandwich extrapolates, …"
};
DefaultWindow default_sample_window(const RunConfig& c);

}  // namespace relgrad
