// Keeps the user docs true: every config key the program accepts is documented in docs/cli.md with
// its current default, and the shipped default config is the built-in one.
#include <doctest/doctest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "train/command/config.h"

namespace {
std::string repo_file(const std::string& relative) {
  std::string golden = RELGRAD_GOLDEN_DIR;  // <repo>/tests/golden
  std::ifstream in(golden + "/../../" + relative);
  REQUIRE_MESSAGE(in.good(), "cannot read ", relative);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}
}  // namespace

TEST_CASE("docs: docs/cli.md lists every config key with its type, default and meaning") {
  const std::string doc = repo_file("docs/cli.md");
  std::istringstream help(relgrad::config_help());
  std::string line;
  int keys = 0;
  while (std::getline(help, line)) {
    ++keys;
    CHECK_MESSAGE(doc.find(line) != std::string::npos, "docs/cli.md lacks or has a stale line for: ", line);
  }
  CHECK(keys > 50);
}

TEST_CASE("docs: configs/default.toml is the built-in default run") {
  // Start from the plain struct defaults, so every value must come from the file or agree anyway.
  relgrad::RunConfig plain;
  relgrad::load_config_file(plain, std::string(RELGRAD_GOLDEN_DIR) + "/../../configs/default.toml");
  CHECK(relgrad::config_to_json(plain) == relgrad::config_to_json(relgrad::RunConfig::defaults()));
}
