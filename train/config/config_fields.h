// The run config's key table: one Field per settable key (its type, its allowed words, where it lives
// in RunConfig), built in train/config/config_fields.cpp, with the lookup and the text conversions
// that train/config/config.cpp's TOML, JSON, --key=value, printing and help all go through. Internal
// to the config wing.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "train/config/config.h"

namespace relgrad::config_detail {

enum class Kind { Int, UInt, Double, Bool, String };

// One settable key: its type, the allowed words for string keys, and where it lives in RunConfig: a
// member (where), or an enum read and written by name (get, set; where is null).
struct Field {
  std::string key;
  Kind kind;
  const char* help;
  std::vector<std::string> choices;  // string keys only; empty = any string
  std::function<void*(RunConfig&)> where;
  std::function<std::string(const RunConfig&)> get = nullptr;         // enum keys: the value's name
  std::function<void(RunConfig&, const std::string&)> set = nullptr;  // enum keys: one of choices
};

// Every key, in the order the config prints them; data.source's and the schemes' choices follow their
// registries (a program may register a source or a scheme after the table is built).
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
