// The CPU fused relative attention's backward, in two passes or in one (core/cpu/flash_attention.h
// has the maths, the tiling, the passes and which one runs; the tile steps are core/cpu/flash_tiles.h).
// Each OpenMP task owns what it writes, so the tile GEMMs run single-threaded inside and every sum runs
// in a fixed order. Every (B, H, T, D) operand is read and written in its layout (p.layout).
// GCC 12 reports a false -Wmaybe-uninitialized deep inside Eigen's AVX-512 helpers (as core/cpu/matmul.cpp).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <atomic>

#include "core/cpu/flash_attention.h"
#include "core/cpu/flash_tiles.h"
#include "core/parallel_for.h"
#ifdef _OPENMP
#include <omp.h>
#endif

namespace relgrad::cpu {

using namespace flash_tiles;

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

// The relative term's share of a tile (nq × nk at key j0, queries from i0, the window from tile_logits):
// GU (nq × nu) = G's columns folded onto the window's distinct rows, gqr (nq × D) += GU·EU, and when ge
// is non-null, ge (rows from rlo, D) += GUᵀ·qr per distinct row: (nu × nq) · (nq × D).
template <class T, class Out>
void tile_rel_grad(const FlashProblem<T>& p, Scratch<T>& s, int64_t b, int64_t h, int64_t i0, int64_t nq, int64_t j0,
                   int64_t nk, int64_t pmax, Out&& gqr, T* ge, int64_t rlo) {
  const int64_t nu = static_cast<int64_t>(s.uniq.size()), D = p.D, dlo = j0 - pmax;
  s.GU.setZero(nq, nu);
  for (int64_t a = 0; a < nq; ++a) {
    const int64_t off_a = j0 - p.pos[i0 + a] - dlo;
    for (int64_t c = 0; c < nk; ++c) {
      const int col = s.col_of[off_a + c];
      if (col >= 0) s.GU(a, col) += s.G(a, c);
    }
  }
  tile_gemm(s.GU, s.EU, gqr, true);
  if (!ge) return;
  s.dEU.resize(nu, D);
  tile_gemm(s.GU.transpose(), rows_in(p.qr, p.layout.qr, b, h, i0, nq, D), s.dEU, false);
  for (int64_t u = 0; u < nu; ++u) {
    T* g = ge + (s.uniq[u] - rlo) * D;
    for (int64_t d = 0; d < D; ++d) g[d] += s.dEU(u, d);
  }
}

// The union of the query tiles' windows: what a one-pass task, which visits all of their pairs, reaches.
inline TaskWindow union_window(const std::vector<TaskWindow>& win) {
  TaskWindow u;
  int64_t dhi = 0, rhi = 0;  // the ends of [dlo, dlo + nd) and [rlo, rlo + nr)
  for (const TaskWindow& w : win) {
    if (w.nd > 0) {
      dhi = u.nd > 0 ? std::max(dhi, w.dlo + w.nd) : w.dlo + w.nd;
      u.dlo = u.nd > 0 ? std::min(u.dlo, w.dlo) : w.dlo;
      u.nd = dhi - u.dlo;
    }
    if (w.nr > 0) {
      rhi = u.nr > 0 ? std::max(rhi, w.rlo + w.nr) : w.rlo + w.nr;
      u.rlo = u.nr > 0 ? std::min(u.rlo, w.rlo) : w.rlo;
      u.nr = rhi - u.rlo;
    }
  }
  return u;
}

// The per-task table-gradient buffers, for one wave of consecutive tasks [t0, t1) at a time: per
// task, (nd) Σ ds per distance when the bias wants a gradient, then (nr, D) Σ G·qr per row when E does.
// A task is (b, h, query tile) in the two-pass backward (nqt tiles, win per tile), (b, h) in the
// one-pass one (nqt = 1, win = the union of the tiles').
template <class T>
struct TaskBuffers {
  bool bias = false, table = false;
  int64_t nqt = 0, D = 0, t0 = 0, t1 = 0;
  std::vector<TaskWindow> win;  // (nqt), empty when no table gradient is wanted
  std::vector<int64_t> off;     // (t1 − t0 + 1) offsets into buf
  std::vector<T> buf;

