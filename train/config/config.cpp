// RunConfig from TOML / JSON / --key=value. One table of fields (train/config/config_fields.cpp)
// drives everything: parsing, type checks, printing, JSON, TOML and the help text, so a new key is
// one line there.
#include "train/config/config.h"

#include <nlohmann/json.hpp>
#include <toml++/toml.h>

#include <algorithm>
#include <set>
#include <sstream>

#include "core/base/error.h"
#include "core/file_io.h"
#include "train/config/config_fields.h"

namespace relgrad {
using namespace config_detail;

namespace {

// A string where a number or true/false belongs (lr = "1e-3" in TOML): said as such, the text shown once
// in quotes, not as the file's own quoting inside ours ('"1e-3"').
[[noreturn]] void quoted_value(const Field& f, const std::string& text, const std::string& origin) {
  throw Error("[config] " + origin + f.key + ": expected " + a_kind(f.kind) + ", got the string \"" + text +
              "\" (write it without quotes)");
}

// A leaf of a TOML or JSON config by its type there, set once checked against the key's: `text` as
// set_from_text takes it, `shown` as the file wrote it. JSON's true and false alone are "true or false".
enum class Leaf { String, Integer, Real, Boolean, Other };
void set_leaf(RunConfig& c, const Field& f, Leaf leaf, const std::string& text, const std::string& shown,
              const std::string& origin, bool json) {
  const bool number_key = f.kind == Kind::Int || f.kind == Kind::UInt || f.kind == Kind::Double;
  const bool fits = leaf == Leaf::String    ? f.kind == Kind::String
                    : leaf == Leaf::Integer ? number_key
                    : leaf == Leaf::Real    ? f.kind == Kind::Double
                    : leaf == Leaf::Boolean ? f.kind == Kind::Bool || takes_bool_words(f)
                                            : false;
  if (fits) return set_from_text(c, f, text, origin);
  const bool json_bool = json && f.kind == Kind::Bool;
  if (leaf == Leaf::String && !json_bool) quoted_value(f, text, origin);
  bad_value(f, shown, origin, "expected " + (json_bool ? std::string("true or false") : a_kind(f.kind)));
}

std::string real_text(double v) {  // every digit a double holds
  std::ostringstream s;
  s.precision(17);
  s << v;
  return s.str();
}

void set_from_json(RunConfig& c, const std::string& key, const nlohmann::json& v, const std::string& origin) {
  const Field& f = find_field(key, origin);
  const std::string shown = v.dump();
  if (v.is_string()) return set_leaf(c, f, Leaf::String, v.get<std::string>(), shown, origin, true);
  if (v.is_number_float()) return set_leaf(c, f, Leaf::Real, real_text(v.get<double>()), shown, origin, true);
  const Leaf leaf = v.is_number() ? Leaf::Integer : v.is_boolean() ? Leaf::Boolean : Leaf::Other;
  set_leaf(c, f, leaf, shown, shown, origin, true);
}

// No key has more than 3 parts (model.cross.max_length): a table or object at a 4th level is an
// unknown key, refused before recursing, so that hostile nesting (a config in a checkpoint is up to
// 100 MB, a config file up to 1 MiB: half a million levels of "a.a.a…") cannot overflow the stack or
// build quadratically long key strings. walk_json and walk_toml both call it before going down.
constexpr int kMaxKeyParts = 3;
void refuse_deeper_table(const std::string& key, const std::string& origin) {
  if (std::count(key.begin(), key.end(), '.') < kMaxKeyParts) return;
  throw Error("[config] " + origin + "unknown key '" + key + "': a table nested " +
              std::to_string(kMaxKeyParts + 1) + " or more levels deep, deeper than any key (at most " +
              std::to_string(kMaxKeyParts) +
              " parts, as in model.cross.max_length); `relgrad train --help-config` lists every key");
}

void walk_json(RunConfig& c, const nlohmann::json& node, const std::string& prefix, const std::string& origin) {
  for (auto it = node.begin(); it != node.end(); ++it) {
    std::string key = prefix.empty() ? it.key() : prefix + "." + it.key();
    if (it->is_object()) refuse_deeper_table(key, origin);
    if (it->is_object()) walk_json(c, *it, key, origin);
    else set_from_json(c, key, *it, origin);
  }
}

void walk_toml(RunConfig& c, const toml::table& table, const std::string& prefix, const std::string& origin) {
  for (const auto& [k, node] : table) {
    std::string key = prefix.empty() ? std::string(k.str()) : prefix + "." + std::string(k.str());
    if (const toml::table* sub = node.as_table()) {
      refuse_deeper_table(key, origin);
      walk_toml(c, *sub, key, origin);
      continue;
    }
    const Field& f = find_field(key, origin);
    std::ostringstream shown;
    node.visit([&](const auto& leaf) { shown << leaf; });
    const auto set = [&](Leaf leaf, const std::string& text) { set_leaf(c, f, leaf, text, shown.str(), origin, false); };
    if (auto s = node.value_exact<std::string>()) set(Leaf::String, *s);
    else if (auto i = node.value_exact<int64_t>()) set(Leaf::Integer, std::to_string(*i));
    else if (auto d = node.value_exact<double>()) set(Leaf::Real, real_text(*d));
    else if (auto b = node.value_exact<bool>()) set(Leaf::Boolean, *b ? "true" : "false");
    else set(Leaf::Other, "");
  }
}

}  // namespace

void set_config_value(RunConfig& config, const std::string& key, const std::string& value) {
  set_from_text(config, find_field(key, ""), value, "");
}

void apply_overrides(RunConfig& config, const std::vector<std::string>& args) {
  for (const std::string& arg : args) {
    std::string a = arg.rfind("--", 0) == 0 ? arg.substr(2) : arg;
    size_t eq = a.find('=');
    if (eq == std::string::npos || eq == 0)
      throw Error("[config] override '" + arg + "' is not of the form --key=value");
    set_config_value(config, a.substr(0, eq), a.substr(eq + 1));
  }
}

namespace {

// nlohmann::json keeps the last of duplicate keys without a word; TOML refuses them, and so does this
// (a config is a checkpoint's too, so one spelling of a run must mean one run). The parser callback
// sees every object open and close and every key: one set of keys per open object.
nlohmann::json parse_json_unique_keys(const std::string& text, const std::string& origin) {
  struct Open {
    std::set<std::string> keys;
    std::string path;  // the dotted key of this object ("" at the top)
    std::string last;  // its latest key, the parent part of an object opened next
  };
  std::vector<Open> open;
  using Event = nlohmann::json::parse_event_t;
  auto callback = [&](int /*depth*/, Event event, nlohmann::json& parsed) {
    if (event == Event::object_start) {
      std::string path;
      if (!open.empty())
        path = open.back().path.empty() ? open.back().last : open.back().path + "." + open.back().last;
      if (open.size() > kMaxKeyParts) path = "…";  // deeper than any key: no long paths for hostile nesting
      open.push_back({{}, path, ""});
    } else if (event == Event::object_end) {
      if (!open.empty()) open.pop_back();
    } else if (event == Event::key && !open.empty()) {
      std::string key = parsed.get<std::string>();
      if (!open.back().keys.insert(key).second)
        throw Error("[config] " + origin + ": duplicate key '" +
                    (open.back().path.empty() ? key : open.back().path + "." + key) +
                    "' (JSON keys must be unique, as in TOML: which of the values was meant?)");
      open.back().last = std::move(key);
    } else if (event == Event::array_start && !open.empty()) {
      open.back().last += "[]";  // an object inside an array is named after the array
    }
    return true;
  };
  return nlohmann::json::parse(text, callback);
}

}  // namespace

void load_config_json_text(RunConfig& config, const std::string& text, const std::string& origin) {
  nlohmann::json doc;
  try {
    doc = parse_json_unique_keys(text, origin);
  } catch (const nlohmann::json::exception& e) {
    throw Error("[config] " + origin + ": not valid JSON: " + e.what());
  }
  if (!doc.is_object()) throw Error("[config] " + origin + ": the top level must be an object");
  walk_json(config, doc, "", origin + ": ");
}

namespace {

// toml++ recurses once per level of nesting, both while parsing and while freeing the tree: half a
// million levels of "a.a.a… = 1" (a 1 MiB file) overflow the stack. Every level is a '.', '[' or '{'
// outside strings and comments, and a config relgrad accepts has few of them (each of its ~80 keys
// has at most 3 parts and one value), so a file with more than kMaxTomlNesting of them is refused
// before toml++ sees it, naming the line where the count ran over.
constexpr int64_t kMaxTomlNesting = 1000;
void check_toml_nesting(const std::string& text, const std::string& path) {
  int64_t marks = 0, line = 1;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '\n') ++line;
    if (c == '#') {  // a comment runs to the end of the line
      while (i + 1 < text.size() && text[i + 1] != '\n') ++i;
    } else if (c == '"' || c == '\'') {
      const bool multi = text.compare(i, 3, std::string(3, c)) == 0;
      i += multi ? 3 : 1;
      for (; i < text.size(); ++i) {
        if (text[i] == '\n') {
          ++line;
          if (!multi) break;  // a one-line string ends with its line (toml++ refuses it there)
        }
        if (c == '"' && text[i] == '\\') { ++i; if (i < text.size() && text[i] == '\n') ++line; continue; }
        if (text[i] != c) continue;
        if (!multi) break;
        if (text.compare(i, 3, std::string(3, c)) == 0) {
          i += 2;
          while (i + 1 < text.size() && text[i + 1] == c) ++i;  // the content may end in 1 or 2 quotes
          break;
        }
      }
    } else if ((c == '.' || c == '[' || c == '{') && ++marks > kMaxTomlNesting) {
      throw Error("[config] " + path + ":" + std::to_string(line) + ": more than " +
                  std::to_string(kMaxTomlNesting) +
                  " '.', '[' and '{' outside strings and comments: nesting deeper than any config needs "
                  "(keys have at most 3 parts, as in model.cross.max_length), refused before parsing");
    }
  }
}

}  // namespace

