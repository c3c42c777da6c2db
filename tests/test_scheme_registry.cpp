// layers/schemes.h: the registry every consumer reads. A scheme defined here, outside the library, is
// registered by one entry and then built, trained, decoded with a cache and probed by name
// like a built-in (the worked example of docs/relative-attention.md); the built-ins' names agree with
// their registry entries.
#include <cmath>

#include "cli_testing.h"
#include "testing.h"
#include "train/instruments/probe.h"
#include "train/optim/optim.h"
#include "train/trainer/decoder_only_model.h"

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
