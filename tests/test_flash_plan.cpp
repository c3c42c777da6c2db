// The index plan of the CUDA fused attention's table-gradient pass (cuda/flash_plan.h), run on the
// host: a host twin of flash_bwd_dist_kernel (cuda/flash_attention_backward.cu) with the same
// chunks, batch groups, query tiles, key ranges and summation order, checked against the CPU fused
// backward (core/cpu/flash_attention_backward.cpp, another loop order) on every geometry the kernels meet:
// causal and not, left/right alignment, explicit positions far apart, padding, clipped tables, bias
// buckets, shared and per-head tables. It also checks the key-range claim the kernel's staging
// relies on: every key a tile reads lies in keys_for_chunk(...), which has at most kND + span keys.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <random>
#include <vector>

#include "core/cpu/flash_attention.h"
#include "cuda/flash_plan.h"
#include "cuda/index.h"

namespace {

using namespace relgrad;
namespace fp = relgrad::cuda::flash_plan;

struct Geometry {
  int64_t B = 2, H = 3, t2 = 37, t1 = 37, D = 5;
  bool causal = true;
  std::vector<int64_t> pos;        // (t2)
  int64_t min_delta = 0, W = 0;
  std::vector<int64_t> rel_rows;   // (W) or empty
  int64_t R = 0, E_heads = 1;
  std::vector<int64_t> bias_rows;  // (W) or empty
  int64_t Rb = 0, bias_heads = 1;
  std::vector<bool> pad;           // (B, t1) or empty
  int64_t groups = 1;              // batch groups of the table pass
};

struct Data {
  std::vector<double> q, k, v, qr, E, bias, dout, out, lse;
  std::unique_ptr<bool[]> pad;
  cpu::FlashProblem<double> p;
};

Data make_data(const Geometry& g, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> n(0.0, 1.0);
  auto fill = [&](size_t count) {
    std::vector<double> x(count);
    for (auto& e : x) e = n(rng);
    return x;
  };
  Data d;
  const size_t qn = static_cast<size_t>(g.B * g.H * g.t2 * g.D), kn = static_cast<size_t>(g.B * g.H * g.t1 * g.D);
  d.q = fill(qn), d.k = fill(kn), d.v = fill(kn), d.qr = fill(qn), d.dout = fill(qn);
  d.E = fill(static_cast<size_t>(g.E_heads * g.R * g.D)), d.bias = fill(static_cast<size_t>(g.bias_heads * g.Rb));
  auto& p = d.p;
  p.B = g.B, p.H = g.H, p.t2 = g.t2, p.t1 = g.t1, p.D = g.D, p.scale = 1.0 / std::sqrt(double(g.D));
  p.causal = g.causal, p.pos = g.pos.data();
  p.layout = cpu::FlashLayout::contiguous(g.H, g.t2, g.t1, g.D);  // plain (B, H, T, D) buffers
  p.q = d.q.data(), p.k = d.k.data(), p.v = d.v.data(), p.qr = d.qr.data();
  if (!g.rel_rows.empty()) p.E = d.E.data(), p.E_heads = g.E_heads, p.R = g.R, p.rel_rows = g.rel_rows.data();
  if (!g.bias_rows.empty())
    p.bias = d.bias.data(), p.bias_heads = g.bias_heads, p.Rb = g.Rb, p.bias_rows = g.bias_rows.data();
  p.min_delta = g.min_delta, p.W = g.W;
  if (!g.pad.empty()) {
    d.pad.reset(new bool[g.pad.size()]);
    std::copy(g.pad.begin(), g.pad.end(), d.pad.get());
    p.pad = d.pad.get();
  }
  d.out.resize(qn), d.lse.resize(static_cast<size_t>(g.B * g.H * g.t2));
  cpu::flash_forward<double>(p, d.out.data(), d.lse.data());
  return d;
}

// The host twin of flash_bwd_dist_kernel + flash_fold_kernel: same loops, same order.
void table_grads_like_the_kernel(const Geometry& g, const Data& d, std::vector<double>& dE, std::vector<double>& dbias,
                                 int64_t& max_keys_read) {
  const auto& p = d.p;
  const int64_t D = g.D, W = g.W, nqt = (g.t2 + fp::kBQ - 1) / fp::kBQ, chunks = (W + fp::kND - 1) / fp::kND;
  std::vector<int64_t> lo(static_cast<size_t>(nqt)), hi(static_cast<size_t>(nqt));
  fp::tile_bounds(g.pos.data(), g.t2, lo.data(), hi.data());
  int64_t span = 0;
  for (int64_t t = 0; t < nqt; ++t) span = std::max(span, hi[t] - lo[t]);
  std::vector<double> drow(static_cast<size_t>(g.B * g.H * g.t2));
  for (size_t r = 0; r < drow.size(); ++r) {
    double s = 0;
    for (int64_t e = 0; e < D; ++e) s += d.dout[r * D + e] * d.out[r * D + e];
    drow[r] = s;
  }
  const bool want_E = p.E != nullptr, want_b = p.bias != nullptr;
  std::vector<double> gEd(static_cast<size_t>(g.groups * g.H * W * D), 0.0), gbd(static_cast<size_t>(g.groups * g.H * W));
  max_keys_read = 0;
  for (int64_t grp = 0; grp < g.groups; ++grp)
    for (int64_t h = 0; h < g.H; ++h)
      for (int64_t c = 0; c < chunks; ++c) {
        const int64_t w0 = c * fp::kND;
        if (fp::chunk_all_hidden(g.causal, g.min_delta, w0)) continue;  // the kernel writes zeros
        for (int64_t b = fp::group_begin(grp, g.groups, g.B); b < fp::group_begin(grp + 1, g.groups, g.B); ++b) {
          const int64_t bh = b * g.H + h;
          for (int64_t qt = 0; qt < nqt; ++qt) {
            const fp::KeyRange keys = fp::keys_for_chunk(lo[qt], hi[qt], g.min_delta, w0, g.t1);
            if (keys.empty()) continue;
            max_keys_read = std::max(max_keys_read, keys.size());
            REQUIRE(keys.size() <= fp::kND + span);
            std::vector<double> sG(static_cast<size_t>(fp::kBQ * fp::kND), 0.0);
            for (int r = 0; r < fp::kBQ; ++r)
              for (int lane = 0; lane < fp::kND; ++lane) {
                const int64_t i = qt * fp::kBQ + r, w = w0 + lane;
                if (i >= g.t2 || w >= W) continue;
                const double L = d.lse[bh * g.t2 + i];
                const int64_t pi = g.pos[i], j = fp::key_of(pi, g.min_delta, w);
                const int64_t row = want_E ? g.rel_rows[w] : -1, brow = want_b ? g.bias_rows[w] : -1;
                if (L == -INFINITY || j < 0 || j >= g.t1 || (g.causal && j > pi) || (p.pad && p.pad[b * g.t1 + j]))
                  continue;
                if (row < 0 && brow < 0) continue;
                // A key every visible pair of the tile reads must lie in the staged range.
                REQUIRE(j >= keys.lo);
                REQUIRE(j <= keys.hi);
                const double* qi = p.q + (bh * g.t2 + i) * D;
                const double* qri = p.qr + (bh * g.t2 + i) * D;
                const double* kj = p.k + (bh * g.t1 + j) * D;
                const double* vj = p.v + (bh * g.t1 + j) * D;
                const double* doi = d.dout.data() + (bh * g.t2 + i) * D;
                double z = 0, dp = 0;
                for (int64_t e = 0; e < D; ++e) z += qi[e] * kj[e];
                if (row >= 0) {
                  const double* er = p.E + ((g.E_heads == 1 ? 0 : h) * g.R + row) * D;
                  for (int64_t e = 0; e < D; ++e) z += qri[e] * er[e];
                }
                z *= p.scale;
                if (brow >= 0) z += p.bias[(g.bias_heads == 1 ? 0 : h) * g.Rb + brow];
                for (int64_t e = 0; e < D; ++e) dp += doi[e] * vj[e];
                sG[static_cast<size_t>(r * fp::kND + lane)] = std::exp(z - L) * (dp - drow[bh * g.t2 + i]);
              }
            for (int r = 0; r < fp::kBQ; ++r)  // rows in order
              for (int lane = 0; lane < fp::kND; ++lane) {
                const int64_t w = w0 + lane, i = qt * fp::kBQ + r;
                const double gi = sG[static_cast<size_t>(r * fp::kND + lane)];
                if (w >= W || gi == 0) continue;
                const size_t at = static_cast<size_t>((grp * g.H + h) * W + w);
                gbd[at] += gi;
                for (int64_t e = 0; e < D; ++e) gEd[at * D + e] += gi * p.qr[(bh * g.t2 + i) * D + e];
              }
          }
        }
      }
  for (auto& x : gEd) x *= p.scale;
  // The fold: groups, then heads, then the row's distances in increasing order.
  auto fold = [&](const std::vector<int64_t>& rows, int64_t R, int64_t heads, int64_t cols, const std::vector<double>& src,
                  std::vector<double>& out) {
    const cuda::Csr lists = cuda::csr_by_key(rows.data(), W, R);
    const std::vector<int64_t>& start = lists.offsets;
    const std::vector<int64_t>& list = lists.entries;
    out.assign(static_cast<size_t>(heads * R * cols), 0.0);
    for (int64_t eh = 0; eh < heads; ++eh)
      for (int64_t r = 0; r < R; ++r)
        for (int64_t col = 0; col < cols; ++col) {
          double s = 0;
          for (int64_t grp = 0; grp < g.groups; ++grp)
            for (int64_t h = heads == 1 ? 0 : eh; h < (heads == 1 ? g.H : eh + 1); ++h)
              for (int64_t k = start[r]; k < start[r + 1]; ++k)
                s += src[static_cast<size_t>(((grp * g.H + h) * W + list[k]) * cols + col)];
          out[static_cast<size_t>((eh * R + r) * cols + col)] = s;
        }
  };
  if (want_E) fold(g.rel_rows, g.R, g.E_heads, D, gEd, dE);
  if (want_b) fold(g.bias_rows, g.Rb, g.bias_heads, 1, gbd, dbias);
}

void check_against_cpu(const Geometry& g, uint32_t seed) {
  const Data d = make_data(g, seed);
  std::vector<double> dE, dbias;
  int64_t max_keys = 0;
  table_grads_like_the_kernel(g, d, dE, dbias, max_keys);
  const size_t qn = d.q.size(), kn = d.k.size();
  std::vector<double> dq(qn), dk(kn), dv(kn), dqr(qn), cE(static_cast<size_t>(g.E_heads * g.R * g.D)),
      cb(static_cast<size_t>(g.bias_heads * g.Rb));
  cpu::flash_backward<double>(d.p, d.out.data(), d.lse.data(), d.dout.data(), dq.data(), dk.data(), dv.data(),
                              dqr.data(), d.p.E ? cE.data() : nullptr, d.p.bias ? cb.data() : nullptr);
  double scale_E = 0, scale_b = 0;
  for (double x : cE) scale_E = std::max(scale_E, std::abs(x));
  for (double x : cb) scale_b = std::max(scale_b, std::abs(x));
  if (d.p.E) {
    REQUIRE(dE.size() == cE.size());
    CHECK(scale_E > 0);  // the case exercises the table
    for (size_t e = 0; e < cE.size(); ++e) CHECK(dE[e] == doctest::Approx(cE[e]).epsilon(1e-10).scale(scale_E));
  }
  if (d.p.bias) {
    REQUIRE(dbias.size() == cb.size());
    CHECK(scale_b > 0);
    for (size_t e = 0; e < cb.size(); ++e) CHECK(dbias[e] == doctest::Approx(cb[e]).epsilon(1e-10).scale(scale_b));
  }
}

// A full skewed table: one row per distance δ ∈ [min_delta, min_delta + W).
void full_table(Geometry& g, int64_t min_delta, int64_t W) {
  g.min_delta = min_delta, g.W = W, g.R = W;
  g.rel_rows.resize(static_cast<size_t>(W));
  for (int64_t w = 0; w < W; ++w) g.rel_rows[static_cast<size_t>(w)] = w;
}

std::vector<int64_t> iota_pos(int64_t t2, int64_t offset) {
  std::vector<int64_t> p(static_cast<size_t>(t2));
  for (int64_t i = 0; i < t2; ++i) p[static_cast<size_t>(i)] = i + offset;
  return p;
}

}  // namespace

