// Measures a researcher can aim (train/instruments/probe.h): mass at a chosen δ over a query filter,
// the curves as CSV / JSON, two checkpoints compared, the reach bound, and run_probe behind `relgrad probe`.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
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

// `v` printed by `format`; `undefined` for NaN or an infinity.
std::string number(double v, const char* format, const char* undefined = "") {
  if (!std::isfinite(v)) return undefined;
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


// CSV fields here are module names, schemes and kinds (no commas or quotes), but quote defensively.
std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}


// The attention places of `c`'s model with their scheme settings (an encoder-decoder has all three).
std::vector<std::pair<std::string, const PositionalConfig*>> scheme_places(const RunConfig& c) {
  std::vector<std::pair<std::string, const PositionalConfig*>> places = {{"decoder_self", &c.model.decoder_self}};
  if (c.model_type == ModelKind::EncoderDecoder)
    places.insert(places.end(), {{"encoder_self", &c.model.encoder_self}, {"cross", &c.model.cross}});
  return places;
}

const ProbeCurve* find_curve(const std::vector<ProbeCurve>& curves, const std::string& layer, int head) {
  for (const ProbeCurve& c : curves)
    if (c.layer == layer && c.head == head) return &c;
  return nullptr;
}

std::string folder_of(const std::string& path) {
  const std::string parent = std::filesystem::path(path).parent_path().string();
  return parent.empty() ? "." : parent;
}

