// Plot layout, the drawing of panels (a Scene) and its SVG back end; write_plot (the PNG back end is
// train/plot/plot_png.cpp, the training-log reader train/plot/plot.cpp).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include "core/base/error.h"
#include "core/file_io.h"
#include "train/plot/plot.h"

namespace relgrad {
namespace {

constexpr const char* kWho = "plot";
constexpr double kInf = std::numeric_limits<double>::infinity();

}  // namespace

// ---- layout -------------------------------------------------------------------------------------
namespace plot_detail {
namespace {

constexpr Color kGrid{230, 230, 230};
constexpr Color kText{34, 34, 34};
constexpr Color kMuted{150, 150, 150};
constexpr Color kLegendFrame{204, 204, 204};

// Labels are drawn as valid UTF-8 without control characters: anything else becomes '?'.
std::string clean_text(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size();) {
    auto c = static_cast<unsigned char>(s[i]);
    size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    bool ok = n > 0 && i + n <= s.size();
    for (size_t k = 1; ok && k < n; ++k) ok = (static_cast<unsigned char>(s[i + k]) & 0xC0) == 0x80;
    if (ok && n == 1 && (c < 0x20 || c == 0x7F)) ok = false;
    if (ok && n >= 2) {  // no overlong forms, surrogates or code points beyond U+10FFFF
      uint32_t cp = c & (0x7F >> n);
      for (size_t k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
      ok = cp >= (n == 2 ? 0x80u : n == 3 ? 0x800u : 0x10000u) && cp <= 0x10FFFF && (cp < 0xD800 || cp > 0xDFFF);
    }
    if (ok) out.append(s, i, n), i += n;
    else out += '?', ++i;
  }
  return out;
}

size_t glyph_count(const std::string& clean) {
  size_t n = 0;
  for (char c : clean) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}

std::string format(const char* fmt, int precision, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, fmt, precision, v);
  return buf;
}

// A range that is not degenerate: a constant becomes constant +- 10% (+- 1 near zero).
void widen(double* lo, double* hi) {
  if (*hi - *lo > 1e-9 * std::max(std::fabs(*lo), std::fabs(*hi))) return;
  double mid = *lo / 2 + *hi / 2;
  double pad = std::fabs(mid) > 1e-200 ? std::fabs(mid) * 0.1 : 1;
  *lo = mid - pad;
  *hi = mid + pad;
}

// 1-2-5 steps, about `target` of them; the axis range is rounded out to whole steps.
Axis linear_axis(double lo, double hi, int target) {
  widen(&lo, &hi);
  Axis a;
  double raw = (hi / 2 - lo / 2) / (target / 2.0);  // halves: hi - lo may overflow
  double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double norm = raw / mag;
  double step = (norm < 1.5 ? 1 : norm < 3 ? 2 : norm < 7 ? 5 : 10) * mag;
  double first = std::floor(lo / step + 1e-9), last = std::ceil(hi / step - 1e-9);
  if (!(step > 0) || !std::isfinite(first * step) || !std::isfinite(last * step) || last - first > 60) {
    a.lo = lo, a.hi = hi, a.ticks = {lo, hi};  // extreme magnitudes: just the ends
    for (double t : a.ticks) a.labels.push_back(format("%.*g", 4, t));
    return a;
  }
  a.lo = first * step;
  a.hi = last * step;
  double biggest = std::max(std::fabs(a.lo), std::fabs(a.hi));
  int e = static_cast<int>(std::floor(std::log10(step) + 1e-9));
  bool fixed = biggest < 1e6 && e >= -4;
  int digits = std::clamp(static_cast<int>(std::floor(std::log10(biggest) + 1e-9)) - e + 1, 1, 15);
  for (double i = first; i <= last; ++i) {
    double t = std::fabs(i) < 0.5 ? 0.0 : i * step;
    a.ticks.push_back(t);
    a.labels.push_back(fixed ? format("%.*f", std::max(0, -e), t) : format("%.*g", digits, t));
  }
  return a;
}

// Whole decades; with at most two, also 2x and 5x ticks. lo/hi of the result are log10 values.
Axis log_axis(double lo, double hi, int target) {
  Axis a;
  a.log = true;
  double llo = std::log10(lo), lhi = std::log10(hi);
  if (!(lhi - llo > 1e-9)) llo -= 0.5, lhi += 0.5;
  a.lo = std::max(-323.0, std::floor(llo));
  a.hi = std::min(308.0, std::max(a.lo + 1, std::ceil(lhi)));
  int decades = static_cast<int>(a.hi - a.lo);
  int stride = std::max(1, (decades + target - 1) / std::max(1, target));
  std::vector<double> ticks;
  for (int k = 0; k <= decades; k += stride) ticks.push_back(std::pow(10.0, a.lo + k));
  for (int k = 0; decades <= 2 && k < decades; ++k)
    for (double m : {2.0, 5.0}) ticks.push_back(m * std::pow(10.0, a.lo + k));
  std::sort(ticks.begin(), ticks.end());
  for (double t : ticks) {
    a.ticks.push_back(t);
    a.labels.push_back(format("%.*g", 6, t));
  }
  return a;
}

bool drawable(const PlotPanel& p, double x, double y) {
  return std::isfinite(x) && std::isfinite(y) && (!p.log_y || y > 0);
}

}  // namespace

double PanelGeometry::to_px(double v) const {
  double f = (v / 2 - x.lo / 2) / (x.hi / 2 - x.lo / 2);
  return left + std::clamp(f, -0.01, 1.01) * (right - left);
}

double PanelGeometry::to_py(double v) const {
  double f = y.log ? (std::log10(v) - y.lo) / (y.hi - y.lo) : (v / 2 - y.lo / 2) / (y.hi / 2 - y.lo / 2);
  return bottom - std::clamp(std::isnan(f) ? 0.0 : f, -0.01, 1.01) * (bottom - top);
}

namespace {

PanelGeometry panel_geometry(const PlotPanel& panel, int width, int height_per_panel, size_t index,
                             double left_at_least) {
  double xlo = kInf, xhi = -kInf, ylo = kInf, yhi = -kInf;
  for (const PlotSeries& s : panel.series) {
    for (size_t i = 0; i < std::min(s.x.size(), s.y.size()); ++i) {
      if (std::isfinite(s.x[i])) xlo = std::min(xlo, s.x[i]), xhi = std::max(xhi, s.x[i]);
      if (drawable(panel, s.x[i], s.y[i])) ylo = std::min(ylo, s.y[i]), yhi = std::max(yhi, s.y[i]);
    }
  }
  if (xlo > xhi) xlo = 0, xhi = 1;  // no data: a plain unit axis
  if (ylo > yhi) ylo = panel.log_y ? 1 : 0, yhi = panel.log_y ? 10 : 1;
  PanelGeometry g{};
  double top0 = static_cast<double>(index) * height_per_panel;
  g.top = top0 + 36.5;
  g.bottom = top0 + height_per_panel - 45.5;
  int y_target = std::max(2, static_cast<int>((g.bottom - g.top) / 60));  // about one tick per 60 pixels
  g.y = panel.log_y ? log_axis(ylo, yhi, y_target) : linear_axis(ylo, yhi, y_target);
  size_t label_chars = 0;
  for (const std::string& l : g.y.labels) label_chars = std::max(label_chars, l.size());
  g.left = std::floor(std::max({50.0, 32.0 + 6.0 * static_cast<double>(label_chars), left_at_least})) + 0.5;
  g.right = std::max(g.left + 40, static_cast<double>(width) - 20.5);
  g.x = linear_axis(xlo, xhi, std::max(2, static_cast<int>((g.right - g.left) / 130)));
  return g;
}

}  // namespace

std::vector<PanelGeometry> plot_layout(const std::vector<PlotPanel>& panels, int width, int height_per_panel) {
  std::vector<PanelGeometry> layout;
  double left = 0;
  for (size_t k = 0; k < panels.size(); ++k) {
    layout.push_back(panel_geometry(panels[k], width, height_per_panel, k, 0));
    left = std::max(left, layout.back().left);
  }
  for (size_t k = 0; k < panels.size(); ++k)
    if (layout[k].left < left) layout[k] = panel_geometry(panels[k], width, height_per_panel, k, left);
  return layout;
}

Scene build_scene(const std::vector<PlotPanel>& panels, int width, int height_per_panel) {
  RG_CHECK(!panels.empty(), kWho, "nothing to plot: no panels");
  RG_CHECK(width >= 240 && width <= 8192, kWho, "width ", width, " is outside [240, 8192]");
  RG_CHECK(height_per_panel >= 160 && height_per_panel <= 8192, kWho, "height_per_panel ", height_per_panel,
           " is outside [160, 8192]");
  RG_CHECK(panels.size() * static_cast<size_t>(height_per_panel) <= 32768, kWho, panels.size(),
           " panels of ", height_per_panel, " pixels are taller than 32768 pixels");
  for (const PlotPanel& p : panels)
    for (const PlotSeries& s : p.series)
      RG_CHECK(s.x.size() == s.y.size(), kWho, "series \"", s.label, "\" of panel \"", p.title, "\" has ",
               s.x.size(), " x values but ", s.y.size(), " y values");
  Scene scene;
  scene.width = width;
  scene.height = static_cast<int>(panels.size()) * height_per_panel;
  auto& items = scene.items;
  auto line = [&](double x0, double y0, double x1, double y1, double w, Color c, const char* cls = nullptr) {
    items.push_back(LineItem{{{x0, y0}, {x1, y1}}, w, c, cls});
  };
  auto text = [&](double x, double y, const std::string& t, int scale, Anchor a, Color c, bool vertical = false) {
    items.push_back(TextItem{x, y, clean_text(t), scale, a, vertical, c});
  };
  items.push_back(RectItem{0, 0, double(width), double(scene.height), true, kBackground, 0, kBackground});
  std::vector<PanelGeometry> layout = plot_layout(panels, width, height_per_panel);
  for (size_t k = 0; k < panels.size(); ++k) {
    const PlotPanel& p = panels[k];
    const PanelGeometry& g = layout[k];
    double top0 = static_cast<double>(k) * height_per_panel, mid_x = (g.left + g.right) / 2;
    auto snap = [](double v) { return std::floor(v) + 0.5; };  // crisp 1-pixel lines
    for (size_t i = 0; i < g.x.ticks.size(); ++i) {
      double px = snap(g.to_px(g.x.ticks[i]));
      line(px, g.top, px, g.bottom, 1, kGrid);
      line(px, g.bottom, px, g.bottom + 4, 1, kFrame);
      text(px, g.bottom + 12, g.x.labels[i], 1, Anchor::Middle, kText);
    }
    for (size_t i = 0; i < g.y.ticks.size(); ++i) {
      double py = snap(g.to_py(g.y.ticks[i]));
      line(g.left, py, g.right, py, 1, kGrid);
      line(g.left - 4, py, g.left, py, 1, kFrame);
      text(g.left - 7, py, g.y.labels[i], 1, Anchor::End, kText);
    }
    items.push_back(RectItem{g.left, g.top, g.right - g.left, g.bottom - g.top, false, kBackground, 1, kFrame});
    text(mid_x, top0 + 18, p.title, 2, Anchor::Middle, kText);
    text(mid_x, g.bottom + 30, p.x_label, 1, Anchor::Middle, kText);
    text(12, (g.top + g.bottom) / 2, p.y_label + (p.log_y ? " (log)" : ""), 1, Anchor::Middle, kText, true);

    // Data: one polyline per run of drawable points.
    std::vector<std::pair<double, double>> all_points;  // the points drawn, and samples between them
    for (size_t s = 0; s < p.series.size(); ++s) {
      const PlotSeries& ser = p.series[s];
      LineItem run{{}, 2, kPalette[s % 10], "data"};
      for (size_t i = 0; i <= ser.x.size(); ++i) {
        if (i < ser.x.size() && drawable(p, ser.x[i], ser.y[i])) {
          std::pair<double, double> q{g.to_px(ser.x[i]), g.to_py(ser.y[i])};
          if (!run.points.empty()) {  // samples every ~4 pixels along the line, for the legend below
            auto [x0, y0] = run.points.back();
            int n = static_cast<int>(std::min(2000.0, std::hypot(q.first - x0, q.second - y0) / 4));
            for (int k = 1; k <= n; ++k)
              all_points.emplace_back(x0 + (q.first - x0) * k / (n + 1), y0 + (q.second - y0) * k / (n + 1));
          }
          run.points.push_back(q);
          all_points.push_back(q);
        } else if (!run.points.empty()) {
          items.emplace_back(std::in_place_type<LineItem>, std::move(run));
          run = LineItem{{}, 2, kPalette[s % 10], "data"};
        }
      }
    }
    if (all_points.empty()) text(mid_x, (g.top + g.bottom) / 2, "no data", 2, Anchor::Middle, kMuted);
    if (p.series.empty()) continue;

    // Legend, where the fewest data points lie under it or within 4 pixels of it: a corner, else the
    // middle of a side. A short run's flat curves lie along the top and the bottom (an accuracy that
    // did not move, a sequence accuracy of 0), under all four corners; the middle of the right side is
    // free there.
    size_t chars = 0;
    for (const PlotSeries& s : p.series) chars = std::max(chars, glyph_count(clean_text(s.label)));
    double bw = 46 + 6.0 * static_cast<double>(chars), bh = 8 + 14.0 * static_cast<double>(p.series.size());
    const double right = g.right - 8 - bw, left = g.left + 8, center = (g.left + g.right - bw) / 2;
    const double upper = g.top + 8, lower = g.bottom - 8 - bh, middle = (g.top + g.bottom - bh) / 2;
    const std::pair<double, double> places[] = {{right, upper},  {left, upper},  {right, lower},
                                                {left, lower},   {right, middle}, {left, middle},
                                                {center, upper}, {center, lower}};
    double best_x = 0, best_y = 0;
    size_t best = SIZE_MAX;
    for (const auto& [bx, by] : places) {
      size_t under = 0;
      for (const auto& [px, py] : all_points)
        under += px >= bx - 4 && px <= bx + bw + 4 && py >= by - 4 && py <= by + bh + 4;
      if (under < best) best = under, best_x = bx, best_y = by;
    }
    best_x = std::floor(best_x) + 0.5, best_y = std::floor(best_y) + 0.5;
    items.push_back(RectItem{best_x, best_y, bw, bh, true, kBackground, 1, kLegendFrame});
    for (size_t s = 0; s < p.series.size(); ++s) {
      double ey = best_y + 11 + 14.0 * static_cast<double>(s);
      line(best_x + 8, ey, best_x + 30, ey, 2, kPalette[s % 10], "legend");
      text(best_x + 37, ey, p.series[s].label, 1, Anchor::Start, kText);
    }
  }
  return scene;
}

// ---- SVG ----------------------------------------------------------------------------------------
namespace {

std::string xml_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string hex(Color c) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "#%02x%02x%02x", c.r, c.g, c.b);
  return buf;
}

