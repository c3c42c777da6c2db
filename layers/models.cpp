#include "layers/models.h"

#include <algorithm>
#include <cmath>
#include <numeric>


namespace relgrad {

namespace {

// "rope or fire": the schemes random_positions_max can randomise (SchemeEntry::random_positions).
std::string randomised_scheme_names() {
  std::vector<std::string> names;
  for (const SchemeEntry& e : positional_schemes())
    if (e.random_positions) names.push_back(e.name);
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) out += (i == 0 ? "" : i + 1 == names.size() ? " or " : ", ") + names[i];
  return out;
}

// Checks what the schemes' own constructors cannot know: the name and whether it suits the place.
const SchemeEntry& check_positional(const PositionalConfig& p, const std::string& place, bool causal, const char* op) {
  const SchemeEntry* e = find_scheme(p.scheme);
  RG_CHECK(e, op, "unknown positional scheme '", p.scheme, "' for ", place, " (expected ", scheme_names_text(), ")");
  const Placement where = placement(*e, causal, place == "cross");
  RG_CHECK(where != Placement::NeedsCausal, op, "positional scheme '", p.scheme, "' needs causal attention; ", place,
           " is not causal (use it for decoder_self)");
  RG_CHECK(where != Placement::SelfOnly, op, "positional scheme '", p.scheme, "' is for self-attention, not ", place);
  return *e;
}

// (B, T) int64 tokens, and an optional bool (B, T) mask of the same size.
void check_tokens(const char* op, const char* what, const Tensor& tokens, const Tensor& mask) {
  RG_CHECK(tokens.defined(), op, what, " is an undefined tensor");
  RG_CHECK_T(DTypeError, tokens.dtype() == kInt64 && tokens.dim() == 2, op, what, " must be int64 (B, T), got ",
             dtype_name(tokens.dtype()), " ", shape_str(tokens.shape()));
  if (mask.defined())
    RG_CHECK_T(ShapeError, mask.dtype() == kBool && mask.shape() == tokens.shape(), op, what,
               " padding mask must be bool ", shape_str(tokens.shape()), ", got ", dtype_name(mask.dtype()), " ",
               shape_str(mask.shape()));
}

// Sizes an empty cache to one LayerCache per layer and checks its size and a padding mask covering all
// t_cached + t_new keys, bool (B, t_cached + t_new). Returns t_cached.
int64_t prepare_cache(const char* op, std::vector<LayerCache>& cache, size_t n_layers, const Tensor& tokens,
                      const Tensor& mask) {
  if (cache.empty()) cache.resize(n_layers);
  RG_CHECK(cache.size() == n_layers, op, "the cache has ", cache.size(), " layers, the model ", n_layers);
  const int64_t t_cached = cache[0].self.length();
  if (t_cached > 0)
    RG_CHECK_T(ShapeError, cache[0].self.k.size(0) == tokens.size(0), op, "the cache was filled for batch ",
               cache[0].self.k.size(0), ", the tokens have batch ", tokens.size(0));
  if (mask.defined()) {
    const Shape want{tokens.size(0), t_cached + tokens.size(1)};
    RG_CHECK_T(ShapeError, mask.dtype() == kBool && mask.shape() == want, op,
               "with a cache the padding mask covers all keys, bool ", shape_str(want), ", got ",
               dtype_name(mask.dtype()), " ", shape_str(mask.shape()));
  }
  return t_cached;
}

// The explicit cross positions a decoder call gets, against TransformerConfig::cross_alignment: required
// with Explicit, refused otherwise (nothing is silently ignored), int64 (n) where n counts every target
// token (t2, or t_cached + t_new with a cache).
void check_tgt_positions(const char* op, bool explicit_cross, const Tensor& positions, int64_t n) {
  RG_CHECK(!explicit_cross || positions.defined(), op,
           "cross_alignment is explicit, so the call needs tgt_positions int64 (", n,
           "): the encoder position π(i) of each target query");
  RG_CHECK(explicit_cross || !positions.defined(), op,
           "tgt_positions given but cross_alignment is not explicit (cross-attention places its queries by "
           "its alignment rule); set cross_alignment to explicit to use them");
  if (!positions.defined()) return;
  RG_CHECK_T(ShapeError, positions.dtype() == kInt64 && positions.dim() == 1 && positions.size(0) == n, op,
             "tgt_positions must be int64 (", n, "), one π(i) per target token",
             ", got ", dtype_name(positions.dtype()), " ", shape_str(positions.shape()));
}

// Token embeddings plus the absolute position term (if any) for tokens at first … first + T − 1.
Tensor embed_tokens(const Embedding& embed, const std::shared_ptr<AbsolutePosition>& pos_embed,
                    const Tensor& tokens, int64_t first) {
  Tensor x = embed.forward(tokens);  // (B, T, C)
  return pos_embed ? pos_embed->forward(x, first) : x;
}

// The absolute position module of one stack, registered by the caller right after embed; null for none.
std::shared_ptr<AbsolutePosition> make_absolute(const TransformerConfig& c, const char* op, Generator* init) {
  if (c.absolute_position == AbsolutePositionKind::None) return nullptr;
  return std::make_shared<AbsolutePosition>(c.absolute_position, c.d_model, c.max_positions, op, init);
}

// h (B, T, C) → logits (B, T, V), through the head or the tied embedding table (see models.h).
Tensor lm_logits(const Tensor& h, const std::shared_ptr<Linear>& head, const Embedding& embed) {
  if (head) return head->forward(h);
  const double scale = 1.0 / std::sqrt(static_cast<double>(embed.embedding_dim));
  return matmul(h * scale, embed.weight.transpose(0, 1));  // (B,T,C) @ (C,V)
}

}  // namespace

