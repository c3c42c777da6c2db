// Internal to the `relgrad` command: what its subcommands (train/command/subcommands/) share.
#pragma once
#include <cstdint>
#include <string>

#include "core/base/error.h"
#include "core/device.h"

namespace relgrad::cli_detail {

// A usage error: exit code 2 (a runtime Error gives 1).
struct UsageError : Error {
  using Error::Error;
};

bool blank(const std::string& text);             // whether `text` holds nothing but blanks
std::string fixed(double v, int digits);         // v with `digits` decimals
// --device: where a checkpoint's model runs (a usage error, exit 2, when CUDA is asked for but absent).
Device device_option(const std::string& name);
// --window of relgrad sample and eval (how much of a sequence a decoder-only model reads at once):
// "none" (0) or a positive number of tokens; anything else is a usage error naming --window.
int64_t parse_window(const std::string& text, const char* command);

// sample / eval --tf32: TF32 GEMMs for the command (backend::set_allow_tf32), the process's setting after.
class Tf32Scope {
 public:
  explicit Tf32Scope(bool on);
  ~Tf32Scope();
  Tf32Scope(const Tf32Scope&) = delete;
  Tf32Scope& operator=(const Tf32Scope&) = delete;

 private:
  bool before_;
};

}  // namespace relgrad::cli_detail
