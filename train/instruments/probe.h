// Instruments that show what learned relative positions do (the API behind `relgrad probe`):
//
//   RunModel model = load_run("runs/default/checkpoint.safetensors").model;
//   Batch batch = data.batch(0, Split::HeldOut);
//   std::vector<ProbeCurve> curves = probe(model, batch);      // one eval forward, both kinds
//   std::cout << probe_table(curves);
//   write_probe_pictures(curves, "runs/default/probe");         // heatmaps (PNG), curves (SVG)
//
// Relative position is δ = j − π(i) (key minus query, negative = past; README), π(i) the query's
// position on the key axis: i for self-attention, the DecoderBlock's cross_alignment for
// cross-attention (Left i, Right i + t1 − t2, Scaled ⌊i·t1/t2⌋). Every curve covers δ = −R … R.
//
// Two kinds of curve, per attention module ("encoder.layers.0.self_attn", "decoder.layers.1.cross_attn",
// DecoderLM "layers.0.self_attn") and head h:
//
// kind "attention_mass" (any scheme, also "none"): the measured share of attention at offset δ,
//   mass_h(δ) = (1/N) Σ_{b, i} Σ_{j : j − π(i) = δ} w[b, h, i, j]
// over the N queries (b, i) that are not padding and see at least one key; w (B, H, t2, t1) are the
// module's weights (MultiHeadAttention::record_weights, eval mode, no grad), zero on masked keys.
// Σ_δ mass_h(δ) + outside_h = 1, where `outside` is the share beyond |δ| > R.
//
// kind "response": the positional part of the logits, in the units it enters them (after every
// scale, so all schemes compare; an undefined value is NaN: see below):
//   t5              β[h, bucket(δ)]                       T5 adds it to unscaled logits (logit_scale 1).
//                   One table per stack: reported ONCE, under the first layer that uses it, with
//                   `shared_by` naming every layer of the stack.
//   alibi           −m_h·|δ| (bidirectional) or −m_h·(−δ) for δ ≤ 0 (causal); added after 1/√D.
//   seed, huang,    (1/√D)·q̄_h·e_{h,δ}: q̄_h = the mean query of head h over the batch's non-padding
//   shaw            queries (= the mean over queries of q_i·e_δ, it being linear), e_δ the key table's
//                   row for δ under the scheme's policy: beyond the table 0 (Zero), the edge row (Clip,
//                   Shaw always), NaN (Error: the model would refuse). Shaw's value term is not a logit
//                   and is not shown.
//   transformer_xl  (1/√D)·(q̄_h + v_h)·(W_r R_{p=−δ})_h: terms (b)+(d); (a)+(c) are content only.
//   rope            measured, content included: the mean over visible (query, key) pairs at offset δ
//                   (non-padding, unmasked) of the scaled logit R(π(i))q_i · R(j)k_j / √D; NaN where
//                   the batch has no such pair. (RoPE has no position-only term to read off.)
//   none            no response curve.
// In causal attention δ > 0 is masked: the response there is NaN (never used by the model).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "train/config/run_options.h"
#include "train/trainer/trainer.h"

namespace relgrad {

struct ProbeCurve {
  std::string layer;    // the attention module: "encoder.layers.0.self_attn"
  std::string place;    // "encoder_self", "decoder_self" (also DecoderLM's layers) or "cross"
  std::string scheme;   // "none", "seed", "huang", "shaw", "t5", "alibi", "rope", "transformer_xl"
  std::string kind;     // "response" or "attention_mass"
  int head = 0;
  std::vector<int64_t> delta;  // −R … R
  std::vector<double> value;   // one per delta; NaN = undefined (masked offset, no pair, off an Error table)
  double outside = 0.0;        // attention_mass: the share at |δ| > R (0 for responses)
  std::vector<std::string> shared_by;  // the layers using this table (t5: the whole stack); else {layer}
};

// One attention module's forward, captured by record_attention. Shapes: B batch, H heads, D head size,
// t2 queries, t1 keys; all tensors detached, on the model's device and dtype.
struct AttentionRecord {
  std::string layer, place, scheme;
  MultiHeadAttention* attention = nullptr;  // the module (owned by the model)
  const PositionalScheme* positional = nullptr;  // its scheme, null for "none"
  bool causal = false;
  Tensor q, k;                        // (B,H,t2,D), (B,H,t1,D): projected, before any scheme touches
                                      // them (undefined for "none": the scheme is where they are caught)
  Tensor weights;                     // (B,H,t2,t1): softmax weights, before dropout
  std::vector<int64_t> positions;     // π(i), t2 entries
  std::vector<bool> query_valid;      // (B, t2) row-major: not padding
  std::vector<bool> key_valid;        // (B, t1) row-major: not padding
};

// Runs `model` once on `batch` in eval mode under NoGradGuard and captures every attention module
// (encoder self, decoder self and cross in model order). The model's training mode, record_weights /
// recorded_weights and schemes are restored afterwards, also when the forward throws. The queries and keys are
// caught by a recording wrapper placed around each module's scheme for the duration of the call
// (it forwards every call unchanged, so the forward is the model's own).
std::vector<AttentionRecord> record_attention(RunModel& model, const Batch& batch);

// reach R ≤ 0 means: the longest offset the batch can show, max(t1, t2) − 1 over its attentions.
std::vector<ProbeCurve> positional_response(const std::vector<AttentionRecord>& records, int64_t reach = 0);
std::vector<ProbeCurve> attention_mass_by_offset(const std::vector<AttentionRecord>& records, int64_t reach = 0);
std::vector<ProbeCurve> positional_response(RunModel& model, const Batch& batch, int64_t reach = 0);
std::vector<ProbeCurve> attention_mass_by_offset(RunModel& model, const Batch& batch, int64_t reach = 0);
// Both kinds from one forward: the responses, then the attention masses.
std::vector<ProbeCurve> probe(RunModel& model, const Batch& batch, int64_t reach = 0);

// The δ of the largest finite value (the first, i.e. the most negative δ, on ties); an error when
// the curve has no finite value.
int64_t peak_offset(const ProbeCurve& curve);
// The value at δ (an error when δ is outside the curve). mass_at is the same for attention masses.
double value_at(const ProbeCurve& curve, int64_t delta);
inline double mass_at(const ProbeCurve& curve, int64_t delta) { return value_at(curve, delta); }

// A text table, one line per curve: layer, kind, scheme, head, peak δ, value at the peak, and the
// values at δ = peak − 3 … peak + 3. A cell without a value, undefined (NaN) or beyond the curve, is
// "." (as are the peak cells of a curve with no value at all), explained by a last line when any is.
std::string probe_table(const std::vector<ProbeCurve>& curves);

// For each (layer, kind) of `curves`: <layer>.<kind>.heatmap.png (rows = heads, columns = δ, a
// colour bar: white → blue for masses, blue ← white → red around 0 for responses, grey = NaN) and
// <layer>.<kind>.curves.svg (value against δ, one line per head; train/plot/plot.h). Creates out_dir if
// needed; every file is written atomically. Returns the paths written, in order.
std::vector<std::string> write_probe_pictures(const std::vector<ProbeCurve>& curves, const std::string& out_dir);

}  // namespace relgrad