Alignment alignment_rule(CrossAlignment a) {
  switch (a) {
    case CrossAlignment::Right: return Alignment::Right;
    case CrossAlignment::Scaled: return Alignment::Scaled;
    case CrossAlignment::Left:
    case CrossAlignment::Explicit: break;
  }
  return Alignment::Left;
}

CrossAlignment aligned_by(Alignment a) {
  switch (a) {
    case Alignment::Right: return CrossAlignment::Right;
    case Alignment::Scaled: return CrossAlignment::Scaled;
    case Alignment::Left: break;
  }
  return CrossAlignment::Left;
}

void TransformerConfig::validate(const char* op, bool encoder_decoder) const {
  RG_CHECK(vocab_size > 0, op, "vocab_size must be positive, got ", vocab_size);
  RG_CHECK(src_vocab_size >= 0, op, "src_vocab_size must be >= 0 (0 = vocab_size), got ", src_vocab_size);
  RG_CHECK(d_model > 0 && n_heads > 0, op, "d_model and n_heads must be positive, got ", d_model, " and ", n_heads);
  RG_CHECK(d_model % n_heads == 0, op, "d_model ", d_model, " must be divisible by n_heads ", n_heads);
  RG_CHECK(d_ff > 0, op, "d_ff must be positive, got ", d_ff);
  RG_CHECK(n_decoder_layers >= 1, op, "n_decoder_layers must be >= 1, got ", n_decoder_layers);
  if (encoder_decoder) RG_CHECK(n_encoder_layers >= 1, op, "n_encoder_layers must be >= 1, got ", n_encoder_layers);
  RG_CHECK(dropout >= 0.0 && dropout < 1.0, op, "dropout must be in [0, 1), got ", dropout);
  RG_CHECK(max_positions >= 0, op, "max_positions must be >= 0, got ", max_positions);
  RG_CHECK(absolute_position != AbsolutePositionKind::Learned || max_positions >= 1, op,
           "absolute_position learned needs max_positions >= 1 (the rows of its table), got ", max_positions);
  RG_CHECK(random_positions_max >= 0, op, "random_positions_max must be >= 0 (0 = off), got ",
           random_positions_max);
  if (random_positions_max > 0) {
    RG_CHECK(!encoder_decoder, op, "random_positions_max is for a decoder-only model");
    const SchemeEntry* randomised = find_scheme(decoder_self.scheme);
    RG_CHECK(absolute_position != AbsolutePositionKind::None || (randomised && randomised->random_positions),
             op,
             "random_positions_max needs a position term to randomise: absolute_position sinusoidal or "
             "learned, or decoder_self ", randomised_scheme_names());
    RG_CHECK(absolute_position != AbsolutePositionKind::Learned || max_positions >= random_positions_max, op,
             "random_positions_max ", random_positions_max,
             " reaches past the learned table's max_positions ", max_positions);
  }
  RG_CHECK(encoder_decoder || !explicit_cross(), op,
           "cross_alignment explicit is for an encoder-decoder model (a decoder-only one has no cross-attention)");
  check_positional(decoder_self, "decoder_self", true, op);
  if (encoder_decoder) {
    check_positional(encoder_self, "encoder_self", false, op);
    check_positional(cross, "cross", false, op);
  }
}

