// Training-log plots (train/plot/plot.h): the JSONL and CSV log reader (values, absent fields, errors with
// line numbers, the truncated-last-line rule), the SVG writer (well-formed, polylines, escaping), the
// PNG writer (decoded here independently: signature, IHDR, every CRC, the zlib stream's stored blocks
// and Adler-32, then pixels), degenerate data, and failures that must leave the previous file alone.
#include <sys/resource.h>
#include <zlib.h>

#include <csignal>
#include <cmath>
#include <filesystem>
#include <regex>

#include "file_testing.h"
#include "testing.h"
#include "train/plot/plot.h"

using namespace relgrad;
using namespace relgrad::testing;
using relgrad::plot_detail::Color;
using relgrad::plot_detail::kPalette;
namespace fs = std::filesystem;

namespace {

const double kNaN = std::nan("");

std::string log_file(const TempDir& dir, const std::string& name, const std::string& text) {
  std::string path = dir.file(name);
  write_bytes(path, text);
  return path;
}

// ---- an independent PNG reader ------------------------------------------------------------------

uint32_t be32(const std::string& s, size_t at) {
  uint32_t v = 0;
  for (size_t k = 0; k < 4; ++k) v = (v << 8) | static_cast<unsigned char>(s[at + k]);
  return v;
}

// Bit by bit, straight from the PNG specification (no table, unlike the library's).
uint32_t reference_crc(const std::string& s, size_t begin, size_t end) {
  uint32_t c = 0xFFFFFFFFu;
  for (size_t i = begin; i < end; ++i) {
    c ^= static_cast<unsigned char>(s[i]);
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1u)));
  }
  return ~c;
}

uint32_t reference_adler(const std::string& s) {
  uint32_t a = 1, b = 0;
  for (unsigned char c : s) a = (a + c) % 65521, b = (b + a) % 65521;
  return (b << 16) | a;
}

struct Image {
  uint32_t width = 0, height = 0;
  size_t idat_bytes = 0, idat_chunks = 0;
  std::vector<uint8_t> rgb;
  Color at(double x, double y) const {  // the pixel containing the point (x, y)
    auto i = static_cast<size_t>(std::floor(y)) * width + static_cast<size_t>(std::floor(x));
    return Color{rgb[3 * i], rgb[3 * i + 1], rgb[3 * i + 2]};
  }
};

// Checks every structural rule the encoder promises and returns the pixels.
Image decode_png(const std::string& png) {
  Image img;
  REQUIRE(png.size() > 8);
  REQUIRE(png.compare(0, 8, std::string("\x89PNG\r\n\x1a\n", 8)) == 0);
  std::string idat;
  std::vector<std::string> types;
  size_t pos = 8;
  while (pos < png.size()) {
    REQUIRE(pos + 12 <= png.size());
    uint32_t len = be32(png, pos);
    REQUIRE(pos + 12 + len <= png.size());
    std::string type = png.substr(pos + 4, 4), data = png.substr(pos + 8, len);
    INFO("chunk ", type, " at ", pos);
    CHECK(be32(png, pos + 8 + len) == reference_crc(png, pos + 4, pos + 8 + len));
    types.push_back(type);
    if (type == "IHDR") {
      REQUIRE(len == 13);
      img.width = be32(data, 0);
      img.height = be32(data, 4);
      CHECK(static_cast<int>(data[8]) == 8);   // bit depth
      CHECK(static_cast<int>(data[9]) == 2);   // RGB
      CHECK(static_cast<int>(data[10]) == 0);  // deflate
      CHECK(static_cast<int>(data[11]) == 0);  // filter method
      CHECK(static_cast<int>(data[12]) == 0);  // no interlace
    } else if (type == "IDAT") {
      idat += data;
      ++img.idat_chunks;
    } else {
      CHECK(type == "IEND");
      CHECK(len == 0);
    }
    pos += 12 + len;
  }
  REQUIRE(types.size() >= 3);
  CHECK(types.front() == "IHDR");
  CHECK(types.back() == "IEND");
  REQUIRE(img.width > 0);
  REQUIRE(img.height > 0);

  // A zlib stream (zlib's own inflate checks the deflate data and the Adler-32 of the inflated bytes).
  REQUIRE(idat.size() >= 2 + 5 + 4);
  auto byte = [&](size_t i) { return static_cast<uint32_t>(static_cast<unsigned char>(idat[i])); };
  CHECK((byte(0) & 0x0F) == 8);               // deflate
  CHECK((byte(0) * 256 + byte(1)) % 31 == 0);  // FCHECK
  CHECK((byte(1) & 0x20) == 0);                // no preset dictionary
  img.idat_bytes = idat.size();
  std::string raw(static_cast<size_t>(img.height) * (1 + 3 * static_cast<size_t>(img.width)), '\0');
  uLongf raw_size = raw.size();
  REQUIRE(uncompress(reinterpret_cast<Bytef*>(raw.data()), &raw_size,
                     reinterpret_cast<const Bytef*>(idat.data()), idat.size()) == Z_OK);
  REQUIRE(raw_size == raw.size());
  CHECK(be32(idat, idat.size() - 4) == reference_adler(raw));

  const size_t row = 1 + 3 * static_cast<size_t>(img.width);
  REQUIRE(raw.size() == row * img.height);
  for (size_t y = 0; y < img.height; ++y) {
    REQUIRE(raw[y * row] == '\0');  // filter type none: the bytes are the pixels
    img.rgb.insert(img.rgb.end(), raw.begin() + static_cast<long>(y * row + 1), raw.begin() + static_cast<long>((y + 1) * row));
  }
  return img;
}

