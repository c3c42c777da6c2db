// run_context_bench (train/instruments/context_bench.h): its training, evaluation, tables, picture and
// CI checks.
#include "train/instruments/context_bench.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <ostream>
#include <sstream>

#include "core/base/error.h"
#include "core/version.h"
#include "layers/schemes.h"
#include "train/config/run_options.h"
#include "train/instruments/recipe.h"
#include "train/plot/plot.h"
#include "train/trainer/trainer.h"

namespace relgrad {

namespace {

constexpr const char* kOp = "context-bench";

using bench::fixed;
using bench::known;

// The text file: `given` when set (it must be a regular file), else data/kjv.txt (tools/setup.sh writes
// it) in the current folder, then in each folder above the running program (a build folder's
// relgrad and test binaries sit under the repository root).
std::string find_text(const std::string& given) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!given.empty()) {
    RG_CHECK(fs::is_regular_file(given, ec), kOp, "--text '", given, "' is not a readable file");
    return given;
  }
  const fs::path rel = fs::path("data") / "kjv.txt";
  if (fs::is_regular_file(rel, ec)) return rel.string();
  std::string tried = (fs::current_path(ec) / rel).string();
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec)
    for (fs::path dir = exe.parent_path(); !dir.empty(); dir = dir.parent_path()) {
      if (fs::is_regular_file(dir / rel, ec)) return (dir / rel).string();
      tried += ", " + (dir / rel).string();
      if (dir == dir.root_path()) break;
    }
  RG_CHECK(false, kOp, "cannot find ", rel.string(), " (looked in: ", tried,
           "); tools/setup.sh writes it, or give --text FILE");
  return "";
}

// The config `relgrad train` would run for this model: configs/char_lm.toml's data (the text, a 5 %
// validation split, tied embeddings) at the bench's size, one thread, its own run directory.
RunConfig run_config(const ContextBenchOptions& o, const ContextBenchSize& s, const std::string& text,
                     const std::string& treatment, uint64_t seed) {
  RunConfig c = bench_recipe(s, false, s.layers, seed);
  c.model.tie_weights = true;
  const int64_t longest = s.context * s.multiples.back();
  // Each scheme sized to the training context C by its entry (FitRule::HalfWindow): a learned value per
  // distance or bucket saturates at C/2, so the entry every longer distance shares is trained on half
  // the distances a window holds, as T5's defaults (32 buckets up to distance 128) have their last
  // bucket trained at a length of 512; layers/schemes.h has the rule, each scheme's file its sizes.
  set_decoder_treatment(c, treatment, SchemeFit{FitRule::HalfWindow, s.context}, treatment == "learned" ? longest : 0);
  c.data.source = "text";
  c.data.text_path = text;
  c.data.val_fraction = 0.05;
  c.data.context = s.context;
  c.data.batch_size = s.batch_size;
  c.data.seed = seed;
  set_bench_loop(c, (std::filesystem::path(o.out_dir) / "runs" / (treatment + "-s" + std::to_string(seed))).string());
  return c;
}

// The training split's byte frequencies, add-one: the log-probabilities of a model that ignores the
// context, the floor every trained model must beat.
std::vector<double> unigram_log_probs(const TextDataset& text) {
  std::vector<double> count(256, 1.0);
  double total = 256;
  const std::string& bytes = text.bytes();
  for (int64_t i = 0; i < text.train_size(); ++i) count[static_cast<unsigned char>(bytes[i])] += 1, total += 1;
  for (double& c : count) c = std::log(c / total);
  return count;
}

// The unigram NLL of the whole held-out split.
double unigram_nll(const TextDataset& text, const std::vector<double>& log_p) {
  double sum = 0;
  for (int64_t i = text.train_size(); i < text.size(); ++i) sum -= log_p[static_cast<unsigned char>(text.bytes()[i])];
  return text.val_size() ? sum / static_cast<double>(text.val_size()) : NAN;
}

// The unigram NLL of the bytes the evaluation at `context` scores: the targets of held-out batches
// 0 … K − 1 of the text at data.seed kContextBenchEvalSeed, the windows relgrad eval draws
// (TextData::batch is TextDataset::batch at the run's batch size and context).
double scored_unigram_nll(const std::string& path, const ContextBenchSize& s, int64_t context,
                          const std::vector<double>& log_p) {
  const TextDataset text(path, 0.05, kContextBenchEvalSeed);
  double sum = 0;
  int64_t n = 0;
  for (int64_t k = 0; k < context_bench_eval_batches(s, context); ++k)
    for (int64_t id : text.batch(k, s.batch_size, context, Split::HeldOut).targets.to_vector<int64_t>()) {
      sum -= log_p[static_cast<size_t>(id)];
      ++n;
    }
  return n ? sum / static_cast<double>(n) : NAN;
}

