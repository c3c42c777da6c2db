// Fused relative attention benchmark: one causal attention core on split heads, forward +
// backward, no projections: q, k, v (B, H, L, D) requiring grad, loss = sum(out * g), backward.
// Variants:
//   fused_rel        attention_heads_fused with SeedRelativeEmbedding, a per-head table of 2L − 1 rows
//                    (every distance has its own learned row: the heaviest relative term)
//   fused_plain      attention_heads_fused without a scheme (plain fused attention, the floor)
//   composite_rel    attention_heads with the same scheme ((B, H, L, L) logits, weights and gradients)
//   composite_plain  attention_heads without a scheme
// Each (variant, L) runs in a forked child, so the peak of live tensor bytes (CPU: the allocator's
// high-water mark; CUDA: the caching allocator's peak_allocated_bytes) is its own; reported above the
// bytes held right after the inputs were made. Median of --reps timed reps after one warm-up.
//   ./build/bench/bench_flash --device cpu --lengths 256,512,1024,2048
//   ./build/bench/bench_flash --device cuda --lengths 1024,2048,4096,8192,16384   (GPU machine)
// bench/flash_torch.py times PyTorch's scaled_dot_product_attention on the same shapes.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "cuda/runtime.h"
#include "layers/relative_learned.h"
#include "relgrad.h"

using namespace relgrad;

namespace {

struct Options {
  std::string device = "cpu";
  std::vector<std::string> variants{"fused_rel", "fused_plain", "composite_rel", "composite_plain"};
  std::vector<int64_t> lengths{256, 512, 1024, 2048};
  int64_t batch = 1, heads = 4, head_dim = 64;
  int reps = 3;
  double max_composite_gib = 24.0;  // composite variants whose (B, H, L, L) tensors would exceed this are skipped
};

struct Result {
  double fwd = 0, bwd = 0, peak_mib = 0;
};

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, ',');) out.push_back(item);
  return out;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

size_t peak_bytes(const Device& d) {
  return d.is_cuda() ? cuda::memory_stats(d.index).peak_allocated_bytes : cpu_allocator::stats().peak_allocated_bytes;
}
size_t live_bytes(const Device& d) {
  return d.is_cuda() ? cuda::memory_stats(d.index).allocated_bytes : cpu_allocator::stats().allocated_bytes;
}
void sync(const Device& d) {
  if (d.is_cuda()) cuda::synchronize(d.index);
}

Result measure(const Options& o, const std::string& variant, int64_t L) {
  const Device dev = Device::parse(o.device);
  const int64_t B = o.batch, H = o.heads, D = o.head_dim;
  Generator gen(1);
  std::shared_ptr<SeedRelativeEmbedding> scheme;
  if (variant.find("_rel") != std::string::npos) {
    scheme = std::make_shared<SeedRelativeEmbedding>(D, L, H, OutOfRange::Zero, &gen);
    scheme->to(dev);
  }
  auto input = [&] { return randn({B, H, L, D}, TensorOptions(kFloat32).device(dev), &gen).requires_grad_(); };
  Tensor q = input(), k = input(), v = input();
  Tensor gout = randn({B, H, L, D}, TensorOptions(kFloat32).device(dev), &gen);
  AttentionGeometry g = AttentionGeometry::make(B, H, D, L, L, true);
  const bool fused = variant.rfind("fused", 0) == 0;
  sync(dev);
  const size_t base = live_bytes(dev);
  std::vector<double> fwd, bwd;
  for (int rep = 0; rep <= o.reps; ++rep) {
    for (Tensor* t : {&q, &k, &v}) t->set_grad(Tensor());
    if (scheme) scheme->zero_grad();
    auto t0 = std::chrono::steady_clock::now();
    Tensor out;
    if (fused) {
      out = attention_heads_fused(q, k, v, scheme.get(), g, Tensor());
    } else {
      Tensor mask = causal_mask(g.positions(), L).to(dev);
      out = attention_heads(q, k, v, scheme.get(), g, mask, 0.0, false, nullptr).output;
    }
    Tensor loss = sum(out * gout);
    sync(dev);
    auto t1 = std::chrono::steady_clock::now();
    loss.backward();
    sync(dev);
    auto t2 = std::chrono::steady_clock::now();
    if (rep == 0) continue;  // warm-up
    fwd.push_back(std::chrono::duration<double>(t1 - t0).count());
    bwd.push_back(std::chrono::duration<double>(t2 - t1).count());
  }
  Result r;
  r.fwd = median(fwd);
  r.bwd = median(bwd);
  r.peak_mib = static_cast<double>(peak_bytes(dev) - base) / (1024.0 * 1024.0);
  return r;
}

