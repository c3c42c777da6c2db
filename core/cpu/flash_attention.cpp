// The CPU fused relative attention's forward (core/cpu/flash_attention.h has the maths, the tiling and
// the pass structure; the backward is core/cpu/flash_attention_backward.cpp). Tile products are GEMMs
// (tile_gemm) on row-major maps of the inputs' rows, each in its layout; each OpenMP task owns whole
// output tiles, so the GEMM runs single-threaded inside and no two threads write the same element.
// GCC 12 reports a false -Wmaybe-uninitialized deep inside Eigen's AVX-512 helpers (as core/cpu/matmul.cpp).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include "core/cpu/flash_attention.h"

#include "core/cpu/flash_tiles.h"

namespace relgrad::cpu {

using namespace flash_tiles;

template <class T>
void flash_forward(const FlashProblem<T>& p, T* out, T* lse) {
  const int64_t D = p.D, nqt = (p.t2 + kFlashBlockQ - 1) / kFlashBlockQ;
  const TileRange tr = tile_ranges(p);
  const int64_t tasks = p.B * p.H * nqt;
#pragma omp parallel
  {
    Scratch<T> s = make_scratch(p);
    Mat<T> acc;
    std::vector<T> m, l;
#pragma omp for schedule(dynamic, 1)
    for (int64_t task = 0; task < tasks; ++task) {
      const int64_t bh = task / nqt, qt = task % nqt, b = bh / p.H, h = bh % p.H;
      const int64_t i0 = qt * kFlashBlockQ, nq = std::min(kFlashBlockQ, p.t2 - i0);
      const int64_t pmin = tr.lo[qt], pmax = tr.hi[qt];
      acc.setZero(nq, D);
      m.assign(static_cast<size_t>(nq), kNegInf<T>);
      l.assign(static_cast<size_t>(nq), T(0));
      for (int64_t j0 = 0; j0 < p.t1; j0 += kFlashBlockK) {
        if (p.causal && j0 > pmax) break;  // every later key is after every query of the tile
        const int64_t nk = std::min(kFlashBlockK, p.t1 - j0);
        tile_logits(p, s, b, h, i0, nq, j0, nk, pmin, pmax);
        s.P.resize(nq, nk);
        for (int64_t a = 0; a < nq; ++a) {
          T mt = kNegInf<T>;
          for (int64_t c = 0; c < nk; ++c) mt = std::max(mt, s.S(a, c));
          if (mt == kNegInf<T>) {  // no visible key in this tile: the row's state is unchanged
            s.P.row(a).setZero();
            continue;
          }
          const T m_new = std::max(m[a], mt);
          const T corr = m[a] == kNegInf<T> ? T(0) : std::exp(m[a] - m_new);
          T sum = 0;
          for (int64_t c = 0; c < nk; ++c) {
            const T e = s.S(a, c) == kNegInf<T> ? T(0) : std::exp(s.S(a, c) - m_new);
            s.P(a, c) = e;
            sum += e;
          }
          l[a] = l[a] * corr + sum;
          acc.row(a) *= corr;
          m[a] = m_new;
        }
        tile_gemm(s.P, rows_in(p.v, p.layout.v, b, h, j0, nk, D), acc, true);
      }
      for (int64_t a = 0; a < nq; ++a) {
        T* o = out + p.layout.out.at(b, h, i0 + a);
        const bool any = l[a] > T(0);
        const T inv = any ? T(1) / l[a] : T(0);
        for (int64_t d = 0; d < D; ++d) o[d] = any ? acc(a, d) * inv : T(0);
        lse[bh * p.t2 + i0 + a] = any ? m[a] + std::log(l[a]) : kNegInf<T>;
      }
    }
  }
}

template void flash_forward<float>(const FlashProblem<float>&, float*, float*);
template void flash_forward<double>(const FlashProblem<double>&, double*, double*);

}  // namespace relgrad::cpu
