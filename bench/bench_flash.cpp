// Fused relative attention benchmark: one causal attention core on split heads, forward +
// backward, no projections: q, k, v (B, H, L, D) requiring grad, loss = sum(out * g), backward.
// Variants, "<core>_<term>": core fused (attention_heads_fused, O(L·D) memory) or composite
// (attention_heads: (B, H, L, L) logits, weights and gradients); term
//   rel    SeedRelativeEmbedding, a per-head table of 2L − 1 rows of D (every distance has its own
//          learned row: the heaviest relative term)
//   t5     T5RelativeBias, a learned (H, buckets) table of scalars by T5's causal log buckets
//          (--t5-buckets 32, --t5-max-distance 128; added to unscaled logits, as T5 does)
//   shaw   ShawRelativeEmbedding without the value term, one (2k + 1, D) key table shared by the
//          heads, distances clipped to [−k, k] (--shaw-clip 16)
//   kerple Kerple (log variant), a learned per-head bias −r1·log(1 + r2·|δ|) built per call as an
//          (H, W) table by differentiable ops (the distance-bias family, layers/distance_bias.h)
//   plain  no positional term (the floor)
// Defaults: fused_rel, fused_t5, fused_shaw, fused_plain, composite_rel, composite_plain.
// bench/flash_torch.py builds the same terms in PyTorch (SDPA with a materialised T5 bias,
// FlexAttention with T5 and Shaw score_mods) with the same buckets and clip.
// Each (variant, L) runs in a forked child, so the peak of live tensor bytes (CPU: the allocator's
// high-water mark; CUDA: the caching allocator's peak_allocated_bytes) is its own; reported above the
// bytes held right after the inputs were made. Median of --reps timed reps after one warm-up.
// Determinism: every run's gradients (warm-up included) are copied to the host outside the clock and
// compared bitwise (memcmp) with the first run's: "det table" for the scheme's table gradient ("—"
// without a table), "det dq/dk/dv" for the inputs' gradients; "yes" = every run gave the same bits.
// Composite variants above --max-composite-length (0 = no limit) or whose (B, H, L, L) tensors would
// exceed --max-composite-gib are skipped (on a GPU they take seconds per step from L = 8192).
// --tokens N: batch N / L at each L (a fixed token count, as a training step; overrides --batch).
// --backward auto|one-pass|two-pass: the CPU fused backward's loop order (core/cpu/flash_attention.h;
// auto: its rule), so both run in one binary.
// Clock: RELGRAD_BENCH_CLOCK=wall (default) or cpu, the process's CPU time (every thread's: run it
// with OMP_NUM_THREADS=1), the fair figure on a shared machine.
//   ./build/bench/bench_flash --device cpu --lengths 256,512,1024,2048
//   ./build/bench/bench_flash --device cuda --lengths 2048,4096,8192,16384 --max-composite-length 4096
//   RELGRAD_BENCH_CLOCK=cpu OMP_NUM_THREADS=1 ./build/bench/bench_flash --tokens 4096 --backward two-pass
//       --lengths 128,2048 --variants fused_rel,composite_rel        (one command line)
// bench/run_gpu.sh runs both sides on a GPU machine.
#include <sys/wait.h>
#include <time.h>
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

#include "core/cpu/flash_attention.h"
#include "cuda/runtime.h"
#include "layers/distance_bias.h"
#include "layers/relative_bias.h"
#include "layers/relative_learned.h"
#include "relgrad.h"

using namespace relgrad;

