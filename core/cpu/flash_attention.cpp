// The CPU fused relative attention (core/cpu/flash_attention.h has the maths, the tiling and the
// pass structure). Tile products are Eigen GEMMs on row-major maps of the contiguous inputs; each
// OpenMP task owns whole output tiles, so Eigen runs single-threaded inside (it sees the parallel
// region) and no two threads write the same element.
// GCC 12 reports a false -Wmaybe-uninitialized deep inside Eigen's AVX-512 helpers (as core/cpu/matmul.cpp).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include "core/cpu/flash_attention.h"

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>
#ifdef _OPENMP
#include <omp.h>
#endif

namespace relgrad::cpu {

namespace {

template <class T>
using Mat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <class T>
using MapC = Eigen::Map<const Mat<T>>;
template <class T>
using MapM = Eigen::Map<Mat<T>>;

template <class T>
constexpr T kNegInf = -std::numeric_limits<T>::infinity();

// Lookup of a per-distance table (rel_rows / bias_rows): −1 outside the lookup's range too (such
// distances are never used by a visible pair: the op checks the coverage before calling).
inline int64_t lookup(const int64_t* rows, int64_t min_delta, int64_t W, int64_t delta) {
  const int64_t w = delta - min_delta;
  return rows && w >= 0 && w < W ? rows[w] : -1;
}

template <class T>
bool hidden(const FlashProblem<T>& p, int64_t b, int64_t pi, int64_t j) {
  return (p.causal && j > pi) || (p.pad && p.pad[b * p.t1 + j]);
}

// Per-thread buffers of one tile.
template <class T>
struct Scratch {
  Mat<T> S, QE, EU, P, dP, G, GU;
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
  const int64_t D = p.D, bh = b * p.H + h;
  MapC<T> Q(p.q + (bh * p.t2 + i0) * D, nq, D);
  MapC<T> K(p.k + (bh * p.t1 + j0) * D, nk, D);
  s.S.resize(nq, nk);
  s.S.noalias() = Q * K.transpose();
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
      MapC<T> QR(p.qr + (bh * p.t2 + i0) * D, nq, D);
      s.QE.resize(nq, nu);
      s.QE.noalias() = QR * s.EU.transpose();
      for (int64_t a = 0; a < nq; ++a) {
        const int64_t off = j0 - p.pos[i0 + a] - dlo;  // window offset of key j0 for this query
        for (int64_t c = 0; c < nk; ++c) {
          const int col = s.col_of[off + c];
          if (col >= 0) s.S(a, c) += s.QE(a, col);
        }
      }
    }
  }
  const T sc = static_cast<T>(p.scale);
  const T* bias = p.bias ? p.bias + (p.bias_heads == 1 ? 0 : h) * p.Rb : nullptr;
  for (int64_t a = 0; a < nq; ++a) {
    const int64_t pi = p.pos[i0 + a];
    for (int64_t c = 0; c < nk; ++c) {
      const int64_t j = j0 + c;
      if (hidden(p, b, pi, j)) {
        s.S(a, c) = kNegInf<T>;
        continue;
      }
      T z = sc * s.S(a, c);  // the order of masked_softmax: scale, then the bias
      if (bias) {
        const int64_t br = lookup(p.bias_rows, p.min_delta, p.W, j - pi);
        if (br >= 0) z += bias[br];
      }
      s.S(a, c) = z;
    }
  }
}

// Probabilities of the tile from the saved lse (0 where hidden or the row has no visible key).
template <class T>
void tile_probs(Scratch<T>& s, const T* lse) {
  s.P.resize(s.S.rows(), s.S.cols());
  for (int64_t a = 0; a < s.S.rows(); ++a)
    for (int64_t c = 0; c < s.S.cols(); ++c)
      s.P(a, c) = s.S(a, c) == kNegInf<T> || lse[a] == kNegInf<T> ? T(0) : std::exp(s.S(a, c) - lse[a]);
}

