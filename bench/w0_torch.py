"""W0, the small-model regime: a PyTorch twin of the quick start's default run (configs/default.toml).

bench/run_train.sh times `relgrad train` on that config (bench/w0_relgrad.py) next to this script,
which trains the same model the same way in PyTorch: eager under Debian's torch 1.13
(/usr/bin/python3) or PyTorch 2.x, and `--mode compiled` (torch.compile, default backend: inductor)
under PyTorch 2.x. Standalone: torch only.

The model (docs/checkpoint-format.md, sections 2-3; the state-dict names are relgrad's, so a
relgrad checkpoint loads with load_state_dict): an encoder-decoder, d_model 64, 4 heads (D = 16),
d_ff 256, exact GELU, 2 + 2 pre-LayerNorm layers (eps 1e-5), final LayerNorm on each stack, no
absolute positions, dropout 0; T5's bucketed bias (32 buckets, max distance 128, one (H, 32) table per
stack, under layers.0) in encoder (bidirectional) and decoder (causal) self-attention, with no
1/sqrt(D) there; the seed's learned relative embedding in cross-attention (one (2*32 - 1, D) table per
layer, shared by the heads, left alignment: row = (j - i) + 31, added to q.k before the 1/sqrt(D));
masked logits filled with the lowest float before softmax and the weights zeroed after; the head
tied to the decoder embedding, logits = (h / sqrt(64)) . E^T. Vocabulary 13 (PAD 0, BOS 1, EOS 2,
ten digits).
The data (train/data/data.h): the reverse task, batch 32, each row a source x of n digits, n uniform
in [4, 16], tgt_in = BOS reversed(x), tgt_out = reversed(x) EOS, right-padded to the batch's longest
row (targets -100 there); a new batch every step. Same shapes and distribution as relgrad's stream,
but drawn with torch's generator, so not the same tokens (relgrad's Philox batches are not exported).
Training (docs/checkpoint-format.md 1.4; configs/default.toml): AdamW(lr 3e-3, betas (0.8, 0.95),
eps 1e-8) over decay_groups (weight decay 0.01 on the matrices, 0 on biases and norms), the relative
positional tables (names with ".positional.") in groups of their own at 10x lr
(optim.positional_lr_scale, train/optim/optim.cpp), gradient clipping at 1.0, linear warm-up
over min(100, steps) then cosine decay to 0, token-mean cross-entropy.
tokens/s counts input tokens as relgrad does (source + tgt_in, padding excluded), per step; the
record holds the median over the timed steps of each step's tokens / seconds.

    /usr/bin/python3 bench/w0_torch.py --threads 1 --steps 200 --warmup 20 --json w0.json
    $BUILD/torch2-venv/bin/python bench/w0_torch.py --mode compiled --threads 2 --steps 200 --warmup 20
    $BUILD/torch2-venv/bin/python bench/w0_torch.py --check 5          # eager vs compiled losses (1e-4)
    /usr/bin/python3 bench/w0_torch.py --against-relgrad DUMP.safetensors CHECKPOINT.safetensors

--against-relgrad loads a relgrad checkpoint of the default run into the twin and compares its logits
with those `relgrad eval CHECKPOINT --dump-logits DUMP` wrote (same inputs): the proof that the twin
is the same model. In compiled mode the warm-up first runs one step on each batch shape the timed
steps will see (torch.compile recompiles for a new shape), all before the clock starts.
"""
import argparse
import ctypes
import json
import math
import os
import resource
import statistics
import struct
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

PAD, BOS, EOS, FIRST_SYMBOL = 0, 1, 2, 3
DEFAULT = dict(d_model=64, n_heads=4, d_ff=256, n_encoder_layers=2, n_decoder_layers=2, num_symbols=10,
               min_len=4, max_len=16, batch_size=32, t5_buckets=32, t5_max_distance=128, seed_max_length=32,
               lr=3e-3, betas=(0.8, 0.95), positional_lr_scale=10.0, warmup_steps=100, weight_decay=0.01,
               clip=1.0, norm_eps=1e-5)


