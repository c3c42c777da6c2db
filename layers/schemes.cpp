#include "layers/schemes.h"

#include "layers/contextual.h"
#include "layers/relative_bias.h"
#include "layers/relative_learned.h"
#include "layers/rotary.h"
#include "layers/rotary_variants.h"
#include "layers/transformer_xl.h"

namespace relgrad {

namespace {

using Ctx = SchemeContext;
template <class S, class... A>
std::shared_ptr<PositionalScheme> make(A&&... a) {
  return std::make_shared<S>(std::forward<A>(a)...);
}

RotaryScaling rotary_scaling(const PositionalConfig& p) {
  return {p.rope_scaling, p.rope_scaling_factor, p.rope_original_length};
}

// One line per scheme. Causal places (decoder self-attention) get the causal variants: T5's
// unidirectional buckets (all of them for the past, as T5's decoder), ALiBi's causal bias.
// Each line: name, options, factory, shared_by_stack, causal_only, self_only, check, parameters
// (the checks and counts live beside each scheme's class), extrapolates.
std::vector<SchemeEntry>& registry() {
  static std::vector<SchemeEntry> r = {
      {"none", {}, nullptr},
      {"seed", {"max_length", "out_of_range", "per_head"},
       [](const Ctx& c) { return make<SeedRelativeEmbedding>(c.head_dim, c.config.max_length, c.table_heads(), c.config.out_of_range, c.init); },
       false, false, false, check_table_length, SeedRelativeEmbedding::parameters},
      {"huang", {"max_length", "out_of_range", "per_head"},
       [](const Ctx& c) { return make<HuangRelativeEmbedding>(c.head_dim, c.config.max_length, c.table_heads(), c.config.out_of_range, c.init); },
       false, /*causal_only=*/true, false, check_table_length, HuangRelativeEmbedding::parameters},
      {"shaw", {"clip", "shaw_values", "per_head"},
       [](const Ctx& c) { return make<ShawRelativeEmbedding>(c.head_dim, c.config.clip, c.table_heads(), c.config.shaw_values, c.init); },
       false, false, false, ShawRelativeEmbedding::check, ShawRelativeEmbedding::parameters},
      {"t5", {"num_buckets", "max_distance"},
       [](const Ctx& c) { return make<T5RelativeBias>(c.n_heads, c.config.num_buckets, c.config.max_distance, !c.causal, c.init); },
       /*shared_by_stack=*/true, false, false, T5RelativeBias::check, T5RelativeBias::parameters},
      {"alibi", {}, [](const Ctx& c) { return make<ALiBi>(c.n_heads, !c.causal); },
       false, false, false, nullptr, nullptr, /*extrapolates=*/true},
      {"rope", {"rope_base", "rope_scaling", "rope_scaling_factor", "rope_original_length"},
       [](const Ctx& c) { return make<RoPE>(c.head_dim, c.config.rope_base, RoPE::Pairing::Interleaved, rotary_scaling(c.config)); },
       false, false, false, RoPE::check},
      {"transformer_xl", {}, [](const Ctx& c) { return make<TransformerXL>(c.d_model, c.n_heads, c.init); },
       false, false, /*self_only=*/true, TransformerXL::check, nullptr, /*extrapolates=*/true},
      // The rotary family (layers/rotary_variants.h); rope, xpos and p_rope share the RoPE scalings.
      {"xpos", {"rope_base", "xpos_scale_base", "rope_scaling", "rope_scaling_factor", "rope_original_length"},
       [](const Ctx& c) { return make<XPos>(c.head_dim, c.config.rope_base, c.config.xpos_scale_base, rotary_scaling(c.config)); },
       false, /*causal_only=*/true, false, XPos::check},
      {"p_rope", {"rope_base", "rope_fraction", "rope_scaling", "rope_scaling_factor", "rope_original_length"},
       [](const Ctx& c) { return make<PRoPE>(c.head_dim, c.config.rope_base, c.config.rope_fraction, rotary_scaling(c.config)); },
       false, false, false, PRoPE::check},
      {"pope", {"rope_base"}, [](const Ctx& c) { return make<PoPE>(c.n_heads, c.head_dim, c.config.rope_base); },
       false, false, false, PoPE::check, PoPE::parameters},
      // Content-dependent positions (layers/contextual.h), stick-breaking's weights among them: causal
      // self-attention only, as their papers.
      {"cope", {"cope_positions"}, [](const Ctx& c) { return make<CoPE>(c.head_dim, c.config.cope_positions); },
       false, /*causal_only=*/true, /*self_only=*/true, CoPE::check, CoPE::parameters},
      {"fox", {}, [](const Ctx& c) { return make<ForgettingAttention>(c.d_model, c.n_heads, c.init); },
       false, /*causal_only=*/true, /*self_only=*/true, nullptr, ForgettingAttention::parameters, /*extrapolates=*/true},
      {"stick_breaking", {}, [](const Ctx&) { return make<StickBreaking>(); },
       false, /*causal_only=*/true, /*self_only=*/true, nullptr, nullptr, /*extrapolates=*/true},
      // The distance-bias family (layers/distance_bias.h): |δ| serves every place (the paper's causal
      // form on the keys a causal mask leaves), so no causal or self restriction.
      {"kerple", {"kerple_variant"},
       [](const Ctx& c) { return make<Kerple>(c.n_heads, c.config.kerple_variant, c.init); },
       false, false, false, nullptr, Kerple::parameters, /*extrapolates=*/true},
      {"sandwich", {"sandwich_dim"}, [](const Ctx& c) { return make<Sandwich>(c.n_heads, c.config.sandwich_dim); },
       false, false, false, Sandwich::check, nullptr, /*extrapolates=*/true},
      // The MLP's width ⌊d_model/4⌋, rounded down as x-transformers' `dim // 4` (d_model 10 → 2; the
      // entry's check refuses d_model < 4); docs/checkpoint-format.md 2.2.
      {"dynamic_bias", {"dynamic_bias_depth", "dynamic_bias_log_distance"},
       [](const Ctx& c) {
         return make<DynamicBias>(c.n_heads, c.d_model / 4, c.config.dynamic_bias_depth, c.config.dynamic_bias_log_distance, c.init);
       },
       false, false, false, DynamicBias::check, DynamicBias::parameters, /*extrapolates=*/true},
      // FIRE (layers/fire.h): the MLP of ψ(|δ|)/ψ(max(π(i), L)) serves every place (the paper's causal
      // i − j ≥ 0 on the keys a causal mask leaves; even in δ elsewhere, cross through π(i)).
      {"fire", {"fire_width", "fire_threshold"},
       [](const Ctx& c) { return make<FIRE>(c.n_heads, c.config.fire_width, c.config.fire_threshold, c.init); },
       false, false, false, FIRE::check, FIRE::parameters},
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

void register_scheme(SchemeEntry entry) {
  RG_CHECK(!entry.name.empty(), "register_scheme", "a scheme needs a name");
  RG_CHECK(!find_scheme(entry.name), "register_scheme", "a scheme named '", entry.name, "' is registered already");
  builtin_count();
  registry().push_back(std::move(entry));
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