// G = scale · P ∘ (dP − Drow): the gradient of the unscaled logit sum (q·k + qr·e), with dP = dO·Vᵀ.
template <class T>
void tile_grad(const FlashProblem<T>& p, Scratch<T>& s, const T* dout_tile, const T* v_tile, const T* Drow, int64_t nq,
               int64_t nk) {
  MapC<T> dO(dout_tile, nq, p.D);
  MapC<T> V(v_tile, nk, p.D);
  s.dP.resize(nq, nk);
  s.dP.noalias() = dO * V.transpose();
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

}  // namespace

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
        MapC<T> V(p.v + (bh * p.t1 + j0) * D, nk, D);
        acc.noalias() += s.P * V;
      }
      for (int64_t a = 0; a < nq; ++a) {
        T* o = out + (bh * p.t2 + i0 + a) * D;
        const bool any = l[a] > T(0);
        const T inv = any ? T(1) / l[a] : T(0);
        for (int64_t d = 0; d < D; ++d) o[d] = any ? acc(a, d) * inv : T(0);
        lse[bh * p.t2 + i0 + a] = any ? m[a] + std::log(l[a]) : kNegInf<T>;
      }
    }
  }
}

namespace {

// What one query tile's backward task can reach, for its table gradients: the distances
// δ ∈ [dlo, dlo + nd) of every key tile it visits (δ = j − π(i) over [0, j_end) × [π_min, π_max]), and
// the table rows [rlo, rlo + nr) that rel_rows gives those distances (nr = 0: none).
struct TaskWindow {
  int64_t dlo = 0, nd = 0, rlo = 0, nr = 0;
};
template <class T>
std::vector<TaskWindow> task_windows(const FlashProblem<T>& p, const TileRange& tr) {
  std::vector<TaskWindow> out(tr.lo.size());
  for (size_t qt = 0; qt < out.size(); ++qt) {
    int64_t j_end = 0;  // the end of the last key tile pass A visits (its causal break)
    for (int64_t j0 = 0; j0 < p.t1 && !(p.causal && j0 > tr.hi[qt]); j0 += kFlashBlockK)
      j_end = std::min(j0 + kFlashBlockK, p.t1);
    TaskWindow& tw = out[qt];
    tw.dlo = -tr.hi[qt];
    tw.nd = j_end == 0 ? 0 : j_end + tr.hi[qt] - tr.lo[qt];
    int64_t rhi = -1;
    tw.rlo = p.R;
    for (int64_t x = 0; x < tw.nd && p.E; ++x) {
      const int64_t r = lookup(p.rel_rows, p.min_delta, p.W, tw.dlo + x);
      if (r >= 0) tw.rlo = std::min(tw.rlo, r), rhi = std::max(rhi, r);
    }
    tw.nr = rhi < 0 ? 0 : rhi - tw.rlo + 1;
    if (tw.nr == 0) tw.rlo = 0;
  }
  return out;
}

// Σ ds per distance over a tile: gb (nd) at δ − dlo += P ∘ (dP − Drow), the gradient of the logit
// s_ij (the bias's gradient; G is the same times scale). Tile (nq × nk) at key j0, queries from i0.
template <class T>
void tile_bias_grad(const FlashProblem<T>& p, const Scratch<T>& s, const T* Drow, int64_t i0, int64_t nq, int64_t j0,
                    int64_t nk, int64_t dlo, T* gb) {
  for (int64_t a = 0; a < nq; ++a) {
    T* g = gb + (j0 - p.pos[i0 + a] - dlo);  // δ of key j0 for this query; the row is consecutive δ
    for (int64_t c = 0; c < nk; ++c) g[c] += s.P(a, c) == T(0) ? T(0) : s.P(a, c) * (s.dP(a, c) - Drow[a]);
  }
}

// Pass A's per-task table-gradient buffers, for one wave of consecutive tasks [t0, t1) at a time: per
// task, (nd) Σ ds per distance when the bias wants a gradient, then (nr, D) Σ G·qr per row when E does.
template <class T>
struct TaskBuffers {
  bool bias = false, table = false;
  int64_t nqt = 0, D = 0, t0 = 0, t1 = 0;
  std::vector<TaskWindow> win;  // per query tile
  std::vector<int64_t> off;     // (t1 − t0 + 1) offsets into buf
  std::vector<T> buf;

