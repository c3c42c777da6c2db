"""W0 on relgrad's side: the quick start's default run, `relgrad train` end to end, for bench/run_train.sh;
with --config, any workload through `relgrad train` (W1 and W2 on the user's path: bench/configs/).

Runs `relgrad train` (the built-in default config, configs/default.toml, or --config) for WARMUP + STEPS steps
with a log record every step and nothing else in the loop (no evaluation until the end, one
checkpoint at the end, no samples, no early stop), then reads the run's log.jsonl: each train
record's tokens_per_s is the rate relgrad prints (input tokens of that step, padding excluded, over
the time since the previous record; train/trainer/trainer.cpp). The record written holds the median
of those rates over the steps after the warm-up, the median step time, and the peak RSS of the
relgrad process. Python's standard library only.

    /usr/bin/python3 bench/w0_relgrad.py BUILD/relgrad --threads 1 --steps 200 --warmup 20 \
        --out DIR --json w0.json
    /usr/bin/python3 bench/w0_relgrad.py BUILD/relgrad --config bench/configs/w1_train.toml \
        --workload charlm-train --threads 2 --steps 12 --warmup 3 --out DIR --json w1.json
"""
import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("relgrad", help="the relgrad executable")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--steps", type=int, default=200, help="timed steps (after warm-up)")
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--out", required=True, help="train.out_dir (replaced)")
    ap.add_argument("--json", default=None)
    ap.add_argument("--config", default=None, help="a relgrad config (default: the built-in default run)")
    ap.add_argument("--workload", default="w0", help="the record's workload name")
    args = ap.parse_args()

    for name in ("checkpoint.safetensors", "checkpoint.prev.safetensors", "log.jsonl", "log.prev.jsonl"):
        if os.path.exists(os.path.join(args.out, name)):
            os.unlink(os.path.join(args.out, name))
    total = args.warmup + args.steps
    cmd = [args.relgrad, "train"] + (["--config", args.config] if args.config else []) + [
           "--train.steps=%d" % total, "--train.log_every=1", "--train.eval_every=0",
           "--train.save_every=0", "--train.target_accuracy=0", "--train.samples=0",
           "--train.threads=%d" % args.threads, "--train.out_dir=" + args.out]
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads))
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        sys.stderr.write(proc.stdout)
        sys.exit("w0_relgrad.py: relgrad train exited with %d" % proc.returncode)
    rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024.0
    with open(os.path.join(args.out, "log.jsonl")) as f:
        recs = [json.loads(line) for line in f if line.strip()]
    train = [r for r in recs if r.get("event") == "train"]
    if len(train) != total:
        sys.exit("w0_relgrad.py: expected %d train records in the log, found %d" % (total, len(train)))
    timed = [r for r in train if r["step"] > args.warmup]
    step_s = [b["elapsed_s"] - a["elapsed_s"] for a, b in zip(train, train[1:]) if b["step"] > args.warmup]
    tok = [b["tokens"] - a["tokens"] for a, b in zip(train, train[1:]) if b["step"] > args.warmup]
    done = [line for line in proc.stdout.splitlines() if line.startswith("done:")]
    rec = {"impl": "relgrad", "workload": args.workload, "threads": args.threads, "command": " ".join(cmd),
           "OMP_WAIT_POLICY": os.environ.get("OMP_WAIT_POLICY", "<unset>"),
           "tokens_per_s": statistics.median(r["tokens_per_s"] for r in timed),
           "step_s": statistics.median(step_s), "tokens_per_step_mean": statistics.mean(tok),
           "gflops": None, "peak_rss_mib": rss, "wall_s": wall, "done_line": done[-1] if done else "",
           "loss_first": train[0]["loss"], "loss_last": train[-1]["loss"], "step_times": step_s}
    print("%s relgrad, %d thread(s): %.0f tokens/s, step %.2f ms, peak RSS %.0f MiB, loss %.4f -> %.4f "
          "(%s)" % (
        args.workload, args.threads, rec["tokens_per_s"], 1e3 * rec["step_s"], rss, rec["loss_first"], rec["loss_last"],
        rec["done_line"]))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rec, f, indent=1)


if __name__ == "__main__":
    main()