TEST_CASE("flash plan: host twin of the CUDA table-gradient pass matches the CPU fused backward") {
  SUBCASE("causal self-attention, full table, one and several batch groups") {
    Geometry g;
    g.pos = iota_pos(g.t2, 0);
    full_table(g, -(g.t1 - 1), 2 * g.t1 - 1);
    for (int64_t groups : {1, 2}) {
      g.groups = groups;
      check_against_cpu(g, 1);
    }
  }
  SUBCASE("not causal, right alignment (cross attention, t1 > t2), per-head table and bias") {
    Geometry g;
    g.t2 = 21, g.t1 = 50, g.causal = false, g.E_heads = g.H, g.bias_heads = g.H, g.groups = 2;
    g.pos = iota_pos(g.t2, g.t1 - g.t2);
    full_table(g, -(g.t1 - 1), 2 * g.t1 - 1);
    g.bias_rows = g.rel_rows, g.Rb = g.R;
    check_against_cpu(g, 2);
  }
  SUBCASE("Shaw's clipped table: many distances share the edge rows") {
    Geometry g;
    g.causal = false, g.t2 = g.t1 = 45;
    g.pos = iota_pos(g.t2, 0);
    const int64_t clip = 4;
    g.min_delta = -(g.t1 - 1), g.W = 2 * g.t1 - 1, g.R = 2 * clip + 1;
    for (int64_t w = 0; w < g.W; ++w) g.rel_rows.push_back(std::clamp<int64_t>(g.min_delta + w, -clip, clip) + clip);
    check_against_cpu(g, 3);
  }
  SUBCASE("bias buckets only (T5-like: log-spaced buckets), shared bias, padding keys") {
    Geometry g;
    g.causal = false, g.t2 = g.t1 = 40, g.B = 3, g.groups = 3;
    g.pos = iota_pos(g.t2, 0);
    g.min_delta = -(g.t1 - 1), g.W = 2 * g.t1 - 1, g.Rb = 12;
    for (int64_t w = 0; w < g.W; ++w) {
      const int64_t delta = g.min_delta + w, a = std::abs(delta);
      const int64_t bucket = a < 4 ? a : std::min<int64_t>(5, 4 + static_cast<int64_t>(std::log2(double(a) / 4)));
      g.bias_rows.push_back(bucket + (delta > 0 ? 6 : 0));
    }
    g.pad.assign(static_cast<size_t>(g.B * g.t1), false);
    for (int64_t j = 33; j < g.t1; ++j) g.pad[static_cast<size_t>(1 * g.t1 + j)] = true;  // batch 1 padded
    check_against_cpu(g, 4);
  }
  SUBCASE("explicit positions spread far apart (the kernel reads keys from global memory)") {
    Geometry g;
    g.causal = true, g.t2 = 20, g.t1 = 200, g.B = 1;
    for (int64_t i = 0; i < g.t2; ++i) g.pos.push_back(i * 9 + (i % 3));
    full_table(g, -(g.t1 - 1), g.t1);  // δ ≤ 0 only: causal
    check_against_cpu(g, 5);
  }
  SUBCASE("a lookup covering part of the distances; t2, W not multiples of the tiles") {
    Geometry g;
    g.causal = false, g.t2 = 33, g.t1 = 29, g.D = 3;
    g.pos = iota_pos(g.t2, -2);
    g.min_delta = -40, g.W = 71, g.R = 20;
    for (int64_t w = 0; w < g.W; ++w) g.rel_rows.push_back(w % 3 == 0 ? -1 : (w * 7) % g.R);
    g.bias_rows = g.rel_rows, g.Rb = g.R, g.bias_heads = g.H;
    check_against_cpu(g, 6);
  }
}

