#!/usr/bin/python3
"""Writes tests/golden/train_<config>.safetensors, which tests/test_train_golden.cpp replays in relgrad.

    /usr/bin/python3 tools/gen_golden_train.py        (Debian's python3-torch 1.13)

A standalone PyTorch reimplementation of relgrad's DecoderLM and EncoderDecoder, written from
docs/checkpoint-format.md (NOT by calling relgrad): plain functions over a dict of tensors keyed by
relgrad's state_dict names. It is also the worked example of that document's "Rebuilding in
PyTorch" section: every section number in a comment below refers to it.

For each configuration (CONFIGS) it draws random weights (torch, fixed seed; norm gains and biases
are perturbed away from 1 and 0 on purpose, so that a swapped or unused one shows), fixed batches
with right padding, and records

    init.<name>                 every state_dict entry (parameters and the ALiBi slopes buffer), F32;
                                the values are float32 numbers, so float32 and float64 runs start
                                from the same weights
    batch<s>.<field>            int64 tokens, bool padding masks (true = padding), int64 targets with
                                -100 at padding; DecoderLM: tokens, mask, targets; EncoderDecoder:
                                src, src_mask, tgt, tgt_mask, targets, and with cross_explicit
                                tgt_positions (int64 (t2), π(i) of each target query, the same for
                                every row). Step s trains on batch s.
    logits                      (B, T, V) float64 logits of the initial weights on batch 0
    loss64, loss32              (STEPS) the loss before each step, in a float64 and a float32 run
    grad_norm64, grad_norm32    (STEPS) the total norm clip_grad_norm_ saw at each step
    lr                          (STEPS) the learning rate of each step
    final.<name>                every parameter after STEPS steps of the float64 run, F64
    optim.group<g>.param<i>.*   torch's AdamW state (step, exp_avg, exp_avg_sq) after the float64 run for
                                the first and last parameter of each group, under relgrad's names

The training loop is relgrad's (docs §1.4): zero_grad, forward, cross_entropy (ignore_index -100,
mean), backward, clip at MAX_NORM with relgrad's clip_grad_norm_ semantics, lr from the warmup +
cosine LrSchedule, torch.optim.AdamW over decay_groups' two groups. The metadata carries the model
config as cfg.<field> / cfg.<place>.<field> (TransformerConfig names, docs §3.1) and the training
hyperparameters as train.<name>, so the C++ test builds everything from the file; state_dict_order
lists the state_dict names in the order docs §2 gives (it fixes the optimizer's param indices).
Each file uses its own seeded generator: adding a configuration never changes the others. The fields
of LATER_DEFAULTS (absolute positions, explicit cross positions) came after the first seven files:
they are written only for a configuration that sets one of them, and a file without them has their
defaults, so those files stay as they were. Regenerate one file with
    /usr/bin/python3 tools/gen_golden_train.py <config name>
"""
import math
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_golden import OUT_DIR, write_safetensors  # noqa: E402  (the hand-written safetensors writer)

SEED = 20240801
F32, F64 = torch.float32, torch.float64
STEPS = 10
TRAIN = {"max_lr": 1e-2, "min_lr": 1e-3, "warmup_steps": 3, "total_steps": 10, "beta1": 0.9, "beta2": 0.95,
         "eps": 1e-8, "weight_decay": 0.1, "max_norm": 1.0}
BATCH = 4

# ---- configuration (docs §3.1): TransformerConfig / PositionalConfig fields and their defaults ----

POSITIONAL_DEFAULTS = {"scheme": "none", "max_length": 512, "out_of_range": "zero", "clip": 16, "shaw_values": True,
                       "per_head": False, "num_buckets": 32, "max_distance": 128, "rope_base": 10000.0}
MODEL_DEFAULTS = {"vocab_size": 0, "src_vocab_size": 0, "d_model": 64, "n_heads": 4, "d_ff": 256,
                  "n_encoder_layers": 2, "n_decoder_layers": 2, "activation": "gelu", "norm": "layer_norm",
                  "pre_norm": True, "dropout": 0.1, "norm_eps": 1e-5, "tie_weights": True,
                  "cross_alignment": "left"}
# A scheme's own knobs (docs §3.1), written to the metadata only for a place using that scheme, so
# that the files of other schemes keep their keys.
SCHEME_KNOBS = {"cope_positions": ("cope", 64),
                "xpos_scale_base": ("xpos", 512.0), "rope_fraction": ("p_rope", 0.75),
                "rope_scaling": (("rope", "xpos", "p_rope"), "none"),
                "rope_scaling_factor": (("rope", "xpos", "p_rope"), 1.0),
                "rope_original_length": (("rope", "xpos", "p_rope"), 0),
                "kerple_variant": ("kerple", "log"), "sandwich_dim": ("sandwich", 128),
                "dynamic_bias_depth": ("dynamic_bias", 2), "dynamic_bias_log_distance": ("dynamic_bias", False),
                "fire_width": ("fire", 32), "fire_threshold": ("fire", 512)}
# Written to the metadata only when one of them differs from its default (see the docstring).
LATER_DEFAULTS = {"cross_explicit": False, "absolute_position": "none", "max_positions": 0}
PLACES = ("encoder_self", "decoder_self", "cross")
PLACE_DEFAULT_SCHEME = {"encoder_self": "t5", "decoder_self": "t5", "cross": "none"}


def make_config(model, lengths, padding="right", **fields):
    """A full config: defaults overridden by `fields` (places given as dicts of PositionalConfig fields).
    padding: "right"; "left_row1" (DecoderLM: row 1 padded on the left, so its first queries see only
    padding: fully masked rows); "empty_src_row3" (EncoderDecoder: source row 3 is all padding)."""
    cfg = dict(MODEL_DEFAULTS, **LATER_DEFAULTS)
    for place in PLACES:
        cfg[place] = dict(POSITIONAL_DEFAULTS, scheme=PLACE_DEFAULT_SCHEME[place])
        cfg[place].update({k: d for k, (_, d) in SCHEME_KNOBS.items()})
    for k, v in fields.items():
        if k in PLACES:
            unknown = set(v) - set(POSITIONAL_DEFAULTS) - set(SCHEME_KNOBS)
            assert not unknown, unknown
            cfg[k].update(v)
        else:
            assert k in MODEL_DEFAULTS or k in LATER_DEFAULTS, k
            cfg[k] = v
    cfg["model"] = model
    cfg["lengths"] = lengths  # (T) for a DecoderLM, (t1, t2) for an EncoderDecoder: the padded batch lengths
    cfg["padding"] = padding
    return cfg