  TaskWindow window(int64_t task) const { return win.empty() ? TaskWindow{} : win[task % nqt]; }

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
    parallel_for(bias ? p.H * nwc : 0, true, [&](int64_t item) {  // (head, chunk of distances) of gbd
      const int64_t h = item / nwc, w0 = (item % nwc) * kFlashBlockDelta, w1 = std::min(w0 + kFlashBlockDelta, W);
      for (int64_t task = t0; task < t1; ++task) {
        if ((task / nqt) % p.H != h) continue;
        const TaskWindow& tw = win[task % nqt];
        const T* src = buf.data() + off[task - t0];  // (nd) at δ − dlo
        const int64_t x0 = p.min_delta - tw.dlo;     // the offset of w = 0
        for (int64_t w = std::max(w0, -x0); w < std::min(w1, tw.nd - x0); ++w) gbd[h * W + w] += src[x0 + w];
      }
    });
    parallel_for(table ? p.E_heads * nrc : 0, true, [&](int64_t item) {  // (table head, chunk of rows) of dE
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
    });
  }
};

// Passes A and B (core/cpu/flash_attention.h); tb's tasks are (b, h, query tile).
template <class T>
void backward_two_pass(const FlashProblem<T>& p, const TileRange& tr, const T* lse, const T* dout, const T* Drow,
                       TaskBuffers<T>& tb, int64_t min_wave, T* dq, T* dk, T* dv, T* dqr, T* gbd, T* dE) {
  const int64_t D = p.D, BH = p.B * p.H;
  const FlashLayout& L = p.layout;
  const int64_t nqt = (p.t2 + kFlashBlockQ - 1) / kFlashBlockQ, nkt = (p.t1 + kFlashBlockK - 1) / kFlashBlockK;
  // Pass A: dq (+ dqr), one task per (b, h, query tile), key tiles in order; with table gradients
  // wanted, a wave of tasks at a time, each wave's buffers folded before the next.
  while (tb.t1 < BH * nqt) {
    tb.next_wave(BH * nqt, min_wave);
#pragma omp parallel
    {
      Scratch<T> s = make_scratch(p);
      Mat<T> gq, gqr;
#pragma omp for schedule(dynamic, 1)
      for (int64_t task = tb.t0; task < tb.t1; ++task) {
        const int64_t bh = task / nqt, qt = task % nqt, b = bh / p.H, h = bh % p.H;
        const int64_t i0 = qt * kFlashBlockQ, nq = std::min(kFlashBlockQ, p.t2 - i0);
        T* gb = tb.bias_of(task);   // (nd) at δ − dlo
        T* ge = tb.table_of(task);  // (nr, D) at row − rlo
        const TaskWindow tw = tb.window(task);
        gq.setZero(nq, D);
        gqr.setZero(nq, p.E ? D : 0);
        for (int64_t j0 = 0; j0 < p.t1; j0 += kFlashBlockK) {
          if (p.causal && j0 > tr.hi[qt]) break;
          const int64_t nk = std::min(kFlashBlockK, p.t1 - j0);
          const T* Dr = Drow + bh * p.t2 + i0;
          tile_logits(p, s, b, h, i0, nq, j0, nk, tr.lo[qt], tr.hi[qt]);
          tile_probs(s, lse + bh * p.t2 + i0);
          tile_grad(p, s, rows_in(dout, L.dout, b, h, i0, nq, D), rows_in(p.v, L.v, b, h, j0, nk, D), Dr, nq, nk);
          tile_gemm(s.G, rows_in(p.k, L.k, b, h, j0, nk, D), gq, true);
          if (gb) tile_bias_grad(p, s, Dr, i0, nq, j0, nk, tw.dlo, gb);
          if (p.E && !s.uniq.empty()) tile_rel_grad(p, s, b, h, i0, nq, j0, nk, tr.hi[qt], gqr, ge, tw.rlo);
        }
        rows_out(dq, L.dq, b, h, i0, nq, D) = gq;
        if (p.E) {
          if (dqr) rows_out(dqr, L.dqr, b, h, i0, nq, D) = gqr;
          else rows_out(dq, L.dq, b, h, i0, nq, D) += gqr;
        } else if (dqr) {
          rows_out(dqr, L.dqr, b, h, i0, nq, D).setZero();
        }
      }
    }
    if (tb.bias || tb.table) tb.fold(p, gbd, dE);
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
        const MapC<T> dO = rows_in(dout, L.dout, b, h, i0, nq, D);
        tile_logits(p, s, b, h, i0, nq, j0, nk, tr.lo[qt], tr.hi[qt]);
        tile_probs(s, lse + bh * p.t2 + i0);
        tile_grad(p, s, dO, rows_in(p.v, L.v, b, h, j0, nk, D), Drow + bh * p.t2 + i0, nq, nk);
        tile_gemm(s.P.transpose(), dO, gv, true);
        tile_gemm(s.G.transpose(), rows_in(p.q, L.q, b, h, i0, nq, D), gk, true);
      }
      rows_out(dk, L.dk, b, h, j0, nk, D) = gk;
      rows_out(dv, L.dv, b, h, j0, nk, D) = gv;
    }
  }
}

