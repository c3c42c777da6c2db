// Instruments that show what learned relative positions do (the API behind `relgrad probe`):
//
//   std::shared_ptr<RunModel> model = load_run("runs/default/checkpoint.safetensors").model;
//   Batch batch = data.batch(0, Split::HeldOut);
//   std::vector<ProbeCurve> curves = probe(*model, batch);     // one eval forward, both kinds
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
// module's weights (caught by its forward hook, MultiHeadAttention::forward_hook; eval mode, no grad),
// zero on masked keys.
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
//   xpos, p_rope,   measured as rope: the mean scaled content logit of their content pair at offset δ
//   pope            (layers/rotary_variants.h; PoPE's pair is 2D wide, its scale 1/√D).
//   fire            f_θ(ψ(|δ|)/N̄)_h, N̄ the mean normaliser ψ(max(π(i), L)) + ε over the batch's
//                   non-padding queries (layers/fire.h); the bias itself when every π(i) < L.
//   none            no response curve.
// In causal attention δ > 0 is masked: the response there is NaN (never used by the model).
#pragma once
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "train/config/run_options.h"
#include "train/trainer/trainer.h"

namespace relgrad {

struct ProbeCurve {
  std::string layer;   // the attention module: "encoder.layers.0.self_attn"
  std::string place;   // "encoder_self", "decoder_self" (also DecoderLM's layers) or "cross"
  std::string scheme;  // "none", "seed", "huang", "shaw", "t5", "alibi", "rope", "transformer_xl"
  std::string kind;    // "response" or "attention_mass"
  int head = 0;
  std::vector<int64_t> delta;  // −R … R
  std::vector<double> value;   // one per delta; NaN = undefined (masked offset, no pair, off an Error table)
  double outside = 0.0;        // attention_mass: the share at |δ| > R (0 for responses)
  std::vector<std::string> shared_by;  // the layers using this table (t5: the whole stack); else {layer}
  // attention_mass: whether some visible (query, key) pair of the batch lies at delta[n]; an offset
  // with none holds 0 mass because it cannot occur (a cross attention's ±96 where its queries' places
  // only reach −32 … 31), and is drawn n/a. Empty for responses.
  std::vector<bool> occurs = {};  // last, with its default: the aggregates that list the rest stay whole
};

// One attention module's forward, captured by record_attention. Shapes: B batch, H heads, D head size,
// t2 queries, t1 keys; all tensors detached, on the model's device and dtype.
struct AttentionRecord {
  std::string layer, place, scheme;
  MultiHeadAttention* attention = nullptr;       // the module (owned by the model)
  const PositionalScheme* positional = nullptr;  // its scheme, null for "none"
  bool causal = false;
  Tensor q, k;                     // (B,H,t2,D), (B,H,t1,D): projected, before any scheme touches them
  Tensor weights;                  // (B,H,t2,t1): the weights (softmax or the scheme's), before dropout
  Tensor key_state;                // (B,H,t1,S): the scheme's key state (FoX's log gates), when it has one
  std::vector<int64_t> positions;  // π(i), t2 entries
  std::vector<bool> query_valid;   // (B, t2) row-major: not padding
  std::vector<bool> key_valid;     // (B, t1) row-major: not padding
};

// Runs `model` once on `batch` in eval mode under NoGradGuard and captures every attention module
// (RunModel::attention_sites: encoder self, decoder self and cross in model order) through a forward
// hook on each (MultiHeadAttention::forward_hook, layers/attention.h), which hands over the projected
// queries and keys, the weights, the geometry and the key padding; the module runs its composite core
// meanwhile. The model's training mode and hooks are restored afterwards, also when the forward throws.
std::vector<AttentionRecord> record_attention(RunModel& model, const Batch& batch);

// reach R ≤ 0 means: the longest offset the batch can show, max(t1, t2) − 1 over its attentions.
std::vector<ProbeCurve> positional_response(const std::vector<AttentionRecord>& records, int64_t reach = 0);
std::vector<ProbeCurve> attention_mass_by_offset(const std::vector<AttentionRecord>& records,
                                                 int64_t reach = 0);
std::vector<ProbeCurve> positional_response(RunModel& model, const Batch& batch, int64_t reach = 0);
// What a curve's pictures draw: its values, NaN (n/a) at the offsets no pair occupies (ProbeCurve::occurs).
std::vector<double> drawn_values(const ProbeCurve& curve);
std::vector<ProbeCurve> attention_mass_by_offset(RunModel& model, const Batch& batch, int64_t reach = 0);
// Both kinds from one forward: the responses, then the attention masses.
std::vector<ProbeCurve> probe(RunModel& model, const Batch& batch, int64_t reach = 0);
std::vector<ProbeCurve> probe(const std::vector<AttentionRecord>& records, int64_t reach = 0);

// The δ of the largest finite value (the first, i.e. the most negative δ, on ties); an error when
// the curve has no finite value (has_finite is false).
int64_t peak_offset(const ProbeCurve& curve);
bool has_finite(const ProbeCurve& curve);
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
std::vector<std::string> write_probe_pictures(const std::vector<ProbeCurve>& curves,
                                              const std::string& out_dir);

// ---- Measures a researcher can aim (probe_measures.cpp) --------------------------------------------

// A malformed or out-of-range option of an instrument (a --delta that is not an offset, a --reach
// beyond the model, a --lag below 1): the cli answers it as a usage error (exit code 2). The message
// starts with "[probe]" / "[experiments]" and names the flag as the cli spells it.
class InstrumentOptionError : public Error {
  using Error::Error;
};

// The mass at a chosen offset δ (or range δ_from … δ_to), per head, over the queries that matter:
//   mass_h = (1/N) Σ_{(b,i) counted} Σ_{j : δ_from ≤ j − π(i) ≤ δ_to} w[b, h, i, j]
// over the N queries (b, i) that are not padding, pass the filter, and have at least one visible
// key (not padding, not causally masked) in the range. For one δ this is the experiments' "mass at
// δ*" (docs/experiments.md): a query without key π(i) + δ is not counted, so mass 1 means "every
// query that could look there did".

struct DeltaRange {
  int64_t from = 0, to = 0;  // inclusive, from ≤ to
};
// "-5" → {−5, −5}; "-7:-5" → {−7, −5}. InstrumentOptionError (naming `what`) for anything else or from > to.
DeltaRange parse_delta_range(const std::string& text, const std::string& what = "--delta");
std::string delta_text(const DeltaRange& delta);  // the inverse: "-5", "-7:-5"

// Which queries count. range: "from:to" on the query index i (the t2 axis), Python-like: "5:" = i ≥ 5,
// ":10" = i < 10, "3:8", "" = all; negative bounds count from the end (t2). mask: (B, t2) row-major,
// true = counted, empty = all; both given: both must hold. For a synthetic task "the queries that need
// it" is a mask the task gives (needed_query_mask).
struct QueryFilter {
  std::string range;
  std::vector<bool> mask;
};
// InstrumentOptionError for a malformed range ("5", "a:b", "1:2:3").
void check_query_range(const std::string& range);

struct HeadMass {
  std::string layer, place, scheme;
  int head = 0;
  DeltaRange delta;
  double mass = 0.0;    // NaN when no query counted
  int64_t queries = 0;  // N
};
// One entry per (record, head), in record order. A mask is over the decoder's queries: with one, the
// encoder-self records are left out, and a ShapeError names the sizes when no record has B·t2 queries.
std::vector<HeadMass> mass_at_delta(const std::vector<AttentionRecord>& records, DeltaRange delta,
                                    const QueryFilter& filter = {});
// The mask (B, t2) of the decoder queries whose target is a real token (not padding, not −100); for
// data.h's synthetic tasks also not the filler "_" (shift: the queries that copy a symbol, which need
// δ = −lag). `filler` < 0: no filler.
std::vector<bool> needed_query_mask(const Batch& batch, int64_t filler = -1);

// A text table: layer, place, scheme, head, δ range, mass, queries; one line per entry.
std::string mass_table(const std::vector<HeadMass>& masses);

// The curves as data, beside the pictures. CSV: one line per (curve, δ):
//   layer,place,scheme,kind,head,delta,value       (value empty for NaN; attention_mass curves add one
//                                                   line with delta "outside" for the share beyond R)
// JSON: {"curves": [{"layer", "place", "scheme", "kind", "head", "delta": [...], "value": [... null for
// NaN], "outside", "shared_by": [...]}, ...]}. Both written atomically.
std::string probe_csv(const std::vector<ProbeCurve>& curves);
std::string probe_json(const std::vector<ProbeCurve>& curves);
void write_probe_csv(const std::vector<ProbeCurve>& curves, const std::string& path);
void write_probe_json(const std::vector<ProbeCurve>& curves, const std::string& path);

// Two checkpoints of the same architecture and schemes, probed on the same batch: per (layer, head),
// the response curves' difference (B − A) and the mass at each δ of `deltas` in both. An error when
// the two probes do not have the same layers, heads, schemes and offsets.
inline constexpr int64_t kNoResponsePeak = std::numeric_limits<int64_t>::min();
struct HeadComparison {
  std::string layer, place, scheme;
  int head = 0;
  bool has_response = false;           // false for scheme "none": only the masses
  std::vector<int64_t> delta;          // the response's offsets
  std::vector<double> response_diff;   // B − A per offset (NaN where either is NaN)
  double max_abs_diff = 0.0;           // over the finite differences
  int64_t max_abs_diff_at = 0;         // its δ
  int64_t peak_a = 0, peak_b = 0;      // response peaks (kNoResponsePeak when none)
  std::vector<DeltaRange> mass_delta;  // = deltas
  std::vector<double> mass_a, mass_b;  // mass at each of deltas
};
std::vector<HeadComparison> compare_probes(const std::vector<AttentionRecord>& a,
                                           const std::vector<AttentionRecord>& b,
                                           const std::vector<DeltaRange>& deltas,
                                           const QueryFilter& filter = {}, int64_t reach = 0);
std::string comparison_table(const std::vector<HeadComparison>& rows);
// Two blocks, a blank line between: layer,place,scheme,head,delta,diff (the response's B − A, empty for
// NaN), then layer,place,scheme,head,mass_from,mass_to,mass_a,mass_b per δ range of the comparison.
std::string comparison_csv(const std::vector<HeadComparison>& rows);

// The largest |δ| a probe can show for this model and batch: the batch's longest offset, or further
// where a positional table reaches further (seed/huang: max_length − 1, shaw: clip, t5:
// max_distance); `why` says which.
int64_t probe_reach_bound(const RunConfig& config, const Batch& batch, std::string* why);

// What `relgrad probe` does; the comments name the flags (train/command/subcommands/probe.cpp has their help).
struct ProbeOptions {
  std::string checkpoint;           // positional
  std::string out_dir;              // --out; "" = probe/ beside the checkpoint
  int64_t reach = 0;                // --reach; 0 = the batch's longest offset
  std::vector<std::string> deltas;  // --delta (each "-5" or "-7:-5")
  std::string queries;              // --queries: "from:to" or "needed"; "" = every query
  std::string compare_checkpoint;   // --compare
  std::string csv, json;            // --csv, --json
  std::string compare_csv;          // --compare-csv FILE (default: compare.csv in the pictures' folder)
  int64_t batch = 0;                // --batch
  // --data.KEY=VALUE (relgrad probe): changes the checkpoint's config before its data is read, e.g.
  // another text file for a text model (train/command/checkpoint_overrides.h); none when empty.
  std::function<void(RunConfig&)> change_data;
};
// Loads, probes and writes: probe_table, the pictures, the curves as data, then what --delta and
// --compare add; returns 0. A --reach beyond probe_reach_bound, a malformed --delta / --queries, a --delta
// outside ±reach: InstrumentOptionError. A --compare of another architecture, a missing file: Error.
int run_probe(const ProbeOptions& options, std::ostream& out);

// Where run_probe writes: --out or probe/ beside the checkpoint, and the data files with their defaults
// in that folder (compare_csv only with --compare). `relgrad probe` checks them against its inputs first.
struct ProbeOutputs {
  std::string out_dir, csv, json, compare_csv;
};
ProbeOutputs probe_outputs(const ProbeOptions& options);

}  // namespace relgrad
