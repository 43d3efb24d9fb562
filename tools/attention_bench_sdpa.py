#!/usr/bin/env python3
"""PyTorch's flash and cuDNN SDPA on the shapes of tools/attention_bench.cu, in its output format.

torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True), bf16, layout (B, NH, T, HS),
forced to one backend at a time (torch.nn.attention.sdpa_kernel): forward, and backward alone, timed
as tools/sdpa_bench.py times them (its bench_shape: CUDA events, median of --reps after --warmup).
Shapes: every (HS, T) of --hs and --T, B = --tokens / T, NH = --heads or, by default, 2048 / HS
rounded (32 at HS 80), as attention_bench does. TFLOP/s on model FLOPs: 4*HS (fwd) and 10*HS (bwd)
per visible pair, B*NH*T*(T+1)/2 pairs (tools/kernel_costs.c).

--csv / --jsonl write attention_bench's columns with source "sdpa" and variant "flash" or "cudnn";
a backend that refuses a shape (or that this torch cannot force) gives a row with empty times and
status "unavailable: ...". Without torch or a CUDA device it prints one line
    attention_bench_sdpa: skipped: REASON
writes the CSV header alone and exits 0. tools/attention_bench.sh runs both programs and prints
one table.
"""
import argparse
import json
import os
import sys
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sdpa_bench  # noqa: E402  (the kit's SDPA timing, beside this file here and in the GPU bundle)

CSV_HEADER = ("source,variant,dtype,HS,T,B,NH,fwd_ms,fwd_min_ms,bwd_ms,bwd_min_ms,fwd_tflops,bwd_tflops,"
              "fwd_err,bwd_err,deterministic,status")
BACKENDS = ("flash", "cudnn")
HEAD_SIZES = (16, 32, 48, 64, 80, 96, 128)


def int_list(flag, lo, hi):
    def parse(text):
        try:
            values = [int(x) for x in text.split(",")]
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected comma-separated integers, found '{text}'")
        for v in values:
            if not lo <= v <= hi:
                raise argparse.ArgumentTypeError(f"expected integers in [{lo}, {hi}], found '{v}'")
        return values
    return parse


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--hs", type=int_list("--hs", 16, 128), default=[64, 80, 128], help="head sizes (default 64,80,128)")
    ap.add_argument("--T", type=int_list("--T", 1, 1 << 22), default=[1024, 2048, 4096, 8192, 16384],
                    help="sequence lengths dividing --tokens (default 1024,...,16384)")
    ap.add_argument("--tokens", type=int, default=16384, help="B*T tokens per call (default 16384)")
    ap.add_argument("--heads", type=int, default=0, help="heads (default 2048/HS rounded; 32 at HS 80)")
    ap.add_argument("--reps", type=int, default=20, help="timed calls (default 20)")
    ap.add_argument("--warmup", type=int, default=3, help="untimed calls first (default 3)")
    ap.add_argument("--backends", default="flash,cudnn", help="comma-separated: flash, cudnn (default both)")
    ap.add_argument("--csv", help="rows in attention_bench's columns")
    ap.add_argument("--jsonl", help="the same rows as JSON objects")
    args = ap.parse_args()
    if args.tokens < 1 or args.heads < 0 or args.reps < 1 or args.warmup < 0:
        ap.error("--tokens and --reps must be >= 1, --heads and --warmup >= 0")
    for hs in args.hs:
        if hs not in HEAD_SIZES:
            ap.error(f"--hs: expected head sizes from {', '.join(map(str, HEAD_SIZES))}, found '{hs}'")
    for t in args.T:
        if args.tokens % t:
            ap.error(f"--T: expected lengths dividing --tokens N = {args.tokens} (B = N / T), found '{t}'")
    args.backends = args.backends.split(",")
    for b in args.backends:
        if b not in BACKENDS:
            ap.error(f"--backends: expected names from {', '.join(BACKENDS)}, found '{b}'")
    return args


def default_heads(hs):
    """attention_bench's rule: 2048 / HS rounded, but gpt3-2.7b's 32 heads at HS 80."""
    return 32 if hs == 80 else (2048 + hs // 2) // hs


def tflops(flops_per_pair, hs, t, b, nh, ms):
    pairs = b * nh * t * (t + 1) / 2
    return flops_per_pair * hs * pairs / (ms * 1e-3) / 1e12 if ms == ms and ms > 0 else float("nan")


def write_row(csv, jsonl, row):
    def num(v, fmt):
        return "" if v != v else fmt.format(v)
    if csv:
        csv.write(",".join(["sdpa", row["variant"], "bf16", str(row["HS"]), str(row["T"]), str(row["B"]),
                            str(row["NH"]), num(row["fwd_ms"], "{:.5f}"), "", num(row["bwd_ms"], "{:.5f}"), "",
                            num(row["fwd_tflops"], "{:.4g}"), num(row["bwd_tflops"], "{:.4g}"), "", "", "",
                            row["status"].replace(",", ";")]) + "\n")
        csv.flush()
    if jsonl:
        obj = {"type": "attention_bench", "source": "sdpa", "dtype": "bf16", **row, "fwd_min_ms": None,
               "bwd_min_ms": None, "fwd_err": None, "bwd_err": None, "deterministic": None}
        jsonl.write(json.dumps({k: (None if isinstance(v, float) and v != v else v) for k, v in obj.items()}) + "\n")
        jsonl.flush()


def main():
    args = parse_args()
    csv = open(args.csv, "w") if args.csv else None
    jsonl = open(args.jsonl, "w") if args.jsonl else None
    if csv:
        csv.write(CSV_HEADER + "\n")
    torch, reason = sdpa_bench.usable_torch()
    if torch is None:
        print(f"attention_bench_sdpa: skipped: {reason}")
        return 0
    warnings.showwarning = sdpa_bench.warning_as_comment
    print(f"attention_bench_sdpa: torch {torch.__version__}, {torch.cuda.get_device_name(0)}; bf16, causal; "
          f"median of {args.reps} after {args.warmup} warm-up calls")
    print(f"{'variant':10} {'HS':>4} {'T':>6} {'B x NH':>9} {'fwd ms':>9} {'fwd TF/s':>8} {'bwd ms':>9} "
          f"{'bwd TF/s':>8}  status")
    for hs in args.hs:
        for t in args.T:
            b, nh = args.tokens // t, args.heads or default_heads(hs)
            for backend in args.backends:
                context, status, fwd, bwd = sdpa_bench.backend_context(torch, backend), "ok", float("nan"), float("nan")
                if context is None:
                    status = f"unavailable: torch {torch.__version__} cannot force the {backend} backend"
                else:
                    try:
                        fwd, bwd = sdpa_bench.bench_shape(torch, hs, t, b, nh, context, args.reps, args.warmup)
                    except RuntimeError as e:  # the backend refused the shape (head size, GPU)
                        status = f"unavailable: {str(e).splitlines()[0][:160]}"
                        torch.cuda.empty_cache()
                row = {"variant": backend, "HS": hs, "T": t, "B": b, "NH": nh, "fwd_ms": fwd, "bwd_ms": bwd,
                       "fwd_tflops": tflops(4, hs, t, b, nh, fwd), "bwd_tflops": tflops(10, hs, t, b, nh, bwd),
                       "status": status}
                print(f"{backend:10} {hs:4} {t:6} {f'{b} x {nh}':>9} {fwd:9.4g} {row['fwd_tflops']:8.1f} "
                      f"{bwd:9.4g} {row['bwd_tflops']:8.1f}  {status}", flush=True)
                write_row(csv, jsonl, row)
    return 0


if __name__ == "__main__":
    sys.exit(main())
