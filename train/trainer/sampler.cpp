#include "train/trainer/sampler.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>

namespace relgrad {

void check_sampling_options(const SamplingOptions& o) {
  const char* op = "generate";
  RG_CHECK(o.max_new_tokens >= 0, op, "max_new_tokens must be >= 0, got ", o.max_new_tokens);
  RG_CHECK(std::isfinite(o.temperature) && o.temperature >= 0, op,
           "temperature must be finite and >= 0 (0 = greedy), got ", o.temperature);
  RG_CHECK(o.top_k >= 0, op, "top_k must be >= 0 (0 = off), got ", o.top_k);
  RG_CHECK(o.top_p > 0 && o.top_p <= 1, op, "top_p must be in (0, 1] (1 = off), got ", o.top_p);
  RG_CHECK(o.window >= 0, op, "window must be >= 0 (0 = every token), got ", o.window);
}

std::vector<double> sampling_distribution(const std::vector<double>& z, const SamplingOptions& o) {
  const size_t V = z.size();
  RG_CHECK(V > 0, "generate", "empty logits");
  std::vector<double> p(V, 0.0);
  // Ids by descending logit, ties by id: the order every filter below keeps a prefix of.
  std::vector<size_t> order(V);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return z[a] > z[b]; });
  if (o.temperature == 0) {
    p[order[0]] = 1.0;
    return p;
  }
  size_t kept = o.top_k > 0 ? std::min(V, static_cast<size_t>(o.top_k)) : V;
  // exp((z − max) / temperature): the tempered softmax up to its normaliser, which the
  // renormalisations below supply (top-p's mass is of the tempered distribution, as Hugging Face
  // applies its warpers: temperature, top-k, top-p).
  const double zmax = z[order[0]];
  for (size_t r = 0; r < V; ++r) p[order[r]] = std::exp((z[order[r]] - zmax) / o.temperature);
  // Renormalise over the top-k first: nucleus then works on the distribution top-k left.
  double kept_mass = 0;
  for (size_t r = 0; r < kept; ++r) kept_mass += p[order[r]];
  if (o.top_p < 1) {
    double cumulative = 0;
    size_t n = 0;
    while (n < kept) {
      cumulative += p[order[n]] / kept_mass;
      ++n;
      if (cumulative >= o.top_p) break;
    }
    kept = n;  // the smallest prefix with mass ≥ top_p (all of the top-k if rounding falls short)
  }
  double mass = 0;
  for (size_t r = 0; r < kept; ++r) mass += p[order[r]];
  for (size_t r = 0; r < V; ++r) p[order[r]] = r < kept ? p[order[r]] / mass : 0.0;
  return p;
}

std::vector<int64_t> sample_rows(const Tensor& logits, const std::vector<double>& u, const SamplingOptions& o) {
  RG_CHECK_T(ShapeError, logits.dim() == 2 && static_cast<int64_t>(u.size()) == logits.size(0), "generate",
             "expected logits (B, V) and B uniforms, got ", shape_str(logits.shape()), " and ", u.size());
  const int64_t B = logits.size(0), V = logits.size(1);
  std::vector<double> all = logits.to(Device::cpu()).to(kFloat64).contiguous().to_vector<double>();
  std::vector<int64_t> ids(static_cast<size_t>(B));
  for (int64_t b = 0; b < B; ++b) {
    std::vector<double> z(all.begin() + b * V, all.begin() + (b + 1) * V);
    std::vector<double> p = sampling_distribution(z, o);
    // Inverse CDF, walking ids in the same (descending, ties by id) order as the filters; the last
    // kept id takes whatever rounding leaves above the final cumulative sum.
    std::vector<size_t> order(static_cast<size_t>(V));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t c) { return p[a] > p[c]; });
    double cumulative = 0;
    size_t pick = order[0];
    for (size_t id : order) {
      if (p[id] == 0) break;
      pick = id;
      cumulative += p[id];
      if (u[b] < cumulative) break;
    }
    ids[b] = static_cast<int64_t>(pick);
  }
  return ids;
}

namespace {

// The decoding loop shared by both models. `step(new_tokens, all_tokens)` returns the logits
// (B, t, V) of the last positions: of new_tokens with a cache, of all_tokens without.
Tensor decode_loop(Tensor seq, const SamplingOptions& o,
                   const std::function<Tensor(const Tensor&, const Tensor&)>& step) {
  const int64_t B = seq.size(0);
  Generator generator(o.seed);
  std::vector<bool> done(static_cast<size_t>(B), false);
  Tensor fresh = seq;  // what the cache has not seen yet
  for (int64_t n = 0; n < o.max_new_tokens; ++n) {
    Tensor logits = step(fresh, seq);                                    // (B, t, V)
    Tensor last = logits.narrow(1, logits.size(1) - 1, 1).reshape({B, logits.size(2)});  // (B, V)
    // One draw per step, greedy or not, so the stream depends only on (seed, step).
    std::vector<double> u = rand({B}, kFloat64, &generator).to_vector<double>();
    std::vector<int64_t> ids = sample_rows(last, u, o);
    bool all_done = true;
    for (int64_t b = 0; b < B; ++b) {
      if (done[b]) ids[b] = kPad;
      else if (ids[b] == o.eos) done[b] = true;
      all_done = all_done && done[b];
    }
    fresh = from_vector<int64_t>(ids, {B, 1}).to(seq.device());
    seq = cat({seq, fresh}, 1);
    if (all_done) break;
  }
  return seq;
}

}  // namespace

