// Positional response and attention mass by relative offset (train/instruments/probe.h). Pictures: probe_plot.cpp.
#include "train/instruments/probe.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <sstream>

#include "layers/relative_bias.h"
#include "layers/relative_learned.h"
#include "layers/rotary.h"
#include "layers/transformer_xl.h"

namespace relgrad {

namespace {

constexpr const char* kOp = "probe";
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

std::vector<double> host(const Tensor& t) { return t.to(Device::cpu()).to(kFloat64).contiguous().to_vector<double>(); }

// The config's name of a scheme (layers/models.h), or the scheme's own name for one built by hand.
std::string scheme_name(const PositionalScheme* s) {
  if (!s) return "none";
  if (dynamic_cast<const SeedRelativeEmbedding*>(s)) return "seed";
  if (dynamic_cast<const HuangRelativeEmbedding*>(s)) return "huang";
  if (dynamic_cast<const ShawRelativeEmbedding*>(s)) return "shaw";
  if (dynamic_cast<const T5RelativeBias*>(s)) return "t5";
  if (dynamic_cast<const ALiBi*>(s)) return "alibi";
  if (dynamic_cast<const RoPE*>(s)) return "rope";
  if (dynamic_cast<const TransformerXL*>(s)) return "transformer_xl";
  return s->name();
}

// Wraps a module's scheme for one forward: every call goes to the real scheme unchanged; content_qk
// (called once per forward with the projected q and k, before any scheme term) keeps them.
class RecordingScheme : public PositionalScheme {
 public:
  explicit RecordingScheme(std::shared_ptr<PositionalScheme> inner) : inner_(std::move(inner)) {}
  std::string name() const override { return inner_->name(); }
  std::pair<Tensor, Tensor> content_qk(const Tensor& q, const Tensor& k, const AttentionGeometry& g) const override {
    q_ = q.detach();
    k_ = k.detach();
    return inner_->content_qk(q, k, g);
  }
  Tensor score_term(const Tensor& q, const AttentionGeometry& g) const override { return inner_->score_term(q, g); }
  double logit_scale(int64_t head_dim) const override { return inner_->logit_scale(head_dim); }
  Tensor logit_bias(const AttentionGeometry& g) const override { return inner_->logit_bias(g); }
  Tensor value_term(const Tensor& w, const AttentionGeometry& g) const override { return inner_->value_term(w, g); }
  const std::shared_ptr<PositionalScheme>& inner() const { return inner_; }
  mutable Tensor q_, k_;

