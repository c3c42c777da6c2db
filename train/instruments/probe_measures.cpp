// Measures a researcher can aim (train/instruments/probe.h): mass at a chosen δ over a query filter,
// the curves as CSV / JSON, two checkpoints compared, and run_probe behind `relgrad probe`.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <ostream>
#include <sstream>

#include "core/base/error.h"
#include "core/file_io.h"
#include "train/instruments/probe.h"

namespace relgrad {

namespace {

constexpr const char* kOp = "probe";
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// A whole decimal integer with an optional sign; false for anything else (empty, "5x", "+").
bool parse_int(const std::string& text, int64_t* value) {
  if (text.empty()) return false;
  size_t n = (text[0] == '-' || text[0] == '+') ? 1 : 0;
  if (n == text.size()) return false;
  for (size_t k = n; k < text.size(); ++k)
    if (text[k] < '0' || text[k] > '9') return false;
  if (text.size() - n > 18) return false;  // keeps clear of int64 overflow
  *value = std::stoll(text);
  return true;
}

// "from:to" → [lo, hi) on 0 … t2; the Python slice rules for missing and negative bounds.
std::pair<int64_t, int64_t> query_bounds(const std::string& range, int64_t t2) {
  if (range.empty()) return {0, t2};
  const size_t colon = range.find(':');
  const std::string a = range.substr(0, colon), b = range.substr(colon + 1);
  int64_t lo = 0, hi = t2;
  if (!a.empty()) parse_int(a, &lo);
  if (!b.empty()) parse_int(b, &hi);
  if (lo < 0) lo += t2;
  if (hi < 0) hi += t2;
  return {std::clamp<int64_t>(lo, 0, t2), std::clamp<int64_t>(hi, 0, t2)};
}

std::string number(double v, const char* format = "%.6g") {
  if (!std::isfinite(v)) return "";
  char buf[32];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\')
      out += '\\', out += c;
    else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else
      out += c;
  }
  return out + "\"";
}

std::string json_number(double v) { return std::isfinite(v) ? number(v, "%.17g") : "null"; }

// CSV fields here are module names, schemes and kinds (no commas or quotes), but quote defensively.
std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

}  // namespace

std::string delta_text(const DeltaRange& d) {
  return d.from == d.to ? std::to_string(d.from) : std::to_string(d.from) + ":" + std::to_string(d.to);
}

DeltaRange parse_delta_range(const std::string& text, const std::string& what) {
  DeltaRange d;
  const size_t colon = text.find(':');
  bool ok = colon == std::string::npos
                ? parse_int(text, &d.from) && (d.to = d.from, true)
                : parse_int(text.substr(0, colon), &d.from) && parse_int(text.substr(colon + 1), &d.to);
  RG_CHECK_T(InstrumentOptionError, ok, kOp, what, " '", text,
             "': expected an offset such as -5 or a range such as -7:-5");
  RG_CHECK_T(InstrumentOptionError, d.from <= d.to, kOp, what, " '", text,
             "': the range's start is after its end");
  return d;
}

void check_query_range(const std::string& range) {
  if (range.empty()) return;
  const size_t colon = range.find(':');
  int64_t v = 0;
  bool ok = colon != std::string::npos && range.find(':', colon + 1) == std::string::npos;
  if (ok) {
    const std::string a = range.substr(0, colon), b = range.substr(colon + 1);
    ok = (a.empty() || parse_int(a, &v)) && (b.empty() || parse_int(b, &v));
  }
  RG_CHECK_T(InstrumentOptionError, ok, kOp, "--queries '", range,
             "': expected a query index range from:to such as 5:, :10 or 3:8, or needed");
}

std::vector<HeadMass> mass_at_delta(const std::vector<AttentionRecord>& records, DeltaRange delta,
                                    const QueryFilter& filter) {
  check_query_range(filter.range);
  RG_CHECK(delta.from <= delta.to, kOp, "mass_at_delta: δ range ", delta.from, " … ", delta.to, " is empty");
  std::vector<HeadMass> out;
  std::string sizes;
  for (const AttentionRecord& rec : records) {
    const int64_t B = rec.weights.size(0), H = rec.weights.size(1), t2 = rec.weights.size(2),
                  t1 = rec.weights.size(3);
    if (!filter.mask.empty() && rec.place == "encoder_self") continue;  // the mask is over decoder queries
    if (!filter.mask.empty() && static_cast<int64_t>(filter.mask.size()) != B * t2) {
      sizes += (sizes.empty() ? "" : ", ") + rec.layer + " (" + std::to_string(B) + ", " +
               std::to_string(t2) + ")";
      continue;
    }
    const auto [lo, hi] = query_bounds(filter.range, t2);
    const std::vector<double> w = rec.weights.to(Device::cpu()).to(kFloat64).contiguous().to_vector<double>();
    std::vector<double> sum(static_cast<size_t>(H), 0.0);
    int64_t n = 0;
    for (int64_t b = 0; b < B; ++b)
      for (int64_t i = lo; i < hi; ++i) {
        if (!rec.query_valid[b * t2 + i] || (!filter.mask.empty() && !filter.mask[b * t2 + i])) continue;
        // the visible keys of the range, in key order (for one δ: one key, the experiments' sum)
        const int64_t j0 = std::max<int64_t>(0, rec.positions[i] + delta.from);
        const int64_t j1 = std::min<int64_t>(t1 - 1, rec.positions[i] + delta.to);
        std::vector<int64_t> keys;
        for (int64_t j = j0; j <= j1; ++j)
          if (rec.key_valid[b * t1 + j] && !(rec.causal && j > rec.positions[i])) keys.push_back(j);
        if (keys.empty()) continue;
        ++n;
        for (int64_t h = 0; h < H; ++h) {
          double s = 0.0;
          for (int64_t j : keys) s += w[((b * H + h) * t2 + i) * t1 + j];
          sum[h] += s;
        }
      }
    for (int64_t h = 0; h < H; ++h) {
      HeadMass m;
      m.layer = rec.layer;
      m.place = rec.place;
      m.scheme = rec.scheme;
      m.head = static_cast<int>(h);
      m.delta = delta;
      m.queries = n;
      m.mass = n ? sum[h] / static_cast<double>(n) : kNaN;
      out.push_back(std::move(m));
    }
  }
  RG_CHECK_T(ShapeError, filter.mask.empty() || !out.empty(), kOp, "mass_at_delta: the query mask has ",
             filter.mask.size(), " entries, no attention has B·t2 queries: ", sizes);
  return out;
}

