// Small argument helpers the subcommands share (train/command/subcommands/).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace relgrad::cli_detail {

// Whether `text` holds nothing but blanks.
bool blank(const std::string& text);

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
