// Positional response and attention mass by relative offset (train/instruments/probe.h), their table, and
// their pictures: a heatmap per (layer, kind), heads × δ, drawn as a plot_detail::Scene and rendered by the
// PNG back end of train/plot/plot.h, and the curves themselves through write_plot (SVG).
#include "train/instruments/probe.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <sstream>

#include "core/file_io.h"
#include "train/plot/plot.h"

namespace relgrad {

namespace {

constexpr const char* kOp = "probe";
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

std::vector<double> host(const Tensor& t) {
  return t.to(Device::cpu()).to(kFloat64).contiguous().to_vector<double>();
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

// Restores what record_attention changes (the modules' forward hooks, the training mode), also on an
// exception.
struct HookRestorer {
  Module* root = nullptr;
  bool training = false;
  std::vector<std::pair<MultiHeadAttention*, AttentionHook>> hooks;
  ~HookRestorer() {
    for (auto& [m, hook] : hooks) m->forward_hook = std::move(hook);
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

// ---- pictures ----

using plot_detail::Anchor;
using plot_detail::Color;
using plot_detail::RectItem;
using plot_detail::Scene;
using plot_detail::TextItem;

constexpr Color kNaNColor{200, 200, 200};
constexpr Color kText{34, 34, 34};
constexpr Color kBlue{59, 76, 192}, kRed{180, 4, 38}, kDeepBlue{8, 48, 107};

Color mix(Color a, Color b, double t) {  // a at t = 0, b at t = 1
  t = std::clamp(t, 0.0, 1.0);
  auto c = [t](uint8_t x, uint8_t y) { return static_cast<uint8_t>(std::lround(x + (y - x) * t)); };
  return {c(a.r, b.r), c(a.g, b.g), c(a.b, b.b)};
}

// The colour scale of one heatmap: masses white (0) → deep blue (hi); responses blue (−hi) ← white (0)
// → red (+hi), so the sign reads at a glance. lo is 0 or −hi.
struct ColorScale {
  bool diverging = false;
  double hi = 1.0;
  double lo() const { return diverging ? -hi : 0.0; }
  Color operator()(double v) const {
    if (!std::isfinite(v)) return kNaNColor;
    if (!diverging) return mix(plot_detail::kBackground, kDeepBlue, v / hi);
    return v >= 0 ? mix(plot_detail::kBackground, kRed, v / hi)
                  : mix(plot_detail::kBackground, kBlue, -v / hi);
  }
};

std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", v);
  return buf;
}

// A 1-2-5 step giving at most ~10 labels over `span`.
int64_t label_step(int64_t span) {
  for (int64_t decade = 1;; decade *= 10)
    for (int64_t m : {1, 2, 5})
      if (span / (m * decade) <= 10) return m * decade;
}

std::string file_stem(const std::string& layer, const std::string& kind) {
  std::string s = layer + "." + kind;
  for (char& ch : s)
    if (!(std::isalnum(static_cast<unsigned char>(ch)) || ch == '.' || ch == '_' || ch == '-')) ch = '_';
  return s;
}

TextItem text(double x, double y, const std::string& s, Anchor a, int scale = 1, bool vertical = false) {
  return TextItem{x, y, s, scale, a, vertical, kText};
}

// rows: the curves of one (layer, kind), one per head, all over the same δ range.
Scene heatmap_scene(const std::vector<const ProbeCurve*>& rows) {
  const ProbeCurve& first = *rows.front();
  const int ncol = static_cast<int>(first.delta.size()), nrow = static_cast<int>(rows.size());
  ColorScale scale;
  scale.diverging = first.kind != "attention_mass";
  double hi = 0.0;
  for (const ProbeCurve* c : rows)
    for (double v : drawn_values(*c))
      if (std::isfinite(v)) hi = std::max(hi, std::fabs(v));
  scale.hi = hi > 0 ? hi : 1.0;

  std::string title = first.layer + "  " + first.kind + " (" + first.scheme + ")";
  if (first.shared_by.size() > 1)
    title += ", shared by " + std::to_string(first.shared_by.size()) + " layers";
  const double cw = std::clamp(720.0 / ncol, 3.0, 40.0), ch = 24.0;
  const double left = 64, top = 44, grid_w = cw * ncol, grid_h = ch * nrow;
  const double bar_x = left + grid_w + 24, bar_w = 16, bar_h = std::max(grid_h, 120.0);
  Scene s;
  s.width = static_cast<int>(std::ceil(std::max(bar_x + bar_w + 64, left + 12.0 * title.size() + 16)));
  s.height = static_cast<int>(std::ceil(top + bar_h + 48));
  s.items.push_back(RectItem{0, 0, double(s.width), double(s.height), true, plot_detail::kBackground, 0, {}});
  s.items.push_back(text(left, 20, title, Anchor::Start, 2));
  for (int r = 0; r < nrow; ++r) {
    const ProbeCurve& c = *rows[r];
    const std::vector<double> value = drawn_values(c);  // n/a where no pair can be
    const double y = top + ch * r;
    s.items.push_back(text(left - 8, y + ch / 2, "head " + std::to_string(c.head), Anchor::End));
    for (int k = 0; k < ncol && k < static_cast<int>(value.size()); ++k)
      s.items.push_back(RectItem{left + cw * k, y, cw, ch, true, scale(value[k]), 0, {}});
  }
  s.items.push_back(RectItem{left, top, grid_w, grid_h, false, {}, 1.0, plot_detail::kFrame});
  // δ labels under their columns (ticks at multiples of a 1-2-5 step, always 0).
  const int64_t step = label_step(first.delta.back() - first.delta.front());
  for (int k = 0; k < ncol; ++k) {
    if (first.delta[k] % step != 0) continue;
    const double x = left + cw * (k + 0.5);
    s.items.push_back(RectItem{x - 0.5, top + grid_h, 1, 4, true, plot_detail::kFrame, 0, {}});
    s.items.push_back(text(x, top + grid_h + 12, std::to_string(first.delta[k]), Anchor::Middle));
  }
  s.items.push_back(
      text(left + grid_w / 2, top + grid_h + 30, "delta = key - query (negative = past)", Anchor::Middle));
  // The colour bar: hi at the top, lo at the bottom, 64 steps; grey = undefined.
  const int steps = 64;
  for (int n = 0; n < steps; ++n) {
    const double v = scale.hi - (scale.hi - scale.lo()) * (n + 0.5) / steps;
    s.items.push_back(
        RectItem{bar_x, top + bar_h * n / steps, bar_w, bar_h / steps + 0.5, true, scale(v), 0, {}});
  }
  s.items.push_back(RectItem{bar_x, top, bar_w, bar_h, false, {}, 1.0, plot_detail::kFrame});
  s.items.push_back(text(bar_x + bar_w + 4, top + 4, number(scale.hi), Anchor::Start));
  s.items.push_back(text(bar_x + bar_w + 4, top + bar_h - 4, number(scale.lo()), Anchor::Start));
  if (scale.diverging) s.items.push_back(text(bar_x + bar_w + 4, top + bar_h / 2, "0", Anchor::Start));
  s.items.push_back(RectItem{bar_x, top + bar_h + 10, bar_w, 10, true, kNaNColor, 0, {}});
  s.items.push_back(text(bar_x + bar_w + 4, top + bar_h + 15, "n/a", Anchor::Start));
  return s;
}

}  // namespace

std::vector<AttentionRecord> record_attention(RunModel& model, const Batch& batch) {
  model.check_batch(batch, kOp);
  const std::vector<AttentionSite> sites = model.attention_sites();
  std::vector<AttentionRecord> records(sites.size());  // sized first: each hook writes its own record
  std::vector<Tensor> key_masks(sites.size());         // bool (B, t1), true = padding; undefined = none
  {
    HookRestorer restore;
    restore.root = model.module.get();
    restore.training = model.module->is_training();
    for (size_t n = 0; n < sites.size(); ++n) {
      MultiHeadAttention* attention = sites[n].attention;
      restore.hooks.push_back({attention, std::move(attention->forward_hook)});
      // Each forward of the module (the last one wins) leaves what the composite core computed. The
      // hook makes the module run that core, not the fused one, which has no weights to show.
      attention->forward_hook = [&rec = records[n], &key_mask = key_masks[n]](const AttentionCall& call) {
        rec.q = call.q.detach();
        rec.k = call.k.detach();
        rec.weights = call.weights.detach();
        if (call.geometry.key_state.defined()) rec.key_state = call.geometry.key_state.detach();
        rec.causal = call.geometry.causal;
        rec.positions = call.geometry.positions().to(Device::cpu()).contiguous().to_vector<int64_t>();
        key_mask = call.key_padding_mask;
      };
    }
    model.module->eval();
    NoGradGuard no_grad;
    model.logits(batch);
  }  // restore: hooks, training mode
  for (size_t n = 0; n < sites.size(); ++n) {
    const AttentionSite& s = sites[n];
    AttentionRecord& rec = records[n];
    rec.layer = s.layer;
    rec.place = attention_place_name(s.place);
    rec.attention = s.attention;
    rec.positional = s.attention->positional.get();
    rec.scheme = rec.positional ? rec.positional->name() : "none";
    RG_CHECK(rec.weights.defined(), kOp, s.layer, " recorded no attention weights");
    const int64_t B = rec.weights.size(0), t2 = rec.weights.size(2), t1 = rec.weights.size(3);
    RG_CHECK(static_cast<int64_t>(rec.positions.size()) == t2, kOp, s.layer, ": ", rec.positions.size(),
             " query positions for ", t2, " queries");
    // A self-attention's queries are its keys; cross-attention's are the target's tokens.
    const Tensor& query_mask = s.place == AttentionPlace::Cross ? batch.tgt_padding_mask : key_masks[n];
    rec.query_valid = valid_of(query_mask, B, t2);
    rec.key_valid = valid_of(key_masks[n], B, t1);
  }
  return records;
}

// Bit-equal curves (NaN equal to NaN): a scheme object that several layers share and whose response
// does not depend on the layer (T5's one table per stack) is reported once.
bool same_values(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size()) return false;
  for (size_t n = 0; n < a.size(); ++n)
    if (!(a[n] == b[n] || (std::isnan(a[n]) && std::isnan(b[n])))) return false;
  return true;
}

std::vector<ProbeCurve> positional_response(const std::vector<AttentionRecord>& records, int64_t reach) {
  const int64_t R = auto_reach(records, reach);
  std::vector<ProbeCurve> out;
  std::vector<std::pair<const PositionalScheme*, size_t>> seen;  // scheme object → its first curve index
  for (const AttentionRecord& rec : records) {
    const PositionalScheme* s = rec.positional;
    if (!s) continue;
    const int64_t H = rec.weights.size(1), D = rec.attention->head_dim;
    ResponseInput in;
    in.q = rec.q;
    in.k = rec.k;
    in.positions = rec.positions;
    in.query_valid = rec.query_valid;
    in.key_valid = rec.key_valid;
    in.causal = rec.causal;
    in.geometry = AttentionGeometry::make(rec.weights.size(0), H, D, rec.weights.size(2), rec.weights.size(3),
                                          rec.causal);
    in.geometry.key_state = rec.key_state;
    std::vector<std::vector<double>> values = s->response(in, R);  // (H, 2R + 1)
    if (values.empty()) continue;                                  // a scheme without a response curve
    RG_CHECK(static_cast<int64_t>(values.size()) == H, kOp, rec.layer, ": the ", rec.scheme,
             " scheme's response has ", values.size(), " heads, the attention ", H);
    std::vector<ProbeCurve> curves;
    for (int64_t h = 0; h < H; ++h) {
      curves.push_back(make_curve(rec, "response", static_cast<int>(h), R));
      RG_CHECK(values[h].size() == curves[h].delta.size(), kOp, rec.layer, ": the ", rec.scheme,
               " scheme's response has ", values[h].size(), " offsets, expected ", curves[h].delta.size());
      curves[h].value = std::move(values[h]);
    }
    if (rec.causal)  // future keys are masked: the model never uses these values
      for (ProbeCurve& c : curves)
        for (size_t n = 0; n < c.delta.size(); ++n)
          if (c.delta[n] > 0) c.value[n] = kNaN;
    auto first = std::find_if(seen.begin(), seen.end(), [&](const auto& p) {
      if (p.first != s) return false;
      for (int64_t h = 0; h < H; ++h)
        if (p.second + h >= out.size() || out[p.second + h].layer != out[p.second].layer ||
            !same_values(out[p.second + h].value, curves[h].value))
          return false;
      return true;
    });
    if (first != seen.end()) {  // the same object's curves, reported already: name this layer too
      for (size_t n = first->second; n < out.size() && out[n].layer == out[first->second].layer; ++n)
        out[n].shared_by.push_back(rec.layer);
      continue;
    }
    seen.push_back({s, out.size()});
    for (ProbeCurve& c : curves) out.push_back(std::move(c));
  }
  return out;
}

std::vector<ProbeCurve> attention_mass_by_offset(const std::vector<AttentionRecord>& records, int64_t reach) {
  const int64_t R = auto_reach(records, reach);
  std::vector<ProbeCurve> out;
  for (const AttentionRecord& rec : records) {
    const int64_t B = rec.weights.size(0), H = rec.weights.size(1), t2 = rec.weights.size(2),
                  t1 = rec.weights.size(3);
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
    std::vector<bool> occurs(2 * R + 1, false);  // the same for every head
    for (auto [b, i] : queries)
      for (int64_t j = 0; j < t1; ++j) {
        const int64_t delta = j - rec.positions[i];
        if (std::abs(delta) <= R && rec.key_valid[b * t1 + j] && !(rec.causal && j > rec.positions[i]))
          occurs[delta + R] = true;
      }
    for (int64_t h = 0; h < H; ++h) {
      ProbeCurve c = make_curve(rec, "attention_mass", static_cast<int>(h), R);
      c.occurs = occurs;
      for (auto [b, i] : queries)
        for (int64_t j = 0; j < t1; ++j) {
          const double x = w[((b * H + h) * t2 + i) * t1 + j];
          const int64_t delta = j - rec.positions[i];
          if (std::abs(delta) <= R)
            c.value[delta + R] += x;
          else
            c.outside += x;
        }
      const double n = static_cast<double>(queries.size());
      for (double& v : c.value) v = queries.empty() ? kNaN : v / n;
      c.outside = queries.empty() ? kNaN : c.outside / n;
      out.push_back(std::move(c));
    }
  }
  return out;
}

std::vector<double> drawn_values(const ProbeCurve& curve) {
  std::vector<double> v = curve.value;
  for (size_t n = 0; n < v.size() && n < curve.occurs.size(); ++n)
    if (!curve.occurs[n]) v[n] = kNaN;
  return v;
}

std::vector<ProbeCurve> positional_response(RunModel& model, const Batch& batch, int64_t reach) {
  return positional_response(record_attention(model, batch), reach);
}

std::vector<ProbeCurve> attention_mass_by_offset(RunModel& model, const Batch& batch, int64_t reach) {
  return attention_mass_by_offset(record_attention(model, batch), reach);
}

std::vector<ProbeCurve> probe(RunModel& model, const Batch& batch, int64_t reach) {
  return probe(record_attention(model, batch), reach);
}

std::vector<ProbeCurve> probe(const std::vector<AttentionRecord>& records, int64_t reach) {
  std::vector<ProbeCurve> curves = positional_response(records, reach);
  for (ProbeCurve& c : attention_mass_by_offset(records, reach)) curves.push_back(std::move(c));
  return curves;
}

bool has_finite(const ProbeCurve& c) {
  return std::any_of(c.value.begin(), c.value.end(), [](double v) { return std::isfinite(v); });
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
  RG_CHECK_T(IndexError, false, kOp, c.layer, " head ", c.head, " (", c.kind, ") has no δ = ", delta,
             " (range ", c.delta.empty() ? 0 : c.delta.front(), " … ", c.delta.empty() ? 0 : c.delta.back(),
             ")");
  return kNaN;
}

std::string probe_table(const std::vector<ProbeCurve>& curves) {
  // Every cell without a value prints ".": an undefined value (NaN: a masked offset, no pair at that
  // offset) as well as an offset beyond the curve, as the footnote says.
  bool empty_cell = false;
  auto fmt = [&](double v) {
    char buf[32];
    if (std::isnan(v)) return empty_cell = true, std::string(".");
    std::snprintf(buf, sizeof buf, "%.4g", v);
    return std::string(buf);
  };
  size_t width = 5;
  for (const auto& c : curves) width = std::max(width, c.layer.size());
  std::ostringstream out;
  char line[256];
  std::snprintf(line, sizeof line, "%-*s  %-14s  %-14s  %4s  %6s  %10s  %s\n", static_cast<int>(width),
                "layer", "kind", "scheme", "head", "peak", "at peak", "values at delta = peak-3 .. peak+3");
  out << line;
  for (const auto& c : curves) {
    const bool finite = has_finite(c);
    std::string peak = ".", at = ".", around;
    empty_cell = empty_cell || !finite;
    if (finite) {
      const int64_t p = peak_offset(c);
      peak = std::to_string(p);
      at = fmt(value_at(c, p));
      for (int64_t d = p - 3; d <= p + 3; ++d) {
        bool inside = !c.delta.empty() && d >= c.delta.front() && d <= c.delta.back();
        empty_cell = empty_cell || !inside;
        around += (d > p - 3 ? " " : "") + (inside ? fmt(value_at(c, d)) : std::string("."));
      }
    }
    std::string scheme = c.scheme + (c.shared_by.size() > 1 ? "*" + std::to_string(c.shared_by.size()) : "");
    std::snprintf(line, sizeof line, "%-*s  %-14s  %-14s  %4d  %6s  %10s  ", static_cast<int>(width),
                  c.layer.c_str(), c.kind.c_str(), scheme.c_str(), c.head, peak.c_str(), at.c_str());
    out << line << around;
    if (c.kind == "attention_mass" && c.outside > 0) out << "  (beyond the range: " << fmt(c.outside) << ")";
    out << "\n";
  }
  if (std::any_of(curves.begin(), curves.end(), [](const ProbeCurve& c) { return c.shared_by.size() > 1; }))
    out << "*n: one table shared by n layers (reported under the first)\n";
  if (empty_cell)
    out << ".: no value (a masked offset, an offset no query-key pair has, or beyond the curve)\n";
  return out.str();
}

std::vector<std::string> write_probe_pictures(const std::vector<ProbeCurve>& curves,
                                              const std::string& out_dir) {
  std::error_code ec;
  std::filesystem::create_directories(out_dir, ec);
  RG_CHECK(!ec && std::filesystem::is_directory(out_dir), kOp, out_dir, ": cannot create the directory (",
           ec.message(), ")");
  // Groups in first-seen order: (layer, kind) → its curves (one per head).
  std::vector<std::vector<const ProbeCurve*>> groups;
  for (const ProbeCurve& c : curves) {
    auto g = std::find_if(groups.begin(), groups.end(),
                          [&](const auto& v) { return v[0]->layer == c.layer && v[0]->kind == c.kind; });
    if (g == groups.end())
      groups.push_back({&c});
    else
      g->push_back(&c);
  }
  std::vector<std::string> written;
  for (const auto& rows : groups) {
    const ProbeCurve& first = *rows.front();
    for (const ProbeCurve* c : rows)
      RG_CHECK(c->delta == first.delta, kOp, first.layer, " (", first.kind,
               "): heads over different δ ranges");
    if (first.delta.empty()) continue;
    const std::string stem = (std::filesystem::path(out_dir) / file_stem(first.layer, first.kind)).string();
    write_file_atomic(stem + ".heatmap.png", plot_detail::render_png(heatmap_scene(rows)), kOp);
    written.push_back(stem + ".heatmap.png");
    PlotPanel panel;
    panel.title = first.layer + " " + first.kind + " (" + first.scheme + ")";
    panel.x_label = "delta = key - query";
    panel.y_label = first.kind == "attention_mass" ? "share of attention" : "logit term";
    for (const ProbeCurve* c : rows) {
      PlotSeries series{"head " + std::to_string(c->head), {}, c->value};
      for (int64_t d : c->delta) series.x.push_back(static_cast<double>(d));
      panel.series.push_back(std::move(series));
    }
    write_plot(stem + ".curves.svg", {panel});
    written.push_back(stem + ".curves.svg");
  }
  return written;
}

}  // namespace relgrad
