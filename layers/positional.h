// PositionalScheme: how an attention layer uses positions. A scheme may act at five places of
//   logits  = (content(q, k) + score_term(q)) · logit_scale + logit_bias        (B, H, t2, t1)
//   weights = softmax(mask(logits));   out = weights · v + value_term(weights)  (B, H, t2, D)
// and each scheme overrides only the places its paper uses (docs/relative-attention.md has the table):
//   Shaw, Huang, the seed's method, Transformer-XL: score_term (scaled with q·k by 1/√D); Shaw's a^V:
//   value_term; T5: logit_bias with logit_scale 1 (T5 has no 1/√D); ALiBi: logit_bias;
//   RoPE and Transformer-XL's u: the content pair (content_query, content_key). Content-dependent
//   schemes (CoPE, FoX, stick-breaking) add a bias or weights that read q and k: see the class's end.
// Beyond the five places a scheme answers for itself what the rest of relgrad asks of it, so no caller
// needs to know its type: its config name (name), its terms for the fused core or "not fusable" (fuse),
// and the positional response the probe reports (response).
// Schemes are Modules, so their tables are parameters; one scheme object may be shared by several
// layers (T5 shares its table across a stack). layers/schemes.h registers them by config name.
#pragma once
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "core/base/name_table.h"
#include "core/device_cache.h"
#include "layers/module.h"

namespace relgrad {

// What a scheme needs to know about the attention it serves.
struct AttentionGeometry {
  int64_t batch = 0, heads = 0, head_dim = 0;
  int64_t t2 = 0;                          // queries
  int64_t t1 = 0;                          // keys
  bool causal = false;
  Alignment alignment = Alignment::Left;   // π(i): where query i sits on the key axis
  Tensor query_positions;                  // optional explicit π(i), int64 (t2)
  // The keys come from a KV cache that stored them through content_key already (cached decoding).
  bool keys_in_content_form = false;
  Tensor key_state;                        // optional (B, H, t1, S): PositionalScheme::key_state of every key
  // The geometry of split heads: B batches, H heads of size D, t2 queries, t1 keys.
  static AttentionGeometry make(int64_t B, int64_t H, int64_t D, int64_t t2, int64_t t1, bool causal) {
    AttentionGeometry g;
    g.batch = B;
    g.heads = H;
    g.head_dim = D;
    g.t2 = t2;
    g.t1 = t1;
    g.causal = causal;
    return g;
  }
  // π(i) for every query, int64 (t2).
  Tensor positions() const { return query_positions.defined() ? query_positions : query_positions_for(t2, t1, alignment); }
  static Tensor query_positions_for(int64_t t2, int64_t t1, Alignment a) { return relgrad::query_positions(t2, t1, a); }
};

// One call of the fused core (attention_heads_fused, layers/attention.h) as a scheme sees it. The caller
// has set options.scale (the scheme's logit_scale), causal, query_positions, key_padding_mask and
// min_delta; a scheme puts its content pair into q, k and its tables into options. Lookups cover the
// distances δ = min_delta + w, w = 0 … width − 1: every δ that keys 0 … t1 − 1 reach from every π(i).
struct FusedCall {
  Tensor q, k;                     // (B,H,t2,D), (B,H,t1,D): the content pair
  FlashAttentionOptions options;
  std::vector<int64_t> positions;  // π(i) on the host, t2 entries
  int64_t min_delta = 0, width = 0;
};

// What the probe (train/instruments/probe.h) knows of one attention's eval forward. Shapes: B batch,
// H heads, D head size, t2 queries, t1 keys; tensors detached.
struct ResponseInput {
  Tensor q, k;                         // (B,H,t2,D), (B,H,t1,D): projected, before the scheme
  std::vector<int64_t> positions;      // π(i), t2 entries
  std::vector<bool> query_valid;       // (B, t2) row-major: not padding
  std::vector<bool> key_valid;         // (B, t1) row-major: not padding
  bool causal = false;
  AttentionGeometry geometry;          // B, H, D, t2, t1, causal of the forward, and its key_state
};

class PositionalScheme : public Module {
 public:
  // The config name (layers/schemes.h: "seed", "t5", …); the probe reports curves under it.
  virtual std::string name() const = 0;
  // The content pair whose product q·kᵀ gives the content logits, one side at a time: q (B,H,t2,D)
  // against the geometry, and keys k (B,H,t,D) by their own positions alone (int64 (t)), so a KV cache
  // can store keys in this form once (RoPE rotates them; Transformer-XL adds u to q).
  virtual Tensor content_query(const Tensor& q, const AttentionGeometry&) const { return q; }
  virtual Tensor content_key(const Tensor& k, const Tensor& /*key_positions*/) const { return k; }
  // Both sides, keys at 0 … t1 − 1 (left as they are when g.keys_in_content_form).
  std::pair<Tensor, Tensor> content_qk(const Tensor& q, const Tensor& k, const AttentionGeometry& g) const {
    Tensor qc = content_query(q, g);
    if (g.keys_in_content_form) return {qc, k};
    return {qc, content_key(k, arange(static_cast<double>(k.size(-2)), kInt64))};
  }
  // A q-dependent term (B,H,t2,t1) added to the content logits before scaling; undefined = none.
  virtual Tensor score_term(const Tensor& /*q*/, const AttentionGeometry&) const { return Tensor(); }
  // The factor on content + score_term.
  virtual double logit_scale(int64_t head_dim) const { return 1.0 / std::sqrt(static_cast<double>(head_dim)); }
  // A bias added after scaling, broadcastable to (B,H,t2,t1); undefined = none.
  virtual Tensor logit_bias(const AttentionGeometry&) const { return Tensor(); }
  // weights (B,H,t2,t1) → a term (B,H,t2,D) added to weights·v; undefined = none.
  virtual Tensor value_term(const Tensor& /*weights*/, const AttentionGeometry&) const { return Tensor(); }