namespace {

struct Options {
  std::string device = "cpu";
  std::vector<std::string> variants{"fused_rel",   "fused_t5",      "fused_shaw",
                                    "fused_plain", "composite_rel", "composite_plain"};
  std::vector<int64_t> lengths{256, 512, 1024, 2048};
  int64_t batch = 1, heads = 4, head_dim = 64;
  int64_t tokens = 0;  // > 0: batch = tokens / L at each L
  cpu::FlashBackward backward = cpu::FlashBackward::Auto;
  bool cpu_clock = false;  // RELGRAD_BENCH_CLOCK=cpu
  int64_t t5_buckets = 32, t5_max_distance = 128, shaw_clip = 16;
  int reps = 3;
  double max_composite_gib = 24.0;  // composite variants whose (B, H, L, L) tensors would exceed this are skipped
  int64_t max_composite_length = 0;  // composite variants above this L are skipped (0: no limit)
};

// The closed sets a variant name is made of.
enum class Core { Fused, Composite };
enum class Term { Plain, Rel, T5, Shaw, Kerple };
struct Variant {
  Core core;
  Term term;
};

// "fused_t5" → {Fused, T5}; false for a name outside the sets.
bool parse_variant(const std::string& name, Variant& v) {
  const size_t cut = name.find('_');
  if (cut == std::string::npos) return false;
  const std::string core = name.substr(0, cut), term = name.substr(cut + 1);
  if (core == "fused") v.core = Core::Fused;
  else if (core == "composite") v.core = Core::Composite;
  else return false;
  if (term == "plain") v.term = Term::Plain;
  else if (term == "rel") v.term = Term::Rel;
  else if (term == "t5") v.term = Term::T5;
  else if (term == "shaw") v.term = Term::Shaw;
  else if (term == "kerple") v.term = Term::Kerple;
  else return false;
  return true;
}

// Determinism verdicts: 1 = every run gave the same bits, 0 = some run differed, −1 = nothing to compare.
struct Result {
  double fwd = 0, bwd = 0, peak_mib = 0;
  int same_table = -1, same_inputs = -1;
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

std::shared_ptr<PositionalScheme> make_scheme(const Options& o, Term term, int64_t L, Generator* gen) {
  switch (term) {
    case Term::Plain: return nullptr;
    case Term::Rel: return std::make_shared<SeedRelativeEmbedding>(o.head_dim, L, o.heads, OutOfRange::Zero, gen);
    case Term::T5:
      return std::make_shared<T5RelativeBias>(o.heads, o.t5_buckets, o.t5_max_distance, /*bidirectional=*/false, gen);
    case Term::Shaw:
      return std::make_shared<ShawRelativeEmbedding>(o.head_dim, o.shaw_clip, /*num_heads=*/0, /*values=*/false, gen);
    case Term::Kerple: return std::make_shared<Kerple>(o.heads, KerpleVariant::Log, gen);
  }
  return nullptr;
}

// The float32 values of each tensor, in order, on the host (outside the timed region).
std::vector<std::vector<float>> host_copies(const TensorList& ts) {
  std::vector<std::vector<float>> out;
  for (const Tensor& t : ts) out.push_back(t.defined() ? t.to_vector<float>() : std::vector<float>());
  return out;
}
bool same_bits(const std::vector<std::vector<float>>& a, const std::vector<std::vector<float>>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].size() != b[i].size() || std::memcmp(a[i].data(), b[i].data(), a[i].size() * sizeof(float)) != 0)
      return false;
  return true;
}

int64_t batch_at(const Options& o, int64_t L) { return o.tokens > 0 ? std::max<int64_t>(1, o.tokens / L) : o.batch; }

