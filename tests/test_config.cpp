// The run configuration (train/config/config.h): TOML and JSON files (nested tables → dotted keys),
// --key=value overrides on top, every key type; errors that name the key (and the file); round trips
// through config_to_json / config_to_toml; the shipped configs/*.toml; config_help() covering every key.
#include <filesystem>
#include <limits>
#include <regex>
#include <set>
#include <sstream>

#include "core/device.h"
#include "file_testing.h"
#include "testing.h"
#include "train/config/config.h"

using namespace relgrad;
using namespace relgrad::testing;
namespace fs = std::filesystem;

namespace {

// The repository root, found from the golden-file directory the build passes in (tests/golden).
std::string repo_root() { return fs::path(RELGRAD_GOLDEN_DIR).parent_path().parent_path().string(); }

std::string write(const TempDir& dir, const std::string& name, const std::string& text) {
  std::string path = dir.file(name);
  write_bytes(path, text);
  return path;
}

RunConfig loaded(const std::string& path, RunConfig base = RunConfig::defaults()) {
  load_config_file(base, path);
  return base;
}

// The keys that config_to_toml prints, in order ("model.d_model", ...).
std::vector<std::string> toml_keys(const std::string& toml) {
  std::vector<std::string> keys;
  std::istringstream in(toml);
  std::string line, section;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    if (line[0] == '[') {
      section = line.substr(1, line.find(']') - 1);
      continue;
    }
    keys.push_back(section + "." + line.substr(0, line.find(" = ")));
  }
  return keys;
}

// key → its value text in config_to_toml's output.
std::map<std::string, std::string> toml_values(const std::string& toml) {
  std::map<std::string, std::string> values;
  std::istringstream in(toml);
  std::string line, section;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    if (line[0] == '[') {
      section = line.substr(1, line.find(']') - 1);
      continue;
    }
    size_t eq = line.find(" = ");
    values[section + "." + line.substr(0, eq)] = line.substr(eq + 3);
  }
  return values;
}

}  // namespace

// ---- loading ---------------------------------------------------------------------------------------

TEST_CASE("config: a TOML file sets nested keys of every type, overrides apply on top") {
  TempDir dir;
  std::string path = write(dir, "run.toml", R"(# a comment
[model]
type = "decoder-only"
d_model = 48
pre_norm = false
dropout = 0            # an integer literal for a number key
norm_eps = 1e-6
cross_alignment = "scaled"
activation = "relu"
encoder_self.scheme = "shaw"   # a dotted key inside a table

[model.cross]
scheme = "huang"
out_of_range = "clip"
max_length = 7

[model.decoder_self]
out_of_range = "error"
rope_base = 500.5

[data]
seed = 9223372036854775807
task = "sort"

[optim]
lr = 0.25
nesterov = true

[train]
out_dir = "somewhere/else"
target_accuracy = 1
)");
  RunConfig c = loaded(path);
  CHECK(c.model_type == ModelKind::DecoderOnly);
  CHECK(c.model_type == ModelKind::DecoderOnly);
  CHECK(c.model.d_model == 48);
  CHECK(c.model.pre_norm == false);
  CHECK(c.model.dropout == 0.0);
  CHECK(c.model.norm_eps == 1e-6);
  CHECK(c.model.cross_alignment == CrossAlignment::Scaled);
  CHECK(c.model.activation == Activation::Relu);
  CHECK(c.model.encoder_self.scheme == "shaw");
  CHECK(c.model.cross.scheme == "huang");
  CHECK(c.model.cross.out_of_range == OutOfRange::Clip);
  CHECK(c.model.cross.max_length == 7);
  CHECK(c.model.decoder_self.out_of_range == OutOfRange::Error);
  CHECK(c.model.encoder_self.out_of_range == OutOfRange::Zero);  // untouched
  CHECK(c.model.decoder_self.rope_base == 500.5);
  CHECK(c.data.seed == uint64_t(9223372036854775807ULL));
  CHECK(c.data.task == TaskKind::Sort);
  CHECK(c.optim.lr == 0.25);
  CHECK(c.optim.nesterov == true);
  CHECK(c.train.out_dir == "somewhere/else");
  CHECK(c.train.target_accuracy == 1.0);
  // What the file does not mention keeps the value it had.
  CHECK(c.model.n_heads == RunConfig::defaults().model.n_heads);
  CHECK(c.data.max_len == RunConfig::defaults().data.max_len);

  // Overrides, with and without the leading "--", on top of the file.
  apply_overrides(c, {"--model.d_model=24", "optim.lr=0.5", "--model.pre_norm=true", "--data.seed=9223372036854775807",
                      "--model.cross_alignment=right", "--model.cross.out_of_range=zero", "--train.out_dir=a=b",
                      "--model.tie_weights=0", "--optim.nesterov=1", "--model.dropout=0.125", "--optim.warmup_steps=-3"});
  CHECK(c.model.d_model == 24);
  CHECK(c.optim.lr == 0.5);
  CHECK(c.model.pre_norm == true);
  CHECK(c.data.seed == static_cast<uint64_t>(std::numeric_limits<int64_t>::max()));
  CHECK(c.model.cross_alignment == CrossAlignment::Right);
  CHECK(c.model.cross.out_of_range == OutOfRange::Zero);
  CHECK(c.train.out_dir == "a=b");  // only the first '=' separates
  CHECK(c.model.tie_weights == false);
  CHECK(c.optim.nesterov == true);
  CHECK(c.model.dropout == 0.125);
  CHECK(c.optim.warmup_steps == -3);  // the type is right; the range is validate()'s business
  set_config_value(c, "model.cross_alignment", "left");
  CHECK(c.model.cross_alignment == CrossAlignment::Left);
}

