#!/usr/bin/env python3
"""PyTorch's side of bench/bench_flash.cpp: one causal attention core on split heads, forward +
backward, no projections, q, k, v (B, H, L, D) float32 requiring grad, loss = sum(out * g):

  sdpa        F.scaled_dot_product_attention(q, k, v, is_causal=True)          (the fused floor;
              relgrad's fused_plain)
  sdpa_t5     SDPA with a materialised (1, H, L, L) additive mask: a learnable per-head T5 table
              (H, buckets) gathered by T5's causal bucket of j − i, future keys at −inf, scale 1 (T5
              adds q·k and the bias unscaled, as relgrad's T5RelativeBias). What a PyTorch user writes
              for a learned bias: SDPA has no relative-position hook. The (L, L) bucket index and
              causal mask are made before the clock, as a model's buffers (counted with the inputs).
              relgrad's fused_t5.
  flex_t5     FlexAttention (torch.nn.attention.flex_attention, the call under torch.compile) with
              a causal block mask and a score_mod adding table[h, bucket[i − j]]: the table is a
              captured tensor that requires grad, so Flex's backward writes its gradient (atomic
              adds in the generated kernel). Scale 1, as sdpa_t5. relgrad's fused_t5.
  flex_t5_dist  (not in the default list) the same with the table gathered per distance first,
              (H, L) = table[:, bucket of each distance], and the score_mod indexing that: one
              level of indexing inside the kernel, in case flex_t5's two do not compile.
  flex_shaw   FlexAttention with Shaw's key term (Shaw et al. 2018, without the value term): a table E
              (2k + 1, D) shared by the heads, QE = q·Eᵀ (B, H, L, 2k + 1) computed before the
              compiled call and captured, score_mod adding QE[b, h, i, clip(j − i, −k, k) + k] · scale (relgrad adds
              q·e to q·k before the 1/√D); E's gradient flows back through QE. relgrad's fused_shaw.

T5's buckets are those of relgrad (t5_buckets in bench/w0_torch.py, proven equal to relgrad's by its
--against-relgrad check): causal, --t5-buckets 32, --t5-max-distance 128; Shaw's clip --shaw-clip 16.
Every case: median of --reps timed reps after one warm-up (which compiles Flex for that length; the
compilation time is printed under the table), fwd and bwd ms each bracketed by synchronisation,
peak = torch.cuda.max_memory_allocated above the bytes held after the inputs were made, and
determinism: each run's gradients (warm-up included) are copied to the host outside the clock and
compared with the first run's by torch.equal: "det table" for the table's gradient ("—" without a
table), "det dq/dk/dv" for the inputs'. Float32 with TF32 off (relgrad's default); --tf32 turns
TF32 on (matmul and cuDNN; Flex's Triton kernels follow the matmul setting).

Run on the GPU machine (bench/run_gpu.sh does, beside bench_flash):
  python3 bench/flash_torch.py --lengths 2048,4096,8192,16384
  python3 bench/flash_torch.py --device cpu --lengths 128,256 --variants sdpa,sdpa_t5   (a CPU check)
A Flex case that fails to compile or run prints its first error line in the table and the next
case runs. Same table columns as bench_flash.
"""
import argparse
import math
import os
import statistics
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from w0_torch import t5_buckets  # noqa: E402  (relgrad's T5 buckets, checked against relgrad)

VARIANTS = ("sdpa", "sdpa_t5", "flex_t5", "flex_shaw", "flex_t5_dist")
DEFAULT_VARIANTS = "sdpa,sdpa_t5,flex_t5,flex_shaw"


def set_tf32(on):
    """TF32 for float32 matmuls and convolutions, on or off (the default here: off, relgrad's)."""
    torch.backends.cuda.matmul.allow_tf32 = on
    torch.backends.cudnn.allow_tf32 = on
    torch.set_float32_matmul_precision("high" if on else "highest")


def compiled(fn):
    """fn (which calls flex_attention) under torch.compile, as a model compiles its attention. Each
    case is one function, compiled on its warm-up run for its length."""
    import torch._dynamo
    # Every (variant, length) is a compiled entry of the same code: raise Dynamo's limit (8 by
    # default) so that no case falls back to eager Flex, which materialises the (L, L) scores.
    for name in ("recompile_limit", "cache_size_limit"):
        if hasattr(torch._dynamo.config, name):
            setattr(torch._dynamo.config, name, 64)
    # dynamic=False: one static kernel per length, as a model of fixed length gets (Dynamo would
    # otherwise make L symbolic at the second length seen).
    return torch.compile(fn, dynamic=False)