// One model on the study spine (train/instruments/study.h): trained through the Trainer, then scored at
// every evaluation context by context_bench_eval on its checkpoint; its record holds params, nll.K,
// tokens.K, train_loss and seconds.
StudyModel study_model(const ContextBenchOptions& o, const ContextBenchSize& s, const std::string& text,
                       const std::string& data, const std::string& treatment, uint64_t seed) {
  const RunConfig config = run_config(o, s, text, treatment, seed);
  RunConfig where_free = config;  // the same model wherever out_dir is spelt or moved
  where_free.train.out_dir.clear();
  std::ostringstream fingerprint;
  fingerprint << "relgrad " << version() << "\nmultiples";
  for (int64_t m : s.multiples) fingerprint << " " << m;
  fingerprint << " eval_tokens " << s.eval_tokens << " eval seed " << kContextBenchEvalSeed << "\ntext " << data
              << "\n" << config_to_toml(where_free);
  StudyModel m;
  m.key = treatment + "-s" + std::to_string(seed);
  m.label = treatment + " seed " + std::to_string(seed);
  m.fingerprint = fingerprint.str();
  m.run = [config, s, label = m.label] {
    const auto t0 = std::chrono::steady_clock::now();
    std::ostringstream warnings;  // a text file skips nothing; nothing is printed
    Trainer trainer(trainer_options(config, &warnings), nullptr, &study_model_communicator());
    const TrainResult trained = trainer.train();
    StudyRecord r;
    r.line = label + ": NLL";
    r.set("params", static_cast<double>(parameter_count(trainer.model())));
    r.set("train_loss", trained.last_loss);
    omp_set_num_threads(1);  // the evaluation as the training: one thread (recipe.h)
    std::vector<double> nll, tokens;
    for (int64_t multiple : s.multiples) {
      const int64_t context = multiple * s.context;
      const EvalResult e = context_bench_eval(trainer.checkpoint_path(), context, context_bench_eval_batches(s, context));
      RG_CHECK(std::isfinite(e.loss), kOp, label, ": held-out loss at context ", context, " is not finite (", e.loss, ")");
      nll.push_back(e.loss);
      tokens.push_back(static_cast<double>(e.tokens));
      char buf[48];
      std::snprintf(buf, sizeof buf, " %lldx %.3f", static_cast<long long>(multiple), e.loss);
      r.line += buf;
    }
    r.set_series("nll", nll);
    r.set_series("tokens", tokens);
    r.set("seconds", seconds_since(t0));
    return r;
  };
  return m;
}

std::string padded(const std::string& s, int width) {  // right-aligned in `width` characters
  return s.size() >= static_cast<size_t>(width) ? s : std::string(width - s.size(), ' ') + s;
}

