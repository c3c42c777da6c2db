#include "train/command/window_option.h"

#include <cctype>

#include "train/command/cli_commands.h"
#include "train/config/sample_window.h"

namespace relgrad::cli_detail {

int64_t parse_window(const std::string& text, const char* command) {
  if (text == "none") return 0;
  bool digits = !text.empty() && text.size() <= 9;  // at most 999,999,999 tokens: no overflow below
  for (char ch : text) digits = digits && std::isdigit(static_cast<unsigned char>(ch));
  const int64_t n = digits ? std::stoll(text) : 0;
  if (n < 1)
    throw UsageError(std::string("[") + command + "] --window must be a number of tokens >= 1 or none, got '" +
                     text + "'");
  return n;
}

namespace {

// The sample's header line: the window, why it is that, and what the other rule would take.
SampleWindow described(int64_t tokens, const std::string& why, const std::string& other) {
  if (tokens == 0) return {0, "window none (" + why + "): every token is fed, the KV cache holds them all" + other};
  const std::string w = std::to_string(tokens);
  return {tokens, "window " + w + " tokens (" + why + "): KV cache while the sequence fits, then each step " +
                      "recomputes the last " + w + other};
}

}  // namespace

SampleWindow sample_window(const RunConfig& c, const std::string& option) {
  if (c.model_type != ModelKind::DecoderOnly) {
    if (!option.empty() && option != "none")
      throw UsageError("[sample] --window " + option + " is for decoder-only models: an encoder-decoder's "
                       "target is not windowed");
    return {};
  }
  if (!option.empty()) {
    const int64_t n = parse_window(option, "sample");
    return described(n, n == 0 ? "--window none" : "--window " + std::to_string(n), "");
  }
  const DefaultWindow d = default_sample_window(c);
  return described(d.tokens, d.why, d.tokens == 0 ? "; --window N sets a window" : "; --window none feeds every token");
}

}  // namespace relgrad::cli_detail
