#!/usr/bin/python3
"""Writes the golden files that tests/test_golden_attention.cpp checks relgrad's attention against.

    /usr/bin/python3 tools/gen_golden_attention.py        (Debian's python3-torch 1.13)

One multi-head attention layer per positional scheme, written here in plain PyTorch float64 from
the papers' formulas (the scheme table of docs/relative-attention.md names each paper), NOT by calling
relgrad: explicit loops over (query i, key j) and each paper's own table orientation. Every file
tests/golden/attn_<case>.safetensors holds

    x (self-attention) or query, key_value (cross-attention)   the inputs, (B, t, C)
    key_padding_mask                                           bool (B, t1), where the case has one
    R                                                          the loss weights: loss = sum(output * R)
    <name>                                                     every parameter, named and oriented as
                                                               relgrad's named_parameters()
    output                                                     (B, t2, C)
    grad.<input>, grad.<name>                                  d loss / d input, d loss / d parameter

Where a paper orients its table differently from relgrad (the seed's future-first columns, T5's
(buckets, heads) embedding), the parameter is a leaf in the paper's orientation and both it and its
gradient are converted when saved. Conventions of relgrad (README): δ = j − π(i) (key minus query),
tables run past first (row r ↔ δ = r − max_past), Linear weights are (out, in).
Each file uses its own seeded generator: adding a case never changes the others.
"""
import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_golden import write_safetensors  # noqa: E402  (the hand-written safetensors writer)

SEED = 20240701
OUT_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "golden")
F64 = torch.float64
C, H, B, T = 8, 2, 2, 5   # model width, heads, batch, self-attention length
D = C // H                # head size
T2, T1 = 3, 5             # cross-attention: queries, keys


def randn(g, *shape, scale=1.0):
    return (torch.randn(*shape, dtype=F64, generator=g) * scale).requires_grad_()


# ---- the positional terms, one per paper (q: (B, H, t2, D), k: (B, H, t1, D); query i at π(i) = i) ----

def seed_scores(q, E_seed, t3, t1):
    """Ukhov's generalised diagonal method, left-aligned, done right: S[i, j] = q_i · E[:, t3−1−(j−i)],
    zero for |j − i| > t3 − 1 (the blog's LEFT_RIGHT padding value 0). E_seed is (D, 2·t3 − 1), future first."""
    t2 = q.shape[2]
    rows = []
    for i in range(t2):
        cols = []
        for j in range(t1):
            delta = j - i
            if abs(delta) <= t3 - 1:
                cols.append(q[:, :, i, :] @ E_seed[:, t3 - 1 - delta])                      # (B, H)
            else:
                cols.append(torch.zeros(q.shape[0], q.shape[1], dtype=F64))
        rows.append(torch.stack(cols, -1))
    return torch.stack(rows, -2)                                                           # (B, H, t2, t1)


def huang_scores(q, E_left, t3):
    """Music Transformer: S[i, j] = q_i · E_left[h, t3−1 + j−i] for j ≤ i, per-head E_left (H, t3, D)
    ordered from δ = −(t3−1) to 0; distances beyond the table get zero (t2t get_relative_embeddings_left)."""
    _, _, t, _ = q.shape
    rows = []
    for i in range(t):
        cols = []
        for j in range(t):
            delta = j - i
            if -(t3 - 1) <= delta <= 0:
                cols.append((q[:, :, i, :] * E_left[:, t3 - 1 + delta, :]).sum(-1))         # (B, H)
            else:  # the future is masked; beyond the table: zero embedding
                cols.append(torch.zeros(q.shape[0], q.shape[1], dtype=F64))
        rows.append(torch.stack(cols, -1))
    return torch.stack(rows, -2)


def shaw_index(i, j, k):
    return max(-k, min(k, j - i)) + k   # clip(j − i, −k, k) + k


def shaw_key_scores(q, wK, k):
    """Shaw et al. eq. 3: q_i · a^K_ij, a^K_ij = w^K[clip(j − i, −k, k) + k], shared by the heads."""
    _, _, t, _ = q.shape
    return torch.stack([torch.stack([q[:, :, i, :] @ wK[shaw_index(i, j, k)] for j in range(t)], -1)
                        for i in range(t)], -2)


