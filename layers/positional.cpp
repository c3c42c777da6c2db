#include "layers/positional.h"

#include <algorithm>
#include <cstring>
#include <limits>

namespace relgrad {

CacheKey geometry_key(const AttentionGeometry& g, std::vector<int64_t> settings, DType dtype, Device device) {
  CacheKey k{std::move(settings), dtype, device};
  k.values.insert(k.values.end(), {g.t2, g.t1, int64_t(g.causal), int64_t(g.alignment)});
  if (g.query_positions.defined()) {  // by value: explicit positions are not a function of the shape
    const std::vector<int64_t> pi = copy_as(g.query_positions, TensorOptions(kInt64)).to_vector<int64_t>();
    k.values.push_back(int64_t(pi.size()));
    k.values.insert(k.values.end(), pi.begin(), pi.end());
  } else {
    k.values.push_back(-1);  // no explicit positions
  }
  return k;
}

int64_t key_bits(double v) {
  int64_t bits = 0;
  std::memcpy(&bits, &v, sizeof bits);
  return bits;
}

namespace {
LruCache<CacheKey, RelativeMap>& relative_maps() {
  static auto* c = new LruCache<CacheKey, RelativeMap>(32);  // never destroyed: it holds device memory
  return *c;
}
}  // namespace

const LruCache<CacheKey, RelativeMap>& relative_map_cache() { return relative_maps(); }

RelativeMap cached_relative_map(const AttentionGeometry& g, const RelativeIndexOptions& o, Device device, bool trim) {
  AttentionGeometry at = g;  // the map reads π(i) from the options, causality from the options
  at.query_positions = o.query_positions;
  at.alignment = o.alignment;
  at.causal = o.causal;
  CacheKey key = geometry_key(at, {o.max_past, o.max_future, int64_t(o.out_of_range), int64_t(trim)}, kInt64, device);
  return relative_maps().get(key, [&] {
    RelativeMap m;
    Tensor C = relative_index(g.t2, g.t1, o);  // (t2, t1) on the host, fresh and contiguous
    m.rows = o.table_size();
    if (trim) {
      // Multiply only the rows some (query, key) pair reads: a table sized for t3 = 512 has 1,023
      // rows, of which a batch of length t reaches about 2t (a causal layer about t).
      int64_t* c = C.data_ptr<int64_t>();
      int64_t lo = m.rows, hi = -1;
      for (int64_t k = 0; k < C.numel(); ++k)
        if (c[k] >= 0) lo = std::min(lo, c[k]), hi = std::max(hi, c[k]);
      if (hi < 0) lo = hi = 0;  // no pair reads the table: one row keeps the shapes valid
      for (int64_t k = 0; k < C.numel(); ++k)
        if (c[k] >= 0) c[k] -= lo;
      m.first_row = lo;
      m.rows = hi - lo + 1;
      std::vector<int64_t> wlo(static_cast<size_t>(g.t2), 0), whi(static_cast<size_t>(g.t2), 0);
      for (int64_t i = 0; i < g.t2; ++i) {
        int64_t rlo = m.rows, rhi = -1;
        for (int64_t j = 0; j < g.t1; ++j)
          if (c[i * g.t1 + j] >= 0) rlo = std::min(rlo, c[i * g.t1 + j]), rhi = std::max(rhi, c[i * g.t1 + j]);
        if (rhi >= 0) wlo[i] = rlo, whi[i] = rhi + 1;
      }
      m.window = MatrixWindow::make(g.t2, m.rows, std::move(wlo), std::move(whi), "relative_index");
    }
    m.index = C.to(device);
    return m;
  });
}

int64_t relative_row(int64_t delta, const RelativeIndexOptions& o) {
  const int64_t R = o.table_size();
  const int64_t row = delta + o.max_past;
  if (o.causal && delta > 0) return -1;
  if (row >= 0 && row < R) return row;
  return o.out_of_range == OutOfRange::Clip ? (row < 0 ? 0 : R - 1) : -1;
}

Tensor fused_table_rows(const RelativeIndexOptions& o, const FusedCall& call, int64_t t1, const char* scheme) {
  const std::vector<int64_t>& pi = call.positions;
  if (o.out_of_range == OutOfRange::Error) {
    for (size_t i = 0; i < pi.size(); ++i) {
      const int64_t lo = -pi[i], hi = o.causal ? std::min<int64_t>(0, t1 - 1 - pi[i]) : t1 - 1 - pi[i];
      RG_CHECK_T(IndexError, hi < lo || (lo >= -o.max_past && hi <= o.max_future), scheme, "query ", i,
                 " (position ", pi[i], ") reaches relative positions [", lo, ", ", hi,
                 "], outside the table's range [", -o.max_past, ", ", o.max_future,
                 "] under the 'error' policy; use a longer table or the clip or zero policy");
    }
  }
  std::vector<int64_t> rows(static_cast<size_t>(call.width));
  for (int64_t w = 0; w < call.width; ++w) rows[w] = relative_row(call.min_delta + w, o);
  return from_vector(rows, {call.width});
}

std::vector<double> host_values(const Tensor& t) {
  return t.to(Device::cpu()).to(kFloat64).contiguous().to_vector<double>();
}

std::vector<std::vector<double>> mean_by_delta(const ResponseInput& in, const Tensor& term, int64_t reach,
                                               double scale) {
  const int64_t B = term.size(0), H = term.size(1), t2 = term.size(2), t1 = term.size(3);
  std::vector<double> v = host_values(term);
  std::vector<std::vector<double>> out(static_cast<size_t>(H));
  for (int64_t h = 0; h < H; ++h) {
    std::vector<double> sum(static_cast<size_t>(2 * reach + 1), 0.0);
    std::vector<int64_t> count(sum.size(), 0);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t i = 0; i < t2; ++i) {
        if (!in.query_valid[b * t2 + i]) continue;
        for (int64_t j = 0; j < t1; ++j) {
          const int64_t delta = j - in.positions[i];
          if (!in.key_valid[b * t1 + j] || (in.causal && delta > 0) || std::abs(delta) > reach) continue;
          sum[delta + reach] += v[((b * H + h) * t2 + i) * t1 + j] * scale;
          ++count[delta + reach];
        }
      }
    for (size_t n = 0; n < sum.size(); ++n)
      out[h].push_back(count[n] > 0 ? sum[n] / static_cast<double>(count[n]) : std::numeric_limits<double>::quiet_NaN());
  }
  return out;
}