 private:
  std::shared_ptr<PositionalScheme> inner_;
};

// An attention module of the model and what decides its masks and positions.
struct Site {
  std::string layer, place;
  MultiHeadAttention* attention;
  bool causal;
  Tensor query_mask, key_mask;  // bool (B, t), true = padding; undefined = none
  Alignment alignment;
};

std::vector<Site> sites_of(RunModel& model, const Batch& batch) {
  std::vector<Site> sites;
  if (model.decoder_lm) {
    RG_CHECK(batch.decoder_only(), kOp, "a DecoderLM needs a decoder-only batch (tokens)");
    const auto& layers = model.decoder_lm->layers->items;
    for (size_t i = 0; i < layers.size(); ++i)
      sites.push_back({"layers." + std::to_string(i) + ".self_attn", "decoder_self", layers[i]->self_attn.get(),
                       layers[i]->options.causal, batch.padding_mask, batch.padding_mask, Alignment::Left});
    return sites;
  }
  RG_CHECK(model.encoder_decoder, kOp, "the RunModel holds no model");
  RG_CHECK(batch.src.defined() && batch.tgt_in.defined(), kOp, "an EncoderDecoder needs an encoder-decoder batch (src, tgt_in)");
  const auto& enc = model.encoder_decoder->encoder->layers->items;
  for (size_t i = 0; i < enc.size(); ++i)
    sites.push_back({"encoder.layers." + std::to_string(i) + ".self_attn", "encoder_self", enc[i]->self_attn.get(),
                     enc[i]->options.causal, batch.src_padding_mask, batch.src_padding_mask, Alignment::Left});
  const auto& dec = model.encoder_decoder->decoder->layers->items;
  for (size_t i = 0; i < dec.size(); ++i) {
    const std::string prefix = "decoder.layers." + std::to_string(i);
    sites.push_back({prefix + ".self_attn", "decoder_self", dec[i]->self_attn.get(), true, batch.tgt_padding_mask,
                     batch.tgt_padding_mask, Alignment::Left});
    sites.push_back({prefix + ".cross_attn", "cross", dec[i]->cross_attn.get(), false, batch.tgt_padding_mask,
                     batch.src_padding_mask, dec[i]->cross_alignment});
  }
  return sites;
}

// (B, t) validity from an optional padding mask.
std::vector<bool> valid_of(const Tensor& padding, int64_t B, int64_t t) {
  if (!padding.defined()) return std::vector<bool>(static_cast<size_t>(B * t), true);
  RG_CHECK_T(ShapeError, padding.dim() == 2 && padding.size(0) == B && padding.size(1) == t, kOp,
             "padding mask ", shape_str(padding.shape()), " does not match (", B, ", ", t, ")");
  std::vector<bool> pad = padding.to(Device::cpu()).to(kBool).contiguous().to_vector<bool>();
  for (size_t n = 0; n < pad.size(); ++n) pad[n] = !pad[n];
  return pad;
}

// Restores what record_attention changes, also on an exception.
struct ModelRestorer {
  Module* root = nullptr;
  bool training = false;
  struct Flag { MultiHeadAttention* m; bool record; Tensor recorded; };
  std::vector<Flag> flags;
  std::vector<std::pair<MultiHeadAttention*, std::shared_ptr<PositionalScheme>>> schemes;
  ~ModelRestorer() {
    for (auto& [m, s] : schemes) m->positional = s;
    for (auto& f : flags) {
      f.m->record_weights = f.record;
      f.m->recorded_weights = f.recorded;
    }
    if (root) root->train(training);
  }
};

int64_t auto_reach(const std::vector<AttentionRecord>& records, int64_t reach) {
  if (reach > 0) return reach;
  int64_t r = 1;
  for (const auto& rec : records) r = std::max({r, rec.weights.size(2) - 1, rec.weights.size(3) - 1});
  return r;
}

ProbeCurve make_curve(const AttentionRecord& rec, const std::string& kind, int head, int64_t R) {
  ProbeCurve c;
  c.layer = rec.layer;
  c.place = rec.place;
  c.scheme = rec.scheme;
  c.kind = kind;
  c.head = head;
  for (int64_t d = -R; d <= R; ++d) c.delta.push_back(d);
  c.value.assign(c.delta.size(), 0.0);
  c.shared_by = {rec.layer};
  return c;
}

// q̄: the mean query of each head over the non-padding queries, (H·D) row-major; NaN without any.
std::vector<double> mean_query(const AttentionRecord& rec) {
  const int64_t B = rec.q.size(0), H = rec.q.size(1), t2 = rec.q.size(2), D = rec.q.size(3);
  std::vector<double> q = host(rec.q), mean(static_cast<size_t>(H * D), 0.0);
  int64_t n = 0;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t i = 0; i < t2; ++i) {
      if (!rec.query_valid[b * t2 + i]) continue;
      ++n;
      for (int64_t h = 0; h < H; ++h)
        for (int64_t d = 0; d < D; ++d) mean[h * D + d] += q[((b * H + h) * t2 + i) * D + d];
    }
  for (double& m : mean) m = n > 0 ? m / static_cast<double>(n) : kNaN;
  return mean;
}

// The table row for δ under the scheme's index options: −1 = no term (Zero), −2 = undefined (Error).
int64_t table_row(int64_t delta, const RelativeIndexOptions& o) {
  const int64_t R = o.table_size();
  int64_t r = delta + o.max_past;
  if (r >= 0 && r < R) return r;
  if (o.out_of_range == OutOfRange::Clip) return std::clamp<int64_t>(r, 0, R - 1);
  return o.out_of_range == OutOfRange::Zero ? -1 : -2;
}

// (1/√D)·q̄_h·e_{h,δ} for a key table (rows, D) shared or (H, rows, D) per head.
void learned_response(const AttentionRecord& rec, const Tensor& table, int64_t table_heads,
                      const RelativeIndexOptions& o, double scale, std::vector<ProbeCurve>& curves) {
  const int64_t H = rec.q.size(1), D = rec.q.size(3), rows = o.table_size();
  std::vector<double> qbar = mean_query(rec), e = host(table);
  for (int64_t h = 0; h < H; ++h) {
    const double* eh = e.data() + (table_heads > 0 ? h * rows * D : 0);
    ProbeCurve& c = curves[static_cast<size_t>(h)];
    for (size_t n = 0; n < c.delta.size(); ++n) {
      const int64_t r = table_row(c.delta[n], o);
      double s = 0.0;
      if (r == -2) s = kNaN;
      for (int64_t d = 0; r >= 0 && d < D; ++d) s += qbar[h * D + d] * eh[r * D + d];
      c.value[n] = s * scale;
    }
  }
}

// (1/√D)·(q̄_h + v_h)·(W_r R_{p=−δ})_h.
void txl_response(const AttentionRecord& rec, const TransformerXL& txl, int64_t R, std::vector<ProbeCurve>& curves) {
  const int64_t H = txl.num_heads, D = txl.head_dim, C = txl.embed_dim;
  Tensor sin_rows = txl_sinusoid(R, R, C, txl.r_proj->weight.dtype()).to(txl.r_proj->weight.device());  // (2R+1, C)
  std::vector<double> r = host(txl.r_proj->forward(sin_rows));  // (2R+1, C) = (2R+1, H, D): row n ↔ δ = n − R
  std::vector<double> qbar = mean_query(rec), v = host(txl.v);
  const double scale = txl.logit_scale(D);
  for (int64_t h = 0; h < H; ++h)
    for (int64_t n = 0; n <= 2 * R; ++n) {
      double s = 0.0;
      for (int64_t d = 0; d < D; ++d) s += (qbar[h * D + d] + v[h * D + d]) * r[(n * H + h) * D + d];
      curves[static_cast<size_t>(h)].value[static_cast<size_t>(n)] = s * scale;
    }
}

// RoPE: the mean scaled logit over visible (query, key) pairs at each offset; NaN where none.
void rope_response(const AttentionRecord& rec, const RoPE& rope, std::vector<ProbeCurve>& curves) {
  const int64_t B = rec.q.size(0), H = rec.q.size(1), t2 = rec.q.size(2), D = rec.q.size(3), t1 = rec.k.size(2);
  AttentionGeometry g = AttentionGeometry::make(B, H, D, t2, t1, rec.causal);
  g.query_positions = from_vector<int64_t>(rec.positions, {t2});
  auto [qc, kc] = rope.content_qk(rec.q, rec.k, g);
  std::vector<double> logits = host(matmul(qc, kc.transpose(-1, -2)));  // (B, H, t2, t1)
  const double scale = rope.logit_scale(D);
  const int64_t R = (static_cast<int64_t>(curves[0].delta.size()) - 1) / 2;
  for (int64_t h = 0; h < H; ++h) {
    std::vector<double> sum(curves[0].delta.size(), 0.0);
    std::vector<int64_t> count(sum.size(), 0);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t i = 0; i < t2; ++i) {
        if (!rec.query_valid[b * t2 + i]) continue;
        for (int64_t j = 0; j < t1; ++j) {
          const int64_t delta = j - rec.positions[i];
          if (!rec.key_valid[b * t1 + j] || (rec.causal && delta > 0) || std::abs(delta) > R) continue;
          sum[delta + R] += logits[((b * H + h) * t2 + i) * t1 + j] * scale;
          ++count[delta + R];
        }
      }
    for (size_t n = 0; n < sum.size(); ++n)
      curves[static_cast<size_t>(h)].value[n] = count[n] > 0 ? sum[n] / static_cast<double>(count[n]) : kNaN;
  }
}

}  // namespace