Tensor generate(DecoderLM& model, const Tensor& prompt, const SamplingOptions& o, bool use_cache) {
  check_sampling_options(o);
  RG_CHECK_T(DTypeError, prompt.defined() && prompt.dtype() == kInt64 && prompt.dim() == 2 && prompt.size(1) >= 1,
             "generate", "prompt must be int64 (B, T) with T >= 1, got ",
             prompt.defined() ? dtype_name(prompt.dtype()) + std::string(" ") + shape_str(prompt.shape())
                              : std::string("undefined"));
  NoGradGuard no_grad;
  EvalScope eval(model);
  std::vector<LayerCache> cache;
  // Decoding runs where the model is; the ids come back to the host once per step (sample_rows).
  return decode_loop(prompt.to(device_of(model)), o, [&](const Tensor& fresh, const Tensor& all) {
    const int64_t T = all.size(1);
    if (o.window > 0 && T > o.window) {  // past the window: its last W tokens, recomputed (sampler.h)
      cache.clear();
      return model.forward(all.narrow(1, T - o.window, o.window));
    }
    return use_cache ? model.forward(fresh, Tensor(), &cache) : model.forward(all);
  });
}

Tensor generate(EncoderDecoder& model, const Tensor& src, const Tensor& src_padding_mask, const SamplingOptions& o,
                bool use_cache, const Tensor& tgt_positions) {
  check_sampling_options(o);
  RG_CHECK(o.window == 0, "generate", "window = ", o.window,
           ": a sliding window is for decoder-only models; an encoder-decoder's target is not windowed");
  const bool explicit_positions = model.config.explicit_cross();
  RG_CHECK(!explicit_positions || tgt_positions.defined(), "generate",
           "the model places its cross-attention queries explicitly (model.cross_alignment = \"explicit\"): "
           "give tgt_positions");
  RG_CHECK(explicit_positions || !tgt_positions.defined(), "generate",
           "tgt_positions given, but the model aligns cross-attention itself (model.cross_alignment = \"" +
               std::string(kCrossAlignmentNames.name(model.config.cross_alignment)) + "\")");
  if (explicit_positions)
    RG_CHECK_T(ShapeError, tgt_positions.dtype() == kInt64 && tgt_positions.dim() == 1 &&
                               tgt_positions.size(0) >= 1 + o.max_new_tokens,
               "generate", "tgt_positions must be int64 (L) with L >= 1 + max_new_tokens = ", 1 + o.max_new_tokens,
               ", got ", dtype_name(tgt_positions.dtype()), " ", shape_str(tgt_positions.shape()));
  NoGradGuard no_grad;
  EvalScope eval(model);
  const Device device = device_of(model);  // decoding runs where the model is
  const Tensor src_on = src.to(device);
  const Tensor src_padding_mask_on = src_padding_mask.defined() ? src_padding_mask.to(device) : Tensor();
  const Tensor positions_on = explicit_positions ? tgt_positions.to(device) : Tensor();
  // The positions of target tokens [from, from + n).
  auto positions = [&](int64_t from, int64_t n) { return explicit_positions ? positions_on.narrow(0, from, n) : Tensor(); };
  Tensor memory = model.encode(src_on, src_padding_mask_on);  // (B, t1, C), once
  Tensor bos = full({src.size(0), 1}, static_cast<double>(kBos), kInt64).to(device);
  // Under Right or Scaled cross alignment every target position moves as the target grows, so a
  // cache would go stale (layers/blocks.h): recompute the prefix instead. Explicit positions stay put.
  const bool cacheable = explicit_positions || model.config.cross_alignment == CrossAlignment::Left ||
                         !has_positional_term(model.config.cross);
  use_cache = use_cache && cacheable;
  std::vector<LayerCache> cache;
  int64_t cached = 0;  // target tokens the cache holds
  return decode_loop(bos, o, [&](const Tensor& fresh, const Tensor& all) {
    if (!use_cache) return model.decode(all, memory, src_padding_mask_on, Tensor(), positions(0, all.size(1)));
    // Explicit positions cover the cached tokens and the new ones (EncoderDecoder::decode).
    Tensor logits = model.decode(fresh, memory, src_padding_mask_on, Tensor(), &cache,
                                 positions(0, cached + fresh.size(1)));
    cached += fresh.size(1);
    return logits;
  });
}

}  // namespace relgrad