# ---- threads ---------------------------------------------------------------------------------------
def set_threads(n):
    """torch's pool, and OpenBLAS's own pool when this torch uses OpenBLAS (Debian's 1.13: it does not
    obey torch.set_num_threads). The library is found among those already mapped, so the handle is the
    instance torch calls; a torch with MKL (the PyPI wheels) loads no OpenBLAS and nothing more is set."""
    torch.set_num_threads(n)
    info = {"torch_threads": torch.get_num_threads()}
    try:
        with open("/proc/self/maps") as f:
            paths = sorted({line.split()[-1] for line in f if "openblas" in line.lower() and "/" in line})
    except OSError:
        paths = []
    for p in paths:
        try:
            lib = ctypes.CDLL(p)
            lib.openblas_set_num_threads(n)
            lib.openblas_get_corename.restype = ctypes.c_char_p
            info.update(openblas=p, openblas_threads=lib.openblas_get_num_threads(),
                        openblas_core=lib.openblas_get_corename().decode())
            break
        except (OSError, AttributeError):
            continue
    return info


def peak_rss_mib():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


# ---- positions -------------------------------------------------------------------------------------
def t5_buckets(q_len, k_len, bidirectional, num_buckets, max_distance):
    """(q_len, k_len) int64 buckets of delta = j - i (docs/checkpoint-format.md 3.5, t5), log in float64."""
    delta = torch.arange(k_len)[None, :] - torch.arange(q_len)[:, None]
    if bidirectional:
        nb = num_buckets // 2
        base = (delta > 0).long() * nb
        n = delta.abs()
    else:
        nb = num_buckets
        base = torch.zeros_like(delta)
        n = (-delta).clamp(min=0)
    max_exact = nb // 2
    f = torch.log(n.double().clamp(min=1) / max_exact) / math.log(max_distance / max_exact) * (nb - max_exact)
    large = (max_exact + torch.floor(f).long()).clamp(max=nb - 1)
    return base + torch.where(n < max_exact, n, large)


# ---- the model (names as relgrad's state dict) -----------------------------------------------------
class Positional(nn.Module):
    def __init__(self, shape, std):
        super().__init__()
        self.table = nn.Parameter(torch.randn(*shape) * std)


class Attention(nn.Module):
    """scheme "t5": logits = q.k^T + bias (bias passed in, from the stack's table); "seed": logits =
    (q.k^T + S) / sqrt(D), S[i, j] = q_i . table[(j - i) + max_length - 1]."""

    def __init__(self, C, H, scheme, seed_max_length=None, t5_table=None):
        super().__init__()
        self.H, self.D, self.scheme = H, C // H, scheme
        self.q_proj, self.k_proj, self.v_proj, self.out_proj = (nn.Linear(C, C) for _ in range(4))
        if scheme == "seed":
            self.positional = Positional((2 * seed_max_length - 1, self.D), self.D ** -0.5)
            self.max_past = seed_max_length - 1
        elif t5_table is not None:
            self.positional = t5_table

    def forward(self, xq, xkv, mask, bias=None, seed_index=None):
        B, t2, C = xq.shape
        t1 = xkv.shape[1]
        q = self.q_proj(xq).view(B, t2, self.H, self.D).transpose(1, 2)
        k = self.k_proj(xkv).view(B, t1, self.H, self.D).transpose(1, 2)
        v = self.v_proj(xkv).view(B, t1, self.H, self.D).transpose(1, 2)
        logits = torch.matmul(q, k.transpose(-1, -2))
        if self.scheme == "seed":
            p = torch.matmul(q, self.positional.table.t())  # (B, H, t2, 2*max_length - 1)
            idx = seed_index[:t2, :t1]
            logits = (logits + p.gather(-1, idx.expand(B, self.H, t2, t1))) * (self.D ** -0.5)
        else:
            logits = logits + bias
        logits = logits.masked_fill(mask, torch.finfo(logits.dtype).min)
        w = torch.softmax(logits, -1).masked_fill(mask, 0.0)
        return self.out_proj(torch.matmul(w, v).transpose(1, 2).reshape(B, t2, C))


class FeedForward(nn.Module):
    def __init__(self, C, Fd):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(C, Fd), nn.Linear(Fd, C)

    def forward(self, x):
        return self.fc2(F.gelu(self.fc1(x)))


class EncoderLayer(nn.Module):
    def __init__(self, cfg, t5_table):
        super().__init__()
        C = cfg["d_model"]
        self.self_attn = Attention(C, cfg["n_heads"], "t5", t5_table=t5_table)
        self.ff = FeedForward(C, cfg["d_ff"])
        self.norm1, self.norm2 = nn.LayerNorm(C, eps=cfg["norm_eps"]), nn.LayerNorm(C, eps=cfg["norm_eps"])

    def forward(self, x, mask, bias):
        h = self.norm1(x)
        x = x + self.self_attn(h, h, mask, bias=bias)
        return x + self.ff(self.norm2(x))


