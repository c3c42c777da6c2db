// layers/schemes.h: the registry every consumer reads. A scheme defined here, outside the library, is
// registered by one entry and then built, trained, decoded with a cache and probed by name
// like a built-in (the worked example of docs/relative-attention.md); the built-ins' names agree with
// their registry entries.
#include <cmath>
#include <set>

#include "cli_testing.h"
#include "file_testing.h"
#include "study_testing.h"
#include "testing.h"
#include "train/config/config.h"
#include "train/instruments/context_bench.h"
#include "train/instruments/length_bench.h"
#include "train/instruments/probe.h"
#include "train/instruments/recipe.h"
#include "train/optim/optim.h"
#include "train/trainer/run.h"

using namespace relgrad;
using relgrad::testing::check_throws_with;
using relgrad::testing::CliResult;
using relgrad::testing::contains;
using relgrad::testing::run_relgrad;

namespace {

// ---- the example scheme: one file's worth ----

// A learned distance penalty: bias = −s_h · |δ| with one trained slope s_h per head (ALiBi with
// learned slopes), added after the 1/√D scaling. Only logit_bias and response are overridden: the
// fused core is not offered (fuse's default), so the composite core runs.
class LearnedSlope : public PositionalScheme {
 public:
  explicit LearnedSlope(int64_t num_heads) : num_heads(num_heads) {
    NoGradGuard no_grad;
    slope = register_parameter("slope", full({num_heads}, 0.5));
  }
  std::string name() const override { return "learned_slope"; }
  Tensor logit_bias(const AttentionGeometry& g) const override {  // (1, H, t2, t1)
    std::vector<int64_t> pi = g.positions().to_vector<int64_t>();
    std::vector<double> dist(static_cast<size_t>(g.t2 * g.t1));
    for (int64_t i = 0; i < g.t2; ++i)
      for (int64_t j = 0; j < g.t1; ++j) dist[i * g.t1 + j] = static_cast<double>(std::abs(j - pi[i]));
    Tensor d = from_vector<double>(dist, {1, 1, g.t2, g.t1}).to(slope.dtype()).to(slope.device());
    return neg(slope.reshape({1, num_heads, 1, 1}) * d);
  }
  std::vector<std::vector<double>> response(const ResponseInput&, int64_t reach) const override {
    std::vector<double> s = host_values(slope);
    std::vector<std::vector<double>> out(static_cast<size_t>(num_heads));
    for (int64_t h = 0; h < num_heads; ++h)
      for (int64_t d = -reach; d <= reach; ++d) out[h].push_back(-s[h] * static_cast<double>(std::abs(d)));
    return out;
  }
  int64_t num_heads;
  Tensor slope;  // (H)
};

// Its registry entry (a program calls register_scheme once, before it builds models or reads configs).
SchemeEntry learned_slope_entry() {
  return {"learned_slope", {}, [](const SchemeContext& c) { return std::make_shared<LearnedSlope>(c.n_heads); }};
}

// Registered for one test case: the other cases see the built-ins only.
struct Registered {
  Registered() { register_scheme(learned_slope_entry()); }
  ~Registered() { unregister_scheme("learned_slope"); }
};

TransformerConfig lm_config(const std::string& scheme) {
  TransformerConfig c;
  c.vocab_size = 10;
  c.d_model = 16;
  c.n_heads = 2;
  c.d_ff = 32;
  c.n_decoder_layers = 2;
  c.dropout = 0.0;
  c.decoder_self.scheme = scheme;
  c.decoder_self.max_length = 16;
  return c;
}

// (B, T) tokens: a repeating pattern a model can learn.
Tensor pattern_tokens(int64_t B, int64_t T) {
  std::vector<int64_t> ids(static_cast<size_t>(B * T));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t) ids[b * T + t] = (b + t) % 4 + 1;
  return from_vector<int64_t>(ids, {B, T});
}

}  // namespace

