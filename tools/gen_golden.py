#!/usr/bin/python3
"""Writes the PyTorch golden files that tests/test_golden.cpp checks relgrad against.

    /usr/bin/python3 tools/gen_golden.py        (Debian's python3-torch 1.13 and python3-numpy)

Every file is float64 safetensors (int64 for indices) holding an op's inputs, a random upstream
gradient `grad_y` where the output is not a scalar, the outputs and the input gradients PyTorch
computes. The safetensors format is written by hand (json + struct) so that no extra package is
needed, and so that the files also check relgrad's reader against an independent writer.
Each file uses its own seeded generator: adding a file never changes the others.
"""
import json
import os
import struct

import numpy as np
import torch
import torch.nn.functional as F

SEED = 20240601
OUT_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "golden")
F64 = torch.float64
# torch dtype -> (safetensors dtype, little-endian numpy dtype)
DTYPES = {torch.float64: ("F64", "<f8"), torch.float32: ("F32", "<f4"), torch.int64: ("I64", "<i8"),
          torch.bool: ("BOOL", "|b1")}


def write_safetensors(path, tensors, metadata):
    """8-byte little-endian header length, JSON header, then the tensors' bytes in name order."""
    header = {"__metadata__": metadata}
    blobs, offset = [], 0
    for name in sorted(tensors):
        t = tensors[name].detach().cpu().contiguous()
        code, np_dtype = DTYPES[t.dtype]
        data = t.numpy().astype(np_dtype).tobytes()
        header[name] = {"dtype": code, "shape": list(t.shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * (-len(text) % 8)  # pad so the data section is 8-byte aligned, as the reference writer does
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for blob in blobs:
            f.write(blob)
    os.replace(tmp, path)


def save(name, seed, tensors, **extra_metadata):
    metadata = {"torch_version": torch.__version__, "generator": "tools/gen_golden.py", "seed": str(seed)}
    metadata.update({k: str(v) for k, v in extra_metadata.items()})
    path = os.path.join(OUT_DIR, name + ".safetensors")
    write_safetensors(path, tensors, metadata)
    print(f"wrote {os.path.relpath(path)} ({os.path.getsize(path)} bytes, {len(tensors)} tensors)")


def randn(g, *shape, scale=1.0, shift=0.0):
    return (torch.randn(*shape, dtype=F64, generator=g) * scale + shift).requires_grad_()


def chain(name, seed, approximate, label_smoothing, ignore_one):
    """x (4,8) @ W (8,6) + b -> layer_norm over 6 -> gelu -> cross_entropy (mean)."""
    g = torch.Generator().manual_seed(seed)
    x = randn(g, 4, 8)
    W = randn(g, 8, 6, scale=0.5)
    b = randn(g, 6, scale=0.1)
    ln_weight = randn(g, 6, scale=0.1, shift=1.0)
    ln_bias = randn(g, 6, scale=0.1)
    targets = torch.randint(0, 6, (4,), generator=g)
    ignore_index = -100
    if ignore_one:
        targets[2] = ignore_index
    eps = 1e-5
    linear = x @ W + b                                               # (4, 6)
    ln = F.layer_norm(linear, (6,), ln_weight, ln_bias, eps=eps)     # (4, 6)
    act = F.gelu(ln, approximate=approximate)                        # (4, 6)
    loss = F.cross_entropy(act, targets, ignore_index=ignore_index, label_smoothing=label_smoothing)
    loss.backward()
    save(name, seed, {
        "x": x, "W": W, "b": b, "ln_weight": ln_weight, "ln_bias": ln_bias, "targets": targets,
        "linear": linear, "ln": ln, "gelu": act, "loss": loss,
        "grad_x": x.grad, "grad_W": W.grad, "grad_b": b.grad, "grad_ln_weight": ln_weight.grad,
        "grad_ln_bias": ln_bias.grad,
    }, op="layer_norm(x @ W + b) -> gelu -> cross_entropy", gelu_approximate=approximate,
        label_smoothing=label_smoothing, ignore_index=ignore_index, eps=eps)


def single(name, seed, fn, inputs, description, **extra):
    """y = fn(*inputs); backward of a random upstream gradient grad_y; saves inputs, y, grad_<input>."""
    g = torch.Generator().manual_seed(seed)
    tensors = {k: v(g) for k, v in inputs}  # in order, so the draws are reproducible
    y = fn(**tensors)
    grad_y = torch.randn(y.shape, dtype=F64, generator=g)
    y.backward(grad_y)
    out = dict(tensors)
    out.update({"y": y, "grad_y": grad_y})
    out.update({"grad_" + k: t.grad for k, t in tensors.items() if t.requires_grad})
    save(name, seed, out, op=description, **extra)


def main():
    os.makedirs(OUT_DIR, exist_ok=True)
    torch.set_default_dtype(F64)
    chain("chain_gelu_erf", SEED + 1, "none", 0.0, False)
    chain("chain_gelu_tanh_smoothing", SEED + 2, "tanh", 0.1, True)

    single("op_softmax", SEED + 10, lambda x: torch.softmax(x, dim=-1),
           [("x", lambda g: randn(g, 3, 5, scale=2.0))], "softmax(x, dim=-1)")
    single("op_log_softmax", SEED + 11, lambda x: torch.log_softmax(x, dim=0),
           [("x", lambda g: randn(g, 4, 3, scale=2.0))], "log_softmax(x, dim=0)")
    eps = 1e-6
    # torch 1.13 has no rms_norm: the definition, written out.
    single("op_rms_norm", SEED + 12, lambda x, weight: x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight,
           [("x", lambda g: randn(g, 3, 6)), ("weight", lambda g: randn(g, 6, scale=0.1, shift=1.0))],
           "x * rsqrt(mean(x^2, -1) + eps) * weight", eps=eps)
    single("op_var", SEED + 13, lambda x: torch.var(x, dim=1, unbiased=True),
           [("x", lambda g: randn(g, 3, 5))], "var(x, dim=1, unbiased=True)")

    def lse_input(g):  # one row far from zero: a naive exp would overflow in float32
        x = torch.randn(3, 5, dtype=F64, generator=g) * 2
        x[1] += 100
        return x.requires_grad_()
    single("op_logsumexp", SEED + 14, lambda x: torch.logsumexp(x, dim=1),
           [("x", lse_input)], "logsumexp(x, dim=1)")
    single("op_matmul_batched", SEED + 15, lambda a, b: a @ b,
           [("a", lambda g: randn(g, 2, 1, 3, 4)), ("b", lambda g: randn(g, 5, 4, 2))],
           "(2,1,3,4) @ (5,4,2) -> (2,5,3,2), batch dims broadcast")
    single("op_embedding", SEED + 16, lambda weight, indices: F.embedding(indices, weight),
           [("weight", lambda g: randn(g, 7, 4)),
            ("indices", lambda g: torch.tensor([[1, 3, 1, 0, 6], [3, 3, 2, 1, 6]]))],
           "embedding(weight (7,4), indices (2,5) with repeats) -> (2,5,4)")
    single("op_gather", SEED + 17, lambda x, index: torch.gather(x, 1, index),
           [("x", lambda g: randn(g, 3, 5)),
            ("index", lambda g: torch.tensor([[0, 4, 4, 1], [2, 2, 2, 3], [1, 0, 3, 1]]))],
           "gather(x (3,5), dim=1, index (3,4) with repeats)")

    # silu, sigmoid, tanh on the same input and upstream gradient, one file.
    g = torch.Generator().manual_seed(SEED + 18)
    x = torch.randn(3, 4, dtype=F64, generator=g) * 3
    grad_y = torch.randn(3, 4, dtype=F64, generator=g)
    out = {"x": x, "grad_y": grad_y}
    for name, fn in [("silu", F.silu), ("sigmoid", torch.sigmoid), ("tanh", torch.tanh)]:
        xi = x.clone().requires_grad_()
        y = fn(xi)
        y.backward(grad_y)
        out[name + ".y"] = y
        out[name + ".grad_x"] = xi.grad
    save("op_unary", SEED + 18, out, op="silu, sigmoid, tanh of x with upstream grad_y")


if __name__ == "__main__":
    main()