  int64_t bias_size(int64_t task) const { return bias ? win[task % nqt].nd : 0; }
  int64_t size(int64_t task) const { return bias_size(task) + (table ? win[task % nqt].nr * D : 0); }
  T* bias_of(int64_t task) { return bias ? buf.data() + off[task - t0] : nullptr; }
  T* table_of(int64_t task) { return table ? buf.data() + off[task - t0] + bias_size(task) : nullptr; }

  // The wave after [t0, t1): as many tasks as kFlashFoldBudget holds, at least min_wave; zeroed.
  void next_wave(int64_t tasks, int64_t min_wave) {
    t0 = t1;
    off.assign(1, 0);
    for (; t1 < tasks && (t1 - t0 < min_wave || off.back() + size(t1) <= kFlashFoldBudget); ++t1)
      off.push_back(off.back() + size(t1));
    buf.assign(static_cast<size_t>(off.back()), T(0));
  }

  // Adds the wave's buffers into gbd (H, W) per distance and dE (E_heads, R, D) per row: each sum
  // target is owned by one iteration, which adds the tasks in increasing order.
  void fold(const FlashProblem<T>& p, T* gbd, T* dE) const {
    const int64_t W = p.W, nwc = (W + kFlashBlockDelta - 1) / kFlashBlockDelta;
    const int64_t nrc = (p.R + kFlashBlockDelta - 1) / kFlashBlockDelta;
#pragma omp parallel for schedule(static)
    for (int64_t item = 0; item < (bias ? p.H * nwc : 0); ++item) {  // (head, chunk of distances) of gbd
      const int64_t h = item / nwc, w0 = (item % nwc) * kFlashBlockDelta, w1 = std::min(w0 + kFlashBlockDelta, W);
      for (int64_t task = t0; task < t1; ++task) {
        if ((task / nqt) % p.H != h) continue;
        const TaskWindow& tw = win[task % nqt];
        const T* src = buf.data() + off[task - t0];  // (nd) at δ − dlo
        const int64_t x0 = p.min_delta - tw.dlo;     // the offset of w = 0
        for (int64_t w = std::max(w0, -x0); w < std::min(w1, tw.nd - x0); ++w) gbd[h * W + w] += src[x0 + w];
      }
    }
#pragma omp parallel for schedule(static)
    for (int64_t item = 0; item < (table ? p.E_heads * nrc : 0); ++item) {  // (table head, chunk of rows) of dE
      const int64_t eh = item / nrc, r0 = (item % nrc) * kFlashBlockDelta, r1 = std::min(r0 + kFlashBlockDelta, p.R);
      for (int64_t task = t0; task < t1; ++task) {
        if (p.E_heads != 1 && (task / nqt) % p.H != eh) continue;
        const TaskWindow& tw = win[task % nqt];
        const T* src = buf.data() + off[task - t0] + bias_size(task);  // (nr, D) at row − rlo
        for (int64_t r = std::max(r0, tw.rlo); r < std::min(r1, tw.rlo + tw.nr); ++r) {
          T* g = dE + (eh * p.R + r) * D;
          const T* x = src + (r - tw.rlo) * D;
          for (int64_t d = 0; d < D; ++d) g[d] += x[d];
        }
      }
    }
  }
};

}  // namespace