// One pass, one task per (b, h): key tiles in order and, inside, the query tiles that see each in
// order, so every visible tile's S, P, dP and ds are formed once (Q·Kᵀ, dO·Vᵀ and the window's
// QR·EUᵀ once per tile, where the two passes form each twice). dk, dv of the key tile sum in the
// task's tile buffers; dq (+ dqr) rows belong to the task (its whole (b, h)), added into tile by tile;
// the table gradients go into tb's buffers as in pass A.
template <class T>
void backward_one_pass(const FlashProblem<T>& p, const TileRange& tr, const T* lse, const T* dout, const T* Drow,
                       TaskBuffers<T>& tb, int64_t min_wave, T* dq, T* dk, T* dv, T* dqr, T* gbd, T* dE) {
  const int64_t D = p.D, BH = p.B * p.H, nqt = (p.t2 + kFlashBlockQ - 1) / kFlashBlockQ;
  const FlashLayout& L = p.layout;
  while (tb.t1 < BH) {
    tb.next_wave(BH, min_wave);
#pragma omp parallel
    {
      Scratch<T> s = make_scratch(p);
      Mat<T> gk, gv;
#pragma omp for schedule(dynamic, 1)
      for (int64_t bh = tb.t0; bh < tb.t1; ++bh) {
        const int64_t b = bh / p.H, h = bh % p.H;
        T* gb = tb.bias_of(bh);   // (nd) at δ − dlo
        T* ge = tb.table_of(bh);  // (nr, D) at row − rlo
        const TaskWindow tw = tb.window(bh);
        // dq (+ dqr) of (b, h): without dqr, the relative share goes to dq.
        T* gqr = dqr ? dqr : dq;
        const HeadLayout& Lqr = dqr ? L.dqr : L.dq;
        rows_out(dq, L.dq, b, h, 0, p.t2, D).setZero();
        if (dqr) rows_out(dqr, L.dqr, b, h, 0, p.t2, D).setZero();
        for (int64_t j0 = 0; j0 < p.t1; j0 += kFlashBlockK) {
          const int64_t nk = std::min(kFlashBlockK, p.t1 - j0);
          gk.setZero(nk, D);
          gv.setZero(nk, D);
          for (int64_t qt = 0; qt < nqt; ++qt) {
            if (p.causal && j0 > tr.hi[qt]) continue;  // the whole key tile is after every query of the tile
            const int64_t i0 = qt * kFlashBlockQ, nq = std::min(kFlashBlockQ, p.t2 - i0);
            const T* Dr = Drow + bh * p.t2 + i0;
            const MapC<T> dO = rows_in(dout, L.dout, b, h, i0, nq, D);
            tile_logits(p, s, b, h, i0, nq, j0, nk, tr.lo[qt], tr.hi[qt]);
            tile_probs(s, lse + bh * p.t2 + i0);
            tile_grad(p, s, dO, rows_in(p.v, L.v, b, h, j0, nk, D), Dr, nq, nk);
            tile_gemm(s.P.transpose(), dO, gv, true);
            tile_gemm(s.G.transpose(), rows_in(p.q, L.q, b, h, i0, nq, D), gk, true);
            tile_gemm(s.G, rows_in(p.k, L.k, b, h, j0, nk, D), rows_out(dq, L.dq, b, h, i0, nq, D), true);
            if (gb) tile_bias_grad(p, s, Dr, i0, nq, j0, nk, tw.dlo, gb);
            if (p.E && !s.uniq.empty())
              tile_rel_grad(p, s, b, h, i0, nq, j0, nk, tr.hi[qt], rows_out(gqr, Lqr, b, h, i0, nq, D), ge, tw.rlo);
          }
          rows_out(dk, L.dk, b, h, j0, nk, D) = gk;
          rows_out(dv, L.dv, b, h, j0, nk, D) = gv;
        }
      }
    }
    if (tb.bias || tb.table) tb.fold(p, gbd, dE);
  }
}

