// run_experiment_results: the selected experiments over the seeds, averaged; the checks of ExperimentOptions,
// the list parsers of `relgrad experiments` and the overrides as the experiments apply them
// (train/instruments/experiments.h). experiments_report.cpp writes the markdown and pictures.
#include <algorithm>
#include <cctype>
#include <chrono>
#include <ostream>

#include "core/base/error.h"
#include "train/instruments/experiments_internal.h"

namespace relgrad {

using namespace experiments;

namespace {

constexpr const char* kOp = "experiments";

std::vector<std::string> split_items(const std::string& text, const std::string& what, const char* op) {
  RG_CHECK_T(InstrumentOptionError, !text.empty(), op, what,
             ": expected a comma-separated list, got nothing");
  std::vector<std::string> items;
  size_t start = 0;
  while (true) {
    const size_t comma = text.find(',', start);
    std::string item = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    RG_CHECK_T(InstrumentOptionError, !item.empty(), op, what, " '", text, "': an empty item");
    items.push_back(item);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return items;
}

bool all_digits(const std::string& s) {
  return !s.empty() && s.size() <= 18 &&
         std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

}  // namespace

std::vector<uint64_t> parse_seed_list(const std::string& text, const std::string& what, const char* op) {
  std::vector<uint64_t> seeds;
  for (const std::string& item : split_items(text, what, op)) {
    RG_CHECK_T(InstrumentOptionError, all_digits(item), op, what, " '", text, "': '", item,
               "' is not a seed (a whole number ≥ 0)");
    seeds.push_back(std::stoull(item));
  }
  return seeds;
}

std::vector<int64_t> parse_int_list(const std::string& text, const std::string& what) {
  std::vector<int64_t> values;
  for (const std::string& item : split_items(text, what, kOp)) {
    const bool negative = item[0] == '-';
    const std::string digits = negative ? item.substr(1) : item;
    RG_CHECK_T(InstrumentOptionError, all_digits(digits), kOp, what, " '", text, "': '", item,
               "' is not a whole number");
    values.push_back(negative ? -std::stoll(digits) : std::stoll(digits));
  }
  return values;
}

std::vector<std::string> parse_name_list(const std::string& text, const std::string& what, const char* op) {
  std::vector<std::string> names = split_items(text, what, op);
  for (std::string& n : names)
    for (char& c : n) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return names;
}

void check_experiment_options(const ExperimentOptions& o) {
  // Each override with its least value; one left at its default (kFormDefault or 0) is not checked.
  const struct {
    const char* flag;
    int64_t value, unset, least;
  } bounds[] = {{"--lag", o.lag, kFormDefault, 1},
                {"--period", o.period, kFormDefault, 2},
                {"--train-length", o.train_length, kFormDefault, 2},
                {"--offset", o.offset, kFormDefault, 0},
                {"--max-distance", o.max_distance, 0, 1},
                {"--clip", o.clip, 0, 1},
                {"--table", o.table, 0, 2},
                {"--heads", o.heads, 0, 1},
                {"--width", o.width, 0, 1},
                {"--steps", o.steps, 0, 1}};
  for (const auto& b : bounds)
    RG_CHECK_T(InstrumentOptionError, b.value == b.unset || b.value >= b.least, kOp, b.flag, " ", b.value,
               ": expected ", b.least, " or more");
  for (int64_t L : o.eval_lengths)
    RG_CHECK_T(InstrumentOptionError, L >= 2, kOp, "--eval-lengths: ", L, " is not a length (2 or more)");
  for (const std::string& s : o.schemes)
    RG_CHECK_T(InstrumentOptionError, find_scheme(s) != nullptr, kOp, "--scheme ", s, ": expected ",
               scheme_names_text());
  RG_CHECK_T(InstrumentOptionError, o.buckets == 0 || (o.buckets >= 2 && o.buckets % 2 == 0), kOp,
             "--buckets ", o.buckets, ": expected an even number, 2 or more");
  const std::string only = only_of(o);
  RG_CHECK_T(InstrumentOptionError,
             only.empty() || only == "D1" || only == "D2" || only == "D3" || only == "D6", kOp, "--only ",
             o.only, ": expected D1, D2, D3 or D6");
}


// Sums seed n's runs into `into` (the first seed's, whose per-seed list starts here): run_experiment_results
// divides the sums by the seed count at the end.
static void add_seed(std::vector<ProbedRun>& into, const std::vector<ProbedRun>& next) {
  for (size_t k = 0; k < into.size() && k < next.size(); ++k) {
    ProbedRun& r = into[k];
    if (r.per_seed.empty()) r.per_seed = {r};
    const ProbedRun& x = next[k];
    r.per_seed.push_back(x);
    r.mass_expected += x.mass_expected, r.accuracy += x.accuracy, r.loss += x.loss, r.seconds += x.seconds;
    if (r.subset_accuracy >= 0) r.subset_accuracy += x.subset_accuracy;
  }
}

ExperimentResults run_experiment_results(const ExperimentOptions& o, std::ostream* progress) {
  check_experiment_options(o);
  const auto start = std::chrono::steady_clock::now();
  ExperimentResults r;
  r.full = o.full;
  const std::vector<uint64_t> seeds = o.seeds.empty() ? std::vector<uint64_t>{1} : o.seeds;
  for (size_t n = 0; n < seeds.size(); ++n) {
    const ExperimentScale scale{o.full, seeds[n], &o};
    if (seeds.size() > 1 && progress) *progress << "seed " << seeds[n] << "\n";
    ExperimentResults one;
    if (selected(o, "D1")) one.d1 = experiment_shift(scale, progress);
    if (selected(o, "D2")) one.d2 = experiment_periodic(scale, progress);
    if (selected(o, "D3")) one.d3 = experiment_extrapolation(scale, progress);
    if (selected(o, "D6")) one.d6 = experiment_synchronous(scale, progress);
    if (n == 0) {
      r.d1 = std::move(one.d1), r.d2 = std::move(one.d2), r.d3 = std::move(one.d3), r.d6 = std::move(one.d6);
      continue;
    }
    add_seed(r.d1.runs, one.d1.runs);
    add_seed(r.d2.runs, one.d2.runs);
    add_seed(r.d6.lag_runs, one.d6.lag_runs);
    add_seed(r.d6.stretch_runs, one.d6.stretch_runs);
    for (size_t k = 0; k < r.d3.rows.size(); ++k) {
      for (size_t m = 0; m < r.d3.rows[k].accuracy.size(); ++m) {
        r.d3.rows[k].accuracy[m] += one.d3.rows[k].accuracy[m];
        r.d3.rows[k].loss[m] += one.d3.rows[k].loss[m];
      }
      r.d3.rows[k].seconds += one.d3.rows[k].seconds;
    }
  }
  if (seeds.size() > 1) {
    const double count = static_cast<double>(seeds.size());
    for (auto* runs : {&r.d1.runs, &r.d2.runs, &r.d6.lag_runs, &r.d6.stretch_runs})
      for (ProbedRun& run : *runs) {
        run.seeds = seeds;
        run.mass_expected /= count, run.accuracy /= count, run.loss /= count;
        if (run.subset_accuracy >= 0) run.subset_accuracy /= count;
      }
    for (ExtrapolationRow& row : r.d3.rows) {
      for (double& a : row.accuracy) a /= count;
      for (double& l : row.loss) l /= count;
    }
  }
  r.seconds = seconds_since(start);
  return r;
}

std::string run_experiments(const ExperimentOptions& o, std::ostream* progress) {
  return experiments_markdown(run_experiment_results(o, progress), o);
}

}  // namespace relgrad

// ---- the overrides as the experiments apply them ------------------------------------------------------
namespace relgrad::experiments {

const ExperimentOptions& overrides_of(const ExperimentScale& scale) {
  static const ExperimentOptions none;
  return scale.overrides ? *scale.overrides : none;
}

std::string only_of(const ExperimentOptions& o) {
  std::string only = o.only;
  for (char& c : only) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return only;
}

bool selected(const ExperimentOptions& o, const std::string& name) { return o.only.empty() || only_of(o) == name; }

// --buckets and --max-distance set the knobs of a bucketed bias (t5), --table a learned table's
// max_length (seed, huang): whichever scheme reads them (layers/schemes.h).
PositionalConfig apply_tables(PositionalConfig p, const ExperimentOptions& o) {
  if (scheme_reads(p, "num_buckets") && o.buckets > 0) p.num_buckets = o.buckets;
  if (scheme_reads(p, "max_distance") && o.max_distance > 0) p.max_distance = o.max_distance;
  if (scheme_reads(p, "max_length") && o.table > 0) p.max_length = o.table;
  return p;
}

std::string tuned_label(const std::string& label, const PositionalConfig& p, const ExperimentOptions& o) {
  std::vector<std::string> notes;
  if (scheme_reads(p, "num_buckets") && o.buckets > 0) notes.push_back(std::to_string(p.num_buckets) + " buckets");
  if (scheme_reads(p, "max_distance") && o.max_distance > 0)
    notes.push_back("max distance " + std::to_string(p.max_distance));
  if (scheme_reads(p, "max_length") && o.table > 0) notes.push_back("t3 " + std::to_string(p.max_length));
  std::string out = label;
  for (size_t n = 0; n < notes.size(); ++n) out += (n ? ", " : " (") + notes[n];
  return notes.empty() ? out : out + ")";
}

// --clip K runs the clipped scheme (the one that reads clip: shaw) once, at that clip.
Variants choose_variants(const Variants& form, const ExperimentOptions& o) {
  Variants chosen;
  bool clipped_placed = false;
  const auto clipped = [](const PositionalConfig& p) { return scheme_reads(p, "clip"); };
  auto add_clipped = [&](Variants& into, const std::string& scheme, int64_t clip) {
    PositionalConfig p = scheme_config(scheme);
    if (clip > 0) p.clip = clip;
    into.push_back({scheme + " clip " + std::to_string(p.clip), p});
    clipped_placed = clipped_placed || clip > 0;
  };
  for (const auto& [label, p] : form) {
    if (!o.schemes.empty() && std::find(o.schemes.begin(), o.schemes.end(), p.scheme) == o.schemes.end())
      continue;
    if (clipped(p) && o.clip > 0) {
      if (!clipped_placed) add_clipped(chosen, p.scheme, o.clip);
      continue;
    }
    chosen.push_back({label, p});
  }
  for (const std::string& s : o.schemes) {  // the schemes the form does not run
    if (std::any_of(form.begin(), form.end(), [&](const auto& v) { return v.second.scheme == s; })) continue;
    if (clipped(scheme_config(s)))
      add_clipped(chosen, s, o.clip);
    else
      chosen.push_back({s, scheme_config(s)});
  }
  for (auto& [label, p] : chosen) {
    p = apply_tables(p, o);
    label = tuned_label(label, p, o);
  }
  return chosen;
}

std::string seed_sentence(const ExperimentScale& scale) {
  const std::vector<uint64_t>& seeds = overrides_of(scale).seeds;
  if (seeds.size() <= 1) return "Seed " + std::to_string(scale.seed) + ".";
  std::vector<std::string> list;
  for (uint64_t s : seeds) list.push_back(std::to_string(s));
  return "Seeds " + join(list) +
         ": every run repeated per seed; accuracy, loss and the mass at the needed offset are "
         "means over the seeds (the mass with its min … max), best head and peaks are seed " +
         std::to_string(seeds.front()) + "'s.";
}

}  // namespace relgrad::experiments
