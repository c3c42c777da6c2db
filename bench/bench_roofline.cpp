// The roofline of the main job's step, op by op: each op the default model (configs/default.toml)
// runs, at one batch shard's sizes, timed forward and backward on the calling thread and set against
// the two ceilings of this machine measured in the same run:
//   - the FMA peak: 12 independent FMA chains at the build's vector width (AVX-512 or AVX2; as
//     the classic peak-FMA loop), in GFLOP/s;
//   - the bandwidth at the op's working set: a triad (y = a + s·b) over three arrays of the op's
//     bytes in all, repeated, so that it runs from the cache level where the op's tensors live (the
//     main job's tensors are tens to hundreds of KiB: L1 and L2, not DRAM).
// Each op's figures: µs a call (median of alternately timed repetitions; backward = forward and
// backward − forward), GFLOP/s and its share of the peak (the products: 2·M·N·K a GEMM), and GB/s of
// its compulsory traffic (every input read once, every output written once) and its share of the
// bandwidth ceiling at that size. An op far below both ceilings is bound by neither: its time is
// per-call cost (dispatch, allocation, the tape) and latency. docs/benchmarks.md, "The roofline of
// the main job's step", reads the table.
//
//   OMP_NUM_THREADS=1 ./build/bench/bench_roofline [rows=16] [length=14] [op] [repeats=20000]
// rows × length: one shard's sequences and their padded length (the default run's shards: 12-20 rows
// of 9-17 positions). One thread, as each shard runs (train/trainer/batch_shards.h). With `op` (a part
// of an op's name: "softmax"), only that op's forward, `repeats` times (and, with a fifth argument
// `backward`, its backward after each), and no table: for perf record.
#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "relgrad.h"
#include "core/cpu/matmul.h"
#include "train/optim/optim.h"

using namespace relgrad;