bool is_config_key(const std::string& key) {
  for (const Field& f : fields())
    if (key == f.key) return true;
  return false;
}

std::string read_config_file(const std::string& path) { return read_file(path, "config", 1u << 20); }

void load_config_file(RunConfig& config, const std::string& path) {
  load_config_text(config, read_config_file(path), path);
}

void load_config_text(RunConfig& config, const std::string& text, const std::string& path) {
  size_t first = text.find_first_not_of(" \t\r\n");
  bool json = path.size() >= 5 && path.compare(path.size() - 5, 5, ".json") == 0;
  if (json || (first != std::string::npos && text[first] == '{')) {
    load_config_json_text(config, text, path);
    return;
  }
  check_toml_nesting(text, path);
  toml::table table;
  try {
    table = toml::parse(text, path);
  } catch (const toml::parse_error& e) {
    std::ostringstream where;
    where << e.source().begin.line << ":" << e.source().begin.column;
    throw Error("[config] " + path + ":" + where.str() + ": not valid TOML: " + std::string(e.description()));
  }
  walk_toml(config, table, "", path + ": ");
}

std::string config_to_json(const RunConfig& config) {
  nlohmann::ordered_json root = nlohmann::ordered_json::object();
  for (const Field& f : fields()) {
    nlohmann::ordered_json* node = &root;
    std::string key = f.key;
    size_t start = 0, dot;
    while ((dot = key.find('.', start)) != std::string::npos) {
      node = &(*node)[key.substr(start, dot - start)];
      start = dot + 1;
    }
    std::string leaf = key.substr(start);
    std::string text = f.get(config);
    switch (f.kind) {
      case Kind::Int: (*node)[leaf] = std::stoll(text); break;
      case Kind::UInt: (*node)[leaf] = std::stoull(text); break;
      case Kind::Double: (*node)[leaf] = std::stod(text); break;
      case Kind::Bool: (*node)[leaf] = text == "true"; break;
      case Kind::String: (*node)[leaf] = text; break;
    }
  }
  return root.dump(2);
}

