// D1 shift-copy, D2 periodic repetition and D6 synchronous cross-attention (train/instruments/experiments.h).
// D3 is in experiments_d3.cpp, the runs over seeds in experiments_run.cpp, the markdown and pictures in
// experiments_report.cpp.
#include "train/instruments/experiments.h"

#include <algorithm>
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

  ModelSize size;
  if (full)
    size.d_model = 64, size.n_heads = 4, size.d_ff = 128, size.steps = 1500, size.warmup = 100,
    size.lr = 2e-3;
  else
    size.steps = 300, size.lr = 3e-3;
  apply_size(size, o);

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
  for (const auto& [label, cross] : variants) {
    RunConfig c = experiment_config(true, task->vocab().size, size, scale.seed);
    c.model.cross = cross;
    ProbeSpec spec;
    spec.place = "cross";
    spec.expected = -k;
    spec.reach = t.min_len - 1;
    spec.eval_batches = full ? 8 : 4;
    spec.queries = [filler](int64_t, int64_t y) { return y >= kFirstSymbol && y != filler; };
    spec.subset = spec.queries;
    r.runs.push_back(train_and_probe(label, c, data, spec, progress));
    r.runs.back().positional = cross;
  }
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
  ModelSize size;
  size.encoder_layers = 0;
  if (full)
    size.d_model = 64, size.n_heads = 4, size.d_ff = 128, size.steps = 1500, size.warmup = 100,
    size.lr = 2e-3;
  else
    size.steps = 500, size.lr = 3e-3;  // T5 needs 500 steps to leave δ = 0 reliably (8 seeds checked)
  apply_size(size, o);

  struct Variant {
    std::string label;
    PositionalConfig pos;
    int64_t period;
  };
  Variants form = {{"t5", scheme_config("t5")}, {"seed", scheme_config("seed")}};
  if (full) {
    form.push_back({"huang", scheme_config("huang")});
    form.push_back({"shaw clip " + std::to_string(P) + " (P)", shaw(P)});
    form.push_back({"shaw clip " + std::to_string(P - 1) + " (P − 1)", shaw(P - 1)});
    form.push_back({"rope", scheme_config("rope")});
    form.push_back({"alibi", scheme_config("alibi")});
    form.push_back({"none", scheme_config("none")});
  }
  std::vector<Variant> variants;
  for (auto& [label, pos] : choose_variants(form, o)) variants.push_back({label, pos, P});
  // The full form's demonstration of a shared T5 bucket, at its own period (not with --period).
  const bool t5_wanted = o.schemes.empty() || std::count(o.schemes.begin(), o.schemes.end(), "t5");
  if (full && !is_set(o.period) && t5_wanted) {
    const PositionalConfig t5 = apply_tables(scheme_config("t5"), o);
    variants.push_back({tuned_label("t5, P = 20 (δ* = −19 shares a bucket with −20)", t5, o), t5, 20});
  }

  PeriodicResult r;
  r.period = P;
  r.chance = 1.0 / static_cast<double>(symbols);
  r.setup =
      "A decoder-only LM on sequences of length " + std::to_string(L) + ": " + std::to_string(P) +
      " random symbols (of " + std::to_string(symbols) + ") repeated with period P = " + std::to_string(P) +
      "; tokens = BOS s[0] … s[L−2], loss only on the repeated part (targets s[i], i ≥ P). Query i holds "
      "s[i−1] and predicts s[i] = s[i−P], which sits at δ* = 1 − P = " +
      offset_text(1 - P) +
      " from the query (P before the predicted token). The scheme is in the causal self-attention. " +
      model_text(size, false) + ". " + seed_sentence(scale);
  if (progress) *progress << "D2 periodic repetition, period " << P << "\n";
  for (const Variant& v : variants) {
    RunConfig c = experiment_config(false, kFirstSymbol + symbols, size, scale.seed);
    c.model.decoder_self = v.pos;
    const int64_t length = std::max(L, 3 * v.period);
    ProbeSpec spec;
    spec.place = "decoder_self";
    spec.expected = 1 - v.period;
    spec.queries = [](int64_t, int64_t y) { return y != kIgnoreIndex; };  // the repeated part: i ≥ P
    spec.reach = length / 2;
    spec.eval_batches = full ? 8 : 4;
    r.runs.push_back(
        train_and_probe(v.label, c, periodic_lm(v.period, length, symbols, scale.seed), spec, progress));
    r.runs.back().positional = v.pos;
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

BatchFn lag_batches(int64_t lag, int64_t min_len, int64_t max_len, int64_t symbols, uint64_t seed) {
  return [=](int64_t index, Split split) {
    std::vector<std::vector<int64_t>> src, in, out;
    for (int64_t row = 0; row < kExperimentRows; ++row) {
      CounterStream rng = row_random(seed, 6, split, index, row);
      const int64_t n = rng.between(min_len, max_len);
      std::vector<int64_t> x;
      for (int64_t i = 0; i < n + lag; ++i) x.push_back(kFirstSymbol + rng.below(symbols));
      x.push_back(kEos);
      std::vector<int64_t> y;
      for (int64_t i = 0; i <= n; ++i)
        y.push_back(mirror(x[static_cast<size_t>(i + lag)], symbols));  // ends in EOS
      std::vector<int64_t> y_in{kBos};
      y_in.insert(y_in.end(), y.begin(), y.end() - 1);
      src.push_back(std::move(x));
      in.push_back(std::move(y_in));
      out.push_back(std::move(y));
    }
    return encoder_decoder_batch(src, in, out);
  };
}

BatchFn stretch_batches(int64_t min_len, int64_t max_len, int64_t symbols, uint64_t seed) {
  return [=](int64_t index, Split split) {
    std::vector<std::vector<int64_t>> src, in, out;
    for (int64_t row = 0; row < kExperimentRows; ++row) {
      CounterStream rng = row_random(seed, 7, split, index, row);
      const int64_t n = rng.between(min_len, max_len);
      std::vector<int64_t> x;
      for (int64_t i = 0; i < n; ++i) x.push_back(kFirstSymbol + rng.below(symbols));
      x.push_back(kEos);
      std::vector<int64_t> y;
      for (int64_t s : x) y.insert(y.end(), 2, mirror(s, symbols));
      std::vector<int64_t> y_in{kBos};
      y_in.insert(y_in.end(), y.begin(), y.end() - 1);
      src.push_back(std::move(x));
      in.push_back(std::move(y_in));
      out.push_back(std::move(y));
    }
    return encoder_decoder_batch(src, in, out);
  };
}

}  // namespace

