// The PNG back end of train/plot/plot.h: a small rasteriser (anti-aliased thick lines by distance to the
// segment, filled rectangles, dots, a 5x7 bitmap font), the pixels encoded by libpng (compressed
// with zlib's deflate: a 900 x 1080 loss plot is tens of kilobytes, not the 2.9 MB of stored blocks).
#include "train/plot/plot.h"

#include <png.h>
#include <zlib.h>

#include <algorithm>
#include <cmath>

#include "core/base/error.h"

namespace relgrad::plot_detail {
namespace {

// The classic 5x7 font, ASCII 32..126: five column bytes per glyph, bit 0 = top row.
constexpr uint8_t kFont[95][5] = {
    {0x00, 0x00, 0x00, 0x00, 0x00}, {0x00, 0x00, 0x5F, 0x00, 0x00}, {0x00, 0x07, 0x00, 0x07, 0x00},  //  !"
    {0x14, 0x7F, 0x14, 0x7F, 0x14}, {0x24, 0x2A, 0x7F, 0x2A, 0x12}, {0x23, 0x13, 0x08, 0x64, 0x62},  // #$%
    {0x36, 0x49, 0x55, 0x22, 0x50}, {0x00, 0x05, 0x03, 0x00, 0x00}, {0x00, 0x1C, 0x22, 0x41, 0x00},  // &'(
    {0x00, 0x41, 0x22, 0x1C, 0x00}, {0x14, 0x08, 0x3E, 0x08, 0x14}, {0x08, 0x08, 0x3E, 0x08, 0x08},  // )*+
    {0x00, 0x50, 0x30, 0x00, 0x00}, {0x08, 0x08, 0x08, 0x08, 0x08}, {0x00, 0x60, 0x60, 0x00, 0x00},  // ,-.
    {0x20, 0x10, 0x08, 0x04, 0x02}, {0x3E, 0x51, 0x49, 0x45, 0x3E}, {0x00, 0x42, 0x7F, 0x40, 0x00},  // /01
    {0x42, 0x61, 0x51, 0x49, 0x46}, {0x21, 0x41, 0x45, 0x4B, 0x31}, {0x18, 0x14, 0x12, 0x7F, 0x10},  // 234
    {0x27, 0x45, 0x45, 0x45, 0x39}, {0x3C, 0x4A, 0x49, 0x49, 0x30}, {0x01, 0x71, 0x09, 0x05, 0x03},  // 567
    {0x36, 0x49, 0x49, 0x49, 0x36}, {0x06, 0x49, 0x49, 0x29, 0x1E}, {0x00, 0x36, 0x36, 0x00, 0x00},  // 89:
    {0x00, 0x56, 0x36, 0x00, 0x00}, {0x08, 0x14, 0x22, 0x41, 0x00}, {0x14, 0x14, 0x14, 0x14, 0x14},  // ;<=
    {0x00, 0x41, 0x22, 0x14, 0x08}, {0x02, 0x01, 0x51, 0x09, 0x06}, {0x32, 0x49, 0x79, 0x41, 0x3E},  // >?@
    {0x7E, 0x11, 0x11, 0x11, 0x7E}, {0x7F, 0x49, 0x49, 0x49, 0x36}, {0x3E, 0x41, 0x41, 0x41, 0x22},  // ABC
    {0x7F, 0x41, 0x41, 0x22, 0x1C}, {0x7F, 0x49, 0x49, 0x49, 0x41}, {0x7F, 0x09, 0x09, 0x09, 0x01},  // DEF
    {0x3E, 0x41, 0x49, 0x49, 0x7A}, {0x7F, 0x08, 0x08, 0x08, 0x7F}, {0x00, 0x41, 0x7F, 0x41, 0x00},  // GHI
    {0x20, 0x40, 0x41, 0x3F, 0x01}, {0x7F, 0x08, 0x14, 0x22, 0x41}, {0x7F, 0x40, 0x40, 0x40, 0x40},  // JKL
    {0x7F, 0x02, 0x0C, 0x02, 0x7F}, {0x7F, 0x04, 0x08, 0x10, 0x7F}, {0x3E, 0x41, 0x41, 0x41, 0x3E},  // MNO
    {0x7F, 0x09, 0x09, 0x09, 0x06}, {0x3E, 0x41, 0x51, 0x21, 0x5E}, {0x7F, 0x09, 0x19, 0x29, 0x46},  // PQR
    {0x46, 0x49, 0x49, 0x49, 0x31}, {0x01, 0x01, 0x7F, 0x01, 0x01}, {0x3F, 0x40, 0x40, 0x40, 0x3F},  // STU
    {0x1F, 0x20, 0x40, 0x20, 0x1F}, {0x3F, 0x40, 0x38, 0x40, 0x3F}, {0x63, 0x14, 0x08, 0x14, 0x63},  // VWX
    {0x07, 0x08, 0x70, 0x08, 0x07}, {0x61, 0x51, 0x49, 0x45, 0x43}, {0x00, 0x7F, 0x41, 0x41, 0x00},  // YZ[
    {0x02, 0x04, 0x08, 0x10, 0x20}, {0x00, 0x41, 0x41, 0x7F, 0x00}, {0x04, 0x02, 0x01, 0x02, 0x04},  // \]^
    {0x40, 0x40, 0x40, 0x40, 0x40}, {0x00, 0x01, 0x02, 0x04, 0x00}, {0x20, 0x54, 0x54, 0x54, 0x78},  // _`a
    {0x7F, 0x48, 0x44, 0x44, 0x38}, {0x38, 0x44, 0x44, 0x44, 0x20}, {0x38, 0x44, 0x44, 0x48, 0x7F},  // bcd
    {0x38, 0x54, 0x54, 0x54, 0x18}, {0x08, 0x7E, 0x09, 0x01, 0x02}, {0x0C, 0x52, 0x52, 0x52, 0x3E},  // efg
    {0x7F, 0x08, 0x04, 0x04, 0x78}, {0x00, 0x44, 0x7D, 0x40, 0x00}, {0x20, 0x40, 0x44, 0x3D, 0x00},  // hij
    {0x7F, 0x10, 0x28, 0x44, 0x00}, {0x00, 0x41, 0x7F, 0x40, 0x00}, {0x7C, 0x04, 0x18, 0x04, 0x78},  // klm
    {0x7C, 0x08, 0x04, 0x04, 0x78}, {0x38, 0x44, 0x44, 0x44, 0x38}, {0x7C, 0x14, 0x14, 0x14, 0x08},  // nop
    {0x08, 0x14, 0x14, 0x18, 0x7C}, {0x7C, 0x08, 0x04, 0x04, 0x08}, {0x48, 0x54, 0x54, 0x54, 0x20},  // qrs
    {0x04, 0x3F, 0x44, 0x40, 0x20}, {0x3C, 0x40, 0x40, 0x20, 0x7C}, {0x1C, 0x20, 0x40, 0x20, 0x1C},  // tuv
    {0x3C, 0x40, 0x30, 0x40, 0x3C}, {0x44, 0x28, 0x10, 0x28, 0x44}, {0x0C, 0x50, 0x50, 0x50, 0x3C},  // wxy
    {0x44, 0x64, 0x54, 0x4C, 0x44}, {0x00, 0x08, 0x36, 0x41, 0x00}, {0x00, 0x00, 0x7F, 0x00, 0x00},  // z{|
    {0x00, 0x41, 0x36, 0x08, 0x00}, {0x08, 0x04, 0x08, 0x10, 0x08},                                  // }~
};

// Coordinates from the layout are finite and inside the image; the clamp only keeps int casts safe.
int to_int(double v) { return static_cast<int>(std::clamp(v, -1e6, 1e6)); }

class Canvas {
 public:
  Canvas(int w, int h) : w_(w), h_(h), px_(static_cast<size_t>(w) * h * 3, 255) {}
  const std::vector<uint8_t>& pixels() const { return px_; }