namespace {

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// The FMA peak of one thread in GFLOP/s: 12 independent chains of vfmadd231ps (more than FMA latency ×
// pipes on every kind measured) on the widest vectors the build has, written in assembly as
// the classic peak-FMA loop writes them, so that no compiler keeps them anywhere but in registers.
#define RG_FMA12(R)                                                                                            \
  asm volatile("vfmadd231ps %%" R "14, %%" R "15, %%" R "0\n\tvfmadd231ps %%" R "14, %%" R "15, %%" R "1\n\t"     \
               "vfmadd231ps %%" R "14, %%" R "15, %%" R "2\n\tvfmadd231ps %%" R "14, %%" R "15, %%" R "3\n\t"    \
               "vfmadd231ps %%" R "14, %%" R "15, %%" R "4\n\tvfmadd231ps %%" R "14, %%" R "15, %%" R "5\n\t"    \
               "vfmadd231ps %%" R "14, %%" R "15, %%" R "6\n\tvfmadd231ps %%" R "14, %%" R "15, %%" R "7\n\t"    \
               "vfmadd231ps %%" R "14, %%" R "15, %%" R "8\n\tvfmadd231ps %%" R "14, %%" R "15, %%" R "9\n\t"    \
               "vfmadd231ps %%" R "14, %%" R "15, %%" R "10\n\tvfmadd231ps %%" R "14, %%" R "15, %%" R "11\n\t" :: \
                   : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11")
double fma_peak() {
#if defined(__AVX512F__)
  constexpr int lanes = 16;
#elif defined(__AVX2__) && defined(__FMA__)
  constexpr int lanes = 8;
#else
  return 0;  // no FMA vectors in this build: the table prints no share of a peak
#endif
#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))
  const long iters = 20'000'000;
  double best = 0;
  asm volatile("vxorps %%xmm14, %%xmm14, %%xmm14\n\tvxorps %%xmm15, %%xmm15, %%xmm15" ::: "xmm14", "xmm15");
  for (int rep = 0; rep < 5; ++rep) {
    const double t0 = now();
    for (long i = 0; i < iters; ++i) {
#if defined(__AVX512F__)
      RG_FMA12("zmm");
#else
      RG_FMA12("ymm");
#endif
    }
    best = std::max(best, 12.0 * 2 * lanes * iters / (now() - t0) / 1e9);
  }
  return best;
#endif
}
#undef RG_FMA12

// GB/s of a triad y = a + s·b over three float arrays of `bytes` in all (2 read, 1 written a pass),
// repeated for at least 20 ms: the bandwidth from wherever arrays of that size stay. Best of 5.
double triad_bandwidth(double bytes) {
  const size_t n = std::max<size_t>(16, static_cast<size_t>(bytes / 12));
  std::vector<float> a(n, 1.0f), b(n, 2.0f), y(n, 0.0f);
  const int passes = static_cast<int>(std::max<double>(10, 0.02 * 20e9 / (12.0 * n)));  // ~20 ms at 20 GB/s
  double best = 0;
  for (int rep = 0; rep < 5; ++rep) {
    const double t0 = now();
    for (int p = 0; p < passes; ++p) {
      const float s = 0.5f + 1e-6f * p;
      float* __restrict yp = y.data();
      const float* __restrict ap = a.data();
      const float* __restrict bp = b.data();
      for (size_t i = 0; i < n; ++i) yp[i] = ap[i] + s * bp[i];
      asm volatile("" : : "r"(yp) : "memory");
    }
    best = std::max(best, 12.0 * n * passes / (now() - t0) / 1e9);
  }
  return best;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// Medians of f and g timed alternately (f, g, f, g, ...) after 5 untimed pairs.
std::pair<double, double> median_pair(const std::function<void()>& f, const std::function<void()>& g, int reps) {
  for (int i = 0; i < 5; ++i) f(), g();
  std::vector<double> tf, tg;
  for (int i = 0; i < reps; ++i) {
    double t0 = now();
    f();
    tf.push_back(now() - t0);
    t0 = now();
    g();
    tg.push_back(now() - t0);
  }
  return {median(tf), median(tg)};
}

// One op of the step: its forward on fresh leaves, and the compulsory traffic and FLOPs each way.
struct OpRow {
  std::string name, shape;
  std::function<TensorList()> inputs;                    // leaves (those needing a gradient marked so)
  std::function<Tensor(const TensorList&)> forward;      // the op as the model calls it
  double bytes_forward = 0, bytes_backward = 0;          // compulsory traffic
  double flops_forward = 0, flops_backward = 0;          // 0: not a product
};


// The two ceilings, measured once a round (the machine's speed drifts between rounds: the medians).
struct Ceilings {
  std::vector<double> peaks;
  std::map<double, std::vector<double>> bandwidths;  // working set (bytes) → GB/s, one a round
  void measure(const std::vector<double>& sizes) {
    peaks.push_back(fma_peak());
    for (double bytes : sizes) bandwidths[bytes].push_back(triad_bandwidth(bytes));
  }
  double peak() const { return median(peaks); }
  double bandwidth(double bytes) const { return median(bandwidths.at(bytes)); }
};

// One round's forward and backward seconds of `op`: medians of `reps` alternate calls.
std::pair<double, double> measure_row(const OpRow& op, int reps) {
  const TensorList in = op.inputs();
  Tensor grad_out;
  auto fwd = [&] {
    Tensor y = op.forward(in);
    if (!grad_out.defined()) grad_out = ones_like(y);
  };
  auto fwd_bwd = [&] {
    for (Tensor t : in)  // a handle: the leaf's gradient is dropped, as zero_grad does
      if (t.requires_grad()) t.set_grad(Tensor());
    op.forward(in).backward(grad_out);
  };
  fwd();
  const auto [t_f, t_fb] = median_pair(fwd, fwd_bwd, reps);
  return {t_f, std::max(t_fb - t_f, 1e-9)};
}

void print_row(const OpRow& op, const Ceilings& c, double t_f, double t_b) {
  auto share = [](double x, double ceiling) {
    char s[32];
    if (ceiling > 0) std::snprintf(s, sizeof s, "%.0f %%", 100.0 * x / ceiling);
    else std::snprintf(s, sizeof s, "-");
    return std::string(s);
  };
  auto rate = [&](double flops, double t) {
    if (flops <= 0) return std::string("-");
    char s[48];
    std::snprintf(s, sizeof s, "%.1f (%s)", flops / t / 1e9, share(flops / t / 1e9, c.peak()).c_str());
    return std::string(s);
  };
  auto traffic = [&](double bytes, double t) {
    char s[64];
    const double gbs = bytes / t / 1e9;
    std::snprintf(s, sizeof s, "%.1f (%s of %.0f)", gbs, share(gbs, c.bandwidth(bytes)).c_str(), c.bandwidth(bytes));
    return std::string(s);
  };
  std::printf("| %s | %s | %.1f | %.1f | %s | %s | %.0f KiB | %s | %s |\n", op.name.c_str(), op.shape.c_str(),
              t_f * 1e6, t_b * 1e6, rate(op.flops_forward, t_f).c_str(), rate(op.flops_backward, t_b).c_str(),
              op.bytes_forward / 1024, traffic(op.bytes_forward, t_f).c_str(), traffic(op.bytes_backward, t_b).c_str());
}

std::string dims(std::initializer_list<int64_t> d) {
  std::string s = "(";
  for (int64_t x : d) s += (s.size() > 1 ? "," : "") + std::to_string(x);
  return s + ")";
}

}  // namespace

int main(int argc, char** argv) {
  const int64_t B = argc > 1 ? std::atoll(argv[1]) : 16, L = argc > 2 ? std::atoll(argv[2]) : 14;
  const std::string only = argc > 3 ? argv[3] : "";
  const int64_t repeats = argc > 4 ? std::atoll(argv[4]) : 20000;
  const bool with_backward = argc > 5 && std::string(argv[5]) == "backward";
  if (B < 1 || L < 1 || repeats < 1 || (argc > 5 && !with_backward)) {
    std::fprintf(stderr,
                 "usage: bench_roofline [rows >= 1] [length >= 1] [op: a part of its name] [repeats >= 1] [backward]\n");
    return 2;
  }
  const int64_t d = 64, H = 4, D = 16, ff = 256, T = B * L;  // configs/default.toml's model
  const double f4 = 4.0;                                      // bytes per float32

  std::printf("bench_roofline: one shard of %lld rows × %lld positions (%lld tokens), d_model %lld, %lld heads of %lld,"
              " d_ff %lld; %s\n",
              (long long)B, (long long)L, (long long)T, (long long)d, (long long)H, (long long)D, (long long)ff,
              cpu::cpu_model_name().c_str());
  const int rounds = 5;
  if (only.empty())
    std::printf("%d rounds: each op's median time in each, then the median of those (as for the ceilings)\n", rounds);

  Generator gen(1);
  auto leaf = [&](const Shape& s, bool grad = true) {
    Tensor t = randn(s, kFloat32, &gen);
    return grad ? t.requires_grad_() : t;
  };
  auto linear_row = [&](const char* name, int64_t in, int64_t out, bool bias) {
    OpRow r;
    r.name = name;
    r.shape = dims({T, in}) + "·" + dims({out, in}) + "ᵀ";
    r.inputs = [&, in, out, bias] {
      TensorList l{leaf({T, in}), leaf({out, in})};
      if (bias) l.push_back(leaf({out}));
      return l;
    };
    r.forward = [bias](const TensorList& x) {
      return bias ? addmm(x[2], x[0], x[1].transpose(0, 1)) : matmul(x[0], x[1].transpose(0, 1));
    };
    const double x = T * in * f4, w = out * in * f4, y = T * out * f4;
    r.bytes_forward = x + w + y;
    r.bytes_backward = y + x + w + x + w;  // dY, X, W read; dX, dW written
    r.flops_forward = 2.0 * T * in * out;
    r.flops_backward = 2 * r.flops_forward;
    return r;
  };
  std::vector<OpRow> rows;
  rows.push_back(linear_row("Linear, attention's q, k, v, out", d, d, true));
  rows.push_back(linear_row("feed-forward up (its bias in bias_activation)", d, ff, false));
  rows.push_back(linear_row("feed-forward down", ff, d, true));
  {
    OpRow r;
    r.name = "per-head Q·Kᵀ";
    r.shape = dims({B, H, L, D}) + "·" + dims({B, H, L, D}) + "ᵀ";
    r.inputs = [&] { return TensorList{leaf({B, H, L, D}), leaf({B, H, L, D})}; };
    r.forward = [](const TensorList& x) { return matmul(x[0], x[1].transpose(-1, -2)); };
    const double qk = B * H * L * D * f4, s = B * H * L * L * f4;
    r.bytes_forward = 2 * qk + s;
    r.bytes_backward = s + 2 * qk + 2 * qk;
    r.flops_forward = 2.0 * B * H * L * L * D;
    r.flops_backward = 2 * r.flops_forward;
    rows.push_back(r);
  }
  {
    OpRow r;
    r.name = "per-head P·V";
    r.shape = dims({B, H, L, L}) + "·" + dims({B, H, L, D});
    r.inputs = [&] { return TensorList{leaf({B, H, L, L}), leaf({B, H, L, D})}; };
    r.forward = [](const TensorList& x) { return matmul(x[0], x[1]); };
    const double p = B * H * L * L * f4, v = B * H * L * D * f4;
    r.bytes_forward = p + 2 * v;
    r.bytes_backward = v + p + v + p + v;  // dO, P, V read; dP, dV written
    r.flops_forward = 2.0 * B * H * L * L * D;
    r.flops_backward = 2 * r.flops_forward;
    rows.push_back(r);
  }
  {
    OpRow r;
    r.name = "masked_softmax, T5's bias and the padding mask";
    r.shape = dims({B, H, L, L});
    r.inputs = [&] {
      Tensor mask = gt(arange(double(L), kInt64).reshape({1, 1, 1, L}),
                       full({B, 1, 1, 1}, double(L - 3), TensorOptions(kInt64)));  // the last 2 keys padding
      return TensorList{leaf({B, H, L, L}), mask, leaf({1, H, L, L}, false)};
    };
    r.forward = [D](const TensorList& x) { return masked_softmax(x[0], x[1], 1.0 / std::sqrt(double(D)), x[2]); };
    const double s = B * H * L * L * f4, bias = H * L * L * f4, mask = B * L;
    r.bytes_forward = s + bias + mask + s;
    r.bytes_backward = s + s + s;  // dY, Y read; dX written
    rows.push_back(r);
  }
  {
    OpRow r;
    r.name = "bias_activation (gelu)";
    r.shape = dims({T, ff}) + " + " + dims({ff});
    r.inputs = [&] { return TensorList{leaf({T, ff}), leaf({ff})}; };
    r.forward = [](const TensorList& x) { return bias_activation(x[0], x[1], Activation::Gelu); };
    const double y = T * ff * f4;
    r.bytes_forward = 2 * y + ff * f4;
    r.bytes_backward = 3 * y + 2 * ff * f4;  // dY, X, b read; dX, db written
    rows.push_back(r);
  }
  {
    OpRow r;
    r.name = "residual_layer_norm";
    r.shape = dims({T, d});
    r.inputs = [&] { return TensorList{leaf({T, d}), leaf({T, d}), leaf({d}), leaf({d})}; };
    r.forward = [](const TensorList& x) {
      ResidualNorm n = residual_layer_norm(x[0], x[1], {x[0].size(1)}, x[2], x[3]);
      return add(n.sum, n.out);  // both outputs reach the loss, as in a pre-norm block
    };
    const double y = T * d * f4;
    r.bytes_forward = 2 * y + 2 * y;   // residual, branch read; sum, out written
    r.bytes_backward = 3 * y + 2 * y;  // d(sum), d(out), sum read; d(residual), d(branch) written
    rows.push_back(r);
  }
  {
    OpRow r;
    r.name = "add (a residual, out of place)";
    r.shape = dims({T, d});
    r.inputs = [&] { return TensorList{leaf({T, d}), leaf({T, d})}; };
    r.forward = [](const TensorList& x) { return add(x[0], x[1]); };
    r.bytes_forward = 3 * T * d * f4;
    r.bytes_backward = 3 * T * d * f4;
    rows.push_back(r);
  }
  {
    OpRow r;
    r.name = "an op's floor: add of two 1-element tensors";
    r.shape = "(1)";
    r.inputs = [&] { return TensorList{leaf({1}), leaf({1})}; };
    r.forward = [](const TensorList& x) { return add(x[0], x[1]); };
    r.bytes_forward = 12;
    r.bytes_backward = 12;
    rows.push_back(r);
  }

  if (!only.empty()) {  // one op's forward over and over, for a profiler (perf record) to read
    for (const OpRow& r : rows)
      if (r.name.find(only) != std::string::npos) {
        const TensorList in = r.inputs();
        for (int64_t i = 0; i < repeats; ++i) {
          Tensor y = r.forward(in);
          if (with_backward) sum(y).backward();
        }
      }
    return 0;
  }
  // The optimizer step over the default model's 0.24 M parameters, in tensors of its shapes: AdamW reads
  // param, grad, m and v and writes param, m and v (7 floats a parameter).
  TensorList params;
  for (int i = 0; i < 24; ++i) params.push_back(leaf({d, d}));
  for (int i = 0; i < 4; ++i) params.push_back(leaf({ff, d})), params.push_back(leaf({d, ff}));
  for (int i = 0; i < 60; ++i) params.push_back(leaf({d}));
  int64_t count = 0;
  for (Tensor& p : params) p.set_grad(randn(p.shape(), kFloat32, &gen)), count += p.numel();
  AdamW opt(params, AdamWOptions(3e-3).betas(0.8, 0.95));
  opt.step();
  const double adam_bytes = 7.0 * count * f4;

  // Rounds: the ceilings, then every op, then the optimizer step, each round; so a slow spell of the
  // machine lands on one round of everything rather than on a few ops.
  const std::vector<double> reference{32768, 262144, 2097152, 67108864};
  std::vector<double> sizes = reference;
  for (const OpRow& r : rows) sizes.push_back(r.bytes_forward), sizes.push_back(r.bytes_backward);
  sizes.push_back(adam_bytes);
  Ceilings c;
  std::vector<std::vector<double>> t_f(rows.size()), t_b(rows.size());
  std::vector<double> t_adam;
  for (int round = 0; round < rounds; ++round) {
    c.measure(sizes);
    for (size_t i = 0; i < rows.size(); ++i) {
      const auto [f, b] = measure_row(rows[i], 21);
      t_f[i].push_back(f), t_b[i].push_back(b);
    }
    std::vector<double> t;
    for (int i = 0; i < 21; ++i) {
      const double t0 = now();
      opt.step();
      t.push_back(now() - t0);
    }
    t_adam.push_back(median(t));
  }
  std::printf("FMA peak (1 thread): %.1f GFLOP/s (rounds %.1f-%.1f); triad bandwidth (1 thread): 32 KiB %.0f, "
              "256 KiB %.0f, 2 MiB %.0f, 64 MiB %.0f GB/s\n\n",
              c.peak(), *std::min_element(c.peaks.begin(), c.peaks.end()),
              *std::max_element(c.peaks.begin(), c.peaks.end()), c.bandwidth(reference[0]), c.bandwidth(reference[1]),
              c.bandwidth(reference[2]), c.bandwidth(reference[3]));
  std::printf("| op | shape | µs forward | µs backward | GFLOP/s forward (of peak) | backward | working set |"
              " GB/s forward (of the triad's at that size) | backward |\n|---|---|---:|---:|---:|---:|---:|---:|---:|\n");
  for (size_t i = 0; i < rows.size(); ++i) print_row(rows[i], c, median(t_f[i]), median(t_b[i]));
  const double ts = median(t_adam);
  std::printf("| AdamW step | %lld parameters in %zu tensors | %.1f | | | | %.0f KiB | %.1f (%.0f %% of %.0f) | |\n",
              (long long)count, params.size(), ts * 1e6, adam_bytes / 1024, adam_bytes / ts / 1e9,
              100.0 * adam_bytes / ts / 1e9 / c.bandwidth(adam_bytes), c.bandwidth(adam_bytes));
  return 0;
}
