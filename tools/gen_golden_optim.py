#!/usr/bin/python3
"""Writes tests/golden/optim_trajectories.safetensors, which tests/test_optim.cpp replays in relgrad.

    /usr/bin/python3 tools/gen_golden_optim.py        (Debian's python3-torch 1.13)

Two float64 parameters, W (3,4) and b (4,), start from fixed values. For 10 steps a fixed gradient
sequence (seeded normals times a per-step scale, so that clipping is active on some steps only) is
set as .grad, clipped with clip_grad_norm_(max_norm=1), the lr is set from a warmup + cosine schedule
(the formula of train/optim/schedule.h), and the optimizer steps. Stored, per configuration:
    <cfg>.W (10,3,4), <cfg>.b (10,4)   the parameters after each step
    <cfg>.clip_norm (10,)              the total norm clip_grad_norm_ returned
    <cfg>.lr (10,)                     the lr used at each step
and shared: init.W, init.b, grad.W (10,3,4), grad.b (10,4).
"""
import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_golden import OUT_DIR, write_safetensors  # noqa: E402

SEED = 20240607
F64 = torch.float64
STEPS = 10
MAX_NORM = 1.0
WARMUP, TOTAL = 3, 10
GRAD_SCALES = [0.2, 3.0, 0.5, 2.0, 0.1, 5.0, 0.8, 1.5, 0.05, 4.0]


def lr_at(step, max_lr, min_lr):
    """train/optim/schedule.h, Cosine decay."""
    if step < WARMUP:
        return max_lr * (step + 1) / WARMUP
    if step >= TOTAL:
        return min_lr
    r = (step - WARMUP) / (TOTAL - WARMUP)
    return min_lr + 0.5 * (1.0 + math.cos(math.pi * r)) * (max_lr - min_lr)


# name -> (max_lr, builder(W, b) -> optimizer). Keep in step with kConfigs in tests/test_optim.cpp.
CONFIGS = {
    "sgd_momentum": (0.1, lambda W, b: torch.optim.SGD([W, b], lr=0.1, momentum=0.9, weight_decay=0.01,
                                                       foreach=False)),
    "sgd_nesterov": (0.1, lambda W, b: torch.optim.SGD([W, b], lr=0.1, momentum=0.9, nesterov=True,
                                                       weight_decay=0.01, foreach=False)),
    "sgd_dampening": (0.1, lambda W, b: torch.optim.SGD([W, b], lr=0.1, momentum=0.9, dampening=0.3,
                                                        foreach=False)),
    "adam": (0.01, lambda W, b: torch.optim.Adam([W, b], lr=0.01, betas=(0.9, 0.95), eps=1e-8,
                                                 weight_decay=0.01, foreach=False)),
    # Two groups, as decay_groups makes them: the matrix decays, the vector does not.
    "adamw": (0.01, lambda W, b: torch.optim.AdamW([{"params": [W], "weight_decay": 0.1},
                                                    {"params": [b], "weight_decay": 0.0}],
                                                   lr=0.01, betas=(0.9, 0.95), eps=1e-8, foreach=False)),
}


def main():
    g = torch.Generator().manual_seed(SEED)
    init_W = torch.randn(3, 4, dtype=F64, generator=g)
    init_b = torch.randn(4, dtype=F64, generator=g) * 0.1
    grad_W = torch.stack([torch.randn(3, 4, dtype=F64, generator=g) * s for s in GRAD_SCALES])
    grad_b = torch.stack([torch.randn(4, dtype=F64, generator=g) * s for s in GRAD_SCALES])
    out = {"init.W": init_W, "init.b": init_b, "grad.W": grad_W, "grad.b": grad_b}
    for name, (max_lr, build) in CONFIGS.items():
        W = init_W.clone().requires_grad_()
        b = init_b.clone().requires_grad_()
        opt = build(W, b)
        Ws, bs, norms, lrs = [], [], [], []
        for step in range(STEPS):
            opt.zero_grad()
            W.grad, b.grad = grad_W[step].clone(), grad_b[step].clone()
            norms.append(float(torch.nn.utils.clip_grad_norm_([W, b], MAX_NORM)))
            lr = lr_at(step, max_lr, 0.1 * max_lr)
            for group in opt.param_groups:
                group["lr"] = lr
            lrs.append(lr)
            opt.step()
            Ws.append(W.detach().clone())
            bs.append(b.detach().clone())
        out[name + ".W"] = torch.stack(Ws)
        out[name + ".b"] = torch.stack(bs)
        out[name + ".clip_norm"] = torch.tensor(norms, dtype=F64)
        out[name + ".lr"] = torch.tensor(lrs, dtype=F64)
    metadata = {"torch_version": torch.__version__, "generator": "tools/gen_golden_optim.py", "seed": str(SEED),
                "steps": str(STEPS), "max_norm": str(MAX_NORM), "warmup_steps": str(WARMUP),
                "total_steps": str(TOTAL), "min_lr": "0.1 * max_lr", "configs": ", ".join(CONFIGS)}
    path = os.path.join(OUT_DIR, "optim_trajectories.safetensors")
    write_safetensors(path, out, metadata)
    print(f"wrote {os.path.relpath(path)} ({os.path.getsize(path)} bytes, {len(out)} tensors)")


if __name__ == "__main__":
    main()
