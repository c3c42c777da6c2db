#include "train/config/sample_window.h"

#include "layers/schemes.h"
#include "train/config/source.h"

namespace relgrad {

DefaultWindow default_sample_window(const RunConfig& c) {
  if (c.model_type != ModelKind::DecoderOnly) return {0, "an encoder-decoder's target is not windowed"};
  const std::string& scheme = c.model.decoder_self.scheme;
  const SchemeEntry* entry = find_scheme(scheme);
  const bool absolute = c.model.absolute_position != AbsolutePositionKind::None;
  if (entry && entry->extrapolates && !absolute) return {0, scheme + " extrapolates, layers/schemes.cpp"};
  const InputLimit trained = data_source(c).trained_input(c);
  return {trained.tokens, trained.keys + " = " + std::to_string(trained.tokens) + "; " +
                              (absolute ? std::string("absolute positions") : scheme + " is not known to extrapolate")};
}

}  // namespace relgrad