def causal_block_mask(L, dev):
    from torch.nn.attention.flex_attention import create_block_mask
    return create_block_mask(lambda b, h, q_idx, kv_idx: q_idx >= kv_idx, None, None, L, L, device=dev)


def make_case(variant, L, a, dev, gen):
    """(forward function of q, k, v; the table whose gradient is checked, or None)."""
    H, D = a.heads, a.head_dim
    if variant == "sdpa":
        return (lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True)), None
    if variant.startswith("flex"):
        from torch.nn.attention.flex_attention import flex_attention
        block_mask = causal_block_mask(L, dev)
    if variant in ("sdpa_t5", "flex_t5", "flex_t5_dist"):
        table = torch.randn(H, a.t5_buckets, device=dev, generator=gen).requires_grad_()
        # bucket of the distance n = i − j ≥ 0 (causal: every future pair shares bucket 0, masked anyway)
        by_distance = t5_buckets(L, 1, False, a.t5_buckets, a.t5_max_distance)[:, 0].to(dev)  # (L,): query i, key 0
        if variant == "sdpa_t5":
            pos = torch.arange(L, device=dev)
            dist = (pos[:, None] - pos[None, :]).clamp(min=0)
            index = by_distance[dist]  # (L, L) int64
            future = dist.new_ones(L, L, dtype=torch.bool).triu(1)
            del dist

            def sdpa_t5(q, k, v):
                bias = table[:, index].unsqueeze(0).masked_fill(future, float("-inf"))  # (1, H, L, L)
                return F.scaled_dot_product_attention(q, k, v, attn_mask=bias, scale=1.0)
            return sdpa_t5, table
        if variant == "flex_t5":
            def flex_t5(q, k, v):
                def t5_mod(score, b, h, q_idx, kv_idx):  # the table itself, indexed through the bucket map
                    return score + table[h, by_distance[(q_idx - kv_idx).clamp(min=0)]]
                return flex_attention(q, k, v, score_mod=t5_mod, block_mask=block_mask, scale=1.0)
            return compiled(flex_t5), table

        def flex_t5_dist(q, k, v):
            per_distance = table[:, by_distance]  # (H, L): the bias of each distance, gathered before the call

            def t5_dist_mod(score, b, h, q_idx, kv_idx):
                return score + per_distance[h, (q_idx - kv_idx).clamp(min=0)]
            return flex_attention(q, k, v, score_mod=t5_dist_mod, block_mask=block_mask, scale=1.0)
        return compiled(flex_t5_dist), table
    if variant == "flex_shaw":
        c = a.shaw_clip
        E = (torch.randn(2 * c + 1, D, device=dev, generator=gen) * D ** -0.5).requires_grad_()
        scale = 1.0 / math.sqrt(D)

        def flex_shaw(q, k, v, qe):
            def shaw_mod(score, b, h, q_idx, kv_idx):
                return score + qe[b, h, q_idx, (kv_idx - q_idx).clamp(-c, c) + c]
            return flex_attention(q, k, v, score_mod=shaw_mod, block_mask=block_mask, scale=scale)
        core = compiled(flex_shaw)

        def fwd(q, k, v):
            # QE (B, H, L, 2k + 1), row i against every clipped distance, made outside the compiled
            # call and passed in: a captured input that requires grad (Inductor's CPU Flex refuses
            # one computed inside the graph).
            return core(q, k, v, torch.matmul(q, E.t()) * scale)
        return fwd, E
    raise ValueError("flash_torch.py: unknown variant %r (expected one of %s)" % (variant, ", ".join(VARIANTS)))