TEST_CASE("scheme registry: the built-ins, their names and their facts") {
  std::vector<std::string> names;
  for (const SchemeEntry& e : positional_schemes()) names.push_back(e.name);
  CHECK(names == std::vector<std::string>{"none", "seed", "huang", "shaw", "t5", "alibi", "rope", "transformer_xl",
                                          "xpos", "p_rope", "pope", "cope", "fox", "stick_breaking", "kerple",
                                          "sandwich", "dynamic_bias", "fire"});
  CHECK(scheme_names_text() == "none, seed, huang, shaw, t5, alibi, rope, transformer_xl, xpos, p_rope, pope, cope, "
                               "fox, stick_breaking, kerple, sandwich, dynamic_bias or fire");
  CHECK(find_scheme("T5") == nullptr);
  CHECK(find_scheme("t5")->shared_by_stack);
  CHECK(find_scheme("huang")->causal_only);
  CHECK(find_scheme("transformer_xl")->self_only);
  // Each built scheme reports its registry name (the probe labels curves with it).
  for (const SchemeEntry& e : positional_schemes()) {
    if (!e.make) continue;
    PositionalConfig p;
    p.scheme = e.name;
    auto s = make_positional(p, "decoder_self", 16, 2, true, "test");
    CHECK(s->name() == e.name);
  }
  // Each says what it is in its own words (music-bench's table reads them): none empty, no two alike.
  std::set<std::string> summaries;
  for (const SchemeEntry& e : positional_schemes()) {
    CHECK_MESSAGE(!e.summary.empty(), e.name);
    CHECK_MESSAGE(summaries.insert(e.summary).second, e.name << ": " << e.summary);
  }
  CHECK(find_scheme("t5")->summary == "relative bias, T5 buckets");
  check_throws_with([] { register_scheme({"rope", {}, nullptr}); }, "[register_scheme] a scheme named 'rope' is registered already");
  check_throws_with([] { unregister_scheme("rope"); }, "[unregister_scheme] no scheme named 'rope'");
}

TEST_CASE("scheme registry: a scheme defined outside the library trains, decodes and probes by name") {
  Registered registered;
  REQUIRE(find_scheme("learned_slope") != nullptr);
  CHECK(scheme_names_text() == "none, seed, huang, shaw, t5, alibi, rope, transformer_xl, xpos, p_rope, pope, cope, "
                               "fox, stick_breaking, kerple, sandwich, dynamic_bias, fire or learned_slope");

  Generator init(3);
  DecoderLM model(lm_config("learned_slope"), &init);
  // Parameter names as for any scheme: the attention's child "positional".
  bool named = false;
  for (const auto& [name, t] : model.named_parameters()) named |= name == "layers.1.self_attn.positional.slope";
  CHECK(named);

  // A few AdamW steps: the loss falls and the slopes move (their gradient flows through logit_bias).
  Tensor tokens = pattern_tokens(4, 8);
  Tensor input = tokens.narrow(1, 0, 7), target = tokens.narrow(1, 1, 7).contiguous();
  Tensor slope = (*model.layers)[0].self_attn->positional->named_parameters().front().second;
  const std::vector<float> slope_before = slope.to_vector<float>();
  AdamW opt(model.parameters(), AdamWOptions(0.02));
  double first = 0, last = 0;
  for (int step = 0; step < 30; ++step) {
    opt.zero_grad();
    Tensor loss = cross_entropy(model.forward(input).reshape({-1, 10}), target.reshape({-1}));
    loss.backward();
    opt.step();
    (step == 0 ? first : last) = loss.item();
  }
  CHECK(last < first * 0.8);
  CHECK(slope.to_vector<float>() != slope_before);

  // The fused flag falls back to the composite core (the scheme does not fuse): the same logits.
  model.eval();
  Tensor composite = model.forward(input);
  for (auto& block : model.layers->items) block->self_attn->core = AttentionCore::Fused;
  CHECK(max(abs(model.forward(input) - composite)).item() == 0.0);
  for (auto& block : model.layers->items) block->self_attn->core = AttentionCore::Composite;

  // Cached decoding, one token at a time, equals the full forward (keys cached in content form).
  std::vector<LayerCache> cache;
  for (int64_t t = 0; t < 7; ++t) {
    Tensor step = model.forward(input.narrow(1, t, 1), Tensor(), &cache);  // (B, 1, V)
    CHECK(max(abs(step - composite.narrow(1, t, 1))).item() < 1e-5);
  }

  // The probe reports its response under the registered name.
  DecoderOnlyModel run(std::make_shared<DecoderLM>(lm_config("learned_slope"), &init));
  Batch batch;
  batch.tokens = input;
  std::vector<ProbeCurve> curves = positional_response(run, batch, 3);
  REQUIRE(curves.size() == 4);  // 2 layers × 2 heads
  CHECK(curves[0].scheme == "learned_slope");
  CHECK(value_at(curves[0], -2) == doctest::Approx(-1.0));  // −0.5 · 2
  CHECK(std::isnan(value_at(curves[0], 2)));                // causal: the future is masked

}

