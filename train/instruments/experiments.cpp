// The experiments D1, D2, D3 and D6 (train/instruments/experiments.h). The runs over seeds are in
// experiments_run.cpp, the markdown and pictures in experiments_report.cpp.
#include "train/instruments/experiments.h"

#include <algorithm>
#include <chrono>
#include <functional>
#include <memory>
#include <ostream>

#include "train/instruments/experiments_internal.h"

namespace relgrad {

using namespace experiments;

namespace {

PositionalConfig shaw(int64_t clip) {
  PositionalConfig p = scheme_config("shaw");
  p.clip = clip;
  return p;
}

// The CI form's model (RecipeSize's) at `ci_steps`, or the full form's (d_model 64, 4 heads, warmup 100,
// lr 2e-3) at `full_steps`; then --heads, --width (d_ff = 2·width) and --steps (the warmup shrinks to a
// tenth of the steps when longer).
ModelSize form_size(bool full, int64_t full_steps, int64_t ci_steps, const ExperimentOptions& o,
                    int64_t encoder_layers = 1, int64_t decoder_layers = 1) {
  ModelSize size;
  size.encoder_layers = encoder_layers, size.decoder_layers = decoder_layers;
  if (full) size.d_model = 64, size.n_heads = 4, size.d_ff = 128, size.warmup = 100, size.lr = 2e-3;
  size.steps = full ? full_steps : ci_steps;
  if (o.heads > 0) size.n_heads = o.heads;
  if (o.width > 0) size.d_model = o.width, size.d_ff = 2 * o.width;
  if (o.steps > 0) {
    size.steps = o.steps;
    if (size.warmup >= size.steps) size.warmup = size.steps / 10;
  }
  return size;
}

// Trains and probes one run per variant into `runs`, the variant's scheme at spec.place.
void probe_variants(std::vector<ProbedRun>& runs, const Variants& variants, RunConfig config,
                    const BatchFn& data, const ProbeSpec& spec, std::ostream* progress) {
  for (const auto& [label, pos] : variants) {
    (spec.place == "cross" ? config.model.cross : config.model.decoder_self) = pos;
    runs.push_back(train_and_probe(label, config, data, spec, progress));
    runs.back().positional = pos;
  }
}

}  // namespace

// ---- D1 -----------------------------------------------------------------------------------------
// data.h's shift task, encoder–decoder layout: src = x, tgt_in = BOS y, tgt_out = y EOS with
// y[t] = x[t − k] ("_" for t < k). Decoder query t predicts y[t]; under Left alignment its source
// token x[t − k] sits at δ = −k. The encoder and decoder self-attentions have no positional term and
// the keys of cross-attention (encoder outputs) carry no position, so the cross scheme is the only
// way to find x[t − k]: content cannot (the symbols repeat).
ShiftResult experiment_shift(const ExperimentScale& scale, std::ostream* progress) {
  const bool full = scale.full;
  const ExperimentOptions& o = overrides_of(scale);
  TaskConfig t;
  t.kind = TaskKind::Shift;
  t.layout = Layout::EncoderDecoder;
  t.num_symbols = 10;
  t.lag = full ? 5 : 3;
  t.min_len = full ? 8 : 6;
  t.max_len = full ? 24 : 12;
  if (is_set(o.lag)) {
    // Every sequence keeps copied symbols and shows δ = −k: the shortest source is at least k + 3.
    const int64_t spread = t.max_len - t.min_len;
    t.lag = o.lag;
    t.min_len = std::max(t.min_len, o.lag + 3);
    t.max_len = t.min_len + spread;
  }
  t.batch_size = kExperimentRows;
  t.seed = scale.seed;
  auto task = std::make_shared<SyntheticTask>(t);
  BatchFn data = [task](int64_t index, Split split) { return task->batch(index, split); };

  const ModelSize size = form_size(full, 1500, 300, o);
  const int64_t k = t.lag;
  Variants variants = {
      {"t5", scheme_config("t5")},
      {"seed", scheme_config("seed")},
      {"shaw clip " + std::to_string(k + 1) + " (k + 1)", shaw(k + 1)},
      {"shaw clip " + std::to_string(k) + " (k)", shaw(k)},
  };
  if (k >= 2) variants.push_back({"shaw clip " + std::to_string(k - 1) + " (k − 1)", shaw(k - 1)});
  if (full) {
    variants.insert(variants.begin() + 3, {"shaw clip " + std::to_string(2 * k) + " (2k)", shaw(2 * k)});
    variants.push_back({"rope", scheme_config("rope")});
    variants.push_back({"alibi", scheme_config("alibi")});
    variants.push_back({"none", scheme_config("none")});
  }
  variants = choose_variants(variants, o);

  ShiftResult r;
  r.lag = k;
  r.min_len = t.min_len;
  r.chance = 1.0 / static_cast<double>(t.num_symbols);
  r.setup = "data.h's `shift` task, encoder–decoder layout: x of " + std::to_string(t.min_len) + "–" +
            std::to_string(t.max_len) + " symbols from " + std::to_string(t.num_symbols) + ", y[t] = x[t − " +
            std::to_string(k) + "] (\"_\" for t < " + std::to_string(k) + "), lag k = " + std::to_string(k) +
            ". Encoder and decoder self-attention have no positional term; the scheme under test is in "
            "cross-attention only, Left alignment, so decoder query t must read key t − k (δ = −k). " +
            model_text(size, true) + ". " + seed_sentence(scale);
  if (progress) *progress << "D1 shift-copy, lag " << k << "\n";
  // The mass counts the queries that copy a symbol (not "_" nor EOS): those need key t − k.
  const int64_t filler = task->filler();
  ProbeSpec spec;
  spec.expected = -k;
  spec.reach = t.min_len - 1;
  spec.eval_batches = full ? 8 : 4;
  spec.queries = [filler](int64_t, int64_t y) { return y >= kFirstSymbol && y != filler; };
  spec.subset = spec.queries;
  probe_variants(r.runs, variants, experiment_config(true, task->vocab().size, size, scale.seed), data, spec,
                 progress);
  return r;
}

// ---- D2 -----------------------------------------------------------------------------------------
// A decoder-only LM on a periodic sequence: s[0..P) random symbols, s[i] = s[i − P]. tokens =
// BOS s[0] … s[L−2], targets[i] = s[i] for i ≥ P (the repeated part; −100 before). Query i holds
// s[i − 1] and predicts s[i] = s[i − P], which sits at position i − P + 1: δ* = 1 − P (the token
// P before the predicted one).
BatchFn experiments::periodic_lm(int64_t period, int64_t length, int64_t symbols, uint64_t seed) {
  return [=](int64_t index, Split split) {
    std::vector<std::vector<int64_t>> tokens, targets;
    for (int64_t row = 0; row < kExperimentRows; ++row) {
      CounterStream rng = row_random(seed, 2, split, index, row);
      std::vector<int64_t> pattern(static_cast<size_t>(period));
      for (auto& p : pattern) p = kFirstSymbol + rng.below(symbols);
      std::vector<int64_t> x{kBos}, y;
      for (int64_t i = 0; i < length; ++i) {
        const int64_t s = pattern[static_cast<size_t>(i % period)];
        if (i + 1 < length) x.push_back(s);
        y.push_back(i >= period ? s : kIgnoreIndex);
      }
      tokens.push_back(std::move(x));
      targets.push_back(std::move(y));
    }
    return decoder_only_batch(tokens, targets);
  };
}

PeriodicResult experiment_periodic(const ExperimentScale& scale, std::ostream* progress) {
  const bool full = scale.full;
  const ExperimentOptions& o = overrides_of(scale);
  const int64_t P = is_set(o.period) ? o.period : full ? 8 : 5, symbols = 10;
  const int64_t L = is_set(o.period) ? std::max<int64_t>(full ? 32 : 16, 3 * P) : full ? 32 : 16;
  // The CI form's 500 steps: T5 needs them to leave δ = 0 reliably (8 seeds checked).
  const ModelSize size = form_size(full, 1500, 500, o, 0);

  Variants form = {{"t5", scheme_config("t5")}, {"seed", scheme_config("seed")}};
  if (full) {
    form.push_back({"huang", scheme_config("huang")});
    form.push_back({"shaw clip " + std::to_string(P) + " (P)", shaw(P)});
    form.push_back({"shaw clip " + std::to_string(P - 1) + " (P − 1)", shaw(P - 1)});
    form.push_back({"rope", scheme_config("rope")});
    form.push_back({"alibi", scheme_config("alibi")});
    form.push_back({"none", scheme_config("none")});
  }
  PeriodicResult r;
  r.period = P;
  r.chance = 1.0 / static_cast<double>(symbols);
  r.setup =
      "A decoder-only LM on sequences of length " + std::to_string(L) + ": " + std::to_string(P) +
      " random symbols (of " + std::to_string(symbols) + ") repeated with period P = " + std::to_string(P) +
      "; tokens = BOS s[0] … s[L−2], loss only on the repeated part (targets s[i], i ≥ P). Query i holds "
      "s[i−1] and predicts s[i] = s[i−P], which sits at δ* = 1 − P = " + offset_text(1 - P) + " from the query (P before the predicted token). The scheme is in the causal self-attention. " +
      model_text(size, false) + ". " + seed_sentence(scale);
  if (progress) *progress << "D2 periodic repetition, period " << P << "\n";
  const RunConfig config = experiment_config(false, kFirstSymbol + symbols, size, scale.seed);
  auto run_at = [&](int64_t period, const Variants& variants) {
    const int64_t length = std::max(L, 3 * period);
    ProbeSpec spec;
    spec.place = "decoder_self";
    spec.expected = 1 - period;
    spec.queries = [](int64_t, int64_t y) { return y != kIgnoreIndex; };  // the repeated part: i ≥ P
    spec.reach = length / 2;
    spec.eval_batches = full ? 8 : 4;
    probe_variants(r.runs, variants, config, periodic_lm(period, length, symbols, scale.seed), spec, progress);
  };
  run_at(P, choose_variants(form, o));
  // The full form's demonstration of a shared T5 bucket, at its own period (not with --period).
  const bool t5_wanted = o.schemes.empty() || std::count(o.schemes.begin(), o.schemes.end(), "t5");
  if (full && !is_set(o.period) && t5_wanted) {
    const PositionalConfig t5 = apply_tables(scheme_config("t5"), o);
    run_at(20, {{tuned_label("t5, P = 20 (δ* = −19 shares a bucket with −20)", t5, o), t5}});
  }
  return r;
}

// ---- D3 -----------------------------------------------------------------------------------------
// D2's periodic LM trained at one length and evaluated at 1×, 2× and 4× that length, for the first
// zoo's positional schemes of the decoder (or those --scheme names).
ExtrapolationResult experiment_extrapolation(const ExperimentScale& scale, std::ostream* progress) {
  const bool full = scale.full;
  const ExperimentOptions& o = overrides_of(scale);
  const int64_t L = is_set(o.train_length) ? o.train_length : full ? 64 : 16, P = full ? 8 : 4, symbols = 10;
  const ModelSize size = form_size(full, 1000, 200, o, 0, 2);

  ExtrapolationResult r;
  r.train_length = L;
  r.eval_lengths = {L, 2 * L, 4 * L};
  if (!o.eval_lengths.empty()) {  // the training length first, then the others in the order given
    r.eval_lengths = {L};
    for (int64_t e : o.eval_lengths)
      if (std::find(r.eval_lengths.begin(), r.eval_lengths.end(), e) == r.eval_lengths.end())
        r.eval_lengths.push_back(e);
  }
  r.chance = 1.0 / static_cast<double>(symbols);
  // The learned tables of seed and huang cover the training length only (t3 = L, |δ| ≤ L − 1; beyond:
  // no term, OutOfRange::Zero), as the seed's recipe sizes them; Shaw clips at 2P; T5 keeps its
  // default 32 buckets up to distance 128.
  const int64_t table = o.table > 0 ? o.table : L, clip = o.clip > 0 ? o.clip : 2 * P;
  const int64_t buckets = o.buckets > 0 ? o.buckets : 32,
                max_distance = o.max_distance > 0 ? o.max_distance : 128;
  // By default the schemes of the documented table (docs/experiments.md), the first zoo's; --scheme
  // takes any registered one (the later schemes' length comparison is relgrad length-bench's).
  const std::vector<std::string> documented = {"none", "seed", "huang", "shaw", "t5", "alibi", "rope", "transformer_xl"};
  const std::vector<std::string>& wanted = o.schemes.empty() ? documented : o.schemes;
  std::vector<std::string> schemes;  // in the registry's order (layers/schemes.h)
  for (const SchemeEntry& e : positional_schemes())
    if (std::count(wanted.begin(), wanted.end(), e.name)) schemes.push_back(e.name);
  r.setup = "D2's task (period P = " + std::to_string(P) + ", " + std::to_string(symbols) +
            " symbols, loss on the repeated part) trained at length " + std::to_string(L) +
            " and evaluated (teacher-forced, held-out) at " + spoken_list(r.eval_lengths, 0) +
            ". Decoder-only, the scheme in every causal self-attention; " + model_text(size, false) +
            ". seed and huang tables have t3 = " + std::to_string(table) + " (|δ| ≤ " +
            std::to_string(table - 1) + ", no term beyond: the Zero policy); shaw clip " +
            std::to_string(clip) + "; t5 " + std::to_string(buckets) + " buckets, max distance " +
            std::to_string(max_distance) + "; rope base 10000. " + seed_sentence(scale);
  if (progress) *progress << "D3 length extrapolation, train length " << L << "\n";
  for (const std::string& scheme : schemes) {
    const auto start = std::chrono::steady_clock::now();
    RunConfig c = experiment_config(false, kFirstSymbol + symbols, size, scale.seed);
    PositionalConfig pos = scheme_config(scheme);
    pos.max_length = table;
    pos.clip = clip;
    pos.num_buckets = buckets;
    pos.max_distance = max_distance;
    c.model.decoder_self = pos;
    ExtrapolationRow row;
    row.scheme = scheme;
    train_run(c, periodic_lm(P, L, symbols, scale.seed), progress, scheme, [&](RunModel& model) {
      for (int64_t length : r.eval_lengths) {
        Evaluation e = evaluate_on(model, periodic_lm(P, length, symbols, scale.seed), full ? 4 : 2);
        row.accuracy.push_back(e.accuracy);
        row.loss.push_back(e.loss);
      }
    });
    row.seconds = seconds_since(start);
    r.rows.push_back(std::move(row));
  }
  return r;
}

// ---- D6 -----------------------------------------------------------------------------------------
// Source and target from our own builder (PAD 0, BOS 1, EOS 2, symbols from 3), f(s) = the mirror
// symbol (S − 1 − s), so a target never equals its source token:
//   lag      src = x[0 .. n+c) EOS, y_i = f(x_{i+c}) for i < n, tgt_out = y EOS, tgt_in = BOS y:
//            query i needs key i + c (the EOS key for the EOS target), δ* = +c under Left.
//   stretch  src = x[0 .. n) EOS (t1 = n + 1), every source token twice: y_{2m} = y_{2m+1} = f(src_m)
//            (f(EOS) = EOS), tgt_out = y (t2 = 2n + 2 = 2·t1), tgt_in = BOS y[..−1]. Query i needs key
//            ⌊i/2⌋: δ* = 0 under Scaled (π(i) = ⌊i·t1/t2⌋ = ⌊i/2⌋, exact because t2 = 2·t1 in every
//            row and so in the padded batch), but δ = −⌈i/2⌉, different for every query, under Left.
//            Odd positions can copy the decoder's own input (y_{2m+1} = y_{2m}); even positions need
//            the source: the subset accuracy counts those.
namespace {

int64_t mirror(int64_t token, int64_t symbols) {
  return token == kEos ? kEos : kFirstSymbol + (symbols - 1 - (token - kFirstSymbol));
}

// Encoder–decoder batches of rows that `row` draws as (source, target); tgt_in = BOS target[..−1].
using SourceTarget = std::pair<std::vector<int64_t>, std::vector<int64_t>>;
BatchFn source_target_batches(uint32_t stream, uint64_t seed, const std::function<SourceTarget(CounterStream&)>& row) {
  return [=](int64_t index, Split split) {
    std::vector<std::vector<int64_t>> src, in, out;
    for (int64_t r = 0; r < kExperimentRows; ++r) {
      CounterStream rng = row_random(seed, stream, split, index, r);
      auto [x, y] = row(rng);
      std::vector<int64_t> y_in{kBos};
      y_in.insert(y_in.end(), y.begin(), y.end() - 1);
      src.push_back(std::move(x));
      in.push_back(std::move(y_in));
      out.push_back(std::move(y));
    }
    return encoder_decoder_batch(src, in, out);
  };
}

BatchFn lag_batches(int64_t lag, int64_t min_len, int64_t max_len, int64_t symbols, uint64_t seed) {
  return source_target_batches(6, seed, [=](CounterStream& rng) {
    const int64_t n = rng.between(min_len, max_len);
    std::vector<int64_t> x, y;
    for (int64_t i = 0; i < n + lag; ++i) x.push_back(kFirstSymbol + rng.below(symbols));
    x.push_back(kEos);
    for (int64_t i = 0; i <= n; ++i) y.push_back(mirror(x[static_cast<size_t>(i + lag)], symbols));  // ends in EOS
    return SourceTarget{x, y};
  });
}

BatchFn stretch_batches(int64_t min_len, int64_t max_len, int64_t symbols, uint64_t seed) {
  return source_target_batches(7, seed, [=](CounterStream& rng) {
    const int64_t n = rng.between(min_len, max_len);
    std::vector<int64_t> x, y;
    for (int64_t i = 0; i < n; ++i) x.push_back(kFirstSymbol + rng.below(symbols));
    x.push_back(kEos);
    for (int64_t s : x) y.insert(y.end(), 2, mirror(s, symbols));
    return SourceTarget{x, y};
  });
}

}  // namespace

SyncResult experiment_synchronous(const ExperimentScale& scale, std::ostream* progress) {
  const bool full = scale.full;
  const ExperimentOptions& o = overrides_of(scale);
  const int64_t c = is_set(o.offset) ? o.offset : full ? 3 : 2, symbols = 10;
  const int64_t min_len = full ? 6 : 4, max_len = full ? 16 : 10;
  const ModelSize size = form_size(full, 1000, 300, o);
  const RunConfig config = experiment_config(true, kFirstSymbol + symbols, size, scale.seed);

  SyncResult r;
  r.lag = c;
  r.chance = 1.0 / static_cast<double>(symbols);
  r.setup = "Our own encoder–decoder batches (PAD 0, BOS 1, EOS 2, symbols 3 … from " +
            std::to_string(symbols) + "), f = the mirror symbol (S − 1 − s). Lag: src = x (" +
            std::to_string(min_len) + "–" + std::to_string(max_len) +
            " + c symbols) EOS, y_i = f(x_{i+c}) then EOS, c = " + std::to_string(c) +
            ": δ* = +c under Left alignment. Time stretch: src = x (" + std::to_string(min_len) + "–" +
            std::to_string(max_len) +
            " symbols) EOS, every source token twice, y_{2m} = y_{2m+1} = f(src_m), so "
            "t2 = 2·t1 and query i needs key ⌊i/2⌋ (Scaled: δ* = 0; Left: δ = −⌈i/2⌉, a different offset for "
            "every query). Only cross-attention has a positional term. " +
            model_text(size, true) + ". " + seed_sentence(scale);

  if (progress) *progress << "D6 synchronous cross-attention, lag " << c << "\n";
  Variants lag_variants = {{"seed", scheme_config("seed")}};
  if (full)
    lag_variants.push_back({"t5", scheme_config("t5")}), lag_variants.push_back({"shaw clip 8", shaw(8)});
  ProbeSpec spec;
  spec.expected = c;
  spec.reach = std::max(min_len, c + 1);
  spec.eval_batches = full ? 8 : 4;
  probe_variants(r.lag_runs, choose_variants(lag_variants, o), config,
                 lag_batches(c, min_len, max_len, symbols, scale.seed), spec, progress);

  const BatchFn stretch = stretch_batches(min_len, max_len, symbols, scale.seed);
  spec.expected = 0;
  spec.key_of = [](int64_t i) { return i / 2; };
  spec.subset = [](int64_t t, int64_t) { return t % 2 == 0; };  // the even positions need the source
  spec.reach = min_len;
  for (const auto& [label, pos] : choose_variants({{"seed", scheme_config("seed")}, {"t5", scheme_config("t5")}}, o))
    for (Alignment a : {Alignment::Scaled, Alignment::Left}) {
      RunConfig aligned = config;
      aligned.model.cross_alignment = aligned_by(a);
      const std::string name = label + (a == Alignment::Scaled ? " (scaled)" : " (left)");
      probe_variants(r.stretch_runs, {{name, pos}}, aligned, stretch, spec, progress);
    }
  return r;
}

}  // namespace relgrad
