// Whole models from one TransformerConfig: DecoderLM (GPT-style) and EncoderDecoder (Vaswani-style),
// each with a positional scheme chosen separately for encoder self-attention, decoder
// self-attention and cross-attention (docs/relative-attention.md).
//
//   DecoderLM:      tokens (B, T) → embed (+ pos_embed) → dropout → layers.0 … layers.{n−1} (causal
//                   EncoderBlock) → final_norm (pre-norm only) → lm_head → logits (B, T, V)
//   EncoderDecoder: src (B, t1) → encoder.{embed (+ pos_embed), dropout, layers.i (EncoderBlock), final_norm}
//                   → memory
//                   tgt (B, t2) → decoder.{embed (+ pos_embed), dropout, layers.i (DecoderBlock), final_norm}
//                   → lm_head → logits (B, t2, V)
// pos_embed (layers/absolute_position.h) exists only with absolute_position other than "none"; it is
// registered right after embed, so a learned table is drawn and listed right after the token table.
// Block computations (which norm where): layers/blocks.h. final_norm exists only with pre_norm: a
// post-norm stack already ends on a norm.
//
// LM head: Linear(d_model, V) without bias (GPT-2, T5). With tie_weights the head *is* the (decoder)
// embedding table: logits = (h · d_model^−1/2) · Eᵀ, one parameter used twice and trained by both.
// The d_model^−1/2 factor is T5's (modeling_t5: sequence_output * model_dim**-0.5 when tied): E ~ N(0, 1)
// and h is normalised, so without it the initial logits would have a standard deviation of √d_model.
//
// Positional schemes per stack: T5's bias uses ONE table per stack, the same object passed to every
// layer (as T5), so named_parameters() lists it once, under layers.0; every other learned scheme
// (seed, huang, shaw, transformer_xl) gets its own tables in each layer; alibi and rope have no
// parameters. Causal places (decoder self-attention) build the causal variant: T5 unidirectional
// buckets, ALiBi's causal bias; non-causal places get bidirectional T5 buckets and symmetric ALiBi.
// huang needs causal attention, so it is accepted for decoder_self only; transformer_xl is a
// self-attention scheme, so it is refused for cross. These facts are the schemes' registry entries
// (layers/schemes.cpp: shared_by_stack, causal_only, self_only).
//
// Initialisation: PyTorch's defaults from the layers, nothing rescaled — Embedding N(0, 1), Linear
// (attention projections, feed-forward, head) U(−1/√in, 1/√in), norm gains 1 and biases 0,
// positional tables as their headers say (T5 N(0, 1); seed/huang/shaw N(0, D^−1/2); transformer_xl
// u, v xavier-uniform). Everything is drawn from `init_generator` (the default generator when null)
// in construction order, so one seed gives one model.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "layers/absolute_position.h"
#include "layers/blocks.h"
#include "layers/embedding.h"
#include "layers/schemes.h"

