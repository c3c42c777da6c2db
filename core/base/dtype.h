// Element types. Float32 is the default (as in PyTorch); Float64 is what gradient checks run in;
// Int64 holds indices; Bool holds masks (one byte per element). Header-only, no relgrad includes.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/base/error.h"

namespace relgrad {

enum class DType { Float32, Float64, Int64, Bool };

inline constexpr DType kFloat32 = DType::Float32;
inline constexpr DType kFloat64 = DType::Float64;
inline constexpr DType kInt64 = DType::Int64;
inline constexpr DType kBool = DType::Bool;

inline size_t dtype_size(DType dt) {
  switch (dt) {
    case DType::Float32: return 4;
    case DType::Float64: return 8;
    case DType::Int64: return 8;
    case DType::Bool: return 1;
  }
  return 0;
}

inline const char* dtype_name(DType dt) {
  switch (dt) {
    case DType::Float32: return "float32";
    case DType::Float64: return "float64";
    case DType::Int64: return "int64";
    case DType::Bool: return "bool";
  }
  return "?";
}

inline bool is_floating(DType dt) { return dt == DType::Float32 || dt == DType::Float64; }

// The C++ type of each dtype, and back.
template <class T> struct dtype_of;
template <> struct dtype_of<float> { static constexpr DType value = DType::Float32; };
template <> struct dtype_of<double> { static constexpr DType value = DType::Float64; };
template <> struct dtype_of<int64_t> { static constexpr DType value = DType::Int64; };
template <> struct dtype_of<int> { static constexpr DType value = DType::Int64; };  // stored as int64
template <> struct dtype_of<bool> { static constexpr DType value = DType::Bool; };

// dispatch_float(dt, "op", [&](auto zero) { using T = decltype(zero); ... }) calls the lambda with
// T = float or double. This and dispatch_all are the only places a dtype switch is written.
template <class F>
decltype(auto) dispatch_float(DType dt, const char* op, F&& f) {
  switch (dt) {
    case DType::Float32: return f(float{});
    case DType::Float64: return f(double{});
    default: break;
  }
  throw DTypeError(detail::concat("[", op, "] expected a floating tensor (float32 or float64), got ", dtype_name(dt)));
}

template <class F>
decltype(auto) dispatch_all(DType dt, const char* op, F&& f) {
  switch (dt) {
    case DType::Float32: return f(float{});
    case DType::Float64: return f(double{});
    case DType::Int64: return f(int64_t{});
    case DType::Bool: return f(bool{});
  }
  throw DTypeError(detail::concat("[", op, "] unknown dtype"));
}

}  // namespace relgrad
