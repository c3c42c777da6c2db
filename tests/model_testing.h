// The network behind a run's model (train/trainer/run.h), for tests that call it directly, beside the
// RunModel interface they check it against. A model of the other kind throws std::bad_cast.
#pragma once
#include "train/trainer/run.h"

namespace relgrad::testing {

inline DecoderLM& decoder_lm_of(RunModel& model) { return *dynamic_cast<DecoderOnlyModel&>(model).network; }
inline EncoderDecoder& encoder_decoder_of(RunModel& model) {
  return *dynamic_cast<EncoderDecoderModel&>(model).network;
}

}  // namespace relgrad::testing
