#!/usr/bin/env python3
"""PyTorch's side of the training workloads on a GPU, and the comparison table, for bench/run_gpu.sh.

  gpu_train.py torch REF --workload charlm|seq2seq --mode eager|compiled [--tf32] [--precision bf16] --json F
      W1 charlm / W2 seq2seq: torch_ref.py's models, data and optimizer (REF: the folder holding
      torch_ref.py and benchutil.py, .gpu-ref/ on the GPU machine), moved to the GPU; compiled =
      model + loss under torch.compile (default backend, inductor), compiled on an untimed first
      step. As bench/torch2_train.py on the CPU. --precision bf16: model + loss under
      torch.autocast(dtype=torch.bfloat16) (float32 weights, optimizer and loss; the match of
      bench_train --precision bf16), compiled with it in compiled mode.
  gpu_train.py w0 --mode eager|compiled [--tf32] --json F
      W0, the quick start's default run: bench/w0_torch.py's twin of relgrad's default model,
      optimizer and batches, on the GPU (the batches are made on the host and moved there before
      the clock; compiled mode first compiles for every batch shape the timed steps will see).
  gpu_train.py summary DIR
      The table of every record in DIR (bench_train's and w0_relgrad.py's JSON included): median
      tokens/s over the rounds, peak GPU tensors (torch.cuda.max_memory_allocated; relgrad's caching
      allocator's peak_allocated_bytes), and relgrad ÷ each PyTorch row of the same precision (a
      record's "precision", fp32 when absent; a bf16 record's file name has "-bf16" after its impl).

--device cpu runs the same on the CPU, to check the logic on a machine without a GPU.
Each step is timed between synchronisations (W1/W2) or up to loss.item() after the optimizer step
(W0, which syncs), as relgrad's side is. Float32 unless --precision bf16; TF32 off unless --tf32.
The peak of GPU tensors is reset after the first step (after compilation in compiled mode), so it
is the training steps' own: weights, gradients, optimizer state and one step's activations.
"""
import argparse
import glob
import json
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def set_tf32(torch, on):
    torch.backends.cuda.matmul.allow_tf32 = on
    torch.backends.cudnn.allow_tf32 = on
    torch.set_float32_matmul_precision("high" if on else "highest")


def device(torch, a):
    """The device, its synchronisation and its peak of live tensors in MiB (None on the CPU)."""
    if a.device == "cpu":
        return torch.device("cpu"), (lambda: None), (lambda: None), (lambda: None)
    if not torch.cuda.is_available():
        sys.exit("gpu_train.py: needs a CUDA GPU, and this torch (%s) sees none (--device cpu checks the "
                 "logic on the CPU)" % torch.__version__)
    return (torch.device("cuda"), torch.cuda.synchronize, torch.cuda.reset_peak_memory_stats,
            lambda: torch.cuda.max_memory_allocated() / 2**20)


def mib(x):
    return "—" if x is None else "%.0f" % x


