// Training-throughput benchmark: the two workloads of the PyTorch reference script it is compared
// with (torch_ref.py, kept outside this repository and passed to bench/run_train.sh), built from
// relgrad's own models with the same architecture and hyperparameters.
//
//   W1 charlm   DecoderLM: vocab 128, d_model 256, 4 layers, 4 heads (d_head 64), d_ff 1024, GELU,
//               pre-LayerNorm, final LayerNorm, untied head, no absolute positions; causal
//               self-attention with the learned relative term of torch_ref's `Attention(rel="skew")`:
//               per layer and head a table of 2L − 1 vectors (SeedRelativeEmbedding, per_head,
//               t3 = L = 256), batch 16 × 256 tokens.
//   W2 seq2seq  EncoderDecoder: 3 + 3 layers of the same width; T5 bias (32 buckets, max distance
//               128) in encoder (bidirectional) and decoder (causal) self-attention, one table per
//               stack; the skewed learned relative term (per head, 2·128 − 1 vectors) in
//               cross-attention with left alignment; src = tgt = 128 tokens, batch 16.
// Training: AdamW(lr 3e-4, weight_decay 0.01 on every tensor, betas (0.9, 0.95)), dropout 0, float32
// (--precision bf16: the forward under AutocastGuard(kBFloat16), as train.precision = bf16 and as
// torch.autocast(dtype=torch.bfloat16) around model and loss: bf16 products with float32 sums, the
// rest float32; on the GPU cuBLAS's bf16 tensor-core GEMMs), one fixed batch of random tokens reused every step, token-mean cross-entropy.
//
// Differences from torch_ref.py that do not change the work: the initialisation (relgrad's defaults);
// q, k and v are three Linear layers instead of one fused (same parameters and FLOPs); the table is
// indexed by j − i instead of i − j (a permutation of its rows); relgrad's head has no bias (128
// parameters). FLOPs per step are computed exactly as torch_ref.forward_matmul_flops (× 3, Q·E over
// all 2L − 1 columns, causal masking not subtracted) so GFLOP/s figures compare directly.
//
//   OMP_NUM_THREADS=2 ./build/bench/bench_train --workload charlm --steps 12 --warmup 3 [--json F]
//   ./build/bench/bench_train --workload seq2seq --device cuda      (a CUDA build on a GPU machine)
// bench/run_train.sh runs it next to torch_ref.py and prints the comparison; bench/run_gpu.sh does
// the same on a GPU. With --device cuda the model is initialised on the host (the same weights as
// on the CPU), moved to the GPU before the optimizer allocates its state, and every phase boundary
// synchronises the device, so the fwd / bwd / opt times are the GPU's; memory is the caching
// allocator's peak of live tensors.
// --profile N runs N more steps after the timed ones and prints the op-level profile of them (the
// table of relgrad train's train.profile, docs/cli.md); --tf32 turns on TF32 GEMMs on the GPU;
// --precision fp32|bf16 picks the products' precision (fp32 by default).
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "autograd/profiler.h"
#include "core/backend/matmul.h"
#include "cuda/runtime.h"
#include "layers/models.h"
#include "relgrad.h"
#include "train/optim/optim.h"

using namespace relgrad;