namespace relgrad {

// model.cross_alignment: where cross-attention places decoder query i on the encoder axis (π(i)): by one
// of the alignment rules (autograd/ops.h Alignment), or Explicit: by the caller's tgt_positions, which
// every call must then give (the same for every row; harmonisation places each target token at its
// own time step this way).
enum class CrossAlignment { Left, Right, Scaled, Explicit };
inline constexpr NameTable<CrossAlignment, 4> kCrossAlignmentNames{{{CrossAlignment::Left, "left"},
                                                                   {CrossAlignment::Right, "right"},
                                                                   {CrossAlignment::Scaled, "scaled"},
                                                                   {CrossAlignment::Explicit, "explicit"}}};
// The rule an aligned choice names; Explicit gives Left, which explicit positions replace at every call.
Alignment alignment_rule(CrossAlignment a);
// The choice for an alignment rule.
CrossAlignment aligned_by(Alignment a);

struct TransformerConfig {
  int64_t vocab_size = 0;        // target / LM vocabulary V
  int64_t src_vocab_size = 0;    // EncoderDecoder source vocabulary; 0 = vocab_size
  int64_t d_model = 64;
  int64_t n_heads = 4;
  int64_t d_ff = 256;
  int64_t n_encoder_layers = 2;  // EncoderDecoder only
  int64_t n_decoder_layers = 2;  // DecoderLM's layers, or the EncoderDecoder decoder's
  Activation activation = Activation::Gelu;  // model.activation: gelu, gelu_tanh or relu
  NormKind norm = NormKind::LayerNorm;       // model.norm: layer_norm or rms_norm
  bool pre_norm = true;
  double dropout = 0.1;
  double norm_eps = 1e-5;
  bool tie_weights = true;       // lm_head shares the (decoder) embedding table
  // model.fused_attention ("false", "true", "auto"): every attention's MultiHeadAttention::core, the
  // composite one, the fused (flash-style) one where it applies, or the one picked per call by speed and
  // memory (layers/attention.h).
  AttentionCore attention_core = AttentionCore::Composite;
  // T5 (the default, T5 uses it in self-attention only) for both self-attentions; no positional term
  // in cross-attention, whose alignment π(i) places decoder query i on the encoder axis.
  PositionalConfig encoder_self{"t5"};
  PositionalConfig decoder_self{"t5"};
  PositionalConfig cross{"none"};
  // Explicit: forward/decode take tgt_positions int64 (t2), π(i) of each target query on the encoder
  // axis, instead of a rule; a call without them is an error, and so are positions given otherwise.
  CrossAlignment cross_alignment = CrossAlignment::Left;
  bool explicit_cross() const { return cross_alignment == CrossAlignment::Explicit; }
  // An absolute position term added to the token embeddings before the first block (Vaswani et al.
  // 2017, section 3.5): None; Sinusoidal (the fixed sin/cos table, no parameters); or Learned (a
  // table of max_positions rows, N(0, 1) like the token embedding, named "pos_embed.weight" in
  // DecoderLM and "encoder.pos_embed.weight" / "decoder.pos_embed.weight" in EncoderDecoder). Positions
  // start at 0 at the first token; a sequence longer than max_positions (Learned) is an error.
  // model.absolute_position's names: kAbsolutePositionNames (layers/absolute_position.h).
  AbsolutePositionKind absolute_position = AbsolutePositionKind::None;
  int64_t max_positions = 0;  // rows of the learned table (> 0 for Learned)
  // Randomised positions (Ruoss et al. 2023), DecoderLM only: 0 = off. Else, in training mode, each
  // forward places its T tokens at a sorted random subset of [0, random_positions_max) (distinct, drawn
  // from the default generator like dropout's masks) for the absolute term and for decoder_self RoPE
  // or FIRE; in eval mode, and with a KV cache, tokens sit at 0 … T − 1 as without it. Needs a position
  // term to randomise (absolute_position sinusoidal / learned, or decoder_self rope or fire); learned needs
  // max_positions >= random_positions_max; a training sequence longer than it is an error. Ruoss et
  // al.'s released code draws random positions at evaluation too: call forward_at(tokens,
  // draw_positions(T)) for that (train/instruments/length_bench.cpp does).
  int64_t random_positions_max = 0;