// ---- SVG checks ---------------------------------------------------------------------------------

bool entities_ok(const std::string& s) {
  static const std::regex entity("^&(amp|lt|gt|quot|apos);");
  for (size_t i = 0; i < s.size(); ++i)
    if (s[i] == '&' && !std::regex_search(s.substr(i, 8), entity)) return false;
  return true;
}

// Empty when `svg` is well-formed XML with one <svg> root: balanced tags, quoted attributes, no raw
// '<' or '>' or lone '&' in text or attribute values.
std::string svg_problems(const std::string& svg) {
  std::vector<std::string> open;
  bool root_done = false, root_seen = false;
  size_t pos = 0;
  while (pos < svg.size()) {
    size_t lt = svg.find('<', pos);
    std::string text = svg.substr(pos, lt == std::string::npos ? std::string::npos : lt - pos);
    if (text.find('>') != std::string::npos || !entities_ok(text)) return "bad character data: " + text;
    if (open.empty() && text.find_first_not_of(" \n") != std::string::npos) return "text outside the root";
    if (lt == std::string::npos) break;
    if (svg.compare(lt, 2, "<?") == 0) {
      if (root_seen) return "processing instruction after the root";
      size_t end = svg.find("?>", lt);
      if (end == std::string::npos) return "unterminated <?";
      pos = end + 2;
      continue;
    }
    // The tag, with its attributes: name="value" pairs.
    size_t i = lt + 1;
    bool closing = i < svg.size() && svg[i] == '/';
    if (closing) ++i;
    size_t name_end = svg.find_first_of(" />\n", i);
    if (name_end == std::string::npos || name_end == i) return "bad tag name";
    std::string name = svg.substr(i, name_end - i);
    i = name_end;
    for (;;) {
      while (i < svg.size() && (svg[i] == ' ' || svg[i] == '\n')) ++i;
      if (i >= svg.size()) return "unterminated tag " + name;
      if (svg[i] == '>' || svg.compare(i, 2, "/>") == 0) break;
      size_t eq = svg.find('=', i);
      if (eq == std::string::npos || eq + 1 >= svg.size() || svg[eq + 1] != '"') return "unquoted attribute in " + name;
      size_t close = svg.find('"', eq + 2);
      if (close == std::string::npos) return "unterminated attribute in " + name;
      std::string value = svg.substr(eq + 2, close - eq - 2);
      if (value.find('<') != std::string::npos || !entities_ok(value)) return "bad attribute value: " + value;
      i = close + 1;
    }
    bool self_closing = svg[i] == '/';
    pos = i + (self_closing ? 2 : 1);
    if (closing) {
      if (open.empty() || open.back() != name) return "unbalanced </" + name + ">";
      open.pop_back();
      if (open.empty()) root_done = true;
    } else {
      if (open.empty() && (root_done || name != "svg")) return "element <" + name + "> outside the <svg> root";
      root_seen = true;
      if (!self_closing) open.push_back(name);
    }
  }
  if (!open.empty()) return "unclosed <" + open.back() + ">";
  return root_done ? "" : "no <svg> root";
}

std::string hex(Color c) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "#%02x%02x%02x", c.r, c.g, c.b);
  return buf;
}

// The points of every data <polyline> (not legend samples) stroked in `color`, in document order.
std::vector<std::vector<std::pair<double, double>>> polylines(const std::string& svg, Color color) {
  std::vector<std::vector<std::pair<double, double>>> out;
  static const std::regex element("<polyline ([^>]*)/>");
  static const std::regex points_attr("points=\"([^\"]*)\"");
  const std::string stroke = "stroke=\"" + hex(color) + "\"";
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), element); it != std::sregex_iterator(); ++it) {
    std::string attrs = (*it)[1];
    std::smatch m;
    if (attrs.find("class=\"data\"") == std::string::npos || attrs.find(stroke) == std::string::npos || !std::regex_search(attrs, m, points_attr)) continue;
    std::vector<std::pair<double, double>> pts;
    std::istringstream in(m[1].str());
    std::string pair;
    while (in >> pair) {
      size_t comma = pair.find(',');
      REQUIRE(comma != std::string::npos);
      pts.emplace_back(std::stod(pair.substr(0, comma)), std::stod(pair.substr(comma + 1)));
    }
    out.push_back(pts);
  }
  return out;
}

std::vector<size_t> polyline_sizes(const std::string& svg, Color color) {
  std::vector<size_t> sizes;
  for (const auto& p : polylines(svg, color)) sizes.push_back(p.size());
  return sizes;
}

size_t count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
  return n;
}