class DecoderLayer(nn.Module):
    def __init__(self, cfg, t5_table):
        super().__init__()
        C = cfg["d_model"]
        self.self_attn = Attention(C, cfg["n_heads"], "t5", t5_table=t5_table)
        self.cross_attn = Attention(C, cfg["n_heads"], "seed", seed_max_length=cfg["seed_max_length"])
        self.ff = FeedForward(C, cfg["d_ff"])
        self.norm1, self.norm2, self.norm3 = (nn.LayerNorm(C, eps=cfg["norm_eps"]) for _ in range(3))

    def forward(self, x, mem, self_mask, cross_mask, bias, seed_index):
        h = self.norm1(x)
        x = x + self.self_attn(h, h, self_mask, bias=bias)
        x = x + self.cross_attn(self.norm2(x), mem, cross_mask, seed_index=seed_index)
        return x + self.ff(self.norm3(x))


class Stack(nn.Module):
    def __init__(self, cfg, vocab, n_layers, layer_cls):
        super().__init__()
        self.embed = nn.Embedding(vocab, cfg["d_model"])
        t5 = Positional((cfg["n_heads"], cfg["t5_buckets"]), 1.0)  # registered under layers.0 only
        self.layers = nn.ModuleList([layer_cls(cfg, t5 if l == 0 else None) for l in range(n_layers)])
        self.final_norm = nn.LayerNorm(cfg["d_model"], eps=cfg["norm_eps"])

    def bias(self, buckets, t2, t1):
        table = self.layers[0].self_attn.positional.table  # (H, nb)
        return table[:, buckets[:t2, :t1]].unsqueeze(0)    # (1, H, t2, t1)


class EncoderDecoder(nn.Module):
    """relgrad's initial distributions (docs/checkpoint-format.md 4) come from the constructors: Embedding
    N(0, 1), Linear U(+-1/sqrt(in)) (nn.Linear's own), seed tables N(0, 1)/sqrt(D), T5 tables N(0, 1)."""

    def __init__(self, cfg, vocab):
        super().__init__()
        self.cfg = cfg
        self.encoder = Stack(cfg, vocab, cfg["n_encoder_layers"], EncoderLayer)
        self.decoder = Stack(cfg, vocab, cfg["n_decoder_layers"], DecoderLayer)
        L = cfg["seed_max_length"]  # lengths up to L: every |j - i| <= L - 1 has a row in the seed table
        nb, md = cfg["t5_buckets"], cfg["t5_max_distance"]
        self.register_buffer("enc_buckets", t5_buckets(L, L, True, nb, md), persistent=False)
        self.register_buffer("dec_buckets", t5_buckets(L, L, False, nb, md), persistent=False)
        delta = torch.arange(L)[None, :] - torch.arange(L)[:, None]
        self.register_buffer("seed_index", delta + L - 1, persistent=False)
        self.register_buffer("causal", delta > 0, persistent=False)

    def forward(self, src, tgt_in, src_mask, tgt_mask):
        t1, t2 = src.shape[1], tgt_in.shape[1]
        assert max(t1, t2) <= self.causal.shape[0], "lengths beyond the seed table's max_length"
        key_src = src_mask[:, None, None, :]  # (B, 1, 1, t1)
        m = self.encoder.embed(src)
        enc_bias = self.encoder.bias(self.enc_buckets, t1, t1)
        for layer in self.encoder.layers:
            m = layer(m, key_src, enc_bias)
        m = self.encoder.final_norm(m)
        self_mask = self.causal[:t2, :t2][None, None] | tgt_mask[:, None, None, :]
        dec_bias = self.decoder.bias(self.dec_buckets, t2, t2)
        h = self.decoder.embed(tgt_in)
        for layer in self.decoder.layers:
            h = layer(h, m, self_mask, key_src, dec_bias, self.seed_index)
        h = self.decoder.final_norm(h) * (self.cfg["d_model"] ** -0.5)
        return torch.matmul(h, self.decoder.embed.weight.t())