TEST_CASE("config: a JSON file sets nested keys of every type") {
  TempDir dir;
  const std::string json = R"({
    "model": {"type": "encoder-decoder", "d_model": 40, "dropout": 1, "norm_eps": 0.1, "tie_weights": false,
              "cross_alignment": "right", "encoder_self": {"out_of_range": "clip", "per_head": true},
              "cross": {"scheme": "seed", "max_length": 9}},
    "data": {"seed": 9223372036854775807, "text_path": "x \"y\".txt", "val_fraction": 0.3333333333333333},
    "optim": {"name": "sgd", "momentum": 0.9},
    "train": {"steps": 77, "seed": 5}
  })";
  for (const std::string& name : {std::string("run.json"), std::string("run.conf")}) {  // by extension or by '{'
    CAPTURE(name);
    std::string path = write(dir, name, "\n  " + json);
    RunConfig c = loaded(path);
    CHECK(c.model_type == ModelKind::EncoderDecoder);
    CHECK(c.model.d_model == 40);
    CHECK(c.model.dropout == 1.0);
    CHECK(c.model.norm_eps == 0.1);
    CHECK(c.model.tie_weights == false);
    CHECK(c.model.cross_alignment == CrossAlignment::Right);
    CHECK(c.model.encoder_self.out_of_range == OutOfRange::Clip);
    CHECK(c.model.encoder_self.per_head == true);
    CHECK(c.model.cross.scheme == "seed");
    CHECK(c.model.cross.max_length == 9);
    CHECK(c.data.seed == static_cast<uint64_t>(std::numeric_limits<int64_t>::max()));
    CHECK(c.data.text_path == "x \"y\".txt");
    CHECK(c.data.val_fraction == 1.0 / 3.0);
    CHECK(c.optim.name == OptimizerKind::SGD);
    CHECK(c.optim.momentum == 0.9);
    CHECK(c.train.steps == 77);
    CHECK(c.train.seed == 5u);
    apply_overrides(c, {"--train.steps=3"});
    CHECK(c.train.steps == 3);
  }
  RunConfig c = RunConfig::defaults();
  load_config_json_text(c, R"({"model": {"n_heads": 8}})", "inline");
  CHECK(c.model.n_heads == 8);
}

// ---- errors ------------------------------------------------------------------------------------------