// No "*.tmp.*" file left beside the outputs.
size_t temp_files(const TempDir& dir) {
  size_t n = 0;
  for (const auto& entry : fs::directory_iterator(dir.path)) n += entry.path().filename().string().find(".tmp.") != std::string::npos;
  return n;
}

}  // namespace

// ---- reading logs -------------------------------------------------------------------------------

TEST_CASE("plot: JSONL log values, absent fields, nan and null, unknown keys") {
  TempDir dir;
  std::string path = log_file(dir, "log.jsonl",
      "{\"event\":\"train\",\"step\":10,\"loss\":2.31,\"lr\":0.0003,\"grad_norm\":1.2,\"tokens\":1234,"
      "\"tokens_per_s\":5120.5,\"elapsed_s\":3.2}\n"
      "\n"
      "{\"event\":\"train\",\"step\":20,\"loss\":\"nan\",\"lr\":null,\"grad_norm\":\"inf\",\"custom\":7,"
      "\"note\":\"warmup done\",\"flag\":true}\n"
      "  {\"event\":\"eval\",\"step\":100,\"loss\":0.52,\"accuracy\":0.91,\"sequence_accuracy\":0.5,"
      "\"grad_norm\":\"-INF\",\"elapsed_s\":30.1}\r\n");
  std::vector<LogRecord> log = read_training_log(path);
  REQUIRE(log.size() == 3);
  CHECK(log[0].event == "train");
  CHECK(log[0].values.size() == 7);
  CHECK(log[0].values.at("step") == 10);
  CHECK(log[0].values.at("loss") == 2.31);
  CHECK(log[0].values.at("lr") == 0.0003);
  CHECK(log[0].values.at("tokens") == 1234);
  CHECK(log[0].values.at("tokens_per_s") == 5120.5);
  CHECK_FALSE(log[0].values.count("event"));
  CHECK(std::isnan(log[1].values.at("loss")));
  CHECK_FALSE(log[1].values.count("lr"));  // null = absent
  CHECK(log[1].values.at("grad_norm") == INFINITY);
  CHECK(log[1].values.at("custom") == 7);     // unknown numeric key kept
  CHECK_FALSE(log[1].values.count("note"));   // unknown descriptive key ignored
  CHECK(log[1].values.at("flag") == 1);
  CHECK_FALSE(log[1].values.count("accuracy"));
  CHECK(log[2].event == "eval");
  CHECK(log[2].values.at("accuracy") == 0.91);
  CHECK(log[2].values.at("sequence_accuracy") == 0.5);
  CHECK(log[2].values.at("grad_norm") == -INFINITY);
  CHECK(log[2].values.at("elapsed_s") == 30.1);
}

TEST_CASE("plot: CSV log with any column order, empty fields, nan and quotes") {
  TempDir dir;
  std::string path = log_file(dir, "log.csv",
      "step,loss,event,accuracy,lr,extra\r\n"
      "10,2.5,train,,0.001,3\r\n"
      "20, nan ,\"train\",,1e-3,\r\n"
      "\n"
      "30,0.75,eval,0.875,,-inf\n"
      "40,+1.5,\"we said \"\"hi\"\", ok\",,,\n");
  std::vector<LogRecord> log = read_training_log(path);
  REQUIRE(log.size() == 4);
  CHECK(log[0].event == "train");
  CHECK(log[0].values == std::map<std::string, double>{{"step", 10}, {"loss", 2.5}, {"lr", 0.001}, {"extra", 3}});
  CHECK(log[1].event == "train");
  CHECK(std::isnan(log[1].values.at("loss")));
  CHECK(log[1].values.at("lr") == 0.001);
  CHECK_FALSE(log[1].values.count("extra"));
  CHECK_FALSE(log[1].values.count("accuracy"));
  CHECK(log[2].event == "eval");
  CHECK(log[2].values.at("accuracy") == 0.875);
  CHECK(log[2].values.at("extra") == -INFINITY);
  CHECK_FALSE(log[2].values.count("lr"));
  CHECK(log[3].event == "we said \"hi\", ok");
  CHECK(log[3].values.at("loss") == 1.5);

  // The trainer's own header.
  std::string standard = log_file(dir, "std.csv",
      "event,step,loss,accuracy,lr,grad_norm,tokens_per_s,elapsed_s\n"
      "train,1,3.25,,0.0001,0.5,1000,0.1\n");
  log = read_training_log(standard);
  REQUIRE(log.size() == 1);
  CHECK(log[0].values.size() == 6);
  CHECK(log[0].values.at("tokens_per_s") == 1000);
}