def shaw_value_term(w, wV, k):
    """Shaw et al. eq. 4: Σ_j α_ij a^V_ij, w (B, H, t, t) → (B, H, t, D)."""
    _, _, t, _ = w.shape
    return torch.stack([sum(w[:, :, i, j, None] * wV[shaw_index(i, j, k)] for j in range(t)) for i in range(t)], -2)


def t5_bucket(rel, bidirectional, num_buckets, max_distance):
    """HF T5Attention._relative_position_bucket for one δ = memory − query."""
    ret = 0
    if bidirectional:
        num_buckets //= 2
        ret += num_buckets if rel > 0 else 0
        n = abs(rel)
    else:
        n = max(-rel, 0)
    max_exact = num_buckets // 2
    if n < max_exact:
        return ret + n
    val = max_exact + int(math.log(n / max_exact) / math.log(max_distance / max_exact) * (num_buckets - max_exact))
    return ret + min(val, num_buckets - 1)


def t5_bias(beta, t2, t1, bidirectional, num_buckets, max_distance):
    """β (num_buckets, H) as HF's nn.Embedding → bias (1, H, t2, t1) = β[bucket(j − i), h]."""
    idx = torch.tensor([[t5_bucket(j - i, bidirectional, num_buckets, max_distance) for j in range(t1)]
                        for i in range(t2)])
    return beta[idx].permute(2, 0, 1).unsqueeze(0)


def alibi_slopes(n):
    """ofirpress get_slopes."""
    def power_of_2(m):
        start = 2 ** (-2 ** -(math.log2(m) - 3))
        return [start * start ** i for i in range(m)]
    if math.log2(n).is_integer():
        return power_of_2(n)
    c = 2 ** math.floor(math.log2(n))
    return power_of_2(c) + alibi_slopes(2 * c)[0::2][:n - c]