TEST_CASE("config: unknown keys are named, with the nearest key as a hint, and the file") {
  RunConfig c = RunConfig::defaults();
  check_throws_with([&] { apply_overrides(c, {"--model.dmodel=16"}); }, "unknown key 'model.dmodel'");
  check_throws_with([&] { apply_overrides(c, {"--model.dmodel=16"}); }, "did you mean 'model.d_model'?");
  check_throws_with([&] { set_config_value(c, "optim.lr_max", "1"); }, "did you mean 'optim.lr'");
  // Something far from every key gets no misleading hint.
  try {
    set_config_value(c, "completely.unrelated.thing.here", "1");
    FAIL("no error");
  } catch (const Error& e) {
    CHECK(std::string(e.what()).find("unknown key 'completely.unrelated.thing.here'") != std::string::npos);
    CHECK(std::string(e.what()).find("did you mean") == std::string::npos);
  }
  // A table name is not a key; neither is a key below a leaf.
  check_throws_with([&] { set_config_value(c, "model", "1"); }, "unknown key 'model'");
  check_throws_with([&] { set_config_value(c, "model.d_model.x", "1"); }, "unknown key 'model.d_model.x'");

  TempDir dir;
  std::string toml = write(dir, "typo.toml", "[modle]\nd_model = 16\n");
  check_throws_with([&] { loaded(toml); }, toml + ": unknown key 'modle.d_model' (did you mean 'model.d_model'?)");
  std::string json = write(dir, "typo.json", R"({"model": {"nheads": 2}})");
  check_throws_with([&] { loaded(json); }, json + ": unknown key 'model.nheads' (did you mean 'model.n_heads'?)");
}

TEST_CASE("config: a value of the wrong type names the key and the value") {
  RunConfig c = RunConfig::defaults();
  // Overrides: the text must parse as the key's type.
  check_throws_with([&] { set_config_value(c, "model.d_model", "abc"); }, "model.d_model: expected an integer, got 'abc'");
  check_throws_with([&] { set_config_value(c, "model.d_model", "16.5"); }, "model.d_model: expected an integer, got '16.5'");
  check_throws_with([&] { set_config_value(c, "model.d_model", ""); }, "model.d_model: expected an integer");
  check_throws_with([&] { set_config_value(c, "model.d_model", "99999999999999999999"); }, "model.d_model");
  check_throws_with([&] { set_config_value(c, "data.seed", "-1"); }, "data.seed: expected a non-negative integer, got '-1'");
  check_throws_with([&] { set_config_value(c, "data.seed", "18446744073709551616"); }, "data.seed");
  check_throws_with([&] { set_config_value(c, "optim.lr", "fast"); }, "optim.lr: expected a finite number, got 'fast'");
  check_throws_with([&] { set_config_value(c, "optim.lr", "nan"); }, "optim.lr: expected a finite number");
  check_throws_with([&] { set_config_value(c, "optim.lr", "inf"); }, "optim.lr: expected a finite number");
  check_throws_with([&] { set_config_value(c, "optim.lr", "1e999"); }, "optim.lr");
  check_throws_with([&] { set_config_value(c, "model.pre_norm", "yes"); }, "model.pre_norm: expected true or false, got 'yes'");
  check_throws_with([&] { set_config_value(c, "model.pre_norm", "2"); }, "model.pre_norm: expected true or false");
  check_throws_with([&] { set_config_value(c, "train.shard_by_length", "maybe"); },
                    "train.shard_by_length: expected true or false, got 'maybe'");
  CHECK(config_to_json(c) == config_to_json(RunConfig::defaults()));  // nothing was set by a failed call

  TempDir dir;
  struct Case { const char* text; const char* expected; };
  // TOML: the value's TOML type is checked against the key's.
  for (Case k : {Case{"[model]\nd_model = \"16\"\n", "model.d_model: expected a"},   // string for int
                 Case{"[model]\nd_model = 16.0\n", "model.d_model: expected an integer, got '16.0'"},  // float for int
                 Case{"[model]\npre_norm = 1\n", "model.pre_norm: expected a boolean, got '1'"},      // int for bool
                 Case{"[model]\ndropout = true\n", "model.dropout: expected a number"},              // bool for double
                 Case{"[model]\ntype = 3\n", "model.type: expected a string"},                       // int for string
                 Case{"[model]\nd_model = [16]\n", "model.d_model: expected a"},                     // array
                 Case{"[data]\nseed = -1\n", "data.seed: expected a non-negative integer, got '-1'"}}) {
    CAPTURE(k.text);
    std::string path = write(dir, "bad.toml", k.text);
    check_throws_with([&] { loaded(path); }, path + ": " + k.expected);
  }
  // JSON likewise.
  for (Case k : {Case{R"({"model": {"d_model": "16"}})", "model.d_model: expected an integer, got the string \"16\""},
                 Case{R"({"model": {"d_model": 16.5}})", "model.d_model: expected an integer, got '16.5'"},
                 Case{R"({"model": {"d_model": 16.0}})", "model.d_model: expected an integer"},
                 Case{R"({"model": {"pre_norm": 1}})", "model.pre_norm: expected true or false, got '1'"},
                 Case{R"({"model": {"dropout": "0.1"}})", "model.dropout: expected a number"},
                 Case{R"({"model": {"type": null}})", "model.type: expected a string"},
                 Case{R"({"data": {"seed": -1}})", "data.seed: expected a non-negative integer, got '-1'"}}) {
    CAPTURE(k.text);
    std::string path = write(dir, "bad.json", k.text);
    check_throws_with([&] { loaded(path); }, path + ": " + k.expected);
  }
}