// Mean and sample standard deviation over the seeds of one treatment's value at one context. ratio:
// each seed's NLL over its own 1× NLL.
bench::MeanSd spread(const ContextBenchResult& r, const std::string& treatment, size_t context, bool ratio) {
  std::vector<double> v;
  for (const ContextBenchRun& run : r.runs)
    if (run.treatment == treatment) v.push_back(ratio ? run.nll.at(context) / run.nll.at(0) : run.nll.at(context));
  return bench::mean_sd(v);
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
      const bench::MeanSd s = spread(r, t, k, ratio);
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

ContextBenchOptions context_options(const StudyArgs& a) {
  ContextBenchOptions o = bench::options_of<ContextBenchOptions>(a);
  o.text_path = a.text("--text", "");
  return o;
}

// An unknown treatment, an empty out_dir or a text that is not there: before any training (`relgrad
// context-bench`: exit 2). Returns the text's path (options.text_path, or data/kjv.txt where it was found).
std::string check_context_bench_options(const ContextBenchOptions& o) {
  bench::check_known(kOp, "--treatments: ", "treatment", o.treatments, context_bench_treatments());
  RG_CHECK(!o.out_dir.empty(), kOp, "--out is empty");
  return find_text(o.text_path);
}

// Trains and evaluates every model of `options` not already scored in options.out_dir (progress lines
// to `progress`, may be null); no files but the run directories.
ContextBenchResult context_bench_results(const ContextBenchOptions& options, std::ostream* progress) {
  const auto start = std::chrono::steady_clock::now();
  const std::clock_t cpu_start = std::clock();
  const ThreadCountGuard restore_threads;
  ContextBenchOptions o = options;
  if (o.treatments.empty())
    o.treatments = o.full ? context_bench_treatments() : std::vector<std::string>{"sinusoidal", "t5", "alibi", "rope"};
  if (o.seeds.empty()) o.seeds = o.full ? std::vector<uint64_t>{1, 2, 3} : std::vector<uint64_t>{1, 2};
  const std::string text = check_context_bench_options(o);

  ContextBenchResult r;
  r.full = o.full;
  r.size = context_bench_size(o);
  r.resized = [o, &r]() mutable { return o.steps = -1, context_bench_size(o).steps != r.size.steps; }();
  r.treatments = o.treatments;
  r.seeds = o.seeds;
  r.text_path = text;
  const ContextBenchSize& s = r.size;
  {
    const TextDataset corpus(r.text_path, 0.05);
    const int64_t longest = s.context * s.multiples.back();
    RG_CHECK(corpus.val_size() > longest, kOp, "'", r.text_path, "' has a held-out split of ", corpus.val_size(),
             " bytes (5 %), too short for the longest evaluation context, ", longest, " bytes");
    const std::vector<double> log_p = unigram_log_probs(corpus);
    r.unigram_nll = unigram_nll(corpus, log_p);
    for (int64_t m : s.multiples)
      r.scored_unigram_nll.push_back(scored_unigram_nll(r.text_path, s, m * s.context, log_p));
  }
  std::filesystem::create_directories(o.out_dir);
  if (progress)
    *progress << "context-bench (" << bench::form_name(o.full, r.resized, s.steps)
              << "): " << bench::counted(o.treatments.size(), "treatment") << " x "
              << bench::counted(o.seeds.size(), "seed") << ", " << s.steps << " steps each, trained at context " << s.context
              << ", evaluated at " << s.context << "-" << s.context * s.multiples.back() << " on " << r.text_path
              << "\n"
              << std::flush;
  const std::string data = file_fingerprint(r.text_path, kOp);
  std::vector<StudyModel> models;
  for (const std::string& treatment : o.treatments)
    for (uint64_t seed : o.seeds) models.push_back(study_model(o, s, r.text_path, data, treatment, seed));
  const std::vector<StudyRecord> records = run_study_models(kOp, models, o.out_dir, progress);
  for (size_t i = 0; i < records.size(); ++i) {
    ContextBenchRun run;
    run.treatment = o.treatments[i / o.seeds.size()];
    run.seed = o.seeds[i % o.seeds.size()];
    run.params = static_cast<int64_t>(records[i].get("params"));
    run.nll = records[i].series("nll");
    for (double t : records[i].series("tokens")) run.tokens.push_back(static_cast<int64_t>(t));
    run.train_loss = records[i].get("train_loss");
    run.seconds = records[i].get("seconds");
    r.runs.push_back(std::move(run));
  }
  r.seconds = seconds_since(start);
  r.cpu_seconds = static_cast<double>(std::clock() - cpu_start) / CLOCKS_PER_SEC;
  return r;
}

}  // namespace

std::vector<std::string> context_bench_treatments() { return every_treatment(/*randomised=*/false); }

ContextBenchSize context_bench_size(const ContextBenchOptions& o) {
  ContextBenchSize s;
  if (o.full) {
    s.d_model = 64, s.n_heads = 4, s.d_ff = 256, s.layers = 2;
    s.context = 32, s.batch_size = 32;
    s.steps = 1000, s.warmup = 50, s.lr = 2e-3;
    s.multiples = {1, 2, 4, 8, 16};
    s.eval_tokens = 65536;
  } else {
    s.d_model = 32, s.n_heads = 4, s.d_ff = 128, s.layers = 2;
    s.context = 16, s.batch_size = 32;
    s.steps = 600, s.warmup = 40, s.lr = 3e-3;
    s.multiples = {1, 2, 4, 8};
    s.eval_tokens = 8192;
  }
  bench::override_steps(o.steps, s.steps, s.warmup);
  return s;
}

int64_t context_bench_eval_batches(const ContextBenchSize& s, int64_t context) {
  return std::max<int64_t>(1, s.eval_tokens / (s.batch_size * context));
}

EvalResult context_bench_eval(const std::string& checkpoint, int64_t context, int64_t batches) {
  LoadedRun run = load_run(checkpoint);
  // What relgrad eval's --data.context and --data.seed overrides do (train/command/checkpoint_overrides.cpp):
  // the changed config validated, the model's max_positions kept.
  RunConfig c = run.config;
  c.data.context = context;
  c.data.seed = kContextBenchEvalSeed;
  c.validate();
  const RunData data(c);
  return evaluate(*run.model, data.dataset(), batches);
}

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
  return bench::finish(kOp, options.out_dir,
                       {context_bench_table(r), context_bench_markdown(r, options), context_bench_csv(r), r.pictures,
                        context_bench_failures(r)},
                       r.full, r.resized, out,
                       " (" + fixed(r.seconds, 0) + " s, " + fixed(r.cpu_seconds, 0) + " s of processor time)");
}

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