TEST_CASE("plot: malformed logs are errors naming the file and line") {
  TempDir dir;
  const std::string good = "{\"event\":\"train\",\"step\":1,\"loss\":1}\n";
  struct Case { std::string text, expected; };
  std::vector<Case> jsonl = {
      {good + "\n{\"event\":\"train\",\"step\":2,\"loss\":}\n" + good, ":3: invalid JSON"},
      {good + "[1,2]\n", ":2: expected a JSON object, got array"},
      {good + "{\"step\":2,\"loss\":1}\n", ":2: the record has no \"event\""},
      {good + "{\"event\":3,\"step\":2}\n", ":2: \"event\" must be a non-empty string"},
      {good + "{\"event\":\"train\",\"step\":2,\"loss\":\"low\"}\n", ":2: \"loss\" must be a number"},
      {good + "{\"event\":\"train\",\"step\":[2]}\n", ":2: \"step\" must be a number"},
      {good + "{\"event\":\"train\",\"step\":\"nan\"}\n", ":2: \"step\" is not finite"},
      {good + "{\"event\":\"train\",\"step\":2} trailing\n", ":2: invalid JSON"},
  };
  for (const Case& c : jsonl) {
    std::string path = log_file(dir, "bad.jsonl", c.text);
    INFO(c.text);
    check_throws_with([&] { read_training_log(path); }, "[plot] " + path + c.expected);
  }
  const std::string header = "event,step,loss\n";
  std::vector<Case> csv = {
      {header + "train,1,2\n\ntrain,2\n", ":4: expected 3 fields as in the header, got 2"},
      {header + "train,1,2,3\n", ":2: expected 3 fields as in the header, got 4"},
      {header + "train,1,abc\n", ":2: column \"loss\": \"abc\" is not a number"},
      {header + "train,1,2.5x\n", ":2: column \"loss\": \"2.5x\" is not a number"},
      {header + ",1,2\n", ":2: the \"event\" field is empty"},
      {header + "\"train,1,2\n", ":2: unbalanced quote"},
      {"event,loss\ntrain,1\n", ":1: the CSV header must have the columns \"event\" and \"step\""},
      {"\nevent,step,step\ntrain,1,1\n", ":2: CSV header names column \"step\" twice"},
      {"event,,step\n", ":1: CSV header column 2 has no name"},
  };
  for (const Case& c : csv) {
    std::string path = log_file(dir, "bad.csv", c.text);
    INFO(c.text);
    check_throws_with([&] { read_training_log(path); }, "[plot] " + path + c.expected);
  }
}

TEST_CASE("plot: a truncated last line is skipped only when it is last and unterminated") {
  TempDir dir;
  const std::string a = "{\"event\":\"train\",\"step\":1,\"loss\":1.5}\n";
  const std::string b = "{\"event\":\"train\",\"step\":2,\"loss\":1.25}\n";
  const std::string cut = "{\"event\":\"train\",\"step\":3,\"lo";

  std::string path = log_file(dir, "cut.jsonl", a + b + cut);
  std::vector<LogRecord> log = read_training_log(path);
  REQUIRE(log.size() == 2);
  CHECK(log[1].values.at("loss") == 1.25);

  // The same partial line with a newline after it is an error ...
  path = log_file(dir, "cut_nl.jsonl", a + b + cut + "\n");
  check_throws_with([&] { read_training_log(path); }, path + ":3: invalid JSON");
  // ... and so is a partial line that is not the last one.
  path = log_file(dir, "cut_mid.jsonl", a + cut + "\n" + b);
  check_throws_with([&] { read_training_log(path); }, path + ":2: invalid JSON");
  // A complete last record without a newline is kept.
  path = log_file(dir, "no_nl.jsonl", a + b.substr(0, b.size() - 1));
  CHECK(read_training_log(path).size() == 2);

  // CSV: a cut row (too few fields) at the very end is skipped; a complete unterminated row is kept.
  const std::string csv = "event,step,loss,lr\ntrain,1,2.5,0.1\ntrain,2,2.25,0.1\n";
  path = log_file(dir, "cut.csv", csv + "train,3,2.");
  CHECK(read_training_log(path).size() == 2);
  path = log_file(dir, "cut_nl.csv", csv + "train,3,2.\n");
  check_throws_with([&] { read_training_log(path); }, path + ":4: expected 4 fields");
  path = log_file(dir, "whole.csv", csv + "train,3,2,0.1");
  CHECK(read_training_log(path).size() == 3);
}

TEST_CASE("plot: empty logs and logs without a train loss are clear errors") {
  TempDir dir;
  std::string path = log_file(dir, "empty.jsonl", "");
  check_throws_with([&] { read_training_log(path); }, "[plot] " + path + ": the training log has no records (the file is empty)");
  path = log_file(dir, "blank.jsonl", "\n  \n\r\n");
  check_throws_with([&] { read_training_log(path); }, "[plot] " + path + ": the training log has no records");
  path = log_file(dir, "header.csv", "event,step,loss\n");
  check_throws_with([&] { read_training_log(path); }, "the training log has no records");
  path = log_file(dir, "only_cut.jsonl", "{\"event\":\"tra");
  check_throws_with([&] { read_training_log(path); }, "the training log has no records");
  path = log_file(dir, "eval_only.jsonl", "{\"event\":\"eval\",\"step\":1,\"loss\":1}\n{\"event\":\"train\",\"step\":2}\n");
  check_throws_with([&] { read_training_log(path); }, "none of the 2 records is a \"train\" record with a loss");
  check_throws_with([&] { read_training_log(dir.file("missing.jsonl")); }, "cannot open");
  check_throws_with([&] { read_training_log(dir.path.string()); }, "not a regular file");
}