SyncResult experiment_synchronous(const ExperimentScale& scale, std::ostream* progress) {
  const bool full = scale.full;
  const ExperimentOptions& o = overrides_of(scale);
  const int64_t c = is_set(o.offset) ? o.offset : full ? 3 : 2, symbols = 10;
  const int64_t min_len = full ? 6 : 4, max_len = full ? 16 : 10;
  ModelSize size;
  if (full)
    size.d_model = 64, size.n_heads = 4, size.d_ff = 128, size.steps = 1000, size.warmup = 100,
    size.lr = 2e-3;
  else
    size.steps = 300, size.lr = 3e-3;
  apply_size(size, o);
  const int64_t vocab = kFirstSymbol + symbols, eval_batches = full ? 8 : 4;

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
  BatchFn lag = lag_batches(c, min_len, max_len, symbols, scale.seed);
  Variants lag_variants = {{"seed", scheme_config("seed")}};
  if (full)
    lag_variants.push_back({"t5", scheme_config("t5")}), lag_variants.push_back({"shaw clip 8", shaw(8)});
  for (const auto& [label, pos] : choose_variants(lag_variants, o)) {
    RunConfig cfg = experiment_config(true, vocab, size, scale.seed);
    cfg.model.cross = pos;
    ProbeSpec spec;
    spec.expected = c;
    spec.reach = std::max(min_len, c + 1);
    spec.eval_batches = eval_batches;
    r.lag_runs.push_back(train_and_probe(label, cfg, lag, spec, progress));
    r.lag_runs.back().positional = pos;
  }

  BatchFn stretch = stretch_batches(min_len, max_len, symbols, scale.seed);
  PositionFilter even = [](int64_t t, int64_t) { return t % 2 == 0; };
  KeyOf half = [](int64_t i) { return i / 2; };
  Variants stretch_variants = {{"seed", scheme_config("seed")}};
  stretch_variants.push_back({"t5", scheme_config("t5")});
  for (const auto& [label, pos] : choose_variants(stretch_variants, o))
    for (Alignment a : {Alignment::Scaled, Alignment::Left}) {
      RunConfig cfg = experiment_config(true, vocab, size, scale.seed);
      cfg.model.cross = pos;
      cfg.model.cross_alignment = aligned_by(a);
      const std::string name = label + (a == Alignment::Scaled ? " (scaled)" : " (left)");
      ProbeSpec spec;
      spec.expected = 0;
      spec.key_of = half;
      spec.subset = even;
      spec.reach = min_len;
      spec.eval_batches = eval_batches;
      r.stretch_runs.push_back(train_and_probe(name, cfg, stretch, spec, progress));
      r.stretch_runs.back().positional = pos;
    }
  return r;
}

}  // namespace relgrad