// Seconds on the chosen clock: wall, or the process's CPU time.
double now(const Options& o) {
  if (!o.cpu_clock) return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

Result measure(const Options& o, const Variant& variant, int64_t L) {
  const Device dev = Device::parse(o.device);
  const int64_t B = batch_at(o, L), H = o.heads, D = o.head_dim;
  cpu::set_flash_backward(o.backward);
  Generator gen(1);
  std::shared_ptr<PositionalScheme> scheme = make_scheme(o, variant.term, L, &gen);
  if (scheme) scheme->to(dev);
  auto input = [&] { return randn({B, H, L, D}, TensorOptions(kFloat32).device(dev), &gen).requires_grad_(); };
  Tensor q = input(), k = input(), v = input();
  Tensor gout = randn({B, H, L, D}, TensorOptions(kFloat32).device(dev), &gen);
  AttentionGeometry g = AttentionGeometry::make(B, H, D, L, L, true);
  Tensor mask;
  if (variant.core == Core::Composite) mask = causal_mask(g.positions(), L).to(dev);
  sync(dev);
  const size_t base = live_bytes(dev);
  std::vector<double> fwd, bwd;
  std::vector<std::vector<float>> first_table, first_inputs;
  Result r;
  for (int rep = 0; rep <= o.reps; ++rep) {
    for (Tensor* t : {&q, &k, &v}) t->set_grad(Tensor());
    if (scheme) scheme->zero_grad();
    const double t0 = now(o);
    Tensor out;
    if (variant.core == Core::Fused) {
      out = attention_heads_fused(q, k, v, scheme.get(), g, Tensor());
      if (!out.defined())
        throw Error("[bench_flash] the fused core does not cover the " + (scheme ? scheme->name() : "plain") + " term");
    } else {
      out = attention_heads(q, k, v, scheme.get(), g, mask, 0.0, false, nullptr).output;
    }
    Tensor loss = sum(out * gout);
    sync(dev);
    const double t1 = now(o);
    loss.backward();
    sync(dev);
    const double t2 = now(o);
    // Bitwise comparison with the first run, outside the clock.
    TensorList table_grads;
    if (scheme)
      for (const Tensor& p : scheme->parameters()) table_grads.push_back(p.grad());
    auto table = host_copies(table_grads), inputs = host_copies({q.grad(), k.grad(), v.grad()});
    if (rep == 0) {
      first_table = std::move(table);
      first_inputs = std::move(inputs);
      if (!table_grads.empty()) r.same_table = 1;
      r.same_inputs = 1;
      continue;  // warm-up: not timed
    }
    if (r.same_table == 1 && !same_bits(table, first_table)) r.same_table = 0;
    if (!same_bits(inputs, first_inputs)) r.same_inputs = 0;
    fwd.push_back(t1 - t0);
    bwd.push_back(t2 - t1);
  }
  r.fwd = median(fwd);
  r.bwd = median(bwd);
  r.peak_mib = static_cast<double>(peak_bytes(dev) - base) / (1024.0 * 1024.0);
  return r;
}

// Runs measure() in a forked child (the parent never touches OpenMP or CUDA, so forking is safe).
bool run_child(const Options& o, const std::string& name, const Variant& variant, int64_t L, Result& r,
               std::string& why) {
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
      std::fprintf(stderr, "%s L=%lld: %s\n", name.c_str(), static_cast<long long>(L), e.what());
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

const char* verdict(int same) { return same < 0 ? "—" : same ? "yes" : "no"; }

int usage() {
  std::fprintf(stderr,
               "usage: bench_flash [--device cpu|cuda] [--lengths 256,512] [--variants fused_rel,fused_t5,fused_shaw,"
               "fused_plain,composite_rel,composite_plain (also composite_t5, composite_shaw, fused_kerple, composite_kerple)] [--batch 1] [--heads 4] "
               "[--head-dim 64] [--tokens 0] [--backward auto|one-pass|two-pass] [--reps 3] [--t5-buckets 32] "
               "[--t5-max-distance 128] [--shaw-clip 16] [--max-composite-length 0] [--max-composite-gib 24]\n"
               "RELGRAD_BENCH_CLOCK=wall|cpu\n");
  return 2;
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
    try {
      if (a == "--device") o.device = next();
      else if (a == "--lengths") {
        o.lengths.clear();
        for (const std::string& s : split(next())) o.lengths.push_back(std::stoll(s));
      } else if (a == "--variants") o.variants = split(next());
      else if (a == "--batch") o.batch = std::stoll(next());
      else if (a == "--heads") o.heads = std::stoll(next());
      else if (a == "--head-dim") o.head_dim = std::stoll(next());
      else if (a == "--tokens") o.tokens = std::stoll(next());
      else if (a == "--backward") {
        const std::string b = next();
        if (b == "auto") o.backward = cpu::FlashBackward::Auto;
        else if (b == "one-pass") o.backward = cpu::FlashBackward::OnePass;
        else if (b == "two-pass") o.backward = cpu::FlashBackward::TwoPass;
        else {
          std::fprintf(stderr, "bench_flash: --backward %s: not auto, one-pass or two-pass\n", b.c_str());
          return 2;
        }
      }
      else if (a == "--reps") o.reps = std::stoi(next());
      else if (a == "--t5-buckets") o.t5_buckets = std::stoll(next());
      else if (a == "--t5-max-distance") o.t5_max_distance = std::stoll(next());
      else if (a == "--shaw-clip") o.shaw_clip = std::stoll(next());
      else if (a == "--max-composite-gib") o.max_composite_gib = std::stod(next());
      else if (a == "--max-composite-length") o.max_composite_length = std::stoll(next());
      else return usage();
    } catch (const std::logic_error&) {  // std::stoll and friends on a value that is not a number
      std::fprintf(stderr, "bench_flash: %s: not a number\n", a.c_str());
      return 2;
    }
  }
  std::vector<Variant> parsed(o.variants.size());
  for (size_t i = 0; i < o.variants.size(); ++i)
    if (!parse_variant(o.variants[i], parsed[i])) {
      std::fprintf(stderr, "bench_flash: unknown variant %s\n", o.variants[i].c_str());
      return usage();
    }
  const char* clock_env = std::getenv("RELGRAD_BENCH_CLOCK");
  if (clock_env && std::strcmp(clock_env, "cpu") != 0 && std::strcmp(clock_env, "wall") != 0) {
    std::fprintf(stderr, "bench_flash: RELGRAD_BENCH_CLOCK=%s: not wall or cpu\n", clock_env);
    return 2;
  }
  o.cpu_clock = clock_env && std::strcmp(clock_env, "cpu") == 0;
  if (o.reps < 1) {
    std::fprintf(stderr, "bench_flash: --reps must be at least 1\n");
    return 2;
  }
  const char* backward[] = {"auto", "two-pass", "one-pass"};
  const std::string batch = o.tokens > 0 ? std::to_string(o.tokens) + "/L" : std::to_string(o.batch);
  std::printf("device %s, B=%s H=%lld D=%lld, causal, float32, median of %d reps after 1 warm-up (%s clock); CPU "
              "fused backward: %s; t5: %lld causal buckets, max distance %lld; shaw: clip %lld (%lld rows, shared "
              "by the heads, no value term)\n\n",
              o.device.c_str(), batch.c_str(), static_cast<long long>(o.heads), static_cast<long long>(o.head_dim),
              o.reps, o.cpu_clock ? "cpu" : "wall", backward[static_cast<int>(o.backward)],
              static_cast<long long>(o.t5_buckets),
              static_cast<long long>(o.t5_max_distance), static_cast<long long>(o.shaw_clip),
              static_cast<long long>(2 * o.shaw_clip + 1));
  std::printf("| variant | L | fwd ms | bwd ms | fwd+bwd ms | peak MiB above inputs | det table | det dq/dk/dv |\n"
              "|---|---|---|---|---|---|---|---|\n");
  std::fflush(stdout);
  for (int64_t L : o.lengths)
    for (size_t i = 0; i < o.variants.size(); ++i) {
      const std::string& name = o.variants[i];
      const long long l = static_cast<long long>(L);
      if (parsed[i].core == Core::Composite) {
        // The composite keeps about six (B, H, L, L) float32 tensors alive at its peak.
        const double composite_gib = 6.0 * batch_at(o, L) * o.heads * L * L * 4 / (1024.0 * 1024 * 1024);
        if (composite_gib > o.max_composite_gib) {
          std::printf("| %s | %lld | skipped (~%.0f GiB) | | | | | |\n", name.c_str(), l, composite_gib);
          continue;
        }
        if (o.max_composite_length > 0 && L > o.max_composite_length) {
          std::printf("| %s | %lld | skipped (L > %lld) | | | | | |\n", name.c_str(), l,
                      static_cast<long long>(o.max_composite_length));
          continue;
        }
      }
      Result r;
      std::string why;
      if (!run_child(o, name, parsed[i], L, r, why)) {
        std::printf("| %s | %lld | %s | | | | | |\n", name.c_str(), l, why.c_str());
        std::fflush(stdout);
        continue;
      }
      std::printf("| %s | %lld | %.2f | %.2f | %.2f | %.1f | %s | %s |\n", name.c_str(), l, r.fwd * 1e3, r.bwd * 1e3,
                  (r.fwd + r.bwd) * 1e3, r.peak_mib, verdict(r.same_table), verdict(r.same_inputs));
      std::fflush(stdout);
    }
  return 0;
}