TEST_CASE("config: a word outside a key's choices lists the valid ones") {
  RunConfig c = RunConfig::defaults();
  check_throws_with([&] { set_config_value(c, "model.cross_alignment", "middle"); },
                    "model.cross_alignment: expected one of left, right, scaled, explicit, got 'middle'");
  check_throws_with([&] { set_config_value(c, "model.cross.out_of_range", "wrap"); },
                    "model.cross.out_of_range: expected one of zero, clip, error, got 'wrap'");
  check_throws_with([&] { set_config_value(c, "optim.name", "Adam"); },
                    "optim.name: expected one of sgd, adam, adamw, got 'Adam'");
  check_throws_with([&] { set_config_value(c, "model.type", "decoder_only"); }, "encoder-decoder, decoder-only");
  check_throws_with([&] { set_config_value(c, "model.encoder_self.scheme", "xl"); }, "transformer_xl");
  CHECK(c.model.cross_alignment == CrossAlignment::Left);
  CHECK(c.model.cross.out_of_range == OutOfRange::Zero);
  TempDir dir;
  std::string path = write(dir, "bad.toml", "[train]\nlog_format = \"xml\"\n");
  check_throws_with([&] { loaded(path); }, path + ": train.log_format: expected one of jsonl, csv, got 'xml'");
}

TEST_CASE("config: validate() rejects out-of-range and inconsistent values") {
  CHECK_NOTHROW(RunConfig::defaults().validate());
  auto fails = [](std::vector<std::string> overrides, const std::string& expected) {
    CAPTURE(overrides.front());
    RunConfig c = RunConfig::defaults();
    apply_overrides(c, overrides);
    check_throws_with([&] { c.validate(); }, expected);
  };
  fails({"--model.d_model=30"}, "d_model 30 must be divisible by n_heads 4");
  fails({"--optim.warmup_steps=20", "--train.steps=10"}, "optim.warmup_steps must be in [0, train.steps = 10], got 20");
  fails({"--data.source=text"}, "data.source = \"text\" trains a language model: set model.type = \"decoder-only\"");
  fails({"--data.batch_size=0"}, "data.batch_size must be >= 1, got 0");
  fails({"--optim.lr=0"}, "optim.lr must be > 0");
  fails({"--optim.min_lr=0.5"}, "optim.min_lr must be in [0, optim.lr]");
  fails({"--optim.nesterov=true"}, "optim.nesterov needs optim.momentum > 0");
  fails({"--optim.beta2=1"}, "optim.beta1 and optim.beta2 must be in [0, 1)");
  fails({"--train.grad_accum=0"}, "train.grad_accum must be >= 1, got 0");
  fails({"--train.batch_shards=0"}, "train.batch_shards must be >= 1, got 0");
  fails({"--train.target_accuracy=1.5"}, "train.target_accuracy must be in [0, 1]");
  fails({"--train.out_dir="}, "train.out_dir must not be empty");
  fails({"--sample.top_p=0"}, "sample.top_p must be in (0, 1]");
  fails({"--data.min_len=9", "--data.max_len=4"}, "[config] data:");
  fails({"--data.task=shift", "--data.lag=9"}, "[config] data:");
  fails({"--model.dropout=1"}, "dropout must be in [0, 1), got 1");
  // Every check is a [config] error, and the same override on a valid base passes.
  RunConfig ok = RunConfig::defaults();
  apply_overrides(ok, {"--model.d_model=32", "--optim.warmup_steps=10", "--train.steps=10", "--data.source=text",
                       "--model.type=decoder-only"});
  CHECK_NOTHROW(ok.validate());
}