std::string config_to_toml(const RunConfig& config) {
  std::string out, table;
  for (const Field& f : fields()) {
    std::string key = f.key;
    size_t dot = key.find_last_of('.');
    std::string section = key.substr(0, dot), leaf = key.substr(dot + 1);
    if (section != table) {
      out += (out.empty() ? "[" : "\n[") + section + "]\n";
      table = section;
    }
    std::string text = f.get(config);
    if (f.kind == Kind::String) {
      // A TOML basic string is a JSON string, except that TOML also refuses a raw DEL (found by fuzz_config_json).
      text = nlohmann::json(text).dump();
      for (size_t at; (at = text.find('\x7f')) != std::string::npos;) text.replace(at, 1, "\\u007F");
    } else if (f.kind == Kind::Double && text.find_first_of(".eEn") == std::string::npos) text += ".0";
    out += leaf + " = " + text + "\n";
  }
  return out;
}

std::string config_help() {
  RunConfig d = RunConfig::defaults();
  std::string out;
  for (const Field& f : fields()) {
    std::string line = f.key + " (" + kind_name(f.kind);
    if (!f.choices.empty()) {
      line += ": ";
      for (size_t i = 0; i < f.choices.size(); ++i) line += (i ? "|" : "") + f.choices[i];
    }
    line += ") = " + f.get(d) + "  — " + f.help + "\n";
    out += line;
  }
  return out;
}

}  // namespace relgrad