// ---- axes and SVG -------------------------------------------------------------------------------

TEST_CASE("plot: axes have 1-2-5 ticks, decades on a log axis, and survive degenerate ranges") {
  using plot_detail::plot_layout;
  PlotPanel p{"t", "x", "y", false, {{"a", {0, 10}, {0.3, 0.7}}}};
  PlotPanel wide{"w", "x", "y", false, {{"a", {0, 1}, {0, 1e5}}}};  // longer tick labels
  auto both = plot_layout({wide, p}, 900, 360);
  auto g = both[1];
  CHECK(both[0].left == g.left);  // the x axes line up
  CHECK(g.left > plot_layout({p}, 900, 360)[0].left);
  CHECK(g.x.ticks == std::vector<double>{0, 2, 4, 6, 8, 10});
  CHECK(g.x.labels == std::vector<std::string>{"0", "2", "4", "6", "8", "10"});
  CHECK(g.y.lo == doctest::Approx(0.3));
  CHECK(g.y.hi == doctest::Approx(0.7));
  CHECK(g.y.labels == std::vector<std::string>{"0.3", "0.4", "0.5", "0.6", "0.7"});
  CHECK(g.top > 360);  // second panel
  CHECK(g.bottom < 720);
  CHECK(g.to_px(0) == doctest::Approx(g.left));
  CHECK(g.to_px(10) == doctest::Approx(g.right));
  CHECK(g.to_py(0.3) == doctest::Approx(g.bottom));
  CHECK(g.to_py(0.5) == doctest::Approx((g.top + g.bottom) / 2));

  p.log_y = true;
  p.series[0].y = {0.05, 3};
  g = plot_layout({p}, 900, 360)[0];
  CHECK(g.y.log);
  CHECK(g.y.lo == -2);
  CHECK(g.y.hi == 1);
  CHECK(g.y.labels == std::vector<std::string>{"0.01", "0.1", "1", "10"});
  CHECK(g.to_py(1) == doctest::Approx(g.top + (g.bottom - g.top) / 3));
  p.series[0].y = {0.2, 0.9};  // within one decade: 2x and 5x ticks too
  g = plot_layout({p}, 900, 360)[0];
  CHECK(g.y.labels == std::vector<std::string>{"0.1", "0.2", "0.5", "1"});

  // Degenerate ranges: every axis has lo < hi and finite ticks.
  std::vector<std::vector<double>> ys = {{2.5, 2.5}, {0, 0}, {kNaN, kNaN}, {}, {1e308, -1e308}, {1e-310, 2e-310}};
  for (bool log_y : {false, true})
    for (const auto& y : ys) {
      PlotPanel d{"t", "x", "y", log_y, {{"a", std::vector<double>(y.size(), 1.0), y}}};
      auto h = plot_layout({d}, 900, 360)[0];
      INFO("log ", log_y, " first y ", y.empty() ? 0.0 : y[0]);
      CHECK(h.x.lo < h.x.hi);
      CHECK(h.y.lo < h.y.hi);
      REQUIRE(h.y.ticks.size() >= 2);
      for (double t : h.y.ticks) CHECK(std::isfinite(t));
      CHECK(h.y.ticks.size() == h.y.labels.size());
      if (!log_y && y.size() == 2 && y[0] == 2.5) CHECK((h.y.lo < 2.5 && h.y.hi > 2.5));
    }
}

TEST_CASE("plot: SVG is well-formed, with one polyline per unbroken run and escaped labels") {
  TempDir dir;
  PlotPanel loss{"a<b & \"c\" 'd' >", "step", "loss & more", false, {}};
  loss.series.push_back({"train <x>", {1, 2, 3, 4, 5, 6}, {5, 4, kNaN, 2, 1.5, 1}});
  loss.series.push_back({"eval", {1, 2, 3}, {4, INFINITY, 2}});  // two single points: dots
  PlotPanel lr{"learning rate", "step", "lr", true, {{"lr", {1, 2, 3, 4, 5}, {1e-4, 1e-3, -1, 1e-2, 0.1}}}};
  lr.series.push_back({"bad\x01label\xff", {}, {}});
  std::string path = dir.file("plot.SVG");  // the extension is case-insensitive
  write_plot(path, {loss, lr}, 700, 300);
  std::string svg = read_bytes(path);
  std::string problems = svg_problems(svg);
  CHECK_MESSAGE(problems.empty(), problems);
  CHECK(svg.find("width=\"700\" height=\"600\"") != std::string::npos);
  CHECK(polyline_sizes(svg, kPalette[0]) == std::vector<size_t>{2, 3, 2, 2});  // train: 2 + 3, lr: 2 + 2 (log: -1 breaks)
  CHECK(count(svg, "<circle class=\"data\"") == 2);                            // eval's isolated points
  CHECK(count(svg, "fill=\"" + hex(kPalette[1]) + "\"") == 2);
  CHECK(svg.find("a&lt;b &amp; &quot;c&quot; &apos;d&apos; &gt;") != std::string::npos);
  CHECK(svg.find("loss &amp; more") != std::string::npos);
  CHECK(svg.find("train &lt;x&gt;") != std::string::npos);
  CHECK(svg.find("bad?label?") != std::string::npos);
  CHECK(svg.find("lr (log)") != std::string::npos);
  CHECK(svg.find("a<b") == std::string::npos);

  // The points are where the geometry puts them.
  auto g = plot_detail::plot_layout({loss, lr}, 700, 300)[0];
  auto runs = polylines(svg, kPalette[0]);
  REQUIRE(runs.size() == 4);
  CHECK(runs[0][0].first == doctest::Approx(g.to_px(1)).epsilon(1e-3));
  CHECK(runs[0][1].second == doctest::Approx(g.to_py(4)).epsilon(1e-3));
  CHECK(runs[1][2].first == doctest::Approx(g.to_px(6)).epsilon(1e-3));
  CHECK(runs[1][2].second == doctest::Approx(g.to_py(1)).epsilon(1e-3));
  CHECK(runs[2][0].second > 300);  // the lr runs are in the second panel
}