TEST_CASE("config: malformed files, missing files, directories and bad overrides") {
  TempDir dir;
  std::string toml = write(dir, "broken.toml", "[model]\nd_model = = 3\n");
  check_throws_with([&] { loaded(toml); }, toml + ":2:");
  try {
    loaded(toml);
  } catch (const Error& e) {
    CHECK_MESSAGE(std::regex_search(std::string(e.what()), std::regex(":2:[0-9]+: not valid TOML")), e.what());
  }
  std::string unclosed = write(dir, "unclosed.toml", "[model\n");
  check_throws_with([&] { loaded(unclosed); }, unclosed + ":1:");
  std::string json = write(dir, "broken.json", "{\"model\": {\"d_model\": 16,}}");
  check_throws_with([&] { loaded(json); }, json + ": not valid JSON");
  std::string array = write(dir, "array.json", "[1, 2]");
  check_throws_with([&] { loaded(array); }, array + ": the top level must be an object");
  RunConfig c = RunConfig::defaults();
  check_throws_with([&] { load_config_json_text(c, "{", "the origin"); }, "the origin: not valid JSON");

  std::string missing = dir.file("no_such.toml");
  check_throws_with([&] { loaded(missing); }, missing);
  check_throws_with([&] { loaded(dir.path.string()); }, dir.path.string());

  check_throws_with([&] { apply_overrides(c, {"--model.d_model"}); },
                    "override '--model.d_model' is not of the form --key=value");
  check_throws_with([&] { apply_overrides(c, {"--=3"}); }, "is not of the form --key=value");
  CHECK(c.model.d_model == RunConfig::defaults().model.d_model);
}

// ---- printing and round trips ----------------------------------------------------------------------

namespace {
// A config with every key away from its default: derived from config_help()'s key list and types.
RunConfig every_key_changed() {
  RunConfig c = RunConfig::defaults();
  std::istringstream in(config_help());
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    ++n;
    std::string key = line.substr(0, line.find(' '));
    size_t open = line.find('(') + 1, close = line.find(')');
    std::string type = line.substr(open, close - open);
    std::string current = toml_values(config_to_toml(c)).at(key);
    std::string value;
    if (type == "integer") value = std::to_string(-1000 - n);
    else if (type == "non-negative integer") value = "9223372036854775" + std::to_string(100 + n);  // near 2^63, the largest allowed
    else if (type == "number") value = std::to_string(n) + ".1";
    else if (type == "boolean") value = current == "true" ? "false" : "true";
    else if (type == "string") value = "path with \"quotes\", \\ and caf\xc3\xa9 #" + std::to_string(n);
    else {  // "string: a|b|c": the last choice that differs from the current one
      std::string choices = type.substr(type.find(": ") + 2);
      std::vector<std::string> words;
      std::istringstream cs(choices);
      std::string w;
      while (std::getline(cs, w, '|')) words.push_back(w);
      for (const auto& word : words)
        if ("\"" + word + "\"" != current) value = word;
    }
    set_config_value(c, key, value);
  }
  return c;
}
}  // namespace

