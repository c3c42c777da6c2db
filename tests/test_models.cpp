// Blocks and models (layers/blocks.h, layers/models.h): float64 gradcheck of EncoderBlock and
// DecoderBlock in both norm placements, where each norm sits, model shapes, causality, source
// padding, T5's table shared per stack, weight tying, every parameter reached by backward, config
// errors, and a small DecoderLM that learns a fixed sequence with AdamW.
#include <cmath>
#include <functional>
#include <map>

#include "layers/blocks.h"
#include "layers/models.h"
#include "testing.h"
#include "train/optim/optim.h"

using namespace relgrad;
using namespace relgrad::testing;

namespace {

std::vector<double> values(const Tensor& t) { return t.to(kFloat64).contiguous().to_vector<double>(); }

Tensor tokens(std::vector<int64_t> v, int64_t B, int64_t T) { return from_vector<int64_t>(v, {B, T}); }

// A small config: V = 11, C = 8, H = 2, one or two layers, no dropout.
TransformerConfig small_config() {
  TransformerConfig c;
  c.vocab_size = 11;
  c.src_vocab_size = 13;
  c.d_model = 8;
  c.n_heads = 2;
  c.d_ff = 16;
  c.n_encoder_layers = 2;
  c.n_decoder_layers = 2;
  c.dropout = 0.0;
  c.encoder_self.num_buckets = c.decoder_self.num_buckets = 8;
  c.encoder_self.max_distance = c.decoder_self.max_distance = 16;
  return c;
}

int count_names_ending(const Module& m, const std::string& suffix) {
  int n = 0;
  for (const auto& [name, p] : m.named_parameters())
    n += name.size() >= suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
  return n;
}

// Logits rows [0, t) of a (B, T, V) tensor.
Tensor first_steps(const Tensor& logits, int64_t t) { return logits.slice(1, 0, t); }

}  // namespace

// ---- blocks ----

TEST_CASE("models: EncoderBlock gradcheck (float64), pre/post norm × LayerNorm/RMSNorm, inputs and parameters") {
  for (bool pre : {true, false})
    for (const char* norm : {"layer_norm", "rms_norm"}) {
      INFO("pre_norm ", pre, ", norm ", norm);
      Generator init(21);
      BlockOptions o;
      o.pre_norm = pre;
      o.norm = norm_from_name(norm, "test");
      auto t5 = std::make_shared<T5RelativeBias>(2, 8, 16, true, &init);
      EncoderBlock block(8, 2, 8, o, t5, &init);
      block.to(kFloat64);
      Tensor x = uniform({2, 3, 8}, -1, 1, kFloat64, 22).requires_grad_();
      Tensor pad = from_vector<bool>({false, false, true, false, false, false}, {2, 3});
      gradcheck_with_params({&block.ff->fc1->weight, &block.norm1->weight, &t5->table}, {x},
                            [&](const TensorList& in) { return block.forward(in[0], pad); });
      block.options.causal = true;  // the decoder-only use of the block
      gradcheck_with_params({&block.self_attn->q_proj->weight, &block.norm2->weight}, {x},
                            [&](const TensorList& in) { return block.forward(in[0]); });
    }
}

TEST_CASE("models: DecoderBlock gradcheck (float64), pre/post norm, w.r.t. x, memory and parameters") {
  for (bool pre : {true, false})
    for (const char* norm : {"layer_norm", "rms_norm"}) {
      INFO("pre_norm ", pre, ", norm ", norm);
      Generator init(23);
      BlockOptions o;
      o.pre_norm = pre;
      o.norm = norm_from_name(norm, "test");
      auto t5 = std::make_shared<T5RelativeBias>(2, 8, 16, false, &init);  // causal buckets
      auto seed = std::make_shared<SeedRelativeEmbedding>(4, 6, 0, OutOfRange::Zero, &init);
      DecoderBlock block(8, 2, 8, o, t5, seed, Alignment::Scaled, &init);
      block.to(kFloat64);
      Tensor x = uniform({2, 3, 8}, -1, 1, kFloat64, 24).requires_grad_();
      Tensor memory = uniform({2, 5, 8}, -1, 1, kFloat64, 25).requires_grad_();
      Tensor src_pad = from_vector<bool>({false, false, false, true, true, false, false, false, false, false}, {2, 5});
      gradcheck_with_params({&block.cross_attn->k_proj->weight, &block.norm3->weight, &seed->table, &t5->table},
                            {x, memory},
                            [&](const TensorList& in) { return block.forward(in[0], in[1], Tensor(), src_pad); });
    }
}

