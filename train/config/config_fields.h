// The run config's key table: one Field per settable key (its type, its allowed words, where it lives
// in RunConfig), built in train/config/config_fields.cpp, with the lookup and the text conversions
// that train/config/config.cpp's TOML, JSON, --key=value, printing and help all go through. Internal
// to the config wing.
#pragma once
#include <functional>
#include <string>
#include <type_traits>
#include <vector>

#include "core/base/name_table.h"
#include "train/config/config.h"

namespace relgrad::config_detail {

enum class Kind { Int, UInt, Double, Bool, String };

// One settable key: its type, the allowed words for string keys, and its value read and written as
// text: a member of RunConfig (member()), an enum by name (choice()), a stored knob (layers/schemes.h)
// or a stored data key (stored_data_field), each set from a text set_from_text has checked.
struct Field {
  std::string key;
  Kind kind;
  std::string help;
  std::vector<std::string> choices;  // string keys only; empty = any string
  std::function<std::string(const RunConfig&)> get;         // the value's text, as the config prints it
  std::function<void(RunConfig&, const std::string&)> set;  // from a checked text
};

// A value as text, and back from a checked text: the forms get and set exchange.
std::string shortest(double v);  // the shortest decimal that reads back as the same double
inline std::string value_text(int64_t v) { return std::to_string(v); }
inline std::string value_text(uint64_t v) { return std::to_string(v); }
inline std::string value_text(double v) { return shortest(v); }
inline std::string value_text(bool v) { return v ? "true" : "false"; }
inline std::string value_text(const std::string& v) { return v; }
inline void read_text(const std::string& t, int64_t& v) { v = std::stoll(t); }
inline void read_text(const std::string& t, uint64_t& v) { v = std::stoull(t); }
inline void read_text(const std::string& t, double& v) { v = std::stod(t); }
inline void read_text(const std::string& t, bool& v) { v = t == "true"; }
inline void read_text(const std::string& t, std::string& v) { v = t; }

// The value `at` points to, of type T, as a Field's get and set.
template <class T>
void bind(Field& f, std::function<void*(RunConfig&)> at) {
  f.get = [at](const RunConfig& c) { return value_text(*static_cast<T*>(at(const_cast<RunConfig&>(c)))); };
  f.set = [at](RunConfig& c, const std::string& v) { read_text(v, *static_cast<T*>(at(c))); };
}

// A key holding a member of a member of RunConfig, its kind following the member's type:
// member("optim.lr", "peak learning rate", &RunConfig::optim, &OptimConfig::lr).
template <class S, class T>
Field member(std::string key, std::string help, S RunConfig::*outer, T S::*inner, std::vector<std::string> choices = {}) {
  constexpr Kind kind = std::is_same_v<T, int64_t>    ? Kind::Int
                        : std::is_same_v<T, uint64_t> ? Kind::UInt
                        : std::is_same_v<T, double>   ? Kind::Double
                        : std::is_same_v<T, bool>     ? Kind::Bool
                                                      : Kind::String;
  Field f{std::move(key), kind, std::move(help), std::move(choices), nullptr, nullptr};
  bind<T>(f, [outer, inner](RunConfig& c) -> void* { return &((c.*outer).*inner); });
  return f;
}

// A key holding an enum with a name table (core/base/name_table.h): its choices are the table's names,
// so each list is written once, beside its enum. `member` gives the enum's place in a RunConfig.
template <class E, size_t N, class Member>
Field choice(std::string key, const char* help, const NameTable<E, N>& names, Member member) {
  auto get = [member, &names](const RunConfig& c) -> std::string { return names.name(member(const_cast<RunConfig&>(c))); };
  auto set = [member, &names](RunConfig& c, const std::string& v) { member(c) = *names.find(v); };
  return {std::move(key), Kind::String, help, names.names(), get, set};
}
// choice() for a member of a member: choice2(key, help, names, &RunConfig::model, &TransformerConfig::norm).
template <class E, size_t N, class S>
Field choice2(std::string key, const char* help, const NameTable<E, N>& names, S RunConfig::*outer, E S::*inner) {
  return choice(std::move(key), help, names, [outer, inner](RunConfig& c) -> E& { return (c.*outer).*inner; });
}

// A key of a data source registered from outside train/config, for its DataSource::fields():
// data.<name> of `kind`, kept by name in DataConfig::stored, `default_text` until set ("4", "0.5",
// "true", a word of `choices`); set_from_text checks its type and words, the source's check_keys the
// rest. data_key_text and its kin (train/config/source.h) read it.
Field stored_data_field(const std::string& name, Kind kind, std::string help, std::string default_text,
                        std::vector<std::string> choices = {});
// Every key, in the order the config prints them; data.source's and the schemes' choices and the
// sources' and schemes' own keys follow their registries (a program may register a source or a scheme
// after the table is built).
const std::vector<Field>& fields();
// The field of `key`, or an Error naming `origin` and the nearest keys.
const Field& find_field(const std::string& key, const std::string& origin);
// A string key whose words include true and false also takes the booleans.
bool takes_bool_words(const Field& f);
// Sets `f` from its text form (TOML/--key=value value), checking the type and the allowed words.
void set_from_text(RunConfig& c, const Field& f, const std::string& value, const std::string& origin);
// Error("[config] <origin><key>: <why>, got '<value>'").
[[noreturn]] void bad_value(const Field& f, const std::string& value, const std::string& origin, const std::string& why);
// Edits from a to b (for "did you mean"), with `swaps` a swap of two neighbours counting as one.
size_t edit_distance(const std::string& a, const std::string& b, bool swaps = false);
const char* kind_name(Kind k);  // "integer", "number", ...
std::string a_kind(Kind k);     // "an integer", "a number", ...

}  // namespace relgrad::config_detail
