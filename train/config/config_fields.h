// The run config's key table: one Field per settable key (its type, its allowed words, where it lives
// in RunConfig), built in train/config/config_fields.cpp, with the lookup and the text conversions
// that train/config/config.cpp's TOML, JSON, --key=value, printing and help all go through. Internal
// to the config wing.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "core/base/name_table.h"
#include "train/config/config.h"

namespace relgrad::config_detail {

enum class Kind { Int, UInt, Double, Bool, String };

// One settable key: its type, the allowed words for string keys, and where it lives in RunConfig: a
// member (where), or a value read and written by its text (get, set; where is null): an enum by name,
// a stored scheme knob (layers/schemes.h) in the text set_from_text has checked.
struct Field {
  std::string key;
  Kind kind;
  std::string help;
  std::vector<std::string> choices;  // string keys only; empty = any string
  std::function<void*(RunConfig&)> where;
  std::function<std::string(const RunConfig&)> get = nullptr;         // without where: the value's text
  std::function<void(RunConfig&, const std::string&)> set = nullptr;  // without where: a checked text
};

// Where a member of RunConfig lives: at(&RunConfig::model_type); a member of a member:
// at2(&RunConfig::optim, &OptimConfig::lr).
template <class T>
std::function<void*(RunConfig&)> at(T RunConfig::*member) {
  return [member](RunConfig& c) -> void* { return &(c.*member); };
}
template <class S, class T>
std::function<void*(RunConfig&)> at2(S RunConfig::*outer, T S::*inner) {
  return [outer, inner](RunConfig& c) -> void* { return &((c.*outer).*inner); };
}

// A key holding an enum with a name table (core/base/name_table.h): its choices are the table's names,
// so each list is written once, beside its enum. `member` gives the enum's place in a RunConfig.
template <class E, size_t N, class Member>
Field choice(std::string key, const char* help, const NameTable<E, N>& names, Member member) {
  auto get = [member, &names](const RunConfig& c) -> std::string { return names.name(member(const_cast<RunConfig&>(c))); };
  auto set = [member, &names](RunConfig& c, const std::string& v) { member(c) = *names.find(v); };
  return {std::move(key), Kind::String, help, names.names(), nullptr, get, set};
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
// The value of `f` in its text form, as the config prints it.
std::string get_text(const RunConfig& config, const Field& f);
// Error("[config] <origin><key>: <why>, got '<value>'").
[[noreturn]] void bad_value(const Field& f, const std::string& value, const std::string& origin, const std::string& why);
const char* kind_name(Kind k);  // "integer", "number", ...
std::string a_kind(Kind k);     // "an integer", "a number", ...

}  // namespace relgrad::config_detail
