// Two probes compared, the reach bound and run_probe, the API behind `relgrad probe`
// (train/instruments/probe.h).
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

std::string number(double v, const char* format) {
  if (!std::isfinite(v)) return ".";
  char buf[32];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
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
        r.has_response ? number(r.max_abs_diff, "%.4g").c_str() : ".",
        r.has_response && std::isfinite(r.max_abs_diff) ? std::to_string(r.max_abs_diff_at).c_str() : ".");
    out << line;
    for (size_t k = 0; k < r.mass_a.size(); ++k) {
      const std::string cell = number(r.mass_a[k], "%.3f") + " -> " + number(r.mass_b[k], "%.3f");
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
  auto cell = [](double v) { return std::isfinite(v) ? number(v, "%.17g") : std::string(); };
  std::string out = "layer,place,scheme,head,delta,diff\n";
  for (const auto& r : rows)
    for (size_t k = 0; k < r.delta.size(); ++k)
      out += r.layer + "," + r.place + "," + r.scheme + "," + std::to_string(r.head) + "," +
             std::to_string(r.delta[k]) + "," + cell(r.response_diff[k]) + "\n";
  out += "\nlayer,place,scheme,head,mass_from,mass_to,mass_a,mass_b\n";
  for (const auto& r : rows)
    for (size_t k = 0; k < r.mass_a.size(); ++k)
      out += r.layer + "," + r.place + "," + r.scheme + "," + std::to_string(r.head) + "," +
             std::to_string(r.mass_delta[k].from) + "," + std::to_string(r.mass_delta[k].to) + "," +
             cell(r.mass_a[k]) + "," + cell(r.mass_b[k]) + "\n";
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
  const std::string& out_dir = where.out_dir;
  std::vector<std::string> files = write_probe_pictures(curves, out_dir);
  out << "wrote " << files.size() << " pictures to " << out_dir << "\n";
  const std::string &csv = where.csv, &json = where.json;
  write_probe_csv(curves, csv);
  write_probe_json(curves, json);
  out << "wrote the curves as data to " << csv << " and " << json << "\n";

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