std::vector<double> mean_query(const ResponseInput& in) {
  const int64_t B = in.q.size(0), H = in.q.size(1), t2 = in.q.size(2), D = in.q.size(3);
  std::vector<double> q = host_values(in.q), mean(static_cast<size_t>(H * D), 0.0);
  int64_t n = 0;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t i = 0; i < t2; ++i) {
      if (!in.query_valid[b * t2 + i]) continue;
      ++n;
      for (int64_t h = 0; h < H; ++h)
        for (int64_t d = 0; d < D; ++d) mean[h * D + d] += q[((b * H + h) * t2 + i) * D + d];
    }
  for (double& m : mean) m = n > 0 ? m / static_cast<double>(n) : std::numeric_limits<double>::quiet_NaN();
  return mean;
}

std::vector<std::vector<double>> table_response(const ResponseInput& in, const Tensor& table, int64_t table_heads,
                                                const RelativeIndexOptions& o, double scale, int64_t reach) {
  const int64_t H = in.q.size(1), D = in.q.size(3), rows = o.table_size();
  std::vector<double> qbar = mean_query(in), e = host_values(table);
  std::vector<std::vector<double>> out(static_cast<size_t>(H), std::vector<double>(static_cast<size_t>(2 * reach + 1)));
  for (int64_t h = 0; h < H; ++h) {
    const double* eh = e.data() + (table_heads > 0 ? h * rows * D : 0);
    for (int64_t n = 0; n <= 2 * reach; ++n) {
      const int64_t delta = n - reach, r = relative_row(delta, o);
      // Off an Error table the model would refuse the pair: undefined, not 0.
      const bool refused = r < 0 && o.out_of_range == OutOfRange::Error && !(o.causal && delta > 0);
      double s = refused ? std::numeric_limits<double>::quiet_NaN() : 0.0;
      for (int64_t d = 0; r >= 0 && d < D; ++d) s += qbar[h * D + d] * eh[r * D + d];
      out[h][n] = s * scale;
    }
  }
  return out;
}

std::string signed_offset_text(int64_t delta) {
  if (delta == 0) return "0";
  return (delta < 0 ? "−" : "+") + std::to_string(delta < 0 ? -delta : delta);
}

std::string offsets_text(const std::vector<int64_t>& deltas) {
  const std::string first = signed_offset_text(deltas.front());
  return deltas.size() == 1 ? first : first + " … " + signed_offset_text(deltas.back());
}

}  // namespace relgrad
