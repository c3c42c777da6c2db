// Relative-position schemes that add a per-head scalar to the logits (PositionalScheme::logit_bias):
//   T5RelativeBias: a learned table (H, num_buckets) indexed by T5's log bucket of δ = j − π(i);
//                   added to *unscaled* logits (logit_scale 1: T5 has no 1/√D, it is folded into init).
//   ALiBi:          a fixed slope per head times the distance, added after the usual 1/√D scaling.
// Both return a (1, H, t2, t1) bias that broadcasts over the batch; relative position is δ = j − π(i)
// (key minus query, README), with π(i) from the attention's alignment or explicit positions.
#pragma once
#include <cstdlib>
#include <vector>

#include "layers/positional.h"

namespace relgrad {

// T5's bucket for relative position δ = j − π(i) (HF `_relative_position_bucket`, mesh-tf):
//   bidirectional: the lower half [0, nb/2) holds δ ≤ 0 by |δ|, the upper half holds δ > 0 (bucket
//                  nb/2, "future at distance 0", is never produced);
//   causal:        all nb buckets hold the past by −δ; every δ > 0 falls into bucket 0 (masked anyway).
// Within a half of n buckets: distances below n/2 are exact, the rest log-spaced up to max_distance,
// truncated (floor) and clamped to the last bucket. HF's values: tests/test_relative_bias.cpp.
int64_t t5_relative_bucket(int64_t delta, bool bidirectional, int64_t num_buckets, int64_t max_distance);
// The largest d such that every past offset −d ≤ δ ≤ 0 has a bucket of its own (no other offset
// shares it): T5's exact range. Bidirectional buckets (cross and encoder attention: each sign gets
// num_buckets/2 buckets, the first half of them exact) give num_buckets/4 − 1, 7 at the default 32;
// causal ones (decoder self-attention: all buckets for the past) num_buckets/2 − 1, 15 at 32; a log
// bucket narrow enough to hold one distance extends it. Computed from layers/relative_bias.h's
// t5_relative_bucket, not assumed.
int64_t t5_exact_reach(bool bidirectional, int64_t num_buckets, int64_t max_distance);
// The offsets (same sign as delta) sharing delta's bucket, ascending; {delta} when it is exact.
std::vector<int64_t> t5_bucket_members(int64_t delta, bool bidirectional, int64_t num_buckets,
                                       int64_t max_distance);


struct PositionalConfig;  // layers/schemes.h
struct SchemeCheck;

class T5RelativeBias : public PositionalScheme {
 public:
  // The table starts ~ N(0, 1) like nn.Embedding (HF scales by factor·d_model^-0.5; pass a generator
  // for reproducible init). Share one object across the layers of a stack (T5 does).
  T5RelativeBias(int64_t num_heads, int64_t num_buckets = 32, int64_t max_distance = 128, bool bidirectional = true,
                 Generator* init_generator = nullptr);
  std::string name() const override { return "t5"; }
  double logit_scale(int64_t) const override { return 1.0; }  // T5 adds q·k and the bias unscaled
  Tensor logit_bias(const AttentionGeometry& g) const override;  // (1, H, t2, t1)
  bool fuse(FusedCall& call, const AttentionGeometry& g) const override;
  // β[h, bucket(δ)]: the table itself, the same for every layer that shares it.
  std::vector<std::vector<double>> response(const ResponseInput& in, int64_t reach) const override;

  // Bucket of every (query i, key j), int64 (t2, t1), queries at `positions` (int64 (t2)), keys at 0..t1−1.
  Tensor bucket_index(int64_t t2, int64_t t1, const Tensor& positions) const;
  // Each half of a bidirectional table (the whole causal one) has 2 buckets or more, and max_distance
  // lies beyond the exact buckets (half of each half): the constructor's conditions, by config key.
  static std::string check(const SchemeCheck& c);
  static double parameters(const PositionalConfig& p, double n_heads, double head_dim);  // buckets·H per stack

  int64_t num_heads, num_buckets, max_distance;
  bool bidirectional;
  Tensor table;  // (H, num_buckets): one scalar per bucket per head
  mutable LruCache<CacheKey, Tensor> bucket_maps{8};  // (t2, t1) on the table's device, by geometry and settings
};

// ALiBi's official slopes for any head count (ofirpress get_slopes): for a power of two n the
// geometric sequence 2^(−8k/n), k = 1..n; otherwise the slopes for the largest power of two c < n,
// then every other slope of the 2c list for the remaining n − c heads (Press et al. 2022).
std::vector<double> alibi_slopes(int64_t num_heads);

class ALiBi : public PositionalScheme {
 public:
  // causal (paper):   bias = −m_h · (π(i) − j) for keys j ≤ π(i); needs a causal mask (later keys get 0
  //                   here and are hidden by the mask; without it the paper's formula would *reward*
  //                   far-future keys, so that use is an error).
  // bidirectional:    bias = −m_h · |j − π(i)| (symmetric, as x-transformers and flash-attn's
  //                   alibi_slopes); it cannot tell left from right on its own.
  explicit ALiBi(int64_t num_heads, bool bidirectional = false);
  std::string name() const override { return "alibi"; }
  Tensor logit_bias(const AttentionGeometry& g) const override;  // (1, H, t2, t1), added after 1/√D
  bool fuse(FusedCall& call, const AttentionGeometry& g) const override;
  std::vector<std::vector<double>> response(const ResponseInput& in, int64_t reach) const override;  // −m_h·dist(δ)

  // The distance the slope multiplies at δ = j − π(i): |δ| (bidirectional) or π(i) − j for the past
  // (causal; later keys get 0 and are masked). The one place ALiBi's rule is written.
  double distance(int64_t delta) const {
    return static_cast<double>(bidirectional ? std::abs(delta) : delta <= 0 ? -delta : 0);
  }

  int64_t num_heads;
  bool bidirectional;
  Tensor slopes;  // buffer (H): fixed, not trained
  mutable LruCache<CacheKey, Tensor> distance_tables{8};        // (1, 1, t2, t1) by geometry (logit_bias)
  mutable LruCache<CacheKey, Tensor> fused_distance_tables{8};  // (1, W) by distance range (fuse)
};

}  // namespace relgrad