TEST_CASE("scheme registry: unregistered, the name is unknown again") {
  CHECK(find_scheme("learned_slope") == nullptr);
  TransformerConfig c = lm_config("learned_slope");
  check_throws_with([&] { DecoderLM lm(c); }, "unknown positional scheme 'learned_slope' for decoder_self (expected none, "
                                              "seed, huang, shaw, t5, alibi, rope, transformer_xl, xpos, p_rope, pope, "
                                              "cope, fox, stick_breaking, kerple, sandwich, dynamic_bias or fire)");
}

TEST_CASE("scheme registry: bad registrations are refused, naming the scheme") {
  SchemeEntry nameless = learned_slope_entry();
  nameless.name = "";
  check_throws_with([&] { register_scheme(nameless); }, "[register_scheme] a scheme needs a name");
  SchemeEntry again = learned_slope_entry();
  again.name = "t5";
  check_throws_with([&] { register_scheme(again); }, "[register_scheme] a scheme named 't5' is registered already");
  check_throws_with([&] { unregister_scheme("t5"); },
                    "[unregister_scheme] no scheme named 't5' was registered by register_scheme");
  check_throws_with([&] { unregister_scheme("learned_slope"); },
                    "[unregister_scheme] no scheme named 'learned_slope' was registered by register_scheme");
  CHECK(find_scheme("t5") != nullptr);  // the built-in is untouched
}

TEST_CASE("scheme registry: an entry's own check is a config error naming the key, before anything is built") {
  // The example scheme again, with a check of its own: an even head count (say, its slopes pair up).
  SchemeEntry entry = learned_slope_entry();
  entry.name = "paired_slope";
  entry.check = [](const SchemeCheck& c) -> std::string {
    if (c.n_heads % 2 == 0) return "";
    return c.scheme_key() + " needs an even model.n_heads, got " + std::to_string(c.n_heads);
  };
  entry.parameters = [](const PositionalConfig&, double n_heads, double) { return n_heads; };  // a slope per head
  register_scheme(entry);
  struct Unregister {
    ~Unregister() { unregister_scheme("paired_slope"); }
  } unregister;
  const std::vector<std::string> base = {"train", "--dry-run", "--model.type=decoder-only", "--model.d_model=24",
                                         "--model.decoder_self.scheme=paired_slope"};
  std::vector<std::string> odd = base, even = base;
  odd.push_back("--model.n_heads=3");
  even.push_back("--model.n_heads=2");
  CliResult r = run_relgrad(odd);
  CHECK_CLI(r, 2);
  CHECK_MESSAGE(contains(r.err, "[config] model.decoder_self.scheme = paired_slope needs an even model.n_heads, got 3"),
                r.err);
  CHECK_CLI(run_relgrad(even), 0);
  // A built-in's check speaks through the same path: RoPE's odd head size.
  std::vector<std::string> rope = {"train", "--dry-run", "--model.type=decoder-only", "--model.d_model=12",
                                   "--model.n_heads=4", "--model.decoder_self.scheme=rope"};
  r = run_relgrad(rope);
  CHECK_CLI(r, 2);
  CHECK_MESSAGE(contains(r.err, "model.decoder_self.scheme = rope needs an even head size"), r.err);
  // Where an entry may serve is one rule (layers/schemes.h placement) for the model and the config.
  CHECK(placement(*find_scheme("huang"), false, false) == Placement::NeedsCausal);
  CHECK(placement(*find_scheme("transformer_xl"), false, true) == Placement::SelfOnly);
  CHECK(placement(*find_scheme("transformer_xl"), false, false) == Placement::Allowed);
  CHECK(placement(*find_scheme("paired_slope"), false, true) == Placement::Allowed);
}

// ---- a scheme with a knob of its own, registered by one call ----