  // Paints pixel (x, y) with `c` at coverage a in [0, 1].
  void blend(int x, int y, Color c, double a) {
    if (x < 0 || y < 0 || x >= w_ || y >= h_ || !(a > 0)) return;
    uint8_t* p = &px_[(static_cast<size_t>(y) * w_ + x) * 3];
    a = std::min(a, 1.0);
    const uint8_t rgb[3] = {c.r, c.g, c.b};
    for (int k = 0; k < 3; ++k) p[k] = static_cast<uint8_t>(std::lround(p[k] * (1 - a) + rgb[k] * a));
  }

  // Pixels whose centres lie in [x0, x1) x [y0, y1).
  void fill_rect(double x0, double y0, double x1, double y1, Color c) {
    for (int y = to_int(std::ceil(y0 - 0.5)); y < to_int(std::ceil(y1 - 0.5)); ++y)
      for (int x = to_int(std::ceil(x0 - 0.5)); x < to_int(std::ceil(x1 - 0.5)); ++x) blend(x, y, c, 1);
  }

  // A segment of the given width with round caps; each pixel is covered by how far its centre lies
  // inside the stroke (1 within width/2 - 0.5 of the segment, fading to 0 over one pixel). Only a band
  // of pixels around the segment is visited, column by column (or row by row when steep).
  void line(double x0, double y0, double x1, double y1, double width, Color c) {
    double r = width / 2, pad = r + 1;
    bool steep = std::fabs(y1 - y0) > std::fabs(x1 - x0);
    if (steep) std::swap(x0, y0), std::swap(x1, y1);  // iterate along the major axis "u", minor "v"
    double du = x1 - x0, dv = y1 - y0, len2 = du * du + dv * dv;
    for (int u = to_int(std::floor(std::min(x0, x1) - pad)); u <= to_int(std::ceil(std::max(x0, x1) + pad)); ++u) {
      double cu = u + 0.5, t = du != 0 ? std::clamp((cu - x0) / du, 0.0, 1.0) : 0.0, vc = y0 + t * dv;
      for (int v = to_int(std::floor(vc - 2 * pad)); v <= to_int(std::ceil(vc + 2 * pad)); ++v) {
        double cv = v + 0.5;
        double s = len2 > 0 ? std::clamp(((cu - x0) * du + (cv - y0) * dv) / len2, 0.0, 1.0) : 0.0;
        double d = std::hypot(cu - (x0 + s * du), cv - (y0 + s * dv));
        double a = std::clamp(r + 0.5 - d, 0.0, 1.0);
        steep ? blend(v, u, c, a) : blend(u, v, c, a);
      }
    }
  }