BlockOptions TransformerConfig::block_options(bool causal) const {
  BlockOptions o;
  o.activation = activation;
  o.norm = norm;
  o.pre_norm = pre_norm;
  o.dropout = dropout;
  o.norm_eps = norm_eps;
  o.causal = causal;
  o.attention_core = attention_core;
  return o;
}

std::shared_ptr<PositionalScheme> make_positional(const PositionalConfig& p, const std::string& place,
                                                  int64_t d_model, int64_t n_heads, bool causal, const char* op,
                                                  Generator* init) {
  const SchemeEntry& e = check_positional(p, place, causal, op);
  if (!e.make) return nullptr;  // none
  return e.make(SchemeContext{p, place, d_model, n_heads, d_model / n_heads, causal, init});
}

std::vector<std::shared_ptr<PositionalScheme>> make_stack_positional(const PositionalConfig& p,
                                                                     const std::string& place, int64_t n_layers,
                                                                     int64_t d_model, int64_t n_heads, bool causal,
                                                                     const char* op, Generator* init) {
  std::vector<std::shared_ptr<PositionalScheme>> schemes;
  std::shared_ptr<PositionalScheme> shared;
  if (check_positional(p, place, causal, op).shared_by_stack)
    shared = make_positional(p, place, d_model, n_heads, causal, op, init);
  for (int64_t i = 0; i < n_layers; ++i)
    schemes.push_back(shared ? shared : make_positional(p, place, d_model, n_heads, causal, op, init));
  return schemes;
}

// ---- DecoderLM ----

DecoderLM::DecoderLM(const TransformerConfig& c, Generator* init) : config(c) {
  const char* op = "DecoderLM";
  c.validate(op, false);
  embed = register_module("embed", std::make_shared<Embedding>(c.vocab_size, c.d_model, -1, init));
  if (auto pe = make_absolute(c, op, init)) pos_embed = register_module("pos_embed", pe);
  dropout = register_module("dropout", std::make_shared<Dropout>(c.dropout));
  layers = register_module("layers", std::make_shared<BlockList<EncoderBlock>>());
  auto schemes = make_stack_positional(c.decoder_self, "decoder_self", c.n_decoder_layers, c.d_model, c.n_heads,
                                       true, op, init);
  for (int64_t i = 0; i < c.n_decoder_layers; ++i)
    layers->append(std::make_shared<EncoderBlock>(c.d_model, c.n_heads, c.d_ff, c.block_options(true), schemes[i], init));
  for (const auto& scheme : schemes)
    if (scheme && scheme->set_position_map(Tensor())) positioned.push_back(scheme);
  if (c.pre_norm) final_norm = register_module("final_norm", make_norm(c.norm, c.d_model, c.norm_eps));
  if (!c.tie_weights) lm_head = register_module("lm_head", std::make_shared<Linear>(c.d_model, c.vocab_size, false, init));
}

