// The RoPE scalings (layers/rotary.h) as configuration: a config without the rotary family's keys (an
// older checkpoint's) keeps their defaults and the keys round-trip; `relgrad eval` and `relgrad sample`
// set the three scaling keys over a checkpoint trained without them (and no other model key), the
// scaled model's loss differs while factor 1 changes nothing, and a refused change is a usage error.
#include "cli_testing.h"
#include "file_testing.h"
#include "layers/schemes.h"
#include "testing.h"
#include "train/config/config.h"

using namespace relgrad;
using namespace relgrad::testing;

TEST_CASE("rope scaling: a config without the new keys (an older checkpoint's) has their defaults, they round-trip") {
  RunConfig c = RunConfig::defaults();
  load_config_json_text(c, R"({"model": {"decoder_self": {"scheme": "rope", "rope_base": 500}}})", "older");
  const PositionalConfig& p = c.model.decoder_self;
  CHECK(p.rope_scaling == RopeScalingKind::None);
  CHECK(p.rope_scaling_factor == 1.0);
  CHECK(p.rope_original_length == 0);
  CHECK(p.xpos_scale_base == 512.0);
  CHECK(p.rope_fraction == 0.75);
  set_config_value(c, "model.decoder_self.rope_scaling", "yarn");
  set_config_value(c, "model.decoder_self.rope_scaling_factor", "4");
  set_config_value(c, "model.decoder_self.rope_original_length", "64");
  set_config_value(c, "model.cross.rope_fraction", "0.5");
  set_config_value(c, "model.encoder_self.xpos_scale_base", "128");
  RunConfig back = RunConfig::defaults();
  load_config_json_text(back, config_to_json(c), "round trip");
  CHECK(back.model.decoder_self.rope_scaling == RopeScalingKind::Yarn);
  CHECK(back.model.decoder_self.rope_scaling_factor == 4.0);
  CHECK(back.model.decoder_self.rope_original_length == 64);
  CHECK(back.model.cross.rope_fraction == 0.5);
  CHECK(back.model.encoder_self.xpos_scale_base == 128.0);
  check_throws_with([&] { set_config_value(c, "model.decoder_self.rope_scaling", "dynamic"); },
                    "model.decoder_self.rope_scaling");
}

TEST_CASE("rope scaling: relgrad eval and sample scale a checkpoint trained without it, nothing else may change") {
  TempDir dir;
  const std::string run_dir = dir.file("rope");
  CHECK_CLI(run_relgrad({"train", "--model.type=decoder-only", "--data.task=periodic_lm", "--data.max_len=12",
                         "--model.d_model=16", "--model.n_heads=2", "--model.d_ff=32", "--model.n_decoder_layers=1",
                         "--model.decoder_self.scheme=rope", "--train.steps=3", "--optim.warmup_steps=1", "--train.samples=0",
                         "--train.out_dir=" + run_dir}),
            0);
  const std::string ckpt = run_dir + "/checkpoint.safetensors";
  const std::string key = "--model.decoder_self.";
  CliResult plain = run_relgrad({"eval", ckpt, "--batches", "2"});
  CHECK_CLI(plain, 0);
  // Factor 1 is RoPE itself: the same numbers, after the lines naming the changes.
  CliResult one = run_relgrad({"eval", ckpt, "--batches", "2", key + "rope_scaling=linear", key + "rope_scaling_factor=1"});
  CHECK_CLI(one, 0);
  CHECK(contains(one.out, "eval model: model.decoder_self.rope_scaling=linear\n"));
  CHECK(one.out.substr(one.out.find("step ")) == plain.out);
  CliResult yarn = run_relgrad({"eval", ckpt, "--batches", "2", "--data.max_len=24", key + "rope_scaling=yarn",
                                key + "rope_scaling_factor=2", key + "rope_original_length=12"});
  CHECK_CLI(yarn, 0);
  CHECK(contains(yarn.out, "eval model: model.decoder_self.rope_original_length=12\n"));
  CliResult longer = run_relgrad({"eval", ckpt, "--batches", "2", "--data.max_len=24"});
  CHECK_CLI(longer, 0);
  CHECK(yarn.out.substr(yarn.out.find("step ")) != longer.out.substr(longer.out.find("step ")));
  CHECK_CLI(run_relgrad({"sample", ckpt, "-n", "1", key + "rope_scaling=ntk", key + "rope_scaling_factor=2"}), 0);
  // The checkpoint is unchanged: a plain eval gives the first numbers again.
  CHECK(run_relgrad({"eval", ckpt, "--batches", "2"}).out == plain.out);
  // Refused, exit 2: another model key, a place whose scheme takes no scaling, a change the checks refuse.
  CliResult base = run_relgrad({"eval", ckpt, key + "rope_base=20"});
  CHECK_CLI(base, 2);
  CHECK(contains(base.err, "neither an option of relgrad eval nor a --data.KEY=VALUE override"));
  CliResult other = run_relgrad({"sample", ckpt, "--model.d_model=8"});
  CHECK_CLI(other, 2);
  CHECK(contains(other.err, "neither an option of relgrad sample nor a --model.PLACE.KEY=VALUE override"));
  CliResult cross = run_relgrad({"eval", ckpt, "--model.cross.rope_scaling=ntk"});
  CHECK_CLI(cross, 2);
  CHECK(contains(cross.err, "model.cross.rope_scaling is set, but model.cross.scheme = "));
  CliResult yarn_alone = run_relgrad({"eval", ckpt, key + "rope_scaling=yarn"});
  CHECK_CLI(yarn_alone, 2);
  CHECK(contains(yarn_alone.err, "model.decoder_self.rope_scaling = yarn needs model.decoder_self.rope_original_length"));
  CliResult small = run_relgrad({"eval", ckpt, key + "rope_scaling=linear", key + "rope_scaling_factor=0.5"});
  CHECK_CLI(small, 2);
  CHECK(contains(small.err, "model.decoder_self.rope_scaling_factor must be >= 1"));
}

