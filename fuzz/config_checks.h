// The part of the config fuzz targets after parsing (fuzz_config_toml.cpp, fuzz_config_json.cpp):
// whatever the reader accepted must survive validate() (an Error or nothing), and the effective
// config printed as JSON (stored in checkpoints) and as TOML (printed and saved by `relgrad train`)
// must read back to the same config.
#pragma once
#include "fuzz/fuzz_common.h"
#include "train/config/config.h"

namespace relgrad::fuzz {

inline void check_accepted_config(const RunConfig& config, MemFile& scratch) {
  try {
    config.validate();
  } catch (const Error&) {
  }
  const std::string json = config_to_json(config);
  try {
    RunConfig back = RunConfig::defaults();
    load_config_json_text(back, json, "config_to_json");
    if (config_to_json(back) != json) finding("config_to_json does not read back to the same config:\n" + json);
  } catch (const Error& e) {
    finding(std::string("config_to_json output refused: ") + e.what() + "\n" + json);
  }
  const std::string toml = config_to_toml(config);
  try {
    RunConfig back = RunConfig::defaults();
    load_config_file(back, scratch.set(toml));
    if (config_to_json(back) != json) finding("config_to_toml does not read back to the same config:\n" + toml);
  } catch (const Error& e) {
    finding(std::string("config_to_toml output refused: ") + e.what() + "\n" + toml);
  }
}

}  // namespace relgrad::fuzz
