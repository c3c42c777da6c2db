// Sampling from a DecoderLM or an EncoderDecoder: greedy, temperature, top-k, top-p (nucleus),
// seeded, with a KV cache (layers/attention.h) or by re-running the full prefix at every step.
//
// One step, per row, on the last position's logits z (V), in float64 on the host:
//   temperature 0:  the argmax (the lowest id among ties); nothing is drawn from the distribution
//   otherwise:      p = softmax(z / temperature); top_k > 0 keeps the k most likely ids; top_p < 1
//                   then keeps the smallest set of the most likely ids whose mass is ≥ top_p; the
//                   kept probabilities are renormalised and one id is drawn by inverse CDF.
// Ties are ordered by id, so the kept set is well defined.
//
// Determinism: every step takes one draw, rand((B), float64) from a Generator seeded with `seed`
// (core/rng.h: a draw's numbers depend only on the seed and the step index, a Philox counter), so
// the same seed gives the same samples, cached or not, on any thread count.
//
// Token conventions (train/data/data.h): EOS (2) ends a row; once every row has produced it, generation
// stops early. A finished row is filled with PAD (0). eos < 0 never stops.
#pragma once
#include <cstdint>
#include <vector>

#include "layers/models.h"
#include "train/data/data.h"

namespace relgrad {

struct SamplingOptions {
  int64_t max_new_tokens = 32;
  double temperature = 1.0;  // 0 = greedy
  int64_t top_k = 0;         // 0 = no top-k filter
  double top_p = 1.0;        // in (0, 1]; 1 = no nucleus filter
  uint64_t seed = 0;
  int64_t eos = kEos;        // stop token; negative = none
  // Decoder-only: > 0, each step predicts from the last `window` tokens only, as if the sequence
  // began there (nanoGPT's crop to its block size); 0 = from every token. See generate().
  int64_t window = 0;

  SamplingOptions& max_new_tokens_(int64_t n) { max_new_tokens = n; return *this; }
  SamplingOptions& temperature_(double t) { temperature = t; return *this; }
  SamplingOptions& top_k_(int64_t k) { top_k = k; return *this; }
  SamplingOptions& top_p_(double p) { top_p = p; return *this; }
  SamplingOptions& seed_(uint64_t s) { seed = s; return *this; }
  SamplingOptions& eos_(int64_t e) { eos = e; return *this; }
  SamplingOptions& window_(int64_t w) { window = w; return *this; }
};

// Throws relgrad::Error "[generate] ..." naming the bad field.
void check_sampling_options(const SamplingOptions& options);

// The distribution one step samples from, for logits z (V): after temperature, top-k and top-p,
// renormalised; zero outside the kept set. Greedy (temperature 0): one-hot at the argmax.
std::vector<double> sampling_distribution(const std::vector<double>& logits, const SamplingOptions& options);

// One id per row of logits (B, V), using uniforms u (B) in [0, 1) (unused when greedy) → int64 (B).
std::vector<int64_t> sample_rows(const Tensor& logits, const std::vector<double>& u, const SamplingOptions& options);

// Decoder-only: prompt int64 (B, T), T ≥ 1 → int64 (B, T + n), the prompt followed by n ≤
// max_new_tokens new tokens. Runs in eval mode under NoGradGuard (the model's mode is restored).
// Both generate()s run on the model's device (device_of): the inputs are copied there and the result
// is on it; each step copies only the last logits (B, V) to the host to draw the next ids.
// With options.window = W > 0, a step whose sequence is longer than W runs the model over its last W
// tokens alone (positions 0 … W − 1 again), so every prediction sees what training showed the model.
// The cache serves while the sequence fits in W; past it every step recomputes its window: a cached
// key of layer 2 and above was computed from tokens the window has since dropped, so no rolling cache
// equals the recompute for a model of more than one layer (docs/extrapolation.md).
Tensor generate(DecoderLM& model, const Tensor& prompt, const SamplingOptions& options, bool use_cache = true);

// Encoder–decoder: src int64 (B, t1), src_padding_mask optional bool (B, t1) → int64 (B, 1 + n):
// BOS then n ≤ max_new_tokens tokens. The source is encoded once. With a cross scheme under Right
// or Scaled alignment the cache cannot be exact (layers/blocks.h), so the prefix is recomputed.
// tgt_positions int64 (L), L ≥ 1 + max_new_tokens: where each target query sits on the source axis,
// for a model with config.cross_alignment Explicit (required there, refused otherwise); a target of t tokens
// uses its first t entries (the positions of a prefix do not depend on what follows it).
Tensor generate(EncoderDecoder& model, const Tensor& src, const Tensor& src_padding_mask,
                const SamplingOptions& options, bool use_cache = true, const Tensor& tgt_positions = Tensor());

}  // namespace relgrad
