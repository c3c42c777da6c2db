// relgrad::Error and the RG_CHECK macro: every failure in the library is an exception whose
// message starts with the op's name in brackets, e.g. "[matmul] inner dimensions differ: (2,3) @ (4,5)".
// The library never calls exit() or abort(). This header includes nothing from relgrad, so every
// folder (cuda/ included) may use it.
#pragma once
#include <sstream>
#include <stdexcept>
#include <string>

namespace relgrad {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};
// Subclasses let callers catch one family; the message format is the same.
class ShapeError : public Error { using Error::Error; };
class DTypeError : public Error { using Error::Error; };
class DeviceError : public Error { using Error::Error; };
class IndexError : public Error { using Error::Error; };
// A device (the CPU's memory or a GPU's) could not hold a requested block. The message names the
// bytes requested, the bytes held, and what to reduce. `relgrad` exits with code 4 on it.
class OutOfMemoryError : public DeviceError { using DeviceError::DeviceError; };
// A NaN or Inf where training cannot go on: a loss, a gradient, an updated parameter, or an op's
// output under anomaly detection (autograd/grad_mode.h). `relgrad train` exits with code 3 on it.
class NonFiniteError : public Error { using Error::Error; };

namespace detail {
template <class... Args>
std::string concat(const Args&... args) {
  std::ostringstream out;
  (out << ... << args);
  return out.str();
}
}  // namespace detail

}  // namespace relgrad

// RG_CHECK(cond, "op", "message pieces", ...): throws relgrad::Error("[op] message pieces...").
#define RG_CHECK(cond, op, ...) \
  do { if (!(cond)) throw ::relgrad::Error(::relgrad::detail::concat("[", op, "] ", __VA_ARGS__)); } while (0)
#define RG_CHECK_T(ErrorType, cond, op, ...) \
  do { if (!(cond)) throw ::relgrad::ErrorType(::relgrad::detail::concat("[", op, "] ", __VA_ARGS__)); } while (0)
