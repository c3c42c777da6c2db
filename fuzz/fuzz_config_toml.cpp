// libFuzzer target: train/config/config.h load_config_file on arbitrary bytes (TOML, or JSON when the first
// non-blank byte is '{': the same sniffing `relgrad train --config` does), from an in-memory file.
#include <cstdint>

#include "fuzz/config_checks.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static relgrad::fuzz::MemFile input, scratch;
  relgrad::RunConfig config = relgrad::RunConfig::defaults();
  try {
    relgrad::load_config_file(config, input.set(data, size));
  } catch (const relgrad::Error&) {
    return 0;
  }
  relgrad::fuzz::check_accepted_config(config, scratch);
  return 0;
}