TEST_CASE("config: config_to_json and config_to_toml read back to the identical config") {
  const RunConfig original = every_key_changed();
  // Every key really differs from the default (so a key that fails to load would show).
  auto mine = toml_values(config_to_toml(original)), base = toml_values(config_to_toml(RunConfig::defaults()));
  REQUIRE(mine.size() == base.size());
  for (const auto& entry : mine) {
    const auto& key = entry.first;
    const auto& value = entry.second;
    CHECK_MESSAGE(value != base.at(key), key << " was not changed");
  }

  SUBCASE("JSON") {
    RunConfig back = RunConfig::defaults();
    load_config_json_text(back, config_to_json(original), "round trip");
    CHECK(config_to_json(back) == config_to_json(original));
    CHECK(config_to_toml(back) == config_to_toml(original));
  }
  SUBCASE("TOML, int64-range seeds") {
    // Seeds that TOML integers (int64) can hold.
    RunConfig c = original;
    set_config_value(c, "data.seed", "9223372036854775807");
    set_config_value(c, "train.seed", "3");
    set_config_value(c, "sample.seed", "0");
    TempDir dir;
    std::string path = write(dir, "effective.toml", config_to_toml(c));
    RunConfig back = RunConfig::defaults();
    load_config_file(back, path);
    CHECK(config_to_json(back) == config_to_json(c));
  }
  SUBCASE("TOML, seeds near 2^63") {
    // Seeds are capped at 2^63 - 1 because TOML integers are signed 64-bit: the printed effective
    // config must load again.
    TempDir dir;
    std::string path = write(dir, "effective.toml", config_to_toml(original));
    RunConfig back = RunConfig::defaults();
    load_config_file(back, path);
    CHECK(config_to_json(back) == config_to_json(original));
    RunConfig c = RunConfig::defaults();
    check_throws_with([&] { set_config_value(c, "data.seed", "9223372036854775808"); }, "data.seed: expected a non-negative integer up to 2^63 - 1");
  }
  SUBCASE("doubles keep every bit") {
    RunConfig c = RunConfig::defaults();
    c.optim.lr = 1.0 / 3.0;
    c.optim.eps = 1e-300;
    c.model.norm_eps = 2.2250738585072014e-308;  // the smallest normal double
    c.optim.min_lr = 0.1;
    c.model.dropout = 0.30000000000000004;
    c.optim.beta2 = -0.0;
    TempDir dir;
    std::string path = write(dir, "doubles.toml", config_to_toml(c));
    RunConfig from_toml = RunConfig(), from_json = RunConfig();
    load_config_file(from_toml, path);
    load_config_json_text(from_json, config_to_json(c), "doubles");
    for (const RunConfig* r : {&from_toml, &from_json}) {
      CHECK(r->optim.lr == c.optim.lr);
      CHECK(r->optim.eps == c.optim.eps);
      CHECK(r->model.norm_eps == c.model.norm_eps);
      CHECK(r->optim.min_lr == c.optim.min_lr);
      CHECK(r->model.dropout == c.model.dropout);
      CHECK(r->optim.beta2 == 0.0);
    }
  }
}

TEST_CASE("config: configs/default.toml is exactly RunConfig::defaults(), configs/char_lm.toml validates") {
  const std::string root = repo_root();
  const std::string default_toml = root + "/configs/default.toml";
  REQUIRE_MESSAGE(fs::exists(default_toml), default_toml);
  const std::string expected = config_to_json(RunConfig::defaults());
  CHECK(config_to_json(loaded(default_toml, RunConfig::defaults())) == expected);
  // Loaded onto the plain struct too: the file spells out everything defaults() changes.
  CHECK(config_to_json(loaded(default_toml, RunConfig())) == expected);

  RunConfig lm = loaded(root + "/configs/char_lm.toml");
  CHECK_NOTHROW(lm.validate());
  CHECK(lm.model_type == ModelKind::DecoderOnly);
  CHECK(lm.data.source == "text");
  CHECK(lm.model.decoder_self.scheme == "sandwich");  // chosen by measurement: docs/extrapolation.md
  CHECK(lm.sample.top_k == 40);
}