Tensor DecoderLM::draw_positions(int64_t T) const {
  const int64_t L = config.random_positions_max;
  RG_CHECK(L > 0, "DecoderLM", "draw_positions needs random_positions_max > 0");
  RG_CHECK_T(ShapeError, T >= 0 && T <= L, "DecoderLM", "random positions: a sequence of ", T,
             " tokens does not fit random_positions_max ", L);
  // One uniform key per candidate position (one generator draw); the T smallest keys pick a uniformly
  // random T-subset, then sorted ascending.
  const std::vector<double> key = rand({L}, TensorOptions(kFloat64)).to_vector<double>();
  std::vector<int64_t> order(static_cast<size_t>(L));
  std::iota(order.begin(), order.end(), int64_t{0});
  std::partial_sort(order.begin(), order.begin() + T, order.end(),
                    [&](int64_t a, int64_t b) { return key[a] < key[b] || (key[a] == key[b] && a < b); });
  std::vector<int64_t> picked(order.begin(), order.begin() + T);
  std::sort(picked.begin(), picked.end());
  return from_vector<int64_t>(picked, {T});
}

Tensor DecoderLM::forward(const Tensor& tokens, const Tensor& key_padding_mask) {
  check_tokens("DecoderLM", "tokens", tokens, key_padding_mask);
  if (config.random_positions_max > 0 && is_training()) {
    last_positions = draw_positions(tokens.size(1));
    return forward_at(tokens, last_positions, key_padding_mask);
  }
  Tensor h = dropout->forward(embed_tokens(*embed, pos_embed, tokens, 0));  // (B, T, C)
  for (const auto& block : layers->items) h = block->forward(h, key_padding_mask);
  if (final_norm) h = final_norm->forward(h);
  return lm_logits(h, lm_head, *embed);  // (B, T, V)
}

Tensor DecoderLM::forward_at(const Tensor& tokens, const Tensor& positions, const Tensor& key_padding_mask) {
  check_tokens("DecoderLM", "tokens", tokens, key_padding_mask);
  RG_CHECK_T(ShapeError, positions.defined() && positions.dtype() == kInt64 && positions.dim() == 1 &&
                 positions.size(0) == tokens.size(1), "DecoderLM", "explicit positions must be int64 (",
             tokens.size(1), "), one per token");
  // The schemes that read explicit positions (RoPE, FIRE) read the map during this forward only,
  // cleared on every way out.
  struct ClearMaps {
    std::vector<std::shared_ptr<PositionalScheme>>& schemes;
    ~ClearMaps() {
      for (auto& s : schemes) s->set_position_map(Tensor());
    }
  } clear{positioned};
  for (auto& s : positioned) s->set_position_map(positions);
  Tensor x = embed->forward(tokens);  // (B, T, C)
  if (pos_embed) x = pos_embed->forward_at(x, positions);
  Tensor h = dropout->forward(x);
  for (const auto& block : layers->items) h = block->forward(h, key_padding_mask);
  if (final_norm) h = final_norm->forward(h);
  return lm_logits(h, lm_head, *embed);  // (B, T, V)
}

Tensor DecoderLM::forward(const Tensor& tokens, const Tensor& key_padding_mask, std::vector<LayerCache>* cache) {
  if (!cache) return forward(tokens, key_padding_mask);
  check_tokens("DecoderLM", "tokens", tokens, Tensor());
  const int64_t t_cached = prepare_cache("DecoderLM", *cache, layers->size(), tokens, key_padding_mask);
  // The new tokens embed alone; an absolute position term places them after the cached ones.
  Tensor h = dropout->forward(embed_tokens(*embed, pos_embed, tokens, t_cached));  // (B, t_new, C)
  for (size_t i = 0; i < layers->size(); ++i) h = (*layers)[i].forward(h, key_padding_mask, (*cache)[i]);
  if (final_norm) h = final_norm->forward(h);
  return lm_logits(h, lm_head, *embed);  // (B, t_new, V)
}