def run_torch(a):
    sys.path.insert(0, os.path.abspath(a.ref))
    import torch
    import torch.nn.functional as F
    import torch_ref
    dev, sync, reset_peak, peak_mib = device(torch, a)
    set_tf32(torch, a.tf32)
    cfg = dict(torch_ref.WORKLOADS[a.workload])
    skew = "pad" if a.workload == "charlm" else "reshape"  # torch_ref's --skew auto
    model, inputs, labels = torch_ref.build(a.workload, cfg, skew)
    model = model.to(dev)
    inputs = tuple(x.to(dev) for x in inputs)
    labels = labels.to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.01, betas=(0.9, 0.95))

    def loss_fn(*xs):
        if a.precision == "fp32":
            return F.cross_entropy(model(*xs).flatten(0, 1), labels.flatten())
        # autocast keeps cross_entropy (and softmax, norms) in float32 on its own.
        with torch.autocast(device_type=dev.type, dtype=torch.bfloat16):
            return F.cross_entropy(model(*xs).flatten(0, 1), labels.flatten())

    fn = torch.compile(loss_fn) if a.mode == "compiled" else loss_fn

    def step():
        opt.zero_grad(set_to_none=True)
        loss = fn(*inputs)
        loss.backward()
        opt.step()
        return loss

    compile_s = 0.0
    if a.mode == "compiled":
        sync()
        t0 = time.perf_counter()
        step()  # traces and compiles forward and backward (a training step: the optimizer moves)
        sync()
        compile_s = time.perf_counter() - t0
    tokens = cfg["batch"] * (cfg["seq_len"] if a.workload == "charlm" else cfg["src_len"] + cfg["tgt_len"])
    flops = 3 * torch_ref.forward_matmul_flops(a.workload, cfg)[0]
    times, losses = [], []
    for i in range(a.warmup + a.steps):
        if i == min(1, a.warmup):
            sync()
            reset_peak()
        sync()
        t0 = time.perf_counter()
        loss = step()
        sync()
        t1 = time.perf_counter()
        losses.append(loss.item())
        if i >= a.warmup:
            times.append(t1 - t0)
    sec = statistics.median(times)
    rec = {"impl": "torch-" + a.mode, "workload": a.workload, "mode": a.mode, "torch": torch.__version__,
           "gpu": torch.cuda.get_device_name() if dev.type == "cuda" else "cpu", "tf32": a.tf32,
           "precision": a.precision, "compile_s": compile_s, "step_s": sec, "step_times": times, "tokens_per_s": tokens / sec,
           "gflops": flops / sec / 1e9, "tensor_peak_mib": peak_mib(), "first_loss": losses[0],
           "last_loss": losses[-1]}
    print("torch %s %s %s %s on %s: %.0f tokens/s, %.1f GFLOP/s, step %.2f ms (compile %.1f s), peak tensors %s MiB, "
          "loss %.4f -> %.4f" % (torch.__version__, a.mode, a.precision, a.workload, dev, rec["tokens_per_s"], rec["gflops"],
                                 1e3 * sec, compile_s, mib(rec["tensor_peak_mib"]), losses[0], losses[-1]))
    return rec


def run_w0(a):
    sys.path.insert(0, HERE)
    import torch
    import w0_torch
    dev, sync, reset_peak, peak_mib = device(torch, a)
    set_tf32(torch, a.tf32)
    cfg = dict(w0_torch.DEFAULT)
    total = a.warmup + a.steps
    g = torch.Generator().manual_seed(1000 + a.seed)
    host = [w0_torch.reverse_batch(g, cfg) for _ in range(total)]
    counts = [w0_torch.input_tokens(b) for b in host]  # on the host: no sync in the loop
    batches = [tuple(x.to(dev) for x in b) for b in host]
    run = w0_torch.Run(cfg, a.seed, a.mode == "compiled", total)
    run.model.to(dev)  # in place, before the optimizer's first step allocates its state
    compile_s, shapes = w0_torch.precompile(run, batches) if a.mode == "compiled" else (0.0, [])
    rates, times, losses = [], [], []
    for i, b in enumerate(batches):
        if i == min(1, a.warmup):
            reset_peak()
        t0 = time.perf_counter()
        losses.append(run.step(b))  # ends in loss.item(): the step's GPU work is done
        dt = time.perf_counter() - t0
        if i >= a.warmup:
            times.append(dt)
            rates.append(counts[i] / dt)
    rec = {"impl": "torch-" + a.mode, "workload": "w0", "mode": a.mode, "torch": torch.__version__,
           "gpu": torch.cuda.get_device_name() if dev.type == "cuda" else "cpu", "tf32": a.tf32, "compile_s": compile_s,
           "compiled_shapes": len(shapes), "step_s": statistics.median(times), "step_times": times,
           "tokens_per_s": statistics.median(rates), "gflops": None,
           "tensor_peak_mib": peak_mib(),
           "first_loss": losses[0], "last_loss": losses[-1]}
    print("W0 torch %s %s on %s: %.0f tokens/s, step %.2f ms (compile %.1f s), peak tensors %s MiB, "
          "loss %.4f -> %.4f" % (torch.__version__, a.mode, dev, rec["tokens_per_s"], 1e3 * rec["step_s"], compile_s,
                                 mib(rec["tensor_peak_mib"]), losses[0], losses[-1]))
    return rec


LABEL = {"w0": "W0 default", "charlm": "W1 charlm", "seq2seq": "W2 seq2seq"}
# Row order and names; a record's impl is its file name's first field (run_gpu.sh names them).
IMPLS = (("relgrad-composite", "relgrad (composite core)"), ("relgrad-fused", "relgrad (fused core)"),
         ("relgrad", "relgrad"), ("torch-eager", "PyTorch %s eager"), ("torch-compiled", "PyTorch %s compiled"))