std::vector<AttentionRecord> record_attention(RunModel& model, const Batch& batch) {
  std::vector<Site> sites = sites_of(model, batch);
  std::vector<std::shared_ptr<RecordingScheme>> wrappers;
  std::vector<AttentionRecord> records;
  {
    ModelRestorer restore;
    restore.root = model.module.get();
    restore.training = model.module->is_training();
    for (const Site& s : sites) {
      restore.flags.push_back({s.attention, s.attention->record_weights, s.attention->recorded_weights});
      s.attention->record_weights = true;
      std::shared_ptr<RecordingScheme> w;
      if (s.attention->positional) {
        restore.schemes.push_back({s.attention, s.attention->positional});
        w = std::make_shared<RecordingScheme>(s.attention->positional);
        s.attention->positional = w;
      }
      wrappers.push_back(w);
    }
    model.module->eval();
    NoGradGuard no_grad;
    model.logits(batch);
    for (size_t n = 0; n < sites.size(); ++n) {
      const Site& s = sites[n];
      AttentionRecord rec;
      rec.layer = s.layer;
      rec.place = s.place;
      rec.attention = s.attention;
      rec.positional = wrappers[n] ? wrappers[n]->inner().get() : nullptr;
      rec.scheme = scheme_name(rec.positional);
      rec.causal = s.causal;
      rec.weights = s.attention->recorded_weights;
      RG_CHECK(rec.weights.defined(), kOp, s.layer, " recorded no attention weights");
      if (wrappers[n]) rec.q = wrappers[n]->q_, rec.k = wrappers[n]->k_;
      const int64_t B = rec.weights.size(0), t2 = rec.weights.size(2), t1 = rec.weights.size(3);
      rec.positions = AttentionGeometry::query_positions_for(t2, t1, s.alignment).to_vector<int64_t>();
      rec.query_valid = valid_of(s.query_mask, B, t2);
      rec.key_valid = valid_of(s.key_mask, B, t1);
      records.push_back(std::move(rec));
    }
  }  // restore: schemes, flags, training mode
  return records;
}