// The same check as eval's and sample's (RunConfig::validate): relgrad train refuses a RoPE scaling at a
// place whose scheme takes none, instead of training without it.
TEST_CASE("rope scaling: relgrad train refuses a scaling where the place's scheme takes none, exit 2 as eval") {
  const std::vector<std::string> base = {"train", "--dry-run", "--model.type=decoder-only", "--data.task=periodic_lm",
                                         "--model.d_model=16", "--model.n_heads=2", "--model.n_decoder_layers=1"};
  const auto train = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = base;
    args.insert(args.end(), extra.begin(), extra.end());
    return run_relgrad(args);
  };
  for (const char* scheme : {"rope", "xpos", "p_rope"})
    CHECK_CLI(train({std::string("--model.decoder_self.scheme=") + scheme, "--model.decoder_self.rope_scaling=linear",
                     "--model.decoder_self.rope_scaling_factor=2"}),
              0);
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  for (const Case& c : std::vector<Case>{
           {{"--model.decoder_self.scheme=kerple", "--model.decoder_self.rope_scaling=linear"},
            "[config] model.decoder_self.rope_scaling is set, but model.decoder_self.scheme = kerple takes no "
            "rope_scaling (rope, xpos and p_rope do)"},
           {{"--model.decoder_self.scheme=alibi", "--model.decoder_self.rope_scaling_factor=2"},
            "model.decoder_self.scheme = alibi takes no rope_scaling_factor"},
           {{"--model.decoder_self.scheme=pope", "--model.decoder_self.rope_original_length=12"},
            "model.decoder_self.scheme = pope takes no rope_original_length"},
           {{"--model.decoder_self.scheme=rope", "--model.cross.rope_scaling=ntk"},
            "model.cross.rope_scaling is set, but model.cross.scheme = "}}) {
    INFO(c.args[0]);
    CliResult r = train(c.args);
    CHECK_CLI(r, 2);
    CHECK_MESSAGE(contains(r.err, c.message), r.err);
  }
}

// An eval --dump-logits file says which overrides its logits were made with (docs/cli.md, eval).
TEST_CASE("rope scaling: eval --dump-logits records the overrides in the file's metadata") {
  TempDir dir;
  const std::string run_dir = dir.file("rope");
  CHECK_CLI(run_relgrad({"train", "--model.type=decoder-only", "--data.task=periodic_lm", "--data.max_len=12",
                         "--model.d_model=16", "--model.n_heads=2", "--model.d_ff=32", "--model.n_decoder_layers=1",
                         "--model.decoder_self.scheme=rope", "--train.steps=2", "--optim.warmup_steps=1", "--train.samples=0",
                         "--train.out_dir=" + run_dir}),
            0);
  const std::string ckpt = run_dir + "/checkpoint.safetensors", dump = dir.file("logits.safetensors");
  const std::string key = "--model.decoder_self.";
  CHECK_CLI(run_relgrad({"eval", ckpt, "--dump-logits", dump, "--data.max_len=24", key + "rope_scaling=yarn",
                         key + "rope_scaling_factor=2", key + "rope_original_length=12"}),
            0);
  SafetensorsFile f = load_safetensors(dump);
  CHECK(f.metadata["overrides"] ==
        "model.decoder_self.rope_scaling=yarn model.decoder_self.rope_scaling_factor=2 "
        "model.decoder_self.rope_original_length=12 data.max_len=24");
  CHECK(f.metadata["checkpoint"] == ckpt);
  CHECK_CLI(run_relgrad({"eval", ckpt, "--dump-logits", dump}), 0);
  f = load_safetensors(dump);
  REQUIRE(f.metadata.count("overrides") == 1);
  CHECK(f.metadata["overrides"].empty());
}