std::atomic<FlashBackward> forced_backward{FlashBackward::Auto};  // set_flash_backward

}  // namespace

void set_flash_backward(FlashBackward path) { forced_backward.store(path); }

FlashBackward flash_backward_choice(int64_t B, int64_t H) {
  const FlashBackward forced = forced_backward.load();
  if (forced != FlashBackward::Auto) return forced;
#ifdef _OPENMP
  const int64_t procs = omp_get_num_procs();  // the machine's cores, not the thread count
#else
  const int64_t procs = 1;
#endif
  return B * H >= kFlashOnePassTasksPerCore * procs ? FlashBackward::OnePass : FlashBackward::TwoPass;
}

template <class T>
void flash_backward(const FlashProblem<T>& p, const T* out, const T* lse, const T* dout, T* dq, T* dk, T* dv, T* dqr,
                    T* dE, T* dbias) {
  const int64_t D = p.D, BH = p.B * p.H, W = p.W;
  const TileRange tr = tile_ranges(p);
  const bool want_E = dE && p.E, want_b = dbias && p.bias;
  const bool one_pass = flash_backward_choice(p.B, p.H) == FlashBackward::OnePass;
  // Drow_i = dO_i · O_i (softmax backward's row term), (B, H, t2).
  std::vector<T> Drow(static_cast<size_t>(BH * p.t2));
  parallel_for(BH * p.t2, true, [&](int64_t r) {
    const int64_t b = r / p.t2 / p.H, h = r / p.t2 % p.H, i = r % p.t2;
    const T *dO = dout + p.layout.dout.at(b, h, i), *O = out + p.layout.out.at(b, h, i);
    T acc = 0;
    for (int64_t d = 0; d < D; ++d) acc += dO[d] * O[d];
    Drow[r] = acc;
  });

  // The table gradients' running sums, each added to in increasing task order: gbd (H, W) per
  // distance, dE (E_heads, R, D) per row.
  TaskBuffers<T> tb;
  tb.bias = want_b, tb.table = want_E, tb.D = D;
  tb.nqt = one_pass ? 1 : static_cast<int64_t>(tr.lo.size());
  if (want_E || want_b) tb.win = task_windows(p, tr);
  if (one_pass && !tb.win.empty()) tb.win = {union_window(tb.win)};
  std::vector<T> gbd(static_cast<size_t>(want_b ? p.H * W : 0), T(0));
  if (want_E) std::fill(dE, dE + p.E_heads * p.R * D, T(0));
#ifdef _OPENMP
  const int64_t min_wave = 4 * static_cast<int64_t>(omp_get_max_threads());
#else
  const int64_t min_wave = 1;
#endif
  if (one_pass) backward_one_pass(p, tr, lse, dout, Drow.data(), tb, min_wave, dq, dk, dv, dqr, gbd.data(), dE);
  else backward_two_pass(p, tr, lse, dout, Drow.data(), tb, min_wave, dq, dk, dv, dqr, gbd.data(), dE);

  // Fold distances into bias columns: heads in order, then distances in increasing order.
  if (want_b) {
    std::fill(dbias, dbias + p.bias_heads * p.Rb, T(0));
    for (int64_t h = 0; h < p.H; ++h) {
      T* g = dbias + (p.bias_heads == 1 ? 0 : h) * p.Rb;
      for (int64_t w = 0; w < W; ++w)
        if (p.bias_rows[w] >= 0) g[p.bias_rows[w]] += gbd[h * W + w];
    }
  }
}

template void flash_backward<float>(const FlashProblem<float>&, const float*, const float*, const float*, float*,
                                    float*, float*, float*, float*, float*);
template void flash_backward<double>(const FlashProblem<double>&, const double*, const double*, const double*,
                                     double*, double*, double*, double*, double*, double*);

}  // namespace relgrad::cpu