# ---- data ------------------------------------------------------------------------------------------
def reverse_batch(g, cfg):
    """One batch of the reverse task, right-padded to its longest row (train/data/data.h)."""
    B, V0 = cfg["batch_size"], cfg["num_symbols"]
    n = torch.randint(cfg["min_len"], cfg["max_len"] + 1, (B,), generator=g)
    t1 = int(n.max())
    src = torch.full((B, t1), PAD, dtype=torch.long)
    tgt_in = torch.full((B, t1 + 1), PAD, dtype=torch.long)
    tgt_out = torch.full((B, t1 + 1), -100, dtype=torch.long)
    for r in range(B):
        k = int(n[r])
        x = torch.randint(FIRST_SYMBOL, FIRST_SYMBOL + V0, (k,), generator=g)
        y = x.flip(0)
        src[r, :k] = x
        tgt_in[r, 0], tgt_in[r, 1:k + 1] = BOS, y
        tgt_out[r, :k], tgt_out[r, k] = y, EOS
    return src, tgt_in, src == PAD, tgt_in == PAD, tgt_out


def decay_groups(named, lr, wd):
    decay, no_decay = [], []
    for name, p in named:
        (decay if p.dim() >= 2 and "norm" not in name and "ln" not in name else no_decay).append(p)
    return [{"params": decay, "weight_decay": wd, "lr": lr},
            {"params": no_decay, "weight_decay": 0.0, "lr": lr}]


def scaled_positional_groups(model, lr, wd, scale):
    """relgrad's scaled_positional_groups: the tables under ".positional." train at scale x lr."""
    named = list(model.named_parameters())
    plain = [(n, p) for n, p in named if ".positional." not in n]
    positional = [(n, p) for n, p in named if ".positional." in n]
    groups = decay_groups(plain, lr, wd) + decay_groups(positional, lr * scale, wd)
    for g, s in zip(groups, (1.0, 1.0, scale, scale)):
        g["lr_scale"] = s
    return groups


def lr_at(step, cfg, total):
    """LrSchedule (docs/checkpoint-format.md 1.4): warm-up (shortened to the run, as relgrad does), cosine."""
    warm = min(cfg["warmup_steps"], total)
    if step < warm:
        return cfg["lr"] * (step + 1) / warm
    if step >= total:
        return 0.0
    r = (step - warm) / max(1, total - warm)
    return 0.5 * (1 + math.cos(math.pi * r)) * cfg["lr"]


class Run:
    def __init__(self, cfg, init_seed, compiled, total_steps):
        torch.manual_seed(init_seed)
        self.cfg = cfg
        self.model = EncoderDecoder(cfg, FIRST_SYMBOL + cfg["num_symbols"])
        self.opt = torch.optim.AdamW(scaled_positional_groups(self.model, cfg["lr"], cfg["weight_decay"],
                                                              cfg["positional_lr_scale"]),
                                     betas=cfg["betas"], eps=1e-8)
        model = self.model

        def loss_fn(src, tgt_in, src_mask, tgt_mask, tgt_out):
            logits = model(src, tgt_in, src_mask, tgt_mask)
            return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt_out.reshape(-1),
                                   ignore_index=-100)

        self.loss_fn = torch.compile(loss_fn) if compiled else loss_fn
        self.total, self.step_no = total_steps, 0

    def step(self, batch):
        lr = lr_at(self.step_no, self.cfg, self.total)
        for g in self.opt.param_groups:
            g["lr"] = lr * g["lr_scale"]
        self.opt.zero_grad(set_to_none=True)
        loss = self.loss_fn(*batch)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.cfg["clip"])
        self.opt.step()
        self.step_no += 1
        return loss.item()


def input_tokens(batch):
    src, tgt_in, src_mask, tgt_mask, _ = batch
    return src.numel() - int(src_mask.sum()) + tgt_in.numel() - int(tgt_mask.sum())


# ---- relgrad's checkpoint and logits dump ----------------------------------------------------------
def precompile(run, batches):
    """One untimed step per distinct input shape, so torch.compile has compiled (or recompiled) for
    every shape before the timed steps; returns the seconds it took and the shapes."""
    t0, shapes = time.perf_counter(), []
    for b in batches:
        if b[0].shape not in shapes:
            shapes.append(b[0].shape)
            run.step(b)
    return time.perf_counter() - t0, shapes


def read_safetensors(path):
    dtypes = {"F32": torch.float32, "F64": torch.float64, "I64": torch.int64, "BOOL": torch.bool}
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    data = raw[8 + n:]
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        b, e = t["data_offsets"]
        buf = bytearray(data[b:e])
        out[name] = (torch.frombuffer(buf, dtype=dtypes[t["dtype"]]) if buf else
                     torch.empty(0, dtype=dtypes[t["dtype"]])).reshape(t["shape"]).clone()
    return out