namespace {

// ALiBi with one fixed slope for every head, set by its knob: bias = −slope_scale · |δ|.
class ScaledSlope : public PositionalScheme {
 public:
  explicit ScaledSlope(double scale) : scale(scale) {}
  std::string name() const override { return "scaled_slope"; }
  Tensor logit_bias(const AttentionGeometry& g) const override {  // (1, 1, t2, t1)
    std::vector<int64_t> pi = g.positions().to_vector<int64_t>();
    std::vector<double> bias(static_cast<size_t>(g.t2 * g.t1));
    for (int64_t i = 0; i < g.t2; ++i)
      for (int64_t j = 0; j < g.t1; ++j) bias[i * g.t1 + j] = -scale * static_cast<double>(std::abs(j - pi[i]));
    return from_vector<double>(bias, {1, 1, g.t2, g.t1}).to(kFloat32);  // the logits' dtype: it trains
  }
  double scale;
};

// Its entry, knob and check beside it: the knob is stored by name (PositionalConfig has no member for it).
SchemeEntry scaled_slope_entry() {
  SchemeEntry e{"scaled_slope", {"slope_scale"}, [](const SchemeContext& c) {
                  return std::make_shared<ScaledSlope>(knob_double(c.config, "slope_scale"));
                }};
  e.knobs = {SchemeKnob::stored("slope_scale", KnobKind::Double, "the penalty per unit of distance (> 0)", "0.5")};
  e.check = [](const SchemeCheck& c) -> std::string {
    const double v = knob_double(c.config, "slope_scale");
    return v > 0 ? "" : c.key + "slope_scale must be > 0, got " + std::to_string(v);
  };
  return e;
}

// ",a,b,c,": a list to look names up in.
std::string bench_names(const std::vector<std::string>& names) {
  std::string out = ",";
  for (const std::string& n : names) out += n + ",";
  return out;
}

}  // namespace

TEST_CASE("scheme registry: a scheme's own knob is a config key, checked, listed and benched by one registration") {
  const std::string help_before = config_help();
  CHECK_FALSE(is_config_key("model.decoder_self.slope_scale"));
  {
  register_scheme(scaled_slope_entry());
  struct Unregister {
    ~Unregister() { unregister_scheme("scaled_slope"); }
  } unregister;
  // Set as `relgrad train` sets any key; its default until then; its help names the scheme.
  RunConfig c = RunConfig::defaults();
  c.model_type = ModelKind::DecoderOnly;
  CHECK(knob_double(c.model.decoder_self, "slope_scale") == 0.5);
  apply_overrides(c, {"--model.decoder_self.scheme=scaled_slope", "--model.decoder_self.slope_scale=0.25"});
  CHECK(knob_double(c.model.decoder_self, "slope_scale") == 0.25);
  CHECK(contains(config_to_toml(c), "slope_scale = 0.25"));
  CHECK(contains(config_help(), "model.decoder_self.slope_scale (number) = 0.5  — scaled_slope: the penalty per unit"));
  auto scheme = make_positional(c.model.decoder_self, "decoder_self", 16, 2, true, "test");
  CHECK(dynamic_cast<ScaledSlope&>(*scheme).scale == 0.25);
  // The CLI: a good value runs, a bad one is a usage error (exit 2) naming the key.
  const std::vector<std::string> base = {"train", "--dry-run", "--model.type=decoder-only",
                                         "--model.decoder_self.scheme=scaled_slope"};
  auto with = [&](const std::string& extra) {
    std::vector<std::string> args = base;
    args.push_back(extra);
    return run_relgrad(args);
  };
  CHECK_CLI(with("--model.decoder_self.slope_scale=2"), 0);
  CliResult r = with("--model.decoder_self.slope_scale=steep");
  CHECK_CLI(r, 2);
  CHECK_MESSAGE(contains(r.err, "model.decoder_self.slope_scale: expected a finite number, got 'steep'"), r.err);
  r = with("--model.decoder_self.slope_scale=-1");
  CHECK_CLI(r, 2);
  CHECK_MESSAGE(contains(r.err, "model.decoder_self.slope_scale must be > 0, got -1"), r.err);
  // Every bench that takes every scheme offers it, with no other file edited.
  CHECK(contains(bench_names(every_treatment(false)), ",scaled_slope,"));
  CHECK(contains(bench_names(length_bench_treatments()), ",scaled_slope,"));
  CHECK(contains(bench_names(context_bench_treatments()), ",scaled_slope,"));
  CHECK_FALSE(contains(bench_names(length_bench_treatments()), "scaled_slope-random"));  // no position map
  // A second declaration of the same knob is refused, naming both.
  SchemeEntry twin = scaled_slope_entry();
  twin.name = "twin_slope";
  check_throws_with([&] { register_scheme(twin); },
                    "[register_scheme] twin_slope: the knob 'slope_scale' is declared already");
  }
  // Unregistered, its key is gone and the help is the built-ins' again.
  CHECK_FALSE(is_config_key("model.decoder_self.slope_scale"));
  CHECK(config_help() == help_before);
}