  void dot(double cx, double cy, double radius, Color c) {
    for (int y = to_int(std::floor(cy - radius - 1)); y <= to_int(std::ceil(cy + radius + 1)); ++y)
      for (int x = to_int(std::floor(cx - radius - 1)); x <= to_int(std::ceil(cx + radius + 1)); ++x)
        blend(x, y, c, std::clamp(radius + 0.5 - std::hypot(x + 0.5 - cx, y + 0.5 - cy), 0.0, 1.0));
  }

  void text(const TextItem& t) {
    std::vector<int> glyphs;  // font indices; a non-ASCII code point or a control character is '?'
    for (size_t i = 0; i < t.text.size(); ++i) {
      auto b = static_cast<unsigned char>(t.text[i]);
      if ((b & 0xC0) == 0x80) continue;  // a continuation byte: its code point is already counted
      glyphs.push_back(b >= 32 && b < 127 ? b - 32 : '?' - 32);
    }
    const int s = std::max(1, t.scale);
    const double length = glyphs.empty() ? 0 : 6.0 * s * static_cast<double>(glyphs.size()) - s;
    const double shift = t.anchor == Anchor::Start ? 0 : t.anchor == Anchor::Middle ? -length / 2 : -length;
    // Glyph pixel (u along the text, v down the glyph) -> image pixel.
    const int along0 = to_int(std::round(t.vertical ? t.y - shift : t.x + shift));
    const int across0 = to_int(std::round((t.vertical ? t.x : t.y) - 3.5 * s));
    for (size_t g = 0; g < glyphs.size(); ++g)
      for (int col = 0; col < 5; ++col)
        for (int row = 0; row < 7; ++row) {
          if (!((kFont[glyphs[g]][col] >> row) & 1)) continue;
          int u = static_cast<int>(g) * 6 * s + col * s, v = row * s;
          for (int i = 0; i < s; ++i)
            for (int j = 0; j < s; ++j) {
              if (t.vertical) blend(across0 + v + j, along0 - u - i - 1, t.color, 1);
              else blend(along0 + u + i, across0 + v + j, t.color, 1);
            }
        }
  }

