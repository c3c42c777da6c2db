// Relative-attention benchmark: one causal attention op on split heads, no projections, forward +
// backward, the same workload as the PyTorch 1.13 script it is compared with (relattn_micro.py, a
// reference kept outside this repository and passed to bench/run_relattn.sh):
//   q, k, v (B, H, L, D) requiring grad, out = attention_heads(q, k, v, scheme, causal),
//   loss = sum(out * g) with a fixed random g (B, H, L, D), loss.backward().
// Variants (the positional scheme):
//   none          no positional term (the floor)
//   seed          SeedRelativeEmbedding, per-head table of 2L − 1 rows (torch's skew_gather)
//   huang         HuangRelativeEmbedding, per-head table of L rows (the causal past half only)
//   shaw          ShawRelativeEmbedding, clip k = 16, one shared table, keys only
//   shaw_v        the same with the value term (a^V)
//   t5            T5RelativeBias, 32 buckets, max distance 128, causal buckets
//   naive         explicit materialisation, as torch's naive: per-head E (H, 2L − 1, D) →
//                 E_rel (H, L, L, D) with E_rel[h,i,j,:] = E[h, (L−1)+j−i, :] (index_select into
//                 (H, L·L, D)), then S = q·E_relᵀ per query with one batched matmul
//   naive_shared  the same with one table shared by all heads: E_rel (L, L, D)
// Each (variant, L) runs in a fresh child process (this program, exec'ed with --child) so its peak
// RSS (getrusage ru_maxrss) is its own. Reported: median seconds of fwd+bwd over at least --reps
// timed reps and --min-time seconds of timed work (as relattn_micro.py) after --warmup untimed
// ones; peak RSS and its increase over the RSS right after the inputs were created; the peak of
// live tensor bytes (cpu_allocator::stats; peak RSS also counts the
// allocator's cache of freed blocks). A configuration predicted to need more than --max-gib, or
// (from the previous L of the same variant, time ∝ L²) more than --max-seconds per rep, is skipped.
// Threads come from OMP_NUM_THREADS. Run from a Release build:
//   OMP_NUM_THREADS=1 ./build-bench/bench/bench_relattn --lengths 128,256,512,1024,2048
// bench/run_relattn.sh runs it next to relattn_micro.py and prints one table.
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "layers/relative_bias.h"
#include "layers/relative_learned.h"
#include "relgrad.h"

using namespace relgrad;