TEST_CASE("config: config_help() lists every key config_to_toml prints, with type and default") {
  const std::string help = config_help();
  std::vector<std::string> keys = toml_keys(config_to_toml(RunConfig::defaults()));
  REQUIRE(keys.size() > 60);
  std::set<std::string> help_keys;
  std::istringstream in(help);
  std::string line;
  while (std::getline(in, line)) help_keys.insert(line.substr(0, line.find(' ')));
  CHECK(help_keys.size() == keys.size());
  auto defaults = toml_values(config_to_toml(RunConfig::defaults()));
  for (const std::string& key : keys) {
    CAPTURE(key);
    CHECK(help_keys.count(key) == 1);
    // "key (type...) = default  — help"
    size_t at = help.find("\n" + key + " (");
    if (help.compare(0, key.size() + 2, key + " (") == 0) at = 0;
    REQUIRE(at != std::string::npos);
    std::string rest = help.substr(at + (at ? 1 : 0));
    rest = rest.substr(0, rest.find('\n'));
    std::string shown = rest.substr(rest.find(") = ") + 4);
    shown = shown.substr(0, shown.find("  "));
    std::string value = defaults.at(key);
    if (value.size() >= 2 && value.front() == '"') value = value.substr(1, value.size() - 2);
    if (value.size() > 2 && value.compare(value.size() - 2, 2, ".0") == 0 && shown.find('.') == std::string::npos)
      value.resize(value.size() - 2);
    CHECK(shown == value);
  }
  for (const char* k : {"model.cross_alignment (string: left|right|scaled|explicit)", "model.cross.out_of_range (string: zero|clip|error)",
                        "data.seed (non-negative integer)", "optim.lr (number)", "model.pre_norm (boolean)"})
    CHECK_MESSAGE(help.find(k) != std::string::npos, k);
}

TEST_CASE("config: override text must be exactly a number of the key's type") {
  RunConfig c = RunConfig::defaults();
  // strtoull skips leading blanks and negates, so " -1" would become 18446744073709551615.
  bool refused = false;
  try {
    set_config_value(c, "data.seed", " -1");
  } catch (const Error& e) {
    refused = std::string(e.what()).find("data.seed") != std::string::npos;
  }
  CHECK_MESSAGE(refused, "--data.seed=' -1' is accepted as " << c.data.seed);
  for (const char* text : {" 32", "+5", "32 ", "0x10"}) check_throws_with([&] { set_config_value(c, "model.d_model", text); }, "model.d_model");
  for (const char* text : {"0x1p-3", " 0.5", "+0.5", "1e"}) check_throws_with([&] { set_config_value(c, "optim.lr", text); }, "optim.lr");
  CHECK_NOTHROW(set_config_value(c, "optim.lr", "-2.5e-3"));
  CHECK_NOTHROW(set_config_value(c, "optim.lr", ".5"));
  CHECK_NOTHROW(set_config_value(c, "optim.lr", "1E+2"));
}

TEST_CASE("config: a string key that is not UTF-8 is refused by name, or round-trips") {
  // Configs are stored as JSON and printed as TOML, which need UTF-8: a Latin-1 path must be refused
  // by name when set, not fail later inside the JSON writer.
  RunConfig c = RunConfig::defaults();
  bool ok = false;
  std::string what;
  try {
    set_config_value(c, "data.text_path", "caf\xe9.txt");
    RunConfig back = RunConfig::defaults();
    load_config_json_text(back, config_to_json(c), "round trip");
    TempDir dir;
    write_bytes(dir.file("c.toml"), config_to_toml(c));
    RunConfig from_toml = RunConfig::defaults();
    load_config_file(from_toml, dir.file("c.toml"));
    ok = back.data.text_path == c.data.text_path && from_toml.data.text_path == c.data.text_path;
  } catch (const Error& e) {
    what = e.what();
    ok = what.find("data.text_path") != std::string::npos;
  } catch (const std::exception& e) {
    what = e.what();
  }
  CHECK_MESSAGE(ok, "a non-UTF-8 data.text_path: " << what);
}

