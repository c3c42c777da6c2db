// Pictures of probe curves (train/instruments/probe.h): a heatmap per (layer, kind), heads × δ, drawn as a
// plot_detail::Scene and rendered by the PNG back end of train/plot/plot.h; and the curves themselves
// through write_plot (SVG).
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <filesystem>

#include "core/file_io.h"
#include "train/instruments/probe.h"
#include "train/plot/plot.h"

namespace relgrad {

namespace {

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

std::vector<std::string> write_probe_pictures(const std::vector<ProbeCurve>& curves,
                                              const std::string& out_dir) {
  const char* op = "probe";
  std::error_code ec;
  std::filesystem::create_directories(out_dir, ec);
  RG_CHECK(!ec && std::filesystem::is_directory(out_dir), op, out_dir, ": cannot create the directory (",
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
      RG_CHECK(c->delta == first.delta, op, first.layer, " (", first.kind,
               "): heads over different δ ranges");
    if (first.delta.empty()) continue;
    const std::string stem = (std::filesystem::path(out_dir) / file_stem(first.layer, first.kind)).string();
    write_file_atomic(stem + ".heatmap.png", plot_detail::render_png(heatmap_scene(rows)), op);
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
