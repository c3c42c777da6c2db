// D3 length extrapolation (train/instruments/experiments.h): D2's periodic LM trained at one length and
// evaluated at 1×, 2× and 4× that length, for the first zoo's positional schemes of the decoder (or
// those --scheme names).
#include <algorithm>
#include <chrono>
#include <ostream>

#include "train/instruments/experiments_internal.h"

namespace relgrad {

using namespace experiments;

ExtrapolationResult experiment_extrapolation(const ExperimentScale& scale, std::ostream* progress) {
  const bool full = scale.full;
  const ExperimentOptions& o = overrides_of(scale);
  const int64_t L = is_set(o.train_length) ? o.train_length : full ? 64 : 16, P = full ? 8 : 4, symbols = 10;
  ModelSize size;
  size.encoder_layers = 0;
  size.decoder_layers = 2;
  if (full)
    size.d_model = 64, size.n_heads = 4, size.d_ff = 128, size.steps = 1000, size.warmup = 100,
    size.lr = 2e-3;
  else
    size.steps = 200, size.lr = 3e-3;
  apply_size(size, o);

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
  std::string evaluated;
  for (size_t n = 0; n < r.eval_lengths.size(); ++n)
    evaluated += (n == 0                           ? ""
                  : n + 1 == r.eval_lengths.size() ? " and "
                                                   : ", ") +
                 std::to_string(r.eval_lengths[n]);
  r.setup = "D2's task (period P = " + std::to_string(P) + ", " + std::to_string(symbols) +
            " symbols, loss on the repeated part) trained at length " + std::to_string(L) +
            " and evaluated (teacher-forced, held-out) at " + evaluated +
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
    row.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    r.rows.push_back(std::move(row));
  }
  return r;
}

}  // namespace relgrad
