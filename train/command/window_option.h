// --window of relgrad sample and eval: how much of a sequence a decoder-only model reads at once.
// sample: the sliding window its generation uses (train/trainer/sampler.h), by default the training
// context wherever the scheme is not known to extrapolate (SchemeEntry::extrapolates, layers/schemes.h);
// eval: the strided score beside the whole-window one (train/trainer/strided_eval.h).
#pragma once
#include <cstdint>
#include <string>

#include "train/config/config.h"

namespace relgrad::cli_detail {

// "none" (0) or a positive number of tokens; anything else is a usage error naming --window.
int64_t parse_window(const std::string& text, const char* command);

// The window a decoder-only model samples under, and the line that says which rule ran and why.
struct SampleWindow {
  int64_t tokens = 0;  // SamplingOptions::window: 0 = every token
  std::string header;  // "window 64 tokens (…): …"
};
// `option`: what --window said ("" when it was not given). An encoder-decoder takes no window (a usage
// error when one is given); its header is empty.
SampleWindow sample_window(const RunConfig& c, const std::string& option);

}  // namespace relgrad::cli_detail