 private:
  int w_, h_;
  std::vector<uint8_t> px_;
};

}  // namespace

// zlib's checksums (libpng's own dependency, linked with it); an empty input leaves the value as it is.
uint32_t crc32(const uint8_t* bytes, size_t size, uint32_t crc) {
  return size == 0 ? crc : static_cast<uint32_t>(::crc32_z(crc, bytes, size));
}

uint32_t adler32(const uint8_t* bytes, size_t size, uint32_t adler) {
  return size == 0 ? adler : static_cast<uint32_t>(::adler32_z(adler, bytes, size));
}

std::string encode_png(int width, int height, const std::vector<uint8_t>& rgb) {
  RG_CHECK(width > 0 && height > 0 && rgb.size() == static_cast<size_t>(width) * height * 3, "plot",
           "encode_png: ", rgb.size(), " bytes for a ", width, "x", height, " RGB image");
  // libpng writes into `png` through the callbacks; its errors come back as a longjmp to here, where
  // nothing owning memory has been built since setjmp (so nothing leaks), and become a relgrad::Error.
  struct Sink {
    std::string bytes;
    std::string error;
  } sink;
  png_structp writer = png_create_write_struct(
      PNG_LIBPNG_VER_STRING, &sink,
      [](png_structp p, png_const_charp message) {
        static_cast<Sink*>(png_get_error_ptr(p))->error = message;
        png_longjmp(p, 1);
      },
      [](png_structp, png_const_charp) {});  // warnings: none are expected for 8-bit RGB
  RG_CHECK(writer != nullptr, "plot", "encode_png: libpng could not start (out of memory)");
  png_infop info = png_create_info_struct(writer);
  std::vector<png_bytep> rows(static_cast<size_t>(height));
  for (int y = 0; y < height; ++y)
    rows[y] = const_cast<png_bytep>(rgb.data() + static_cast<size_t>(y) * width * 3);  // libpng only reads
  if (info == nullptr || setjmp(png_jmpbuf(writer))) {
    png_destroy_write_struct(&writer, info ? &info : nullptr);
    throw Error("[plot] encode_png: libpng: " +
                (sink.error.empty() ? std::string("out of memory") : sink.error));
  }
  png_set_write_fn(
      writer, &sink,
      [](png_structp p, png_bytep data, png_size_t size) {
        static_cast<Sink*>(png_get_io_ptr(p))->bytes.append(reinterpret_cast<const char*>(data), size);
      },
      [](png_structp) {});
  png_set_IHDR(writer, info, static_cast<png_uint_32>(width), static_cast<png_uint_32>(height), 8,
               PNG_COLOR_TYPE_RGB, PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  // Filter "none" on every row, so the inflated rows are the pixels as they are: deflate alone takes a
  // 900 x 1080 loss plot from 2.9 MB to 30 kB and a probe heatmap from 565 kB to 6 kB; a predictor
  // ("up") would take another 13% and 27% off those (measured), not worth the less direct files.
  png_set_filter(writer, PNG_FILTER_TYPE_BASE, PNG_FILTER_NONE);
  png_set_compression_level(writer, 6);
  png_set_rows(writer, info, rows.data());
  png_write_png(writer, info, PNG_TRANSFORM_IDENTITY, nullptr);
  png_destroy_write_struct(&writer, &info);
  return std::move(sink.bytes);
}

std::string render_png(const Scene& scene) {
  Canvas canvas(scene.width, scene.height);
  for (const Item& item : scene.items) {
    if (const auto* r = std::get_if<RectItem>(&item)) {
      if (r->filled) canvas.fill_rect(r->x, r->y, r->x + r->w, r->y + r->h, r->fill);
      if (r->stroke_width > 0) {
        double x0 = r->x, y0 = r->y, x1 = r->x + r->w, y1 = r->y + r->h, sw = r->stroke_width;
        canvas.line(x0, y0, x1, y0, sw, r->stroke), canvas.line(x1, y0, x1, y1, sw, r->stroke);
        canvas.line(x1, y1, x0, y1, sw, r->stroke), canvas.line(x0, y1, x0, y0, sw, r->stroke);
      }
    } else if (const auto* l = std::get_if<LineItem>(&item)) {
      if (l->points.size() == 1) canvas.dot(l->points[0].first, l->points[0].second, 1.25 * l->width, l->color);
      for (size_t i = 1; i < l->points.size(); ++i)
        canvas.line(l->points[i - 1].first, l->points[i - 1].second, l->points[i].first, l->points[i].second,
                    l->width, l->color);
    } else {
      canvas.text(std::get<TextItem>(item));
    }
  }
  return encode_png(scene.width, scene.height, canvas.pixels());
}

}  // namespace relgrad::plot_detail