// ---- PNG ----------------------------------------------------------------------------------------

TEST_CASE("plot: CRC-32 and Adler-32 match their published check values") {
  const std::string digits = "123456789", wiki = "Wikipedia";
  CHECK(plot_detail::crc32(reinterpret_cast<const uint8_t*>(digits.data()), digits.size()) == 0xCBF43926u);
  CHECK(reference_crc(digits, 0, digits.size()) == 0xCBF43926u);
  CHECK(plot_detail::adler32(reinterpret_cast<const uint8_t*>(wiki.data()), wiki.size()) == 0x11E60398u);
  CHECK(reference_adler(wiki) == 0x11E60398u);
  // Adler-32 over more than 5552 bytes (where the sums must be reduced) of 0xFF.
  std::string ff(100000, '\xff');
  CHECK(plot_detail::adler32(reinterpret_cast<const uint8_t*>(ff.data()), ff.size()) == reference_adler(ff));
}

TEST_CASE("plot: PNG structure, checksums, compression and pixels") {
  TempDir dir;
  // A at y = 2 and B at y = 8 (horizontal), C the diagonal; the axes are [0, 10] both ways.
  PlotPanel p{"pixels", "x", "y", false, {}};
  p.series.push_back({"A", {0, 10}, {2, 2}});
  p.series.push_back({"B", {0, 5, 10}, {8, 8, 8}});
  p.series.push_back({"C", {0, 10}, {0, 10}});
  PlotPanel second{"second", "x", "y", false, {{"one", {3}, {7}}}};
  std::string path = dir.file("plot.png");
  write_plot(path, {p, second}, 900, 360);
  Image img = decode_png(read_bytes(path));
  CHECK(img.width == 900);
  CHECK(img.height == 720);
  CHECK(img.idat_bytes < 720 * (1 + 900 * 3) / 20);  // compressed: mostly flat colour
  CHECK(img.idat_chunks >= 2);

  auto layout = plot_detail::plot_layout({p, second}, 900, 360);
  auto g = layout[0];
  REQUIRE(g.x.lo == 0);
  REQUIRE(g.x.hi == 10);
  REQUIRE(g.y.lo == 0);
  REQUIRE(g.y.hi == 10);
  // Horizontal 2-pixel lines: the pixel row holding y is fully covered, in the series' colour.
  CHECK(img.at(g.to_px(6), g.to_py(2)) == kPalette[0]);
  CHECK(img.at(g.to_px(4), g.to_py(8)) == kPalette[1]);
  // The diagonal: the pixel nearest the line at x = 3 is C's colour.
  bool found = false;
  for (int dy = -1; dy <= 1; ++dy) found = found || img.at(g.to_px(3), g.to_py(3) + dy) == kPalette[2];
  CHECK(found);
  // Away from the lines: background inside the plot, in the corners, and between panels.
  CHECK(img.at(g.to_px(3), g.to_py(4.5)) == plot_detail::kBackground);  // (y = 5 has a grid line)
  CHECK(img.at(g.to_px(7), g.to_py(4.5)) == plot_detail::kBackground);
  CHECK(img.at(0, 0) == plot_detail::kBackground);
  CHECK(img.at(899, 719) == plot_detail::kBackground);
  CHECK(img.at(899, 0) == plot_detail::kBackground);
  // The frame, crisp at its pixel column.
  CHECK(img.at(g.left, g.to_py(4.5)) == plot_detail::kFrame);
  CHECK(img.at(g.right, g.to_py(4.5)) == plot_detail::kFrame);
  // Second panel: the lone point is a dot of the first colour.
  auto g2 = layout[1];
  CHECK(img.at(g2.to_px(3), g2.to_py(7)) == kPalette[0]);
  // Text was drawn: the title row above the plot area has dark pixels.
  size_t dark = 0;
  for (uint32_t y = 5; y < 30; ++y)
    for (uint32_t x = 0; x < 900; ++x) dark += img.at(x, y).r < 100;
  CHECK(dark > 20);
}