std::vector<bool> needed_query_mask(const Batch& batch, int64_t filler) {
  const Tensor& targets = RunModel::targets(batch);
  RG_CHECK_T(ShapeError, targets.defined() && targets.dim() == 2, kOp,
             "needed_query_mask: the batch has no (B, t2) targets");
  const std::vector<int64_t> y = targets.to(Device::cpu()).contiguous().to_vector<int64_t>();
  std::vector<bool> mask(y.size());
  for (size_t n = 0; n < y.size(); ++n)
    mask[n] = y[n] != kIgnoreIndex && (filler < 0 || (y[n] >= kFirstSymbol && y[n] != filler));
  return mask;
}

std::string mass_table(const std::vector<HeadMass>& masses) {
  size_t width = 5;
  for (const auto& m : masses) width = std::max(width, m.layer.size());
  std::ostringstream out;
  char line[256];
  std::snprintf(line, sizeof line, "%-*s  %-12s  %-14s  %4s  %9s  %8s  %s\n", static_cast<int>(width),
                "layer", "place", "scheme", "head", "delta", "mass", "queries");
  out << line;
  for (const auto& m : masses) {
    const std::string mass = std::isfinite(m.mass) ? number(m.mass, "%.4f") : ".";
    std::snprintf(line, sizeof line, "%-*s  %-12s  %-14s  %4d  %9s  %8s  %lld\n", static_cast<int>(width),
                  m.layer.c_str(), m.place.c_str(), m.scheme.c_str(), m.head, delta_text(m.delta).c_str(),
                  mass.c_str(), static_cast<long long>(m.queries));
    out << line;
  }
  if (std::any_of(masses.begin(), masses.end(), [](const HeadMass& m) { return !std::isfinite(m.mass); }))
    out << ".: no counted query has a visible key in the range\n";
  return out.str();
}

std::string probe_csv(const std::vector<ProbeCurve>& curves) {
  std::string out = "layer,place,scheme,kind,head,delta,value\n";
  for (const ProbeCurve& c : curves) {
    const std::string head = csv_field(c.layer) + "," + csv_field(c.place) + "," + csv_field(c.scheme) + "," +
                             csv_field(c.kind) + "," + std::to_string(c.head) + ",";
    for (size_t n = 0; n < c.delta.size(); ++n)
      out += head + std::to_string(c.delta[n]) + "," + number(c.value[n], "%.17g") + "\n";
    if (c.kind == "attention_mass") out += head + "outside," + number(c.outside, "%.17g") + "\n";
  }
  return out;
}

std::string probe_json(const std::vector<ProbeCurve>& curves) {
  std::string out = "{\"curves\": [";
  for (size_t k = 0; k < curves.size(); ++k) {
    const ProbeCurve& c = curves[k];
    out += k ? ",\n  {" : "\n  {";
    out += "\"layer\": " + json_string(c.layer) + ", \"place\": " + json_string(c.place) +
           ", \"scheme\": " + json_string(c.scheme) + ", \"kind\": " + json_string(c.kind) +
           ", \"head\": " + std::to_string(c.head) + ",\n   \"delta\": [";
    for (size_t n = 0; n < c.delta.size(); ++n) out += (n ? ", " : "") + std::to_string(c.delta[n]);
    out += "],\n   \"value\": [";
    for (size_t n = 0; n < c.value.size(); ++n) out += (n ? ", " : "") + json_number(c.value[n]);
    out += "],\n   \"outside\": " + json_number(c.outside) + ", \"shared_by\": [";
    for (size_t n = 0; n < c.shared_by.size(); ++n) out += (n ? ", " : "") + json_string(c.shared_by[n]);
    out += "]}";
  }
  return out + "\n]}\n";
}

void write_probe_csv(const std::vector<ProbeCurve>& curves, const std::string& path) {
  write_file_atomic(path, probe_csv(curves), kOp);
}

void write_probe_json(const std::vector<ProbeCurve>& curves, const std::string& path) {
  write_file_atomic(path, probe_json(curves), kOp);
}

}  // namespace relgrad