std::vector<ProbeCurve> positional_response(const std::vector<AttentionRecord>& records, int64_t reach) {
  const int64_t R = auto_reach(records, reach);
  std::vector<ProbeCurve> out;
  std::vector<std::pair<const PositionalScheme*, size_t>> t5_seen;  // shared T5 table → first curve index
  for (const AttentionRecord& rec : records) {
    const PositionalScheme* s = rec.positional;
    if (!s) continue;
    if (dynamic_cast<const T5RelativeBias*>(s)) {
      auto seen = std::find_if(t5_seen.begin(), t5_seen.end(), [&](const auto& p) { return p.first == s; });
      if (seen != t5_seen.end()) {  // the stack's table, reported already: name this layer too
        for (size_t n = seen->second; n < out.size() && out[n].layer == out[seen->second].layer; ++n)
          out[n].shared_by.push_back(rec.layer);
        continue;
      }
      t5_seen.push_back({s, out.size()});
    }
    const int64_t H = rec.weights.size(1), D = rec.attention->head_dim;
    std::vector<ProbeCurve> curves;
    for (int64_t h = 0; h < H; ++h) curves.push_back(make_curve(rec, "response", static_cast<int>(h), R));
    AttentionGeometry g = AttentionGeometry::make(rec.weights.size(0), H, D, rec.weights.size(2),
                                                  rec.weights.size(3), rec.causal);
    if (const auto* t5 = dynamic_cast<const T5RelativeBias*>(s)) {
      std::vector<double> table = host(t5->table);  // (H, num_buckets)
      for (int64_t h = 0; h < H; ++h)
        for (size_t n = 0; n < curves[h].delta.size(); ++n)
          curves[h].value[n] = table[h * t5->num_buckets + t5_relative_bucket(curves[h].delta[n], t5->bidirectional,
                                                                              t5->num_buckets, t5->max_distance)];
    } else if (const auto* alibi = dynamic_cast<const ALiBi*>(s)) {
      std::vector<double> slopes = host(alibi->slopes);
      for (int64_t h = 0; h < H; ++h)
        for (size_t n = 0; n < curves[h].delta.size(); ++n) {
          const int64_t d = curves[h].delta[n];
          curves[h].value[n] = -slopes[h] * static_cast<double>(alibi->bidirectional ? std::abs(d) : d <= 0 ? -d : 0);
        }
    } else if (const auto* seed = dynamic_cast<const SeedRelativeEmbedding*>(s)) {
      learned_response(rec, seed->table, seed->num_heads, seed->index_options(g), seed->logit_scale(D), curves);
    } else if (const auto* huang = dynamic_cast<const HuangRelativeEmbedding*>(s)) {
      learned_response(rec, huang->table, huang->num_heads, huang->index_options(g), huang->logit_scale(D), curves);
    } else if (const auto* shaw = dynamic_cast<const ShawRelativeEmbedding*>(s)) {
      learned_response(rec, shaw->key_table, shaw->num_heads, shaw->index_options(g), shaw->logit_scale(D), curves);
    } else if (const auto* txl = dynamic_cast<const TransformerXL*>(s)) {
      txl_response(rec, *txl, R, curves);
    } else if (const auto* rope = dynamic_cast<const RoPE*>(s)) {
      rope_response(rec, *rope, curves);
    } else {
      continue;  // a scheme the probe does not know: no response curve
    }
    if (rec.causal)  // future keys are masked: the model never uses these values
      for (ProbeCurve& c : curves)
        for (size_t n = 0; n < c.delta.size(); ++n)
          if (c.delta[n] > 0) c.value[n] = kNaN;
    for (ProbeCurve& c : curves) out.push_back(std::move(c));
  }
  return out;
}

