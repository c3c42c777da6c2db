// Regression cases for problems the fuzz targets found (fuzz/, docs/reliability.md). Each crashing
// or property-breaking input is also in fuzz/corpus/<target>/, which ctest replays in the fuzz build.
#include "file_testing.h"
#include "core/safetensors.h"
#include "train/config/config.h"

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

TEST_CASE("fuzz regression: a tensor with no elements is contiguous, whatever its shape") {
  // fuzz_safetensors: a file with a (3, 0) tensor loaded as a tensor that said it was not
  // contiguous: contiguous_strides() counts a 0 dim as 1, is_contiguous() multiplied by it.
  // (fuzz/corpus/safetensors/regression-empty-3x0-contiguous.safetensors)
  for (const Shape& shape : {Shape{3, 0}, Shape{0}, Shape{0, 3}, Shape{2, 0, 4}, Shape{4, 1, 0, 1}}) {
    CAPTURE(shape_str(shape));
    CHECK(empty(shape).is_contiguous());
    CHECK(empty(shape).contiguous().is_contiguous());
  }
  // A non-contiguous view with no elements is contiguous too (no element is out of place).
  CHECK(empty({3, 0}).transpose(0, 1).is_contiguous());
  relgrad::testing::TempDir dir;
  save_safetensors(dir.file("t.safetensors"), {{"empty", zeros({3, 0})}, {"x", ones({2})}});
  SafetensorsFile back = load_safetensors(dir.file("t.safetensors"));
  CHECK(back.tensors.at("empty").shape() == Shape{3, 0});
  CHECK(back.tensors.at("empty").is_contiguous());
}
