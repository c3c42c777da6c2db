// The tile steps that the CPU fused attention's forward (core/cpu/flash_attention.cpp) and backward
// (core/cpu/flash_attention_backward.cpp) share: a tile's logits with the relative term and the bias,
// its probabilities from the saved lse, and its ds. Internal to those two files.
#pragma once
#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

#include "core/base/fast_math.h"
#include "core/cpu/flash_attention.h"
#include "core/cpu/gemm_library.h"

namespace relgrad::cpu::flash_tiles {

template <class T>
using Mat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
// Row-major maps whose rows lie `outer` elements apart: tiles of an operand in its HeadLayout.
template <class T>
using MapC = Eigen::Map<const Mat<T>, 0, Eigen::OuterStride<>>;
template <class T>
using MapM = Eigen::Map<Mat<T>, 0, Eigen::OuterStride<>>;

// Rows [i, i + n) of (b, h) of a (B, H, T, D) operand x in layout l: an (n × D) map.
template <class T>
MapC<T> rows_in(const T* x, const HeadLayout& l, int64_t b, int64_t h, int64_t i, int64_t n, int64_t D) {
  return MapC<T>(x + l.at(b, h, i), n, D, Eigen::OuterStride<>(l.t));
}
template <class T>
MapM<T> rows_out(T* x, const HeadLayout& l, int64_t b, int64_t h, int64_t i, int64_t n, int64_t D) {
  return MapM<T>(x + l.at(b, h, i), n, D, Eigen::OuterStride<>(l.t));
}

template <class T>
inline constexpr T kNegInf = -std::numeric_limits<T>::infinity();

// c (n × m) = a (n × k) · b (k × m), or c += a · b: one tile product, through the GEMM library that
// cpu::matmul uses (core/cpu/gemm_library.h; 1.3-2.5x Eigen's on these 64-wide tiles where OpenBLAS
// is chosen), one single-threaded call on the calling thread, so results still do not depend on the
// thread count. a and b are row-major matrices or maps, or their .transpose() (read column-major):
// the storage order comes from the expression's type; c is row-major and already sized.
template <class A, class B, class C>
void tile_gemm(const A& a, const B& b, C&& c, bool accumulate) {
  using Out = std::decay_t<C>;
  using T = typename Out::Scalar;
  static_assert(Out::IsRowMajor, "tile_gemm writes row-major tiles");
  const int64_t n = a.rows(), k = a.cols(), m = b.cols();
  if (n == 0 || m == 0) return;
  if (k == 0) {  // an empty sum (CBLAS refuses a leading dimension of 0)
    if (!accumulate) c.setZero();
    return;
  }
  gemm_tile(gemm_library(), bool(std::decay_t<A>::IsRowMajor), bool(std::decay_t<B>::IsRowMajor), a.data(),
            a.outerStride(), b.data(), b.outerStride(), c.data(), c.outerStride(), n, k, m, T(1), accumulate);
}

// Lookup of a per-distance table (rel_rows / bias_rows): −1 outside the lookup's range too (such
// distances are never used by a visible pair: the op checks the coverage before calling).
inline int64_t lookup(const int64_t* rows, int64_t min_delta, int64_t W, int64_t delta) {
  const int64_t w = delta - min_delta;
  return rows && w >= 0 && w < W ? rows[w] : -1;
}

// Keys [j0, j0 + n) of the tile at key j0 (nk keys) are not after query i's position: all of them
// unless causal. The rest are hidden, as are padding keys.
template <class T>
int64_t visible_end(const FlashProblem<T>& p, int64_t i, int64_t j0, int64_t nk) {
  return p.causal ? std::clamp<int64_t>(p.pos[i] - j0 + 1, 0, nk) : nk;
}

// Per-thread buffers of one tile.
template <class T>
struct Scratch {
  Mat<T> S, QE, EU, P, dP, G, GU, dEU;
  std::vector<int64_t> uniq;  // table rows of the window, in order of first appearance
  std::vector<int> col_of;    // window offset → column of uniq (−1: no row)
  std::vector<int> mark;      // table row → column of uniq (−1), reset after every tile
};

// The query tiles' position ranges: π_min, π_max over [i0, i0 + BQ).
struct TileRange {
  std::vector<int64_t> lo, hi;
};
template <class T>
TileRange tile_ranges(const FlashProblem<T>& p) {
  TileRange r;
  for (int64_t i0 = 0; i0 < p.t2; i0 += kFlashBlockQ) {
    const int64_t i1 = std::min(i0 + kFlashBlockQ, p.t2);
    int64_t lo = p.pos[i0], hi = p.pos[i0];
    for (int64_t i = i0; i < i1; ++i) lo = std::min(lo, p.pos[i]), hi = std::max(hi, p.pos[i]);
    r.lo.push_back(lo);
    r.hi.push_back(hi);
  }
  return r;
}

// Logits of query tile [i0, i0+nq) against key tile [j0, j0+nk) of (b, h) into s.S (nq × nk),
// hidden pairs −inf. With a table, also leaves s.EU (nu × D, the window's distinct rows), s.col_of
// and s.uniq for the backward's relative-query gradient.
template <class T>
void tile_logits(const FlashProblem<T>& p, Scratch<T>& s, int64_t b, int64_t h, int64_t i0, int64_t nq, int64_t j0,
                 int64_t nk, int64_t pmin, int64_t pmax) {
  const int64_t D = p.D;
  s.S.resize(nq, nk);
  tile_gemm(rows_in(p.q, p.layout.q, b, h, i0, nq, D), rows_in(p.k, p.layout.k, b, h, j0, nk, D).transpose(), s.S,
            false);
  if (p.E) {
    const int64_t dlo = j0 - pmax, nw = nk + pmax - pmin;  // the window δ ∈ [dlo, dlo + nw)
    s.col_of.assign(static_cast<size_t>(nw), -1);
    s.uniq.clear();
    for (int64_t w = 0; w < nw; ++w) {
      const int64_t r = lookup(p.rel_rows, p.min_delta, p.W, dlo + w);
      if (r < 0) continue;
      if (s.mark[r] < 0) {
        s.mark[r] = static_cast<int>(s.uniq.size());
        s.uniq.push_back(r);
      }
      s.col_of[w] = s.mark[r];
    }
    for (int64_t r : s.uniq) s.mark[r] = -1;
    const int64_t nu = static_cast<int64_t>(s.uniq.size());
    s.EU.resize(nu, D);
    const T* E = p.E + (p.E_heads == 1 ? 0 : h) * p.R * D;
    for (int64_t u = 0; u < nu; ++u) std::copy(E + s.uniq[u] * D, E + (s.uniq[u] + 1) * D, s.EU.row(u).data());
    if (nu > 0) {
      s.QE.resize(nq, nu);
      tile_gemm(rows_in(p.qr, p.layout.qr, b, h, i0, nq, D), s.EU.transpose(), s.QE, false);
      for (int64_t a = 0; a < nq; ++a) {
        const int64_t off = j0 - p.pos[i0 + a] - dlo;  // window offset of key j0 for this query
        for (int64_t c = 0, n = visible_end(p, i0 + a, j0, nk); c < n; ++c) {
          const int col = s.col_of[off + c];
          if (col >= 0) s.S(a, c) += s.QE(a, col);
        }
      }
    }
  }
  const T sc = static_cast<T>(p.scale);
  const T* bias = p.bias ? p.bias + (p.bias_heads == 1 ? 0 : h) * p.Rb : nullptr;
  const bool* pad = p.pad ? p.pad + b * p.t1 + j0 : nullptr;  // (nk) of the tile
  for (int64_t a = 0; a < nq; ++a) {
    const int64_t pi = p.pos[i0 + a], n = visible_end(p, i0 + a, j0, nk);
    T* z = s.S.row(a).data();
    for (int64_t c = 0; c < n; ++c) {
      T x = sc * z[c];  // the order of masked_softmax: scale, then the bias
      if (bias) {
        const int64_t br = lookup(p.bias_rows, p.min_delta, p.W, j0 + c - pi);
        if (br >= 0) x += bias[br];
      }
      z[c] = x;
    }
    std::fill(z + n, z + nk, kNegInf<T>);
    for (int64_t c = 0; pad && c < n; ++c)
      if (pad[c]) z[c] = kNegInf<T>;
  }
}

// Probabilities of the tile from the saved lse (0 where hidden or the row has no visible key). The
// backward's exp is fn::rg_exp (float32: a branch-free exp the loop vectorises, within 1 ulp; exp(−inf)
// is 0), while the forward's online softmax keeps std::exp.
template <class T>
void tile_probs(Scratch<T>& s, const T* lse) {
  const int64_t nk = s.S.cols();
  s.P.resize(s.S.rows(), nk);
  for (int64_t a = 0; a < s.S.rows(); ++a) {
    const T* z = s.S.row(a).data();
    T* pr = s.P.row(a).data();
    const T m = lse[a];
    if (m == kNegInf<T>) std::fill(pr, pr + nk, T(0));
    else
      for (int64_t c = 0; c < nk; ++c) pr[c] = fn::rg_exp(z[c] - m);
  }
}

// G = scale · P ∘ (dP − Drow): the gradient of the unscaled logit sum (q·k + qr·e), with dP = dO·Vᵀ;
// dO (nq × D) and V (nk × D) the tile's rows of dout and v.
template <class T>
void tile_grad(const FlashProblem<T>& p, Scratch<T>& s, const MapC<T>& dO, const MapC<T>& V, const T* Drow, int64_t nq,
               int64_t nk) {
  s.dP.resize(nq, nk);
  tile_gemm(dO, V.transpose(), s.dP, false);
  s.G.resize(nq, nk);
  const T sc = static_cast<T>(p.scale);
  for (int64_t a = 0; a < nq; ++a)
    for (int64_t c = 0; c < nk; ++c) s.G(a, c) = s.P(a, c) == T(0) ? T(0) : sc * s.P(a, c) * (s.dP(a, c) - Drow[a]);
}

template <class T>
Scratch<T> make_scratch(const FlashProblem<T>& p) {
  Scratch<T> s;
  s.mark.assign(static_cast<size_t>(p.E ? p.R : 0), -1);
  return s;
}

}  // namespace relgrad::cpu::flash_tiles