def measure(variant, L, a, dev):
    cuda = dev.type == "cuda"
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    gen = torch.Generator(device=dev).manual_seed(1)
    B, H, D = a.batch, a.heads, a.head_dim
    mk = lambda: torch.randn(B, H, L, D, device=dev, generator=gen).requires_grad_()  # noqa: E731
    q, k, v = mk(), mk(), mk()
    g = torch.randn(B, H, L, D, device=dev, generator=gen)
    fwd_fn, table = make_case(variant, L, a, dev, gen)
    sync()
    if cuda:
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
    fwd, bwd, first = [], [], None
    same_table, same_inputs, warm_s = (None if table is None else True), True, 0.0
    for rep in range(a.reps + 1):
        for t in (q, k, v, table):
            if t is not None:
                t.grad = None
        t0 = time.perf_counter()
        out = fwd_fn(q, k, v)
        loss = (out * g).sum()
        sync()
        t1 = time.perf_counter()
        loss.backward()
        sync()
        t2 = time.perf_counter()
        del out, loss
        grads = [t.grad.detach().cpu() for t in (q, k, v)]
        tgrad = table.grad.detach().cpu() if table is not None else None
        if rep == 0:
            first, first_t, warm_s = grads, tgrad, t2 - t0
            continue
        same_inputs = same_inputs and all(torch.equal(x, y) for x, y in zip(grads, first))
        if table is not None:
            same_table = same_table and torch.equal(tgrad, first_t)
        fwd.append(t1 - t0)
        bwd.append(t2 - t1)
    peak = "%.1f" % ((torch.cuda.max_memory_allocated() - base) / 2**20) if cuda else "—"
    return statistics.median(fwd), statistics.median(bwd), peak, same_table, same_inputs, warm_s


def reference(variant, q, k, v, table, a):
    """The variant's function written out in float64 with the (L, L) logits (independent of make_case)."""
    L, D = q.shape[-2], q.shape[-1]
    i, j = torch.arange(L, device=q.device)[:, None], torch.arange(L, device=q.device)[None, :]
    logits = torch.matmul(q, k.transpose(-1, -2))
    if variant in ("sdpa_t5", "flex_t5", "flex_t5_dist"):
        buckets = t5_buckets(L, L, False, a.t5_buckets, a.t5_max_distance).to(q.device)
        logits = logits + table[:, buckets].unsqueeze(0)
    elif variant == "flex_shaw":
        c = a.shaw_clip
        qe = torch.matmul(q, table.t())  # (B, H, L, 2c + 1)
        col = ((j - i).clamp(-c, c) + c).expand(*q.shape[:-1], L)
        logits = (logits + qe.gather(-1, col)) / math.sqrt(D)
    else:
        logits = logits / math.sqrt(D)
    logits = logits.masked_fill(j > i, float("-inf"))
    return torch.matmul(torch.softmax(logits, -1), v)


def check(variants, L, a, dev):
    """Each variant's output and gradients against reference() in float64; returns False on a mismatch.
    Where the backward is not available (Flex on the CPU) only the output is compared."""
    tol = 1e-2 if a.tf32 else 1e-4
    ok = True
    for variant in variants:
        gen = torch.Generator(device=dev).manual_seed(2)
        mk = lambda: torch.randn(a.batch, a.heads, L, a.head_dim, device=dev, generator=gen)  # noqa: E731
        q, k, v, g = mk().requires_grad_(), mk().requires_grad_(), mk().requires_grad_(), mk()
        try:
            fwd_fn, table = make_case(variant, L, a, dev, gen)
            leaves = [q, k, v] + ([table] if table is not None else [])
            d = [x.detach().double().requires_grad_() for x in leaves]
            ref = reference(variant, d[0], d[1], d[2], d[3] if table is not None else None, a)
            (ref * g.double()).sum().backward()
            no_backward = None
            try:
                out = fwd_fn(q, k, v)
            except NotImplementedError as e:  # Flex has no backward on the CPU: forward alone
                no_backward = str(e).splitlines()[0][:60]
                with torch.no_grad():
                    out = fwd_fn(q.detach(), k.detach(), v.detach())
            errs = {"out": (out.double() - ref).abs().max().item() / ref.abs().max().item()}
            if no_backward is None:
                try:
                    (out * g).sum().backward()
                except NotImplementedError as e:
                    no_backward = str(e).splitlines()[0][:60]
            if no_backward is None:
                for name, x, y in zip(("dq", "dk", "dv", "dtable"), leaves, d):
                    errs[name] = (x.grad.double() - y.grad).abs().max().item() / y.grad.abs().max().item()
            else:
                errs["backward"] = no_backward
            bad = [n for n, e in errs.items() if isinstance(e, float) and not e <= tol]
            ok = ok and not bad
            print("check torch_%s L=%d against float64: %s: %s" % (
                variant, L, ", ".join("%s %s" % (n, "%.1e" % e if isinstance(e, float) else "skipped (%s)" % e)
                                      for n, e in errs.items()),
                "FAILED (above %.0e: %s)" % (tol, " ".join(bad)) if bad else "OK (relative to the largest, %.0e)" % tol),
                flush=True)
        except Exception as e:  # a Flex compilation failure: report it, go on
            ok = False
            print("check torch_%s L=%d: failed: %s: %s" % (variant, L, type(e).__name__,
                                                          (str(e).strip().splitlines() or [""])[0][:160]), flush=True)
    return ok