template <class T>
void flash_backward(const FlashProblem<T>& p, const T* out, const T* lse, const T* dout, T* dq, T* dk, T* dv, T* dqr,
                    T* dE, T* dbias) {
  const int64_t D = p.D, BH = p.B * p.H, W = p.W;
  const int64_t nqt = (p.t2 + kFlashBlockQ - 1) / kFlashBlockQ, nkt = (p.t1 + kFlashBlockK - 1) / kFlashBlockK;
  const TileRange tr = tile_ranges(p);
  const bool want_E = dE && p.E, want_b = dbias && p.bias;
  // Drow_i = dO_i · O_i (softmax backward's row term), (B, H, t2).
  std::vector<T> Drow(static_cast<size_t>(BH * p.t2));
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < BH * p.t2; ++r) {
    T acc = 0;
    for (int64_t d = 0; d < D; ++d) acc += dout[r * D + d] * out[r * D + d];
    Drow[r] = acc;
  }

  // The table gradients' running sums, each added to in increasing task order: gbd (H, W) per
  // distance, dE (E_heads, R, D) per row.
  TaskBuffers<T> tb;
  tb.bias = want_b, tb.table = want_E, tb.nqt = nqt, tb.D = D;
  if (want_E || want_b) tb.win = task_windows(p, tr);
  std::vector<T> gbd(static_cast<size_t>(want_b ? p.H * W : 0), T(0));
  if (want_E) std::fill(dE, dE + p.E_heads * p.R * D, T(0));
#ifdef _OPENMP
  const int64_t min_wave = 4 * static_cast<int64_t>(omp_get_max_threads());
#else
  const int64_t min_wave = 1;
#endif

  // Pass A: dq (+ dqr), one task per (b, h, query tile), key tiles in order; with table gradients
  // wanted, a wave of tasks at a time, each wave's buffers folded before the next.
  while (tb.t1 < BH * nqt) {
    tb.next_wave(BH * nqt, min_wave);
#pragma omp parallel
    {
      Scratch<T> s = make_scratch(p);
      Mat<T> gq, gqr, dEU;
#pragma omp for schedule(dynamic, 1)
      for (int64_t task = tb.t0; task < tb.t1; ++task) {
        const int64_t bh = task / nqt, qt = task % nqt, b = bh / p.H, h = bh % p.H;
        const int64_t i0 = qt * kFlashBlockQ, nq = std::min(kFlashBlockQ, p.t2 - i0);
        T* gb = tb.bias_of(task);   // (nd) at δ − dlo
        T* ge = tb.table_of(task);  // (nr, D) at row − rlo
        gq.setZero(nq, D);
        gqr.setZero(nq, p.E ? D : 0);
        for (int64_t j0 = 0; j0 < p.t1; j0 += kFlashBlockK) {
          if (p.causal && j0 > tr.hi[qt]) break;
          const int64_t nk = std::min(kFlashBlockK, p.t1 - j0);
          const T* Dr = Drow.data() + bh * p.t2 + i0;
          tile_logits(p, s, b, h, i0, nq, j0, nk, tr.lo[qt], tr.hi[qt]);
          tile_probs(s, lse + bh * p.t2 + i0);
          tile_grad(p, s, dout + (bh * p.t2 + i0) * D, p.v + (bh * p.t1 + j0) * D, Dr, nq, nk);
          gq.noalias() += s.G * MapC<T>(p.k + (bh * p.t1 + j0) * D, nk, D);
          if (gb) tile_bias_grad(p, s, Dr, i0, nq, j0, nk, tb.win[qt].dlo, gb);
          const int64_t nu = static_cast<int64_t>(s.uniq.size());
          if (p.E && nu > 0) {
            // Σ_j G_ij e_row(ij): fold the tile's columns onto the window's distinct rows, then one GEMM.
            s.GU.setZero(nq, nu);
            const int64_t dlo = j0 - tr.hi[qt];
            for (int64_t a = 0; a < nq; ++a) {
              const int64_t off_a = j0 - p.pos[i0 + a] - dlo;
              for (int64_t c = 0; c < nk; ++c) {
                const int col = s.col_of[off_a + c];
                if (col >= 0) s.GU(a, col) += s.G(a, c);
              }
            }
            gqr.noalias() += s.GU * s.EU;
            if (ge) {  // dE[row] += Σ_i GU_i,row · qr_i: (nu × nq) · (nq × D), added into the task's rows
              dEU.noalias() = s.GU.transpose() * MapC<T>(p.qr + (bh * p.t2 + i0) * D, nq, D);
              for (int64_t u = 0; u < nu; ++u) {
                T* g = ge + (s.uniq[u] - tb.win[qt].rlo) * D;
                for (int64_t d = 0; d < D; ++d) g[d] += dEU(u, d);
              }
            }
          }
        }
        MapM<T>(dq + (bh * p.t2 + i0) * D, nq, D) = gq;
        if (p.E) {
          if (dqr) MapM<T>(dqr + (bh * p.t2 + i0) * D, nq, D) = gqr;
          else MapM<T>(dq + (bh * p.t2 + i0) * D, nq, D) += gqr;
        } else if (dqr) {
          MapM<T>(dqr + (bh * p.t2 + i0) * D, nq, D).setZero();
        }
      }
    }
    if (want_E || want_b) tb.fold(p, gbd.data(), dE);
  }
  // Fold distances into bias columns: heads in order, then distances in increasing order.
  if (want_b) {
    std::fill(dbias, dbias + p.bias_heads * p.Rb, T(0));
    for (int64_t h = 0; h < p.H; ++h) {
      T* g = dbias + (p.bias_heads == 1 ? 0 : h) * p.Rb;
      for (int64_t w = 0; w < W; ++w)
        if (p.bias_rows[w] >= 0) g[p.bias_rows[w]] += gbd[h * W + w];
    }
  }

  // Pass B: dk, dv, one task per (b, h, key tile), query tiles in order.
