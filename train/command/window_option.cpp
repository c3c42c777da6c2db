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

SampleWindow sample_window(const RunConfig& c, const std::string& option) {
  if (c.model_type != ModelKind::DecoderOnly) {
    if (!option.empty() && option != "none")
      throw UsageError("[sample] --window " + option + " is for decoder-only models: an encoder-decoder's "
                       "target is not windowed");
    return {};
  }
  if (!option.empty()) {
    const int64_t n = parse_window(option, "sample");
    if (n == 0) return {0, "window none (--window none): every token is fed, the KV cache holds them all"};
    const std::string w = std::to_string(n);
    return {n, "window " + w + " tokens (--window " + w + "): KV cache while the sequence fits, then each step "
                   "recomputes the last " + w};
  }
  const DefaultWindow d = default_sample_window(c);
  const std::string w = std::to_string(d.tokens);
  if (d.tokens == 0)
    return {0, "window none (" + d.why + "): every token is fed, the KV cache holds them all; --window N sets a window"};
  return {d.tokens, "window " + w + " tokens (" + d.why + "): KV cache while the sequence fits, then each step "
                    "recomputes the last " + w + "; --window none feeds every token"};
}

}  // namespace relgrad::cli_detail