CONFIGS = {
    # The README's default kind of model: T5 bias in both self-attentions, the seed's method in
    # cross-attention (Left), pre-norm LayerNorm, gelu, tied head. The encoder's T5 uses few buckets
    # so that the log-spaced ones are reached at these lengths.
    "encdec_default": make_config(
        "encoder-decoder", (10, 9), vocab_size=16, d_model=16, n_heads=4, d_ff=32, dropout=0.0,
        encoder_self={"scheme": "t5", "num_buckets": 8, "max_distance": 16},
        decoder_self={"scheme": "t5"},
        cross={"scheme": "seed", "max_length": 10}),
    # Shaw (keys and values, shared tables, distances clipped at 3) in a post-norm RMSNorm relu LM.
    "lm_shaw_postnorm": make_config(
        "decoder-only", (10,), vocab_size=16, d_model=16, n_heads=2, d_ff=48, dropout=0.0, activation="relu",
        norm="rms_norm", pre_norm=False, tie_weights=False, decoder_self={"scheme": "shaw", "clip": 3}),
    # RoPE in a pre-norm LM, gelu_tanh, a non-default LayerNorm eps, tied head.
    "lm_rope": make_config(
        "decoder-only", (10,), vocab_size=16, d_model=16, n_heads=2, d_ff=32, dropout=0.0, activation="gelu_tanh",
        norm_eps=1e-6, decoder_self={"scheme": "rope", "rope_base": 500.0}),
    # Huang's causal table, per head, shorter than the sequence (δ = −6 … −9 get no term); one row
    # left-padded, so that its first queries are fully masked (their attention outputs are 0).
    "lm_huang_perhead": make_config(
        "decoder-only", (10,), padding="left_row1", vocab_size=16, d_model=16, n_heads=2, d_ff=32, dropout=0.0, tie_weights=False,
        decoder_self={"scheme": "huang", "max_length": 6, "per_head": True}),
    # Transformer-XL in the encoder, causal ALiBi in the decoder, RoPE in cross-attention; RMSNorm
    # pre-norm, untied head, a source vocabulary of its own, 1 encoder and 2 decoder layers; one source
    # row is all padding (encoder rows and cross-attention fully masked).
    "encdec_xl_alibi_rope": make_config(
        "encoder-decoder", (9, 8), padding="empty_src_row3", vocab_size=16, src_vocab_size=12, d_model=16, n_heads=4, d_ff=32, dropout=0.0,
        n_encoder_layers=1, n_decoder_layers=2, norm="rms_norm", tie_weights=False,
        encoder_self={"scheme": "transformer_xl"}, decoder_self={"scheme": "alibi"}, cross={"scheme": "rope"}),
    # Per-head seed tables with the clip policy in the encoder, a shared Huang table in the decoder,
    # per-head Shaw (keys only) in cross-attention under Scaled alignment; post-norm LayerNorm, tied.
    "encdec_scaled_postnorm": make_config(
        "encoder-decoder", (10, 6), vocab_size=16, d_model=16, n_heads=2, d_ff=32, dropout=0.0, pre_norm=False,
        activation="gelu_tanh", cross_alignment="scaled",
        encoder_self={"scheme": "seed", "max_length": 4, "per_head": True, "out_of_range": "clip"},
        decoder_self={"scheme": "huang", "max_length": 12},
        cross={"scheme": "shaw", "clip": 2, "per_head": True, "shaw_values": False}),
    # Symmetric ALiBi with 3 heads (slopes of a non-power of two) in the encoder, causal
    # Transformer-XL in the decoder, the seed's method under Right alignment with the error policy
    # (the table covers every δ) in cross-attention; pre-norm LayerNorm, relu, tied.
    "encdec_alibi3_xl_right": make_config(
        "encoder-decoder", (9, 7), vocab_size=16, d_model=18, n_heads=3, d_ff=24, dropout=0.0, activation="relu",
        cross_alignment="right",
        encoder_self={"scheme": "alibi"}, decoder_self={"scheme": "transformer_xl"},
        cross={"scheme": "seed", "max_length": 9, "out_of_range": "error"}),
    # The sinusoidal absolute term as the only positional signal of a pre-norm LM, with an odd d_model
    # (15: the last column is a sine), tied head.
    "lm_sinusoidal": make_config(
        "decoder-only", (10,), vocab_size=16, d_model=15, n_heads=3, d_ff=32, dropout=0.0,
        absolute_position="sinusoidal", decoder_self={"scheme": "none"}),
    # Vaswani-style: learned absolute tables in both stacks (max_positions above both lengths), no
    # relative scheme in the self-attentions; Shaw with values in cross-attention at explicit positions
    # (each batch's tgt_positions, the last one at t1, one step past the source); post-norm, untied.
    "encdec_learned_explicit": make_config(
        "encoder-decoder", (9, 8), vocab_size=16, src_vocab_size=14, d_model=16, n_heads=2, d_ff=32, dropout=0.0,
        pre_norm=False, tie_weights=False, absolute_position="learned", max_positions=12, cross_explicit=True,
        encoder_self={"scheme": "none"}, decoder_self={"scheme": "none"}, cross={"scheme": "shaw", "clip": 3}),
    # CoPE in a pre-norm LM with 4 embedded positions, so that the counted positions clamp at 3.
    "lm_cope": make_config(
        "decoder-only", (10,), vocab_size=16, d_model=16, n_heads=2, d_ff=32, dropout=0.0,
        decoder_self={"scheme": "cope", "cope_positions": 4}),
    # FoX in the decoder of an encoder-decoder (its gates read the normed layer input), symmetric ALiBi
    # in the encoder, RoPE in cross-attention (FoX and CoPE serve causal self-attention only); RMSNorm.
    "encdec_fox": make_config(
        "encoder-decoder", (9, 8), vocab_size=16, src_vocab_size=12, d_model=16, n_heads=2, d_ff=32, dropout=0.0,
        norm="rms_norm", encoder_self={"scheme": "alibi"}, decoder_self={"scheme": "fox"}, cross={"scheme": "rope"}),
    # Stick-breaking weights in place of softmax in a post-norm LM; one row left-padded (padding keys
    # break nothing; the first queries attend nothing).
    "lm_stick_breaking": make_config(
        "decoder-only", (10,), padding="left_row1", vocab_size=16, d_model=16, n_heads=2, d_ff=32, dropout=0.0,
        pre_norm=False, decoder_self={"scheme": "stick_breaking"}),
    # xPos (causal self-attention only) with a short decay scale, under YaRN scaling 4 from a trained
    # length of 64, so that its ramp runs over pairs 0 … 2 and its temperature multiplies the logits.
    "lm_xpos_yarn": make_config(
        "decoder-only", (10,), vocab_size=16, d_model=16, n_heads=2, d_ff=32, dropout=0.0,
        decoder_self={"scheme": "xpos", "rope_base": 500.0, "xpos_scale_base": 8.0, "rope_scaling": "yarn",
                      "rope_scaling_factor": 4.0, "rope_original_length": 64}),
    # PoPE in both self-attentions (its phase offsets drawn partly outside [−2π, 0], so clamped), p-RoPE
    # (half the frequencies rotate) under NTK scaling 2 in cross-attention at Right alignment; RMSNorm.
    "encdec_pope_prope": make_config(
        "encoder-decoder", (9, 8), vocab_size=16, src_vocab_size=12, d_model=16, n_heads=2, d_ff=32, dropout=0.0,
        norm="rms_norm", cross_alignment="right", encoder_self={"scheme": "pope", "rope_base": 100.0},
        decoder_self={"scheme": "pope"},
        cross={"scheme": "p_rope", "rope_fraction": 0.5, "rope_scaling": "ntk", "rope_scaling_factor": 2.0}),
    # p-RoPE (3 of 4 pairs rotate) in a causal LM under linear scaling (position interpolation) by 2.
    "lm_prope_linear": make_config(
        "decoder-only", (10,), vocab_size=16, d_model=16, n_heads=2, d_ff=32, dropout=0.0, tie_weights=False,
        decoder_self={"scheme": "p_rope", "rope_base": 500.0, "rope_scaling": "linear", "rope_scaling_factor": 2.0}),
    # The distance-bias family. KERPLE's power kernel in a causal LM (post-norm, untied).
    "lm_kerple_power": make_config(
        "decoder-only", (10,), vocab_size=16, d_model=16, n_heads=2, d_ff=32, dropout=0.0, pre_norm=False,
        tie_weights=False, decoder_self={"scheme": "kerple", "kerple_variant": "power"}),
    # The dynamic position bias (x-transformers' defaults: depth 2, plain distance) in a causal LM.
    "lm_dynamic_bias": make_config(
        "decoder-only", (10,), vocab_size=16, d_model=16, n_heads=2, d_ff=32, dropout=0.0,
        decoder_self={"scheme": "dynamic_bias"}),
    # Sandwich (d' = 16, 4 heads: ratios 2, 4, 6, 8) in the encoder, KERPLE's log kernel in the decoder,
    # a one-layer dynamic bias of the signed log distance in cross-attention under Scaled alignment.
    "encdec_distance_bias": make_config(
        "encoder-decoder", (10, 7), vocab_size=16, src_vocab_size=12, d_model=16, n_heads=4, d_ff=32, dropout=0.0,
        cross_alignment="scaled", encoder_self={"scheme": "sandwich", "sandwich_dim": 16},
        decoder_self={"scheme": "kerple"},
        cross={"scheme": "dynamic_bias", "dynamic_bias_depth": 1, "dynamic_bias_log_distance": True}),
    # FIRE in a causal LM with a short threshold L0 = 4 (the queries past L have their own normaliser).
    "lm_fire": make_config(
        "decoder-only", (10,), vocab_size=16, d_model=16, n_heads=2, d_ff=32, dropout=0.0,
        decoder_self={"scheme": "fire", "fire_width": 8, "fire_threshold": 4}),
    # FIRE in every place: a narrow MLP and L0 = 3 in the encoder, the paper's defaults (width 32,
    # L0 = 512: one normaliser) in the decoder, L0 = 5 in cross-attention under Right alignment.
    "encdec_fire": make_config(
        "encoder-decoder", (10, 7), vocab_size=16, src_vocab_size=12, d_model=16, n_heads=2, d_ff=32, dropout=0.0,
        cross_alignment="right", encoder_self={"scheme": "fire", "fire_width": 4, "fire_threshold": 3},
        decoder_self={"scheme": "fire"}, cross={"scheme": "fire", "fire_width": 6, "fire_threshold": 5}),
}