// ---- EncoderDecoder ----

TransformerEncoder::TransformerEncoder(const TransformerConfig& c, Generator* init) {
  const char* op = "EncoderDecoder";
  const int64_t V = c.src_vocab_size > 0 ? c.src_vocab_size : c.vocab_size;
  embed = register_module("embed", std::make_shared<Embedding>(V, c.d_model, -1, init));
  if (auto pe = make_absolute(c, op, init)) pos_embed = register_module("pos_embed", pe);
  dropout = register_module("dropout", std::make_shared<Dropout>(c.dropout));
  layers = register_module("layers", std::make_shared<BlockList<EncoderBlock>>());
  auto schemes = make_stack_positional(c.encoder_self, "encoder_self", c.n_encoder_layers, c.d_model, c.n_heads,
                                       false, op, init);
  for (int64_t i = 0; i < c.n_encoder_layers; ++i)
    layers->append(std::make_shared<EncoderBlock>(c.d_model, c.n_heads, c.d_ff, c.block_options(false), schemes[i], init));
  if (c.pre_norm) final_norm = register_module("final_norm", make_norm(c.norm, c.d_model, c.norm_eps));
}

Tensor TransformerEncoder::forward(const Tensor& src, const Tensor& src_padding_mask) {
  Tensor h = dropout->forward(embed_tokens(*embed, pos_embed, src, 0));  // (B, t1, C)
  for (const auto& block : layers->items) h = block->forward(h, src_padding_mask);
  return final_norm ? final_norm->forward(h) : h;
}

TransformerDecoder::TransformerDecoder(const TransformerConfig& c, Generator* init)
    : explicit_cross(c.explicit_cross()) {
  const char* op = "EncoderDecoder";
  embed = register_module("embed", std::make_shared<Embedding>(c.vocab_size, c.d_model, -1, init));
  if (auto pe = make_absolute(c, op, init)) pos_embed = register_module("pos_embed", pe);
  dropout = register_module("dropout", std::make_shared<Dropout>(c.dropout));
  layers = register_module("layers", std::make_shared<BlockList<DecoderBlock>>());
  const int64_t n = c.n_decoder_layers;
  auto self_schemes = make_stack_positional(c.decoder_self, "decoder_self", n, c.d_model, c.n_heads, true, op, init);
  auto cross_schemes = make_stack_positional(c.cross, "cross", n, c.d_model, c.n_heads, false, op, init);
  for (int64_t i = 0; i < n; ++i)
    layers->append(std::make_shared<DecoderBlock>(c.d_model, c.n_heads, c.d_ff, c.block_options(false), self_schemes[i],
                                                  cross_schemes[i], alignment_rule(c.cross_alignment), init));
  if (c.pre_norm) final_norm = register_module("final_norm", make_norm(c.norm, c.d_model, c.norm_eps));
}

Tensor TransformerDecoder::forward(const Tensor& tgt, const Tensor& memory, const Tensor& tgt_padding_mask,
                                   const Tensor& memory_padding_mask, const Tensor& tgt_positions) {
  RG_CHECK(tgt.defined(), "EncoderDecoder", "tgt is an undefined tensor");
  check_tgt_positions("EncoderDecoder", explicit_cross, tgt_positions, tgt.size(-1));
  Tensor h = dropout->forward(embed_tokens(*embed, pos_embed, tgt, 0));  // (B, t2, C)
  for (const auto& block : layers->items)
    h = block->forward(h, memory, tgt_padding_mask, memory_padding_mask, tgt_positions);
  return final_norm ? final_norm->forward(h) : h;
}