namespace {

struct Options {
  std::vector<std::string> variants{"none", "seed", "huang", "shaw", "shaw_v", "t5", "naive", "naive_shared"};
  std::vector<int64_t> lengths{128, 256, 512, 1024, 2048};
  int64_t batch = 4, heads = 8, head_dim = 64;
  int reps = 3, warmup = 1;
  double min_time = 0.0;  // keep repeating until this many seconds of timed work (at most 50 reps)
  double max_gib = 16.0, max_seconds = 20.0;
  bool tsv = false;  // machine-readable rows (for run_relattn.sh) instead of a markdown table
  // child mode: one configuration
  bool child = false;
  std::string variant;
  int64_t L = 0;
};

double mib(double bytes) { return bytes / (1024.0 * 1024.0); }

double peak_rss_mib() {
  rusage u;
  getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss / 1024.0;  // KiB on Linux
}

// The materialised key term. E (H?, 2L − 1, D), row r ↔ δ = r − (L − 1) (relgrad's orientation).
class NaiveRelative : public PositionalScheme {
 public:
  NaiveRelative(int64_t head_dim, int64_t L, int64_t num_heads, Generator* gen) : L(L), num_heads(num_heads) {
    NoGradGuard no_grad;
    Shape shape = num_heads > 0 ? Shape{num_heads, 2 * L - 1, head_dim} : Shape{2 * L - 1, head_dim};
    table = register_parameter("table", mul(randn(shape, kFloat32, gen), 1.0 / std::sqrt(double(head_dim))));
    std::vector<int64_t> idx(static_cast<size_t>(L * L));
    for (int64_t i = 0; i < L; ++i)
      for (int64_t j = 0; j < L; ++j) idx[i * L + j] = (L - 1) + j - i;
    flat_index = from_vector(idx, {L * L});
  }
  std::string name() const override { return "NaiveRelative"; }
  Tensor score_term(const Tensor& q, const AttentionGeometry& g) const override {
    const int64_t B = q.size(0), H = q.size(1), D = q.size(3);
    if (num_heads > 0) {
      Tensor er = index_select(table, 1, flat_index).view({H, L, L, D});      // (H, L, L, D) materialised
      Tensor s = matmul(q.permute({1, 2, 0, 3}), er.transpose(-1, -2));       // (H,L,B,D) @ (H,L,D,L) → (H,L,B,L)
      return s.permute({2, 0, 1, 3});                                         // (B, H, L, L)
    }
    Tensor er = index_select(table, 0, flat_index).view({L, L, D});           // (L, L, D) materialised
    Tensor qi = q.permute({2, 0, 1, 3}).reshape({L, B * H, D});               // (L, B·H, D)
    Tensor s = matmul(qi, er.transpose(-1, -2));                              // (L, B·H, L)
    (void)g;
    return s.view({L, B, H, L}).permute({1, 2, 0, 3});                        // (B, H, L, L)
  }
  int64_t L, num_heads;
  Tensor table, flat_index;
};

std::shared_ptr<PositionalScheme> make_scheme(const std::string& v, int64_t L, int64_t H, int64_t D, Generator* gen) {
  if (v == "none") return nullptr;
  if (v == "seed") return std::make_shared<SeedRelativeEmbedding>(D, L, H, OutOfRange::Zero, gen);
  if (v == "huang") return std::make_shared<HuangRelativeEmbedding>(D, L, H, OutOfRange::Zero, gen);
  if (v == "shaw") return std::make_shared<ShawRelativeEmbedding>(D, 16, 0, false, gen);
  if (v == "shaw_v") return std::make_shared<ShawRelativeEmbedding>(D, 16, 0, true, gen);
  if (v == "t5") return std::make_shared<T5RelativeBias>(H, 32, 128, /*bidirectional=*/false, gen);
  if (v == "naive") return std::make_shared<NaiveRelative>(D, L, H, gen);
  if (v == "naive_shared") return std::make_shared<NaiveRelative>(D, L, 0, gen);
  throw Error("bench_relattn: unknown variant '" + v + "'");
}

// Rough peak RSS, fitted on the measured rows (docs/benchmarks.md) with ~10% to spare: the
// (B,H,L,L) family of `none` (≈ 4.3 score-sized tensors at the peak) plus each variant's own tensors
// (its (B,H,L,R) product, which the allocator may also keep cached, or the materialised tables).
double predicted_bytes(const std::string& v, int64_t B, int64_t H, int64_t L, int64_t D) {
  const double s = 4.0 * B * H * L * L;  // one float32 (B,H,L,L) tensor
  double bytes = 4.5 * s;
  if (v == "seed") bytes += 1.2 * 4.0 * B * H * L * (2 * L - 1);
  if (v == "huang") bytes += 1.2 * s;
  if (v == "shaw") bytes += 1.2 * 4.0 * B * H * L * 33;
  if (v == "shaw_v") bytes += 1.2 * s;
  if (v == "t5") bytes += 1.0 * s;
  if (v == "naive") bytes += 2.2 * 4.0 * H * L * L * D;
  if (v == "naive_shared") bytes += 2.2 * 4.0 * L * L * D;
  return bytes;
}

struct Result {
  std::vector<double> total;  // seconds per timed fwd+bwd
  double fwd = 0, bwd = 0, rss_inputs = 0, peak_rss = 0, live_peak = 0;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// One configuration, in this (fresh) process.
Result run_child(const Options& o) {
  const int64_t B = o.batch, H = o.heads, D = o.head_dim, L = o.L;
  Generator gen(0);
  Tensor q = randn({B, H, L, D}, kFloat32, &gen).requires_grad_();
  Tensor k = randn({B, H, L, D}, kFloat32, &gen).requires_grad_();
  Tensor v = randn({B, H, L, D}, kFloat32, &gen).requires_grad_();
  Tensor gout = randn({B, H, L, D}, kFloat32, &gen);  // the fixed tensor of the loss
  std::shared_ptr<PositionalScheme> scheme = make_scheme(o.variant, L, H, D, &gen);
  AttentionGeometry g = AttentionGeometry::make(B, H, D, L, L, /*causal=*/true);
  Tensor mask = causal_mask(g.positions(), L);  // (1, 1, L, L)
  Result r;
  r.rss_inputs = peak_rss_mib();
  std::vector<double> fwd, bwd;
  double timed = 0;
  for (int rep = 0; rep < o.warmup + o.reps || (timed < o.min_time && rep < o.warmup + 50); ++rep) {
    for (Tensor* t : {&q, &k, &v}) t->set_grad(Tensor());
    if (scheme) scheme->zero_grad();
    auto t0 = std::chrono::steady_clock::now();
    Tensor loss = sum(attention_heads(q, k, v, scheme.get(), g, mask, 0.0, false, nullptr).output * gout);
    auto t1 = std::chrono::steady_clock::now();
    loss.backward();
    auto t2 = std::chrono::steady_clock::now();
    if (rep < o.warmup) continue;
    fwd.push_back(std::chrono::duration<double>(t1 - t0).count());
    bwd.push_back(std::chrono::duration<double>(t2 - t1).count());
    r.total.push_back(fwd.back() + bwd.back());
    timed += r.total.back();
  }
  r.fwd = median(fwd);
  r.bwd = median(bwd);
  r.peak_rss = peak_rss_mib();
  r.live_peak = mib(static_cast<double>(cpu_allocator::stats().peak_allocated_bytes));
  return r;
}

// Runs this program with --child for one configuration; false (with `why`) when it failed.
bool run_in_child(const Options& o, const std::string& variant, int64_t L, Result& r, std::string& why) {
  char exe[4096];
  const ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  if (n <= 0) { why = "cannot find /proc/self/exe"; return false; }
  exe[n] = '\0';
  std::ostringstream cmd;
  cmd << "'" << exe << "' --child --variant " << variant << " --L " << L << " --batch " << o.batch << " --heads "
      << o.heads << " --dhead " << o.head_dim << " --reps " << o.reps << " --warmup " << o.warmup << " --min-time " << o.min_time;
  FILE* p = popen(cmd.str().c_str(), "r");
  if (!p) { why = "popen failed"; return false; }
  std::string out;
  char buf[4096];
  while (std::fgets(buf, sizeof(buf), p)) out += buf;
  const int status = pclose(p);
  std::istringstream in(out);
  std::string tag;
  in >> tag;
  if (status != 0 || tag != "RESULT") {
    why = "child failed (status " + std::to_string(status) + ")";
    return false;
  }
  int count = 0;
  in >> r.fwd >> r.bwd >> r.rss_inputs >> r.peak_rss >> r.live_peak >> count;
  r.total.resize(static_cast<size_t>(count));
  for (double& t : r.total) in >> t;
  return true;
}

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  std::string item;
  while (std::getline(in, item, ',')) if (!item.empty()) out.push_back(item);
  return out;
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw Error("bench_relattn: " + a + " needs a value");
      return argv[++i];
    };
    if (a == "--child") o.child = true;
    else if (a == "--tsv") o.tsv = true;
    else if (a == "--variant") o.variant = value();
    else if (a == "--L") o.L = std::stoll(value());
    else if (a == "--variants") o.variants = split_list(value());
    else if (a == "--lengths") {
      o.lengths.clear();
      for (const std::string& s : split_list(value())) o.lengths.push_back(std::stoll(s));
    } else if (a == "--batch") o.batch = std::stoll(value());
    else if (a == "--heads") o.heads = std::stoll(value());
    else if (a == "--dhead") o.head_dim = std::stoll(value());
    else if (a == "--reps") o.reps = std::stoi(value());
    else if (a == "--warmup") o.warmup = std::stoi(value());
    else if (a == "--min-time") o.min_time = std::stod(value());
    else if (a == "--max-gib") o.max_gib = std::stod(value());
    else if (a == "--max-seconds") o.max_seconds = std::stod(value());
    else
      throw Error("bench_relattn: unknown argument '" + a + "' (--variants a,b --lengths 128,256 --reps N --warmup N "
                  "--min-time S --max-gib G --max-seconds S --tsv)");
  }
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Options o = parse(argc, argv);
    if (o.child) {
      const Result r = run_child(o);
      std::printf("RESULT %.6f %.6f %.1f %.1f %.1f %zu", r.fwd, r.bwd, r.rss_inputs, r.peak_rss, r.live_peak,
                  r.total.size());
      for (double t : r.total) std::printf(" %.6f", t);
      std::printf("\n");
      return 0;
    }
