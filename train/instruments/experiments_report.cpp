// experiments_markdown: the pictures and the markdown of docs/experiments.md for the experiments'
// results (train/instruments/experiments.h); experiments_run.cpp runs them.
#include <algorithm>
#include <cmath>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <ostream>
#include <sstream>
#include <thread>

#include "core/cpu/matmul.h"
#include "layers/schemes.h"
#include "train/instruments/experiments_internal.h"
#include "train/plot/plot.h"

namespace relgrad {

using namespace experiments;

namespace {

// The override flags of `o` as `relgrad experiments` spells them ("" for none): the command that regenerates.
std::string override_flags(const ExperimentOptions& o) {
  std::string f;
  auto list = [](const auto& v) {
    std::ostringstream s;
    for (size_t n = 0; n < v.size(); ++n) s << (n ? "," : "") << v[n];
    return s.str();
  };
  if (is_set(o.lag)) f += " --lag " + std::to_string(o.lag);
  if (is_set(o.period)) f += " --period " + std::to_string(o.period);
  if (is_set(o.train_length)) f += " --train-length " + std::to_string(o.train_length);
  if (!o.eval_lengths.empty()) f += " --eval-lengths " + list(o.eval_lengths);
  if (is_set(o.offset)) f += " --offset " + std::to_string(o.offset);
  if (!o.schemes.empty()) f += " --scheme " + list(o.schemes);
  if (o.buckets > 0) f += " --buckets " + std::to_string(o.buckets);
  if (o.max_distance > 0) f += " --max-distance " + std::to_string(o.max_distance);
  if (o.clip > 0) f += " --clip " + std::to_string(o.clip);
  if (o.table > 0) f += " --table " + std::to_string(o.table);
  if (o.heads > 0) f += " --heads " + std::to_string(o.heads);
  if (o.width > 0) f += " --width " + std::to_string(o.width);
  if (o.steps > 0) f += " --steps " + std::to_string(o.steps);
  if (!o.seeds.empty()) f += " --seeds " + list(o.seeds);
  return f;
}

std::string today() {
  std::time_t now = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d", std::localtime(&now));
  return buf;
}

PlotSeries series_of(const ProbedRun& run, const std::string& kind, int64_t reach) {
  PlotSeries s;
  s.label = run.label;
  if (const ProbeCurve* c = best_curve(run, kind))
    for (size_t n = 0; n < c->delta.size(); ++n)
      if (std::abs(c->delta[n]) <= reach) {
        s.x.push_back(static_cast<double>(c->delta[n]));
        s.y.push_back(c->value[n]);
      }
  return s;
}

// Two panels (attention mass and positional response of each run's best head against δ) → `file`.
std::string curves_picture(const std::vector<ProbedRun>& runs, const std::string& title, int64_t reach,
                           const ExperimentOptions& o, const std::string& file) {
  PlotPanel mass{title + ": attention mass of the best head", "offset delta = j - pi(i)", "mass", false, {}};
  PlotPanel response{title + ": positional response of that head", "offset delta", "logit units", false, {}};
  for (const ProbedRun& r : runs) {
    mass.series.push_back(series_of(r, "attention_mass", reach));
    PlotSeries s = series_of(r, "response", reach);
    if (!s.x.empty()) response.series.push_back(s);
  }
  std::vector<PlotPanel> panels{mass};
  if (!response.series.empty()) panels.push_back(response);
  write_plot(o.out_dir + "/" + file, panels, 760, 300);
  return file;
}

std::string link(const ExperimentOptions& o, const std::string& file) {
  std::filesystem::path dir(o.out_dir);
  std::string base = dir.filename().string();
  if (base.empty()) base = dir.parent_path().filename().string();
  return base + "/" + file;
}

std::string probe_row(const ProbedRun& r, bool subset) {  // subset: a column for r.subset_accuracy
  std::ostringstream row;
  row << "| " << r.label << " | " << percent(r.accuracy);
  if (subset) row << " | " << (r.subset_accuracy >= 0 ? percent(r.subset_accuracy) : "—");
  row << " | " << fixed(r.loss, 3) << " | " << r.layer << " h" << r.head << " | "
      << fixed(r.mass_expected, 3);
  if (r.per_seed.size() > 1) {
    const auto [lo, hi] = std::minmax_element(r.per_seed.begin(), r.per_seed.end(), [](const auto& a, const auto& b) {
      return a.mass_expected < b.mass_expected;
    });
    row << " (" << fixed(lo->mass_expected, 3) << " … " << fixed(hi->mass_expected, 3) << ")";
  }
  row << " | " << offset_text(r.mass_peak) << " | " << peak_text(r) << " | " << seconds_text(r.seconds)
      << " |\n";
  return row.str();
}

std::string probe_table(const std::vector<ProbedRun>& runs, const std::string& expected,
                        const std::string& subset = "") {
  std::string t = std::string("| run | held-out accuracy") + (subset.empty() ? "" : " | " + subset) +
                  " | loss | best head | mass at " + expected + " | mass peak | response peak | time |\n";
  t += std::string("|---|---:") + (subset.empty() ? "" : "|---:") + "|---:|---|---:|---:|---:|---:|\n";
  for (const ProbedRun& r : runs) t += probe_row(r, !subset.empty());
  return t;
}

// Both peaks (mass and response) of the best head at δ*, the response there alone.
bool peaks_at_offset(const ProbedRun& r) {
  return r.mass_peak == r.expected && r.response_peak == r.expected && r.response_plateau == 1;
}

// "**t5** (97.0 %), **seed** (98.1 %)" / "none".
std::string labels(const std::vector<ProbedRun>& runs) {
  std::vector<std::string> out;
  for (const ProbedRun& r : runs) out.push_back("**" + r.label + "** (" + percent(r.accuracy) + ")");
  return out.empty() ? "none" : join(out);
}

// Three groups: one head with ≥ 0.9 at δ* and the response peak there; both peaks at δ* with less mass; the
// rest. With several seeds, then on how many of them the first holds.
std::string summary(const std::vector<ProbedRun>& runs, const std::string& at) {
  std::vector<ProbedRun> finds, peaks, rest;
  for (const ProbedRun& r : runs) (finds_offset(r) ? finds : peaks_at_offset(r) ? peaks : rest).push_back(r);
  const std::string md = "One head with ≥ 0.9 of its attention at " + at +
                         " and its response peaking there alone: " + labels(finds) +
                         ". Both peaks (attention mass and response) at " + at +
                         " with less mass in one head: " + labels(peaks) + ". Neither: " + labels(rest) + ".\n\n";
  if (runs.empty() || runs.front().seeds.size() <= 1) return md;
  std::vector<std::string> items;
  for (const ProbedRun& r : runs)
    items.push_back("**" + r.label + "** " +
                    std::to_string(std::count_if(r.per_seed.begin(), r.per_seed.end(), finds_offset)) + " of " +
                    std::to_string(r.per_seed.size()));
  return md + "Seeds on which one head has ≥ 0.9 of its attention at " + at +
         " and its response peaks there alone: " + join(items) + ".\n\n";
}

}  // namespace

std::string experiments::limit_notes(const std::vector<ProbedRun>& runs, int64_t expected, bool bidirectional) {
  std::string md;
  for (const ProbedRun& r : runs) {
    const SchemeEntry* entry = find_scheme(r.positional.scheme);
    if (!entry || !entry->predict) continue;
    const LimitPrediction p = entry->predict(r.positional, expected, bidirectional);
    if (!p.holds)
      md += "**" + r.label + "**: " + p.why + ", so its term cannot single out δ = " + offset_text(expected) +
            " (docs/experiment-limits.md).\n\n";
  }
  return md;
}

namespace {

std::string d1_section(const ShiftResult& d, const ExperimentOptions& o) {
  const std::string k = std::to_string(d.lag), expected = "δ = −" + k;
  std::string md =
      "## D1 — shift-copy with lag k = " + k + " (cross-attention, Left alignment)\n\n" + d.setup + "\n\n";
  md +=
      "Expected (the task is usually posed for a causal decoder LM; here cross-attention carries the lag, "
      "so that the scheme under test is the model's only source of position): one cross-attention head puts "
      "≥ 0.9 of its attention at " + expected +
      " and its learned response peaks there, for T5, the seed's method and Shaw when the clip can single out "
      "δ = −k; Shaw clipped below that cannot (every δ ≤ −clip reads the same edge row). Note the boundary: "
      "Shaw's row for δ = −clip is also the row of every δ < −clip, so isolating δ = −k needs clip ≥ k + 1 "
      "(the notes say clip ≥ k).\n\n";
  md += probe_table(d.runs, expected, "accuracy on copied symbols") + "\n";
  md +=
      "*best head*: the cross-attention head with the most attention on key t − k, averaged over the held-out "
      "queries that copy a symbol (t ≥ k, not EOS); *mass peak* is the offset of that head's largest attention "
      "share over all queries (probe's attention_mass); *response peak* is where its positional logit term is "
      "largest (probe's response: T5's bias, (1/√D)·q̄·e_δ for the learned tables; \"shared\": several "
      "offsets read the same value, Shaw's clipped edge row), searched over |δ| < " + std::to_string(d.min_len) +
      " (the offsets every training sequence shows; farther ones are trained by few queries). "
      "Chance accuracy is " + percent(d.chance) +
      ". The held-out accuracy also counts the \"_\" and EOS targets, which a decoder without positions can "
      "only tell apart by what cross-attention returns (is there a key at δ = −k?); Shaw's value term adds the "
      "attended offset's a^V row to the head's output, a positional signal the other schemes do not return: "
      "compare the two accuracy columns.\n\n";
  md += summary(d.runs, expected) + limit_notes(d.runs, -d.lag, /*bidirectional=*/true);  // cross-attention
  for (const ProbedRun& r : d.runs)
    if (!finds_offset(r) && r.subset_accuracy >= 0.95)
      md += "**" + r.label + "** copies " + percent(r.subset_accuracy) +
            " of the symbols although no head singles out δ = −" + k + " (best head " +
            fixed(r.mass_expected, 2) + " there, response " + peak_text(r) +
          "): its heads together, with content (the decoder knows which source symbols it has already "
          "emitted), still solve the task. The clip limits what one positional head can express (the notes' "
          "\"position-only attention\"), not necessarily the model.\n\n";
  md += "![D1 attention mass and response](" +
        link(o, curves_picture(d.runs, "D1 lag " + k, 3 * d.lag, o, "d1_shift.svg")) + ")\n\n";
  for (const ProbedRun& r : d.runs)
    if (r.label == "seed") {  // one set of probe pictures: the seed run's learned response, all heads
      std::vector<ProbeCurve> response;
      for (const ProbeCurve& c : r.curves)
        if (c.kind == "response") response.push_back(c);
      std::vector<std::string> files = write_probe_pictures(response, o.out_dir + "/d1_seed");
      for (const std::string& f : files) {
        const std::string name = std::filesystem::path(f).filename().string();
        md += "![D1 seed " + name + "](" + link(o, "d1_seed/" + name) + ")\n";
      }
      md +=
          "\nThe seed run's learned cross-attention response (1/√D)·q̄_h·e_δ, every head h against δ: "
          "heatmap and curves. Offsets beyond the shortest sequence (|δ| ≥ " + std::to_string(d.min_len) +
          ") are seen by few queries (only the last ones of the longest sequences), so their values say little.\n\n";
    }
  return md;
}

std::string d2_section(const PeriodicResult& d, const ExperimentOptions& o) {
  const std::string expected = "δ = " + offset_text(1 - d.period);
  std::string md = "## D2 — periodic repetition, period P = " + std::to_string(d.period) +
                   " (decoder-only LM)\n\n" + d.setup + "\n\n";
  md +=
      "Expected: the response peaks at the period. Counted from the query, which sits one "
      "position before the token it predicts, that is " + expected + " (δ = −P from the predicted token). "
      "T5's causal buckets are exact up to 15 and merge 19–20 (bucket 17), so a period of 20 (δ* = −19) "
      "can only be found up to a shared bucket; Shaw needs clip > |δ*|, i.e. clip ≥ P.\n\n";
  md += probe_table(d.runs, "δ*") + "\n";
  md += "δ* = 1 − P for each run (the P = 20 run: −19). Chance accuracy is " + percent(d.chance) +
        "; a model that only knows the bag of symbols in the context gets about 1/P.\n\n";
  md += summary(d.runs, "δ*") +
        "In a periodic sequence δ* − P, δ* − 2P, … hold the same symbol, so attention "
        "there is not wrong: a head may share its mass between the repeats.\n\n";
  for (const ProbedRun& r : d.runs)
    if (r.response_plateau > 1 && r.response_peak <= r.expected &&
        r.expected <= r.response_peak + r.response_plateau - 1 && r.mass_peak == r.expected &&
        r.mass_expected >= 0.9)
      md += "**" + r.label + "**: the bias is flat over " + offset_text(r.response_peak) + " … " +
            offset_text(r.response_peak + r.response_plateau - 1) + " (one bucket), yet " +
            fixed(r.mass_expected, 2) + " of a head's attention is on δ* = " + offset_text(r.expected) +
            ": content separates the two, presumably because the key at δ = −P always holds the query's own "
            "token.\n\n";
  std::vector<ProbedRun> same_period;
  for (const ProbedRun& r : d.runs)
    if (r.expected == 1 - d.period) same_period.push_back(r);
  md += "![D2 attention mass and response](" +
        link(o, curves_picture(same_period, "D2 period " + std::to_string(d.period), 3 * d.period, o,
                               "d2_periodic.svg")) +
        ")\n\n";
  return md;
}

std::string d3_section(const ExtrapolationResult& d, const ExperimentOptions& o) {
  const std::string others = spoken_list(d.eval_lengths, 1);
  std::string md = "## D3 — length extrapolation (train at " + std::to_string(d.train_length) +
                   (others.empty() ? "" : ", evaluate at " + others) + ")\n\n" + d.setup + "\n\n";
  md +=
      "Expected: T5 and clipped Shaw generalise when the offset they need was seen in "
      "training (their tables do not grow); tables sized to the training length (seed, huang with t3 = L) "
      "have no entry for |δ| ≥ L; ALiBi/NoPE-style behaviour per Press et al. and Kazemnejad et al.\n\n";
  md += "| scheme";
  for (int64_t L : d.eval_lengths) md += " | accuracy @" + std::to_string(L);
  for (int64_t L : d.eval_lengths) md += " | loss @" + std::to_string(L);
  md += " | time |\n|---";
  for (size_t n = 0; n < 2 * d.eval_lengths.size(); ++n) md += "|---:";
  md += "|---:|\n";
  for (const ExtrapolationRow& r : d.rows) {
    md += "| " + r.scheme;
    for (double a : r.accuracy) md += " | " + percent(a);
    for (double l : r.loss) md += " | " + fixed(l, 3);
    md += " | " + seconds_text(r.seconds) + " |\n";
  }
  std::vector<std::string> keeps, drops, unlearned;
  for (const ExtrapolationRow& r : d.rows) {
    if (r.accuracy[0] < 0.9)
      unlearned.push_back(r.scheme + " (" + percent(r.accuracy[0]) + ")");
    else
      (r.accuracy.back() >= 0.9 * r.accuracy[0] ? keeps : drops).push_back(r.scheme);
  }
  auto list = [](const std::vector<std::string>& v) { return v.empty() ? std::string("none") : join(v); };
  md += "\nChance is " + percent(d.chance) + ". Learn the task at the training length (≥ 90 %) and keep ≥ 90 % of "
        "that accuracy at " + std::to_string(d.eval_lengths.back()) + ": " + list(keeps) +
        ". Lose more: " + list(drops) +
        ". Do not learn it at the training length: " + list(unlearned) + ".\n\n";
  // The study's observation on two of its rows (docs/experiments.md, D3).
  const auto row = [&](const char* name) -> const ExtrapolationRow* {
    for (const ExtrapolationRow& r : d.rows)
      if (r.scheme == std::string(name)) return &r;
    return nullptr;
  };
  const ExtrapolationRow *seed = row("seed"), *huang = row("huang");
  if (seed && huang && seed->accuracy == huang->accuracy && seed->loss == huang->loss)
    md +=
        "seed and huang are bit-identical: in causal self-attention the seed's method reads only the past "
        "half of its table, which is Huang's table, and both draw the same initial values (the counter-based "
        "generator gives element i of a draw the same value whatever the draw's size).\n\n";
  PlotPanel acc{"D3: held-out accuracy against evaluation length (trained at " + std::to_string(d.train_length) +
                    ")",
                "sequence length", "token accuracy", false, {}};
  for (const ExtrapolationRow& r : d.rows) {
    PlotSeries s{r.scheme, {}, r.accuracy};
    for (int64_t L : d.eval_lengths) s.x.push_back(static_cast<double>(L));
    acc.series.push_back(s);
  }
  write_plot(o.out_dir + "/d3_extrapolation.svg", {acc}, 760, 320);
  md += "![D3 accuracy against length](" + link(o, "d3_extrapolation.svg") + ")\n\n";
  return md;
}

std::string d6_section(const SyncResult& d, const ExperimentOptions& o) {
  const std::string c = std::to_string(d.lag);
  std::string md = "## D6 — synchronous cross-attention (lag c = " + c + "; time stretch t2 = 2·t1)\n\n" +
                   d.setup + "\n\n";
  md += "Expected: with Left alignment the lag task gives one sharp peak at δ = +" + c +
        "; the stretch task works with Scaled alignment (π(i) = ⌊i·t1/t2⌋) and not with Left.\n\n";
  md += "### Lag\n\n" + probe_table(d.lag_runs, "δ = +" + c) + "\n";
  md += summary(d.lag_runs, "δ = +" + c);
  md += "### Time stretch\n\n" + probe_table(d.stretch_runs, "the needed key", "accuracy on even positions") +
        "\n";
  md +=
      "*mass at the needed key*: the best head's attention on key ⌊i/2⌋ (δ = 0 under Scaled, −⌈i/2⌉ under "
      "Left); *accuracy on even positions*: the targets y_{2m} that can only come from the source (an odd "
      "position repeats the decoder's own input). Chance is " + percent(d.chance) + ".\n\n";
  std::vector<std::string> scaled, left;
  double left_mass = 0.0;
  for (const ProbedRun& r : d.stretch_runs) {
    const std::string item =
        "**" + r.label + "** " + percent(r.subset_accuracy) + " (mass " + fixed(r.mass_expected, 2) + ")";
    if (r.label.find("(scaled)") != std::string::npos)
      scaled.push_back(item);
    else
      left.push_back(item), left_mass = std::max(left_mass, r.mass_expected);
  }
  md += "Even positions under Scaled: " + join(scaled) + "; under Left: " + join(left) +
        ". Under Left there is no single offset to learn and no head concentrates on the needed key (best mass " +
        fixed(left_mass, 2) +
        "). What Left still gets right has other sources (a hypothesis, not measured here): a causal decoder "
        "without positions can estimate its own index (e.g. from the share of attention BOS gets, 1/(i + 1)) "
        "and so shift where a head looks, which the seed's query-dependent score q_i·e_δ can express and T5's "
        "query-independent bias cannot; and the bag of source symbols not yet emitted narrows the guess. "
        "Scaled alignment turns the task into one constant offset.\n\n";
  auto panel = [&](const std::string& title, const std::vector<ProbedRun>& runs) {
    PlotPanel p{title, "offset delta = j - pi(i)", "mass", false, {}};
    for (const ProbedRun& run : runs) p.series.push_back(series_of(run, "attention_mass", 3 * d.lag + 3));
    return p;
  };
  write_plot(o.out_dir + "/d6_synchronous.svg",
             {panel("D6 lag " + c + " (Left): attention mass of the best cross head", d.lag_runs),
              panel("D6 time stretch: attention mass of the best cross head (delta under each run's alignment)",
                    d.stretch_runs)},
             760, 300);
  md += "![D6 attention mass](" + link(o, "d6_synchronous.svg") + ")\n\n";
  return md;
}

}  // namespace

bool finds_offset(const ProbedRun& r) {
  return r.mass_expected >= 0.9 &&
         (r.response_peak == kNoResponsePeak || (r.response_peak == r.expected && r.response_plateau == 1));
}

std::string experiments_markdown(const ExperimentResults& r, const ExperimentOptions& o) {
  std::filesystem::create_directories(o.out_dir);
  std::string md = "# Verification experiments\n\n";
  md += std::string("Generated by `relgrad experiments") + (r.full ? " --full" : "") +
        (o.only.empty() ? "" : " --only " + o.only) + override_flags(o) +
        "` (train/instruments/experiments.cpp) on " + today() + ": " + cpu::cpu_model_name() + ", " +
        std::to_string(std::thread::hardware_concurrency()) +
        " hardware threads, each model trained on 1 OpenMP thread (train.threads = 1); " + seconds_text(r.seconds) +
        " in all. Do not edit by hand: rerun the command.\n\n";
  md +=
      "Toy tasks where position is the only cue, trained from scratch and then read with the probe "
      "(train/instruments/probe.h, docs/relative-attention.md for the conventions: δ = j − π(i), negative = past). "
      "Each model trains through the Trainer as `relgrad train` runs a config, so the same runs through the "
      "public commands give the same figures (docs/reproduce.md). Every run is deterministic (fixed seeds, no "
      "dropout, counter-based data): the same thread count gives the same figures. " +
      std::string(r.full
                      ? "This is the full form; `relgrad experiments` without `--full` runs the CI form "
                        "(smaller models, fewer steps), whose outcomes tests/test_experiments.cpp asserts."
                      : "This is the CI form (small models, few steps); `--full` runs the documented form.") +
      "\n\n";
  md +=
      "Each claim below holds inside limits set by the scheme (T5's exact buckets, Shaw's clip, a table's "
      "size): docs/experiment-limits.md sweeps them over seeds (`relgrad experiments --sweep`); the flags "
      "--lag, --period, --train-length, --eval-lengths, --offset, --scheme, --buckets, --max-distance, --clip, "
      "--table, --heads, --width, --steps and --seeds rerun any section as a variant.\n\n";
  if (!r.d1.runs.empty()) md += d1_section(r.d1, o);
  if (!r.d2.runs.empty()) md += d2_section(r.d2, o);
  if (!r.d3.rows.empty()) md += d3_section(r.d3, o);
  if (!r.d6.lag_runs.empty() || !r.d6.stretch_runs.empty()) md += d6_section(r.d6, o);
  return md;
}

}  // namespace relgrad