namespace {

struct Workload {
  std::string name;
  int64_t vocab = 128, d_model = 256, heads = 4, d_ff = 1024, batch = 16;
  int64_t layers = 4, enc_layers = 3, dec_layers = 3;
  int64_t seq_len = 256, src_len = 128, tgt_len = 128;
  bool encoder_decoder() const { return name == "seq2seq"; }
  int64_t tokens() const { return encoder_decoder() ? batch * (src_len + tgt_len) : batch * seq_len; }
};

// torch_ref.forward_matmul_flops, term for term.
double forward_matmul_flops(const Workload& w) {
  const double d = static_cast<double>(w.d_model), dff = static_cast<double>(w.d_ff),
               V = static_cast<double>(w.vocab), B = static_cast<double>(w.batch);
  auto linear = [](double T, double i, double o) { return 2 * T * i * o; };
  auto attn_core = [&](double Lq, double Lk) { return 2 * B * Lq * Lk * d * 2; };
  if (!w.encoder_decoder()) {
    const double L = static_cast<double>(w.seq_len), T = B * L, n = static_cast<double>(w.layers);
    return n * (linear(T, d, 3 * d) + linear(T, d, d)) + n * attn_core(L, L) + n * 2 * B * L * (2 * L - 1) * d +
           n * (linear(T, d, dff) + linear(T, dff, d)) + linear(T, d, V);
  }
  const double Ls = static_cast<double>(w.src_len), Lt = static_cast<double>(w.tgt_len), Ts = B * Ls, Tt = B * Lt;
  const double ne = static_cast<double>(w.enc_layers), nd = static_cast<double>(w.dec_layers);
  return ne * (linear(Ts, d, 3 * d) + linear(Ts, d, d)) +
         nd * (linear(Tt, d, 3 * d) + linear(Tt, d, d) + linear(Tt, d, d) + linear(Ts, d, 2 * d) + linear(Tt, d, d)) +
         ne * attn_core(Ls, Ls) + nd * (attn_core(Lt, Lt) + attn_core(Lt, Ls)) + nd * 2 * B * Lt * (2 * Ls - 1) * d +
         ne * (linear(Ts, d, dff) + linear(Ts, dff, d)) + nd * (linear(Tt, d, dff) + linear(Tt, dff, d)) +
         linear(Tt, d, V);
}

TransformerConfig model_config(const Workload& w) {
  TransformerConfig c;
  c.vocab_size = w.vocab;
  c.d_model = w.d_model;
  c.n_heads = w.heads;
  c.d_ff = w.d_ff;
  c.activation = Activation::Gelu;
  c.norm = NormKind::LayerNorm;
  c.pre_norm = true;
  c.dropout = 0.0;
  c.tie_weights = false;
  PositionalConfig skew;
  skew.scheme = "seed";
  skew.per_head = true;
  PositionalConfig t5;
  t5.scheme = "t5";
  t5.num_buckets = 32;
  t5.max_distance = 128;
  if (!w.encoder_decoder()) {
    c.n_decoder_layers = w.layers;
    skew.max_length = w.seq_len;
    c.decoder_self = skew;
  } else {
    c.n_encoder_layers = w.enc_layers;
    c.n_decoder_layers = w.dec_layers;
    skew.max_length = w.src_len;
    c.encoder_self = t5;
    c.decoder_self = t5;
    c.cross = skew;
    c.cross_alignment = CrossAlignment::Left;
  }
  return c;
}

double peak_rss_mib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) / 1024.0;  // ru_maxrss is in KiB on Linux
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

