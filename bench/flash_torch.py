#!/usr/bin/env python3
"""PyTorch's side of bench/bench_flash.cpp: causal attention on split heads, forward +
backward, no projections, on the GPU, for L = 1024 ... 16384:

  sdpa        torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)   (the fused floor)
  sdpa_bias   the same with the relative term as an additive (1, H, L, L) float mask built from a
              per-head table gathered by distance (what PyTorch users write for a learned relative
              bias: SDPA has no relative-position hook, so the bias is materialised; its backward
              goes through the math/efficient kernel)

q, k, v (B, H, L, D) float32 requiring grad, loss = sum(out * g). Median of --reps timed reps after
one warm-up; peak = torch.cuda.max_memory_allocated above the inputs. Prints the same table as
bench_flash. Run on the GPU machine (PyTorch 2.11):
  python3 bench/flash_torch.py --lengths 1024,2048,4096,8192,16384
  ./build/bench/bench_flash --device cuda --lengths 1024,2048,4096,8192,16384
TF32 is off (relgrad's default), so both sides do float32 arithmetic.
"""
import argparse
import statistics
import time

import torch
import torch.nn.functional as F


def measure(variant, L, B, H, D, reps, dtype):
    dev = torch.device("cuda")
    gen = torch.Generator(device=dev).manual_seed(1)
    mk = lambda: torch.randn(B, H, L, D, device=dev, dtype=dtype, generator=gen).requires_grad_()
    q, k, v = mk(), mk(), mk()
    g = torch.randn(B, H, L, D, device=dev, dtype=dtype, generator=gen)
    table = torch.randn(H, 2 * L - 1, device=dev, dtype=dtype, generator=gen).requires_grad_()
    idx = None
    if variant == "sdpa_bias":
        pos = torch.arange(L, device=dev)
        idx = (pos[None, :] - pos[:, None]) + (L - 1)  # row of δ = j − i
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    fwd, bwd = [], []
    for rep in range(reps + 1):
        for t in (q, k, v, table):
            t.grad = None
        t0 = time.perf_counter()
        if variant == "sdpa":
            out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            bias = table[:, idx].unsqueeze(0)  # (1, H, L, L)
            causal = torch.ones(L, L, device=dev, dtype=torch.bool).triu(1)
            bias = bias.masked_fill(causal, float("-inf"))
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=bias)
        loss = (out * g).sum()
        torch.cuda.synchronize()
        t1 = time.perf_counter()
        loss.backward()
        torch.cuda.synchronize()
        t2 = time.perf_counter()
        if rep == 0:
            continue
        fwd.append(t1 - t0)
        bwd.append(t2 - t1)
    peak = (torch.cuda.max_memory_allocated() - base) / 2**20
    return statistics.median(fwd), statistics.median(bwd), peak


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lengths", default="1024,2048,4096,8192,16384")
    ap.add_argument("--variants", default="sdpa,sdpa_bias")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--head-dim", type=int, default=64)
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}, B={args.batch} H={args.heads} "
          f"D={args.head_dim}, causal, float32, median of {args.reps} reps\n")
    print("| variant | L | fwd ms | bwd ms | fwd+bwd ms | peak MiB above inputs |\n|---|---|---|---|---|---|")
    for L in [int(x) for x in args.lengths.split(",")]:
        for variant in args.variants.split(","):
            try:
                f, b, peak = measure(variant, L, args.batch, args.heads, args.head_dim, args.reps, torch.float32)
                print(f"| torch_{variant} | {L} | {f * 1e3:.2f} | {b * 1e3:.2f} | {(f + b) * 1e3:.2f} | {peak:.1f} |",
                      flush=True)
            except torch.cuda.OutOfMemoryError:
                print(f"| torch_{variant} | {L} | out of memory | | | |", flush=True)
                torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
