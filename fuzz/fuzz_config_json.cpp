// libFuzzer target: train/config/config.h load_config_json_text on arbitrary bytes (the JSON form of a run
// config, also what every checkpoint stores and `relgrad sample` / `eval` read back).
#include <cstdint>

#include "fuzz/config_checks.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static relgrad::fuzz::MemFile scratch;
  relgrad::RunConfig config = relgrad::RunConfig::defaults();
  try {
    relgrad::load_config_json_text(config, std::string(reinterpret_cast<const char*>(data), size), "fuzz");
  } catch (const relgrad::Error&) {
    return 0;
  }
  relgrad::fuzz::check_accepted_config(config, scratch);
  return 0;
}