  // Throws relgrad::Error "[op] ..." naming the bad field (for `encoder_decoder` also the encoder's).
  // absolute_position Learned needs max_positions >= 1; Sinusoidal accepts an odd d_model
  // (layers/absolute_position.h).
  void validate(const char* op, bool encoder_decoder) const;
  BlockOptions block_options(bool causal) const;
};

// The scheme for one place ("encoder_self", "decoder_self" or "cross") from the registry
// (layers/schemes.h); null for "none". Errors name op.
std::shared_ptr<PositionalScheme> make_positional(const PositionalConfig& config, const std::string& place,
                                                  int64_t d_model, int64_t n_heads, bool causal, const char* op,
                                                  Generator* init_generator = nullptr);
// One scheme per layer of a stack of n_layers, except a scheme registered shared_by_stack (T5): one
// object shared by all (null entries for "none").
std::vector<std::shared_ptr<PositionalScheme>> make_stack_positional(const PositionalConfig& config,
                                                                     const std::string& place, int64_t n_layers,
                                                                     int64_t d_model, int64_t n_heads, bool causal,
                                                                     const char* op, Generator* init_generator);

// An indexed list of blocks; children are named "0", "1", … so parameters read "layers.2.ff.fc1.weight".
template <class M>
class BlockList : public Module {
 public:
  std::shared_ptr<M> append(std::shared_ptr<M> block) {
    items.push_back(register_module(std::to_string(items.size()), block));
    return block;
  }
  size_t size() const { return items.size(); }
  M& operator[](size_t i) const { return *items.at(i); }
  std::vector<std::shared_ptr<M>> items;
};


class DecoderLM : public Module {
 public:
  explicit DecoderLM(const TransformerConfig& config, Generator* init_generator = nullptr);
  // tokens int64 (B, T); key_padding_mask optional bool (B, T), true = padding → logits (B, T, V).
  Tensor forward(const Tensor& tokens, const Tensor& key_padding_mask = Tensor());
  Tensor operator()(const Tensor& tokens, const Tensor& key_padding_mask = Tensor()) {
    return forward(tokens, key_padding_mask);
  }
  // Incremental decoding: tokens (B, t_new) follow the t_cached tokens whose keys and values `cache`
  // holds (an empty vector on the first call; it is sized to one LayerCache per layer) → logits
  // (B, t_new, V), equal to the last t_new rows of forward() over all t_cached + t_new tokens.
  // key_padding_mask optional bool (B, t_cached + t_new) over all keys. No cache (null): forward().
  // With absolute positions the new tokens sit at t_cached … t_cached + t_new − 1.
  Tensor forward(const Tensor& tokens, const Tensor& key_padding_mask, std::vector<LayerCache>* cache);
  // forward() with token t at the explicit position positions[t] (int64 (T)) for the absolute term and
  // decoder_self RoPE and FIRE (other schemes see indices 0 … T − 1: they are relative and need no map;
  // FIRE's normaliser reads the query's position itself).
  Tensor forward_at(const Tensor& tokens, const Tensor& positions, const Tensor& key_padding_mask = Tensor());
  // T sorted distinct positions drawn uniformly from [0, random_positions_max), int64 (T).
  Tensor draw_positions(int64_t T) const;

  TransformerConfig config;
  // The positions the last training forward drew (random_positions_max > 0); undefined otherwise.
  Tensor last_positions;
  // The decoder_self schemes that read explicit positions (PositionalScheme::set_position_map: RoPE,
  // FIRE; none: empty).
  std::vector<std::shared_ptr<PositionalScheme>> positioned;
  std::shared_ptr<Embedding> embed;
  std::shared_ptr<AbsolutePosition> pos_embed;      // null with absolute_position "none"
  std::shared_ptr<Dropout> dropout;                 // on the embeddings
  std::shared_ptr<BlockList<EncoderBlock>> layers;  // causal self-attention blocks
  std::shared_ptr<Norm> final_norm;               // null with post-norm
  std::shared_ptr<Linear> lm_head;                  // null with tie_weights
};

// EncoderDecoder's encoder: src (B, t1) → memory (B, t1, C).
class TransformerEncoder : public Module {
 public:
  TransformerEncoder(const TransformerConfig& config, Generator* init_generator);
  Tensor forward(const Tensor& src, const Tensor& src_padding_mask = Tensor());

  std::shared_ptr<Embedding> embed;
  std::shared_ptr<AbsolutePosition> pos_embed;  // null with absolute_position "none"
  std::shared_ptr<Dropout> dropout;
  std::shared_ptr<BlockList<EncoderBlock>> layers;
  std::shared_ptr<Norm> final_norm;  // null with post-norm
};

// EncoderDecoder's decoder: tgt (B, t2), memory (B, t1, C) → hidden (B, t2, C) (before the head).
class TransformerDecoder : public Module {
 public:
  TransformerDecoder(const TransformerConfig& config, Generator* init_generator);
  // tgt_positions: see EncoderDecoder::forward.
  Tensor forward(const Tensor& tgt, const Tensor& memory, const Tensor& tgt_padding_mask = Tensor(),
                 const Tensor& memory_padding_mask = Tensor(), const Tensor& tgt_positions = Tensor());
  // Incremental decoding with one LayerCache per layer (see EncoderDecoder::decode); null: forward().
  Tensor forward(const Tensor& tgt, const Tensor& memory, const Tensor& tgt_padding_mask,
                 const Tensor& memory_padding_mask, std::vector<LayerCache>* cache,
                 const Tensor& tgt_positions = Tensor());