# ---- parameter names, shapes and random values (docs §2) ----


def positional_entries(pre, pc, C, H):
    """(name, shape, init) of one scheme's state_dict entries (docs §2.2), in state_dict order."""
    D = C // H
    heads = (H,) if pc["per_head"] else ()
    s = pc["scheme"]
    if s == "seed":
        return [(pre + "table", heads + (2 * pc["max_length"] - 1, D), "table")]
    if s == "huang":
        return [(pre + "table", heads + (pc["max_length"], D), "table")]
    if s == "shaw":
        rows = 2 * pc["clip"] + 1
        out = [(pre + "key_table", heads + (rows, D), "table")]
        if pc["shaw_values"]:
            out.append((pre + "value_table", heads + (rows, D), "table"))
        return out
    if s == "t5":
        return [(pre + "table", (H, pc["num_buckets"]), "normal")]
    if s == "alibi":
        return [(pre + "slopes", (H,), "slopes")]
    if s == "transformer_xl":
        return [(pre + "u", (H, D), "xavier"), (pre + "v", (H, D), "xavier"), (pre + "r_proj.weight", (C, C), "linear")]
    if s == "cope":
        return [(pre + "table", (pc["cope_positions"], D), "table")]
    if s == "fox":
        return [(pre + "forget_gate.weight", (H, C), "linear"), (pre + "forget_gate.bias", (H,), "linear")]
    if s == "pope":
        return [(pre + "phase_offset", (H, D), "phase")]
    if s == "kerple":  # r1 outside the kernel, r2 inside; the released code's U(0, 1) and 2·U(0, 1) draws
        log = pc["kerple_variant"] == "log"
        return [(pre + "r1", (H,), "uniform2" if log else "uniform"), (pre + "r2", (H,), "uniform" if log else "uniform2")]
    if s == "sandwich":
        return [(pre + "ratios", (H,), "ratios")]
    if s == "dynamic_bias":  # Linear(1, w), depth − 1 × Linear(w, w), Linear(w, H); w = C / 4
        w, depth = C // 4, pc["dynamic_bias_depth"]
        sizes = [(1 if l == 0 else w, H if l == depth else w) for l in range(depth + 1)]
        return [e for l, (i, o) in enumerate(sizes)
                for e in ((f"{pre}mlp.{l}.weight", (o, i), "linear"), (f"{pre}mlp.{l}.bias", (o,), "linear"))]
    if s == "fire":  # the paper's module: c, L_multiplier, then its Sequential's Linears 0 and 2
        w = pc["fire_width"]
        return [(pre + "c", (1,), "fire_c"), (pre + "L_multiplier", (1,), "fire_multiplier"),
                (pre + "mlp.0.weight", (w, 1), "linear"), (pre + "mlp.0.bias", (w,), "linear"),
                (pre + "mlp.2.weight", (H, w), "linear"), (pre + "mlp.2.bias", (H,), "linear")]
    return []  # none, rope, xpos, p_rope


def attention_entries(pre, C, H, pc, with_positional):
    out = []
    for proj in ("q_proj", "k_proj", "v_proj", "out_proj"):
        out += [(pre + proj + ".weight", (C, C), "linear"), (pre + proj + ".bias", (C,), "linear")]
    if pc is not None and with_positional:
        out += positional_entries(pre + "positional.", pc, C, H)
    return out


def norm_entries(pre, cfg):
    C = cfg["d_model"]
    out = [(pre + ".weight", (C,), "gain")]
    if cfg["norm"] == "layer_norm":
        out.append((pre + ".bias", (C,), "shift"))
    return out


def block_entries(pre, cfg, layer, self_pc, cross_pc=None):
    """One EncoderBlock (cross_pc None) or DecoderBlock: attention(s), ff, norms (docs §2.3)."""
    C, H, Fd = cfg["d_model"], cfg["n_heads"], cfg["d_ff"]
    out = attention_entries(pre + "self_attn.", C, H, self_pc, self_pc["scheme"] != "t5" or layer == 0)
    if cross_pc is not None:
        out += attention_entries(pre + "cross_attn.", C, H, cross_pc, cross_pc["scheme"] != "t5" or layer == 0)
    out += [(pre + "ff.fc1.weight", (Fd, C), "linear"), (pre + "ff.fc1.bias", (Fd,), "linear"),
            (pre + "ff.fc2.weight", (C, Fd), "linear"), (pre + "ff.fc2.bias", (C,), "linear")]
    for n in ("norm1", "norm2") + (("norm3",) if cross_pc is not None else ()):
        out += norm_entries(pre + n, cfg)
    return out


