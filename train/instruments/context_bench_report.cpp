// run_context_bench's tables, files, picture and CI checks (train/instruments/context_bench.h).
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <ostream>
#include <sstream>

#include "core/base/error.h"
#include "train/instruments/study_registry.h"
#include "train/instruments/bench_report.h"
#include "train/instruments/context_bench.h"
#include "train/plot/plot.h"

namespace relgrad {

namespace {

using bench::fixed;
using bench::known;

std::string padded(const std::string& s, int width) {  // right-aligned in `width` characters
  return s.size() >= static_cast<size_t>(width) ? s : std::string(width - s.size(), ' ') + s;
}

// Mean and sample standard deviation over the seeds of one treatment's value at one context (n = 0:
// no run; sd is NaN for one run). ratio: each seed's NLL over its own 1× NLL.
struct Spread {
  double mean = NAN, sd = NAN;
  int n = 0;
};
Spread spread(const ContextBenchResult& r, const std::string& treatment, size_t context, bool ratio) {
  std::vector<double> v;
  for (const ContextBenchRun& run : r.runs)
    if (run.treatment == treatment) v.push_back(ratio ? run.nll.at(context) / run.nll.at(0) : run.nll.at(context));
  Spread s;
  s.n = static_cast<int>(v.size());
  if (v.empty()) return s;
  double sum = 0;
  for (double x : v) sum += x;
  s.mean = sum / static_cast<double>(v.size());
  if (v.size() > 1) {
    double sq = 0;
    for (double x : v) sq += (x - s.mean) * (x - s.mean);
    s.sd = std::sqrt(sq / static_cast<double>(v.size() - 1));
  }
  return s;
}

std::string multiple_name(const ContextBenchResult& r, size_t k) {
  return std::to_string(r.size.multiples[k]) + "x (" + std::to_string(r.size.multiples[k] * r.size.context) + ")";
}

// Rows treatments, columns evaluation contexts: "mean ± sd" of the NLL, or of the ratio to 1×.
std::string table(const ContextBenchResult& r, bool ratio, bool markdown) {
  std::ostringstream out;
  const size_t K = r.size.multiples.size();
  const int digits = ratio ? 2 : 3;
  if (markdown) {
    out << "| treatment |";
    for (size_t k = 0; k < K; ++k) out << " " << multiple_name(r, k) << " |";
    out << "\n|---|";
    for (size_t k = 0; k < K; ++k) out << "---:|";
    out << "\n";
  } else {
    out << "  " << std::string("treatment") + std::string(9, ' ');
    for (size_t k = 0; k < K; ++k) out << padded(multiple_name(r, k), 16);
    out << "\n";
  }
  for (const std::string& t : r.treatments) {
    out << (markdown ? "| " + t + " |" : "  " + t + std::string(t.size() < 18 ? 18 - t.size() : 1, ' '));
    for (size_t k = 0; k < K; ++k) {
      const Spread s = spread(r, t, k, ratio);
      std::string cell = s.n == 0 ? "-" : fixed(s.mean, digits);
      if (s.n > 1) cell += (markdown ? " ± " : " +- ") + fixed(s.sd, digits);
      out << (markdown ? " " + cell + " |" : padded(cell, 16));
    }
    out << "\n";
  }
  if (r.scored_unigram_nll.size() == K) {  // the scored text's own difficulty, no model (context_bench.h)
    const std::string label = "unigram (scored bytes)";
    out << (markdown ? "| " + label + " |" : "  " + label);
    for (size_t k = 0; k < K; ++k) {
      const double v = r.scored_unigram_nll[k] / (ratio ? r.scored_unigram_nll[0] : 1.0);
      out << (markdown ? " " + fixed(v, digits) + " |" : padded(fixed(v, digits), k == 0 ? 12 : 16));
    }
    out << "\n";
  }
  return out.str();
}

// Press et al.'s Figure 1 (NLL against the evaluation context, one line per scheme), in panels of at
// most ten lines (the palette's colours): the figure's own treatments, then every other treatment run,
// in the order run, seven to a panel with ALiBi drawn again for reference. A panel is drawn when one of
// its own treatments was run, titled by the treatments it draws.
std::vector<std::string> write_picture(const ContextBenchResult& r, const std::string& out_dir) {
  struct Group {
    std::string title;
    std::vector<std::string> treatments;
  };
  std::vector<Group> groups = {{"Press et al.'s Figure 1",
                                {"none", "sinusoidal", "learned", "rope", "t5", "alibi"}}};
  std::vector<std::string> rest;
  for (const std::string& t : r.treatments)
    if (!known(groups[0].treatments, t)) rest.push_back(t);
  constexpr size_t kPerPanel = 7;
  const size_t more = (rest.size() + kPerPanel - 1) / kPerPanel;
  for (size_t i = 0; i < more; ++i) {
    const std::string part = more > 1 ? ", " + std::to_string(i + 1) + " of " + std::to_string(more) : "";
    groups.push_back({"the other schemes" + part,
                      {rest.begin() + static_cast<std::ptrdiff_t>(i * kPerPanel),
                       rest.begin() + static_cast<std::ptrdiff_t>(std::min(rest.size(), (i + 1) * kPerPanel))}});
  }
  const auto ran = [&](const std::string& t) { return known(r.treatments, t); };
  std::vector<PlotPanel> panels;
  for (size_t g = 0; g < groups.size(); ++g) {
    std::vector<std::string> lines;
    for (const std::string& t : groups[g].treatments)
      if (ran(t)) lines.push_back(t);
    if (lines.empty()) continue;
    PlotPanel panel;
    panel.title = std::string(groups[g].title) + ": " + bench::joined(lines);
    if (g > 0 && ran("alibi")) lines.push_back("alibi"), panel.title += " (alibi for reference)";
    panel.x_label = "log2 of the evaluation context over the training context " + std::to_string(r.size.context);
    panel.y_label = "held-out NLL (nats per byte)";
    for (const std::string& t : lines) {
      PlotSeries series;
      series.label = t;
      for (size_t k = 0; k < r.size.multiples.size(); ++k) {
        series.x.push_back(std::log2(static_cast<double>(r.size.multiples[k])));
        series.y.push_back(spread(r, t, k, false).mean);
      }
      panel.series.push_back(std::move(series));
    }
    panels.push_back(std::move(panel));
  }
  if (panels.empty()) return {};
  write_plot((std::filesystem::path(out_dir) / "context.svg").string(), panels);
  return {"context.svg"};
}

// The CI form's checks (context_bench_failures): measured margins in docs/extrapolation.md.
constexpr size_t kCheckContext = 2;     // the evaluation context checked: multiples[2] (4×)
constexpr double kHoldMargin = 0.03;    // alibi and t5: NLL at 4× at most 3 % above their 1×
constexpr double kDegradeRatio = 1.10;  // sinusoidal and rope: NLL at 4× at least 10 % above their 1×

const ContextBenchRun* find_run(const ContextBenchResult& r, const std::string& treatment, uint64_t seed) {
  for (const ContextBenchRun& run : r.runs)
    if (run.treatment == treatment && run.seed == seed) return &run;
  return nullptr;
}

}  // namespace

std::string context_bench_table(const ContextBenchResult& r) {
  std::ostringstream out;
  out << "train short, test long on " << r.text_path << " (" << bench::form_name(r.full, r.resized, r.size.steps) << ", "
      << bench::counted(r.seeds.size(), "seed") << ", " << r.size.steps << " steps; d_model " << r.size.d_model << ", "
      << r.size.layers << " layers; trained at context " << r.size.context << ")\n"
      << "held-out NLL (nats per byte), mean +- sd over seeds, by evaluation context; unigram "
      << fixed(r.unigram_nll, 3) << "\n"
      << table(r, false, false) << "ratio to the 1x NLL\n"
      << table(r, true, false);
  return out.str();
}

std::string context_bench_markdown(const ContextBenchResult& r, const ContextBenchOptions& o) {
  const ContextBenchSize& s = r.size;
  std::ostringstream out;
  out << "# relgrad context-bench (" << bench::form_name(r.full, r.resized, s.steps) << ")\n\n"
      << "Byte-level decoder-only LMs on " << r.text_path << " (5 % held out): d_model " << s.d_model << ", "
      << s.n_heads << " heads, d_ff " << s.d_ff << ", " << s.layers << " layers; trained at context C = " << s.context
      << " for " << s.steps << " steps of " << s.batch_size << " windows (lr " << fixed(s.lr, 4) << "); seeds "
      << r.seeds.size() << "; " << fixed(r.seconds, 0) << " s in all (" << fixed(r.cpu_seconds, 0)
      << " s of processor time). Output: " << o.out_dir << ".\n\n"
      << "Each cell is `relgrad eval <out>/runs/<treatment>-s<seed>/checkpoint.safetensors --data.context=N "
      << "--data.seed=" << kContextBenchEvalSeed << " --batches=K` (K = " << s.eval_tokens << " / (" << s.batch_size
      << " · N), at least 1), averaged over seeds. The unigram NLL of the held-out bytes is "
      << fixed(r.unigram_nll, 3) << "; each context draws its own windows (every model is scored on the same "
      << "ones), and the last row, the unigram NLL of the bytes scored at that context, shows how hard "
      << "that text is with no model.\n\n"
      << "Held-out NLL (nats per byte), mean ± sd over seeds, by evaluation context (bytes):\n\n"
      << table(r, false, true) << "\nRatio to the 1× NLL (each seed's own), mean ± sd:\n\n"
      << table(r, true, true) << "\n";
  for (const std::string& p : r.pictures) out << "![NLL by evaluation context](" << p << ")\n";
  return out.str();
}

std::string context_bench_csv(const ContextBenchResult& r) {
  std::ostringstream out;
  out << "treatment,seed,multiple,context,nll,bits_per_byte,ratio_to_1x,tokens,params,train_loss,seconds\n";
  for (const ContextBenchRun& run : r.runs)
    for (size_t k = 0; k < run.nll.size(); ++k)
      out << run.treatment << "," << run.seed << "," << r.size.multiples[k] << ","
          << r.size.multiples[k] * r.size.context << "," << fixed(run.nll[k], 5) << ","
          << fixed(run.nll[k] / std::log(2.0), 5) << "," << fixed(run.nll[k] / run.nll[0], 4) << ","
          << run.tokens[k] << "," << run.params << "," << fixed(run.train_loss, 4) << "," << fixed(run.seconds, 1)
          << "\n";
  return out.str();
}

std::vector<std::string> context_bench_failures(const ContextBenchResult& r) {
  std::vector<std::string> failures;
  const auto name = [](const std::string& t, uint64_t seed) { return t + " seed " + std::to_string(seed); };
  // Every model learns the text: below the unigram NLL at its training context.
  for (const ContextBenchRun& run : r.runs)
    if (!(run.nll.at(0) < r.unigram_nll))
      failures.push_back(name(run.treatment, run.seed) + ": NLL at 1x " + fixed(run.nll[0], 3) +
                         " is not below the unigram NLL " + fixed(r.unigram_nll, 3));
  if (r.size.multiples.size() <= kCheckContext) return failures;
  const std::string at = std::to_string(r.size.multiples[kCheckContext]) + "x";
  for (uint64_t seed : r.seeds) {
    // The biases hold: ALiBi and T5 at 4× within a few percent of their 1×.
    for (const char* t : {"alibi", "t5"})
      if (const ContextBenchRun* run = find_run(r, t, seed))
        if (!(run->nll[kCheckContext] <= run->nll[0] * (1 + kHoldMargin)))
          failures.push_back(name(t, seed) + ": NLL at " + at + " " + fixed(run->nll[kCheckContext], 3) +
                             " is more than " + fixed(100 * kHoldMargin, 0) + " % above its 1x " +
                             fixed(run->nll[0], 3));
    // Sinusoidal and rotary positions do not: far worse at 4×, and worse than ALiBi there.
    for (const char* t : {"sinusoidal", "rope"})
      if (const ContextBenchRun* run = find_run(r, t, seed)) {
        if (!(run->nll[kCheckContext] >= run->nll[0] * kDegradeRatio))
          failures.push_back(name(t, seed) + ": NLL at " + at + " " + fixed(run->nll[kCheckContext], 3) +
                             " is less than " + fixed(kDegradeRatio, 2) + " x its 1x " + fixed(run->nll[0], 3));
        if (const ContextBenchRun* alibi = find_run(r, "alibi", seed))
          if (!(run->nll[kCheckContext] > alibi->nll[kCheckContext]))
            failures.push_back(name(t, seed) + ": NLL at " + at + " " + fixed(run->nll[kCheckContext], 3) +
                               " is not above alibi's " + fixed(alibi->nll[kCheckContext], 3));
      }
  }
  return failures;
}

int run_context_bench(const ContextBenchOptions& options, std::ostream& out) {
  ContextBenchResult r = context_bench_results(options, &out);
  r.pictures = write_picture(r, options.out_dir);
  bench::write_results(options.out_dir, context_bench_csv(r), context_bench_markdown(r, options), "context-bench");
  out << context_bench_table(r) << bench::written(options.out_dir, r.pictures) << " (" << fixed(r.seconds, 0)
      << " s, " << fixed(r.cpu_seconds, 0) << " s of processor time)\n";
  return bench::form_verdict(r.full, r.resized, context_bench_failures(r), out);
}

namespace {

ContextBenchOptions context_options(const StudyArgs& a) {
  ContextBenchOptions o = bench_options<ContextBenchOptions>(a);
  o.text_path = a.text("--text", "");
  return o;
}

}  // namespace

StudyEntry context_bench_study() {
  StudyEntry e;
  e.name = "context-bench";
  e.summary = "train short, test long: held-out NLL of text LMs at 1-16 times their training context";
  e.synopsis = "[--full] [--treatments sinusoidal,alibi,...] [--seeds 1,2] [--steps N] [--text FILE] [--out DIR]";
  e.full_help = "the documented run (about 17 minutes on one idle core); default: the CI form";
  e.takes_tasks = false;
  e.treatments_help = "comma-separated, e.g. sinusoidal,rope,t5,alibi (default: the form's)";
  e.seeds_help = "comma-separated seeds (default: 1,2,3 with --full, else 1,2)";
  e.out_help = "folder for the tables, the picture and the checkpoints";
  e.out_aliases = {"--out-dir"};
  e.flags = {{"--text", StudyFlagKind::Text, "the text to train and evaluate on (default: data/kjv.txt)", true}};
  e.check = [](const StudyArgs& a) { check_context_bench_options(context_options(a)); };
  e.run = [](const StudyArgs& a, std::ostream& out) { return run_context_bench(context_options(a), out); };
  return e;
}

}  // namespace relgrad