TEST_CASE("models: block child names and where the norms sit") {
  DecoderBlock dec(8, 2, 16);
  std::vector<std::string> children;
  for (const auto& [name, m] : dec.named_children()) children.push_back(name);
  CHECK(children == std::vector<std::string>{"self_attn", "cross_attn", "ff", "norm1", "norm2", "norm3", "dropout"});
  EncoderBlock enc(8, 2, 16);
  CHECK(enc.named_parameters().front().first == "self_attn.q_proj.weight");
  CHECK(enc.named_parameters().back().first == "norm2.bias");

  // Post-norm: the output is norm2's (fresh gain 1, bias 0), so every row has mean 0 and variance 1.
  BlockOptions post;
  post.pre_norm = false;
  EncoderBlock p(8, 2, 16, post);
  p.to(kFloat64);
  std::vector<double> y = values(p.forward(uniform({1, 4, 8}, -1, 1, kFloat64, 26)));
  for (int r = 0; r < 4; ++r) {
    double m = 0, v = 0;
    for (int c = 0; c < 8; ++c) m += y[r * 8 + c] / 8;
    for (int c = 0; c < 8; ++c) v += (y[r * 8 + c] - m) * (y[r * 8 + c] - m) / 8;
    CHECK(std::fabs(m) < 1e-12);
    CHECK(std::fabs(v - 1) < 1e-4);  // eps 1e-5 in the denominator
  }
  // Pre-norm: the residual stream passes untouched when both branches end in zero projections.
  EncoderBlock q(8, 2, 16);
  q.to(kFloat64);
  {
    NoGradGuard no_grad;
    for (Tensor t : {q.self_attn->out_proj->weight, q.self_attn->out_proj->bias, q.ff->fc2->weight, q.ff->fc2->bias})
      t.zero_();
  }
  Tensor x = uniform({1, 4, 8}, -3, 3, kFloat64, 27);
  CHECK_CLOSE(q.forward(x), x, 0, 0);
}

// ---- models: shapes, causality, padding ----