def state_entries(cfg):
    """Every state_dict entry (name, shape, init) in relgrad's state_dict order (docs §2.3, §2.4)."""
    C, V = cfg["d_model"], cfg["vocab_size"]
    out = []

    def pos_embed(pre):  # docs §2.3: the learned absolute table, right after the token table
        return [(pre + "pos_embed.weight", (cfg["max_positions"], C), "normal")] \
            if cfg["absolute_position"] == "learned" else []

    if cfg["model"] == "decoder-only":
        out.append(("embed.weight", (V, C), "normal"))
        out += pos_embed("")
        for l in range(cfg["n_decoder_layers"]):
            out += block_entries(f"layers.{l}.", cfg, l, cfg["decoder_self"])
        if cfg["pre_norm"]:
            out += norm_entries("final_norm", cfg)
    else:
        V_src = cfg["src_vocab_size"] or V
        out.append(("encoder.embed.weight", (V_src, C), "normal"))
        out += pos_embed("encoder.")
        for l in range(cfg["n_encoder_layers"]):
            out += block_entries(f"encoder.layers.{l}.", cfg, l, cfg["encoder_self"])
        if cfg["pre_norm"]:
            out += norm_entries("encoder.final_norm", cfg)
        out.append(("decoder.embed.weight", (V, C), "normal"))
        out += pos_embed("decoder.")
        for l in range(cfg["n_decoder_layers"]):
            out += block_entries(f"decoder.layers.{l}.", cfg, l, cfg["decoder_self"], cfg["cross"])
        if cfg["pre_norm"]:
            out += norm_entries("decoder.final_norm", cfg)
    if not cfg["tie_weights"]:
        out.append(("lm_head.weight", (V, C), "linear"))
    return out


def alibi_slopes(n):
    """docs §3.5 (ofirpress get_slopes)."""
    def power_of_2(m):
        return [2.0 ** (-8.0 * k / m) for k in range(1, m + 1)]
    c = 1
    while c * 2 <= n:
        c *= 2
    return power_of_2(c) + alibi_slopes(2 * c)[0::2][:n - c] if c != n else power_of_2(c)


def random_state(cfg, g):
    """Random values for every entry (docs §4's distributions, norms perturbed), rounded to float32."""
    H, D = cfg["n_heads"], cfg["d_model"] // cfg["n_heads"]
    state = {}
    for name, shape, init in state_entries(cfg):
        if init == "normal":
            t = torch.randn(shape, dtype=F64, generator=g)
        elif init == "linear":  # U(−1/√in, 1/√in); a bias's `in` is its weight's
            fan_in = shape[1] if len(shape) == 2 else state[name[:-len("bias")] + "weight"].shape[1]
            t = (torch.rand(shape, dtype=F64, generator=g) * 2 - 1) / math.sqrt(fan_in)
        elif init == "table":
            t = torch.randn(shape, dtype=F64, generator=g) * D ** -0.5
        elif init == "xavier":
            b = math.sqrt(6.0 / (H + D))
            t = (torch.rand(shape, dtype=F64, generator=g) * 2 - 1) * b
        elif init == "gain":
            t = 1.0 + 0.2 * torch.randn(shape, dtype=F64, generator=g)
        elif init == "shift":
            t = 0.2 * torch.randn(shape, dtype=F64, generator=g)
        elif init == "phase":  # PoPE's offsets: U(−7, 0.5), partly outside the clamp [−2π, 0]
            t = torch.rand(shape, dtype=F64, generator=g) * 7.5 - 7.0
        elif init == "uniform":
            t = torch.rand(shape, dtype=F64, generator=g)
        elif init == "fire_c":  # around the paper's 0.1: U(0.05, 0.3)
            t = 0.05 + 0.25 * torch.rand(shape, dtype=F64, generator=g)
        elif init == "fire_multiplier":  # around the paper's 1.0: U(0.8, 1.3), so L = |m·L0| is no integer
            t = 0.8 + 0.5 * torch.rand(shape, dtype=F64, generator=g)
        elif init == "uniform2":
            t = 2 * torch.rand(shape, dtype=F64, generator=g)
        elif init == "ratios":  # Sandwich's compression 8h/H, h = 1 … H (a buffer)
            t = torch.tensor([8.0 * (h + 1) / shape[0] for h in range(shape[0])], dtype=F64)
        elif init == "slopes":
            t = torch.tensor(alibi_slopes(shape[0]), dtype=F64)
        else:
            raise ValueError(init)
        state[name] = t.to(F32)
    return state


# ---- the computation (docs §3) ----

def linear(P, name, x, bias=True):
    y = x @ P[name + ".weight"].T
    return y + P[name + ".bias"] if bias else y


def norm(P, name, x, cfg):
    """docs §3.6: LayerNorm with norm_eps; RMSNorm with the dtype's machine epsilon."""
    C = x.shape[-1]
    if cfg["norm"] == "layer_norm":
        return F.layer_norm(x, (C,), P[name + ".weight"], P[name + ".bias"], cfg["norm_eps"])
    eps = torch.finfo(x.dtype).eps
    return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + eps) * P[name + ".weight"]


def query_positions(t2, t1, alignment):
    """π(i) (docs §3.4)."""
    i = torch.arange(t2)
    if alignment == "left":
        return i
    if alignment == "right":
        return i + t1 - t2
    return (i * t1) // t2  # scaled: floor(i·t1/t2)


def index_map(pi, t1, max_past, max_future, policy, causal):
    """row(i, j) = δ + max_past with the out-of-range policy; −1 = no entry (docs §3.4)."""
    R = max_past + max_future + 1
    delta = torch.arange(t1)[None, :] - pi[:, None]  # (t2, t1)
    row = delta + max_past
    out_of_range = (row < 0) | (row >= R)
    if policy == "clip":
        row = row.clamp(0, R - 1)
    elif policy == "zero":
        row = torch.where(out_of_range, torch.full_like(row, -1), row)
    else:
        assert not bool((out_of_range & ~((delta > 0) & causal)).any()), "out of range under the error policy"
    if causal:
        row = torch.where(delta > 0, torch.full_like(row, -1), row)
    return row, R


def table_scores(q, table, idx):
    """S[.., i, j] = q_i · table[idx[i, j]] (0 where idx = −1); table (R, D) or (H, R, D)."""
    B, H, t2, _ = q.shape
    P = q @ table.transpose(-1, -2)  # (B, H, t2, R)
    ix = idx.clamp(min=0)[None, None].expand(B, H, t2, idx.shape[1])
    S = P.gather(-1, ix)
    return torch.where((idx >= 0)[None, None], S, torch.zeros_like(S))


def table_values(w, table, idx):
    """Σ_j w[.., i, j] · table[idx[i, j]] (Shaw's value term), w (B, H, t2, t1)."""
    B, H, t2, t1 = w.shape
    R = table.shape[-2]
    ix = idx.clamp(min=0)[None, None].expand(B, H, t2, t1)
    wv = torch.where((idx >= 0)[None, None], w, torch.zeros_like(w))
    rel = torch.zeros(B, H, t2, R, dtype=w.dtype).scatter_add(-1, ix, wv)  # weight on each table row
    return rel @ table


def t5_bucket(delta, bidirectional, num_buckets, max_distance):
    """docs §3.5, t5."""
    if bidirectional:
        nb = num_buckets // 2
        base = nb if delta > 0 else 0
        n = abs(delta)
    else:
        nb, base, n = num_buckets, 0, max(-delta, 0)
    max_exact = nb // 2
    if n < max_exact:
        return base + n
    f = math.log(n / max_exact) / math.log(max_distance / max_exact) * (nb - max_exact)
    return base + min(max_exact + math.floor(f), nb - 1)