def verdict(same):
    return "—" if same is None else "yes" if same else "no"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cuda", help="cuda (default) or cpu (a check of the logic, no peak memory)")
    ap.add_argument("--lengths", default="2048,4096,8192,16384")
    ap.add_argument("--variants", default=DEFAULT_VARIANTS)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--head-dim", type=int, default=64)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--t5-buckets", type=int, default=32)
    ap.add_argument("--t5-max-distance", type=int, default=128)
    ap.add_argument("--shaw-clip", type=int, default=16)
    ap.add_argument("--tf32", action="store_true", help="TF32 on for float32 matmuls (default: off)")
    ap.add_argument("--check", type=int, default=0, metavar="L",
                    help="first compare every variant with a float64 reference at length L (0: no check)")
    a = ap.parse_args()
    variants = a.variants.split(",")
    for v in variants:
        if v not in VARIANTS:
            sys.exit("flash_torch.py: unknown variant %r (expected one of %s)" % (v, ", ".join(VARIANTS)))
    if a.reps < 1:
        sys.exit("flash_torch.py: --reps must be at least 1")
    if a.device == "cuda" and not torch.cuda.is_available():
        sys.exit("flash_torch.py: needs a CUDA GPU, and this torch (%s) sees none (torch.cuda.is_available() is "
                 "False); --device cpu checks the logic on the CPU" % torch.__version__)
    dev = torch.device(a.device)
    set_tf32(a.tf32)
    name = torch.cuda.get_device_name() if dev.type == "cuda" else "CPU"
    print("torch %s, %s, B=%d H=%d D=%d, causal, float32, TF32 %s, median of %d reps after 1 warm-up; t5: %d causal "
          "buckets, max distance %d; shaw: clip %d (%d rows, shared by the heads, no value term)\n" % (
              torch.__version__, name, a.batch, a.heads, a.head_dim, "on" if a.tf32 else "off", a.reps,
              a.t5_buckets, a.t5_max_distance, a.shaw_clip, 2 * a.shaw_clip + 1))
    if a.check:
        check(variants, a.check, a, dev)
        print()
    print("| variant | L | fwd ms | bwd ms | fwd+bwd ms | peak MiB above inputs | det table | det dq/dk/dv |\n"
          "|---|---|---|---|---|---|---|---|", flush=True)
    warm = []
    for L in [int(x) for x in a.lengths.split(",")]:
        for variant in variants:
            row = "| torch_%s | %d |" % (variant, L)
            try:
                f, b, peak, st, si, w = measure(variant, L, a, dev)
                print("%s %.2f | %.2f | %.2f | %s | %s | %s |" % (
                    row, f * 1e3, b * 1e3, (f + b) * 1e3, peak, verdict(st), verdict(si)), flush=True)
                if variant.startswith("flex"):
                    warm.append("%s L=%d %.1f s" % (variant, L, w))
            except torch.cuda.OutOfMemoryError:
                print("%s out of memory | | | | | |" % row, flush=True)
            except Exception as e:  # a Flex compilation or launch failure: report it, go on
                first = (str(e).strip().splitlines() or [type(e).__name__])[0][:160].replace("|", "/")
                print("%s failed: %s: %s | | | | | |" % (row, type(e).__name__, first), flush=True)
            if dev.type == "cuda":
                torch.cuda.empty_cache()
    if warm:
        print("\nFlex warm-up run (compilation for the length + one fwd+bwd, not timed): " + ", ".join(warm))


if __name__ == "__main__":
    main()