  // Fills `call` with this scheme's terms for the fused core and returns true, or returns false when the
  // fused core cannot serve this call (a term it has no slot for, a mismatch the composite path reports):
  // the composite core then runs. Default: not fusable, so a new scheme is correct before it is fast.
  virtual bool fuse(FusedCall& /*call*/, const AttentionGeometry&) const { return false; }
  // The positional part of the logits at δ = −reach … reach, per head: H rows of 2·reach + 1 values in
  // the units they enter the logits (after every scale); NaN = undefined. Empty (the default): no
  // response curve. The probe sets δ > 0 to NaN itself under causal attention.
  virtual std::vector<std::vector<double>> response(const ResponseInput&, int64_t /*reach*/) const { return {}; }
  // Randomised positions (TransformerConfig::random_positions_max; its registry entry says
  // random_positions): while `map` is defined (int64 (n)), index p stands at position map[p] for every
  // key and query of a call; undefined clears it. The default reads no explicit positions: false.
  virtual bool set_position_map(const Tensor& /*map*/) { return false; }

  // ---- content-dependent schemes (layers/contextual.h): terms that read the content itself ----
  // A per-key state (B,H,t,S) from the layer's key-side input (B,t,C) that depends on each key's own
  // input alone (FoX's log forget gates), so a KV cache keeps it beside the keys (KVCache::s) and the
  // attention hands every key's state on as g.key_state; undefined = none.
  virtual Tensor key_state(const Tensor& /*key_input*/) const { return Tensor(); }
  // A bias (B,H,t2,t1) added after scaling, with logit_bias, that reads the content: q (B,H,t2,D) as
  // projected, the keys k (B,H,t1,D) as the content pair holds them, the core's bool mask (broadcastable,
  // true = hidden; undefined = none) and g.key_state (CoPE's q·e[p_ij], FoX's c_i − c_j); undefined = none.
  virtual Tensor content_bias(const Tensor& /*q*/, const Tensor& /*k*/, const Tensor& /*mask*/,
                              const AttentionGeometry&) const { return Tensor(); }
  // The weights (B,H,t2,t1) from the logits before scaling and the core's mask, scale and bias, in place
  // of softmax(mask(logits · scale + bias)) (stick-breaking); undefined = softmax.
  virtual Tensor attention_weights(const Tensor& /*logits*/, const Tensor& /*mask*/, double /*scale*/,
                                   const Tensor& /*bias*/, const AttentionGeometry&) const { return Tensor(); }
};

// ---- helpers the schemes share (layers/positional.cpp) ----

// Caching (core/device_cache.h). Masks, index maps, bucket maps, distance and rotary tables are
// functions of the geometry and the scheme's settings: each layer or scheme builds one once per key,
// on the device it is used on, and a training step after the first copies none of them to the GPU.
// geometry_key: the lengths, causality and where the queries sit (the alignment, or explicit
// positions by value), then `settings` (the scheme's own values the content depends on).
CacheKey geometry_key(const AttentionGeometry& g, std::vector<int64_t> settings, DType dtype, Device device);
// A double setting (RoPE's base) as key bits.
int64_t key_bits(double v);

// relative_index(g.t2, g.t1, o) on `device`. With `trim`, only the rows some pair reads: entries
// shifted by first_row, rows = the rows left (else first_row 0, rows = o.table_size()).
struct RelativeMap {
  Tensor index;  // int64 (t2, t1), −1 = no entry
  int64_t first_row = 0, rows = 0;
  // (t2, rows): the rows each query reads lie in its window (built with trim, which makes them a band),
  // so q times the table's rows can skip the rest (window_scores: autograd/ops.h).
  WindowPtr window;
};
// The map cached process-wide by everything relative_index reads (the options and the geometry), so
// the layers of a stack with the same settings share one copy (t2·t1 int64 each; the 32 most recent).
// relative_index's errors (the Error policy) are thrown at every call, never cached.
RelativeMap cached_relative_map(const AttentionGeometry& g, const RelativeIndexOptions& o, Device device, bool trim);
const LruCache<CacheKey, RelativeMap>& relative_map_cache();  // its statistics (tests)

// The table row a learned table reads for relative position δ under `o` (relative_index's rules):
// row = δ + max_past inside the table; causal: none for δ > 0; beyond the table the edge row (Clip) or
// none (Zero, Error). −1 = no entry.
int64_t relative_row(int64_t delta, const RelativeIndexOptions& o);
// The fused core's row lookup int64 (width) for a learned table under `o`. Under the Error policy every
// distance a visible pair reaches must be in the table: checked per query, O(t2), with relative_index's
// wording (`scheme` names the error).
Tensor fused_table_rows(const RelativeIndexOptions& o, const FusedCall& call, int64_t t1, const char* scheme);
// q̄: the mean query of each head over the non-padding queries, (H·D) row-major; NaN without any.
std::vector<double> mean_query(const ResponseInput& in);
// (scale)·q̄_h·e_{h,δ} for a key table (rows, D) shared (table_heads = 0) or (H, rows, D) per head, at
// δ = −reach … reach: no entry gives 0, except off an Error table, where the model would refuse: NaN.
std::vector<std::vector<double>> table_response(const ResponseInput& in, const Tensor& table, int64_t table_heads,
                                                const RelativeIndexOptions& o, double scale, int64_t reach);
// An offset as the reports write it ("−3", "+2", "0"), and a run of them ("−5 … −3"; one: "−3").
std::string signed_offset_text(int64_t delta);
std::string offsets_text(const std::vector<int64_t>& deltas);
// A tensor's values as host doubles.
std::vector<double> host_values(const Tensor& t);
// The mean of a term (B, H, t2, t1) times `scale` over the valid pairs of `in` (not padding, not
// causally hidden) at each δ = −reach … reach, per head; NaN where no pair falls: a measured response
// (the content-pair schemes' through measured_content_response, layers/rotary.h; layers/contextual.h's).
std::vector<std::vector<double>> mean_by_delta(const ResponseInput& in, const Tensor& term, int64_t reach,
                                               double scale = 1.0);

// The config's names of the relative-position enums (autograd/ops.h): model.cross_alignment (with
// "explicit" besides, train/config/config.cpp) and model.<place>.out_of_range (PositionalConfig).
inline constexpr NameTable<Alignment, 3> kAlignmentNames{
    {{Alignment::Left, "left"}, {Alignment::Right, "right"}, {Alignment::Scaled, "scaled"}}};
inline constexpr NameTable<OutOfRange, 3> kOutOfRangeNames{
    {{OutOfRange::Zero, "zero"}, {OutOfRange::Clip, "clip"}, {OutOfRange::Error, "error"}}};

}  // namespace relgrad