PRECISIONS = ("fp32", "bf16")


def summary(a):
    """Files are IMPL[-PRECISION]_WORKLOAD_ROUND.json; ratios are taken within one precision."""
    recs = {}
    for f in sorted(glob.glob(os.path.join(a.dir, "*.json"))):
        impl, workload, _ = os.path.basename(f)[:-5].rsplit("_", 2)
        with open(f) as fh:
            rec = json.load(fh)
        precision = rec.get("precision", "fp32")
        if impl.endswith("-" + precision):
            impl = impl[:-len(precision) - 1]
        recs.setdefault((workload, precision, impl), []).append(rec)
    print("| workload | impl | tokens/s | peak GPU tensors MiB | relgrad ÷ this (speed) | relgrad ÷ this (memory) "
          "| rounds |")
    print("|---|---|---:|---:|---:|---:|---:|")
    notes = []
    for w in ("w0", "charlm", "seq2seq"):
        for p in PRECISIONS:
            rows = []
            label = LABEL.get(w, w) + ("" if p == "fp32" else " " + p)
            for impl, fmt in IMPLS:
                r = recs.get((w, p, impl))
                if not r:
                    continue
                tok = statistics.median(x["tokens_per_s"] if "tokens_per_s" in x else x["tokens_per_s_median"] for x in r)
                mem = [x.get("tensor_peak_mib") for x in r if x.get("tensor_peak_mib") is not None]
                name = fmt % r[0]["torch"].split("+")[0] if "%" in fmt else fmt
                rows.append((impl, name, tok, max(mem) if mem else None, len(r)))
                if impl == "torch-compiled":
                    notes.append("%s: torch.compile took %.0f s per process (median, not timed)" % (
                        label, statistics.median(x.get("compile_s", 0) for x in r)))
            # relgrad's reference row for the ratios: the fused core if measured (the GPU default), else any.
            ref = next((x for x in rows if x[0] == "relgrad-fused"), None) or next(
                (x for x in rows if x[0].startswith("relgrad")), None)
            for impl, name, tok, mem, n in rows:
                speed = memory = ""
                if ref and not impl.startswith("relgrad"):
                    speed = "%.2f×" % (ref[2] / tok)
                    memory = "%.2f×" % (ref[3] / mem) if ref[3] and mem else "—"
                print("| %s | %s | %.0f | %s | %s | %s | %d |" % (label, name, tok,
                                                                "%.0f" % mem if mem else "—", speed, memory, n))
            if ref and len(rows) > 1:
                notes.append("%s: ratios against %s" % (label, ref[1]))
    for n in notes:
        print(n)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("torch", help="W1/W2 on the GPU")
    t.add_argument("ref", help="folder holding torch_ref.py and benchutil.py")
    t.add_argument("--workload", choices=("charlm", "seq2seq"), default="charlm")
    w = sub.add_parser("w0", help="W0 (the default run's twin) on the GPU")
    w.add_argument("--seed", type=int, default=1)
    for p, steps, warmup in ((t, 20, 5), (w, 200, 20)):
        p.add_argument("--mode", choices=("eager", "compiled"), default="eager")
        p.add_argument("--steps", type=int, default=steps, help="timed steps (after warm-up)")
        p.add_argument("--warmup", type=int, default=warmup)
        p.add_argument("--tf32", action="store_true", help="TF32 on for float32 matmuls (default: off)")
        p.add_argument("--precision", choices=PRECISIONS, default="fp32",
                       help="bf16: model and loss under torch.autocast(dtype=torch.bfloat16) (W1/W2 only)")
        p.add_argument("--json", default=None)
        p.add_argument("--device", choices=("cuda", "cpu"), default="cuda",
                       help="cuda (default); cpu checks the logic here (no memory figures)")
    s = sub.add_parser("summary", help="the table of the records in DIR")
    s.add_argument("dir")
    a = ap.parse_args()
    if a.cmd == "summary":
        summary(a)
        return
    if a.steps < 1 or a.warmup < 0:
        sys.exit("gpu_train.py: --steps must be at least 1 and --warmup at least 0")
    if a.cmd == "w0" and a.precision != "fp32":
        sys.exit("gpu_train.py: w0 runs in float32 only (its relgrad side, w0_relgrad.py, has no precision)")
    rec = run_torch(a) if a.cmd == "torch" else run_w0(a)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rec, f, indent=1)


if __name__ == "__main__":
    main()
