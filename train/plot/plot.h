// Loss curves from a training log, as SVG or PNG (the rasteriser and 5x7 bitmap font are built in,
// the PNG file is written by libpng: train/plot/plot_png.cpp). The log reader and the standard plot are
// train/plot/plot.cpp, the layout and SVG train/plot/plot_scene.cpp.
//
//   std::vector<LogRecord> log = read_training_log("run/log.jsonl");   // or a .csv log
//   plot_training_log("run/log.jsonl", "run/loss.png");                // loss, accuracy, lr panels
//
//   PlotPanel p{"loss", "step", "loss", /*log_y=*/true, {{"train", steps, losses}}};
//   write_plot("loss.svg", {p});                                       // any panels of your own
//
// Log formats (a file named *.jsonl or *.json is JSONL; otherwise chosen by content: a first non-empty
// line starting with '{' means JSONL, anything else CSV with a header line):
//   JSONL  one object per line: {"event":"train","step":10,"loss":2.31,"lr":0.0003,...}. "event" is
//          a string; every other value is a number, null (= absent) or one of the strings "nan",
//          "inf", "-inf" (any case; "+inf", "infinity" too). Unknown keys are kept when numeric;
//          an unknown key with some other value (a string, array, object) is ignored, so a trainer
//          may add descriptive fields; a well-known key (a number column of the trainer's table,
//          train/trainer/training_log.h: step loss accuracy sequence_accuracy lr grad_norm tokens
//          tokens_per_s elapsed_s) with such a value is an error. true/false are 1/0.
//   CSV    a header naming the columns in any order; it must contain "event" and "step". An empty
//          field is absent; fields may be double-quoted (RFC 4180, within one line).
// Empty lines are skipped. A last line without a newline that does not parse is a record the trainer
// was writing when it was killed: it is skipped silently (a malformed line anywhere else is an
// error). Errors are relgrad::Error "[plot] <path>:<line>: <what>".
//
// Plots: panels stacked vertically, each with a frame, 1-2-5 ticks (decades for log_y), grid,
// title, axis labels and a legend placed in the emptiest corner; series get the colours of a fixed
// palette (matplotlib's tab10) in order. Non-finite points break a line (on a log axis, so do
// y <= 0); a point with no neighbour is drawn as a dot. Degenerate data (one point, constant values,
// no points at all, extreme magnitudes) still gives a valid plot. The output is written atomically
// (core/file_io.h), so a failure never leaves a partial file nor touches the previous one.
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <variant>
#include <vector>