std::string num(double v) { return format("%.*f", 2, v); }

}  // namespace

std::string render_svg(const Scene& scene) {
  std::string out = "<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"no\"?>\n";
  out += "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"" + std::to_string(scene.width) +
         "\" height=\"" + std::to_string(scene.height) + "\" viewBox=\"0 0 " + std::to_string(scene.width) + " " +
         std::to_string(scene.height) + "\">\n";
  for (const Item& item : scene.items) {
    if (const auto* r = std::get_if<RectItem>(&item)) {
      out += "<rect x=\"" + num(r->x) + "\" y=\"" + num(r->y) + "\" width=\"" + num(r->w) + "\" height=\"" +
             num(r->h) + "\" fill=\"" + (r->filled ? hex(r->fill) : "none") + "\"";
      if (r->stroke_width > 0) out += " stroke=\"" + hex(r->stroke) + "\" stroke-width=\"" + num(r->stroke_width) + "\"";
      out += "/>\n";
    } else if (const auto* l = std::get_if<LineItem>(&item)) {
      std::string cls = l->svg_class ? std::string("class=\"") + l->svg_class + "\" " : "";
      if (l->points.size() == 1) {
        out += "<circle " + cls + "cx=\"" + num(l->points[0].first) + "\" cy=\"" + num(l->points[0].second) + "\" r=\"" +
               num(1.25 * l->width) + "\" fill=\"" + hex(l->color) + "\"/>\n";
        continue;
      }
      if (l->points.size() == 2 && !l->svg_class) {  // grid lines and ticks
        out += "<line x1=\"" + num(l->points[0].first) + "\" y1=\"" + num(l->points[0].second) + "\" x2=\"" +
               num(l->points[1].first) + "\" y2=\"" + num(l->points[1].second) + "\" stroke=\"" + hex(l->color) +
               "\" stroke-width=\"" + num(l->width) + "\"/>\n";
        continue;
      }
      out += "<polyline " + cls + "fill=\"none\" stroke=\"" + hex(l->color) + "\" stroke-width=\"" + num(l->width) +
             "\" stroke-linejoin=\"round\" stroke-linecap=\"round\" points=\"";
      for (size_t i = 0; i < l->points.size(); ++i)
        out += (i ? " " : "") + num(l->points[i].first) + "," + num(l->points[i].second);
      out += "\"/>\n";
    } else {
      const auto& t = std::get<TextItem>(item);
      // The built-in font is 5x7 in a 6x8 cell; monospace at 10 px per scale unit matches its advance.
      const char* anchor = t.anchor == Anchor::Start ? "start" : t.anchor == Anchor::Middle ? "middle" : "end";
      double baseline = t.y + 3.5 * t.scale;
      out += "<text x=\"" + num(t.x) + "\" y=\"" + num(baseline) + "\"";
      if (t.vertical) out += " transform=\"rotate(-90 " + num(t.x) + " " + num(t.y) + ")\"";
      out += " font-family=\"monospace\" font-size=\"" + std::to_string(10 * t.scale) + "\" text-anchor=\"" +
             anchor + "\" fill=\"" + hex(t.color) + "\">" + xml_escape(t.text) + "</text>\n";
    }
  }
  out += "</svg>\n";
  return out;
}

}  // namespace plot_detail

// ---- entry points -------------------------------------------------------------------------------
std::string plot_detail::plot_extension(const std::string& path) {
  size_t slash = path.find_last_of('/'), dot = path.find_last_of('.');
  bool has_ext = dot != std::string::npos && (slash == std::string::npos || dot > slash);
  std::string ext = has_ext ? ascii_lower(path.substr(dot)) : "";
  RG_CHECK(has_ext, kWho, path, ": no file extension; use .svg or .png");
  RG_CHECK(ext == ".svg" || ext == ".png", kWho, path, ": unknown extension '", path.substr(dot),
           "'; use .svg or .png");
  return ext;
}

void write_plot(const std::string& path, const std::vector<PlotPanel>& panels, int width, int height_per_panel) {
  std::string ext = plot_detail::plot_extension(path);
  plot_detail::Scene scene = plot_detail::build_scene(panels, width, height_per_panel);
  write_file_atomic(path, ext == ".svg" ? plot_detail::render_svg(scene) : plot_detail::render_png(scene), kWho);
}

}  // namespace relgrad