// Runs measure() in a forked child (the parent never touches OpenMP or CUDA, so forking is safe).
bool run_child(const Options& o, const std::string& variant, int64_t L, Result& r, std::string& why) {
  int fd[2];
  if (pipe(fd) != 0) {
    why = "pipe failed";
    return false;
  }
  const pid_t pid = fork();
  if (pid == 0) {
    close(fd[0]);
    Result c;
    int ok = 1;
    try {
      c = measure(o, variant, L);
    } catch (const std::exception& e) {
      ok = 0;
      std::fprintf(stderr, "%s L=%lld: %s\n", variant.c_str(), static_cast<long long>(L), e.what());
    }
    if (write(fd[1], &ok, sizeof ok) != sizeof ok || write(fd[1], &c, sizeof c) != sizeof c) _exit(2);
    _exit(0);
  }
  close(fd[1]);
  int ok = 0;
  const bool got = read(fd[0], &ok, sizeof ok) == sizeof ok && read(fd[0], &r, sizeof r) == sizeof r;
  close(fd[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (!got || !ok) {
    why = "failed (see stderr)";
    return false;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--device") o.device = next();
    else if (a == "--lengths") {
      o.lengths.clear();
      for (const std::string& s : split(next())) o.lengths.push_back(std::stoll(s));
    } else if (a == "--variants") o.variants = split(next());
    else if (a == "--batch") o.batch = std::stoll(next());
    else if (a == "--heads") o.heads = std::stoll(next());
    else if (a == "--head-dim") o.head_dim = std::stoll(next());
    else if (a == "--reps") o.reps = std::stoi(next());
    else if (a == "--max-composite-gib") o.max_composite_gib = std::stod(next());
    else {
      std::fprintf(stderr,
                   "usage: bench_flash [--device cpu|cuda] [--lengths 256,512] [--variants fused_rel,fused_plain,"
                   "composite_rel,composite_plain] [--batch 1] [--heads 4] [--head-dim 64] [--reps 3]\n");
      return 2;
    }
  }
  std::printf("device %s, B=%lld H=%lld D=%lld, causal, float32, median of %d reps\n\n", o.device.c_str(),
              static_cast<long long>(o.batch), static_cast<long long>(o.heads), static_cast<long long>(o.head_dim),
              o.reps);
  std::printf("| variant | L | fwd ms | bwd ms | fwd+bwd ms | peak MiB above inputs |\n|---|---|---|---|---|---|\n");
  for (int64_t L : o.lengths)
    for (const std::string& variant : o.variants) {
      // The composite keeps about six (B, H, L, L) float32 tensors alive at its peak.
      const double composite_gib = 6.0 * o.batch * o.heads * L * L * 4 / (1024.0 * 1024 * 1024);
      if (variant.rfind("composite", 0) == 0 && composite_gib > o.max_composite_gib) {
        std::printf("| %s | %lld | skipped (~%.0f GiB) | | | |\n", variant.c_str(), static_cast<long long>(L),
                    composite_gib);
        continue;
      }
      Result r;
      std::string why;
      if (!run_child(o, variant, L, r, why)) {
        std::printf("| %s | %lld | %s | | | |\n", variant.c_str(), static_cast<long long>(L), why.c_str());
        continue;
      }
      std::printf("| %s | %lld | %.2f | %.2f | %.2f | %.1f |\n", variant.c_str(), static_cast<long long>(L),
                  r.fwd * 1e3, r.bwd * 1e3, (r.fwd + r.bwd) * 1e3, r.peak_mib);
      std::fflush(stdout);
    }
  return 0;
}