Tensor TransformerDecoder::forward(const Tensor& tgt, const Tensor& memory, const Tensor& tgt_padding_mask,
                                   const Tensor& memory_padding_mask, std::vector<LayerCache>* cache,
                                   const Tensor& tgt_positions) {
  if (!cache) return forward(tgt, memory, tgt_padding_mask, memory_padding_mask, tgt_positions);
  const int64_t t_cached = prepare_cache("EncoderDecoder", *cache, layers->size(), tgt, tgt_padding_mask);
  check_tgt_positions("EncoderDecoder", explicit_cross, tgt_positions, t_cached + tgt.size(1));
  Tensor h = dropout->forward(embed_tokens(*embed, pos_embed, tgt, t_cached));  // (B, t_new, C)
  for (size_t i = 0; i < layers->size(); ++i)
    h = (*layers)[i].forward(h, memory, tgt_padding_mask, memory_padding_mask, (*cache)[i], tgt_positions);
  return final_norm ? final_norm->forward(h) : h;
}

EncoderDecoder::EncoderDecoder(const TransformerConfig& c, Generator* init) : config(c) {
  c.validate("EncoderDecoder", true);
  encoder = register_module("encoder", std::make_shared<TransformerEncoder>(c, init));
  decoder = register_module("decoder", std::make_shared<TransformerDecoder>(c, init));
  if (!c.tie_weights) lm_head = register_module("lm_head", std::make_shared<Linear>(c.d_model, c.vocab_size, false, init));
}

Tensor EncoderDecoder::encode(const Tensor& src, const Tensor& src_padding_mask) {
  check_tokens("EncoderDecoder", "src", src, src_padding_mask);
  return encoder->forward(src, src_padding_mask);  // (B, t1, C)
}

Tensor EncoderDecoder::decode(const Tensor& tgt, const Tensor& memory, const Tensor& src_padding_mask,
                              const Tensor& tgt_padding_mask, const Tensor& tgt_positions) {
  check_tokens("EncoderDecoder", "tgt", tgt, tgt_padding_mask);
  RG_CHECK_T(ShapeError, memory.defined() && memory.dim() == 3 && memory.size(0) == tgt.size(0), "EncoderDecoder",
             "memory must be (B, t1, C) with tgt's batch ", tgt.size(0), ", got ",
             memory.defined() ? shape_str(memory.shape()) : std::string("undefined"));
  Tensor h = decoder->forward(tgt, memory, tgt_padding_mask, src_padding_mask, tgt_positions);  // (B, t2, C)
  return lm_logits(h, lm_head, *decoder->embed);                                               // (B, t2, V)
}

Tensor EncoderDecoder::decode(const Tensor& tgt, const Tensor& memory, const Tensor& src_padding_mask,
                              const Tensor& tgt_padding_mask, std::vector<LayerCache>* cache,
                              const Tensor& tgt_positions) {
  if (!cache) return decode(tgt, memory, src_padding_mask, tgt_padding_mask, tgt_positions);
  check_tokens("EncoderDecoder", "tgt", tgt, Tensor());
  RG_CHECK_T(ShapeError, memory.defined() && memory.dim() == 3 && memory.size(0) == tgt.size(0), "EncoderDecoder",
             "memory must be (B, t1, C) with tgt's batch ", tgt.size(0), ", got ",
             memory.defined() ? shape_str(memory.shape()) : std::string("undefined"));
  Tensor h = decoder->forward(tgt, memory, tgt_padding_mask, src_padding_mask, cache, tgt_positions);
  return lm_logits(h, lm_head, *decoder->embed);  // (B, t_new, V)
}

Tensor EncoderDecoder::forward(const Tensor& src, const Tensor& tgt, const Tensor& src_padding_mask,
                               const Tensor& tgt_padding_mask, const Tensor& tgt_positions) {
  return decode(tgt, encode(src, src_padding_mask), src_padding_mask, tgt_padding_mask, tgt_positions);
}

}  // namespace relgrad