TEST_CASE("scheme registry: a scheme and a study registered in a test file: the scheme is in the study's table, "
          "with no other file edited") {
  register_scheme(scaled_slope_entry());
  register_study(relgrad::testing::toy_copy_study());
  struct Unregister {
    ~Unregister() {
      unregister_study("toy-copy");
      unregister_scheme("scaled_slope");
    }
  } unregister;
  relgrad::testing::TempDir dir;
  const std::string out = dir.file("toy");
  // The study's default treatments are every scheme the registry offers: scaled_slope among them.
  CliResult r = run_relgrad({"bench", "toy-copy", "--seeds", "1", "--steps", "2", "--out", out});
  CHECK_CLI(r, 0);
  const std::string csv = relgrad::testing::read_bytes(out + "/results.csv");
  CHECK_MESSAGE(contains(csv, "\nscaled_slope,1,"), csv);
  CHECK(contains(csv, "\nalibi,1,"));
  CHECK(contains(r.out, "copy scaled_slope seed 1: exact/token"));
  // Its knob is set like any config key, and a bad value is refused (exit 2) naming it.
  CHECK_CLI(run_relgrad({"train", "--dry-run", "--model.type=decoder-only", "--model.decoder_self.scheme=scaled_slope",
                         "--model.decoder_self.slope_scale=0.25"}),
            0);
  CliResult bad = run_relgrad({"train", "--dry-run", "--model.type=decoder-only",
                               "--model.decoder_self.scheme=scaled_slope", "--model.decoder_self.slope_scale=0"});
  CHECK_CLI(bad, 2);
  CHECK(contains(bad.err, "model.decoder_self.slope_scale must be > 0"));
}

TEST_CASE("scheme registry: each scheme sizes its knobs to a bench's windows by the bench's rule") {
  auto fit = [](const std::string& scheme, FitRule rule, int64_t T, int64_t positions = 0) {
    PositionalConfig p;
    p.scheme = scheme;
    return fitted(p, SchemeFit{rule, T, positions});
  };
  // length-bench: every offset of the training sequences (T = 13), the edge beyond, L0 at T.
  CHECK(fit("seed", FitRule::WindowEdge, 13).max_length == 13);
  CHECK(fit("huang", FitRule::WindowEdge, 13).out_of_range == OutOfRange::Clip);
  CHECK(fit("shaw", FitRule::WindowEdge, 13).clip == 12);
  CHECK(fit("fire", FitRule::WindowEdge, 13).fire_threshold == 13);
  CHECK(fit("t5", FitRule::WindowEdge, 13).max_distance == 128);  // T5's defaults
  CHECK(fit("cope", FitRule::WindowEdge, 13).cope_positions == 64);
  CHECK(fit("cope", FitRule::WindowEdge, 13, 9).cope_positions == 9);
  // context-bench: learned entries saturate at C/2 (C = 16); xpos' decay at C/2; L0 and CoPE's count at C.
  CHECK(fit("seed", FitRule::HalfWindow, 16).max_length == 8);
  CHECK(fit("seed", FitRule::HalfWindow, 16).out_of_range == OutOfRange::Clip);
  CHECK(fit("shaw", FitRule::HalfWindow, 16).clip == 8);
  CHECK(fit("t5", FitRule::HalfWindow, 16).num_buckets == 8);
  CHECK(fit("t5", FitRule::HalfWindow, 16).max_distance == 8);
  CHECK(fit("xpos", FitRule::HalfWindow, 17).xpos_scale_base == 8.5);
  CHECK(fit("fire", FitRule::HalfWindow, 16).fire_threshold == 16);
  CHECK(fit("cope", FitRule::HalfWindow, 16).cope_positions == 16);
  // music-bench: every offset of a window (T = 97), nothing else.
  CHECK(fit("seed", FitRule::Window, 97).max_length == 97);
  CHECK(fit("seed", FitRule::Window, 97).out_of_range == OutOfRange::Zero);
  CHECK(fit("shaw", FitRule::Window, 97).clip == 96);
  CHECK(fit("t5", FitRule::Window, 97).max_distance == 97);
  CHECK(fit("t5", FitRule::Window, 97).num_buckets == 32);
  CHECK(fit("fire", FitRule::Window, 97).fire_threshold == 512);
  // A scheme without a fit keeps its defaults; only the fitted scheme's knobs move.
  CHECK(fit("rope", FitRule::HalfWindow, 16).rope_base == 10000.0);
  CHECK(fit("rope", FitRule::HalfWindow, 16).max_length == 512);
  check_throws_with([&] { fit("fourier", FitRule::Window, 8); }, "[fitted] unknown positional scheme 'fourier'");
}