// `probe A --compare B`: B loaded, checked against A (model type, each place's positional scheme and
// cross alignment) and probed on A's batch. Every failure names --compare and B: a missing or corrupt
// file, another kind of model, a batch B cannot read.
std::vector<HeadComparison> compare_with(const std::string& path, const std::string& a_path, const LoadedRun& a,
                                         const Batch& batch, const std::vector<AttentionRecord>& records,
                                         const std::vector<DeltaRange>& deltas, const QueryFilter& filter,
                                         int64_t reach) {
  const std::string refused = "[probe] --compare " + path + ": ";
  LoadedRun b;
  try {
    b = load_run(path);
  } catch (const Error& e) {
    throw Error(refused + "cannot be opened as a checkpoint: " + e.what());
  }
  const RunConfig &ca = a.config, &cb = b.config;
  if (ca.model_type != cb.model_type)
    throw Error(refused + "model.type is " + kModelKindNames.name(cb.model_type) + " there and " +
                kModelKindNames.name(ca.model_type) + " in " + a_path +
                ": both checkpoints must be of one kind, to be probed on the same batch");
  const auto places = scheme_places(ca), theirs = scheme_places(cb);
  for (size_t n = 0; n < places.size(); ++n)
    if (places[n].second->scheme != theirs[n].second->scheme)
      throw Error(refused + "model." + places[n].first + ".scheme is " + theirs[n].second->scheme +
                  " there and " + places[n].second->scheme + " in " + a_path +
                  ": compare checkpoints of one architecture");
  if (ca.model.explicit_cross() != cb.model.explicit_cross())
    throw Error(refused + "model.cross_alignment differs from " + a_path +
                "'s (explicit in one only): compare checkpoints of one architecture");
  try {
    return compare_probes(records, record_attention(*b.model, batch), deltas, filter, reach);
  } catch (const Error& e) {
    throw Error(refused + "cannot be compared with " + a_path + ": " + e.what());
  }
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
    const std::string mass = number(m.mass, "%.4f", ".");
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
    for (size_t n = 0; n < c.value.size(); ++n) out += (n ? ", " : "") + number(c.value[n], "%.17g", "null");
    out += "],\n   \"outside\": " + number(c.outside, "%.17g", "null") + ", \"shared_by\": [";
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

std::vector<HeadComparison> compare_probes(const std::vector<AttentionRecord>& a,
                                           const std::vector<AttentionRecord>& b,
                                           const std::vector<DeltaRange>& deltas, const QueryFilter& filter,
                                           int64_t reach) {
  RG_CHECK(a.size() == b.size(), kOp, "compare: the models have ", a.size(), " and ", b.size(),
           " attention modules");
  for (size_t n = 0; n < a.size(); ++n) {
    RG_CHECK(a[n].layer == b[n].layer && a[n].scheme == b[n].scheme, kOp, "compare: attention ", n, " is ",
             a[n].layer, " (", a[n].scheme, ") in the first model and ", b[n].layer, " (", b[n].scheme,
             ") in the second");
    RG_CHECK(a[n].weights.shape() == b[n].weights.shape(), kOp, "compare: ", a[n].layer, "'s weights are ",
             shape_str(a[n].weights.shape()), " and ", shape_str(b[n].weights.shape()),
             " (another head count or batch)");
  }
  // One reach for both: the shapes checked above give the same automatic reach.
  const std::vector<ProbeCurve> ra = positional_response(a, reach), rb = positional_response(b, reach);
  std::vector<std::vector<HeadMass>> ma, mb;
  for (const DeltaRange& d : deltas)
    ma.push_back(mass_at_delta(a, d, filter)), mb.push_back(mass_at_delta(b, d, filter));

  std::vector<HeadComparison> rows;
  for (const AttentionRecord& rec : a) {
    const int64_t H = rec.weights.size(1);
    for (int64_t h = 0; h < H; ++h) {
      HeadComparison row;
      row.layer = rec.layer;
      row.place = rec.place;
      row.scheme = rec.scheme;
      row.head = static_cast<int>(h);
      row.peak_a = row.peak_b = kNoResponsePeak;
      const ProbeCurve* ca = find_curve(ra, rec.layer, row.head);
      const ProbeCurve* cb = find_curve(rb, rec.layer, row.head);
      RG_CHECK((ca == nullptr) == (cb == nullptr), kOp, "compare: ", rec.layer, " head ", h,
               " has a response curve in one model only");
      if (ca) {
        row.has_response = true;
        row.delta = ca->delta;
        double worst = -1.0;
        for (size_t k = 0; k < ca->value.size(); ++k) {
          const double va = ca->value[k], vb = cb->value[k];
          const double d = std::isfinite(va) && std::isfinite(vb) ? vb - va : kNaN;
          row.response_diff.push_back(d);
          if (std::isfinite(d) && std::abs(d) > worst)
            worst = std::abs(d), row.max_abs_diff_at = ca->delta[k];
        }
        row.max_abs_diff = worst < 0 ? kNaN : worst;
        if (has_finite(*ca)) row.peak_a = peak_offset(*ca);
        if (has_finite(*cb)) row.peak_b = peak_offset(*cb);
      }
      row.mass_delta = deltas;
      for (size_t k = 0; k < deltas.size(); ++k)
        for (size_t m = 0; m < ma[k].size(); ++m)
          if (ma[k][m].layer == rec.layer && ma[k][m].head == row.head)
            row.mass_a.push_back(ma[k][m].mass), row.mass_b.push_back(mb[k][m].mass);
      rows.push_back(std::move(row));
    }
  }
  return rows;
}

std::string comparison_table(const std::vector<HeadComparison>& rows) {
  size_t width = 5;
  for (const auto& r : rows) width = std::max(width, r.layer.size());
  std::ostringstream out;
  char line[320];
  auto peak = [](int64_t p) { return p == kNoResponsePeak ? std::string(".") : std::to_string(p); };
  std::string header;
  if (!rows.empty())
    for (const DeltaRange& d : rows.front().mass_delta) header += "  mass@" + delta_text(d) + " A -> B";
  std::snprintf(line, sizeof line, "%-*s  %-14s  %4s  %6s  %6s  %12s  %8s", static_cast<int>(width), "layer",
                "scheme", "head", "peakA", "peakB", "max|B-A|", "at delta");
  out << line << header << "\n";
  for (const auto& r : rows) {
    std::snprintf(
        line, sizeof line, "%-*s  %-14s  %4d  %6s  %6s  %12s  %8s", static_cast<int>(width), r.layer.c_str(),
        r.scheme.c_str(), r.head, peak(r.peak_a).c_str(), peak(r.peak_b).c_str(),
        r.has_response ? number(r.max_abs_diff, "%.4g", ".").c_str() : ".",
        r.has_response && std::isfinite(r.max_abs_diff) ? std::to_string(r.max_abs_diff_at).c_str() : ".");
    out << line;
    for (size_t k = 0; k < r.mass_a.size(); ++k) {
      const std::string cell = number(r.mass_a[k], "%.3f", ".") + " -> " + number(r.mass_b[k], "%.3f", ".");
      const std::string label = "mass@" + delta_text(r.mass_delta[k]) + " A -> B";
      std::snprintf(line, sizeof line, "  %*s", static_cast<int>(label.size()), cell.c_str());
      out << line;
    }
    out << "\n";
  }
  out << "A = the first checkpoint, B = --compare; max|B-A|: the largest change of the response curve\n"
         "(.: no response, scheme none, or no value)\n";
  return out.str();
}

std::string comparison_csv(const std::vector<HeadComparison>& rows) {
  std::string out = "layer,place,scheme,head,delta,diff\n";
  for (const auto& r : rows)
    for (size_t k = 0; k < r.delta.size(); ++k)
      out += r.layer + "," + r.place + "," + r.scheme + "," + std::to_string(r.head) + "," +
             std::to_string(r.delta[k]) + "," + number(r.response_diff[k], "%.17g") + "\n";
  out += "\nlayer,place,scheme,head,mass_from,mass_to,mass_a,mass_b\n";
  for (const auto& r : rows)
    for (size_t k = 0; k < r.mass_a.size(); ++k)
      out += r.layer + "," + r.place + "," + r.scheme + "," + std::to_string(r.head) + "," +
             std::to_string(r.mass_delta[k].from) + "," + std::to_string(r.mass_delta[k].to) + "," +
             number(r.mass_a[k], "%.17g") + "," + number(r.mass_b[k], "%.17g") + "\n";
  return out;
}

int64_t probe_reach_bound(const RunConfig& c, const Batch& batch, std::string* why) {
  const int64_t longest =
      batch.decoder_only() ? batch.tokens.size(1) : std::max(batch.src.size(1), batch.tgt_in.size(1));
  int64_t limit = std::max<int64_t>(1, longest - 1);
  *why = "held-out batch spans offsets up to " + std::to_string(limit);
  for (const auto& [place, p] : scheme_places(c)) {
    const SchemeEntry* entry = find_scheme(p->scheme);
    if (!entry || !entry->table_reach) continue;  // no table of its own (layers/schemes.h)
    const TableReach table = entry->table_reach(*p);
    if (table.offset > limit) {
      limit = table.offset;
      *why = "the model's positional tables reach offsets up to " + std::to_string(table.offset) + " (model." +
             place + "." + table.knob + ")";
    }
  }
  return limit;
}

ProbeOutputs probe_outputs(const ProbeOptions& o) {
  ProbeOutputs w;
  w.out_dir = o.out_dir.empty() ? folder_of(o.checkpoint) + "/probe" : o.out_dir;
  w.csv = o.csv.empty() ? w.out_dir + "/curves.csv" : o.csv;
  w.json = o.json.empty() ? w.out_dir + "/curves.json" : o.json;
  if (!o.compare_checkpoint.empty())
    w.compare_csv = o.compare_csv.empty() ? w.out_dir + "/compare.csv" : o.compare_csv;
  return w;
}

int run_probe(const ProbeOptions& o, std::ostream& out) {
  // The options that need no model are checked before anything is loaded.
  std::vector<DeltaRange> deltas;
  for (const std::string& d : o.deltas) deltas.push_back(parse_delta_range(d, "--delta"));
  const bool needed = o.queries == "needed";
  if (!needed) check_query_range(o.queries);
  RG_CHECK_T(InstrumentOptionError, o.batch >= 0, kOp, "--batch ", o.batch, ": expected 0 or more");
  RG_CHECK_T(InstrumentOptionError, o.reach >= 0, kOp, "--reach ", o.reach, ": expected 0 or more");

  LoadedRun run = load_run(o.checkpoint);
  if (o.change_data) o.change_data(run.config);
  RunData data(run.config);
  Batch batch = data.batch(o.batch, Split::HeldOut);
  std::string why;
  const int64_t limit = probe_reach_bound(run.config, batch, &why);
  // each offset is a column of every picture: 100000 made gigabytes of PNGs
  RG_CHECK_T(InstrumentOptionError, o.reach <= limit, kOp, "--reach ", o.reach,
             " is beyond any offset this model shows: ", why, "; give --reach ", limit,
             " or less (0 = the batch's longest offset)");
  const std::vector<AttentionRecord> records = record_attention(*run.model, batch);
  const std::vector<ProbeCurve> curves = probe(records, o.reach);
  const int64_t R = curves.empty() ? 0 : curves.front().delta.back();
  for (size_t k = 0; k < deltas.size(); ++k)
    RG_CHECK_T(InstrumentOptionError, std::abs(deltas[k].from) <= R && std::abs(deltas[k].to) <= R, kOp,
               "--delta ", o.deltas[k], " is beyond the probe's reach ", R, " (give --reach)");

  QueryFilter filter;
  if (needed) {
    const auto task = data.task();
    filter.mask =
        needed_query_mask(batch, task && task->config().kind == TaskKind::Shift ? task->filler() : -1);
  } else {
    filter.range = o.queries;
  }
  // --compare is opened, checked and probed before any output is written: a missing file or a model
  // of another kind or architecture leaves nothing half-written.
  std::vector<HeadComparison> rows;
  if (!o.compare_checkpoint.empty())
    rows = compare_with(o.compare_checkpoint, o.checkpoint, run, batch, records, deltas, filter, R);

  out << "probe of " << o.checkpoint << " (step " << run.checkpoint.meta.step << ") on held-out batch "
      << o.batch << "\n"
      << probe_table(curves);
  const ProbeOutputs where = probe_outputs(o);
  out << "wrote " << write_probe_pictures(curves, where.out_dir).size() << " pictures to " << where.out_dir << "\n";
  write_probe_csv(curves, where.csv);
  write_probe_json(curves, where.json);
  out << "wrote the curves as data to " << where.csv << " and " << where.json << "\n";

  const std::string counted = needed              ? "the queries that need a source token (needed_query_mask)"
                              : o.queries.empty() ? "every query"
                                                  : "queries " + o.queries;
  for (const DeltaRange& d : deltas)
    out << "\nattention mass at delta " << delta_text(d) << " over " << counted << ":\n"
        << mass_table(mass_at_delta(records, d, filter));

  if (!o.compare_checkpoint.empty()) {
    out << "\ncomparison: A = " << o.checkpoint << ", B = " << o.compare_checkpoint << "\n"
        << comparison_table(rows);
    write_file_atomic(where.compare_csv, comparison_csv(rows), kOp);
    out << "wrote " << where.compare_csv << "\n";
  }
  return 0;
}

}  // namespace relgrad
