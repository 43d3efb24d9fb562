#!/usr/bin/env python3
"""PyTorch's flash attention timed on the shapes of our attention comparison.

Times torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True) forced to the
flash backend, bf16, layout (B, NH, T, HS), with CUDA events: forward, and backward alone
(torch.autograd.grad of the output with retain_graph=True, so the timed region holds the backward
kernels only, with no .grad accumulation). Warm-up calls first, then the median of --reps calls,
each between its own pair of events. Shapes: HS in {64, 128}, T in {1024, ..., 16384},
B*T = 16384 tokens, NH = 2048 / HS (--tiny: HS in {16, 32}, T in {64, 128}, 512 tokens, NH = 64 / HS).
--quick: 5 timed calls after 2 warm-up calls (the GPU check's quick mode).

Output, one line per shape, which `bench_kernels_cuda --attention-vs FILE` reads:
    sdpa HS T B NH fwd_ms bwd_ms backend
backend is "flash", or "default" where the flash kernel refused the shape (the default backend
then ran it); a shape that could not run at all prints nan times. Lines starting with '#' are
comments (torch's warnings among them). Without a CUDA device or without torch (or a torch without SDPA) it prints one line
    sdpa-skipped: REASON
and exits 0, so that the report can say why the comparison is missing.
"""
import argparse
import contextlib
import statistics
import sys
import warnings


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, help="timed calls per measurement (default 20; --quick 5)")
    ap.add_argument("--warmup", type=int, help="untimed calls first (default 3; --quick 2)")
    ap.add_argument("--tiny", action="store_true", help="the tiny shapes of bench_kernels_cuda --tiny")
    ap.add_argument("--quick", action="store_true", help="fewer calls: 5 timed after 2 warm-up")
    args = ap.parse_args()
    if args.reps is None:
        args.reps = 5 if args.quick else 20
    if args.warmup is None:
        args.warmup = 2 if args.quick else 3
    if args.reps < 1 or args.warmup < 0:
        ap.error("--reps must be >= 1 and --warmup >= 0")
    return args


def shapes(tiny):
    """(HS, T, B, NH) of the comparison."""
    head_sizes, lengths, tokens, width = ((16, 32), (64, 128), 512, 64) if tiny else \
        ((64, 128), (1024, 2048, 4096, 8192, 16384), 16384, 2048)
    return [(hs, t, tokens // t, width // hs) for hs in head_sizes for t in lengths]


def skip(reason):
    print(f"sdpa-skipped: {reason}")
    sys.exit(0)


def usable_torch():
    """(torch, None), or (None, why it cannot run the comparison)."""
    try:
        import torch
    except Exception as e:  # no torch at all, or a broken install
        return None, f"no usable torch ({type(e).__name__}: {e})"
    if not torch.cuda.is_available():
        return None, f"torch {torch.__version__} sees no CUDA device"
    if not hasattr(torch.nn.functional, "scaled_dot_product_attention"):
        return None, f"torch {torch.__version__} has no scaled_dot_product_attention (needs torch >= 2.0)"
    return torch, None


def load_torch():
    """torch, or a skip line saying why it cannot run the comparison."""
    torch, reason = usable_torch()
    if torch is None:
        skip(reason)
    return torch


def backend_context(torch, backend):
    """A context manager that allows only `backend` ("flash" or "cudnn"), or None if this torch has
    no way to force it."""
    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel
    except ImportError:
        SDPBackend = None
    if SDPBackend is not None:
        which = {"flash": "FLASH_ATTENTION", "cudnn": "CUDNN_ATTENTION"}[backend]
        if hasattr(SDPBackend, which):
            return lambda: sdpa_kernel(getattr(SDPBackend, which))
        return None
    if backend == "flash" and hasattr(torch.backends.cuda, "sdp_kernel"):  # torch 2.0 - 2.2
        return lambda: torch.backends.cuda.sdp_kernel(enable_flash=True, enable_math=False,
                                                      enable_mem_efficient=False)
    return None


def flash_context(torch):
    """A context manager that allows only the flash backend, or None if this torch has no way to."""
    return backend_context(torch, "flash")


def time_ms(torch, fn, reps, warmup):
    """Median of `reps` calls of fn, each between its own pair of CUDA events (ms)."""
    for _ in range(warmup):
        fn()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    for s, e in zip(starts, ends):
        s.record()
        fn()
        e.record()
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) for s, e in zip(starts, ends))


def bench_shape(torch, hs, t, b, nh, context, reps, warmup):
    """(fwd_ms, bwd_ms) of one shape under `context` (raises if the backend refuses it)."""
    F = torch.nn.functional
    gen = torch.Generator(device="cuda").manual_seed(1234)

    def rand(shape):
        return torch.randn(shape, device="cuda", dtype=torch.bfloat16, generator=gen)

    q, k, v = (rand((b, nh, t, hs)).requires_grad_() for _ in range(3))
    dout = rand((b, nh, t, hs))
    with context():
        fwd = time_ms(torch, lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True), reps, warmup)
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        bwd = time_ms(torch, lambda: torch.autograd.grad(out, (q, k, v), dout, retain_graph=True), reps, warmup)
    del q, k, v, dout, out
    torch.cuda.empty_cache()
    return fwd, bwd


def warning_as_comment(message, category, filename, lineno, file=None, line=None):
    """torch's warnings as '#' lines on stdout: the log stays one the reader can parse."""
    print(f"# {category.__name__}: {str(message).splitlines()[0][:200]}", flush=True)


def main():
    args = parse_args()
    warnings.showwarning = warning_as_comment
    torch = load_torch()
    flash = flash_context(torch)
    print(f"# sdpa_bench: torch {torch.__version__}, {torch.cuda.get_device_name(0)}; bf16, causal, layout "
          f"(B, NH, T, HS); median of {args.reps} after {args.warmup} warm-up calls; bwd = backward alone "
          f"(autograd.grad with retain_graph=True); ms")
    if flash is None:
        print("# flash backend cannot be forced in this torch: every shape runs on the default backend")
    for hs, t, b, nh in shapes(args.tiny):
        backend, times = "flash", None
        if flash is not None:
            try:
                times = bench_shape(torch, hs, t, b, nh, flash, args.reps, args.warmup)
            except RuntimeError as e:  # flash refused the shape (head size, GPU): say so, use the default
                print(f"# HS={hs} T={t}: flash backend unavailable ({str(e).splitlines()[0][:160]}); "
                      f"default backend")
                torch.cuda.empty_cache()
        if times is None:
            backend = "default"
            try:
                times = bench_shape(torch, hs, t, b, nh, contextlib.nullcontext, args.reps, args.warmup)
            except RuntimeError as e:
                print(f"# HS={hs} T={t}: failed on the default backend too ({str(e).splitlines()[0][:160]})")
                torch.cuda.empty_cache()
                times = (float("nan"), float("nan"))
        print(f"sdpa {hs} {t} {b} {nh} {times[0]:.4f} {times[1]:.4f} {backend}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