TEST_CASE("models: DecoderLM and EncoderDecoder forward shapes, for every scheme at every place") {
  for (const char* scheme : {"none", "seed", "huang", "shaw", "t5", "alibi", "rope", "transformer_xl"}) {
    INFO("scheme ", scheme);
    TransformerConfig c = small_config();
    c.decoder_self.scheme = scheme;
    c.decoder_self.max_length = 8;
    Generator init(30);
    DecoderLM lm(c, &init);
    Tensor logits = lm(tokens({1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, 2, 5));
    CHECK(logits.shape() == Shape{2, 5, 11});
    CHECK(logits.dtype() == kFloat32);

    std::string s = scheme;
    if (s != "huang") c.encoder_self = c.decoder_self;       // huang is causal only
    if (s != "huang" && s != "transformer_xl") c.cross = c.decoder_self;  // txl is self-attention only
    c.cross_alignment = CrossAlignment::Scaled;
    EncoderDecoder model(c, &init);
    Tensor out = model(tokens({1, 2, 12, 4, 5, 6, 7, 0}, 2, 4), tokens({1, 2, 3, 4, 5, 6}, 2, 3));
    CHECK(out.shape() == Shape{2, 3, 11});
  }
}

TEST_CASE("models: causality — a future token does not change earlier logits (DecoderLM, EncoderDecoder)") {
  for (const char* scheme : {"t5", "huang", "rope", "transformer_xl"}) {
    INFO("decoder_self ", scheme);
    TransformerConfig c = small_config();
    c.decoder_self.scheme = scheme;
    c.decoder_self.max_length = 8;
    c.cross.scheme = "seed";
    c.cross.max_length = 8;
    Generator init(31);
    DecoderLM lm(c, &init);
    lm.to(kFloat64);
    Tensor a = lm(tokens({1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, 2, 5));
    Tensor b = lm(tokens({1, 2, 3, 4, 9, 6, 7, 8, 9, 3}, 2, 5));  // last token of each row changed
    CHECK_CLOSE(first_steps(a, 4), first_steps(b, 4), 1e-12, 1e-10);
    CHECK(values(a) != values(b));  // the last step does see it

    EncoderDecoder model(c, &init);
    model.to(kFloat64);
    Tensor src = tokens({1, 2, 3, 4, 5, 6, 7, 8}, 2, 4);
    Tensor p = model(src, tokens({1, 2, 3, 4, 5, 6}, 2, 3));
    Tensor q = model(src, tokens({1, 2, 9, 4, 5, 1}, 2, 3));
    CHECK_CLOSE(first_steps(p, 2), first_steps(q, 2), 1e-12, 1e-10);
    CHECK(values(p) != values(q));
  }
}

TEST_CASE("models: a padded source token does not change the decoder logits") {
  TransformerConfig c = small_config();
  c.cross.scheme = "seed";
  c.cross.max_length = 8;
  for (bool pre : {true, false}) {
    INFO("pre_norm ", pre);
    c.pre_norm = pre;
    Generator init(32);
    EncoderDecoder model(c, &init);
    model.to(kFloat64);
    Tensor pad = from_vector<bool>({false, false, false, true, true, false, false, false, false, false}, {2, 5});
    Tensor tgt = tokens({1, 2, 3, 4, 5, 6}, 2, 3);
    Tensor a = model(tokens({1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, 2, 5), tgt, pad);
    Tensor b = model(tokens({1, 2, 3, 12, 0, 6, 7, 8, 9, 10}, 2, 5), tgt, pad);  // padded tokens changed
    CHECK_CLOSE(a, b, 1e-12, 1e-10);
    Tensor unmasked = model(tokens({1, 2, 3, 12, 0, 6, 7, 8, 9, 10}, 2, 5), tgt);
    CHECK(values(unmasked.select(0, 0)) != values(a.select(0, 0)));  // without the mask they matter
  }
}

// ---- parameters: sharing, tying, gradients ----

TEST_CASE("models: T5's table is one parameter per stack, listed once, trained by every layer") {
  TransformerConfig c = small_config();
  c.n_decoder_layers = 3;
  Generator init(33);
  DecoderLM lm(c, &init);
  CHECK(count_names_ending(lm, "positional.table") == 1);
  for (const auto& [name, p] : lm.named_parameters())
    if (name.find("positional") != std::string::npos) CHECK(name == "layers.0.self_attn.positional.table");
  CHECK((*lm.layers)[0].self_attn->positional == (*lm.layers)[2].self_attn->positional);

  EncoderDecoder model(c, &init);
  CHECK(count_names_ending(model, "positional.table") == 2);  // encoder's and decoder's; no cross by default
  CHECK((*model.decoder->layers)[0].cross_attn->positional == nullptr);
  c.cross.scheme = "t5";
  EncoderDecoder with_cross(c, &init);
  CHECK(count_names_ending(with_cross, "positional.table") == 3);
  c.decoder_self.scheme = "shaw";  // other learned schemes: tables per layer
  DecoderLM shaw(c, &init);
  CHECK(count_names_ending(shaw, "positional.key_table") == 3);

  // The shared table's gradient sums the three layers' contributions (gradcheck swaps the one handle).
  TransformerConfig t = small_config();
  t.vocab_size = 5;
  t.d_model = 4;
  t.d_ff = 4;
  t.decoder_self.num_buckets = 4;
  DecoderLM tiny(t, &init);
  tiny.to(kFloat64);
  auto* t5 = dynamic_cast<T5RelativeBias*>((*tiny.layers)[0].self_attn->positional.get());
  REQUIRE(t5);
  Tensor in = tokens({0, 3, 1, 4}, 1, 4);
  gradcheck_with_params({&t5->table}, {}, [&](const TensorList&) { return tiny(in); });
}

TEST_CASE("models: tied weights are one parameter, with gradient from the lookup and the head") {
  TransformerConfig c = small_config();
  c.vocab_size = 6;
  c.d_model = 4;
  c.d_ff = 4;
  c.n_decoder_layers = 1;
  Generator init(34);
  DecoderLM lm(c, &init);
  CHECK(lm.lm_head == nullptr);
  int embed_like = 0;
  for (const auto& [name, p] : lm.named_parameters()) embed_like += p.shape() == Shape{6, 4};
  CHECK(embed_like == 1);
  CHECK(lm.named_parameters().front().first == "embed.weight");
  lm.to(kFloat64);
  Tensor in = tokens({0, 2, 2, 1}, 1, 4);  // rows 3..5 are never looked up: only the head reaches them
  gradcheck_with_params({&lm.embed->weight}, {}, [&](const TensorList&) { return lm(in); });
  check_every_parameter_gets_gradient(lm, lm(in));
  std::vector<double> g = values(lm.embed->weight.grad());
  for (int r : {0, 5}) {
    double largest = 0;
    for (int k = 0; k < 4; ++k) largest = std::max(largest, std::fabs(g[r * 4 + k]));
    CHECK(largest > 0);
  }

  c.tie_weights = false;
  DecoderLM untied(c, &init);
  REQUIRE(untied.lm_head != nullptr);
  CHECK(untied.named_parameters().back().first == "lm_head.weight");
  CHECK_FALSE(untied.lm_head->bias.defined());

  c.n_encoder_layers = 1;
  c.tie_weights = true;
  EncoderDecoder ed(c, &init);
  CHECK(ed.lm_head == nullptr);
  ed.to(kFloat64);
  Tensor src = tokens({1, 3, 5}, 1, 3);
  gradcheck_with_params({&ed.decoder->embed->weight}, {}, [&](const TensorList&) { return ed(src, in); });
}

TEST_CASE("models: every parameter receives a gradient (pre and post norm, several schemes)") {
  for (bool pre : {true, false})
    for (const char* norm : {"layer_norm", "rms_norm"}) {
      INFO("pre_norm ", pre, ", norm ", norm);
      TransformerConfig c = small_config();
      c.pre_norm = pre;
      c.norm = norm_from_name(norm, "test");
      c.tie_weights = !pre;  // both head variants
      c.encoder_self.scheme = "shaw";
      c.cross.scheme = "seed";
      c.cross.max_length = 8;
      c.decoder_self.scheme = "transformer_xl";
      Generator init(35);
      EncoderDecoder model(c, &init);
      CHECK((model.encoder->final_norm != nullptr) == pre);
      CHECK(model.named_parameters().front().first == "encoder.embed.weight");
      bool found = false;
      for (const auto& [name, p] : model.named_parameters()) found |= name == "decoder.layers.1.cross_attn.q_proj.weight";
      CHECK(found);
      check_every_parameter_gets_gradient(
          model, model(tokens({1, 2, 3, 4, 5, 6, 7, 8}, 2, 4), tokens({1, 2, 3, 4, 5, 6}, 2, 3)));

      c.decoder_self.scheme = "t5";
      DecoderLM lm(c, &init);
      check_every_parameter_gets_gradient(lm, lm(tokens({1, 2, 3, 4, 5, 6}, 2, 3)));
    }
}

TEST_CASE("models: dropout is active in train mode and off in eval mode") {
  TransformerConfig c = small_config();
  c.dropout = 0.2;
  Generator init(36);
  DecoderLM lm(c, &init);
  Tensor in = tokens({1, 2, 3, 4, 5, 6}, 2, 3);
  CHECK(values(lm(in)) != values(lm(in)));
  lm.eval();
  CHECK(values(lm(in)) == values(lm(in)));
}

// ---- errors ----

TEST_CASE("models: bad configs and inputs are errors naming the model and the field") {
  TransformerConfig c = small_config();
  c.d_model = 10;
  c.n_heads = 4;
  check_throws_with([&] { DecoderLM lm(c); }, "[DecoderLM] d_model 10 must be divisible by n_heads 4");
  check_throws_with([&] { EncoderDecoder m(c); }, "[EncoderDecoder] d_model 10 must be divisible by n_heads 4");
  c = small_config();
  c.decoder_self.scheme = "sinusoid";
  check_throws_with([&] { DecoderLM lm(c); },
                    "[DecoderLM] unknown positional scheme 'sinusoid' for decoder_self (expected none, seed, huang, "
                    "shaw, t5, alibi, rope, transformer_xl, xpos, p_rope, pope, cope, fox, stick_breaking, kerple, "
                    "sandwich, dynamic_bias or fire)");
  c = small_config();
  c.cross.scheme = "T5";
  check_throws_with([&] { EncoderDecoder m(c); }, "[EncoderDecoder] unknown positional scheme 'T5' for cross");
  c = small_config();
  c.encoder_self.scheme = "huang";
  check_throws_with([&] { EncoderDecoder m(c); },
                    "[EncoderDecoder] positional scheme 'huang' needs causal attention; encoder_self is not causal");
  c = small_config();
  c.cross.scheme = "transformer_xl";
  check_throws_with([&] { EncoderDecoder m(c); },
                    "[EncoderDecoder] positional scheme 'transformer_xl' is for self-attention, not cross");
  // The names of model.norm and model.activation are their tables' (layers/norm.h, layers/feed_forward.h).
  check_throws_with([&] { norm_from_name("batch_norm", "DecoderLM"); },
                    "[DecoderLM] unknown norm 'batch_norm' (expected layer_norm or rms_norm)");
  c = small_config();
  c.vocab_size = 0;
  check_throws_with([&] { DecoderLM lm(c); }, "[DecoderLM] vocab_size must be positive, got 0");
  check_throws_with([&] { activation_from_name("swish", "DecoderLM"); }, "[DecoderLM] unknown activation 'swish'");

  DecoderLM lm(small_config());
  check_throws_with([&] { lm(from_vector<float>({1, 2}, {1, 2})); }, "[DecoderLM] tokens must be int64 (B, T), got float32 (1,2)");
  check_throws_with([&] { lm(from_vector<int64_t>({1, 2}, {2})); }, "[DecoderLM] tokens must be int64 (B, T), got int64 (2)");
  check_throws_with([&] { lm(tokens({1, 2}, 1, 2), from_vector<bool>({false}, {1, 1})); },
                    "[DecoderLM] tokens padding mask must be bool (1,2), got bool (1,1)");
  EncoderDecoder ed(small_config());
  check_throws_with([&] { ed(tokens({1, 2}, 1, 2), from_vector<float>({1}, {1, 1})); },
                    "[EncoderDecoder] tgt must be int64 (B, T)");

  check_throws_with([] { EncoderBlock(10, 4, 8); }, "[EncoderBlock] d_model 10 must be a positive multiple of n_heads 4");
  check_throws_with([&] { norm_from_name("group_norm", "DecoderBlock"); }, "[DecoderBlock] unknown norm 'group_norm'");
  BlockOptions o;
  o.causal = true;
  check_throws_with([&] { DecoderBlock(8, 2, 8, o); }, "[DecoderBlock] options.causal is for EncoderBlock");
}

// ---- training smoke test ----

TEST_CASE("models: a DecoderLM with T5 bias learns a fixed sequence with AdamW (loss falls by > 50% in 50 steps)") {
  TransformerConfig c;
  c.vocab_size = 8;
  c.d_model = 32;
  c.n_heads = 4;
  c.d_ff = 64;
  c.n_decoder_layers = 2;
  c.dropout = 0.0;
  c.decoder_self.scheme = "t5";
  Generator init(37);
  DecoderLM lm(c, &init);
  const std::vector<int64_t> seq = {1, 5, 2, 7, 3, 3, 6, 4, 1, 5, 2, 7, 3, 3, 6, 4, 0};
  const int64_t T = static_cast<int64_t>(seq.size()) - 1;
  Tensor input = tokens(std::vector<int64_t>(seq.begin(), seq.end() - 1), 1, T);
  Tensor target = from_vector<int64_t>(std::vector<int64_t>(seq.begin() + 1, seq.end()), {T});
  AdamW opt(decay_groups(lm.named_parameters(), 3e-3, 0.01), AdamWOptions(3e-3));
  double first = 0, last = 0;
  for (int step = 0; step < 50; ++step) {
    opt.zero_grad();
    Tensor loss = cross_entropy(lm(input).reshape({T, c.vocab_size}), target);
    loss.backward();
    opt.step();
    if (step == 0) first = loss.item();
    last = loss.item();
  }
  INFO("loss ", first, " → ", last);
  CHECK(std::isfinite(last));
  CHECK(last < 0.5 * first);
}
