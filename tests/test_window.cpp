// Generation and evaluation past the training context: the sliding window of generate()
// (train/trainer/sampler.h: SamplingOptions::window), `relgrad sample --window` and its default
// (train/command/subcommands/sample.cpp: the training context unless the scheme extrapolates), and the
// strided score of `relgrad eval --window` (train/trainer/run.h).
// A windowed greedy sample equals, token for token, a recompute over the last W tokens at each step,
// with the KV cache and without, for a RoPE model, a music model and a synthetic-task model.
#include <algorithm>
#include <cmath>

#include "cli_testing.h"
#include "file_testing.h"
#include "layers/models.h"
#include "layers/schemes.h"
#include "model_testing.h"
#include "testing.h"
#include "train/config/run_options.h"
#include "train/trainer/run.h"
#include "train/trainer/sampler.h"

using namespace relgrad;
using namespace relgrad::testing;

namespace {

// The reference: at each step the model reads only the last `window` tokens of the sequence (from
// position 0) and the argmax of the last row is appended.
std::vector<int64_t> recompute_greedy(DecoderLM& model, std::vector<int64_t> seq, int64_t window, int64_t steps) {
  NoGradGuard no_grad;
  model.eval();
  for (int64_t n = 0; n < steps; ++n) {
    const int64_t T = static_cast<int64_t>(seq.size()), from = std::max<int64_t>(0, T - window);
    std::vector<int64_t> last(seq.begin() + from, seq.end());
    Tensor logits = model.forward(from_vector<int64_t>(last, {1, T - from}));  // (1, t, V)
    seq.push_back(argmax(logits.narrow(1, T - from - 1, 1), -1).to_vector<int64_t>()[0]);
  }
  return seq;
}

std::vector<int64_t> windowed_greedy(DecoderLM& model, const std::vector<int64_t>& prompt, int64_t window,
                                     int64_t steps, bool use_cache) {
  SamplingOptions o;
  o.temperature_(0).max_new_tokens_(steps).eos_(-1).window_(window);
  const Tensor p = from_vector<int64_t>(prompt, {1, static_cast<int64_t>(prompt.size())});
  return generate(model, p, o, use_cache).to_vector<int64_t>();
}

// Both decodings against the reference; the window must also matter (the unwindowed sample differs),
// or the comparison would show nothing.
void check_window_matches_recompute(DecoderLM& model, const std::vector<int64_t>& prompt, int64_t window,
                                    int64_t steps) {
  const std::vector<int64_t> expected = recompute_greedy(model, prompt, window, steps);
  CHECK(windowed_greedy(model, prompt, window, steps, /*use_cache=*/true) == expected);
  CHECK(windowed_greedy(model, prompt, window, steps, /*use_cache=*/false) == expected);
  CHECK(windowed_greedy(model, prompt, 0, steps, true) != expected);
}

// A random model whose greedy continuation depends on its context: the initial weights, which give
// nearly uniform logits and a sample that repeats one token whatever it reads, scaled up.
void sharpen(DecoderLM& lm) {
  NoGradGuard no_grad;
  for (Tensor& p : lm.parameters()) p.mul_(4.0);
}

TransformerConfig small_lm(const std::string& scheme) {
  TransformerConfig c;
  c.vocab_size = 13;
  c.d_model = 16;
  c.n_heads = 2;
  c.d_ff = 32;
  c.n_decoder_layers = 2;
  c.dropout = 0.0;
  c.decoder_self.scheme = scheme;
  return c;
}

std::string corpus() {
  std::string text;
  for (int i = 0; i < 80; ++i) text += "In the beginning God created the heaven and the earth. And the earth was void.\n";
  return text;
}

// A byte-level RoPE language model trained for a few steps at context 16 (2 layers).
struct TextRun {
  TempDir dir;
  std::string checkpoint;
  CliResult result;
  TextRun() {
    write_bytes(dir.file("corpus.txt"), corpus());
    result = run_relgrad({"train", "--model.type=decoder-only", "--data.source=text", "--data.text_path=" +
                          dir.file("corpus.txt"), "--data.context=16", "--data.batch_size=4", "--data.val_fraction=0.2",
                          "--model.d_model=16", "--model.n_heads=2", "--model.d_ff=32", "--model.n_decoder_layers=2",
                          "--model.decoder_self.scheme=rope", "--optim.warmup_steps=1", "--train.steps=3",
                          "--train.eval_batches=1", "--train.samples=0", "--train.target_accuracy=0",
                          "--train.out_dir=" + dir.file("run")});
    checkpoint = dir.file("run/checkpoint.safetensors");
  }
};
const TextRun& text_run() {
  static TextRun r;
  REQUIRE_MESSAGE(r.result.code == 0, r.result.err);
  return r;
}

}  // namespace