def rope(x, positions, base):
    """Interleaved pairs (2k, 2k+1), θ = p / base^(2k/D); cos/sin in float64, cast (docs §3.5)."""
    D = x.shape[-1]
    denom = torch.tensor([base ** (2.0 * k / D) for k in range(D // 2)], dtype=F64)
    angle = positions.to(F64)[:, None] / denom[None, :]  # (T, D/2)
    cos, sin = angle.cos().to(x.dtype), angle.sin().to(x.dtype)
    x0, x1 = x[..., 0::2], x[..., 1::2]
    return torch.stack([x0 * cos - x1 * sin, x1 * cos + x0 * sin], -1).reshape(x.shape)


def rotary_timescales(D, pc):
    """The rotary family (docs §3.5): pair k turns by p / timescale_k, timescale_k = base^(2k/D), under the
    RoPE scaling (linear: × s; ntk: base · s^(D/(D−2)); yarn: a ramp between θ/s and θ over the pairs
    between HF's correction dims of β_fast 32 and β_slow 1, and the factor 0.1 ln s + 1 on cos and sin);
    p_rope: ∞ (unrotated) from pair ⌊p·D/2⌋ on. Returns (timescales (D/2) float64, factor)."""
    base, s, kind = pc["rope_base"], pc["rope_scaling_factor"], pc["rope_scaling"]
    ks = torch.arange(D // 2, dtype=F64)
    b = base * s ** (D / (D - 2)) if kind == "ntk" else base
    ts = b ** (2 * ks / D)
    factor = 1.0
    if kind == "linear":
        ts = ts * s
    elif kind == "yarn":
        L = pc["rope_original_length"]

        def pair(rotations):
            return D * math.log(L / (rotations * 2 * math.pi)) / (2 * math.log(base))
        low, high = max(math.floor(pair(32)), 0), min(math.ceil(pair(1)), D - 1)
        if low == high:
            high += 0.001
        ramp = ((ks - low) / (high - low)).clamp(0, 1)
        ts = 1 / ((1 / ts) / s * ramp + (1 / ts) * (1 - ramp))
        factor = 0.1 * math.log(s) + 1 if s > 1 else 1.0
    if pc["scheme"] == "p_rope":
        ts[int(pc["rope_fraction"] * D // 2):] = math.inf
    return ts, factor


def rotary(x, positions, pc, key):
    """rope, xpos, p_rope: interleaved pairs turned by p / timescale_k, scaled by the factor and, for xpos,
    ζ_k^(±p/γ) (+ on queries, − on keys; ζ_k = (2k/D + 0.4)/1.4); cos/sin in float64, cast (docs §3.5)."""
    D = x.shape[-1]
    ts, factor = rotary_timescales(D, pc)
    p = positions.to(F64)[:, None]
    angle = p / ts[None, :]  # (T, D/2); p / ∞ = 0
    amp = torch.full_like(angle, factor)
    if pc["scheme"] == "xpos":
        zeta = (2 * torch.arange(D // 2, dtype=F64) / D + 0.4) / 1.4
        amp = amp * zeta[None, :] ** ((-p if key else p) / pc["xpos_scale_base"])
    cos, sin = (angle.cos() * amp).to(x.dtype), (angle.sin() * amp).to(x.dtype)
    x0, x1 = x[..., 0::2], x[..., 1::2]
    return torch.stack([x0 * cos - x1 * sin, x1 * cos + x0 * sin], -1).reshape(x.shape)


def pope_polar(x, phase):
    """PoPE (docs §3.5): softplus magnitudes at the phases, (μ cos, μ sin) interleaved → (…, 2D)."""
    mu = F.softplus(x)
    return torch.stack([mu * phase.cos(), mu * phase.sin()], -1).reshape(*x.shape[:-1], 2 * x.shape[-1])


def txl_sinusoid(p, dim):
    """R_p = [sin(p·ω_k) …, cos(p·ω_k) …], ω_k = 10000^(−2k/dim), p a float64 vector → (len(p), dim)."""
    w = torch.tensor([1.0 / 10000.0 ** (2.0 * k / dim) for k in range(dim // 2)], dtype=F64)
    a = p[:, None] * w[None, :]
    return torch.cat([a.sin(), a.cos()], -1)


def attention(P, pre, pos_pre, pc, xq, xkv, H, causal, key_padding_mask, alignment):
    """MultiHeadAttention (docs §3.4, §3.5). pos_pre: where the scheme's entries live (T5: layers.0)."""
    B, t2, C = xq.shape
    t1 = xkv.shape[1]
    D = C // H
    dt = xq.dtype

    def heads(x, t):
        return x.reshape(B, t, H, D).permute(0, 2, 1, 3)

    q = heads(linear(P, pre + "q_proj", xq), t2)
    k = heads(linear(P, pre + "k_proj", xkv), t1)
    v = heads(linear(P, pre + "v_proj", xkv), t1)
    # alignment: a name, or explicit positions int64 (t2) (cross_explicit, docs §3.4)
    pi = alignment if torch.is_tensor(alignment) else query_positions(t2, t1, alignment)
    delta = torch.arange(t1)[None, :] - pi[:, None]  # (t2, t1)
    s = pc["scheme"] if pc is not None else "none"
    qc, kc, score, bias, value_term = q, k, None, None, None
    scale = D ** -0.5
    if s == "rope" and pc["rope_scaling"] == "none":
        qc, kc = rope(q, pi, pc["rope_base"]), rope(k, torch.arange(t1), pc["rope_base"])
    elif s in ("rope", "xpos", "p_rope"):
        qc, kc = rotary(q, pi, pc, False), rotary(k, torch.arange(t1), pc, True)
    elif s == "pope":  # θ_c = base^(−c/D) for every dim c; keys at j·θ + φ, φ clamped to [−2π, 0]
        theta = torch.tensor([pc["rope_base"] ** (-c / D) for c in range(D)], dtype=F64)
        phi = P[pos_pre + "phase_offset"].clamp(-2 * math.pi, 0.0)  # (H, D)
        qc = pope_polar(q, (pi.to(F64)[:, None] * theta[None, :]).to(dt))
        kc = pope_polar(k, (torch.arange(t1).to(F64)[:, None] * theta[None, :]).to(dt)[None] + phi[:, None, :])
    elif s in ("seed", "huang", "shaw"):
        if s == "seed":
            past, future, policy = pc["max_length"] - 1, pc["max_length"] - 1, pc["out_of_range"]
        elif s == "huang":
            past, future, policy = pc["max_length"] - 1, 0, pc["out_of_range"]
        else:
            past, future, policy = pc["clip"], pc["clip"], "clip"
        idx, _ = index_map(pi, t1, past, future, policy, causal)
        key_table = P[pos_pre + ("key_table" if s == "shaw" else "table")]
        score = table_scores(q, key_table, idx)
        if s == "shaw" and pc["shaw_values"]:
            value_table = P[pos_pre + "value_table"]
            value_term = lambda w: table_values(w, value_table, idx)  # noqa: E731
    elif s == "t5":
        scale = 1.0
        buckets = torch.tensor([[t5_bucket(int(delta[i, j]), not causal, pc["num_buckets"], pc["max_distance"])
                                 for j in range(t1)] for i in range(t2)])
        bias = P[pos_pre + "table"][:, buckets][None]  # (1, H, t2, t1)
    elif s == "alibi":
        dist = delta.abs() if not causal else (-delta).clamp(min=0)
        bias = -P[pos_pre + "slopes"].to(dt)[None, :, None, None] * dist.to(dt)[None, None]
    elif s == "transformer_xl":
        u, vb = P[pos_pre + "u"], P[pos_pre + "v"]
        qc = q + u[None, :, None, :]
        p = -delta  # p = π(i) − j
        p_min, p_max = int(p.min()), int(p.max())
        R = txl_sinusoid(torch.arange(p_min, p_max + 1, dtype=F64), C).to(dt)  # rows p_min … p_max
        rw = linear(P, pos_pre + "r_proj", R, bias=False).reshape(-1, H, D).permute(1, 0, 2)  # (H, nP, D)
        Pp = (q + vb[None, :, None, :]) @ rw.transpose(-1, -2)  # (B, H, t2, nP)
        idx = p - p_min
        if causal:
            idx = torch.where(delta > 0, torch.full_like(idx, -1), idx)
        score = table_scores_from_products(Pp, idx)
    elif s in ("kerple", "sandwich", "dynamic_bias"):
        bias = distance_bias(P, pos_pre, pc, delta, H, dt)[None]  # (1, H, t2, t1), after the scaling
    elif s == "fire":
        bias = fire_bias(P, pos_pre, pc, pi, t1, dt)[None]  # (1, H, t2, t1), after the scaling
    elif s == "fox":  # docs §3.5: forget gates on the layer input, c = cumulative log gates
        log_f = F.logsigmoid(linear(P, pos_pre + "forget_gate", xkv))  # (B, t1, H)
        c = log_f.permute(0, 2, 1).cumsum(-1)  # (B, H, t1)
        bias = c[:, :, pi][..., None] - c[:, :, None, :]  # (B, H, t2, t1): Σ_{l=j+1..π(i)} log f_l
    elif s not in ("none", "cope", "stick_breaking"):
        raise ValueError(s)

    logits = qc @ kc.transpose(-1, -2)
    if score is not None:
        logits = logits + score
    logits = logits * scale
    if bias is not None:
        logits = logits + bias
    mask = torch.zeros(1, 1, t2, t1, dtype=torch.bool)
    if causal:
        mask = mask | (delta > 0)[None, None]
    if key_padding_mask is not None:
        mask = mask | key_padding_mask[:, None, None, :]
    if s == "cope":  # docs §3.5: gates on the scaled logits, positions counted back from the query
        gates = torch.sigmoid(logits).masked_fill(mask, 0.0)
        p = gates.flip(-1).cumsum(-1).flip(-1).clamp(max=pc["cope_positions"] - 1)
        lo, hi = p.floor(), p.ceil()
        w = p - lo
        qe = q @ P[pos_pre + "table"].T  # (B, H, t2, npos)
        logits = logits + qe.gather(-1, hi.long()) * w + qe.gather(-1, lo.long()) * (1 - w)
    lowest = torch.finfo(dt).min
    if s == "stick_breaking":  # docs §3.5: β = sigmoid(logits), the stick broken from key π(i) − 1 back
        hidden = mask | (delta >= 0)[None, None]
        log_rest = F.logsigmoid(-logits).masked_fill(hidden, 0.0)
        later = log_rest.flip(-1).cumsum(-1).flip(-1) - log_rest  # Σ over the visible keys k > j
        weights = torch.exp(F.logsigmoid(logits) + later).masked_fill(hidden, 0.0)
    else:
        weights = torch.softmax(logits.masked_fill(mask, lowest), -1).masked_fill(mask, 0.0)
    out = weights @ v
    if value_term is not None:
        out = out + value_term(weights)
    return linear(P, pre + "out_proj", out.permute(0, 2, 1, 3).reshape(B, t2, C))


def distance_bias(P, pre, pc, delta, H, dt):
    """The distance-bias family (docs §3.5): b_h(δ) at every δ (t2, t1) → (H, t2, t1)."""
    s = pc["scheme"]
    if s == "kerple":
        power = pc["kerple_variant"] == "power"
        r1, r2 = P[pre + "r1"], P[pre + "r2"]
        # the paper's projection onto [0.01, ∞) ([0.01, 2] for the power's exponent), straight through
        r1 = r1 + (r1.clamp(min=0.01) - r1).detach()
        r2 = r2 + (r2.clamp(min=0.01, max=2.0 if power else math.inf) - r2).detach()
        a = delta.abs().to(dt)[None]
        r1, r2 = r1[:, None, None], r2[:, None, None]
        if not power:
            return -r1 * torch.log(1 + r2 * a)
        return -r1 * torch.where(a > 0, a.clamp(min=1) ** r2, torch.zeros_like(a * r2))
    if s == "sandwich":
        dim = pc["sandwich_dim"]
        freqs = torch.tensor([10000.0 ** (-2.0 * k / dim) for k in range(1, dim // 2 + 1)], dtype=F64)
        inner = torch.cos(delta.to(F64)[..., None] * freqs).sum(-1) - dim / 2  # (t2, t1), float64
        return inner.to(dt)[None] / P[pre + "ratios"].to(dt)[:, None, None]
    if s == "dynamic_bias":
        x = (-delta).to(dt)[..., None]  # x-transformers' i − j, (t2, t1, 1)
        if pc["dynamic_bias_log_distance"]:
            x = torch.sign(x) * torch.log(x.abs() + 1)
        depth = pc["dynamic_bias_depth"]
        for l in range(depth):
            x = F.silu(linear(P, f"{pre}mlp.{l}", x))
        return linear(P, f"{pre}mlp.{depth}", x).permute(2, 0, 1)
    raise ValueError(s)


def fire_bias(P, pre, pc, pi, t1, dt):
    """FIRE (docs §3.5), the paper's listing with the query at i = π(i): (H, t2, t1)."""
    c, multiplier = P[pre + "c"], P[pre + "L_multiplier"]
    i = pi.to(dt)[:, None]  # (t2, 1)
    j = torch.arange(t1, dtype=dt)[None, :]  # (1, t1)
    threshold = torch.abs(multiplier * pc["fire_threshold"])
    normaliser = torch.log(torch.abs(c * torch.maximum(i, threshold)) + 1) + 1e-6  # (t2, 1)
    x = torch.log(torch.abs(c * (i - j)) + 1) / normaliser  # (t2, t1)
    h = F.relu(linear(P, pre + "mlp.0", x[..., None]))
    return linear(P, pre + "mlp.2", h).permute(2, 0, 1)


def table_scores_from_products(Pp, idx):
    """Gathers precomputed products Pp (B, H, t2, R) at idx (t2, t1), 0 where idx = −1."""
    B, H, t2, _ = Pp.shape
    ix = idx.clamp(min=0)[None, None].expand(B, H, t2, idx.shape[1])
    S = Pp.gather(-1, ix)
    return torch.where((idx >= 0)[None, None], S, torch.zeros_like(S))


def feed_forward(P, pre, x, activation):
    h = linear(P, pre + "fc1", x)
    if activation == "gelu":
        h = F.gelu(h)
    elif activation == "gelu_tanh":
        h = F.gelu(h, approximate="tanh")
    else:
        h = F.relu(h)
    return linear(P, pre + "fc2", h)


def pos_prefix(stack, layer, attn, pc):
    """T5's table lives under layers.0 of its stack (docs §2.4); every other scheme under its own layer."""
    return f"{stack}layers.{0 if pc['scheme'] == 't5' else layer}.{attn}.positional."


def encoder_block(P, stack, l, cfg, pc, x, mask, causal):
    pre = f"{stack}layers.{l}."
    H = cfg["n_heads"]

    def attn(h):
        return attention(P, pre + "self_attn.", pos_prefix(stack, l, "self_attn", pc), pc, h, h, H, causal, mask,
                         "left")

    if cfg["pre_norm"]:
        x = x + attn(norm(P, pre + "norm1", x, cfg))
        return x + feed_forward(P, pre + "ff.", norm(P, pre + "norm2", x, cfg), cfg["activation"])
    x = norm(P, pre + "norm1", x + attn(x), cfg)
    return norm(P, pre + "norm2", x + feed_forward(P, pre + "ff.", x, cfg["activation"]), cfg)


def decoder_block(P, l, cfg, x, memory, tgt_mask, src_mask, tgt_positions):
    stack, pre, H = "decoder.", f"decoder.layers.{l}.", cfg["n_heads"]
    sp, cp = cfg["decoder_self"], cfg["cross"]

    def self_attn(h):
        return attention(P, pre + "self_attn.", pos_prefix(stack, l, "self_attn", sp), sp, h, h, H, True, tgt_mask,
                         "left")

    def cross_attn(h):
        alignment = tgt_positions if cfg["cross_explicit"] else cfg["cross_alignment"]
        return attention(P, pre + "cross_attn.", pos_prefix(stack, l, "cross_attn", cp), cp, h, memory, H, False,
                         src_mask, alignment)

    ff = lambda h: feed_forward(P, pre + "ff.", h, cfg["activation"])  # noqa: E731
    if cfg["pre_norm"]:
        x = x + self_attn(norm(P, pre + "norm1", x, cfg))
        x = x + cross_attn(norm(P, pre + "norm2", x, cfg))
        return x + ff(norm(P, pre + "norm3", x, cfg))
    x = norm(P, pre + "norm1", x + self_attn(x), cfg)
    x = norm(P, pre + "norm2", x + cross_attn(x), cfg)
    return norm(P, pre + "norm3", x + ff(x), cfg)


def lm_head(P, h, cfg, embed_name):
    """docs §3.8: untied Linear without bias, or the tied table with T5's d_model^−1/2."""
    if cfg["tie_weights"]:
        return (h * cfg["d_model"] ** -0.5) @ P[embed_name].T
    return linear(P, "lm_head", h, bias=False)


def sinusoid(T, C, dtype):
    """docs §3.2: PE(pos, 2i) = sin(pos / 10000^(2i/C)), PE(pos, 2i+1) = cos(same), in float64 → (T, C)."""
    pos = torch.arange(T, dtype=F64)[:, None]
    col = torch.arange(C)
    two_i = (col - col % 2).to(F64)  # 2i for both columns of a pair; an odd C ends on a sine
    angle = pos / 10000.0 ** (two_i / C)[None, :]
    return torch.where((col % 2 == 0)[None, :], angle.sin(), angle.cos()).to(dtype)


def embed(P, cfg, pre, tokens):
    """Token embeddings plus the absolute term of positions 0 … T − 1 (docs §3.2), before dropout."""
    h = P[pre + "embed.weight"][tokens]
    T, C = tokens.shape[1], cfg["d_model"]
    if cfg["absolute_position"] == "learned":
        h = h + P[pre + "pos_embed.weight"][:T]
    elif cfg["absolute_position"] == "sinusoidal":
        h = h + sinusoid(T, C, h.dtype)
    return h


def forward(P, cfg, batch):
    """Logits (B, T, V) of one batch (docs §3.2, §3.3); dropout is 0 in every config."""
    if cfg["model"] == "decoder-only":
        h = embed(P, cfg, "", batch["tokens"])
        for l in range(cfg["n_decoder_layers"]):
            h = encoder_block(P, "", l, cfg, cfg["decoder_self"], h, batch["mask"], True)
        if cfg["pre_norm"]:
            h = norm(P, "final_norm", h, cfg)
        return lm_head(P, h, cfg, "embed.weight")
    m = embed(P, cfg, "encoder.", batch["src"])
    for l in range(cfg["n_encoder_layers"]):
        m = encoder_block(P, "encoder.", l, cfg, cfg["encoder_self"], m, batch["src_mask"], False)
    if cfg["pre_norm"]:
        m = norm(P, "encoder.final_norm", m, cfg)
    h = embed(P, cfg, "decoder.", batch["tgt"])
    for l in range(cfg["n_decoder_layers"]):
        h = decoder_block(P, l, cfg, h, m, batch["tgt_mask"], batch["src_mask"], batch.get("tgt_positions"))
    if cfg["pre_norm"]:
        h = norm(P, "decoder.final_norm", h, cfg)
    return lm_head(P, h, cfg, "decoder.embed.weight")


# ---- data ----

def padded(rows, length, fill):
    out = torch.full((len(rows), length), fill, dtype=torch.int64)
    for b, r in enumerate(rows):
        out[b, :len(r)] = torch.tensor(r, dtype=torch.int64)
    return out


def make_batch(cfg, g):
    """Right-padded sequences; row 0 has the full length. Padding id 0, content ids from 1 (LM) / 2."""
    V = cfg["vocab_size"]

    def tokens(n, lo, hi):
        return torch.randint(lo, hi, (n,), generator=g).tolist()

    def length(full, b):
        return full if b == 0 else int(torch.randint(max(2, full - 4), full + 1, (1,), generator=g))

    if cfg["model"] == "decoder-only":
        (T,) = cfg["lengths"]
        seqs = [tokens(length(T, b) + 1, 1, V) for b in range(BATCH)]  # one more token: the last target
        if cfg["padding"] == "left_row1":
            seqs[1] = seqs[1][:T - 2]  # 7 real tokens (+ the last target)
        batch = {"tokens": padded([s[:-1] for s in seqs], T, 0), "mask": toks_mask(seqs, T, 1),
                 "targets": padded([s[1:] for s in seqs], T, -100)}
        if cfg["padding"] == "left_row1":  # move row 1's padding to the front
            n = len(seqs[1]) - 1
            for k in batch:
                batch[k][1] = torch.cat([batch[k][1][n:], batch[k][1][:n]])
        return batch
    t1, t2 = cfg["lengths"]
    V_src = cfg["src_vocab_size"] or V
    src = [tokens(length(t1, b), 1, V_src) for b in range(BATCH)]
    if cfg["padding"] == "empty_src_row3":
        src[3] = []
    ys = [tokens(length(t2, b), 2, V) for b in range(BATCH)]
    tgt_in = [[1] + y[:-1] for y in ys]  # 1 = BOS
    batch = {"src": padded(src, t1, 0), "src_mask": toks_mask(src, t1, 0),
             "tgt": padded(tgt_in, t2, 0), "tgt_mask": toks_mask(tgt_in, t2, 0),
             "targets": padded(ys, t2, -100)}
    if cfg["cross_explicit"]:
        # Non-decreasing positions in [0, t1), then t1 for the last query: one step past the source.
        pi = sorted(torch.randint(0, t1, (t2 - 1,), generator=g).tolist()) + [t1]
        batch["tgt_positions"] = torch.tensor(pi, dtype=torch.int64)
    return batch


def toks_mask(seqs, length, extra):
    """bool (B, length): true at padding, for sequences of len(s) − extra real tokens."""
    m = torch.ones(len(seqs), length, dtype=torch.bool)
    for b, s in enumerate(seqs):
        m[b, :len(s) - extra] = False
    return m


# ---- training (docs §1.4) ----

def lr_at(step):
    t = TRAIN
    if step < t["warmup_steps"]:
        return t["max_lr"] * (step + 1) / t["warmup_steps"]
    if step >= t["total_steps"]:
        return t["min_lr"]
    r = (step - t["warmup_steps"]) / (t["total_steps"] - t["warmup_steps"])
    return t["min_lr"] + 0.5 * (1.0 + math.cos(math.pi * r)) * (t["max_lr"] - t["min_lr"])


def decay_groups(named):
    """group 0: dim >= 2 and the name holds neither "norm" nor "ln"; group 1: the rest (docs §1.4)."""
    decay = [p for n, p in named if p.dim() >= 2 and "norm" not in n and "ln" not in n]
    no_decay = [p for n, p in named if not (p.dim() >= 2 and "norm" not in n and "ln" not in n)]
    return decay, no_decay


def clip_grad_norm_(params, max_norm):
    """relgrad's clip_grad_norm_: the norm in float64, grads scaled only when scale < 1."""
    total = math.sqrt(sum(float((p.grad.to(F64) ** 2).sum()) for p in params if p.grad is not None))
    scale = max_norm / (total + 1e-6)
    if scale < 1.0:
        for p in params:
            if p.grad is not None:
                p.grad.mul_(scale)
    return total


def train(cfg, init, batches, dtype):
    """STEPS steps from `init`; returns (losses, grad norms, lrs, final parameters, optimizer state).
    The state holds, for the first and last parameter of each group, torch's AdamW state under
    relgrad's state_tensors() names (docs §1.5): group<g>.param<i> is torch's index Σ len(earlier groups) + i."""
    entries = state_entries(cfg)
    P = {name: init[name].to(dtype).clone() for name, _, _ in entries}
    named = [(name, P[name]) for name, _, kind in entries if kind not in ("slopes", "ratios")]  # named_parameters(): no buffers
    for _, p in named:
        p.requires_grad_(True)
    decay, no_decay = decay_groups(named)
    t = TRAIN
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": t["weight_decay"]},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=t["max_lr"], betas=(t["beta1"], t["beta2"]), eps=t["eps"], foreach=False)
    params = [p for _, p in named]
    losses, norms, lrs = [], [], []
    for step in range(STEPS):
        opt.zero_grad(set_to_none=True)
        batch = batches[step]
        logits = forward(P, cfg, batch)
        V = logits.shape[-1]
        loss = F.cross_entropy(logits.reshape(-1, V), batch["targets"].reshape(-1), ignore_index=-100)
        loss.backward()
        norms.append(clip_grad_norm_(params, t["max_norm"]))
        lr = lr_at(step)
        for group in opt.param_groups:
            group["lr"] = lr
        lrs.append(lr)
        losses.append(float(loss))
        opt.step()
    torch_state = opt.state_dict()["state"]
    optim_state, first = {}, 0
    for g, group in enumerate((decay, no_decay)):
        for i in sorted({0, len(group) - 1}) if group else []:
            st = torch_state[first + i]
            pre = f"group{g}.param{i}."
            optim_state[pre + "step"] = torch.tensor(int(st["step"]), dtype=torch.int64)
            optim_state[pre + "exp_avg"] = st["exp_avg"].clone()
            optim_state[pre + "exp_avg_sq"] = st["exp_avg_sq"].clone()
        first += len(group)
    return losses, norms, lrs, {n: p.detach() for n, p in named}, optim_state


def metadata_of(name, cfg, seed):
    md = {"generator": "tools/gen_golden_train.py", "torch_version": torch.__version__, "seed": str(seed),
          "config_name": name, "model": cfg["model"], "steps": str(STEPS), "batches": str(STEPS),
          "padding": cfg["padding"], "state_dict_order": ",".join(n for n, _, _ in state_entries(cfg))}

    def text(v):
        return ("true" if v else "false") if isinstance(v, bool) else repr(v) if isinstance(v, float) else str(v)

    for k in MODEL_DEFAULTS:
        md["cfg." + k] = text(cfg[k])
    if any(cfg[k] != v for k, v in LATER_DEFAULTS.items()):
        for k in LATER_DEFAULTS:
            md["cfg." + k] = text(cfg[k])
    for place in PLACES:
        for k in POSITIONAL_DEFAULTS:
            md[f"cfg.{place}.{k}"] = text(cfg[place][k])
        for k, (scheme, _) in SCHEME_KNOBS.items():
            if cfg[place]["scheme"] in ((scheme,) if isinstance(scheme, str) else scheme):
                md[f"cfg.{place}.{k}"] = text(cfg[place][k])
    for k, v in TRAIN.items():
        md["train." + k] = text(v)
    return md


def generate(name, cfg, seed):
    g = torch.Generator().manual_seed(seed)
    init = random_state(cfg, g)
    batches = [make_batch(cfg, g) for _ in range(STEPS)]
    tensors = {"init." + n: t for n, t in init.items()}
    for s, b in enumerate(batches):
        for k, t in b.items():
            tensors[f"batch{s}.{k}"] = t
    with torch.no_grad():
        tensors["logits"] = forward({n: t.to(F64) for n, t in init.items()}, cfg, batches[0])
    loss64, norm64, lrs, final, optim_state = train(cfg, init, batches, F64)
    loss32, norm32, _, _, _ = train(cfg, init, batches, F32)
    tensors.update({"loss64": torch.tensor(loss64, dtype=F64), "loss32": torch.tensor(loss32, dtype=F64),
                    "grad_norm64": torch.tensor(norm64, dtype=F64), "grad_norm32": torch.tensor(norm32, dtype=F64),
                    "lr": torch.tensor(lrs, dtype=F64)})
    tensors.update({"final." + n: t for n, t in final.items()})
    tensors.update({"optim." + n: t for n, t in optim_state.items()})
    path = os.path.join(OUT_DIR, "train_" + name + ".safetensors")
    write_safetensors(path, tensors, metadata_of(name, cfg, seed))
    n_params = sum(t.numel() for n, t in init.items())
    print(f"wrote {os.path.relpath(path)} ({os.path.getsize(path)} bytes, {n_params} weights); "
          f"loss {loss64[0]:.4f} -> {loss64[-1]:.4f}, max |loss32 - loss64| "
          f"{max(abs(a - b) for a, b in zip(loss32, loss64)):.2e}")


def main():
    os.makedirs(OUT_DIR, exist_ok=True)
    only = set(sys.argv[1:])
    for k, (name, cfg) in enumerate(CONFIGS.items()):
        if not only or name in only:
            generate(name, cfg, SEED + k)


if __name__ == "__main__":
    main()