std::vector<ProbeCurve> attention_mass_by_offset(const std::vector<AttentionRecord>& records, int64_t reach) {
  const int64_t R = auto_reach(records, reach);
  std::vector<ProbeCurve> out;
  for (const AttentionRecord& rec : records) {
    const int64_t B = rec.weights.size(0), H = rec.weights.size(1), t2 = rec.weights.size(2), t1 = rec.weights.size(3);
    std::vector<double> w = host(rec.weights);  // (B, H, t2, t1)
    // The queries that count: not padding, and at least one visible key.
    std::vector<std::pair<int64_t, int64_t>> queries;
    for (int64_t b = 0; b < B; ++b)
      for (int64_t i = 0; i < t2; ++i) {
        if (!rec.query_valid[b * t2 + i]) continue;
        bool sees = false;
        for (int64_t j = 0; j < t1 && !sees; ++j)
          sees = rec.key_valid[b * t1 + j] && !(rec.causal && j > rec.positions[i]);
        if (sees) queries.push_back({b, i});
      }
    for (int64_t h = 0; h < H; ++h) {
      ProbeCurve c = make_curve(rec, "attention_mass", static_cast<int>(h), R);
      for (auto [b, i] : queries)
        for (int64_t j = 0; j < t1; ++j) {
          const double x = w[((b * H + h) * t2 + i) * t1 + j];
          const int64_t delta = j - rec.positions[i];
          if (std::abs(delta) <= R) c.value[delta + R] += x;
          else c.outside += x;
        }
      const double n = static_cast<double>(queries.size());
      for (double& v : c.value) v = queries.empty() ? kNaN : v / n;
      c.outside = queries.empty() ? kNaN : c.outside / n;
      out.push_back(std::move(c));
    }
  }
  return out;
}