TEST_CASE("window: a windowed greedy sample equals a recompute over the last W tokens, cached or not (RoPE)") {
  Generator init(3);
  DecoderLM lm(small_lm("rope"), &init);
  lm.to(kFloat64);
  sharpen(lm);
  check_window_matches_recompute(lm, {1, 5, 7, 2, 9}, 6, 30);
  // A prompt longer than the window: the first step already reads only its last W tokens.
  check_window_matches_recompute(lm, {3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, 4, 20);
}

TEST_CASE("window: the same under a scheme that needs recomputing (absolute positions) and a relative bias") {
  for (const char* scheme : {"none", "alibi", "t5"}) {
    INFO("decoder_self ", scheme);
    TransformerConfig c = small_lm(scheme);
    if (std::string(scheme) == "none") c.absolute_position = AbsolutePositionKind::Sinusoidal;
    Generator init(5);
    DecoderLM lm(c, &init);
    lm.to(kFloat64);
    const std::vector<int64_t> prompt{1, 5, 7, 2, 9};
    const std::vector<int64_t> expected = recompute_greedy(lm, prompt, 6, 30);
    CHECK(windowed_greedy(lm, prompt, 6, 30, true) == expected);
    CHECK(windowed_greedy(lm, prompt, 6, 30, false) == expected);
  }
}

// The music model has RoPE, the synthetic one absolute (sinusoidal) positions.
TEST_CASE("window: a music model and a synthetic-task model sample under the window as a recompute does") {
  TempDir dir;
  CliResult music = run_relgrad({"train", "--model.type=decoder-only", "--data.source=music", "--data.context=16",
                                 "--data.batch_size=4", "--model.d_model=16", "--model.n_heads=2", "--model.d_ff=32",
                                 "--model.n_decoder_layers=2", "--model.decoder_self.scheme=rope",
                                 "--optim.warmup_steps=1", "--train.steps=3", "--train.eval_every=0",
                                 "--train.eval_batches=1", "--train.samples=0", "--train.target_accuracy=0",
                                 "--train.out_dir=" + dir.file("music")});
  REQUIRE_MESSAGE(music.code == 0, music.err);
  CliResult task = run_relgrad({"train", "--model.type=decoder-only", "--data.source=synthetic",
                                "--data.task=periodic_lm", "--data.max_len=12", "--data.period=4",
                                "--data.batch_size=4", "--model.d_model=16", "--model.n_heads=2", "--model.d_ff=32",
                                "--model.n_decoder_layers=2", "--model.decoder_self.scheme=none",
                                "--model.absolute_position=sinusoidal",
                                "--optim.warmup_steps=1", "--train.steps=3", "--train.eval_batches=1",
                                "--train.samples=0", "--train.target_accuracy=0",
                                "--train.out_dir=" + dir.file("task")});
  REQUIRE_MESSAGE(task.code == 0, task.err);
  for (const char* run : {"music", "task"}) {
    INFO(std::string(run));
    LoadedRun loaded = load_run(dir.file(std::string(run) + "/checkpoint.safetensors"));
    DecoderLM& lm = decoder_lm_of(*loaded.model);
    sharpen(lm);  // 3 steps leave a model close to its initial one
    const int64_t window = run == std::string("music") ? 16 : 12;  // data.context, data.max_len
    check_window_matches_recompute(lm, {kBos, 5, 9, 6, 7}, window, 3 * window);
  }
  // relgrad sample's default is that window, said on its first line.
  CliResult sampled = run_relgrad({"sample", dir.file("task/checkpoint.safetensors"), "-n", "1"});
  CHECK_CLI(sampled, 0);
  CHECK(sampled.out.rfind("window 12 tokens (data.max_len = 12; absolute positions)", 0) == 0);
}

TEST_CASE("window: relgrad sample windows by default, says which rule ran, and --window sets or lifts it") {
  const TextRun& r = text_run();
  CliResult s = run_relgrad({"sample", r.checkpoint, "--prompt", "In the", "--max-new-tokens", "40",
                             "--temperature", "0"});
  CHECK_CLI(s, 0);
  CHECK(s.out.rfind("window 16 tokens (data.context = 16; rope is not known to extrapolate): KV cache while the "
                    "sequence fits, then each step recomputes the last 16; --window none feeds every token\n", 0) == 0);
  // The text printed is the library's windowed greedy sample.
  LoadedRun loaded = load_run(r.checkpoint);
  std::vector<int64_t> prompt;
  for (char ch : std::string("In the")) prompt.push_back(static_cast<unsigned char>(ch));
  std::string expected;
  for (int64_t id : recompute_greedy(decoder_lm_of(*loaded.model), prompt, 16, 40)) expected += static_cast<char>(id);
  CHECK(contains(s.out, "--- sample 0 (seed 0)\n" + printable_text(expected) + "\n"));

  CliResult none = run_relgrad({"sample", r.checkpoint, "--prompt", "In the", "--max-new-tokens", "4", "--window", "none"});
  CHECK_CLI(none, 0);
  CHECK(none.out.rfind("window none (--window none): every token is fed", 0) == 0);
  CliResult eight = run_relgrad({"sample", r.checkpoint, "--prompt", "In the", "--max-new-tokens", "4", "--window", "8"});
  CHECK_CLI(eight, 0);
  CHECK(eight.out.rfind("window 8 tokens (--window 8): ", 0) == 0);
}

TEST_CASE("window: a scheme registered as extrapolating is sampled with no window by default") {
  const SchemeEntry* alibi = find_scheme("alibi");
  const SchemeEntry* rope = find_scheme("rope");
  REQUIRE(alibi != nullptr);
  REQUIRE(rope != nullptr);
  CHECK(alibi->extrapolates);
  CHECK_FALSE(rope->extrapolates);
  TempDir dir;
  write_bytes(dir.file("corpus.txt"), corpus());
  CliResult t = run_relgrad({"train", "--model.type=decoder-only", "--data.source=text", "--data.text_path=" +
                             dir.file("corpus.txt"), "--data.context=16", "--data.batch_size=4",
                             "--data.val_fraction=0.2", "--model.d_model=16", "--model.n_heads=2", "--model.d_ff=32",
                             "--model.n_decoder_layers=1", "--model.decoder_self.scheme=alibi", "--optim.warmup_steps=1",
                             "--train.steps=2", "--train.eval_batches=1", "--train.samples=0",
                             "--train.target_accuracy=0", "--train.out_dir=" + dir.file("run")});
  REQUIRE_MESSAGE(t.code == 0, t.err);
  CliResult s = run_relgrad({"sample", dir.file("run/checkpoint.safetensors"), "--max-new-tokens", "4"});
  CHECK_CLI(s, 0);
  CHECK(s.out.rfind("window none (alibi extrapolates, layers/schemes.cpp): every token is fed", 0) == 0);
  // The samples relgrad train prints at its end follow the same rule.
  CHECK(trainer_options(load_run(dir.file("run/checkpoint.safetensors")).config).sample.window == 0);
  CHECK(trainer_options(load_run(text_run().checkpoint).config).sample.window == 16);
}

TEST_CASE("window: bad --window values are usage errors naming the option") {
  // Checked before the checkpoint is read: a missing file would otherwise be exit 1.
  for (const char* command : {"sample", "eval"})
    for (const char* bad : {"0", "-3", "abc", "", "1.5", "none8", "99999999999"}) {
      INFO(command, " --window '", bad, "'");
      CliResult r = run_relgrad({command, "no-such-checkpoint.safetensors", "--window", bad});
      CHECK_CLI(r, 2);
      CHECK(contains(r.err, "--window"));
    }
  CliResult dump = run_relgrad({"eval", text_run().checkpoint, "--window", "8", "--dump-logits", "x.safetensors"});
  CHECK_CLI(dump, 2);
  CHECK(contains(dump.err, "--window"));
  // An encoder-decoder's target is not windowed: a window given is refused, none is accepted.
  TempDir dir;
  CliResult t = run_relgrad({"train", "--model.d_model=16", "--model.n_heads=2", "--model.d_ff=32",
                             "--model.n_encoder_layers=1", "--model.n_decoder_layers=1", "--data.batch_size=4",
                             "--data.max_len=6", "--optim.warmup_steps=1", "--train.steps=2", "--train.eval_batches=1",
                             "--train.samples=0", "--train.target_accuracy=0", "--train.out_dir=" + dir.file("run")});
  REQUIRE_MESSAGE(t.code == 0, t.err);
  const std::string ck = dir.file("run/checkpoint.safetensors");
  for (const char* command : {"sample", "eval"}) {
    CliResult r = run_relgrad({command, ck, "--window", "4"});
    CHECK_CLI(r, 2);
    CHECK(contains(r.err, "--window 4"));
    CHECK(contains(r.err, "encoder-decoder"));
    CHECK_CLI(run_relgrad({command, ck, "--window", "none"}), 0);
  }
}

TEST_CASE("window: strided windows score every token once from at most C tokens of context") {
  const std::vector<StridedWindow> w = strided_windows(10, 4);  // stride 2
  REQUIRE(w.size() == 4);
  CHECK((w[0].begin == 0 && w[0].end == 4 && w[0].scored_from == 0));
  CHECK((w[1].begin == 2 && w[1].end == 6 && w[1].scored_from == 4));
  CHECK((w[2].begin == 4 && w[2].end == 8 && w[2].scored_from == 6));
  CHECK((w[3].begin == 6 && w[3].end == 10 && w[3].scored_from == 8));
  for (int64_t T : {1, 7, 16, 33})
    for (int64_t C : {1, 2, 5, 16, 40}) {
      INFO("T ", T, " C ", C);
      int64_t next = 0;  // every token once, in order, inside a window of at most C
      for (const StridedWindow& s : strided_windows(T, C)) {
        CHECK(s.scored_from == next);
        CHECK(s.end - s.begin <= C);
        CHECK(s.begin <= s.scored_from);
        CHECK(s.scored_from < s.end);
        next = s.end;
      }
      CHECK(next == T);
    }
}

TEST_CASE("window: evaluate_strided is the whole-window score at C >= T and a per-token recompute below") {
  const TextRun& r = text_run();
  LoadedRun loaded = load_run(r.checkpoint);
  loaded.config.data.context = 40;  // held-out windows of 40 bytes, 2.5 × the trained 16
  RunData data(loaded.config);
  RunModel& m = *loaded.model;
  const EvalResult whole = evaluate(m, data.dataset(), 2);
  const EvalResult at_t = evaluate_strided(m, data.dataset(), 2, 40);
  CHECK(at_t.tokens == whole.tokens);
  CHECK(at_t.loss == doctest::Approx(whole.loss).epsilon(1e-6));
  CHECK(at_t.accuracy == doctest::Approx(whole.accuracy).epsilon(1e-9));

  // C = 16, stride 8: token p ≥ 16 is read from the window that starts at the first multiple of 8
  // above p − 16, at its place there.
  const int64_t C = 16, S = 8;
  double loss_sum = 0;
  int64_t tokens = 0;
  NoGradGuard no_grad;
  for (int64_t n = 0; n < 2; ++n) {
    const Batch b = data.batch(n, Split::HeldOut);
    const int64_t B = b.tokens.size(0), T = b.tokens.size(1);
    for (int64_t p = 0; p < T; ++p) {
      const int64_t begin = p < C ? 0 : ((p - C) / S + 1) * S, end = std::min(begin + C, T);
      Batch part;
      part.tokens = b.tokens.narrow(1, begin, end - begin).contiguous();
      Tensor row = m.logits(part).narrow(1, p - begin, 1).reshape({B, -1});  // (B, V)
      loss_sum += cross_entropy(row, b.targets.narrow(1, p, 1).reshape({B}).contiguous(),
                                CrossEntropyOptions().set_reduction(Reduction::Sum)).item();
      tokens += B;
    }
  }
  const EvalResult strided = evaluate_strided(m, data.dataset(), 2, C);
  CHECK(strided.tokens == tokens);
  CHECK(strided.loss == doctest::Approx(loss_sum / double(tokens)).epsilon(1e-6));
  CHECK(std::abs(strided.loss - whole.loss) > 1e-4);  // the window changed what the model read

  // relgrad eval --window prints the strided score beside the whole-window one.
  CliResult e = run_relgrad({"eval", r.checkpoint, "--batches", "2", "--data.context=40", "--window", "16"});
  CHECK_CLI(e, 0);
  CHECK(contains(e.out, "held-out loss "));
  CHECK(contains(e.out, "\nwindow 16 (stride 8): held-out loss "));
}