#ifdef _OPENMP
    const int threads = omp_get_max_threads();
#else
    const int threads = 1;
#endif
    if (o.tsv) {
      std::printf("# impl\tvariant\tL\tthreads\tmedian_s\tmin_s\tmax_s\tfwd_s\tbwd_s\tpeak_rss_mib\trss_over_inputs_mib\t"
                  "live_peak_mib\tnote\n");
    } else {
      std::printf("relgrad bench_relattn: B=%lld H=%lld D=%lld, causal, float32, %d OpenMP thread(s), median of %d "
                  "after %d warm-up\n\n",
                  (long long)o.batch, (long long)o.heads, (long long)o.head_dim, threads, o.reps, o.warmup);
      std::printf("| variant | L | fwd+bwd s min / median / max | fwd s | bwd s | peak RSS MiB | RSS over inputs MiB "
                  "| live peak MiB | note |\n|---|---|---|---|---|---|---|---|---|\n");
    }
    std::fflush(stdout);
    for (const std::string& variant : o.variants) {
      double prev_seconds = 0;
      int64_t prev_L = 0;
      for (int64_t L : o.lengths) {
        std::string skip;
        char why[128];
        const double gib = predicted_bytes(variant, o.batch, o.heads, L, o.head_dim) / double(int64_t(1) << 30);
        const double secs = prev_L ? prev_seconds * double(L) * L / (double(prev_L) * prev_L) : 0;
        if (gib > o.max_gib) {
          std::snprintf(why, sizeof(why), "skipped (predicted %.1f GiB)", gib);
          skip = why;
        } else if (secs > o.max_seconds) {
          std::snprintf(why, sizeof(why), "skipped (predicted %.0f s per rep)", secs);
          skip = why;
        }
        Result r;
        if (skip.empty()) run_in_child(o, variant, L, r, skip);  // on failure `skip` says why
        if (!skip.empty()) {
          if (o.tsv) std::printf("relgrad\t%s\t%lld\t%d\t-\t-\t-\t-\t-\t-\t-\t-\t%s\n", variant.c_str(), (long long)L,
                                 threads, skip.c_str());
          else std::printf("| %s | %lld | - | - | - | - | - | - | %s |\n", variant.c_str(), (long long)L, skip.c_str());
          std::fflush(stdout);
          prev_seconds = 1e30;  // longer lengths are skipped too
          prev_L = L;
          continue;
        }
        std::vector<double> t = r.total;
        std::sort(t.begin(), t.end());
        const double med = median(t);
        if (o.tsv)
          std::printf("relgrad\t%s\t%lld\t%d\t%.4f\t%.4f\t%.4f\t%.4f\t%.4f\t%.0f\t%.0f\t%.0f\tn=%zu\n", variant.c_str(),
                      (long long)L, threads, med, t.front(), t.back(), r.fwd, r.bwd, r.peak_rss,
                      r.peak_rss - r.rss_inputs, r.live_peak, t.size());
        else
          std::printf("| %s | %lld | %.4f / %.4f / %.4f | %.4f | %.4f | %.0f | %.0f | %.0f | n=%zu |\n",
                      variant.c_str(), (long long)L, t.front(), med, t.back(), r.fwd, r.bwd, r.peak_rss,
                      r.peak_rss - r.rss_inputs, r.live_peak, t.size());
        std::fflush(stdout);
        prev_seconds = med;
        prev_L = L;
      }
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
}