namespace relgrad {

// ---- training logs --------------------------------------------------------------------------------

struct LogRecord {
  std::string event;                     // "train", "eval", ...
  std::map<std::string, double> values;  // "step", "loss", ...; absent fields are not in the map
};

// Every record of a JSONL or CSV training log, in file order. Throws relgrad::Error for malformed
// input, for a log with no records and for a log without a single "train" record that has a loss.
std::vector<LogRecord> read_training_log(const std::string& path);

// ---- plots --------------------------------------------------------------------------------------

struct PlotSeries {
  std::string label;
  std::vector<double> x, y;  // same length
};

struct PlotPanel {
  std::string title, x_label, y_label;
  bool log_y = false;
  std::vector<PlotSeries> series;
};

// Writes the panels, stacked vertically, to `path`: SVG 1.1 for ".svg", PNG (8-bit RGB) for ".png"
// (extension case-insensitive; anything else is an error). width in [240, 8192] pixels,
// height_per_panel in [160, 8192], total height at most 32768.
void write_plot(const std::string& path, const std::vector<PlotPanel>& panels, int width = 900,
                int height_per_panel = 360);

// The standard plot of a training log: panel "loss" (train and eval loss against step; log y when
// the finite values are all positive and span more than a decade), panel "held-out accuracy" when
// eval records have accuracy (and sequence_accuracy), panel "learning rate" when train records have
// lr. Records without a step are left out. When the step goes back (a run resumed from an earlier
// checkpoint), the new points replace the old ones from that step on.
void plot_training_log(const std::string& log_path, const std::string& out_path);

// ---- internals shared by plot.cpp, plot_scene.cpp and plot_png.cpp (and the tests); not a stable API
namespace plot_detail {

struct Color {
  uint8_t r, g, b;
  bool operator==(const Color& o) const { return r == o.r && g == o.g && b == o.b; }
};
inline constexpr Color kBackground{255, 255, 255};
inline constexpr Color kFrame{51, 51, 51};
// The series colours, in order (matplotlib's tab10); series k gets palette[k % 10].
inline constexpr Color kPalette[10] = {{31, 119, 180}, {255, 127, 14}, {44, 160, 44},  {214, 39, 40},
                                       {148, 103, 189}, {140, 86, 75}, {227, 119, 194}, {127, 127, 127},
                                       {188, 189, 34},  {23, 190, 207}};

// A drawing in pixel coordinates (x right, y down; pixel (i, j) covers [i, i+1) x [j, j+1)), which
// both back ends render: SVG as elements, PNG with the rasteriser.
enum class Anchor { Start, Middle, End };
struct RectItem {  // filled with `fill` when filled, outlined with `stroke` when stroke_width > 0
  double x, y, w, h;
  bool filled;
  Color fill;
  double stroke_width;
  Color stroke;
};
struct LineItem {  // a polyline; a single point is drawn as a dot of diameter 2.5 * width
  std::vector<std::pair<double, double>> points;
  double width;
  Color color;
  const char* svg_class;  // "data" for series, "legend", or nullptr: the SVG element's class
};
struct TextItem {  // 5x7 font cells of 6x8 pixels times `scale`; y is the text's vertical centre;
  double x, y;     // vertical text reads bottom to top and its anchor applies along that direction
  std::string text;
  int scale;
  Anchor anchor;
  bool vertical;
  Color color;
};
using Item = std::variant<RectItem, LineItem, TextItem>;
struct Scene {
  int width = 0, height = 0;
  std::vector<Item> items;  // painted in order
};

struct Axis {
  double lo = 0, hi = 1;       // the axis range; for a log axis, log10 of it (whole decades)
  bool log = false;
  std::vector<double> ticks;   // tick values (data units, not log10)
  std::vector<std::string> labels;
};
// Where a panel is drawn: its plot area in pixels and its axes.
struct PanelGeometry {
  double left, top, right, bottom;
  Axis x, y;
  double to_px(double v) const;  // data x -> pixel x (v finite)
  double to_py(double v) const;  // data y -> pixel y (v finite, and > 0 on a log axis)
};
// One per panel, top to bottom; the plot areas share their left edge so that the x axes line up.
std::vector<PanelGeometry> plot_layout(const std::vector<PlotPanel>& panels, int width, int height_per_panel);

Scene build_scene(const std::vector<PlotPanel>& panels, int width, int height_per_panel);
std::string render_svg(const Scene& scene);
std::string render_png(const Scene& scene);  // plot_png.cpp

// PNG file bytes of an 8-bit RGB image (rgb: height rows of width * 3 bytes), written by libpng:
// IHDR, IDAT (zlib, deflate level 6, filter "none" on every row), IEND.
std::string encode_png(int width, int height, const std::vector<uint8_t>& rgb);
// The PNG and zlib checksums (CRC-32, Adler-32), for checking files such as these.
uint32_t crc32(const uint8_t* bytes, size_t size, uint32_t crc = 0);
uint32_t adler32(const uint8_t* bytes, size_t size, uint32_t adler = 1);

std::string ascii_lower(std::string s);
// ".svg" or ".png" (lower case) for a plot's path, else an error naming the extension.
std::string plot_extension(const std::string& path);

}  // namespace plot_detail
}  // namespace relgrad