TEST_CASE("config: model.random_positions_max reaches the model, sizes a derived table, and is checked") {
  RunConfig c = RunConfig::defaults();
  apply_overrides(c, {"--model.type=decoder-only", "--model.absolute_position=learned"});
  const int64_t longest = c.longest_sequence(), range = 4 * longest;
  apply_overrides(c, {"--model.random_positions_max=" + std::to_string(range)});
  c.validate();
  RunConfig derived = c;
  derived.derive_from_data();
  CHECK(derived.model.random_positions_max == range);
  CHECK(derived.model.max_positions == range);  // the derived table covers every drawn position
  // Stored with the checkpoint's config and read back.
  RunConfig back = RunConfig::defaults();
  load_config_json_text(back, config_to_json(derived), "test");
  CHECK(back.model.random_positions_max == range);

  RunConfig short_range = RunConfig::defaults();
  apply_overrides(short_range, {"--model.type=decoder-only", "--model.absolute_position=sinusoidal",
                                "--model.random_positions_max=" + std::to_string(longest - 1)});
  check_throws_with([&] { short_range.validate(); }, "model.random_positions_max");
  RunConfig nothing_to_randomise = RunConfig::defaults();
  apply_overrides(nothing_to_randomise, {"--model.type=decoder-only", "--model.decoder_self.scheme=t5",
                                         "--model.random_positions_max=" + std::to_string(range)});
  check_throws_with([&] { nothing_to_randomise.validate(); }, "random_positions_max");
}

TEST_CASE("config: model.fused_attention is false, true or auto (the default), and takes the booleans of older files") {
  TempDir dir;
  RunConfig d = RunConfig::defaults();
  CHECK(d.model.attention_core == AttentionCore::Auto);
  struct Case { std::string toml, json; AttentionCore core; };
  for (const Case& k : {Case{"true", "true", AttentionCore::Fused}, Case{"false", "false", AttentionCore::Composite},
                        Case{"\"true\"", "\"true\"", AttentionCore::Fused}, Case{"\"auto\"", "\"auto\"", AttentionCore::Auto},
                        Case{"\"false\"", "\"false\"", AttentionCore::Composite}}) {
    CAPTURE(k.toml);
    RunConfig t = loaded(write(dir, "run.toml", "[model]\nfused_attention = " + k.toml + "\n"));
    CHECK(t.model.attention_core == k.core);
    RunConfig j = RunConfig::defaults();
    load_config_json_text(j, R"({"model": {"fused_attention": )" + k.json + "}}", "inline");
    CHECK(j.model.attention_core == k.core);
    RunConfig back = RunConfig::defaults();  // the written form reads back the same
    load_config_json_text(back, config_to_json(t), "round trip");
    CHECK(back.model.attention_core == k.core);
  }
  RunConfig c = RunConfig::defaults();
  check_throws_with([&] { apply_overrides(c, {"--model.fused_attention=sometimes"}); }, "false, true, auto");
  check_throws_with([&] { load_config_json_text(c, R"({"model": {"fused_attention": 1}})", "inline"); },
                    "model.fused_attention");
}

TEST_CASE("config: the memory bound counts the attention weights where every call runs the composite core, auto included") {
  // RunConfig::attention_weights_kept, what relgrad train's memory bound counts (train/command/subcommands/train.cpp).
  RunConfig c = RunConfig::defaults();  // synthetic reverse, 4 heads, float32 on the CPU
  c.model.attention_core = AttentionCore::Composite;
  CHECK(c.attention_weights_kept(32));
  CHECK(c.attention_weights_kept(int64_t(1) << 40));
  c.model.attention_core = AttentionCore::Fused;
  CHECK_FALSE(c.attention_weights_kept(32));
  // auto (the default): the composite core for every call, so the weights count, while a call over the
  // longest sequence keeps one (rows, H, T, T) tensor within 1/64 of the machine's memory (fused_core_pays,
  // layers/attention.h); past that, auto picks the fused core for the longest calls and nothing is counted.
  c.model.attention_core = AttentionCore::Auto;
  const double T = double(c.longest_sequence()), H = double(c.model.n_heads);
  const double limit = double(device_memory_bytes(Device::cpu()) / 64);
  const int64_t most = int64_t(limit / (H * T * T * 4));  // rows whose float32 tensor fits
  REQUIRE(most > 32);
  CHECK(c.attention_weights_kept(32));
  CHECK(c.attention_weights_kept(most));
  CHECK_FALSE(c.attention_weights_kept(most + 1));
  c.train.dtype = kFloat64;  // twice the bytes per row
  CHECK_FALSE(c.attention_weights_kept(most));
  CHECK(c.attention_weights_kept(most / 2));
}