TEST_CASE("plot: NaN breaks a PNG line") {
  TempDir dir;
  PlotPanel p{"nan", "x", "y", false, {{"s", {0, 1, 2, 3, 4}, {1, 1, kNaN, 1, 1}}}};
  std::string path = dir.file("nan.png");
  write_plot(path, {p}, 600, 200);
  Image img = decode_png(read_bytes(path));
  auto g = plot_detail::plot_layout({p}, 600, 200)[0];
  CHECK(img.at(g.to_px(0.5), g.to_py(1)) == kPalette[0]);
  CHECK(img.at(g.to_px(3.5), g.to_py(1)) == kPalette[0]);
  CHECK_FALSE(img.at(g.to_px(1.7), g.to_py(1)) == kPalette[0]);
  CHECK_FALSE(img.at(g.to_px(2.3), g.to_py(1)) == kPalette[0]);
}

TEST_CASE("plot: degenerate data still writes valid files") {
  TempDir dir;
  std::vector<PlotPanel> cases = {
      {"one point", "x", "y", false, {{"a", {5}, {3}}}},
      {"constant", "x", "y", false, {{"a", {1, 2, 3}, {2, 2, 2}}, {"b", {7, 7}, {2, 2}}}},
      {"empty series", "x", "y", false, {{"a", {}, {}}}},
      {"no series", "", "", false, {}},
      {"all NaN", "x", "y", true, {{"a", {1, 2}, {kNaN, kNaN}}, {"b", {kNaN}, {1}}}},
      {"log, not positive", "x", "y", true, {{"a", {1, 2, 3}, {0, -1, -2}}}},
      {"huge", "x", "y", false, {{"a", {-1e308, 1e308}, {1e308, -1e308}}}},
      {"tiny", "x", "y", true, {{"a", {0, 1e-300}, {1e-310, 5e-324}}}},
      {"zero", "x", "y", false, {{"a", {0, 0}, {0, 0}}}},
  };
  for (const PlotPanel& p : cases) {
    INFO(p.title);
    std::string svg_path = dir.file("d.svg"), png_path = dir.file("d.png");
    REQUIRE_NOTHROW(write_plot(svg_path, {p}));
    std::string problems = svg_problems(read_bytes(svg_path));
    CHECK_MESSAGE(problems.empty(), problems);
    CHECK(read_bytes(svg_path).find("nan") == std::string::npos);  // no NaN coordinates
    CHECK(read_bytes(svg_path).find("inf") == std::string::npos);
    REQUIRE_NOTHROW(write_plot(png_path, {p}, 300, 200));
    Image img = decode_png(read_bytes(png_path));
    CHECK(img.width == 300);
    CHECK(img.height == 200);
  }
  // The lone point of "one point" is drawn (a dot in the SVG, coloured pixels in the PNG).
  write_plot(dir.file("one.svg"), {cases[0]});
  CHECK(count(read_bytes(dir.file("one.svg")), "<circle") == 1);
  write_plot(dir.file("one.png"), {cases[0]});
  auto g = plot_detail::plot_layout({cases[0]}, 900, 360)[0];
  CHECK(decode_png(read_bytes(dir.file("one.png"))).at(g.to_px(5), g.to_py(3)) == kPalette[0]);
  CHECK(temp_files(dir) == 0);
}

// ---- errors -------------------------------------------------------------------------------------

TEST_CASE("plot: errors leave an existing file at the destination byte-identical") {
  TempDir dir;
  PlotPanel p{"t", "x", "y", false, {{"a", {1, 2, 3}, {3, 2, 1}}}};
  const std::string previous = "previous contents\n";

  std::string gif = log_file(dir, "plot.gif", previous);
  check_throws_with([&] { write_plot(gif, {p}); }, "unknown extension '.gif'; use .svg or .png");
  CHECK(read_bytes(gif) == previous);
  check_throws_with([&] { write_plot(dir.file("plot"), {p}); }, "no file extension");
  check_throws_with([&] { write_plot(dir.file("dir.svg/plot"), {p}); }, "no file extension");
  CHECK_FALSE(fs::exists(dir.file("plot")));

  std::string png = log_file(dir, "plot.png", previous);
  PlotPanel bad = p;
  bad.series[0].y.pop_back();
  check_throws_with([&] { write_plot(png, {bad}); }, "series \"a\" of panel \"t\" has 3 x values but 2 y values");
  check_throws_with([&] { write_plot(png, {}); }, "no panels");
  check_throws_with([&] { write_plot(png, {p}, 100, 300); }, "width 100 is outside");
  check_throws_with([&] { write_plot(png, {p}, 900, 100000); }, "height_per_panel 100000 is outside");
  check_throws_with([&] { write_plot(png, std::vector<PlotPanel>(50, p), 900, 1000); }, "taller than 32768");
  CHECK(read_bytes(png) == previous);

  // A directory that is a regular file: the temporary file cannot be created.
  std::string blocker = log_file(dir, "blocker", "x");
  check_throws_with([&] { write_plot(blocker + "/plot.svg", {p}); }, "cannot create");

  // Running out of space halfway through (a file-size limit works for root too): the old file stays.
  struct rlimit old_limit {};
  REQUIRE(getrlimit(RLIMIT_FSIZE, &old_limit) == 0);
  auto old_handler = std::signal(SIGXFSZ, SIG_IGN);  // else the kernel kills the process
  struct rlimit small = old_limit;
  small.rlim_cur = 4096;  // the PNG is about 1 MB
  REQUIRE(setrlimit(RLIMIT_FSIZE, &small) == 0);
  bool threw = false;
  std::string what;
  try {
    write_plot(png, {p});
  } catch (const Error& e) {
    threw = true;
    what = e.what();
  }
  setrlimit(RLIMIT_FSIZE, &old_limit);
  std::signal(SIGXFSZ, old_handler);
  CHECK(threw);
  CHECK(what.find("[plot] " + png) == 0);
  CHECK(read_bytes(png) == previous);
  CHECK(temp_files(dir) == 0);

  // And a successful write replaces it.
  write_plot(png, {p});
  CHECK(decode_png(read_bytes(png)).width == 900);
}