std::vector<ProbeCurve> positional_response(RunModel& model, const Batch& batch, int64_t reach) {
  return positional_response(record_attention(model, batch), reach);
}

std::vector<ProbeCurve> attention_mass_by_offset(RunModel& model, const Batch& batch, int64_t reach) {
  return attention_mass_by_offset(record_attention(model, batch), reach);
}

std::vector<ProbeCurve> probe(RunModel& model, const Batch& batch, int64_t reach) {
  std::vector<AttentionRecord> records = record_attention(model, batch);
  std::vector<ProbeCurve> curves = positional_response(records, reach);
  for (ProbeCurve& c : attention_mass_by_offset(records, reach)) curves.push_back(std::move(c));
  return curves;
}

int64_t peak_offset(const ProbeCurve& c) {
  size_t best = c.value.size();
  for (size_t n = 0; n < c.value.size(); ++n)
    if (std::isfinite(c.value[n]) && (best == c.value.size() || c.value[n] > c.value[best])) best = n;
  RG_CHECK(best < c.value.size(), kOp, c.layer, " head ", c.head, " (", c.kind, ") has no finite value");
  return c.delta[best];
}

double value_at(const ProbeCurve& c, int64_t delta) {
  for (size_t n = 0; n < c.delta.size(); ++n)
    if (c.delta[n] == delta) return c.value[n];
  RG_CHECK_T(IndexError, false, kOp, c.layer, " head ", c.head, " (", c.kind, ") has no δ = ", delta, " (range ",
             c.delta.empty() ? 0 : c.delta.front(), " … ", c.delta.empty() ? 0 : c.delta.back(), ")");
  return kNaN;
}

std::string probe_table(const std::vector<ProbeCurve>& curves) {
  auto fmt = [](double v) {
    char buf[32];
    if (std::isnan(v)) return std::string("nan");
    std::snprintf(buf, sizeof buf, "%.4g", v);
    return std::string(buf);
  };
  size_t width = 5;
  for (const auto& c : curves) width = std::max(width, c.layer.size());
  std::ostringstream out;
  char line[256];
  std::snprintf(line, sizeof line, "%-*s  %-14s  %-14s  %4s  %6s  %10s  %s\n", static_cast<int>(width), "layer",
                "kind", "scheme", "head", "peak", "at peak", "values at delta = peak-3 .. peak+3");
  out << line;
  for (const auto& c : curves) {
    bool finite = std::any_of(c.value.begin(), c.value.end(), [](double v) { return std::isfinite(v); });
    std::string peak = "-", at = "nan", around;
    if (finite) {
      const int64_t p = peak_offset(c);
      peak = std::to_string(p);
      at = fmt(value_at(c, p));
      for (int64_t d = p - 3; d <= p + 3; ++d) {
        bool inside = !c.delta.empty() && d >= c.delta.front() && d <= c.delta.back();
        around += (d > p - 3 ? " " : "") + (inside ? fmt(value_at(c, d)) : std::string("."));
      }
    }
    std::string scheme = c.scheme + (c.shared_by.size() > 1 ? "*" + std::to_string(c.shared_by.size()) : "");
    std::snprintf(line, sizeof line, "%-*s  %-14s  %-14s  %4d  %6s  %10s  ", static_cast<int>(width), c.layer.c_str(),
                  c.kind.c_str(), scheme.c_str(), c.head, peak.c_str(), at.c_str());
    out << line << around;
    if (c.kind == "attention_mass" && c.outside > 0) out << "  (beyond the range: " << fmt(c.outside) << ")";
    out << "\n";
  }
  if (std::any_of(curves.begin(), curves.end(), [](const ProbeCurve& c) { return c.shared_by.size() > 1; }))
    out << "*n: one table shared by n layers (reported under the first)\n";
  return out.str();
}

}  // namespace relgrad