def against_relgrad(dump_path, ckpt_path):
    ck = read_safetensors(ckpt_path)
    state = {k[len("model."):]: v for k, v in ck.items() if k.startswith("model.")}
    vocab = state["decoder.embed.weight"].shape[0]
    cfg = dict(DEFAULT, num_symbols=vocab - FIRST_SYMBOL)
    model = EncoderDecoder(cfg, vocab)
    missing, unexpected = model.load_state_dict(state, strict=False)
    assert not missing and not unexpected, (missing, unexpected)
    d = read_safetensors(dump_path)
    src, tgt_in = d["src"], d["tgt_in"]
    src_mask = d.get("src_padding_mask", d.get("src_mask", src == PAD)).bool()
    tgt_mask = d.get("tgt_padding_mask", d.get("tgt_mask", tgt_in == PAD)).bool()
    with torch.no_grad():
        logits = model(src, tgt_in, src_mask, tgt_mask)
    diff = (logits.double() - d["logits"].double()).abs().max().item()
    print("twin vs relgrad logits on %s: shape %s, largest difference %.2e (%s)" % (
        tuple(src.shape), tuple(logits.shape), diff, "OK" if diff < 1e-4 else "FAILED: above 1e-4"))
    return diff < 1e-4


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mode", choices=("eager", "compiled"), default="eager")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--steps", type=int, default=200, help="timed steps (after warm-up)")
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json", default=None)
    ap.add_argument("--check", type=int, default=0, metavar="N", help="eager vs compiled, N steps, then exit")
    ap.add_argument("--against-relgrad", nargs=2, metavar=("DUMP", "CHECKPOINT"))
    args = ap.parse_args()
    threads = set_threads(args.threads)
    if args.against_relgrad:
        sys.exit(0 if against_relgrad(*args.against_relgrad) else 1)
    cfg = dict(DEFAULT)
    total = args.warmup + args.steps
    g = torch.Generator().manual_seed(1000 + args.seed)
    batches = [reverse_batch(g, cfg) for _ in range(max(total, args.check))]

    if args.check:
        eager, compiled = Run(cfg, args.seed, False, args.check), Run(cfg, args.seed, True, args.check)
        le = [eager.step(b) for b in batches[:args.check]]
        lc = [compiled.step(b) for b in batches[:args.check]]
        worst = max(abs(a - b) / max(abs(a), 1e-12) for a, b in zip(le, lc))
        print("W0 torch %s: eager    losses %s" % (torch.__version__, " ".join("%.6f" % x for x in le)))
        print("W0 torch %s: compiled losses %s" % (torch.__version__, " ".join("%.6f" % x for x in lc)))
        print("largest relative difference %.2e (%s)" % (
            worst, "OK" if worst <= 1e-4 else "FAILED: above 1e-4"))
        sys.exit(0 if worst <= 1e-4 else 1)

    run = Run(cfg, args.seed, args.mode == "compiled", total)
    compile_s, shapes = precompile(run, batches) if args.mode == "compiled" else (0.0, [])
    rates, times, losses = [], [], []
    for i, b in enumerate(batches[:total]):
        t0 = time.perf_counter()
        losses.append(run.step(b))
        dt = time.perf_counter() - t0
        if i >= args.warmup:
            times.append(dt)
            rates.append(input_tokens(b) / dt)
    rec = {"impl": "w0-torch", "workload": "w0", "mode": args.mode, "torch": torch.__version__,
           "threads": args.threads,
           **threads, "OMP_WAIT_POLICY": os.environ.get("OMP_WAIT_POLICY", "<unset>"),
           "OPENBLAS_CORETYPE": os.environ.get("OPENBLAS_CORETYPE", "<unset>"),
           "params": sum(p.numel() for p in run.model.parameters()), "compile_s": compile_s,
           "compiled_shapes": [list(s) for s in shapes],
           "step_s": statistics.median(times),
           "tokens_per_step_mean": statistics.mean(input_tokens(b) for b in batches[args.warmup:total]),
           "tokens_per_s": statistics.median(rates), "gflops": None, "peak_rss_mib": peak_rss_mib(),
           "loss_first": losses[0], "loss_last": losses[-1], "step_times": times}
    print("W0 torch %s %s, %d thread(s): %.0f tokens/s, step %.2f ms (compile %.1f s), peak RSS %.0f MiB, "
          "%d params, loss %.4f -> %.4f" % (torch.__version__, args.mode, args.threads, rec["tokens_per_s"],
                                           1e3 * rec["step_s"], compile_s, rec["peak_rss_mib"], rec["params"],
                                           losses[0], losses[-1]))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rec, f, indent=1)


if __name__ == "__main__":
    main()
