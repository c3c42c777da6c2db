#include "layers/schemes.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>

namespace relgrad {

// Each scheme's entry, beside its class (layers/<family>.cpp).
SchemeEntry seed_scheme();
SchemeEntry huang_scheme();
SchemeEntry shaw_scheme();
SchemeEntry t5_scheme();
SchemeEntry alibi_scheme();
SchemeEntry rope_scheme();
SchemeEntry transformer_xl_scheme();
SchemeEntry xpos_scheme();
SchemeEntry p_rope_scheme();
SchemeEntry pope_scheme();
SchemeEntry cope_scheme();
SchemeEntry fox_scheme();
SchemeEntry stick_breaking_scheme();
SchemeEntry kerple_scheme();
SchemeEntry sandwich_scheme();
SchemeEntry dynamic_bias_scheme();
SchemeEntry fire_scheme();

namespace {

SchemeEntry none_scheme() {
  SchemeEntry e{"none", {}, nullptr};
  e.summary = "no positional term";
  return e;
}

// One line per scheme, in the order the config and the benches list them: the first zoo, the rotary
// family (layers/rotary_variants.h), content-dependent positions (layers/contextual.h), the
// distance-bias family (layers/distance_bias.h) and FIRE (layers/fire.h).
std::vector<SchemeEntry>& registry() {
  static std::vector<SchemeEntry> r = {
      none_scheme(),         seed_scheme(),  huang_scheme(), shaw_scheme(),    t5_scheme(),
      alibi_scheme(),        rope_scheme(),  transformer_xl_scheme(),          xpos_scheme(),
      p_rope_scheme(),       pope_scheme(),  cope_scheme(),  fox_scheme(),     stick_breaking_scheme(),
      kerple_scheme(),       sandwich_scheme(), dynamic_bias_scheme(),         fire_scheme(),
  };
  return r;
}

// How many entries the list above holds (taken before register_scheme adds any).
size_t builtin_count() {
  static const size_t n = registry().size();
  return n;
}

}  // namespace

const std::vector<SchemeEntry>& positional_schemes() { return registry(); }

Placement placement(const SchemeEntry& entry, bool causal, bool cross) {
  if (entry.causal_only && !causal) return Placement::NeedsCausal;
  if (entry.self_only && cross) return Placement::SelfOnly;
  return Placement::Allowed;
}

const SchemeEntry* find_scheme(const std::string& name) {
  for (const SchemeEntry& e : registry())
    if (e.name == name) return &e;
  return nullptr;
}

std::string scheme_names_text() {
  const auto& r = registry();
  std::string out;
  for (size_t i = 0; i < r.size(); ++i) out += (i == 0 ? "" : i + 1 == r.size() ? " or " : ", ") + r[i].name;
  return out;
}

// The declaration of the knob `name` among the registered schemes; null when none declares it.
static const SchemeKnob* find_knob(const std::string& name) {
  for (const SchemeEntry& e : registry())
    for (const SchemeKnob& k : e.knobs)
      if (k.name == name) return &k;
  return nullptr;
}

void register_scheme(SchemeEntry entry) {
  RG_CHECK(!entry.name.empty(), "register_scheme", "a scheme needs a name");
  RG_CHECK(!find_scheme(entry.name), "register_scheme", "a scheme named '", entry.name, "' is registered already");
  for (const SchemeKnob& k : entry.knobs) {
    RG_CHECK(!k.name.empty() && k.name != "scheme", "register_scheme", entry.name, ": a knob needs a name other than 'scheme'");
    RG_CHECK(!find_knob(k.name), "register_scheme", entry.name, ": the knob '", k.name,
             "' is declared already (name it in options to read it)");
    RG_CHECK(k.where || (k.get && k.set) || !k.default_text.empty(), "register_scheme", entry.name, ": the knob '",
             k.name, "' has no place to keep its value");
  }
  builtin_count();
  registry().push_back(std::move(entry));
}

SchemeKnob SchemeKnob::member(std::string name, std::string help, int64_t PositionalConfig::*m) {
  return {std::move(name), KnobKind::Int, std::move(help), {}, [m](PositionalConfig& p) -> void* { return &(p.*m); }};
}
SchemeKnob SchemeKnob::member(std::string name, std::string help, double PositionalConfig::*m) {
  return {std::move(name), KnobKind::Double, std::move(help), {}, [m](PositionalConfig& p) -> void* { return &(p.*m); }};
}
SchemeKnob SchemeKnob::member(std::string name, std::string help, bool PositionalConfig::*m) {
  return {std::move(name), KnobKind::Bool, std::move(help), {}, [m](PositionalConfig& p) -> void* { return &(p.*m); }};
}
SchemeKnob SchemeKnob::stored(std::string name, KnobKind kind, std::string help, std::string default_text,
                              std::vector<std::string> choices) {
  SchemeKnob k{std::move(name), kind, std::move(help), std::move(choices)};
  k.default_text = std::move(default_text);
  return k;
}

std::string knob_text(const PositionalConfig& p, const std::string& name) {
  const SchemeKnob* k = find_knob(name);
  RG_CHECK(k && !k->where && !k->get, "knob", "no registered scheme stores a knob named '", name, "'");
  auto it = p.knobs.find(name);
  return it == p.knobs.end() ? k->default_text : it->second;
}

// The config checks a stored knob's text when it is set (train/config/config_fields.cpp); a default that
// does not read back is the declaring program's error.
int64_t knob_int(const PositionalConfig& p, const std::string& name) {
  const std::string v = knob_text(p, name);
  errno = 0;
  char* end = nullptr;
  const long long n = std::strtoll(v.c_str(), &end, 10);
  RG_CHECK(!v.empty() && *end == '\0' && errno == 0, "knob", name, " holds '", v, "', not an integer");
  return n;
}
double knob_double(const PositionalConfig& p, const std::string& name) {
  const std::string v = knob_text(p, name);
  char* end = nullptr;
  const double x = std::strtod(v.c_str(), &end);
  RG_CHECK(!v.empty() && *end == '\0', "knob", name, " holds '", v, "', not a number");
  return x;
}
bool knob_bool(const PositionalConfig& p, const std::string& name) {
  const std::string v = knob_text(p, name);
  RG_CHECK(v == "true" || v == "false", "knob", name, " holds '", v, "', not true or false");
  return v == "true";
}

bool has_positional_term(const PositionalConfig& p) {
  const SchemeEntry* e = find_scheme(p.scheme);
  return e && e->make;
}

bool scheme_reads(const PositionalConfig& p, const std::string& knob) {
  const SchemeEntry* e = find_scheme(p.scheme);
  return e && std::find(e->options.begin(), e->options.end(), knob) != e->options.end();
}

PositionalConfig fitted(PositionalConfig p, const SchemeFit& fit) {
  const SchemeEntry* e = find_scheme(p.scheme);
  RG_CHECK(e, "fitted", "unknown positional scheme '", p.scheme, "' (expected ", scheme_names_text(), ")");
  if (e->fit) e->fit(p, fit);
  return p;
}

void unregister_scheme(const std::string& name) {
  auto& r = registry();
  for (size_t i = builtin_count(); i < r.size(); ++i)
    if (r[i].name == name) {
      r.erase(r.begin() + static_cast<std::ptrdiff_t>(i));
      return;
    }
  RG_CHECK(false, "unregister_scheme", "no scheme named '", name, "' was registered by register_scheme");
}

}  // namespace relgrad