  bool explicit_cross = false;  // TransformerConfig::cross_alignment Explicit: tgt_positions required

  std::shared_ptr<Embedding> embed;
  std::shared_ptr<AbsolutePosition> pos_embed;  // null with absolute_position "none"
  std::shared_ptr<Dropout> dropout;
  std::shared_ptr<BlockList<DecoderBlock>> layers;
  std::shared_ptr<Norm> final_norm;  // null with post-norm
};

class EncoderDecoder : public Module {
 public:
  explicit EncoderDecoder(const TransformerConfig& config, Generator* init_generator = nullptr);
  // src int64 (B, t1), tgt int64 (B, t2); masks optional bool, true = padding → logits (B, t2, V).
  // The source padding mask hides padded source tokens from encoder self-attention and from
  // cross-attention; the target one hides padded target keys from decoder self-attention.
  // tgt_positions int64 (t2), with cross_alignment Explicit only (required then, an error otherwise): π(i)
  // of each target query on the encoder axis, the same for every row, given to cross-attention instead of
  // an alignment rule. Any integer is accepted, t1 and beyond included (an EOS query one step past the
  // source's end): every scheme computes δ = j − π(i) for it, and a learned table treats a δ outside it by
  // its out_of_range policy (layers/relative_learned.h).
  Tensor forward(const Tensor& src, const Tensor& tgt, const Tensor& src_padding_mask = Tensor(),
                 const Tensor& tgt_padding_mask = Tensor(), const Tensor& tgt_positions = Tensor());
  Tensor operator()(const Tensor& src, const Tensor& tgt, const Tensor& src_padding_mask = Tensor(),
                    const Tensor& tgt_padding_mask = Tensor(), const Tensor& tgt_positions = Tensor()) {
    return forward(src, tgt, src_padding_mask, tgt_padding_mask, tgt_positions);
  }
  // The two halves, for decoding step by step: memory (B, t1, C) once, then logits per target prefix.
  Tensor encode(const Tensor& src, const Tensor& src_padding_mask = Tensor());
  Tensor decode(const Tensor& tgt, const Tensor& memory, const Tensor& src_padding_mask = Tensor(),
                const Tensor& tgt_padding_mask = Tensor(), const Tensor& tgt_positions = Tensor());
  // Incremental decoding: tgt (B, t_new) follows the t_cached target tokens in `cache` (an empty
  // vector on the first call, sized to one LayerCache per decoder layer; the first call also caches
  // the projected memory for cross-attention, so keep `memory` the same) → logits (B, t_new, V),
  // equal to the last t_new rows of decode() over all t_cached + t_new target tokens.
  // tgt_padding_mask optional bool (B, t_cached + t_new). No cache (null): decode() above. A cross
  // scheme under Right or Scaled alignment cannot be cached exactly: an error (layers/blocks.h).
  // Explicit positions can: tgt_positions then covers all t_cached + t_new target tokens, like the
  // padding mask (int64 (t_cached + t_new)); the new queries use its last t_new entries.
  // With absolute positions the new tokens sit at t_cached … t_cached + t_new − 1.
  Tensor decode(const Tensor& tgt, const Tensor& memory, const Tensor& src_padding_mask,
                const Tensor& tgt_padding_mask, std::vector<LayerCache>* cache,
                const Tensor& tgt_positions = Tensor());

  TransformerConfig config;
  std::shared_ptr<TransformerEncoder> encoder;
  std::shared_ptr<TransformerDecoder> decoder;
  std::shared_ptr<Linear> lm_head;  // null with tie_weights (the decoder embedding is the head)
};

}  // namespace relgrad