// ---- the standard plot of a training log --------------------------------------------------------

TEST_CASE("plot: plot_training_log draws loss, accuracy and learning-rate panels") {
  TempDir dir;
  std::string jsonl;
  for (int step = 1; step <= 100; ++step) {
    jsonl += "{\"event\":\"train\",\"step\":" + std::to_string(step) + ",\"loss\":" +
             std::to_string(5 * std::exp(-step / 20.0)) + ",\"lr\":" + std::to_string(0.001 * step / 100) + "}\n";
    if (step % 25 == 0)
      jsonl += "{\"event\":\"eval\",\"step\":" + std::to_string(step) + ",\"loss\":0.5,\"accuracy\":" +
               std::to_string(step / 100.0) + ",\"sequence_accuracy\":" + std::to_string(step / 200.0) + "}\n";
  }
  std::string log = log_file(dir, "log.jsonl", jsonl);
  std::string svg_path = dir.file("log.svg");
  plot_training_log(log, svg_path);
  std::string svg = read_bytes(svg_path);
  std::string problems = svg_problems(svg);
  CHECK_MESSAGE(problems.empty(), problems);
  CHECK(svg.find("height=\"1080\"") != std::string::npos);
  for (const char* text : {">loss<", ">held-out accuracy<", ">learning rate<", ">loss (log)<", ">train<", ">eval<",
                           ">accuracy<", ">sequence accuracy<", ">lr<"})
    CHECK_MESSAGE(svg.find(text) != std::string::npos, text);
  // First colour: train loss (100), accuracy (4), lr (100); second: eval loss (4), sequence accuracy (4).
  CHECK(polyline_sizes(svg, kPalette[0]) == std::vector<size_t>{100, 4, 100});
  CHECK(polyline_sizes(svg, kPalette[1]) == std::vector<size_t>{4, 4});

  // The same run as CSV, to PNG, without eval records or lr: one linear panel.
  std::string csv = "event,step,loss,accuracy,lr,grad_norm,tokens_per_s,elapsed_s\n";
  for (int step = 1; step <= 20; ++step) csv += "train," + std::to_string(step) + ",2.5,,,1,100,0.5\n";
  log = log_file(dir, "log.csv", csv);
  plot_training_log(log, dir.file("log.png"));
  Image img = decode_png(read_bytes(dir.file("log.png")));
  CHECK(img.width == 900);
  CHECK(img.height == 360);
  plot_training_log(log, dir.file("log1.svg"));
  svg = read_bytes(dir.file("log1.svg"));
  CHECK(svg.find("(log)") == std::string::npos);
  CHECK(polyline_sizes(svg, kPalette[0]) == std::vector<size_t>{20});

  // A wrong extension is reported before the log is even read.
  check_throws_with([&] { plot_training_log(dir.file("missing.jsonl"), dir.file("x.jpeg")); }, "unknown extension '.jpeg'");
  check_throws_with([&] { plot_training_log(dir.file("missing.jsonl"), dir.file("x.svg")); }, "cannot open");
}

TEST_CASE("plot: a resumed run's repeated steps replace the old points") {
  TempDir dir;
  std::string jsonl;
  for (int step = 1; step <= 10; ++step)
    jsonl += "{\"event\":\"train\",\"step\":" + std::to_string(step) + ",\"loss\":9}\n";
  for (int step = 6; step <= 12; ++step)  // resumed from the checkpoint at step 5
    jsonl += "{\"event\":\"train\",\"step\":" + std::to_string(step) + ",\"loss\":1}\n";
  std::string log = log_file(dir, "log.jsonl", jsonl);
  plot_training_log(log, dir.file("r.svg"));
  auto runs = polylines(read_bytes(dir.file("r.svg")), kPalette[0]);
  REQUIRE(runs.size() == 1);
  REQUIRE(runs[0].size() == 12);
  for (size_t i = 1; i < 12; ++i) CHECK(runs[0][i].first > runs[0][i - 1].first);
  CHECK(runs[0][4].second < runs[0][5].second);  // 9 at step 5, then 1 from step 6 (y grows downwards)
}