TEST_CASE("flash plan: the pieces") {
  SUBCASE("tile bounds are each query tile's min and max position") {
    const std::vector<int64_t> pos{5, 3, 9, 9, 1, 0, 7, 2, 4, 4, 4, 4, 4, 4, 4, 4, 100, 50, 60};
    std::vector<int64_t> lo(2), hi(2);
    fp::tile_bounds(pos.data(), static_cast<int64_t>(pos.size()), lo.data(), hi.data());
    CHECK(lo[0] == 0);
    CHECK(hi[0] == 9);
    CHECK(lo[1] == 50);
    CHECK(hi[1] == 100);
  }
  SUBCASE("the fold's row lists (csr_by_key) are a stable counting sort") {
    const std::vector<int64_t> rows{2, -1, 0, 2, 1, 0, -1, 2};
    const cuda::Csr lists = cuda::csr_by_key(rows.data(), static_cast<int64_t>(rows.size()), 4);
    CHECK(lists.offsets == std::vector<int64_t>{0, 2, 3, 6, 6});
    CHECK(lists.entries == std::vector<int64_t>{2, 5, 4, 0, 3, 7});
  }
  SUBCASE("batch groups partition the batches and respect the memory cap") {
    for (int64_t B : {1, 2, 7, 64})
      for (int64_t G : {int64_t{1}, std::min<int64_t>(B, 3), B}) {
        int64_t covered = 0;
        for (int64_t g = 0; g < G; ++g) {
          CHECK(fp::group_begin(g + 1, G, B) >= fp::group_begin(g, G, B));
          covered += fp::group_begin(g + 1, G, B) - fp::group_begin(g, G, B);
        }
        CHECK(fp::group_begin(0, G, B) == 0);
        CHECK(covered == B);
      }
    CHECK(fp::batch_groups(16, 8, 8, 255, 32, 528, int64_t{1} << 25) == 9);  // fills 528 blocks
    CHECK(fp::batch_groups(2, 8, 8, 255, 32, 528, int64_t{1} << 25) == 2);   // no more groups than batches
    CHECK(fp::batch_groups(64, 4, 1024, 32767, 64, 528, int64_t{1} << 25) == 1);  // many chunks: one group
    CHECK(fp::batch_groups(64, 4, 8, 255, 64, 528, 3 * 4 * 255 * 64) == 3);        // the partials' cap
  }
  SUBCASE("a causal chunk of positive distances is wholly hidden") {
    CHECK(fp::chunk_all_hidden(true, -10, 11));
    CHECK_FALSE(fp::chunk_all_hidden(true, -10, 10));
    CHECK_FALSE(fp::chunk_all_hidden(false, -10, 11));
  }
}
