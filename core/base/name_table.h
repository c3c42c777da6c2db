// The names of a closed set: one table per enum class, {value, name} in the order users see them, so
// that printing a value, parsing a name, a config key's choices (train/config/config.cpp) and an
// error's list of the valid names all come from one list. A set with a table declares it beside the
// enum:
//   enum class NormKind { LayerNorm, RMSNorm };
//   inline constexpr NameTable<NormKind, 2> kNormNames{{{NormKind::LayerNorm, "layer_norm"},
//                                                        {NormKind::RMSNorm, "rms_norm"}}};
#pragma once
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/base/error.h"

namespace relgrad {

template <class E, size_t N>
struct NameTable {
  struct Entry {
    E value;
    const char* name;
  };
  Entry entries[N];

  const char* name(E value) const {
    for (const Entry& e : entries)
      if (e.value == value) return e.name;
    return "?";  // a value cast from an integer outside the set
  }
  std::optional<E> find(std::string_view name) const {
    for (const Entry& e : entries)
      if (name == e.name) return e.value;
    return std::nullopt;
  }
  std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (const Entry& e : entries) out.emplace_back(e.name);
    return out;
  }
  // "a, b, c" (sep between every two), or with `last` "a, b or c".
  std::string list(const char* sep = ", ", const char* last = nullptr) const {
    std::string out;
    for (size_t i = 0; i < N; ++i) out += std::string(i == 0 ? "" : i + 1 == N && last ? last : sep) + entries[i].name;
    return out;
  }
  // The value named `name`, else relgrad::Error "[op] unknown <what> '<name>' (expected a, b or c)".
  E parse(const std::string& name, const char* op, const char* what) const {
    std::optional<E> v = find(name);
    RG_CHECK(v.has_value(), op, "unknown ", what, " '", name, "' (expected ", list(", ", " or "), ")");
    return *v;
  }
};

}  // namespace relgrad