#pragma omp parallel
  {
    Scratch<T> s = make_scratch(p);
    Mat<T> gk, gv;
#pragma omp for schedule(dynamic, 1)
    for (int64_t task = 0; task < BH * nkt; ++task) {
      const int64_t bh = task / nkt, kt = task % nkt, b = bh / p.H, h = bh % p.H;
      const int64_t j0 = kt * kFlashBlockK, nk = std::min(kFlashBlockK, p.t1 - j0);
      gk.setZero(nk, D);
      gv.setZero(nk, D);
      for (int64_t qt = 0; qt < nqt; ++qt) {
        if (p.causal && j0 > tr.hi[qt]) continue;  // the whole tile is after every query
        const int64_t i0 = qt * kFlashBlockQ, nq = std::min(kFlashBlockQ, p.t2 - i0);
        tile_logits(p, s, b, h, i0, nq, j0, nk, tr.lo[qt], tr.hi[qt]);
        tile_probs(s, lse + bh * p.t2 + i0);
        tile_grad(p, s, dout + (bh * p.t2 + i0) * D, p.v + (bh * p.t1 + j0) * D, Drow.data() + bh * p.t2 + i0, nq, nk);
        gv.noalias() += s.P.transpose() * MapC<T>(dout + (bh * p.t2 + i0) * D, nq, D);
        gk.noalias() += s.G.transpose() * MapC<T>(p.q + (bh * p.t2 + i0) * D, nq, D);
      }
      MapM<T>(dk + (bh * p.t1 + j0) * D, nk, D) = gk;
      MapM<T>(dv + (bh * p.t1 + j0) * D, nk, D) = gv;
    }
  }
}

template void flash_forward<float>(const FlashProblem<float>&, float*, float*);
template void flash_forward<double>(const FlashProblem<double>&, double*, double*);
template void flash_backward<float>(const FlashProblem<float>&, const float*, const float*, const float*, float*,
                                    float*, float*, float*, float*, float*);
template void flash_backward<double>(const FlashProblem<double>&, const double*, const double*, const double*,
                                     double*, double*, double*, double*, double*, double*);

}  // namespace relgrad::cpu