int usage(const char* argv0) {
  std::fprintf(stderr,
               "usage: %s [--workload charlm|seq2seq] [--steps N] [--warmup N] [--device cpu|cuda|cuda:N] [--fused] [--json FILE] "
               "[--tag TEXT] [--context L] [--batch B] [--profile N] [--tf32] [--precision fp32|bf16]\n",
               argv0);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  Workload w;
  w.name = "charlm";
  int steps = 12, warmup = 3;
  std::string json_path, tag, device_name = "cpu";
  bool fused = false;
  int64_t context = 0, batch = 0;  // 0: the workload's own
  int profile = 0;    // --profile N: N more steps after the timed ones, profiled op by op (autograd/profiler.h)
  bool tf32 = false;  // --tf32: TF32 GEMMs on the GPU (train.tf32)
  std::string precision = "fp32";  // --precision: the forward's products (train.precision; no fp16: it needs loss scaling)
  for (int a = 1; a < argc; ++a) {
    auto value = [&]() -> const char* { return a + 1 < argc ? argv[++a] : nullptr; };
    const char* v = nullptr;
    if (!std::strcmp(argv[a], "--workload") && (v = value())) w.name = v;
    else if (!std::strcmp(argv[a], "--steps") && (v = value())) steps = std::atoi(v);
    else if (!std::strcmp(argv[a], "--warmup") && (v = value())) warmup = std::atoi(v);
    else if (!std::strcmp(argv[a], "--json") && (v = value())) json_path = v;
    else if (!std::strcmp(argv[a], "--tag") && (v = value())) tag = v;
    else if (!std::strcmp(argv[a], "--device") && (v = value())) device_name = v;
    else if (!std::strcmp(argv[a], "--fused")) fused = true;
    else if (!std::strcmp(argv[a], "--context") && (v = value())) context = std::atoll(v);
    else if (!std::strcmp(argv[a], "--batch") && (v = value())) batch = std::atoll(v);
    else if (!std::strcmp(argv[a], "--profile") && (v = value())) profile = std::atoi(v);
    else if (!std::strcmp(argv[a], "--tf32")) tf32 = true;
    else if (!std::strcmp(argv[a], "--precision") && (v = value())) precision = v;
    else return usage(argv[0]);
  }
  if ((w.name != "charlm" && w.name != "seq2seq") || (precision != "fp32" && precision != "bf16") || steps < 1 || warmup < 0 || context < 0 || batch < 0 || profile < 0)
    return usage(argv[0]);
  // --context L: the sequence length (charlm: L; seq2seq: source and target both L), the table sized
  // to it; --batch B: the batch. For the cost-growth rows of docs/benchmarks.md (bench/run_growth.sh).
  if (context > 0) w.seq_len = w.src_len = w.tgt_len = context;
  if (batch > 0) w.batch = batch;
  int threads = 1;
#ifdef _OPENMP
  threads = omp_get_max_threads();
#endif

  try {
    const Device device = Device::parse(device_name);
    backend::set_allow_tf32(tf32);
    Profiler profiler(device);
    // Waits for the GPU's queue, so that host clocks measure the device's work.
    auto sync = [&] {
      if (device.is_cuda()) cuda::synchronize(device.index);
    };
    Generator init(0), data(1234);
    TransformerConfig config = model_config(w);
    config.attention_core = fused ? AttentionCore::Fused : AttentionCore::Composite;  // --fused: the flash-style attention core (model.fused_attention)
    std::shared_ptr<Module> model;
    std::shared_ptr<DecoderLM> lm;
    std::shared_ptr<EncoderDecoder> ed;
    Tensor tokens, src, labels;
    if (w.encoder_decoder()) {
      model = ed = std::make_shared<EncoderDecoder>(config, &init);
      src = randint(0, w.vocab, {w.batch, w.src_len}, TensorOptions(kInt64), &data);
      Tensor tgt = randint(0, w.vocab, {w.batch, w.tgt_len + 1}, TensorOptions(kInt64), &data);
      tokens = tgt.narrow(1, 0, w.tgt_len).contiguous();
      labels = tgt.narrow(1, 1, w.tgt_len).contiguous();
    } else {
      model = lm = std::make_shared<DecoderLM>(config, &init);
      Tensor toks = randint(0, w.vocab, {w.batch, w.seq_len + 1}, TensorOptions(kInt64), &data);
      tokens = toks.narrow(1, 0, w.seq_len).contiguous();
      labels = toks.narrow(1, 1, w.seq_len).contiguous();
    }
    model->to(device);  // before the optimizer: its moments are allocated beside the weights
    src = src.defined() ? src.to(device) : src;
    tokens = tokens.to(device);
    labels = labels.to(device);
    AdamW opt(model->parameters(), AdamWOptions(3e-4).weight_decay(0.01).betas(0.9, 0.95));
    int64_t n_params = 0;
    for (const Tensor& p : model->parameters()) n_params += p.numel();
    const double step_flops = 3 * forward_matmul_flops(w);
    const double rss_before = peak_rss_mib();

    std::vector<double> times, t_fwd, t_bwd, t_opt, losses;
    using clock = std::chrono::steady_clock;
    auto seconds = [](clock::time_point a, clock::time_point b) { return std::chrono::duration<double>(b - a).count(); };
    // The profiled steps come after the timed ones, so that the profiler's own cost stays out of the timings.
    for (int step = 0; step < warmup + steps + profile; ++step) {
      sync();
      const bool profiled = step >= warmup + steps;
      if (profiled) profiler.begin_step();
      const auto t0 = clock::now();
      opt.zero_grad();
      Tensor loss;
      {  // the forward's products in `precision` (the backward's follow: autograd/autocast.h)
        AutocastGuard autocast(precision == "bf16" ? kBFloat16 : kFloat32);
        Tensor logits = w.encoder_decoder() ? ed->forward(src, tokens) : lm->forward(tokens);
        const int64_t T = logits.size(0) * logits.size(1);
        loss = cross_entropy(logits.reshape({T, w.vocab}), labels.reshape({T}));
      }
      sync();
      const auto t1 = clock::now();
      loss.backward();
      sync();
      const auto t2 = clock::now();
      opt.step();
      sync();
      const auto t3 = clock::now();
      if (profiled) profiler.end_step();
      if (profiled) continue;
      losses.push_back(loss.item<float>());
      if (step >= warmup) {
        times.push_back(seconds(t0, t3));
        t_fwd.push_back(seconds(t0, t1));
        t_bwd.push_back(seconds(t1, t2));
        t_opt.push_back(seconds(t2, t3));
      }
    }
    const double rss_train = peak_rss_mib();
    const double sec = median(times);
    const double tok_s = static_cast<double>(w.tokens()) / sec, gflops = step_flops / sec / 1e9;
    const auto mem = cpu_allocator::stats();
    // Live-tensor peak where the tensors were: the CPU allocator's, or the GPU caching allocator's.
    const double tensor_peak_mib =
        static_cast<double>(device.is_cuda() ? cuda::memory_stats(device.index).peak_allocated_bytes
                                             : mem.peak_allocated_bytes) /
        (1 << 20);

    std::printf("relgrad %s on %s: %d threads, %.2f M params, %.1f GFLOP/step, %lld tokens/step\n", w.name.c_str(),
                device.str().c_str(), threads,
                static_cast<double>(n_params) / 1e6, step_flops / 1e9, static_cast<long long>(w.tokens()));
    std::printf("  step %.3f s (fwd %.3f, bwd %.3f, opt %.3f)  ->  %.0f tokens/s, %.1f GFLOP/s\n", sec, median(t_fwd),
                median(t_bwd), median(t_opt), tok_s, gflops);
    std::printf("  loss %.4f -> %.4f; peak RSS %.0f MiB (%.0f MiB before training); live tensor peak %.0f MiB (%s)\n",
                losses.front(), losses.back(), rss_train, rss_before, tensor_peak_mib, device.str().c_str());
    if (tf32) std::printf("  TF32 GEMMs on%s\n", device.is_cuda() ? "" : " (no effect on the CPU)");
    if (precision != "fp32") std::printf("  %s products (float32 accumulation)\n", precision.c_str());
    if (profile > 0) {
      ProfileReport report = profiler.report();
      report.first_step = warmup + steps + 1;
      std::printf("%s", report.table().c_str());
    }
    if (!json_path.empty()) {
      std::ofstream f(json_path);
      f << "{\"impl\": \"relgrad\", \"workload\": \"" << w.name << "\", \"device\": \"" << device.str()
        << "\", \"threads\": " << threads << ", \"precision\": \"" << precision << "\""
        << ", \"tag\": \"" << tag << "\", \"params\": " << n_params << ", \"step_gflop\": " << step_flops / 1e9
        << ", \"tokens_per_step\": " << w.tokens() << ", \"step_s\": " << sec << ", \"fwd_s\": " << median(t_fwd)
        << ", \"bwd_s\": " << median(t_bwd) << ", \"opt_s\": " << median(t_opt) << ", \"tokens_per_s\": " << tok_s
        << ", \"gflops\": " << gflops << ", \"peak_rss_mib\": " << rss_train
        << ", \"tensor_peak_mib\": " << tensor_peak_mib << ", \"first_loss\": " << losses.front()
        << ", \"last_loss\": " << losses.back() << "}\n";
      if (!f) throw Error("[bench_train] cannot write " + json_path);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_train: %s\n", e.what());
    return 1;
  }
  return 0;
}
