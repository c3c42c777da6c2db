// Element types. Float32 is the default (as in PyTorch); Float64 is what gradient checks run in;
// Int64 holds indices; Bool holds masks (one byte per element). BFloat16 and Float16 are storage
// dtypes (core/base/half.h): tensors can hold them and be cast to and from them (.to, copies, the
// safetensors file), but kernels compute in float32/float64 only — mixed precision rounds a product's
// operands to them (autograd/autocast.h). Header-only.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

#include "core/base/error.h"
#include "core/base/half.h"

namespace relgrad {

enum class DType { Float32, Float64, Int64, Bool, BFloat16, Float16 };

inline constexpr DType kFloat32 = DType::Float32;
inline constexpr DType kFloat64 = DType::Float64;
inline constexpr DType kInt64 = DType::Int64;
inline constexpr DType kBool = DType::Bool;
inline constexpr DType kBFloat16 = DType::BFloat16;
inline constexpr DType kFloat16 = DType::Float16;

inline size_t dtype_size(DType dt) {
  switch (dt) {
    case DType::Float32: return 4;
    case DType::Float64: return 8;
    case DType::Int64: return 8;
    case DType::Bool: return 1;
    case DType::BFloat16: return 2;
    case DType::Float16: return 2;
  }
  return 0;
}

inline const char* dtype_name(DType dt) {
  switch (dt) {
    case DType::Float32: return "float32";
    case DType::Float64: return "float64";
    case DType::Int64: return "int64";
    case DType::Bool: return "bool";
    case DType::BFloat16: return "bfloat16";
    case DType::Float16: return "float16";
  }
  return "?";
}

// The floating dtypes kernels compute in. The 16-bit storage dtypes are not among them.
inline bool is_floating(DType dt) { return dt == DType::Float32 || dt == DType::Float64; }
inline bool is_16bit_float(DType dt) { return dt == DType::BFloat16 || dt == DType::Float16; }

// The C++ type of each dtype, and back.
template <class T> struct dtype_of;
template <> struct dtype_of<float> { static constexpr DType value = DType::Float32; };
template <> struct dtype_of<double> { static constexpr DType value = DType::Float64; };
template <> struct dtype_of<int64_t> { static constexpr DType value = DType::Int64; };
template <> struct dtype_of<int> { static constexpr DType value = DType::Int64; };  // stored as int64
template <> struct dtype_of<bool> { static constexpr DType value = DType::Bool; };
template <> struct dtype_of<BFloat16> { static constexpr DType value = DType::BFloat16; };
template <> struct dtype_of<Float16> { static constexpr DType value = DType::Float16; };

// dispatch_float(dt, "op", [&](auto zero) { using T = decltype(zero); ... }) calls the lambda with
// T = float or double. This, dispatch_all and dispatch_storage are the only places a dtype switch is written.
template <class F>
decltype(auto) dispatch_float(DType dt, const char* op, F&& f) {
  switch (dt) {
    case DType::Float32: return f(float{});
    case DType::Float64: return f(double{});
    default: break;
  }
  if (dt == DType::BFloat16 || dt == DType::Float16)
    throw DTypeError(detail::concat("[", op, "] expected a floating tensor (float32 or float64), got ", dtype_name(dt),
                                    ": ", dtype_name(dt), " is a storage dtype; cast it with .to(kFloat32) to compute with it"));
  throw DTypeError(detail::concat("[", op, "] expected a floating tensor (float32 or float64), got ", dtype_name(dt)));
}

template <class F>
decltype(auto) dispatch_all(DType dt, const char* op, F&& f) {
  switch (dt) {
    case DType::Float32: return f(float{});
    case DType::Float64: return f(double{});
    case DType::Int64: return f(int64_t{});
    case DType::Bool: return f(bool{});
    case DType::BFloat16:
    case DType::Float16: break;
  }
  throw DTypeError(detail::concat("[", op, "] got a ", dtype_name(dt), " tensor: ", dtype_name(dt),
                                  " is a storage dtype; cast it with .to(kFloat32) to compute with it"));
}

// dispatch_all and the two 16-bit storage types (T = BFloat16, Float16): for what only moves or
// converts elements (copies, casts, item, fill), never for arithmetic.
template <class F>
decltype(auto) dispatch_storage(DType dt, const char* op, F&& f) {
  switch (dt) {
    case DType::BFloat16: return f(BFloat16{});
    case DType::Float16: return f(Float16{});
    default: return dispatch_all(dt, op, std::forward<F>(f));
  }
}

}  // namespace relgrad
