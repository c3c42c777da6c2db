// Regression cases for problems the fuzz targets found (fuzz/, docs/reliability.md). Each crashing
// or property-breaking input is also in fuzz/corpus/<target>/, which ctest replays in the fuzz build.
#include "file_testing.h"
#include "train/config.h"

using namespace relgrad;

TEST_CASE("fuzz regression: config_to_toml escapes DEL, so the effective config reads back") {
  // fuzz_config_json: a string value holding a raw 0x7F was written unescaped by config_to_toml, and
  // TOML refuses raw control characters, so the saved effective config could not be loaded again.
  // (fuzz/corpus/config_json/regression-del-in-string.json)
  relgrad::testing::TempDir dir;
  for (const char* value : {"runs/\\u007fx", "\\u007f", "a\\u0001b\\u001f\\u007f\\t\\\"\\\\c\\u00e9"}) {
    CAPTURE(value);
    RunConfig config = RunConfig::defaults();
    load_config_json_text(config, std::string(R"({"train": {"out_dir": ")") + value + "\"}}", "test");
    REQUIRE(config.train.out_dir.find('\x7f') != std::string::npos);
    const std::string path = dir.file("effective.toml");
    relgrad::testing::write_bytes(path, config_to_toml(config));
    RunConfig back = RunConfig::defaults();
    load_config_file(back, path);
    CHECK(back.train.out_dir == config.train.out_dir);
    CHECK(config_to_json(back) == config_to_json(config));
  }
}