def rope(x, pairing, base=10000.0):
    """RoFormer: rotate pairs by θ_k = base^(−2k/D) times the position (x (B, H, t, D), positions 0..t−1)."""
    t, d = x.shape[-2], x.shape[-1]
    inv_freq = 1.0 / base ** (torch.arange(0, d, 2, dtype=F64) / d)                        # (D/2)
    angle = torch.arange(t, dtype=F64)[:, None] * inv_freq[None, :]                        # (t, D/2)
    if pairing == "interleaved":   # pairs (2k, 2k+1): RoFormer, GPT-J
        cos, sin = angle.cos().repeat_interleave(2, -1), angle.sin().repeat_interleave(2, -1)
        rotated = torch.stack([-x[..., 1::2], x[..., 0::2]], -1).reshape(x.shape)          # (−x1, x0) per pair
        return x * cos + rotated * sin
    cos, sin = torch.cat([angle.cos()] * 2, -1), torch.cat([angle.sin()] * 2, -1)          # half-split: HF
    rotate_half = torch.cat([-x[..., d // 2:], x[..., :d // 2]], -1)
    return x * cos + rotate_half * sin


def txl_sinusoid(p, dim):
    """Transformer-XL PositionalEmbedding: R_p = [sin(p·ω), cos(p·ω)] concatenated, ω_k = 10000^(−2k/dim)."""
    inv_freq = 1.0 / 10000 ** (torch.arange(0.0, dim, 2.0, dtype=F64) / dim)
    return torch.cat([torch.sin(p * inv_freq), torch.cos(p * inv_freq)])


def txl_bd(q, W_r, v, t):
    """Terms (b) + (d): (q_i + v)·(W_r R_{i−j})_h, for j ≤ i (causal: only p = i − j ≥ 0 exist)."""
    rows = []
    for i in range(t):
        cols = []
        for j in range(t):
            r = (W_r @ txl_sinusoid(float(i - j), C)).reshape(H, D)                            # (H, D)
            cols.append(((q[:, :, i, :] + v) * r).sum(-1))
        rows.append(torch.stack(cols, -1))
    return torch.stack(rows, -2)


# ---- one attention layer ----

def linear(g, name, params):
    params[name + ".weight"] = randn(g, C, C, scale=C ** -0.5)   # (out, in), as nn.Linear and relgrad
    params[name + ".bias"] = randn(g, C, scale=0.1)


def case(name, seed, scheme, cross=False, causal=False, **options):
    g = torch.Generator().manual_seed(seed)
    t2, t1 = (T2, T1) if cross else (T, T)
    inputs = {}
    if cross:
        inputs["query"] = randn(g, B, t2, C)
        inputs["key_value"] = randn(g, B, t1, C)
    else:
        inputs["x"] = randn(g, B, T, C)
    query = inputs["query"] if cross else inputs["x"]
    key_value = inputs["key_value"] if cross else inputs["x"]
    key_padding_mask = None
    if cross:  # batch 1: its last two keys are padding
        key_padding_mask = torch.zeros(B, t1, dtype=torch.bool)
        key_padding_mask[1, t1 - 2:] = True

    params = {}  # relgrad name -> leaf; `paper` holds leaves kept in a paper's own orientation
    paper = {}
    for proj in ("q_proj", "k_proj", "v_proj", "out_proj"):
        linear(g, proj, params)

    def heads(x_, t_):
        return x_.reshape(B, t_, H, D).permute(0, 2, 1, 3)

    def lin(x_, proj):
        return x_ @ params[proj + ".weight"].T + params[proj + ".bias"]

    q, k, v = heads(lin(query, "q_proj"), t2), heads(lin(key_value, "k_proj"), t1), heads(lin(key_value, "v_proj"), t1)
    content = q @ k.transpose(-1, -2)                                                      # (B, H, t2, t1)
    scale = D ** -0.5
    value_extra = None
    if scheme == "none":
        logits = content * scale
    elif scheme == "seed":
        t3 = options["max_length"]
        paper["E_seed"] = randn(g, D, 2 * t3 - 1, scale=D ** -0.5)                         # (D, 2·t3 − 1), future first
        logits = (content + seed_scores(q, paper["E_seed"], t3, t1)) * scale
    elif scheme == "huang":
        t3 = options["max_length"]
        params["positional.table"] = randn(g, H, t3, D, scale=D ** -0.5)                   # per head, past first
        logits = (content + huang_scores(q, params["positional.table"], t3)) * scale
    elif scheme == "shaw":
        kk = options["clip"]
        params["positional.key_table"] = randn(g, 2 * kk + 1, D, scale=D ** -0.5)          # w^K, row r ↔ δ = r − k
        params["positional.value_table"] = randn(g, 2 * kk + 1, D, scale=D ** -0.5)        # w^V
        logits = (content + shaw_key_scores(q, params["positional.key_table"], kk)) * scale
        value_extra = lambda w: shaw_value_term(w, params["positional.value_table"], kk)  # noqa: E731
    elif scheme == "t5":
        nb, md, bidir = options["num_buckets"], options["max_distance"], options["bidirectional"]
        paper["beta"] = randn(g, nb, H, scale=0.5)                                         # HF: Embedding(nb, H)
        logits = content + t5_bias(paper["beta"], t2, t1, bidir, nb, md)                   # unscaled (no 1/√D)
    elif scheme == "alibi":
        m = torch.tensor(alibi_slopes(H), dtype=F64)
        dist = torch.tensor([[float(i - j) for j in range(t1)] for i in range(t2)])        # i − j, j ≤ i visible
        logits = content * scale - m[None, :, None, None] * dist
    elif scheme == "rope":
        logits = rope(q, options["pairing"]) @ rope(k, options["pairing"]).transpose(-1, -2) * scale
    elif scheme == "transformer_xl":
        params["positional.r_proj.weight"] = randn(g, C, C, scale=C ** -0.5)              # W_{k,R}, (out, in)
        params["positional.u"] = randn(g, H, D, scale=0.3)
        params["positional.v"] = randn(g, H, D, scale=0.3)
        u, vb = params["positional.u"], params["positional.v"]
        ac = (q + u[None, :, None, :]) @ k.transpose(-1, -2)                               # (a) + (c)
        logits = (ac + txl_bd(q, params["positional.r_proj.weight"], vb, T)) * scale
    else:
        raise ValueError(scheme)

    mask = torch.zeros(1, 1, t2, t1, dtype=torch.bool)
    if causal:
        mask = mask | (torch.arange(t1)[None, :] > torch.arange(t2)[:, None])[None, None]
    if key_padding_mask is not None:
        mask = mask | key_padding_mask[:, None, None, :]
    weights = torch.softmax(logits.masked_fill(mask, float("-inf")), -1)                   # no row is fully masked
    out = weights @ v
    if value_extra is not None:
        out = out + value_extra(weights)
    merged = out.permute(0, 2, 1, 3).reshape(B, t2, C)
    output = lin(merged, "out_proj")                                                       # (B, t2, C)

    R = torch.randn(B, t2, C, dtype=F64, generator=g)
    (output * R).sum().backward()

    tensors = {"R": R, "output": output}
    for n, t_ in inputs.items():
        tensors[n] = t_
        tensors["grad." + n] = t_.grad
    if key_padding_mask is not None:
        tensors["key_padding_mask"] = key_padding_mask
    for n, p in params.items():
        tensors[n] = p
        tensors["grad." + n] = p.grad
    # Paper orientation → relgrad's.
    if "E_seed" in paper:  # table[r, :] = E_seed[:, 2·t3 − 2 − r]: past first, rows
        E = paper["E_seed"]
        tensors["positional.table"] = E.flip(-1).T
        tensors["grad.positional.table"] = E.grad.flip(-1).T
    if "beta" in paper:    # relgrad's T5 table is (H, num_buckets)
        tensors["positional.table"] = paper["beta"].T
        tensors["grad.positional.table"] = paper["beta"].grad.T
    if scheme == "alibi":  # relgrad's buffer, for a check (not a parameter)
        tensors["slopes"] = torch.tensor(alibi_slopes(H), dtype=F64)

    metadata = {"torch_version": torch.__version__, "generator": "tools/gen_golden_attention.py", "seed": str(seed),
                "scheme": scheme, "cross": str(int(cross)), "causal": str(int(causal)),
                "embed_dim": str(C), "num_heads": str(H),
                "loss": "sum(output * R)", "alignment": "left (pi(i) = i)"}
    metadata.update({k_: str(int(v_)) if isinstance(v_, bool) else str(v_) for k_, v_ in options.items()})
    path = os.path.join(OUT_DIR, "attn_" + name + ".safetensors")
    write_safetensors(path, tensors, metadata)
    print(f"wrote {os.path.relpath(path)} ({os.path.getsize(path)} bytes, {len(tensors)} tensors)")


def main():
    os.makedirs(OUT_DIR, exist_ok=True)
    case("none", SEED + 1, "none")
    case("seed", SEED + 2, "seed", max_length=4)                            # t = 5 > t3 = 4: |δ| = 4 gets zero
    case("seed_cross", SEED + 3, "seed", cross=True, max_length=4)          # δ ∈ [−2, 4]
    case("huang", SEED + 4, "huang", causal=True, max_length=4)             # per-head table, δ = −4 gets zero
    case("shaw", SEED + 5, "shaw", clip=2)                                  # shared w^K, w^V; |δ| > 2 clipped
    case("t5", SEED + 6, "t5", num_buckets=32, max_distance=128, bidirectional=True)
    case("t5_causal", SEED + 7, "t5", causal=True, num_buckets=4, max_distance=6, bidirectional=False)  # log buckets
    case("t5_cross", SEED + 8, "t5", cross=True, num_buckets=32, max_distance=128, bidirectional=True)
    case("alibi", SEED + 9, "alibi", causal=True)
    case("rope_interleaved", SEED + 10, "rope", pairing="interleaved", base=10000.0)
    case("rope_half_split", SEED + 11, "rope", pairing="half_split", base=10000.0)
    case("rope_cross", SEED + 12, "rope", cross=True, pairing="interleaved", base=10000.0)
    case("transformer_xl", SEED + 13, "transformer_xl", causal=True)


if __name__ == "__main__":
    main()
