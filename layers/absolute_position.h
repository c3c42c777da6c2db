// AbsolutePosition: the absolute position term added to the token embeddings before the first block
// (Vaswani et al. 2017, section 3.5), for TransformerConfig::absolute_position (layers/models.h).
//
//   x (B, T, C) → x + PE[first … first + T − 1]   (PE broadcast over the batch)
//
// Position of token t is first + t: first = 0 for a whole sequence, t_cached when a KV cache already
// holds the earlier tokens, so cached decoding adds the rows the full pass would.
//
//   Sinusoidal:   PE(pos, 2i) = sin(pos / 10000^(2i/C)), PE(pos, 2i+1) = cos(pos / 10000^(2i/C)), column
//                 c of PE is sin for even c and cos for odd c, with 2i = c rounded down to even. An odd C
//                 is accepted: its last column is a sine. No parameters and no buffer: the rows are
//                 computed on the fly (in double, then cast to x's dtype), so the state dict is unchanged.
//   Learned:      weight (max_positions, C) ~ N(0, 1), as Embedding initialises its table; row p is
//                 position p. A sequence reaching past max_positions is an error naming the layer.
// No embedding scale: the token embedding is not multiplied by √C before the sum (relgrad has none).
//
// forward_at places token t at an explicit position positions[t] instead (randomised positions, Ruoss
// et al. 2023: TransformerConfig::random_positions_max, layers/models.h): the rows PE[positions[t]],
// gathered from the learned table (gradients reach only those rows) or computed for the sinusoid.
#pragma once
#include <string>
#include <vector>

#include "core/base/name_table.h"
#include "core/device_cache.h"
#include "layers/module.h"

namespace relgrad {

// TransformerConfig::absolute_position (model.absolute_position): None builds no module.
enum class AbsolutePositionKind { None, Sinusoidal, Learned };
inline constexpr NameTable<AbsolutePositionKind, 3> kAbsolutePositionNames{
    {{AbsolutePositionKind::None, "none"},
     {AbsolutePositionKind::Sinusoidal, "sinusoidal"},
     {AbsolutePositionKind::Learned, "learned"}}};
// What each kind is, in a few words, for the benches' tables (as SchemeEntry::summary for the schemes).
inline const char* absolute_position_summary(AbsolutePositionKind kind) {
  switch (kind) {
    case AbsolutePositionKind::None: return "no positional term";
    case AbsolutePositionKind::Sinusoidal: return "absolute, sinusoids added (Vaswani et al.)";
    case AbsolutePositionKind::Learned: return "absolute, learned table";
  }
  return "";
}
// "none", "sinusoidal" or "learned" → the kind; else "[op] unknown absolute_position '<name>' (expected
// none, sinusoidal or learned)".
inline AbsolutePositionKind absolute_position_from_name(const std::string& name, const char* op) {
  return kAbsolutePositionNames.parse(name, op, "absolute_position");
}

// The sinusoidal table rows for positions first … first + count − 1: (count, d_model), as doubles on the
// host then converted to `options`' dtype and device.
Tensor sinusoidal_positions(int64_t first, int64_t count, int64_t d_model, TensorOptions options = {});
// The rows for arbitrary positions (each >= 0): (positions.size(), d_model), computed the same way.
Tensor sinusoidal_rows(const std::vector<int64_t>& positions, int64_t d_model, TensorOptions options = {});

class AbsolutePosition : public Module {
 public:
  // kind Sinusoidal or Learned (None builds no module: an error); `op` names the model in errors.
  AbsolutePosition(AbsolutePositionKind kind, int64_t d_model, int64_t max_positions, const char* op,
                   Generator* generator = nullptr);
  // x (B, T, C), the embeddings of tokens at positions first … first + T − 1 → (B, T, C).
  Tensor forward(const Tensor& x, int64_t first = 0) const;
  // x (B, T, C), token t at position positions[t] (int64 (T), each in [0, max_positions) for learned,
  // >= 0 for sinusoidal) → (B, T, C).
  Tensor forward_at(const Tensor& x, const Tensor& positions) const;

  AbsolutePositionKind kind;
  int64_t d_model, max_positions;
  std::string op;
  Tensor weight;  // (max_positions, C), "learned" only
  mutable LruCache<CacheKey, Tensor> sinusoid_rows{8};  // forward's rows (T, C) on x's device, by (first, T)
};

}  // namespace relgrad
